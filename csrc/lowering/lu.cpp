// LU factorization with partial pivoting, as LAPACK's getrf computes it, and what PyTorch builds
// on it: linalg_lu_factor_ex, linalg_lu_solve, _linalg_solve_ex (linalg.solve), linalg_inv_ex,
// _linalg_det, _linalg_slogdet, lu_unpack and linalg_lu. Their backward formulas are PyTorch's, in terms of
// these ops and triangular solves. Real and complex dtypes (complex determinants take the CPU); a
// complex pivot is the largest |re| + |im|, as LAPACK's izamax picks it.
//
// StableHLO has no LU op. The factorization is a while loop over the columns whose steps are
// masked whole-matrix updates, so one program serves every batch and the pivot of each matrix is
// its own (the row swaps are selects, never a data-dependent slice).
#include <string>

#include "lowering/elementwise.h"
#include "lowering/helpers.h"
#include "lowering/matrices.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

Dims appended(Dims dims, std::initializer_list<int64_t> more) {
  dims.insert(dims.end(), more);
  return dims;
}

// The rank-0 runtime value `k` (a loop counter) broadcast to `dims`.
Value everywhere(Builder& b, Value k, const Dims& dims) { return b.broadcast_to(k, dims); }

// x with its entries k and p[batch] along `dim` exchanged, per batch (p's dims are x's before
// `dim`). The entry at p is picked by a masked sum whose filler is -0.0, which adds nothing to any
// value (not even to another -0.0), so the swap is exact.
Value swap_entries(Builder& b, Value x, int64_t dim, Value k, Value p) {
  const Dims& dims = b.dims(x);
  int64_t rank = static_cast<int64_t>(dims.size());
  Dims batch_dims;
  for (int64_t d = 0; d < dim; ++d) batch_dims.push_back(d);
  TensorType index_type{DType::I32, dims};
  Value index = b.iota(index_type, dim);
  Value at_k = b.compare(index, everywhere(b, k, dims), "EQ");
  Value at_p = b.compare(index, b.broadcast_in_dim(p, dims, batch_dims), "EQ");
  Value filler = is_floating(b.dtype(x)) ? b.full(-0.0, b.type(x)) : b.zeros(b.type(x));
  Value init = is_floating(b.dtype(x)) ? b.constant(-0.0, b.dtype(x)) : b.constant(0, b.dtype(x));
  Dims kept = all_but(rank, dim);
  Value entry_p = b.broadcast_in_dim(b.reduce(b.select(at_p, x, filler), init, {dim}, "stablehlo.add"), dims, kept);
  std::vector<Value> starts(rank, b.constant(0, DType::I32));
  starts[dim] = k;
  Dims one = dims;
  one[dim] = 1;
  Value entry_k = b.broadcast_to(b.dynamic_slice(x, starts, one), dims);
  return b.select(at_k, entry_p, b.select(at_p, entry_k, x));
}

// What LU serves: real_matrix_dtype's dtypes, complex64 and complex128.
DType factorable_dtype(const Context& ctx, Value a) {
  DType dtype = ctx.b.dtype(a);
  return is_complex(dtype) ? dtype : real_matrix_dtype(ctx, a);
}

// |re z| or |im z| of a complex z.
Value absolute_part(Builder& b, Value z, const char* part) {
  return op(b, "abs", b.op1(part, {z}, {complex_part_dtype(b.dtype(z)), b.dims(z)}));
}

struct Factorization {
  Value lu;           // [..., m, n]: U on and above the diagonal, L's multipliers below
  Value pivots;       // i32 [..., min(m, n)], 1-based: row k was exchanged with row pivots[k] - 1
  Value info;         // i32 [...]: the first zero pivot's column + 1, 0 when none
  Value permutation;  // i32 [..., m]: row i of L U is row permutation[i] of the matrix
};

