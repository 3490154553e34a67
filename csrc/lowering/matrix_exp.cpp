// linalg_matrix_exp (torch.matrix_exp, and orthogonal parametrizations' default map) by scaling
// and squaring: X = A / 2^s with ||X||_1 <= theta per matrix, exp(X) by its Taylor polynomial of
// degree 18 in Horner form, then s squarings. theta is the largest norm at which the first
// omitted term, theta^19 / 19!, is below the dtype's precision: 1 for float64 (8e-18), 3 for
// float32 (1e-8); every squaring doubles the relative rounding error, so fewer is better. The
// squarings loop as many times as the largest s of the batch, each matrix stopping at its own. Real dtypes; its backward is PyTorch's (the
// exponential of a block matrix), which comes back here.
#include <cmath>

#include "lowering/elementwise.h"
#include "lowering/helpers.h"
#include "lowering/matrices.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

constexpr int kTaylorDegree = 18;

std::vector<Value> lower_matrix_exp(Context& ctx) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(0);
  DType dtype = real_matrix_dtype(ctx, a);
  Dims dims = b.dims(a);
  int64_t n = dims.back(), batch = numel(matrix_batch(dims));
  if (n == 0 || batch == 0) return {b.zeros(ctx.out_type(0))};
  Value x = b.reshape(a, {batch, n, n});
  TensorType matrices{dtype, {batch, n, n}}, per_matrix{dtype, {batch}};
  auto matmul = [&](Builder& r, Value l, Value m) { return r.dot_general(l, m, {0}, {0}, {2}, {1}, dtype); };

  // s = ceil(log2(||A||_1 / theta)), at least 0; X = A / 2^s.
  double theta = dtype == DType::F64 ? 1.0 : 3.0;
  Value norm = b.reduce(b.reduce(op(b, "abs", x), b.constant(0, dtype), {1}, "stablehlo.add"), b.constant(0, dtype),
                        {1}, "stablehlo.maximum");
  Value log2 = b.div(op(b, "log", b.div(norm, b.full(theta, per_matrix))), b.full(std::log(2.0), per_matrix));
  Value exponent = b.max(op(b, "ceil", log2), b.zeros(per_matrix));
  Value finite = b.op1("stablehlo.is_finite", {exponent}, TensorType{DType::Bool, {batch}});
  exponent = b.select(finite, exponent, b.zeros(per_matrix));  // an inf or nan entry stays in X and spreads
  Value scale = op(b, "power", b.full(2, per_matrix), negate(b, exponent));
  x = b.mul(x, b.broadcast_in_dim(scale, {batch, n, n}, {0}));

  Value identity = identity_matrices(b, matrices);
  Value e = identity;
  for (int k = kTaylorDegree; k >= 1; --k) {
    e = b.add(identity, b.div(matmul(b, x, e), b.full(k, matrices)));
  }

  Value squarings = b.convert(exponent, DType::I32);
  Value most = b.reduce(squarings, b.constant(0, DType::I32), {0}, "stablehlo.maximum");
  TensorType counter{DType::I32, {}};
  std::vector<TensorType> state{matrices, b.type(squarings), counter, counter};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    return std::vector<Value>{r.compare(v[2], v[3], "LT")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    Value left = r.compare(r.broadcast_to(v[2], {batch}), v[1], "LT");
    Value squared = r.select(r.broadcast_in_dim(left, {batch, n, n}, {0}), matmul(r, v[0], v[0]), v[0]);
    return std::vector<Value>{squared, v[1], r.add(v[2], r.constant(1, DType::I32)), v[3]};
  });
  e = b.op("stablehlo.while", {e, squarings, b.constant(0, DType::I32), most}, state, "", {cond, body})[0];
  return {b.reshape(e, dims)};
}

}  // namespace

TPU_LOWERING("linalg_matrix_exp", lower_matrix_exp);

}  // namespace tpu::lowering
