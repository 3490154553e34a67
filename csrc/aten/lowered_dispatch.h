// The boxed kernel behind every ATen op without a dedicated tpu kernel (lowered_dispatch.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::aten {

// The generic path: `op`'s lowering where it has one and the arguments allow, else the CPU
// fallback. For dedicated kernels that handle one case themselves and leave the rest to it.
void run_lowered_or_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Routes structured ops' functional and in-place forms that have a lowering to the boxed kernel
// instead of PyTorch's allocate-then-out= wrapper. Called once, when the Python module loads:
// after every kernel registered at static initialisation, so that none is overridden.
void register_structured_functional_kernels();

}  // namespace tpu::aten
