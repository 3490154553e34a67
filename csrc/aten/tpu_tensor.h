// What a `tpu` at::Tensor is: a strided view over a storage whose DataPtr context owns the
// storage's device value (exec::Storage). Shared by every ATen-layer translation unit.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Allocator.h>

#include "exec/executor.h"

namespace tpu::aten {

DType to_dtype(at::ScalarType type);  // throws TypeError-like c10::Error for unsupported types
at::ScalarType to_scalar_type(DType dtype);

// The device value behind a tensor's storage.
exec::StoragePtr storage_of(const at::Tensor& tensor);
exec::StoragePtr storage_of(const c10::Storage& storage);
exec::TensorView view_of(const at::Tensor& tensor);

// The allocator for PrivateUse1: every allocation gets a unique address from a reserved region
// that faults if touched (device memory is never dereferenced on the host), and a fresh
// exec::Storage of that many bytes on the current device.
c10::Allocator* allocator();
c10::DataPtr allocate_on(size_t nbytes, int device);

int current_device();
void set_current_device(int device);
int device_count();  // 0 when no plugin can be loaded; never throws

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

at::Generator& default_generator(int device);
void seed_all(uint64_t seed);  // every default generator, and those created later

// The generator behind torch.manual_seed for `device`, as (seed, offset) with the offset
// advanced by `increment`.
std::pair<uint64_t, uint64_t> next_philox(const c10::optional<at::Generator>& generator, int device,
                                          uint64_t increment);

}  // namespace tpu::aten
