#include "exec/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "cache/disk_cache.h"
#include "cache/program_cache.h"
#include "exec/compiler.h"
#include "exec/device_queue.h"
#include "exec/program_builder.h"
#include "exec/program_key.h"

namespace tpu::exec {

namespace {

std::atomic<Mode> g_default_mode{Mode::Strict};
thread_local std::optional<Mode> t_mode;
// The mode of the thread running backward, for the autograd engine's device threads, which run
// the backward ops but never chose a mode (autocast state reaches them the same way). -1: none.
std::atomic<int> g_backward_mode{-1};
LocationProvider g_location = nullptr;
std::atomic<SyncHook> g_sync_hook{nullptr};

struct AtomicCounters {
  std::atomic<int64_t> ops{0}, hits{0}, misses{0}, executions{0}, flushes{0}, outputs{0}, replays{0};
} g_counters;

// Everything below is guarded by g_mutex: the pending graph, the storages' executor fields.
std::mutex g_mutex;

// The ops recorded in defer-and-fuse and not yet run. One graph at a time, on one device.
struct PendingGraph {
  int device = -1;
  uint64_t epoch = 0;
  std::unique_ptr<StorageSet> storages;
  std::vector<OpCall> calls;
  std::string key;
  std::vector<int64_t> offsets;  // the views' runtime offsets, as append_call_key lists them
  std::string last_location;
  // Per call: where its part of the key and of the offsets ends, so that the graph can be cut
  // after any call.
  std::vector<size_t> key_ends, offsets_ends;
} g_graph;
uint64_t g_next_graph_epoch = 1;
std::map<std::string, int64_t> g_flush_reasons;
// Fragments of call keys whose lowering is known to succeed: a recorded op must be lowerable,
// because once recorded it can no longer take the CPU fallback.
std::unordered_set<std::string> g_lowerable;
// Programs compiled per user line that ended a graph: a line that keeps compiling is warned of.
std::map<std::string, int> g_compiles_by_site;

int64_t initial_max_pending() {
  const char* env = std::getenv("TORCH_TPU_MAX_PENDING_OPS");
  long long value = env ? std::atoll(env) : 0;
  return value > 0 ? value : 20000;
}
std::atomic<int64_t> g_max_pending{initial_max_pending()};

// A fused graph is also bounded by its expected compile time: a graph's compile grows with its
// size (about 15 ms per recorded op of a generation loop on XLA:CPU; a 4233-op graph took 166 s),
// so a loop with no host read in it is cut into graphs that each compile within this budget, and
// their compiles interleave with their runs instead of all coming first.
double fused_compile_budget_seconds() {
  static const double seconds = seconds_from_environment("TORCH_TPU_FUSED_COMPILE_BUDGET_S", 4.0);
  return seconds;
}
// Compile seconds per op of the fused graphs compiled so far (a running average), which turns
// the budget into an op count. Until a graph has been measured: 2 ms per op, what XLA:CPU takes
// for a training step's graph of a few hundred ops.
double g_fused_seconds_per_op = 2e-3;
constexpr int64_t kMinBoundedOps = 256;

int64_t fused_op_bound() {
  double by_cost = fused_compile_budget_seconds() / g_fused_seconds_per_op;
  return std::min<int64_t>(g_max_pending, std::max<int64_t>(kMinBoundedOps, static_cast<int64_t>(by_cost)));
}

// Where to cut a graph that reached its bound: at the last place where the ops that started it
// start again (a loop body's first ops), so that the next graph begins where this one began and
// a loop with no host read becomes the same program run again; at the end when nothing repeats.
// The signatures are computed here, once per cut, not while recording.
size_t repeat_point(const std::vector<OpCall>& calls) {
  constexpr size_t kWindow = 8;
  size_t n = calls.size();
  size_t window = std::min(kWindow, n / 4);
  if (window == 0) return n;
  std::vector<uint64_t> signatures(n);
  for (size_t i = 0; i < n; ++i) signatures[i] = call_signature(calls[i]);
  for (size_t i = n - window; i >= n / 4 && i > 0; --i) {
    if (std::equal(signatures.begin(), signatures.begin() + window, signatures.begin() + i)) return i;
  }
  return n;
}

std::string save_failed_program(const std::string& text) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/torch_tpu_failed_" +
                     std::to_string(std::hash<std::string>{}(text)) + ".mlir";
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return path;
  }
  return "";
}

