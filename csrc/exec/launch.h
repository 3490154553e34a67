// How the executor runs what it decided to run: the program for a list of calls is found in the
// cache or lowered and compiled, then executed on the storages' buffers, and its results are
// installed. executor.cpp decides what runs when (the three flush policies, the threads' pending
// graphs); this file is the how, shared by all of them.
//
// The executor's lock is held on entry. A compile (seconds) and a debug-mode wait run with it
// released through the caller's Unlocker, so that other threads' cached ops never queue behind
// them; one compile per key is in flight at a time, and a second thread asking for the same key
// waits for the first one's program.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "exec/compiler.h"
#include "exec/executor.h"
#include "exec/program_key.h"

namespace tpu::exec {

struct LaunchCounters {
  std::atomic<int64_t> hits{0}, misses{0}, executions{0}, outputs{0};
};
LaunchCounters& launch_counters();

// Storages that leave a program even when no tensor holds them any more: what the rest of a
// graph cut in two still reads.
using KeepSet = std::unordered_set<const Storage*>;

// Lets the executor's lock go around a slow step, and takes it back.
struct Unlocker {
  std::function<void()> release;
  std::function<void()> reacquire;
};

std::string at_location(const SourceLocation& location);
using Blame = std::function<std::string()>;
std::string blame(const OpCall& call);

// What a program's arguments come from besides storages: the calls' runtime numbers in order,
// the (seed, offset) of each random call, and the views' offsets into their storages.
struct RuntimeArguments {
  std::vector<RuntimeNumber> numbers;
  std::vector<std::pair<uint64_t, uint64_t>> rng_states;
  std::vector<int64_t> offsets;

  RuntimeArguments(const std::vector<OpCall>& calls, std::vector<int64_t> view_offsets);
};

// The key launch() looks `key` up by: with the storages' keep bits.
std::string launch_key(std::string key, const StorageSet& storages, const KeepSet& also_keep);

// Raised by launch() when the program of padded calls (exec/padding.h) could not be built or
// compiled; nothing ran. The caller runs the calls at their exact sizes instead.
class PaddedProgramFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Launched {
  cache::ProgramPtr program;
  double compile_seconds = 0;  // > 0 when this launch compiled it
};

// Finds or builds the program for `calls` (whose storages are in `storages`, keyed by `key`,
// which gets the storages' keep bits appended), runs it and installs its results. Dead storages
// never become results unless `also_keep` holds them. Waits for the device when `wait`.
Launched launch(std::string& key, ProgramKind kind, const std::vector<OpCall>& calls, const StorageSet& storages,
                std::vector<int64_t> offsets, int device, bool wait, const KeepSet& also_keep,
                const Unlocker& unlocker);

// What a run is called in a profiler trace: the calls it was built from, or the name and op
// counts a captured graph keeps. Only read while a trace is on.
struct RunLabel {
  ProgramKind kind;
  const std::vector<OpCall>* calls = nullptr;
  const std::string* name = nullptr;
  const std::string* ops = nullptr;
};

// Runs `program` with its storage parameters and results taken from `storages` (indexed like the
// program's storage set) and installs the results. `blame` names the op in error messages (built
// only when one is raised).
void execute(const cache::Program& program, const std::vector<Storage*>& storages, const RuntimeArguments& runtime,
             int device, bool wait, const Blame& blame, const RunLabel& label, const Unlocker& unlocker);

}  // namespace tpu::exec
