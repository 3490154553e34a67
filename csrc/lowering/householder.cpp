// QR by Householder reflections, as LAPACK's geqrf and orgqr compute it: geqrf,
// linalg_householder_product (orgqr), ormqr and linalg_qr in its three modes, batched, real dtypes. Their
// backward formulas are PyTorch's, in terms of ops that have lowerings.
//
// The factorization is a while loop over the columns whose steps are masked whole-matrix updates
// (as in lu.cpp), so one program serves every batch. Each reflection is LAPACK's dlarfg: beta =
// -sign(alpha) |(alpha, x)|, tau = (beta - alpha) / beta, v = x / (alpha - beta) below a unit
// diagonal, and none (tau = 0) where x is already zero; so R's signs and the stored reflectors are
// LAPACK's, and Q and R agree with CPU's to rounding.
#include <algorithm>

#include "lowering/elementwise.h"
#include "lowering/helpers.h"
#include "lowering/matrices.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

// The Euclidean norm over `dim` of x, scaled by its largest magnitude so that squares cannot
// overflow or underflow (dnrm2).
Value scaled_norm(Builder& b, Value x, int64_t dim) {
  DType dtype = b.dtype(x);
  Value magnitude = op(b, "abs", x);
  Value largest = b.reduce(magnitude, b.constant(0, dtype), {dim}, "stablehlo.maximum");
  Value safe = b.select(b.compare(largest, b.zeros(b.type(largest)), "GT"), largest, b.full(1, b.type(largest)));
  Dims mapping = all_but(b.rank(x), dim);
  Value ratio = b.div(x, b.broadcast_in_dim(safe, b.dims(x), mapping));
  Value sum = b.reduce(b.mul(ratio, ratio), b.constant(0, dtype), {dim}, "stablehlo.add");
  return b.mul(largest, op(b, "sqrt", sum));
}

// The reflector of column j ([B, m]): v (unit at j, zero above), tau and beta, all per batch.
struct Reflector {
  Value v, tau, beta;
};

Reflector reflector(Builder& b, Value column, Value j) {
  const Dims& dims = b.dims(column);
  TensorType rows_type{DType::I32, dims};
  Value rows = b.iota(rows_type, 1), j_all = b.broadcast_to(j, dims);
  Value at = b.compare(rows, j_all, "EQ"), below = b.compare(rows, j_all, "GT");
  Value zeros = b.zeros(b.type(column));
  Value alpha = b.reduce(b.select(at, column, zeros), b.constant(0, b.dtype(column)), {1}, "stablehlo.add");
  Value x = b.select(below, column, zeros);
  Value x_norm = scaled_norm(b, x, 1);
  Value norm = scaled_norm(b, b.concatenate({b.reshape(alpha, {dims[0], 1}), b.reshape(x_norm, {dims[0], 1})}, 1), 1);
  Value trivial = b.compare(x_norm, b.zeros(b.type(x_norm)), "EQ");
  Value beta = b.select(is_negative(b, alpha), norm, negate(b, norm));
  beta = b.select(trivial, alpha, beta);
  Value safe_beta = b.select(trivial, b.full(1, b.type(beta)), beta);
  Value tau = b.select(trivial, b.zeros(b.type(beta)), b.div(b.sub(beta, alpha), safe_beta));
  Value denominator = b.select(trivial, b.full(1, b.type(beta)), b.sub(alpha, beta));
  Value v = b.div(x, b.broadcast_in_dim(denominator, dims, {0}));
  v = b.select(at, b.full(1, b.type(column)), v);
  return {v, tau, beta};
}

// a - tau v (v^T a) for a [B, m, n], v [B, m], tau [B], on the columns `columns` selects.
Value reflect(Builder& b, Value a, Value v, Value tau, Value columns) {
  const Dims& dims = b.dims(a);
  DType dtype = b.dtype(a);
  Value w = b.dot_general(v, a, {0}, {0}, {1}, {1}, dtype);  // [B, n]
  Value update = b.mul(b.broadcast_in_dim(b.mul(b.broadcast_in_dim(tau, b.dims(w), {0}), w), dims, {0, 2}),
                       b.broadcast_in_dim(v, dims, {0, 1}));
  return b.select(columns, b.sub(a, update), a);
}

Value column_of(Builder& b, Value a, Value j) {
  const Dims& dims = b.dims(a);
  Value zero = b.constant(0, DType::I32);
  return b.reshape(b.dynamic_slice(a, {zero, zero, j}, {dims[0], dims[1], 1}), {dims[0], dims[1]});
}

