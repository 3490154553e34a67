// What the device did while a profiler trace is on: each program run, with the device time it
// took, and each compile. PyTorch's profiler reads it through csrc/aten/kineto_device_trace.cpp;
// this layer knows nothing of PyTorch, so the recording and the timing model are unit-tested.
//
// Device times come from PJRT's completion events, seen on the host clock: a program's device
// span starts when it was enqueued or when the program before it on its device finished,
// whichever is later, and ends when its completion event fires. That is the span a device that
// runs its programs in order spends on it; PJRT offers no device-side timestamps through the C
// API, so nothing finer is claimed.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "exec/device_queue.h"

namespace tpu::exec::trace {

// Host wall-clock nanoseconds since the Unix epoch: the clock PyTorch's profiler events are on.
int64_t wall_now_ns();

struct ProgramRun {
  std::string name;    // the op (per-op programs) or a summary of the graph's ops
  std::string ops;     // every op of the program with its count, for the trace's arguments
  const char* kind;    // "per_op", "fused_graph", "compiled_graph"
  int device = 0;
  uint64_t correlation = 0;  // the PyTorch op that launched it (0: none known)
  int64_t output_bytes = 0;  // what the run allocated for its results
  int64_t enqueued_ns = 0;   // wall clock: the host began the launch
  int64_t launched_ns = 0;   // wall clock: the launch call returned
  uint64_t launch_thread = 0;  // the launching thread (system id)
  int64_t start_ns = 0;      // wall clock, filled by take()
  int64_t end_ns = 0;        // wall clock, filled by take()
  CompletionPtr completion;  // null when the run was waited for at once
  int64_t waited_ns = 0;     // wall clock at which the host saw it finish, when waited for
};

struct Compile {
  std::string name;    // "compile per_op", "compile fused_graph", ...: one row per kind in a summary
  std::string origin;  // the ops it compiled and their lines
  bool background = false;  // a full-optimisation upgrade of a quick program
  uint64_t correlation = 0;
  uint64_t thread = 0;  // the compiling thread (system id)
  int64_t start_ns = 0, end_ns = 0;
};

struct Trace {
  std::vector<ProgramRun> runs;  // in launch order; at most kMaxRuns, the rest are counted
  std::vector<Compile> compiles;
  int64_t dropped_runs = 0;
};
constexpr size_t kMaxRuns = 1 << 20;  // about 200 MB of records: a long script watched whole

// True between start() and stop(); the executor checks it before describing anything.
inline std::atomic<bool>& active_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}
inline bool active() { return active_flag().load(std::memory_order_relaxed); }

void start();  // discards what an earlier trace left
void stop();
// The recorded activity with device spans resolved (waits, without raising, for runs still on
// the device); the recorder is left empty.
Trace take();

// The profiler's correlation ids, per thread: the op currently running on this thread.
void push_correlation(uint64_t id);
void pop_correlation();
uint64_t current_correlation();
// Links what launches in its scope to `id` when no op is current: a pending graph flushed from
// Python outside any op (synchronize, the end of a strict optimizer step) is linked to the last op
// recorded into it.
class FallbackCorrelation {
 public:
  explicit FallbackCorrelation(uint64_t id) : pushed_(id != 0 && current_correlation() == 0) {
    if (pushed_) push_correlation(id);
  }
  ~FallbackCorrelation() {
    if (pushed_) pop_correlation();
  }
  FallbackCorrelation(const FallbackCorrelation&) = delete;
  FallbackCorrelation& operator=(const FallbackCorrelation&) = delete;

 private:
  bool pushed_;
};

uint64_t this_thread_id();  // the system's id, as the profiler's host lanes are named
void record_run(ProgramRun run);
void record_compile(Compile compile);

// Device spans from enqueue and finish times under the in-order model above: runs of one device
// in launch order, each starting no earlier than its predecessor's end and never after its own.
void resolve_spans(std::vector<ProgramRun>& runs);

// "per_op: aten::mm" for one op; "fused_graph: 12 ops (aten::mm, aten::add, aten::tanh, ...)" for more,
// naming the first distinct ops; `counts` gets "aten::mm x4, aten::add x8, ...".
std::string summarize_ops(const char* kind, const std::vector<std::string>& op_names, std::string* counts);

}  // namespace tpu::exec::trace
