// Random-number ops. Bits come from stablehlo.rng_bit_generator keyed by the generator's
// (seed, offset) pair, which arrives as the runtime argument ctx.rng_state, so the same seed gives
// the same numbers in every mode and a new offset never recompiles.
#include <cmath>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

// Uniform floats in [0, 1) of `compute` dtype (F32 or F64) built from the mantissa bits.
Value uniform01(Builder& b, Value state, const Dims& dims, DType compute) {
  bool wide = compute == DType::F64;
  DType bits_type = wide ? DType::U64 : DType::U32;
  TensorType bits_tt{bits_type, dims};
  Value bits = b.random_bits(state, dims, bits_type);
  Value mantissa = b.op1("stablehlo.shift_right_logical", {bits, b.full(wide ? 12 : 9, bits_tt)}, bits_tt);
  double one_bits = wide ? 4607182418800017408.0 : 1065353216.0;  // bit patterns of 1.0
  Value in_one_two = b.bitcast_convert(b.op1("stablehlo.or", {mantissa, b.full(one_bits, bits_tt)}, bits_tt),
                                       compute);
  return b.sub(in_one_two, b.full(1.0, {compute, dims}));
}

DType compute_type(DType out) { return out == DType::F64 ? DType::F64 : DType::F32; }

std::vector<Value> lower_uniform(Context& ctx) {
  TensorType out = ctx.out_type();
  DType c = compute_type(out.dtype);
  Value u = uniform01(ctx.b, ctx.rng_state, out.dims, c);
  Value from = operand_as(ctx, 1, c, out.dims);
  Value to = operand_as(ctx, 2, c, out.dims);
  return {ctx.b.convert(ctx.b.add(from, ctx.b.mul(u, ctx.b.sub(to, from))), out.dtype)};
}

// Standard normal samples: Box-Muller over two independent uniform draws stacked along a new
// leading dim.
Value standard_normal(Builder& b, Value state, const Dims& dims, DType c) {
  Dims two = dims;
  two.insert(two.begin(), 2);
  Value u = uniform01(b, state, two, c);
  Dims start(two.size(), 0), limit = two, step(two.size(), 1);
  limit[0] = 1;
  Value u1 = b.reshape(b.slice(u, start, limit, step), dims);
  start[0] = 1;
  limit[0] = 2;
  Value u2 = b.reshape(b.slice(u, start, limit, step), dims);
  TensorType ct{c, dims};
  Value radius = b.unary("stablehlo.sqrt",
                         b.mul(b.full(-2.0, ct), b.unary("stablehlo.log", b.sub(b.full(1.0, ct), u1))));
  Value angle = b.mul(b.full(2.0 * M_PI, ct), u2);
  return b.mul(radius, b.unary("stablehlo.cosine", angle));
}

// mean + std * N(0, 1) with mean and std at the given argument positions.
Value normal_from(Context& ctx, size_t mean_index, size_t std_index) {
  Builder& b = ctx.b;
  TensorType out = ctx.out_type();
  DType c = compute_type(out.dtype);
  Value z = standard_normal(b, ctx.rng_state, out.dims, c);
  Value mean = operand_as(ctx, mean_index, c, out.dims);
  Value std = operand_as(ctx, std_index, c, out.dims);
  return b.add(mean, b.mul(z, std));
}

// normal_(self, mean, std)
std::vector<Value> lower_normal(Context& ctx) {
  return {ctx.b.convert(normal_from(ctx, 1, 2), ctx.out_type().dtype)};
}

// normal(mean, std) with a tensor for either or both.
std::vector<Value> lower_normal_functional(Context& ctx) {
  return {ctx.b.convert(normal_from(ctx, 0, 1), ctx.out_type().dtype)};
}

// log_normal_(self, mean, std): exp of a normal sample.
std::vector<Value> lower_log_normal(Context& ctx) {
  return {ctx.b.convert(ctx.b.unary("stablehlo.exponential", normal_from(ctx, 1, 2)), ctx.out_type().dtype)};
}

// cauchy_(self, median, sigma): median + sigma * tan(pi (u - 1/2)).
std::vector<Value> lower_cauchy(Context& ctx) {
  Builder& b = ctx.b;
  TensorType out = ctx.out_type();
  DType c = compute_type(out.dtype);
  TensorType ct{c, out.dims};
  Value u = uniform01(b, ctx.rng_state, out.dims, c);
  Value t = b.unary("stablehlo.tan", b.mul(b.full(M_PI, ct), b.sub(u, b.full(0.5, ct))));
  Value median = operand_as(ctx, 1, c, out.dims), sigma = operand_as(ctx, 2, c, out.dims);
  return {b.convert(b.add(median, b.mul(sigma, t)), out.dtype)};
}

