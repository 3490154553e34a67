// Sorting and order statistics: sort, topk, kthvalue, median and nanmedian, all from one stable
// sort along a dim in which NaN sorts above every number, as in PyTorch.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {

std::pair<Value, Value> sort_along(hlo::Builder& b, Value x, int64_t dim, bool descending) {
  Value positions = b.iota({DType::I64, b.dims(x)}, dim);
  TensorType scalar{b.dtype(x), {}}, index_scalar{DType::I64, {}};
  bool floating = is_floating(b.dtype(x));
  hlo::RegionRef comparator = b.region(
      {scalar, scalar, index_scalar, index_scalar}, [&](hlo::Builder& r, const std::vector<Value>& a) {
        Value lhs = a[0], rhs = a[1];
        Value before = r.compare(lhs, rhs, descending ? "GT" : "LT");
        if (floating) {
          // NaN ranks above every number: last when ascending, first when descending.
          Value lhs_nan = is_nan(r, lhs), rhs_nan = is_nan(r, rhs);
          Value ranks_above = descending ? lhs_nan : rhs_nan;
          Value ranks_below = r.unary("stablehlo.not", descending ? rhs_nan : lhs_nan);
          Value nan_first = r.binary("stablehlo.and", ranks_above, ranks_below);
          before = r.binary("stablehlo.or", before, nan_first);
        }
        return std::vector<Value>{before};
      });
  auto sorted = b.op("stablehlo.sort", {x, positions}, {b.type(x), b.type(positions)},
                     "dimension = " + std::to_string(dim) + " : i64, is_stable = true",
                     {comparator});
  return {sorted[0], sorted[1]};
}

