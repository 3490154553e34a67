#include "exec/executor.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "cache/program_cache.h"

namespace tpu::exec {

namespace {

std::atomic<Mode> g_default_mode{Mode::Strict};
thread_local std::optional<Mode> t_mode;
LocationProvider g_location = nullptr;

struct AtomicCounters {
  std::atomic<int64_t> ops{0}, hits{0}, misses{0}, executions{0};
  std::atomic<int64_t> compile_us{0};
} g_counters;

// Launched programs not yet waited for, per device, so synchronize() can wait for them.
std::mutex g_pending_mutex;
std::map<int, std::deque<PJRT_Event*>> g_pending;

void track(int device, PJRT_Event* event) {
  if (!event) return;
  auto& client = runtime::Client::get();
  std::lock_guard<std::mutex> lock(g_pending_mutex);
  auto& queue = g_pending[device];
  queue.push_back(event);
  if (queue.size() > 64) {
    // Events of finished programs are dropped; an error they carry resurfaces when the buffers
    // they produced are read.
    while (!queue.empty() && client.ready(queue.front())) {
      client.release(queue.front());
      queue.pop_front();
    }
  }
}

void append_int(std::string& key, int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }
void append_dims(std::string& key, const Dims& dims) {
  append_int(key, static_cast<int64_t>(dims.size()));
  key.append(reinterpret_cast<const char*>(dims.data()), dims.size() * sizeof(int64_t));
}

// The distinct storages an op touches, in first-seen order: they become the program's parameters.
struct StorageSet {
  std::vector<Storage*> items;
  int32_t index(Storage* s) {
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i] == s) return static_cast<int32_t>(i);
    }
    items.push_back(s);
    return static_cast<int32_t>(items.size()) - 1;
  }
};

void append_view(std::string& key, StorageSet& storages, const TensorView& view) {
  Storage* s = view.storage.get();
  append_int(key, storages.index(s));
  key.push_back(static_cast<char>(s->buffer ? static_cast<int>(s->dtype) : -1));
  append_int(key, s->nbytes);
  key.push_back(static_cast<char>(view.dtype));
  append_dims(key, view.layout.sizes);
  append_dims(key, view.layout.strides);
  append_int(key, view.layout.offset);
}

std::string program_key(const OpCall& call, StorageSet& storages) {
  std::string key;
  key.reserve(256);
  key += call.name;
  key += '.';
  key += call.overload;
  key.push_back('\0');
  for (const auto& arg : call.args) {
    key.push_back(static_cast<char>(arg.kind));
    switch (arg.kind) {
      case lowering::Arg::Kind::Tensor:
        append_view(key, storages, call.inputs[arg.slot]);
        break;
      case lowering::Arg::Kind::TensorList:
        append_int(key, static_cast<int64_t>(arg.slots.size()));
        for (int32_t slot : arg.slots) {
          if (slot < 0) {
            key.push_back('n');
          } else {
            append_view(key, storages, call.inputs[slot]);
          }
        }
        break;
      case lowering::Arg::Kind::Number:
        key.push_back(static_cast<char>(call.numbers[arg.slot].dtype));
        key.push_back(arg.weak ? 'w' : 's');
        break;
      case lowering::Arg::Kind::Int:
        append_int(key, arg.i);
        break;
      case lowering::Arg::Kind::IntList:
        append_dims(key, arg.ints);
        break;
      case lowering::Arg::Kind::DoubleList:
        append_int(key, static_cast<int64_t>(arg.doubles.size()));
        key.append(reinterpret_cast<const char*>(arg.doubles.data()), arg.doubles.size() * sizeof(double));
        break;
      case lowering::Arg::Kind::Bool:
        key.push_back(arg.b ? '1' : '0');
        break;
      case lowering::Arg::Kind::String:
        key += arg.s;
        key.push_back('\0');
        break;
      case lowering::Arg::Kind::ScalarType:
        key.push_back(static_cast<char>(arg.dtype));
        break;
      case lowering::Arg::Kind::None:
        break;
    }
  }
  key.push_back('|');
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    key.push_back(static_cast<char>(call.outputs[i].dtype));
    append_dims(key, call.outputs[i].dims);
    if (i < call.destinations.size() && call.destinations[i].storage) {
      append_view(key, storages, call.destinations[i]);
    } else {
      key.push_back('x');
    }
  }
  return key;
}

std::string user_location() {
  if (!g_location) return "";
  std::string where = g_location();
  return where.empty() ? "" : " (at " + where + ")";
}

