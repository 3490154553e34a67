#include "exec/padding.h"
#include "exec/storage_state.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "cache/stable_hash.h"
#include "exec/program_key.h"
#include "exec/word_hash.h"
#include "lowering/padding_rules.h"
#include "lowering/view_access.h"

namespace tpu::exec {

namespace {

// A size whose new values came by one step this many times in a row grows: results with it get
// their bucket's room.
constexpr int64_t kGrowingValues = 3;
constexpr size_t kValuesKept = 64;  // per size: past this many, any other value counts as new
// A size that has taken this many values keeps changing for good, even where it takes one it took
// before (a second epoch over the same lengths).
constexpr int64_t kAlwaysChanging = 16;

// What one size of an op (a position in sizes_of) has taken.
struct SizeHistory {
  Dims seen;                // its values, in the order first seen (up to kValuesKept)
  int64_t last = 0;         // its value at the latest call
  int64_t step = 0;         // from the value first seen before the latest one to that one
  int64_t equal_steps = 0;  // how many new values in a row came by that same step
  bool grows = false;       // its new values came by one step kGrowingValues times in a row
};

struct History {
  std::vector<SizeHistory> sizes;  // per size (views' sizes and strides, then results' sizes)
  int failures = 0;
  bool declined = false;
};

struct PaddedKey {
  uint64_t first_exact = 0;
  bool varied = false;
  bool failed = false;  // its program could not be built or compiled
};

// What graphs of a given structure (their ops, dtypes and ranks, not their sizes) have met: up to
// kSizesThatKeepChanging exact keys, and the buckets they ran padded in. A graph's first sizes
// note no key (each call of a fused graph has a history of its own, which its first sizes start),
// so two keys are three sizes.
constexpr size_t kSizesThatKeepChanging = 2;
struct Structure {
  std::vector<uint64_t> exact_keys;
  std::vector<uint64_t> buckets;
};

std::mutex g_mutex;
std::unordered_map<uint64_t, History> g_history;  // by history_key
std::unordered_map<uint64_t, PaddedKey> g_padded_keys;
std::unordered_map<uint64_t, Structure> g_structures;
PaddingCounters g_counters;
constexpr size_t kMaxEntries = 1 << 16;  // a bound on memory, never reached by a real model

// The thread's buffers for what every op computes here. Reached through a call the compiler does
// not inline, which it then keeps in a register: a thread_local named in a shared library's code
// is looked up (__tls_get_addr) again after every call, dozens of times per op.
struct Scratch {
  std::string text;
  Dims sizes;
  std::vector<bool> varied, growing;
};
[[gnu::noinline]] Scratch& scratch() {
  thread_local Scratch buffers;
  return buffers;
}

// A hash of the op, its arguments except sizes, and the dtype and rank of each tensor. Every op
// comes here: tensors and the common arguments are hashed a word each; the rest (ints, lists,
// strings) as text built in a buffer the thread keeps, not allocated per call.
uint64_t history_key(const OpCall& call) {
  using Kind = lowering::Arg::Kind;
  WordHash hash;
  hash.add(call.name);
  hash.add(call.overload);
  std::string* text = nullptr;
  for (const auto& arg : call.args) {
    switch (arg.kind) {
      case Kind::Tensor:
      case Kind::None:
        hash.add(static_cast<uint64_t>(arg.kind));
        break;
      case Kind::Number:
        hash.add(static_cast<uint64_t>(arg.kind) | static_cast<uint64_t>(call.numbers[arg.slot].dtype) << 8 |
                 uint64_t{arg.weak} << 16);
        break;
      case Kind::TensorList:
        hash.add(static_cast<uint64_t>(arg.kind) | arg.slots.size() << 8);
        for (int32_t slot : arg.slots) hash.add(slot < 0);
        break;
      default:
        hash.add(static_cast<uint64_t>(arg.kind));  // where it sits among the others; its value goes to `text`
        if (!text) {
          text = &scratch().text;
          text->clear();
        }
        KeyBytes bytes(*text);
        bytes.add_char(static_cast<char>(arg.kind));
        append_static_argument(bytes, arg, call, /*list_values=*/false);
    }
  }
  if (text) hash.add(*text);
  for_each_view(call, [&](const TensorView& view, int32_t) {
    hash.add(static_cast<uint64_t>(view.dtype) | view.layout.sizes.size() << 8);
  });
  constexpr uint64_t kResult = uint64_t{1} << 31;  // a result's word, apart from a view's
  for (const auto& output : call.outputs) {
    hash.add(static_cast<uint64_t>(output.dtype) | output.dims.size() << 8 | kResult);
  }
  return hash.value();
}

// Adds `sizes` to the values `h` has seen; per size, whether it has taken another value before
// (`varied`), and whether it grows (`growing`). A size grows when its new values keep coming by
// one step (a sequence that grows by a token, or a chunk, per iteration) or when it has taken
// many values. The sizes of an op's call sites (a model's layers of different widths, its
// weights met one after another in the first optimizer step) are new values too, but at steps
// that differ. False when none has varied.
bool note_sizes(History& h, const Dims& sizes, std::vector<bool>& varied, std::vector<bool>& growing) {
  if (h.sizes.size() != sizes.size()) return false;
  // Most calls of most ops: no size has ever taken a second value, and none does now.
  size_t settled = 0;
  while (settled < sizes.size() && sizes[settled] == h.sizes[settled].last && h.sizes[settled].seen.size() == 1) {
    ++settled;
  }
  if (settled == sizes.size()) return false;
  bool any = false;
  varied.resize(sizes.size());
  growing.resize(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    SizeHistory& size = h.sizes[i];
    bool is_new = sizes[i] != size.last &&
                  std::find(size.seen.begin(), size.seen.end(), sizes[i]) == size.seen.end();
    if (is_new) {
      int64_t step = sizes[i] - size.seen.back();
      size.equal_steps = step > 0 && step == size.step ? size.equal_steps + 1 : 1;
      size.step = step;
      if (size.seen.size() < kValuesKept) size.seen.push_back(sizes[i]);
    }
    size.last = sizes[i];
    int64_t distinct = static_cast<int64_t>(size.seen.size());
    varied[i] = distinct > 1;
    size.grows |= size.equal_steps + 1 >= kGrowingValues;
    // Every call at the newest value grows, not only the first: a loop's body meets it at each layer.
    growing[i] = (size.grows && sizes[i] == size.seen.back()) || distinct >= kAlwaysChanging;
    any |= varied[i];
  }
  return any;
}

// The history of an op's first call.
History first_history(const Dims& sizes) {
  History h;
  h.sizes.resize(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) h.sizes[i] = {{sizes[i]}, sizes[i], 0, 0, false};
  return h;
}

// Each view's sizes and strides, then each result's sizes, into `sizes`.
void sizes_of(const OpCall& call, Dims& sizes) {
  sizes.clear();
  // push_back into the kept capacity: cheaper than a range insert for the few dims of a view
  for_each_view(call, [&](const TensorView& view, int32_t) {
    for (int64_t d : view.layout.sizes) sizes.push_back(d);
    for (int64_t d : view.layout.strides) sizes.push_back(d);
  });
  for (const auto& output : call.outputs) {
    for (int64_t d : output.dims) sizes.push_back(d);
  }
}

// The dims of `sizes` (starting at `at` in the history) that are padded, and their bucket sizes.
// `above` (per size, like `varied`): the sizes that take the bucket above their own
// (bucket_size(n + 1)), which differs from it only for a size that fills its bucket.
uint64_t padded_dims(const Dims& sizes, const std::vector<bool>& varied, size_t at, Dims& bucket,
                     const std::vector<bool>* above = nullptr) {
  uint64_t padded = 0;
  bucket = sizes;
  for (size_t d = 0; d < sizes.size() && d < 64; ++d) {
    if (!varied[at + d] || sizes[d] <= 1) continue;
    padded |= uint64_t{1} << d;
    bucket[d] = bucket_size(above && (*above)[at + d] ? sizes[d] + 1 : sizes[d]);
  }
  return padded;
}

// A fresh result covers its storage densely, in any dim order (a result laid out like a
// transposed input): then its bucket's sizes fit in the bucket's element count.
bool covers_whole_storage(const TensorView& view) {
  return view.layout.offset == 0 && numel(view.layout.sizes) * itemsize(view.dtype) == view.storage->nbytes;
}

// See PaddingPlan::view_prefix. Only views from the storage's start qualify: the key holds that,
// while a runtime offset could move another view of the same key past the room. A written view
// must also end where its storage's bytes end, so that what its padding writes lands in the room.
bool is_prefix(const TensorView& view, uint64_t padded, const Dims& bucket, bool written) {
  if (padded == 0 || (padded & (padded - 1)) != 0 || view.layout.offset != 0 ||
      !lowering::is_contiguous(view.layout)) {
    return false;
  }
  for (size_t d = 0; d < view.layout.sizes.size() && !(padded >> d & 1); ++d) {
    if (view.layout.sizes[d] != 1) return false;
  }
  const Storage& s = *view.storage;
  const StorageState& state = state_of(s);
  int64_t item = itemsize(view.dtype);
  if (state.dtype != view.dtype && state.buffer) return false;
  if (numel(bucket) * item > s.value_bytes()) return false;
  return !written || numel(view.layout.sizes) * item == s.nbytes;
}

// The view's strides where they do not vary with the padded sizes (its history's stride
// positions never varied, for every dim larger than 1 in its bucket) and its bucket lies inside its
// storage from its offset: it is then accessed as a range. Empty otherwise.
Dims window_strides(const TensorView& view, const Dims& bucket, const std::vector<bool>& varied, size_t at,
                    bool written) {
  size_t rank = view.layout.sizes.size();
  Dims strides(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    if (bucket[d] == 1) continue;
    if (varied[at + rank + d]) return {};
    strides[d] = view.layout.strides[d];
  }
  const Storage& s = *view.storage;
  if (state_of(s).buffer && state_of(s).dtype != view.dtype) return {};
  if (!lowering::fits_window(bucket, strides, view.layout.offset, s.length_as(view.dtype), written)) return {};
  return strides;
}

// A view that is the whole of a storage whose length is fixed (a weight): its sizes come with the
// storage's length, which the program's key holds anyway, so padding them brings no reuse.
// `seen_in_graph`: the storages that the graph's calls before this one touch, when the graph is
// planned again at its flush (every storage has its place in the graph's set by then); null while
// it records, where a place in the set tells the same.
bool sized_by_storage(const TensorView& view, const std::unordered_set<const Storage*>* seen_in_graph) {
  const StorageState& s = state_of(*view.storage);
  bool known = seen_in_graph ? seen_in_graph->count(view.storage.get()) != 0 : s.set_epoch != 0;
  return !s.sized_to_bucket && covers_whole_storage(view) && (s.buffer || known || s.exact_length);
}

// The call's plan at bucket sizes, or null when padding_rules says padding could reach a result
// (or nothing would be padded). Views sized by their storage keep their exact layout: their dims
// vary only because sites of the op take weights of different sizes.
std::shared_ptr<PaddingPlan> make_plan(const OpCall& call, const std::vector<bool>& varied,
                                      const std::vector<bool>& growing, bool above = false,
                                      const std::unordered_set<const Storage*>* seen_in_graph = nullptr) {
  // Calls `visit(view, arg, at)` for each operand view in args order (`at`: where its sizes start
  // in the history), then for each destination (arg -1).
  auto for_each_placeable = [&](auto&& visit) {
    size_t at = 0;
    auto next = [&](const TensorView& view, int32_t arg) {
      visit(view, arg, at);
      at += 2 * view.layout.sizes.size();
    };
    for (size_t i = 0; i < call.args.size(); ++i) {
      const auto& arg = call.args[i];
      if (arg.kind == lowering::Arg::Kind::Tensor) {
        next(call.inputs[arg.slot], static_cast<int32_t>(i));
      } else if (arg.kind == lowering::Arg::Kind::TensorList) {
        for (int32_t slot : arg.slots) {
          if (slot >= 0) next(call.inputs[slot], static_cast<int32_t>(i));
        }
      }
    }
    for (size_t i = 0; i < call.outputs.size() && i < call.destinations.size(); ++i) {
      if (call.destinations[i].storage) next(call.destinations[i], -1);
    }
    return at;
  };

  // A dim pads where its own position in the op's history varied: dims that must agree (an
  // elementwise op's aligned dims, a contraction's) take the same values at every call, so they
  // vary together, and a dim that merely equals a padded size at this call (a length that reached
  // the head width) stays exact. Two exceptions keep the operands consistent with what the op
  // computes. A size that an operand sized by its storage has stays exact in the others: a
  // matmul's inner dim, which varies between sites taking weights of different widths, must match
  // the weight, and an intermediate without room holds the growing size at its own exact length;
  // only a growing size that met a weight's constant width by chance still pads. And a result's
  // dim pads only where it has one of the operands' padded sizes (its columns, from a weight, vary
  // between sites but are not padded). Ops that size their results themselves (cat, a factory)
  // follow their history.
  Dims fixed_varying, fixed_constant;
  for_each_placeable([&](const TensorView& view, int32_t arg, size_t at) {
    if (arg < 0 || !sized_by_storage(view, seen_in_graph)) return;
    for (size_t d = 0; d < view.layout.sizes.size(); ++d) {
      (varied[at + d] ? fixed_varying : fixed_constant).push_back(view.layout.sizes[d]);
    }
  });
  auto has = [](const Dims& sizes, int64_t size) { return std::find(sizes.begin(), sizes.end(), size) != sizes.end(); };
  auto operand_dims = [&](const Dims& sizes, size_t at, Dims& bucket) {
    uint64_t padded = padded_dims(sizes, varied, at, bucket, above ? &growing : nullptr);
    for (size_t d = 0; d < sizes.size() && d < 64; ++d) {
      bool fixed = has(fixed_varying, sizes[d]) || (has(fixed_constant, sizes[d]) && !growing[at + d]);
      if ((padded >> d & 1) && fixed) {
        padded &= ~(uint64_t{1} << d);
        bucket[d] = sizes[d];
      }
    }
    return padded;
  };
  Dims padded_sizes;
  for_each_placeable([&](const TensorView& view, int32_t arg, size_t at) {
    if (arg < 0 || sized_by_storage(view, seen_in_graph)) return;
    Dims bucket;
    uint64_t padded = operand_dims(view.layout.sizes, at, bucket);
    for (size_t d = 0; d < view.layout.sizes.size() && d < 64; ++d) {
      if (padded >> d & 1) padded_sizes.push_back(view.layout.sizes[d]);
    }
  });
  bool results_follow_operands = !lowering::pads_results_itself(call.name) && !call.inputs.empty();
  auto dims_of = [&](const Dims& sizes, size_t at, bool result, Dims& bucket) {
    if (!result) return operand_dims(sizes, at, bucket);
    uint64_t padded = padded_dims(sizes, varied, at, bucket, above ? &growing : nullptr);
    if (!results_follow_operands) return padded;
    for (size_t d = 0; d < sizes.size() && d < 64; ++d) {
      if ((padded >> d & 1) && !has(padded_sizes, sizes[d])) {
        padded &= ~(uint64_t{1} << d);
        bucket[d] = sizes[d];
      }
    }
    return padded;
  };

  auto plan = std::make_shared<PaddingPlan>();
  plan->varied = varied;
  plan->growing = growing;
  std::vector<std::vector<lowering::PaddedOperand>> operands(call.args.size());
  std::vector<int32_t> arg_of_view;
  bool any_placed = false;
  size_t at = for_each_placeable([&](const TensorView& view, int32_t arg, size_t at) {
    Dims bucket;
    size_t rank = view.layout.sizes.size();
    uint64_t padded = dims_of(view.layout.sizes, at, arg < 0, bucket);
    bool strides_vary = false;
    for (size_t d = 0; d < rank; ++d) strides_vary |= varied[at + rank + d];
    if (sized_by_storage(view, seen_in_graph)) {
      padded = 0;
      bucket = view.layout.sizes;
      strides_vary = false;
    }
    plan->view_placed.push_back(padded != 0 || strides_vary);
    plan->view_prefix.push_back(is_prefix(view, padded, bucket, arg < 0));
    bool ranged = plan->view_placed.back() && !plan->view_prefix.back();
    plan->view_window_strides.push_back(ranged ? window_strides(view, bucket, varied, at, arg < 0) : Dims{});
    any_placed |= plan->view_placed.back();
    plan->view_sizes.push_back(bucket);
    plan->view_padded.push_back(padded);
    if (arg >= 0) operands[arg].push_back({static_cast<int64_t>(rank), padded});
    arg_of_view.push_back(arg);
  });
  for (size_t i = 0; i < call.args.size(); ++i) {
    const auto& arg = call.args[i];
    if (arg.kind != lowering::Arg::Kind::TensorList) continue;
    for (int32_t slot : arg.slots) {
      if (slot < 0) operands[i].push_back({0, 0});
    }
  }
  for (const auto& output : call.outputs) {
    Dims bucket;
    dims_of(output.dims, at, /*result=*/true, bucket);
    at += output.dims.size();
    plan->output_dims.push_back(bucket);
  }
  if (!any_placed) return nullptr;
  auto fills = lowering::padding_fills(call.name, call.args, operands);
  if (!fills) return nullptr;
  for (int32_t arg : arg_of_view) {
    plan->view_fills.push_back(arg >= 0 ? (*fills)[arg] : std::numeric_limits<double>::quiet_NaN());
  }
  return plan;
}

// Whether `view` read at `bucket` sizes, with its own strides from its own offset, stays inside its
// storage's value.
bool fits_storage(const TensorView& view, const Dims& bucket) {
  int64_t end = view.layout.offset + 1;
  for (size_t d = 0; d < bucket.size(); ++d) {
    if (bucket[d] == 0) return true;
    if (view.layout.strides[d] < 0) return false;
    end += (bucket[d] - 1) * view.layout.strides[d];
  }
  return view.layout.offset >= 0 && end <= view.storage->length_as(view.dtype);
}

// Whether some growing size the call pads fills its bucket (a power of two): only there does
// the bucket above differ from its own.
bool fills_a_bucket(const OpCall& call) {
  const PaddingPlan& plan = *call.padding;
  size_t at = 0;
  bool fills = false;
  auto visit = [&](const Dims& sizes) {
    for (size_t d = 0; d < sizes.size(); ++d) {
      int64_t n = sizes[d];
      fills |= plan.varied[at + d] && plan.growing[at + d] && n > 1 && (n & (n - 1)) == 0;
    }
  };
  for_each_view(call, [&](const TensorView& view, int32_t) {
    visit(view.layout.sizes);
    at += 2 * view.layout.sizes.size();
  });
  for (const auto& output : call.outputs) {
    visit(output.dims);
    at += output.dims.size();
  }
  return fills;
}

}  // namespace

void BucketAbove::undo(std::vector<OpCall>& calls) {
  for (auto it = rooms.rbegin(); it != rooms.rend(); ++it) give_room(*it->first, it->second);
  for (size_t i = 0; i < plans.size() && i < calls.size(); ++i) {
    if (plans[i]) calls[i].padding = plans[i];
  }
  rooms.clear();
  plans.clear();
}

bool take_bucket_above(std::vector<OpCall>& calls, BucketAbove& changed) {
  changed = {};
  // Checked first: a graph in the middle of its bucket (every training step of a loop over many
  // lengths, but for one per bucket) is not planned again for nothing.
  if (std::none_of(calls.begin(), calls.end(), [](const OpCall& c) { return c.padding && fills_a_bucket(c); })) {
    return false;
  }
  // The fresh results' room first, for their readers' plans to see it.
  for (const OpCall& call : calls) {
    if (!call.padding) continue;
    size_t at = 0;
    for_each_view(call, [&](const TensorView& view, int32_t slot) {
      Storage& storage = *view.storage;
      StorageState& s = state_of(storage);
      Dims bucket;
      if (slot < 0 && s.grows && s.sized_to_bucket && !s.buffer && covers_whole_storage(view) &&
          padded_dims(view.layout.sizes, call.padding->varied, at, bucket, &call.padding->growing)) {
        int64_t spare = numel(bucket) * itemsize(view.dtype) - storage.nbytes;
        if (spare > s.spare_bytes) {
          changed.rooms.emplace_back(&storage, room_of(storage));
          s.spare_bytes = spare;
        }
      }
      at += 2 * view.layout.sizes.size();
    });
  }
  std::unordered_set<const Storage*> seen;
  std::vector<std::shared_ptr<const PaddingPlan>> above(calls.size());
  bool differs = false, reads_room = false, fits = true;
  for (size_t i = 0; i < calls.size() && fits; ++i) {
    const OpCall& call = calls[i];
    if (call.padding) {
      auto plan = make_plan(call, call.padding->varied, call.padding->growing, /*above=*/true, &seen);
      if (!plan) {
        fits = false;
        break;
      }
      differs |= plan->view_sizes != call.padding->view_sizes;
      size_t index = 0;
      for_each_view(call, [&](const TensorView& view, int32_t slot) {
        size_t v = index++;
        const StorageState& s = state_of(*view.storage);
        // A value from before the graph must hold the bucket above as it is.
        if (slot < 0 || !plan->view_placed[v] || !s.buffer) return;
        fits = fits && fits_storage(view, plan->view_sizes[v]);
        reads_room |= s.spare_bytes > 0;
      });
      above[i] = std::move(plan);
    }
    for_each_view(call, [&](const TensorView& view, int32_t) { seen.insert(view.storage.get()); });
  }
  changed.plans.resize(calls.size());
  if (!(fits && differs && reads_room)) {
    changed.undo(calls);
    return false;
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!above[i]) continue;
    changed.plans[i] = calls[i].padding;
    calls[i].padding = std::move(above[i]);
  }
  return true;
}

