// Rearranging and making values: cat, channel_shuffle, constant_pad_nd, flip, roll, tril / triu,
// arange and clone.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;
using Kind = Arg::Kind;

// cat(tensors, dim): every input converted to the result dtype. Inputs without elements add
// nothing, which also drops the legacy 1-D empty tensors whatever the others' shape.
std::vector<Value> lower_cat(Context& ctx) {
  Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  if (numel(out.dims) == 0) return {b.zeros(ctx.out_type())};
  int64_t dim = wrap_dim(ctx.int_arg(1, 0), static_cast<int64_t>(out.dims.size()));
  const Arg& tensors = ctx.arg(0);
  bool moves = false;  // a part's real size along `dim` is a runtime value: so is where the next one starts
  for (uint64_t padded : tensors.padded_dims) moves |= (padded >> dim & 1) != 0;
  std::vector<Value> parts;
  std::vector<Value> lengths;
  for (size_t i = 0; i < tensors.values.size(); ++i) {
    Value v = tensors.values[i];
    if (!v.valid() || numel(b.dims(v)) == 0) continue;
    parts.push_back(b.convert(v, out.dtype));
    if (moves) lengths.push_back(tensors.runtime_sizes.at(i).at(dim));
  }
  if (!moves) {
    Value joined = b.concatenate(parts, dim);
    // Exact parts of a result padded along `dim` (its bucket is larger than their sum).
    int64_t short_by = out.dims[dim] - b.dims(joined)[dim];
    if (short_by > 0) {
      Dims high(out.dims.size(), 0);
      high[dim] = short_by;
      joined = b.pad(joined, b.constant(0, b.dtype(joined)), Dims(out.dims.size(), 0), high, Dims(out.dims.size(), 0));
    }
    return {as_output(ctx, joined)};
  }
  // Each part lands where the real elements before it end, over the padding of the one before.
  Dims room = out.dims;
  room[dim] = 0;
  for (Value part : parts) room[dim] += b.dims(part)[dim];
  room[dim] = std::max(room[dim], out.dims[dim]);
  Value placed = b.zeros({out.dtype, room});
  Value zero = b.constant(0, DType::I64), start = zero;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<Value> starts(room.size(), zero);
    starts[dim] = start;
    placed = b.dynamic_update_slice(placed, parts[i], starts);
    start = b.add(start, lengths[i]);
  }
  return {b.slice(placed, Dims(room.size(), 0), out.dims, Dims(room.size(), 1))};
}

// channel_shuffle(self, groups): channels [g, C/g] become [C/g, g].
std::vector<Value> lower_channel_shuffle(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  int64_t groups = ctx.int_arg(1, 1);
  Dims d = b.dims(x);
  if (d.size() < 2 || groups <= 0 || d[1] % groups != 0) throw Unsupported(ctx.op + ": arguments");
  Dims split = {d[0], groups, d[1] / groups};
  split.insert(split.end(), d.begin() + 2, d.end());
  Dims perm = all_dims(static_cast<int64_t>(split.size()));
  std::swap(perm[1], perm[2]);
  return {as_output(ctx, b.reshape(b.transpose(b.reshape(x, split), perm), d))};
}


// constant_pad_nd(self, pad, value): pad pairs run from the last dim backwards; negative
// amounts crop.
std::vector<Value> lower_constant_pad_nd(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  const Dims& pad = ctx.arg(1).ints;
  int64_t rank = b.rank(x);
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size()) > 2 * rank) {
    throw Unsupported(ctx.op + ": malformed pad");
  }
  Dims low(rank, 0), high(rank, 0);
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    int64_t d = rank - 1 - static_cast<int64_t>(i);
    low[d] = pad[2 * i];
    high[d] = pad[2 * i + 1];
  }
  Value fill = ctx.has(2) ? b.convert(b.reshape(ctx.tensor(2), {}), b.dtype(x))
                          : b.constant(0, b.dtype(x));
  if (numel(ctx.outputs.at(0).dims) == 0) return {b.zeros(ctx.out_type())};
  return {as_output(ctx, b.pad(x, fill, low, high, Dims(rank, 0)))};
}

