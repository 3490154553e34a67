// Shared by the elementwise lowerings (elementwise_unary.cpp, elementwise_binary.cpp, activations.cpp): the dtype rules of
// PyTorch's elementwise kernels, and the float math that StableHLO lacks.
#pragma once

#include <string>
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {

// The result's dtype and dims (ctx.outputs[0]) and the dtype its arithmetic runs in
// (accumulation_type: f32 for f16 and bf16, as PyTorch's CPU kernels do).
struct ElementwiseResult {
  DType dtype;
  DType compute;
  Dims dims;
};
ElementwiseResult result_of(const Context& ctx);        // Unsupported for complex results or operands
ElementwiseResult float_result_of(const Context& ctx);  // ... and for non-floating ones
// ... and for float16 / bfloat16, for ops whose CPU kernels take float32 and float64 only (the
// CPU fallback then raises CPU's error).
ElementwiseResult single_or_double_result_of(const Context& ctx);
// For ops whose complex form is the same StableHLO op on complex operands (add, sub, mul, neg):
// a complex result computes in its own dtype, every operand converted to it (a real x becomes
// (x, 0)); a real result is result_of's.
ElementwiseResult complex_closed_result_of(const Context& ctx);

// Operand i (tensor or number) in the compute dtype, broadcast to the result. It is rounded to the
// result dtype first, as PyTorch casts every operand to the common dtype before its f16 / bf16
// kernels widen to f32.
Value arg_as(Context& ctx, size_t i, const ElementwiseResult& r);
// Operand i as mul and true division read it: a number (a Python scalar, or a 0-dim CPU tensor)
// goes to the compute dtype unrounded, as their kernels read a CPU scalar operand straight in the
// compute dtype (add and sub round it to the result dtype first, as arg_as does); a tensor as
// arg_as.
Value binary_operand_as(Context& ctx, size_t i, const ElementwiseResult& r);
// A scalar parameter (alpha of addcmul, a slope, a threshold) in the compute dtype, unrounded:
// PyTorch hands those to its kernels in the compute dtype.
Value param_as(Context& ctx, size_t i, const ElementwiseResult& r);
// `v` rounded to the result dtype and widened again, where a formula must reproduce the
// per-operation rounding of PyTorch's f16 / bf16 kernels.
Value round_to_result(hlo::Builder& b, Value v, const ElementwiseResult& r);
// `v` converted to the result dtype, as the lowering's single result.
std::vector<Value> finish(Context& ctx, const ElementwiseResult& r, Value v);

// stablehlo.<name> applied to x (and y).
Value op(hlo::Builder& b, const char* name, Value x);
Value op(hlo::Builder& b, const char* name, Value x, Value y);

// A constant of `like`'s type.
Value splat(hlo::Builder& b, double value, Value like);

// Elementwise maximum / minimum with PyTorch's nan rule: a nan operand gives nan. XLA's CPU
// stablehlo.maximum returns the number when only its second operand is nan, so floats need this.
// Any dtype; bool operands give or / and.
Value max_propagating_nan(hlo::Builder& b, Value x, Value y);
Value min_propagating_nan(hlo::Builder& b, Value x, Value y);

Value is_negative(hlo::Builder& b, Value x);  // x < 0
Value negate(hlo::Builder& b, Value x);
// The sign bit of a float, which also tells -0.0 and -nan apart.
Value sign_bit(hlo::Builder& b, Value x);
Value trunc_float(hlo::Builder& b, Value x);  // rounds toward zero

// Unsupported for a complex dtype.
void reject_complex(const Context& ctx, DType dtype);
// A string argument, "" when absent.
std::string string_arg(const Context& ctx, size_t i);

// erf and erfc from stablehlo ops only (XLA versions differ in whether they accept chlo.erf).
// `x` must be F32 or F64; both are accurate to a few ulps of that dtype.
Value erf(hlo::Builder& b, Value x);
Value erfc(hlo::Builder& b, Value x);
// exp(x^2) erfc(x), accurate where erfc underflows.
Value erfcx(hlo::Builder& b, Value x);

}  // namespace tpu::lowering