namespace {

using hlo::Builder;
using Kind = Arg::Kind;

// sort(self, dim, descending) and sort.stable(self, stable, dim, descending).
std::vector<Value> lower_sort(Context& ctx) {
  Builder& b = ctx.b;
  Value x = at_least_1d(b, ctx.tensor(0));
  if (is_complex(b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  size_t dim_index = ctx.args.size() >= 4 ? 2 : 1;
  int64_t dim = wrap_dim(ctx.int_arg(dim_index, -1), b.rank(x));
  auto [values, indices] = sort_along(b, x, dim, ctx.bool_arg(dim_index + 1, false));
  return {as_output(ctx, values, 0), as_output(ctx, indices, 1)};
}

// topk(self, k, dim, largest, sorted): the first k of a stable sort.
std::vector<Value> lower_topk(Context& ctx) {
  Builder& b = ctx.b;
  Value x = at_least_1d(b, ctx.tensor(0));
  if (is_complex(b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  int64_t k = ctx.int_arg(1, 1);
  int64_t dim = wrap_dim(ctx.int_arg(2, -1), b.rank(x));
  auto [values, indices] = sort_along(b, x, dim, ctx.bool_arg(3, true));
  int64_t rank = b.rank(x);
  Dims limit = b.dims(x);
  limit[dim] = k;
  auto first_k = [&](Value v) { return b.slice(v, Dims(rank, 0), limit, Dims(rank, 1)); };
  return {as_output(ctx, first_k(values), 0), as_output(ctx, first_k(indices), 1)};
}

// Order statistics from a stable sort (NaN sorts last): position `position` (i64, self's shape
// without `dim`) of the sorted values and of their original indices along dim.
std::pair<Value, Value> sorted_at(Builder& b, Value x, int64_t dim, Value position) {
  auto [values, indices] = sort_along(b, x, dim, false);
  int64_t rank = b.rank(x);
  Dims one = b.dims(x);
  one[dim] = 1;
  Value where = b.reshape(position, one);
  Builder::GatherDims g{{}, all_dims(rank), all_dims(rank), rank};
  Value points = coordinates_along(b, where, dim, rank);
  Dims reduced = b.dims(position);
  Value v = b.reshape(b.gather(values, points, g, Dims(rank, 1), one), reduced);
  Value i = b.reshape(b.gather(indices, points, g, Dims(rank, 1), one), reduced);
  return {v, i};
}

// How many non-NaN elements each slice along dim holds (i64).
Value count_numbers(Builder& b, Value x, int64_t dim) {
  Value numbers = is_floating(b.dtype(x)) ? b.compare(x, x, "EQ") : b.full(1, {DType::Bool, b.dims(x)});
  return sum_over(b, b.convert(numbers, DType::I64), {dim});
}

// kthvalue(self, k, dim, keepdim): the k-th smallest along dim and its index.
std::vector<Value> lower_kthvalue(Context& ctx) {
  Builder& b = ctx.b;
  Value x = at_least_1d(b, ctx.tensor(0));
  if (is_complex(b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  int64_t dim = wrap_dim(ctx.int_arg(2, -1), b.rank(x));
  int64_t k = ctx.int_arg(1, 1);
  if (numel(b.dims(x)) == 0 || k < 1 || k > b.dims(x)[dim]) throw Unsupported(ctx.op + ": arguments");
  Dims reduced = all_but(b.rank(x), dim);
  Dims reduced_dims;
  for (int64_t d : reduced) reduced_dims.push_back(b.dims(x)[d]);
  auto [v, i] = sorted_at(b, x, dim, b.full(static_cast<double>(k - 1), {DType::I64, reduced_dims}));
  return {as_output(ctx, v, 0), as_output(ctx, i, 1)};
}

// median / nanmedian, over all elements (self) -> value, or along dim (self, dim, keepdim) ->
// (values, indices). The lower of the two middle elements; median is NaN where a slice holds a
// NaN, nanmedian skips NaNs (NaN only for a slice of nothing else).
template <bool skip_nan>
std::vector<Value> lower_median(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (is_complex(b.dtype(x)) || b.dtype(x) == DType::Bool) throw Unsupported(ctx.op + ": dtype");
  bool along_dim = ctx.outputs.size() == 2;
  int64_t dim = 0;
  if (along_dim) {
    x = at_least_1d(b, x);
    dim = wrap_dim(ctx.int_arg(1, 0), b.rank(x));
  } else {
    x = b.reshape(x, {numel(b.dims(x))});
  }
  int64_t n = b.dims(x)[dim];
  if (n == 0) throw Unsupported(ctx.op + ": empty");
  Value numbers = count_numbers(b, x, dim);
  TensorType t = b.type(numbers);
  Value one = b.full(1, t), two = b.full(2, t);
  Value position;
  if (skip_nan) {
    position = b.div(b.max(b.sub(numbers, one), b.zeros(t)), two);
  } else {
    Value middle = b.full(static_cast<double>((n - 1) / 2), t);
    // The first NaN sits right after the numbers.
    position = b.select(b.compare(numbers, b.full(static_cast<double>(n), t), "LT"), numbers, middle);
  }
  auto [v, i] = sorted_at(b, x, dim, position);
  if (!along_dim) return {as_output(ctx, v)};
  return {as_output(ctx, v, 0), as_output(ctx, i, 1)};
}

}  // namespace

TPU_LOWERING("sort", lower_sort);
TPU_LOWERING("topk", lower_topk);
TPU_LOWERING("kthvalue", lower_kthvalue);
// mode(self, dim, keepdim): the most frequent value along `dim`, the smallest of equally frequent
// ones, and the last index it sits at, as CPU's kernel finds them from runs of sorted values
// (NaN counting as equal to NaN).
std::vector<Value> lower_mode(Context& ctx) {
  Builder& b = ctx.b;
  Value x = at_least_1d(b, ctx.tensor(0));
  if (is_complex(b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  int64_t dim = wrap_dim(ctx.int_arg(1, -1), b.rank(x));
  Dims dims = b.dims(x);
  int64_t n = dims[dim];
  if (n == 0) throw Unsupported(ctx.op + ": empty");  // CPU raises
  auto [sorted, positions] = sort_along(b, x, dim, false);
  Dims first = Dims(dims.size(), 0), before_last = dims, strides(dims.size(), 1);
  before_last[dim] = n - 1;
  Dims low(dims.size(), 0), high(dims.size(), 0), interior(dims.size(), 0);
  low[dim] = 1;
  Value previous = b.pad(b.slice(sorted, first, before_last, strides), b.constant(0, b.dtype(x)), low, high, interior);
  Value index = b.iota({DType::I64, dims}, dim);
  Value equal = b.compare(sorted, previous, "EQ");
  if (is_floating(b.dtype(x))) {
    equal = b.binary("stablehlo.or", equal, b.binary("stablehlo.and", is_nan(b, sorted), is_nan(b, previous)));
  }
  Value starts = b.binary("stablehlo.or", b.compare(index, b.zeros(b.type(index)), "EQ"), b.unary("stablehlo.not", equal));
  Value run_start = cumulative(b, b.select(starts, index, b.zeros(b.type(index))), dim, "stablehlo.maximum", 0);
  Value length = b.sub(index, run_start);  // within its run, so far; largest at the run's end
  Value longest = b.reduce(length, b.constant(0, DType::I64), {dim}, "stablehlo.maximum");
  Value at_longest = b.compare(length, expand_back(b, longest, dims, {dim}), "EQ");
  Value where = b.reduce(b.select(at_longest, index, b.full(static_cast<double>(n), b.type(index))),
                         b.constant(static_cast<double>(n), DType::I64), {dim}, "stablehlo.minimum");
  Value pick = keep_dims(b, b.convert(where, DType::I32), dims, {dim});
  return {as_output(ctx, take_along(b, sorted, dim, pick), 0), as_output(ctx, take_along(b, positions, dim, pick), 1)};
}

TPU_LOWERING("mode", lower_mode);
TPU_LOWERING("median", lower_median<false>);
TPU_LOWERING("nanmedian", lower_median<true>);

}  // namespace tpu::lowering
