// grid_sampler_2d and its backward: bilinear and nearest sampling of (N, C, H, W) images at the
// points of an (N, Hout, Wout, 2) grid, with zeros, border and reflection padding.
//
// The image is read as rows of channels, (N*H*W, C), so that every sampled corner is one row of a
// gather, and the backward's gradient a scatter-add of rows through the same corners. Source
// positions, corner weights and the derivative of the coordinate transform follow PyTorch's
// vectorised CPU kernels (the ones CPU runs for float and double), so that border-clipped points
// get no grid gradient and reflected ones get a flipped sign, as there. Bicubic declines: the op
// then runs on CPU.
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

enum Interpolation : int64_t { kBilinear = 0, kNearest = 1 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

struct Sampling {
  int64_t interpolation;
  int64_t padding;
  bool align_corners;
};

// A source position along one image dim for every grid point, and its derivative with respect to
// the grid coordinate.
struct Axis {
  Value position;
  Value slope;
};

Value splat(Builder& b, double value, Value like) { return b.full(value, b.type(like)); }

// Clamps to [0, size - 1]; the slope survives only strictly inside, as CPU counts a point on the
// border as clipped.
void clip(Builder& b, Axis& a, int64_t size) {
  Value zero = splat(b, 0.0, a.position), last = splat(b, static_cast<double>(size - 1), a.position);
  Value inside = b.binary("stablehlo.and", b.compare(a.position, zero, "GT"), b.compare(a.position, last, "LT"));
  a.slope = b.select(inside, a.slope, zero);
  a.position = b.min(b.max(a.position, zero), last);
}

// Folds the position into the span the image covers (pixel centres with align_corners, pixel
// edges without), as a mirror does; each fold flips the slope's sign.
void reflect(Builder& b, Axis& a, int64_t size, bool align_corners) {
  double period = align_corners ? 2.0 * static_cast<double>(size - 1) : 2.0 * static_cast<double>(size);
  if (period == 0) {  // one pixel, aligned on its centre: every point reads it
    a.position = splat(b, 0.0, a.position);
    a.slope = a.position;
    return;
  }
  double low = align_corners ? 0.0 : -0.5;
  Value shifted = b.sub(a.position, splat(b, low, a.position));
  Value negative = b.compare(shifted, splat(b, 0.0, a.position), "LT");
  Value distance = b.unary("stablehlo.abs", shifted);
  Value periods = b.unary("stablehlo.floor", b.div(distance, splat(b, period, a.position)));
  Value extra = b.sub(distance, b.mul(periods, splat(b, period, a.position)));
  Value mirrored = b.sub(splat(b, period, a.position), extra);
  Value flipped = b.compare(extra, mirrored, "GT");
  a.position = b.add(b.select(flipped, mirrored, extra), splat(b, low, a.position));
  Value sign = b.select(b.binary("stablehlo.xor", flipped, negative), splat(b, -1.0, a.slope), splat(b, 1.0, a.slope));
  a.slope = b.mul(a.slope, sign);
}

Axis source_axis(Builder& b, Value coordinate, int64_t size, const Sampling& s) {
  Axis a;
  if (s.align_corners) {
    double factor = static_cast<double>(size - 1) / 2;
    a.position = b.mul(b.add(coordinate, splat(b, 1.0, coordinate)), splat(b, factor, coordinate));
    a.slope = splat(b, factor, coordinate);
  } else {
    double factor = static_cast<double>(size) / 2;
    a.position = b.add(b.mul(coordinate, splat(b, factor, coordinate)), splat(b, factor - 0.5, coordinate));
    a.slope = splat(b, factor, coordinate);
  }
  if (s.padding == kBorder) {
    clip(b, a, size);
  } else if (s.padding == kReflection) {
    reflect(b, a, size, s.align_corners);
    clip(b, a, size);
  }
  return a;
}

// One input pixel read by every grid point: its row in the (N*H*W, C) image, whether it lies in
// the image (a corner outside reads zero and receives no gradient), and its weight.
struct Corner {
  Value row;     // i64 [P]
  Value inside;  // i1 [P]
  Value weight;  // compute dtype [P]; invalid for nearest
};

struct Geometry {
  int64_t n, c, h, w, hout, wout;
  int64_t points() const { return n * hout * wout; }
};

Corner corner_at(Builder& b, const Geometry& g, Value x, Value y, Value weight) {
  Value zero = splat(b, 0.0, x);
  auto within = [&](Value v, int64_t size) {
    return b.binary("stablehlo.and", b.compare(v, zero, "GE"),
                    b.compare(v, splat(b, static_cast<double>(size - 1), v), "LE"));
  };
  Value inside = b.binary("stablehlo.and", within(x, g.w), within(y, g.h));
  // Outside (or NaN) positions read row 0 of their image; the mask discards what they read.
  TensorType it{DType::I64, b.dims(x)};
  Value ix = b.convert(b.select(inside, x, zero), DType::I64);
  Value iy = b.convert(b.select(inside, y, zero), DType::I64);
  Value image = b.mul(b.iota(it, 0), b.full(static_cast<double>(g.h * g.w), it));
  Value row = b.add(image, b.add(b.mul(iy, b.full(static_cast<double>(g.w), it)), ix));
  Dims flat{g.points()};
  Corner c{b.reshape(row, flat), b.reshape(inside, flat), Value{}};
  if (weight.valid()) c.weight = b.reshape(weight, flat);
  return c;
}

struct Sampled {
  std::vector<Corner> corners;
  Axis x, y;
  Value east, south;  // bilinear: the fractions past the north-west corner, [N, Hout, Wout]
};

// The corners every grid point reads: nw, ne, sw, se for bilinear (in the order CPU sums them),
// the nearest pixel for nearest.
Sampled sample(Builder& b, const Geometry& g, Value grid, const Sampling& s) {
  Dims point_dims{g.n, g.hout, g.wout};
  auto coordinate = [&](int64_t k) {
    return b.reshape(b.slice(grid, {0, 0, 0, k}, {g.n, g.hout, g.wout, k + 1}, {1, 1, 1, 1}), point_dims);
  };
  Sampled r;
  r.x = source_axis(b, coordinate(0), g.w, s);
  r.y = source_axis(b, coordinate(1), g.h, s);
  if (s.interpolation == kNearest) {
    Value x = b.unary("stablehlo.round_nearest_even", r.x.position);
    Value y = b.unary("stablehlo.round_nearest_even", r.y.position);
    r.corners.push_back(corner_at(b, g, x, y, Value{}));
    return r;
  }
  Value one = splat(b, 1.0, r.x.position);
  Value west = b.unary("stablehlo.floor", r.x.position), north = b.unary("stablehlo.floor", r.y.position);
  Value east_x = b.add(west, one), south_y = b.add(north, one);
  r.east = b.sub(r.x.position, west);
  r.south = b.sub(r.y.position, north);
  Value to_west = b.sub(one, r.east), to_north = b.sub(one, r.south);
  r.corners.push_back(corner_at(b, g, west, north, b.mul(to_north, to_west)));
  r.corners.push_back(corner_at(b, g, east_x, north, b.mul(to_north, r.east)));
  r.corners.push_back(corner_at(b, g, west, south_y, b.mul(r.south, to_west)));
  r.corners.push_back(corner_at(b, g, east_x, south_y, b.mul(r.south, r.east)));
  return r;
}

Value masked(Builder& b, Value rows, Value inside) {
  Value mask = b.broadcast_in_dim(inside, b.dims(rows), {0});
  return b.select(mask, rows, b.zeros(b.type(rows)));
}

Value per_row(Builder& b, Value weight, const Dims& dims) { return b.broadcast_in_dim(weight, dims, {0}); }

struct Operands {
  Geometry g;
  Sampling s;
  DType acc;
  Value image_rows;  // [N*H*W, C]
  Value grid;        // [N, Hout, Wout, 2]
};

// Reads and checks the arguments shared by the forward and the backward: input and grid at
// `first`, the three modes after them.
Operands operands(Context& ctx, size_t first) {
  Builder& b = ctx.b;
  Value input = ctx.tensor(first), grid = ctx.tensor(first + 1);
  const Dims& in = b.dims(input);
  const Dims& gd = b.dims(grid);
  if (in.size() != 4 || gd.size() != 4 || gd[3] != 2 || gd[0] != in[0]) throw Unsupported(ctx.op + ": shapes");
  DType dtype = b.dtype(input);
  if (b.dtype(grid) != dtype ||
      (dtype != DType::F32 && dtype != DType::F64 && dtype != DType::F16 && dtype != DType::BF16)) {
    throw Unsupported(ctx.op + ": " + mlir_name(dtype) + " is not lowered");
  }
  Operands o;
  o.s = {ctx.int_arg(first + 2, 0), ctx.int_arg(first + 3, 0), ctx.bool_arg(first + 4, false)};
  if (o.s.interpolation != kBilinear && o.s.interpolation != kNearest) {
    throw Unsupported(ctx.op + ": interpolation mode " + std::to_string(o.s.interpolation));
  }
  if (o.s.padding < kZeros || o.s.padding > kReflection) throw Unsupported(ctx.op + ": padding mode");
  o.g = {in[0], in[1], in[2], in[3], gd[1], gd[2]};
  // Half types are sampled in f32 and rounded once, which is at least as close as CPU's kernels.
  o.acc = accumulation_type(dtype);
  if (numel(in) > 0 && numel(gd) > 0) {
    Value nhwc = b.transpose(b.convert(input, o.acc), {0, 2, 3, 1});
    o.image_rows = b.reshape(nhwc, {o.g.n * o.g.h * o.g.w, o.g.c});
    o.grid = b.convert(grid, o.acc);
  }
  return o;
}

// Rows [N*Hout*Wout, C] (or [N*H*W, C]) back to (N, C, rows' spatial dims).
Value rows_to_nchw(Builder& b, Value rows, int64_t n, int64_t c, int64_t h, int64_t w) {
  return b.transpose(b.reshape(rows, {n, h, w, c}), {0, 3, 1, 2});
}

// grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners)
std::vector<Value> lower_grid_sampler_2d(Context& ctx) {
  Builder& b = ctx.b;
  Operands o = operands(ctx, 0);
  if (!o.image_rows.valid() || numel(ctx.outputs.at(0).dims) == 0) return {b.zeros(ctx.out_type())};
  Sampled sampled = sample(b, o.g, o.grid, o.s);
  Value sum;
  for (const Corner& c : sampled.corners) {
    Value v = masked(b, gather_along(b, o.image_rows, 0, c.row), c.inside);
    if (c.weight.valid()) v = b.mul(v, per_row(b, c.weight, b.dims(v)));
    sum = sum.valid() ? b.add(sum, v) : v;
  }
  return {as_output(ctx, rows_to_nchw(b, sum, o.g.n, o.g.c, o.g.hout, o.g.wout))};
}

// grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
// align_corners, output_mask) -> (grad_input, grad_grid); grad_input only when output_mask[0].
std::vector<Value> lower_grid_sampler_2d_backward(Context& ctx) {
  Builder& b = ctx.b;
  Operands o = operands(ctx, 1);
  Dims mask = ctx.has(6) ? ctx.arg(6).ints : Dims{1, 1};
  bool want_input = !mask.empty() && mask[0] != 0;
  if (!o.image_rows.valid()) return {b.zeros(ctx.out_type(0)), b.zeros(ctx.out_type(1))};
  const Geometry& g = o.g;
  Value grad = b.transpose(b.convert(ctx.tensor(0), o.acc), {0, 2, 3, 1});
  grad = b.reshape(grad, {g.points(), g.c});
  Sampled sampled = sample(b, g, o.grid, o.s);

  Value grad_input = b.zeros(ctx.out_type(0));
  if (want_input) {
    Value target = b.zeros({o.acc, {g.n * g.h * g.w, g.c}});
    for (const Corner& c : sampled.corners) {
      Value update = c.weight.valid() ? b.mul(grad, per_row(b, c.weight, b.dims(grad))) : grad;
      target = scatter_add_along(b, target, 0, c.row, masked(b, update, c.inside));
    }
    grad_input = as_output(ctx, rows_to_nchw(b, target, g.n, g.c, g.h, g.w), 0);
  }
  // Nearest sampling is piecewise constant in the grid: its gradient is zero.
  if (o.s.interpolation == kNearest) return {grad_input, b.zeros(ctx.out_type(1))};

  // d(out)/d(x) and d(out)/d(y) come from the weights' derivatives: each corner's value, summed
  // over channels against the output gradient, enters with the fraction along the other axis.
  Dims point_dims{g.n, g.hout, g.wout};
  std::vector<Value> dot;
  for (const Corner& c : sampled.corners) {
    Value v = masked(b, gather_along(b, o.image_rows, 0, c.row), c.inside);
    dot.push_back(b.reshape(sum_over(b, b.mul(v, grad), {1}), point_dims));
  }
  Value one = splat(b, 1.0, sampled.east);
  Value to_west = b.sub(one, sampled.east), to_north = b.sub(one, sampled.south);
  Value dx = b.add(b.mul(to_north, b.sub(dot[1], dot[0])), b.mul(sampled.south, b.sub(dot[3], dot[2])));
  Value dy = b.add(b.mul(to_west, b.sub(dot[2], dot[0])), b.mul(sampled.east, b.sub(dot[3], dot[1])));
  Dims column{g.n, g.hout, g.wout, 1};
  Value grad_grid = b.concatenate({b.reshape(b.mul(dx, sampled.x.slope), column),
                                   b.reshape(b.mul(dy, sampled.y.slope), column)},
                                  3);
  return {grad_input, as_output(ctx, grad_grid, 1)};
}

}  // namespace

TPU_LOWERING("grid_sampler_2d", lower_grid_sampler_2d);
TPU_LOWERING("grid_sampler_2d_backward", lower_grid_sampler_2d_backward);

}  // namespace tpu::lowering
