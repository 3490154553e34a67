// The key of a program: everything that shapes it, nothing that is a runtime value.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "exec/executor.h"

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
void append_call_key(std::string& key, const OpCall& call, StorageSet& storages, std::vector<int64_t>& offsets);

// A hash of the call's structure that does not depend on where its storages sit in a program:
// the same op on the same shapes in two iterations of a loop has the same signature.
uint64_t call_signature(const OpCall& call);

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
