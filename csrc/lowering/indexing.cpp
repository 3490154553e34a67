// Indexing: index_select, gather, scatter, scatter_add, scatter_reduce, index_add, index_reduce,
// index_copy, index_fill, take, put, max_unpool, and advanced indexing (index.Tensor, index_put).
// Indices out of range raise on the host through the device flag each checked lowering returns.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;
using Kind = Arg::Kind;

// The combiner that adds (multiplies) updates in; for bools that is or (and).
std::string accumulate_combiner(DType dtype, bool multiply = false) {
  if (dtype == DType::Bool) return multiply ? "stablehlo.and" : "stablehlo.or";
  return multiply ? "stablehlo.multiply" : "stablehlo.add";
}

Value any_of(Builder& b, Value x, Value y) { return b.binary("stablehlo.or", x, y); }

// What index_select, index_copy, index_reduce and index_add share: self at least 1-D, the
// wrapped dim, the index and its length, and the flag of an index outside the dim.
struct IndexAlongDim {
  Value self;
  int64_t rank, dim;
  Value index;
  int64_t count;
  Value bad;
};
IndexAlongDim index_along_dim(Context& ctx) {
  Builder& b = ctx.b;
  IndexAlongDim a;
  a.self = at_least_1d(b, ctx.tensor(0));
  a.rank = b.rank(a.self);
  a.dim = wrap_dim(ctx.int_arg(1, 0), a.rank);
  a.index = ctx.tensor(2);
  a.count = numel(b.dims(a.index));
  a.bad = any_outside(b, a.index, 0, b.dims(a.self)[a.dim]);
  return a;
}

// index_select(self, dim, index)
std::vector<Value> lower_index_select(Context& ctx) {
  Builder& b = ctx.b;
  auto [x, rank, dim, index, count, bad] = index_along_dim(ctx);
  if (count == 0 || numel(b.dims(x)) == 0) return {b.zeros(ctx.out_type()), bad};
  Dims slice = b.dims(x), result = b.dims(x);
  slice[dim] = 1;
  result[dim] = count;
  Builder::GatherDims g{all_but(rank, dim), {dim}, {dim}, 1};
  Value rows = b.reshape(b.convert(index, DType::I64), {count, 1});
  return {as_output(ctx, b.gather(x, rows, g, slice, result)), bad};
}

// gather(self, dim, index, sparse_grad): out[i][j] = self[i][index[i][j]] for dim 1.
std::vector<Value> lower_gather(Context& ctx) {
  Builder& b = ctx.b;
  Value x = at_least_1d(b, ctx.tensor(0));
  Value index = at_least_1d(b, ctx.tensor(2));
  int64_t rank = b.rank(x);
  // An empty index gathers nothing, whatever its rank (CPU's meta function allows it).
  if (numel(b.dims(index)) == 0) return {b.zeros(ctx.out_type()), b.constant(0, DType::Bool)};
  if (b.rank(index) != rank) throw Unsupported(ctx.op + ": index rank differs from self");
  int64_t dim = wrap_dim(ctx.int_arg(1, 0), rank);
  Value bad = any_outside(b, index, 0, b.dims(x)[dim]);
  Builder::GatherDims g{{}, all_dims(rank), all_dims(rank), rank};
  Value points = coordinates_along(b, index, dim, rank);
  return {as_output(ctx, b.gather(x, points, g, Dims(rank, 1), b.dims(index))), bad};
}

// Scatters `updates` (shaped like index) into self along `dim`.
Value scatter_along(Builder& b, Value self, int64_t dim, Value index, Value updates,
                    const std::string& combiner) {
  int64_t rank = b.rank(self);
  Builder::ScatterDims s{{}, all_dims(rank), all_dims(rank), rank};
  return b.scatter(self, coordinates_along(b, index, dim, rank), updates, s, combiner);
}

