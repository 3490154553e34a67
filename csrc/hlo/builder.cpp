#include "hlo/builder.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace tpu::hlo {

namespace {

std::string join_types(const std::vector<TensorType>& types) {
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) out += ", ";
    out += mlir_type(types[i]);
  }
  return out;
}

void check(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("StableHLO builder: " + message);
}

std::string dims_text(const Dims& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

// The literal inside dense<...> for one element of `dtype`.
std::string scalar_literal(double value, DType dtype) {
  char buf[64];
  switch (dtype) {
    case DType::Bool:
      return value != 0.0 ? "true" : "false";
    case DType::F32: {
      float f = static_cast<float>(value);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      std::snprintf(buf, sizeof buf, "0x%08" PRIX32, bits);
      return buf;
    }
    case DType::F64: {
      uint64_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      std::snprintf(buf, sizeof buf, "0x%016" PRIX64, bits);
      return buf;
    }
    case DType::C64:
    case DType::C128: {
      // (real, imaginary): zeros of complex storages never written (the CPU fallback's results).
      DType part = dtype == DType::C64 ? DType::F32 : DType::F64;
      return "(" + scalar_literal(value, part) + ", " + scalar_literal(0.0, part) + ")";
    }
    default:
      break;
  }
  check(is_integral(dtype), std::string("no literal form for ") + mlir_name(dtype));
  if (std::isnan(value)) value = 0;
  if (is_unsigned(dtype)) {
    if (value <= 0) return "0";
    if (value >= 18446744073709551615.0) return "18446744073709551615";
    std::snprintf(buf, sizeof buf, "%" PRIu64, static_cast<uint64_t>(value));
    return buf;
  }
  int64_t bits = itemsize(dtype) * 8;
  double lo = -std::ldexp(1.0, static_cast<int>(bits - 1));
  double hi = std::ldexp(1.0, static_cast<int>(bits - 1));
  if (value <= lo) {
    std::snprintf(buf, sizeof buf, "%" PRId64,
                  bits == 64 ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(lo));
    return buf;
  }
  if (value >= hi) {
    std::snprintf(buf, sizeof buf, "%" PRId64,
                  bits == 64 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(hi) - 1);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<int64_t>(value));
  return buf;
}

const char* compare_type(DType dtype) {
  if (is_floating(dtype) || is_complex(dtype)) return "FLOAT";
  if (dtype == DType::Bool || is_unsigned(dtype)) return "UNSIGNED";
  return "SIGNED";
}

}  // namespace

std::string i64_array(const Dims& values) {
  std::string out = "array<i64";
  for (size_t i = 0; i < values.size(); ++i) {
    out += i ? ", " : ": ";
    out += std::to_string(values[i]);
  }
  return out + ">";
}

std::string i64_list(const Dims& values) { return dims_text(values); }

Builder::Builder() { blocks_.emplace_back(); }

Value Builder::new_value(const TensorType& type, std::string name) {
  Value v{static_cast<int32_t>(types_.size())};
  types_.push_back(type);
  names_.push_back(std::move(name));
  return v;
}

Value Builder::parameter(const TensorType& type) {
  check(current_block_ == 0, "parameters belong to @main");
  Value v = new_value(type, "%v" + std::to_string(next_name_++));
  blocks_[0].arguments.push_back(v);
  return v;
}

const TensorType& Builder::type(Value v) const {
  check(v.valid() && v.id < static_cast<int32_t>(types_.size()), "invalid value");
  return types_[v.id];
}

int64_t Builder::total_elements() const {
  int64_t n = 0;
  for (const TensorType& type : types_) n += numel(type.dims);
  return n;
}

int64_t Builder::num_ops() const {
  int64_t n = 0;
  for (const auto& block : blocks_) n += static_cast<int64_t>(block.ops.size());
  return n;
}

std::vector<Value> Builder::op(const std::string& name, const std::vector<Value>& operands,
                               const std::vector<TensorType>& results,
                               const std::string& attributes,
                               const std::vector<RegionRef>& regions) {
  for (Value v : operands) type(v);  // validates
  Operation operation{name, operands, {}, attributes, regions};
  std::string base = "%v" + std::to_string(next_name_++);
  for (size_t i = 0; i < results.size(); ++i) {
    std::string value_name = results.size() == 1 ? base : base + "#" + std::to_string(i);
    operation.results.push_back(new_value(results[i], value_name));
  }
  blocks_[current_block_].ops.push_back(std::move(operation));
  return blocks_[current_block_].ops.back().results;
}

