// The one lowering registry: ATen op name -> function that emits StableHLO for it.
//
// Eager ops (strict, debug), fused graphs and compiled FX graphs all reach an op's lowering
// through here, so each op's semantics are written once. A lowering sees the op's arguments in
// schema order (out= arguments removed), already turned into SSA values or static attributes, and
// the dtype and shape of each result as PyTorch's meta function computed them. It returns one
// value per result, in the result's dtype and shape; the executor writes them into storages.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "hlo/builder.h"

namespace tpu::lowering {

using hlo::Value;

struct Arg {
  enum class Kind : uint8_t {
    None,        // an optional argument that was not given
    Tensor,      // value: the tensor's logical (view) value
    TensorList,  // values: one per entry; an invalid Value stands for a None entry (Tensor?[])
    Number,      // value: rank-0 runtime argument (Scalar, float, 0-dim CPU tensor)
    NumberList,  // values: one rank-0 runtime argument per entry (Scalar[]: a foreach op's scalars)
    Int,         // i (also SymInt)
    IntList,     // ints
    DoubleList,  // doubles (static, e.g. upsampling scales)
    Bool,        // b
    String,      // s
    ScalarType,  // dtype
  };
  Kind kind = Kind::None;
  Value value;
  std::vector<Value> values;
  // A Number, or a 0-dim tensor: in PyTorch's type promotion it only lifts the category
  // (bool < integer < floating), never the width, of the dimensioned operands.
  bool weak = false;
  // A Tensor whose view is row-major contiguous (PyTorch's is_contiguous()). The strides are part
  // of the program's key; a few ops' results depend on it as CPU's kernels' do (linalg.solve and
  // det factor A^T when A is contiguous, and their backward formulas expect that LU).
  bool contiguous = false;
  int64_t i = 0;
  Dims ints;
  std::vector<double> doubles;
  bool b = false;
  std::string s;
  DType dtype = DType::F32;
  // When the op runs at padded sizes (lowering/padding_rules.h): per tensor (one per entry of a
  // TensorList), which dims are padded and every dim's real size as a rank-0 i64 value. Only
  // lowerings whose results move with a padded size (cat along it) need them.
  std::vector<uint64_t> padded_dims;
  std::vector<std::vector<Value>> runtime_sizes;
  // Filled by the ATen layer, used by the executor: which tensor / number of the call this is
  // (slots: of each entry of a TensorList or NumberList).
  int32_t slot = -1;
  std::vector<int32_t> slots;

  bool is_none() const { return kind == Kind::None; }
};

struct Output {
  DType dtype;
  Dims dims;
};

struct Context {
  hlo::Builder& b;
  std::string op;        // schema name without "aten::", e.g. "add_" or "add"
  std::string overload;  // e.g. "Tensor", "Scalar", "out", ""
  std::vector<Arg> args;
  std::vector<Output> outputs;
  Value rng_state;  // ui64[2], only for lowerings registered as random

  const Arg& arg(size_t i) const;
  Value tensor(size_t i) const;  // throws Unsupported unless args[i] is a Tensor or Number
  int64_t int_arg(size_t i, int64_t fallback) const;  // Int, or fallback when None / missing
  bool bool_arg(size_t i, bool fallback) const;
  bool has(size_t i) const { return i < args.size() && !args[i].is_none(); }
  TensorType out_type(size_t i = 0) const { return {outputs.at(i).dtype, outputs.at(i).dims}; }
};

using Lowering = std::vector<Value> (*)(Context&);

struct Entry {
  Lowering fn = nullptr;
  bool random = false;  // consumes the generator: gets rng_state
  // Returns one result more than the op has: a rank-0 bool, true when the call's data was invalid
  // in a way only the device can see (an index out of range). XLA clamps such indices instead of
  // failing, so the ATen layer reads this flag (at the op in debug mode, at the next sync point
  // otherwise) and raises what CPU raises.
  bool checked = false;
};

// Thrown by a lowering for an argument combination it does not handle; the ATen layer then runs
// the op through the counted CPU fallback instead.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void register_lowering(const std::string& name, Lowering fn, bool random = false, bool checked = false);
// Looks up `name` ("add_"), then the name without a trailing underscore ("add").
const Entry* find_lowering(const std::string& name);
std::vector<std::string> lowered_op_names();

struct Registrar {
  Registrar(const char* name, Lowering fn, bool random = false, bool checked = false) {
    register_lowering(name, fn, random, checked);
  }
};

}  // namespace tpu::lowering

#define TPU_LOWERING_CAT2(a, b) a##b
#define TPU_LOWERING_CAT(a, b) TPU_LOWERING_CAT2(a, b)
// TPU_LOWERING("add", lower_add) registers lower_add at static-initialisation time.
#define TPU_LOWERING(name, fn) \
  static ::tpu::lowering::Registrar TPU_LOWERING_CAT(tpu_lowering_, __COUNTER__)(name, fn)
#define TPU_RANDOM_LOWERING(name, fn) \
  static ::tpu::lowering::Registrar TPU_LOWERING_CAT(tpu_lowering_, __COUNTER__)(name, fn, true)
// A lowering that returns the error flag of Entry::checked after the op's results.
#define TPU_CHECKED_LOWERING(name, fn) \
  static ::tpu::lowering::Registrar TPU_LOWERING_CAT(tpu_lowering_, __COUNTER__)(name, fn, false, true)
