// Definitions of the building blocks declared in helpers.h.
#include "lowering/helpers.h"

#include <algorithm>
#include <limits>

#include "lowering/view_access.h"

namespace tpu::lowering {

namespace {
int category(DType d) {
  if (d == DType::Bool) return 0;
  if (is_integral(d)) return 1;
  if (is_floating(d)) return 2;
  return 3;  // complex
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    // f16 + bf16 -> f32, otherwise the wider one.
    if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  if (ca == 1) {
    bool ua = is_unsigned(a), ub = is_unsigned(b);
    if (ua == ub) return itemsize(a) >= itemsize(b) ? a : b;
    DType u = ua ? a : b, s = ua ? b : a;
    if (itemsize(s) > itemsize(u)) return s;
    switch (itemsize(u)) {
      case 1: return DType::I16;
      case 2: return DType::I32;
      default: return DType::I64;
    }
  }
  return itemsize(a) >= itemsize(b) ? a : b;
}

DType promote(const Context& ctx, std::initializer_list<size_t> arg_indices) {
  bool have_strong = false, have_weak = false;
  DType strong = DType::Bool, weak = DType::Bool;
  for (size_t i : arg_indices) {
    const Arg& a = ctx.arg(i);
    if (a.kind != Arg::Kind::Tensor && a.kind != Arg::Kind::Number) continue;
    DType d = ctx.b.dtype(a.value);
    bool is_weak = a.weak || ctx.b.rank(a.value) == 0;
    if (is_weak) {
      weak = have_weak ? promote_types(weak, d) : d;
      have_weak = true;
    } else {
      strong = have_strong ? promote_types(strong, d) : d;
      have_strong = true;
    }
  }
  if (!have_strong) return weak;
  if (!have_weak || category(weak) <= category(strong)) return strong;
  // A weak operand of a higher category: PyTorch uses the default dtype of that category.
  if (category(weak) == 2) return DType::F32;
  if (category(weak) == 1) return DType::I64;
  return weak;
}

DType accumulation_type(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 ? DType::F32 : dtype;
}

DType complex_part_dtype(DType complex) { return complex == DType::C128 ? DType::F64 : DType::F32; }
DType complex_dtype_of_parts(DType part) { return part == DType::F64 ? DType::C128 : DType::C64; }

Value conjugate(hlo::Builder& b, Value z) {
  if (!is_complex(b.dtype(z))) return z;
  TensorType part{complex_part_dtype(b.dtype(z)), b.dims(z)};
  Value imag = b.op1("stablehlo.imag", {z}, part);
  Value negated = b.op1("stablehlo.negate", {imag}, part);
  return b.op1("stablehlo.complex", {b.op1("stablehlo.real", {z}, part), negated}, b.type(z));
}

Value cast_to(hlo::Builder& b, Value x, DType dtype, const Dims& dims) {
  return b.broadcast_to(b.convert(x, dtype), dims);
}

Value operand_as(Context& ctx, size_t i, DType dtype, const Dims& dims) {
  return cast_to(ctx.b, ctx.tensor(i), dtype, dims);
}

Value as_output(Context& ctx, Value v, size_t i) {
  const Output& out = ctx.outputs.at(i);
  return ctx.b.reshape(ctx.b.convert(v, out.dtype), out.dims);
}

int64_t wrap_dim(int64_t dim, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r) throw Unsupported("dim out of range");
  return dim < 0 ? dim + r : dim;
}

Dims reduction_dims(const Context& ctx, size_t i, int64_t rank) {
  Dims dims;
  if (ctx.has(i)) {
    const Arg& a = ctx.arg(i);
    if (a.kind == Arg::Kind::Int) {
      dims.push_back(a.i);
    } else {
      dims = a.ints;
    }
  }
  if (dims.empty()) return all_dims(rank);
  Dims wrapped;
  for (int64_t d : dims) {
    if (rank == 0) continue;
    int64_t w = wrap_dim(d, rank);
    if (std::find(wrapped.begin(), wrapped.end(), w) == wrapped.end()) wrapped.push_back(w);
  }
  std::sort(wrapped.begin(), wrapped.end());
  return wrapped;
}

Dims all_dims(int64_t rank) {
  Dims dims;
  for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  return dims;
}

Dims all_but(int64_t rank, int64_t skipped) {
  Dims dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != skipped) dims.push_back(d);
  }
  return dims;
}

