// Pooling: max pooling with indices, average pooling, adaptive average pooling, and their
// gradients, for any number of trailing spatial dims.
//
// A window is walked offset by offset: each kernel offset is one strided slice of the padded input
// with the output's shape, so a k x k pool is k*k slices combined elementwise. That keeps
// PyTorch's scan order (its first maximum wins, NaN wins) without a variadic reduce_window, and
// the gradients become the mirror image: each offset's share is placed back with an interior pad
// (stride - 1 zeros between elements), and the shares are summed. Both are exact and
// deterministic, unlike a scatter-add.
#include <string>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

struct Window {
  Dims kernel, stride, padding, dilation;
  bool ceil_mode = false;
};

Dims list_arg(const Context& ctx, size_t i, size_t n, const Dims& fallback) {
  Dims v = ctx.has(i) ? ctx.arg(i).ints : Dims{};
  if (v.empty()) return fallback;
  if (v.size() == 1 && n > 1) return Dims(n, v[0]);
  if (v.size() != n) throw Unsupported(ctx.op + ": window parameter of the wrong length");
  return v;
}

// (kernel_size, stride, padding[, dilation], ceil_mode) from args[first...]; an empty stride means
// the kernel size.
Window window_at(const Context& ctx, size_t first, bool has_dilation) {
  Window w;
  size_t n = ctx.arg(first).ints.size();
  if (n == 0) throw Unsupported(ctx.op + ": empty kernel");
  w.kernel = ctx.arg(first).ints;
  w.stride = list_arg(ctx, first + 1, n, w.kernel);
  w.padding = list_arg(ctx, first + 2, n, Dims(n, 0));
  w.dilation = has_dilation ? list_arg(ctx, first + 3, n, Dims(n, 1)) : Dims(n, 1);
  w.ceil_mode = ctx.bool_arg(first + (has_dilation ? 4 : 3), false);
  return w;
}

// Every kernel offset, the last spatial dim fastest (PyTorch's scan order).
std::vector<Dims> offsets(const Dims& kernel) {
  std::vector<Dims> all{Dims{}};
  for (int64_t k : kernel) {
    std::vector<Dims> next;
    for (const Dims& prefix : all) {
      for (int64_t i = 0; i < k; ++i) {
        Dims d = prefix;
        d.push_back(i);
        next.push_back(d);
      }
    }
    all = std::move(next);
  }
  return all;
}

// Pads the trailing spatial dims of x with `value`: `low` before each, and after each as much
// as the windows of `out` reach (negative: cropped).
Value pad_for_windows(Builder& b, Value x, double value, const Window& w, const Dims& out) {
  int64_t rank = b.rank(x), lead = rank - static_cast<int64_t>(w.kernel.size());
  Dims low(rank, 0), high(rank, 0);
  for (size_t i = 0; i < w.kernel.size(); ++i) {
    int64_t d = lead + static_cast<int64_t>(i);
    int64_t reach = (out[i] - 1) * w.stride[i] + w.dilation[i] * (w.kernel[i] - 1) + 1;
    low[d] = w.padding[i];
    high[d] = reach - b.dims(x)[d] - w.padding[i];
  }
  return b.pad(x, b.constant(value, b.dtype(x)), low, high, Dims(rank, 0));
}

// The slice of the padded input that kernel offset `at` reads for every output position.
Value window_slice(Builder& b, Value padded, const Window& w, const Dims& at, const Dims& out) {
  int64_t rank = b.rank(padded), lead = rank - static_cast<int64_t>(w.kernel.size());
  Dims start(rank, 0), limit = b.dims(padded), strides(rank, 1);
  for (size_t i = 0; i < w.kernel.size(); ++i) {
    int64_t d = lead + static_cast<int64_t>(i);
    start[d] = at[i] * w.dilation[i];
    limit[d] = start[d] + (out[i] - 1) * w.stride[i] + 1;
    strides[d] = w.stride[i];
  }
  return b.slice(padded, start, limit, strides);
}

