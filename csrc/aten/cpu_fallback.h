// The counted CPU fallback: an ATen op with no tpu lowering (or an argument combination its
// lowering declines) runs on the CPU, its tensors copied each way, counted and warned of once.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <map>
#include <string>

namespace tpu::aten {

enum class FallbackPolicy { Allow, Error };  // TORCH_TPU_FALLBACK=error selects Error
void set_fallback_policy(FallbackPolicy policy);
FallbackPolicy fallback_policy();
void set_fallback_warnings(bool enabled);
std::map<std::string, int64_t> fallback_counts();  // "aten::op.overload" -> calls
void reset_fallback_counts();

// "aten::op.overload", the name fallback counts and error messages use.
std::string display_name(const c10::FunctionSchema& schema);
// Runs `op` on the CPU, or raises NotImplementedError under FallbackPolicy::Error.
void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace tpu::aten
