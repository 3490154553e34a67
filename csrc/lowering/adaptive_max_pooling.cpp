// Adaptive max pooling (1-D through 3-D) and its backward op.
//
// Output position i along a dim of size n pooled to m covers [floor(i n / m), ceil((i + 1) n / m)).
// A max over a box is a max of maxes, so the op runs one spatial dim at a time, innermost first:
// each step keeps, per output position, the best value and the flat index (within the pooled
// plane) it came from. Ties keep the earlier position and a NaN beats everything, later NaNs
// winning, which together reproduce the row-major scan of PyTorch's kernel.
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

// [m, n] bool: which inputs output position i covers.
Value bins(Builder& b, int64_t n, int64_t m) {
  TensorType t{DType::I64, {m, n}};
  Value i = b.iota(t, 0), j = b.iota(t, 1);
  Value nn = b.full(static_cast<double>(n), t), mm = b.full(static_cast<double>(m), t);
  Value start = b.div(b.mul(i, nn), mm);                                           // floor(i n / m)
  Value one = b.full(1, t);
  Value end = b.div(b.sub(b.add(b.mul(b.add(i, one), nn), mm), one), mm);          // ceil((i+1) n / m)
  return b.binary("stablehlo.and", b.compare(j, start, "GE"), b.compare(j, end, "LT"));
}

// One step: values / flat indices [..., n, ...] at `dim` -> [..., m, ...].
std::pair<Value, Value> pool_dim(Builder& b, Value values, Value index, int64_t dim, int64_t m) {
  int64_t rank = b.rank(values);
  int64_t n = b.dims(values)[dim];
  DType dtype = b.dtype(values);
  // Move dim last, then pair every output position with every input position: [..., m, n].
  Dims perm = all_but(rank, dim);
  perm.push_back(dim);
  Value v = b.transpose(values, perm), ix = b.transpose(index, perm);
  Dims lead(b.dims(v).begin(), b.dims(v).end() - 1);
  Dims pairs = lead;
  pairs.push_back(m);
  pairs.push_back(n);
  int64_t r = static_cast<int64_t>(pairs.size());
  Dims spread = all_dims(r - 2);
  spread.push_back(r - 1);
  Value pv = b.broadcast_in_dim(v, pairs, spread), pi = b.broadcast_in_dim(ix, pairs, spread);
  Value inside = b.broadcast_in_dim(bins(b, n, m), pairs, {r - 2, r - 1});
  Value position = b.iota({DType::I64, pairs}, r - 1);
  Value outside = b.full(-1, {DType::I64, pairs});
  pv = b.select(inside, pv, b.full(lowest(dtype), {dtype, pairs}));
  Value where = b.select(inside, position, outside);
  bool floating = is_floating(dtype);
  auto body = [&](Builder& q, const std::vector<Value>& a) {
    Value best = a[0], best_pos = a[1], best_index = a[2];
    Value cand = a[3], cand_pos = a[4], cand_index = a[5];
    Value valid = q.compare(cand_pos, q.constant(0, DType::I64), "GE");
    Value none = q.compare(best_pos, q.constant(0, DType::I64), "LT");
    // Positions arrive in any order: "earlier" decides ties, "later" decides between NaNs.
    Value earlier = q.compare(cand_pos, best_pos, "LT");
    Value take = q.binary("stablehlo.or", q.compare(cand, best, "GT"),
                          q.binary("stablehlo.and", q.compare(cand, best, "EQ"), earlier));
    if (floating) {
      Value cand_nan = is_nan(q, cand), best_nan = is_nan(q, best);
      Value later = q.unary("stablehlo.not", earlier);
      take = q.select(best_nan, q.binary("stablehlo.and", cand_nan, later), q.binary("stablehlo.or", take, cand_nan));
    }
    take = q.binary("stablehlo.and", valid, q.binary("stablehlo.or", take, none));
    return std::vector<Value>{q.select(take, cand, best), q.select(take, cand_pos, best_pos),
                              q.select(take, cand_index, best_index)};
  };
  std::vector<Value> reduced = b.reduce({pv, where, pi},
                                        {b.constant(lowest(dtype), dtype), b.constant(-1, DType::I64),
                                         b.constant(0, DType::I64)},
                                        {r - 1}, body);
  // Back to the original dim order.
  Dims inverse(rank);
  for (int64_t k = 0; k < rank; ++k) inverse[perm[k]] = k;
  return {b.transpose(reduced[0], inverse), b.transpose(reduced[2], inverse)};
}

