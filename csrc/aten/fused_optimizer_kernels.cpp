// torch.optim's fused=True path on tpu: _fused_adam_, _fused_adamw_ and _fused_sgd_ (with
// GradScaler's grad_scale and found_inf). Lists on one device with contiguous entries, each
// entry's state of its parameter's sizes and dtype and the step counts on the device (what
// torch.optim passes), are one recorded op whose lowering updates every entry
// (lowering/fused_optimizers.cpp). Anything else runs the same update written with ATen ops,
// which lower to the device, as one program per call in strict mode (aten/op_groups.h). As in
// PyTorch's kernels: float16 and bfloat16 state is updated in float32, the unscaled gradients are
// written back, and a step with found_inf set changes nothing, decided on the device.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <variant>

#include "aten/list_ops.h"
#include "aten/op_groups.h"

namespace tpu::aten {
namespace {

at::Tensor widened(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16 ? t.to(at::kFloat) : t;
}

// Writes `value` into `target`, or leaves target as it is where found_inf is set.
void store(const at::Tensor& target, const at::Tensor& value, const std::optional<at::Tensor>& found_inf) {
  if (found_inf.has_value() && found_inf->defined()) {
    target.copy_(at::where(found_inf->ne(0), target, value.to(target.scalar_type())));
  } else {
    target.copy_(value);
  }
}

// The gradient the update uses: unscaled (and written back so), negated to maximize.
at::Tensor gradient(const at::Tensor& grad, const std::optional<at::Tensor>& grad_scale,
                    const std::optional<at::Tensor>& found_inf, bool maximize) {
  at::Tensor g = widened(grad);
  if (grad_scale.has_value() && grad_scale->defined()) {
    g = g / *grad_scale;
    store(grad, g, found_inf);
  }
  return maximize ? g.neg() : g;
}

void check_length(at::TensorList list, at::TensorList params, const char* name) {
  TORCH_CHECK(list.size() == params.size(), "Expected ", name, ".size() == n_tensors to be true, but got false.");
}

// Whether every entry of `list` has its parameter's sizes and dtype, a floating one.
bool like_params(at::TensorList list, at::TensorList params) {
  if (list.size() != params.size()) return false;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].defined() || list[i].scalar_type() != params[i].scalar_type() || list[i].sizes() != params[i].sizes() ||
        !at::isFloatingType(params[i].scalar_type())) {
      return false;
    }
  }
  return true;
}

using LearningRate = std::variant<double, at::Tensor>;

bool add_learning_rate(ListCall& call, const LearningRate& lr) {
  return std::holds_alternative<double>(lr) ? call.add_number(std::get<double>(lr))
                                            : call.add_scalar_tensor(std::get<at::Tensor>(lr));
}

bool add_optional_scalar_tensor(ListCall& call, const std::optional<at::Tensor>& t) {
  if (t.has_value() && t->defined()) return call.add_scalar_tensor(*t);
  call.add_none();
  return true;
}

struct AdamOptions {
  double beta1, beta2, weight_decay, eps;
  bool amsgrad, maximize, decoupled_weight_decay;
};

