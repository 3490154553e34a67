// Unary elementwise lowerings: float math (integer inputs convert to the floating result first),
// the unary ops that keep integer dtypes, rounding, and the predicates on a float's class.
//
// Every lowering returns ctx.outputs[0]'s dtype and dims, which PyTorch's meta functions computed.
#include <cmath>
#include <limits>
#include <vector>

#include "lowering/elementwise.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

// ---------------------------------------------------------------------------------------------
// Unary float math: integer inputs are converted to the (floating) result dtype first.

using FloatFn = Value (*)(Builder&, Value);

template <FloatFn fn>
std::vector<Value> lower_float_unary(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  return finish(ctx, r, fn(ctx.b, arg_as(ctx, 0, r)));
}

Value exp_of(Builder& b, Value x) { return op(b, "exponential", x); }
Value exp2_of(Builder& b, Value x) { return op(b, "power", splat(b, 2.0, x), x); }
Value expm1_of(Builder& b, Value x) { return op(b, "exponential_minus_one", x); }
Value log_of(Builder& b, Value x) { return op(b, "log", x); }
Value log2_of(Builder& b, Value x) { return b.mul(log_of(b, x), splat(b, 1.0 / M_LN2, x)); }
Value log10_of(Builder& b, Value x) { return b.mul(log_of(b, x), splat(b, 1.0 / M_LN10, x)); }
Value log1p_of(Builder& b, Value x) { return op(b, "log_plus_one", x); }
Value sqrt_of(Builder& b, Value x) { return op(b, "sqrt", x); }
Value rsqrt_of(Builder& b, Value x) { return op(b, "rsqrt", x); }
Value reciprocal_of(Builder& b, Value x) { return b.div(splat(b, 1.0, x), x); }
Value sin_of(Builder& b, Value x) { return op(b, "sine", x); }
Value cos_of(Builder& b, Value x) { return op(b, "cosine", x); }
Value tan_of(Builder& b, Value x) { return op(b, "tan", x); }
Value tanh_of(Builder& b, Value x) { return op(b, "tanh", x); }
Value sigmoid_of(Builder& b, Value x) { return op(b, "logistic", x); }
Value erf_of(Builder& b, Value x) { return erf(b, x); }
Value erfc_of(Builder& b, Value x) { return erfc(b, x); }

// sqrt(1 - x^2), factored to stay accurate near |x| = 1; nan for |x| > 1.
Value cos_of_asin(Builder& b, Value x) {
  Value one = splat(b, 1.0, x);
  return sqrt_of(b, b.mul(b.sub(one, x), b.add(one, x)));
}
Value asin_of(Builder& b, Value x) { return op(b, "atan2", x, cos_of_asin(b, x)); }
Value acos_of(Builder& b, Value x) { return op(b, "atan2", cos_of_asin(b, x), x); }
Value atan_of(Builder& b, Value x) { return op(b, "atan2", x, splat(b, 1.0, x)); }

Value sinh_of(Builder& b, Value x) {
  // Near zero, the difference of expm1s has no cancellation; far out, exp(|x|/2)^2 / 2 neither
  // overflows early nor loses the last bits that exp(|x| - ln 2) would.
  Value near = b.mul(b.sub(expm1_of(b, x), expm1_of(b, negate(b, x))), splat(b, 0.5, x));
  Value a = op(b, "abs", x);
  Value half_exp = exp_of(b, b.mul(a, splat(b, 0.5, x)));
  Value far = b.mul(b.mul(half_exp, splat(b, 0.5, x)), half_exp);
  far = b.select(is_negative(b, x), negate(b, far), far);
  // Past 20, exp(-|x|) is below half an ulp of exp(|x|) even in f64.
  return b.select(b.compare(a, splat(b, 20.0, x), "LT"), near, far);
}

Value cosh_of(Builder& b, Value x) {
  Value half_exp = exp_of(b, b.mul(op(b, "abs", x), splat(b, 0.5, x)));
  Value inverse = reciprocal_of(b, half_exp);
  Value half = splat(b, 0.5, x);
  return b.add(b.mul(b.mul(half_exp, half), half_exp), b.mul(b.mul(inverse, half), inverse));
}

// Beyond this |x|, x^2 + 1 rounds to x^2 and asinh(x) = log(2|x|).
double square_saturates(DType dtype) { return dtype == DType::F64 ? 134217728.0 : 4096.0; }

