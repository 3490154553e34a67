// Elementwise math and arithmetic: unary functions, binary arithmetic, comparisons, logical and
// bitwise ops, and the small ternaries (where, clamp, lerp, addcmul, ...).
//
// Every lowering returns ctx.outputs[0]'s dtype and dims, which PyTorch's meta functions computed
// (promoted dtype, broadcast shape). Numbers are runtime values: nothing here branches on one.
#include <cmath>
#include <limits>
#include <vector>

#include "lowering/elementwise.h"

namespace tpu::lowering {

using hlo::Builder;

ElementwiseResult result_of(const Context& ctx) {
  const Output& out = ctx.outputs.at(0);
  if (is_complex(out.dtype)) throw Unsupported(ctx.op + " on complex tensors");
  return {out.dtype, accumulation_type(out.dtype), out.dims};
}

ElementwiseResult float_result_of(const Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (!is_floating(r.dtype)) throw Unsupported(ctx.op + " with a non-floating result");
  return r;
}

Value arg_as(Context& ctx, size_t i, const ElementwiseResult& r) {
  return cast_to(ctx.b, ctx.b.convert(ctx.tensor(i), r.dtype), r.compute, r.dims);
}

Value binary_operand_as(Context& ctx, size_t i, const ElementwiseResult& r) {
  return ctx.arg(i).kind == Arg::Kind::Number ? param_as(ctx, i, r) : arg_as(ctx, i, r);
}

Value param_as(Context& ctx, size_t i, const ElementwiseResult& r) {
  return operand_as(ctx, i, r.compute, r.dims);
}

Value round_to_result(Builder& b, Value v, const ElementwiseResult& r) {
  return b.convert(b.convert(v, r.dtype), r.compute);
}

std::vector<Value> finish(Context& ctx, const ElementwiseResult& r, Value v) {
  return {ctx.b.convert(v, r.dtype)};
}

Value op(Builder& b, const char* name, Value x) {
  return b.unary(std::string("stablehlo.") + name, x);
}
Value op(Builder& b, const char* name, Value x, Value y) {
  return b.binary(std::string("stablehlo.") + name, x, y);
}

Value splat(Builder& b, double value, Value like) { return b.full(value, b.type(like)); }

namespace {

// ---------------------------------------------------------------------------------------------
// Small builders.

Value is_negative(Builder& b, Value x) { return b.compare(x, splat(b, 0, x), "LT"); }
Value negate(Builder& b, Value x) { return op(b, "negate", x); }

Value extremum(Builder& b, Value x, Value y, bool is_max) {
  if (b.dtype(x) == DType::Bool) return op(b, is_max ? "or" : "and", x, y);
  Value m = is_max ? b.max(x, y) : b.min(x, y);
  if (!is_floating(b.dtype(x))) return m;
  m = b.select(is_nan(b, x), x, m);
  return b.select(is_nan(b, y), y, m);
}

// Clamp to constant bounds; nan stays nan.
Value clamp_to(Builder& b, Value x, double lo, double hi) {
  Value clamped = b.min(b.max(x, splat(b, lo, x)), splat(b, hi, x));
  return b.select(is_nan(b, x), x, clamped);
}

// c[0] + c[1] u + c[2] u^2 + ... by Horner's rule.
Value polynomial(Builder& b, Value u, const std::vector<double>& c) {
  Value acc = splat(b, c.back(), u);
  for (size_t i = c.size() - 1; i-- > 0;) acc = b.add(b.mul(acc, u), splat(b, c[i], u));
  return acc;
}
Value rational(Builder& b, Value u, const std::vector<double>& p, const std::vector<double>& q) {
  return b.div(polynomial(b, u, p), polynomial(b, u, q));
}

// The sign bit of a float, which also tells -0.0 and -nan apart.
Value sign_bit(Builder& b, Value x) {
  DType bits = b.dtype(x) == DType::F64 ? DType::I64 : DType::I32;
  Value wide = b.dtype(x) == DType::F64 || b.dtype(x) == DType::F32 ? x : b.convert(x, DType::F32);
  Value as_int = b.bitcast_convert(wide, bits);
  return is_negative(b, as_int);
}

Value trunc_float(Builder& b, Value x) {
  return b.select(is_negative(b, x), op(b, "ceil", x), op(b, "floor", x));
}

// ---------------------------------------------------------------------------------------------
// erf and erfc. Rational approximations fitted for this project (iteratively reweighted least
// squares against mpmath at 50 digits), then checked for their evaluation error in the target
// precision: about 3e-7 relative in f32 and 1e-15 in f64.

// erf(x) = x * P(x^2) / Q(x^2) on |x| <= 4 (f32 rounds erf to +-1 beyond).
const std::vector<double> kErf32P{1.12837909798642228,     2.07196366661928778e-1,
                                  5.15331667857853804e-2,  3.99142671050016736e-3,
                                  1.47141971976731186e-4,  -1.93831712217064301e-6,
                                  1.90515033147663233e-8};
const std::vector<double> kErf32Q{1.0, 5.1695432965235261e-1, 1.17998814693123402e-1,
                                  1.49623235295280113e-2, 1.02075118750454193e-3};
// erf(x) = x * P(x^2) / Q(x^2) on |x| <= 1, f64.
const std::vector<double> kErf64P{1.12837916709551257,    1.43508334329488832e-1,
                                  4.54838339283526286e-2, 1.87747286162143611e-3,
                                  1.96887094372308049e-4, 7.78134239779746387e-8};
const std::vector<double> kErf64Q{1.0,
                                  4.60514283243002886e-1,
                                  9.38137593811211863e-2,
                                  1.06932156141643547e-2,
                                  6.92512071728090465e-4,
                                  2.08108861173835106e-5};
// erfc(a) = exp(-a^2) / a * P(1/a) / Q(1/a) for a >= 0.5.
const std::vector<double> kErfc32P{5.64189523988296358e-1, 1.8070814016589843,
                                   3.30663404168589699,    2.54115287186395142,
                                   1.17226898212324943e-2, -1.17067276712296428e-3};
const std::vector<double> kErfc32Q{1.0, 3.20294091150934437, 6.36199382157568537,
                                   6.0876156036649022, 2.59423608732567961};
const std::vector<double> kErfc64P{
    5.64189583547756274e-1, 9.02508648343596451,  7.37974467187411745e+1, 3.90637790811074994e+2,
    1.45319503460702602e+3, 3.90896896360598406e+3, 7.58054381382425278e+3, 1.02336145477411368e+4,
    8.7837955508874812e+3,  3.7071830355630174e+3,  5.57875116413882201e-7};
const std::vector<double> kErfc64Q{
    1.0,                    1.59965492923213485e+1, 1.31302568623643568e+2, 7.00385731276384268e+2,
    2.6406224196590002e+3,  7.26666254049423624e+3, 1.46598735161228179e+4, 2.12766419605705792e+4,
    2.11580157219824817e+4, 1.29669035970712876e+4, 3.70718304467715041e+3};

void check_erf_dtype(Builder& b, Value x) {
  if (b.dtype(x) != DType::F32 && b.dtype(x) != DType::F64) {
    throw Unsupported(std::string("erf in ") + mlir_name(b.dtype(x)));
  }
}

// exp(-a^2) with a^2 split into an exact head and a small tail, so that the rounding of a^2
// does not cost relative accuracy when the result is tiny.
Value exp_neg_square(Builder& b, Value a) {
  bool f64 = b.dtype(a) == DType::F64;
  DType bits = f64 ? DType::U64 : DType::U32;
  // Keep the top half of the significand: its square is exact.
  double mask = f64 ? 18446744073575333888.0 /* 2^64 - 2^27 */ : 4294963200.0 /* 2^32 - 2^12 */;
  Value a_bits = b.bitcast_convert(a, bits);
  Value head = b.bitcast_convert(op(b, "and", a_bits, b.full(mask, b.type(a_bits))), b.dtype(a));
  Value tail = b.sub(a, head);
  Value head_term = op(b, "exponential", negate(b, b.mul(head, head)));
  Value tail_term = op(b, "exponential_minus_one", negate(b, b.mul(tail, b.add(a, head))));
  // e^h + e^h (e^t - 1) rather than e^h e^t, which XLA would fold back into e^(h + t).
  return b.add(head_term, b.mul(head_term, tail_term));
}

// erfc(a) for a >= 0.5.
Value erfc_tail(Builder& b, Value a) {
  bool f64 = b.dtype(a) == DType::F64;
  a = b.min(a, splat(b, 30.0, a));  // erfc underflows long before; keeps inf from making nan
  Value t = b.div(splat(b, 1.0, a), a);
  Value ratio = f64 ? rational(b, t, kErfc64P, kErfc64Q) : rational(b, t, kErfc32P, kErfc32Q);
  return b.mul(exp_neg_square(b, a), b.mul(ratio, t));
}

// erf for |x| below the switch to the tail (f64), or everywhere (f32).
Value erf_core(Builder& b, Value x) {
  if (b.dtype(x) == DType::F64) {
    Value t = b.mul(x, x);
    return b.mul(x, rational(b, t, kErf64P, kErf64Q));
  }
  Value clamped = clamp_to(b, x, -4.0, 4.0);
  Value t = b.mul(clamped, clamped);
  return clamp_to(b, b.mul(clamped, rational(b, t, kErf32P, kErf32Q)), -1.0, 1.0);
}

}  // namespace

Value max_propagating_nan(Builder& b, Value x, Value y) { return extremum(b, x, y, true); }
Value min_propagating_nan(Builder& b, Value x, Value y) { return extremum(b, x, y, false); }

Value erf(Builder& b, Value x) {
  check_erf_dtype(b, x);
  if (b.dtype(x) == DType::F32) return erf_core(b, x);
  Value a = op(b, "abs", x);
  Value from_tail = b.sub(splat(b, 1.0, x), erfc_tail(b, b.max(a, splat(b, 0.5, a))));
  Value far = b.select(is_negative(b, x), negate(b, from_tail), from_tail);
  Value result = b.select(b.compare(a, splat(b, 1.0, a), "LT"), erf_core(b, x), far);
  return b.select(is_nan(b, x), x, result);
}

Value erfc(Builder& b, Value x) {
  check_erf_dtype(b, x);
  Value a = op(b, "abs", x);
  Value near = b.sub(splat(b, 1.0, x), erf_core(b, x));
  Value tail = erfc_tail(b, b.max(a, splat(b, 0.5, a)));
  Value far = b.select(is_negative(b, x), b.sub(splat(b, 2.0, x), tail), tail);
  Value result = b.select(b.compare(a, splat(b, 0.5, a), "LT"), near, far);
  return b.select(is_nan(b, x), x, result);
}

namespace {

// ---------------------------------------------------------------------------------------------
// Argument helpers.

void reject_complex(const Context& ctx, DType dtype) {
  if (is_complex(dtype)) throw Unsupported(ctx.op + " on complex tensors");
}

// A string argument, "" when absent.
std::string string_arg(const Context& ctx, size_t i) {
  if (!ctx.has(i)) return "";
  if (ctx.arg(i).kind != Arg::Kind::String) throw Unsupported(ctx.op + ": expected a string");
  return ctx.arg(i).s;
}

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
  ElementwiseResult r = result_of(ctx);
  if (r.dtype == DType::Bool) throw Unsupported("neg of a bool tensor");
  Value x = operand_as(ctx, 0, r.dtype, r.dims);
  return {ctx.b.sub(splat(ctx.b, 0, x), x)};  // also wraps unsigned values like PyTorch
}
TPU_LOWERING("neg", lower_neg);

std::vector<Value> lower_abs(Context& ctx) {
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
TPU_LOWERING("sgn", lower_sign);

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

// ---------------------------------------------------------------------------------------------
// Binary arithmetic.

// self + alpha * other, for add / sub / rsub. alpha is args[2] when given.
Value scaled_sum(Context& ctx, size_t lhs, size_t rhs, bool subtract) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, lhs, r);
  Value y = arg_as(ctx, rhs, r);
  bool has_alpha = ctx.has(2);
  if (r.dtype == DType::Bool) {
    if (subtract) throw Unsupported("subtraction of bool tensors");
    if (has_alpha) y = op(b, "and", y, arg_as(ctx, 2, r));
    return op(b, "or", x, y);  // bool addition saturates: logical or
  }
  if (has_alpha) y = b.mul(y, arg_as(ctx, 2, r));
  return b.convert(subtract ? b.sub(x, y) : b.add(x, y), r.dtype);
}

