// torch.special's orthogonal polynomials of a per-element degree n: Chebyshev T, U, V, W and
// their shifted forms, Hermite H and He, Laguerre L, Legendre P.
//
// Each is its three-term recurrence, run as one while loop for the whole tensor: an element stops
// at its own degree (or once its value is nan, as CPU's loop does), and the loop ends when no
// element is left running. The cases CPU's kernels take before the recurrence are reproduced as
// selects, in the same order, so results match where they do not come from the recurrence: n < 0
// is 0, the ends of the interval have closed forms, and above a small degree inside (-1, 1) the
// Chebyshev kinds use their trigonometric forms (cos(n acos x) and its relatives), which bounds
// the loop by the degrees outside the interval. A degree that is not a finite number counts as
// negative, as CPU's conversion to an integer makes it on x86.
#include <cmath>
#include <limits>

#include "lowering/elementwise.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

enum class Kind { ChebyshevT, ChebyshevU, ChebyshevV, ChebyshevW, HermiteH, HermiteHe, Laguerre, Legendre };

struct Polynomial {
  Kind kind;
  bool shifted = false;      // Chebyshev kinds on [0, 1]: y = 2x - 1
  int64_t trig_above = -1;   // Chebyshev kinds: the degree above which |y| < 1 takes the closed form
};

bool is_chebyshev(Kind kind) {
  return kind == Kind::ChebyshevT || kind == Kind::ChebyshevU || kind == Kind::ChebyshevV || kind == Kind::ChebyshevW;
}

// p_{j+1} from p_j = q and p_{j-1} = p, for j >= 1.
Value next_degree(Builder& b, const Polynomial& poly, Value j, Value x, Value y, Value p, Value q) {
  Value one = splat(b, 1, x);
  switch (poly.kind) {
    case Kind::HermiteH:  // 2x q - 2j p
      return b.sub(b.mul(b.add(x, x), q), b.mul(b.add(j, j), p));
    case Kind::HermiteHe:  // x q - j p
      return b.sub(b.mul(x, q), b.mul(j, p));
    case Kind::Laguerre:  // ((2j + 1 - x) q - j p) / (j + 1)
      return b.div(b.sub(b.mul(b.add(b.add(j, j), b.sub(one, x)), q), b.mul(j, p)), b.add(j, one));
    case Kind::Legendre:  // ((2j + 1) x q - j p) / (j + 1)
      return b.div(b.sub(b.mul(b.mul(b.add(b.add(j, j), one), x), q), b.mul(j, p)), b.add(j, one));
    default:  // Chebyshev: 2y q - p
      return b.sub(b.mul(b.add(y, y), q), p);
  }
}

Value first_degree(Builder& b, const Polynomial& poly, Value x, Value y) {
  Value one = splat(b, 1, x);
  switch (poly.kind) {
    case Kind::ChebyshevT: return y;
    case Kind::ChebyshevU: return b.add(y, y);
    case Kind::ChebyshevV: return b.sub(b.add(y, y), one);
    case Kind::ChebyshevW: return b.add(b.add(y, y), one);
    case Kind::HermiteH: return b.add(x, x);
    case Kind::HermiteHe: return x;
    case Kind::Laguerre: return b.sub(one, x);
    case Kind::Legendre: return x;
  }
  return x;
}

