// The compilation cache: programs keyed by everything that shapes them, bounded, LRU, in memory
// and in a directory that outlives the process (disk_cache.h).
//
// Every path (per-op eager programs, fused graphs, compiled FX graphs) looks programs up here.
// The key is built by the caller from the op and its operands' layouts, never from runtime
// numbers, so a hit costs one hash lookup and builds no program text.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/runtime.h"

namespace tpu::cache {

// What a compiled program needs besides the executable to be run again. The persistent cache
// stores every field (entry_file.cpp): a new one must be added there too.
struct Program {
  // Where each parameter's buffer comes from, in order: a storage (its index in the program's
  // storage set), a runtime number (its index among all numbers of the recorded calls, in
  // order), the generator state of a random call (its index among the random calls), or the
  // offset of a view into its storage (its index among the offsets append_call_key listed).
  struct Parameter {
    enum class Source : uint8_t { Storage, Number, RngState, Offset };
    Source source;
    int32_t index;
  };
  std::vector<Parameter> parameters;
  runtime::ExecutablePtr executable;
  std::vector<TensorType> output_types;
  std::vector<int32_t> output_storages;  // which of the call's storages each output replaces
  std::vector<DType> output_dtypes;      // the element type each replaced storage gets
  // Present while `executable` is a quick compile (Client::compile_quick): the program's text,
  // kept so that it can be compiled again with full optimisation once its runs have cost more
  // than that compile, and the elements one run produces, the measure of that cost.
  struct QuickTier {
    std::string text;
    int64_t elements_per_run = 0;
    std::atomic<int64_t> elements_run{0};
    std::atomic<bool> upgrade_scheduled{false};
  };
  std::shared_ptr<QuickTier> quick;
};
using ProgramPtr = std::shared_ptr<const Program>;

class ProgramCache {
 public:
  static ProgramCache& get();

  // Memory first, then the cache directory; null means the caller compiles and insert()s.
  ProgramPtr find(const std::string& key);
  // Memory only (a hash lookup, cheap enough to make under the executor's lock); a miss is not
  // counted, since find() follows.
  ProgramPtr find_in_memory(const std::string& key);
  // Keeps the program in memory and writes it to the cache directory.
  void insert(const std::string& key, ProgramPtr program);
  void clear();  // memory only; the directory is cleared by clear_directory()
  void set_capacity(size_t entries);
  size_t size() const;

  // Whether the process is short of what its programs use besides their entries' count. The
  // default looks at memory maps: a CPU plugin's executable is JIT code, three maps per object
  // file and several objects per program, and the kernel caps a process's maps
  // (vm.max_map_count, 65530 by default). Past that cap the plugin's next compile aborts the
  // process, long before 4096 entries of large programs fit. Checked every kPressureInterval
  // inserts; when it says yes, the least recently used quarter of the entries is dropped (a
  // dropped program is reloaded from the cache directory when it is needed again).
  using PressureCheck = std::function<bool()>;
  void set_pressure_check(PressureCheck check);
  static constexpr size_t kPressureInterval = 64;

  struct Counters {
    int64_t memory_hits = 0;
    int64_t disk_hits = 0;
    int64_t misses = 0;
    int64_t pressure_evictions = 0;  // entries dropped because the pressure check said so
  };
  Counters counters() const;

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
  std::atomic<int64_t> memory_hits_{0}, disk_hits_{0}, misses_{0}, pressure_evictions_{0};
  PressureCheck under_pressure_;
  size_t inserts_since_check_ = 0;

  void insert_in_memory(const std::string& key, ProgramPtr program);
  void evict_to(size_t entries);  // holds mutex_
};

}  // namespace tpu::cache
