#include "lowering/view_access.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace tpu::lowering {

using hlo::Builder;
using hlo::Value;

namespace {

struct Dim {
  int64_t index;  // position in the view
  int64_t size;
  int64_t stride;
};

// How a view sits in its base: its non-trivial dims ordered from the outermost stride inward.
struct Placement {
  std::vector<Dim> ordered;  // size > 1 and stride != 0, by stride descending
  bool broadcasts = false;   // some size > 1 dim has stride 0
  bool dense = false;        // `ordered` tiles one contiguous range
  bool strided = false;      // `ordered` is a strided slice of a reshaped range
  int64_t extent = 1;        // elements of the base the range spans
};

Placement place(const ViewLayout& layout) {
  Placement p;
  for (size_t i = 0; i < layout.sizes.size(); ++i) {
    if (layout.sizes[i] == 1) continue;
    if (layout.strides[i] == 0) {
      p.broadcasts = true;
      continue;
    }
    p.ordered.push_back({static_cast<int64_t>(i), layout.sizes[i], layout.strides[i]});
  }
  std::stable_sort(p.ordered.begin(), p.ordered.end(),
                   [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  for (const Dim& d : p.ordered) {
    if (d.stride < 0) return p;  // negative strides: only the gather path knows them
  }
  int64_t expected = 1;
  p.dense = true;
  for (auto it = p.ordered.rbegin(); it != p.ordered.rend(); ++it) {
    if (it->stride != expected) p.dense = false;
    expected *= it->size;
  }
  if (p.dense) {
    p.extent = expected;
    return p;
  }
  // Strided slice: every stride divides the next outer one, with room for the inner extent.
  p.strided = true;
  for (size_t k = 0; k + 1 < p.ordered.size(); ++k) {
    const Dim& outer = p.ordered[k];
    const Dim& inner = p.ordered[k + 1];
    if (outer.stride % inner.stride != 0 || outer.stride / inner.stride < inner.size) {
      p.strided = false;
    }
  }
  if (p.strided) p.extent = p.ordered[0].size * p.ordered[0].stride;
  return p;
}

// The shape the base range is reshaped to so the view becomes a slice of it:
// [size0, s0/s1, s1/s2, ..., s_last] (for a dense view this is just the sizes).
Dims range_shape(const Placement& p) {
  Dims shape;
  if (p.dense) {
    for (const Dim& d : p.ordered) shape.push_back(d.size);
    return shape;
  }
  shape.push_back(p.ordered[0].size);
  for (size_t k = 0; k + 1 < p.ordered.size(); ++k) {
    shape.push_back(p.ordered[k].stride / p.ordered[k + 1].stride);
  }
  shape.push_back(p.ordered.back().stride);
  return shape;
}

// Sizes of `ordered` (plus a trailing 1 for the strided form).
Dims slice_limits(const Placement& p) {
  Dims limits;
  for (const Dim& d : p.ordered) limits.push_back(d.size);
  if (!p.dense) limits.push_back(1);
  return limits;
}

// Permutation taking the stride-ordered dims to view order, and back.
Dims to_view_order(const Placement& p) {
  std::vector<size_t> by_index(p.ordered.size());
  for (size_t i = 0; i < by_index.size(); ++i) by_index[i] = i;
  std::sort(by_index.begin(), by_index.end(),
            [&](size_t a, size_t b) { return p.ordered[a].index < p.ordered[b].index; });
  return Dims(by_index.begin(), by_index.end());
}

Dims inverse(const Dims& perm) {
  Dims inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// Elements of the base between the view's first and last element, inclusive.
int64_t span(const ViewLayout& layout) {
  int64_t last = 0;
  for (size_t i = 0; i < layout.sizes.size(); ++i) last += (layout.sizes[i] - 1) * layout.strides[i];
  return last + 1;
}

// The view's start in its base: the runtime `offset` when given, else the layout's constant.
Value start_of(Builder& b, const ViewLayout& layout, Value offset) {
  return offset.valid() ? offset : b.constant(static_cast<double>(layout.offset), DType::I64);
}

// Element index of every view position, as an i64 tensor of shape sizes + [1].
Value element_indices(Builder& b, const ViewLayout& layout, Value offset) {
  TensorType index_type{DType::I64, layout.sizes};
  Value index = offset.valid() ? b.broadcast_in_dim(offset, layout.sizes, {})
                               : b.full(static_cast<double>(layout.offset), index_type);
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] == 1 || layout.strides[d] == 0) continue;
    Value step = b.mul(b.iota(index_type, static_cast<int64_t>(d)),
                       b.full(static_cast<double>(layout.strides[d]), index_type));
    index = b.add(index, step);
  }
  Dims with_vector = layout.sizes;
  with_vector.push_back(1);
  return b.reshape(index, with_vector);
}

// The base extended with zeros so that the range [start, start + extent) a strided view is cut
// from lies inside it. With a runtime start the padding cannot depend on it: the view lies inside
// the base (offset_is_runtime), so extent - span more elements always suffice.
Value padded_base(Builder& b, Value base, const ViewLayout& layout, const Placement& p, bool runtime) {
  int64_t length = b.dims(base)[0];
  int64_t end = runtime ? length + p.extent - span(layout) : layout.offset + p.extent;
  if (end <= length) return base;
  return b.pad(base, b.constant(0, b.dtype(base)), {0}, {end - length}, {0});
}

// [start, start + extent) of `source`.
Value range_of(Builder& b, Value source, const ViewLayout& layout, int64_t extent, Value offset) {
  if (!offset.valid()) return b.slice(source, {layout.offset}, {layout.offset + extent}, {1});
  return b.dynamic_slice(source, {offset}, {extent});
}

}  // namespace