// flip(self, dims)
std::vector<Value> lower_flip(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (b.rank(x) == 0) return {as_output(ctx, x)};
  Dims dims;
  for (int64_t d : ctx.arg(1).ints) dims.push_back(wrap_dim(d, b.rank(x)));
  return {as_output(ctx, b.reverse(x, dims))};
}

Value roll_dim(Builder& b, Value x, int64_t dim, int64_t shift) {
  int64_t n = b.dims(x)[dim];
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  int64_t rank = b.rank(x);
  Dims start(rank, 0), limit = b.dims(x), strides(rank, 1);
  start[dim] = n - s;
  Value tail = b.slice(x, start, limit, strides);
  start[dim] = 0;
  limit[dim] = n - s;
  Value head = b.slice(x, start, limit, strides);
  return b.concatenate({tail, head}, dim);
}

// roll(self, shifts, dims): no dims rolls the flattened tensor.
std::vector<Value> lower_roll(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  const Dims& shifts = ctx.arg(1).ints;
  const Dims& dims = ctx.has(2) ? ctx.arg(2).ints : Dims{};
  if (dims.empty()) {
    if (shifts.size() != 1) throw Unsupported(ctx.op + ": shifts without dims");
    Value flat = b.reshape(x, {numel(b.dims(x))});
    return {as_output(ctx, roll_dim(b, flat, 0, shifts[0]))};
  }
  if (shifts.size() != dims.size()) throw Unsupported(ctx.op + ": shifts and dims differ");
  for (size_t i = 0; i < dims.size(); ++i) {
    x = roll_dim(b, x, wrap_dim(dims[i], b.rank(x)), shifts[i]);
  }
  return {as_output(ctx, x)};
}

// tril / triu(self, diagonal): keep elements on one side of a diagonal of the last two dims.
std::vector<Value> triangle(Context& ctx, bool lower) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  int64_t rank = b.rank(x);
  if (rank < 2) throw Unsupported(ctx.op + ": rank < 2");
  TensorType positions{DType::I64, b.dims(x)};
  Value offset = b.sub(b.iota(positions, rank - 1), b.iota(positions, rank - 2));
  Value diagonal = b.full(static_cast<double>(ctx.int_arg(1, 0)), positions);
  Value keep = b.compare(offset, diagonal, lower ? "LE" : "GE");
  return {as_output(ctx, b.select(keep, x, b.zeros(b.type(x))))};
}

std::vector<Value> lower_tril(Context& ctx) { return triangle(ctx, true); }
std::vector<Value> lower_triu(Context& ctx) { return triangle(ctx, false); }

// arange(end), arange(start, end), arange(start, end, step): the leading numbers, with the
// length and dtype from the meta function. Floating results are computed in f64, integer ones
// in i64 with start and step truncated first, as PyTorch does.
std::vector<Value> lower_arange(Context& ctx) {
  Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  size_t numbers = 0;
  while (numbers < 3 && ctx.has(numbers) && ctx.arg(numbers).kind == Kind::Number) ++numbers;
  if (numbers == 0 || out.dims.size() != 1) throw Unsupported(ctx.op + ": unexpected arguments");
  DType compute = is_floating(out.dtype) ? DType::F64 : DType::I64;
  if (!is_floating(out.dtype) && !is_integral(out.dtype)) throw Unsupported(ctx.op + ": dtype");
  TensorType type{compute, out.dims};
  Value start = numbers >= 2 ? operand_as(ctx, 0, compute, out.dims) : b.zeros(type);
  Value step = numbers == 3 ? operand_as(ctx, 2, compute, out.dims) : b.full(1, type);
  return {as_output(ctx, b.add(start, b.mul(b.iota(type, 0), step)))};
}

