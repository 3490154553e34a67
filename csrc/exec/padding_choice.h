// Whether a launch runs the exact program of its calls or the one that serves their size buckets
// (exec/padding.h), and what happens when the padded one fails to build.
#pragma once

#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/launch.h"
#include "exec/program_key.h"

namespace tpu::exec {

// Chooses between the exact program of `calls` (`key`, `offsets`) and the padded one; for the
// latter, marks the calls padded and replaces key and offsets. `growing`: the calls are an
// iteration of a loop whose sizes grow, which pads at once.
void choose_padding(std::vector<OpCall>& calls, StorageSet& storages, std::string& key,
                    std::vector<int64_t>& offsets, const KeepSet& keep, bool growing = false);
// The padded program of `calls` (`padded_key`) failed to build or compile: neither it nor, after
// a few such failures, the op whose padded lowering fails is tried again.
void decline_failed_padding(std::vector<OpCall>& calls, const StorageSet& storages, const std::string& padded_key);

}  // namespace tpu::exec
