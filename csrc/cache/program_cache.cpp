#include "cache/program_cache.h"

#include <cstdio>
#include <cstdlib>

#include "cache/disk_cache.h"

namespace tpu::cache {
namespace {

// Lines of a /proc file, or -1 where it cannot be read (not Linux).
long count_lines(const char* path) {
  std::FILE* file = std::fopen(path, "r");
  if (!file) return -1;
  long lines = 0;
  char buffer[1 << 16];
  size_t read;
  while ((read = std::fread(buffer, 1, sizeof buffer, file)) > 0) {
    for (size_t i = 0; i < read; ++i) lines += buffer[i] == '\n';
  }
  std::fclose(file);
  return lines;
}

long read_long(const char* path, long fallback) {
  std::FILE* file = std::fopen(path, "r");
  if (!file) return fallback;
  long value = fallback;
  if (std::fscanf(file, "%ld", &value) != 1) value = fallback;
  std::fclose(file);
  return value;
}

// Half the kernel's cap leaves the other half to buffers, threads and libraries, which map too.
bool memory_maps_past_half_the_cap() {
  static const long cap = read_long("/proc/sys/vm/max_map_count", 65530);
  long maps = count_lines("/proc/self/maps");
  return maps >= 0 && maps > cap / 2;
}

}  // namespace

ProgramCache& ProgramCache::get() {
  static ProgramCache* cache = [] {
    auto* c = new ProgramCache();
    c->under_pressure_ = memory_maps_past_half_the_cap;
    if (const char* env = std::getenv("TORCH_TPU_CACHE_ENTRIES")) {
      long entries = std::atol(env);
      if (entries > 0) c->capacity_ = static_cast<size_t>(entries);
    }
    return c;
  }();
  return *cache;
}

ProgramPtr ProgramCache::find_in_memory(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = slots_.find(key);
  if (it == slots_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second.position);
  ++memory_hits_;
  return it->second.program;
}

ProgramPtr ProgramCache::find(const std::string& key) {
  if (ProgramPtr program = find_in_memory(key)) return program;
  // Outside the lock: reading and loading an executable takes milliseconds, and other threads'
  // memory hits must not wait for it.
  ProgramPtr program = DiskCache::get().load(key);
  if (!program) {
    ++misses_;
    return nullptr;
  }
  ++disk_hits_;
  insert_in_memory(key, program);
  return program;
}

void ProgramCache::insert(const std::string& key, ProgramPtr program) {
  insert_in_memory(key, program);
  DiskCache::get().store(key, *program);
}

void ProgramCache::insert_in_memory(const std::string& key, ProgramPtr program) {
  PressureCheck check;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = slots_.find(key);
    if (it != slots_.end()) {
      it->second.program = std::move(program);
      order_.splice(order_.begin(), order_, it->second.position);
      return;
    }
    order_.push_front(key);
    slots_.emplace(key, Slot{std::move(program), order_.begin()});
    evict_to(capacity_);
    if (!under_pressure_ || ++inserts_since_check_ < kPressureInterval) return;
    inserts_since_check_ = 0;
    check = under_pressure_;
  }
  // Outside the lock: reading the process's maps takes milliseconds.
  if (!check()) return;
  std::vector<ProgramPtr> dropped;  // released after the lock: freeing executables unmaps code
  std::lock_guard<std::mutex> lock(mutex_);
  size_t keep = slots_.size() - slots_.size() / 4;
  while (slots_.size() > keep) {
    auto slot = slots_.find(order_.back());
    dropped.push_back(std::move(slot->second.program));
    slots_.erase(slot);
    order_.pop_back();
  }
  pressure_evictions_ += static_cast<int64_t>(dropped.size());
}

void ProgramCache::evict_to(size_t entries) {
  while (slots_.size() > entries) {
    slots_.erase(order_.back());
    order_.pop_back();
  }
}

void ProgramCache::set_pressure_check(PressureCheck check) {
  std::lock_guard<std::mutex> lock(mutex_);
  under_pressure_ = std::move(check);
  inserts_since_check_ = 0;
}

void ProgramCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_.clear();
  order_.clear();
}

void ProgramCache::set_capacity(size_t entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = entries > 0 ? entries : 1;
  evict_to(capacity_);
}

size_t ProgramCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}

ProgramCache::Counters ProgramCache::counters() const {
  return {memory_hits_.load(), disk_hits_.load(), misses_.load(), pressure_evictions_.load()};
}

}  // namespace tpu::cache
