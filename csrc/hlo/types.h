// Element types and tensor types shared by the builder, the lowerings, the executor and the
// runtime. Torch-free on purpose: these layers build and test without torch headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/dims.h"

namespace tpu {

enum class DType : uint8_t {
  Bool,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64,
  F16,
  BF16,
  F32,
  F64,
  C64,
  C128,
};

const char* mlir_name(DType dtype);  // "f32", "i1", "ui8", "complex<f32>", ...
int64_t itemsize(DType dtype);
bool is_floating(DType dtype);
bool is_complex(DType dtype);
bool is_integral(DType dtype);  // excludes Bool
bool is_unsigned(DType dtype);
int64_t numel(const Dims& dims);

struct TensorType {
  DType dtype;
  Dims dims;
  bool operator==(const TensorType& other) const {
    return dtype == other.dtype && dims == other.dims;
  }
};

// "tensor<4x8xf32>", "tensor<f32>" for rank 0.
std::string mlir_type(const TensorType& type);

}  // namespace tpu