// scatter (self, dim, index, src | value[, reduce]) and scatter_add (self, dim, index, src). A
// src larger than index contributes only its index-shaped corner.
std::vector<Value> scatter_family(Context& ctx, bool add) {
  Builder& b = ctx.b;
  Value self = at_least_1d(b, ctx.tensor(0));
  Value index = at_least_1d(b, ctx.tensor(2));
  DType dtype = b.dtype(self);
  int64_t rank = b.rank(self);
  if (b.rank(index) != rank) throw Unsupported(ctx.op + ": index rank differs from self");
  int64_t dim = wrap_dim(ctx.int_arg(1, 0), rank);
  Value bad = any_outside(b, index, 0, b.dims(self)[dim]);
  if (numel(b.dims(index)) == 0) return {as_output(ctx, self), bad};
  Dims index_dims = b.dims(index);
  Value updates;
  if (ctx.arg(3).kind == Kind::Number || b.rank(ctx.tensor(3)) == 0) {
    updates = cast_to(b, b.reshape(ctx.tensor(3), {}), dtype, index_dims);
  } else {
    Value src = b.convert(ctx.tensor(3), dtype);
    updates = b.slice(src, Dims(rank, 0), index_dims, Dims(rank, 1));
  }
  std::string combiner = add ? accumulate_combiner(dtype) : "";
  if (ctx.has(4) && ctx.arg(4).kind == Kind::String) {
    const std::string& reduce = ctx.arg(4).s;
    if (reduce == "add") {
      combiner = accumulate_combiner(dtype);
    } else if (reduce == "multiply") {
      combiner = accumulate_combiner(dtype, true);
    } else {
      throw Unsupported(ctx.op + ": reduce=" + reduce);
    }
  }
  return {as_output(ctx, scatter_along(b, self, dim, index, updates, combiner)), bad};
}

std::vector<Value> lower_scatter(Context& ctx) { return scatter_family(ctx, false); }
std::vector<Value> lower_scatter_add(Context& ctx) { return scatter_family(ctx, true); }

// scatter_reduce(self, dim, index, src, reduce, include_self): sum, prod, mean, amax, amin.
// Without include_self the positions index hits start from the reduction's identity.
std::vector<Value> lower_scatter_reduce(Context& ctx) {
  Builder& b = ctx.b;
  Value self = at_least_1d(b, ctx.tensor(0));
  Value index = at_least_1d(b, ctx.tensor(2));
  DType dtype = b.dtype(self);
  int64_t rank = b.rank(self);
  if (b.rank(index) != rank || dtype == DType::Bool) throw Unsupported(ctx.op + ": arguments");
  int64_t dim = wrap_dim(ctx.int_arg(1, 0), rank);
  Value bad = any_outside(b, index, 0, b.dims(self)[dim]);
  if (numel(b.dims(index)) == 0) return {as_output(ctx, self), bad};
  Dims index_dims = b.dims(index);
  Value src = b.slice(b.convert(at_least_1d(b, ctx.tensor(3)), dtype), Dims(rank, 0), index_dims,
                      Dims(rank, 1));
  const std::string& reduce = ctx.arg(4).s;
  bool mean = reduce == "mean";
  std::string combiner;
  double identity = 0;
  if (reduce == "sum" || (mean && is_floating(dtype))) {
    combiner = "stablehlo.add";
  } else if (reduce == "prod") {
    combiner = "stablehlo.multiply";
    identity = 1;
  } else if (reduce == "amax" || reduce == "amin") {
    // XLA's maximum / minimum may drop a NaN; NaNs are put back below.
    combiner = reduce == "amax" ? "stablehlo.maximum" : "stablehlo.minimum";
    identity = reduce == "amax" ? lowest(dtype) : highest(dtype);
  } else {
    throw Unsupported(ctx.op + ": reduce=" + reduce + " for " + mlir_name(dtype));
  }
  Value base = self;
  if (!ctx.bool_arg(5, true)) {
    base = scatter_along(b, self, dim, index, b.full(identity, {dtype, index_dims}), "");
  }
  Value result = scatter_along(b, base, dim, index, src, combiner);
  if (is_floating(dtype) && (reduce == "amax" || reduce == "amin")) {
    Value nan_hit = scatter_along(b, b.zeros({DType::Bool, b.dims(self)}), dim, index, is_nan(b, src),
                                  "stablehlo.or");
    result = b.select(nan_hit, b.full(std::nan(""), b.type(self)), result);
    if (ctx.bool_arg(5, true)) result = b.select(is_nan(b, self), self, result);
  }
  if (mean) {
    TensorType type = b.type(self);
    Value counts = scatter_along(b, b.full(ctx.bool_arg(5, true) ? 1 : 0, type), dim, index,
                                 b.full(1, {dtype, index_dims}), "stablehlo.add");
    result = b.div(result, b.max(counts, b.full(1, type)));
  }
  return {as_output(ctx, result), bad};
}