// The recurrence up to each element's degree where `running` (n >= 2 and no closed form).
Value recurrence(Builder& b, const Polynomial& poly, Value x, Value y, Value n, Value running) {
  TensorType t = b.type(x), counter{DType::I64, {}};
  const Dims& dims = t.dims;
  auto still_running = [&](Builder& r, Value j, Value q, Value degree, Value go) {
    Value below = r.compare(r.broadcast_to(j, dims), degree, "LT");
    return op(r, "and", op(r, "and", below, go), r.compare(q, q, "EQ"));
  };
  // The loop carries what it reads (XLA's while takes no implicit captures).
  std::vector<TensorType> state{counter, t, t, t, t, b.type(n), b.type(running)};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    Value active = still_running(r, v[0], v[2], v[5], v[6]);
    Value flat = r.reshape(active, {count_over(dims, all_dims(static_cast<int64_t>(dims.size())))});
    return std::vector<Value>{r.reduce(flat, r.constant(0, DType::Bool), {0}, "stablehlo.or")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    Value j = v[0], p = v[1], q = v[2];
    Value active = still_running(r, j, q, v[5], v[6]);
    Value next = next_degree(r, poly, r.broadcast_to(r.convert(j, t.dtype), dims), v[3], v[4], p, q);
    return std::vector<Value>{r.add(j, r.constant(1, DType::I64)), r.select(active, q, p), r.select(active, next, q),
                              v[3], v[4], v[5], v[6]};
  });
  return b.op("stablehlo.while", {b.constant(1, DType::I64), splat(b, 1, x), first_degree(b, poly, x, y), x, y, n,
                                  running},
              state, "", {cond, body})[2];
}

Value acos_of(Builder& b, Value y) {
  Value one = splat(b, 1, y);
  return op(b, "atan2", op(b, "sqrt", b.mul(b.sub(one, y), b.add(one, y))), y);
}

// Inside (-1, 1), above trig_above: the Chebyshev kinds' closed forms in theta = acos(y), with
// CPU's fallbacks where the denominator rounds to nothing.
Value trigonometric(Builder& b, const Polynomial& poly, Value x, Value y, Value nf, Value sign) {
  Value theta = acos_of(b, y), one = splat(b, 1, x), half = splat(b, 0.5, x);
  Value half_theta = b.div(theta, splat(b, 2, x));
  Value twice_n_plus_1 = b.add(b.add(nf, nf), one);
  switch (poly.kind) {
    case Kind::ChebyshevT:
      return op(b, "cosine", b.mul(nf, theta));
    case Kind::ChebyshevU: {
      Value s = op(b, "sine", theta), m = b.add(nf, one);
      return b.select(b.compare(s, splat(b, 0, x), "NE"), b.div(op(b, "sine", b.mul(m, theta)), s),
                      b.div(b.mul(m, op(b, "cosine", b.mul(m, theta))), y));
    }
    case Kind::ChebyshevV:
      return b.select(b.compare(op(b, "sine", half_theta), one, "NE"),
                      b.div(op(b, "cosine", b.mul(b.add(nf, half), theta)), op(b, "cosine", half_theta)),
                      b.mul(sign, twice_n_plus_1));
    default: {  // W
      Value fallback = poly.shifted ? sign : b.select(b.compare(x, splat(b, 0, x), "GT"), twice_n_plus_1, sign);
      return b.select(b.compare(op(b, "cosine", half_theta), one, "NE"),
                      b.div(op(b, "sine", b.mul(b.add(nf, half), theta)), op(b, "sine", half_theta)), fallback);
    }
  }
}

