// Checks PyTorch's CPU and CUDA kernels make on argument values rather than in meta functions, so
// that neither the meta call of a lowered op nor the CPU fallback (which copies, losing aliasing
// and devices) would raise them. Each raises what CPU raises, before anything runs.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::aten {

struct OpAdapter;

// `args` are the op's boxed arguments (the last arguments().size() entries of its stack); the
// op's adapter (aten/op_adapters.h), if any, adds the checks particular to it.
void check_arguments_like_cpu(const c10::OperatorHandle& op, at::ArrayRef<c10::IValue> args,
                              const OpAdapter* adapter);

}  // namespace tpu::aten
