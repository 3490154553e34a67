// Upsampling: nearest and nearest-exact (1-D, 2-D, 3-D), linear, bilinear, bicubic and trilinear,
// with their backward ops.
//
// Every mode is separable: along each spatial dim an output position reads a few input positions
// (1 for nearest, 2 for linear, 4 for cubic) with weights. Positions and weights are computed in
// the program, as PyTorch's CPU kernels do them (in f64 for a linear or cubic f64 input, else in
// f32), from an iota and the scale, which is a runtime
// number when the caller gave scale factors. The forward gathers dim by dim from the innermost
// out, which is also the order in which PyTorch's kernels combine the taps; the backward
// scatter-adds the weighted gradient through the same taps.
#include <algorithm>
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

enum class Kind { Nearest, NearestExact, Linear, Cubic };

struct Taps {
  std::vector<Value> positions;  // i64 [out]
  std::vector<Value> weights;    // [out] in the taps' dtype; empty for nearest
};

// a / b rounded as the division in `dtype` (f32 or f64) rounds it.
double quotient_in(DType dtype, int64_t a, int64_t b) {
  if (dtype == DType::F64) return static_cast<double>(a) / static_cast<double>(b);
  return static_cast<float>(a) / static_cast<float>(b);
}

// The scale PyTorch uses for one dim, in `dtype`: input / output, or 1 / scale_factor when one
// was given (and is positive); with align_corners, (in - 1) / (out - 1).
Value scale_of(Context& ctx, size_t scale_index, int64_t in, int64_t out, bool align_corners, DType dtype) {
  Builder& b = ctx.b;
  if (align_corners) {
    return b.constant(out > 1 ? quotient_in(dtype, in - 1, out - 1) : 0.0, dtype);
  }
  Value fallback = b.constant(quotient_in(dtype, in, out), dtype);
  if (!ctx.has(scale_index) || ctx.arg(scale_index).kind != Arg::Kind::Number) return fallback;
  Value s = b.convert(ctx.arg(scale_index).value, DType::F64);
  Value inverse = b.convert(b.div(b.constant(1.0, DType::F64), s), dtype);
  return b.select(b.compare(s, b.constant(0.0, DType::F64), "GT"), inverse, fallback);
}

// `dtype`: what positions and weights are computed in; nearest modes always use f32.
Taps taps_for(Context& ctx, Kind kind, int64_t in, int64_t out, bool align_corners, size_t scale_index,
              DType dtype) {
  Builder& b = ctx.b;
  if (kind == Kind::Nearest || kind == Kind::NearestExact) dtype = DType::F32;
  TensorType it{DType::I64, {out}}, ft{dtype, {out}};
  Value index = b.iota(it, 0);
  Value last = b.full(static_cast<double>(in - 1), it);
  Taps taps;
  if (kind == Kind::Nearest && out == in) {
    taps.positions.push_back(index);
    return taps;
  }
  if (kind == Kind::Nearest && out == 2 * in) {
    taps.positions.push_back(b.op1("stablehlo.shift_right_arithmetic", {index, b.full(1, it)}, it));
    return taps;
  }
  Value scale = b.broadcast_to(scale_of(ctx, scale_index, in, out, align_corners && kind >= Kind::Linear, dtype),
                               {out});
  Value dst = b.convert(index, dtype);
  if (kind == Kind::Nearest || kind == Kind::NearestExact) {
    if (kind == Kind::NearestExact) dst = b.add(dst, b.full(0.5, ft));
    Value src = b.convert(b.unary("stablehlo.floor", b.mul(dst, scale)), DType::I64);
    taps.positions.push_back(b.min(src, last));
    return taps;
  }
  Value real = align_corners ? b.mul(scale, dst)
                             : b.sub(b.mul(scale, b.add(dst, b.full(0.5, ft))), b.full(0.5, ft));
  if (kind == Kind::Linear && !align_corners) real = b.max(real, b.zeros(ft));
  // guard_index_and_lambda: the tap left of the source position, and the fraction past it.
  Value base = b.min(b.convert(b.unary("stablehlo.floor", real), DType::I64), last);
  Value lambda = b.sub(real, b.convert(base, dtype));
  lambda = b.min(b.max(lambda, b.zeros(ft)), b.full(1.0, ft));
  if (kind == Kind::Linear) {
    Value next = b.select(b.compare(base, last, "LT"), b.add(base, b.full(1, it)), base);
    taps.positions = {base, next};
    taps.weights = {b.sub(b.full(1.0, ft), lambda), lambda};
    return taps;
  }
  // Cubic convolution with A = -0.75 over the taps base - 1 .. base + 2, clamped to the input.
  const double A = -0.75;
  auto near = [&](Value x) {  // |x| <= 1
    Value p = b.sub(b.mul(b.full(A + 2, ft), x), b.full(A + 3, ft));
    return b.add(b.mul(b.mul(p, x), x), b.full(1.0, ft));
  };
  auto far = [&](Value x) {  // 1 < |x| < 2
    Value p = b.sub(b.mul(b.full(A, ft), x), b.full(5 * A, ft));
    p = b.add(b.mul(p, x), b.full(8 * A, ft));
    return b.sub(b.mul(p, x), b.full(4 * A, ft));
  };
  Value one = b.full(1.0, ft);
  Value rest = b.sub(one, lambda);
  taps.weights = {far(b.add(lambda, one)), near(lambda), near(rest), far(b.add(rest, one))};
  for (int64_t k = -1; k <= 2; ++k) {
    Value p = b.add(base, b.full(static_cast<double>(k), it));
    taps.positions.push_back(b.min(b.max(p, b.zeros(it)), last));
  }
  return taps;
}