bool takes_growing_operands(const OpCall& call) {
  for (const auto& view : call.inputs) {
    if (state_of(*view.storage).grows) return true;
  }
  return false;
}

int64_t bucket_size(int64_t n) {
  int64_t b = 1;
  while (b < n) b <<= 1;
  return b;
}

bool buckets_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("TORCH_TPU_SHAPE_BUCKETS");
    return !(value && std::string(value) == "0");
  }();
  return enabled;
}

uint64_t padding_site(uint64_t graph, uint64_t index) {
  uint64_t parts[2] = {graph, index};
  return cache::fnv1a64(parts, sizeof parts) | 1;
}

uint64_t plan_padding(OpCall& call, bool sizes_vary, uint64_t site) {
  if (!buckets_enabled()) return 0;
  uint64_t key = history_key(call);
  if (site) key = cache::fnv1a64(&site, sizeof site, key);
  // Every op comes here: the buffers are the thread's, not allocated per call.
  Scratch& buffers = scratch();
  Dims& sizes = buffers.sizes;
  std::vector<bool>& varied = buffers.varied;
  std::vector<bool>& growing = buffers.growing;
  sizes_of(call, sizes);
  bool declined = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_history.size() > kMaxEntries) g_history.clear();
    auto [it, inserted] = g_history.try_emplace(key);
    History& h = it->second;
    if (inserted) {
      h = first_history(sizes);
      return key;
    }
    if (!note_sizes(h, sizes, varied, growing)) return key;
    declined = h.declined;
  }
  if (sizes_vary) {
    // A size that met a weight's constant width (a length equal to the rotary table's) still pads.
    for (size_t i = 0; i < varied.size(); ++i) growing[i] = growing[i] || varied[i];
  }

  // A fresh result gets its bucket's room before any program fixes its length, whether or not this
  // call can pad, so that the ops after it can: when its sizes keep growing, or when the call
  // already takes operands sized to their buckets. Sizes that differ only between a few call
  // sites (weights of different widths) give no room: a model whose shapes never change keeps
  // its memory.
  bool roomy_inputs = takes_growing_operands(call);
  size_t at = 0;
  for_each_view(call, [&](const TensorView& view, int32_t slot) {
    size_t rank = view.layout.sizes.size();
    Storage& storage = *view.storage;
    StorageState& s = state_of(storage);
    Dims bucket;
    bool grows_here = false;
    for (size_t d = 0; d < rank; ++d) grows_here |= growing[at + d] && view.layout.sizes[d] > 1;
    if (slot < 0 && (roomy_inputs || grows_here) && padded_dims(view.layout.sizes, varied, at, bucket) &&
        !s.buffer && s.set_epoch == 0 && !s.sized_to_bucket && !s.exact_length && covers_whole_storage(view)) {
      s.spare_bytes = numel(bucket) * itemsize(view.dtype) - storage.nbytes;
      s.sized_to_bucket = true;
      s.grows = true;
    }
    at += 2 * rank;
  });
  if (declined || call.lowering == nullptr || call.lowering->random) return key;
  auto plan = make_plan(call, varied, growing);
  if (plan) plan->history = key;
  call.padding = std::move(plan);
  return key;
}

