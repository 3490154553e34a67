// Normalization: layer, group and batch norm and their gradients. Statistics are computed in the
// accumulation dtype (f32 for f16 / bf16), as PyTorch's CPU and CUDA kernels do.
#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

Dims range_dims(int64_t begin, int64_t end) {
  Dims dims;
  for (int64_t d = begin; d < end; ++d) dims.push_back(d);
  return dims;
}

// For gradients PyTorch may not have asked for: the meta shape of an unrequested output can be
// anything, so a value that does not fit becomes zeros of the promised type.
Value as_output_or_zeros(Context& ctx, Value v, size_t i) {
  if (numel(ctx.b.dims(v)) != numel(ctx.outputs.at(i).dims)) return ctx.b.zeros(ctx.out_type(i));
  return as_output(ctx, v, i);
}

Value rsqrt(Builder& b, Value x) { return b.unary("stablehlo.rsqrt", x); }

// Statistics of a normalization over `dims` of x: mean and 1/sqrt(biased var + eps), both
// reduced, and x normalized with them.
struct Normalized {
  Value mean, rstd, x_hat;
};

Normalized normalize(Builder& b, Value x, const Dims& dims, Value eps) {
  Dims shape = b.dims(x);
  Value mean = mean_over(b, x, dims);
  Value centered = b.sub(x, expand_back(b, mean, shape, dims));
  Value var = mean_over(b, b.mul(centered, centered), dims);
  Value rstd = rsqrt(b, b.add(var, b.broadcast_to(eps, b.dims(var))));
  return {mean, rstd, b.mul(centered, expand_back(b, rstd, shape, dims))};
}

// d(loss)/dx of y = x_hat * w over `dims`, given g = grad * w and rstd broadcast to x.
Value normalization_input_grad(Builder& b, Value scaled_grad, Value x_hat, Value rstd,
                               const Dims& dims) {
  Dims shape = b.dims(scaled_grad);
  Value mean_grad = expand_back(b, mean_over(b, scaled_grad, dims), shape, dims);
  Value mean_projection =
      expand_back(b, mean_over(b, b.mul(scaled_grad, x_hat), dims), shape, dims);
  return b.mul(rstd, b.sub(b.sub(scaled_grad, mean_grad), b.mul(x_hat, mean_projection)));
}