std::string describe(const OpCall& call) {
  return "aten::" + call.name + (call.overload.empty() ? "" : "." + call.overload);
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

// The same bytes seen as another element type (a storage read or written through view(dtype)).
// Widths may differ: narrowing splits each element, widening joins neighbours.
hlo::Value reinterpret(hlo::Builder& b, hlo::Value flat, DType to) {
  DType from = b.dtype(flat);
  if (from == to) return flat;
  if (is_complex(from) || is_complex(to)) throw lowering::Unsupported("reinterpreting complex storage");
  if (from == DType::Bool) return reinterpret(b, b.convert(flat, DType::U8), to);
  if (to == DType::Bool) return b.convert(reinterpret(b, flat, DType::U8), DType::Bool);
  int64_t n = b.dims(flat)[0];
  int64_t from_width = itemsize(from), to_width = itemsize(to);
  if (from_width == to_width) return b.bitcast_convert(flat, to);
  if (from_width > to_width) {
    int64_t ratio = from_width / to_width;
    hlo::Value split = b.op1("stablehlo.bitcast_convert", {flat}, {to, {n, ratio}});
    return b.reshape(split, {n * ratio});
  }
  int64_t ratio = to_width / from_width;
  int64_t whole = n / ratio;
  if (whole * ratio != n) flat = b.slice(flat, {0}, {whole * ratio}, {1});
  return b.op1("stablehlo.bitcast_convert", {b.reshape(flat, {whole, ratio})}, {to, {whole}});
}

cache::ProgramPtr lower_and_compile(const OpCall& call, const StorageSet& storages) {
  hlo::Builder b;
  const size_t n = storages.items.size();
  std::vector<hlo::Value> base(n);
  for (size_t s = 0; s < n; ++s) {
    const Storage* st = storages.items[s];
    if (st->buffer) base[s] = b.parameter({st->dtype, {st->length_as(st->dtype)}});
  }
  std::vector<hlo::Value> numbers;
  for (const auto& number : call.numbers) numbers.push_back(b.parameter({number.dtype, {}}));
  lowering::Context ctx{b, call.name, call.overload, call.args, call.outputs, {}};
  if (call.lowering->random) ctx.rng_state = b.parameter({DType::U64, {2}});

  StorageSet lookup = storages;
  auto read = [&](const TensorView& view) {
    int32_t s = lookup.index(view.storage.get());
    const Storage* st = storages.items[s];
    if (!st->buffer) return b.zeros({view.dtype, view.layout.sizes});
    return lowering::read_view(b, reinterpret(b, base[s], view.dtype), view.layout);
  };
  for (auto& arg : ctx.args) {
    if (arg.kind == lowering::Arg::Kind::Tensor) {
      arg.value = read(call.inputs[arg.slot]);
    } else if (arg.kind == lowering::Arg::Kind::Number) {
      arg.value = numbers[arg.slot];
    } else if (arg.kind == lowering::Arg::Kind::TensorList) {
      arg.values.clear();
      for (int32_t slot : arg.slots) {
        arg.values.push_back(slot < 0 ? hlo::Value{} : read(call.inputs[slot]));
      }
    }
  }
  std::vector<hlo::Value> results = call.lowering->fn(ctx);
  if (results.size() < call.destinations.size()) {
    throw std::logic_error(describe(call) + ": lowering returned too few results");
  }

  std::vector<hlo::Value> current = base;
  std::vector<bool> written(n, false);
  std::vector<DType> written_dtype(n, DType::U8);
  for (size_t i = 0; i < call.destinations.size(); ++i) {
    const TensorView& dest = call.destinations[i];
    if (!dest.storage) continue;
    int32_t s = lookup.index(dest.storage.get());
    const Storage* st = storages.items[s];
    // The storage takes the writer's element type; what it held is reinterpreted to match.
    DType storage_dtype = dest.dtype;
    hlo::Value target = current[s].valid() ? reinterpret(b, current[s], storage_dtype)
                                           : b.zeros({storage_dtype, {st->length_as(storage_dtype)}});
    hlo::Value value = results[i];
    if (b.dims(value) != call.outputs[i].dims) {
      throw std::logic_error(describe(call) + ": lowering produced a result of the wrong shape");
    }
    value = b.convert(value, dest.dtype);
    current[s] = lowering::write_view(b, target, value, dest.layout);
    written[s] = true;
    written_dtype[s] = storage_dtype;
  }

  auto program = std::make_shared<cache::Program>();
  std::vector<hlo::Value> outputs;
  for (size_t s = 0; s < n; ++s) {
    if (!written[s]) continue;
    outputs.push_back(current[s]);
    program->output_storages.push_back(static_cast<int32_t>(s));
    program->output_dtypes.push_back(written_dtype[s]);
    program->output_types.push_back(b.type(current[s]));
  }
  std::string text = b.module_text(outputs);
  // Fault injection for the tests of error reporting: TORCH_TPU_INJECT_COMPILE_FAILURE=<op name>.
  static const char* broken_op = std::getenv("TORCH_TPU_INJECT_COMPILE_FAILURE");
  if (broken_op && call.name == broken_op) text += "this is not StableHLO\n";
  auto start = std::chrono::steady_clock::now();
  try {
    program->executable = runtime::Client::get().compile(text);
  } catch (const runtime::PjrtError& e) {
    std::string path = save_failed_program(text);
    throw OpError(describe(call) + " could not be compiled" + user_location() + ": " + e.what() +
                  (path.empty() ? "" : "\nThe StableHLO program was written to " + path));
  }
  g_counters.compile_us += std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count();
  return program;
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

}  // namespace

Mode current_mode() { return t_mode.value_or(g_default_mode.load()); }
void set_mode(Mode mode) { t_mode = mode; }
void set_default_mode(Mode mode) { g_default_mode = mode; }

void set_location_provider(LocationProvider provider) { g_location = provider; }

void run(const OpCall& call) {
  ++g_counters.ops;
  StorageSet storages;
  std::string key = program_key(call, storages);
  auto& cache = cache::ProgramCache::get();
  cache::ProgramPtr program = cache.find(key);
  if (program) {
    ++g_counters.hits;
  } else {
    ++g_counters.misses;
    program = lower_and_compile(call, storages);
    cache.insert(key, program);
  }

  auto& client = runtime::Client::get();
  std::vector<runtime::BufferPtr> keep_alive;
  std::vector<const runtime::Buffer*> arguments;
  for (Storage* s : storages.items) {
    if (s->buffer) arguments.push_back(s->buffer.get());
  }
  for (const auto& number : call.numbers) {
    keep_alive.push_back(number_buffer(number, call.device));
    arguments.push_back(keep_alive.back().get());
  }
  if (call.lowering->random) {
    uint64_t state[2] = {call.seed, call.offset};
    keep_alive.push_back(client.from_host(state, {DType::U64, {2}}, call.device));
    arguments.push_back(keep_alive.back().get());
  }

  runtime::ExecuteResult result;
  try {
    result = client.execute(*program->executable, call.device, arguments, program->output_types);
  } catch (const runtime::PjrtError& e) {
    throw OpError(describe(call) + " failed to launch" + user_location() + ": " + e.what(), e.out_of_memory());
  }
  ++g_counters.executions;
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    Storage* s = storages.items[program->output_storages[i]];
    s->buffer = result.outputs[i];
    s->dtype = program->output_dtypes[i];
  }
  if (current_mode() == Mode::Debug) {
    try {
      client.wait(result.done);
    } catch (const runtime::PjrtError& e) {
      throw OpError(describe(call) + " failed on the device" + user_location() + ": " + e.what(),
                    e.out_of_memory());
    }
  } else {
    track(call.device, result.done);
  }
}

