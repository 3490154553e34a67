// The device allocator (c10::Allocator and c10::DeviceAllocator for PrivateUse1): a tpu storage's
// DataPtr owns its exec::Storage, at an address that names the storage and its device but can
// never be read on the host; and the memory statistics torch.tpu.memory_* and
// torch.accelerator.memory_* report.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include "exec/executor.h"

namespace tpu::aten {

// The allocator for PrivateUse1: every allocation gets a unique address from a reserved region
// that faults if touched (device memory is never dereferenced on the host), and a fresh
// exec::Storage of that many bytes on the current device.
c10::Allocator* allocator();
c10::DataPtr allocate_on(size_t nbytes, int device);

// Raises where tpu:`device` does not exist (or no plugin loads): what a factory op naming it raises.
void check_device_exists(int device);

// A fresh tensor on tpu:`device` for an op's result, dense (no strides) or with the strides its
// meta function gave; made without dispatching empty_strided, whose checks the op's arguments
// have already passed: every recorded op makes its results here.
at::Tensor fresh_result(at::IntArrayRef sizes, std::optional<at::IntArrayRef> strides, at::ScalarType dtype,
                        int device);

// The device whose reserved range holds `address` (a data pointer, or one inside a storage), or -1.
int device_of_address(const void* address);

// The device value behind a tensor storage; raises for storages the allocator did not make.
exec::StoragePtr storage_of(const c10::Storage& storage);

struct MemoryStats {
  c10::CachingAllocator::Stat bytes;        // live storage bytes
  c10::CachingAllocator::Stat allocations;  // live storages
  int64_t num_ooms = 0;
  int64_t limit = 0;  // 0: not decided yet, -1: unlimited
};
MemoryStats memory_stats(int device);
void reset_peak_memory(int device);
void reset_accumulated_memory(int device);
void set_memory_limit(int device, int64_t bytes);

}  // namespace tpu::aten
