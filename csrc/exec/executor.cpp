#include "exec/executor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "cache/disk_cache.h"
#include "exec/compiler.h"
#include "exec/executor_internal.h"
#include "exec/storage_state.h"
#include "exec/device_queue.h"
#include "exec/device_trace.h"
#include "exec/graph_cuts.h"
#include "exec/launch.h"
#include "exec/padding.h"
#include "exec/padding_choice.h"
#include "exec/program_builder.h"
#include "exec/program_key.h"
#include "exec/word_hash.h"

namespace tpu::exec {

namespace {

LocationProvider g_location;
std::atomic<SyncHook> g_sync_hook{nullptr};
std::atomic<int64_t> g_ops{0}, g_flushes{0};

// Everything below is guarded by g_mutex (executor_mutex()): the lanes' pending graphs, every
// StorageState, the epochs pending and in flight. It is held for bookkeeping only: compiles and
// debug-mode waits release it (launch.h).
std::mutex g_mutex;
// Notified when a graph in flight has run or a lane's flush ends.
std::condition_variable g_settled;

// The ops recorded in defer-and-fuse and not yet run: one graph per lane, on one device.
struct PendingGraph {
  int device = -1;
  uint64_t epoch = 0;
  std::unique_ptr<StorageSet> storages;
  std::vector<OpCall> calls;
  std::string key;
  std::vector<int64_t> offsets;  // the views' runtime offsets, as append_call_key lists them
  SourceLocation last_location;
  // What the compile-time bound measures: ops, a list op (a foreach call, a fused optimizer)
  // counting one per tensor it writes, since its program holds each entry's update.
  int64_t weight = 0;
  uint64_t last_correlation = 0;  // the profiler's id of the op that recorded the last call
  // Per call: where its part of the key and of the offsets ends, so that the graph can be cut
  // after any call.
  std::vector<size_t> key_ends, offsets_ends;
  // The history key of the last call planned (exec/padding.h): the next call's site.
  uint64_t padding_chain = 0;
  LoopSignatures loop_signatures;  // of the calls probed for a growing loop so far
};

}  // namespace

// A thread's pending graph. Each thread records into its own, so threads' ops never interleave
// into graphs whose structure changes with the timing; the autograd engine's threads record
// into the lane of the thread that called backward() (BackwardContext), so a fused forward and
// its backward stay one graph.
struct Lane {
  PendingGraph graph;
  bool flushing = false;  // a flush of this lane is running (maybe with the lock released)
  int64_t flushes = 0;    // graphs this lane has run, for end_capture
  // The ops of one iteration of the loop this lane is recording, when it records a loop whose
  // sizes grow (0: none known): each iteration becomes one graph.
  size_t loop_period = 0;
  // Storages of the calls of a cut graph still waiting to be recorded again: a graph flushed
  // while they are (a cut inside the rest of a cut) keeps them as results, dead or alive.
  KeepSet awaiting_rerecord;
  int rerecord_depth = 0;
  // The sizes the last graph reached: the next one reserves them, since a loop records graphs of
  // one size, and growing a vector of hundreds of calls or a key of tens of kilobytes moves them.
  size_t last_calls = 0, last_key_bytes = 0, last_offsets = 0;
};

namespace {

thread_local std::shared_ptr<Lane> t_lane;

// The lists of finished calls, emptied, for reused_call(). Only small ones are kept (a list op's
// lists hold thousands of entries), and only so many that a large graph's flush keeps little.
struct CallLists {
  std::vector<lowering::Arg> args;
  std::vector<TensorView> inputs;
  std::vector<RuntimeNumber> numbers;
  std::vector<lowering::Output> outputs;
  std::vector<TensorView> destinations;
};
void swap_lists(OpCall& call, CallLists& lists) {
  call.args.swap(lists.args);
  call.inputs.swap(lists.inputs);
  call.numbers.swap(lists.numbers);
  call.outputs.swap(lists.outputs);
  call.destinations.swap(lists.destinations);
}
constexpr size_t kReusedListRoom = 8;
constexpr size_t kReusedCalls = 1024;
thread_local std::vector<CallLists> t_spare_lists;

void keep_lists_of(std::vector<OpCall>& calls) {
  std::vector<CallLists>& spares = t_spare_lists;
  for (OpCall& call : calls) {
    if (spares.size() >= kReusedCalls) return;
    if (call.args.capacity() > kReusedListRoom || call.inputs.capacity() > kReusedListRoom ||
        call.numbers.capacity() > kReusedListRoom || call.outputs.capacity() > kReusedListRoom ||
        call.destinations.capacity() > kReusedListRoom) {
      continue;
    }
    CallLists& lists = spares.emplace_back();
    swap_lists(call, lists);
    lists.args.clear();
    lists.inputs.clear();
    lists.numbers.clear();
    lists.outputs.clear();
    lists.destinations.clear();
  }
}

// Lanes whose pending graph has this epoch. A lane with pending ops outlives its thread here:
// what the thread recorded runs when something reads it.
std::unordered_map<uint64_t, std::shared_ptr<Lane>> g_pending;
// Epochs of graphs (and of per-op programs being compiled) taken to run and not yet run: their
// storages' values are on their way, so other threads wait for them.
std::unordered_set<uint64_t> g_in_flight;
uint64_t g_next_epoch = 1;
std::map<std::string, int64_t> g_flush_reasons;
// Hashes of the call-key fragments whose lowering is known to succeed: a recorded op must be
// lowerable, because once recorded it can no longer take the CPU fallback. (A hash, not the
// fragment: an op's fragment is rebuilt each time it is recorded, and copying and comparing it
// was a visible part of recording one.)
std::unordered_set<uint64_t> g_lowerable;
// Programs compiled per user line that ended a graph: a line that keeps compiling is warned of.
std::map<std::string, int> g_compiles_by_site;

}  // namespace

std::shared_ptr<Lane> current_lane() {
  if (const BackwardContext* context = inherited_context(); context && context->lane) return context->lane;
  if (!t_lane) t_lane = std::make_shared<Lane>();
  return t_lane;
}

std::mutex& executor_mutex() { return g_mutex; }
int64_t flushes_of(const Lane& lane) { return lane.flushes; }
bool graph_pending_locked(uint64_t epoch) { return g_pending.count(epoch) > 0; }

namespace {

Unlocker unlocker_for(Lock& lock) {
  return {[&lock] { lock.unlock(); }, [&lock] { lock.lock(); }};
}

// Lets the lock go around a launch's slow steps (a compile, a debug-mode wait), marking
// `storages` in flight meanwhile so that other threads touching them wait; they land when this
// is destroyed, with the lock held again.
class InFlightWhileUnlocked {
 public:
  InFlightWhileUnlocked(Lock& lock, const std::vector<Storage*>& storages)
      : lock_(lock),
        storages_(storages),
        unlocker_{[this] { release(); }, [this] { lock_.lock(); }} {}
  ~InFlightWhileUnlocked() {
    if (epoch_ == 0) return;
    g_in_flight.erase(epoch_);
    g_settled.notify_all();
  }
  InFlightWhileUnlocked(const InFlightWhileUnlocked&) = delete;
  InFlightWhileUnlocked& operator=(const InFlightWhileUnlocked&) = delete;
  const Unlocker& unlocker() const { return unlocker_; }