// geqrf of a [B, m, n]: R above the diagonal, the reflectors below, and tau [B, min(m, n)].
std::pair<Value, Value> householder_qr(Builder& b, Value a) {
  Dims dims = b.dims(a);
  int64_t batch = dims[0], steps = std::min(dims[1], dims[2]);
  TensorType tau_type{b.dtype(a), {batch, steps}}, counter{DType::I32, {}};
  std::vector<TensorType> state{b.type(a), tau_type, counter};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    return std::vector<Value>{r.compare(v[2], r.constant(static_cast<double>(steps), DType::I32), "LT")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    Value m = v[0], j = v[2];
    Reflector h = reflector(r, column_of(r, m, j), j);
    TensorType index{DType::I32, dims};
    Value column = r.iota(index, 2), j_all = r.broadcast_to(j, dims);
    m = reflect(r, m, h.v, h.tau, r.compare(column, j_all, "GT"));
    // Column j becomes beta on the diagonal and the reflector below it.
    Value rows = r.iota(index, 1);
    Value stored = r.select(r.compare(rows, j_all, "EQ"), r.broadcast_in_dim(h.beta, dims, {0}),
                            r.broadcast_in_dim(h.v, dims, {0, 1}));
    m = r.select(op(r, "and", r.compare(column, j_all, "EQ"), r.compare(rows, j_all, "GE")), stored, m);
    Value zero = r.constant(0, DType::I32);
    Value taus = r.dynamic_update_slice(v[1], r.reshape(h.tau, {batch, 1}), {zero, j});
    return std::vector<Value>{m, taus, r.add(j, r.constant(1, DType::I32))};
  });
  std::vector<Value> loop = b.op("stablehlo.while", {a, b.zeros(tau_type), b.constant(0, DType::I32)}, state, "",
                                 {cond, body});
  return {loop[0], loop[1]};
}

// orgqr: the first `columns` columns of H_0 ... H_{k-1}, from the reflectors below the diagonal of
// v [B, m, >= k] and tau [B, k], applied to the identity's columns last reflector first.
Value householder_product(Builder& b, Value v, Value tau, int64_t columns) {
  Dims dims = b.dims(v);
  int64_t batch = dims[0], m = dims[1], steps = b.dims(tau)[1];
  DType dtype = b.dtype(v);
  TensorType q_type{dtype, {batch, m, columns}}, counter{DType::I32, {}};
  Value q = b.slice(identity_matrices(b, {dtype, {batch, m, m}}), {0, 0, 0}, {batch, m, columns}, {1, 1, 1});
  std::vector<TensorType> state{q_type, b.type(v), b.type(tau), counter};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    return std::vector<Value>{r.compare(s[3], r.constant(0, DType::I32), "GE")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    Value j = s[3], column = column_of(r, s[1], j);
    const Dims& column_dims = r.dims(column);
    TensorType rows_type{DType::I32, column_dims};
    Value rows = r.iota(rows_type, 1), j_all = r.broadcast_to(j, column_dims);
    Value reflector_v = r.select(r.compare(rows, j_all, "EQ"), r.full(1, r.type(column)),
                                 r.select(r.compare(rows, j_all, "GT"), column, r.zeros(r.type(column))));
    Value zero = r.constant(0, DType::I32);
    Value t = r.reshape(r.dynamic_slice(s[2], {zero, j}, {batch, 1}), {batch});
    Value all = r.full(1, {DType::Bool, r.dims(s[0])});
    return std::vector<Value>{reflect(r, s[0], reflector_v, t, all), s[1], s[2], r.sub(j, r.constant(1, DType::I32))};
  });
  return b.op("stablehlo.while", {q, v, tau, b.constant(static_cast<double>(steps - 1), DType::I32)}, state, "",
              {cond, body})[0];
}

Value upper_triangle(Builder& b, Value x) {
  TensorType index{DType::I32, b.dims(x)};
  Value keep = b.compare(b.iota(index, 1), b.iota(index, 2), "LE");
  return b.select(keep, x, b.zeros(b.type(x)));
}

Value as_batched(Builder& b, Value x, int64_t batch) {
  const Dims& dims = b.dims(x);
  return b.reshape(x, {batch, dims[dims.size() - 2], dims.back()});
}

std::vector<Value> lower_geqrf(Context& ctx) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(0);
  real_matrix_dtype(ctx, a);
  Dims dims = b.dims(a);
  int64_t batch = numel(matrix_batch(dims));
  if (batch == 0 || std::min(dims[dims.size() - 2], dims.back()) == 0) {
    return {b.reshape(a, ctx.outputs[0].dims), b.zeros(ctx.out_type(1))};
  }
  auto [r, tau] = householder_qr(b, as_batched(b, a, batch));
  return {b.reshape(r, ctx.outputs[0].dims), b.reshape(tau, ctx.outputs[1].dims)};
}

