// What the matrix lowerings share (triangular.cpp: Cholesky and triangular solves; lu.cpp: LU
// and the solves, inverses and determinants built on it; householder.cpp: QR; jacobi.cpp: eigh
// and SVD; least_squares.cpp, matrix_exp.cpp): batches of matrices [..., m, n].
#pragma once

#include "lowering/registry.h"

namespace tpu::lowering {

// The operand's dtype when it is f32 or f64; complex and other dtypes take the CPU.
DType real_matrix_dtype(const Context& ctx, Value a);
// [..., m, n] -> [...].
Dims matrix_batch(const Dims& dims);
// [...] -> [..., rows, cols].
Dims with_batch(const Dims& batch, int64_t rows, int64_t cols);
Value swap_last_two(hlo::Builder& b, Value x);
// stablehlo.triangular_solve: X with op(A) X = B (left) or X op(A) = B, reading A's lower or
// upper triangle only.
Value triangular_solve(hlo::Builder& b, Value a, Value rhs, bool left, bool lower, bool unit, bool transpose);
// The complete Q [B, m, m] of the Householder QR of u [B, m, k] (k <= m): where u's columns are
// orthonormal, Q's first k columns are them up to sign; Q's other columns (and those facing a
// zero column of u) complete them to an orthonormal basis (householder.cpp).
Value complete_q(hlo::Builder& b, Value u);
// x [B, m, n] = u diag(s) v^T with s [B, k] descending, k = min(m, n); u [B, m, k] and v [B, n, k]
// orthonormal (m or n columns, the basis completed, where `full`), unset unless `vectors`
// (jacobi.cpp).
struct Svd {
  Value u, s, v;
};
Svd singular_value_decomposition(hlo::Builder& b, Value x, bool vectors, bool full);
// The identity matrices [..., m, m] of `type`.
Value identity_matrices(hlo::Builder& b, const TensorType& type);

}  // namespace tpu::lowering