 private:
  void release() {
    if (epoch_ == 0) {
      epoch_ = g_next_epoch++;
      g_in_flight.insert(epoch_);
      for (Storage* s : storages_) {
        if (s) state_of(*s).graph_epoch = epoch_;
      }
    }
    lock_.unlock();
  }
  Lock& lock_;
  const std::vector<Storage*>& storages_;  // outlives this
  Unlocker unlocker_;
  uint64_t epoch_ = 0;
};

}  // namespace

void execute_locked(Lock& lock, const cache::Program& program, const std::vector<Storage*>& storages,
                    const RuntimeArguments& runtime, int device, const Blame& blame, const RunLabel& label) {
  InFlightWhileUnlocked in_flight(lock, storages);
  execute(program, storages, runtime, device, current_mode() == Mode::Debug, blame, label, in_flight.unlocker());
}

namespace {

std::vector<const Storage*> storages_of(const OpCall& call) {
  std::vector<const Storage*> storages;
  for (const auto& view : call.inputs) storages.push_back(view.storage.get());
  for (const auto& view : call.destinations) {
    if (view.storage) storages.push_back(view.storage.get());
  }
  return storages;
}

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
constexpr size_t kLoopProbe = 128;  // the smallest graph probed for a growing loop

int64_t weight_of(const OpCall& call) {
  int64_t results = static_cast<int64_t>(call.destinations.size()) - (call.lowering && call.lowering->checked ? 1 : 0);
  return std::max<int64_t>(1, results);
}

int64_t fused_op_bound() {
  double by_cost = fused_compile_budget_seconds() / g_fused_seconds_per_op;
  return std::min<int64_t>(g_max_pending, std::max<int64_t>(kMinBoundedOps, static_cast<int64_t>(by_cost)));
}

bool nothing_to_settle(const Lane* own_lane) {
  // One thread, strict or fused: nothing but its own graph can hold a storage.
  bool only_own = g_pending.empty() ||
                  (own_lane && g_pending.size() == 1 && g_pending.begin()->second.get() == own_lane);
  return only_own && g_in_flight.empty();
}

}  // namespace

// Waits until no graph but `own_lane`'s pending one holds any of `storages`: a graph pending in
// another lane is run (in this one too when `own_lane` is null), one in flight is waited for.
// True when it had to let the lock go, so that the caller checks its own state again.
bool settle_locked(Lock& lock, const std::vector<const Storage*>& storages, const Lane* own_lane) {
  if (nothing_to_settle(own_lane)) return false;
  bool released = false;
  for (bool again = true; again;) {
    again = false;
    for (const Storage* s : storages) {
      uint64_t epoch = state_of(*s).graph_epoch;
      if (epoch == 0) continue;
      if (auto pending = g_pending.find(epoch); pending != g_pending.end()) {
        if (pending->second.get() == own_lane) continue;
        std::shared_ptr<Lane> lane = pending->second;
        flush_lane_locked(lock, lane, own_lane ? "op of another thread" : "host access");
      } else if (g_in_flight.count(epoch)) {
        g_settled.wait(lock);
      } else {
        continue;
      }
      released = again = true;
      break;
    }
  }
  return released;
}

namespace {




void warn_if_site_keeps_compiling(const std::string& site);
void record_locked(Lock& lock, const std::shared_ptr<Lane>& lane, OpCall&& call);
void run_one_by_one_locked(Lock& lock, const std::vector<OpCall>& calls);

// Records the rest of a cut graph again; what it reads stays a result of any graph flushed
// meanwhile (`reads`: its storages).
void rerecord(Lock& lock, const std::shared_ptr<Lane>& lane, std::vector<OpCall>& rest, const KeepSet& reads) {
  if (rest.empty()) return;
  if (lane->rerecord_depth++ == 0) lane->awaiting_rerecord.clear();
  lane->awaiting_rerecord.insert(reads.begin(), reads.end());
  struct Done {
    Lane& lane;
    ~Done() {
      if (--lane.rerecord_depth == 0) lane.awaiting_rerecord.clear();
    }
  } done{*lane};
  for (OpCall& call : rest) record_locked(lock, lane, std::move(call));
}

}  // namespace

// Runs the first `cut` calls of `lane`'s pending graph as one program (all of them by default)
// and records the rest again as the start of its next graph.

void flush_lane_locked(Lock& lock, const std::shared_ptr<Lane>& lane, const char* reason, size_t cut) {
  g_settled.wait(lock, [&] { return !lane->flushing; });
  PendingGraph& graph = lane->graph;
  if (graph.calls.empty()) return;
  ++g_flushes;
  ++lane->flushes;
  ++g_flush_reasons[reason];
  lane->last_calls = graph.calls.size();
  lane->last_key_bytes = graph.key.size();
  lane->last_offsets = graph.offsets.size();
  std::vector<OpCall> calls = std::move(graph.calls);
  std::vector<OpCall> rest;
  KeepSet read_later;
  if (cut < calls.size() && cut > 0) {
    rest.assign(std::make_move_iterator(calls.begin() + cut), std::make_move_iterator(calls.end()));
    calls.resize(cut);
    graph.key.resize(graph.key_ends[cut - 1]);
    graph.offsets.resize(graph.offsets_ends[cut - 1]);
    for (const OpCall& call : rest) {
      for (const Storage* s : storages_of(call)) read_later.insert(s);
    }
  }
  read_later.insert(lane->awaiting_rerecord.begin(), lane->awaiting_rerecord.end());
  std::unique_ptr<StorageSet> storages = std::move(graph.storages);
  std::string key = std::move(graph.key);
  std::vector<int64_t> offsets = std::move(graph.offsets);
  SourceLocation site = rest.empty() ? graph.last_location : calls.back().location;
  int device = graph.device;
  uint64_t epoch = graph.epoch;
  trace::FallbackCorrelation correlation(graph.last_correlation);
  lane->graph = PendingGraph{};
  // In flight until it has run: other threads that touch its storages wait, and nothing records
  // into this lane meanwhile (the rest must come first).
  g_pending.erase(epoch);
  g_in_flight.insert(epoch);
  lane->flushing = true;
  bool landed = false;
  auto land = [&] {
    if (landed) return;
    landed = true;
    g_in_flight.erase(epoch);
    lane->flushing = false;
    g_settled.notify_all();
  };
  std::string exact_key = key;
  std::vector<int64_t> exact_offsets = offsets;
  // An iteration of a growing loop pads at once: the next iterations will run its program; so does
  // a torch.compile graph whose symbolic sizes have changed between its calls. Any
  // other graph pads once its padded key has met a second exact one, even when it takes operands
  // sized to their buckets: a padded graph compiles several times slower (its views are gathers
  // and scatters at runtime offsets), which only reuse repays (Llama's generate() in fused mode,
  // where each decode step's graph differs, took 121 s padding at once against 22 s exact).
  bool growing = std::string(reason) == "loop iteration" || (thread_capture().active && thread_capture().sizes_vary);
  // A torch.compile graph keeps its own buckets: its runner copies views of a longer upload out
  // before the graph runs, so its arguments never pair a bucket with the room above, and its
  // replays reuse what its capture ran with.
  BucketAbove above;
  choose_padding(calls, *storages, key, offsets, read_later, growing, thread_capture().active ? nullptr : &above);
  std::string chosen_key = key;
  std::shared_ptr<Capture> capture;
  ProgramKind kind = thread_capture().active ? ProgramKind::CompiledGraph : ProgramKind::FusedGraph;
  if (thread_capture().active && !thread_capture().flushed_here) {
    thread_capture().flushed_here = true;
    capture = make_capture(calls, *storages, offsets, device);
  }
  Launched launched;
  bool padded = chosen_key != exact_key;
  try {
    try {
      try {
        launched = launch(key, kind, calls, *storages, std::move(offsets), device, /*wait=*/false, read_later,
                          unlocker_for(lock));
      } catch (const PaddedProgramFailed&) {
        padded = false;
        decline_failed_padding(calls, *storages, chosen_key);
        above.undo(calls);
        if (capture) capture = make_capture(calls, *storages, exact_offsets, device);
        launched = launch(exact_key, kind, calls, *storages, std::move(exact_offsets), device, /*wait=*/false,
                          read_later, unlocker_for(lock));
      }
    } catch (const OpError&) {
      if (calls.size() == 1) throw;
      // Nothing of the graph ran. Its calls run one by one instead, so that every write recorded
      // before the op that fails takes effect and the error raised is that op's own; when none
      // fails (the graph failed as a whole), the graph's work is done all the same.
      capture.reset();
      run_one_by_one_locked(lock, calls);
    }
  } catch (...) {
    land();
    rerecord(lock, lane, rest, read_later);
    throw;
  }
  land();
  if (launched.compile_seconds > 0) {
    // Only exact graphs measure the cost per op. A padded graph compiles several times slower per
    // op (its views are gathers and scatters at runtime offsets) but is compiled once per bucket:
    // measured, it shrank the bound below a training step's size, which was then cut into graphs
    // that compiled anew while its whole padded program sat in the cache.
    if (!padded) {
      int64_t weight = 0;
      for (const OpCall& call : calls) weight += weight_of(call);
      g_fused_seconds_per_op = 0.5 * g_fused_seconds_per_op + 0.5 * launched.compile_seconds / static_cast<double>(weight);
    }
    if (site.known()) warn_if_site_keeps_compiling(format_location(site));
  }
  if (capture) {
    capture->program = launched.program;
    thread_capture().result = std::move(capture);
  }
  rerecord(lock, lane, rest, read_later);
  keep_lists_of(calls);  // last: its views may hold the only references to storages named above
}

namespace {

// The storages of `calls` are in flight already (their graph's epoch).
void run_one_by_one_locked(Lock& lock, const std::vector<OpCall>& calls) {
  // Every storage of the graph stays: a later call may read what an earlier one wrote.
  KeepSet all;
  for (const OpCall& call : calls) {
    for (const Storage* s : storages_of(call)) all.insert(s);
  }
  for (OpCall call : calls) {
    call.padded = false;
    StorageSet storages;
    std::string key;
    std::vector<int64_t> offsets;
    append_call_key(key, call, storages, offsets);
    launch(key, ProgramKind::PerOp, {call}, storages, std::move(offsets), call.device, /*wait=*/false, all,
           unlocker_for(lock));
  }
}

void record_locked(Lock& lock, const std::shared_ptr<Lane>& lane, OpCall&& call) {
  // Another thread flushing this lane (the autograd engine's, sharing it) or holding the call's
  // storages in its own graph goes first; both may let the lock go, so check again after.
  // The common case, one thread's own graph, lists no storages.
  std::vector<const Storage*> touched;
  do {
    g_settled.wait(lock, [&] { return !lane->flushing; });
    if (nothing_to_settle(lane.get())) break;
    if (touched.empty()) touched = storages_of(call);
  } while (settle_locked(lock, touched, lane.get()));
  PendingGraph& graph = lane->graph;
  // record_locked may flush, and a flush records the rest of a cut graph through here.
  if (!graph.calls.empty() && graph.device != call.device) flush_lane_locked(lock, lane, "device change");
  bool starts = graph.calls.empty();
  if (starts) {
    graph.device = call.device;
    graph.epoch = g_next_epoch++;
    graph.storages = std::make_unique<StorageSet>();
    graph.calls.reserve(lane->last_calls);
    graph.key.reserve(lane->last_key_bytes);
    graph.offsets.reserve(lane->last_offsets);
    graph.key_ends.reserve(lane->last_calls);
    graph.offsets_ends.reserve(lane->last_calls);
  }
  CaptureState& capture = thread_capture();
  // Each call of a graph notes its sizes in a history of its own, its site: in a torch.compile graph
  // its place in the graph, in a fused graph the calls before it (the history key of the one just
  // before, which holds that of the one before it, and so on). An op's calls at other sites then
  // never make its sizes look as if they vary: a layer's weight width met elsewhere, or a row
  // count that equals it (B * T = 64 rows of a 64-wide layer) seen as another site's width.
  uint64_t site = capture.active && capture.graph ? padding_site(capture.graph, capture.calls_seen++)
                                                  : graph.padding_chain | 1;
  graph.padding_chain = plan_padding(call, capture.active && capture.sizes_vary, site);
  size_t start = graph.key.size();
  size_t offsets_start = graph.offsets.size();
  append_call_key(graph.key, call, *graph.storages, graph.offsets);
  WordHash fragment_hash;
  fragment_hash.add(std::string_view(graph.key).substr(start));
  const uint64_t fragment = fragment_hash.value();
  if (!g_lowerable.count(fragment)) {
    try {
      ProgramBuilder trial(*graph.storages);
      trial.lower(call);
    } catch (...) {
      graph.key.resize(start);
      graph.offsets.resize(offsets_start);
      if (starts) graph = PendingGraph{};
      throw;
    }
    g_lowerable.insert(fragment);
  }
  if (starts) g_pending.emplace(graph.epoch, lane);
  for (const auto& view : call.inputs) state_of(*view.storage).graph_epoch = graph.epoch;
  for (const auto& view : call.destinations) {
    if (view.storage) state_of(*view.storage).graph_epoch = graph.epoch;
  }
  graph.last_location = call.location;
  graph.last_correlation = trace::current_correlation();
  graph.weight += weight_of(call);
  graph.key_ends.push_back(graph.key.size());
  graph.offsets_ends.push_back(graph.offsets.size());
  graph.calls.push_back(std::move(call));
  size_t n = graph.calls.size();
  if (lane->loop_period > 0 && n == lane->loop_period + kWindow) {
    if (next_iteration_starts(graph.calls, lane->loop_period)) {
      flush_lane_locked(lock, lane, "loop iteration", lane->loop_period);
      return;
    }
    lane->loop_period = 0;
  } else if (n >= kLoopProbe && (n & (n - 1)) == 0 && lane->loop_period == 0) {
    // Probed at powers of two: the cost stays linear in the graph's size.
    auto [start, period] = growing_loop(graph.calls, graph.loop_signatures);
    if (period > 0) {
      lane->loop_period = period;
      // What came before the first repeating iteration runs as a graph of its own.
      flush_lane_locked(lock, lane, start > 0 ? "loop start" : "loop iteration", start > 0 ? start : period);
      return;
    }
  }
  if (graph.weight >= fused_op_bound()) {
    flush_lane_locked(lock, lane, "pending-op bound", repeat_point(graph.calls));
  }
}

// Runs every graph pending or in flight now, whichever thread recorded it.
void flush_all_locked(Lock& lock, const char* reason) {
  std::vector<std::shared_ptr<Lane>> lanes;
  for (const auto& [epoch, lane] : g_pending) lanes.push_back(lane);
  for (const auto& lane : lanes) flush_lane_locked(lock, lane, reason);
  g_settled.wait(lock, [] { return g_in_flight.empty(); });
}

void warn_if_site_keeps_compiling(const std::string& site) {
  // Caller holds g_mutex.
  constexpr int kTolerated = 8;
  if (++g_compiles_by_site[site] != kTolerated + 1) return;
  cache::warn("tpu: the fused graph ending at " + site + " has been compiled " +
                    std::to_string(kTolerated + 1) +
                    " times: something in it changes every time (a shape, a dtype, a Python "
                    "number used as a shape, or where the graph is cut). Each change costs a "
                    "compilation; see torch_tpu.metrics()['flush_reasons'].");
}

}  // namespace

void set_location_provider(LocationProvider provider) { g_location = provider; }

std::string format_location(const SourceLocation& where) {
  return where.known() && g_location.format ? g_location.format(where) : "";
}
void set_sync_hook(SyncHook hook) { g_sync_hook = hook; }
void set_max_pending_ops(int64_t ops) { g_max_pending = ops > 0 ? ops : 1; }

OpCall reused_call() {
  OpCall call;
  std::vector<CallLists>& spares = t_spare_lists;
  if (spares.empty()) return call;
  swap_lists(call, spares.back());
  spares.pop_back();
  return call;
}

void run(OpCall call) {
  runtime::raise_if_forked_child();  // the lock and the device queue may be the parent's
  ++g_ops;
  Mode mode = current_mode();
  if (mode == Mode::Fused) {
    // Captured now, outside the lock (it takes the GIL): the graph may fail long after this line.
    if (g_location.capture) call.location = g_location.capture();
    std::shared_ptr<Lane> lane = current_lane();
    Lock lock(g_mutex);
    record_locked(lock, lane, std::move(call));
    return;
  }
  try {
    Lock lock(g_mutex);
    // A fused graph (another thread's, or this one's before a mode change) may hold values this
    // op reads or writes.
    if (!nothing_to_settle(nullptr)) settle_locked(lock, storages_of(call), nullptr);
    plan_padding(call);
    StorageSet storages;
    // Kept per thread between ops (strict mode builds one key per op): no allocation per op.
    thread_local std::string t_spare_key;
    std::string key = std::move(t_spare_key);
    key.clear();
    key.reserve(256);
    std::vector<int64_t> offsets;
    append_call_key(key, call, storages, offsets);
    std::vector<OpCall> calls;
    calls.push_back(std::move(call));
    // Only a call with a padding plan can take another key, or fail padded and need its exact one.
    std::string exact_key, chosen_key;
    std::vector<int64_t> exact_offsets;
    if (calls.back().padding) {
      exact_key = key;
      exact_offsets = offsets;
      // An op on operands sized to their buckets pads at once: its sizes are known to change.
      choose_padding(calls, storages, key, offsets, {}, takes_growing_operands(calls.back()));
      chosen_key = key;
    }
    {
      InFlightWhileUnlocked in_flight(lock, storages.items());
      bool wait = mode == Mode::Debug;
      try {
        launch(key, ProgramKind::PerOp, calls, storages, std::move(offsets), calls.back().device, wait, {},
               in_flight.unlocker());
      } catch (const PaddedProgramFailed&) {
        decline_failed_padding(calls, storages, chosen_key);
        launch(exact_key, ProgramKind::PerOp, calls, storages, std::move(exact_offsets), calls.back().device, wait,
               {}, in_flight.unlocker());
      }
    }
    t_spare_key = std::move(key);
    keep_lists_of(calls);  // after the in-flight mark is gone: its views may hold the last references
  } catch (const OpError& e) {
    SourceLocation where = g_location.capture ? g_location.capture() : SourceLocation{};
    if (!where.known()) throw;
    throw OpError(std::string(e.what()) + at_location(where), e.out_of_memory());
  }
}

void flush(const char* reason) {
  runtime::raise_if_forked_child();
  std::shared_ptr<Lane> lane = current_lane();
  Lock lock(g_mutex);
  flush_lane_locked(lock, lane, reason);
}

void materialize(const Storage& storage) {
  runtime::raise_if_forked_child();
  Lock lock(g_mutex);
  settle_locked(lock, {&storage}, nullptr);
}

void synchronize(int device) {
  runtime::raise_if_forked_child();
  {
    Lock lock(g_mutex);
    flush_all_locked(lock, "synchronize");
  }
  wait_for_device(device);
  if (SyncHook hook = g_sync_hook.load()) hook();
}

MarkerPtr record_marker(int device, bool timing) {
  flush("event record");
  return mark(device, timing);
}

bool idle(int device) {
  {
    Lock lock(g_mutex);
    if (!g_in_flight.empty()) return false;
    for (const auto& [epoch, lane] : g_pending) {
      if (lane->graph.device == device) return false;
    }
  }
  return device_idle(device);
}




Counters counters() {
  Counters c;
  const LaunchCounters& launched = launch_counters();
  c.ops = g_ops;
  c.cache_hits = launched.hits;
  c.cache_misses = launched.misses;
  c.compile = compile_counters();
  for (double seconds : c.compile.seconds) c.compile_seconds += seconds;
  c.executions = launched.executions;
  c.program_outputs = launched.outputs;
  c.flushes = g_flushes;
  c.replays = replay_count();
  Lock lock(g_mutex);
  c.flush_reasons = g_flush_reasons;
  return c;
}

void reset_counters() {
  LaunchCounters& launched = launch_counters();
  g_ops = 0;
  launched.hits = 0;
  launched.misses = 0;
  reset_compile_counters();
  reset_padding_counters();
  launched.executions = 0;
  launched.outputs = 0;
  g_flushes = 0;
  reset_replay_count();
  Lock lock(g_mutex);
  g_flush_reasons.clear();
}

}  // namespace tpu::exec
