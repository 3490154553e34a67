// Losses and the gradients of a few layers: negative log-likelihood, mean-squared-error, binary
// cross-entropy, huber / smooth L1 and margin losses; embedding and dropout gradients, embedding
// renorm.
#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

Reduction reduction_arg(const Context& ctx, size_t i) {
  int64_t r = ctx.int_arg(i, kMean);
  if (r < kNone || r > kSum) throw Unsupported(ctx.op + ": unknown reduction");
  return static_cast<Reduction>(r);
}

Value reduce_loss(Builder& b, Value loss, Reduction reduction) {
  if (reduction == kNone) return loss;
  Dims dims = all_dims(b.rank(loss));
  return reduction == kMean ? mean_over(b, loss, dims) : sum_over(b, loss, dims);
}

// The incoming gradient of a reduced loss, spread over every element of `shape`.
Value loss_grad(Context& ctx, size_t grad_index, DType acc, const Dims& shape,
                Reduction reduction) {
  Builder& b = ctx.b;
  Value grad = operand_as(ctx, grad_index, acc, shape);
  if (reduction != kMean) return grad;
  return b.div(grad, b.full(static_cast<double>(numel(shape)), b.type(grad)));
}

// Negative log-likelihood over class dim 1 (dim 0 for a single sample): input [N, C, ...] or
// [C], target [N, ...] or [].
struct NllPicks {
  int64_t class_dim;
  Value chosen;         // input shape: the target's class, and not ignored
  Value class_weight;   // input shape: weight[c], or ones
  Value sample_weight;  // target shape: weight[target], 0 where ignored
};

NllPicks nll_picks(Context& ctx, Value input, size_t target_index, size_t weight_index,
                   int64_t ignore_index) {
  Builder& b = ctx.b;
  Dims shape = b.dims(input);
  DType acc = b.dtype(input);
  int64_t class_dim = b.rank(input) == 1 ? 0 : 1;
  Value target = b.convert(ctx.tensor(target_index), DType::I64);
  Value spread_target = b.broadcast_in_dim(target, shape, all_but(b.rank(input), class_dim));
  Value ignored = b.full(static_cast<double>(ignore_index), b.type(spread_target));
  Value kept = b.compare(spread_target, ignored, "NE");
  Value chosen = b.binary("stablehlo.and", kept,
                          b.compare(b.iota({DType::I64, shape}, class_dim), spread_target, "EQ"));
  Value class_weight = ctx.has(weight_index) ? per_channel(ctx, weight_index, acc, shape, class_dim)
                                             : b.full(1, {acc, shape});
  Value zeros = b.zeros({acc, shape});
  Value sample_weight = sum_over(b, b.select(chosen, class_weight, zeros), {class_dim});
  return {class_dim, chosen, class_weight, sample_weight};
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction, ignore_index)
// -> (output, total_weight), and the flag of a target out of range
std::vector<Value> lower_nll_loss_forward(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  Value input = b.convert(ctx.tensor(0), acc);
  Reduction reduction = reduction_arg(ctx, 3);
  int64_t ignore_index = ctx.int_arg(4, -100);
  int64_t class_dim = b.rank(input) == 1 ? 0 : 1;
  // A target that is neither a class nor ignore_index: CPU raises; the picks would drop it.
  Value bad = any_outside(b, ctx.tensor(1), 0, b.dims(input)[class_dim], ignore_index);
  NllPicks p = nll_picks(ctx, input, 1, 2, ignore_index);
  Value zeros = b.zeros(b.type(input));
  Value weighted = b.select(p.chosen, b.mul(input, p.class_weight), zeros);
  Value picked = sum_over(b, weighted, {p.class_dim});
  Value loss = b.unary("stablehlo.negate", picked);
  if (reduction == kNone) {
    // PyTorch reports the weight of a lone sample, and 0 for a batch.
    Value total_weight = b.rank(input) == 1 ? p.sample_weight : b.zeros(ctx.out_type(1));
    return {as_output(ctx, loss, 0), as_output(ctx, total_weight, 1), bad};
  }
  Dims all = all_dims(b.rank(loss));
  Value total_weight = sum_over(b, p.sample_weight, all);
  Value total = sum_over(b, loss, all);
  if (reduction == kMean) total = b.div(total, total_weight);
  return {as_output(ctx, total, 0), as_output(ctx, total_weight, 1), bad};
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target, weight?, reduction,
// ignore_index, total_weight) -> grad_input
std::vector<Value> lower_nll_loss_backward(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 1);
  Value input = b.convert(ctx.tensor(1), acc);
  Dims shape = b.dims(input);
  Reduction reduction = reduction_arg(ctx, 4);
  NllPicks p = nll_picks(ctx, input, 2, 3, ctx.int_arg(5, -100));
  Value grad = b.convert(ctx.tensor(0), acc);
  if (reduction == kNone) {
    grad = b.broadcast_in_dim(grad, shape, all_but(b.rank(input), p.class_dim));
  } else {
    if (reduction == kMean) grad = b.div(grad, b.reshape(b.convert(ctx.tensor(6), acc), {}));
    grad = b.broadcast_to(b.reshape(grad, {}), shape);
  }
  Value negated = b.unary("stablehlo.negate", b.mul(p.class_weight, grad));
  return {as_output(ctx, b.select(p.chosen, negated, b.zeros(b.type(input))))};
}