Factorization lu_factor(Builder& b, Value a) {
  Dims dims = b.dims(a);
  int64_t rank = static_cast<int64_t>(dims.size()), m = dims[rank - 2], n = dims[rank - 1];
  int64_t steps = std::min(m, n);
  Dims batch = matrix_batch(dims);
  TensorType matrix = b.type(a), pivots_type{DType::I32, appended(batch, {steps})}, info_type{DType::I32, batch},
             rows_type{DType::I32, appended(batch, {m})}, counter{DType::I32, {}};
  std::vector<TensorType> state{matrix, pivots_type, info_type, rows_type, counter};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    return std::vector<Value>{r.compare(v[4], r.constant(static_cast<double>(steps), DType::I32), "LT")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    Value lu = v[0], pivots = v[1], info = v[2], permutation = v[3], k = v[4];
    DType dtype = r.dtype(lu);
    Value zero = r.constant(0, DType::I32), one = r.constant(1, DType::I32);
    Dims column_dims = appended(batch, {m, 1});
    std::vector<Value> column_start(rank, zero);
    column_start[rank - 1] = k;
    // The pivot: the first row at or below k with the largest magnitude in column k (idamax).
    Value column = r.reshape(r.dynamic_slice(lu, column_start, column_dims), appended(batch, {m}));
    Value rows = r.iota(rows_type, rank - 2);
    Value candidate = r.compare(rows, everywhere(r, k, r.dims(rows)), "GE");
    Value size = is_complex(dtype) ? r.add(absolute_part(r, column, "stablehlo.real"),
                                           absolute_part(r, column, "stablehlo.imag"))
                                   : op(r, "abs", column);
    Value magnitude = r.select(candidate, size, r.full(-1.0, r.type(size)));
    Value largest = r.reduce(magnitude, r.constant(-2.0, r.dtype(size)), {rank - 2}, "stablehlo.maximum");
    Value is_largest = r.compare(magnitude, r.broadcast_in_dim(largest, r.dims(magnitude), all_dims(rank - 2)), "EQ");
    Value m_value = r.constant(static_cast<double>(m), DType::I32);
    Value p = r.reduce(r.select(is_largest, rows, everywhere(r, m_value, r.dims(rows))), m_value, {rank - 2},
                       "stablehlo.minimum");
    // A column of nans has no largest entry: no exchange, as LAPACK's idamax then returns k.
    p = r.select(r.compare(p, everywhere(r, m_value, batch), "GE"), everywhere(r, k, batch), p);
    std::vector<Value> pivot_start(rank - 1, zero);
    pivot_start[rank - 2] = k;
    pivots = r.dynamic_update_slice(pivots, r.reshape(r.add(p, everywhere(r, one, batch)), appended(batch, {1})),
                                    pivot_start);
    lu = swap_entries(r, lu, rank - 2, k, p);
    permutation = swap_entries(r, permutation, rank - 2, k, p);

    // Elimination below the pivot. A zero pivot leaves its column unscaled and is reported in
    // info, as getrf does; the update then subtracts nothing.
    column = r.dynamic_slice(lu, column_start, column_dims);  // [..., m, 1], after the exchange
    std::vector<Value> row_start(rank, zero);
    row_start[rank - 2] = k;
    Value row = r.dynamic_slice(lu, row_start, appended(batch, {1, n}));  // [..., 1, n]
    std::vector<Value> diagonal_start(rank, zero);
    diagonal_start[rank - 2] = k;
    diagonal_start[rank - 1] = k;
    Value pivot = r.dynamic_slice(lu, diagonal_start, appended(batch, {1, 1}));
    Value nonzero = r.compare(pivot, r.zeros(r.type(pivot)), "NE");
    Value first_zero = op(r, "and", op(r, "not", r.reshape(nonzero, batch)),
                          r.compare(info, r.zeros(info_type), "EQ"));
    info = r.select(first_zero, everywhere(r, r.add(k, one), batch), info);
    Value scaled = r.select(r.broadcast_to(nonzero, column_dims), r.div(column, r.broadcast_to(pivot, column_dims)),
                            column);
    TensorType index_type{DType::I32, dims};
    Value row_index = r.iota(index_type, rank - 2), column_index = r.iota(index_type, rank - 1);
    Value k_all = everywhere(r, k, dims);
    Value below = r.compare(row_index, k_all, "GT");
    Value trailing = op(r, "and", below, r.compare(column_index, k_all, "GT"));
    Value multipliers = r.broadcast_to(r.select(r.broadcast_to(nonzero, column_dims), scaled,
                                                r.zeros(r.type(scaled))), dims);
    lu = r.select(trailing, r.sub(lu, r.mul(multipliers, r.broadcast_to(row, dims))), lu);
    lu = r.select(op(r, "and", below, r.compare(column_index, k_all, "EQ")), r.broadcast_to(scaled, dims), lu);
    return std::vector<Value>{lu, pivots, info, permutation, r.add(k, one)};
  });
  Value identity = b.iota(rows_type, rank - 2);
  std::vector<Value> loop = b.op("stablehlo.while", {a, b.zeros(pivots_type), b.zeros(info_type), identity,
                                                     b.constant(0, DType::I32)},
                                 state, "", {cond, body});
  return {loop[0], loop[1], loop[2], loop[3]};
}