RegionRef Builder::region(const std::vector<TensorType>& arg_types, const RegionBody& body) {
  int32_t saved = current_block_;
  blocks_.emplace_back();
  int32_t block = static_cast<int32_t>(blocks_.size()) - 1;
  current_block_ = block;
  std::vector<Value> args;
  for (const auto& t : arg_types) {
    Value v = new_value(t, "%v" + std::to_string(next_name_++));
    blocks_[block].arguments.push_back(v);
    args.push_back(v);
  }
  std::vector<Value> yielded = body(*this, args);
  op("stablehlo.return", yielded, {});
  current_block_ = saved;
  return RegionRef{block};
}

Value Builder::constant(double value, DType dtype) {
  if (dtype == DType::F16 || dtype == DType::BF16) return convert(constant(value, DType::F32), dtype);
  TensorType t{dtype, {}};
  return op1("stablehlo.constant", {}, t,
             "value = dense<" + scalar_literal(value, dtype) + "> : " + mlir_type(t));
}

Value Builder::full(double value, const TensorType& type) {
  Value scalar = constant(value, type.dtype);
  if (type.dims.empty()) return scalar;
  return broadcast_in_dim(scalar, type.dims, {});
}

Value Builder::iota(const TensorType& type, int64_t dimension) {
  return op1("stablehlo.iota", {}, type, "iota_dimension = " + std::to_string(dimension) + " : i64");
}

Value Builder::unary(const std::string& name, Value x) { return op1(name, {x}, type(x)); }

Value Builder::binary(const std::string& name, Value a, Value b) {
  check(type(a) == type(b), name + " operands differ: " + mlir_type(type(a)) + " vs " +
                                mlir_type(type(b)));
  return op1(name, {a, b}, type(a));
}

Value Builder::compare(Value a, Value b, const char* direction) {
  check(type(a) == type(b), "compare operands differ");
  std::string attrs = std::string("comparison_direction = #stablehlo<comparison_direction ") +
                      direction + ">, compare_type = #stablehlo<comparison_type " +
                      compare_type(dtype(a)) + ">";
  return op1("stablehlo.compare", {a, b}, TensorType{DType::Bool, dims(a)}, attrs);
}

Value Builder::select(Value pred, Value on_true, Value on_false) {
  check(type(on_true) == type(on_false), "select branches differ");
  return op1("stablehlo.select", {pred, on_true, on_false}, type(on_true));
}

Value Builder::convert(Value x, DType to) {
  if (dtype(x) == to) return x;
  if (to == DType::Bool) {
    // Conversion to i1 must mean "!= 0", which stablehlo.convert does not promise for floats.
    return compare(x, zeros(type(x)), "NE");
  }
  return op1("stablehlo.convert", {x}, TensorType{to, dims(x)});
}

Value Builder::bitcast_convert(Value x, DType to) {
  if (dtype(x) == to) return x;
  check(itemsize(dtype(x)) == itemsize(to), "bitcast between different widths");
  return op1("stablehlo.bitcast_convert", {x}, TensorType{to, dims(x)});
}

Value Builder::reshape(Value x, const Dims& new_dims) {
  if (dims(x) == new_dims) return x;
  check(numel(dims(x)) == numel(new_dims), "reshape changes the element count");
  return op1("stablehlo.reshape", {x}, TensorType{dtype(x), new_dims});
}

Value Builder::broadcast_in_dim(Value x, const Dims& out_dims, const Dims& mapping) {
  check(static_cast<int64_t>(mapping.size()) == rank(x), "broadcast mapping rank");
  if (out_dims == dims(x)) {
    bool identity = true;
    for (size_t i = 0; i < mapping.size(); ++i) identity &= mapping[i] == static_cast<int64_t>(i);
    if (identity) return x;
  }
  return op1("stablehlo.broadcast_in_dim", {x}, TensorType{dtype(x), out_dims},
             "broadcast_dimensions = " + i64_array(mapping));
}