std::vector<Value> lower_add(Context& ctx) { return {scaled_sum(ctx, 0, 1, false)}; }
std::vector<Value> lower_sub(Context& ctx) { return {scaled_sum(ctx, 0, 1, true)}; }
std::vector<Value> lower_rsub(Context& ctx) { return {scaled_sum(ctx, 1, 0, true)}; }
TPU_LOWERING("add", lower_add);
TPU_LOWERING("sub", lower_sub);
TPU_LOWERING("rsub", lower_rsub);

std::vector<Value> lower_mul(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Value x = binary_operand_as(ctx, 0, r), y = binary_operand_as(ctx, 1, r);
  if (r.dtype == DType::Bool) return {op(ctx.b, "and", x, y)};
  return finish(ctx, r, ctx.b.mul(x, y));
}
TPU_LOWERING("mul", lower_mul);

// Python's floor division of floats: the quotient of the exactly representable a - fmod(a, b),
// corrected by one where fmod's sign disagrees with b's, rounded to the nearest integer.
Value floor_divide_float(Builder& b, Value x, Value y) {
  Value zero = splat(b, 0, x);
  Value mod = op(b, "remainder", x, y);
  Value quotient = b.div(b.sub(x, mod), y);
  Value signs_differ = b.compare(is_negative(b, y), is_negative(b, mod), "NE");
  Value adjust = op(b, "and", b.compare(mod, zero, "NE"), signs_differ);
  quotient = b.select(adjust, b.sub(quotient, splat(b, 1, x)), quotient);
  Value floored = op(b, "floor", quotient);
  Value round_up = b.compare(b.sub(quotient, floored), splat(b, 0.5, x), "GT");
  floored = b.select(round_up, b.add(floored, splat(b, 1, x)), floored);
  Value true_quotient = b.div(x, y);
  // A zero quotient keeps the sign of the true quotient; a zero divisor gives x / 0.
  Value signed_zero = b.select(sign_bit(b, true_quotient), negate(b, zero), zero);
  Value result = b.select(b.compare(quotient, zero, "EQ"), signed_zero, floored);
  return b.select(b.compare(y, zero, "EQ"), true_quotient, result);
}