// The row permutation that LAPACK's pivots describe (the exchanges applied in order to 0..m-1).
Value permutation_of(Builder& b, Value pivots, int64_t m) {
  const Dims& pivot_dims = b.dims(pivots);
  Dims batch(pivot_dims.begin(), pivot_dims.end() - 1);
  int64_t steps = b.dims(pivots).back(), rank = static_cast<int64_t>(batch.size()) + 2;
  TensorType rows_type{DType::I32, appended(batch, {m})}, pivots_type = b.type(pivots), counter{DType::I32, {}};
  std::vector<TensorType> state{rows_type, pivots_type, counter};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    return std::vector<Value>{r.compare(v[2], r.constant(static_cast<double>(steps), DType::I32), "LT")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    std::vector<Value> start(rank - 1, r.constant(0, DType::I32));
    start[rank - 2] = v[2];
    Value p = r.reshape(r.dynamic_slice(v[1], start, appended(batch, {1})), batch);
    p = r.sub(p, everywhere(r, r.constant(1, DType::I32), batch));
    return std::vector<Value>{swap_entries(r, v[0], rank - 2, v[2], p), v[1],
                              r.add(v[2], r.constant(1, DType::I32))};
  });
  return b.op("stablehlo.while", {b.iota(rows_type, rank - 2), pivots, b.constant(0, DType::I32)}, state, "",
              {cond, body})[0];
}

// x's rows in the order `rows` gives ([..., m] against x's [..., m, k]): result row i is x's row
// rows[i].
Value take_rows(Builder& b, Value x, Value rows) {
  const Dims& dims = b.dims(x);
  int64_t rank = static_cast<int64_t>(dims.size());
  return take_along(b, x, rank - 2, b.broadcast_in_dim(rows, dims, all_dims(rank - 1)));
}

// The inverse of a permutation along the last dim: inverse[rows[i]] = i.
Value inverse_permutation(Builder& b, Value rows) {
  const Dims& dims = b.dims(rows);
  int64_t rank = static_cast<int64_t>(dims.size());
  Builder::ScatterDims s{{}, all_dims(rank), all_dims(rank), rank};
  return b.scatter(b.zeros(b.type(rows)), coordinates_along(b, rows, rank - 1, rank), b.iota(b.type(rows), rank - 1),
                   s, "");
}