template <Kind kind, bool shifted = false, int64_t trig_above = -1>
std::vector<Value> lower_polynomial(Context& ctx) {
  const Polynomial poly{kind, shifted, trig_above};
  Builder& b = ctx.b;
  ElementwiseResult r = single_or_double_result_of(ctx);
  Value x = arg_as(ctx, 0, r), n_value = arg_as(ctx, 1, r);
  Value one = splat(b, 1, x), zero = splat(b, 0, x);
  // The degree as an integer; nan, infinities and values past int64 count as -1.
  Value representable = b.compare(op(b, "abs", n_value), splat(b, 9.2e18, x), "LT");
  Value n = b.select(representable, b.convert(trunc_float(b, n_value), DType::I64), b.full(-1, {DType::I64, r.dims}));
  Value nf = b.convert(n, r.compute);
  Value i64_zero = b.full(0, {DType::I64, r.dims});
  Value odd = b.compare(b.binary("stablehlo.remainder", n, b.full(2, {DType::I64, r.dims})), i64_zero, "NE");
  Value sign = b.select(odd, splat(b, -1, x), one);
  Value y = shifted ? b.sub(b.add(x, x), one) : x;

  // Closed forms, lowest priority first; `closed` marks the elements that skip the recurrence.
  Value closed = b.compare(n, b.full(2, {DType::I64, r.dims}), "LT");
  Value value = b.select(b.compare(n, b.full(1, {DType::I64, r.dims}), "EQ"), first_degree(b, poly, x, y), one);
  std::vector<std::pair<Value, Value>> cases;  // (where, value), applied in order: later ones win
  if (is_chebyshev(kind)) {
    Value inside = b.compare(op(b, "abs", y), one, "LT");
    Value high = b.compare(n, b.full(static_cast<double>(trig_above), {DType::I64, r.dims}), "GT");
    cases.emplace_back(op(b, "and", inside, high), trigonometric(b, poly, x, y, nf, sign));
    Value at_plus = b.compare(x, one, "EQ");
    Value at_minus = b.compare(x, shifted ? zero : splat(b, -1, x), "EQ");
    Value twice_n_plus_1 = b.add(b.add(nf, nf), one);
    Value plus_value = kind == Kind::ChebyshevU ? b.add(nf, one) : kind == Kind::ChebyshevW ? twice_n_plus_1 : one;
    Value minus_value = kind == Kind::ChebyshevU   ? b.mul(sign, b.add(nf, one))
                        : kind == Kind::ChebyshevV ? b.mul(sign, twice_n_plus_1)
                                                   : sign;
    cases.emplace_back(at_minus, minus_value);
    cases.emplace_back(at_plus, plus_value);
  } else if (kind == Kind::Legendre) {
    cases.emplace_back(b.compare(op(b, "abs", x), one, "EQ"),
                       b.select(b.compare(x, zero, "GT"), one, sign));
  } else if (kind == Kind::Laguerre) {
    cases.emplace_back(b.compare(x, zero, "EQ"), one);
  } else {  // Hermite: CPU gives up above a degree per dtype
    double limit = r.dtype == DType::F64 ? 512 : 128;
    cases.emplace_back(b.compare(nf, splat(b, limit, x), "GT"), splat(b, std::nan(""), x));
  }
  cases.emplace_back(b.compare(n, i64_zero, "LT"), zero);
  for (const auto& [where, _] : cases) closed = op(b, "or", closed, where);
  value = b.select(closed, value, recurrence(b, poly, x, y, n, op(b, "not", closed)));
  for (const auto& [where, closed_value] : cases) value = b.select(where, closed_value, value);
  return finish(ctx, r, value);
}

}  // namespace

TPU_LOWERING("special_chebyshev_polynomial_t", (lower_polynomial<Kind::ChebyshevT, false, 6>));
TPU_LOWERING("special_chebyshev_polynomial_u", (lower_polynomial<Kind::ChebyshevU, false, 8>));
TPU_LOWERING("special_chebyshev_polynomial_v", (lower_polynomial<Kind::ChebyshevV, false, 8>));
TPU_LOWERING("special_chebyshev_polynomial_w", (lower_polynomial<Kind::ChebyshevW, false, 8>));
TPU_LOWERING("special_shifted_chebyshev_polynomial_t", (lower_polynomial<Kind::ChebyshevT, true, 6>));
TPU_LOWERING("special_shifted_chebyshev_polynomial_u", (lower_polynomial<Kind::ChebyshevU, true, 6>));
TPU_LOWERING("special_shifted_chebyshev_polynomial_v", (lower_polynomial<Kind::ChebyshevV, true, 6>));
TPU_LOWERING("special_shifted_chebyshev_polynomial_w", (lower_polynomial<Kind::ChebyshevW, true, 4>));
TPU_LOWERING("special_hermite_polynomial_h", lower_polynomial<Kind::HermiteH>);
TPU_LOWERING("special_hermite_polynomial_he", lower_polynomial<Kind::HermiteHe>);
TPU_LOWERING("special_laguerre_polynomial_l", lower_polynomial<Kind::Laguerre>);
TPU_LOWERING("special_legendre_polynomial_p", lower_polynomial<Kind::Legendre>);

}  // namespace tpu::lowering
