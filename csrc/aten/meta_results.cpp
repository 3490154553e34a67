#include "aten/meta_results.h"

#include <atomic>

#include "aten/composite_metas.h"
#include "aten/cpp_meta.h"
#include "aten/op_adapters.h"

namespace tpu::aten {

namespace {
std::atomic<int64_t> g_cached{0}, g_cpp{0}, g_dispatched{0};
}  // namespace

MetaCounters meta_counters() { return {g_cached.load(), g_cpp.load(), g_dispatched.load()}; }

void reset_meta_counters() {
  g_cached = 0;
  g_cpp = 0;
  g_dispatched = 0;
}

void count_cached_meta() { ++g_cached; }

MetaCache& meta_cache() {
  static auto* cache = new MetaCache();
  return *cache;
}

c10::optional<std::vector<ResultShape>> run_meta(const c10::OperatorHandle& op, torch::jit::Stack meta,
                                                 at::ArrayRef<c10::IValue> args, const OpAdapter* adapter) {
  try {
    if (adapter && adapter->run_meta) {
      adapter->run_meta(&meta);
    } else if (run_cpp_meta(op, &meta) || run_composite_meta(op, &meta)) {
      ++g_cpp;
    } else {
      ++g_dispatched;
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
