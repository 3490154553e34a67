// Small building blocks shared by the lowerings: dtype rules, broadcasting, dims, results.
#pragma once

#include <initializer_list>
#include <optional>
#include <utility>

#include "lowering/registry.h"

namespace tpu::lowering {

// PyTorch's result_type over tensors and numbers: dimensioned tensors decide the dtype; weak
// operands (numbers, 0-dim tensors) only lift the category bool < integral < floating.
DType promote(const Context& ctx, std::initializer_list<size_t> arg_indices);
DType promote_types(DType a, DType b);  // torch.promote_types

// The dtype PyTorch's CPU kernels compute and accumulate in: f16 and bf16 work in f32 and round
// once at the end; every other dtype works in itself.
DType accumulation_type(DType dtype);
// The dtype of a complex dtype's real and imaginary parts (complex64 -> f32), and back.
DType complex_part_dtype(DType complex);
DType complex_dtype_of_parts(DType part);
// (re, -im) of a complex value; a real one as it is.
Value conjugate(hlo::Builder& b, Value z);

// The value of args[i] converted to `dtype` and broadcast to `dims`.
Value operand_as(Context& ctx, size_t i, DType dtype, const Dims& dims);
// `x` converted to `dtype` and broadcast to `dims`.
Value cast_to(hlo::Builder& b, Value x, DType dtype, const Dims& dims);
// `v` in the dtype and shape of result `i` (keepdim and rank-0 results are reshapes).
Value as_output(Context& ctx, Value v, size_t i = 0);

// Wraps a possibly negative dim into [0, rank); rank 0 accepts -1 and 0.
int64_t wrap_dim(int64_t dim, int64_t rank);
// The reduced dims of an optional int[] argument (None or [] means every dim).
Dims reduction_dims(const Context& ctx, size_t i, int64_t rank);
// 0, 1, ..., rank - 1.
Dims all_dims(int64_t rank);
// Every dim of a rank-`rank` tensor but `skipped`.
Dims all_but(int64_t rank, int64_t skipped);
// How many elements of `shape` lie along `dims`.
int64_t count_over(const Dims& shape, const Dims& dims);
// numpy-style broadcast of two shapes.
Dims broadcast_shape(const Dims& a, const Dims& b);

// Rank-0 values become [1] so that a dim argument of 0 or -1 has a dim to name.
Value at_least_1d(hlo::Builder& b, Value x);

// The sum (mean) of `x` over `dims`, in x's dtype; no dims leaves x as it is.
Value sum_over(hlo::Builder& b, Value x, const Dims& dims);
Value mean_over(hlo::Builder& b, Value x, const Dims& dims);
// Re-inserts reduced dims as size 1 (for keepdim and for broadcasting a reduction back).
Value keep_dims(hlo::Builder& b, Value reduced, const Dims& full_dims, const Dims& reduced_dims);
// A value reduced over `dims` of `full`, broadcast back to `full`.
Value expand_back(hlo::Builder& b, Value reduced, const Dims& full, const Dims& dims);

// x's slices along `dim` at the given positions (a 1-D integer value): positions[i] becomes
// index i of the result's `dim`.
Value gather_along(hlo::Builder& b, Value x, int64_t dim, Value positions);
// x[..., index[...], ...] along `dim`, index having x's rank (torch.take_along_dim without
// broadcasting): result element i is x at i with coordinate `dim` replaced by index[i].
Value take_along(hlo::Builder& b, Value x, int64_t dim, Value index);
// Values sorted along `dim` (stable, NaN above every number, as PyTorch sorts) with their
// original int64 positions.
std::pair<Value, Value> sort_along(hlo::Builder& b, Value x, int64_t dim, bool descending);
// The inclusive scan of x along `dim` with one StableHLO binary op ("stablehlo.add",
// "stablehlo.maximum", ...) whose identity is `init` (reductions.cpp).
Value cumulative(hlo::Builder& b, Value x, int64_t dim, const char* combiner, double init);
// target with updates' slice i added into its slice positions[i] along `dim` (the gradient of
// gather_along when target is zeros).
Value scatter_add_along(hlo::Builder& b, Value target, int64_t dim, Value positions, Value updates);

// The [*index_shape, rank] coordinates that address x[..., index, ...] along `dim` of a rank-`rank`
// x, with the other coordinates running over index's own positions (gather / scatter along a dim).
Value coordinates_along(hlo::Builder& b, Value index, int64_t dim, int64_t rank);

// A rank-0 bool: does any index lie outside [lowest, size) (other than `allowed`, such as
// nll_loss's ignore_index)? XLA clamps such indices in a gather and drops them in a scatter,
// where CPU raises; this is the flag of a checked lowering.
Value any_outside(hlo::Builder& b, Value index, int64_t lowest, int64_t size,
                  std::optional<int64_t> allowed = std::nullopt);

// For a Tensor argument of a call run at padded sizes: true at the positions within its real
// sizes, false on its padding; an invalid Value when none of its dims is padded. For lowerings
// whose padding must not act at all (index_copy's padded rows write nothing).
Value real_positions(hlo::Builder& b, const Arg& tensor, Value value);

// The dtype to compute a floating-point op of args[i] in (its accumulation type); Unsupported for
// integer tensors.
DType float_compute_type(const Context& ctx, size_t i);
// An optional per-channel tensor args[i] laid along dim `channel_dim` of `shape`, or nothing.
Value per_channel(Context& ctx, size_t i, DType dtype, const Dims& shape, int64_t channel_dim);

// True where a float is NaN (x != x).
Value is_nan(hlo::Builder& b, Value x);

// The gap between 1 and the next number of a floating dtype (float32's for any but float64).
double machine_epsilon(DType dtype);

// Smallest / largest value of a dtype (-inf / +inf for floating types).
double lowest(DType dtype);
double highest(DType dtype);

}  // namespace tpu::lowering