// mse_loss(self, target, reduction)
std::vector<Value> lower_mse_loss(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = accumulation_type(promote(ctx, {0, 1}));
  if (!is_floating(acc)) throw Unsupported(ctx.op + ": non-floating");
  Dims shape = broadcast_shape(b.dims(ctx.tensor(0)), b.dims(ctx.tensor(1)));
  Value diff = b.sub(operand_as(ctx, 0, acc, shape), operand_as(ctx, 1, acc, shape));
  return {as_output(ctx, reduce_loss(b, b.mul(diff, diff), reduction_arg(ctx, 2)))};
}

// mse_loss_backward(grad_output, self, target, reduction)
std::vector<Value> lower_mse_loss_backward(Context& ctx) {
  Builder& b = ctx.b;
  const Dims& shape = ctx.outputs.at(0).dims;
  DType acc = accumulation_type(promote(ctx, {1, 2}));
  if (!is_floating(acc)) throw Unsupported(ctx.op + ": non-floating");
  Value diff = b.sub(operand_as(ctx, 1, acc, shape), operand_as(ctx, 2, acc, shape));
  Value grad = loss_grad(ctx, 0, acc, shape, reduction_arg(ctx, 3));
  return {as_output(ctx, b.mul(b.mul(b.full(2, {acc, shape}), diff), grad))};
}

// binary_cross_entropy(self, target, weight?, reduction): logs are clamped at -100 as in PyTorch.
std::vector<Value> lower_binary_cross_entropy(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  Dims shape = b.dims(ctx.tensor(0));
  Value x = operand_as(ctx, 0, acc, shape), target = operand_as(ctx, 1, acc, shape);
  Value floor = b.full(-100, {acc, shape});
  Value log_x = b.max(b.unary("stablehlo.log", x), floor);
  Value log_one_minus_x =
      b.max(b.unary("stablehlo.log_plus_one", b.unary("stablehlo.negate", x)), floor);
  // (target - 1) * log(1 - x) - target * log(x)
  Value one = b.full(1, {acc, shape});
  Value loss = b.sub(b.mul(b.sub(target, one), log_one_minus_x), b.mul(target, log_x));
  if (ctx.has(2)) loss = b.mul(loss, operand_as(ctx, 2, acc, shape));
  return {as_output(ctx, reduce_loss(b, loss, reduction_arg(ctx, 3)))};
}

// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction)
std::vector<Value> lower_binary_cross_entropy_backward(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 1);
  const Dims& shape = ctx.outputs.at(0).dims;
  Value x = operand_as(ctx, 1, acc, shape), target = operand_as(ctx, 2, acc, shape);
  Value one = b.full(1, {acc, shape});
  Value denominator = b.max(b.mul(b.sub(one, x), x), b.full(1e-12, {acc, shape}));
  Value grad = b.mul(loss_grad(ctx, 0, acc, shape, reduction_arg(ctx, 4)),
                     b.div(b.sub(x, target), denominator));
  if (ctx.has(3)) grad = b.mul(grad, operand_as(ctx, 3, acc, shape));
  return {as_output(ctx, grad)};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
