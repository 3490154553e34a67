// The key of a program: everything that shapes it, nothing that is a runtime value.
#pragma once

#include <atomic>
#include <unordered_map>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/key_bytes.h"

namespace tpu::exec {

// The distinct storages a program touches, in first-seen order: they become its parameters.
// Positions are stamped on the storages themselves (under the executor's lock), so finding a
// storage costs O(1) however large a fused graph grows.
class StorageSet {
 public:
  StorageSet();
  int32_t index(Storage* s);
  int32_t find(const Storage* s) const;  // -1 when absent
  const std::vector<Storage*>& items() const { return items_; }
  size_t size() const { return items_.size(); }

 private:
  uint64_t epoch_;
  std::vector<Storage*> items_;
};

// Appends the call's structure: op, argument kinds and static values, dtypes of numbers, and
// for every tensor its layout and its storage's position and state in `storages`. A view's offset
// is in the key only where it is a constant of the program (lowering::offset_is_runtime); the
// others are appended to `offsets`, in for_each_view's order: the program's runtime arguments.
// When the call runs padded (call.padded), each padded view is keyed by its bucket and appends its
// offset, sizes and strides instead.
void append_call_key(std::string& key, const OpCall& call, StorageSet& storages, std::vector<int64_t>& offsets);

// Within a program of padded calls, a view read exactly as a padded call wrote it takes the written
// value itself, at bucket sizes (no scatter into the storage and gather back). The key says where;
// the program builder decides alike. Tracks, per storage, the view its last padded write wrote.
class PaddedWrites {
 public:
  // Whether reading `view` at bucket sizes `bucket` takes the value of the last padded write.
  bool forwards(const TensorView& view, const Dims& bucket) const;
  // After a write of `view`: padded at bucket sizes `bucket` (its value can be forwarded), or not
  // padded (null).
  void wrote(const TensorView& view, const Dims* bucket);

 private:
  struct Written {
    TensorView view;
    Dims bucket;
  };
  std::unordered_map<const Storage*, Written> last_;
};

// The key of padded calls (each call.padded), tracking their writes in `writes`.
void append_padded_call_key(std::string& key, const OpCall& call, StorageSet& storages, std::vector<int64_t>& offsets,
                            PaddedWrites& writes);

// Appends what an argument other than a tensor contributes to a key: its value, except for a
// Number (a runtime value: only its dtype) and, unless `list_values`, an IntList (only its length:
// an op's history of sizes, exec/padding.cpp, must not tell sizes given as a list apart).
void append_static_argument(KeyBytes& key, const lowering::Arg& arg, const OpCall& call, bool list_values);

// A hash of the call's structure that does not depend on where its storages sit in a program:
// the same op on the same shapes in two iterations of a loop has the same signature. Bucketed:
// with its storages' lengths, its views' sizes and strides each at its bucket (exec/padding.h),
// so that two iterations of a loop whose sizes grow within one bucket have the same signature
// too, whether or not their calls have a padding plan yet (each call of a fused graph has a
// history of its own, so a loop's iterations within one graph have none); Sizes: with its views' sizes only (two layers of one model may read storages of
// other lengths, some with their bucket's room, though no size differs); Ranks: with no sizes at
// all, so that iterations match across buckets.
enum class Signature : uint8_t { Sizes, Bucketed, Ranks };
uint64_t call_signature(const OpCall& call, Signature kind);
// The Bucketed and Sizes signatures of a call together.
struct LoopSignature {
  uint64_t bucketed = 0, sizes = 0;
};
LoopSignature call_signatures(const OpCall& call);

// Whether the program reading or writing `view` takes its offset at run time.
bool runtime_offset(const TensorView& view);

// Visits the call's views in the order the key lists them: the tensors of its arguments (`slot` is
// the input slot), then its destinations (`slot` is -1 - the destination's index).
template <typename Visit>
void for_each_view(const OpCall& call, Visit&& visit) {
  for (const auto& arg : call.args) {
    if (arg.kind == lowering::Arg::Kind::Tensor) {
      visit(call.inputs[arg.slot], arg.slot);
    } else if (arg.kind == lowering::Arg::Kind::TensorList) {
      for (int32_t slot : arg.slots) {
        if (slot >= 0) visit(call.inputs[slot], slot);
      }
    }
  }
  for (size_t i = 0; i < call.outputs.size() && i < call.destinations.size(); ++i) {
    if (call.destinations[i].storage) visit(call.destinations[i], -1 - static_cast<int32_t>(i));
  }
}

}  // namespace tpu::exec