// Indices into a dim of `size` that may count from the end, wrapped into [0, size).
Value wrap_negative(Builder& b, Value index, int64_t size) {
  Value i = b.convert(index, DType::I64);
  TensorType t = b.type(i);
  return b.select(b.compare(i, b.zeros(t), "LT"), b.add(i, b.full(static_cast<double>(size), t)), i);
}

// take and put address self.flatten() (n elements) by `count` indices that may count from the end.
struct FlatIndex {
  Value self, index;
  int64_t n, count;
  Value bad;  // an index outside [-n, n)
};
FlatIndex flat_index(Context& ctx) {
  Builder& b = ctx.b;
  FlatIndex f{ctx.tensor(0), ctx.tensor(1), 0, 0, {}};
  f.n = numel(b.dims(f.self));
  f.count = numel(b.dims(f.index));
  f.bad = any_outside(b, f.index, -f.n, f.n);
  return f;
}

// take(self, index): self.flatten()[index], negative indices from the end.
std::vector<Value> lower_take(Context& ctx) {
  Builder& b = ctx.b;
  auto [self, index, n, count, bad] = flat_index(ctx);
  if (count == 0) return {b.zeros(ctx.out_type()), bad};
  if (n == 0) return {b.zeros(ctx.out_type()), b.constant(1, DType::Bool)};
  Value flat = b.reshape(self, {n});
  Value rows = b.reshape(wrap_negative(b, index, n), {count, 1});
  Builder::GatherDims g{{}, {0}, {0}, 1};
  Value picked = b.gather(flat, rows, g, {1}, {count});
  return {as_output(ctx, b.reshape(picked, b.dims(index))), bad};
}

// put(self, index, source, accumulate): self.flatten()[index] = source (or +=).
std::vector<Value> lower_put(Context& ctx) {
  Builder& b = ctx.b;
  auto [self, index, n, count, bad] = flat_index(ctx);
  if (count == 0 || n == 0) return {as_output(ctx, self), bad};
  Value flat = b.reshape(self, {n});
  Value source = b.reshape(b.convert(ctx.tensor(2), b.dtype(self)), {count});
  Value rows = b.reshape(wrap_negative(b, index, n), {count, 1});
  Builder::ScatterDims s{{}, {0}, {0}, 1};
  std::string combiner = ctx.bool_arg(3, false) ? accumulate_combiner(b.dtype(self)) : "";
  return {as_output(ctx, b.reshape(b.scatter(flat, rows, source, s, combiner), b.dims(self))), bad};
}

// index_copy(self, dim, index, source): self[..., index[i], ...] = source[..., i, ...]
std::vector<Value> lower_index_copy(Context& ctx) {
  Builder& b = ctx.b;
  auto [self, rank, dim, index, count, bad] = index_along_dim(ctx);
  if (count == 0 || numel(b.dims(self)) == 0) return {as_output(ctx, self), bad};
  Dims source_dims = b.dims(self);
  source_dims[dim] = count;
  Value source = b.reshape(b.convert(ctx.tensor(3), b.dtype(self)), source_dims);
  Builder::ScatterDims s{all_but(rank, dim), {dim}, {dim}, 1};
  Value rows = b.convert(b.reshape(index, {count}), DType::I64);
  // At padded sizes (a prefill whose length changes), only the real rows are checked, and the
  // padded ones point past the dim, where XLA's scatter drops them.
  Value real = real_positions(b, ctx.arg(2), rows);
  if (real.valid()) {
    int64_t size = b.dims(self)[dim];
    bad = any_outside(b, b.select(real, rows, b.zeros(b.type(rows))), 0, size);
    rows = b.select(real, rows, b.full(static_cast<double>(size), b.type(rows)));
  }
  return {as_output(ctx, b.scatter(self, b.reshape(rows, {count, 1}), source, s, "")), bad};
}

