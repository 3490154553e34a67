// im2col and col2im, behind nn.Unfold / nn.Fold (F.unfold, F.fold): ConvBERT's span-based
// dynamic convolution and several vision models unfold patches this way. A sliding window is the
// sum over kernel offsets of strided slices of the padded input, so neither op needs a gather:
// im2col stacks one strided slice per offset, col2im pads each offset's slab back to its
// positions (interior padding = stride - 1) and adds them.
#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

struct Window {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Window window(const Context& ctx, size_t kernel, size_t dilation, size_t padding, size_t stride) {
  auto pair = [&](size_t i) {
    const Dims& v = ctx.arg(i).ints;
    if (v.size() != 2) throw Unsupported(ctx.op + ": expects 2-element window arguments");
    return std::pair<int64_t, int64_t>{v[0], v[1]};
  };
  auto [kh, kw] = pair(kernel);
  auto [dh, dw] = pair(dilation);
  auto [ph, pw] = pair(padding);
  auto [sh, sw] = pair(stride);
  return {kh, kw, dh, dw, ph, pw, sh, sw};
}

int64_t blocks(int64_t size, int64_t pad, int64_t dilation, int64_t kernel, int64_t stride) {
  return (size + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1;
}

// im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride)
// (N, C, H, W) -> (N, C * kh * kw, L); unbatched (C, H, W) -> (C * kh * kw, L).
std::vector<Value> lower_im2col(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  bool batched = b.rank(x) == 4;
  if (!batched && b.rank(x) != 3) throw Unsupported(ctx.op + ": rank");
  if (!batched) x = b.reshape(x, [&] { Dims d = b.dims(x); d.insert(d.begin(), 1); return d; }());
  Window w = window(ctx, 1, 2, 3, 4);
  Dims d = b.dims(x);
  int64_t n = d[0], c = d[1], h = d[2], wd = d[3];
  int64_t oh = blocks(h, w.ph, w.dh, w.kh, w.sh), ow = blocks(wd, w.pw, w.dw, w.kw, w.sw);
  if (oh <= 0 || ow <= 0) throw Unsupported(ctx.op + ": empty output");
  Value zero = b.constant(0, b.dtype(x));
  Value padded = b.pad(x, zero, {0, 0, w.ph, w.pw}, {0, 0, w.ph, w.pw}, {0, 0, 0, 0});
  std::vector<Value> slabs;
  for (int64_t i = 0; i < w.kh; ++i) {
    for (int64_t j = 0; j < w.kw; ++j) {
      int64_t r0 = i * w.dh, c0 = j * w.dw;
      Value s = b.slice(padded, {0, 0, r0, c0},
                        {n, c, r0 + (oh - 1) * w.sh + 1, c0 + (ow - 1) * w.sw + 1},
                        {1, 1, w.sh, w.sw});
      slabs.push_back(b.reshape(s, {n, c, 1, oh * ow}));
    }
  }
  Value cols = b.concatenate(slabs, 2);  // (N, C, kh * kw, L): channel-major, as PyTorch orders
  return {as_output(ctx, b.reshape(cols, ctx.outputs.at(0).dims))};
}

// col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding,
// int[2] stride): (N, C * kh * kw, L) -> (N, C, H, W), overlapping windows summed.
std::vector<Value> lower_col2im(Context& ctx) {
  Builder& b = ctx.b;
  Value cols = ctx.tensor(0);
  const Dims& out_hw = ctx.arg(1).ints;
  if (out_hw.size() != 2) throw Unsupported(ctx.op + ": output_size");
  Window w = window(ctx, 2, 3, 4, 5);
  bool batched = b.rank(cols) == 3;
  if (!batched && b.rank(cols) != 2) throw Unsupported(ctx.op + ": rank");
  Dims d = b.dims(cols);
  int64_t n = batched ? d[0] : 1, ckk = d[batched ? 1 : 0];
  int64_t k = w.kh * w.kw;
  if (k == 0 || ckk % k != 0) throw Unsupported(ctx.op + ": channels");
  int64_t c = ckk / k, h = out_hw[0], wd = out_hw[1];
  int64_t oh = blocks(h, w.ph, w.dh, w.kh, w.sh), ow = blocks(wd, w.pw, w.dw, w.kw, w.sw);
  if (oh <= 0 || ow <= 0 || oh * ow != d.back()) throw Unsupported(ctx.op + ": block count");
  DType acc = accumulation_type(b.dtype(cols));
  Value x = b.reshape(b.convert(cols, acc), {n, c, k, oh, ow});
  int64_t hp = h + 2 * w.ph, wp = wd + 2 * w.pw;
  Value zero = b.constant(0, acc);
  Value sum;
  for (int64_t i = 0; i < w.kh; ++i) {
    for (int64_t j = 0; j < w.kw; ++j) {
      int64_t kidx = i * w.kw + j;
      Value slab = b.reshape(b.slice(x, {0, 0, kidx, 0, 0}, {n, c, kidx + 1, oh, ow}, {1, 1, 1, 1, 1}),
                             {n, c, oh, ow});
      int64_t r0 = i * w.dh, c0 = j * w.dw;
      int64_t rows = r0 + (oh - 1) * w.sh + 1, cols_used = c0 + (ow - 1) * w.sw + 1;
      Value placed = b.pad(slab, zero, {0, 0, r0, c0}, {0, 0, hp - rows, wp - cols_used},
                           {0, 0, w.sh - 1, w.sw - 1});
      sum = sum.valid() ? b.add(sum, placed) : placed;
    }
  }
  Value out = b.slice(sum, {0, 0, w.ph, w.pw}, {n, c, w.ph + h, w.pw + wd}, {1, 1, 1, 1});
  return {as_output(ctx, b.reshape(out, ctx.outputs.at(0).dims))};
}

}  // namespace

TPU_LOWERING("im2col", lower_im2col);
TPU_LOWERING("col2im", lower_col2im);

}  // namespace tpu::lowering
