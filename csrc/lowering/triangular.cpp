// Cholesky factorization and triangular solves, on StableHLO's own cholesky and triangular_solve:
// linalg_cholesky_ex, linalg_solve_triangular, triangular_solve, cholesky_solve's helper and
// cholesky_inverse, batched (leading dims broadcast as PyTorch does). Real dtypes only; complex
// ones take the CPU.
#include <string>

#include "lowering/elementwise.h"
#include "lowering/helpers.h"
#include "lowering/matrices.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

// [..., n, n] -> where column <= row ("LE": the lower triangle) or column == row ("EQ").
Value where_column(Builder& b, const Dims& dims, const char* relation_to_row) {
  int64_t rank = static_cast<int64_t>(dims.size());
  TensorType index{DType::I64, dims};
  return b.compare(b.iota(index, rank - 1), b.iota(index, rank - 2), relation_to_row);
}

// LAPACK's info for a Cholesky factorization: the order of the first leading minor that is not
// positive-definite, 0 when none. XLA's factor does not say where it failed (a failed batch is nan
// throughout), so the pivots are recomputed column by column, as potrf does: at column j,
// d = a_jj - sum_k<j l_jk^2 must be positive.
Value cholesky_info(Builder& b, Value a) {
  Dims dims = b.dims(a);
  int64_t rank = static_cast<int64_t>(dims.size()), n = dims.back();
  Dims batch = matrix_batch(dims), batch_dims;
  for (int64_t d = 0; d < rank - 2; ++d) batch_dims.push_back(d);
  TensorType matrix = b.type(a), info_type{DType::I32, batch}, counter{DType::I32, {}};
  hlo::RegionRef cond = b.region({matrix, matrix, info_type, counter}, [&](Builder& r, const std::vector<Value>& v) {
    return std::vector<Value>{r.compare(v[3], r.constant(static_cast<double>(n), DType::I32), "LT")};
  });
  hlo::RegionRef body = b.region({matrix, matrix, info_type, counter}, [&](Builder& r, const std::vector<Value>& v) {
    Value a_in = v[0], factor = v[1], info = v[2], j = v[3];
    Value zero = r.constant(0, DType::I32);
    std::vector<Value> row_start(rank, zero), column_start(rank, zero);
    row_start[rank - 2] = j;
    column_start[rank - 1] = j;
    Value row = r.dynamic_slice(factor, row_start, with_batch(batch, 1, n));         // l_j.
    Value column = r.dynamic_slice(a_in, column_start, with_batch(batch, n, 1));     // a_.j
    Value residual = r.sub(column, r.dot_general(factor, row, batch_dims, batch_dims, {rank - 1}, {rank - 1},
                                                 r.dtype(a_in)));                    // [..., n, 1]
    std::vector<Value> pivot_start(rank, zero);
    pivot_start[rank - 2] = j;
    Value pivot = r.reshape(r.dynamic_slice(residual, pivot_start, with_batch(batch, 1, 1)), batch);
    Value not_positive = op(r, "not", r.compare(pivot, r.zeros(r.type(pivot)), "GT"));  // d <= 0, or nan
    Value first = op(r, "and", not_positive, r.compare(info, r.zeros(info_type), "EQ"));
    info = r.select(first, r.broadcast_to(r.add(j, r.constant(1, DType::I32)), batch), info);
    // Column j of the factor: rows >= j of residual / sqrt(d) (rows above stay zero).
    Value root = r.broadcast_in_dim(op(r, "sqrt", pivot), with_batch(batch, n, 1), batch_dims);
    Value rows = r.iota({DType::I32, with_batch(batch, n, 1)}, rank - 2);
    Value below = r.compare(rows, r.broadcast_to(j, r.dims(rows)), "GE");
    Value new_column = r.select(below, r.div(residual, root), r.zeros(r.type(residual)));
    factor = r.dynamic_update_slice(factor, new_column, column_start);
    return std::vector<Value>{a_in, factor, info, r.add(j, r.constant(1, DType::I32))};
  });
  std::vector<Value> loop = b.op("stablehlo.while", {a, b.zeros(matrix), b.zeros(info_type), b.constant(0, DType::I32)},
                                 {matrix, matrix, info_type, counter}, "", {cond, body});
  return loop[2];
}

