// Controls of the boxed kernel that lowers ATen ops or, failing that, runs them on the CPU.
#pragma once

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

// Raises what CPU would have raised for an op whose checked lowering flagged bad data on the device
// (an index out of range) since the last call; a host read and synchronize() call it.
void raise_device_errors();

}  // namespace tpu::aten