// linspace(start, end, steps): CPU's formula, from each end half way (start + i step below
// steps / 2, end - (steps - 1 - i) step from there, step = (end - start) / (steps - 1)), in the
// result's type where it is f32 or f64 and in f64 truncated for integer results, as CPU's kernel.
std::vector<Value> lower_linspace(Context& ctx) {
  Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  if (out.dims.size() != 1) throw Unsupported(ctx.op + ": unexpected result");
  if (!(out.dtype == DType::F32 || out.dtype == DType::F64 || is_integral(out.dtype))) {
    throw Unsupported(ctx.op + ": dtype");  // half types: CPU rounds each step to the type
  }
  DType compute = out.dtype == DType::F32 ? DType::F32 : DType::F64;
  int64_t steps = out.dims[0];
  TensorType type{compute, out.dims};
  // CPU converts start and end to the result's type first (2.5 -> 2 for an integer result).
  Value start = b.convert(operand_as(ctx, 0, out.dtype, out.dims), compute);
  if (steps <= 1) return {as_output(ctx, start)};
  Value end = b.convert(operand_as(ctx, 1, out.dtype, out.dims), compute);
  Value step = b.div(b.sub(end, start), b.full(static_cast<double>(steps - 1), type));
  Value index = b.iota(type, 0);
  Value from_start = b.add(start, b.mul(step, index));
  Value from_end = b.sub(end, b.mul(step, b.sub(b.full(static_cast<double>(steps - 1), type), index)));
  Value first_half = b.compare(index, b.full(static_cast<double>(steps / 2), type), "LT");
  return {as_output(ctx, b.select(first_half, from_start, from_end))};
}

// eye(n, m): ones where the row equals the column, in the result's dtype and sizes.
std::vector<Value> lower_eye(Context& ctx) {
  Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  if (out.dims.size() != 2) throw Unsupported(ctx.op + ": a result that is not a matrix");
  TensorType index{DType::I64, out.dims};
  return {b.convert(b.compare(b.iota(index, 0), b.iota(index, 1), "EQ"), out.dtype)};
}

// clone(self, memory_format): the value itself; layout is the storage's business.
std::vector<Value> lower_clone(Context& ctx) { return {as_output(ctx, ctx.tensor(0))}; }

// unfold_backward(grad_in, input_sizes, dim, size, step): each window's gradient added back at the
// positions it was read from (the overlap-add istft performs). Element j of every window lands at
// j, j + step, ...: one interior-padded copy of grad_in[..., j] per window element.
std::vector<Value> lower_unfold_backward(Context& ctx) {
  Builder& b = ctx.b;
  const Output& out = ctx.outputs.at(0);
  Value grad = ctx.tensor(0);
  int64_t rank = static_cast<int64_t>(out.dims.size());
  int64_t size = ctx.int_arg(3, 0), step = ctx.int_arg(4, 0);
  if (rank == 0 || size < 1 || step < 1 || size > 1024 || b.rank(grad) != rank + 1) {
    throw Unsupported("unfold_backward with these arguments");
  }
  int64_t dim = wrap_dim(ctx.int_arg(2, 0), rank);
  int64_t length = out.dims[dim], windows = b.dims(grad)[dim];
  DType compute = accumulation_type(out.dtype);
  Value total = b.zeros(TensorType{compute, out.dims});
  if (windows == 0) return {as_output(ctx, total)};
  Dims window_dims = b.dims(grad);
  window_dims.pop_back();
  Dims start(rank + 1, 0), limit = b.dims(grad), unit(rank + 1, 1);
  Dims low(rank, 0), high(rank, 0), interior(rank, 0);
  interior[dim] = step - 1;
  Value zero = b.constant(0, compute);
  for (int64_t j = 0; j < size; ++j) {
    start[rank] = j;
    limit[rank] = j + 1;
    Value element = b.reshape(b.convert(b.slice(grad, start, limit, unit), compute), window_dims);
    low[dim] = j;
    high[dim] = length - (j + (windows - 1) * step + 1);
    total = b.add(total, b.pad(element, zero, low, high, interior));
  }
  return {as_output(ctx, total)};
}

}  // namespace

TPU_LOWERING("unfold_backward", lower_unfold_backward);
TPU_LOWERING("cat", lower_cat);
TPU_LOWERING("channel_shuffle", lower_channel_shuffle);
TPU_LOWERING("native_channel_shuffle", lower_channel_shuffle);
TPU_LOWERING("constant_pad_nd", lower_constant_pad_nd);
TPU_LOWERING("flip", lower_flip);
TPU_LOWERING("roll", lower_roll);
TPU_LOWERING("tril", lower_tril);
TPU_LOWERING("triu", lower_triu);
TPU_LOWERING("arange", lower_arange);
TPU_LOWERING("linspace", lower_linspace);
TPU_LOWERING("clone", lower_clone);
TPU_LOWERING("eye", lower_eye);

}  // namespace tpu::lowering
