// Floating-point math shared by the elementwise and activation lowerings.
#pragma once

#include "lowering/registry.h"

namespace tpu::lowering {

// The dtype that elementwise float math runs in: f16 and bf16 compute in f32 and round once at
// the end, as PyTorch's CPU kernels do; every other dtype computes in itself.
DType compute_dtype(DType dtype);

// erf and erfc from stablehlo ops only (XLA versions differ in whether they accept chlo.erf).
// `x` must be F32 or F64; both are accurate to a few ulps of that dtype.
Value erf(hlo::Builder& b, Value x);
Value erfc(hlo::Builder& b, Value x);

// Elementwise maximum / minimum with PyTorch's nan rule: a nan operand gives nan. XLA's CPU
// stablehlo.maximum returns the number when only its second operand is nan, so floats need this.
// Any dtype; bool operands give or / and.
Value max_propagating_nan(hlo::Builder& b, Value x, Value y);
Value min_propagating_nan(hlo::Builder& b, Value x, Value y);

}  // namespace tpu::lowering
