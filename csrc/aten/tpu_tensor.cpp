#include "aten/tpu_tensor.h"

#include <c10/util/Exception.h>

#include "lowering/view_access.h"

namespace tpu::aten {

std::optional<exec::RuntimeNumber> runtime_number(const c10::Scalar& s) {
  exec::RuntimeNumber number;
  if (s.isFloatingPoint()) {
    number.dtype = DType::F64;
    number.f = s.toDouble();
  } else if (s.isBoolean()) {
    number.dtype = DType::Bool;
    number.i = s.toBool();
  } else if (s.isIntegral(false)) {
    number.dtype = DType::I64;
    number.i = s.toLong();
  } else if (s.isComplex()) {
    c10::complex<double> value = s.toComplexDouble();
    number.dtype = DType::C128;
    number.f = value.real();
    number.imag = value.imag();
  } else {
    return std::nullopt;
  }
  return number;
}

DType to_dtype(at::ScalarType type) {
  switch (type) {
    case at::kBool: return DType::Bool;
    case at::kChar: return DType::I8;
    case at::kShort: return DType::I16;
    case at::kInt: return DType::I32;
    case at::kLong: return DType::I64;
    case at::kByte: return DType::U8;
    case at::kUInt16: return DType::U16;
    case at::kUInt32: return DType::U32;
    case at::kUInt64: return DType::U64;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    case at::kFloat: return DType::F32;
    case at::kDouble: return DType::F64;
    case at::kComplexFloat: return DType::C64;
    case at::kComplexDouble: return DType::C128;
    default: break;
  }
  TORCH_CHECK_TYPE(false, "the tpu device does not support dtype ", type);
}

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return at::kBool;
    case DType::I8: return at::kChar;
    case DType::I16: return at::kShort;
    case DType::I32: return at::kInt;
    case DType::I64: return at::kLong;
    case DType::U8: return at::kByte;
    case DType::U16: return at::kUInt16;
    case DType::U32: return at::kUInt32;
    case DType::U64: return at::kUInt64;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
    case DType::F32: return at::kFloat;
    case DType::F64: return at::kDouble;
    case DType::C64: return at::kComplexFloat;
    case DType::C128: return at::kComplexDouble;
  }
  return at::kFloat;
}

namespace {

thread_local int t_current_device = 0;

}  // namespace

exec::StoragePtr storage_of(const at::Tensor& tensor) { return storage_of(tensor.storage()); }

exec::TensorView view_of(const at::Tensor& tensor) {
  exec::TensorView view;
  view.storage = storage_of(tensor);
  view.dtype = to_dtype(tensor.scalar_type());
  view.layout.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  view.layout.strides.assign(tensor.strides().begin(), tensor.strides().end());
  lowering::canonicalize_unit_strides(view.layout.strides, view.layout.sizes);
  view.layout.offset = tensor.storage_offset();
  return view;
}

int current_device() { return t_current_device; }
void set_current_device(int device) { t_current_device = device; }

int device_count() {
  if (!runtime::Client::available()) return 0;
  return runtime::Client::get().device_count();
}

}  // namespace tpu::aten
