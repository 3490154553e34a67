// Small building blocks shared by the lowerings: dtype rules, broadcasting, dims.
#pragma once

#include <initializer_list>

#include "lowering/registry.h"

namespace tpu::lowering {

// PyTorch's result_type over tensors and numbers: dimensioned tensors decide the dtype; weak
// operands (numbers, 0-dim tensors) only lift the category bool < integral < floating.
DType promote(const Context& ctx, std::initializer_list<size_t> arg_indices);
DType promote_types(DType a, DType b);  // torch.promote_types

// The value of args[i] converted to `dtype` and broadcast to `dims`.
Value operand_as(Context& ctx, size_t i, DType dtype, const Dims& dims);
// `x` converted to `dtype` and broadcast to `dims`.
Value cast_to(hlo::Builder& b, Value x, DType dtype, const Dims& dims);

// Wraps a possibly negative dim into [0, rank); rank 0 accepts -1 and 0.
int64_t wrap_dim(int64_t dim, int64_t rank);
// The reduced dims of an optional int[] argument (None or [] means every dim).
Dims reduction_dims(const Context& ctx, size_t i, int64_t rank);

// Re-inserts reduced dims as size 1 (for keepdim and for broadcasting a reduction back).
Value keep_dims(hlo::Builder& b, Value reduced, const Dims& full_dims, const Dims& reduced_dims);

// Smallest / largest value of a dtype (-inf / +inf for floating types).
double lowest(DType dtype);
double highest(DType dtype);

}  // namespace tpu::lowering