// Integer floor division: the truncating quotient, minus one where the remainder is nonzero and
// the operands' signs differ.
Value floor_divide_int(Builder& b, Value x, Value y) {
  Value quotient = b.div(x, y);
  if (is_unsigned(b.dtype(x))) return quotient;
  Value rem = op(b, "remainder", x, y);
  Value zero = splat(b, 0, x);
  Value signs_differ = b.compare(is_negative(b, x), is_negative(b, y), "NE");
  Value adjust = op(b, "and", b.compare(rem, zero, "NE"), signs_differ);
  return b.select(adjust, b.sub(quotient, splat(b, 1, x)), quotient);
}

Value divide(Context& ctx, const std::string& rounding_mode) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  if (r.dtype == DType::Bool) throw Unsupported("division with a bool result");
  bool true_division = rounding_mode.empty();
  // An f16 / bf16 division by a single element (a number, or a one-element tensor) runs in f32 in
  // PyTorch's CPU kernels, reading a number unrounded, and rounds once at the end; by any other
  // divisor its rounding modes round at each step.
  bool single_divisor = ctx.arg(1).kind == Arg::Kind::Number || numel(b.dims(ctx.tensor(1))) == 1;
  bool widened = is_floating(r.dtype) && r.compute != r.dtype && single_divisor;
  // True division reads a number operand unrounded; the rounding modes round it first, but for
  // the widened division above.
  auto operand = true_division || widened ? binary_operand_as : arg_as;
  Value x = operand(ctx, 0, r), y = operand(ctx, 1, r);
  Value q;
  if (true_division) {
    if (!is_floating(r.dtype)) throw Unsupported("true division with an integer result");
    q = b.div(x, y);
  } else if (rounding_mode == "trunc") {
    if (!is_floating(r.dtype)) {
      q = b.div(x, y);
    } else {
      // f16 / bf16 by a tensor: the quotient is rounded to the dtype before truncation.
      Value quotient = b.div(x, y);
      q = trunc_float(b, widened ? quotient : round_to_result(b, quotient, r));
    }
  } else if (rounding_mode == "floor") {
    if (!is_floating(r.dtype)) {
      q = floor_divide_int(b, x, y);
    } else if (widened) {
      q = floor_divide_float(b, x, y);
    } else {
      // f16 / bf16 by a tensor: each step of the floor division runs in the dtype itself.
      q = floor_divide_float(b, b.convert(x, r.dtype), b.convert(y, r.dtype));
    }
  } else {
    throw Unsupported("div with rounding_mode " + rounding_mode);
  }
  return b.convert(q, r.dtype);
}

