// The _foreach_* ops: torch.optim's default path on tpu (PyTorch lists tpu among the devices with
// foreach kernels, as it does CUDA) and clip_grad_norm_'s. PyTorch's composite kernels loop over
// the tensors one op at a time; in strict mode that was one program launch per tensor, about 600
// for one AdamW step of a small decoder. Here each call records its per-tensor ops as one group
// and runs them as one program, as defer-and-fuse already does; the program is cached by the
// list's layout like any fused graph (aten/op_groups.h).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <string>

#include "aten/op_groups.h"

namespace tpu::aten {
namespace {

constexpr c10::DispatchKey kComposite = c10::DispatchKey::CompositeExplicitAutograd;

void foreach_as_one_program(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  as_one_program("foreach op", [&] { op.redispatchBoxed(c10::DispatchKeySet(kComposite), stack); });
}

bool is_foreach_with_composite_kernel(const c10::OperatorName& name) {
  if (name.name.rfind("aten::_foreach_", 0) != 0) return false;
  auto handle = c10::Dispatcher::singleton().findOp(name);
  return handle && handle->hasKernelForDispatchKey(kComposite);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (!is_foreach_with_composite_kernel(name)) continue;
    std::string qualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    m.impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&foreach_as_one_program>());
  }
}

}  // namespace
}  // namespace tpu::aten