Value scale_and_shift(Builder& b, Value x, Value weight, Value bias) {
  if (weight.valid()) x = b.mul(x, weight);
  if (bias.valid()) x = b.add(x, bias);
  return x;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
std::vector<Value> lower_native_layer_norm(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  Value x = b.convert(ctx.tensor(0), acc);
  Dims shape = b.dims(x);
  int64_t axis = b.rank(x) - static_cast<int64_t>(ctx.arg(1).ints.size());
  Dims dims = range_dims(axis, b.rank(x));
  Normalized n = normalize(b, x, dims, operand_as(ctx, 4, acc, {}));
  auto affine = [&](size_t i) {
    return ctx.has(i) ? b.broadcast_to(b.convert(ctx.tensor(i), acc), shape) : Value{};
  };
  Value out = scale_and_shift(b, n.x_hat, affine(2), affine(3));
  return {as_output(ctx, out, 0), as_output(ctx, n.mean, 1), as_output(ctx, n.rstd, 2)};
}

// A normalization backward's incoming gradient (args[0]) and input (args[1]), in the input's
// compute dtype.
struct BackwardOperands {
  DType acc;
  Value grad, x;
};
BackwardOperands backward_operands(Context& ctx) {
  DType acc = float_compute_type(ctx, 1);
  return {acc, ctx.b.convert(ctx.tensor(0), acc), ctx.b.convert(ctx.tensor(1), acc)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
// output_mask) -> (grad_input, grad_weight, grad_bias)
std::vector<Value> lower_native_layer_norm_backward(Context& ctx) {
  Builder& b = ctx.b;
  auto [acc, grad, x] = backward_operands(ctx);
  Dims shape = b.dims(x);
  int64_t axis = b.rank(x) - static_cast<int64_t>(ctx.arg(2).ints.size());
  Dims dims = range_dims(axis, b.rank(x));
  Dims leading = range_dims(0, axis);
  auto statistic = [&](size_t i) {
    return expand_back(b, b.convert(ctx.tensor(i), acc), shape, dims);
  };
  Value mean = statistic(3), rstd = statistic(4);
  Value x_hat = b.mul(b.sub(x, mean), rstd);
  Value scaled_grad = grad;
  if (ctx.has(5)) scaled_grad = b.mul(grad, b.broadcast_to(b.convert(ctx.tensor(5), acc), shape));
  Value grad_input = normalization_input_grad(b, scaled_grad, x_hat, rstd, dims);
  Value grad_weight = sum_over(b, b.mul(grad, x_hat), leading);
  Value grad_bias = sum_over(b, grad, leading);
  return {as_output_or_zeros(ctx, grad_input, 0), as_output_or_zeros(ctx, grad_weight, 1),
          as_output_or_zeros(ctx, grad_bias, 2)};
}

// Group norm sees the input as [N, group, C/group * HxW] for statistics and [N, C, HxW] for the
// per-channel affine parameters.
struct GroupShapes {
  Dims grouped, channels;
};

GroupShapes group_shapes(const Context& ctx, size_t n_index) {
  int64_t n = ctx.int_arg(n_index, 0), c = ctx.int_arg(n_index + 1, 0);
  int64_t hw = ctx.int_arg(n_index + 2, 0), groups = ctx.int_arg(n_index + 3, 1);
  if (groups <= 0 || c % groups != 0) throw Unsupported(ctx.op + ": channels not divisible");
  return {{n, groups, c / groups * hw}, {n, c, hw}};
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
std::vector<Value> lower_native_group_norm(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  GroupShapes s = group_shapes(ctx, 3);
  Value x = b.reshape(b.convert(ctx.tensor(0), acc), s.grouped);
  Normalized n = normalize(b, x, {2}, operand_as(ctx, 7, acc, {}));
  Value out = scale_and_shift(b, b.reshape(n.x_hat, s.channels),
                              per_channel(ctx, 1, acc, s.channels, 1),
                              per_channel(ctx, 2, acc, s.channels, 1));
  return {as_output(ctx, out, 0), as_output(ctx, n.mean, 1), as_output(ctx, n.rstd, 2)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group,
// output_mask) -> (grad_input, grad_weight, grad_bias)
std::vector<Value> lower_native_group_norm_backward(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 1);
  GroupShapes s = group_shapes(ctx, 5);
  Value grad = b.reshape(b.convert(ctx.tensor(0), acc), s.channels);
  Value x = b.reshape(b.convert(ctx.tensor(1), acc), s.grouped);
  auto statistic = [&](size_t i) {
    Value v = b.reshape(b.convert(ctx.tensor(i), acc), {s.grouped[0], s.grouped[1], 1});
    return b.broadcast_to(v, s.grouped);
  };
  Value rstd = statistic(3);
  Value x_hat = b.mul(b.sub(x, statistic(2)), rstd);
  Value weight = per_channel(ctx, 4, acc, s.channels, 1);
  Value scaled_grad = weight.valid() ? b.mul(grad, weight) : grad;
  Value grad_input =
      normalization_input_grad(b, b.reshape(scaled_grad, s.grouped), x_hat, rstd, {2});
  Value grad_weight = sum_over(b, b.mul(grad, b.reshape(x_hat, s.channels)), {0, 2});
  Value grad_bias = sum_over(b, grad, {0, 2});
  return {as_output_or_zeros(ctx, grad_input, 0), as_output_or_zeros(ctx, grad_weight, 1),
          as_output_or_zeros(ctx, grad_bias, 2)};
}

// Batch norm over every dim but 1. Where each argument sits differs between the variants.
struct BatchNormLayout {
  int64_t running_mean = -1, running_var = -1;  // -1: the variant has no running statistics
  int64_t training = -1;                         // -1: never training
  size_t momentum = 0, eps = 0;
  bool returns_running = false;                  // the functional variant returns new statistics
};

std::vector<Value> batch_norm(Context& ctx, const BatchNormLayout& layout) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  Value x = b.convert(ctx.tensor(0), acc);
  Dims shape = b.dims(x);
  if (b.rank(x) < 2) throw Unsupported(ctx.op + ": input of rank < 2");
  Dims dims = all_but(b.rank(x), 1);
  bool training = layout.training >= 0 && ctx.bool_arg(layout.training, false);
  bool has_running = layout.running_mean >= 0 && ctx.has(layout.running_mean);
  Value weight = per_channel(ctx, 1, acc, shape, 1), bias = per_channel(ctx, 2, acc, shape, 1);
  Value eps = operand_as(ctx, layout.eps, acc, {});

  if (!training) {
    if (!has_running) throw Unsupported(ctx.op + ": evaluation without running statistics");
    Value mean = per_channel(ctx, layout.running_mean, acc, shape, 1);
    Value var = b.convert(ctx.tensor(layout.running_var), acc);
    Value rstd = rsqrt(b, b.add(var, b.broadcast_to(eps, b.dims(var))));
    Value x_hat = b.mul(b.sub(x, mean), b.broadcast_in_dim(rstd, shape, {1}));
    std::vector<Value> results{as_output(ctx, scale_and_shift(b, x_hat, weight, bias), 0),
                               b.zeros(ctx.out_type(1)), b.zeros(ctx.out_type(2))};
    if (layout.returns_running) {
      results.push_back(as_output(ctx, ctx.tensor(layout.running_mean), 3));
      results.push_back(as_output(ctx, ctx.tensor(layout.running_var), 4));
    }
    return results;
  }
  if (has_running && !layout.returns_running) {
    throw Unsupported(ctx.op + ": training updates running statistics in place");
  }
  Normalized n = normalize(b, x, dims, eps);
  std::vector<Value> results{as_output(ctx, scale_and_shift(b, n.x_hat, weight, bias), 0),
                             as_output(ctx, n.mean, 1), as_output(ctx, n.rstd, 2)};
  if (layout.returns_running) {
    // running = (1 - momentum) * running + momentum * batch statistic (unbiased variance).
    Dims channels = b.dims(n.mean);
    Value momentum = operand_as(ctx, layout.momentum, acc, channels);
    Value keep = b.sub(b.full(1, b.type(momentum)), momentum);
    double count = static_cast<double>(count_over(shape, dims));
    Value centered = b.sub(x, expand_back(b, n.mean, shape, dims));
    Value unbiased = b.div(sum_over(b, b.mul(centered, centered), dims),
                           b.full(count - 1, b.type(n.mean)));
    auto update = [&](size_t i, Value batch) {
      Value running = b.convert(ctx.tensor(i), acc);
      return b.add(b.mul(keep, b.reshape(running, channels)), b.mul(momentum, batch));
    };
    results.push_back(as_output(ctx, update(layout.running_mean, n.mean), 3));
    results.push_back(as_output(ctx, update(layout.running_var, unbiased), 4));
  }
  return results;
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
std::vector<Value> lower_native_batch_norm(Context& ctx) {
  return batch_norm(ctx, {3, 4, 5, 6, 7, false});
}

// _native_batch_norm_legit: the same arguments, or .no_stats (input, weight?, bias?, training,
// momentum, eps).
std::vector<Value> lower_native_batch_norm_legit(Context& ctx) {
  if (ctx.overload.rfind("no_stats", 0) == 0) return batch_norm(ctx, {-1, -1, 3, 4, 5, false});
  return batch_norm(ctx, {3, 4, 5, 6, 7, false});
}

// (input, weight?, bias?, running_mean, running_var, momentum, eps)
std::vector<Value> lower_native_batch_norm_legit_no_training(Context& ctx) {
  return batch_norm(ctx, {3, 4, -1, 5, 6, false});
}

// (input, weight?, bias?, running_mean, running_var, training, momentum, eps)
// -> (out, mean, rstd, running_mean_out, running_var_out)
std::vector<Value> lower_native_batch_norm_legit_functional(Context& ctx) {
  return batch_norm(ctx, {3, 4, 5, 6, 7, true});
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?,
// save_invstd?, train, eps, output_mask) -> (grad_input, grad_weight, grad_bias)
std::vector<Value> lower_native_batch_norm_backward(Context& ctx) {
  Builder& b = ctx.b;
  auto [acc, grad, x] = backward_operands(ctx);
  Dims shape = b.dims(x);
  if (b.rank(x) < 2) throw Unsupported(ctx.op + ": input of rank < 2");
  Dims dims = all_but(b.rank(x), 1);
  bool training = ctx.bool_arg(7, false);
  size_t mean_index = training ? 5 : 3;
  if (!ctx.has(mean_index) || !ctx.has(mean_index + 1)) {
    throw Unsupported(ctx.op + ": missing statistics");
  }
  Value mean = per_channel(ctx, mean_index, acc, shape, 1);
  Value rstd;
  if (training) {
    rstd = per_channel(ctx, 6, acc, shape, 1);
  } else {
    Value var = b.convert(ctx.tensor(4), acc);
    Value eps = operand_as(ctx, 8, acc, b.dims(var));
    rstd = b.broadcast_in_dim(rsqrt(b, b.add(var, eps)), shape, {1});
  }
  Value x_hat = b.mul(b.sub(x, mean), rstd);
  Value weight = per_channel(ctx, 2, acc, shape, 1);
  Value scaled_grad = weight.valid() ? b.mul(grad, weight) : grad;
  Value grad_input = training ? normalization_input_grad(b, scaled_grad, x_hat, rstd, dims)
                              : b.mul(scaled_grad, rstd);
  Value grad_weight = sum_over(b, b.mul(grad, x_hat), dims);
  Value grad_bias = sum_over(b, grad, dims);
  return {as_output_or_zeros(ctx, grad_input, 0), as_output_or_zeros(ctx, grad_weight, 1),
          as_output_or_zeros(ctx, grad_bias, 2)};
}

}  // namespace

TPU_LOWERING("native_layer_norm", lower_native_layer_norm);
TPU_LOWERING("native_layer_norm_backward", lower_native_layer_norm_backward);
TPU_LOWERING("native_group_norm", lower_native_group_norm);
TPU_LOWERING("native_group_norm_backward", lower_native_group_norm_backward);
TPU_LOWERING("native_batch_norm", lower_native_batch_norm);
TPU_LOWERING("_native_batch_norm_legit", lower_native_batch_norm_legit);
TPU_LOWERING("_native_batch_norm_legit_no_training", lower_native_batch_norm_legit_no_training);
TPU_LOWERING("_native_batch_norm_legit_functional", lower_native_batch_norm_legit_functional);
TPU_LOWERING("native_batch_norm_backward", lower_native_batch_norm_backward);

}  // namespace tpu::lowering
