// Whether a launch runs the exact program of its calls or the one that serves their size buckets
// (exec/padding.h), and what happens when the padded one fails to build.
#pragma once

#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/launch.h"
#include "exec/padding.h"
#include "exec/program_key.h"

namespace tpu::exec {

// Chooses between the exact program of `calls` (`key`, `offsets`) and the padded one; for the
// latter, marks the calls padded and replaces key and offsets. `growing`: the calls are an
// iteration of a loop whose sizes grow, which pads at once. `above`: the calls are a fused graph,
// which may run at the bucket above its sizes (take_bucket_above); what that changed is kept
// there, for the caller to undo if the padded program fails.
void choose_padding(std::vector<OpCall>& calls, StorageSet& storages, std::string& key,
                    std::vector<int64_t>& offsets, const KeepSet& keep, bool growing = false,
                    BucketAbove* above = nullptr);
// The padded program of `calls` (`padded_key`) failed to build or compile: neither it nor, after
// a few such failures, the op whose padded lowering fails is tried again.
void decline_failed_padding(std::vector<OpCall>& calls, const StorageSet& storages, const std::string& padded_key);

}  // namespace tpu::exec