// index_fill(self, dim, index, value): the positions index names along dim take value.
std::vector<Value> lower_index_fill(Context& ctx) {
  Builder& b = ctx.b;
  Value self = at_least_1d(b, ctx.tensor(0));
  int64_t rank = b.rank(self);
  int64_t dim = wrap_dim(ctx.int_arg(1, 0), rank);
  int64_t size = b.dims(self)[dim];
  Value index = ctx.tensor(2);
  int64_t count = numel(b.dims(index));
  Value bad = any_outside(b, index, -size, size);
  if (count == 0 || numel(b.dims(self)) == 0) return {as_output(ctx, self), bad};
  Builder::ScatterDims s{{}, {0}, {0}, 1};
  Value rows = b.reshape(wrap_negative(b, index, size), {count, 1});
  Value hit = b.scatter(b.zeros({DType::Bool, {size}}), rows, b.full(1, {DType::Bool, {count}}), s, "");
  Value where = b.broadcast_in_dim(hit, b.dims(self), {dim});
  Value fill = cast_to(b, b.reshape(ctx.tensor(3), {}), b.dtype(self), b.dims(self));
  return {as_output(ctx, b.select(where, fill, self)), bad};
}

// max_unpool2d(self, indices, output_size) and max_unpool3d(self, indices, output_size, stride,
// padding): each value goes to its flat index within its (N, C) plane of the output.
std::vector<Value> lower_max_unpool(Context& ctx) {
  Builder& b = ctx.b;
  Value self = ctx.tensor(0), indices = ctx.tensor(1);
  const Dims& out_dims = ctx.outputs.at(0).dims;
  int64_t spatial = static_cast<int64_t>(ctx.arg(2).ints.size());
  int64_t rank = b.rank(self);
  if (b.dims(indices) != b.dims(self) || rank < spatial) throw Unsupported(ctx.op + ": shapes");
  int64_t lead = rank - spatial;
  int64_t plane = 1;
  for (int64_t d = lead; d < rank; ++d) plane *= out_dims[d];
  Dims flat_in(b.dims(self).begin(), b.dims(self).begin() + lead), flat_out = flat_in;
  Dims trailing;
  for (int64_t d = lead; d < rank; ++d) trailing.push_back(d);
  flat_in.push_back(count_over(b.dims(self), trailing));
  flat_out.push_back(plane);
  Value bad = any_outside(b, indices, 0, plane);
  if (numel(out_dims) == 0 || numel(b.dims(self)) == 0) return {b.zeros(ctx.out_type()), bad};
  Value values = b.reshape(self, flat_in);
  Value where = b.reshape(indices, flat_in);
  Value out = scatter_along(b, b.zeros({b.dtype(self), flat_out}), lead, where, values, "");
  return {as_output(ctx, b.reshape(out, out_dims)), bad};
}

// max_pool_double_backward(grad, indices, dim): the gradient of max_unpool, a gather of grad at
// the pooling indices within each plane of the last `dim` dims.
std::vector<Value> lower_max_pool_double_backward(Context& ctx) {
  Builder& b = ctx.b;
  Value grad = ctx.tensor(0), indices = ctx.tensor(1);
  int64_t spatial = ctx.int_arg(2, 2);
  int64_t rank = b.rank(grad);
  if (b.rank(indices) != rank || rank < spatial) throw Unsupported(ctx.op + ": shapes");
  int64_t lead = rank - spatial;
  Dims flat_grad(b.dims(grad).begin(), b.dims(grad).begin() + lead), flat_index = flat_grad;
  Dims trailing;
  for (int64_t d = lead; d < rank; ++d) trailing.push_back(d);
  flat_grad.push_back(count_over(b.dims(grad), trailing));
  flat_index.push_back(count_over(b.dims(indices), trailing));
  if (numel(b.dims(indices)) == 0 || numel(b.dims(grad)) == 0) return {b.zeros(ctx.out_type())};
  Value g = b.reshape(grad, flat_grad);
  Value where = b.reshape(indices, flat_index);
  int64_t r = static_cast<int64_t>(flat_grad.size());
  Builder::GatherDims dims{{}, all_dims(r), all_dims(r), r};
  Value picked = b.gather(g, coordinates_along(b, where, lead, r), dims, Dims(r, 1), flat_index);
  return {as_output(ctx, b.reshape(picked, b.dims(indices)))};
}

