// torch.optim's fused=True updates as list ops: _fused_adam_, _fused_adamw_ and _fused_sgd_, one
// op over the whole parameter list (aten/fused_optimizer_kernels.cpp records them). As PyTorch's
// kernels do: float16 and bfloat16 state is updated in float32, the gradients are unscaled by
// GradScaler's grad_scale (and written back so), and where found_inf is set nothing changes,
// decided on the device. The hyperparameters are runtime numbers: a learning-rate schedule never
// recompiles.
//
// Results, list by list: the parameters, then the optimizer's state lists it writes (Adam: exp_avgs,
// exp_avg_sqs, max_exp_avg_sqs with amsgrad; SGD: the momentum buffers when there are any), then
// the gradients when grad_scale is given.
#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

DType widened(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

// One entry's arithmetic in its compute dtype and dims.
struct EntryMath {
  Builder& b;
  DType t;
  Dims dims;

  Value read(Value v) const { return b.convert(v, t); }
  // A rank-0 tensor or a runtime number, spread over the entry.
  Value spread(Value rank0) const { return b.broadcast_to(b.convert(rank0, t), dims); }
  Value constant(double v) const { return b.full(v, {t, dims}); }
  Value sqrt(Value v) const { return b.unary("stablehlo.sqrt", v); }
  Value pow(Value base, Value exponent) const { return b.binary("stablehlo.power", base, exponent); }
  Value is_nonzero(Value rank0) const {
    return b.broadcast_to(b.compare(b.convert(rank0, t), b.constant(0, t), "NE"), dims);
  }
};

// `value` in `old`'s dtype, or `old` itself where found_inf is set.
Value stored(const EntryMath& m, Value old, Value value, Value found_inf) {
  value = m.b.convert(value, m.b.dtype(old));
  return found_inf.valid() ? m.b.select(m.is_nonzero(found_inf), old, value) : value;
}

Value optional_tensor(const Context& ctx, size_t i) { return ctx.has(i) ? ctx.tensor(i) : Value{}; }

// The gradient an update uses: unscaled (its stored form appended to `unscaled`), negated to
// maximize.
Value gradient(const EntryMath& m, Value grad, Value grad_scale, Value found_inf, bool maximize,
               std::vector<Value>* unscaled) {
  Value g = m.read(grad);
  if (grad_scale.valid()) {
    g = m.b.div(g, m.spread(grad_scale));
    unscaled->push_back(stored(m, grad, g, found_inf));
  }
  return maximize ? m.b.unary("stablehlo.negate", g) : g;
}

// _fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
// beta2, weight_decay, eps, amsgrad, maximize, grad_scale?, found_inf?)
std::vector<Value> lower_fused_adam(Context& ctx) {
  Builder& b = ctx.b;
  const bool decoupled = ctx.op.rfind("_fused_adamw", 0) == 0;
  const bool amsgrad = ctx.bool_arg(11, false), maximize = ctx.bool_arg(12, false);
  const Value grad_scale = optional_tensor(ctx, 13), found_inf = optional_tensor(ctx, 14);
  const auto& params = ctx.arg(0).values;
  std::vector<Value> new_params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, grads;
  for (size_t i = 0; i < params.size(); ++i) {
    EntryMath m{b, widened(b.dtype(params[i])), b.dims(params[i])};
    Value lr = m.spread(ctx.tensor(6)), beta1 = m.spread(ctx.tensor(7)), beta2 = m.spread(ctx.tensor(8));
    Value weight_decay = m.spread(ctx.tensor(9)), eps = m.spread(ctx.tensor(10)), one = m.constant(1);
    Value g = gradient(m, ctx.arg(1).values[i], grad_scale, found_inf, maximize, &grads);
    Value param = m.read(params[i]);
    if (decoupled) {
      param = b.mul(param, b.sub(one, b.mul(lr, weight_decay)));
    } else {
      g = b.select(m.is_nonzero(ctx.tensor(9)), b.add(g, b.mul(param, weight_decay)), g);
    }
    Value exp_avg = b.add(b.mul(m.read(ctx.arg(2).values[i]), beta1), b.mul(g, b.sub(one, beta1)));
    Value exp_avg_sq = b.add(b.mul(m.read(ctx.arg(3).values[i]), beta2), b.mul(b.mul(g, g), b.sub(one, beta2)));
    Value step = m.spread(ctx.arg(5).values[i]);
    Value bias_correction1 = b.sub(one, m.pow(beta1, step));
    Value bias_correction2_sqrt = m.sqrt(b.sub(one, m.pow(beta2, step)));
    Value second = exp_avg_sq;
    if (amsgrad) {
      second = b.max(m.read(ctx.arg(4).values[i]), exp_avg_sq);
      max_exp_avg_sqs.push_back(stored(m, ctx.arg(4).values[i], second, found_inf));
    }
    Value denom = b.add(b.div(m.sqrt(second), bias_correction2_sqrt), eps);
    Value update = b.div(b.mul(b.div(lr, bias_correction1), exp_avg), denom);
    new_params.push_back(stored(m, params[i], b.sub(param, update), found_inf));
    exp_avgs.push_back(stored(m, ctx.arg(2).values[i], exp_avg, found_inf));
    exp_avg_sqs.push_back(stored(m, ctx.arg(3).values[i], exp_avg_sq, found_inf));
  }
  std::vector<Value> results = new_params;
  for (const auto* list : {&exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs, &grads}) {
    results.insert(results.end(), list->begin(), list->end());
  }
  return results;
}
TPU_LOWERING("_fused_adam", lower_fused_adam);
TPU_LOWERING("_fused_adamw", lower_fused_adam);

// _fused_sgd_(params, grads, momentum_buffers, weight_decay, momentum, lr, dampening, nesterov,
// maximize, is_first_step, grad_scale?, found_inf?)
std::vector<Value> lower_fused_sgd(Context& ctx) {
  Builder& b = ctx.b;
  const bool nesterov = ctx.bool_arg(7, false), maximize = ctx.bool_arg(8, false);
  const bool first_step = ctx.bool_arg(9, false);
  const Value grad_scale = optional_tensor(ctx, 10), found_inf = optional_tensor(ctx, 11);
  const auto& params = ctx.arg(0).values;
  const auto& buffers = ctx.arg(2).values;
  std::vector<Value> new_params, new_buffers, grads;
  for (size_t i = 0; i < params.size(); ++i) {
    EntryMath m{b, widened(b.dtype(params[i])), b.dims(params[i])};
    Value weight_decay = m.spread(ctx.tensor(3)), momentum = m.spread(ctx.tensor(4)), lr = m.spread(ctx.tensor(5));
    Value g = gradient(m, ctx.arg(1).values[i], grad_scale, found_inf, maximize, &grads);
    Value param = m.read(params[i]);
    g = b.select(m.is_nonzero(ctx.tensor(3)), b.add(g, b.mul(param, weight_decay)), g);
    if (!buffers.empty()) {
      Value dampened = b.mul(g, b.sub(m.constant(1), m.spread(ctx.tensor(6))));
      Value buffer = first_step ? g : b.add(b.mul(m.read(buffers[i]), momentum), dampened);
      new_buffers.push_back(stored(m, buffers[i], buffer, found_inf));
      g = nesterov ? b.add(g, b.mul(buffer, momentum)) : buffer;
    }
    new_params.push_back(stored(m, params[i], b.sub(param, b.mul(g, lr)), found_inf));
  }
  std::vector<Value> results = new_params;
  results.insert(results.end(), new_buffers.begin(), new_buffers.end());
  results.insert(results.end(), grads.begin(), grads.end());
  return results;
}
TPU_LOWERING("_fused_sgd", lower_fused_sgd);

}  // namespace
}  // namespace tpu::lowering
