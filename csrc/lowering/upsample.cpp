// Upsampling: nearest and nearest-exact (1-D, 2-D, 3-D), linear, bilinear, bicubic and trilinear,
// the antialiased bilinear, bicubic and Lanczos resizes, with their backward ops.
//
// Every mode is separable: along each spatial dim an output position reads a few input positions
// (1 for nearest, 2 for linear, 4 for cubic) with weights. Positions and weights are computed in
// the program, as PyTorch's CPU kernels do them (in f64 for a linear or cubic f64 input, else in
// f32), from an iota and the scale, which is a runtime
// number when the caller gave scale factors. The forward gathers dim by dim from the innermost
// out, which is also the order in which PyTorch's kernels combine the taps; the backward
// scatter-adds the weighted gradient through the same taps.
//
// Antialiased resizing (PIL's, which `antialias=True` follows) widens the filter by the scale when
// it shrinks: output i reads the inputs in [xmin, xmin + xsize) around its center, each weighted by
// the filter at its distance, normalised to sum to 1. The number of taps is bounded by the filter's
// support; taps past xsize weigh nothing and are never read.
#include <algorithm>
#include <cmath>
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

enum class Kind { Nearest, NearestExact, Linear, Cubic, LinearAA, CubicAA, LanczosAA };

constexpr bool antialiased(Kind kind) { return kind >= Kind::LinearAA; }

struct Taps {
  std::vector<Value> positions;  // i64 [out]
  std::vector<Value> weights;    // [out] in the taps' dtype; empty for nearest
  std::vector<Value> read;       // antialiased: bool [out], whether the tap is one of the output's
};

Taps antialias_taps(Context& ctx, Kind kind, int64_t in, int64_t out, bool align_corners, size_t scale_index,
                    DType dtype);

// The cubic convolution kernel with parameter A, at 0 <= x <= 1 and at 1 < x < 2.
Value cubic_near(Builder& b, Value x, double A, const TensorType& ft) {
  Value p = b.sub(b.mul(b.full(A + 2, ft), x), b.full(A + 3, ft));
  return b.add(b.mul(b.mul(p, x), x), b.full(1.0, ft));
}

Value cubic_far(Builder& b, Value x, double A, const TensorType& ft) {
  Value p = b.sub(b.mul(b.full(A, ft), x), b.full(5 * A, ft));
  p = b.add(b.mul(p, x), b.full(8 * A, ft));
  return b.sub(b.mul(p, x), b.full(4 * A, ft));
}

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
  if (antialiased(kind)) return antialias_taps(ctx, kind, in, out, align_corners, scale_index, dtype);
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
  auto near = [&](Value x) { return cubic_near(b, x, A, ft); };
  auto far = [&](Value x) { return cubic_far(b, x, A, ft); };
  Value one = b.full(1.0, ft);
  Value rest = b.sub(one, lambda);
  taps.weights = {far(b.add(lambda, one)), near(lambda), near(rest), far(b.add(rest, one))};
  for (int64_t k = -1; k <= 2; ++k) {
    Value p = b.add(base, b.full(static_cast<double>(k), it));
    taps.positions.push_back(b.min(b.max(p, b.zeros(it)), last));
  }
  return taps;
}

// The cubic convolution kernel with parameter A at |x| (zero from 2 on).
Value cubic_kernel(Builder& b, Value x, double A, const TensorType& ft) {
  Value one = b.full(1.0, ft), two = b.full(2.0, ft);
  return b.select(b.compare(x, one, "LT"), cubic_near(b, x, A, ft),
                  b.select(b.compare(x, two, "LT"), cubic_far(b, x, A, ft), b.zeros(ft)));
}