std::vector<Value> lower_div(Context& ctx) { return {divide(ctx, string_arg(ctx, 2))}; }
std::vector<Value> lower_floor_divide(Context& ctx) { return {divide(ctx, "floor")}; }
TPU_LOWERING("div", lower_div);
TPU_LOWERING("floor_divide", lower_floor_divide);

// Python's modulo: the result takes the divisor's sign.
std::vector<Value> lower_remainder(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  if (r.dtype == DType::Bool) throw Unsupported("remainder of bool tensors");
  Value x = arg_as(ctx, 0, r), y = arg_as(ctx, 1, r);
  Value mod = op(b, "remainder", x, y);
  if (is_unsigned(r.dtype)) return {mod};
  Value signs_differ = b.compare(is_negative(b, mod), is_negative(b, y), "NE");
  Value adjust = op(b, "and", b.compare(mod, splat(b, 0, mod), "NE"), signs_differ);
  return finish(ctx, r, b.select(adjust, b.add(mod, y), mod));
}
TPU_LOWERING("remainder", lower_remainder);

// C's fmod: the result takes the dividend's sign, which is what stablehlo.remainder computes.
std::vector<Value> lower_fmod(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (r.dtype == DType::Bool) throw Unsupported("fmod of bool tensors");
  return finish(ctx, r, op(ctx.b, "remainder", arg_as(ctx, 0, r), arg_as(ctx, 1, r)));
}
TPU_LOWERING("fmod", lower_fmod);