Value weight_along(Builder& b, Value w, const Dims& dims, int64_t dim, DType dtype) {
  return b.broadcast_in_dim(b.convert(w, dtype), dims, {dim});
}

struct Layout {
  size_t scale_index;  // first scale argument
  bool align_corners;
};

Layout layout_of(Context& ctx, Kind kind, size_t first_after_sizes) {
  if (kind == Kind::Nearest || kind == Kind::NearestExact) return {first_after_sizes, false};
  return {first_after_sizes + 1, ctx.bool_arg(first_after_sizes, false)};
}

// upsample_*(self, output_size, [align_corners,] scales...)
template <Kind kind>
std::vector<Value> lower_upsample(Context& ctx) {
  Builder& b = ctx.b;
  if (ctx.overload == "vec" || ctx.arg(1).kind != Arg::Kind::IntList) throw Unsupported(ctx.op + ": .vec");
  Value x = ctx.tensor(0);
  const Dims& out_sizes = ctx.arg(1).ints;
  int64_t spatial = static_cast<int64_t>(out_sizes.size());
  int64_t rank = b.rank(x);
  if (rank < spatial) throw Unsupported(ctx.op + ": rank");
  if (numel(ctx.outputs.at(0).dims) == 0 || numel(b.dims(x)) == 0) return {b.zeros(ctx.out_type())};
  Layout layout = layout_of(ctx, kind, 2);
  bool weighted = kind == Kind::Linear || kind == Kind::Cubic;
  DType in_dtype = b.dtype(x);
  // Integer images (uint8 is the common one) are weighted in f32 and, as CPU's kernels do, rounded
  // and saturated back to their dtype after each pass.
  bool integral = !is_floating(in_dtype);
  DType acc = integral ? DType::F32 : accumulation_type(in_dtype);
  if (weighted) x = b.convert(x, acc);
  for (int64_t s = spatial - 1; s >= 0; --s) {
    int64_t dim = rank - spatial + s;
    int64_t in = b.dims(x)[dim];
    Taps taps = taps_for(ctx, kind, in, out_sizes[s], layout.align_corners, layout.scale_index + s,
                         acc == DType::F64 ? DType::F64 : DType::F32);
    if (!weighted) {
      x = gather_along(b, x, dim, taps.positions[0]);
      continue;
    }
    Value sum;
    for (size_t k = 0; k < taps.positions.size(); ++k) {
      Value picked = gather_along(b, x, dim, taps.positions[k]);
      Value term = b.mul(picked, weight_along(b, taps.weights[k], b.dims(picked), dim, acc));
      sum = k == 0 ? term : b.add(sum, term);
    }
    x = sum;
    if (integral) {
      x = b.unary("stablehlo.round_nearest_afz", x);
      x = b.max(b.min(x, b.full(highest(in_dtype), {acc, b.dims(x)})), b.full(lowest(in_dtype), {acc, b.dims(x)}));
    }
  }
  return {as_output(ctx, x)};
}

