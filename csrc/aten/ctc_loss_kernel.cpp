// _ctc_loss and _ctc_loss_backward on tpu, in the int[] form torch.nn.functional.ctc_loss calls.
//
// Lengths given as int[] would be constants of the program, so every batch with other lengths
// would compile a new one. Here, after the checks CPU makes (PyTorch's meta function of the op
// makes them, with CPU's messages), the lengths become small i64 tensors on the device and the
// targets a [batch, max target length] tensor (concatenated 1-D targets are gathered into it),
// and the Tensor forms run, whose lowering (lowering/ctc_loss.cpp) takes them as runtime values.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>

namespace {

at::Tensor on_meta(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

at::Tensor lengths_on(const at::Tensor& like, at::IntArrayRef lengths) {
  return at::tensor(lengths.vec(), at::TensorOptions().dtype(at::kLong)).to(like.device());
}

// The targets as [batch, max target length]: row b holds target b's labels (and, past its length,
// labels the loss never reads).
at::Tensor padded_targets(const at::Tensor& targets, at::IntArrayRef target_lengths) {
  int64_t batch = static_cast<int64_t>(target_lengths.size());
  int64_t longest = 0;
  for (int64_t length : target_lengths) longest = std::max(longest, length);
  if (targets.dim() == 2) return targets.narrow(1, 0, longest);
  if (longest == 0 || targets.numel() == 0) return at::zeros({batch, longest}, targets.options());
  std::vector<int64_t> positions;
  positions.reserve(batch * longest);
  int64_t offset = 0;
  for (int64_t length : target_lengths) {
    for (int64_t s = 0; s < longest; ++s) positions.push_back(offset + std::min(s, std::max<int64_t>(length - 1, 0)));
    offset += length;
  }
  at::Tensor index = at::tensor(positions, at::TensorOptions().dtype(at::kLong)).to(targets.device());
  return targets.index_select(0, index).view({batch, longest});
}

// CPU's kernels accept float32 and float64 only; the message names CPU's kernel as CPU's does.
void check_dtype(const at::Tensor& log_probs) {
  TORCH_CHECK_NOT_IMPLEMENTED(log_probs.scalar_type() == at::kFloat || log_probs.scalar_type() == at::kDouble,
                              "\"ctc_loss_cpu\" not implemented for '", c10::toString(log_probs.scalar_type()), "'");
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tpu(const at::Tensor& log_probs, const at::Tensor& targets,
                                                at::IntArrayRef input_lengths, at::IntArrayRef target_lengths,
                                                int64_t blank, bool zero_infinity) {
  check_dtype(log_probs);
  at::_ctc_loss(on_meta(log_probs), on_meta(targets), input_lengths, target_lengths, blank, zero_infinity);
  return at::_ctc_loss(log_probs, padded_targets(targets, target_lengths), lengths_on(log_probs, input_lengths),
                       lengths_on(log_probs, target_lengths), blank, zero_infinity);
}

at::Tensor ctc_loss_backward_tpu(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                                 at::IntArrayRef input_lengths, at::IntArrayRef target_lengths,
                                 const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                                 bool zero_infinity) {
  check_dtype(log_probs);
  return at::_ctc_loss_backward(grad, log_probs, padded_targets(targets, target_lengths),
                                lengths_on(log_probs, input_lengths), lengths_on(log_probs, target_lengths),
                                neg_log_likelihood, log_alpha, blank, zero_infinity);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", TORCH_FN(ctc_loss_tpu));
  m.impl("_ctc_loss_backward", TORCH_FN(ctc_loss_backward_tpu));
}