Value Builder::broadcast_to(Value x, const Dims& out_dims) {
  const Dims& in = dims(x);
  check(in.size() <= out_dims.size(), "broadcast to a lower rank");
  if (in == out_dims) return x;
  size_t lead = out_dims.size() - in.size();
  // Size-1 dims that are expanded must be squeezed first: broadcast_in_dim allows 1 -> n though,
  // so a direct mapping suffices.
  Dims mapping;
  for (size_t i = 0; i < in.size(); ++i) {
    check(in[i] == 1 || in[i] == out_dims[lead + i],
          "cannot broadcast " + dims_text(in) + " to " + dims_text(out_dims));
    mapping.push_back(static_cast<int64_t>(lead + i));
  }
  return broadcast_in_dim(x, out_dims, mapping);
}

Value Builder::transpose(Value x, const Dims& permutation) {
  bool identity = true;
  Dims out;
  for (size_t i = 0; i < permutation.size(); ++i) {
    identity &= permutation[i] == static_cast<int64_t>(i);
    out.push_back(dims(x)[permutation[i]]);
  }
  if (identity) return x;
  return op1("stablehlo.transpose", {x}, TensorType{dtype(x), out},
             "permutation = " + i64_array(permutation));
}

Value Builder::slice(Value x, const Dims& start, const Dims& limit, const Dims& strides) {
  Dims out;
  bool identity = true;
  for (size_t i = 0; i < start.size(); ++i) {
    int64_t n = limit[i] > start[i] ? (limit[i] - start[i] + strides[i] - 1) / strides[i] : 0;
    out.push_back(n);
    identity &= start[i] == 0 && limit[i] == dims(x)[i] && strides[i] == 1;
  }
  if (identity) return x;
  return op1("stablehlo.slice", {x}, TensorType{dtype(x), out},
             "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                 ", strides = " + i64_array(strides));
}

Value Builder::concatenate(const std::vector<Value>& xs, int64_t dimension) {
  check(!xs.empty(), "concatenate of nothing");
  if (xs.size() == 1) return xs[0];
  Dims out = dims(xs[0]);
  out[dimension] = 0;
  for (Value v : xs) out[dimension] += dims(v)[dimension];
  return op1("stablehlo.concatenate", xs, TensorType{dtype(xs[0]), out},
             "dimension = " + std::to_string(dimension) + " : i64");
}

Value Builder::pad(Value x, Value padding_value, const Dims& low, const Dims& high,
                   const Dims& interior) {
  Dims out = dims(x);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t n = out[i];
    out[i] = low[i] + high[i] + n + (n > 0 ? (n - 1) * interior[i] : 0);
  }
  return op1("stablehlo.pad", {x, padding_value}, TensorType{dtype(x), out},
             "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                 ", interior_padding = " + i64_array(interior));
}

Value Builder::reverse(Value x, const Dims& dimensions) {
  if (dimensions.empty()) return x;
  return op1("stablehlo.reverse", {x}, type(x), "dimensions = " + i64_array(dimensions));
}

Value Builder::dynamic_update_slice(Value operand, Value update, const std::vector<Value>& starts) {
  std::vector<Value> operands{operand, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return op1("stablehlo.dynamic_update_slice", operands, type(operand));
}

Value Builder::dynamic_slice(Value operand, const std::vector<Value>& starts, const Dims& sizes) {
  std::vector<Value> operands{operand};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return op1("stablehlo.dynamic_slice", operands, TensorType{dtype(operand), sizes},
             "slice_sizes = " + i64_array(sizes));
}

Value Builder::reduce(Value x, Value init, const Dims& dimensions, const std::string& combiner) {
  TensorType scalar{dtype(x), {}};
  RegionRef body = region({scalar, scalar}, [&](Builder& b, const std::vector<Value>& args) {
    return std::vector<Value>{b.binary(combiner, args[0], args[1])};
  });
  Dims out;
  for (int64_t i = 0; i < rank(x); ++i) {
    bool reduced = false;
    for (int64_t d : dimensions) reduced |= d == i;
    if (!reduced) out.push_back(dims(x)[i]);
  }
  return op1("stablehlo.reduce", {x, init}, TensorType{dtype(x), out},
             "dimensions = " + i64_array(dimensions), {body});
}

std::vector<Value> Builder::reduce(const std::vector<Value>& xs, const std::vector<Value>& inits,
                                   const Dims& dimensions, const RegionBody& body) {
  std::vector<TensorType> scalars;
  for (Value v : xs) scalars.push_back(TensorType{dtype(v), {}});
  std::vector<TensorType> arg_types = scalars;
  arg_types.insert(arg_types.end(), scalars.begin(), scalars.end());
  RegionRef region_ref = region(arg_types, body);
  std::vector<TensorType> results;
  for (Value v : xs) {
    Dims out;
    for (int64_t i = 0; i < rank(v); ++i) {
      bool reduced = false;
      for (int64_t d : dimensions) reduced |= d == i;
      if (!reduced) out.push_back(dims(v)[i]);
    }
    results.push_back(TensorType{dtype(v), out});
  }
  std::vector<Value> operands = xs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  return op("stablehlo.reduce", operands, results, "dimensions = " + i64_array(dimensions),
            {region_ref});
}

Value Builder::dot_general(Value lhs, Value rhs, const Dims& lhs_batch, const Dims& rhs_batch,
                           const Dims& lhs_contract, const Dims& rhs_contract, DType result_dtype) {
  Dims out;
  for (int64_t d : lhs_batch) out.push_back(dims(lhs)[d]);
  auto free_dims = [&](Value v, const Dims& batch, const Dims& contract) {
    for (int64_t i = 0; i < rank(v); ++i) {
      bool used = false;
      for (int64_t d : batch) used |= d == i;
      for (int64_t d : contract) used |= d == i;
      if (!used) out.push_back(dims(v)[i]);
    }
  };
  free_dims(lhs, lhs_batch, lhs_contract);
  free_dims(rhs, rhs_batch, rhs_contract);
  std::string numbers;
  auto field = [&](const char* name, const Dims& values) {
    if (values.empty()) return;
    if (!numbers.empty()) numbers += ", ";
    numbers += std::string(name) + " = " + dims_text(values);
  };
  field("lhs_batching_dimensions", lhs_batch);
  field("rhs_batching_dimensions", rhs_batch);
  field("lhs_contracting_dimensions", lhs_contract);
  field("rhs_contracting_dimensions", rhs_contract);
  return op1("stablehlo.dot_general", {lhs, rhs}, TensorType{result_dtype, out},
             "dot_dimension_numbers = #stablehlo.dot<" + numbers + ">");
}

Value Builder::gather(Value operand, Value indices, const GatherDims& g, const Dims& slice_sizes,
                      const Dims& result_dims) {
  std::string numbers;
  auto field = [&](const char* name, const Dims& values) {
    if (values.empty()) return;
    numbers += std::string(name) + " = " + dims_text(values) + ", ";
  };
  field("offset_dims", g.offset_dims);
  field("collapsed_slice_dims", g.collapsed_slice_dims);
  field("start_index_map", g.start_index_map);
  numbers += "index_vector_dim = " + std::to_string(g.index_vector_dim);
  return op1("stablehlo.gather", {operand, indices}, TensorType{dtype(operand), result_dims},
             "dimension_numbers = #stablehlo.gather<" + numbers +
                 ">, indices_are_sorted = false, slice_sizes = " + i64_array(slice_sizes));
}

Value Builder::scatter(Value operand, Value indices, Value updates, const ScatterDims& s,
                       const std::string& combiner) {
  TensorType scalar{dtype(operand), {}};
  RegionRef body = region({scalar, scalar}, [&](Builder& b, const std::vector<Value>& args) {
    if (combiner.empty()) return std::vector<Value>{args[1]};
    return std::vector<Value>{b.binary(combiner, args[0], args[1])};
  });
  std::string numbers;
  auto field = [&](const char* name, const Dims& values) {
    if (values.empty()) return;
    numbers += std::string(name) + " = " + dims_text(values) + ", ";
  };
  field("update_window_dims", s.update_window_dims);
  field("inserted_window_dims", s.inserted_window_dims);
  field("scatter_dims_to_operand_dims", s.scatter_dims_to_operand_dims);
  numbers += "index_vector_dim = " + std::to_string(s.index_vector_dim);
  return op1("stablehlo.scatter", {operand, indices, updates}, type(operand),
             "indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<" +
                 numbers + ">, unique_indices = false",
             {body});
}

Value Builder::random_bits(Value state, const Dims& out_dims, DType bits_dtype) {
  auto results = op("stablehlo.rng_bit_generator", {state},
                    {type(state), TensorType{bits_dtype, out_dims}},
                    "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
  return results[1];
}

void Builder::print_op(std::string& out, const Operation& operation, int indent) const {
  out.append(indent, ' ');
  if (!operation.results.empty()) {
    const std::string& first = names_[operation.results[0].id];
    if (operation.results.size() == 1) {
      out += first;
    } else {
      out += first.substr(0, first.find('#')) + ":" + std::to_string(operation.results.size());
    }
    out += " = ";
  }
  out += '"' + operation.name + "\"(";
  std::vector<TensorType> operand_types;
  for (size_t i = 0; i < operation.operands.size(); ++i) {
    if (i) out += ", ";
    out += names_[operation.operands[i].id];
    operand_types.push_back(types_[operation.operands[i].id]);
  }
  out += ")";
  if (!operation.regions.empty()) {
    out += " (";
    for (size_t r = 0; r < operation.regions.size(); ++r) {
      if (r) out += ", ";
      out += "{\n";
      print_block(out, blocks_[operation.regions[r].block], indent + 2);
      out.append(indent, ' ');
      out += "}";
    }
    out += ")";
  }
  if (!operation.attributes.empty()) out += " {" + operation.attributes + "}";
  out += " : (" + join_types(operand_types) + ") -> ";
  std::vector<TensorType> result_types;
  for (Value v : operation.results) result_types.push_back(types_[v.id]);
  if (result_types.size() == 1) {
    out += mlir_type(result_types[0]);
  } else {
    out += "(" + join_types(result_types) + ")";
  }
  out += "\n";
}

void Builder::print_block(std::string& out, const Block& block, int indent) const {
  out.append(indent - 2, ' ');
  out += "^bb0(";
  for (size_t i = 0; i < block.arguments.size(); ++i) {
    if (i) out += ", ";
    out += names_[block.arguments[i].id] + ": " + mlir_type(types_[block.arguments[i].id]);
  }
  out += "):\n";
  for (const auto& operation : block.ops) print_op(out, operation, indent);
}

std::vector<Value> Builder::unreshaped(const std::vector<Value>& results) const {
  std::vector<int32_t> source(types_.size(), -1);  // value id -> the value it reshapes
  for (const Operation& operation : blocks_[0].ops) {
    if (operation.name == "stablehlo.reshape") source[operation.results[0].id] = operation.operands[0].id;
  }
  std::vector<Value> out;
  out.reserve(results.size());
  for (Value v : results) out.push_back(source[v.id] >= 0 ? Value{source[v.id]} : v);
  return out;
}

std::string Builder::module_text(const std::vector<Value>& results, int64_t num_replicas,
                                 const std::vector<int32_t>& result_of_parameter) const {
  std::string out = "module @torch_tpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = " +
                    std::to_string(num_replicas) + " : i32} {\n  func.func public @main(";
  const Block& main = blocks_[0];
  for (size_t i = 0; i < main.arguments.size(); ++i) {
    if (i) out += ", ";
    out += names_[main.arguments[i].id] + ": " + mlir_type(types_[main.arguments[i].id]);
    int32_t aliased = i < result_of_parameter.size() ? result_of_parameter[i] : -1;
    if (aliased >= 0) {
      // The same bytes: a result may come back in its value's own shape (unreshaped).
      check(aliased < static_cast<int32_t>(results.size()) && dtype(results[aliased]) == dtype(main.arguments[i]) &&
                numel(dims(results[aliased])) == numel(dims(main.arguments[i])),
            "an aliased parameter and its result must hold the same elements");
      out += " {tf.aliasing_output = " + std::to_string(aliased) + " : i32}";
    }
  }
  std::vector<TensorType> result_types;
  for (Value v : results) result_types.push_back(type(v));
  out += ") -> (" + join_types(result_types) + ") {\n";
  for (const auto& operation : main.ops) print_op(out, operation, 4);
  out += "    func.return";
  for (size_t i = 0; i < results.size(); ++i) {
    out += i ? ", " : " ";
    out += names_[results[i].id];
  }
  if (!results.empty()) out += " : " + join_types(result_types);
  out += "\n  }\n}\n";
  return out;
}

}  // namespace tpu::hlo