std::string at_location(const std::string& location) {
  return location.empty() ? "" : " (at " + location + ")";
}

// Where a program's ops came from, for the slow-compile warning: how many, the first and last.
std::string origin_of(const std::vector<OpCall>& calls) {
  std::string text = std::to_string(calls.size()) + (calls.size() == 1 ? " op: " : " ops, from ") +
                     describe(calls.front()) + at_location(calls.front().location);
  if (calls.size() > 1) text += " to " + describe(calls.back()) + at_location(calls.back().location);
  return text;
}

// Compiles `program` from `calls`; a failure names the op that broke it.
void compile(cache::Program& program, const std::string& text, int64_t work_elements, ProgramKind kind,
             const std::vector<OpCall>& calls, const StorageSet& storages) {
  try {
    compile_program(program, text, work_elements, kind, [&] { return origin_of(calls); });
  } catch (const runtime::PjrtError& e) {
    // In a fused graph, find the op whose own program fails to name it and its line.
    const OpCall* culprit = &calls.back();
    std::string culprit_text = text;
    if (calls.size() > 1) {
      for (const OpCall& call : calls) {
        ProgramBuilder single(storages);
        single.lower(call);
        single.finish([](const Storage&) { return true; });
        try {
          runtime::Client::get().compile(single.text());
        } catch (const runtime::PjrtError&) {
          culprit = &call;
          culprit_text = single.text();
          break;
        }
      }
    }
    std::string path = save_failed_program(culprit_text);
    throw OpError(describe(*culprit) + " could not be compiled" + at_location(culprit->location) + ": " +
                  e.what() + (path.empty() ? "" : "\nThe StableHLO program was written to " + path));
  }
}

// Rank-0 buffers for runtime numbers, reused: most calls pass the same few values (alpha=1, ...).
runtime::BufferPtr number_buffer(const RuntimeNumber& number, int device) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int64_t>, runtime::BufferPtr> buffers;
  int64_t bits = number.i;
  if (number.dtype == DType::F64) std::memcpy(&bits, &number.f, sizeof bits);
  auto key = std::make_tuple(device, static_cast<int>(number.dtype), bits);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = buffers.find(key);
  if (it != buffers.end()) return it->second;
  if (buffers.size() > 4096) buffers.clear();
  runtime::BufferPtr buffer;
  auto& client = runtime::Client::get();
  if (number.dtype == DType::F64) {
    buffer = client.from_host(&number.f, {DType::F64, {}}, device);
  } else if (number.dtype == DType::Bool) {
    bool value = number.i != 0;
    buffer = client.from_host(&value, {DType::Bool, {}}, device);
  } else {
    buffer = client.from_host(&number.i, {DType::I64, {}}, device);
  }
  buffers.emplace(key, buffer);
  return buffer;
}

// Finds or builds the program for `calls` (whose storages are in `storages`, keyed by `key`).
// Dead storages never become results.
// Storages that leave a program even when no tensor holds them any more: what the rest of a
// graph cut in two still reads.
using KeepSet = std::unordered_set<const Storage*>;

cache::ProgramPtr find_or_build(std::string& key, ProgramKind kind, const std::vector<OpCall>& calls,
                                const StorageSet& storages, const KeepSet& also_keep) {
  auto keep = [&](const Storage& s) { return s.alive.load() || also_keep.count(&s) > 0; };
  key.push_back('#');
  for (const Storage* s : storages.items()) key.push_back(keep(*s) ? '1' : '0');

  auto& cache = cache::ProgramCache::get();
  cache::ProgramPtr program = cache.find(key);
  if (program) {
    ++g_counters.hits;
    note_run(key, program);
    return program;
  }
  ++g_counters.misses;
  ProgramBuilder builder(storages);
  for (const OpCall& call : calls) builder.lower(call);
  auto built = std::make_shared<cache::Program>(builder.finish(keep));
  compile(*built, builder.text(), builder.work_elements(), kind, calls, storages);
  cache.insert(key, built);
  return built;
}

// What a program's arguments come from besides storages: the calls' runtime numbers in order,
// the (seed, offset) of each random call, and the views' offsets into their storages.
struct RuntimeArguments {
  std::vector<RuntimeNumber> numbers;
  std::vector<std::pair<uint64_t, uint64_t>> rng_states;
  std::vector<int64_t> offsets;