// rows of grad_output added into the rows their indices name.
std::vector<Value> lower_embedding_dense_backward(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  Value indices = ctx.tensor(1);
  int64_t count = numel(b.dims(indices));
  int64_t num_weights = ctx.int_arg(2, 0), padding_idx = ctx.int_arg(3, -1);
  const Dims& out_dims = ctx.outputs.at(0).dims;
  int64_t width = numel(out_dims) / (num_weights > 0 ? num_weights : 1);
  Value index = b.reshape(b.convert(indices, DType::I64), {count, 1});
  Value grad = b.reshape(b.convert(ctx.tensor(0), acc), {count, width});
  if (padding_idx >= 0) {
    Value padding = b.compare(index, b.full(static_cast<double>(padding_idx), b.type(index)), "EQ");
    grad = b.select(b.broadcast_to(padding, {count, width}), b.zeros(b.type(grad)), grad);
  }
  hlo::Builder::ScatterDims rows{{1}, {0}, {0}, 1};
  Value table = b.zeros({acc, {num_weights, width}});
  Value result = b.scatter(table, index, grad, rows, "stablehlo.add");
  if (ctx.bool_arg(4, false)) {
    hlo::Builder::ScatterDims elements{{}, {0}, {0}, 1};
    Value counts = b.scatter(b.zeros({acc, {num_weights}}), index, b.full(1, {acc, {count}}),
                             elements, "stablehlo.add");
    Value divisor = b.max(counts, b.full(1, b.type(counts)));
    result = b.div(result, b.broadcast_in_dim(divisor, {num_weights, width}, {0}));
  }
  return {as_output(ctx, result)};
}

// native_dropout_backward(grad_output, mask, scale)
std::vector<Value> lower_native_dropout_backward(Context& ctx) {
  Builder& b = ctx.b;
  const Dims& shape = ctx.outputs.at(0).dims;
  DType acc = float_compute_type(ctx, 0);
  Value grad = operand_as(ctx, 0, acc, shape);
  Value kept = operand_as(ctx, 1, acc, shape);
  return {as_output(ctx, b.mul(b.mul(grad, kept), operand_as(ctx, 2, acc, shape)))};
}

// huber_loss(self, target, reduction, delta) and smooth_l1_loss(self, target, reduction, beta):
// quadratic below the threshold, linear above. smooth_l1 is huber divided by beta (beta = 0: l1).
std::vector<Value> lower_huber_like(Context& ctx, bool smooth_l1) {
  Builder& b = ctx.b;
  DType acc = accumulation_type(promote(ctx, {0, 1}));
  if (!is_floating(acc)) throw Unsupported(ctx.op + ": non-floating");
  Dims shape = broadcast_shape(b.dims(ctx.tensor(0)), b.dims(ctx.tensor(1)));
  Value z = b.unary("stablehlo.abs", b.sub(operand_as(ctx, 0, acc, shape), operand_as(ctx, 1, acc, shape)));
  Value t = ctx.has(3) ? operand_as(ctx, 3, acc, shape) : b.full(1.0, {acc, shape});
  Value half = b.full(0.5, {acc, shape});
  Value loss;
  if (smooth_l1) {
    Value quadratic = b.div(b.mul(half, b.mul(z, z)), t);
    loss = b.select(b.compare(z, t, "LT"), quadratic, b.sub(z, b.mul(half, t)));
  } else {
    Value quadratic = b.mul(half, b.mul(z, z));
    loss = b.select(b.compare(z, t, "LT"), quadratic, b.mul(t, b.sub(z, b.mul(half, t))));
  }
  return {as_output(ctx, reduce_loss(b, loss, reduction_arg(ctx, 2)))};
}
std::vector<Value> lower_huber_loss(Context& ctx) { return lower_huber_like(ctx, false); }
std::vector<Value> lower_smooth_l1_loss(Context& ctx) { return lower_huber_like(ctx, true); }

// huber_loss_backward / smooth_l1_loss_backward(grad_output, self, target, reduction, delta|beta)
std::vector<Value> lower_huber_like_backward(Context& ctx, bool smooth_l1) {
  Builder& b = ctx.b;
  const Dims& shape = ctx.outputs.at(0).dims;
  DType acc = accumulation_type(ctx.outputs.at(0).dtype);
  if (!is_floating(acc)) throw Unsupported(ctx.op + ": non-floating");
  Value x = b.sub(operand_as(ctx, 1, acc, shape), operand_as(ctx, 2, acc, shape));
  Value t = ctx.has(4) ? operand_as(ctx, 4, acc, shape) : b.full(1.0, {acc, shape});
  Value grad = loss_grad(ctx, 0, acc, shape, reduction_arg(ctx, 3));
  Value inside = b.compare(b.unary("stablehlo.abs", x), t, "LT");
  Value sign = b.unary("stablehlo.sign", x);
  Value local = smooth_l1 ? b.select(inside, b.div(x, t), sign)
                          : b.select(inside, x, b.mul(t, sign));
  return {as_output(ctx, b.mul(local, grad))};
}
std::vector<Value> lower_huber_loss_backward(Context& ctx) { return lower_huber_like_backward(ctx, false); }
std::vector<Value> lower_smooth_l1_loss_backward(Context& ctx) { return lower_huber_like_backward(ctx, true); }