std::vector<Value> lower_pow(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (r.dtype == DType::Bool) throw Unsupported("pow with a bool result");
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r), y = arg_as(ctx, 1, r);
  if (!is_integral(r.dtype) || is_unsigned(r.dtype)) return finish(ctx, r, op(b, "power", x, y));
  // An integer to a negative power is left to the implementation by StableHLO (XLA's emitters
  // disagree); PyTorch's is 1 for a base of 1, +-1 for -1 by the exponent's parity, else 0.
  Value zero = splat(b, 0, y), one = splat(b, 1, x);
  Value non_negative = op(b, "power", x, b.max(y, zero));
  Value odd = b.compare(op(b, "remainder", y, splat(b, 2, y)), zero, "NE");
  Value minus_one = b.compare(x, splat(b, -1, x), "EQ");
  Value of_negative = b.select(b.compare(x, one, "EQ"), one,
                               b.select(minus_one, b.select(odd, splat(b, -1, x), one), splat(b, 0, x)));
  return finish(ctx, r, b.select(b.compare(y, zero, "LT"), of_negative, non_negative));
}
TPU_LOWERING("pow", lower_pow);

// maximum / minimum propagate nan; fmax / fmin prefer the number over a nan.
template <bool is_max, bool ignore_nan>
std::vector<Value> lower_extremum(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r), y = arg_as(ctx, 1, r);
  Value m = is_max ? max_propagating_nan(b, x, y) : min_propagating_nan(b, x, y);
  if (ignore_nan && is_floating(r.dtype)) {
    m = b.select(is_nan(b, x), y, b.select(is_nan(b, y), x, m));
  }
  return finish(ctx, r, m);
}
TPU_LOWERING("maximum", (lower_extremum<true, false>));
TPU_LOWERING("minimum", (lower_extremum<false, false>));
TPU_LOWERING("fmax", (lower_extremum<true, true>));
TPU_LOWERING("fmin", (lower_extremum<false, true>));

