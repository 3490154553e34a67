// The boxed kernel behind every ATen op without a dedicated tpu kernel (lowered_dispatch.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "lowering/registry.h"

namespace tpu::aten {

// An aten op's lowering, looked up by name once per operator; null when it has none.
const lowering::Entry* lowering_of(const c10::FunctionSchema& schema);

// The generic path: `op`'s lowering where it has one and the arguments allow, else the CPU
// fallback. For dedicated kernels that handle one case themselves and leave the rest to it.
void run_lowered_or_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Routes structured ops' functional and in-place forms that have a lowering to the boxed kernel
// instead of PyTorch's allocate-then-out= wrapper. Called once, when the Python module loads:
// after every kernel registered at static initialisation, so that none is overridden.
void register_structured_functional_kernels();

}  // namespace tpu::aten
