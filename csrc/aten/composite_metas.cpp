#include "aten/composite_metas.h"

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <optional>
#include <unordered_map>
#include <vector>

namespace tpu::aten {
namespace {

using Args = at::ArrayRef<c10::IValue>;

std::optional<std::vector<int64_t>> int_list(const c10::IValue& value) {
  if (value.isIntList()) return value.toIntVector();
  if (!value.isSymIntList()) return std::nullopt;
  std::vector<int64_t> ints;
  for (const c10::SymInt& s : value.toSymIntVector()) {
    auto i = s.maybe_as_int();
    if (!i) return std::nullopt;
    ints.push_back(*i);
  }
  return ints;
}

bool floating(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// A meta tensor the rules accept: defined, dense, contiguous, non-empty, not a wrapped number.
bool ordinary(const at::Tensor& t) {
  return t.defined() && t.is_meta() && t.layout() == at::kStrided && t.is_contiguous() && t.numel() > 0 &&
         !t.unsafeGetTensorImpl()->is_wrapped_number();
}

const at::Tensor* optional_tensor(const c10::IValue& value, bool* ok) {
  if (value.isNone()) return nullptr;
  if (!value.isTensor()) {
    *ok = false;
    return nullptr;
  }
  const at::Tensor& t = value.toTensor();
  return t.defined() ? &t : nullptr;
}

at::Tensor empty_meta(at::IntArrayRef sizes, at::ScalarType dtype) {
  return at::empty(sizes, at::TensorOptions().device(at::kMeta).dtype(dtype));
}

// The layer's affine parameter: absent, or shaped as the normalized dims.
bool ordinary_parameter(const at::Tensor* p, at::IntArrayRef normalized, at::ScalarType input_dtype) {
  if (!p) return true;
  bool dtype_ok = p->scalar_type() == input_dtype ||
                  (p->scalar_type() == at::kFloat && (input_dtype == at::kHalf || input_dtype == at::kBFloat16));
  return ordinary(*p) && dtype_ok && p->sizes() == normalized;
}

bool normalizes_trailing_dims(const at::Tensor& input, at::IntArrayRef normalized) {
  int64_t axis = input.dim() - static_cast<int64_t>(normalized.size());
  if (normalized.empty() || axis < 0) return false;
  return input.sizes().slice(axis) == normalized;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd): mean and
// rstd keep the normalized dims as ones, in float32 for float16 and bfloat16 inputs.
std::optional<std::vector<c10::IValue>> layer_norm(Args args) {
  const at::Tensor& input = args[0].toTensor();
  auto normalized = int_list(args[1]);
  bool ok = true;
  const at::Tensor* weight = optional_tensor(args[2], &ok);
  const at::Tensor* bias = optional_tensor(args[3], &ok);
  if (!ok || !normalized || !ordinary(input) || !floating(input.scalar_type()) ||
      !normalizes_trailing_dims(input, *normalized) || !ordinary_parameter(weight, *normalized, input.scalar_type()) ||
      !ordinary_parameter(bias, *normalized, input.scalar_type())) {
    return std::nullopt;
  }
  std::vector<int64_t> stat_sizes(input.sizes().begin(), input.sizes().end());
  for (size_t i = stat_sizes.size() - normalized->size(); i < stat_sizes.size(); ++i) stat_sizes[i] = 1;
  at::ScalarType stat_dtype = at::toOpMathType(input.scalar_type());
  return std::vector<c10::IValue>{empty_meta(input.sizes(), input.scalar_type()), empty_meta(stat_sizes, stat_dtype),
                                  empty_meta(stat_sizes, stat_dtype)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
// output_mask) -> gradients of input, weight and bias, each only where asked for and present.
std::optional<std::vector<c10::IValue>> layer_norm_backward(Args args) {
  const at::Tensor& grad = args[0].toTensor();
  const at::Tensor& input = args[1].toTensor();
  auto normalized = int_list(args[2]);
  bool ok = args[7].isBoolList();
  const at::Tensor* weight = optional_tensor(args[5], &ok);
  const at::Tensor* bias = optional_tensor(args[6], &ok);
  if (!ok || !normalized || !ordinary(grad) || !ordinary(input) || grad.sizes() != input.sizes() ||
      grad.scalar_type() != input.scalar_type() || !floating(input.scalar_type()) ||
      !normalizes_trailing_dims(input, *normalized) || !ordinary_parameter(weight, *normalized, input.scalar_type()) ||
      !ordinary_parameter(bias, *normalized, input.scalar_type())) {
    return std::nullopt;
  }
  c10::List<bool> mask = args[7].toBoolList();
  if (mask.size() != 3) return std::nullopt;
  std::vector<c10::IValue> results(3);
  if (mask[0]) results[0] = empty_meta(input.sizes(), input.scalar_type());
  if (mask[1] && weight) results[1] = empty_meta(weight->sizes(), weight->scalar_type());
  if (mask[2] && bias) results[2] = empty_meta(bias->sizes(), bias->scalar_type());
  return results;
}

// _safe_softmax(self, dim, dtype?) -> a softmax's layout in the requested dtype.
std::optional<std::vector<c10::IValue>> safe_softmax(Args args) {
  const at::Tensor& self = args[0].toTensor();
  if (!ordinary(self) || !floating(self.scalar_type()) || !args[1].isInt()) return std::nullopt;
  int64_t dim = args[1].toInt();
  if (dim < -std::max<int64_t>(self.dim(), 1) || dim >= std::max<int64_t>(self.dim(), 1)) return std::nullopt;
  at::ScalarType dtype = self.scalar_type();
  if (!args[2].isNone()) {
    dtype = args[2].toScalarType();
    if (!floating(dtype)) return std::nullopt;
  }
  return std::vector<c10::IValue>{empty_meta(self.sizes(), dtype)};
}

// Broadcasts `sizes` with `more` in place; false when they do not broadcast (the Python function
// then raises CPU's error).
bool broadcast_into(at::IntArrayRef more, std::vector<int64_t>* sizes) {
  if (more.size() > sizes->size()) sizes->insert(sizes->begin(), more.size() - sizes->size(), 1);
  size_t offset = sizes->size() - more.size();
  for (size_t i = 0; i < more.size(); ++i) {
    int64_t& size = (*sizes)[offset + i];
    if (more[i] == size || more[i] == 1) continue;
    if (size != 1) return false;
    size = more[i];
  }
  return true;
}

// where.self(condition, self, other) with a bool condition and two values of one dtype.
std::optional<std::vector<c10::IValue>> where_self(Args args) {
  if (!args[0].isTensor() || !args[1].isTensor() || !args[2].isTensor()) return std::nullopt;
  const at::Tensor& condition = args[0].toTensor();
  const at::Tensor& self = args[1].toTensor();
  const at::Tensor& other = args[2].toTensor();
  if (!ordinary(condition) || !ordinary(self) || !ordinary(other) || condition.scalar_type() != at::kBool ||
      self.scalar_type() != other.scalar_type()) {
    return std::nullopt;
  }
  std::vector<int64_t> sizes;
  for (const at::Tensor* t : {&condition, &self, &other}) {
    if (!broadcast_into(t->sizes(), &sizes)) return std::nullopt;
  }
  return std::vector<c10::IValue>{empty_meta(sizes, self.scalar_type())};
}

bool integer_index(const at::Tensor& t) {
  return t.scalar_type() == at::kLong || t.scalar_type() == at::kInt;
}

std::optional<int64_t> concrete_int(const c10::IValue& value) {
  if (value.isInt()) return value.toInt();
  if (value.isSymInt()) return value.toSymInt().maybe_as_int();
  return std::nullopt;
}

// index_select(self, dim, index): self's sizes with index's length along dim.
std::optional<std::vector<c10::IValue>> index_select(Args args) {
  const at::Tensor& self = args[0].toTensor();
  if (!args[2].isTensor() || !args[1].isInt()) return std::nullopt;
  const at::Tensor& index = args[2].toTensor();
  int64_t dim = args[1].toInt();
  if (!ordinary(self) || !ordinary(index) || !integer_index(index) || index.dim() > 1 || self.dim() == 0 ||
      dim < -self.dim() || dim >= self.dim()) {
    return std::nullopt;
  }
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[dim < 0 ? dim + self.dim() : dim] = index.numel();
  return std::vector<c10::IValue>{empty_meta(sizes, self.scalar_type())};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
// one gradient row per embedding.
std::optional<std::vector<c10::IValue>> embedding_dense_backward(Args args) {
  const at::Tensor& grad = args[0].toTensor();
  auto rows = concrete_int(args[2]);
  if (!args[1].isTensor() || !rows || *rows < 0) return std::nullopt;
  const at::Tensor& indices = args[1].toTensor();
  if (!ordinary(grad) || !floating(grad.scalar_type()) || grad.dim() == 0 || !indices.defined() ||
      !indices.is_meta() || !integer_index(indices)) {
    return std::nullopt;
  }
  return std::vector<c10::IValue>{empty_meta({*rows, grad.size(-1)}, grad.scalar_type())};
}

// zero_(self), fill_.Scalar(self, value): self, unchanged in layout.
std::optional<std::vector<c10::IValue>> self_in_place(Args args) {
  if (!args[0].isTensor() || !args[0].toTensor().defined()) return std::nullopt;
  return std::vector<c10::IValue>{args[0]};
}

using Rule = std::optional<std::vector<c10::IValue>> (*)(Args);

const std::unordered_map<c10::OperatorName, Rule>& rules() {
  static const auto* table = new std::unordered_map<c10::OperatorName, Rule>{
      {c10::OperatorName("aten::native_layer_norm", ""), layer_norm},
      {c10::OperatorName("aten::native_layer_norm_backward", ""), layer_norm_backward},
      {c10::OperatorName("aten::_safe_softmax", ""), safe_softmax},
      {c10::OperatorName("aten::where", "self"), where_self},
      {c10::OperatorName("aten::index_select", ""), index_select},
      {c10::OperatorName("aten::embedding_dense_backward", ""), embedding_dense_backward},
      {c10::OperatorName("aten::zero_", ""), self_in_place},
      {c10::OperatorName("aten::fill_", "Scalar"), self_in_place},
  };
  return *table;
}

}  // namespace

bool run_composite_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto it = rules().find(op.operator_name());
  if (it == rules().end()) return false;
  size_t n = op.schema().arguments().size();
  if (stack->size() < n) return false;
  auto results = it->second(torch::jit::last(*stack, n));
  if (!results) return false;
  torch::jit::drop(*stack, n);
  for (auto& r : *results) stack->push_back(std::move(r));
  return true;
}

}  // namespace tpu::aten