// The mirror of window_slice: `share` (the output's shape) placed at the input positions offset
// `at` read, zeros elsewhere, in the unpadded input's shape `input`.
Value place_back(Builder& b, Value share, const Window& w, const Dims& at, const Dims& input) {
  int64_t rank = b.rank(share), lead = rank - static_cast<int64_t>(w.kernel.size());
  Dims low(rank, 0), high(rank, 0), interior(rank, 0);
  for (size_t i = 0; i < w.kernel.size(); ++i) {
    int64_t d = lead + static_cast<int64_t>(i);
    int64_t n = b.dims(share)[d];
    low[d] = at[i] * w.dilation[i] - w.padding[i];
    interior[d] = w.stride[i] - 1;
    int64_t spanned = n > 0 ? (n - 1) * w.stride[i] + 1 : 0;
    high[d] = input[d] - low[d] - spanned;
  }
  return b.pad(share, b.constant(0, b.dtype(share)), low, high, interior);
}

Dims spatial_tail(const Dims& dims, size_t n) { return Dims(dims.end() - n, dims.end()); }

// The flat index, within one input plane, that offset `at` reads at each output position:
// sum over dims of (o * stride + at * dilation - padding) * (plane stride of that dim).
Value window_index(Builder& b, const Window& w, const Dims& at, const Dims& out_full,
                   const Dims& input_full) {
  size_t n = w.kernel.size();
  int64_t rank = static_cast<int64_t>(out_full.size()), lead = rank - static_cast<int64_t>(n);
  TensorType type{DType::I64, out_full};
  Value index = b.zeros(type);
  int64_t plane_stride = 1;
  for (int64_t i = static_cast<int64_t>(n) - 1; i >= 0; --i) {
    int64_t d = lead + i;
    Value pos = b.mul(b.iota(type, d), b.full(w.stride[i], type));
    pos = b.add(pos, b.full(at[i] * w.dilation[i] - w.padding[i], type));
    index = b.add(index, b.mul(pos, b.full(plane_stride, type)));
    plane_stride *= input_full[d];
  }
  return index;
}

// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
// -> (values, indices)
std::vector<Value> lower_max_pool_with_indices(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  Window w = window_at(ctx, 1, true);
  DType dtype = b.dtype(x);
  if (dtype == DType::Bool || is_complex(dtype)) throw Unsupported(ctx.op + ": dtype");
  const Dims& out_full = ctx.outputs.at(0).dims;
  Dims out = spatial_tail(out_full, w.kernel.size());
  Dims input_full = b.dims(x);
  if (numel(out_full) == 0) return {b.zeros(ctx.out_type(0)), b.zeros(ctx.out_type(1))};
  Value padded = pad_for_windows(b, x, lowest(dtype), w, out);
  bool floating = is_floating(dtype);
  Value best, best_index;
  for (const Dims& at : offsets(w.kernel)) {
    Value v = window_slice(b, padded, w, at, out);
    Value index = window_index(b, w, at, out_full, input_full);
    if (!best.valid()) {
      best = v;
      best_index = index;
      continue;
    }
    Value take = b.compare(v, best, "GT");
    if (floating) {
      Value nan_first = b.binary("stablehlo.and", is_nan(b, v),
                                 b.unary("stablehlo.not", is_nan(b, best)));
      take = b.binary("stablehlo.or", take, nan_first);
    }
    best = b.select(take, v, best);
    best_index = b.select(take, index, best_index);
  }
  return {as_output(ctx, best, 0), as_output(ctx, best_index, 1)};
}

// max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
// ceil_mode, indices): each output's gradient goes to the input its index names.
std::vector<Value> lower_max_pool_with_indices_backward(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(1);
  Window w = window_at(ctx, 2, true);
  DType acc = accumulation_type(ctx.outputs.at(0).dtype);
  if (!is_floating(acc)) throw Unsupported(ctx.op + ": dtype");
  Value grad = b.convert(ctx.tensor(0), acc);
  Value indices = b.convert(ctx.tensor(7), DType::I64);
  Dims out_full = b.dims(grad), input_full = b.dims(x);
  if (numel(out_full) == 0 || numel(input_full) == 0) return {b.zeros(ctx.out_type(0))};
  Value zero = b.zeros(b.type(grad));
  Value total;
  for (const Dims& at : offsets(w.kernel)) {
    Value chosen = b.compare(indices, window_index(b, w, at, out_full, input_full), "EQ");
    Value share = place_back(b, b.select(chosen, grad, zero), w, at, input_full);
    total = total.valid() ? b.add(total, share) : share;
  }
  return {as_output(ctx, total)};
}