int64_t upload_spare_bytes(DType dtype, const Dims& sizes) {
  // Only small tensors get room (a batch of token ids; a model's small weights too, whose sizes
  // differ as well: what that costs stays small).
  constexpr int64_t kMaxRoomyUploadBytes = 1 << 20;
  if (!buckets_enabled() || numel(sizes) == 0 || numel(sizes) * itemsize(dtype) > kMaxRoomyUploadBytes) return -1;
  std::string key = "\x01upload";
  key.push_back(static_cast<char>(dtype));
  key.push_back(static_cast<char>(sizes.size()));
  std::vector<bool> varied, growing;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto [it, inserted] = g_history.try_emplace(cache::fnv1a64(key));
    History& h = it->second;
    if (inserted) {
      h = first_history(sizes);
      return -1;
    }
    if (!note_sizes(h, sizes, varied, growing)) return -1;
  }
  if (std::none_of(growing.begin(), growing.end(), [](bool g) { return g; })) return -1;
  Dims bucket;
  if (padded_dims(sizes, varied, 0, bucket) == 0) return -1;
  return (numel(bucket) - numel(sizes)) * itemsize(dtype);
}

bool prefer_padded(const std::string& padded_key, const std::string& exact_key, bool growing, uint64_t structure,
                   uint64_t buckets) {
  uint64_t exact = cache::fnv1a64(exact_key);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_padded_keys.size() > kMaxEntries) g_padded_keys.clear();
  if (g_structures.size() > kMaxEntries) g_structures.clear();
  auto [it, inserted] = g_padded_keys.try_emplace(cache::fnv1a64(padded_key));
  if (inserted) {
    it->second.first_exact = exact;
  } else if (it->second.first_exact != exact) {
    it->second.varied = true;
  }
  if (structure != 0) {
    // A graph whose sizes have kept changing (a training loop over many lengths) pads a bucket it
    // has not met yet at once, rather than compile an exact program first that it will not reuse.
    // A bucket it has met under another padded key (its operands' room differs: token ids of a
    // bucket's own length, sliced from an upload one longer) keeps the rule above: that key is
    // rarely met again, and its exact program compiles several times faster.
    Structure& met = g_structures[structure];
    bool new_bucket = std::find(met.buckets.begin(), met.buckets.end(), buckets) == met.buckets.end();
    if (met.exact_keys.size() >= kSizesThatKeepChanging) {
      if (new_bucket) it->second.varied = true;
    } else if (std::find(met.exact_keys.begin(), met.exact_keys.end(), exact) == met.exact_keys.end()) {
      met.exact_keys.push_back(exact);
    }
    if (new_bucket && it->second.varied && met.buckets.size() < 64) met.buckets.push_back(buckets);
  }
  // `growing` decides this launch only: a model that pads while its first step creates values of
  // many sizes runs its own exact programs from then on.
  bool padded = !it->second.failed && (growing || it->second.varied);
  if (padded) ++g_counters.padded_launches;
  return padded;
}

void decline_padding(const OpCall& call) {
  // A few failures may come from operands of equal sizes of which only some could pad; an op that
  // keeps failing runs at exact sizes from then on.
  constexpr int kFailuresTolerated = 3;
  std::lock_guard<std::mutex> lock(g_mutex);
  ++g_counters.declined;
  auto it = g_history.find(call.padding && call.padding->history ? call.padding->history : history_key(call));
  if (it != g_history.end() && ++it->second.failures > kFailuresTolerated) it->second.declined = true;
}

void decline_padded_key(const std::string& padded_key) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_padded_keys[cache::fnv1a64(padded_key)].failed = true;
}

void forget_shape_history() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_history.clear();
  g_padded_keys.clear();
  g_structures.clear();
}

void reset_padding_counters() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_counters = {};
}

PaddingCounters padding_counters() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_counters;
}

}  // namespace tpu::exec