// upsample_*_backward(grad_output, output_size, input_size, [align_corners,] scales...)
template <Kind kind>
std::vector<Value> lower_upsample_backward(Context& ctx) {
  Builder& b = ctx.b;
  if (ctx.overload == "vec" || ctx.arg(1).kind != Arg::Kind::IntList) throw Unsupported(ctx.op + ": .vec");
  Value grad = ctx.tensor(0);
  const Dims& out_sizes = ctx.arg(1).ints;
  const Dims& in_sizes = ctx.arg(2).ints;
  int64_t spatial = static_cast<int64_t>(out_sizes.size());
  int64_t rank = static_cast<int64_t>(in_sizes.size());
  if (numel(ctx.outputs.at(0).dims) == 0 || numel(b.dims(grad)) == 0) return {b.zeros(ctx.out_type())};
  Layout layout = layout_of(ctx, kind, 3);
  DType acc = accumulation_type(b.dtype(grad));
  grad = b.convert(grad, acc);
  // The forward ran innermost dim first; its transpose runs outermost first.
  for (int64_t s = 0; s < spatial; ++s) {
    int64_t dim = rank - spatial + s;
    int64_t in = in_sizes[dim];
    Taps taps = taps_for(ctx, kind, in, out_sizes[s], layout.align_corners, layout.scale_index + s,
                         acc == DType::F64 ? DType::F64 : DType::F32);
    Dims target_dims = b.dims(grad);
    target_dims[dim] = in;
    Value target = b.zeros({acc, target_dims});
    for (size_t k = 0; k < taps.positions.size(); ++k) {
      Value update = grad;
      if (!taps.weights.empty()) update = b.mul(grad, weight_along(b, taps.weights[k], b.dims(grad), dim, acc));
      target = scatter_add_along(b, target, dim, taps.positions[k], update);
    }
    grad = target;
  }
  return {as_output(ctx, grad)};
}

}  // namespace

TPU_LOWERING("upsample_nearest1d", lower_upsample<Kind::Nearest>);
TPU_LOWERING("upsample_nearest2d", lower_upsample<Kind::Nearest>);
TPU_LOWERING("upsample_nearest3d", lower_upsample<Kind::Nearest>);
TPU_LOWERING("_upsample_nearest_exact1d", lower_upsample<Kind::NearestExact>);
TPU_LOWERING("_upsample_nearest_exact2d", lower_upsample<Kind::NearestExact>);
TPU_LOWERING("_upsample_nearest_exact3d", lower_upsample<Kind::NearestExact>);
TPU_LOWERING("upsample_linear1d", lower_upsample<Kind::Linear>);
TPU_LOWERING("upsample_bilinear2d", lower_upsample<Kind::Linear>);
TPU_LOWERING("upsample_trilinear3d", lower_upsample<Kind::Linear>);
TPU_LOWERING("upsample_bicubic2d", lower_upsample<Kind::Cubic>);
TPU_LOWERING("upsample_nearest1d_backward", lower_upsample_backward<Kind::Nearest>);
TPU_LOWERING("upsample_nearest2d_backward", lower_upsample_backward<Kind::Nearest>);
TPU_LOWERING("upsample_nearest3d_backward", lower_upsample_backward<Kind::Nearest>);
TPU_LOWERING("_upsample_nearest_exact1d_backward", lower_upsample_backward<Kind::NearestExact>);
TPU_LOWERING("_upsample_nearest_exact2d_backward", lower_upsample_backward<Kind::NearestExact>);
TPU_LOWERING("_upsample_nearest_exact3d_backward", lower_upsample_backward<Kind::NearestExact>);
TPU_LOWERING("upsample_linear1d_backward", lower_upsample_backward<Kind::Linear>);
TPU_LOWERING("upsample_bilinear2d_backward", lower_upsample_backward<Kind::Linear>);
TPU_LOWERING("upsample_trilinear3d_backward", lower_upsample_backward<Kind::Linear>);
TPU_LOWERING("upsample_bicubic2d_backward", lower_upsample_backward<Kind::Cubic>);

}  // namespace tpu::lowering