// index_reduce(self, dim, index, source, reduce, include_self): prod, mean, amax, amin of the
// source slices index sends to each position along dim (and self's own value with include_self).
std::vector<Value> lower_index_reduce(Context& ctx) {
  Builder& b = ctx.b;
  DType dtype = b.dtype(ctx.tensor(0));
  if (dtype == DType::Bool || is_complex(dtype)) throw Unsupported(ctx.op + ": dtype");
  auto [self, rank, dim, index, count, bad] = index_along_dim(ctx);
  if (count == 0 || numel(b.dims(self)) == 0) return {as_output(ctx, self), bad};
  Dims source_dims = b.dims(self);
  source_dims[dim] = count;
  Value source = b.reshape(b.convert(at_least_1d(b, ctx.tensor(3)), dtype), source_dims);
  const std::string& reduce = ctx.arg(4).s;
  bool include_self = ctx.bool_arg(5, true);
  Builder::ScatterDims s{all_but(rank, dim), {dim}, {dim}, 1};
  Value rows = b.reshape(b.convert(index, DType::I64), {count, 1});
  auto scatter = [&](Value target, Value updates, const std::string& combiner) {
    return b.scatter(target, rows, updates, s, combiner);
  };
  std::string combiner;
  double identity = 0;
  if (reduce == "prod") {
    combiner = "stablehlo.multiply";
    identity = 1;
  } else if (reduce == "mean") {
    combiner = "stablehlo.add";
  } else if (reduce == "amax" || reduce == "amin") {
    combiner = reduce == "amax" ? "stablehlo.maximum" : "stablehlo.minimum";
    identity = reduce == "amax" ? lowest(dtype) : highest(dtype);
  } else {
    throw Unsupported(ctx.op + ": reduce=" + reduce);
  }
  Value base = include_self ? self : scatter(self, b.full(identity, {dtype, source_dims}), "");
  Value result = scatter(base, source, combiner);
  if (is_floating(dtype) && (reduce == "amax" || reduce == "amin")) {
    Value nan_hit = scatter(b.zeros({DType::Bool, b.dims(self)}), is_nan(b, source), "stablehlo.or");
    result = b.select(nan_hit, b.full(std::nan(""), b.type(self)), result);
    if (include_self) result = b.select(is_nan(b, self), self, result);
  }
  if (reduce == "mean") {
    TensorType type = b.type(self);
    Value counts = scatter(b.full(include_self ? 1 : 0, type), b.full(1, {dtype, source_dims}), "stablehlo.add");
    counts = b.max(counts, b.full(1, type));
    if (is_floating(dtype)) {
      result = b.div(result, counts);
    } else {
      // Integer means round down, as PyTorch's div(rounding_mode="floor").
      Value q = b.div(result, counts);
      Value inexact = b.compare(b.mul(q, counts), result, "NE");
      Value negative = b.compare(result, b.zeros(type), "LT");
      q = b.select(b.binary("stablehlo.and", inexact, negative), b.sub(q, b.full(1, type)), q);
      result = q;
    }
  }
  return {as_output(ctx, result), bad};
}

// index_add(self, dim, index, source, alpha):
// self[..., index[i], ...] += alpha * source[..., i, ...]
std::vector<Value> lower_index_add(Context& ctx) {
  Builder& b = ctx.b;
  DType dtype = b.dtype(ctx.tensor(0));
  if (dtype == DType::Bool) throw Unsupported(ctx.op + ": bool");
  auto [self, rank, dim, index, count, bad] = index_along_dim(ctx);
  if (count == 0) return {as_output(ctx, self), bad};
  Dims source_dims = b.dims(self);
  source_dims[dim] = count;
  Value source = b.reshape(b.convert(ctx.tensor(3), dtype), source_dims);
  Value alpha = ctx.has(4) ? operand_as(ctx, 4, dtype, b.dims(source)) : Value{};
  if (alpha.valid()) source = b.mul(source, alpha);
  Builder::ScatterDims s{all_but(rank, dim), {dim}, {dim}, 1};
  Value rows = b.reshape(b.convert(index, DType::I64), {count, 1});
  return {as_output(ctx, b.scatter(self, rows, source, s, "stablehlo.add")), bad};
}