// X with A X = B (or A^T X = B when `transpose`), from A's factorization; lu, permutation and rhs
// share their batch dims.
Value lu_solve(Builder& b, Value lu, Value permutation, Value rhs, bool transpose) {
  if (!transpose) {  // L U X = P B
    Value y = triangular_solve(b, lu, take_rows(b, rhs, permutation), true, true, true, false);
    return triangular_solve(b, lu, y, true, false, false, false);
  }
  // A^T = U^T L^T P: U^T y = B, L^T z = y, X = P^T z.
  Value y = triangular_solve(b, lu, rhs, true, false, false, true);
  Value z = triangular_solve(b, lu, y, true, true, true, true);
  return take_rows(b, z, inverse_permutation(b, permutation));
}

// X with op(A) X = B, op(A) = A, A^T, conj(A) or A^H: conj(A) X = B is A conj(X) = conj(B).
Value lu_solve(Builder& b, Value lu, Value permutation, Value rhs, bool transpose, bool conjugated) {
  if (!conjugated || !is_complex(b.dtype(lu))) return lu_solve(b, lu, permutation, rhs, transpose);
  return conjugate(b, lu_solve(b, lu, permutation, conjugate(b, rhs), transpose));
}

// The results of an op on empty matrices: each output `i` filled with fills[i] (det of a 0x0
// matrix is 1; everything else is empty or zero).
std::vector<Value> filled_outputs(Context& ctx, const std::vector<double>& fills) {
  std::vector<Value> out;
  for (size_t i = 0; i < fills.size(); ++i) out.push_back(ctx.b.full(fills[i], ctx.out_type(i)));
  return out;
}

// CPU's det and slogdet factor A^T when A is contiguous (LAPACK reads column-major, so that saves
// a copy; det(A^T) = det(A)), and their backward formulas solve with the LU they return
// accordingly: the factorization here is of the same matrix, so that LU and its gradients are
// CPU's. (Its solve factors A itself.)
bool factors_transpose(const Context& ctx) { return ctx.args.at(0).contiguous; }

// The square matrix operand `i`, broadcast to `batch`; complex only where `complex_too`.
Value square_operand(Context& ctx, size_t i, const Dims& batch, bool complex_too = false) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(i);
  if (complex_too) {
    factorable_dtype(ctx, a);
  } else {
    real_matrix_dtype(ctx, a);
  }
  const Dims& dims = b.dims(a);
  if (dims.size() < 2 || dims.back() != dims[dims.size() - 2]) throw Unsupported(ctx.op + " of a non-square matrix");
  int64_t n = dims.back();
  return b.broadcast_to(a, appended(batch, {n, n}));
}

// linalg_lu_factor_ex(A, pivot, check_errors) -> (LU, pivots, info).
std::vector<Value> lower_linalg_lu_factor_ex(Context& ctx) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(0);
  factorable_dtype(ctx, a);
  if (b.rank(a) < 2 || !ctx.bool_arg(1, true)) throw Unsupported(ctx.op + " without pivoting");
  if (numel(b.dims(a)) == 0) return filled_outputs(ctx, {0, 0, 0});
  Factorization f = lu_factor(b, a);
  return {as_output(ctx, f.lu, 0), as_output(ctx, f.pivots, 1), as_output(ctx, f.info, 2)};
}

// linalg_lu_solve(LU, pivots, B, left, adjoint) -> X with A X = B (left) or X A = B, A^H for A
// when `adjoint`.
std::vector<Value> lower_linalg_lu_solve(Context& ctx) {
  Builder& b = ctx.b;
  const Dims& out = ctx.outputs.at(0).dims;
  if (out.size() < 2) throw Unsupported(ctx.op + " of a non-matrix operand");
  if (numel(out) == 0) return filled_outputs(ctx, {0});
  Dims batch = matrix_batch(out);
  Value lu = square_operand(ctx, 0, batch, true);
  int64_t n = b.dims(lu).back();
  Value pivots = b.broadcast_to(ctx.tensor(1), appended(batch, {n}));
  Value rhs = ctx.tensor(2);
  if (b.dtype(rhs) != b.dtype(lu)) throw Unsupported(ctx.op + " with mixed dtypes");
  bool left = ctx.bool_arg(3, true), adjoint = ctx.bool_arg(4, false);
  rhs = b.broadcast_to(rhs, out);
  Value permutation = permutation_of(b, pivots, n);
  // X A = B is A^T X^T = B^T, and X A^H = B is conj(A) X^T = B^T.
  if (left) return {as_output(ctx, lu_solve(b, lu, permutation, rhs, adjoint, adjoint))};
  return {as_output(ctx, swap_last_two(b, lu_solve(b, lu, permutation, swap_last_two(b, rhs), !adjoint, adjoint)))};
}