std::vector<Value> lower_householder_product(Context& ctx) {
  Builder& b = ctx.b;
  Value v = ctx.tensor(0), tau = ctx.tensor(1);
  real_matrix_dtype(ctx, v);
  Dims dims = b.dims(v);
  int64_t batch = numel(matrix_batch(dims)), columns = dims.back();
  int64_t steps = b.dims(tau).empty() ? 0 : b.dims(tau).back();
  if (batch == 0 || dims[dims.size() - 2] == 0 || columns == 0 || steps == 0) {
    if (batch == 0 || dims[dims.size() - 2] == 0 || columns == 0) return {b.zeros(ctx.out_type(0))};
    Value eye = identity_matrices(b, {b.dtype(v), {batch, dims[dims.size() - 2], dims[dims.size() - 2]}});
    return {b.reshape(b.slice(eye, {0, 0, 0}, {batch, dims[dims.size() - 2], columns}, {1, 1, 1}), dims)};
  }
  Value q = householder_product(b, as_batched(b, v, batch), b.reshape(b.convert(tau, b.dtype(v)), {batch, steps}),
                                columns);
  return {b.reshape(q, dims)};
}

// linalg_qr(A, mode): "reduced" Q [m, k] R [k, n]; "complete" Q [m, m] R [m, n]; "r" R only.
std::vector<Value> lower_linalg_qr(Context& ctx) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(0);
  DType dtype = real_matrix_dtype(ctx, a);
  std::string mode = ctx.arg(1).is_none() ? "reduced" : ctx.arg(1).s;
  Dims dims = b.dims(a);
  int64_t m = dims[dims.size() - 2], n = dims.back(), k = std::min(m, n);
  int64_t batch = numel(matrix_batch(dims));
  bool complete = mode == "complete";
  if (batch == 0 || k == 0) {  // Q is the identity's first columns, R empty or zero
    Value q = b.zeros(ctx.out_type(0));
    if (complete && batch > 0) q = b.reshape(identity_matrices(b, {dtype, {batch, m, m}}), ctx.outputs[0].dims);
    return {q, b.zeros(ctx.out_type(1))};
  }
  auto [factored, tau] = householder_qr(b, as_batched(b, a, batch));
  int64_t r_rows = complete ? m : k;
  Value r = upper_triangle(b, b.slice(factored, {0, 0, 0}, {batch, r_rows, n}, {1, 1, 1}));
  Value r_out = b.reshape(r, ctx.outputs[1].dims);
  if (mode == "r") return {b.zeros(ctx.out_type(0)), r_out};
  int64_t q_columns = complete ? m : k;
  Value reflectors = b.slice(factored, {0, 0, 0}, {batch, m, k}, {1, 1, 1});
  if (q_columns > k) {
    reflectors = b.pad(reflectors, b.constant(0, dtype), {0, 0, 0}, {0, 0, q_columns - k}, {0, 0, 0});
  }
  Value q = householder_product(b, reflectors, tau, q_columns);
  return {b.reshape(q, ctx.outputs[0].dims), r_out};
}

// ormqr(input, tau, other, left, transpose): Q C, Q^T C (left), C Q or C Q^T, where Q is the
// square product of input's reflectors. Q is formed whole: ormqr is rare and its matrices small.
std::vector<Value> lower_ormqr(Context& ctx) {
  Builder& b = ctx.b;
  Value v = ctx.tensor(0), tau = ctx.tensor(1), c = ctx.tensor(2);
  DType dtype = real_matrix_dtype(ctx, v);
  if (b.dtype(c) != dtype || b.rank(c) < 2) throw Unsupported(ctx.op + " with these operands");
  bool left = ctx.bool_arg(3, true), transpose = ctx.bool_arg(4, false);
  Dims dims = b.dims(v), c_dims = b.dims(c);
  int64_t m = dims[dims.size() - 2], steps = b.dims(tau).back();
  int64_t batch = numel(matrix_batch(c_dims)), rows = c_dims[c_dims.size() - 2], cols = c_dims.back();
  if (steps > m || steps > dims.back()) throw Unsupported(ctx.op + " with more reflectors than rows");
  if (numel(c_dims) == 0) return {b.zeros(ctx.out_type())};
  Value q = identity_matrices(b, {dtype, {batch, m, m}});
  if (steps > 0) {
    q = householder_product(b, as_batched(b, v, batch), b.reshape(b.convert(tau, dtype), {batch, steps}), m);
  }
  if (transpose) q = swap_last_two(b, q);
  Value other = b.reshape(c, {batch, rows, cols});
  Value product = left ? b.dot_general(q, other, {0}, {0}, {2}, {1}, dtype)
                       : b.dot_general(other, q, {0}, {0}, {2}, {1}, dtype);
  return {b.reshape(product, ctx.outputs[0].dims)};
}

}  // namespace

Value complete_q(Builder& b, Value u) {
  const Dims& dims = b.dims(u);
  auto [factored, tau] = householder_qr(b, u);
  Value reflectors = b.pad(factored, b.constant(0, b.dtype(u)), {0, 0, 0}, {0, 0, dims[1] - dims[2]}, {0, 0, 0});
  return householder_product(b, reflectors, tau, dims[1]);
}

TPU_LOWERING("geqrf", lower_geqrf);
TPU_LOWERING("linalg_householder_product", lower_householder_product);
TPU_LOWERING("linalg_qr", lower_linalg_qr);
TPU_LOWERING("ormqr", lower_ormqr);

}  // namespace tpu::lowering
