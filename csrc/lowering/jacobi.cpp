// Symmetric eigendecomposition (_linalg_eigh: linalg.eigh, linalg.eigvalsh) and singular value
// decomposition (_linalg_svd: linalg.svd, linalg.svdvals, svd, and what builds on them: pinv,
// matrix_rank, cond, matrix_norm's 2 and nuclear norms) by Jacobi rotations. Real dtypes.
//
// StableHLO has neither decomposition. Jacobi's method is the one that maps onto array programs:
// in the round-robin (Brent-Luk) order, each round rotates n/2 disjoint index pairs at once, so a
// sweep over all pairs is n - 1 rounds of slices, elementwise updates and concatenations, batched,
// and sweeps repeat until the off-diagonal mass is below the dtype's precision. Eigh is the
// two-sided method (each rotation zeroes a_pq of the symmetric matrix); SVD is the one-sided
// method of Hestenes (each rotation makes two columns orthogonal; the column norms are the
// singular values, the normalized columns U, the accumulated rotations V), which keeps small
// singular values to high relative accuracy. An odd n is padded with a zero row and column,
// which no rotation ever touches.
//
// Eigenvectors and singular vectors are unique up to sign (LAPACK's choice is an accident of its
// algorithm); everything else matches CPU to rounding. A rank-deficient matrix's U has zero
// columns where its singular values are exactly zero (LAPACK completes them to an orthonormal
// basis); U S Vh is still A.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "lowering/elementwise.h"
#include "lowering/helpers.h"
#include "lowering/matrices.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

constexpr int kMaxSweeps = 40;

// The round-robin tournament is played on positions, not indices: pair i of a round is
// (position i, position n - 1 - i), and between rounds every position but the first moves on by
// one (the circle method). Moving the matrix itself (slices, a reverse, concatenations) instead of
// gathering index pairs keeps each round to cheap data movement; the columns of the accumulated
// rotation W move with it, so A = W X W^T (eigh) or A W = X (SVD) holds throughout and each
// final position's vector is W's column there.

// Along `dim` of x: the first n/2 positions, and the last n/2 reversed (pair i's partners).
std::pair<Value, Value> halves(Builder& b, Value x, int64_t dim) {
  Dims dims = b.dims(x), start(dims.size(), 0), middle = dims, strides(dims.size(), 1);
  int64_t n = dims[dim];
  middle[dim] = n / 2;
  Dims second = start;
  second[dim] = n / 2;
  return {b.slice(x, start, middle, strides), b.reverse(b.slice(x, second, dims, strides), {dim})};
}

// x ([B, r, c]) with each pair's rotation applied along `dim` (2: columns, 1: rows):
// x_i <- c x_i - s x_j, x_j <- s x_i + c x_j, for c, s of shape [B, n/2].
Value rotate(Builder& b, Value x, int64_t dim, Value c, Value s) {
  auto [top, bottom] = halves(b, x, dim);
  const Dims& dims = b.dims(top);
  Dims mapping{0, dim};
  Value cb = b.broadcast_in_dim(c, dims, mapping), sb = b.broadcast_in_dim(s, dims, mapping);
  Value new_top = b.sub(b.mul(cb, top), b.mul(sb, bottom));
  Value new_bottom = b.add(b.mul(sb, top), b.mul(cb, bottom));
  return b.concatenate({new_top, b.reverse(new_bottom, {dim})}, dim);
}

// The circle method's move along `dim`: position 0 stays, the last comes to 1, the rest shift up.
Value next_round(Builder& b, Value x, int64_t dim) {
  Dims dims = b.dims(x), zero(dims.size(), 0), strides(dims.size(), 1);
  int64_t n = dims[dim];
  if (n <= 2) return x;
  auto part = [&](int64_t from, int64_t to) {
    Dims start = zero, limit = dims;
    start[dim] = from;
    limit[dim] = to;
    return b.slice(x, start, limit, strides);
  };
  return b.concatenate({part(0, 1), part(n - 1, n), part(1, n - 1)}, dim);
}