bool adam_as_list_op(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                     at::TensorList max_exp_avg_sqs, at::TensorList state_steps, const LearningRate& lr,
                     const AdamOptions& o, const std::optional<at::Tensor>& grad_scale,
                     const std::optional<at::Tensor>& found_inf) {
  const char* name = o.decoupled_weight_decay ? "_fused_adamw_" : "_fused_adam_";
  if (params.empty() || !like_params(params, params) || !like_params(grads, params) ||
      !like_params(exp_avgs, params) || !like_params(exp_avg_sqs, params) ||
      !(o.amsgrad ? like_params(max_exp_avg_sqs, params) : max_exp_avg_sqs.empty())) {
    return false;
  }
  for (const at::Tensor& step : state_steps) {
    if (!step.defined() || step.dim() != 0 || !at::isFloatingType(step.scalar_type())) return false;
  }
  ListCall call(name, "", lowering::find_lowering(name));
  const size_t n = params.size();
  call.reserve(5 * n + max_exp_avg_sqs.size() + 3, 4 * n + max_exp_avg_sqs.size());
  bool taken = call.add_tensor_list(params) && call.add_tensor_list(grads) && call.add_tensor_list(exp_avgs) &&
               call.add_tensor_list(exp_avg_sqs) && call.add_tensor_list(max_exp_avg_sqs) &&
               call.add_tensor_list(state_steps) && add_learning_rate(call, lr) && call.add_number(o.beta1) &&
               call.add_number(o.beta2) && call.add_number(o.weight_decay) && call.add_number(o.eps);
  if (!taken) return false;
  call.add_bool(o.amsgrad);
  call.add_bool(o.maximize);
  if (!add_optional_scalar_tensor(call, grad_scale) || !add_optional_scalar_tensor(call, found_inf)) return false;
  call.write_into(params);
  call.write_into(exp_avgs);
  call.write_into(exp_avg_sqs);
  if (o.amsgrad) call.write_into(max_exp_avg_sqs);
  if (grad_scale.has_value() && grad_scale->defined()) call.write_into(grads);
  return call.run();
}

// A learning rate given as a number acts as a 0-dim CPU tensor: a number to the device's ops.
at::Tensor lr_tensor(const LearningRate& lr) {
  return std::holds_alternative<double>(lr) ? at::scalar_tensor(std::get<double>(lr), at::TensorOptions().dtype(at::kDouble))
                                            : std::get<at::Tensor>(lr);
}

void adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
          at::TensorList max_exp_avg_sqs, at::TensorList state_steps, const LearningRate& learning_rate,
          const AdamOptions& o, const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  // CPU's checks, with its words.
  check_length(grads, params, "grads");
  check_length(exp_avgs, params, "exp_avgs");
  check_length(exp_avg_sqs, params, "exp_avg_sqs");
  if (o.amsgrad) {
    check_length(max_exp_avg_sqs, params, "max_exp_avg_sqs");
  } else {
    TORCH_CHECK(max_exp_avg_sqs.empty(), "Expected max_exp_avg_sqs.empty() to be true, but got false.");
  }
  check_length(state_steps, params, "state_steps");
  if (adam_as_list_op(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, learning_rate, o, grad_scale,
                      found_inf)) {
    return;
  }
  const at::Tensor lr = lr_tensor(learning_rate);
  as_one_program("fused optimizer", [&] {
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor param = widened(params[i]);
      at::Tensor g = gradient(grads[i], grad_scale, found_inf, o.maximize);
      if (o.weight_decay != 0) {
        if (o.decoupled_weight_decay) {
          param = param * (1 - lr * o.weight_decay);
        } else {
          g = g + param * o.weight_decay;
        }
      }
      at::Tensor exp_avg = widened(exp_avgs[i]).lerp(g, 1 - o.beta1);
      at::Tensor exp_avg_sq = widened(exp_avg_sqs[i]) * o.beta2 + g * g * (1 - o.beta2);
      // The step count in the update's dtype: a device may lack float64.
      at::Tensor step = state_steps[i].to(param.scalar_type());
      at::Tensor bias_correction1 = 1 - at::pow(o.beta1, step);
      at::Tensor bias_correction2_sqrt = (1 - at::pow(o.beta2, step)).sqrt();
      at::Tensor second = exp_avg_sq;
      if (o.amsgrad) {
        second = at::maximum(widened(max_exp_avg_sqs[i]), exp_avg_sq);
        store(max_exp_avg_sqs[i], second, found_inf);
      }
      at::Tensor denom = second.sqrt() / bias_correction2_sqrt + o.eps;
      at::Tensor step_size = lr.to(param.scalar_type()) / bias_correction1;
      store(params[i], param - step_size * exp_avg / denom, found_inf);
      store(exp_avgs[i], exp_avg, found_inf);
      store(exp_avg_sqs[i], exp_avg_sq, found_inf);
    }
  });
}

template <bool decoupled>
void fused_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr, double beta1, double beta2,
                double weight_decay, double eps, bool amsgrad, bool maximize,
                const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
       {beta1, beta2, weight_decay, eps, amsgrad, maximize, decoupled}, grad_scale, found_inf);
}

