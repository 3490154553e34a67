#include "hlo/types.h"

namespace tpu {

const char* mlir_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "i1";
    case DType::I8: return "i8";
    case DType::I16: return "i16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "ui8";
    case DType::U16: return "ui16";
    case DType::U32: return "ui32";
    case DType::U64: return "ui64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::C64: return "complex<f32>";
    case DType::C128: return "complex<f64>";
  }
  return "?";
}

int64_t itemsize(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::I8:
    case DType::U8: return 1;
    case DType::I16:
    case DType::U16:
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32: return 4;
    case DType::I64:
    case DType::U64:
    case DType::F64:
    case DType::C64: return 8;
    case DType::C128: return 16;
  }
  return 0;
}

bool is_floating(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 ||
         dtype == DType::F64;
}

bool is_complex(DType dtype) { return dtype == DType::C64 || dtype == DType::C128; }

bool is_unsigned(DType dtype) {
  return dtype == DType::U8 || dtype == DType::U16 || dtype == DType::U32 || dtype == DType::U64;
}

bool is_integral(DType dtype) {
  return dtype == DType::I8 || dtype == DType::I16 || dtype == DType::I32 ||
         dtype == DType::I64 || is_unsigned(dtype);
}

int64_t numel(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string mlir_type(const TensorType& type) {
  std::string text = "tensor<";
  for (int64_t d : type.dims) {
    text += std::to_string(d);
    text += 'x';
  }
  text += mlir_name(type.dtype);
  text += '>';
  return text;
}

}  // namespace tpu