// The rotation (c, s) that zeroes the coupling of a pair: t = tan(theta) is the smaller root of
// t^2 + 2 tau t - 1 = 0, tau = (right - left) / (2 coupling). No rotation where `skip`.
std::pair<Value, Value> rotation(Builder& b, Value left, Value right, Value coupling, Value skip) {
  Value one = splat(b, 1, left);
  Value tau = b.div(b.sub(right, left), b.add(coupling, coupling));
  Value sign = b.select(is_negative(b, tau), splat(b, -1, tau), one);
  Value a = op(b, "abs", tau);
  Value t = b.div(sign, b.add(a, op(b, "sqrt", b.add(one, b.mul(a, a)))));
  t = b.select(op(b, "or", skip, is_nan(b, t)), splat(b, 0, t), t);
  Value c = op(b, "rsqrt", b.add(one, b.mul(t, t)));
  return {c, b.mul(t, c)};
}

Value diagonal_of(Builder& b, Value x) {  // [B, n, n] -> [B, n]
  const Dims& dims = b.dims(x);
  TensorType index{DType::I32, dims};
  Value on = b.compare(b.iota(index, 1), b.iota(index, 2), "EQ");
  return b.reduce(b.select(on, x, b.zeros(b.type(x))), b.constant(0, b.dtype(x)), {2}, "stablehlo.add");
}

// Sweeps of rounds until `done` (computed after each sweep from the state) or kMaxSweeps. The
// state's first two values are the matrices rotated; `round` rotates them for one round.
using Round = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;
using Done = std::function<Value(Builder&, const std::vector<Value>&)>;

std::vector<Value> sweep_until(Builder& b, std::vector<Value> state, int64_t n, const Round& round, const Done& done) {
  std::vector<TensorType> types;
  for (Value v : state) types.push_back(b.type(v));
  TensorType counter{DType::I32, {}}, flag{DType::Bool, {}};
  std::vector<TensorType> inner = types;
  inner.push_back(counter);
  std::vector<TensorType> outer = types;
  outer.push_back(counter);
  outer.push_back(flag);
  size_t k = state.size();
  hlo::RegionRef outer_cond = b.region(outer, [&](Builder& r, const std::vector<Value>& v) {
    Value more = r.compare(v[k], r.constant(kMaxSweeps, DType::I32), "LT");
    return std::vector<Value>{op(r, "and", more, op(r, "not", v[k + 1]))};
  });
  hlo::RegionRef outer_body = b.region(outer, [&](Builder& r, const std::vector<Value>& v) {
    hlo::RegionRef cond = r.region(inner, [&](Builder& q, const std::vector<Value>& w) {
      return std::vector<Value>{q.compare(w[k], q.constant(static_cast<double>(n - 1), DType::I32), "LT")};
    });
    hlo::RegionRef body = r.region(inner, [&](Builder& q, const std::vector<Value>& w) {
      std::vector<Value> rotated = round(q, std::vector<Value>(w.begin(), w.begin() + k));
      rotated.push_back(q.add(w[k], q.constant(1, DType::I32)));
      return rotated;
    });
    std::vector<Value> start(v.begin(), v.begin() + k);
    start.push_back(r.constant(0, DType::I32));
    std::vector<Value> swept = r.op("stablehlo.while", start, inner, "", {cond, body});
    swept.pop_back();
    Value finished = done(r, swept);
    swept.push_back(r.add(v[k], r.constant(1, DType::I32)));
    swept.push_back(finished);
    return swept;
  });
  state.push_back(b.constant(0, DType::I32));
  state.push_back(b.constant(0, DType::Bool));
  std::vector<Value> result = b.op("stablehlo.while", state, outer, "", {outer_cond, outer_body});
  result.resize(k);
  return result;
}

// Which columns ([B, c], bool) of the accumulated rotation w ([B, r, c]) belong to the padding
// index `dummy` (its row there is nonzero: the padding is never rotated with a real index).
Value dummy_columns(Builder& b, Value w, int64_t dummy) {
  const Dims& dims = b.dims(w);
  Value row = b.reshape(b.slice(w, {0, dummy, 0}, {dims[0], dummy + 1, dims[2]}, {1, 1, 1}), {dims[0], dims[2]});
  return b.compare(row, b.zeros(b.type(row)), "NE");
}

