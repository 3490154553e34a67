// torch.tpu.memory._record_memory_history / _snapshot (the names CUDA users call): while
// recording, every storage allocation and free is noted with the Python stack that caused it, so
// that PyTorch's memory visualiser reads the snapshot. Off by default; when off, the allocator
// pays one atomic load per allocation.
#pragma once

#include <torch/csrc/profiler/combined_traceback.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace tpu::aten {

struct MemoryEvent {
  bool allocation;  // false: a free
  int device;
  uintptr_t address;
  int64_t size;
  int64_t time_us;
  std::shared_ptr<torch::CapturedTraceback> stack;
};

struct LiveAllocation {
  int device;
  int64_t size;
  std::shared_ptr<torch::CapturedTraceback> stack;
};

struct MemoryHistory {
  std::vector<MemoryEvent> events;            // oldest first, at most the last max_entries
  std::map<uintptr_t, LiveAllocation> live;  // allocations made while recording, still alive
};

void record_memory_history(bool enabled, size_t max_entries);
bool recording_memory_history();
void note_allocation(int device, const void* address, int64_t size);
void note_free(int device, const void* address, int64_t size);
MemoryHistory memory_history();

}  // namespace tpu::aten