// Advanced indexing with integer tensors (the Tensor?[] of index / index_put). The index tensors
// broadcast to one shape B; self[indices] is B in place of the indexed dims when those are
// adjacent, and B in front of the remaining dims otherwise.
struct AdvancedIndex {
  Value points;            // [*B, k] int64 coordinates into the indexed dims
  Value out_of_range;      // rank-0 bool: some index lies outside [-size, size)
  Dims indexed;            // the dims of self that are indexed
  Dims result_dims;        // shape of self[indices]
  Dims window_positions;   // where self's remaining dims sit in the result
  int64_t batch_rank = 0;  // rank of B
};

bool is_mask(DType dtype) { return dtype == DType::Bool || dtype == DType::U8; }

AdvancedIndex advanced_index(Context& ctx, Value self, const std::vector<Value>& list) {
  Builder& b = ctx.b;
  Dims shape = b.dims(self);
  int64_t rank = b.rank(self);
  if (static_cast<int64_t>(list.size()) > rank) throw Unsupported(ctx.op + ": too many indices");
  AdvancedIndex a;
  Dims batch;
  for (size_t d = 0; d < list.size(); ++d) {
    if (!list[d].valid()) continue;
    if (is_mask(b.dtype(list[d]))) throw Unsupported(ctx.op + ": boolean mask index");
    a.indexed.push_back(static_cast<int64_t>(d));
    batch = a.indexed.size() == 1 ? b.dims(list[d]) : broadcast_shape(batch, b.dims(list[d]));
  }
  if (a.indexed.empty()) throw Unsupported(ctx.op + ": no index tensor");
  a.batch_rank = static_cast<int64_t>(batch.size());

  Dims column = batch;
  column.push_back(1);
  std::vector<Value> coordinates;
  a.out_of_range = b.constant(0, DType::Bool);
  for (int64_t d : a.indexed) {
    a.out_of_range = any_of(b, a.out_of_range, any_outside(b, list[d], -shape[d], shape[d]));
    Value i = b.convert(list[d], DType::I64);
    // Negative indices count from the end.
    Value size = b.full(static_cast<double>(shape[d]), b.type(i));
    i = b.select(b.compare(i, b.zeros(b.type(i)), "LT"), b.add(i, size), i);
    coordinates.push_back(b.reshape(b.broadcast_to(i, batch), column));
  }
  a.points = b.concatenate(coordinates, a.batch_rank);

  int64_t span = a.indexed.back() - a.indexed.front() + 1;
  bool adjacent = span == static_cast<int64_t>(a.indexed.size());
  int64_t insert_at = adjacent ? a.indexed.front() : 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == insert_at) a.result_dims.insert(a.result_dims.end(), batch.begin(), batch.end());
    if (std::find(a.indexed.begin(), a.indexed.end(), d) != a.indexed.end()) continue;
    a.window_positions.push_back(static_cast<int64_t>(a.result_dims.size()));
    a.result_dims.push_back(shape[d]);
  }
  return a;
}

// index.Tensor(self, indices)
std::vector<Value> lower_index(Context& ctx) {
  Builder& b = ctx.b;
  Value self = ctx.tensor(0);
  AdvancedIndex a = advanced_index(ctx, self, ctx.arg(1).values);
  if (numel(a.result_dims) == 0 || numel(b.dims(self)) == 0) return {b.zeros(ctx.out_type()), a.out_of_range};
  Dims slice = b.dims(self);
  for (int64_t d : a.indexed) slice[d] = 1;
  Builder::GatherDims g{a.window_positions, a.indexed, a.indexed, a.batch_rank};
  return {as_output(ctx, b.gather(self, a.points, g, slice, a.result_dims)), a.out_of_range};
}

