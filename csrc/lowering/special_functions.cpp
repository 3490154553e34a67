// Special functions (gamma family, inverse error function, nextafter) and the small elementwise
// formulas built on exp and log (logaddexp, sinc, heaviside).
//
// The gamma family and erfinv use CHLO's decompositions, which every XLA backend (CPU, GPU, TPU)
// expands into plain StableHLO at compile time; PyTorch's special cases at poles and integers are
// patched in with selects, so the results match its CPU kernels there too.
#include <cmath>
#include <limits>
#include <vector>

#include "lowering/elementwise.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

Value chlo(Builder& b, const char* name, Value x) { return b.unary(std::string("chlo.") + name, x); }

Value is_integer_valued(Builder& b, Value x) { return b.compare(op(b, "floor", x), x, "EQ"); }

Value lgamma_of(Builder& b, Value x) {
  // lgamma has a pole (+inf) at every non-positive integer and lgamma(+-inf) = +inf.
  Value pole = op(b, "and", is_integer_valued(b, x), b.compare(x, splat(b, 0, x), "LE"));
  pole = op(b, "or", pole, b.compare(op(b, "abs", x), splat(b, kInf, x), "EQ"));
  return b.select(pole, splat(b, kInf, x), chlo(b, "lgamma", x));
}

Value digamma_of(Builder& b, Value x) {
  // PyTorch: digamma(+-0) = -+inf (the sign of the pole's side), nan at negative integers.
  Value zero = splat(b, 0, x);
  Value at_zero = b.compare(x, zero, "EQ");
  Value negative_integer = op(b, "and", is_integer_valued(b, x), b.compare(x, zero, "LT"));
  // -1 / x is -inf at +0 and +inf at -0.
  Value pole_value = op(b, "negate", b.div(splat(b, 1, x), x));
  Value y = chlo(b, "digamma", x);
  y = b.select(negative_integer, splat(b, kNan, x), y);
  return b.select(at_zero, pole_value, y);
}

std::vector<Value> lower_lgamma(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  return finish(ctx, r, lgamma_of(ctx.b, arg_as(ctx, 0, r)));
}

std::vector<Value> lower_digamma(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  return finish(ctx, r, digamma_of(ctx.b, arg_as(ctx, 0, r)));
}

// psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x) for n >= 1. CHLO's zeta series only holds for
// positive x, so x is first shifted past 1 with the recurrence zeta(s, x) = x^-s + zeta(s, x+1),
// in a loop that sums the dropped terms (as PyTorch's own series does for negative x). The loop
// is capped, so an x beyond -kMaxShifts gives an approximation rather than a hang.
Value polygamma_of(Builder& b, int64_t n, Value x) {
  constexpr double kMaxShifts = 1 << 16;
  TensorType t = b.type(x);
  TensorType count{DType::I32, {}};
  auto pending = [&](Builder& r, Value xs, Value steps) {
    Value below = op(r, "and", r.compare(xs, splat(r, 1.0, xs), "LT"),
                     r.broadcast_to(r.compare(steps, r.constant(kMaxShifts, DType::I32), "LT"), r.dims(xs)));
    return below;
  };
  hlo::RegionRef cond = b.region({t, t, count}, [&](Builder& r, const std::vector<Value>& a) {
    Value below = pending(r, a[0], a[2]);
    if (r.rank(below) == 0) return std::vector<Value>{below};
    return std::vector<Value>{r.reduce(below, r.constant(0, DType::Bool), all_dims(r.rank(below)), "stablehlo.or")};
  });
  hlo::RegionRef body = b.region({t, t, count}, [&](Builder& r, const std::vector<Value>& a) {
    Value xs = a[0], acc = a[1], steps = a[2];
    Value below = pending(r, xs, steps);
    Value term = op(r, "power", xs, splat(r, -static_cast<double>(n + 1), xs));
    acc = r.select(below, r.add(acc, term), acc);
    xs = r.select(below, r.add(xs, splat(r, 1.0, xs)), xs);
    return std::vector<Value>{xs, acc, r.add(steps, r.constant(1, DType::I32))};
  });
  std::vector<Value> loop = b.op("stablehlo.while", {x, b.zeros(t), b.constant(0, DType::I32)}, {t, t, count},
                                 "", {cond, body});
  double factorial = 1;
  for (int64_t i = 2; i <= n; ++i) factorial *= static_cast<double>(i);
  double scale = (n % 2 ? 1.0 : -1.0) * factorial;
  Value shifted = b.binary("chlo.polygamma", splat(b, static_cast<double>(n), x), loop[0]);
  return b.add(shifted, b.mul(splat(b, scale, x), loop[1]));
}