// [B, r, c] padded with zeros to [B, rows, cols].
Value padded(Builder& b, Value x, int64_t rows, int64_t cols) {
  const Dims& dims = b.dims(x);
  if (dims[1] == rows && dims[2] == cols) return x;
  return b.pad(x, b.constant(0, b.dtype(x)), {0, 0, 0}, {0, rows - dims[1], cols - dims[2]}, {0, 0, 0});
}

// Columns of x ([B, r, c]) in the order of `positions` ([B, c], i64).
Value columns_in_order(Builder& b, Value x, Value positions) {
  const Dims& dims = b.dims(x);
  return take_along(b, x, 2, b.broadcast_in_dim(b.convert(positions, DType::I32), dims, {0, 2}));
}

std::vector<Value> empty_results(Context& ctx) {
  std::vector<Value> out;
  for (size_t i = 0; i < ctx.outputs.size(); ++i) out.push_back(ctx.b.zeros(ctx.out_type(i)));
  return out;
}

// The matrix operand: its dtype, its dims [..., m, n] and how many matrices it holds.
struct Operand {
  Value a;
  DType dtype;
  Dims dims;
  int64_t batch;
};

Operand matrix_operand(Context& ctx) {
  Value a = ctx.tensor(0);
  DType dtype = real_matrix_dtype(ctx, a);
  Dims dims = ctx.b.dims(a);
  return {a, dtype, dims, numel(matrix_batch(dims))};
}

std::vector<Value> lower_linalg_eigh(Context& ctx) {
  Builder& b = ctx.b;
  const Operand operand = matrix_operand(ctx);
  const DType dtype = operand.dtype;  // a plain variable: the lambdas below capture it
  const Dims& dims = operand.dims;
  int64_t n = dims.back(), batch = operand.batch;
  Value a = operand.a;
  if (n == 0 || batch == 0) return empty_results(ctx);
  bool lower = ctx.arg(1).is_none() || ctx.arg(1).s != "U";
  bool vectors = ctx.bool_arg(2, true);
  Value x = b.reshape(a, {batch, n, n});
  TensorType index{DType::I32, {batch, n, n}};
  Value kept = b.compare(b.iota(index, 1), b.iota(index, 2), lower ? "GE" : "LE");
  x = b.select(kept, x, b.transpose(x, {0, 2, 1}));  // the triangle UPLO names, mirrored
  int64_t even = n + n % 2;
  x = padded(b, x, even, even);
  Value v = identity_matrices(b, {dtype, {batch, even, even}});
  double eps = machine_epsilon(dtype);

  Round round = [&](Builder& r, const std::vector<Value>& s) {
    Value m = s[0];
    auto [left, right] = halves(r, diagonal_of(r, m), 1);
    // Pair i's coupling m[i, n - 1 - i]: the anti-diagonal of the top-right block.
    const Dims& dims3 = r.dims(m);
    TensorType index{DType::I32, dims3};
    Value anti = r.compare(r.add(r.iota(index, 1), r.iota(index, 2)), r.full(static_cast<double>(even - 1), index), "EQ");
    Value upper_rows = r.slice(r.select(anti, m, r.zeros(r.type(m))), {0, 0, 0}, {dims3[0], even / 2, even}, {1, 1, 1});
    Value coupling = r.reduce(upper_rows, r.constant(0, dtype), {2}, "stablehlo.add");
    auto [c, sn] = rotation(r, left, right, coupling, r.compare(coupling, r.zeros(r.type(coupling)), "EQ"));
    m = rotate(r, rotate(r, m, 2, c, sn), 1, c, sn);
    return std::vector<Value>{next_round(r, next_round(r, m, 1), 2), next_round(r, rotate(r, s[1], 2, c, sn), 2)};
  };
  Done done = [&](Builder& r, const std::vector<Value>& s) {
    // Each matrix's off-diagonal mass below eps^2 of its own.
    Value squares = r.mul(s[0], s[0]);
    TensorType index{DType::I32, r.dims(squares)};
    Value off_diagonal = r.compare(r.iota(index, 1), r.iota(index, 2), "NE");
    Value total = r.reduce(squares, r.constant(0, dtype), {1, 2}, "stablehlo.add");
    Value off = r.reduce(r.select(off_diagonal, squares, r.zeros(r.type(squares))), r.constant(0, dtype), {1, 2},
                         "stablehlo.add");
    Value each = r.compare(off, r.mul(total, splat(r, eps * eps * static_cast<double>(even), total)), "LE");
    return r.reduce(each, r.constant(1, DType::Bool), {0}, "stablehlo.and");
  };
  std::vector<Value> result = sweep_until(b, {x, v}, even, round, done);
  Value values = diagonal_of(b, result[0]);
  if (even != n) {  // the padding's eigenvector is e_n: its value goes last, then is cut
    values = b.select(dummy_columns(b, result[1], n), b.full(std::numeric_limits<double>::infinity(), b.type(values)),
                      values);
  }
  auto [sorted, positions] = sort_along(b, values, 1, false);
  Dims value_dims(dims.begin(), dims.end() - 1);
  std::vector<Value> out{b.reshape(b.slice(sorted, {0, 0}, {batch, n}, {1, 1}), value_dims)};
  if (!vectors) {
    out.push_back(b.zeros(ctx.out_type(1)));
    return out;
  }
  Value vecs = b.slice(columns_in_order(b, result[1], positions), {0, 0, 0}, {batch, n, n}, {1, 1, 1});
  out.push_back(b.reshape(vecs, dims));
  return out;
}

}  // namespace