// _linalg_solve_ex(A, B, left, check_errors) -> (X, LU, pivots, info); B is a vector (one
// dimension fewer than A's batch of matrices) or a batch of matrices.
std::vector<Value> lower_linalg_solve_ex(Context& ctx) {
  Builder& b = ctx.b;
  const Dims& out = ctx.outputs.at(0).dims;
  const Dims& lu_dims = ctx.outputs.at(1).dims;
  if (lu_dims.size() < 2) throw Unsupported(ctx.op + " of a non-matrix operand");
  if (numel(lu_dims) == 0) return filled_outputs(ctx, {0, 0, 0, 0});
  Value a = square_operand(ctx, 0, matrix_batch(lu_dims), true);
  Value rhs = ctx.tensor(1);
  if (b.dtype(rhs) != b.dtype(a)) throw Unsupported(ctx.op + " with mixed dtypes");
  bool vector = out.size() == lu_dims.size() - 1, left = ctx.bool_arg(2, true);
  Dims matrix_out = vector ? appended(out, {1}) : out;
  rhs = b.broadcast_to(vector ? b.reshape(rhs, appended(b.dims(rhs), {1})) : rhs, matrix_out);
  Factorization f = lu_factor(b, a);
  if (numel(out) == 0) {  // no right-hand side: the factorization alone
    return {b.zeros(ctx.out_type(0)), as_output(ctx, f.lu, 1), as_output(ctx, f.pivots, 2), as_output(ctx, f.info, 3)};
  }
  Dims batch = matrix_batch(matrix_out);
  Value lu = b.broadcast_to(f.lu, appended(batch, {lu_dims.back(), lu_dims.back()}));
  Value permutation = b.broadcast_to(f.permutation, appended(batch, {lu_dims.back()}));
  // X A = B is A^T X^T = B^T.
  Value x = left ? lu_solve(b, lu, permutation, rhs, false)
                 : swap_last_two(b, lu_solve(b, lu, permutation, swap_last_two(b, rhs), true));
  return {as_output(ctx, b.reshape(x, out), 0), as_output(ctx, f.lu, 1), as_output(ctx, f.pivots, 2),
          as_output(ctx, f.info, 3)};
}

// linalg_inv_ex(A, check_errors) -> (A^-1, info).
std::vector<Value> lower_linalg_inv_ex(Context& ctx) {
  Builder& b = ctx.b;
  const Dims& out = ctx.outputs.at(0).dims;
  if (out.size() < 2) throw Unsupported(ctx.op + " of a non-matrix operand");
  if (numel(out) == 0) return filled_outputs(ctx, {0, 0});
  Value a = square_operand(ctx, 0, matrix_batch(out), true);
  Factorization f = lu_factor(b, a);
  Value identity = identity_matrices(b, b.type(a));
  return {as_output(ctx, lu_solve(b, f.lu, f.permutation, identity, false), 0), as_output(ctx, f.info, 1)};
}