  RuntimeArguments(const std::vector<OpCall>& calls, std::vector<int64_t> view_offsets)
      : offsets(std::move(view_offsets)) {
    for (const OpCall& call : calls) {
      numbers.insert(numbers.end(), call.numbers.begin(), call.numbers.end());
      if (call.lowering->random) rng_states.emplace_back(call.seed, call.offset);
    }
  }
};

// Runs `program` with its storage parameters and results taken from `storages` (indexed like the
// program's storage set) and installs the results. `blame` names the op in error messages.
void execute(const cache::Program& program, const std::vector<Storage*>& storages, const RuntimeArguments& runtime,
             int device, bool wait, const std::string& blame) {
  auto& client = runtime::Client::get();
  std::vector<runtime::BufferPtr> keep_alive;
  std::vector<const runtime::Buffer*> arguments;
  arguments.reserve(program.parameters.size());
  for (const auto& parameter : program.parameters) {
    switch (parameter.source) {
      case cache::Program::Parameter::Source::Storage:
        arguments.push_back(storages[parameter.index]->buffer.get());
        break;
      case cache::Program::Parameter::Source::Number:
        keep_alive.push_back(number_buffer(runtime.numbers[parameter.index], device));
        arguments.push_back(keep_alive.back().get());
        break;
      case cache::Program::Parameter::Source::Offset: {
        RuntimeNumber offset{DType::I64, 0, runtime.offsets[parameter.index]};
        keep_alive.push_back(number_buffer(offset, device));
        arguments.push_back(keep_alive.back().get());
        break;
      }
      case cache::Program::Parameter::Source::RngState: {
        const auto& rng = runtime.rng_states[parameter.index];
        uint64_t state[2] = {rng.first, rng.second};
        keep_alive.push_back(client.from_host(state, {DType::U64, {2}}, device));
        arguments.push_back(keep_alive.back().get());
        break;
      }
    }
  }

  runtime::ExecuteResult result;
  try {
    result = client.execute(*program.executable, device, arguments, program.output_types);
  } catch (const runtime::PjrtError& e) {
    throw OpError(blame + " failed to launch: " + e.what(), e.out_of_memory());
  }
  ++g_counters.executions;
  g_counters.outputs += static_cast<int64_t>(result.outputs.size());
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    Storage* s = storages[program.output_storages[i]];
    s->buffer = result.outputs[i];
    s->dtype = program.output_dtypes[i];
  }
  if (wait) {
    try {
      client.wait(result.done);
    } catch (const runtime::PjrtError& e) {
      throw OpError(blame + " failed on the device: " + e.what(), e.out_of_memory());
    }
  } else {
    track(device, result.done);
  }
}

std::string blame(const OpCall& call) { return describe(call) + at_location(call.location); }

cache::ProgramPtr launch(std::string& key, ProgramKind kind, const std::vector<OpCall>& calls,
                         const StorageSet& storages, std::vector<int64_t> offsets, int device, bool wait,
                         const KeepSet& also_keep = {}) {
  cache::ProgramPtr program = find_or_build(key, kind, calls, storages, also_keep);
  RuntimeArguments runtime(calls, std::move(offsets));
  execute(*program, storages.items(), runtime, device, wait, blame(calls.back()));
  return program;
}

// The graph torch.compile is capturing on this thread (see begin_capture).
struct CaptureState {
  bool active = false;
  int64_t flushes_at_begin = 0;
  bool flushed_here = false;
  std::shared_ptr<Capture> result;
};
thread_local CaptureState t_capture;

// Called before the graph's launch, while the storages still hold the state it was built for.
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
    capture->states.push_back({s->buffer != nullptr, s->dtype, s->nbytes});
  }
  capture->numbers = std::move(runtime.numbers);
  capture->offsets = std::move(runtime.offsets);
  capture->device = device;
  capture->blame = blame(calls.back());
  return capture;
}

void warn_if_site_keeps_compiling(const std::string& site);

void record_locked(OpCall&& call);
void run_one_by_one_locked(const std::vector<OpCall>& calls);