// How many elements average pooling divides each output by, per output position: the divisor
// override, or the window clipped to the padded input (count_include_pad) or to the input.
Value avg_divisor(Builder& b, const Window& w, const Dims& out_full, const Dims& input_full,
                  bool count_include_pad, DType dtype) {
  size_t n = w.kernel.size();
  int64_t rank = static_cast<int64_t>(out_full.size()), lead = rank - static_cast<int64_t>(n);
  TensorType type{DType::I64, out_full};
  Value count = b.full(1, type);
  for (size_t i = 0; i < n; ++i) {
    int64_t d = lead + static_cast<int64_t>(i);
    int64_t size = input_full[d];
    Value start = b.sub(b.mul(b.iota(type, d), b.full(w.stride[i], type)),
                        b.full(w.padding[i], type));
    Value end = b.min(b.add(start, b.full(w.kernel[i], type)), b.full(size + w.padding[i], type));
    Value extent;
    if (count_include_pad) {
      extent = b.sub(end, start);
    } else {
      Value lo = b.max(start, b.zeros(type)), hi = b.min(end, b.full(size, type));
      extent = b.sub(hi, lo);
    }
    count = b.mul(count, extent);
  }
  return b.convert(count, dtype);
}

struct AvgArgs {
  Window w;
  bool count_include_pad = true;
  int64_t divisor_override = 0;
};

// (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?) at `first`.
AvgArgs avg_args(const Context& ctx, size_t first) {
  AvgArgs a;
  a.w = window_at(ctx, first, false);
  a.count_include_pad = ctx.bool_arg(first + 4, true);
  a.divisor_override = ctx.int_arg(first + 5, 0);
  return a;
}

Value divisor_of(Builder& b, const AvgArgs& a, const Dims& out_full, const Dims& input_full,
                 DType dtype) {
  if (a.divisor_override) return b.full(static_cast<double>(a.divisor_override), {dtype, out_full});
  return avg_divisor(b, a.w, out_full, input_full, a.count_include_pad, dtype);
}

// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override?)
std::vector<Value> lower_avg_pool(Context& ctx) {
  Builder& b = ctx.b;
  AvgArgs a = avg_args(ctx, 1);
  DType acc = accumulation_type(ctx.outputs.at(0).dtype);
  if (!is_floating(acc)) throw Unsupported(ctx.op + ": dtype");
  Value x = b.convert(ctx.tensor(0), acc);
  const Dims& out_full = ctx.outputs.at(0).dims;
  if (numel(out_full) == 0) return {b.zeros(ctx.out_type(0))};
  Dims out = spatial_tail(out_full, a.w.kernel.size());
  Value padded = pad_for_windows(b, x, 0, a.w, out);
  Value sum;
  for (const Dims& at : offsets(a.w.kernel)) {
    Value v = window_slice(b, padded, a.w, at, out);
    sum = sum.valid() ? b.add(sum, v) : v;
  }
  return {as_output(ctx, b.div(sum, divisor_of(b, a, out_full, b.dims(x), acc)))};
}

// avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override?)
std::vector<Value> lower_avg_pool_backward(Context& ctx) {
  Builder& b = ctx.b;
  AvgArgs a = avg_args(ctx, 2);
  DType acc = accumulation_type(ctx.outputs.at(0).dtype);
  if (!is_floating(acc)) throw Unsupported(ctx.op + ": dtype");
  Value grad = b.convert(ctx.tensor(0), acc);
  Dims out_full = b.dims(grad), input_full = b.dims(ctx.tensor(1));
  if (numel(out_full) == 0 || numel(input_full) == 0) return {b.zeros(ctx.out_type(0))};
  Value share = b.div(grad, divisor_of(b, a, out_full, input_full, acc));
  Value total;
  for (const Dims& at : offsets(a.w.kernel)) {
    Value placed = place_back(b, share, a.w, at, input_full);
    total = total.valid() ? b.add(total, placed) : placed;
  }
  return {as_output(ctx, total)};
}