// sin(pi x) / (pi x), 1 at 0.
Value sinc(Builder& b, Value x, const TensorType& ft) {
  Value pix = b.mul(x, b.full(3.14159265358979323846, ft));
  Value zero = b.compare(x, b.zeros(ft), "EQ");
  Value safe = b.select(zero, b.full(1.0, ft), pix);
  return b.select(zero, b.full(1.0, ft), b.div(b.unary("stablehlo.sine", safe), safe));
}

// The antialiasing taps of one dim, as PyTorch's CPU kernel computes them (in `dtype`, the input's
// float type; the sums that place a tap's window are exact, in f64).
Taps antialias_taps(Context& ctx, Kind kind, int64_t in, int64_t out, bool align_corners, size_t scale_index,
                    DType dtype) {
  Builder& b = ctx.b;
  TensorType it{DType::I64, {out}}, ft{dtype, {out}}, dt{DType::F64, {out}};
  double interp_size = kind == Kind::LinearAA ? 2 : kind == Kind::CubicAA ? 4 : 6;
  Value scale = b.broadcast_to(scale_of(ctx, scale_index, in, out, align_corners, dtype), {out});
  Value one = b.full(1.0, ft);
  Value shrinks = b.compare(scale, one, "GE");
  Value half_width = b.full(interp_size * 0.5, ft);
  Value support = b.select(shrinks, b.mul(half_width, scale), half_width);
  Value invscale = b.select(shrinks, b.div(one, scale), one);
  // The most taps any output reads: ceil(support) * 2 + 1, from the static scale (a runtime scale
  // factor lies within a rounding of it; one more tap covers that).
  double static_scale = align_corners ? (out > 1 ? static_cast<double>(in - 1) / (out - 1) : 0.0)
                                      : static_cast<double>(in) / out;
  double static_support = static_scale >= 1.0 ? interp_size * 0.5 * static_scale : interp_size * 0.5;
  int64_t taps_count = static_cast<int64_t>(std::ceil(static_support)) * 2 + 2;
  // center = scale * (i + 0.5), a double product rounded to the input's type, as the CPU computes it.
  // Rounded apart from the subtraction that follows: a fused multiply-add there (which XLA's
  // quick tier emits) moves the window's edge when center - support is just below an integer.
  Value center = b.convert(b.mul(b.convert(scale, DType::F64), b.add(b.convert(b.iota(it, 0), DType::F64),
                                                                     b.full(0.5, dt))),
                           dtype);
  // xmin = max(trunc(center - support + 0.5), 0), xsize = min(trunc(center + support + 0.5), in) - xmin,
  // at most ceil(support) * 2 + 1.
  auto truncated = [&](Value v) {
    return b.convert(b.unary("stablehlo.floor", b.add(b.convert(v, DType::F64), b.full(0.5, dt))), DType::I64);
  };
  Value xmin = b.max(truncated(b.sub(center, support)), b.zeros(it));
  Value xend = b.min(truncated(b.add(center, support)), b.full(static_cast<double>(in), it));
  Value most = b.add(b.mul(b.convert(b.unary("stablehlo.ceil", support), DType::I64), b.full(2, it)), b.full(1, it));
  Value xsize = b.min(b.max(b.sub(xend, xmin), b.zeros(it)), most);
  Taps taps;
  Value total = b.zeros(ft);
  Value last = b.full(static_cast<double>(in - 1), it);
  for (int64_t k = 0; k < taps_count; ++k) {
    Value kk = b.full(static_cast<double>(k), it);
    Value position = b.add(xmin, kk);
    Value read = b.compare(kk, xsize, "LT");
    // filter((k + xmin - center + 0.5) * invscale): the difference in `dtype`, the rest in f64.
    Value distance = b.convert(
        b.mul(b.add(b.convert(b.sub(b.convert(position, dtype), center), DType::F64), b.full(0.5, dt)),
              b.convert(invscale, DType::F64)),
        dtype);
    Value x = b.unary("stablehlo.abs", distance);
    Value w;
    if (kind == Kind::LinearAA) {
      w = b.max(b.sub(one, x), b.zeros(ft));
    } else if (kind == Kind::CubicAA) {
      w = cubic_kernel(b, x, -0.5, ft);
    } else {
      w = b.select(b.compare(x, b.full(3.0, ft), "LT"), b.mul(sinc(b, x, ft), sinc(b, b.div(x, b.full(3.0, ft)), ft)),
                   b.zeros(ft));
    }
    w = b.select(read, w, b.zeros(ft));
    total = b.add(total, w);
    taps.positions.push_back(b.min(position, last));
    taps.weights.push_back(w);
    taps.read.push_back(read);
  }
  Value nonzero = b.compare(total, b.zeros(ft), "NE");
  for (Value& w : taps.weights) w = b.select(nonzero, b.div(w, total), w);
  return taps;
}

