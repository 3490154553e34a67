// Modified Bessel functions of orders 0 and 1, plain and exponentially scaled: i0, special_i0e,
// special_i1, special_modified_bessel_i0 / i1 / k0 / k1, special_scaled_modified_bessel_k0 / k1.
// (special_i1e is CHLO's bessel_i1e, in special_functions.cpp.)
//
// No table of fitted coefficients: each function is evaluated from a representation that
// converges to the precision of float64 on its range, so one lowering serves float32 and float64.
//   I_nu, |x| <= 20: the power series sum_k (x^2/4)^k / (k! (k + nu)!) (x/2)^nu, 45 terms, all
//     positive, so the sum keeps its relative accuracy.
//   I_nu, |x| > 20: the asymptotic expansion e^x / sqrt(2 pi x) sum_k (-1)^k a_k(nu) / x^k, whose
//     terms shrink below e^-40 of the first before they grow again.
//   K_nu, x <= 1: the series of Abramowitz and Stegun 9.6.11 (logarithm times I_nu plus a sum with
//     harmonic numbers).
//   K_nu, x > 1: e^x K_nu(x) = integral over t >= 0 of exp(-2 x sinh^2(t / 2)) cosh(nu t), by the
//     trapezoidal rule up to where the integrand is below e^-45. The integrand is even and
//     analytic in the strip |Im t| < pi / 2, so the rule's error falls like exp(-pi^2 / h): at
//     most 40 steps give float64's precision for every x.
// The ends follow CPU's kernels: I_nu(+-inf) is nan, its scaled form 0; K_nu(0) is inf, K_nu(x < 0)
// nan, K_nu(inf) 0.
#include <cmath>
#include <limits>
#include <vector>

#include "lowering/elementwise.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

constexpr double kEulerGamma = 0.57721566490153286061;
constexpr double kSeriesLimit = 20.0;  // I_nu: series at or below, asymptotic above
constexpr int kSeriesTerms = 45;
constexpr int kAsymptoticTerms = 30;
constexpr int kTrapezoidSteps = 40;

// sum over k < n of w_k prod_{j=1..k} (z r_j), nested as w_0 + z r_1 (w_1 + z r_2 (w_2 + ...)).
// Each step adds a weight, so XLA cannot fold the ratios into one product of constants (which
// over- or underflows in float32: 44!^2 does) as it may fold a running term's repeated multiplies.
Value nested_series(Builder& b, Value z, const std::vector<double>& ratios, const std::vector<double>& weights) {
  Value sum = splat(b, weights.back(), z);
  for (size_t k = weights.size() - 1; k >= 1; --k) {
    sum = b.add(splat(b, weights[k - 1], z), b.mul(b.mul(z, splat(b, ratios[k], z)), sum));
  }
  return sum;
}

// r_k = 1 / (k (k + nu)) for k = 1..n-1 (r_0 unused): the power series' ratios in (x/2)^2.
std::vector<double> series_ratios(int nu, int n) {
  std::vector<double> ratios(n, 0.0);
  for (int k = 1; k < n; ++k) ratios[k] = 1.0 / (static_cast<double>(k) * (k + nu));
  return ratios;
}

// sum_k (x^2/4)^k / (k! (k + nu)!) for a = |x| <= kSeriesLimit.
Value i_series(Builder& b, Value a, int nu) {
  Value quarter_square = b.div(b.mul(a, a), splat(b, 4, a));
  return nested_series(b, quarter_square, series_ratios(nu, kSeriesTerms), std::vector<double>(kSeriesTerms, 1.0));
}

// e^-a I_nu(a) for a > kSeriesLimit.
Value i_asymptotic_scaled(Builder& b, Value a, int nu) {
  double mu = 4.0 * nu * nu;
  std::vector<double> ratios(kAsymptoticTerms, 0.0);
  for (int k = 1; k < kAsymptoticTerms; ++k) {
    double odd = 2.0 * k - 1;
    ratios[k] = -(mu - odd * odd) / (8.0 * k);
  }
  Value sum = nested_series(b, b.div(splat(b, 1, a), a), ratios, std::vector<double>(kAsymptoticTerms, 1.0));
  return b.div(sum, op(b, "sqrt", b.mul(splat(b, 2 * M_PI, a), a)));
}

Value modified_i(Builder& b, Value x, int nu, bool scaled) {
  Value a = op(b, "abs", x), limit = splat(b, kSeriesLimit, x);
  Value near = b.min(a, limit), far = b.max(a, limit);
  Value series = i_series(b, near, nu);
  if (nu == 1) series = b.mul(series, b.div(near, splat(b, 2, x)));
  if (scaled) series = b.mul(series, op(b, "exponential", negate(b, near)));
  Value asymptotic = i_asymptotic_scaled(b, far, nu);
  if (!scaled) asymptotic = b.mul(asymptotic, op(b, "exponential", far));  // inf * 0 = nan at inf, as CPU
  Value value = b.select(b.compare(a, limit, "LE"), series, asymptotic);
  if (nu == 1) value = b.select(is_negative(b, x), negate(b, value), value);
  return b.select(is_nan(b, x), x, value);
}