// The [out, in] matrix that averages adaptive window o: in positions [floor(o * in / out),
// ceil((o + 1) * in / out)).
Value adaptive_matrix(Builder& b, int64_t out, int64_t in, DType dtype) {
  TensorType type{DType::I64, {out, in}};
  Value o = b.iota(type, 0), i = b.iota(type, 1);
  Value start = b.div(b.mul(o, b.full(in, type)), b.full(out, type));
  Value end = b.div(b.add(b.mul(b.add(o, b.full(1, type)), b.full(in, type)),
                          b.full(out - 1, type)),
                    b.full(out, type));
  Value inside = b.binary("stablehlo.and", b.compare(i, start, "GE"), b.compare(i, end, "LT"));
  Value weight = b.div(b.full(1, {dtype, {out, in}}), b.convert(b.sub(end, start), dtype));
  return b.select(inside, weight, b.zeros({dtype, {out, in}}));
}

// Applies `matrix` [m, n] along dim d of x (size n there, m afterwards).
Value along(Builder& b, Value x, Value matrix, int64_t d) {
  int64_t rank = b.rank(x);
  // dot_general puts the free dims of x first, then the matrix's row dim: move it back to d.
  Value y = b.dot_general(x, matrix, {}, {}, {d}, {1}, b.dtype(x));
  Dims perm;
  for (int64_t i = 0; i < rank - 1; ++i) {
    if (i == d) perm.push_back(rank - 1);
    perm.push_back(i);
  }
  if (d == rank - 1) perm.push_back(rank - 1);
  return b.transpose(y, perm);
}

// _adaptive_avg_pool{2,3}d(self, output_size): separable, one averaging matrix per spatial dim.
std::vector<Value> lower_adaptive_avg_pool(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = accumulation_type(ctx.outputs.at(0).dtype);
  if (!is_floating(acc)) throw Unsupported(ctx.op + ": dtype");
  Value x = b.convert(ctx.tensor(0), acc);
  const Dims& out_full = ctx.outputs.at(0).dims;
  if (numel(out_full) == 0 || numel(b.dims(x)) == 0) return {b.zeros(ctx.out_type(0))};
  size_t n = ctx.arg(1).ints.size();
  int64_t rank = b.rank(x);
  for (int64_t d = rank - static_cast<int64_t>(n); d < rank; ++d) {
    x = along(b, x, adaptive_matrix(b, out_full[d], b.dims(x)[d], acc), d);
  }
  return {as_output(ctx, x)};
}

// _adaptive_avg_pool{2,3}d_backward(grad_output, self): the transposed matrices.
std::vector<Value> lower_adaptive_avg_pool_backward(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = accumulation_type(ctx.outputs.at(0).dtype);
  if (!is_floating(acc)) throw Unsupported(ctx.op + ": dtype");
  Value grad = b.convert(ctx.tensor(0), acc);
  Dims input_full = b.dims(ctx.tensor(1));
  if (numel(input_full) == 0 || numel(b.dims(grad)) == 0) return {b.zeros(ctx.out_type(0))};
  int64_t rank = b.rank(grad);
  int64_t spatial = ctx.op.find("3d") != std::string::npos ? 3 : 2;
  for (int64_t d = rank - spatial; d < rank; ++d) {
    Value m = adaptive_matrix(b, b.dims(grad)[d], input_full[d], acc);
    grad = along(b, grad, b.transpose(m, {1, 0}), d);
  }
  return {as_output(ctx, grad)};
}

}  // namespace

TPU_LOWERING("max_pool2d_with_indices", lower_max_pool_with_indices);
TPU_LOWERING("max_pool3d_with_indices", lower_max_pool_with_indices);
TPU_LOWERING("max_pool2d_with_indices_backward", lower_max_pool_with_indices_backward);
TPU_LOWERING("max_pool3d_with_indices_backward", lower_max_pool_with_indices_backward);
TPU_LOWERING("avg_pool2d", lower_avg_pool);
TPU_LOWERING("avg_pool3d", lower_avg_pool);
TPU_LOWERING("avg_pool2d_backward", lower_avg_pool_backward);
TPU_LOWERING("avg_pool3d_backward", lower_avg_pool_backward);
TPU_LOWERING("_adaptive_avg_pool2d", lower_adaptive_avg_pool);
TPU_LOWERING("_adaptive_avg_pool3d", lower_adaptive_avg_pool);
TPU_LOWERING("_adaptive_avg_pool2d_backward", lower_adaptive_avg_pool_backward);
TPU_LOWERING("_adaptive_avg_pool3d_backward", lower_adaptive_avg_pool_backward);

}  // namespace tpu::lowering