Value weight_along(Builder& b, Value w, const Dims& dims, int64_t dim, DType dtype) {
  return b.broadcast_in_dim(b.convert(w, dtype), dims, {dim});
}

// `value` (a tap's contribution along `dim`) where the tap is read, 0 elsewhere: an antialiased
// tap past its output's window weighs 0, but 0 times an inf read there would be a NaN.
Value where_read(Builder& b, const Taps& taps, size_t k, Value value, int64_t dim) {
  if (taps.read.empty()) return value;
  return b.select(b.broadcast_in_dim(taps.read[k], b.dims(value), {dim}), value,
                  b.zeros({b.dtype(value), b.dims(value)}));
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
  bool weighted = kind != Kind::Nearest && kind != Kind::NearestExact;
  DType in_dtype = b.dtype(x);
  // Integer images (uint8 is the common one) are weighted in f32 and, as CPU's kernels do, rounded
  // and saturated back to their dtype after each pass. (The CPU's antialiased uint8 resize is
  // fixed-point arithmetic of its own: left to the CPU.)
  bool integral = !is_floating(in_dtype);
  if (integral && antialiased(kind)) throw Unsupported(ctx.op + ": integer input");
  DType acc = integral ? DType::F32 : accumulation_type(in_dtype);
  if (weighted) x = b.convert(x, acc);
  for (int64_t s = spatial - 1; s >= 0; --s) {
    int64_t dim = rank - spatial + s;
    int64_t in = b.dims(x)[dim];
    if (antialiased(kind) && in == out_sizes[s]) continue;  // the CPU skips a dim it does not resize
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
      term = where_read(b, taps, k, term, dim);
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
    if (antialiased(kind) && in == out_sizes[s]) continue;
    Taps taps = taps_for(ctx, kind, in, out_sizes[s], layout.align_corners, layout.scale_index + s,
                         acc == DType::F64 ? DType::F64 : DType::F32);
    Dims target_dims = b.dims(grad);
    target_dims[dim] = in;
    Value target = b.zeros({acc, target_dims});
    for (size_t k = 0; k < taps.positions.size(); ++k) {
      Value update = grad;
      if (!taps.weights.empty()) update = b.mul(grad, weight_along(b, taps.weights[k], b.dims(grad), dim, acc));
      target = scatter_add_along(b, target, dim, taps.positions[k], where_read(b, taps, k, update, dim));
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
TPU_LOWERING("_upsample_bilinear2d_aa", lower_upsample<Kind::LinearAA>);
TPU_LOWERING("_upsample_bicubic2d_aa", lower_upsample<Kind::CubicAA>);
TPU_LOWERING("_upsample_lanczos2d_aa", lower_upsample<Kind::LanczosAA>);
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
TPU_LOWERING("_upsample_bilinear2d_aa_backward", lower_upsample_backward<Kind::LinearAA>);
TPU_LOWERING("_upsample_bicubic2d_aa_backward", lower_upsample_backward<Kind::CubicAA>);
TPU_LOWERING("_upsample_lanczos2d_aa_backward", lower_upsample_backward<Kind::LanczosAA>);

}  // namespace tpu::lowering
