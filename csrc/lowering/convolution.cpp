// Convolutions of any spatial rank, grouped, strided, padded, dilated and transposed, and their
// gradients, as stablehlo.convolution.
//
// All padding (including the zero insertion of a transposed convolution) is done with an explicit
// stablehlo.pad first: pad accepts negative edges (cropping), which the gradient formulas need
// when a stride leaves trailing input elements unused, and every convolution then has a plain,
// unpadded window.
#include <algorithm>
#include <string>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

struct ConvParams {
  Dims stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

// A parameter list for `n` spatial dims: PyTorch lets a single entry stand for all of them.
Dims expanded(const Context& ctx, size_t i, size_t n, int64_t fallback) {
  Dims v = ctx.has(i) ? ctx.arg(i).ints : Dims{};
  if (v.empty()) return Dims(n, fallback);
  if (v.size() == 1 && n > 1) return Dims(n, v[0]);
  if (v.size() != n) throw Unsupported(ctx.op + ": parameter of the wrong length");
  return v;
}

// `first` is the index of `stride` in the schema; transposed, output_padding and groups follow.
ConvParams params_at(const Context& ctx, size_t first, size_t spatial) {
  ConvParams p;
  p.stride = expanded(ctx, first, spatial, 1);
  p.padding = expanded(ctx, first + 1, spatial, 0);
  p.dilation = expanded(ctx, first + 2, spatial, 1);
  p.transposed = ctx.bool_arg(first + 3, false);
  p.output_padding = expanded(ctx, first + 4, spatial, 0);
  p.groups = ctx.int_arg(first + 5, 1);
  if (p.groups < 1) throw Unsupported(ctx.op + ": groups < 1");
  return p;
}

// "[b, f, 0, 1]"-style layout of one convolution operand.
std::string layout(const char* first, const char* second, size_t spatial) {
  std::string s = std::string("[") + first + ", " + second;
  for (size_t i = 0; i < spatial; ++i) s += ", " + std::to_string(i);
  return s + "]";
}

// Zero-pads the spatial dims (2...) of `x`; negative edges crop.
Value pad_spatial(Builder& b, Value x, const Dims& low, const Dims& high, const Dims& interior) {
  Dims lo{0, 0}, hi{0, 0}, in{0, 0};
  lo.insert(lo.end(), low.begin(), low.end());
  hi.insert(hi.end(), high.begin(), high.end());
  in.insert(in.end(), interior.begin(), interior.end());
  return b.pad(x, b.constant(0, b.dtype(x)), lo, hi, in);
}

// stablehlo.convolution with no padding. `result` is the result's dims, which the caller knows
// from the formula it is implementing.
Value convolve(Builder& b, Value lhs, Value rhs, const std::string& dimension_numbers,
               const Dims& strides, const Dims& rhs_dilation, int64_t feature_groups,
               int64_t batch_groups, const Dims& result) {
  TensorType type{b.dtype(lhs), result};
  if (numel(result) == 0) return b.zeros(type);
  if (numel(b.dims(lhs)) == 0 || numel(b.dims(rhs)) == 0) return b.zeros(type);
  size_t spatial = strides.size();
  Dims ones(spatial, 1);
  std::string zero_padding = "dense<0> : tensor<" + std::to_string(spatial) + "x2xi64>";
  std::string attributes =
      "batch_group_count = " + std::to_string(batch_groups) +
      " : i64, dimension_numbers = #stablehlo.conv<" + dimension_numbers +
      ">, feature_group_count = " + std::to_string(feature_groups) +
      " : i64, lhs_dilation = " + hlo::i64_array(ones) + ", padding = " + zero_padding +
      ", rhs_dilation = " + hlo::i64_array(rhs_dilation) +
      ", window_strides = " + hlo::i64_array(strides);
  return b.op1("stablehlo.convolution", {lhs, rhs}, type, attributes);
}

// y[n, o, ...] = sum over c in o's group and the window of x[n, c, ...] * w[o, c, ...], for an
// already padded x: [N, C, *in] and w: [O, C/groups, *k].
Value forward(Builder& b, Value x, Value w, const Dims& stride, const Dims& dilation,
              int64_t groups) {
  const Dims& xd = b.dims(x);
  const Dims& wd = b.dims(w);
  size_t spatial = xd.size() - 2;
  Dims out{xd[0], wd[0]};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t span = dilation[i] * (wd[i + 2] - 1) + 1;
    out.push_back(std::max<int64_t>(0, (xd[i + 2] - span) / stride[i] + 1));
  }
  std::string numbers = layout("b", "f", spatial) + "x" + layout("o", "i", spatial) + "->" +
                        layout("b", "f", spatial);
  return convolve(b, x, w, numbers, stride, dilation, groups, 1, out);
}

