// Kernels that only ATen knows how to do: allocation, views (metadata only, as on CUDA),
// resizing and re-pointing storages, and copies across the host/device boundary.
#include <ATen/EmptyTensor.h>
#include <ATen/InferSize.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_conj.h>
#include <ATen/ops/_neg_view.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include "aten/device_allocator.h"
#include "aten/device_checks.h"
#include "aten/tpu_tensor.h"
#include "exec/device_queue.h"
#include "exec/padding.h"

namespace tpu::aten {

namespace {

int device_of(c10::optional<at::Device> device) {
  if (!device.has_value() || !device->has_index()) return current_device();
  return device->index();
}

at::Tensor make_tensor(c10::Storage storage, at::ScalarType dtype, at::IntArrayRef size,
                       at::IntArrayRef stride, int64_t offset) {
  auto tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::scalarTypeToTypeMeta(dtype));
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  return tensor;
}

at::Tensor make_view(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride, int64_t offset) {
  auto view = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(self.storage()),
                                                       self.key_set(), self.dtype());
  view.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  return view;
}

// The bytes a layout reaches into its storage, by PyTorch's own computation, which raises
// "Storage size calculation overflowed" where the products would wrap.
size_t required_bytes(at::IntArrayRef size, at::IntArrayRef stride, int64_t offset, size_t itemsize) {
  TORCH_CHECK(size.size() == stride.size(), "unequal size length (", size.size(), ") and stride length (",
              stride.size(), ")");
  TORCH_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  return at::detail::computeStorageNbytes(size, stride, itemsize, static_cast<size_t>(offset));
}

void check_in_bounds(const c10::Storage& storage, at::IntArrayRef size, at::IntArrayRef stride, int64_t offset,
                     size_t itemsize) {
  size_t needed = required_bytes(size, stride, offset, itemsize);
  TORCH_CHECK(needed <= storage.nbytes(), "setStorage: sizes ", size, ", strides ", stride,
              ", storage offset ", offset, ", and itemsize ", itemsize, " requiring a storage size of ",
              needed, " are out of bounds for storage of size ", storage.nbytes());
}

at::Tensor empty_memory_format(at::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                               c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                               c10::optional<bool> pin_memory,
                               c10::optional<at::MemoryFormat> memory_format) {
  int index = device_of(device);
  check_device_exists(index);
  at::ScalarType type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  to_dtype(type);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
  return at::detail::empty_generic(size, allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   type, memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, c10::optional<at::ScalarType> dtype,
                         c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                         c10::optional<bool> pin_memory) {
  int index = device_of(device);
  check_device_exists(index);
  at::ScalarType type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  to_dtype(type);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
  return at::detail::empty_strided_generic(size, stride, allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type);
}

at::Tensor as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                      c10::optional<int64_t> storage_offset) {
  int64_t offset = storage_offset.value_or(self.storage_offset());
  TORCH_CHECK(size.size() == stride.size(), "unequal size length (", size.size(), ") and stride length (",
              stride.size(), ")");
  for (int64_t s : stride) TORCH_CHECK(s >= 0, "as_strided: Negative strides are not supported at the moment, got strides: ", stride);
  TORCH_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  check_in_bounds(self.storage(), size, stride, offset, self.dtype().itemsize());
  return make_view(self, size, stride, offset);
}

at::Tensor view(const at::Tensor& self, at::IntArrayRef size) {
  at::DimVector shape = at::infer_size_dv(size, self.numel());
  auto stride = at::detail::computeStride(self.sizes(), self.strides(), shape);
  TORCH_CHECK(stride.has_value(),
              "view size is not compatible with input tensor's size and stride (at least one "
              "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  return make_view(self, shape, *stride, self.storage_offset());
}

at::Tensor reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return make_view(self, size, stride, self.storage_offset());
}

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  int64_t d = at::maybe_wrap_dim(dimension, self.dim(), /*wrap_scalar=*/true);
  int64_t max_size = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(size <= max_size, "maximum size for tensor at dimension ", d, " is ", max_size,
              " but size is ", size);
  TORCH_CHECK(step > 0, "step is ", step, " but must be > 0");
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  std::vector<int64_t> strides(self.strides().begin(), self.strides().end());
  int64_t inner_stride = self.dim() == 0 ? 1 : strides[d];
  if (self.dim() > 0) {
    sizes[d] = (max_size - size) / step + 1;
    strides[d] = step * inner_stride;
  }
  sizes.push_back(size);
  strides.push_back(inner_stride);
  return make_view(self, sizes, strides, self.storage_offset());
}

}  // namespace

void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes) {
  exec::StoragePtr old = storage_of(storage);
  if (static_cast<int64_t>(new_bytes) == old->nbytes) return;
  exec::materialize(*old);
  c10::DataPtr fresh = allocate_on(new_bytes, old->device);
  c10::Storage holder(c10::Storage::use_byte_size_t(), new_bytes, std::move(fresh), allocator(), true);
  exec::StoragePtr target = storage_of(holder);
  exec::copy_shared_bytes(old, target);
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(holder.unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr()));
  impl->set_nbytes(new_bytes);
}

