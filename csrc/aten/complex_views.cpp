// view_as_real and view_as_complex: a complex tensor and its (..., 2) real view share one storage,
// as on CPU and CUDA. PyTorch registers these views per backend, so without them any model that
// takes the real part of an FFT through view_as_real (FNet's Fourier mixing) stopped with "has no
// implementation for the backend". Only metadata changes; the storage is read through the other
// dtype like any reinterpreting view.
#include <ATen/ATen.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

namespace {

at::Tensor view_with(const at::Tensor& self, at::ScalarType dtype, at::IntArrayRef size,
                     at::IntArrayRef stride, int64_t offset) {
  auto view = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(self.storage()), self.key_set(),
      c10::scalarTypeToTypeMeta(dtype));
  view.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  return view;
}

at::Tensor view_as_real_tpu(const at::Tensor& self) {
  TORCH_CHECK(self.is_complex(), "view_as_real is only supported for complex tensors");
  TORCH_CHECK(!self.is_conj(), "view_as_real doesn't work on unresolved conjugated tensors.  ",
              "To resolve the conjugate tensor so you can view it as real, use self.resolve_conj()");
  std::vector<int64_t> size(self.sizes().begin(), self.sizes().end());
  std::vector<int64_t> stride;
  for (int64_t s : self.strides()) stride.push_back(2 * s);
  size.push_back(2);
  stride.push_back(1);
  return view_with(self, c10::toRealValueType(self.scalar_type()), size, stride,
                   2 * self.storage_offset());
}

at::Tensor view_as_complex_tpu(const at::Tensor& self) {
  auto type = self.scalar_type();
  TORCH_CHECK(type == at::kFloat || type == at::kDouble || type == at::kHalf,
              "view_as_complex is only supported for float, double and half tensors, but got a ",
              "tensor of scalar type: ", type);
  TORCH_CHECK(self.dim() != 0, "Input tensor must have one or more dimensions");
  TORCH_CHECK(self.size(-1) == 2, "Tensor must have a last dimension of size 2");
  TORCH_CHECK(self.stride(-1) == 1, "Tensor must have a last dimension with stride 1");
  std::vector<int64_t> size(self.sizes().begin(), self.sizes().end() - 1);
  std::vector<int64_t> stride;
  for (int64_t i = 0; i + 1 < self.dim(); ++i) {
    TORCH_CHECK(self.stride(i) % 2 == 0, "Tensor must have a stride divisible by 2 for all but last dimension");
    stride.push_back(self.stride(i) / 2);
  }
  TORCH_CHECK(self.storage_offset() % 2 == 0, "Tensor must have a storage_offset divisible by 2");
  return view_with(self, c10::toComplexType(type), size, stride, self.storage_offset() / 2);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", TORCH_FN(view_as_real_tpu));
  m.impl("view_as_complex", TORCH_FN(view_as_complex_tpu));
}