std::vector<Value> lower_atan2(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  return finish(ctx, r, op(ctx.b, "atan2", arg_as(ctx, 0, r), arg_as(ctx, 1, r)));
}
TPU_LOWERING("atan2", lower_atan2);

// hypot without overflow: big * sqrt(1 + (small / big)^2); inf wins over nan.
std::vector<Value> lower_hypot(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = op(b, "abs", arg_as(ctx, 0, r)), y = op(b, "abs", arg_as(ctx, 1, r));
  Value big = max_propagating_nan(b, x, y), small = min_propagating_nan(b, x, y);
  Value zero = splat(b, 0, x), inf = splat(b, std::numeric_limits<double>::infinity(), x);
  Value ratio = b.div(small, big);
  Value h = b.mul(big, sqrt_of(b, b.add(splat(b, 1, x), b.mul(ratio, ratio))));
  h = b.select(b.compare(big, zero, "EQ"), zero, h);
  Value any_inf = op(b, "or", b.compare(x, inf, "EQ"), b.compare(y, inf, "EQ"));
  return finish(ctx, r, b.select(any_inf, inf, h));
}
TPU_LOWERING("hypot", lower_hypot);

std::vector<Value> lower_copysign(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value magnitude = op(b, "abs", arg_as(ctx, 0, r));
  Value negative = sign_bit(b, arg_as(ctx, 1, r));
  return finish(ctx, r, b.select(negative, negate(b, magnitude), magnitude));
}
TPU_LOWERING("copysign", lower_copysign);

// x * log(y), with 0 where x == 0 (unless y is nan).
std::vector<Value> lower_xlogy(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r), y = arg_as(ctx, 1, r);
  Value product = b.mul(x, log_of(b, y));
  Value zero = splat(b, 0, x);
  product = b.select(b.compare(x, zero, "EQ"), zero, product);
  return finish(ctx, r, b.select(is_nan(b, y), y, product));
}
TPU_LOWERING("xlogy", lower_xlogy);

// ---------------------------------------------------------------------------------------------
// Bitwise and logical ops.

template <const char* hlo_name>
std::vector<Value> lower_bitwise(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (is_floating(r.dtype)) throw Unsupported(ctx.op + " on float tensors");
  return {op(ctx.b, hlo_name, operand_as(ctx, 0, r.dtype, r.dims), operand_as(ctx, 1, r.dtype, r.dims))};
}
constexpr char kAnd[] = "and";
constexpr char kOr[] = "or";
constexpr char kXor[] = "xor";
TPU_LOWERING("bitwise_and", lower_bitwise<kAnd>);
TPU_LOWERING("bitwise_or", lower_bitwise<kOr>);
TPU_LOWERING("bitwise_xor", lower_bitwise<kXor>);

template <const char* hlo_name>
std::vector<Value> lower_logical(Context& ctx) {
  const Output& out = ctx.outputs.at(0);
  Value x = operand_as(ctx, 0, DType::Bool, out.dims), y = operand_as(ctx, 1, DType::Bool, out.dims);
  return {ctx.b.convert(op(ctx.b, hlo_name, x, y), out.dtype)};
}
TPU_LOWERING("logical_and", lower_logical<kAnd>);
TPU_LOWERING("logical_or", lower_logical<kOr>);
TPU_LOWERING("logical_xor", lower_logical<kXor>);

