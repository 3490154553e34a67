// The regularized incomplete gamma functions igamma = P(a, x) and igammac = Q(a, x) = 1 - P
// (torch.special.gammainc / gammaincc).
//
// Each element takes the expansion that converges fast and without cancellation where it lies,
// as CPU's Cephes-derived kernel does: the power series of P where x <= 1 or x <= a, and the
// continued fraction of Q (modified Lentz) elsewhere; the other function is one minus it. Both
// run as while loops until every element has converged, so no iteration count is baked in.
// CPU's kernel also switches to Temme's uniform asymptotic expansion for large a near x; the
// two agree to rounding there, the loops just take more steps.
#include <cmath>
#include <functional>
#include <limits>

#include "lowering/elementwise.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
// Both expansions take about sqrt(a) steps where x is near a: this cap (a hang guard, not an
// accuracy setting) lets a up to about 1e7 converge.
constexpr int kMaxSteps = 1 << 16;

Value any_of(Builder& b, Value flags) {
  if (b.rank(flags) == 0) return flags;
  return b.reduce(flags, b.constant(0, DType::Bool), all_dims(b.rank(flags)), "stablehlo.or");
}

// Runs `step` over the loop state while any element is active and fewer than kMaxSteps ran.
// state[0] is the active mask; step returns the next state.
std::vector<Value> converge(Builder& b, std::vector<Value> state,
                            const std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>& step) {
  std::vector<TensorType> types;
  for (Value v : state) types.push_back(b.type(v));
  TensorType counter{DType::I32, {}};
  types.push_back(counter);
  state.push_back(b.constant(0, DType::I32));
  hlo::RegionRef cond = b.region(types, [&](Builder& r, const std::vector<Value>& s) {
    Value more = r.compare(s.back(), r.constant(kMaxSteps, DType::I32), "LT");
    return std::vector<Value>{op(r, "and", any_of(r, s[0]), more)};
  });
  hlo::RegionRef body = b.region(types, [&](Builder& r, const std::vector<Value>& s) {
    std::vector<Value> next = step(r, std::vector<Value>(s.begin(), s.end() - 1));
    next.push_back(r.add(s.back(), r.constant(1, DType::I32)));
    return next;
  });
  std::vector<Value> loop = b.op("stablehlo.while", state, types, "", {cond, body});
  loop.pop_back();
  return loop;
}

// sum over n >= 0 of x^n / (a (a+1) ... (a+n)), for the active elements.
Value lower_series(Builder& b, Value a, Value x, Value active) {
  double eps = machine_epsilon(b.dtype(a));
  Value first = b.div(splat(b, 1, a), a);
  std::vector<Value> out = converge(b, {active, a, first, first}, [&](Builder& r, const std::vector<Value>& s) {
    Value on = s[0], ap = r.add(s[1], splat(r, 1, s[1]));
    Value term = r.mul(s[2], r.div(x, ap));
    Value sum = r.select(on, r.add(s[3], term), s[3]);
    Value small = r.compare(op(r, "abs", term), r.mul(op(r, "abs", sum), splat(r, eps, sum)), "LT");
    return std::vector<Value>{op(r, "and", on, op(r, "not", small)), ap, term, sum};
  });
  return out[3];
}

// The continued fraction 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (...))), for the
// active elements, by the modified Lentz method.
Value upper_fraction(Builder& b, Value a, Value x, Value active) {
  DType dtype = b.dtype(a);
  double eps = machine_epsilon(dtype);
  double tiny = dtype == DType::F64 ? 1e-300 : 1e-30;
  Value denominator = b.sub(b.add(x, splat(b, 1, x)), a);
  Value d = b.div(splat(b, 1, x), denominator);
  std::vector<Value> start{active, splat(b, 0, x), denominator, splat(b, 1 / tiny, x), d, d};
  std::vector<Value> out = converge(b, start, [&](Builder& r, const std::vector<Value>& s) {
    Value on = s[0], i = r.add(s[1], splat(r, 1, s[1]));
    Value an = op(r, "negate", r.mul(i, r.sub(i, a)));
    Value bn = r.add(s[2], splat(r, 2, s[2]));
    auto away_from_zero = [&](Value v) {
      return r.select(r.compare(op(r, "abs", v), splat(r, tiny, v), "LT"), splat(r, tiny, v), v);
    };
    Value dn = r.div(splat(r, 1, bn), away_from_zero(r.add(r.mul(an, s[4]), bn)));
    Value cn = away_from_zero(r.add(bn, r.div(an, s[3])));
    Value delta = r.mul(dn, cn);
    Value h = r.select(on, r.mul(s[5], delta), s[5]);
    Value done = r.compare(op(r, "abs", r.sub(delta, splat(r, 1, delta))), splat(r, eps, delta), "LT");
    return std::vector<Value>{op(r, "and", on, op(r, "not", done)), i, bn, cn, dn, h};
  });
  return out[5];
}