// One-sided Jacobi on the tall one of x and x^T (its columns are the fewer).
Svd singular_value_decomposition(Builder& b, Value x, bool vectors, bool full) {
  const Dims dims = b.dims(x);
  const DType dtype = b.dtype(x);  // a plain variable: the lambdas below capture it
  int64_t batch = dims[0], m = dims[1], n = dims[2], k = std::min(m, n);
  bool transposed = m < n;
  if (transposed) x = b.transpose(x, {0, 2, 1});
  int64_t rows = std::max(m, n), even = k + k % 2;
  x = padded(b, x, rows, even);
  Value v = identity_matrices(b, {dtype, {batch, even, even}});
  double eps = machine_epsilon(dtype);

  Round round = [&](Builder& r, const std::vector<Value>& s) {
    auto [top, bottom] = halves(r, s[0], 2);
    auto column_sum = [&](Value y) { return r.reduce(y, r.constant(0, dtype), {1}, "stablehlo.add"); };
    Value alpha = column_sum(r.mul(top, top)), beta = column_sum(r.mul(bottom, bottom));
    Value gamma = column_sum(r.mul(top, bottom));
    Value threshold = r.mul(op(r, "sqrt", r.mul(alpha, beta)), splat(r, eps, alpha));
    auto [c, sn] = rotation(r, alpha, beta, gamma, r.compare(op(r, "abs", gamma), threshold, "LE"));
    return std::vector<Value>{next_round(r, rotate(r, s[0], 2, c, sn), 2), next_round(r, rotate(r, s[1], 2, c, sn), 2)};
  };
  // Done when every pair of columns is orthogonal to sqrt(rows) eps (LAPACK's gesvj tolerance),
  // read from the Gram matrix once per sweep.
  Done done = [&](Builder& r, const std::vector<Value>& s) {
    Value gram = r.dot_general(s[0], s[0], {0}, {0}, {1}, {1}, dtype);
    Value d = diagonal_of(r, gram);
    const Dims& g = r.dims(gram);
    Value scale = op(r, "sqrt", r.mul(r.broadcast_in_dim(d, g, {0, 1}), r.broadcast_in_dim(d, g, {0, 2})));
    TensorType index{DType::I32, g};
    Value off = op(r, "and", r.compare(r.iota(index, 1), r.iota(index, 2), "NE"),
                   r.compare(scale, r.zeros(r.type(scale)), "GT"));
    Value cosine = r.select(off, r.div(op(r, "abs", gram), scale), r.zeros(r.type(gram)));
    Value worst = r.reduce(cosine, r.constant(0, dtype), {0, 1, 2}, "stablehlo.maximum");
    return r.compare(worst, r.constant(eps * std::sqrt(static_cast<double>(rows)), dtype), "LE");
  };
  std::vector<Value> result = sweep_until(b, {x, v}, even, round, done);
  Value columns = result[0];
  Value sigma = op(b, "sqrt", b.reduce(b.mul(columns, columns), b.constant(0, dtype), {1}, "stablehlo.add"));
  Value order_key = sigma;
  if (even != k) {  // the padding's zero column goes last, then is cut
    order_key = b.select(dummy_columns(b, result[1], k), b.full(-1, b.type(sigma)), sigma);
  }
  auto [sorted_key, positions] = sort_along(b, order_key, 1, true);
  Svd svd;
  svd.s = b.slice(take_along(b, sigma, 1, b.convert(positions, DType::I32)), {0, 0}, {batch, k}, {1, 1});
  if (!vectors) return svd;
  const Dims& column_dims = b.dims(columns);
  Value nonzero = b.compare(sigma, b.zeros(b.type(sigma)), "GT");
  Value safe = b.select(nonzero, sigma, b.full(1, b.type(sigma)));
  Value normalized = b.select(b.broadcast_in_dim(nonzero, column_dims, {0, 2}),
                              b.div(columns, b.broadcast_in_dim(safe, column_dims, {0, 2})), b.zeros(b.type(columns)));
  Value left = b.slice(columns_in_order(b, normalized, positions), {0, 0, 0}, {batch, rows, k}, {1, 1, 1});
  Value right = b.slice(columns_in_order(b, result[1], positions), {0, 0, 0}, {batch, k, k}, {1, 1, 1});
  // x = left S right^T (rows x k, k x k), or its transpose when the columns were x^T's. The
  // rotations keep `right` orthonormal; `left`'s columns are normalized columns, zero where a
  // singular value is: those (LAPACK completes them) and full_matrices' extra columns come from
  // the complete Q of left's Householder QR.
  Value q = complete_q(b, left);
  Value zero_sigma = b.compare(svd.s, b.zeros({dtype, {batch, k}}), "EQ");
  left = b.select(b.broadcast_in_dim(zero_sigma, {batch, rows, k}, {0, 2}),
                  b.slice(q, {0, 0, 0}, {batch, rows, k}, {1, 1, 1}), left);
  if (full && rows > k) left = b.concatenate({left, b.slice(q, {0, 0, k}, {batch, rows, rows}, {1, 1, 1})}, 2);
  svd.u = transposed ? right : left;
  svd.v = transposed ? left : right;
  return svd;
}

