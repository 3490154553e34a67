#include "aten/meta_results.h"

namespace tpu::aten {

MetaCache& meta_cache() {
  static auto* cache = new MetaCache();
  return *cache;
}

c10::optional<std::vector<ResultShape>> run_meta(const c10::OperatorHandle& op, torch::jit::Stack meta,
                                                 at::ArrayRef<c10::IValue> args) {
  auto arg_bool = [&](size_t i) { return i < args.size() && args[i].isBool() && args[i].toBool(); };
  try {
    // convolution_overrideable has no meta function: aten::convolution's (same arguments), and
    // convolution_backward's (bias_sizes added), describe the same results.
    const std::string& op_name = op.schema().name();
    if (op_name == "aten::convolution_overrideable") {
      static auto conv = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
      conv.callBoxed(&meta);
    } else if (op_name == "aten::convolution_backward_overrideable") {
      static auto conv_backward =
          c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
      const at::Tensor& weight = meta[2].toTensor();
      bool transposed = meta[6].toBool();
      int64_t channels = transposed ? weight.size(1) * meta[8].toInt() : weight.size(0);
      meta.insert(meta.begin() + 3, c10::IValue(std::vector<int64_t>{channels}));
      conv_backward.callBoxed(&meta);
    } else {
      op.callBoxed(&meta);
    }
  } catch (const c10::NotImplementedError&) {
    return c10::nullopt;
  }
  std::vector<ResultShape> shapes;
  const auto& returns = op.schema().returns();
  for (size_t r = 0; r < returns.size(); ++r) {
    ResultShape shape;
    const c10::IValue& value = meta[r];
    if (value.isTensor() && value.toTensor().defined()) {
      const at::Tensor& t = value.toTensor();
      shape.defined = true;
      shape.dtype = t.scalar_type();
      shape.sizes.assign(t.sizes().begin(), t.sizes().end());
      shape.strides.assign(t.strides().begin(), t.strides().end());
    }
    shapes.push_back(std::move(shape));
  }
  // Batch norm in evaluation: the CPU kernels save no statistics and return empty tensors where
  // the meta functions describe per-channel ones.
  const std::string& name = op.schema().name();
  if (name == "aten::native_batch_norm" || name == "aten::_native_batch_norm_legit" ||
      name == "aten::_native_batch_norm_legit_no_training") {
    const auto& arguments = op.schema().arguments();
    size_t training_index = op.schema().overload_name().rfind("no_stats", 0) == 0 ? 3 : 5;
    bool evaluating = name == "aten::_native_batch_norm_legit_no_training" ||
                      (training_index < arguments.size() && !arg_bool(training_index));
    if (evaluating && shapes.size() == 3) {
      for (size_t r = 1; r < 3; ++r) {
        shapes[r].sizes = {0};
        shapes[r].strides = {1};
      }
    }
  }
  return shapes;
}

}  // namespace tpu::aten
