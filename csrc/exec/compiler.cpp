#include "exec/compiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

#include "cache/disk_cache.h"
#include "exec/device_trace.h"

namespace tpu::exec {

namespace {

// A quick program is compiled again once its runs have computed this many elements (every value
// of the program counts): the quick code is slower by a few ns per element at the least (a
// training step's graph runs 2-3x slower quick), so by then the full compile (20-100 ms for a small
// program, seconds for a graph) is paid back or soon will be.
constexpr int64_t kUpgradeElements = int64_t{1} << 23;
// A per-op program that computes that much in one run would be upgraded after its first: it is
// compiled fully at once. (A graph is not: its first run may be its only one, a generation step.)
constexpr int64_t kQuickPerOpElementsLimit = kUpgradeElements;
constexpr size_t kMedianWindow = 4096;

double slow_compile_seconds() {
  static const double seconds = seconds_from_environment("TORCH_TPU_SLOW_COMPILE_SECONDS", 10.0);
  return seconds;
}

struct Stats {
  std::mutex mutex;
  CompileCounters counters;
  std::deque<double> per_op_ms;  // recent per-op compile times, for the median
  bool warned[kProgramKinds] = {};
} g_stats;

// The background thread that compiles quick programs again with full optimisation. Stopped at
// exit before anything is torn down (torch_tpu's exit hook calls stop_upgrades() while Python and
// the plugin are whole; the C exit handler is the fallback): a compile still running while the
// plugin's static objects are destroyed hangs or crashes the process.
class Upgrader {
 public:
  static Upgrader& get() {
    static Upgrader* upgrader = [] {
      auto* u = new Upgrader();
      std::atexit([] { Upgrader::get().stop(); });
      return u;
    }();
    return *upgrader;
  }

  void enqueue(std::string key, cache::ProgramPtr program) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    queue_.emplace_back(std::move(key), std::move(program));
    if (!thread_.joinable()) {
      owner_ = getpid();
      thread_ = std::thread([this] { work(); });
    }
    ready_.notify_one();
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
  }

  // Drops the queue and waits for the compile in flight (a compile cannot be cancelled).
  void stop() {
    // A forked child inherits this object but not the thread: nothing to join there.
    if (getpid() != owner_) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      queue_.clear();
      ready_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      auto [key, program] = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      upgrade(key, *program);
      lock.lock();
      busy_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }

  static void upgrade(const std::string& key, const cache::Program& quick) {
    auto start = std::chrono::steady_clock::now();
    int64_t traced_start = trace::active() ? trace::wall_now_ns() : 0;
    auto full = std::make_shared<cache::Program>();
    try {
      full->executable = runtime::Client::get().compile(quick.quick->text);
    } catch (const std::exception&) {
      return;  // the quick executable stays; it computes the same values
    }
    if (traced_start) {
      trace::record_compile({"compile upgrade", "a quick program recompiled with full optimisation in the background",
                             /*background=*/true, /*correlation=*/0, 0, traced_start, trace::wall_now_ns()});
    }
    full->parameters = quick.parameters;
    full->output_types = quick.output_types;
    full->output_storages = quick.output_storages;
    full->output_dtypes = quick.output_dtypes;
    cache::ProgramCache::get().insert(key, full);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(g_stats.mutex);
    ++g_stats.counters.upgrades;
    g_stats.counters.upgrade_seconds += seconds;
  }

  std::mutex mutex_;
  std::condition_variable ready_, idle_;
  std::deque<std::pair<std::string, cache::ProgramPtr>> queue_;
  std::thread thread_;
  pid_t owner_ = 0;
  bool busy_ = false;
  bool stopping_ = false;
};

}  // namespace

double seconds_from_environment(const char* name, double fallback) {
  const char* env = std::getenv(name);
  double value = env ? std::atof(env) : 0;
  return value > 0 ? value : fallback;
}

const char* kind_name(ProgramKind kind) {
  switch (kind) {
    case ProgramKind::PerOp:
      return "per_op";
    case ProgramKind::FusedGraph:
      return "fused_graph";
    case ProgramKind::CompiledGraph:
      return "compiled_graph";
  }
  return "unknown";
}

