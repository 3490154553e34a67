// How programs are compiled: by kind, in two tiers, with their cost counted.
//
// A program's first compile is a quick one (Client::compile_quick: about half the time on
// XLA:CPU): most programs of a first session run a handful of times, and a fused graph of a loop
// whose shapes change every iteration (generation) runs once. Once a program's runs have computed
// enough elements that the slower code costs more than a full compile would, it is compiled again
// with full optimisation on a background thread and replaces itself in the cache, the way a JIT's
// tiers work: a training step's graph, which computes millions of elements, is upgraded on its
// first repeat. A per-op program that computes many elements per run is compiled fully at once:
// alone in its program, its run time matters from the first run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cache/program_cache.h"

namespace tpu::exec {

enum class ProgramKind : uint8_t { PerOp = 0, FusedGraph = 1, CompiledGraph = 2 };
constexpr int kProgramKinds = 3;
const char* kind_name(ProgramKind kind);  // "per_op", "fused_graph", "compiled_graph"

// A positive number of seconds from the environment variable `name`, else `fallback`.
double seconds_from_environment(const char* name, double fallback);

// Compiles `program`'s text into program.executable, quick or full as its kind and size say, and
// counts it. A compile slower than the threshold (TORCH_TPU_SLOW_COMPILE_SECONDS, default 10)
// warns once per kind, naming what `origin()` describes (the ops and user lines it came from).
// Throws runtime::PjrtError when the program does not compile.
// `work_elements` is what one run computes (hlo::Builder::total_elements).
void compile_program(cache::Program& program, const std::string& text, int64_t work_elements, ProgramKind kind,
                     const std::function<std::string()>& origin);

// Called on each run of a cached program: a quick one that has paid for its full compile is
// queued for it (the new executable replaces the program under `key`).
void note_run(const std::string& key, const cache::ProgramPtr& program);

// Blocks until every queued full compile is done (tests and benchmarks; never needed for
// correctness: both tiers compute the same values).
void wait_for_upgrades();

// Drops the queued full compiles and waits for the one in flight; no upgrade starts afterwards.
// Called at exit while the plugin is still whole.
void stop_upgrades();

struct CompileCounters {
  int64_t compiles[kProgramKinds] = {};
  double seconds[kProgramKinds] = {};
  int64_t quick_compiles = 0;          // per-op compiles that took the quick tier
  double per_op_median_ms = 0;         // over the recent per-op compiles
  int64_t upgrades = 0;                // quick programs compiled again with full optimisation
  double upgrade_seconds = 0;          // spent on the background thread
  int64_t slow_compiles = 0;           // compiles over the warning threshold
};
CompileCounters compile_counters();
double compile_seconds(ProgramKind kind);  // cheap: what compile_counters().seconds[kind] holds
void reset_compile_counters();

}  // namespace tpu::exec
