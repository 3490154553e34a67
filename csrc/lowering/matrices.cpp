#include "lowering/matrices.h"

#include <string>
#include <utility>

#include "lowering/helpers.h"

namespace tpu::lowering {

DType real_matrix_dtype(const Context& ctx, Value a) {
  DType dtype = ctx.b.dtype(a);
  if (dtype != DType::F32 && dtype != DType::F64) throw Unsupported(ctx.op + " in " + mlir_name(dtype));
  return dtype;
}

Dims matrix_batch(const Dims& dims) { return Dims(dims.begin(), dims.end() - 2); }

Dims with_batch(const Dims& batch, int64_t rows, int64_t cols) {
  Dims dims = batch;
  dims.push_back(rows);
  dims.push_back(cols);
  return dims;
}

Value swap_last_two(hlo::Builder& b, Value x) {
  Dims permutation = all_dims(b.rank(x));
  std::swap(permutation[permutation.size() - 1], permutation[permutation.size() - 2]);
  return b.transpose(x, permutation);
}

Value triangular_solve(hlo::Builder& b, Value a, Value rhs, bool left, bool lower, bool unit, bool transpose) {
  std::string attributes = std::string("left_side = ") + (left ? "true" : "false") + ", lower = " +
                           (lower ? "true" : "false") + ", unit_diagonal = " + (unit ? "true" : "false") +
                           ", transpose_a = #stablehlo<transpose " + (transpose ? "TRANSPOSE" : "NO_TRANSPOSE") + ">";
  return b.op1("stablehlo.triangular_solve", {a, rhs}, b.type(rhs), attributes);
}

Value identity_matrices(hlo::Builder& b, const TensorType& type) {
  int64_t rank = static_cast<int64_t>(type.dims.size());
  TensorType index{DType::I32, type.dims};
  return b.convert(b.compare(b.iota(index, rank - 1), b.iota(index, rank - 2), "EQ"), type.dtype);
}

}  // namespace tpu::lowering
