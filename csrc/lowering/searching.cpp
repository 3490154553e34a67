// Searching and counting against a set of values: searchsorted, bucketize, isin and histc.
//
// A binary search's answer is a count: the position of x in a sorted sequence is how many of
// its entries fail `entry >= x` (left side) or `entry > x` (right side). Written that way (as
// PyTorch's own search loop compares, so NaNs land where they land on CPU) it is one broadcast
// compare and a sum, which suits XLA better than a data-dependent loop.
#include <string>
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;
using Kind = Arg::Kind;

// For each x (shape X) the count over the last dim of `sequence` ([..., M], whose leading dims
// match X's, or 1-D for any X): how many entries s have !(s >= x) (or !(s > x) when `right`).
Value positions_in(Builder& b, Value sequence, Value x, bool right) {
  DType common = promote_types(b.dtype(sequence), b.dtype(x));
  sequence = b.convert(sequence, common);
  x = b.convert(x, common);
  Dims xd = b.dims(x);
  int64_t m = b.dims(sequence).back();
  Dims pairs = xd;
  pairs.push_back(m);
  int64_t rank = static_cast<int64_t>(xd.size());
  Value spread_x = b.broadcast_in_dim(x, pairs, all_dims(rank));
  Value spread_s;
  if (b.rank(sequence) == 1) {
    spread_s = b.broadcast_in_dim(sequence, pairs, {rank});
  } else {
    Dims mapping = all_dims(rank - 1);
    mapping.push_back(rank);
    spread_s = b.broadcast_in_dim(sequence, pairs, mapping);
  }
  Value reached = b.compare(spread_s, spread_x, right ? "GT" : "GE");
  Value before = b.unary("stablehlo.not", reached);
  return sum_over(b, b.convert(before, DType::I64), {rank});
}

// searchsorted(sorted_sequence, self, out_int32, right, side, sorter)
std::vector<Value> lower_searchsorted(Context& ctx) {
  Builder& b = ctx.b;
  Value sequence = ctx.tensor(0), x = ctx.tensor(1);
  if (ctx.has(5) && numel(b.dims(sequence)) > 0) {
    // sequence[..., sorter[..., j]]: the sequence in sorted order.
    Value sorter = b.convert(ctx.tensor(5), DType::I64);
    Dims shape = b.dims(sorter);
    int64_t rank = static_cast<int64_t>(shape.size());
    Dims column = shape;
    column.push_back(1);
    std::vector<Value> coordinates;
    for (int64_t d = 0; d < rank; ++d) {
      Value c = d == rank - 1 ? sorter : b.iota({DType::I64, shape}, d);
      coordinates.push_back(b.reshape(c, column));
    }
    Builder::GatherDims g{{}, all_dims(rank), all_dims(rank), rank};
    sequence = b.gather(sequence, b.concatenate(coordinates, rank), g, Dims(rank, 1), shape);
  }
  if (is_complex(b.dtype(sequence)) || b.rank(sequence) == 0) throw Unsupported(ctx.op + ": arguments");
  bool right = ctx.bool_arg(3, false);
  if (ctx.has(4) && ctx.arg(4).kind == Kind::String) right = ctx.arg(4).s == "right";
  if (b.rank(sequence) > 1 && b.rank(x) != b.rank(sequence)) throw Unsupported(ctx.op + ": shapes");
  if (b.dims(sequence).back() == 0) return {b.zeros(ctx.out_type())};
  return {as_output(ctx, positions_in(b, sequence, x, right))};
}

// bucketize(self, boundaries, out_int32, right): searchsorted with the arguments swapped.
std::vector<Value> lower_bucketize(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0), boundaries = ctx.tensor(1);
  if (b.rank(boundaries) != 1) throw Unsupported(ctx.op + ": boundaries must be 1-D");
  if (b.dims(boundaries)[0] == 0) return {b.zeros(ctx.out_type())};
  return {as_output(ctx, positions_in(b, boundaries, x, ctx.bool_arg(3, false)))};
}

