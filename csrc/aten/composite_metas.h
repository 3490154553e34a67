// Result layouts of hot ops whose only meta function is PyTorch's Python reference code (layer norm
// and its backward, _safe_softmax, where, index_select, embedding's backward, zero_, fill_):
// computed in C++ for the ordinary case, declined otherwise so that the Python function runs and
// raises what it raises. tests/test_cpp_meta.py holds each rule to PyTorch's meta function.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::aten {

// Replaces the arguments on `stack` with the results and returns true, or returns false with the
// stack untouched when the op has no rule or its arguments are not the ordinary case.
bool run_composite_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace tpu::aten
