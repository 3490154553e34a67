// What a `tpu` at::Tensor is: a strided view over a storage whose DataPtr context owns the
// storage's device value (exec::Storage). Shared by every ATen-layer translation unit.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Scalar.h>

#include <optional>

#include "aten/device_allocator.h"
#include "exec/executor.h"

namespace tpu::aten {

DType to_dtype(at::ScalarType type);  // throws TypeError-like c10::Error for unsupported types

// A Python number or Scalar as a program's runtime argument; nullopt for complex and symbolic
// numbers, which lowerings do not take.
std::optional<exec::RuntimeNumber> runtime_number(const c10::Scalar& s);
at::ScalarType to_scalar_type(DType dtype);

// The device value behind a tensor's storage.
exec::StoragePtr storage_of(const at::Tensor& tensor);
exec::TensorView view_of(const at::Tensor& tensor);

int current_device();
void set_current_device(int device);
int device_count();  // 0 when no plugin can be loaded; never throws

}  // namespace tpu::aten