// linalg_cholesky_ex(self, upper, check_errors) -> (L, info).
std::vector<Value> lower_linalg_cholesky_ex(Context& ctx) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(0);
  real_matrix_dtype(ctx, a);
  Dims dims = b.dims(a);
  int64_t rank = static_cast<int64_t>(dims.size());
  if (rank < 2 || dims[rank - 1] != dims[rank - 2]) throw Unsupported("a non-square matrix");
  // Only the lower triangle of the result is defined; the rest is zeroed as PyTorch returns it.
  Value factor = b.op1("stablehlo.cholesky", {a}, b.type(a), "lower = true");
  factor = b.select(where_column(b, dims, "LE"), factor, b.zeros(b.type(a)));
  TensorType info_type{DType::I32, matrix_batch(dims)};
  Value info = b.zeros(info_type);
  if (numel(dims) > 0) {
    // The pivot loop runs only when the factorization failed somewhere (a nan in the factor):
    // a successful one costs a reduction, not n sequential steps.
    Value nan = b.compare(factor, factor, "NE");
    Value failed = b.reduce(nan, b.constant(0, DType::Bool), all_dims(rank), "stablehlo.or");
    hlo::RegionRef check = b.region({}, [&](Builder& r, const std::vector<Value>&) {
      return std::vector<Value>{cholesky_info(r, a)};
    });
    hlo::RegionRef skip = b.region({}, [&](Builder& r, const std::vector<Value>&) {
      return std::vector<Value>{r.zeros(info_type)};
    });
    info = b.op("stablehlo.if", {failed}, {info_type}, "", {check, skip})[0];
  }
  if (ctx.bool_arg(1, false)) factor = swap_last_two(b, factor);  // upper: U = L^T
  return {as_output(ctx, factor, 0), as_output(ctx, info, 1)};
}

// A solve's square matrix (args[a_index]) and right-hand side (args[rhs_index]), both broadcast to
// the batch dims of the result.
struct SolveOperands {
  Value matrix, rhs;
};
SolveOperands solve_operands(Context& ctx, size_t a_index, size_t rhs_index) {
  Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  Value a = ctx.tensor(a_index), rhs = ctx.tensor(rhs_index);
  if (b.dtype(rhs) != real_matrix_dtype(ctx, a) || out.dims.size() < 2) {
    throw Unsupported(ctx.op + " with these operands");
  }
  int64_t n = b.dims(a).back();
  return {b.broadcast_to(a, with_batch(matrix_batch(out.dims), n, n)), b.broadcast_to(rhs, out.dims)};
}

// linalg_solve_triangular(A, B, upper, left, unitriangular): X with A X = B (left) or X A = B.
std::vector<Value> lower_linalg_solve_triangular(Context& ctx) {
  SolveOperands s = solve_operands(ctx, 0, 1);
  bool upper = ctx.bool_arg(2, false), left = ctx.bool_arg(3, true), unit = ctx.bool_arg(4, false);
  return {as_output(ctx, triangular_solve(ctx.b, s.matrix, s.rhs, left, !upper, unit, false))};
}

// triangular_solve(B, A, upper, transpose, unitriangular) -> (X with op(A) X = B, A).
std::vector<Value> lower_triangular_solve(Context& ctx) {
  SolveOperands s = solve_operands(ctx, 1, 0);
  bool upper = ctx.bool_arg(2, true), transpose = ctx.bool_arg(3, false), unit = ctx.bool_arg(4, false);
  Value x = triangular_solve(ctx.b, s.matrix, s.rhs, true, !upper, unit, transpose);
  return {as_output(ctx, x, 0), as_output(ctx, s.matrix, 1)};
}

// X with L L^T X = B (or U^T U X = B): two triangular solves. `factor` and `rhs` have the same
// batch dims.
Value cholesky_solve(Builder& b, Value factor, Value rhs, bool upper) {
  // lower: L y = B, then L^T x = y; upper: U^T y = B, then U x = y.
  Value y = triangular_solve(b, factor, rhs, true, !upper, false, upper);
  return triangular_solve(b, factor, y, true, !upper, false, !upper);
}

// _cholesky_solve_helper(B, L, upper), the work of cholesky_solve after broadcasting.
std::vector<Value> lower_cholesky_solve_helper(Context& ctx) {
  SolveOperands s = solve_operands(ctx, 1, 0);
  return {as_output(ctx, cholesky_solve(ctx.b, s.matrix, s.rhs, ctx.bool_arg(2, false)))};
}

// cholesky_inverse(L, upper): (L L^T)^-1, the solve of the identity.
std::vector<Value> lower_cholesky_inverse(Context& ctx) {
  Builder& b = ctx.b;
  Value factor = ctx.tensor(0);
  real_matrix_dtype(ctx, factor);
  const Dims& dims = b.dims(factor);
  if (dims.size() < 2) throw Unsupported(ctx.op + " of a non-matrix operand");
  if (numel(dims) == 0) return {b.zeros(ctx.out_type())};
  Value identity = identity_matrices(b, b.type(factor));
  return {as_output(ctx, cholesky_solve(b, factor, identity, ctx.bool_arg(1, false)))};
}

}  // namespace

TPU_LOWERING("linalg_cholesky_ex", lower_linalg_cholesky_ex);
TPU_LOWERING("linalg_solve_triangular", lower_linalg_solve_triangular);
TPU_LOWERING("triangular_solve", lower_triangular_solve);
TPU_LOWERING("_cholesky_solve_helper", lower_cholesky_solve_helper);
TPU_LOWERING("cholesky_inverse", lower_cholesky_inverse);

}  // namespace tpu::lowering
