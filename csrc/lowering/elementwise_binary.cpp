// Binary and ternary elementwise lowerings: arithmetic, division and remainders, powers,
// comparisons, logical and bitwise ops, extrema, and the small ternaries (where, clamp, lerp,
// addcmul, ...).
//
// Every lowering returns ctx.outputs[0]'s dtype and dims, which PyTorch's meta functions computed
// (promoted dtype, broadcast shape). Numbers are runtime values: nothing here branches on one.
#include <cmath>
#include <limits>
#include <vector>

#include "lowering/elementwise.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

// ---------------------------------------------------------------------------------------------
// Binary arithmetic.

// self + alpha * other, for add / sub / rsub. alpha is args[2] when given.
Value scaled_sum(Context& ctx, size_t lhs, size_t rhs, bool subtract) {
  ElementwiseResult r = complex_closed_result_of(ctx);
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
  ElementwiseResult r = complex_closed_result_of(ctx);
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
  bool true_division = rounding_mode.empty();
  // Only true division has a complex form (the rounding modes raise for complex, on CPU too).
  ElementwiseResult r = true_division ? complex_closed_result_of(ctx) : result_of(ctx);
  Builder& b = ctx.b;
  if (r.dtype == DType::Bool) throw Unsupported("division with a bool result");
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
    if (!is_floating(r.dtype) && !is_complex(r.dtype)) throw Unsupported("true division with an integer result");
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
  Value h = b.mul(big, op(b, "sqrt", b.add(splat(b, 1, x), b.mul(ratio, ratio))));
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
  Value product = b.mul(x, op(b, "log", y));
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
  ElementwiseResult r = complex_closed_result_of(ctx);
  Value condition = operand_as(ctx, 0, DType::Bool, r.dims);
  Value x = operand_as(ctx, 1, r.dtype, r.dims), y = operand_as(ctx, 2, r.dtype, r.dims);
  return {ctx.b.select(condition, x, y)};
}
TPU_LOWERING("where", lower_where);

// masked_fill(self, mask, value)
std::vector<Value> lower_masked_fill(Context& ctx) {
  ElementwiseResult r = complex_closed_result_of(ctx);
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

// complex(real, imag) and polar(abs, angle): a complex result from its two real parts.
std::vector<Value> complex_from_parts(Context& ctx, bool polar) {
  Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  if (!is_complex(out.dtype)) throw Unsupported(ctx.op + " with a real result");
  DType part = complex_part_dtype(out.dtype);
  Value first = operand_as(ctx, 0, part, out.dims), second = operand_as(ctx, 1, part, out.dims);
  Value real = first, imag = second;
  if (polar) {  // abs (cos angle, sin angle), as CPU computes it
    real = b.mul(first, op(b, "cosine", second));
    imag = b.mul(first, op(b, "sine", second));
  }
  return {b.op1("stablehlo.complex", {real, imag}, TensorType{out.dtype, out.dims})};
}

std::vector<Value> lower_complex(Context& ctx) { return complex_from_parts(ctx, false); }
std::vector<Value> lower_polar(Context& ctx) { return complex_from_parts(ctx, true); }
TPU_LOWERING("complex", lower_complex);
TPU_LOWERING("polar", lower_polar);

}  // namespace
}  // namespace tpu::lowering