Value regular(Builder& b, Value x, Value w, const ConvParams& p) {
  return forward(b, pad_spatial(b, x, p.padding, p.padding, Dims(p.padding.size(), 0)), w,
                 p.stride, p.dilation, p.groups);
}

// The weight of a transposed convolution, [Cin, Cout/g, *k], as the weight of the equivalent
// regular convolution over the zero-stuffed input: [Cout, Cin/g, *k], spatially flipped.
Value transposed_weight(Builder& b, Value w, int64_t groups) {
  Dims wd = b.dims(w);
  size_t spatial = wd.size() - 2;
  int64_t cin = wd[0], cout_per_group = wd[1];
  Dims grouped{groups, cin / groups, cout_per_group};
  grouped.insert(grouped.end(), wd.begin() + 2, wd.end());
  Dims perm{0, 2, 1};
  Dims flip;
  for (size_t i = 0; i < spatial; ++i) {
    perm.push_back(static_cast<int64_t>(i) + 3);
    flip.push_back(static_cast<int64_t>(i) + 2);
  }
  Value v = b.transpose(b.reshape(w, grouped), perm);
  Dims regrouped{groups * cout_per_group, cin / groups};
  regrouped.insert(regrouped.end(), wd.begin() + 2, wd.end());
  return b.reverse(b.reshape(v, regrouped), flip);
}

// The transposed convolution (the gradient of a regular one with respect to its input):
// insert stride - 1 zeros between inputs, pad by dilation * (k - 1) - padding (plus
// output_padding at the end), and run a unit-stride convolution with the flipped kernel.
Value transposed(Builder& b, Value x, Value w, const ConvParams& p) {
  const Dims& wd = b.dims(w);
  size_t spatial = wd.size() - 2;
  Dims low, high, interior;
  for (size_t i = 0; i < spatial; ++i) {
    int64_t reach = p.dilation[i] * (wd[i + 2] - 1);
    low.push_back(reach - p.padding[i]);
    high.push_back(reach - p.padding[i] + p.output_padding[i]);
    interior.push_back(p.stride[i] - 1);
  }
  Value stuffed = pad_spatial(b, x, low, high, interior);
  return forward(b, stuffed, transposed_weight(b, w, p.groups), Dims(spatial, 1), p.dilation,
                 p.groups);
}

// d(loss)/d(weight) of the regular convolution y = conv(x, w): for x [N, C, *in] and
// dy [N, O, *out], a convolution that contracts over the batch, with the batch of x split into
// the groups (batch_group_count) and dy's stride turned into the kernel's dilation.
Value weight_grad(Builder& b, Value x, Value dy, const ConvParams& p, const Dims& kernel) {
  const Dims& xd = b.dims(x);
  const Dims& yd = b.dims(dy);
  size_t spatial = xd.size() - 2;
  Dims high;
  for (size_t i = 0; i < spatial; ++i) {
    // Exactly the inputs some output reads: trailing ones a stride skips are cropped.
    int64_t needed = p.dilation[i] * (kernel[i] - 1) + p.stride[i] * (yd[i + 2] - 1) + 1;
    high.push_back(needed - xd[i + 2] - p.padding[i]);
  }
  Value padded = pad_spatial(b, x, p.padding, high, Dims(spatial, 0));
  Dims result{yd[1], xd[1] / p.groups};
  result.insert(result.end(), kernel.begin(), kernel.end());
  std::string numbers = layout("f", "b", spatial) + "x" + layout("i", "o", spatial) + "->" +
                        layout("f", "b", spatial);
  return convolve(b, padded, dy, numbers, p.dilation, p.stride, 1, p.groups, result);
}