// The diagonal of U ([..., n]) and the sign of the row exchanges ([...], +-1) of a factorization.
std::pair<Value, Value> diagonal_and_exchange_sign(Builder& b, const Factorization& f) {
  const Dims& dims = b.dims(f.lu);
  int64_t rank = static_cast<int64_t>(dims.size()), n = dims.back();
  Dims batch = matrix_batch(dims);
  TensorType index{DType::I32, dims};
  Value on_diagonal = b.compare(b.iota(index, rank - 1), b.iota(index, rank - 2), "EQ");
  DType dtype = b.dtype(f.lu);
  Value diagonal = b.reduce(b.select(on_diagonal, f.lu, b.full(-0.0, b.type(f.lu))), b.constant(-0.0, dtype),
                            {rank - 1}, "stablehlo.add");  // [..., n]
  Value steps = b.iota({DType::I32, appended(batch, {n})}, rank - 2);
  Value exchanged = b.compare(b.sub(f.pivots, b.full(1, b.type(f.pivots))), steps, "NE");
  Value count = b.reduce(b.convert(exchanged, DType::I32), b.constant(0, DType::I32), {rank - 2}, "stablehlo.add");
  Value odd = b.compare(op(b, "remainder", count, b.full(2, b.type(count))), b.zeros(b.type(count)), "NE");
  Value sign = b.select(odd, b.full(-1.0, {dtype, batch}), b.full(1.0, {dtype, batch}));
  return {diagonal, sign};
}

// The factorization det and slogdet return: of A, or of A^T as CPU's (det(A^T) = det(A)).
Factorization factor_for_determinant(Context& ctx, size_t lu_output) {
  const Dims& lu_dims = ctx.outputs.at(lu_output).dims;
  if (lu_dims.size() < 2) throw Unsupported(ctx.op + " of a non-matrix operand");
  Value a = square_operand(ctx, 0, matrix_batch(lu_dims));
  return lu_factor(ctx.b, factors_transpose(ctx) ? swap_last_two(ctx.b, a) : a);
}

// _linalg_det(A) -> (det, LU, pivots).
std::vector<Value> lower_linalg_det(Context& ctx) {
  Builder& b = ctx.b;
  if (numel(ctx.outputs.at(1).dims) == 0) return filled_outputs(ctx, {1, 0, 0});  // det of 0x0 is 1
  Factorization f = factor_for_determinant(ctx, 1);
  auto [diagonal, sign] = diagonal_and_exchange_sign(b, f);
  int64_t rank = b.rank(diagonal);
  Value product = b.reduce(diagonal, b.constant(1.0, b.dtype(diagonal)), {rank - 1}, "stablehlo.multiply");
  return {as_output(ctx, b.mul(sign, product), 0), as_output(ctx, f.lu, 1), as_output(ctx, f.pivots, 2)};
}

// _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots).
std::vector<Value> lower_linalg_slogdet(Context& ctx) {
  Builder& b = ctx.b;
  if (numel(ctx.outputs.at(2).dims) == 0) return filled_outputs(ctx, {1, 0, 0, 0});
  Factorization f = factor_for_determinant(ctx, 2);
  auto [diagonal, sign] = diagonal_and_exchange_sign(b, f);
  int64_t rank = b.rank(diagonal);
  DType dtype = b.dtype(diagonal);
  Value signs = op(b, "sign", diagonal);
  sign = b.mul(sign, b.reduce(signs, b.constant(1.0, dtype), {rank - 1}, "stablehlo.multiply"));
  Value logabs = b.reduce(op(b, "log", op(b, "abs", diagonal)), b.constant(0.0, dtype), {rank - 1}, "stablehlo.add");
  return {as_output(ctx, sign, 0), as_output(ctx, logabs, 1), as_output(ctx, f.lu, 2), as_output(ctx, f.pivots, 3)};
}

