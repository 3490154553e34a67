// torch.autocast("tpu"): the AutocastPrivateUse1 dispatch key gets CUDA's op lists, so a mixed
// precision script behaves on tpu as it does on cuda (matmuls and convolutions in the low precision
// type; reductions, softmax, norms and losses in float32; mixed-dtype ops promoted).
//
// The lists themselves are PyTorch's (AT_FORALL_* in ATen/autocast_mode.h), so they follow the
// installed torch version instead of a copy that drifts; what this file chooses is that tpu takes
// all of CUDA's categories rather than the shorter CPU ones.
#include <ATen/autocast_mode.h>
#if __has_include(<ATen/core/Dimname.h>)  // torch <= 2.12 still lists ops taking dimension names
#include <ATen/core/Dimname.h>
#define TPU_AUTOCAST_NEEDS_DIMNAMES 1
#endif
#include <torch/library.h>

namespace {

// The AT_FORALL_* lists spell their signatures without the at:: prefix.
#ifdef TPU_AUTOCAST_NEEDS_DIMNAMES
using at::DimnameList;
#endif
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

at::Tensor binary_cross_entropy_refused(const at::Tensor&, const at::Tensor&,
                                        const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast: "
              "in float16 their logarithms lose the precision they need. Use "
              "torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss, "
              "which combine the sigmoid and the loss and are safe under autocast; the same rule "
              "holds on cuda.");
}

// Every op without an autocast policy passes through untouched, as it does for CUDA.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

// Policies, named as in at::autocast::CastPolicy:
//   lower_precision_fp   cast floating inputs to the autocast dtype (bfloat16 or float16)
//   fp32                 cast floating inputs to float32
//   fp32_set_opt_dtype   run in float32 unless the caller chose an output dtype
//   fp32_append_dtype    redispatch to the overload that takes a dtype, with float32
//   promote              cast every floating input to the widest among them
#define TPU_AUTOCAST_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TPU_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define TPU_AUTOCAST_DIFFERENT_SIGNATURE(FUNC, NAME, REGISTER_SIG, REDISPATCH_SIG, POLICY) \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(FUNC, NAME, REGISTER_SIG, REDISPATCH_SIG, POLICY)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(TPU_AUTOCAST_LOWER_PRECISION)
  AT_FORALL_FP32(TPU_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(TPU_AUTOCAST_DIFFERENT_SIGNATURE)
  AT_FORALL_PROMOTE(TPU_AUTOCAST_PROMOTE)

  // Refused as on CUDA: autocast cannot know whether the probabilities came from a sigmoid it ran
  // in low precision, and the loss's logarithms need the precision that was lost.
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_refused));
}

#undef TPU_AUTOCAST_LOWER_PRECISION
#undef TPU_AUTOCAST_FP32
#undef TPU_AUTOCAST_FP32_SET_OPT_DTYPE
#undef TPU_AUTOCAST_PROMOTE
#undef TPU_AUTOCAST_DIFFERENT_SIGNATURE

}  // namespace