template <bool decoupled>
void fused_adam_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                          at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps,
                          const at::Tensor& lr, double beta1, double beta2, double weight_decay, double eps,
                          bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
                          const std::optional<at::Tensor>& found_inf) {
  adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
       {beta1, beta2, weight_decay, eps, amsgrad, maximize, decoupled}, grad_scale, found_inf);
}

bool sgd_as_list_op(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
                    double momentum, const LearningRate& lr, double dampening, bool nesterov, bool maximize,
                    bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                    const std::optional<at::Tensor>& found_inf) {
  if (params.empty() || !like_params(params, params) || !like_params(grads, params) ||
      !(momentum != 0 ? like_params(momentum_buffers, params) : momentum_buffers.empty())) {
    return false;
  }
  ListCall call("_fused_sgd_", "", lowering::find_lowering("_fused_sgd_"));
  call.reserve(2 * params.size() + momentum_buffers.size() + 3, 2 * params.size() + momentum_buffers.size());
  bool taken = call.add_tensor_list(params) && call.add_tensor_list(grads) && call.add_tensor_list(momentum_buffers) &&
               call.add_number(weight_decay) && call.add_number(momentum) && add_learning_rate(call, lr) &&
               call.add_number(dampening);
  if (!taken) return false;
  call.add_bool(nesterov);
  call.add_bool(maximize);
  call.add_bool(is_first_step);
  if (!add_optional_scalar_tensor(call, grad_scale) || !add_optional_scalar_tensor(call, found_inf)) return false;
  call.write_into(params);
  if (momentum != 0) call.write_into(momentum_buffers);
  if (grad_scale.has_value() && grad_scale->defined()) call.write_into(grads);
  return call.run();
}

void sgd(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
         double momentum, const LearningRate& learning_rate, double dampening, bool nesterov, bool maximize,
         bool is_first_step, const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  check_length(grads, params, "grads");
  if (momentum == 0) {
    TORCH_CHECK(momentum_buffers.empty(), "Expected momentum_buffer_list.empty() to be true, but got false.");
  } else {
    check_length(momentum_buffers, params, "momentum_buffer_list");
  }
  if (sgd_as_list_op(params, grads, momentum_buffers, weight_decay, momentum, learning_rate, dampening, nesterov,
                     maximize, is_first_step, grad_scale, found_inf)) {
    return;
  }
  const at::Tensor lr = lr_tensor(learning_rate);
  as_one_program("fused optimizer", [&] {
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor param = widened(params[i]);
      at::Tensor g = gradient(grads[i], grad_scale, found_inf, maximize);
      if (weight_decay != 0) g = g + param * weight_decay;
      if (momentum != 0) {
        at::Tensor buffer = is_first_step ? g : widened(momentum_buffers[i]) * momentum + g * (1 - dampening);
        store(momentum_buffers[i], buffer, found_inf);
        g = nesterov ? g + buffer * momentum : buffer;
      }
      store(params[i], param - g * lr.to(param.scalar_type()), found_inf);
    }
  });
}

void fused_sgd(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
               double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
               const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  sgd(params, grads, momentum_buffers, weight_decay, momentum, lr, dampening, nesterov, maximize, is_first_step,
      grad_scale, found_inf);
}

void fused_sgd_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
                         double weight_decay, double momentum, const at::Tensor& lr, double dampening, bool nesterov,
                         bool maximize, bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                         const std::optional<at::Tensor>& found_inf) {
  sgd(params, grads, momentum_buffers, weight_decay, momentum, lr, dampening, nesterov, maximize, is_first_step,
      grad_scale, found_inf);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", TORCH_FN(fused_adam<false>));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN(fused_adam_tensor_lr<false>));
  m.impl("_fused_adamw_", TORCH_FN(fused_adam<true>));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN(fused_adam_tensor_lr<true>));
  m.impl("_fused_sgd_", TORCH_FN(fused_sgd));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fused_sgd_tensor_lr));
}

}  // namespace
}  // namespace tpu::aten