Value asinh_of(Builder& b, Value x) {
  Value a = op(b, "abs", x);
  Value one = splat(b, 1.0, x);
  Value a2 = b.mul(a, a);
  // log1p(a + a^2 / (1 + sqrt(a^2 + 1))) is log(a + sqrt(a^2 + 1)) without cancellation.
  Value near = log1p_of(b, b.add(a, b.div(a2, b.add(one, sqrt_of(b, b.add(a2, one))))));
  Value far = b.add(log_of(b, a), splat(b, M_LN2, x));
  Value magnitude = b.select(b.compare(a, splat(b, square_saturates(b.dtype(x)), x), "GT"), far, near);
  return b.select(sign_bit(b, x), negate(b, magnitude), magnitude);
}

Value acosh_of(Builder& b, Value x) {
  Value one = splat(b, 1.0, x);
  Value above_one = b.sub(x, one);
  // log1p((x - 1) + sqrt((x - 1)(x + 1))): exact near 1, nan below 1.
  Value near = log1p_of(b, b.add(above_one, sqrt_of(b, b.mul(above_one, b.add(x, one)))));
  Value far = b.add(log_of(b, x), splat(b, M_LN2, x));
  return b.select(b.compare(x, splat(b, square_saturates(b.dtype(x)), x), "GT"), far, near);
}

Value atanh_of(Builder& b, Value x) {
  Value one = splat(b, 1.0, x);
  Value ratio = b.div(b.add(x, x), b.sub(one, x));  // atanh = log1p(2x / (1 - x)) / 2
  return b.mul(log1p_of(b, ratio), splat(b, 0.5, x));
}

TPU_LOWERING("exp", lower_float_unary<exp_of>);
TPU_LOWERING("exp2", lower_float_unary<exp2_of>);
TPU_LOWERING("expm1", lower_float_unary<expm1_of>);
TPU_LOWERING("log", lower_float_unary<log_of>);
TPU_LOWERING("log2", lower_float_unary<log2_of>);
TPU_LOWERING("log10", lower_float_unary<log10_of>);
TPU_LOWERING("log1p", lower_float_unary<log1p_of>);
TPU_LOWERING("sqrt", lower_float_unary<sqrt_of>);
TPU_LOWERING("rsqrt", lower_float_unary<rsqrt_of>);
TPU_LOWERING("reciprocal", lower_float_unary<reciprocal_of>);
TPU_LOWERING("sin", lower_float_unary<sin_of>);
TPU_LOWERING("cos", lower_float_unary<cos_of>);
TPU_LOWERING("tan", lower_float_unary<tan_of>);
TPU_LOWERING("asin", lower_float_unary<asin_of>);
TPU_LOWERING("acos", lower_float_unary<acos_of>);
TPU_LOWERING("atan", lower_float_unary<atan_of>);
TPU_LOWERING("sinh", lower_float_unary<sinh_of>);
TPU_LOWERING("cosh", lower_float_unary<cosh_of>);
TPU_LOWERING("tanh", lower_float_unary<tanh_of>);
TPU_LOWERING("asinh", lower_float_unary<asinh_of>);
TPU_LOWERING("acosh", lower_float_unary<acosh_of>);
TPU_LOWERING("atanh", lower_float_unary<atanh_of>);
TPU_LOWERING("sigmoid", lower_float_unary<sigmoid_of>);
TPU_LOWERING("erf", lower_float_unary<erf_of>);
TPU_LOWERING("erfc", lower_float_unary<erfc_of>);

std::vector<Value> lower_logit(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  if (ctx.has(1)) {
    Value eps = param_as(ctx, 1, r);
    x = min_propagating_nan(b, max_propagating_nan(b, x, eps), b.sub(splat(b, 1.0, x), eps));
  }
  // f16 / bf16: PyTorch rounds 1 - x and the ratio to the dtype, which matters near x = 1/2.
  Value complement = round_to_result(b, b.sub(splat(b, 1.0, x), x), r);
  return finish(ctx, r, log_of(b, round_to_result(b, b.div(x, complement), r)));
}
TPU_LOWERING("logit", lower_logit);

// ---------------------------------------------------------------------------------------------
// Unary ops that keep integer dtypes.

