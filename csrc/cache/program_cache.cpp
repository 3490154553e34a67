#include "cache/program_cache.h"

#include <cstdlib>

#include "cache/disk_cache.h"

namespace tpu::cache {

ProgramCache& ProgramCache::get() {
  static ProgramCache* cache = [] {
    auto* c = new ProgramCache();
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
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = slots_.find(key);
  if (it != slots_.end()) {
    it->second.program = std::move(program);
    order_.splice(order_.begin(), order_, it->second.position);
    return;
  }
  order_.push_front(key);
  slots_.emplace(key, Slot{std::move(program), order_.begin()});
  while (slots_.size() > capacity_) {
    slots_.erase(order_.back());
    order_.pop_back();
  }
}

void ProgramCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_.clear();
  order_.clear();
}

void ProgramCache::set_capacity(size_t entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = entries > 0 ? entries : 1;
  while (slots_.size() > capacity_) {
    slots_.erase(order_.back());
    order_.pop_back();
  }
}

size_t ProgramCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}

ProgramCache::Counters ProgramCache::counters() const {
  return {memory_hits_.load(), disk_hits_.load(), misses_.load()};
}

}  // namespace tpu::cache