// embedding_renorm_(self [V, D], indices, max_norm, norm_type): the rows indices name whose
// norm_type-norm exceeds max_norm are scaled to norm max_norm (PyTorch divides by norm + 1e-7).
std::vector<Value> lower_embedding_renorm(Context& ctx) {
  Builder& b = ctx.b;
  Value weight = ctx.tensor(0), indices = ctx.tensor(1);
  DType dtype = b.dtype(weight);
  if (!is_floating(dtype) || b.rank(weight) != 2) throw Unsupported(ctx.op + ": arguments");
  int64_t rows = b.dims(weight)[0];
  int64_t count = numel(b.dims(indices));
  if (count == 0 || numel(b.dims(weight)) == 0) return {as_output(ctx, weight)};
  DType acc = accumulation_type(dtype);
  Value w = b.convert(weight, acc);
  Builder::ScatterDims s{{}, {0}, {0}, 1};
  Value where = b.reshape(b.convert(indices, DType::I64), {count, 1});
  Value named = b.scatter(b.zeros({DType::Bool, {rows}}), where, b.full(1, {DType::Bool, {count}}), s, "");
  Value p = b.convert(ctx.tensor(3), acc);
  Value powered = b.binary("stablehlo.power", b.unary("stablehlo.abs", w), b.broadcast_to(p, b.dims(w)));
  Value norm = b.binary("stablehlo.power", sum_over(b, powered, {1}), b.broadcast_to(b.div(b.constant(1, acc), p), {rows}));
  Value max_norm = b.broadcast_to(b.convert(ctx.tensor(2), acc), {rows});
  Value scale = b.div(max_norm, b.add(norm, b.full(1e-7, {acc, {rows}})));
  Value shrink = b.binary("stablehlo.and", named, b.compare(norm, max_norm, "GT"));
  scale = b.select(shrink, scale, b.full(1, {acc, {rows}}));
  return {as_output(ctx, b.mul(w, b.broadcast_in_dim(scale, b.dims(w), {0})))};
}

// multi_margin_loss(self [N, C] or [C], target, p, margin, weight?, reduction):
// sum over j != y of max(0, margin - x[y] + x[j])^p (times weight[y]), divided by C.
std::vector<Value> lower_multi_margin_loss(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  Value x = b.convert(ctx.tensor(0), acc);
  if (b.rank(x) <= 1) x = b.reshape(x, {1, numel(b.dims(x))});
  int64_t n = b.dims(x)[0], c = b.dims(x)[1];
  if (n == 0 || c == 0) throw Unsupported(ctx.op + ": empty");
  Value target = b.reshape(b.convert(ctx.tensor(1), DType::I64), {n});
  TensorType nc{acc, {n, c}};
  Value classes = b.iota({DType::I64, {n, c}}, 1);
  Value is_target = b.compare(classes, b.broadcast_in_dim(target, {n, c}, {0}), "EQ");
  Value picked = sum_over(b, b.select(is_target, x, b.zeros(nc)), {1});  // x[y]
  Value margin = b.convert(b.broadcast_to(b.convert(ctx.tensor(3), acc), {n, c}), acc);
  Value z = b.add(b.sub(margin, b.broadcast_in_dim(picked, {n, c}, {0})), x);
  z = b.max(z, b.zeros(nc));
  // p is 1 or 2 (PyTorch checks); a runtime number, so both are computed.
  Value p = b.broadcast_to(b.convert(ctx.tensor(2), acc), {n, c});
  z = b.select(b.compare(p, b.full(2, nc), "EQ"), b.mul(z, z), z);
  if (ctx.has(4)) {
    Value weight = b.convert(ctx.tensor(4), acc);
    Builder::GatherDims g{{}, {0}, {0}, 1};
    Value wy = b.gather(weight, b.reshape(target, {n, 1}), g, {1}, {n});
    z = b.mul(z, b.broadcast_in_dim(wy, {n, c}, {0}));
  }
  z = b.select(is_target, b.zeros(nc), z);
  Value loss = b.div(sum_over(b, z, {1}), b.full(static_cast<double>(c), {acc, {n}}));
  Reduction reduction = reduction_arg(ctx, 5);
  if (reduction == kNone) return {as_output(ctx, loss)};
  return {as_output(ctx, reduce_loss(b, loss, reduction))};
}

