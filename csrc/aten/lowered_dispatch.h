// Controls of the boxed kernel that lowers ATen ops or, failing that, runs them on the CPU.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include <ATen/Tensor.h>

#include "exec/executor.h"

namespace tpu::aten {

enum class FallbackPolicy { Allow, Error };  // TORCH_TPU_FALLBACK=error selects Error
void set_fallback_policy(FallbackPolicy policy);
FallbackPolicy fallback_policy();
void set_fallback_warnings(bool enabled);
std::map<std::string, int64_t> fallback_counts();  // "aten::op.overload" -> calls
void reset_fallback_counts();

// Raises what CPU would have raised for an op whose checked lowering flagged bad data on the device
// (an index out of range, a target out of range) since the last call; a host read and
// synchronize() call it.
void raise_device_errors();

// For graph replay (aten/graph_replay.h): the flags not read yet, by storage, with their op.
std::unordered_map<const exec::Storage*, std::string> pending_device_checks();
// Registers a rank-0 bool tpu tensor that is true when `op`'s data was invalid: the next host read
// (debug mode: this call) raises `message` as a RuntimeError, or with no message the index error
// CPU raises for `op`. Graph replay and kernels composed of other ops (multinomial) use it.
void note_device_check(const at::Tensor& flag, const std::string& op, const std::string& message = {});

}  // namespace tpu::aten
