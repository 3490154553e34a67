// Checks only the device can make: a checked lowering (lowering::Entry::checked) returns a flag
// that is true when its data was invalid (an index or a target out of range), and kernels composed
// of other ops (multinomial) compute such flags too. CPU would have raised at the op; here debug
// mode reads each flag at its op, and the other modes read them all at the next host read or
// synchronize, so that checking never makes the host wait for the device.
#pragma once

#include <string>
#include <unordered_map>

#include <ATen/Tensor.h>

#include "exec/executor.h"

namespace tpu::aten {

// Registers a rank-0 bool tpu tensor that is true when `op`'s data was invalid: the next host read
// (debug mode: this call) raises `message` as a RuntimeError, or with no message the index error
// CPU raises for `op`.
void note_device_check(const at::Tensor& flag, const std::string& op, const std::string& message = {});

// Raises what CPU would have raised for the first flag set since the last call; a host read and
// synchronize() call it.
void raise_device_errors();

// For graph replay (aten/graph_replay.h): the flags not read yet, by storage, with their op.
std::unordered_map<const exec::Storage*, std::string> pending_device_checks();

}  // namespace tpu::aten
