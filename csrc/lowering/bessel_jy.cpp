// Bessel functions of the first and second kind, orders 0 and 1: special_bessel_j0 / j1 /
// y0 / y1. Like bessel_functions.cpp, no table of fitted coefficients:
//   |x| <= 25: Miller's backward recurrence J_{k-1} = (2k / x) J_k - J_{k+1} from order 80 (where
//     J_80(25) is below 1e-31 of J_0), normalized by J_0 + 2 sum J_2k = 1, gives J_0 and J_1 to
//     working precision; the same pass sums Neumann's series
//       Y_0 = (2 / pi) ((log(x / 2) + gamma) J_0 - 2 sum_k (-1)^k J_2k / k),
//       Y_1 = (2 / pi) ((log(x / 2) + gamma) J_1 - J_0 / x + sum_k (-1)^k (J_2k-1 - J_2k+1) / k)
//     (the second is the derivative of the first), whose terms are bounded by 1 / k, so nothing
//     cancels as the power series would. The recurrence is rescaled whenever it grows past 1e10.
//   |x| > 25: Hankel's asymptotic expansion, sqrt(2 / (pi x)) (P cos(chi) - Q sin(chi)) with
//     chi = x - (2 nu + 1) pi / 4 taken apart into cos x and sin x (no large argument minus pi / 4
//     to round), P and Q to 30 terms in float64 (10 in float32), the last below its precision.
//   |x| < 1e-5: the first terms of the power series (the recurrence's 2k / x would overflow).
// The ends follow CPU's kernels: J_0 even, J_1 odd; Y_nu(0) = -inf, Y_nu of a negative number nan;
// nan at infinity (CPU's kernels take cos(inf) there). CPU's float64 kernels are accurate to about
// 1e-7 only (up to 3e-7 off near x = 5); these agree with float64's true values to rounding.
#include <cmath>
#include <limits>
#include <vector>

#include "lowering/elementwise.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

constexpr double kEulerGamma = 0.57721566490153286061;
constexpr double kRecurrenceLimit = 25.0;
constexpr int kStartOrder = 80;  // even
// Terms of P and Q: float64 needs 30 at x = 25; float32 10 (and its range cannot hold the
// coefficients of the 30th: a_58 is 1e58).
int asymptotic_terms(DType dtype) { return dtype == DType::F64 ? 30 : 10; }
constexpr double kTiny = 1e-5;
constexpr double kRescaleAbove = 1e10;

struct Bessel {
  Value j0, j1, y0, y1;
};

