// PyTorch's C++ meta functions, called directly instead of through the dispatcher's Meta key.
//
// At import, PyTorch registers Python reference code as the Meta kernel of every op it has a
// decomposition for, over the C++ meta function that structured ops already have. For a tpu
// op the meta function runs whenever its argument layout is new (aten/meta_results.h caches the
// rest), which with growing sequence lengths is every step: the Python code costs 0.3-3 ms per op
// where the C++ one costs microseconds, and its first call imports torch._dynamo (over a second).
// The C++ function is the one CPU's own kernel runs, so results and errors are CPU's.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::aten {

// Runs the op's C++ meta function on `stack` (meta tensors in, meta results out) and returns true;
// false, with the stack untouched, when PyTorch has none for this overload.
bool run_cpp_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// How many overloads have a C++ meta function, for tests.
size_t cpp_meta_count();

}  // namespace tpu::aten
