#include "lowering/padding_rules.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "lowering/helpers.h"

namespace tpu::lowering {

namespace {

constexpr double kAny = std::numeric_limits<double>::quiet_NaN();
constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

enum class Rule : uint8_t {
  Independent,   // each result position depends on the same position of the operands only
  Contraction,   // sums over some positions: padding reading as 0 adds nothing
  Softmax,       // (self, dim, ...): over the padded dim, padding reads as -inf
  SoftmaxGrad,   // (grad, output, dim, ...): over the padded dim, both read as 0
  ReduceDims,    // (self, dim or dims, ...): a reduced dim may be padded only where padding can
                 // read as the reduction's identity (any: 0, all and prod: 1)
  IsIn,          // (elements, test_elements, ...): the elements may be padded, not the tests
  Scan,          // (self, dim, ...): position i depends on positions <= i
  LayerNorm,     // (input, normalized_shape, ...): only the leading dims may be padded
  LayerNormGrad, // (grad, input, normalized_shape, ...): the same, every operand reading as 0
  IndexSelect,   // (self, dim, index): the selected dim keeps its size; indices read as 0
  NllLoss,       // (self, target, weight, reduction, ignore_index): targets read as ignore_index
  NllLossGrad,   // (grad, self, target, weight, reduction, ignore_index, total_weight)
  EmbeddingGrad, // (grad, indices, num_weights, padding_idx, scale_grad_by_freq)
  IndexPutSum,   // (self, indices, values, accumulate, ...): padded indices read as 0 and add
                 // values that read as 0; only with accumulate, and self keeps its sizes
  IndexCopy,     // (self, dim, index, source): the padded rows of index and source write
                 // nothing (the lowering drops them); self keeps its sizes
  Cat,           // (tensors, dim): along a padded dim the lowering places parts at runtime offsets
};

const std::unordered_map<std::string, Rule>& rules() {
  static const std::unordered_map<std::string, Rule> table = [] {
    std::unordered_map<std::string, Rule> t;
    for (const char* op :
         {"abs", "acos", "acosh", "add", "addcdiv", "addcmul", "angle", "asin", "asinh", "atan", "atan2", "atanh",
          "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
          "ceil", "celu", "clamp", "clamp_max", "clamp_min", "clone", "copysign", "cos", "cosh", "digamma", "div",
          "elu", "elu_backward", "eq", "erf", "erfc", "erfinv", "exp", "exp2", "expm1", "fill", "floor",
          "floor_divide", "fmax", "fmin", "fmod", "frac", "ge", "gelu", "gelu_backward", "gt", "hardshrink",
          "hardshrink_backward", "hardsigmoid", "hardsigmoid_backward", "hardswish", "hardswish_backward",
          "hardtanh", "hardtanh_backward", "heaviside", "hypot", "isfinite", "isinf", "isnan", "isneginf",
          "isposinf", "le", "leaky_relu", "leaky_relu_backward", "lerp", "lgamma", "log", "log10", "log1p",
          "log2", "logaddexp", "logaddexp2", "logical_and", "logical_not", "logical_or", "logical_xor", "logit",
          "lt", "masked_fill", "maximum", "minimum", "mish", "mish_backward", "mul", "nan_to_num", "ne", "neg",
          "nextafter", "pow", "reciprocal", "relu", "relu6", "remainder", "round", "rsqrt", "rsub", "sgn",
          "sigmoid", "sigmoid_backward", "sign", "signbit", "silu", "silu_backward", "sin", "sinc", "sinh",
          "softplus", "softplus_backward", "softshrink", "softshrink_backward", "sqrt", "sub", "tan", "tanh",
          "tanh_backward", "threshold", "threshold_backward", "tril", "triu", "trunc", "where", "xlogy", "zero",
          "arange", "_tpu_copy"}) {
      t[op] = Rule::Independent;
    }
    for (const char* op : {"mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "sum", "nansum"}) {
      t[op] = Rule::Contraction;
    }
    for (const char* op : {"_softmax", "_log_softmax", "_safe_softmax"}) t[op] = Rule::Softmax;
    for (const char* op : {"_softmax_backward_data", "_log_softmax_backward_data"}) t[op] = Rule::SoftmaxGrad;
    for (const char* op : {"mean", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "var_mean",
                           "std_mean", "logsumexp", "any", "all", "prod"}) {
      t[op] = Rule::ReduceDims;
    }
    for (const char* op : {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"}) t[op] = Rule::Scan;
    t["isin"] = Rule::IsIn;
    t["native_layer_norm"] = Rule::LayerNorm;
    t["native_layer_norm_backward"] = Rule::LayerNormGrad;
    t["index_select"] = Rule::IndexSelect;
    t["nll_loss_forward"] = Rule::NllLoss;
    t["nll_loss_backward"] = Rule::NllLossGrad;
    t["embedding_dense_backward"] = Rule::EmbeddingGrad;
    // What PyTorch's decomposition of embedding_dense_backward becomes under torch.compile.
    t["index_put"] = Rule::IndexPutSum;
    t["_index_put_impl"] = Rule::IndexPutSum;
    t["index_copy"] = Rule::IndexCopy;
    t["cat"] = Rule::Cat;
    return t;
  }();
  return table;
}

using Operands = std::vector<std::vector<PaddedOperand>>;

DimMask mask_of(const Operands& operands, size_t arg) {
  DimMask all = 0;
  if (arg < operands.size()) {
    for (const PaddedOperand& t : operands[arg]) all |= t.padded;
  }
  return all;
}

DimMask bit(int64_t dim) { return dim >= 0 && dim < 64 ? DimMask{1} << dim : 0; }

// The value that adds nothing to a reduction whatever the dtype, or NaN (max's -inf has no
// integer counterpart, and a mean would count the padding).
double reduction_identity(const std::string& op) {
  if (op == "any") return 0;
  if (op == "all" || op == "prod") return 1;
  return kAny;
}

// The dims an op reduces, from its `dim` argument (an int, a list, or none for all of them).
DimMask reduced_dims(const Arg& dims, int64_t rank) {
  DimMask all = rank >= 64 ? ~DimMask{0} : (DimMask{1} << rank) - 1;
  if (dims.kind == Arg::Kind::Int) return bit(wrap_dim(dims.i, rank));
  if (dims.kind == Arg::Kind::IntList && !dims.ints.empty()) {
    DimMask m = 0;
    for (int64_t d : dims.ints) m |= bit(wrap_dim(d, rank));
    return m;
  }
  return all;
}

// Dims [first, rank) as a mask.
DimMask trailing_from(int64_t first, int64_t rank) {
  DimMask m = 0;
  for (int64_t d = std::max<int64_t>(first, 0); d < rank && d < 64; ++d) m |= bit(d);
  return m;
}

}  // namespace

std::optional<std::vector<double>> padding_fills(const std::string& op, const std::vector<Arg>& args,
                                                 const Operands& masks) {
  std::string name = op;
  auto it = rules().find(name);
  if (it == rules().end() && !name.empty() && name.back() == '_') it = rules().find(name.substr(0, name.size() - 1));
  if (it == rules().end()) return std::nullopt;
  std::vector<double> fills(args.size(), kAny);
  auto rank = [&](size_t i) -> int64_t {
    return i < masks.size() && !masks[i].empty() ? masks[i].front().rank : 0;
  };
  auto fill_tensors = [&](double value) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].kind == Arg::Kind::Tensor || args[i].kind == Arg::Kind::TensorList) fills[i] = value;
    }
  };
  switch (it->second) {
    case Rule::Independent:
      return fills;
    case Rule::Contraction:
      fill_tensors(0);
      return fills;
    case Rule::Softmax:
      if (args.size() < 2 || args[1].kind != Arg::Kind::Int) return std::nullopt;
      if (mask_of(masks, 0) & bit(wrap_dim(args[1].i, rank(0)))) fills[0] = kMinusInfinity;
      return fills;
    case Rule::SoftmaxGrad:
      if (args.size() < 3 || args[2].kind != Arg::Kind::Int) return std::nullopt;
      if ((mask_of(masks, 0) | mask_of(masks, 1)) & bit(wrap_dim(args[2].i, rank(1)))) fill_tensors(0);
      return fills;
    case Rule::ReduceDims: {
      if (args.empty() || args[0].kind != Arg::Kind::Tensor) return std::nullopt;
      Arg none;
      const Arg& dims = args.size() > 1 ? args[1] : none;
      if (dims.kind != Arg::Kind::Int && dims.kind != Arg::Kind::IntList && dims.kind != Arg::Kind::None) {
        // max(self, other) and friends: elementwise.
        if (dims.kind == Arg::Kind::Tensor) return fills;
        if (dims.kind != Arg::Kind::ScalarType) return std::nullopt;
      }
      if (mask_of(masks, 0) & reduced_dims(dims.kind == Arg::Kind::ScalarType ? none : dims, rank(0))) {
        double identity = reduction_identity(it->first);
        if (std::isnan(identity)) return std::nullopt;
        fills[0] = identity;
      }
      return fills;
    }
    case Rule::Scan:
      return fills;
    case Rule::IsIn:
      if (args.size() > 1 && mask_of(masks, 1) != 0) return std::nullopt;
      return fills;
    case Rule::LayerNorm:
    case Rule::LayerNormGrad: {
      size_t input = it->second == Rule::LayerNorm ? 0 : 1;
      if (args.size() <= input + 1 || args[input + 1].kind != Arg::Kind::IntList) return std::nullopt;
      int64_t normalized = static_cast<int64_t>(args[input + 1].ints.size());
      DimMask inner = trailing_from(rank(input) - normalized, rank(input));
      for (size_t i = 0; i < args.size(); ++i) {
        // weight and bias are normalized-shaped: they may not be padded at all.
        DimMask m = mask_of(masks, i);
        if (m == 0) continue;
        if (rank(i) != rank(input) || (m & inner)) return std::nullopt;
      }
      if (it->second == Rule::LayerNormGrad) fill_tensors(0);
      return fills;
    }
    case Rule::IndexSelect:
      if (args.size() < 3 || args[1].kind != Arg::Kind::Int) return std::nullopt;
      if (mask_of(masks, 0) & bit(wrap_dim(args[1].i, std::max<int64_t>(rank(0), 1)))) return std::nullopt;
      fills[2] = 0;
      return fills;
    case Rule::NllLoss:
    case Rule::NllLossGrad: {
      size_t self = it->second == Rule::NllLoss ? 0 : 1;
      size_t ignore = self + 4;
      if (args.size() <= ignore || args[ignore].kind != Arg::Kind::Int) return std::nullopt;
      // Only the batch dim of a [N, C] input may be padded; the classes and the weight keep their sizes.
      if (mask_of(masks, self) & ~bit(0) || (rank(self) != 2 && mask_of(masks, self) != 0)) return std::nullopt;
      if (mask_of(masks, self + 2) != 0) return std::nullopt;
      fill_tensors(0);
      fills[self + 1] = static_cast<double>(args[ignore].i);
      return fills;
    }
    case Rule::EmbeddingGrad:
      if (args.size() < 5 || args[4].kind != Arg::Kind::Bool || args[4].b) return std::nullopt;
      fill_tensors(0);
      return fills;
    case Rule::IndexPutSum:
      if (args.size() < 4 || args[3].kind != Arg::Kind::Bool || !args[3].b || mask_of(masks, 0) != 0) {
        return std::nullopt;
      }
      fills[1] = 0;
      fills[2] = 0;
      return fills;
    case Rule::IndexCopy: {
      if (args.size() < 4 || args[1].kind != Arg::Kind::Int || mask_of(masks, 0) != 0) return std::nullopt;
      // The index is 1-D (or a scalar) and pads with source's rows along dim, or not at all.
      DimMask along = bit(wrap_dim(args[1].i, std::max<int64_t>(rank(3), 1)));
      DimMask index = mask_of(masks, 2), source = mask_of(masks, 3);
      if (index == 0 && source == 0) return fills;
      if (index != bit(0) || source != along) return std::nullopt;
      return fills;
    }
    case Rule::Cat:
      return fills;
  }
  return std::nullopt;
}

bool pads_results_itself(const std::string& op) {
  auto it = rules().find(op);
  return it != rules().end() && it->second == Rule::Cat;
}

}  // namespace tpu::lowering