// polygamma(n, self): n is a static int.
std::vector<Value> lower_polygamma(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  int64_t n = ctx.arg(0).i;
  Value x = arg_as(ctx, 1, r);
  if (n == 0) return finish(ctx, r, digamma_of(b, x));
  if (n < 0) throw Unsupported("polygamma of a negative order");
  return finish(ctx, r, polygamma_of(b, n, x));
}

std::vector<Value> lower_erfinv(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value y = chlo(b, "erf_inv", x);
  return finish(ctx, r, y);
}

std::vector<Value> lower_nextafter(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  // In the result dtype itself: the next representable number is a property of the dtype.
  Value x = operand_as(ctx, 0, r.dtype, r.dims), y = operand_as(ctx, 1, r.dtype, r.dims);
  if (r.dtype != DType::F32 && r.dtype != DType::F64) throw Unsupported("nextafter in a half dtype");
  return {b.binary("chlo.next_after", x, y)};
}

// logaddexp(a, b) = max + log1p(exp(-|a - b|)); equal infinities give themselves (not nan).
Value logaddexp_of(Builder& b, Value x, Value y, bool base2) {
  Value big = max_propagating_nan(b, x, y);
  Value gap = op(b, "negate", op(b, "abs", b.sub(x, y)));
  Value tail = base2 ? b.div(op(b, "log_plus_one", op(b, "power", splat(b, 2.0, gap), gap)),
                            splat(b, M_LN2, gap))
                     : op(b, "log_plus_one", op(b, "exponential", gap));
  Value result = b.add(big, tail);
  Value same_inf = op(b, "and", b.compare(op(b, "abs", x), splat(b, kInf, x), "EQ"),
                      b.compare(x, y, "EQ"));
  return b.select(same_inf, x, result);
}

template <bool base2>
std::vector<Value> lower_logaddexp(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  return finish(ctx, r, logaddexp_of(ctx.b, arg_as(ctx, 0, r), arg_as(ctx, 1, r), base2));
}

// sinc(x) = sin(pi x) / (pi x), 1 at 0.
std::vector<Value> lower_sinc(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value px = b.mul(x, splat(b, M_PI, x));
  Value y = b.div(op(b, "sine", px), px);
  return finish(ctx, r, b.select(b.compare(x, splat(b, 0, x), "EQ"), splat(b, 1, x), y));
}

// special_entr(x) = -x ln x: 0 at 0, -inf below it (nan stays nan).
std::vector<Value> lower_special_entr(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value zero = splat(b, 0, x);
  Value y = op(b, "negate", b.mul(x, op(b, "log", x)));
  y = b.select(b.compare(x, zero, "EQ"), zero, y);
  return finish(ctx, r, b.select(b.compare(x, zero, "LT"), splat(b, -kInf, x), y));
}

// special_xlog1py(x, y) = x log1p(y), and 0 where x is 0 unless y is nan (as xlogy).
std::vector<Value> lower_special_xlog1py(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = binary_operand_as(ctx, 0, r), y = binary_operand_as(ctx, 1, r);
  Value product = b.mul(x, op(b, "log_plus_one", y));
  Value zero_x = op(b, "and", b.compare(x, splat(b, 0, x), "EQ"), b.compare(y, y, "EQ"));
  return finish(ctx, r, b.select(zero_x, splat(b, 0, x), product));
}

// special_i1e: CHLO's exponentially scaled modified Bessel function of order one.
std::vector<Value> lower_special_i1e(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  return finish(ctx, r, chlo(ctx.b, "bessel_i1e", arg_as(ctx, 0, r)));
}