// Runs the first `cut` calls of the pending graph as one program (all of them by default) and
// records the rest again as the start of the next graph. Caller holds g_mutex.
void flush_locked(const char* reason, size_t cut = SIZE_MAX) {
  if (g_graph.calls.empty()) return;
  ++g_counters.flushes;
  ++g_flush_reasons[reason];
  std::vector<OpCall> calls = std::move(g_graph.calls);
  std::vector<OpCall> rest;
  KeepSet read_later;
  if (cut < calls.size() && cut > 0) {
    rest.assign(std::make_move_iterator(calls.begin() + cut), std::make_move_iterator(calls.end()));
    calls.resize(cut);
    g_graph.key.resize(g_graph.key_ends[cut - 1]);
    g_graph.offsets.resize(g_graph.offsets_ends[cut - 1]);
    for (const OpCall& call : rest) {
      for (const auto& view : call.inputs) read_later.insert(view.storage.get());
      for (const auto& view : call.destinations) read_later.insert(view.storage.get());
    }
  }
  std::unique_ptr<StorageSet> storages = std::move(g_graph.storages);
  std::string key = std::move(g_graph.key);
  std::vector<int64_t> offsets = std::move(g_graph.offsets);
  std::string site = rest.empty() ? std::move(g_graph.last_location) : calls.back().location;
  int device = g_graph.device;
  g_graph = PendingGraph{};
  int64_t misses = g_counters.misses;
  std::shared_ptr<Capture> capture;
  ProgramKind kind = t_capture.active ? ProgramKind::CompiledGraph : ProgramKind::FusedGraph;
  if (t_capture.active && !t_capture.flushed_here) {
    t_capture.flushed_here = true;
    capture = make_capture(calls, *storages, offsets, device);
  }
  double seconds_before = compile_seconds(kind);
  cache::ProgramPtr program;
  try {
    program = launch(key, kind, calls, *storages, std::move(offsets), device, /*wait=*/false, read_later);
  } catch (const OpError&) {
    if (calls.size() == 1) throw;
    // Nothing of the graph ran. Its calls run one by one instead, so that every write recorded
    // before the op that fails takes effect and the error raised is that op's own; when none
    // fails (the graph failed as a whole), the graph's work is done all the same.
    capture.reset();
    try {
      run_one_by_one_locked(calls);
    } catch (...) {
      for (OpCall& call : rest) record_locked(std::move(call));
      throw;
    }
  }
  if (program && g_counters.misses != misses) {
    double spent = compile_seconds(kind) - seconds_before;
    g_fused_seconds_per_op = 0.5 * g_fused_seconds_per_op + 0.5 * spent / static_cast<double>(calls.size());
    if (!site.empty()) warn_if_site_keeps_compiling(site);
  }
  if (capture) {
    capture->program = program;
    t_capture.result = std::move(capture);
  }
  for (OpCall& call : rest) record_locked(std::move(call));
}

void run_one_by_one_locked(const std::vector<OpCall>& calls) {
  // Every storage of the graph stays: a later call may read what an earlier one wrote.
  KeepSet all;
  for (const OpCall& call : calls) {
    for (const auto& view : call.inputs) all.insert(view.storage.get());
    for (const auto& view : call.destinations) all.insert(view.storage.get());
  }
  for (const OpCall& call : calls) {
    StorageSet storages;
    std::string key;
    std::vector<int64_t> offsets;
    append_call_key(key, call, storages, offsets);
    launch(key, ProgramKind::PerOp, {call}, storages, std::move(offsets), call.device, /*wait=*/false, all);
  }
}

void record_locked(OpCall&& call) {
  // record_locked may flush, and a flush records the rest of a cut graph through here.
  if (!g_graph.calls.empty() && g_graph.device != call.device) flush_locked("device change");
  if (g_graph.calls.empty()) {
    g_graph.device = call.device;
    g_graph.epoch = g_next_graph_epoch++;
    g_graph.storages = std::make_unique<StorageSet>();
  }
  size_t start = g_graph.key.size();
  size_t offsets_start = g_graph.offsets.size();
  append_call_key(g_graph.key, call, *g_graph.storages, g_graph.offsets);
  std::string fragment = g_graph.key.substr(start);
  if (!g_lowerable.count(fragment)) {
    try {
      ProgramBuilder trial(*g_graph.storages);
      trial.lower(call);
    } catch (...) {
      g_graph.key.resize(start);
      g_graph.offsets.resize(offsets_start);
      if (g_graph.calls.empty()) g_graph = PendingGraph{};
      throw;
    }
    g_lowerable.insert(std::move(fragment));
  }
  for (const auto& input : call.inputs) input.storage->graph_epoch = g_graph.epoch;
  for (const auto& dest : call.destinations) {
    if (dest.storage) dest.storage->graph_epoch = g_graph.epoch;
  }
  g_graph.last_location = call.location;
  g_graph.key_ends.push_back(g_graph.key.size());
  g_graph.offsets_ends.push_back(g_graph.offsets.size());
  g_graph.calls.push_back(std::move(call));
  if (static_cast<int64_t>(g_graph.calls.size()) >= fused_op_bound()) {
    flush_locked("pending-op bound", repeat_point(g_graph.calls));
  }
}