// self[mask] = values for a single boolean mask whose values do not depend on how many
// elements the mask selects (they broadcast over the dims after the mask): a select.
Value masked_put(Context& ctx, Value self, size_t position, Value mask, Value values,
                 bool accumulate) {
  Builder& b = ctx.b;
  Dims shape = b.dims(self);
  int64_t mask_rank = b.rank(mask);
  int64_t trailing = b.rank(self) - static_cast<int64_t>(position) - mask_rank;
  Dims value_dims = b.dims(values);
  while (!value_dims.empty() && value_dims.front() == 1 &&
         static_cast<int64_t>(value_dims.size()) > trailing) {
    value_dims.erase(value_dims.begin());
  }
  if (trailing < 0 || static_cast<int64_t>(value_dims.size()) > trailing) {
    throw Unsupported(ctx.op + ": boolean mask with per-element values");
  }
  Dims mapping;
  for (int64_t d = 0; d < mask_rank; ++d) {
    int64_t target = static_cast<int64_t>(position) + d;
    if (b.dims(mask)[d] != shape[target]) throw Unsupported(ctx.op + ": mask shape mismatch");
    mapping.push_back(target);
  }
  Value where = b.broadcast_in_dim(b.convert(mask, DType::Bool), shape, mapping);
  Value spread = cast_to(b, b.reshape(values, value_dims), b.dtype(self), shape);
  if (accumulate) spread = b.binary(accumulate_combiner(b.dtype(self)), self, spread);
  return b.select(where, spread, self);
}

// index_put(self, indices, values, accumulate) and _index_put_impl(..., unsafe).
std::vector<Value> lower_index_put(Context& ctx) {
  Builder& b = ctx.b;
  Value self = ctx.tensor(0);
  const std::vector<Value>& list = ctx.arg(1).values;
  Value values = ctx.tensor(2);
  bool accumulate = ctx.bool_arg(3, false);
  std::vector<size_t> given;
  for (size_t d = 0; d < list.size(); ++d) {
    if (list[d].valid()) given.push_back(d);
  }
  if (given.size() == 1 && is_mask(b.dtype(list[given[0]]))) {
    return {as_output(ctx, masked_put(ctx, self, given[0], list[given[0]], values, accumulate)),
            b.constant(0, DType::Bool)};
  }
  AdvancedIndex a = advanced_index(ctx, self, list);
  if (numel(a.result_dims) == 0) return {as_output(ctx, self), a.out_of_range};
  Value updates = cast_to(b, values, b.dtype(self), a.result_dims);
  Builder::ScatterDims s{a.window_positions, a.indexed, a.indexed, a.batch_rank};
  std::string combiner = accumulate ? accumulate_combiner(b.dtype(self)) : "";
  return {as_output(ctx, b.scatter(self, a.points, updates, s, combiner)), a.out_of_range};
}

}  // namespace

TPU_CHECKED_LOWERING("index_select", lower_index_select);
TPU_CHECKED_LOWERING("gather", lower_gather);
TPU_CHECKED_LOWERING("scatter", lower_scatter);
TPU_CHECKED_LOWERING("scatter_add", lower_scatter_add);
TPU_CHECKED_LOWERING("scatter_reduce", lower_scatter_reduce);
TPU_CHECKED_LOWERING("index_add", lower_index_add);
TPU_CHECKED_LOWERING("index_reduce", lower_index_reduce);
TPU_CHECKED_LOWERING("max_unpool2d", lower_max_unpool);
TPU_CHECKED_LOWERING("max_unpool3d", lower_max_unpool);
TPU_LOWERING("max_pool_double_backward", lower_max_pool_double_backward);
TPU_CHECKED_LOWERING("take", lower_take);
TPU_CHECKED_LOWERING("put", lower_put);
TPU_CHECKED_LOWERING("index_copy", lower_index_copy);
TPU_CHECKED_LOWERING("index_fill", lower_index_fill);
TPU_CHECKED_LOWERING("index", lower_index);
TPU_CHECKED_LOWERING("index_put", lower_index_put);
TPU_CHECKED_LOWERING("_index_put_impl", lower_index_put);

}  // namespace tpu::lowering
