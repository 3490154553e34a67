// im2col (nn.functional.unfold) and col2im (nn.functional.fold).
//
// im2col lays every kernel offset's strided window of the padded input side by side:
// [N, C, H, W] -> [N, C * kh * kw, L]. The windows are separable: kh strided slices along H
// (one per kernel row), then kw along W of all of them at once, so the op is kh + kw slices
// and two concatenations rather than kh * kw slices (a 32 x 32 patch, as DepthPro's, made 1024
// slices whose program took 1.5 s to compile per op and 25 s inside a compiled graph). col2im
// is its transpose in the same two passes: each kernel column's blocks are spread back along W
// with an interior pad of stride - 1 and an edge pad that puts them at their offset and summed,
// then each kernel row's along H, and the padding is cropped.
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

struct Geometry {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Geometry geometry(const Context& ctx, size_t first) {
  auto pair = [&](size_t i) {
    const Dims& v = ctx.arg(i).ints;
    if (v.size() != 2) throw Unsupported(ctx.op + ": 2-D arguments expected");
    return v;
  };
  Dims k = pair(first), d = pair(first + 1), p = pair(first + 2), s = pair(first + 3);
  return {k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
}

int64_t out_len(int64_t in, int64_t k, int64_t d, int64_t p, int64_t s) {
  return (in + 2 * p - (d * (k - 1) + 1)) / s + 1;
}

// im2col(self [N, C, H, W] or [C, H, W], kernel_size, dilation, padding, stride)
std::vector<Value> lower_im2col(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  bool batched = b.rank(x) == 4;
  if (!batched) x = b.reshape(x, [&] { Dims d = b.dims(x); d.insert(d.begin(), 1); return d; }());
  if (b.rank(x) != 4) throw Unsupported(ctx.op + ": rank");
  Geometry g = geometry(ctx, 1);
  Dims d = b.dims(x);
  int64_t n = d[0], c = d[1];
  int64_t oh = out_len(d[2], g.kh, g.dh, g.ph, g.sh), ow = out_len(d[3], g.kw, g.dw, g.pw, g.sw);
  if (numel(ctx.outputs.at(0).dims) == 0 || oh <= 0 || ow <= 0) return {b.zeros(ctx.out_type())};
  Value padded = b.pad(x, b.constant(0, b.dtype(x)), {0, 0, g.ph, g.pw}, {0, 0, g.ph, g.pw}, {0, 0, 0, 0});
  int64_t wp = d[3] + 2 * g.pw;
  // Rows: [N, C, kh, oh, Wp], row y of kernel row i being padded row i * dh + y * sh.
  std::vector<Value> rows;
  for (int64_t i = 0; i < g.kh; ++i) {
    Value block = b.slice(padded, {0, 0, i * g.dh, 0}, {n, c, i * g.dh + (oh - 1) * g.sh + 1, wp}, {1, 1, g.sh, 1});
    rows.push_back(b.reshape(block, {n, c, 1, oh, wp}));
  }
  Value by_row = b.concatenate(rows, 2);
  // Columns of every kernel row at once: [N, C, kh, kw, oh, ow].
  std::vector<Value> columns;
  for (int64_t j = 0; j < g.kw; ++j) {
    Value block = b.slice(by_row, {0, 0, 0, 0, j * g.dw}, {n, c, g.kh, oh, j * g.dw + (ow - 1) * g.sw + 1},
                          {1, 1, 1, 1, g.sw});
    columns.push_back(b.reshape(block, {n, c, g.kh, 1, oh, ow}));
  }
  Value cols = b.reshape(b.concatenate(columns, 3), {n, c * g.kh * g.kw, oh * ow});
  return {as_output(ctx, cols)};
}

// col2im(self [N, C * kh * kw, L] or unbatched, output_size, kernel_size, dilation, padding, stride)
std::vector<Value> lower_col2im(Context& ctx) {
  Builder& b = ctx.b;
  Value cols = ctx.tensor(0);
  const Dims& size = ctx.arg(1).ints;
  if (size.size() != 2) throw Unsupported(ctx.op + ": 2-D output expected");
  Geometry g = geometry(ctx, 2);
  if (b.rank(cols) == 2) cols = b.reshape(cols, {1, b.dims(cols)[0], b.dims(cols)[1]});
  if (b.rank(cols) != 3) throw Unsupported(ctx.op + ": rank");
  int64_t n = b.dims(cols)[0];
  int64_t c = b.dims(cols)[1] / (g.kh * g.kw);
  int64_t oh = out_len(size[0], g.kh, g.dh, g.ph, g.sh), ow = out_len(size[1], g.kw, g.dw, g.pw, g.sw);
  if (numel(ctx.outputs.at(0).dims) == 0 || oh <= 0 || ow <= 0) return {b.zeros(ctx.out_type())};
  DType acc = accumulation_type(b.dtype(cols));
  Value blocks = b.reshape(b.convert(cols, acc), {n, c, g.kh, g.kw, oh, ow});
  int64_t hp = size[0] + 2 * g.ph, wp = size[1] + 2 * g.pw;
  Value zero = b.constant(0, acc);
  // Along W, every kernel row at once: [N, C, kh, oh, Wp].
  Value by_row = b.zeros({acc, {n, c, g.kh, oh, wp}});
  for (int64_t j = 0; j < g.kw; ++j) {
    Value block = b.reshape(b.slice(blocks, {0, 0, 0, j, 0, 0}, {n, c, g.kh, j + 1, oh, ow}, {1, 1, 1, 1, 1, 1}),
                            {n, c, g.kh, oh, ow});
    int64_t left = j * g.dw, right = wp - left - ((ow - 1) * g.sw + 1);
    by_row = b.add(by_row, b.pad(block, zero, {0, 0, 0, 0, left}, {0, 0, 0, 0, right}, {0, 0, 0, 0, g.sw - 1}));
  }
  // Along H: [N, C, Hp, Wp].
  Value sum = b.zeros({acc, {n, c, hp, wp}});
  for (int64_t i = 0; i < g.kh; ++i) {
    Value block = b.reshape(b.slice(by_row, {0, 0, i, 0, 0}, {n, c, i + 1, oh, wp}, {1, 1, 1, 1, 1}), {n, c, oh, wp});
    int64_t top = i * g.dh, bottom = hp - top - ((oh - 1) * g.sh + 1);
    sum = b.add(sum, b.pad(block, zero, {0, 0, top, 0}, {0, 0, bottom, 0}, {0, 0, g.sh - 1, 0}));
  }
  Value image = b.slice(sum, {0, 0, g.ph, g.pw}, {n, c, g.ph + size[0], g.pw + size[1]}, {1, 1, 1, 1});
  return {as_output(ctx, image)};
}

}  // namespace

TPU_LOWERING("im2col", lower_im2col);
TPU_LOWERING("col2im", lower_col2im);

}  // namespace tpu::lowering
