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
  DType accumulate = accumulation_type(operand);
  // XLA:CPU runs some batched f16 / bf16 products (bmm.out in _trilinear's backward) in a kernel
  // without mixed precision ("Unsupported element type for DotThunk"): the operands widen first,
  // exactly, which changes no result. A TPU's f32 product at default precision is as fast.
  if (!c.lhs_batch.empty() && accumulate != operand && is_floating(operand)) operand = accumulate;
  return b.dot_general(b.convert(a, operand), b.convert(m, operand), c.lhs_batch, c.rhs_batch,
                       c.lhs_contract, c.rhs_contract, accumulate);
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

// The p-norm over the last dim of |d|: a runtime p, with 0 (count of non-zeros) and inf (max)
// selected in as linalg_vector_norm does.
Value p_norm_last(hlo::Builder& b, Value d, Value p) {
  int64_t last = b.rank(d) - 1;
  DType dtype = b.dtype(d);
  Value magnitude = b.unary("stablehlo.abs", d);
  Value powered = b.binary("stablehlo.power", magnitude, b.broadcast_to(p, b.dims(magnitude)));
  Value sum = sum_over(b, powered, {last});
  Dims reduced = b.dims(sum);
  Value general = b.binary("stablehlo.power", sum, b.broadcast_to(b.div(b.constant(1, dtype), p), reduced));
  Value zero_norm = sum_over(b, b.convert(b.convert(magnitude, DType::Bool), dtype), {last});
  Value inf_norm = b.reduce(magnitude, b.constant(0, dtype), {last}, "stablehlo.maximum");
  Value result = b.select(b.broadcast_to(b.compare(p, b.constant(0, dtype), "EQ"), reduced), zero_norm, general);
  return b.select(b.broadcast_to(b.compare(p, b.constant(highest(dtype), dtype), "EQ"), reduced), inf_norm, result);
}

// _cdist_forward(x1 [..., P, M], x2 [..., R, M], p, compute_mode) -> [..., P, R]
std::vector<Value> lower_cdist(Context& ctx) {
  hlo::Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  if (!is_floating(out.dtype)) throw Unsupported(ctx.op + ": dtype");
  DType acc = accumulation_type(out.dtype);
  Value x1 = b.convert(ctx.tensor(0), acc), x2 = b.convert(ctx.tensor(1), acc);
  Dims d1 = b.dims(x1), d2 = b.dims(x2);
  int64_t m = d1.back();
  Dims pairs = out.dims;  // [..., P, R]
  if (numel(pairs) == 0) return {b.zeros(ctx.out_type())};
  pairs.push_back(m);
  int64_t r = static_cast<int64_t>(pairs.size());
  Dims batch(out.dims.begin(), out.dims.end() - 2);
  auto spread = [&](Value x, int64_t kept) {
    Dims shape = batch;
    shape.push_back(b.dims(x)[b.rank(x) - 2]);
    shape.push_back(m);
    x = b.broadcast_to(x, shape);
    Dims mapping = all_dims(r - 3);
    mapping.push_back(kept);
    mapping.push_back(r - 1);
    return b.broadcast_in_dim(x, pairs, mapping);
  };
  Value diff = b.sub(spread(x1, r - 3), spread(x2, r - 2));
  if (m == 0) return {b.zeros(ctx.out_type())};
  return {as_output(ctx, p_norm_last(b, diff, b.convert(ctx.tensor(2), acc)))};
}

// _pdist_forward(self [N, M], p) -> the N (N - 1) / 2 distances of distinct rows i < j, row-major.
std::vector<Value> lower_pdist(Context& ctx) {
  hlo::Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  if (!is_floating(out.dtype)) throw Unsupported(ctx.op + ": dtype");
  DType acc = accumulation_type(out.dtype);
  Value x = b.convert(ctx.tensor(0), acc);
  int64_t n = b.dims(x)[0], m = b.dims(x)[1];
  int64_t count = n * (n - 1) / 2;
  if (count == 0) return {b.zeros(ctx.out_type())};
  if (m == 0) return {b.zeros(ctx.out_type())};
  // The row pairs, as constants built from iotas: row i's pairs start at i n - i (i + 1) / 2.
  TensorType it{DType::I64, {count}};
  Value k = b.iota(it, 0);
  Value first = b.zeros(it), second = b.zeros(it);
  for (int64_t i = 0; i + 1 < n; ++i) {
    double start = static_cast<double>(i * n - i * (i + 1) / 2);
    double next = start + static_cast<double>(n - 1 - i);
    Value mine = b.binary("stablehlo.and", b.compare(k, b.full(start, it), "GE"), b.compare(k, b.full(next, it), "LT"));
    first = b.select(mine, b.full(static_cast<double>(i), it), first);
    second = b.select(mine, b.add(b.sub(k, b.full(start, it)), b.full(static_cast<double>(i + 1), it)), second);
  }
  hlo::Builder::GatherDims g{{1}, {0}, {0}, 1};
  Value a = b.gather(x, b.reshape(first, {count, 1}), g, {1, m}, {count, m});
  Value c = b.gather(x, b.reshape(second, {count, 1}), g, {1, m}, {count, m});
  return {as_output(ctx, p_norm_last(b, b.sub(a, c), b.convert(ctx.tensor(1), acc)))};
}
}  // namespace

TPU_LOWERING("mm", lower_mm);
TPU_LOWERING("bmm", lower_bmm);
TPU_LOWERING("dot", lower_dot);
TPU_LOWERING("vdot", lower_vdot);
TPU_LOWERING("trace", lower_trace);
TPU_LOWERING("linalg_cross", lower_linalg_cross);
TPU_LOWERING("_cdist_forward", lower_cdist);
TPU_LOWERING("_pdist_forward", lower_pdist);
TPU_LOWERING("mv", lower_mv);
TPU_LOWERING("addmm", lower_addmm);
TPU_LOWERING("baddbmm", lower_baddbmm);
TPU_LOWERING("addbmm", lower_addbmm);
TPU_LOWERING("addmv", lower_addmv);

}  // namespace tpu::lowering