DType compute_dtype(const Context& ctx, Value x) {
  DType dtype = ctx.b.dtype(x);
  if (!is_floating(dtype)) throw Unsupported(ctx.op + ": " + mlir_name(dtype) + " is not lowered");
  return accumulation_type(dtype);
}

Dims spatial_of(const Dims& dims) { return Dims(dims.begin() + 2, dims.end()); }

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding,
// groups); convolution_overrideable has the same arguments.
std::vector<Value> lower_convolution(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), w = ctx.tensor(1);
  if (b.rank(x) < 3 || b.rank(x) != b.rank(w)) throw Unsupported(ctx.op + ": unbatched input");
  DType acc = compute_dtype(ctx, x);
  ConvParams p = params_at(ctx, 3, b.rank(x) - 2);
  x = b.convert(x, acc);
  w = b.convert(w, acc);
  Value y = p.transposed ? transposed(b, x, w, p) : regular(b, x, w, p);
  if (ctx.has(2)) {
    Value bias = b.convert(ctx.tensor(2), acc);
    y = b.add(y, b.broadcast_in_dim(bias, b.dims(y), {1}));
  }
  return {as_output(ctx, y)};
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride, ..., groups, output_mask)
// and convolution_backward_overrideable (the same without bias_sizes)
// -> (grad_input, grad_weight, grad_bias).
std::vector<Value> lower_convolution_backward(Context& ctx) {
  Builder& b = ctx.b;
  bool overrideable = ctx.op.find("overrideable") != std::string::npos;
  size_t first = overrideable ? 3 : 4;
  Value dy = ctx.tensor(0), x = ctx.tensor(1), w = ctx.tensor(2);
  if (b.rank(x) < 3) throw Unsupported(ctx.op + ": unbatched input");
  DType acc = compute_dtype(ctx, x);
  size_t spatial = b.rank(x) - 2;
  ConvParams p = params_at(ctx, first, spatial);
  Dims mask = ctx.has(first + 6) ? ctx.arg(first + 6).ints : Dims{1, 1, 1};
  dy = b.convert(dy, acc);
  x = b.convert(x, acc);
  w = b.convert(w, acc);
  Dims in = spatial_of(b.dims(x)), out = spatial_of(b.dims(dy)), kernel = spatial_of(b.dims(w));

  std::vector<Value> results(3);
  if (mask.at(0)) {
    Value grad;
    if (p.transposed) {
      // With output_padding >= stride, the regular convolution of dy has windows past the
      // input's end (over output padding no input reached): they are not gradients of anything.
      grad = regular(b, dy, w, p);
      Dims limit = b.dims(grad);
      for (size_t i = 0; i < spatial; ++i) limit[i + 2] = std::min(limit[i + 2], in[i]);
      grad = b.slice(grad, Dims(limit.size(), 0), limit, Dims(limit.size(), 1));
    } else {
      // The transposed convolution whose output_padding restores the inputs no window reached.
      ConvParams q = p;
      for (size_t i = 0; i < spatial; ++i) {
        int64_t reached = (out[i] - 1) * p.stride[i] - 2 * p.padding[i] +
                          p.dilation[i] * (kernel[i] - 1) + 1;
        q.output_padding[i] = in[i] - reached;
      }
      grad = transposed(b, dy, w, q);
    }
    results[0] = as_output(ctx, grad, 0);
  }
  if (mask.at(1)) {
    // A transposed convolution's weight gradient is the regular one with input and output
    // swapped: its input plays the regular convolution's output gradient.
    Value grad = p.transposed ? weight_grad(b, dy, x, p, kernel) : weight_grad(b, x, dy, p, kernel);
    results[1] = as_output(ctx, grad, 1);
  }
  if (mask.at(2)) results[2] = as_output(ctx, sum_over(b, dy, all_but(b.rank(dy), 1)), 2);
  for (size_t i = 0; i < 3; ++i) {
    if (!results[i].valid()) results[i] = b.zeros(ctx.out_type(i));
  }
  return results;
}

}  // namespace

TPU_LOWERING("convolution", lower_convolution);
TPU_LOWERING("convolution_overrideable", lower_convolution);
TPU_LOWERING("convolution_backward", lower_convolution_backward);
TPU_LOWERING("convolution_backward_overrideable", lower_convolution_backward);

}  // namespace tpu::lowering
