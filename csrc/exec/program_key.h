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
// for every tensor its layout and its storage's position and state in `storages`.
void append_call_key(std::string& key, const OpCall& call, StorageSet& storages);

}  // namespace tpu::exec
