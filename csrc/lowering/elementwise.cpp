// The shared part of the elementwise lowerings (lowering/elementwise.h): PyTorch's dtype rules
// for elementwise results and operands, small builders, and erf / erfc, which StableHLO lacks.
#include <cmath>
#include <limits>
#include <vector>

#include "lowering/elementwise.h"

namespace tpu::lowering {

using hlo::Builder;

ElementwiseResult result_of(const Context& ctx) {
  const Output& out = ctx.outputs.at(0);
  if (is_complex(out.dtype)) throw Unsupported(ctx.op + " on complex tensors");
  // A complex operand with a real result (abs, angle, isnan of a complex tensor): converting it
  // to the real dtype would keep only its real part and give a wrong answer silently.
  for (size_t i = 0; i < ctx.args.size(); ++i) {
    if (ctx.args[i].kind == Arg::Kind::Tensor && is_complex(ctx.b.dtype(ctx.tensor(i)))) {
      throw Unsupported(ctx.op + " of a complex tensor");
    }
  }
  return {out.dtype, accumulation_type(out.dtype), out.dims};
}

ElementwiseResult complex_closed_result_of(const Context& ctx) {
  const Output& out = ctx.outputs.at(0);
  if (!is_complex(out.dtype)) return result_of(ctx);
  return {out.dtype, out.dtype, out.dims};
}

ElementwiseResult float_result_of(const Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (!is_floating(r.dtype)) throw Unsupported(ctx.op + " with a non-floating result");
  return r;
}

ElementwiseResult single_or_double_result_of(const Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  if (r.dtype != DType::F32 && r.dtype != DType::F64) throw Unsupported(ctx.op + ": CPU computes float32 and float64 only");
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

Value is_negative(Builder& b, Value x) { return b.compare(x, splat(b, 0, x), "LT"); }
Value negate(Builder& b, Value x) { return op(b, "negate", x); }

Value sign_bit(Builder& b, Value x) {
  DType bits = b.dtype(x) == DType::F64 ? DType::I64 : DType::I32;
  Value wide = b.dtype(x) == DType::F64 || b.dtype(x) == DType::F32 ? x : b.convert(x, DType::F32);
  Value as_int = b.bitcast_convert(wide, bits);
  return is_negative(b, as_int);
}

Value trunc_float(Builder& b, Value x) {
  return b.select(is_negative(b, x), op(b, "ceil", x), op(b, "floor", x));
}

void reject_complex(const Context& ctx, DType dtype) {
  if (is_complex(dtype)) throw Unsupported(ctx.op + " on complex tensors");
}

std::string string_arg(const Context& ctx, size_t i) {
  if (!ctx.has(i)) return "";
  if (ctx.arg(i).kind != Arg::Kind::String) throw Unsupported(ctx.op + ": expected a string");
  return ctx.arg(i).s;
}

namespace {

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

// exp(a^2) erfc(a) for a >= 0.5 (inf included).
Value erfcx_for_large(Builder& b, Value a) {
  bool f64 = b.dtype(a) == DType::F64;
  Value t = b.div(splat(b, 1.0, a), a);
  Value ratio = f64 ? rational(b, t, kErfc64P, kErfc64Q) : rational(b, t, kErfc32P, kErfc32Q);
  return b.mul(ratio, t);
}

// erfc(a) for a >= 0.5.
Value erfc_tail(Builder& b, Value a) {
  a = b.min(a, splat(b, 30.0, a));  // erfc underflows long before; keeps inf from making nan
  return b.mul(exp_neg_square(b, a), erfcx_for_large(b, a));
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

Value erfcx(Builder& b, Value x) {
  check_erf_dtype(b, x);
  Value two = splat(b, 2.0, x), half = splat(b, 0.5, x);
  Value grown = op(b, "exponential", b.mul(x, x));
  Value large = erfcx_for_large(b, b.max(x, half));
  // Below -0.5: erfc(x) = 2 - erfc(-x), so erfcx(x) = 2 exp(x^2) - erfcx(-x).
  Value negative = b.sub(b.mul(two, grown), erfcx_for_large(b, b.max(negate(b, x), half)));
  Value middle = b.mul(grown, erfc(b, x));
  Value result = b.select(b.compare(x, half, "GE"), large,
                          b.select(b.compare(x, negate(b, half), "LE"), negative, middle));
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

}  // namespace tpu::lowering