// multilabel_margin_loss_forward(self [N, C] or [C], target (same shape, class indices ended by
// -1), reduction) -> (loss, is_target): for each target class j and non-target class i,
// max(0, 1 - (x[j] - x[i])), summed and divided by C.
std::vector<Value> lower_multilabel_margin_loss(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  Value x = ctx.tensor(0);
  int64_t c = b.rank(x) == 0 ? 1 : b.dims(x).back();
  int64_t n = c == 0 ? 0 : numel(b.dims(x)) / c;
  if (n == 0 || c == 0) throw Unsupported(ctx.op + ": empty");
  x = b.reshape(b.convert(x, acc), {n, c});
  Value target = b.reshape(b.convert(ctx.tensor(1), DType::I64), {n, c});
  // Entries before the first -1 count.
  TensorType ik{DType::I64, {n, c}};
  Value k = b.iota(ik, 1);
  Value stop = b.select(b.compare(target, b.full(-1, ik), "EQ"), k, b.full(static_cast<double>(c), ik));
  Value first_stop = b.reduce(stop, b.constant(static_cast<double>(c), DType::I64), {1}, "stablehlo.minimum");
  Value valid = b.compare(k, b.broadcast_in_dim(first_stop, {n, c}, {0}), "LT");
  // hits[n, class, k]: entry k names class.
  Dims nck{n, c, c};
  Value classes = b.iota({DType::I64, nck}, 1);
  Value named = b.compare(b.broadcast_in_dim(target, nck, {0, 2}), classes, "EQ");
  named = b.binary("stablehlo.and", named, b.broadcast_in_dim(valid, nck, {0, 2}));
  Value count = sum_over(b, b.convert(named, acc), {2});  // [n, class]
  Value is_target = b.compare(count, b.zeros({acc, {n, c}}), "GT");
  // pairs[n, j, i] = count[n, j] * !is_target[n, i] * max(0, 1 - x[n, j] + x[n, i])
  Value xj = b.broadcast_in_dim(x, nck, {0, 1}), xi = b.broadcast_in_dim(x, nck, {0, 2});
  Value hinge = b.max(b.add(b.sub(b.full(1, {acc, nck}), xj), xi), b.zeros({acc, nck}));
  Value weight = b.mul(b.broadcast_in_dim(count, nck, {0, 1}),
                       b.broadcast_in_dim(b.convert(b.unary("stablehlo.not", is_target), acc), nck, {0, 2}));
  Value loss = b.div(sum_over(b, b.mul(weight, hinge), {1, 2}), b.full(static_cast<double>(c), {acc, {n}}));
  Reduction reduction = reduction_arg(ctx, 2);
  Value out = reduction == kNone ? loss : reduce_loss(b, loss, reduction);
  return {as_output(ctx, out, 0), as_output(ctx, b.convert(is_target, acc), 1)};
}

}  // namespace

TPU_CHECKED_LOWERING("nll_loss_forward", lower_nll_loss_forward);
TPU_CHECKED_LOWERING("nll_loss2d_forward", lower_nll_loss_forward);
TPU_LOWERING("nll_loss_backward", lower_nll_loss_backward);
TPU_LOWERING("nll_loss2d_backward", lower_nll_loss_backward);
TPU_LOWERING("mse_loss", lower_mse_loss);
TPU_LOWERING("mse_loss_backward", lower_mse_loss_backward);
TPU_LOWERING("huber_loss", lower_huber_loss);
TPU_LOWERING("embedding_renorm", lower_embedding_renorm);
TPU_LOWERING("multi_margin_loss", lower_multi_margin_loss);
TPU_LOWERING("multilabel_margin_loss_forward", lower_multilabel_margin_loss);
TPU_LOWERING("huber_loss_backward", lower_huber_loss_backward);
TPU_LOWERING("smooth_l1_loss", lower_smooth_l1_loss);
TPU_LOWERING("smooth_l1_loss_backward", lower_smooth_l1_loss_backward);
TPU_LOWERING("binary_cross_entropy", lower_binary_cross_entropy);
TPU_LOWERING("binary_cross_entropy_backward", lower_binary_cross_entropy_backward);
TPU_LOWERING("embedding_dense_backward", lower_embedding_dense_backward);
TPU_LOWERING("native_dropout_backward", lower_native_dropout_backward);

}  // namespace tpu::lowering
