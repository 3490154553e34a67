#include "lowering/registry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "lowering/helpers.h"

namespace tpu::lowering {

namespace {
std::unordered_map<std::string, Entry>& table() {
  static std::unordered_map<std::string, Entry> entries;
  return entries;
}
}  // namespace

void register_lowering(const std::string& name, Lowering fn, bool random) {
  table()[name] = Entry{fn, random};
}

const Entry* find_lowering(const std::string& name) {
  auto& entries = table();
  auto it = entries.find(name);
  if (it != entries.end()) return &it->second;
  if (!name.empty() && name.back() == '_') {
    it = entries.find(name.substr(0, name.size() - 1));
    if (it != entries.end()) return &it->second;
  }
  return nullptr;
}

std::vector<std::string> lowered_op_names() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : table()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

const Arg& Context::arg(size_t i) const {
  if (i >= args.size()) throw Unsupported(op + ": missing argument " + std::to_string(i));
  return args[i];
}

Value Context::tensor(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::Tensor && a.kind != Arg::Kind::Number) {
    throw Unsupported(op + ": argument " + std::to_string(i) + " is not a tensor");
  }
  return a.value;
}

int64_t Context::int_arg(size_t i, int64_t fallback) const {
  if (i >= args.size() || args[i].is_none()) return fallback;
  if (args[i].kind == Arg::Kind::Bool) return args[i].b;
  if (args[i].kind != Arg::Kind::Int) throw Unsupported(op + ": argument is not an int");
  return args[i].i;
}

bool Context::bool_arg(size_t i, bool fallback) const {
  if (i >= args.size() || args[i].is_none()) return fallback;
  if (args[i].kind == Arg::Kind::Int) return args[i].i != 0;
  if (args[i].kind != Arg::Kind::Bool) throw Unsupported(op + ": argument is not a bool");
  return args[i].b;
}

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

Value cast_to(hlo::Builder& b, Value x, DType dtype, const Dims& dims) {
  return b.broadcast_to(b.convert(x, dtype), dims);
}

Value operand_as(Context& ctx, size_t i, DType dtype, const Dims& dims) {
  return cast_to(ctx.b, ctx.tensor(i), dtype, dims);
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
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  Dims wrapped;
  for (int64_t d : dims) {
    if (rank == 0) continue;
    int64_t w = wrap_dim(d, rank);
    if (std::find(wrapped.begin(), wrapped.end(), w) == wrapped.end()) wrapped.push_back(w);
  }
  std::sort(wrapped.begin(), wrapped.end());
  return wrapped;
}

Value keep_dims(hlo::Builder& b, Value reduced, const Dims& full_dims, const Dims& reduced_dims) {
  Dims shape = full_dims;
  for (int64_t d : reduced_dims) shape[d] = 1;
  return b.reshape(reduced, shape);
}

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

}  // namespace tpu::lowering