std::vector<Value> lower_neg(Context& ctx) {
  ElementwiseResult r = complex_closed_result_of(ctx);
  if (r.dtype == DType::Bool) throw Unsupported("neg of a bool tensor");
  Value x = operand_as(ctx, 0, r.dtype, r.dims);
  return {ctx.b.sub(splat(ctx.b, 0, x), x)};  // also wraps unsigned values like PyTorch
}
TPU_LOWERING("neg", lower_neg);

// conj_physical: (re, -im) of a complex tensor, a copy of a real one.
std::vector<Value> lower_conj_physical(Context& ctx) {
  ElementwiseResult r = complex_closed_result_of(ctx);
  Builder& b = ctx.b;
  return {conjugate(b, operand_as(ctx, 0, r.dtype, r.dims))};
}
TPU_LOWERING("conj_physical", lower_conj_physical);

// |z| of a complex tensor, in its real dtype.
std::vector<Value> complex_magnitude(Context& ctx) {
  Builder& b = ctx.b;
  Value z = ctx.tensor(0);
  const Output& out = ctx.outputs.at(0);
  if (out.dims != b.dims(z) || out.dtype != complex_part_dtype(b.dtype(z))) throw Unsupported(ctx.op + " of this form");
  return {b.op1("stablehlo.abs", {z}, TensorType{out.dtype, out.dims})};
}

std::vector<Value> lower_abs(Context& ctx) {
  if (ctx.arg(0).kind == Arg::Kind::Tensor && is_complex(ctx.b.dtype(ctx.tensor(0)))) return complex_magnitude(ctx);
  ElementwiseResult r = result_of(ctx);
  Value x = operand_as(ctx, 0, r.dtype, r.dims);
  if (r.dtype == DType::Bool || is_unsigned(r.dtype)) return {x};
  return {op(ctx.b, "abs", x)};
}
TPU_LOWERING("abs", lower_abs);

// PyTorch's sign is (x > 0) - (x < 0): 0 for nan and +0 for -0.
std::vector<Value> lower_sign(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  Value x = operand_as(ctx, 0, r.dtype, r.dims);
  if (r.dtype == DType::Bool) return {x};
  Value zero = splat(b, 0, x);
  Value positive = b.convert(b.compare(x, zero, "GT"), r.dtype);
  if (is_unsigned(r.dtype)) return {positive};
  return {b.sub(positive, b.convert(b.compare(x, zero, "LT"), r.dtype))};
}
TPU_LOWERING("sign", lower_sign);

// sgn: sign for real tensors, z / |z| (0 at 0) for complex ones.
std::vector<Value> lower_sgn(Context& ctx) {
  ElementwiseResult r = complex_closed_result_of(ctx);
  if (!is_complex(r.dtype)) return lower_sign(ctx);
  Builder& b = ctx.b;
  Value z = operand_as(ctx, 0, r.dtype, r.dims);
  TensorType part{complex_part_dtype(r.dtype), r.dims};
  Value size = b.op1("stablehlo.abs", {z}, part);
  Value at_zero = b.compare(size, b.zeros(part), "EQ");
  Value divisor = b.op1("stablehlo.complex", {b.select(at_zero, b.full(1, part), size), b.zeros(part)}, b.type(z));
  return {b.select(at_zero, b.zeros(b.type(z)), b.div(z, divisor))};
}
TPU_LOWERING("sgn", lower_sgn);

// floor, ceil, round and trunc are the identity on integers.
template <FloatFn fn>
std::vector<Value> lower_rounding(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Value x = operand_as(ctx, 0, r.dtype, r.dims);
  if (!is_floating(r.dtype)) return {x};
  return {fn(ctx.b, x)};
}
Value floor_of(Builder& b, Value x) { return op(b, "floor", x); }
Value ceil_of(Builder& b, Value x) { return op(b, "ceil", x); }
Value trunc_of(Builder& b, Value x) { return trunc_float(b, x); }
TPU_LOWERING("floor", lower_rounding<floor_of>);
TPU_LOWERING("ceil", lower_rounding<ceil_of>);
TPU_LOWERING("trunc", lower_rounding<trunc_of>);