// log(x^a e^-x / Gamma(a)) for a, x > 0. Gamma(a) comes from Stirling's series at a + n >= s0
// (a(a+1)...(a+n-1) Gamma(a) = Gamma(a + n)), whose terms are Bernoulli numbers; s0 is 10 in
// double precision and 4 in single, where fewer, smaller terms round less. Where a >= s0
// the sum is rearranged as a (log1p(t) - t) with t = (x - a) / a, so that a log x, x and
// log Gamma(a), each near a log a, do not cancel where x is near a: the one regime whose result
// is neither 0 nor 1, and the one where CPU's Temme expansion is accurate to rounding.
Value log_prefactor(Builder& b, Value a, Value x) {
  int steps = b.dtype(a) == DType::F64 ? 10 : 4;
  Value shifted = a, product = splat(b, 1, a), start = splat(b, steps, a), one = splat(b, 1, a);
  for (int k = 0; k < steps; ++k) {
    Value low = b.compare(shifted, start, "LT");
    product = b.select(low, b.mul(product, shifted), product);
    shifted = b.select(low, b.add(shifted, one), shifted);
  }
  // (1/s) (B2/2 + B4/(4*3) z + B6/(6*5) z^2 + ...), z = 1/s^2.
  const double coefficients[] = {1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680, 1.0 / 1188, -691.0 / 360360, 1.0 / 156};
  Value z = b.div(one, b.mul(shifted, shifted));
  Value series = splat(b, coefficients[6], a);
  for (int k = 5; k >= 0; --k) series = b.add(splat(b, coefficients[k], a), b.mul(z, series));
  Value correction = b.div(series, shifted);
  Value half_log_two_pi = splat(b, 0.5 * std::log(2 * M_PI), a), half = splat(b, 0.5, a);
  Value t = b.div(b.sub(x, a), a);
  Value near = b.sub(b.add(b.mul(a, b.sub(op(b, "log_plus_one", t), t)), b.mul(half, op(b, "log", a))),
                     b.add(half_log_two_pi, correction));
  Value log_gamma = b.add(b.sub(b.mul(b.sub(shifted, half), op(b, "log", shifted)), shifted),
                          b.add(half_log_two_pi, correction));
  Value direct = b.add(b.sub(b.sub(b.mul(a, op(b, "log", x)), x), log_gamma), op(b, "log", product));
  return b.select(b.compare(a, start, "GE"), near, direct);
}

// P(a, x) (upper = false) or Q(a, x), with CPU's values at the domain's edges.
Value incomplete_gamma(Builder& b, Value a, Value x, bool upper) {
  Value zero = splat(b, 0, a), one = splat(b, 1, a), nan = splat(b, kNan, a), inf = splat(b, kInf, a);
  Value a_inf = b.compare(op(b, "abs", a), inf, "EQ"), x_inf = b.compare(op(b, "abs", x), inf, "EQ");
  Value inside = op(b, "and", b.compare(a, zero, "GT"), b.compare(x, zero, "GT"));  // false for nan too
  inside = op(b, "and", inside, op(b, "not", op(b, "or", a_inf, x_inf)));
  Value by_series = op(b, "or", b.compare(x, one, "LE"), b.compare(x, a, "LE"));
  Value series = lower_series(b, a, x, op(b, "and", inside, by_series));
  Value fraction = upper_fraction(b, a, x, op(b, "and", inside, op(b, "not", by_series)));
  Value scale = op(b, "exponential", log_prefactor(b, a, x));
  Value p = b.select(by_series, b.mul(series, scale), b.sub(one, b.mul(fraction, scale)));
  Value q = b.select(by_series, b.sub(one, b.mul(series, scale)), b.mul(fraction, scale));
  Value result = upper ? q : p;
  // CPU's cases, first match wins: applied last to first.
  Value at_limit_x = upper ? zero : one;
  result = b.select(x_inf, at_limit_x, result);
  result = b.select(a_inf, b.select(x_inf, nan, upper ? one : zero), result);
  result = b.select(b.compare(x, zero, "EQ"), upper ? one : zero, result);
  Value a_zero = b.select(b.compare(x, zero, "GT"), upper ? zero : one, nan);
  result = b.select(b.compare(a, zero, "EQ"), a_zero, result);
  Value negative = op(b, "or", b.compare(x, zero, "LT"), b.compare(a, zero, "LT"));
  return b.select(negative, nan, result);
}

template <bool upper>
std::vector<Value> lower_igamma(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Value a = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  return finish(ctx, r, incomplete_gamma(ctx.b, a, x, upper));
}

}  // namespace

TPU_LOWERING("igamma", lower_igamma<false>);
TPU_LOWERING("igammac", lower_igamma<true>);

}  // namespace tpu::lowering