namespace {

std::vector<Value> lower_linalg_svd(Context& ctx) {
  Builder& b = ctx.b;
  const Operand operand = matrix_operand(ctx);
  const Dims& dims = operand.dims;
  int64_t m = dims[dims.size() - 2], n = dims.back(), k = std::min(m, n), batch = operand.batch;
  bool full = ctx.bool_arg(1, true), vectors = ctx.bool_arg(2, true);
  if (k == 0 || batch == 0) {  // full_matrices' U and Vh are then identities, as LAPACK's
    std::vector<Value> out = empty_results(ctx);
    for (size_t i : {size_t{0}, size_t{2}}) {
      const Dims& d = ctx.outputs[i].dims;
      if (batch > 0 && d.size() >= 2 && d.back() == d[d.size() - 2] && d.back() > 0) {
        out[i] = b.reshape(identity_matrices(b, {operand.dtype, {batch, d.back(), d.back()}}), d);
      }
    }
    return out;
  }
  Svd svd = singular_value_decomposition(b, b.reshape(operand.a, {batch, m, n}), vectors, full);
  Value s_out = b.reshape(svd.s, ctx.outputs[1].dims);
  if (!vectors) return {b.zeros(ctx.out_type(0)), s_out, b.zeros(ctx.out_type(2))};
  return {b.reshape(svd.u, ctx.outputs[0].dims), s_out, b.reshape(swap_last_two(b, svd.v), ctx.outputs[2].dims)};
}

}  // namespace

TPU_LOWERING("_linalg_eigh", lower_linalg_eigh);
TPU_LOWERING("_linalg_svd", lower_linalg_svd);

}  // namespace tpu::lowering
