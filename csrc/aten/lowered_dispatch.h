// The boxed kernel behind every ATen op without a dedicated tpu kernel (lowered_dispatch.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <functional>
#include <string>

#include "lowering/registry.h"

namespace tpu::aten {

struct OpAdapter;  // op_adapters.h

// An aten op's lowering, looked up by name once per operator; null when it has none.
const lowering::Entry* lowering_of(const c10::FunctionSchema& schema);

// The generic path: `op`'s lowering where it has one and the arguments allow, else the CPU
// fallback. For dedicated kernels that handle one case themselves and leave the rest to it.
void run_lowered_or_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// What a lowered op gives back, per return: a fresh tensor, or (an in-place or out= op's) the
// index of the argument it returns, which the caller passes on as it holds it.
struct LoweredReturns {  // inline storage: one is made for every op, which has few returns
  c10::SmallVector<c10::IValue, 4> fresh;  // None where the return is an argument
  c10::SmallVector<int, 4> argument;       // -1 where the return is fresh
};

// The checks and the lowered path alone, on arguments the caller keeps (nothing is popped), for
// an op whose lowering `entry` and adapter (null or one without `prepare`) the caller looked up
// once. Raises what the op raises on CPU; false when the lowering declines the arguments, which
// then go to run_on_cpu (cpu_fallback.h) on a stack of the caller's.
bool try_lowered(const c10::OperatorHandle& op, const lowering::Entry* entry, const OpAdapter* adapter,
                 at::ArrayRef<c10::IValue> args, LoweredReturns* returns);

// Gives the ops that would reach the boxed kernel with plain tensor and number arguments (add,
// mul_, addcmul_, ...) a kernel that takes them unboxed, without owning them (borrowed_kernels.cpp).
// Called once, when the Python module loads, before register_structured_functional_kernels.
void register_borrowed_kernels();

// Calls `visit` for every aten op that has a lowering and no tpu kernel yet, with its name as
// torch::Library::impl takes it ("add.Tensor"); and the library those registrations go to. For the
// registrations made when the module loads, after every static one.
void for_each_lowered_op_without_kernel(
    const std::function<void(const c10::OperatorHandle&, const std::string& qualified_name)>& visit);
torch::Library& generic_kernels_library();

// Routes structured ops' functional and in-place forms that have a lowering to the boxed kernel
// instead of PyTorch's allocate-then-out= wrapper. Called once, when the Python module loads:
// after every kernel registered at static initialisation, so that none is overridden.
void register_structured_functional_kernels();

}  // namespace tpu::aten