bool is_contiguous(const ViewLayout& layout) {
  int64_t expected = 1;
  for (size_t i = layout.sizes.size(); i-- > 0;) {
    if (layout.sizes[i] != 1 && layout.strides[i] != expected) return false;
    expected *= layout.sizes[i];
  }
  return true;
}

void canonicalize_unit_strides(Dims& strides, const Dims& sizes) {
  int64_t dense = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) {
      strides[i] = dense;
    } else {
      dense = strides[i] * sizes[i];
    }
  }
}

bool offset_is_runtime(const ViewLayout& layout, int64_t base_length) {
  if (numel(layout.sizes) == 0) return false;
  for (int64_t stride : layout.strides) {
    if (stride < 0) return false;
  }
  int64_t reach = span(layout);
  if (layout.offset < 0 || layout.offset + reach > base_length) return false;
  return !(layout.offset == 0 && reach == base_length && is_contiguous(layout));
}

ViewLayout dense_layout(const Dims& sizes, int64_t offset) {
  ViewLayout layout{sizes, Dims(sizes.size()), offset};
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    layout.strides[i] = stride;
    stride *= sizes[i];
  }
  return layout;
}

Value read_view(Builder& b, Value base, const ViewLayout& layout, Value offset) {
  TensorType view_type{b.dtype(base), layout.sizes};
  if (numel(layout.sizes) == 0) return b.zeros(view_type);
  int64_t length = b.dims(base)[0];
  Placement p = place(layout);
  int64_t end = layout.offset + p.extent;
  if (((p.dense && end <= length) || p.strided) && layout.offset >= 0 && layout.offset < length) {
    Value source = p.dense ? base : padded_base(b, base, layout, p, offset.valid());
    Value range = range_of(b, source, layout, p.extent, offset);
    Value shaped = b.reshape(range, range_shape(p));
    if (!p.dense) {
      Dims limits = slice_limits(p);
      shaped = b.slice(shaped, Dims(limits.size(), 0), limits, Dims(limits.size(), 1));
      Dims sizes;
      for (const Dim& d : p.ordered) sizes.push_back(d.size);
      shaped = b.reshape(shaped, sizes);
    }
    Value ordered = b.transpose(shaped, to_view_order(p));
    Dims mapping;
    Dims in_view_order = to_view_order(p);
    for (int64_t k : in_view_order) mapping.push_back(p.ordered[k].index);
    return b.broadcast_in_dim(ordered, layout.sizes, mapping);
  }
  hlo::Builder::GatherDims g;
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = static_cast<int64_t>(layout.sizes.size());
  return b.gather(base, element_indices(b, layout, offset), g, {1}, layout.sizes);
}

Value write_view(Builder& b, Value base, Value update, const ViewLayout& layout, Value offset) {
  if (numel(layout.sizes) == 0) return base;
  int64_t length = b.dims(base)[0];
  Placement p = place(layout);
  if ((p.dense || p.strided) && !p.broadcasts && layout.offset >= 0) {
    // Bring the update into stride order: drop size-1 dims, then permute.
    Dims view_order_sizes;
    Dims in_view_order = to_view_order(p);
    for (int64_t k : in_view_order) view_order_sizes.push_back(p.ordered[k].size);
    Value ordered = b.transpose(b.reshape(update, view_order_sizes), inverse(in_view_order));
    Value index = start_of(b, layout, offset);
    if (p.dense) {
      Value flat = b.reshape(ordered, {p.extent});
      if (!offset.valid() && layout.offset == 0 && p.extent == length) return flat;
      if (layout.offset + p.extent <= length) return b.dynamic_update_slice(base, flat, {index});
    } else {
      Value source = padded_base(b, base, layout, p, offset.valid());
      Dims shape = range_shape(p);
      Value range = b.reshape(range_of(b, source, layout, p.extent, offset), shape);
      Value zero = b.constant(0, DType::I64);
      Value block = b.reshape(ordered, slice_limits(p));
      range = b.dynamic_update_slice(range, block, std::vector<Value>(shape.size(), zero));
      Value merged = b.dynamic_update_slice(source, b.reshape(range, {p.extent}), {index});
      return b.slice(merged, {0}, {length}, {1});
    }
  }
  hlo::Builder::ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = static_cast<int64_t>(layout.sizes.size());
  return b.scatter(base, element_indices(b, layout, offset), update, s, "");
}