// Shifts by a negative amount or by at least the bit width give 0 (left) or the sign fill (right).
template <bool left>
std::vector<Value> lower_shift(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (!is_integral(r.dtype)) throw Unsupported(ctx.op + " on non-integer tensors");
  Builder& b = ctx.b;
  Value x = operand_as(ctx, 0, r.dtype, r.dims), amount = operand_as(ctx, 1, r.dtype, r.dims);
  double width = static_cast<double>(itemsize(r.dtype) * 8);
  Value out_of_range = b.compare(amount, splat(b, width, amount), "GE");
  if (!is_unsigned(r.dtype)) out_of_range = op(b, "or", out_of_range, is_negative(b, amount));
  if (left || is_unsigned(r.dtype)) {
    Value shifted = op(b, left ? "shift_left" : "shift_right_logical", x, amount);
    return {b.select(out_of_range, splat(b, 0, x), shifted)};
  }
  Value clamped = b.select(out_of_range, splat(b, width - 1, amount), amount);
  return {op(b, "shift_right_arithmetic", x, clamped)};
}
TPU_LOWERING("bitwise_left_shift", lower_shift<true>);
TPU_LOWERING("bitwise_right_shift", lower_shift<false>);
TPU_LOWERING("__lshift__", lower_shift<true>);
TPU_LOWERING("__rshift__", lower_shift<false>);

// ---------------------------------------------------------------------------------------------
// Comparisons, in the promoted dtype of both operands.

template <const char* direction>
std::vector<Value> lower_compare(Context& ctx) {
  const Output& out = ctx.outputs.at(0);
  DType common = promote(ctx, {0, 1});
  reject_complex(ctx, common);
  Value x = operand_as(ctx, 0, common, out.dims), y = operand_as(ctx, 1, common, out.dims);
  return {ctx.b.convert(ctx.b.compare(x, y, direction), out.dtype)};
}
constexpr char kEq[] = "EQ";
constexpr char kNe[] = "NE";
constexpr char kLt[] = "LT";
constexpr char kLe[] = "LE";
constexpr char kGt[] = "GT";
constexpr char kGe[] = "GE";
TPU_LOWERING("eq", lower_compare<kEq>);
TPU_LOWERING("ne", lower_compare<kNe>);
TPU_LOWERING("lt", lower_compare<kLt>);
TPU_LOWERING("le", lower_compare<kLe>);
TPU_LOWERING("gt", lower_compare<kGt>);
TPU_LOWERING("ge", lower_compare<kGe>);

// ---------------------------------------------------------------------------------------------
// Selection, filling and clamping.

// where(condition, self, other)
std::vector<Value> lower_where(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Value condition = operand_as(ctx, 0, DType::Bool, r.dims);
  Value x = operand_as(ctx, 1, r.dtype, r.dims), y = operand_as(ctx, 2, r.dtype, r.dims);
  return {ctx.b.select(condition, x, y)};
}
TPU_LOWERING("where", lower_where);

// masked_fill(self, mask, value)
std::vector<Value> lower_masked_fill(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Value mask = operand_as(ctx, 1, DType::Bool, r.dims);
  Value fill = operand_as(ctx, 2, r.dtype, r.dims), x = operand_as(ctx, 0, r.dtype, r.dims);
  return {ctx.b.select(mask, fill, x)};
}
TPU_LOWERING("masked_fill", lower_masked_fill);

// fill(self, value): the value, in self's dtype and shape.
std::vector<Value> lower_fill(Context& ctx) {
  const Output& out = ctx.outputs.at(0);
  return {operand_as(ctx, 1, out.dtype, out.dims)};
}
TPU_LOWERING("fill", lower_fill);

std::vector<Value> lower_zero(Context& ctx) { return {ctx.b.zeros(ctx.out_type())}; }
TPU_LOWERING("zero", lower_zero);

