// What the executor's other files (graph_capture.cpp, storage_room.cpp) share with its core
// (executor.cpp, recording and flushing): its lock, the lanes, and the steps of a flush they
// build on. Only csrc/exec includes it.
#pragma once

#include <cstdint>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/launch.h"
#include "exec/program_key.h"

namespace tpu::exec {

// Guards the lanes' pending graphs, the epochs pending and in flight, and every StorageState.
// Held for bookkeeping only: compiles and debug-mode waits release it.
using Lock = std::unique_lock<std::mutex>;
std::mutex& executor_mutex();

// Inside a backward pass (on the autograd engine's threads and on the caller's): its context.
const BackwardContext* inherited_context();

struct Lane;
std::shared_ptr<Lane> current_lane();  // the calling thread's, or its backward pass's caller's
int64_t flushes_of(const Lane& lane);  // graphs the lane has run
// Runs the first `cut` calls of the lane's pending graph (all by default) as one program.
void flush_lane_locked(Lock& lock, const std::shared_ptr<Lane>& lane, const char* reason, size_t cut = SIZE_MAX);
// Waits until no graph but `own_lane`'s pending one holds any of `storages` (see executor.cpp).
bool settle_locked(Lock& lock, const std::vector<const Storage*>& storages, const Lane* own_lane);
bool graph_pending_locked(uint64_t epoch);  // a lane's pending graph has this epoch
// Runs `program` on `storages`, releasing the lock around its slow steps with the storages
// marked in flight.
void execute_locked(Lock& lock, const cache::Program& program, const std::vector<Storage*>& storages,
                    const RuntimeArguments& runtime, int device, const Blame& blame, const RunLabel& label);

// The graph torch.compile is capturing on this thread (graph_capture.cpp), which the flush that
// runs it fills in.
struct CaptureState {
  bool active = false;
  bool sizes_vary = false;
  uint64_t graph = 0;        // names the graph across its calls (begin_capture)
  uint64_t calls_seen = 0;   // calls recorded so far: with `graph`, where a call sits in it
  int64_t flushes_at_begin = 0;
  bool flushed_here = false;
  std::shared_ptr<Capture> result;
};
CaptureState& thread_capture();
// Called before the graph's launch, while the storages still hold the state it was built for;
// null when the graph cannot be replayed.
std::shared_ptr<Capture> make_capture(const std::vector<OpCall>& calls, const StorageSet& storages,
                                      const std::vector<int64_t>& offsets, int device);
int64_t replay_count();
void reset_replay_count();

}  // namespace tpu::exec
