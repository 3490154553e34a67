// Ops whose result shape depends on the data (nonzero, masked_select, repeat_interleave) or whose
// result is a host value (equal), composed from ops that have lowerings.
//
// A data-dependent shape needs one number from the device: the count is computed there and read
// (a sync), then the result is built at its now known size. Everything else stays on the device:
// the i-th selected element goes to slot cumsum(mask)[i] - 1 through a scatter, which needs no
// sort and keeps the elements in order.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <vector>

namespace {

// The flat positions of the true elements of `mask` (any shape), in order, as int64 [count]; with
// `size`, exactly `size` slots (the rest left as `fill`) and no sync.
at::Tensor true_positions(const at::Tensor& mask, c10::optional<int64_t> size, int64_t fill = 0) {
  at::Tensor flat = mask.reshape({-1}).to(at::kBool);
  int64_t n = flat.numel();
  int64_t count = size ? *size : (n == 0 ? 0 : flat.sum().item<int64_t>());
  at::TensorOptions longs = flat.options().dtype(at::kLong);
  if (n == 0 || count == 0) return at::full({count}, fill, longs);
  at::Tensor slot = at::cumsum(flat, 0, at::kLong) - 1;
  // Unselected elements (and, with a fixed size, selected ones past it) go to a spare last slot.
  at::Tensor keep = at::logical_and(flat, slot < count);
  slot = at::where(keep, slot, at::full({}, count, longs));
  at::Tensor out = at::full({count + 1}, fill, longs);
  out.scatter_(0, slot, at::arange(n, longs));
  return out.slice(0, 0, count);
}

// Row-major coordinates [count, ndim] of the flat positions `flat` in a tensor of `sizes`.
at::Tensor coordinates(const at::Tensor& flat, at::IntArrayRef sizes) {
  std::vector<at::Tensor> columns;
  int64_t stride = 1;
  std::vector<int64_t> strides(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    columns.push_back(at::remainder(at::floor_divide(flat, strides[d]), sizes[d]));
  }
  if (columns.empty()) return at::empty({flat.numel(), 0}, flat.options());
  return at::stack(columns, 1);
}

at::Tensor nonzero_tpu(const at::Tensor& self) {
  TORCH_CHECK(self.numel() < std::numeric_limits<int>::max(), "nonzero is not supported for tensors with more "
              "than INT_MAX elements, file a support request");
  return coordinates(true_positions(self != 0, c10::nullopt), self.sizes());
}

at::Tensor& nonzero_out_tpu(const at::Tensor& self, at::Tensor& out) {
  at::Tensor result = nonzero_tpu(self);
  out.resize_(result.sizes());
  return out.copy_(result);
}

at::Tensor nonzero_static_tpu(const at::Tensor& self, c10::SymInt size, int64_t fill_value) {
  int64_t slots = size.expect_int();
  TORCH_CHECK(slots >= 0, "nonzero_static: 'size' must be an non-negative integer");
  at::Tensor positions = true_positions(self != 0, slots, -1);
  at::Tensor coords = coordinates(positions.clamp_min(0), self.sizes());
  // Slots past the count hold fill_value in every coordinate.
  at::Tensor empty_slot = (positions < 0).unsqueeze(1);
  return at::where(empty_slot, at::full({}, fill_value, coords.options()), coords);
}

at::Tensor masked_select_tpu(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  at::Tensor values = self.expand(shape).reshape({-1});
  return values.index_select(0, true_positions(mask.expand(shape), c10::nullopt));
}

at::Tensor& masked_select_out_tpu(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  at::Tensor result = masked_select_tpu(self, mask);
  out.resize_(result.sizes());
  return out.copy_(result);
}

// masked_scatter_(self, mask, source): the true positions of mask take source's leading elements
// in order: element k of source goes to the k-th true position, found by a cumsum (no sync).
at::Tensor& masked_scatter_tpu_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with "
              "dtype ", mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter_: expected self and source to have "
              "same dtypes but got", self.scalar_type(), " and ", source.scalar_type());
  at::Tensor m = mask.expand(self.sizes()).reshape({-1});
  if (m.numel() == 0) return self;
  at::Tensor flat_source = source.reshape({-1});
  if (flat_source.numel() == 0) return self;  // with no true position, nothing changes
  at::Tensor slot = (at::cumsum(m, 0, at::kLong) - 1).clamp(0, flat_source.numel() - 1);
  at::Tensor picked = flat_source.index_select(0, slot);
  at::Tensor merged = at::where(m, picked, self.reshape({-1}));
  self.copy_(merged.view(self.sizes()));
  return self;
}

bool equal_tpu(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

// repeat_interleave(repeats, output_size?): index i repeated repeats[i] times. Output k belongs
// to the first i whose running total exceeds k: a searchsorted of k in the running totals.
at::Tensor repeat_interleave_tpu(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  at::Tensor totals = at::cumsum(repeats, 0, at::kLong);
  int64_t total = output_size ? output_size->expect_int()
                              : (repeats.numel() == 0 ? 0 : totals[-1].item<int64_t>());
  if (!output_size && repeats.numel() > 0) {
    TORCH_CHECK(repeats.min().item<int64_t>() >= 0, "repeats can not be negative");
  }
  at::Tensor k = at::arange(total, totals.options());
  return at::searchsorted(totals, k, /*out_int32=*/false, /*right=*/true).to(repeats.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", TORCH_FN(nonzero_tpu));
  m.impl("nonzero.out", TORCH_FN(nonzero_out_tpu));
  m.impl("nonzero_static", TORCH_FN(nonzero_static_tpu));
  m.impl("masked_select", TORCH_FN(masked_select_tpu));
  m.impl("masked_select.out", TORCH_FN(masked_select_out_tpu));
  m.impl("masked_scatter_", TORCH_FN(masked_scatter_tpu_));
  m.impl("equal", TORCH_FN(equal_tpu));
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeat_interleave_tpu));
}