bool pending_locked(const Storage& s) { return !g_graph.calls.empty() && s.graph_epoch == g_graph.epoch; }

void warn_if_site_keeps_compiling(const std::string& site) {
  constexpr int kTolerated = 8;
  if (++g_compiles_by_site[site] != kTolerated + 1) return;
  cache::warn("tpu: the fused graph ending at " + site + " has been compiled " +
                    std::to_string(kTolerated + 1) +
                    " times: something in it changes every time (a shape, a dtype, a Python "
                    "number used as a shape, or where the graph is cut). Each change costs a "
                    "compilation; see torch_tpu.metrics()['flush_reasons'].");
}

}  // namespace

Mode current_mode() {
  if (t_mode) return *t_mode;
  int backward = g_backward_mode.load();
  return backward >= 0 ? static_cast<Mode>(backward) : g_default_mode.load();
}
int swap_backward_mode(int mode) { return g_backward_mode.exchange(mode); }
void set_mode(Mode mode) { t_mode = mode; }
void set_default_mode(Mode mode) { g_default_mode = mode; }
int swap_thread_mode(int mode) {
  int previous = t_mode ? static_cast<int>(*t_mode) : -1;
  if (mode < 0) {
    t_mode.reset();
  } else {
    t_mode = static_cast<Mode>(mode);
  }
  return previous;
}

void set_location_provider(LocationProvider provider) { g_location = provider; }
void set_sync_hook(SyncHook hook) { g_sync_hook = hook; }
void set_max_pending_ops(int64_t ops) { g_max_pending = ops > 0 ? ops : 1; }

void run(OpCall call) {
  runtime::raise_if_forked_child();  // the lock and the device queue may be the parent's
  ++g_counters.ops;
  Mode mode = current_mode();
  if (mode == Mode::Fused) {
    // Captured now, outside the lock (it takes the GIL): the graph may fail long after this line.
    if (g_location) call.location = g_location();
    std::lock_guard<std::mutex> lock(g_mutex);
    record_locked(std::move(call));
    return;
  }
  try {
    std::lock_guard<std::mutex> lock(g_mutex);
    // Another thread's fused graph may hold values this op reads or writes.
    if (!g_graph.calls.empty()) flush_locked("op in another mode");
    StorageSet storages;
    std::string key;
    std::vector<int64_t> offsets;
    append_call_key(key, call, storages, offsets);
    std::vector<OpCall> calls;
    calls.push_back(std::move(call));
    launch(key, ProgramKind::PerOp, calls, storages, std::move(offsets), calls.back().device,
           /*wait=*/mode == Mode::Debug);
  } catch (const OpError& e) {
    std::string where = g_location ? g_location() : "";
    if (where.empty()) throw;
    throw OpError(std::string(e.what()) + at_location(where), e.out_of_memory());
  }
}

void flush(const char* reason) {
  runtime::raise_if_forked_child();
  std::lock_guard<std::mutex> lock(g_mutex);
  flush_locked(reason);
}

void materialize(const Storage& storage) {
  runtime::raise_if_forked_child();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (pending_locked(storage)) flush_locked("host access");
}

void copy_view(const TensorView& src, const TensorView& dst) {
  static const lowering::Entry* copy = lowering::find_lowering("_tpu_copy");
  TensorView source = src;
  if (src.storage->device != dst.storage->device) {
    materialize(*src.storage);
    if (src.storage->buffer) {
      auto moved = std::make_shared<Storage>();
      moved->device = dst.storage->device;
      moved->nbytes = src.storage->nbytes;
      moved->dtype = src.storage->dtype;
      moved->buffer = runtime::Client::get().copy_to_device(*src.storage->buffer, dst.storage->device);
      source.storage = moved;
    }
  }
  OpCall call;
  call.name = "_tpu_copy";
  call.lowering = copy;
  lowering::Arg arg;
  arg.kind = lowering::Arg::Kind::Tensor;
  arg.slot = 0;
  call.args.push_back(arg);
  call.inputs.push_back(source);
  call.outputs.push_back({dst.dtype, dst.layout.sizes});
  call.destinations.push_back(dst);
  call.device = dst.storage->device;
  run(std::move(call));
}