namespace {

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          c10::optional<at::MemoryFormat> memory_format) {
  for (int64_t s : size) TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", size);
  auto* impl = self.unsafeGetTensorImpl();
  // As CPU's resize_: a tensor already of these sizes keeps its strides (an out= argument that
  // torch.lu or resize_as_ resizes to its own shape stays column-major), and only an explicit
  // memory format restrides.
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve, "Unsupported memory format", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  size_t needed = required_bytes(self.sizes(), self.strides(), self.storage_offset(), self.dtype().itemsize());
  if (needed > self.storage().nbytes()) resize_storage_bytes(self.storage(), needed);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, at::IntArrayRef size,
                        at::IntArrayRef given_stride) {
  TORCH_CHECK(source.device() == self.device(), "Attempted to set the storage of a tensor on device \"",
              self.device(), "\" to a storage on different device \"", source.device(),
              "\".  This is no longer allowed; the devices must match.");
  // set_(storage, offset, size) without strides means contiguous ones, as on the CPU.
  c10::DimVector contiguous;
  if (given_stride.empty() && !size.empty()) contiguous = c10::contiguous_strides(size);
  at::IntArrayRef stride = given_stride.empty() && !size.empty() ? at::IntArrayRef(contiguous) : given_stride;
  size_t needed = required_bytes(size, stride, offset, self.dtype().itemsize());
  if (needed > source.nbytes()) resize_storage_bytes(source, needed);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_sizes_and_strides(size, stride, offset);
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return set_storage(self, std::move(source), offset.expect_int(), C10_AS_INTARRAYREF_SLOW(size),
                     C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t count = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {count}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, allocate_on(0, storage_of(self)->device), allocator(),
                       true);
  return set_storage(self, std::move(storage), 0, {0}, {1});
}

// CPU -> tpu: the source goes up as it is; the device converts it and lays it out.
void upload(const at::Tensor& src, const at::Tensor& dst) {
  at::Tensor host = src.expand(dst.sizes()).contiguous();
  exec::upload(view_of(dst), host.data_ptr(), to_dtype(host.scalar_type()));
}

// tpu -> CPU: the device lays the view out densely in the destination's dtype, then one transfer.
void download(const at::Tensor& src, const at::Tensor& dst) {
  raise_device_errors();
  exec::TensorView view = view_of(src.expand(dst.sizes()));
  DType wanted = to_dtype(dst.scalar_type());
  if (dst.is_contiguous()) {
    exec::download(view, wanted, dst.data_ptr());
    return;
  }
  at::Tensor staging = at::empty(dst.sizes(), dst.options());
  exec::download(view, wanted, staging.data_ptr());
  dst.copy_(staging);
}

// A device that runs out of memory in the middle of a copy raises torch.OutOfMemoryError.
template <typename Fn>
void translating_out_of_memory(Fn&& fn) {
  try {
    fn();
  } catch (const runtime::PjrtError& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, !e.out_of_memory(), e.what());
    throw;
  } catch (const exec::OpError& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, !e.out_of_memory(), e.what());
    throw;
  }
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (dst.numel() == 0) return dst;
  bool src_tpu = self.device().type() == c10::DeviceType::PrivateUse1;
  bool dst_tpu = dst.device().type() == c10::DeviceType::PrivateUse1;
  if (!src_tpu && dst_tpu) {
    TORCH_CHECK(self.device().is_cpu(), "copying from ", self.device(), " to tpu is not supported; go through cpu");
    translating_out_of_memory([&] { upload(self, dst); });
  } else if (src_tpu && !dst_tpu) {
    TORCH_CHECK(dst.device().is_cpu(), "copying from tpu to ", dst.device(), " is not supported; go through cpu");
    download(self, dst);
  } else {
    // ATen's copy (a TensorIterator) refuses these on every device it knows.
    at::assert_no_internal_overlap(dst);
    at::assert_no_partial_overlap(dst, self);
    translating_out_of_memory([&] { exec::copy_view(view_of(self.expand(dst.sizes())), view_of(dst)); });
  }
  return dst;
}

// A conjugate or negative view (ifft of a real input returns one) must not reach _copy_from with
// its bit set: PyTorch's fallback for those bits resolves an argument by cloning it, the clone
// copies through _copy_from again, and the recursion overflows the stack. So the raw data is copied
// with the bits cleared, and the difference in bits is applied to the destination afterwards, as
// ATen's own copy does for the devices it knows.
at::Tensor clear_math_bits(const at::Tensor& t) {
  at::Tensor plain = t.is_conj() ? at::_conj(t) : t;
  return plain.is_neg() ? at::_neg_view(plain) : plain;
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (!self.is_conj() && !self.is_neg() && !src.is_conj() && !src.is_neg()) {
    return at::native::copy_(self, src, non_blocking);
  }
  at::Tensor self_data = clear_math_bits(self);
  at::native::copy_(self_data, clear_math_bits(src), non_blocking);
  if (self.is_conj() != src.is_conj()) self_data.conj_physical_();
  if (self.is_neg() != src.is_neg()) self_data.neg_();
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  download(self.reshape({}), host);
  return host.item();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_storage_offset));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("copy_", TORCH_FN(copy_));
  // CUDA's caching allocator needs to know which streams use a block; here a storage frees its
  // buffer only when it dies, and every launched program holds the buffers it reads.
  m.impl("record_stream", [](at::Tensor&, c10::Stream) {});
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

}  // namespace tpu::aten
