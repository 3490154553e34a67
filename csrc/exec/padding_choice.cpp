#include "exec/padding_choice.h"

#include "cache/program_cache.h"
#include "cache/stable_hash.h"
#include "exec/padding.h"
#include "exec/program_builder.h"
#include "exec/storage_state.h"

namespace tpu::exec {

namespace {

// A fused graph's structure: its calls without their sizes (their ops, dtypes and ranks). 0 for
// one op, whose programs keep the rule of their padded key alone (sites of different widths must
// keep their exact programs), and for a graph that takes values a graph before it grew (a
// generation step): its first steps in a bucket see those values' room change, and their padded
// keys would not be met again.
uint64_t structure_of(const std::vector<OpCall>& calls) {
  if (calls.size() < 2) return 0;
  for (const OpCall& call : calls) {
    for (const TensorView& view : call.inputs) {
      const StorageState& state = state_of(*view.storage);
      if (state.grows && state.buffer != nullptr) return 0;
    }
  }
  uint64_t structure = cache::kFnvOffsetBasis;
  for (const OpCall& call : calls) {
    uint64_t signature = call_signature(call, Signature::Ranks);
    structure = cache::fnv1a64(&signature, sizeof signature, structure);
  }
  return structure;
}

// The bucket sizes of the graph's padded views, as its plans have them.
uint64_t buckets_of(const std::vector<OpCall>& calls) {
  uint64_t buckets = cache::kFnvOffsetBasis;
  for (const OpCall& call : calls) {
    if (!call.padding) continue;
    for (const Dims& sizes : call.padding->view_sizes) {
      buckets = cache::fnv1a64(sizes.data(), sizes.size() * sizeof(int64_t), buckets);
    }
  }
  return buckets;
}

}  // namespace

// Chooses between the exact program of `calls` (`key`, `offsets`) and the one that serves their
// buckets (exec/padding.h); for the latter, marks the calls padded and replaces key and offsets.
// `growing`: the calls are an iteration of a loop whose sizes grow, which pads at once.
void choose_padding(std::vector<OpCall>& calls, StorageSet& storages, std::string& key,
                    std::vector<int64_t>& offsets, const KeepSet& keep, bool growing, BucketAbove* above) {
  bool any = false;
  for (const OpCall& call : calls) any |= call.padding != nullptr;
  if (!any || cache::ProgramCache::get().find_in_memory(launch_key(key, storages, keep))) return;
  uint64_t structure = structure_of(calls);
  bool took_above = above && structure != 0 && take_bucket_above(calls, *above);
  std::string padded_key;
  std::vector<int64_t> padded_offsets;
  PaddedWrites writes;
  for (OpCall& call : calls) {
    call.padded = call.padding != nullptr;
    append_padded_call_key(padded_key, call, storages, padded_offsets, writes);
  }
  if (prefer_padded(padded_key, key, growing, structure, structure ? buckets_of(calls) : 0)) {
    key = std::move(padded_key);
    offsets = std::move(padded_offsets);
    return;
  }
  for (OpCall& call : calls) call.padded = false;
  if (took_above) above->undo(calls);
}

// The padded program of `calls` (`padded_key`) failed to build or compile: neither it nor, after
// a few such failures, the op whose padded lowering fails is tried again. The calls are lowered
// again in one program, as the failed build did, so that each reads the padded values of the
// calls before it: the first that throws is the one to blame.
void decline_failed_padding(std::vector<OpCall>& calls, const StorageSet& storages, const std::string& padded_key) {
  decline_padded_key(padded_key);
  ProgramBuilder trial(storages);
  for (const OpCall& call : calls) {
    try {
      trial.lower(call);
    } catch (const std::exception&) {
      if (call.padded) decline_padding(call);
      break;
    }
  }
  for (OpCall& call : calls) call.padded = false;
}

}  // namespace tpu::exec
