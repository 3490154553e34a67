// Where a defer-and-fuse graph is cut: loops recognised among the recorded calls, so that a loop
// with no host read becomes the same program run again instead of one graph that grows with its
// trip count. Torch-free, like the rest of exec/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "exec/executor.h"

namespace tpu::exec {

// The ops compared to recognise where a loop starts again.
constexpr size_t kWindow = 8;

// Where to cut a graph that reached its bound: at the last place where the ops that started it
// start again, so that the next graph begins where this one began; at the end when nothing repeats.
size_t repeat_point(const std::vector<OpCall>& calls);

// The calls' signatures growing_loop compares (program_key.h), kept with the graph so that each
// call's are computed once however often the graph is probed.
struct LoopSignatures {
  std::vector<uint64_t> bucketed, sizes;
};

// A loop whose sizes grow (a generation loop) among the calls: where its first repeating
// iteration starts and its length, or {0, 0}.
std::pair<size_t, size_t> growing_loop(const std::vector<OpCall>& calls, LoopSignatures& signatures);

// Whether calls[period, period + kWindow) begin the loop's next iteration.
bool next_iteration_starts(const std::vector<OpCall>& calls, size_t period);

}  // namespace tpu::exec
