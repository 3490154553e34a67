// Matrix products: mm, bmm, dot, mv and their scaled-accumulate forms addmm, baddbmm, addbmm,
// addmv. Half-precision products accumulate in f32 and round once at the end.
#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

struct Contraction {
  Dims lhs_batch, rhs_batch, lhs_contract, rhs_contract;
};

const Contraction kMatrixMatrix{{}, {}, {1}, {0}};        // [n,k] x [k,m]
const Contraction kBatched{{0}, {0}, {2}, {1}};           // [b,n,k] x [b,k,m]
const Contraction kBatchSummed{{}, {}, {0, 2}, {0, 1}};   // sum_b [b,n,k] x [b,k,m]
const Contraction kVectorVector{{}, {}, {0}, {0}};        // [k] x [k]
const Contraction kMatrixVector{{}, {}, {1}, {0}};        // [n,k] x [k]

// The product of args[lhs] and args[rhs] in the dtype it accumulates in.
Value product(Context& ctx, size_t lhs, size_t rhs, const Contraction& c) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(lhs), m = ctx.tensor(rhs);
  DType operand = promote_types(b.dtype(a), b.dtype(m));
  if (operand == DType::Bool) throw Unsupported(ctx.op + ": bool operands");
  return b.dot_general(b.convert(a, operand), b.convert(m, operand), c.lhs_batch, c.rhs_batch,
                       c.lhs_contract, c.rhs_contract, accumulation_type(operand));
}

// (self, a, b[, out_dtype], *, beta, alpha) -> beta * self + alpha * (a @ b). beta == 0 drops
// self entirely, NaN and inf included, as PyTorch does; beta and alpha are runtime numbers.
std::vector<Value> lower_scaled_accumulate(Context& ctx, const Contraction& c) {
  Builder& b = ctx.b;
  Value prod = product(ctx, 1, 2, c);
  TensorType type = b.type(prod);
  size_t beta_index = ctx.has(3) && ctx.arg(3).kind == Arg::Kind::ScalarType ? 4 : 3;
  auto number = [&](size_t i) {
    return ctx.has(i) ? operand_as(ctx, i, type.dtype, type.dims) : b.full(1, type);
  };
  Value beta = number(beta_index), alpha = number(beta_index + 1);
  Value self = operand_as(ctx, 0, type.dtype, type.dims);
  Value zero = b.zeros(type);
  Value scaled_self = b.select(b.compare(beta, zero, "EQ"), zero, b.mul(beta, self));
  return {as_output(ctx, b.add(scaled_self, b.mul(alpha, prod)))};
}

std::vector<Value> lower_product(Context& ctx, const Contraction& c) {
  return {as_output(ctx, product(ctx, 0, 1, c))};
}

std::vector<Value> lower_mm(Context& ctx) { return lower_product(ctx, kMatrixMatrix); }
std::vector<Value> lower_bmm(Context& ctx) { return lower_product(ctx, kBatched); }
std::vector<Value> lower_dot(Context& ctx) { return lower_product(ctx, kVectorVector); }
std::vector<Value> lower_mv(Context& ctx) { return lower_product(ctx, kMatrixVector); }
std::vector<Value> lower_addmm(Context& ctx) { return lower_scaled_accumulate(ctx, kMatrixMatrix); }
std::vector<Value> lower_baddbmm(Context& ctx) { return lower_scaled_accumulate(ctx, kBatched); }
std::vector<Value> lower_addbmm(Context& ctx) { return lower_scaled_accumulate(ctx, kBatchSummed); }
std::vector<Value> lower_addmv(Context& ctx) { return lower_scaled_accumulate(ctx, kMatrixVector); }


// vdot conjugates its first operand, which only matters for complex tensors.
std::vector<Value> lower_vdot(Context& ctx) {
  if (is_complex(ctx.outputs.at(0).dtype)) throw Unsupported("vdot of complex tensors");
  return lower_dot(ctx);
}

// trace(self): the sum of a matrix's main diagonal, in sum's result dtype.
std::vector<Value> lower_trace(Context& ctx) {
  hlo::Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType out = ctx.outputs.at(0).dtype;
  if (b.rank(x) != 2 || is_complex(out) || out == DType::Bool) throw Unsupported("trace");
  DType acc = accumulation_type(out);
  Value wide = b.convert(x, acc);
  Value diagonal = b.compare(b.iota({DType::I64, b.dims(x)}, 0), b.iota({DType::I64, b.dims(x)}, 1), "EQ");
  Value picked = b.select(diagonal, wide, b.zeros(b.type(wide)));
  return {as_output(ctx, sum_over(b, picked, {0, 1}))};
}

// linalg_cross(self, other, dim): the cross product of 3-vectors along dim.
std::vector<Value> lower_linalg_cross(Context& ctx) {
  hlo::Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  if (is_complex(out.dtype) || out.dtype == DType::Bool) throw Unsupported(ctx.op + ": dtype");
  int64_t rank = static_cast<int64_t>(out.dims.size());
  int64_t dim = wrap_dim(ctx.int_arg(2, -1), rank);
  if (out.dims[dim] != 3) throw Unsupported(ctx.op + ": dim of size 3 expected");
  Value x = operand_as(ctx, 0, out.dtype, out.dims), y = operand_as(ctx, 1, out.dtype, out.dims);
  auto part = [&](Value v, int64_t i) {
    Dims start(rank, 0), limit = out.dims, step(rank, 1);
    start[dim] = i;
    limit[dim] = i + 1;
    return b.slice(v, start, limit, step);
  };
  auto term = [&](int64_t i, int64_t j) { return b.sub(b.mul(part(x, i), part(y, j)), b.mul(part(x, j), part(y, i))); };
  return {b.concatenate({term(1, 2), term(2, 0), term(0, 1)}, dim)};
}
}  // namespace

TPU_LOWERING("mm", lower_mm);
TPU_LOWERING("bmm", lower_bmm);
TPU_LOWERING("dot", lower_dot);
TPU_LOWERING("vdot", lower_vdot);
TPU_LOWERING("trace", lower_trace);
TPU_LOWERING("linalg_cross", lower_linalg_cross);
TPU_LOWERING("mv", lower_mv);
TPU_LOWERING("addmm", lower_addmm);
TPU_LOWERING("baddbmm", lower_baddbmm);
TPU_LOWERING("addbmm", lower_addbmm);
TPU_LOWERING("addmv", lower_addmv);

}  // namespace tpu::lowering
