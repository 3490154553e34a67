#include "aten/op_adapters.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/native/IndexingUtils.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <unordered_map>

namespace tpu::aten {

namespace {

bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

// The indices of index and index_put on a tpu tensor. Index tensors on the CPU are uploaded
// first, as CUDA's kernels take CPU indices for a CUDA tensor (DETR's matcher computes its
// indices on the CPU with scipy): an upload, not a CPU fallback of the op. Boolean (or uint8)
// masks (the backward of x[mask], and x[mask] = values) become the integer indices of their true
// elements, as PyTorch's own kernels do first (its expandTensors, with CPU's checks and
// messages); nonzero reads the count from the device, then the gather or scatter runs lowered.
void prepare_indices(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // index.Tensor(self, indices), index_put(self, indices, values, ...) and their out= forms:
  // indices is argument 1.
  const size_t first = stack->size() - op.schema().arguments().size();
  c10::IValue& value = (*stack)[first + 1];
  if (!value.isList() || !(*stack)[first].isTensor()) return;
  c10::List<std::optional<at::Tensor>> list = value.toOptionalTensorList();
  const at::Tensor& self = (*stack)[first].toTensor();
  if (is_tpu(self)) {
    bool uploaded = false;
    for (size_t i = 0; i < list.size(); ++i) {
      std::optional<at::Tensor> index = list.get(i);
      if (index.has_value() && index->defined() && index->device().is_cpu()) {
        list.set(i, index->to(self.device()));
        uploaded = true;
      }
    }
    if (uploaded) value = c10::IValue(list);
  }
  auto is_mask = [](const std::optional<at::Tensor>& t) {
    return t.has_value() && is_tpu(*t) && (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte);
  };
  bool any = false;
  for (size_t i = 0; i < list.size(); ++i) any = any || is_mask(list.get(i));
  if (!any) return;
  std::vector<at::Tensor> indices = at::native::expandTensors((*stack)[first].toTensor(), list,
                                                              /*ensure_same_device=*/true);
  c10::List<std::optional<at::Tensor>> expanded;
  for (const at::Tensor& index : indices) {
    expanded.push_back(index.defined() ? std::optional<at::Tensor>(index) : std::nullopt);
  }
  value = c10::IValue(expanded);
}

void convolution_meta(torch::jit::Stack* meta) {
  static auto conv = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  conv.callBoxed(meta);
}

// convolution_backward takes the bias sizes as well: the output channels.
void convolution_backward_meta(torch::jit::Stack* meta) {
  static auto conv_backward = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  const at::Tensor& weight = (*meta)[2].toTensor();
  bool transposed = (*meta)[6].toBool();
  int64_t channels = transposed ? weight.size(1) * (*meta)[8].toInt() : weight.size(0);
  meta->insert(meta->begin() + 3, c10::IValue(std::vector<int64_t>{channels}));
  conv_backward.callBoxed(meta);
}

// The Tensor forms of CTC loss have no meta function. aten/ctc_loss_kernel.cpp calls them with
// targets padded to [batch, S]; log_alpha then spans the 2 S + 1 extended labels. Concatenated
// 1-D targets (a direct call) would need the lengths' values: those take the CPU.
void ctc_loss_meta(torch::jit::Stack* meta) {
  at::Tensor log_probs = (*meta)[0].toTensor(), targets = (*meta)[1].toTensor();
  if (log_probs.dim() != 3 || targets.dim() != 2) {
    throw c10::NotImplementedError({__func__, __FILE__, __LINE__}, "concatenated targets need their lengths' values");
  }
  int64_t steps = log_probs.size(0), batch = log_probs.size(1), labels = 2 * targets.size(1) + 1;
  meta->clear();
  meta->emplace_back(at::empty({batch}, log_probs.options()));
  meta->emplace_back(at::empty({batch, steps, labels}, log_probs.options()));
}

void ctc_loss_backward_meta(torch::jit::Stack* meta) {
  at::Tensor log_probs = (*meta)[1].toTensor();
  meta->clear();
  meta->emplace_back(at::empty(log_probs.sizes(), log_probs.options()));
}

// geqrf has no meta function; CPU returns `a` column-major per matrix (LAPACK's layout).
void geqrf_meta(torch::jit::Stack* meta) {
  at::Tensor a = (*meta)[0].toTensor();
  TORCH_CHECK(a.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  std::vector<int64_t> sizes = a.sizes().vec(), strides(sizes.size());
  int64_t m = sizes[sizes.size() - 2], n = sizes.back();
  strides[sizes.size() - 2] = 1;
  strides[sizes.size() - 1] = std::max<int64_t>(m, 1);
  int64_t stride = std::max<int64_t>(m * n, 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 3; d >= 0; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  std::vector<int64_t> tau_sizes(sizes.begin(), sizes.end() - 2);
  tau_sizes.push_back(std::min(m, n));
  meta->clear();
  meta->emplace_back(at::empty_strided(sizes, strides, a.options()));
  meta->emplace_back(at::empty(tau_sizes, a.options()));
}

// linalg_lstsq has no meta function. With CPU's default driver (gelsy) every result's size is
// known from the arguments': the solution [..., n, k] (column-major in an [..., max(m, n), k]
// buffer, as CPU's), the rank per matrix of A, empty residuals and singular values. Other drivers,
// and arguments CPU would reject, take the CPU, which raises what it raises.
void lstsq_meta(torch::jit::Stack* meta) {
  at::Tensor a = (*meta)[0].toTensor(), b = (*meta)[1].toTensor();
  const c10::IValue& driver = (*meta)[3];
  auto decline = [] { throw c10::NotImplementedError({__func__, __FILE__, __LINE__}, "linalg_lstsq: the CPU decides"); };
  if (a.dim() < 2 || b.dim() < 1 || a.scalar_type() != b.scalar_type() || !at::isFloatingType(a.scalar_type()) ||
      (driver.isString() && driver.toStringRef() != "gelsy")) {
    decline();
  }
  int64_t m = a.size(-2), n = a.size(-1);
  std::vector<int64_t> a_batch(a.sizes().begin(), a.sizes().end() - 2);
  bool vector = b.dim() == 1 || (b.dim() == a.dim() - 1 && b.sizes().slice(0, b.dim() - 1).equals(a_batch));
  if (b.size(vector ? -1 : -2) != m) decline();
  std::vector<int64_t> b_batch(b.sizes().begin(), b.sizes().end() - (vector ? 1 : 2));
  std::vector<int64_t> batch;
  try {
    batch = at::infer_size(a_batch, b_batch);
  } catch (const c10::Error&) {
    decline();
  }
  int64_t rows = std::max(m, n), columns = vector ? 1 : b.size(-1);
  std::vector<int64_t> sizes = batch, strides(batch.size() + (vector ? 1 : 2));
  sizes.push_back(n);
  if (!vector) sizes.push_back(columns);
  int64_t stride = rows * columns;
  if (vector) {
    strides.back() = 1;
  } else {
    strides[strides.size() - 2] = 1;
    strides.back() = rows;
  }
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    strides[d] = std::max<int64_t>(stride, 1);
    stride *= std::max<int64_t>(batch[d], 1);
  }
  meta->clear();
  meta->emplace_back(at::empty_strided(sizes, strides, a.options()));
  meta->emplace_back(at::empty({0}, a.options()));
  meta->emplace_back(at::empty(a_batch, a.options().dtype(at::kLong)));
  meta->emplace_back(at::empty({0}, a.options()));
}

void batch_norm_evaluation_results(const c10::FunctionSchema& schema, at::ArrayRef<c10::IValue> args,
                                   std::vector<ResultShape>& shapes) {
  size_t training_index = schema.overload_name().rfind("no_stats", 0) == 0 ? 3 : 5;
  bool training = training_index < args.size() && args[training_index].isBool() && args[training_index].toBool();
  bool evaluating = schema.name() == "aten::_native_batch_norm_legit_no_training" || !training;
  if (!evaluating || shapes.size() != 3) return;
  for (size_t r = 1; r < 3; ++r) {
    shapes[r].sizes = {0};
    shapes[r].strides = {1};
  }
}

void check_full_reduction_of_empty(const c10::FunctionSchema& schema, at::ArrayRef<c10::IValue> args) {
  const std::string& overload = schema.overload_name();
  if (!(overload.empty() || overload == "unary_out") || args.empty() || !args[0].isTensor()) return;
  TORCH_CHECK(args[0].toTensor().numel() != 0, schema.name().substr(6), "(): Expected reduction dim to be "
              "specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
}

void check_index_put_dtypes(const c10::FunctionSchema& schema, at::ArrayRef<c10::IValue> args) {
  if (args.size() < 3 || !args[0].isTensor() || !args[2].isTensor()) return;
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& values = args[2].toTensor();
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "Index put requires the source and destination dtypes "
              "match, got ", self.scalar_type(), " for the destination and ", values.scalar_type(),
              " for the source.");
}

void check_matmul_dtypes(const c10::FunctionSchema& schema, at::ArrayRef<c10::IValue> args) {
  const at::Tensor* first = nullptr;
  for (size_t i = 0; i < args.size() && i < schema.arguments().size(); ++i) {
    if (!args[i].isTensor() || !args[i].toTensor().defined()) continue;
    const auto& alias = schema.arguments()[i].alias_info();
    if (alias && alias->isWrite() && schema.overload_name() == "out") continue;  // out= may differ
    const at::Tensor& t = args[i].toTensor();
    if (!first) {
      first = &t;
      continue;
    }
    TORCH_CHECK(t.scalar_type() == first->scalar_type(), "expected m1 and m2 to have the same dtype, "
                "but got: ", first->scalar_type(), " != ", t.scalar_type());
  }
}

std::vector<OpAdapter> make_table() {
  std::vector<OpAdapter> table;
  auto add = [&](std::vector<std::string> ops, std::string reason, std::string test) -> OpAdapter& {
    table.push_back(OpAdapter{std::move(ops), std::move(reason), std::move(test)});
    return table.back();
  };

  // Arguments: checks CPU's kernels make on values, which neither the meta call of a lowered op
  // nor the CPU fallback (which copies its arguments) would make.
  add({"aten::max", "aten::min"}, "a full max() / min() has no identity to return for an empty tensor",
      "tests/test_argument_checks.py::test_full_max_min_of_an_empty_tensor_raise")
      .check_arguments = check_full_reduction_of_empty;
  add({"aten::index_put", "aten::index_put_", "aten::_index_put_impl", "aten::_index_put_impl_"},
      "index_put converts nothing: the values must have the destination's dtype (its meta function allows any); "
      "boolean masks among the indices have data-dependent sizes, which no meta function can give",
      "tests/test_argument_checks.py::test_index_put_with_another_dtype_raises")
      .check_arguments = check_index_put_dtypes;
  table.back().prepare = prepare_indices;
  add({"aten::mm", "aten::bmm", "aten::addmm", "aten::addmm_", "aten::baddbmm", "aten::baddbmm_", "aten::addbmm",
       "aten::dot", "aten::vdot", "aten::mv", "aten::addmv"},
      "matrix products do not promote (their meta functions allow mixed dtypes)",
      "tests/test_errors.py::test_matmul_shape_and_dtype_mismatch")
      .check_arguments = check_matmul_dtypes;

  // Meta results.
  add({"aten::index"}, "boolean masks among the indices have data-dependent sizes, which no meta function can give",
      "tests/test_ops_data_dependent.py::test_masked_select_and_boolean_indexing")
      .prepare = prepare_indices;
  add({"aten::arange", "aten::range", "aten::linspace", "aten::logspace"},
      "the result's size comes from the values of the numbers, so the meta cache must key on them",
      "tests/test_ops_reductions_nn.py::test_arange")
      .shape_depends_on_numbers = true;
  add({"aten::native_batch_norm", "aten::_native_batch_norm_legit", "aten::_native_batch_norm_legit_no_training"},
      "in evaluation the CPU kernels save no statistics and return empty tensors where the meta functions "
      "describe per-channel ones",
      "tests/test_ops_reductions_nn.py::test_batch_norm")
      .correct_results = batch_norm_evaluation_results;

  // Convolutions: PyTorch routes out-of-tree backends to the overrideable ops, whose composite
  // kernels only raise and which have no meta functions.
  OpAdapter& convolution = add({"aten::convolution_overrideable"},
                               "the tpu convolution entry point: no meta function (aten::convolution's describes "
                               "the same results) and a CPU kernel that only raises",
                               "tests/test_ops_coverage.py::test_convolution");
  convolution.run_meta = convolution_meta;
  convolution.cpu_op = "aten::convolution";
  convolution.over_composite = true;
  OpAdapter& convolution_backward = add(
      {"aten::convolution_backward_overrideable"},
      "no meta function: convolution_backward's, given the bias sizes, describes the same results",
      "tests/test_ops_coverage.py::test_convolution");
  convolution_backward.run_meta = convolution_backward_meta;
  convolution_backward.over_composite = true;

  add({"aten::geqrf"}, "PyTorch has no meta function for geqrf",
      "tests/test_linalg_decompositions.py::test_geqrf_and_householder_product_match_cpu")
      .run_meta = geqrf_meta;
  add({"aten::linalg_lstsq"}, "no meta function (the gelsy driver's result sizes are the arguments')",
      "tests/test_linalg_decompositions.py::test_lstsq_matches_cpu")
      .run_meta = lstsq_meta;
  add({"aten::_ctc_loss"}, "the Tensor form (lengths as device values) has no meta function",
      "tests/test_ctc_loss.py::test_ctc_loss_matches_cpu")
      .run_meta = ctc_loss_meta;
  add({"aten::_ctc_loss_backward"}, "the Tensor form (lengths as device values) has no meta function",
      "tests/test_ctc_loss.py::test_ctc_loss_matches_cpu")
      .run_meta = ctc_loss_backward_meta;

  // Composite kernels replaced by the whole op's lowering.
  add({"aten::cummax", "aten::cummin", "aten::logcumsumexp"},
      "their composite kernels call helpers that write their arguments in place (_cummax_helper) or "
      "have no meta function (_logcumsumexp)",
      "tests/test_ops_reductions_nn.py::test_cumulative")
      .over_composite = true;
  add({"aten::native_layer_norm", "aten::native_group_norm"},
      "their composite kernels normalize through native_batch_norm, then scale and shift in the input's "
      "dtype, rounding float16 and bfloat16 twice; the lowerings compute in float32 as CPU and CUDA do",
      "tests/test_ops_reductions_nn.py::test_layer_norm")
      .over_composite = true;
  add({"aten::_safe_softmax"},
      "attention's softmax: its composite kernel is a softmax plus a compare, a reduction and a select; "
      "the lowering is one reduction",
      "tests/test_ops_reductions_nn.py::test_safe_softmax_zeroes_fully_masked_rows")
      .over_composite = true;
  add({"aten::conj_physical_"},
      "its composite kernel calls the CPU/CUDA stub directly, which has no tpu entry (copy_ resolves a "
      "conjugate view with it)",
      "tests/test_copies.py::test_conjugate_and_negative_views_copy_their_values")
      .over_composite = true;

  // Errors the device finds: CPU raises a RuntimeError, not an IndexError, for these.
  add({"aten::gather", "aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::scatter_add_",
       "aten::scatter_reduce", "aten::scatter_reduce_", "aten::index_add", "aten::index_add_",
       "aten::max_unpool2d", "aten::max_unpool3d"},
      "CPU raises a RuntimeError for their out-of-range indices",
      "tests/test_ops_index_errors.py::test_out_of_range_index_raises")
      .index_error = IndexError::RuntimeError;
  add({"aten::nll_loss_forward", "aten::nll_loss2d_forward"},
      "an out-of-range target is CPU's 'Target is out of bounds' IndexError",
      "tests/test_argument_checks.py::test_nll_loss_target_out_of_range_raises")
      .index_error = IndexError::TargetOutOfBounds;
  return table;
}

const std::unordered_map<std::string, const OpAdapter*>& by_name() {
  static const auto* map = [] {
    auto* m = new std::unordered_map<std::string, const OpAdapter*>();
    for (const OpAdapter& adapter : op_adapters()) {
      for (const std::string& op : adapter.ops) (*m)[op] = &adapter;
    }
    return m;
  }();
  return *map;
}

}  // namespace

const std::vector<OpAdapter>& op_adapters() {
  static const auto* table = new std::vector<OpAdapter>(make_table());
  return *table;
}

const OpAdapter* adapter_for(const std::string& schema_name) {
  auto it = by_name().find(schema_name);
  return it == by_name().end() ? nullptr : it->second;
}

const OpAdapter* adapter_for(const c10::FunctionSchema& schema) {
  // Per thread, so that the lookup before every op takes no lock.
  thread_local std::unordered_map<const c10::FunctionSchema*, const OpAdapter*> cache;
  auto [it, inserted] = cache.emplace(&schema, nullptr);
  if (inserted) it->second = adapter_for(schema.name());
  return it->second;
}

}  // namespace tpu::aten
