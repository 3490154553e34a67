// torch.amp.GradScaler's device ops: _amp_foreach_non_finite_check_and_unscale_ (its unscale_
// over every gradient) and _amp_update_scale_ (its update()), each one recorded op
// (lowering/grad_scaling.cpp), so that a mixed-precision step never reads the scale or the inf
// flag on the host. PyTorch has no tpu kernels for them: both took the CPU fallback every step.
// Arguments outside the plain case (gradients on several devices or with conjugate bits, flags
// that are not one-element float tensors) go to the fallback, which raises CPU's errors.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/list_ops.h"

namespace tpu::aten {
namespace {

bool is_flag(const at::Tensor& t) { return t.defined() && t.numel() == 1 && t.scalar_type() == at::kFloat; }

bool unscale_as_list_op(at::TensorList grads, const at::Tensor& found_inf, const at::Tensor& inv_scale) {
  if (grads.empty() || !is_flag(found_inf) || !is_flag(inv_scale)) return false;
  for (const at::Tensor& g : grads) {
    if (!g.defined() || !at::isFloatingType(g.scalar_type())) return false;
  }
  const char* name = "_amp_foreach_non_finite_check_and_unscale_";
  ListCall call(name, "", lowering::find_lowering(name));
  if (!call.add_tensor_list(grads) || !call.add_tensor(found_inf) || !call.add_tensor(inv_scale)) return false;
  call.write_into(grads);
  call.write_into(found_inf);
  if (!call.run()) return false;
  for (const at::Tensor& g : grads) g.unsafeGetTensorImpl()->bump_version();
  found_inf.unsafeGetTensorImpl()->bump_version();
  return true;
}

bool update_scale_as_list_op(const at::Tensor& scale, const at::Tensor& growth_tracker, const at::Tensor& found_inf,
                             double growth_factor, double backoff_factor, int64_t growth_interval) {
  if (!is_flag(scale) || !is_flag(found_inf) || !growth_tracker.defined() || growth_tracker.numel() != 1 ||
      growth_tracker.scalar_type() != at::kInt) {
    return false;
  }
  const char* name = "_amp_update_scale_";
  ListCall call(name, "", lowering::find_lowering(name));
  bool taken = call.add_tensor(scale) && call.add_tensor(growth_tracker) && call.add_tensor(found_inf) &&
               call.add_number(growth_factor) && call.add_number(backoff_factor) && call.add_number(growth_interval);
  if (!taken) return false;
  call.write_into(scale);
  call.write_into(growth_tracker);
  if (!call.run()) return false;
  scale.unsafeGetTensorImpl()->bump_version();
  growth_tracker.unsafeGetTensorImpl()->bump_version();
  return true;
}

void unscale_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 3);
  if (args[0].isTensorList() && args[1].isTensor() && args[2].isTensor() &&
      unscale_as_list_op(args[0].toTensorVector(), args[1].toTensor(), args[2].toTensor())) {
    torch::jit::drop(*stack, 3);
    return;
  }
  run_on_cpu(op, stack);
}

void update_scale_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 6);
  if (args[0].isTensor() && args[1].isTensor() && args[2].isTensor() &&
      update_scale_as_list_op(args[0].toTensor(), args[1].toTensor(), args[2].toTensor(), args[3].toDouble(),
                              args[4].toDouble(), args[5].toInt())) {
    at::Tensor scale = args[0].toTensor();
    torch::jit::drop(*stack, 6);
    stack->push_back(scale);
    return;
  }
  run_on_cpu(op, stack);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_",
         torch::CppFunction::makeFromBoxedFunction<&unscale_kernel>());
  m.impl("_amp_update_scale_", torch::CppFunction::makeFromBoxedFunction<&update_scale_kernel>());
}

}  // namespace
}  // namespace tpu::aten
