// linalg_lstsq with CPU's default driver (gelsy): the minimum-norm least-squares solution, from
// the SVD (jacobi.cpp) with singular values at or below rcond times the largest treated as zero,
// and the rank that leaves. gelsy finds the same solution from a pivoted QR; the two can only
// disagree about the rank of a matrix with a singular value within rounding of the cut. The other
// drivers (gels, gelsd, gelss) return residuals whose size depends on the ranks found, which no
// meta function can know: they take the CPU (op_adapters.cpp declines them).
#include <algorithm>

#include "lowering/elementwise.h"
#include "lowering/helpers.h"
#include "lowering/matrices.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

std::vector<Value> lower_linalg_lstsq(Context& ctx) {
  Builder& b = ctx.b;
  if (ctx.has(3) && ctx.arg(3).s != "gelsy") throw Unsupported("linalg_lstsq: drivers other than gelsy");
  Value a = ctx.tensor(0), rhs = ctx.tensor(1);
  DType dtype = real_matrix_dtype(ctx, a);
  Dims a_dims = b.dims(a), rhs_dims = b.dims(rhs);
  int64_t m = a_dims[a_dims.size() - 2], n = a_dims.back(), k = std::min(m, n);
  Dims a_batch = matrix_batch(a_dims);
  int64_t batch = numel(a_batch);
  const Dims& solution_dims = ctx.outputs[0].dims;
  bool vector = solution_dims.size() + 1 == a_dims.size();  // B [..., m]: solution [..., n]
  if (vector) rhs_dims.push_back(1);
  int64_t columns = rhs_dims.back();
  if (k == 0 || batch == 0 || columns == 0 || numel(solution_dims) == 0) throw Unsupported("linalg_lstsq: empty");

  Svd svd = singular_value_decomposition(b, b.reshape(a, {batch, m, n}), true, false);
  // rcond: the given one, or CPU's default, the dtype's epsilon times max(m, n).
  double default_rcond = machine_epsilon(dtype) * static_cast<double>(std::max(m, n));
  Value rcond = ctx.has(2) ? b.convert(ctx.tensor(2), dtype) : b.constant(default_rcond, dtype);
  Value largest = b.reshape(b.slice(svd.s, {0, 0}, {batch, 1}, {1, 1}), {batch});
  Value cut = b.mul(b.broadcast_to(rcond, {batch}), largest);
  Value kept = b.compare(svd.s, b.broadcast_in_dim(cut, {batch, k}, {0}), "GT");
  Value rank = b.reduce(b.convert(kept, DType::I64), b.constant(0, DType::I64), {1}, "stablehlo.add");
  Value inverse = b.select(kept, b.div(b.full(1, b.type(svd.s)), svd.s), b.zeros(b.type(svd.s)));

  // pinv(A) = V diag(1/s) U^T, broadcast with B's batch.
  Value scaled_v = b.mul(svd.v, b.broadcast_in_dim(inverse, {batch, n, k}, {0, 2}));
  Value pinv = b.dot_general(scaled_v, svd.u, {0}, {0}, {2}, {2}, dtype);  // [batch, n, m]
  Dims out_batch(solution_dims.begin(), solution_dims.end() - (vector ? 1 : 2));
  int64_t out_count = numel(out_batch);
  Dims pinv_dims = a_batch;
  pinv_dims.insert(pinv_dims.end(), {n, m});
  Dims pinv_out = out_batch;
  pinv_out.insert(pinv_out.end(), {n, m});
  pinv = b.reshape(b.broadcast_to(b.reshape(pinv, pinv_dims), pinv_out), {out_count, n, m});
  Dims rhs_out = out_batch;
  rhs_out.insert(rhs_out.end(), {m, columns});
  Value right = b.reshape(b.broadcast_to(b.reshape(rhs, rhs_dims), rhs_out), {out_count, m, columns});
  Value solution = b.dot_general(pinv, b.convert(right, dtype), {0}, {0}, {2}, {1}, dtype);
  return {b.reshape(solution, solution_dims), b.zeros(ctx.out_type(1)), b.reshape(rank, ctx.outputs[2].dims),
          b.zeros(ctx.out_type(3))};
}

}  // namespace

TPU_LOWERING("linalg_lstsq", lower_linalg_lstsq);

}  // namespace tpu::lowering