// Miller's recurrence and Neumann's sums for x > 0 (elementwise).
Bessel by_recurrence(Builder& b, Value x) {
  TensorType t = b.type(x);
  TensorType counter{DType::I32, {}};
  Value two_over_x = b.div(splat(b, 2, x), x);
  // State: J_{k+1}, J_k, the normalization J_0 + 2 sum J_2m, the Y_0 and Y_1 sums, and k.
  std::vector<TensorType> state{t, t, t, t, t, counter};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    return std::vector<Value>{r.compare(s[5], r.constant(0, DType::I32), "GT")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    Value k = s[5];
    Value k_real = r.broadcast_to(r.convert(k, r.dtype(x)), r.dims(x));
    Value previous = r.sub(r.mul(r.mul(k_real, two_over_x), s[1]), s[0]);  // J_{m}, m = k - 1
    // m's weights, as numbers of the loop counter: m even and > 0 weighs 2 in the normalization
    // and (-1)^(m/2) / (m/2) in Y_0's sum; m odd weighs (-1)^((m+1)/2) / ((m+1)/2) - (-1)^((m-1)/2)
    // / ((m-1)/2) (the second term from m >= 3) in Y_1's.
    Value m = r.sub(k, r.constant(1, DType::I32));
    Value half = r.convert(op(r, "divide", m, r.constant(2, DType::I32)), r.dtype(x));  // floor(m / 2)
    Value odd = r.compare(op(r, "remainder", m, r.constant(2, DType::I32)), r.constant(1, DType::I32), "EQ");
    Value zero = r.constant(0, r.dtype(x)), one = r.constant(1, r.dtype(x));
    auto alternating = [&](Value j) {  // (-1)^j / j for a real scalar j >= 1
      Value parity = op(r, "remainder", j, r.constant(2, r.dtype(x)));
      Value sign = r.sub(one, r.mul(r.constant(2, r.dtype(x)), parity));
      return r.div(sign, j);
    };
    Value even_positive = op(r, "and", op(r, "not", odd), r.compare(m, r.constant(0, DType::I32), "GT"));
    Value norm_weight = r.select(even_positive, r.constant(2, r.dtype(x)),
                                 r.select(r.compare(m, r.constant(0, DType::I32), "EQ"), one, zero));
    Value y0_weight = r.select(even_positive, alternating(r.select(even_positive, half, one)), zero);
    Value upper = r.add(half, one);  // (m + 1) / 2 for odd m
    Value has_lower = r.compare(half, zero, "GT");  // m >= 3
    Value lower_term = r.select(has_lower, alternating(r.select(has_lower, half, one)), zero);
    Value y1_weight = r.select(odd, r.sub(alternating(upper), lower_term), zero);
    Value norm = r.add(s[2], r.mul(r.broadcast_to(norm_weight, r.dims(x)), previous));
    Value y0_sum = r.add(s[3], r.mul(r.broadcast_to(y0_weight, r.dims(x)), previous));
    Value y1_sum = r.add(s[4], r.mul(r.broadcast_to(y1_weight, r.dims(x)), previous));
    Value current = s[1];
    // Keep the recurrence in range: everything it has summed scales together.
    Value large = r.compare(op(r, "abs", previous), splat(r, kRescaleAbove, previous), "GT");
    auto rescaled = [&](Value v) { return r.select(large, r.mul(v, splat(r, 1 / kRescaleAbove, v)), v); };
    return std::vector<Value>{rescaled(current), rescaled(previous), rescaled(norm), rescaled(y0_sum),
                              rescaled(y1_sum), m};
  });
  // J_{M+1} = 0 and J_M = 1e-30 (any small start: the normalization fixes the scale); the top
  // order's own share of the sums is far below precision.
  std::vector<Value> loop = b.op("stablehlo.while",
                                 {b.zeros(t), splat(b, 1e-30, x), b.zeros(t), b.zeros(t), b.zeros(t),
                                  b.constant(kStartOrder, DType::I32)},
                                 state, "", {cond, body});
  Value j1 = b.div(loop[0], loop[2]), j0 = b.div(loop[1], loop[2]);
  Value y0_sum = b.div(loop[3], loop[2]), y1_sum = b.div(loop[4], loop[2]);
  Value two_over_pi = splat(b, 2 / M_PI, x);
  Value log_term = b.add(op(b, "log", b.mul(x, splat(b, 0.5, x))), splat(b, kEulerGamma, x));
  Value y0 = b.mul(two_over_pi, b.sub(b.mul(log_term, j0), b.mul(splat(b, 2, x), y0_sum)));
  Value y1 = b.mul(two_over_pi, b.add(b.sub(b.mul(log_term, j1), b.div(j0, x)), y1_sum));
  return {j0, j1, y0, y1};
}

// Hankel's expansion for x > 0 (accurate above kRecurrenceLimit).
Bessel by_asymptotic(Builder& b, Value x) {
  Value z = b.div(splat(b, 1, x), b.mul(x, x));  // 1 / x^2
  Value cos_x = op(b, "cosine", x), sin_x = op(b, "sine", x);
  Value scale = op(b, "sqrt", b.div(splat(b, 2 / M_PI, x), x));
  Value root_half = splat(b, std::sqrt(0.5), x);
  Bessel out;
  for (int nu = 0; nu < 2; ++nu) {
    // a_k = (mu - 1)(mu - 9)...(mu - (2k - 1)^2) / (k! 8^k), mu = 4 nu^2; P = sum (-1)^k a_2k / x^2k,
    // Q = sum (-1)^k a_2k+1 / x^2k+1, both by Horner's rule in 1 / x^2.
    double mu = 4.0 * nu * nu;
    int terms = asymptotic_terms(b.dtype(x));
    std::vector<double> a{1.0};
    for (int k = 1; k < 2 * terms; ++k) {
      a.push_back(a.back() * (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k));
    }
    Value p = splat(b, 0, x), q = splat(b, 0, x);
    for (int k = terms - 1; k >= 0; --k) {
      double sign = k % 2 ? -1.0 : 1.0;
      p = b.add(splat(b, sign * a[2 * k], x), b.mul(z, p));
      q = b.add(splat(b, sign * a[2 * k + 1], x), b.mul(z, q));
    }
    q = b.div(q, x);
    // chi = x - pi/4 (nu = 0) or x - 3 pi / 4 (nu = 1).
    Value cos_chi = b.mul(root_half, nu == 0 ? b.add(cos_x, sin_x) : b.sub(sin_x, cos_x));
    Value sin_chi = b.mul(root_half, nu == 0 ? b.sub(sin_x, cos_x) : op(b, "negate", b.add(sin_x, cos_x)));
    Value j = b.mul(scale, b.sub(b.mul(p, cos_chi), b.mul(q, sin_chi)));
    Value y = b.mul(scale, b.add(b.mul(p, sin_chi), b.mul(q, cos_chi)));
    (nu == 0 ? out.j0 : out.j1) = j;
    (nu == 0 ? out.y0 : out.y1) = y;
  }
  return out;
}

