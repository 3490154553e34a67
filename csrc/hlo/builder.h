// StableHLO builder: typed SSA values and a deterministic printer of MLIR text.
//
// Every op is printed in MLIR's generic form ("stablehlo.add"(%a, %b) : (...) -> ...), which
// keeps the printer one small routine and the output stable across StableHLO releases. Names are
// assigned in creation order, so the same sequence of builder calls always prints the same text.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "hlo/types.h"

namespace tpu::hlo {

struct Value {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};

// A block of a region (the body of a reduce, scatter, sort...). Built through Builder::region.
struct RegionRef {
  int32_t block = -1;
};

class Builder {
 public:
  Builder();

  Value parameter(const TensorType& type);
  const TensorType& type(Value v) const;
  DType dtype(Value v) const { return type(v).dtype; }
  const Dims& dims(Value v) const { return type(v).dims; }
  int64_t rank(Value v) const { return static_cast<int64_t>(dims(v).size()); }

  // The one primitive every helper goes through. `attributes` is the text between the braces of
  // the generic form, e.g. "dimensions = array<i64: 1>".
  std::vector<Value> op(const std::string& name, const std::vector<Value>& operands,
                        const std::vector<TensorType>& results, const std::string& attributes = "",
                        const std::vector<RegionRef>& regions = {});
  Value op1(const std::string& name, const std::vector<Value>& operands, const TensorType& result,
            const std::string& attributes = "", const std::vector<RegionRef>& regions = {}) {
    return op(name, operands, {result}, attributes, regions)[0];
  }

  // Builds a single-block region whose arguments have `arg_types`; `body` returns the values the
  // block yields with stablehlo.return.
  using RegionBody = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;
  RegionRef region(const std::vector<TensorType>& arg_types, const RegionBody& body);

  // Constants. Floats are printed as exact bit patterns; f16/bf16 go through f32 + convert.
  Value constant(double value, DType dtype);       // rank 0
  Value full(double value, const TensorType& type);  // splat
  Value zeros(const TensorType& type) { return full(0.0, type); }
  Value iota(const TensorType& type, int64_t dimension);

  // Elementwise.
  Value unary(const std::string& name, Value x);  // e.g. "stablehlo.exponential"
  Value binary(const std::string& name, Value a, Value b);  // operands of equal type
  Value add(Value a, Value b) { return binary("stablehlo.add", a, b); }
  Value sub(Value a, Value b) { return binary("stablehlo.subtract", a, b); }
  Value mul(Value a, Value b) { return binary("stablehlo.multiply", a, b); }
  Value div(Value a, Value b) { return binary("stablehlo.divide", a, b); }
  Value max(Value a, Value b) { return binary("stablehlo.maximum", a, b); }
  Value min(Value a, Value b) { return binary("stablehlo.minimum", a, b); }
  // direction: EQ NE LT LE GT GE. The comparison type follows the operands' dtype.
  Value compare(Value a, Value b, const char* direction);
  Value select(Value pred, Value on_true, Value on_false);
  Value convert(Value x, DType to);  // no-op when already `to`
  Value bitcast_convert(Value x, DType to);

  // Shapes.
  Value reshape(Value x, const Dims& dims);  // no-op when equal
  Value broadcast_in_dim(Value x, const Dims& out_dims, const Dims& mapping);
  Value broadcast_to(Value x, const Dims& out_dims);  // numpy-style trailing alignment
  Value transpose(Value x, const Dims& permutation);  // no-op for the identity
  Value slice(Value x, const Dims& start, const Dims& limit, const Dims& strides);
  Value concatenate(const std::vector<Value>& xs, int64_t dimension);
  Value pad(Value x, Value padding_value, const Dims& low, const Dims& high, const Dims& interior);
  Value reverse(Value x, const Dims& dimensions);
  Value dynamic_update_slice(Value operand, Value update, const std::vector<Value>& starts);
  // `sizes` elements from `starts` (rank-0 integers; clamped so that the slice stays inside).
  Value dynamic_slice(Value operand, const std::vector<Value>& starts, const Dims& sizes);

  // Reductions over `dimensions` with a body that is one binary op ("stablehlo.add", ...).
  Value reduce(Value x, Value init, const Dims& dimensions, const std::string& combiner);
  // Variadic reduce with an arbitrary body: body args are (acc_0..acc_n-1, x_0..x_n-1).
  std::vector<Value> reduce(const std::vector<Value>& xs, const std::vector<Value>& inits,
                            const Dims& dimensions, const RegionBody& body);

  Value dot_general(Value lhs, Value rhs, const Dims& lhs_batch, const Dims& rhs_batch,
                    const Dims& lhs_contract, const Dims& rhs_contract, DType result_dtype);

  // Gathers/scatters along leading dims with an explicit index vector dimension. See the
  // StableHLO spec for the meaning of each dimension list.
  struct GatherDims {
    Dims offset_dims, collapsed_slice_dims, start_index_map;
    int64_t index_vector_dim = 0;
  };
  Value gather(Value operand, Value indices, const GatherDims& dims, const Dims& slice_sizes,
               const Dims& result_dims);
  struct ScatterDims {
    Dims update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
    int64_t index_vector_dim = 0;
  };
  // combiner empty: replace; otherwise a binary op name such as "stablehlo.add".
  Value scatter(Value operand, Value indices, Value updates, const ScatterDims& dims,
                const std::string& combiner);

  // Counter-based random bits (stablehlo.rng_bit_generator, THREE_FRY) from a ui64[2] state.
  Value random_bits(Value state, const Dims& dims, DType bits_dtype);

  // The whole module, with `results` returned from @main in order; `num_replicas` > 1 for a
  // program whose replicas run together (collectives).
  // `result_of_parameter[i]` >= 0 lets the program write that result into @main's parameter i's
  // buffer (tf.aliasing_output: the caller donates the buffer); both hold the same elements.
  std::string module_text(const std::vector<Value>& results, int64_t num_replicas = 1,
                          const std::vector<int32_t>& result_of_parameter = {}) const;
  // Each of `results` that is a reshape of another value of @main replaced by that value. A
  // caller that reads a result as bytes can return it in any shape with the same elements, and
  // should: XLA fuses a producer into each consumer it can, so a value that is both returned
  // through a reshape and read by later ops (a saved activation that also feeds a product) would
  // be computed once per consumer; the return itself takes no fusion.
  std::vector<Value> unreshaped(const std::vector<Value>& results) const;

  int64_t num_ops() const;
  // Elements of every value built so far: a measure of what one run of the program computes.
  int64_t total_elements() const;

 private:
  struct Operation {
    std::string name;
    std::vector<Value> operands;
    std::vector<Value> results;
    std::string attributes;
    std::vector<RegionRef> regions;
  };
  struct Block {
    std::vector<Value> arguments;
    std::vector<Operation> ops;
  };

  Value new_value(const TensorType& type, std::string name);
  void print_block(std::string& out, const Block& block, int indent) const;
  void print_op(std::string& out, const Operation& op, int indent) const;

  // A deque, so the references type() and dims() hand out survive the creation of new values.
  std::deque<TensorType> types_;
  std::vector<std::string> names_;
  std::vector<Block> blocks_;  // blocks_[0] is @main's body
  int32_t current_block_ = 0;
  int32_t next_name_ = 0;
};

// "array<i64: 1, 2>"
std::string i64_array(const Dims& values);
// "[1, 2]"
std::string i64_list(const Dims& values);

}  // namespace tpu::hlo
