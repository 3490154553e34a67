#include "exec/launch.h"
#include "exec/storage_state.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "cache/program_cache.h"
#include "exec/device_queue.h"
#include "exec/device_trace.h"
#include "exec/program_builder.h"

namespace tpu::exec {

namespace {

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

// Where a program's ops came from, for the slow-compile warning: how many, the first and last.
std::string origin_of(const std::vector<OpCall>& calls) {
  std::string text = std::to_string(calls.size()) + (calls.size() == 1 ? " op: " : " ops, from ") +
                     describe(calls.front()) + at_location(calls.front().location);
  if (calls.size() > 1) text += " to " + describe(calls.back()) + at_location(calls.back().location);
  return text;
}

// Compiles `program` from `calls`; a failure names the op that broke it. Runs without the
// executor's lock: the calls' storages are in flight, so nothing else touches them meanwhile.
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

// The compiles in flight, by key: a thread that needs a program another thread is compiling
// waits for that one instead of compiling it a second time.
struct InFlightCompile {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  cache::ProgramPtr program;
  std::exception_ptr error;
};
std::mutex g_compiling_mutex;
std::unordered_map<std::string, std::shared_ptr<InFlightCompile>> g_compiling;

// The program under `key` from the cache directory or from `build_and_compile`, whichever comes
// first; true in `compiled` when this call compiled it.
cache::ProgramPtr compile_once(const std::string& key, const std::function<cache::ProgramPtr()>& build_and_compile,
                               bool* compiled) {
  std::shared_ptr<InFlightCompile> slot;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_compiling_mutex);
    auto [it, inserted] = g_compiling.emplace(key, nullptr);
    if (inserted) it->second = std::make_shared<InFlightCompile>();
    slot = it->second;
    first = inserted;
  }
  if (!first) {
    std::unique_lock<std::mutex> lock(slot->mutex);
    slot->done_cv.wait(lock, [&] { return slot->done; });
    if (slot->error) std::rethrow_exception(slot->error);
    return slot->program;
  }
  cache::ProgramPtr program;
  std::exception_ptr error;
  try {
    program = cache::ProgramCache::get().find(key);  // memory (another thread may have just put it there), disk
    if (!program) {
      program = build_and_compile();
      *compiled = true;
      cache::ProgramCache::get().insert(key, program);
    }
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(slot->mutex);
    slot->done = true;
    slot->program = program;
    slot->error = error;
  }
  slot->done_cv.notify_all();
  {
    std::lock_guard<std::mutex> lock(g_compiling_mutex);
    g_compiling.erase(key);
  }
  if (error) std::rethrow_exception(error);
  return program;
}

// Rank-0 buffers for runtime numbers, reused: most calls pass the same few values (alpha=1, ...).
runtime::BufferPtr number_buffer(const RuntimeNumber& number, int device) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int64_t, int64_t>, runtime::BufferPtr> buffers;
  int64_t bits = number.i, imag_bits = 0;
  if (number.dtype == DType::F64 || number.dtype == DType::C128) std::memcpy(&bits, &number.f, sizeof bits);
  if (number.dtype == DType::C128) std::memcpy(&imag_bits, &number.imag, sizeof imag_bits);
  auto key = std::make_tuple(device, static_cast<int>(number.dtype), bits, imag_bits);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = buffers.find(key);
  if (it != buffers.end()) return it->second;
  if (buffers.size() > 4096) buffers.clear();
  runtime::BufferPtr buffer;
  auto& client = runtime::Client::get();
  if (number.dtype == DType::F64) {
    buffer = client.from_host(&number.f, {DType::F64, {}}, device);
  } else if (number.dtype == DType::C128) {
    const double parts[2] = {number.f, number.imag};
    buffer = client.from_host(parts, {DType::C128, {}}, device);
  } else if (number.dtype == DType::Bool) {
    bool value = number.i != 0;
    buffer = client.from_host(&value, {DType::Bool, {}}, device);
  } else {
    buffer = client.from_host(&number.i, {DType::I64, {}}, device);
  }
  buffers.emplace(key, buffer);
  return buffer;
}

// Releases the lock for the scope; takes it back on the way out, exception or not.
class Released {
 public:
  explicit Released(const Unlocker& unlocker) : unlocker_(unlocker) { unlocker_.release(); }
  ~Released() { unlocker_.reacquire(); }
  Released(const Released&) = delete;
  Released& operator=(const Released&) = delete;

 private:
  const Unlocker& unlocker_;
};

trace::ProgramRun describe_run(const cache::Program& program, const RunLabel& label, int device,
                               int64_t enqueued_ns) {
  trace::ProgramRun run;
  run.kind = kind_name(label.kind);
  if (label.name) {
    run.name = *label.name;
    if (label.ops) run.ops = *label.ops;
  } else if (label.calls) {
    std::vector<std::string> names;
    names.reserve(label.calls->size());
    for (const OpCall& call : *label.calls) names.push_back(describe(call));
    run.name = trace::summarize_ops(run.kind, names, &run.ops);
  }
  run.device = device;
  run.correlation = trace::current_correlation();
  for (const TensorType& type : program.output_types) {
    int64_t elements = 1;
    for (int64_t d : type.dims) elements *= d;
    run.output_bytes += elements * itemsize(type.dtype);
  }
  run.enqueued_ns = enqueued_ns;
  run.launched_ns = trace::wall_now_ns();
  run.launch_thread = trace::this_thread_id();
  return run;
}

}  // namespace

LaunchCounters& launch_counters() {
  static LaunchCounters counters;
  return counters;
}

std::string at_location(const SourceLocation& location) {
  std::string where = format_location(location);
  return where.empty() ? "" : " (at " + where + ")";
}

std::string blame(const OpCall& call) { return describe(call) + at_location(call.location); }

