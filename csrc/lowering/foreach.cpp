// The _foreach_* ops as list ops: one lowering for the whole family, which applies the element
// op's own lowering to each entry of the lists, so a foreach call is one recorded op (one program
// in strict mode, one node of a fused graph) and each element's semantics stay written once.
//
// `_foreach_<name>` maps to `<name>` (in-place forms write their results into `self`'s entries;
// the ATen layer sets that up), with each TensorList argument replaced by its i-th tensor and
// each Scalar[] by its i-th number; `_foreach_norm` maps to linalg_vector_norm over all dims. The
// ATen layer (aten/foreach_kernels.cpp) records these only for lists of one floating dtype with
// contiguous entries, whose results have their inputs' sizes and dtype; everything else runs the
// composite per-tensor loop.
#include <string>
#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

constexpr const char* kPrefix = "_foreach_";

// The element ops with a foreach form whose arguments map one to one.
const char* const kElementOps[] = {
    // binary, with a Tensor[] / Scalar / Scalar[] / Tensor second operand
    "add", "sub", "mul", "div", "clamp_max", "clamp_min", "maximum", "minimum", "pow",
    // ternary
    "addcmul", "addcdiv", "lerp",
    // unary
    "abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
    "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
    "sinh", "sqrt", "tan", "tanh", "trunc", "zero",
    // reduction
    "norm"};

std::string element_name(const std::string& foreach_name) {
  std::string name = foreach_name.substr(std::char_traits<char>::length(kPrefix));
  if (!name.empty() && name.back() == '_') name.pop_back();
  return name == "norm" ? "linalg_vector_norm" : name;
}

// The i-th element's view of a foreach argument.
Arg element_of(const hlo::Builder& b, const Arg& arg, size_t i) {
  Arg element = arg;
  element.values.clear();
  element.slots.clear();
  element.padded_dims.clear();
  element.runtime_sizes.clear();
  if (arg.kind == Arg::Kind::TensorList || arg.kind == Arg::Kind::NumberList) {
    element.kind = arg.kind == Arg::Kind::TensorList ? Arg::Kind::Tensor : Arg::Kind::Number;
    element.value = arg.values.at(i);
    // As the element op sees it: a 0-dim tensor or a number only lifts the dtype's category.
    element.weak = arg.kind == Arg::Kind::NumberList || b.dims(element.value).empty();
  }
  return element;
}

// An element op applied to its entries as flat vectors: the op is elementwise and the entries of
// one index have one shape (the ATen layer's plain case), so the values are the same. A storage is
// flat; an entry computed in its own shape reaches XLA as a fusion holding reshapes between the
// storage and the entry, which XLA:CPU does not write into its operand's buffer, so a donated
// entry updated in place (AdamW's moments of 2-D weights) was copied every step.
// Entries of other shapes (broadcasting ones, where a torch.compile graph passes them) keep theirs.
bool flattens(const hlo::Builder& b, const Context& one) {
  const Dims& dims = one.outputs[0].dims;
  if (one.op == "linalg_vector_norm" || dims.size() < 2) return false;
  for (const Arg& arg : one.args) {
    if (arg.kind == Arg::Kind::Tensor && arg.value.valid() && !b.dims(arg.value).empty() && b.dims(arg.value) != dims) {
      return false;
    }
  }
  return true;
}

Context& flattened(hlo::Builder& b, Context& one) {
  const Dims flat{numel(one.outputs[0].dims)};
  for (Arg& arg : one.args) {
    if (arg.kind == Arg::Kind::Tensor && arg.value.valid() && !b.dims(arg.value).empty()) arg.value = b.reshape(arg.value, flat);
  }
  one.outputs[0].dims = flat;
  return one;
}

std::vector<Value> lower_foreach(Context& ctx) {
  const std::string element_op = element_name(ctx.op);
  const Entry* element = find_lowering(element_op);
  if (!element || element->random || element->checked) throw Unsupported(ctx.op + ": no element lowering");
  const size_t count = ctx.arg(0).values.size();
  if (ctx.outputs.size() != count) throw Unsupported(ctx.op + ": one result per entry expected");
  std::vector<Value> results;
  results.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    Context one{ctx.b, element_op, "", {}, {ctx.outputs[i]}, Value{}};
    for (const Arg& arg : ctx.args) one.args.push_back(element_of(ctx.b, arg, i));
    if (flattens(ctx.b, one)) {
      results.push_back(ctx.b.reshape(element->fn(flattened(ctx.b, one)).at(0), ctx.outputs[i].dims));
      continue;
    }
    if (element_op == "linalg_vector_norm") {
      // _foreach_norm(self, ord, dtype?) -> linalg_vector_norm(self, ord, dim=None, keepdim=False, dtype?)
      Arg dtype = one.args.size() > 2 ? one.args[2] : Arg{};
      Arg keepdim;
      keepdim.kind = Arg::Kind::Bool;
      one.args.resize(2);
      one.args.push_back(Arg{});
      one.args.push_back(keepdim);
      one.args.push_back(dtype);
    }
    results.push_back(element->fn(one).at(0));
  }
  return results;
}

[[maybe_unused]] const bool registered = [] {
  for (const char* name : kElementOps) register_lowering(std::string(kPrefix) + name, lower_foreach);
  return true;
}();

}  // namespace
}  // namespace tpu::lowering