// geometric_(self, p): the number of Bernoulli(p) trials up to the first success,
// ceil(log(u) / log(1 - p)) for u in (0, 1].
std::vector<Value> lower_geometric(Context& ctx) {
  Builder& b = ctx.b;
  TensorType out = ctx.out_type();
  DType c = compute_type(out.dtype);
  TensorType ct{c, out.dims};
  Value u = b.sub(b.full(1.0, ct), uniform01(b, ctx.rng_state, out.dims, c));
  Value p = operand_as(ctx, 1, c, out.dims);
  Value trials = b.unary("stablehlo.ceil", b.div(b.unary("stablehlo.log", u),
                                                 b.unary("stablehlo.log_plus_one", b.unary("stablehlo.negate", p))));
  return {b.convert(trials, out.dtype)};
}

// random_(self, from, to) / random_(self, to): integers in [from, to). The bounds are ints in the
// schema, so they are part of the program's key.
std::vector<Value> lower_random(Context& ctx) {
  Builder& b = ctx.b;
  TensorType out = ctx.out_type();
  int64_t from = 0, to = 0;
  if (ctx.overload == "from") {
    if (!ctx.has(2)) throw Unsupported("random_ without an upper bound");
    from = ctx.int_arg(1, 0);
    to = ctx.int_arg(2, 0);
  } else if (ctx.overload == "to") {
    to = ctx.int_arg(1, 0);
  } else {
    throw Unsupported("random_ over the full dtype range");
  }
  if (to <= from) throw Unsupported("random_ with an empty range");
  TensorType u64{DType::U64, out.dims};
  Value bits = b.random_bits(ctx.rng_state, out.dims, DType::U64);
  Value draw = b.op1("stablehlo.remainder", {bits, b.full(static_cast<double>(to - from), u64)}, u64);
  Value shifted = b.add(b.convert(draw, DType::I64), b.full(static_cast<double>(from), {DType::I64, out.dims}));
  return {b.convert(shifted, out.dtype)};
}

std::vector<Value> lower_bernoulli(Context& ctx) {
  Builder& b = ctx.b;
  TensorType out = ctx.out_type();
  DType c = compute_type(out.dtype == DType::F64 ? DType::F64 : DType::F32);
  Value u = uniform01(b, ctx.rng_state, out.dims, c);
  // bernoulli(self): self holds the probabilities; bernoulli_(self, p): p does.
  size_t p_index = ctx.op == "bernoulli" && ctx.overload.empty() ? 0 : 1;
  Value p = operand_as(ctx, p_index, c, out.dims);
  return {b.convert(b.compare(u, p, "LT"), out.dtype)};
}

std::vector<Value> lower_exponential(Context& ctx) {
  Builder& b = ctx.b;
  TensorType out = ctx.out_type();
  DType c = compute_type(out.dtype);
  TensorType ct{c, out.dims};
  Value u = uniform01(b, ctx.rng_state, out.dims, c);
  Value lambd = operand_as(ctx, 1, c, out.dims);
  Value e = b.div(b.unary("stablehlo.negate", b.unary("stablehlo.log_plus_one", b.unary("stablehlo.negate", u))),
                  lambd);
  return {b.convert(e, out.dtype)};
}

// native_dropout(input, p, train) -> (output, mask)
std::vector<Value> lower_native_dropout(Context& ctx) {
  Builder& b = ctx.b;
  TensorType out = ctx.out_type(0);
  TensorType mask_type = ctx.out_type(1);
  Value input = ctx.tensor(0);
  if (ctx.has(2) && !ctx.bool_arg(2, true)) {
    return {input, b.full(1.0, mask_type)};
  }
  DType c = compute_type(out.dtype);
  TensorType ct{c, out.dims};
  Value u = uniform01(b, ctx.rng_state, out.dims, c);
  Value p = operand_as(ctx, 1, c, out.dims);
  Value keep = b.compare(u, p, "GE");
  Value one = b.full(1.0, ct);
  Value keep_prob = b.sub(one, p);
  // p == 1 drops everything; avoid 1/0.
  Value scale = b.select(b.compare(keep_prob, b.zeros(ct), "EQ"), b.zeros(ct), b.div(one, keep_prob));
  Value kept = b.mul(b.convert(input, c), b.mul(b.convert(keep, c), scale));
  return {b.convert(kept, out.dtype), b.convert(keep, mask_type.dtype)};
}

TPU_RANDOM_LOWERING("uniform_", lower_uniform);
TPU_RANDOM_LOWERING("normal_", lower_normal);
TPU_RANDOM_LOWERING("normal", lower_normal_functional);
TPU_RANDOM_LOWERING("log_normal_", lower_log_normal);
TPU_RANDOM_LOWERING("cauchy_", lower_cauchy);
TPU_RANDOM_LOWERING("geometric_", lower_geometric);
TPU_RANDOM_LOWERING("random_", lower_random);
TPU_RANDOM_LOWERING("bernoulli_", lower_bernoulli);
TPU_RANDOM_LOWERING("bernoulli", lower_bernoulli);
TPU_RANDOM_LOWERING("exponential_", lower_exponential);
TPU_RANDOM_LOWERING("native_dropout", lower_native_dropout);

}  // namespace
}  // namespace tpu::lowering
