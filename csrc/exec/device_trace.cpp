#include "exec/device_trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <unordered_map>

namespace tpu::exec::trace {

namespace {

std::mutex g_mutex;
Trace g_trace;

thread_local std::vector<uint64_t> t_correlations;

// Converts a steady-clock reading (what completion callbacks note) to the wall clock.
int64_t steady_to_wall(int64_t steady_ns) { return steady_ns + (wall_now_ns() - steady_now_ns()); }

}  // namespace

int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void start() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_trace = Trace{};
  active_flag().store(true);
}

void stop() { active_flag().store(false); }

Trace take() {
  Trace trace;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    std::swap(trace, g_trace);
  }
  for (ProgramRun& run : trace.runs) {
    if (!run.completion) {
      run.end_ns = run.waited_ns;
      continue;
    }
    try {
      run.completion->wait();
    } catch (const std::exception&) {
      // A failed program still ended; its error reaches whoever reads what it wrote.
    }
    run.end_ns = steady_to_wall(run.completion->seen_finished_ns());
    run.completion.reset();
  }
  resolve_spans(trace.runs);
  return trace;
}

void push_correlation(uint64_t id) { t_correlations.push_back(id); }

void pop_correlation() {
  if (!t_correlations.empty()) t_correlations.pop_back();
}

uint64_t current_correlation() { return t_correlations.empty() ? 0 : t_correlations.back(); }

uint64_t this_thread_id() { return static_cast<uint64_t>(::syscall(SYS_gettid)); }

void record_run(ProgramRun run) {
  if (run.completion) run.completion->watch();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!active()) return;
  if (g_trace.runs.size() < kMaxRuns) {
    g_trace.runs.push_back(std::move(run));
  } else {
    ++g_trace.dropped_runs;
  }
}

void record_compile(Compile compile) {
  compile.thread = this_thread_id();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (active()) g_trace.compiles.push_back(std::move(compile));
}

void resolve_spans(std::vector<ProgramRun>& runs) {
  std::map<int, int64_t> device_busy_until;
  for (ProgramRun& run : runs) {
    int64_t& busy_until = device_busy_until[run.device];
    run.end_ns = std::max(run.end_ns, run.enqueued_ns);
    run.start_ns = std::min(std::max(run.enqueued_ns, busy_until), run.end_ns);
    busy_until = std::max(busy_until, run.end_ns);
  }
}

std::string summarize_ops(const char* kind, const std::vector<std::string>& op_names, std::string* counts) {
  std::vector<std::pair<std::string, int>> distinct;  // first-seen order
  std::unordered_map<std::string, size_t> position;    // a graph has thousands of ops, tens of kinds
  for (const std::string& name : op_names) {
    auto [it, inserted] = position.emplace(name, distinct.size());
    if (inserted) distinct.emplace_back(name, 0);
    ++distinct[it->second].second;
  }
  if (counts) {
    counts->clear();
    for (const auto& [name, count] : distinct) {
      if (!counts->empty()) *counts += ", ";
      *counts += name + " x" + std::to_string(count);
    }
  }
  // Prefixed by the kind, so that a program never reads as the PyTorch op that launched it.
  if (op_names.size() == 1) return std::string(kind) + ": " + op_names.front();
  constexpr size_t kNamed = 3;
  std::string text = std::string(kind) + ": " + std::to_string(op_names.size()) + " ops (";
  for (size_t i = 0; i < distinct.size() && i < kNamed; ++i) text += (i ? ", " : "") + distinct[i].first;
  return text + (distinct.size() > kNamed ? ", ...)" : ")");
}

}  // namespace tpu::exec::trace