// isin(elements, test_elements, assume_unique, invert): either side may be a number.
std::vector<Value> lower_isin(Context& ctx) {
  Builder& b = ctx.b;
  Value elements = ctx.tensor(0), tests = ctx.tensor(1);
  bool invert = ctx.bool_arg(3, false);
  DType common = promote_types(b.dtype(elements), b.dtype(tests));
  if (is_complex(common)) throw Unsupported(ctx.op + ": complex");
  int64_t n = numel(b.dims(tests));
  const Dims& out = ctx.outputs.at(0).dims;
  if (n == 0 || numel(out) == 0) return {b.full(invert ? 1 : 0, ctx.out_type())};
  Value flat = b.reshape(b.convert(tests, common), {n});
  Value e = b.reshape(b.convert(elements, common), out);
  Dims pairs = out;
  pairs.push_back(n);
  int64_t rank = static_cast<int64_t>(out.size());
  Value equal = b.compare(b.broadcast_in_dim(e, pairs, all_dims(rank)), b.broadcast_in_dim(flat, pairs, {rank}), "EQ");
  Value found = b.reduce(equal, b.constant(0, DType::Bool), {rank}, "stablehlo.or");
  if (invert) found = b.unary("stablehlo.not", found);
  return {as_output(ctx, found)};
}

// histc(self, bins, min, max): counts of self over `bins` equal bins of [min, max]; min == max
// takes the data's range (widened by 1 each way when that is empty too). Values outside the
// range and NaNs are not counted; max itself falls in the last bin.
std::vector<Value> lower_histc(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType dtype = b.dtype(x);
  if (is_complex(dtype) || dtype == DType::Bool) throw Unsupported(ctx.op + ": dtype");
  int64_t bins = ctx.int_arg(1, 100);
  // Integer inputs (mixture-of-experts layers count tokens per expert with histc over integer
  // ids on every device but the CPU) bin in float64, exact for ids of any practical size.
  DType acc = is_floating(dtype) ? accumulation_type(dtype) : DType::F64;
  int64_t n = numel(b.dims(x));
  Value flat = b.convert(b.reshape(x, {n}), acc);
  Value lo = b.convert(ctx.has(2) ? b.reshape(ctx.tensor(2), {}) : b.constant(0, acc), acc);
  Value hi = b.convert(ctx.has(3) ? b.reshape(ctx.tensor(3), {}) : b.constant(0, acc), acc);
  // PyTorch reads min and max as the tensor's dtype.
  lo = b.convert(b.convert(lo, dtype), acc);
  hi = b.convert(b.convert(hi, dtype), acc);
  if (n > 0) {
    Value data_lo = b.reduce(flat, b.constant(highest(acc), acc), {0}, "stablehlo.minimum");
    Value data_hi = b.reduce(flat, b.constant(lowest(acc), acc), {0}, "stablehlo.maximum");
    Value empty = b.compare(lo, hi, "EQ");
    lo = b.select(empty, data_lo, lo);
    hi = b.select(empty, data_hi, hi);
  }
  Value still_empty = b.compare(lo, hi, "EQ");
  Value one = b.constant(1, acc);
  lo = b.select(still_empty, b.sub(lo, one), lo);
  hi = b.select(still_empty, b.add(hi, one), hi);
  TensorType result{acc, {bins}};
  if (n == 0) return {as_output(ctx, b.zeros(result))};
  TensorType ft{acc, {n}};
  Value lo_n = b.broadcast_to(lo, {n}), hi_n = b.broadcast_to(hi, {n});
  Value scaled = b.mul(b.div(b.sub(flat, lo_n), b.sub(hi_n, lo_n)), b.full(static_cast<double>(bins), ft));
  Value bin = b.convert(scaled, DType::I64);
  TensorType it{DType::I64, {n}};
  bin = b.select(b.compare(bin, b.full(static_cast<double>(bins), it), "EQ"),
                 b.full(static_cast<double>(bins - 1), it), bin);
  Value inside = b.binary("stablehlo.and", b.compare(flat, lo_n, "GE"), b.compare(flat, hi_n, "LE"));
  Value weight = b.convert(inside, acc);  // NaN compares false: not counted
  bin = b.select(inside, bin, b.zeros(it));
  Builder::ScatterDims s{{}, {0}, {0}, 1};
  Value counts = b.scatter(b.zeros(result), b.reshape(bin, {n, 1}), weight, s, "stablehlo.add");
  return {as_output(ctx, counts)};
}

}  // namespace

TPU_LOWERING("searchsorted", lower_searchsorted);
TPU_LOWERING("bucketize", lower_bucketize);
TPU_LOWERING("isin", lower_isin);
TPU_LOWERING("histc", lower_histc);

}  // namespace tpu::lowering