// round(x) is half-to-even; round(x, decimals=d) scales by 10^|d| (a static attribute) first.
std::vector<Value> lower_round(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  int64_t decimals = ctx.int_arg(1, 0);  // round.decimals (and its _out / in-place forms)
  Value x = operand_as(ctx, 0, r.dtype, r.dims);
  if (!is_floating(r.dtype)) {
    if (decimals != 0) throw Unsupported("round with decimals on an integer tensor");
    return {x};
  }
  if (decimals == 0) return {op(b, "round_nearest_even", x)};
  DType c = r.compute;
  x = b.convert(x, c);
  Value scale = splat(b, std::pow(10.0, static_cast<double>(std::llabs(decimals))), x);
  Value rounded = decimals > 0 ? b.div(op(b, "round_nearest_even", b.mul(x, scale)), scale)
                               : b.mul(op(b, "round_nearest_even", b.div(x, scale)), scale);
  return finish(ctx, r, rounded);
}
TPU_LOWERING("round", lower_round);

std::vector<Value> lower_frac(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Value x = arg_as(ctx, 0, r);
  return finish(ctx, r, ctx.b.sub(x, trunc_float(ctx.b, x)));
}
TPU_LOWERING("frac", lower_frac);

std::vector<Value> lower_bitwise_not(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (is_floating(r.dtype)) throw Unsupported("bitwise_not of a float tensor");
  return {op(ctx.b, "not", operand_as(ctx, 0, r.dtype, r.dims))};
}
TPU_LOWERING("bitwise_not", lower_bitwise_not);

std::vector<Value> lower_logical_not(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Value x = operand_as(ctx, 0, DType::Bool, r.dims);
  return {ctx.b.convert(op(ctx.b, "not", x), r.dtype)};
}
TPU_LOWERING("logical_not", lower_logical_not);

// ---------------------------------------------------------------------------------------------
// Predicates on a float's class. Integers are never nan or infinite.

enum class FloatClass { Nan, Inf, PosInf, NegInf, Finite, SignBit };

template <FloatClass kind>
std::vector<Value> lower_float_class(Context& ctx) {
  const Output& out = ctx.outputs.at(0);
  Builder& b = ctx.b;
  Value x = b.broadcast_to(ctx.tensor(0), out.dims);
  DType in = b.dtype(x);
  if (is_complex(in) && (kind == FloatClass::Nan || kind == FloatClass::Inf)) {
    // A complex number is nan (inf) where either part is, as CPU's kernels test it.
    TensorType part{complex_part_dtype(in), out.dims};
    Value real = b.op1("stablehlo.real", {x}, part), imag = b.op1("stablehlo.imag", {x}, part);
    Value inf = b.full(std::numeric_limits<double>::infinity(), part);
    auto test = [&](Value v) { return kind == FloatClass::Nan ? is_nan(b, v) : b.compare(op(b, "abs", v), inf, "EQ"); };
    return {b.convert(op(b, "or", test(real), test(imag)), out.dtype)};
  }
  reject_complex(ctx, in);
  Value result;
  if (!is_floating(in)) {
    bool always = kind == FloatClass::Finite;
    if (kind == FloatClass::SignBit && is_integral(in) && !is_unsigned(in)) {
      result = is_negative(b, x);
    } else {
      result = b.full(always ? 1 : 0, {DType::Bool, out.dims});
    }
  } else {
    Value inf = splat(b, std::numeric_limits<double>::infinity(), x);
    switch (kind) {
      case FloatClass::Nan: result = is_nan(b, x); break;
      case FloatClass::Inf: result = b.compare(op(b, "abs", x), inf, "EQ"); break;
      case FloatClass::PosInf: result = b.compare(x, inf, "EQ"); break;
      case FloatClass::NegInf: result = b.compare(x, negate(b, inf), "EQ"); break;
      case FloatClass::Finite:
        result = b.op1("stablehlo.is_finite", {x}, TensorType{DType::Bool, out.dims});
        break;
      case FloatClass::SignBit: result = sign_bit(b, x); break;
    }
  }
  return {b.convert(result, out.dtype)};
}
TPU_LOWERING("isnan", lower_float_class<FloatClass::Nan>);
TPU_LOWERING("isinf", lower_float_class<FloatClass::Inf>);
TPU_LOWERING("isposinf", lower_float_class<FloatClass::PosInf>);
TPU_LOWERING("isneginf", lower_float_class<FloatClass::NegInf>);
TPU_LOWERING("signbit", lower_float_class<FloatClass::SignBit>);
// CompositeImplicit in ATen (so eager mode decomposes it first); kept for callers by name.
TPU_LOWERING("isfinite", lower_float_class<FloatClass::Finite>);


}  // namespace
}  // namespace tpu::lowering
