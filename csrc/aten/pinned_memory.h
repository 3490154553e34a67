// Host memory that Tensor.pin_memory() and DataLoader(pin_memory=True) hand out for the tpu
// device, and that is_pinned() recognises, like CUDA's pinned host allocator.
//
// PJRT's C API has no call that registers host memory with a device, so this memory is not locked
// for DMA: it is page-aligned host memory that this allocator owns and counts. Copies from it take
// the same path as from any host tensor.
#pragma once

#include <c10/core/Allocator.h>

#include <cstdint>

namespace tpu::aten {

c10::Allocator* pinned_memory_allocator();
// Whether `data` lies inside a block of pinned_memory_allocator() (views point into one).
bool is_pinned_pointer(const void* data);

struct HostMemoryStats {
  int64_t current_bytes = 0, peak_bytes = 0, allocated_bytes = 0, freed_bytes = 0;
  int64_t current_blocks = 0, peak_blocks = 0, allocations = 0;
};
HostMemoryStats host_memory_stats();
void reset_peak_host_memory_stats();

}  // namespace tpu::aten