namespace {

// Element index of every bucket position, and whether it is a real position (not padding).
std::pair<Value, Value> padded_indices(Builder& b, const RuntimeLayout& layout) {
  TensorType index_type{DType::I64, layout.sizes};
  Value index = b.broadcast_in_dim(layout.offset, layout.sizes, {});
  Value real;
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] == 1) continue;
    Value position = b.iota(index_type, static_cast<int64_t>(d));
    index = b.add(index, b.mul(position, b.broadcast_in_dim(layout.strides[d], layout.sizes, {})));
    if (!(layout.padded >> d & 1)) continue;
    Value inside = b.compare(position, b.broadcast_in_dim(layout.runtime_sizes[d], layout.sizes, {}), "LT");
    real = real.valid() ? b.binary("stablehlo.and", real, inside) : inside;
  }
  return {index, real};
}

Value with_index_vector(Builder& b, Value index) {
  Dims with_vector = b.dims(index);
  with_vector.push_back(1);
  return b.reshape(index, with_vector);
}

}  // namespace

Value padding_mask(Builder& b, const RuntimeLayout& layout) {
  Value real;
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (!(layout.padded >> d & 1)) continue;
    Value position = b.iota({DType::I64, layout.sizes}, static_cast<int64_t>(d));
    Value inside = b.compare(position, b.broadcast_in_dim(layout.runtime_sizes[d], layout.sizes, {}), "LT");
    real = real.valid() ? b.binary("stablehlo.and", real, inside) : inside;
  }
  return real;
}

bool fits_window(const Dims& bucket, const Dims& strides, int64_t offset, int64_t base_length, bool written) {
  ViewLayout window{bucket, strides, 0};
  Placement p = place(window);
  for (int64_t stride : strides) {
    if (stride < 0) return false;
  }
  if (!(p.dense || p.strided) || (written && p.broadcasts)) return false;
  return offset >= 0 && offset + span(window) <= base_length;
}

Value read_padded_view(Builder& b, Value base, const RuntimeLayout& layout, double fill) {
  TensorType view_type{b.dtype(base), layout.sizes};
  if (numel(layout.sizes) == 0 || b.dims(base)[0] == 0) return b.zeros(view_type);
  if (!layout.window_strides.empty()) {
    Value value = read_view(b, base, {layout.sizes, layout.window_strides, 0}, layout.offset);
    if (std::isnan(fill)) return value;
    Value real = padding_mask(b, layout);
    return real.valid() ? b.select(real, value, b.full(fill, view_type)) : value;
  }
  if (layout.prefix) {
    Value value = b.reshape(b.dynamic_slice(base, {layout.offset}, {numel(layout.sizes)}), layout.sizes);
    if (std::isnan(fill)) return value;
    Value real = padding_mask(b, layout);
    return real.valid() ? b.select(real, value, b.full(fill, view_type)) : value;
  }
  auto [index, real] = padded_indices(b, layout);
  // Padding positions may compute an index outside the storage: point them at its first element.
  if (real.valid()) index = b.select(real, index, b.zeros({DType::I64, layout.sizes}));
  hlo::Builder::GatherDims g;
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = static_cast<int64_t>(layout.sizes.size());
  Value value = b.gather(base, with_index_vector(b, index), g, {1}, layout.sizes);
  if (!real.valid() || std::isnan(fill)) return value;
  return b.select(real, value, b.full(fill, view_type));
}

Value write_padded_view(Builder& b, Value base, Value update, const RuntimeLayout& layout) {
  if (numel(layout.sizes) == 0) return base;
  if (layout.prefix) return b.dynamic_update_slice(base, b.reshape(update, {numel(layout.sizes)}), {layout.offset});
  if (!layout.window_strides.empty()) {
    // The padding positions keep what the base holds there: they may be another view's elements.
    ViewLayout window{layout.sizes, layout.window_strides, 0};
    Value real = padding_mask(b, layout);
    if (real.valid()) update = b.select(real, update, read_view(b, base, window, layout.offset));
    return write_view(b, base, update, window, layout.offset);
  }
  auto [index, real] = padded_indices(b, layout);
  // Scatter skips updates whose index lies outside the operand: where the padding goes.
  int64_t length = b.dims(base)[0];
  if (real.valid()) index = b.select(real, index, b.full(static_cast<double>(length), {DType::I64, layout.sizes}));
  hlo::Builder::ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = static_cast<int64_t>(layout.sizes.size());
  return b.scatter(base, with_index_vector(b, index), update, s, "");
}

}  // namespace tpu::lowering
