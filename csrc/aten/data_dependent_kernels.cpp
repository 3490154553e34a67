// Ops whose result shape depends on the data (nonzero, masked_select, repeat_interleave, bincount,
// unique) or whose result is a host value (equal), composed from ops that have lowerings.
//
// A data-dependent shape needs one number from the device: the count is computed there and read
// (a sync), then the result is built at its now known size. Everything else stays on the device:
// the i-th selected element goes to slot cumsum(mask)[i] - 1 through a scatter, which needs no
// sort and keeps the elements in order.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
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

// bincount(self, weights?, minlength): the size comes from one read of the input's min and max
// (the min for CPU's check that no value is negative), then the counts are a scatter-add.
at::Tensor bincount_tpu(const at::Tensor& self, const std::optional<at::Tensor>& weights_arg, int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  const at::Tensor* weights = weights_arg.has_value() && weights_arg->defined() ? &*weights_arg : nullptr;
  TORCH_CHECK(!weights || (weights->dim() == 1 && weights->size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  // CPU's result type: float32 weights count in float32, any others in float64, none in int64.
  at::ScalarType dtype = !weights ? at::kLong : weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  at::TensorOptions options = self.options().dtype(dtype);
  if (self.numel() == 0) return at::zeros({minlength}, options);
  at::Tensor values = self.to(at::kLong);
  at::Tensor bounds = at::stack({values.min(), values.max()}).cpu();
  TORCH_CHECK(bounds[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
  int64_t size = std::max(bounds[1].item<int64_t>() + 1, minlength);
  at::Tensor counted = weights ? weights->to(dtype) : at::ones({self.size(0)}, options);
  return at::zeros({size}, options).index_add_(0, values, counted);
}

// _unique2(self, sorted, return_inverse, return_counts): the sorted values, a mark where each new
// value starts, and one read of how many there are; each element's group is the running count of
// marks. NaNs differ from each other, as on the CPU. Unrequested inverse and counts are empty, as
// the CPU returns them. `sorted` is honoured by always sorting (an unsorted order is unspecified).
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2_tpu(const at::Tensor& self, bool /*sorted*/,
                                                            bool return_inverse, bool return_counts) {
  at::TensorOptions longs = self.options().dtype(at::kLong);
  at::Tensor flat = self.reshape({-1});
  int64_t n = flat.numel();
  at::Tensor inverse = return_inverse ? at::zeros(self.sizes(), longs) : at::empty({0}, longs);
  if (n == 0) {
    return {at::empty({0}, self.options()), inverse, at::empty({0}, longs)};
  }
  bool is_bool = self.scalar_type() == at::kBool;
  auto [ordered, order] = at::sort(is_bool ? flat.to(at::kByte) : flat, /*stable=*/true, 0, false);
  at::Tensor starts = at::ones({n}, self.options().dtype(at::kBool));
  if (n > 1) starts.slice(0, 1, n).copy_(ordered.slice(0, 1, n) != ordered.slice(0, 0, n - 1));
  at::Tensor group = at::cumsum(starts, 0, at::kLong) - 1;
  int64_t count = group[-1].item<int64_t>() + 1;
  at::Tensor values = at::zeros({count}, ordered.options()).scatter_(0, group, ordered);
  if (is_bool) values = values.to(at::kBool);
  if (return_inverse) inverse = at::empty({n}, longs).scatter_(0, order, group).view(self.sizes());
  at::Tensor counts = return_counts ? at::zeros({count}, longs).index_add_(0, group, at::ones({n}, longs))
                                    : at::empty({0}, longs);
  return {values, inverse, counts};
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
  m.impl("bincount", TORCH_FN(bincount_tpu));
  m.impl("_unique2", TORCH_FN(unique2_tpu));
}
