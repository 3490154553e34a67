// The compilation cache: programs keyed by everything that shapes them, bounded, LRU.
//
// Every path (per-op eager programs, fused graphs, compiled FX graphs) looks programs up here.
// The key is built by the caller from the op and its operands' layouts, never from runtime
// numbers, so a hit costs one hash lookup and builds no program text.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/runtime.h"

namespace tpu::cache {

// What a compiled program needs besides the executable to be run again.
struct Program {
  runtime::ExecutablePtr executable;
  std::vector<TensorType> output_types;
  std::vector<int32_t> output_storages;  // which of the call's storages each output replaces
  std::vector<DType> output_dtypes;      // the element type each replaced storage gets
};
using ProgramPtr = std::shared_ptr<const Program>;

class ProgramCache {
 public:
  static ProgramCache& get();

  ProgramPtr find(const std::string& key);
  void insert(const std::string& key, ProgramPtr program);
  void clear();
  void set_capacity(size_t entries);
  size_t size() const;

 private:
  using Order = std::list<std::string>;
  struct Slot {
    ProgramPtr program;
    Order::iterator position;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Slot> slots_;
  Order order_;  // most recently used first
  size_t capacity_ = 4096;
};

}  // namespace tpu::cache