void copy_view(const TensorView& src, const TensorView& dst) {
  static const lowering::Entry* copy = lowering::find_lowering("_tpu_copy");
  TensorView source = src;
  if (src.storage->device != dst.storage->device && src.storage->buffer) {
    auto moved = std::make_shared<Storage>(*src.storage);
    moved->device = dst.storage->device;
    moved->buffer = runtime::Client::get().copy_to_device(*src.storage->buffer, dst.storage->device);
    source.storage = moved;
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
  run(call);
}

runtime::BufferPtr dense_buffer(const TensorView& view) {
  const Storage& s = *view.storage;
  int64_t count = numel(view.layout.sizes);
  if (s.buffer && s.dtype == view.dtype && view.layout.offset == 0 &&
      count == s.length_as(s.dtype) && lowering::is_contiguous(view.layout)) {
    return s.buffer;
  }
  auto dense = std::make_shared<Storage>();
  dense->device = s.device;
  dense->nbytes = count * itemsize(view.dtype);
  dense->dtype = view.dtype;
  TensorView target{dense, view.dtype, {view.layout.sizes, {}, 0}};
  int64_t stride = 1;
  target.layout.strides.resize(view.layout.sizes.size());
  for (size_t i = view.layout.sizes.size(); i-- > 0;) {
    target.layout.strides[i] = stride;
    stride *= view.layout.sizes[i];
  }
  copy_view(view, target);
  return dense->buffer;
}

void synchronize(int device) {
  std::vector<PJRT_Event*> events;
  {
    std::lock_guard<std::mutex> lock(g_pending_mutex);
    for (auto& [d, queue] : g_pending) {
      if (device >= 0 && d != device) continue;
      events.insert(events.end(), queue.begin(), queue.end());
      queue.clear();
    }
  }
  auto& client = runtime::Client::get();
  std::string first_error;
  for (PJRT_Event* e : events) {
    try {
      client.wait(e);
    } catch (const runtime::PjrtError& error) {
      if (first_error.empty()) first_error = error.what();
    }
  }
  if (!first_error.empty()) throw OpError("a program failed on the device: " + first_error);
}

Counters counters() {
  Counters c;
  c.ops = g_counters.ops;
  c.cache_hits = g_counters.hits;
  c.cache_misses = g_counters.misses;
  c.compile_seconds = static_cast<double>(g_counters.compile_us.load()) / 1e6;
  c.executions = g_counters.executions;
  return c;
}

void reset_counters() {
  g_counters.ops = 0;
  g_counters.hits = 0;
  g_counters.misses = 0;
  g_counters.compile_us = 0;
  g_counters.executions = 0;
}

}  // namespace tpu::exec
