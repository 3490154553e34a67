// native_batch_norm on tpu. In training with running statistics the op updates running_mean and
// running_var in place, which a lowering (it returns results, it writes no argument) cannot
// express, so that case took the CPU fallback in every BatchNorm layer of every convolutional
// network in training mode. It is composed here from ops that have lowerings, for
// native_batch_norm and for _native_batch_norm_legit, which torch.compile's graphs call.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "aten/lowered_dispatch.h"

namespace {

bool given(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// _native_batch_norm_legit with running statistics: what native_batch_norm, nn.BatchNorm's
// eager path, calls with them, and what graphs traced for torch.compile call directly.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_with_running_stats_tpu(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, bool training, double momentum, double eps) {
  if (!training) {
    // Nothing is written: the lowering serves it, through the generic path (not through
    // _native_batch_norm_legit_no_training, whose composite kernel calls this op again).
    static const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::_native_batch_norm_legit", "");
    torch::jit::Stack stack{input, weight, bias, running_mean, running_var, training, momentum, eps};
    tpu::aten::run_lowered_or_on_cpu(op, &stack);
    return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
  }
  // The functional variant decomposes back into this in-place one, so the statistics are
  // updated here from ops that have lowerings: the batch mean the op saves and the batch's
  // unbiased variance, as the CPU kernel does.
  auto [out, save_mean, save_invstd] =
      at::_native_batch_norm_legit(input, weight, bias, /*training=*/true, momentum, eps);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d != 1) dims.push_back(d);
  }
  at::Tensor batch_var = at::var(input.to(save_mean.scalar_type()), dims, /*unbiased=*/true, /*keepdim=*/false);
  auto update = [&](at::Tensor& running, const at::Tensor& batch) {
    running.copy_(running * (1 - momentum) + batch.to(running.scalar_type()) * momentum);
  };
  update(running_mean, save_mean);
  update(running_var, batch_var);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> batch_norm_with_running_stats_out_tpu(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, bool training, double momentum, double eps, at::Tensor& out,
    at::Tensor& save_mean, at::Tensor& save_invstd) {
  auto results = batch_norm_with_running_stats_tpu(input, weight, bias, running_mean, running_var, training, momentum, eps);
  auto write = [](at::Tensor& destination, const at::Tensor& value) {
    at::native::resize_output(destination, value.sizes());
    destination.copy_(value);
  };
  write(out, std::get<0>(results));
  write(save_mean, std::get<1>(results));
  write(save_invstd, std::get<2>(results));
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_tpu(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  if (given(running_mean) && given(running_var)) {
    at::Tensor mean = *running_mean;
    at::Tensor var = *running_var;
    return batch_norm_with_running_stats_tpu(input, weight, bias, mean, var, training, momentum, eps);
  }
  // One running statistic without the other, or none in evaluation: the no-stats variant
  // raises (through the CPU fallback) what the CPU raises; none in training is plain batch norm.
  if (given(running_mean) != given(running_var)) {
    TORCH_CHECK_VALUE(false, "running_mean and running_var must either both be None or neither be None");
  }
  return at::_native_batch_norm_legit(input, weight, bias, training, momentum, eps);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm_tpu));
  m.impl("_native_batch_norm_legit", TORCH_FN(batch_norm_with_running_stats_tpu));
  m.impl("_native_batch_norm_legit.out", TORCH_FN(batch_norm_with_running_stats_out_tpu));
}
