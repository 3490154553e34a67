#include "aten/backward_context.h"

#include <c10/util/ThreadLocalDebugInfo.h>

#include <memory>
#include <string_view>

#include "exec/executor.h"

namespace tpu::aten {

namespace {

// A slot of PyTorch's thread-local debug info: part of the thread-local state the autograd engine
// installs on its threads for each graph task, as it does for autocast and grad mode.
constexpr std::string_view kSlotName = "torch_tpu: eager mode and pending graph of a backward pass";
const c10::DebugInfoKind kBackwardSlot(&kSlotName);

struct BackwardInfo final : public c10::DebugInfoBase {
  exec::BackwardContext context;
};

const exec::BackwardContext* inherited() {
  auto* info = static_cast<BackwardInfo*>(c10::ThreadLocalDebugInfo::get(kBackwardSlot));
  return info ? &info->context : nullptr;
}

const bool g_provider_installed = [] {
  exec::set_backward_context_provider(&inherited);
  return true;
}();

}  // namespace

void enter_backward() {
  auto info = std::make_shared<BackwardInfo>();
  info->context = exec::backward_context();
  c10::ThreadLocalDebugInfo::_push(kBackwardSlot, std::move(info));
}

void exit_backward() { c10::ThreadLocalDebugInfo::_pop(kBackwardSlot); }

}  // namespace tpu::aten