// P, L and U with A = P L U from a factorization's LU ([..., m, n]) and row permutation.
std::vector<Value> unpack(Builder& b, Value lu, Value permutation) {
  const Dims& dims = b.dims(lu);
  int64_t rank = static_cast<int64_t>(dims.size()), m = dims[rank - 2], n = dims[rank - 1], k = std::min(m, n);
  Dims batch = matrix_batch(dims);
  TensorType index{DType::I32, dims};
  Value rows = b.iota(index, rank - 2), columns = b.iota(index, rank - 1);
  Value unit = b.convert(b.compare(columns, rows, "EQ"), b.dtype(lu));
  Value lower = b.select(b.compare(columns, rows, "LT"), lu, unit);
  Value upper = b.select(b.compare(columns, rows, "GE"), lu, b.zeros(b.type(lu)));
  Value l = b.slice(lower, Dims(rank, 0), appended(batch, {m, k}), Dims(rank, 1));
  Value u = b.slice(upper, Dims(rank, 0), appended(batch, {k, n}), Dims(rank, 1));
  // L U = P^T A, whose row i is A's row permutation[i]: P[permutation[i], i] = 1.
  TensorType square{DType::I32, appended(batch, {m, m})};
  Value targets = b.broadcast_in_dim(permutation, square.dims, appended(all_dims(rank - 2), {rank - 1}));
  Value p = b.convert(b.compare(b.iota(square, rank - 2), targets, "EQ"), b.dtype(lu));
  return {p, l, u};
}

std::vector<Value> as_outputs(Context& ctx, const std::vector<Value>& values) {
  std::vector<Value> out;
  for (size_t i = 0; i < values.size(); ++i) out.push_back(as_output(ctx, values[i], i));
  return out;
}

// lu_unpack(LU, pivots, unpack_data, unpack_pivots) -> (P, L, U).
std::vector<Value> lower_lu_unpack(Context& ctx) {
  Builder& b = ctx.b;
  Value lu = ctx.tensor(0);
  factorable_dtype(ctx, lu);
  if (!ctx.bool_arg(2, true) || !ctx.bool_arg(3, true)) throw Unsupported(ctx.op + " of part of a factorization");
  const Dims& dims = b.dims(lu);
  if (dims.size() < 2) throw Unsupported(ctx.op + " of a non-matrix operand");
  if (numel(dims) == 0) return {identity_matrices(b, ctx.out_type(0)), b.zeros(ctx.out_type(1)), b.zeros(ctx.out_type(2))};
  int64_t m = dims[dims.size() - 2], k = std::min(m, dims.back());
  Value pivots = b.broadcast_to(b.convert(ctx.tensor(1), DType::I32), appended(matrix_batch(dims), {k}));
  return as_outputs(ctx, unpack(b, lu, permutation_of(b, pivots, m)));
}

// linalg_lu(A, pivot) -> (P, L, U).
std::vector<Value> lower_linalg_lu(Context& ctx) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(0);
  factorable_dtype(ctx, a);
  if (b.rank(a) < 2 || !ctx.bool_arg(1, true)) throw Unsupported(ctx.op + " without pivoting");
  if (numel(b.dims(a)) == 0) return {identity_matrices(b, ctx.out_type(0)), b.zeros(ctx.out_type(1)), b.zeros(ctx.out_type(2))};
  Factorization f = lu_factor(b, a);
  return as_outputs(ctx, unpack(b, f.lu, f.permutation));
}

}  // namespace

TPU_LOWERING("linalg_lu_factor_ex", lower_linalg_lu_factor_ex);
TPU_LOWERING("linalg_lu_solve", lower_linalg_lu_solve);
TPU_LOWERING("_linalg_solve_ex", lower_linalg_solve_ex);
TPU_LOWERING("linalg_inv_ex", lower_linalg_inv_ex);
TPU_LOWERING("_linalg_det", lower_linalg_det);
TPU_LOWERING("_linalg_slogdet", lower_linalg_slogdet);
TPU_LOWERING("lu_unpack", lower_lu_unpack);
TPU_LOWERING("linalg_lu", lower_linalg_lu);

}  // namespace tpu::lowering