int64_t count_over(const Dims& shape, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

Dims broadcast_shape(const Dims& a, const Dims& b) {
  Dims out = a.size() >= b.size() ? a : b;
  const Dims& shorter = a.size() >= b.size() ? b : a;
  size_t lead = out.size() - shorter.size();
  for (size_t i = 0; i < shorter.size(); ++i) {
    if (out[lead + i] == 1) out[lead + i] = shorter[i];
  }
  return out;
}

Value at_least_1d(hlo::Builder& b, Value x) { return b.rank(x) == 0 ? b.reshape(x, {1}) : x; }

Value sum_over(hlo::Builder& b, Value x, const Dims& dims) {
  if (dims.empty()) return x;
  return b.reduce(x, b.constant(0, b.dtype(x)), dims, "stablehlo.add");
}

Value mean_over(hlo::Builder& b, Value x, const Dims& dims) {
  Value sum = sum_over(b, x, dims);
  return b.div(sum, b.full(static_cast<double>(count_over(b.dims(x), dims)), b.type(sum)));
}

Value keep_dims(hlo::Builder& b, Value reduced, const Dims& full_dims, const Dims& reduced_dims) {
  Dims shape = full_dims;
  for (int64_t d : reduced_dims) shape[d] = 1;
  return b.reshape(reduced, shape);
}

Value expand_back(hlo::Builder& b, Value reduced, const Dims& full, const Dims& dims) {
  return b.broadcast_to(keep_dims(b, reduced, full, dims), full);
}

Value real_positions(hlo::Builder& b, const Arg& tensor, Value value) {
  if (tensor.padded_dims.empty() || tensor.padded_dims[0] == 0 || tensor.runtime_sizes.empty()) return {};
  RuntimeLayout layout;
  layout.sizes = b.dims(value);
  layout.padded = tensor.padded_dims[0];
  layout.runtime_sizes = tensor.runtime_sizes[0];
  return padding_mask(b, layout);
}

Value any_outside(hlo::Builder& b, Value index, int64_t lowest, int64_t size, std::optional<int64_t> allowed) {
  if (!index.valid() || numel(b.dims(index)) == 0) return b.constant(0, DType::Bool);
  Value i = b.convert(index, DType::I64);
  TensorType type = b.type(i);
  Value bad = b.binary("stablehlo.or", b.compare(i, b.full(static_cast<double>(lowest), type), "LT"),
                       b.compare(i, b.full(static_cast<double>(size), type), "GE"));
  if (allowed) {
    bad = b.binary("stablehlo.and", bad, b.compare(i, b.full(static_cast<double>(*allowed), type), "NE"));
  }
  if (b.rank(bad) == 0) return bad;
  return b.reduce(bad, b.constant(0, DType::Bool), all_dims(b.rank(bad)), "stablehlo.or");
}

Value is_nan(hlo::Builder& b, Value x) { return b.compare(x, x, "NE"); }

double lowest(DType dtype) {
  switch (dtype) {
    case DType::Bool: return 0;
    case DType::I8: return -128;
    case DType::I16: return -32768;
    case DType::I32: return -2147483648.0;
    case DType::I64: return -9223372036854775808.0;
    case DType::U8:
    case DType::U16:
    case DType::U32:
    case DType::U64: return 0;
    default: return -std::numeric_limits<double>::infinity();
  }
}

double highest(DType dtype) {
  switch (dtype) {
    case DType::Bool: return 1;
    case DType::I8: return 127;
    case DType::I16: return 32767;
    case DType::I32: return 2147483647.0;
    case DType::I64: return 9223372036854775807.0;
    case DType::U8: return 255;
    case DType::U16: return 65535;
    case DType::U32: return 4294967295.0;
    case DType::U64: return 18446744073709551615.0;
    default: return std::numeric_limits<double>::infinity();
  }
}

Value gather_along(hlo::Builder& b, Value x, int64_t dim, Value positions) {
  int64_t rank = b.rank(x);
  int64_t count = b.dims(positions)[0];
  Dims slice = b.dims(x), result = b.dims(x);
  slice[dim] = 1;
  result[dim] = count;
  hlo::Builder::GatherDims g{all_but(rank, dim), {dim}, {dim}, 1};
  return b.gather(x, b.reshape(positions, {count, 1}), g, slice, result);
}

double machine_epsilon(DType dtype) {
  return dtype == DType::F64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
}

Value take_along(hlo::Builder& b, Value x, int64_t dim, Value index) {
  const Dims& dims = b.dims(index);
  int64_t rank = static_cast<int64_t>(dims.size());
  hlo::Builder::GatherDims g{{}, all_dims(rank), all_dims(rank), rank};
  return b.gather(x, coordinates_along(b, index, dim, rank), g, Dims(rank, 1), dims);
}

Value scatter_add_along(hlo::Builder& b, Value target, int64_t dim, Value positions, Value updates) {
  int64_t rank = b.rank(target);
  int64_t count = b.dims(positions)[0];
  hlo::Builder::ScatterDims s{all_but(rank, dim), {dim}, {dim}, 1};
  return b.scatter(target, b.reshape(positions, {count, 1}), updates, s, "stablehlo.add");
}

Value coordinates_along(hlo::Builder& b, Value index, int64_t dim, int64_t rank) {
  Dims shape = b.dims(index);
  Dims column = shape;
  column.push_back(1);
  std::vector<Value> coordinates;
  for (int64_t d = 0; d < rank; ++d) {
    Value c = d == dim ? b.convert(index, DType::I64) : b.iota({DType::I64, shape}, d);
    coordinates.push_back(b.reshape(c, column));
  }
  return b.concatenate(coordinates, rank);
}

DType float_compute_type(const Context& ctx, size_t i) {
  DType dtype = ctx.b.dtype(ctx.tensor(i));
  if (!is_floating(dtype)) throw Unsupported(ctx.op + ": " + mlir_name(dtype) + " is not lowered");
  return accumulation_type(dtype);
}

Value per_channel(Context& ctx, size_t i, DType dtype, const Dims& shape, int64_t channel_dim) {
  if (!ctx.has(i)) return {};
  Value v = ctx.b.convert(ctx.tensor(i), dtype);
  return ctx.b.broadcast_in_dim(ctx.b.reshape(v, {numel(ctx.b.dims(v))}), shape, {channel_dim});
}

}  // namespace tpu::lowering