// adaptive_max_pool2d / 3d(self, output_size) -> (values, int64 indices into each plane)
std::vector<Value> lower_adaptive_max_pool(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  const Dims& out_sizes = ctx.arg(1).ints;
  int64_t spatial = static_cast<int64_t>(out_sizes.size());
  int64_t rank = b.rank(x);
  if (rank < spatial || b.dtype(x) == DType::Bool || is_complex(b.dtype(x))) throw Unsupported(ctx.op);
  if (numel(ctx.outputs.at(0).dims) == 0 || numel(b.dims(x)) == 0) {
    return {b.zeros(ctx.out_type(0)), b.zeros(ctx.out_type(1))};
  }
  // The flat index of each input position within its plane.
  Dims shape = b.dims(x);
  Value index = b.zeros({DType::I64, shape});
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= rank - spatial; --d) {
    Value term = b.mul(b.iota({DType::I64, shape}, d), b.full(static_cast<double>(stride), {DType::I64, shape}));
    index = b.add(index, term);
    stride *= shape[d];
  }
  Value values = x;
  for (int64_t s = spatial - 1; s >= 0; --s) {
    auto [v, i] = pool_dim(b, values, index, rank - spatial + s, out_sizes[s]);
    values = v;
    index = i;
  }
  return {as_output(ctx, values, 0), as_output(ctx, index, 1)};
}

// adaptive_max_pool2d_backward / 3d(grad_output, self, indices): each gradient goes to the input
// its output took the maximum from.
std::vector<Value> lower_adaptive_max_pool_backward(Context& ctx) {
  Builder& b = ctx.b;
  Value grad = ctx.tensor(0), indices = ctx.tensor(2);
  const Dims& in_dims = ctx.outputs.at(0).dims;
  int64_t rank = b.rank(grad);
  int64_t spatial = ctx.op.find("3d") != std::string::npos ? 3 : 2;
  if (rank < spatial || static_cast<int64_t>(in_dims.size()) != rank) throw Unsupported(ctx.op);
  if (numel(in_dims) == 0 || numel(b.dims(grad)) == 0) return {b.zeros(ctx.out_type())};
  int64_t lead = rank - spatial;
  Dims flat_grad(b.dims(grad).begin(), b.dims(grad).begin() + lead), flat_in = flat_grad;
  int64_t plane_out = 1, plane_in = 1;
  for (int64_t d = lead; d < rank; ++d) {
    plane_out *= b.dims(grad)[d];
    plane_in *= in_dims[d];
  }
  flat_grad.push_back(plane_out);
  flat_in.push_back(plane_in);
  DType acc = accumulation_type(b.dtype(grad));
  Value g = b.reshape(b.convert(grad, acc), flat_grad);
  Value where = b.reshape(b.convert(indices, DType::I64), flat_grad);
  int64_t r = static_cast<int64_t>(flat_grad.size());
  Dims column = flat_grad;
  column.push_back(1);
  std::vector<Value> coordinates;
  for (int64_t d = 0; d < r; ++d) {
    Value c = d == r - 1 ? where : b.iota({DType::I64, flat_grad}, d);
    coordinates.push_back(b.reshape(c, column));
  }
  Builder::ScatterDims s{{}, all_dims(r), all_dims(r), r};
  Value out = b.scatter(b.zeros({acc, flat_in}), b.concatenate(coordinates, r), g, s, "stablehlo.add");
  return {as_output(ctx, b.reshape(out, in_dims))};
}

}  // namespace

TPU_LOWERING("adaptive_max_pool2d", lower_adaptive_max_pool);
TPU_LOWERING("adaptive_max_pool3d", lower_adaptive_max_pool);
TPU_LOWERING("adaptive_max_pool2d_backward", lower_adaptive_max_pool_backward);
TPU_LOWERING("adaptive_max_pool3d_backward", lower_adaptive_max_pool_backward);

}  // namespace tpu::lowering