// clamp(self, min, max) = min(max(self, min), max): nan in any operand gives nan, and max wins
// when min > max, as in PyTorch. Either bound may be absent.
Value clamp_between(Context& ctx, const ElementwiseResult& r, Value x, size_t min_index, size_t max_index) {
  if (min_index != SIZE_MAX && ctx.has(min_index)) {
    x = max_propagating_nan(ctx.b, x, arg_as(ctx, min_index, r));
  }
  if (max_index != SIZE_MAX && ctx.has(max_index)) {
    x = min_propagating_nan(ctx.b, x, arg_as(ctx, max_index, r));
  }
  return x;
}

template <size_t min_index, size_t max_index>
std::vector<Value> lower_clamp(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (r.dtype == DType::Bool) throw Unsupported("clamp of bool tensors");
  return finish(ctx, r, clamp_between(ctx, r, arg_as(ctx, 0, r), min_index, max_index));
}
TPU_LOWERING("clamp", (lower_clamp<1, 2>));
TPU_LOWERING("clamp_min", (lower_clamp<1, SIZE_MAX>));
TPU_LOWERING("clamp_max", (lower_clamp<SIZE_MAX, 1>));

// nan_to_num(self, nan, posinf, neginf): absent replacements default to 0 and the dtype's
// largest / lowest finite values.
double largest_finite(DType dtype) {
  switch (dtype) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;
    case DType::F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

std::vector<Value> lower_nan_to_num(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  Value x = operand_as(ctx, 0, r.dtype, r.dims);
  if (!is_floating(r.dtype)) return {x};
  auto replacement = [&](size_t i, double fallback) {
    return ctx.has(i) ? operand_as(ctx, i, r.dtype, r.dims) : b.full(fallback, {r.dtype, r.dims});
  };
  Value inf = splat(b, std::numeric_limits<double>::infinity(), x);
  x = b.select(is_nan(b, x), replacement(1, 0.0), x);
  x = b.select(b.compare(x, inf, "EQ"), replacement(2, largest_finite(r.dtype)), x);
  return {b.select(b.compare(x, negate(b, inf), "EQ"), replacement(3, -largest_finite(r.dtype)), x)};
}
TPU_LOWERING("nan_to_num", lower_nan_to_num);

// ---------------------------------------------------------------------------------------------
// Fused multiply-adds.

// addcmul(self, tensor1, tensor2, value) = self + value * tensor1 * tensor2
std::vector<Value> lower_addcmul(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  if (r.dtype == DType::Bool) throw Unsupported("addcmul of bool tensors");
  Value scaled = arg_as(ctx, 1, r);
  if (ctx.has(3)) scaled = b.mul(param_as(ctx, 3, r), scaled);
  return finish(ctx, r, b.add(arg_as(ctx, 0, r), b.mul(scaled, arg_as(ctx, 2, r))));
}
TPU_LOWERING("addcmul", lower_addcmul);

// addcdiv(self, tensor1, tensor2, value) = self + value * tensor1 / tensor2
std::vector<Value> lower_addcdiv(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value numerator = arg_as(ctx, 1, r);
  if (ctx.has(3)) numerator = b.mul(param_as(ctx, 3, r), numerator);
  return finish(ctx, r, b.add(arg_as(ctx, 0, r), b.div(numerator, arg_as(ctx, 2, r))));
}
TPU_LOWERING("addcdiv", lower_addcdiv);

// lerp(self, end, weight): from whichever end is nearer, so that weight 1 gives `end` exactly.
std::vector<Value> lower_lerp(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value start = arg_as(ctx, 0, r), end = arg_as(ctx, 1, r), weight = param_as(ctx, 2, r);
  Value diff = b.sub(end, start);
  Value from_start = b.add(start, b.mul(weight, diff));
  Value from_end = b.sub(end, b.mul(diff, b.sub(splat(b, 1, weight), weight)));
  Value near_start = b.compare(op(b, "abs", weight), splat(b, 0.5, weight), "LT");
  return finish(ctx, r, b.select(near_start, from_start, from_end));
}
TPU_LOWERING("lerp", lower_lerp);

}  // namespace
}  // namespace tpu::lowering