// Hurwitz zeta(x, q) = sum over k >= 0 of (k + q)^-x, CHLO's (with CPU's poles and domain).
std::vector<Value> lower_special_zeta(Context& ctx) {
  ElementwiseResult r = single_or_double_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r), q = arg_as(ctx, 1, r);
  Value one = splat(b, 1, x), zero = splat(b, 0, x), inf = splat(b, kInf, x), nan = splat(b, kNan, x);
  Value result = b.binary("chlo.zeta", x, q);
  // CPU's cases, in its order (later selects win): x = inf gives q^-inf for q <= 1 and nan (its
  // series' inf / inf) above; poles at q <= 0.
  Value at_inf = b.select(b.compare(q, one, "LT"), inf, b.select(b.compare(q, one, "EQ"), one, nan));
  result = b.select(b.compare(x, inf, "EQ"), at_inf, result);
  Value q_not_positive = b.compare(q, zero, "LE");
  result = b.select(op(b, "and", op(b, "and", q_not_positive, op(b, "not", is_integer_valued(b, q))),
                       op(b, "not", is_integer_valued(b, x))),
                    nan, result);
  result = b.select(op(b, "and", q_not_positive, is_integer_valued(b, q)), inf, result);
  result = b.select(b.compare(x, one, "LT"), nan, result);
  return finish(ctx, r, b.select(b.compare(x, one, "EQ"), inf, result));
}

std::vector<Value> lower_special_erfcx(Context& ctx) {
  ElementwiseResult r = single_or_double_result_of(ctx);
  return finish(ctx, r, erfcx(ctx.b, arg_as(ctx, 0, r)));
}

// log of the standard normal CDF: through erfcx in the lower tail, where the CDF underflows
// (log(erfcx(-t) / 2) - t^2), and log1p near 1.
Value log_ndtr_of(Builder& b, Value x) {
  Value t = b.mul(x, splat(b, M_SQRT1_2, x));
  Value lower = b.sub(op(b, "log", b.div(erfcx(b, negate(b, t)), splat(b, 2, x))), b.mul(t, t));
  Value upper = op(b, "log_plus_one", negate(b, b.div(erfc(b, t), splat(b, 2, x))));
  return b.select(b.compare(x, splat(b, -1, x), "LT"), lower, upper);
}

std::vector<Value> lower_special_log_ndtr(Context& ctx) {
  ElementwiseResult r = single_or_double_result_of(ctx);
  return finish(ctx, r, log_ndtr_of(ctx.b, arg_as(ctx, 0, r)));
}