// K_nu(x) for 0 < x <= 1 (A&S 9.6.11).
Value k_series(Builder& b, Value x, int nu) {
  constexpr int kTerms = 15;
  Value half = b.div(x, splat(b, 2, x));
  Value quarter_square = b.mul(half, half);
  Value log_half = op(b, "log", half);
  std::vector<double> ratios = series_ratios(nu, kTerms), ones(kTerms, 1.0), weights(kTerms);
  // nu = 0: sum_k H_k u_k; nu = 1: sum_k (H_k + H_{k+1} - 2 gamma) v_k.
  double harmonic = 0;  // H_k
  for (int k = 0; k < kTerms; ++k) {
    if (k > 0) harmonic += 1.0 / k;
    weights[k] = nu == 0 ? harmonic : harmonic + (harmonic + 1.0 / (k + 1)) - 2 * kEulerGamma;
  }
  Value i_sum = nested_series(b, quarter_square, ratios, ones);
  Value weighted = nested_series(b, quarter_square, ratios, weights);
  if (nu == 0) return b.sub(weighted, b.mul(b.add(log_half, splat(b, kEulerGamma, x)), i_sum));
  Value i1 = b.mul(half, i_sum);
  return b.sub(b.add(b.div(splat(b, 1, x), x), b.mul(log_half, i1)), b.mul(b.div(half, splat(b, 2, x)), weighted));
}

// e^x K_nu(x) for x >= 1, by the trapezoidal rule.
Value k_integral_scaled(Builder& b, Value x, int nu) {
  // Up to T with 2 x sinh^2(T/2) = 45: cosh T = 1 + 45 / x, T = log1p(e + sqrt(e (2 + e))).
  Value excess = b.div(splat(b, 45, x), x);
  Value upper = op(b, "log_plus_one", b.add(excess, op(b, "sqrt", b.mul(excess, b.add(excess, splat(b, 2, x))))));
  Value h = b.div(upper, splat(b, kTrapezoidSteps, x));
  Value sum = splat(b, 0, x);
  for (int i = 0; i <= kTrapezoidSteps; ++i) {
    Value t = b.mul(h, splat(b, i, x));
    // sinh(t/2) from expm1, which keeps its relative accuracy for small t (large x).
    Value u = b.div(t, splat(b, 2, x));
    Value half_sinh = b.mul(splat(b, 0.5, x), b.sub(op(b, "exponential_minus_one", u),
                                                    op(b, "exponential_minus_one", negate(b, u))));
    Value f = op(b, "exponential", negate(b, b.mul(b.add(x, x), b.mul(half_sinh, half_sinh))));
    if (nu == 1) {
      Value cosh_t = b.mul(splat(b, 0.5, x), b.add(op(b, "exponential", t), op(b, "exponential", negate(b, t))));
      f = b.mul(f, cosh_t);
    }
    sum = b.add(sum, (i == 0 || i == kTrapezoidSteps) ? b.mul(f, splat(b, 0.5, x)) : f);
  }
  return b.mul(sum, h);
}

Value modified_k(Builder& b, Value x, int nu, bool scaled) {
  Value one = splat(b, 1, x), zero = splat(b, 0, x);
  // Each branch gets an argument inside its range (its value is dropped elsewhere).
  Value near = b.select(op(b, "and", b.compare(x, zero, "GT"), b.compare(x, one, "LE")), x, one);
  Value far = b.max(x, one);
  Value series = k_series(b, near, nu);
  if (scaled) series = b.mul(series, op(b, "exponential", near));
  Value integral = k_integral_scaled(b, far, nu);
  if (!scaled) integral = b.mul(integral, op(b, "exponential", negate(b, far)));
  Value value = b.select(b.compare(x, one, "LE"), series, integral);
  value = b.select(is_negative(b, x), splat(b, std::numeric_limits<double>::quiet_NaN(), x), value);
  Value inf = splat(b, std::numeric_limits<double>::infinity(), x);
  value = b.select(b.compare(x, inf, "EQ"), zero, value);
  value = b.select(b.compare(x, zero, "EQ"), inf, value);
  return b.select(is_nan(b, x), x, value);
}

// i0, i0e and i1 take float16 and bfloat16 on CPU (computing in float32); the modified_bessel_*
// functions do not.
template <int nu, bool scaled, bool half_precision = false>
std::vector<Value> lower_modified_i(Context& ctx) {
  ElementwiseResult r = half_precision ? float_result_of(ctx) : single_or_double_result_of(ctx);
  return finish(ctx, r, modified_i(ctx.b, arg_as(ctx, 0, r), nu, scaled));
}

template <int nu, bool scaled>
std::vector<Value> lower_modified_k(Context& ctx) {
  ElementwiseResult r = single_or_double_result_of(ctx);
  return finish(ctx, r, modified_k(ctx.b, arg_as(ctx, 0, r), nu, scaled));
}

}  // namespace

TPU_LOWERING("i0", (lower_modified_i<0, false, true>));
TPU_LOWERING("special_i0e", (lower_modified_i<0, true, true>));
TPU_LOWERING("special_i1", (lower_modified_i<1, false, true>));
TPU_LOWERING("special_modified_bessel_i0", (lower_modified_i<0, false>));
TPU_LOWERING("special_modified_bessel_i1", (lower_modified_i<1, false>));
TPU_LOWERING("special_modified_bessel_k0", (lower_modified_k<0, false>));
TPU_LOWERING("special_modified_bessel_k1", (lower_modified_k<1, false>));
TPU_LOWERING("special_scaled_modified_bessel_k0", (lower_modified_k<0, true>));
TPU_LOWERING("special_scaled_modified_bessel_k1", (lower_modified_k<1, true>));

}  // namespace tpu::lowering