runtime::BufferPtr dense_buffer(const TensorView& view) {
  const Storage& s = *view.storage;
  materialize(s);
  int64_t count = numel(view.layout.sizes);
  if (s.buffer && s.dtype == view.dtype && view.layout.offset == 0 &&
      count == s.length_as(s.dtype) && lowering::is_contiguous(view.layout)) {
    return s.buffer;
  }
  auto dense = std::make_shared<Storage>();
  dense->device = s.device;
  dense->nbytes = count * itemsize(view.dtype);
  dense->dtype = view.dtype;
  TensorView target{dense, view.dtype, lowering::dense_layout(view.layout.sizes)};
  copy_view(view, target);
  materialize(*dense);
  return dense->buffer;
}

void synchronize(int device) {
  flush("synchronize");
  wait_for_device(device);
  if (SyncHook hook = g_sync_hook.load()) hook();
}

MarkerPtr record_marker(int device, bool timing) {
  flush("event record");
  return mark(device, timing);
}

bool idle(int device) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_graph.calls.empty() && g_graph.device == device) return false;
  }
  return device_idle(device);
}

void begin_capture() {
  std::lock_guard<std::mutex> lock(g_mutex);
  flush_locked("graph capture");
  t_capture = CaptureState{};
  t_capture.active = true;
  t_capture.flushes_at_begin = g_counters.flushes;
}

std::shared_ptr<Capture> end_capture() {
  std::lock_guard<std::mutex> lock(g_mutex);
  flush_locked("graph capture");
  CaptureState state = std::move(t_capture);
  t_capture = CaptureState{};
  // Exactly one graph, flushed by this thread: anything else (a fallback op, the pending-op
  // bound, another thread's flush) split it, and no single program replays it.
  if (!state.active || g_counters.flushes != state.flushes_at_begin + 1) return nullptr;
  return state.result;
}

bool replay(const Capture& capture, const std::vector<StoragePtr>& storages) {
  if (storages.size() != capture.storages.size()) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  flush_locked("graph replay");
  std::vector<Storage*> targets(storages.size(), nullptr);
  for (size_t i = 0; i < storages.size(); ++i) targets[i] = storages[i].get();
  // Only what the program reads and writes must be as it was built for.
  auto matches = [&](int32_t index) {
    const Storage* s = targets[index];
    const Capture::StorageState& state = capture.states[index];
    return s != nullptr && (s->buffer != nullptr) == state.had_buffer && s->nbytes == state.nbytes &&
           (!state.had_buffer || s->dtype == state.dtype) && s->device == capture.device;
  };
  for (const auto& parameter : capture.program->parameters) {
    if (parameter.source == cache::Program::Parameter::Source::Storage && !matches(parameter.index)) return false;
  }
  for (int32_t index : capture.program->output_storages) {
    if (!matches(index)) return false;
  }
  ++g_counters.replays;
  // Captured graphs have no random calls, hence no generator states.
  RuntimeArguments runtime({}, capture.offsets);
  runtime.numbers = capture.numbers;
  execute(*capture.program, targets, runtime, capture.device, current_mode() == Mode::Debug, capture.blame);
  return true;
}

Counters counters() {
  Counters c;
  c.ops = g_counters.ops;
  c.cache_hits = g_counters.hits;
  c.cache_misses = g_counters.misses;
  c.compile = compile_counters();
  for (double seconds : c.compile.seconds) c.compile_seconds += seconds;
  c.executions = g_counters.executions;
  c.program_outputs = g_counters.outputs;
  c.flushes = g_counters.flushes;
  c.replays = g_counters.replays;
  std::lock_guard<std::mutex> lock(g_mutex);
  c.flush_reasons = g_flush_reasons;
  return c;
}

void reset_counters() {
  g_counters.ops = 0;
  g_counters.hits = 0;
  g_counters.misses = 0;
  reset_compile_counters();
  g_counters.executions = 0;
  g_counters.outputs = 0;
  g_counters.flushes = 0;
  g_counters.replays = 0;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_flush_reasons.clear();
}

}  // namespace tpu::exec