// The inverse of the standard normal CDF, by Newton steps from a close guess. In the middle,
// erf(x / sqrt 2) = 2 (p - 1/2) from CHLO's erf_inv (p - 1/2 is exact there, and erf keeps its
// relative accuracy near 0). In the tails, log(ndtr(x)) = log(q) with q = min(p, 1 - p) (exact
// too) from Abramowitz and Stegun's rational guess (26.2.23, error below 5e-4): the logarithm
// keeps its relative accuracy however small q is. Three steps reach float64's precision.
std::vector<Value> lower_special_ndtri(Context& ctx) {
  ElementwiseResult r = single_or_double_result_of(ctx);
  Builder& b = ctx.b;
  Value p = arg_as(ctx, 0, r);
  Value one = splat(b, 1, p), half = splat(b, 0.5, p);
  Value log_sqrt_2pi = splat(b, 0.5 * std::log(2 * M_PI), p);
  auto log_density = [&](Value x) { return b.sub(negate(b, b.mul(b.mul(x, x), half)), log_sqrt_2pi); };

  Value y = b.sub(p, half);
  Value central_y = b.max(b.min(y, splat(b, 0.4, p)), splat(b, -0.4, p));
  Value x_mid = b.mul(splat(b, M_SQRT2, p), b.unary("chlo.erf_inv", b.add(central_y, central_y)));
  for (int step = 0; step < 3; ++step) {
    Value f = b.sub(b.mul(half, erf(b, b.mul(x_mid, splat(b, M_SQRT1_2, p)))), central_y);
    x_mid = b.sub(x_mid, b.div(f, op(b, "exponential", log_density(x_mid))));
  }

  Value q = b.min(p, b.sub(one, p));
  double tiny = r.compute == DType::F64 ? 1e-300 : 1e-45;
  Value safe_q = b.max(b.min(q, half), splat(b, tiny, p));  // keeps log finite where q is 0 or out of range
  Value log_q = op(b, "log", safe_q);
  Value t = op(b, "sqrt", b.mul(splat(b, -2, p), log_q));
  auto poly = [&](std::initializer_list<double> coefficients) {  // c0 + c1 t + c2 t^2 + ...
    Value sum = splat(b, 0, p);
    std::vector<double> c(coefficients);
    for (auto it = c.rbegin(); it != c.rend(); ++it) sum = b.add(b.mul(sum, t), splat(b, *it, p));
    return sum;
  };
  Value x = negate(b, b.sub(t, b.div(poly({2.515517, 0.802853, 0.010328}), poly({1, 1.432788, 0.189269, 0.001308}))));
  for (int step = 0; step < 3; ++step) {
    Value l = log_ndtr_of(b, x);
    x = b.sub(x, b.mul(b.sub(l, log_q), op(b, "exponential", b.sub(l, log_density(x)))));
  }
  x = b.select(b.compare(p, half, "GT"), negate(b, x), x);
  Value result = b.select(b.compare(op(b, "abs", y), splat(b, 0.4, p), "LT"), x_mid, x);
  result = b.select(b.compare(p, splat(b, 0, p), "EQ"), splat(b, -kInf, p), result);
  result = b.select(b.compare(p, one, "EQ"), splat(b, kInf, p), result);
  Value outside = op(b, "or", b.compare(p, splat(b, 0, p), "LT"), b.compare(p, one, "GT"));
  result = b.select(op(b, "or", outside, is_nan(b, p)), splat(b, kNan, p), result);
  return finish(ctx, r, result);
}

// special_spherical_bessel_j0(x) = sin(x) / x, by its series near 0 where the quotient loses
// digits (as PyTorch's kernel does below |x| = 0.5).
std::vector<Value> lower_special_spherical_bessel_j0(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value x2 = b.mul(x, x);
  // 1 - x^2/6 + x^4/120 - x^6/5040 + x^8/362880 - x^10/39916800
  Value series = splat(b, -1.0 / 39916800, x);
  for (double c : {1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6, 1.0}) series = b.add(b.mul(series, x2), splat(b, c, x));
  Value quotient = b.div(op(b, "sine", x), x);
  Value small = b.compare(op(b, "abs", x), splat(b, 0.5, x), "LT");
  Value y = b.select(small, series, quotient);
  // sin(x) / x tends to 0 at both infinities, where the quotient is nan.
  return finish(ctx, r, b.select(b.compare(op(b, "abs", x), splat(b, kInf, x), "EQ"), splat(b, 0, x), y));
}

// heaviside(self, values): values where self == 0, else self > 0 (nan gives 0, as on CPU).
std::vector<Value> lower_heaviside(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  Value x = operand_as(ctx, 0, r.dtype, r.dims), values = operand_as(ctx, 1, r.dtype, r.dims);
  Value zero = b.zeros({r.dtype, r.dims});
  Value positive = b.convert(b.compare(x, zero, "GT"), r.dtype);
  if (r.dtype == DType::Bool) positive = x;
  return {b.select(b.compare(x, zero, "EQ"), values, positive)};
}


// angle(self): atan2(im, re) of a complex tensor, in its real dtype; of a real one pi for
// negative numbers, 0 otherwise, NaN stays NaN.
std::vector<Value> lower_angle(Context& ctx) {
  Builder& b = ctx.b;
  if (is_complex(b.dtype(ctx.tensor(0)))) {
    Value z = ctx.tensor(0);
    const Output& out = ctx.outputs.at(0);
    TensorType part{complex_part_dtype(b.dtype(z)), b.dims(z)};
    if (out.dims != part.dims || out.dtype != part.dtype) throw Unsupported("angle of this form");
    return {b.binary("stablehlo.atan2", b.op1("stablehlo.imag", {z}, part), b.op1("stablehlo.real", {z}, part))};
  }
  ElementwiseResult r = float_result_of(ctx);
  Value x = arg_as(ctx, 0, r);
  Value angle = b.select(b.compare(x, splat(b, 0, x), "LT"), splat(b, M_PI, x), splat(b, 0, x));
  return finish(ctx, r, b.select(b.compare(x, x, "NE"), x, angle));
}

