#include "aten/cpp_meta.h"

#include <ATen/core/boxing/KernelFunction.h>

#include <string>
#include <unordered_map>

// The includes and entries follow the installed torch (gen_cpp_meta_table.py, run by setup.py).
#include "cpp_meta_headers.inc"

namespace tpu::aten {
namespace {

using Table = std::unordered_map<c10::OperatorName, c10::KernelFunction>;

// One entry: the overload's name and a boxed kernel made from the C++ meta function, cast to the
// overload's exact signature (a mismatch would not compile).
#define TPU_CPP_META(function, overload)                                                        \
  table.emplace(c10::OperatorName(at::_ops::overload::name, at::_ops::overload::overload_name), \
                c10::KernelFunction::makeFromUnboxedFunction(                                   \
                    TORCH_FN(static_cast<at::_ops::overload::schema*>(&at::meta::function))));

const Table& table() {
  static const Table* built = [] {
    auto* result = new Table();
    Table& table = *result;
#include "cpp_meta_entries.inc"
    return result;
  }();
  return *built;
}

#undef TPU_CPP_META

}  // namespace

bool run_cpp_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto it = table().find(op.operator_name());
  if (it == table().end()) return false;
  it->second.callBoxed(op, c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
  return true;
}

size_t cpp_meta_count() { return table().size(); }

}  // namespace tpu::aten
