#include "exec/graph_cuts.h"

#include <algorithm>
#include <unordered_map>

#include "exec/program_key.h"

namespace tpu::exec {

// Where to cut a graph that reached its bound: at the last place where the ops that started it
// start again (a loop body's first ops), so that the next graph begins where this one began and
// a loop with no host read becomes the same program run again; at the end when nothing repeats.
// The signatures are computed here, once per cut, not while recording.
size_t repeat_point(const std::vector<OpCall>& calls) {
  size_t n = calls.size();
  size_t window = std::min(kWindow, n / 4);
  if (window == 0) return n;
  std::vector<uint64_t> signatures(n);
  // By ops and ranks: the loop's first iteration may read storages of other lengths than the next
  // ones (an upload with room, exec/padding.h), and the cut must still fall where it starts again.
  for (size_t i = 0; i < n; ++i) signatures[i] = call_signature(calls[i], Signature::Ranks);
  for (size_t i = n - window; i >= n / 4 && i > 0; --i) {
    if (std::equal(signatures.begin(), signatures.begin() + window, signatures.begin() + i)) return i;
  }
  return n;
}

namespace {

// Hashes of every range of a sequence of signatures, each in constant time: equal ranges hash
// equal, and two ranges that differ hash equal with a chance of 2^-64, which would cost a cut
// where no loop is (never a wrong value).
class RangeHashes {
 public:
  explicit RangeHashes(const std::vector<uint64_t>& values) : prefix_(values.size() + 1), powers_(values.size() + 1) {
    powers_[0] = 1;
    for (size_t k = 0; k < values.size(); ++k) {
      prefix_[k + 1] = prefix_[k] * kBase + values[k];
      powers_[k + 1] = powers_[k] * kBase;
    }
  }
  uint64_t of(size_t start, size_t length) const {
    return prefix_[start + length] - prefix_[start] * powers_[length];
  }

 private:
  static constexpr uint64_t kBase = 0x9e3779b97f4a7c15ull;  // odd: every power is invertible
  std::vector<uint64_t> prefix_, powers_;
};

}  // namespace

// A loop with no host read whose sizes grow (a generation loop) is cut into one graph per
// iteration, each of which runs padded at its bucket's sizes: the same few programs serve the
// whole loop, and no graph waits for a bound. Its iterations differ in sizes only: the first ops
// of the graph occur again later with the same bucketed signatures but other sizes. (A
// training step's layers repeat with equal sizes and are not cut.) The loop's first iteration may
// differ from the next ones (a prompt's prefill before the decode steps), so the repeat may start
// anywhere: returns where the first repeating iteration starts and its length, or {0, 0}.
std::pair<size_t, size_t> growing_loop(const std::vector<OpCall>& calls, LoopSignatures& signatures) {
  size_t n = calls.size();
  if (n < 2 * kWindow) return {0, 0};
  // Each call's signatures once, as the graph grows: the graph is probed at every power of two.
  for (size_t i = signatures.bucketed.size(); i < n; ++i) {
    LoopSignature signature = call_signatures(calls[i]);
    signatures.bucketed.push_back(signature.bucketed);
    signatures.sizes.push_back(signature.sizes);
  }
  // Iterations of such a loop hold one call at two sizes in one bucket; a graph in which no
  // bucketed signature comes with two sizes (an op repeated at one size, a model's layers at one
  // length) holds none, and the search below, quadratic in the places a window recurs, is skipped.
  std::unordered_map<uint64_t, uint64_t> sizes_of_bucketed;
  bool some_call_changes_size = false;
  for (size_t i = 0; i < n && !some_call_changes_size; ++i) {
    auto [it, inserted] = sizes_of_bucketed.emplace(signatures.bucketed[i], signatures.sizes[i]);
    some_call_changes_size = !inserted && it->second != signatures.sizes[i];
  }
  if (!some_call_changes_size) return {0, 0};
  RangeHashes bucketed(signatures.bucketed), sizes(signatures.sizes);
  // A period holds when a whole iteration repeats (a layer of a model repeats a window, not the
  // step), the second one differing in some size: two layers of a model at one length repeat
  // with equal sizes, though what they read may sit in storages of other lengths.
  auto repeats = [&](size_t start, size_t period) {
    if (start + 2 * period > n) return false;
    return bucketed.of(start, period) == bucketed.of(start + period, period) &&
           sizes.of(start, period) != sizes.of(start + period, period);
  };
  std::unordered_map<uint64_t, std::vector<size_t>> seen;  // bucketed window -> where it occurs
  for (size_t i = 0; i + kWindow <= n; ++i) {
    std::vector<size_t>& at = seen[bucketed.of(i, kWindow)];
    for (size_t start : at) {
      if (i - start >= kWindow && repeats(start, i - start)) return {start, i - start};
    }
    at.push_back(i);
  }
  return {0, 0};
}

// Whether calls[period, period + kWindow) begin the loop's next iteration (in the next bucket,
// maybe: the ops and their ranks are what make the loop).
bool next_iteration_starts(const std::vector<OpCall>& calls, size_t period) {
  if (calls.size() < period + kWindow) return false;
  for (size_t k = 0; k < kWindow; ++k) {
    if (call_signature(calls[k], Signature::Ranks) != call_signature(calls[period + k], Signature::Ranks)) return false;
  }
  return true;
}

}  // namespace tpu::exec
