#include "aten/meta_results.h"

#include "aten/op_adapters.h"

namespace tpu::aten {

MetaCache& meta_cache() {
  static auto* cache = new MetaCache();
  return *cache;
}

c10::optional<std::vector<ResultShape>> run_meta(const c10::OperatorHandle& op, torch::jit::Stack meta,
                                                 at::ArrayRef<c10::IValue> args, const OpAdapter* adapter) {
  try {
    if (adapter && adapter->run_meta) {
      adapter->run_meta(&meta);
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
  if (adapter && adapter->correct_results) adapter->correct_results(op.schema(), args, shapes);
  return shapes;
}

}  // namespace tpu::aten