RuntimeArguments::RuntimeArguments(const std::vector<OpCall>& calls, std::vector<int64_t> view_offsets)
    : offsets(std::move(view_offsets)) {
  for (const OpCall& call : calls) {
    numbers.insert(numbers.end(), call.numbers.begin(), call.numbers.end());
    if (call.lowering->random) rng_states.emplace_back(call.seed, call.offset);
  }
}

void execute(const cache::Program& program, const std::vector<Storage*>& storages, const RuntimeArguments& runtime,
             int device, bool wait, const Blame& blame, const RunLabel& label, const Unlocker& unlocker) {
  auto& client = runtime::Client::get();
  std::vector<runtime::BufferPtr> keep_alive;
  std::vector<const runtime::Buffer*> arguments;
  // A storage's buffer that anything else still holds (another storage, a caller of
  // dense_buffer, a collective) is not given to the program's result; the storage's own
  // pending readers are ordered before the program by PJRT.
  std::vector<int64_t> keep_arguments;
  arguments.reserve(program.parameters.size());
  for (const auto& parameter : program.parameters) {
    switch (parameter.source) {
      case cache::Program::Parameter::Source::Storage: {
        const runtime::BufferPtr& buffer = state_of(*storages[parameter.index]).buffer;
        if (buffer.use_count() > 1) keep_arguments.push_back(static_cast<int64_t>(arguments.size()));
        arguments.push_back(buffer.get());
        break;
      }
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

  int64_t enqueued_ns = trace::active() ? trace::wall_now_ns() : 0;
  runtime::ExecuteResult result;
  try {
    result = client.execute(*program.executable, device, arguments, program.output_types, keep_arguments);
  } catch (const runtime::PjrtError& e) {
    throw OpError(blame() + " failed to launch: " + e.what(), e.out_of_memory());
  }
  auto& counters = launch_counters();
  ++counters.executions;
  counters.outputs += static_cast<int64_t>(result.outputs.size());
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    Storage* s = storages[program.output_storages[i]];
    state_of(*s).buffer = result.outputs[i];
    state_of(*s).dtype = program.output_dtypes[i];
  }
  std::optional<trace::ProgramRun> traced;
  if (enqueued_ns) traced = describe_run(program, label, device, enqueued_ns);
  if (wait) {
    Released released(unlocker);
    try {
      client.wait(result.done);
    } catch (const runtime::PjrtError& e) {
      throw OpError(blame() + " failed on the device: " + e.what(), e.out_of_memory());
    }
    if (traced) traced->waited_ns = trace::wall_now_ns();
  } else {
    CompletionPtr completion = track(device, result.done);
    if (traced) traced->completion = std::move(completion);
  }
  if (traced) trace::record_run(std::move(*traced));
}

namespace {
Launched build_and_compile(const std::string& key, ProgramKind kind, const std::vector<OpCall>& calls,
                           const StorageSet& storages, const std::function<bool(const Storage&)>& keep,
                           const Unlocker& unlocker);
}  // namespace

Launched launch(std::string& key, ProgramKind kind, const std::vector<OpCall>& calls, const StorageSet& storages,
                std::vector<int64_t> offsets, int device, bool wait, const KeepSet& also_keep,
                const Unlocker& unlocker) {
  auto keep = [&](const Storage& s) { return s.alive() || also_keep.count(&s) > 0; };
  key = launch_key(std::move(key), storages, also_keep);

  Launched launched;
  auto& counters = launch_counters();
  launched.program = cache::ProgramCache::get().find_in_memory(key);
  bool padded = false;
  for (const OpCall& call : calls) padded |= call.padded;
  if (launched.program) {
    ++counters.hits;
    note_run(key, launched.program);
  } else if (padded) {
    try {
      launched = build_and_compile(key, kind, calls, storages, keep, unlocker);
    } catch (const lowering::Unsupported& e) {
      throw PaddedProgramFailed(e.what());
    } catch (const std::logic_error& e) {
      throw PaddedProgramFailed(e.what());
    } catch (const OpError& e) {
      throw PaddedProgramFailed(e.what());
    }
  } else {
    launched = build_and_compile(key, kind, calls, storages, keep, unlocker);
  }
  RuntimeArguments runtime(calls, std::move(offsets));
  execute(*launched.program, storages.items(), runtime, device, wait, [&calls] { return blame(calls.back()); },
          RunLabel{kind, &calls}, unlocker);
  return launched;
}

namespace {

Launched build_and_compile(const std::string& key, ProgramKind kind, const std::vector<OpCall>& calls,
                           const StorageSet& storages, const std::function<bool(const Storage&)>& keep,
                           const Unlocker& unlocker) {
  Launched launched;
  auto& counters = launch_counters();
  {
    // The text is built under the lock (it reads the storages' state); the compile runs without it.
    ProgramBuilder builder(storages);
    for (const OpCall& call : calls) builder.lower(call);
    auto built = std::make_shared<cache::Program>(builder.finish(keep));
    bool compiled = false;
    auto started = std::chrono::steady_clock::now();
    {
      Released released(unlocker);
      launched.program = compile_once(key, [&] {
        compile(*built, builder.text(), builder.work_elements(), kind, calls, storages);
        return cache::ProgramPtr(built);
      }, &compiled);
    }
    if (compiled) {
      ++counters.misses;
      launched.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    } else {
      ++counters.hits;
      note_run(key, launched.program);
    }
  }
  return launched;
}

}  // namespace

std::string launch_key(std::string key, const StorageSet& storages, const KeepSet& also_keep) {
  key.push_back('#');
  for (const Storage* s : storages.items()) key.push_back(s->alive() || also_keep.count(s) > 0 ? '1' : '0');
  return key;
}

}  // namespace tpu::exec