// frexp(self) -> (mantissa, int32 exponent) with x = mantissa 2^exponent, |mantissa| in [0.5, 1),
// read off the float's bits; subnormals are scaled into the normal range first. Zero, inf and
// NaN give themselves and exponent 0. Half types go through f32, which holds them exactly.
std::vector<Value> lower_frexp(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType dtype = b.dtype(x);
  if (!is_floating(dtype)) throw Unsupported("frexp of a non-floating tensor");
  bool wide = dtype == DType::F64;
  DType f = wide ? DType::F64 : DType::F32, bits = wide ? DType::I64 : DType::I32;
  int mantissa_bits = wide ? 52 : 23;
  double bias = wide ? 1022 : 126, exponent_mask = wide ? 0x7ff : 0xff, scale_bits = wide ? 54 : 24;
  Value v = b.convert(x, f);
  TensorType ft = b.type(v), it{bits, b.dims(v)};
  Value tiny = b.compare(op(b, "abs", v), b.full(wide ? 2.2250738585072014e-308 : 1.1754943508222875e-38, ft), "LT");
  Value scaled = b.select(tiny, b.mul(v, b.full(std::ldexp(1.0, static_cast<int>(scale_bits)), ft)), v);
  Value raw = b.bitcast_convert(scaled, bits);
  Value field = b.binary("stablehlo.and", b.op1("stablehlo.shift_right_logical", {raw, b.full(mantissa_bits, it)}, it),
                         b.full(exponent_mask, it));
  Value exponent = b.sub(field, b.full(bias, it));
  exponent = b.select(tiny, b.sub(exponent, b.full(scale_bits, it)), exponent);
  // Keep sign and fraction, set the exponent field to that of 0.5.
  Value field_bits = b.op1("stablehlo.shift_left", {b.full(exponent_mask, it), b.full(mantissa_bits, it)}, it);
  Value fraction = b.binary("stablehlo.and", raw, b.unary("stablehlo.not", field_bits));
  Value half = b.op1("stablehlo.shift_left", {b.full(bias, it), b.full(mantissa_bits, it)}, it);
  Value mantissa = b.bitcast_convert(b.binary("stablehlo.or", fraction, half), f);
  Value special = b.binary("stablehlo.or", b.compare(v, b.zeros(ft), "EQ"),
                           b.unary("stablehlo.not", b.compare(op(b, "abs", v), b.full(kInf, ft), "LT")));
  mantissa = b.select(special, v, mantissa);
  exponent = b.select(special, b.zeros(it), exponent);
  return {as_output(ctx, mantissa, 0), as_output(ctx, b.convert(exponent, DType::I32), 1)};
}
}  // namespace

TPU_LOWERING("lgamma", lower_lgamma);
TPU_LOWERING("digamma", lower_digamma);
TPU_LOWERING("polygamma", lower_polygamma);
TPU_LOWERING("erfinv", lower_erfinv);
TPU_LOWERING("nextafter", lower_nextafter);
TPU_LOWERING("logaddexp", lower_logaddexp<false>);
TPU_LOWERING("logaddexp2", lower_logaddexp<true>);
TPU_LOWERING("sinc", lower_sinc);
TPU_LOWERING("special_entr", lower_special_entr);
TPU_LOWERING("special_xlog1py", lower_special_xlog1py);
TPU_LOWERING("special_i1e", lower_special_i1e);
TPU_LOWERING("special_spherical_bessel_j0", lower_special_spherical_bessel_j0);
TPU_LOWERING("special_zeta", lower_special_zeta);
TPU_LOWERING("special_erfcx", lower_special_erfcx);
TPU_LOWERING("special_log_ndtr", lower_special_log_ndtr);
TPU_LOWERING("special_ndtri", lower_special_ndtri);
TPU_LOWERING("heaviside", lower_heaviside);
TPU_LOWERING("angle", lower_angle);
TPU_LOWERING("frexp", lower_frexp);

}  // namespace tpu::lowering