// The first terms of the power series, for 0 < x < kTiny.
Bessel by_series(Builder& b, Value x) {
  Value quarter_square = b.mul(splat(b, 0.25, x), b.mul(x, x));
  Value half_x = b.mul(splat(b, 0.5, x), x);
  Value j0 = b.sub(splat(b, 1, x), quarter_square);
  Value j1 = b.mul(half_x, b.sub(splat(b, 1, x), b.mul(splat(b, 0.5, x), quarter_square)));
  Value log_term = b.add(op(b, "log", half_x), splat(b, kEulerGamma, x));
  Value two_over_pi = splat(b, 2 / M_PI, x);
  Value y0 = b.mul(two_over_pi, b.add(b.mul(log_term, j0), quarter_square));
  // Y_1 = -2 / (pi x) + (2 / pi) log(x / 2) J_1 - (1 - 2 gamma) x / (2 pi) + O(x^3 log x).
  Value y1 = b.add(b.div(splat(b, -2 / M_PI, x), x),
                   b.sub(b.mul(two_over_pi, b.mul(op(b, "log", half_x), j1)),
                         b.mul(splat(b, (1 - 2 * kEulerGamma) / (2 * M_PI), x), x)));
  return {j0, j1, y0, y1};
}

// The four functions at |x| with CPU's values at 0, at infinity, for negative numbers and for nan;
// `nu` and `second` pick the result.
Value bessel(Builder& b, Value x, int nu, bool second) {
  Value magnitude = op(b, "abs", x);
  Value inf = splat(b, std::numeric_limits<double>::infinity(), x);
  Value finite = b.compare(magnitude, inf, "LT");
  // Each branch reads a safe argument, so no branch's nan or overflow reaches a select.
  Value middle = b.select(op(b, "and", b.compare(magnitude, splat(b, kTiny, x), "GE"),
                             b.compare(magnitude, splat(b, kRecurrenceLimit, x), "LE")),
                          magnitude, splat(b, 1, x));
  Value far = b.select(op(b, "and", b.compare(magnitude, splat(b, kRecurrenceLimit, x), "GT"), finite), magnitude,
                       splat(b, 2 * kRecurrenceLimit, x));
  Value near = b.select(b.compare(magnitude, splat(b, kTiny, x), "LT"), magnitude, splat(b, kTiny / 2, x));
  near = b.select(b.compare(near, splat(b, 0, x), "GT"), near, splat(b, kTiny / 2, x));
  Bessel recurrence = by_recurrence(b, middle), asymptotic = by_asymptotic(b, far), series = by_series(b, near);
  auto pick = [&](const Bessel& f) { return nu == 0 ? (second ? f.y0 : f.j0) : (second ? f.y1 : f.j1); };
  Value value = b.select(b.compare(magnitude, splat(b, kTiny, x), "LT"), pick(series),
                         b.select(b.compare(magnitude, splat(b, kRecurrenceLimit, x), "LE"), pick(recurrence),
                                  pick(asymptotic)));
  Value zero = splat(b, 0, x), nan = splat(b, std::numeric_limits<double>::quiet_NaN(), x);
  value = b.select(finite, value, nan);  // CPU's kernels give nan at infinity (their cos(inf))
  if (second) {
    value = b.select(b.compare(x, zero, "EQ"), op(b, "negate", inf), value);
    value = b.select(b.compare(x, zero, "LT"), nan, value);
  } else if (nu == 0) {
    value = b.select(b.compare(x, zero, "EQ"), splat(b, 1, x), value);
  } else {
    value = b.select(b.compare(x, zero, "EQ"), zero, value);
    value = b.select(b.compare(x, zero, "LT"), op(b, "negate", value), value);  // J_1 is odd
  }
  return b.select(is_nan(b, x), x, value);
}

template <int nu, bool second>
std::vector<Value> lower_bessel(Context& ctx) {
  ElementwiseResult r = single_or_double_result_of(ctx);
  return finish(ctx, r, bessel(ctx.b, arg_as(ctx, 0, r), nu, second));
}

}  // namespace

TPU_LOWERING("special_bessel_j0", (lower_bessel<0, false>));
TPU_LOWERING("special_bessel_j1", (lower_bessel<1, false>));
TPU_LOWERING("special_bessel_y0", (lower_bessel<0, true>));
TPU_LOWERING("special_bessel_y1", (lower_bessel<1, true>));

}  // namespace tpu::lowering
