// native_batch_norm on tpu. In training with running statistics the op updates running_mean and
// running_var in place, which a lowering (it returns results, it writes no argument) cannot
// express, so that case took the CPU fallback in every BatchNorm layer of every convolutional
// network in training mode. It is composed here from ops that have lowerings.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace {

bool given(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_tpu(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  if (given(running_mean) && given(running_var)) {
    if (!training) {
      return at::_native_batch_norm_legit_no_training(input, weight, bias, *running_mean,
                                                      *running_var, momentum, eps);
    }
    // The functional variant decomposes back into the in-place one, so the statistics are
    // updated here from ops that have lowerings: the batch mean the op saves and the batch's
    // unbiased variance, as the CPU kernel does.
    auto [out, save_mean, save_invstd] =
        at::_native_batch_norm_legit(input, weight, bias, /*training=*/true, momentum, eps);
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < input.dim(); ++d) {
      if (d != 1) dims.push_back(d);
    }
    at::Tensor batch_var = at::var(input.to(save_mean.scalar_type()), dims, /*unbiased=*/true, /*keepdim=*/false);
    auto update = [&](const at::Tensor& running, const at::Tensor& batch) {
      running.copy_(running * (1 - momentum) + batch.to(running.scalar_type()) * momentum);
    };
    update(*running_mean, save_mean);
    update(*running_var, batch_var);
    return {out, save_mean, save_invstd};
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
}