void compile_program(cache::Program& program, const std::string& text, int64_t work_elements, ProgramKind kind,
                     const std::function<std::string()>& origin) {
  auto& client = runtime::Client::get();
  int64_t elements = std::max<int64_t>(work_elements, 1);
  bool quick = (kind != ProgramKind::PerOp || elements <= kQuickPerOpElementsLimit) && client.quick_compiles();
  auto start = std::chrono::steady_clock::now();
  int64_t traced_start = trace::active() ? trace::wall_now_ns() : 0;
  program.executable = quick ? client.compile_quick(text) : client.compile(text);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (traced_start) {
    trace::record_compile({std::string("compile ") + kind_name(kind), origin(), /*background=*/false,
                           trace::current_correlation(), 0, traced_start, trace::wall_now_ns()});
  }
  quick = quick && client.quick_compiles();  // false when the plugin refused the quick options
  if (quick) {
    program.quick = std::make_shared<cache::Program::QuickTier>();
    program.quick->text = text;
    program.quick->elements_per_run = elements;
  }
  bool warn = false;
  {
    std::lock_guard<std::mutex> lock(g_stats.mutex);
    int k = static_cast<int>(kind);
    ++g_stats.counters.compiles[k];
    g_stats.counters.seconds[k] += seconds;
    if (quick) ++g_stats.counters.quick_compiles;
    if (kind == ProgramKind::PerOp) {
      g_stats.per_op_ms.push_back(seconds * 1e3);
      if (g_stats.per_op_ms.size() > kMedianWindow) g_stats.per_op_ms.pop_front();
    }
    if (seconds > slow_compile_seconds()) {
      ++g_stats.counters.slow_compiles;
      warn = !g_stats.warned[k];
      g_stats.warned[k] = true;
    }
  }
  if (!warn) return;
  static const char* advice[kProgramKinds] = {
      "a per-op program should compile in milliseconds; report this op",
      "a host read (.item(), .tolist()) or torch_tpu.synchronize() inside a long loop cuts the graph "
      "where the loop repeats, and TORCH_TPU_FUSED_COMPILE_BUDGET_S bounds a graph's size by its "
      "expected compile time",
      "a smaller compiled region (torch.compile on a submodule or one layer) compiles faster, and "
      "repeated layers then share one program"};
  char seconds_text[32];
  std::snprintf(seconds_text, sizeof seconds_text, "%.1f", seconds);
  cache::warn(std::string("tpu: compiling a ") + kind_name(kind) + " program took " + seconds_text + " s (" +
              origin() + "). What would help: " + advice[static_cast<int>(kind)] +
              ". This warning is shown once per kind; torch_tpu.metrics() counts slow_compiles.");
}

void note_run(const std::string& key, const cache::ProgramPtr& program) {
  cache::Program::QuickTier* quick = program->quick.get();
  if (!quick) return;
  int64_t run = quick->elements_run.fetch_add(quick->elements_per_run) + quick->elements_per_run;
  if (run < kUpgradeElements || quick->upgrade_scheduled.exchange(true)) return;
  Upgrader::get().enqueue(key, program);
}

void wait_for_upgrades() { Upgrader::get().wait_idle(); }

void stop_upgrades() { Upgrader::get().stop(); }

CompileCounters compile_counters() {
  std::lock_guard<std::mutex> lock(g_stats.mutex);
  CompileCounters c = g_stats.counters;
  if (!g_stats.per_op_ms.empty()) {
    std::vector<double> sorted(g_stats.per_op_ms.begin(), g_stats.per_op_ms.end());
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    c.per_op_median_ms = sorted[sorted.size() / 2];
  }
  return c;
}

double compile_seconds(ProgramKind kind) {
  std::lock_guard<std::mutex> lock(g_stats.mutex);
  return g_stats.counters.seconds[static_cast<int>(kind)];
}

void reset_compile_counters() {
  std::lock_guard<std::mutex> lock(g_stats.mutex);
  g_stats.counters = CompileCounters{};
  g_stats.per_op_ms.clear();
}

}  // namespace tpu::exec
