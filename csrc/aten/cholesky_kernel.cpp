// torch.cholesky, deprecated but still called by older code (Gaussian-process and
// whitening layers). Its CPU kernel raises on a matrix that is not positive-definite as soon as
// it returns, reading LAPACK's info on the host, so it is composed here from
// linalg_cholesky_ex's lowering and the same host check, rather than lowered with a device flag
// that would raise later.
#include <ATen/ATen.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

namespace {

at::Tensor cholesky_tpu(const at::Tensor& self, bool upper) {
  TORCH_WARN_ONCE(
      "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future PyTorch "
      "release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\nand\n"
      "U = torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH\n"
      "This transform will produce equivalent results for all valid (symmetric positive definite) inputs.");
  if (self.numel() == 0) return at::empty_like(self, at::MemoryFormat::Contiguous);
  at::native::squareCheckInputs(self, "cholesky");
  auto [factor, info] = at::linalg_cholesky_ex(self, upper, /*check_errors=*/false);
  at::_linalg_check_errors(info, "cholesky", self.dim() == 2);
  return factor;
}

at::Tensor& cholesky_out_tpu(const at::Tensor& self, bool upper, at::Tensor& result) {
  at::native::checkSameDevice("cholesky", result, self);
  at::native::checkLinalgCompatibleDtype("cholesky", result, self);
  at::Tensor factor = cholesky_tpu(self, upper);
  at::native::resize_output(result, factor.sizes());
  result.copy_(factor);
  return result;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cholesky", TORCH_FN(cholesky_tpu));
  m.impl("cholesky.out", TORCH_FN(cholesky_out_tpu));
}
