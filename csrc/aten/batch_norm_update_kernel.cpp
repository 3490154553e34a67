// _batch_norm_with_update: batch norm in training that updates the running statistics in place
// (the path nn.BatchNorm takes under torch.compile and export). Its arguments are written without
// being returned, which the boxed kernel cannot express; native_batch_norm's tpu kernel
// (batch_norm_kernel.cpp) does the same work on the device. Its gradient, batch_norm_backward,
// goes to native_batch_norm_backward's lowering: CPU's kernel (the fallback) would reject the
// float32 statistics that f16 / bf16 inputs save on tpu, as on CUDA.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_with_update_tpu(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  auto [out, save_mean, save_invstd] =
      at::native_batch_norm(input, weight, bias, running_mean, running_var, /*training=*/true, momentum, eps);
  // The reserve buffer is cuDNN's; CPU returns an empty one.
  return {out, save_mean, save_invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_tpu(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var, bool update, double eps,
    std::array<bool, 3> output_mask, const at::Tensor& reserve) {
  std::optional<at::Tensor> maybe_weight;
  if (weight.defined()) maybe_weight = weight;
  return at::native_batch_norm_backward(grad_out, input, maybe_weight, running_mean, running_var, save_mean, save_var,
                                        update, eps, output_mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_batch_norm_with_update", TORCH_FN(batch_norm_with_update_tpu));
  m.impl("batch_norm_backward", TORCH_FN(batch_norm_backward_tpu));
}
