// torch.compile's graphs kept for replay: a graph is captured by running it once through the
// recording path (begin_capture, its ops, end_capture, whose flush fills in the capture), then
// its program runs on the storages of later calls' arguments without recording (replay).
#include <atomic>
#include <unordered_map>

#include "exec/device_trace.h"
#include "exec/executor_internal.h"
#include "exec/program_builder.h"
#include "exec/storage_state.h"

namespace tpu::exec {

namespace {

thread_local CaptureState t_capture;
std::atomic<int64_t> g_replays{0};

}  // namespace

CaptureState& thread_capture() { return t_capture; }
int64_t replay_count() { return g_replays; }
void reset_replay_count() { g_replays = 0; }

std::shared_ptr<Capture> make_capture(const std::vector<OpCall>& calls, const StorageSet& storages,
                                      const std::vector<int64_t>& offsets, int device) {
  auto capture = std::make_shared<Capture>();
  RuntimeArguments runtime(calls, offsets);
  if (!runtime.rng_states.empty()) return nullptr;  // each run must draw new random numbers
  // The set holds raw pointers; the calls hold the owning references.
  std::unordered_map<const Storage*, StoragePtr> owners;
  for (const OpCall& call : calls) {
    for (const auto& view : call.inputs) owners.emplace(view.storage.get(), view.storage);
    for (const auto& view : call.destinations) {
      if (view.storage) owners.emplace(view.storage.get(), view.storage);
    }
  }
  for (const Storage* s : storages.items()) {
    // A call whose trial lowering failed leaves its storages in the set without a call using them.
    auto owner = owners.find(s);
    capture->storages.push_back(owner == owners.end() ? nullptr : owner->second);
    const StorageState& state = state_of(*s);
    capture->states.push_back({state.buffer != nullptr, state.dtype, s->value_bytes()});
  }
  capture->numbers = std::move(runtime.numbers);
  capture->offsets = std::move(runtime.offsets);
  capture->device = device;
  capture->blame = blame(calls.back());
  std::vector<std::string> op_names;
  for (const OpCall& call : calls) op_names.push_back(describe(call));
  capture->trace_name = trace::summarize_ops(kind_name(ProgramKind::CompiledGraph), op_names, &capture->trace_ops);
  return capture;
}

void begin_capture(bool sizes_vary, uint64_t graph) {
  std::shared_ptr<Lane> lane = current_lane();
  Lock lock(executor_mutex());
  flush_lane_locked(lock, lane, "graph capture");
  CaptureState& capture = thread_capture();
  capture = CaptureState{};
  capture.active = true;
  capture.sizes_vary = sizes_vary;
  capture.graph = graph;
  capture.flushes_at_begin = flushes_of(*lane);
}

std::shared_ptr<Capture> end_capture() {
  std::shared_ptr<Lane> lane = current_lane();
  Lock lock(executor_mutex());
  flush_lane_locked(lock, lane, "graph capture");
  CaptureState state = std::move(thread_capture());
  thread_capture() = CaptureState{};
  // Exactly one graph, flushed by this thread: anything else (a fallback op, the pending-op
  // bound, another thread's flush) split it, and no single program replays it.
  if (!state.active || flushes_of(*lane) != state.flushes_at_begin + 1) return nullptr;
  return state.result;
}

bool replay(const Capture& capture, const std::vector<StoragePtr>& storages) {
  if (storages.size() != capture.storages.size()) return false;
  Lock lock(executor_mutex());
  std::vector<Storage*> targets(storages.size(), nullptr);
  std::vector<const Storage*> touched;
  for (size_t i = 0; i < storages.size(); ++i) {
    targets[i] = storages[i].get();
    if (targets[i]) touched.push_back(targets[i]);
  }
  settle_locked(lock, touched, nullptr);
  // Only what the program reads and writes must be as it was built for.
  auto matches = [&](int32_t index) {
    const Storage* s = targets[index];
    const Capture::StorageState& state = capture.states[index];
    if (s == nullptr) return false;
    const StorageState& now = state_of(*s);
    return (now.buffer != nullptr) == state.had_buffer && s->value_bytes() == state.value_bytes &&
           (!state.had_buffer || now.dtype == state.dtype) && s->device == capture.device;
  };
  for (const auto& parameter : capture.program->parameters) {
    if (parameter.source == cache::Program::Parameter::Source::Storage && !matches(parameter.index)) return false;
  }
  for (int32_t index : capture.program->output_storages) {
    if (!matches(index)) return false;
  }
  ++g_replays;
  // Captured graphs have no random calls, hence no generator states.
  RuntimeArguments runtime({}, capture.offsets);
  runtime.numbers = capture.numbers;
  execute_locked(lock, *capture.program, targets, runtime, capture.device, [&capture] { return capture.blame; },
                 RunLabel{ProgramKind::CompiledGraph, nullptr, &capture.trace_name, &capture.trace_ops});
  return true;
}

}  // namespace tpu::exec
