// torch_tpu._C: the few entry points the Python layer needs. Everything here is thin glue.
#include <Python.h>
#include <ATen/Context.h>
#include <frameobject.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>
#include <unordered_map>
#include <torch/csrc/Generator.h>

#include "aten/backward_context.h"
#include "aten/cpp_meta.h"
#include "aten/cpu_fallback.h"
#include "aten/device_checks.h"
#include "aten/generator.h"
#include "aten/lowered_dispatch.h"
#include "aten/meta_results.h"
#include "aten/op_adapters.h"
#include "aten/pinned_memory.h"
#include "aten/tpu_tensor.h"
#include "cache/program_cache.h"
#include "exec/device_trace.h"
#include "exec/padding.h"
#include "python/python_frames.h"

namespace py = pybind11;

namespace tpu::aten {
void register_hooks();
}
namespace tpu::python {
void register_cache_bindings(py::module& m);
void register_compile_bindings(py::module& m);
void register_distributed_bindings(py::module& m);
void register_autograd_shutdown_bindings(py::module& m);
void register_memory_history_bindings(py::module& m);
}

namespace {

bool is_internal(const std::string& file) {
  // A GraphModule's generated code is the program torch.compile runs: its line names the FX node.
  if (file.rfind("<eval_with_key>", 0) == 0) return false;
  return file.find("/torch/") != std::string::npos || file.find("/torch_tpu/") != std::string::npos ||
         file.find("<frozen") != std::string::npos;
}

// What a location needs of a code object, found once per code object: recording an op in
// defer-and-fuse must not build strings. Each code object met is kept alive (a strong reference),
// so that its address names it for as long as a recorded op may refer to it; past kMaxCodes the
// new ones are not kept and their ops record no location.
struct CodeFacts {
  bool internal;
  std::string file;
};
constexpr size_t kMaxCodes = 1 << 16;
// Written under both the GIL and the mutex; read under either (the formatter and the capture
// without the GIL take the mutex).
std::unordered_map<const PyCodeObject*, CodeFacts>& code_facts() {
  static auto* facts = new std::unordered_map<const PyCodeObject*, CodeFacts>();
  return *facts;
}
std::mutex g_code_facts_mutex;

const CodeFacts* facts_of(PyCodeObject* code) {
  auto& facts = code_facts();
  auto it = facts.find(code);
  if (it != facts.end()) return &it->second;
  if (facts.size() >= kMaxCodes) return nullptr;
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  std::string name = file ? file : "";
  Py_INCREF(code);
  std::lock_guard<std::mutex> lock(g_code_facts_mutex);
  return &facts.emplace(code, CodeFacts{is_internal(name), name}).first->second;
}

// Before Python 3.11 a frame's instruction offset is not public: the line is taken at once.
#if PY_VERSION_HEX >= 0x030B0000
int instruction_of(PyFrameObject* frame) { return PyFrame_GetLasti(frame); }
int line_of(PyCodeObject* code, int instruction) { return PyCode_Addr2Line(code, instruction); }
#else
int instruction_of(PyFrameObject* frame) { return PyFrame_GetLineNumber(frame); }
int line_of(PyCodeObject*, int line) { return line; }
#endif

// From the frames read without the GIL: done when every frame up to the user's has its facts
// already (false: a code object met for the first time, or more frames than were read).
bool located_without_gil(tpu::exec::SourceLocation& where) {
  constexpr int kFrames = 16;
  PyCodeObject* codes[kFrames];
  int instructions[kFrames];
  int n = tpu::python::frames_without_gil(codes, instructions, kFrames);
  if (n < 0) return false;
  std::lock_guard<std::mutex> lock(g_code_facts_mutex);
  for (int i = 0; i < n; ++i) {
    auto it = code_facts().find(codes[i]);
    if (it == code_facts().end()) return false;
    if (!it->second.internal) {
      where = {codes[i], instructions[i]};
      return true;
    }
  }
  return n < kFrames;  // every frame is torch's or ours: no user line, as the public walk finds
}

// The innermost frame outside torch and torch_tpu, as its code object and instruction.
tpu::exec::SourceLocation capture_python_location() {
  if (!Py_IsInitialized()) return {};
  tpu::exec::SourceLocation known;
  if (located_without_gil(known)) return known;
  PyGILState_STATE gil = PyGILState_Ensure();
  tpu::exec::SourceLocation where;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  while (frame) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const CodeFacts* facts = facts_of(code);
    Py_DECREF(code);  // kept alive by code_facts()
    if (!facts) break;
    if (!facts->internal) {
      where = {code, instruction_of(frame)};
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  if (PyErr_Occurred()) PyErr_Clear();
  PyGILState_Release(gil);
  return where;
}

// "file.py:12". Runs without the GIL: messages are built under the executor's lock, where taking
// the GIL could deadlock with a Python thread waiting for that lock; the code object is alive and
// its line table immutable, and the file name was copied when the code object was first met.
std::string format_python_location(const tpu::exec::SourceLocation& where) {
  auto* code = static_cast<PyCodeObject*>(const_cast<void*>(where.code));
  std::string file;
  {
    std::lock_guard<std::mutex> lock(g_code_facts_mutex);
    auto it = code_facts().find(code);
    if (it == code_facts().end()) return "";
    file = it->second.file;
  }
  return file + ":" + std::to_string(line_of(code, where.instruction));
}

py::dict metrics() {
  auto c = tpu::exec::counters();
  py::dict d;
  d["ops"] = c.ops;
  d["cache_hits"] = c.cache_hits;
  d["graph_replays"] = c.replays;
  d["cache_misses"] = c.cache_misses;
  d["compiles"] = c.cache_misses;
  d["compile_seconds"] = c.compile_seconds;
  d["executions"] = c.executions;
  d["execute_call_seconds"] = tpu::runtime::Client::execute_call_seconds();
  d["cache_entries"] = tpu::cache::ProgramCache::get().size();
  d["flushes"] = c.flushes;
  d["program_outputs"] = c.program_outputs;
  d["flush_reasons"] = c.flush_reasons;
  // Compile cost by kind of program: "compiles_per_op", "compile_seconds_fused_graph", ...
  for (int k = 0; k < tpu::exec::kProgramKinds; ++k) {
    std::string kind = tpu::exec::kind_name(static_cast<tpu::exec::ProgramKind>(k));
    d[("compiles_" + kind).c_str()] = c.compile.compiles[k];
    d[("compile_seconds_" + kind).c_str()] = c.compile.seconds[k];
  }
  d["quick_compiles"] = c.compile.quick_compiles;
  d["per_op_compile_median_ms"] = c.compile.per_op_median_ms;
  d["compile_upgrades"] = c.compile.upgrades;
  d["compile_upgrade_seconds"] = c.compile.upgrade_seconds;
  d["slow_compiles"] = c.compile.slow_compiles;
  tpu::exec::PaddingCounters padding = tpu::exec::padding_counters();
  d["padded_launches"] = padding.padded_launches;
  d["padding_declined"] = padding.declined;
  tpu::aten::MetaCounters meta = tpu::aten::meta_counters();
  d["meta_results_cached"] = meta.cached;
  d["meta_functions_cpp"] = meta.cpp;
  d["meta_functions_dispatched"] = meta.dispatched;
  return d;
}

py::dict memory_stats(int device) {
  auto s = tpu::aten::memory_stats(device);
  auto held = tpu::runtime::device_memory(device);
  py::dict d;
  d["allocated_bytes.all.current"] = held.current;
  d["allocated_bytes.all.peak"] = held.peak;
  d["reserved_bytes.all.current"] = s.bytes.current;
  d["reserved_bytes.all.peak"] = s.bytes.peak;
  d["reserved_bytes.all.allocated"] = s.bytes.allocated;
  d["reserved_bytes.all.freed"] = s.bytes.freed;
  d["allocation.all.current"] = s.allocations.current;
  d["allocation.all.allocated"] = s.allocations.allocated;
  d["num_ooms"] = s.num_ooms;
  d["limit_bytes"] = s.limit;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  tpu::aten::register_borrowed_kernels();
  tpu::aten::register_structured_functional_kernels();
  tpu::aten::register_hooks();
  tpu::exec::set_location_provider({&capture_python_location, &format_python_location});

  m.def("_set_plugin_candidates", [](const std::vector<std::pair<std::string, std::string>>& candidates) {
    std::vector<tpu::runtime::PluginCandidate> list;
    for (const auto& [kind, path] : candidates) list.push_back({kind, path});
    tpu::runtime::set_plugin_candidates(std::move(list));
  });
  m.def("_is_available", [] { return tpu::runtime::Client::available(); });
  m.def("_is_in_bad_fork", [] { return tpu::runtime::in_forked_child(); });
  m.def("_unavailable_reason", [] { return tpu::runtime::Client::unavailable_reason(); });
  m.def("_device_count", [] { return tpu::aten::device_count(); });
  m.def("_platform", [] { return tpu::runtime::Client::get().platform(); });
  m.def("_platform_version", [] { return tpu::runtime::Client::get().platform_version(); });
  m.def("_plugin_path", [] { return tpu::runtime::Client::get().plugin_path(); });
  m.def("_device_kind", [](int device) { return tpu::runtime::Client::get().device_kind(device); });
  m.def("_api_version", [] {
    auto& c = tpu::runtime::Client::get();
    return std::make_pair(c.api_major(), c.api_minor());
  });
  m.def("_current_device", [] { return tpu::aten::current_device(); });
  m.def("_set_device", [](int device) {
    int count = tpu::aten::device_count();
    if (device < 0 || device >= count) {
      throw py::value_error("tpu device index " + std::to_string(device) + " is out of range: " +
                            std::to_string(count) + " device(s) available");
    }
    tpu::aten::set_current_device(device);
  });
  m.def("_synchronize", [](int device) {
    py::gil_scoped_release no_gil;
    tpu::exec::synchronize(device);
  });
  m.def("_set_mode", [](int mode) { tpu::exec::set_mode(static_cast<tpu::exec::Mode>(mode)); });
  m.def("_set_default_mode", [](int mode) { tpu::exec::set_default_mode(static_cast<tpu::exec::Mode>(mode)); });
  m.def("_enter_backward", [] { tpu::aten::enter_backward(); });
  m.def("_exit_backward", [] { tpu::aten::exit_backward(); });
  m.def("_get_mode", [] { return static_cast<int>(tpu::exec::current_mode()); });
  m.def("_metrics", &metrics);
  m.def("_wait_for_compile_upgrades", [] {
    py::gil_scoped_release release;
    tpu::exec::wait_for_upgrades();
  });
  m.def("_stop_compile_upgrades", [] {
    py::gil_scoped_release release;
    tpu::exec::stop_upgrades();
  });
  m.def("_set_max_pending_ops", [](int64_t ops) { tpu::exec::set_max_pending_ops(ops); });
  m.def("_flush", [](const std::string& reason) {
    py::gil_scoped_release no_gil;
    tpu::exec::flush(reason.c_str());
  }, py::arg("reason") = "explicit");
  m.def("_reset_metrics", [] {
    tpu::exec::reset_counters();
    tpu::runtime::Client::reset_execute_call_seconds();
    tpu::aten::reset_meta_counters();
  });
  // The device activity torch.profiler's device events come from, for the advisor: starting
  // fails (False) while a profiler trace owns the recorder.
  m.def("_device_trace_start", [] {
    if (tpu::exec::trace::active()) return false;
    tpu::exec::trace::start();
    return true;
  });
  m.def("_device_trace_take", [] {
    tpu::exec::trace::stop();
    tpu::exec::trace::Trace trace;
    {
      py::gil_scoped_release no_gil;
      trace = tpu::exec::trace::take();
    }
    std::vector<std::tuple<int, int64_t, int64_t, std::string>> runs;
    for (const auto& run : trace.runs) runs.emplace_back(run.device, run.start_ns, run.end_ns, run.name);
    return runs;
  }, "Stops the recorder and returns (device, start_ns, end_ns, name) of each program run, wall clock.");
  m.def("_cpp_meta_count", &tpu::aten::cpp_meta_count);
  m.def("_forget_meta_results", [] { tpu::aten::meta_cache().clear(); });
  m.def("_forget_shape_history", [] { tpu::exec::forget_shape_history(); });
  m.def("_clear_program_cache", [] { tpu::cache::ProgramCache::get().clear(); });
  // PyTorch's own query (at::from_blob without a device asks it), through the hooks.
  m.def("_device_of_pointer", [](uintptr_t pointer) {
    return static_cast<int>(at::globalContext()
                                .getDeviceFromPtr(reinterpret_cast<void*>(pointer), c10::DeviceType::PrivateUse1)
                                .index());
  });
  m.def("_fallback_counts", [] { return tpu::aten::fallback_counts(); });
  m.def("_reset_fallback_counts", [] { tpu::aten::reset_fallback_counts(); });
  // The per-op adapter table, so that a test can hold each entry to its reason and its test.
  m.def("_op_adapters", [] {
    std::vector<std::tuple<std::vector<std::string>, std::string, std::string>> table;
    for (const auto& adapter : tpu::aten::op_adapters()) table.emplace_back(adapter.ops, adapter.reason, adapter.test);
    return table;
  });
  m.def("_set_fallback_warnings", [](bool enabled) { tpu::aten::set_fallback_warnings(enabled); });
  m.def("_set_fallback_error", [](bool error) {
    tpu::aten::set_fallback_policy(error ? tpu::aten::FallbackPolicy::Error : tpu::aten::FallbackPolicy::Allow);
  });
  m.def("_fallback_is_error", [] { return tpu::aten::fallback_policy() == tpu::aten::FallbackPolicy::Error; });
  m.def("_memory_stats", &memory_stats);
  m.def("_host_memory_stats", [] {
    tpu::aten::HostMemoryStats s = tpu::aten::host_memory_stats();
    py::dict d;
    d["allocated_bytes.current"] = s.current_bytes;
    d["allocated_bytes.peak"] = s.peak_bytes;
    d["allocated_bytes.allocated"] = s.allocated_bytes;
    d["allocated_bytes.freed"] = s.freed_bytes;
    d["segment.current"] = s.current_blocks;
    d["segment.peak"] = s.peak_blocks;
    d["num_host_alloc"] = s.allocations;
    return d;
  });
  m.def("_reset_peak_host_memory_stats", [] { tpu::aten::reset_peak_host_memory_stats(); });
  m.def("_reset_peak_memory", [](int device) { tpu::aten::reset_peak_memory(device); });
  m.def("_set_memory_limit", [](int device, int64_t bytes) { tpu::aten::set_memory_limit(device, bytes); });
  m.def("_default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(tpu::aten::default_generator(device)));
  });
  m.def("_seed_all", [](uint64_t seed) { tpu::aten::seed_all(seed); });
  m.def("_lowered_ops", [] { return tpu::lowering::lowered_op_names(); });
  tpu::python::register_cache_bindings(m);
  tpu::python::register_compile_bindings(m);
  tpu::python::register_distributed_bindings(m);
  tpu::python::register_autograd_shutdown_bindings(m);
  tpu::python::register_memory_history_bindings(m);
}
