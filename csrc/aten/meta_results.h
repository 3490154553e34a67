// Result dtypes and shapes from PyTorch's meta functions, which the boxed kernel needs before it
// can lower an op (and which raise the argument errors CPU raises), cached by argument layout.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tpu::aten {

// One result of an op as its meta function describes it.
struct ResultShape {
  bool defined = false;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

// Meta results by argument layout: PyTorch's meta functions are often Python reference code that
// costs far more than running the op, and their answer only depends on what the key records.
class MetaCache {
 public:
  // Entries are shared, not referenced: another thread's insert may rehash or clear the map.
  using Shapes = std::shared_ptr<const std::vector<ResultShape>>;
  Shapes find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = shapes_.find(key);
    return it == shapes_.end() ? nullptr : it->second;
  }
  Shapes insert(const std::string& key, std::vector<ResultShape> shapes) {
    auto entry = std::make_shared<const std::vector<ResultShape>>(std::move(shapes));
    std::lock_guard<std::mutex> lock(mutex_);
    if (shapes_.size() > 65536) shapes_.clear();
    return shapes_[key] = entry;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    shapes_.clear();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, Shapes> shapes_;
};

MetaCache& meta_cache();

// How meta results were found since the last reset: in the cache, by a C++ function
// (aten/cpp_meta.h, aten/composite_metas.h), or through the dispatcher's Meta kernel (for most
// ops without a C++ function, PyTorch's Python reference code).
struct MetaCounters {
  int64_t cached = 0;
  int64_t cpp = 0;
  int64_t dispatched = 0;
};
MetaCounters meta_counters();
void reset_meta_counters();
void count_cached_meta();

struct OpAdapter;

// Runs the op's meta function on `meta` (the arguments with tpu tensors as meta tensors; `args`
// the original boxed arguments), or its adapter's (aten/op_adapters.h). Raises what it raises (the
// same errors CPU gives for bad arguments), except that a missing meta function returns nullopt:
// the CPU kernel then knows the shapes.
c10::optional<std::vector<ResultShape>> run_meta(const c10::OperatorHandle& op, torch::jit::Stack meta,
                                                 at::ArrayRef<c10::IValue> args, const OpAdapter* adapter);

}  // namespace tpu::aten
