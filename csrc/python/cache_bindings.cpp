// torch_tpu._C's compilation-cache entry points: statistics, the directory tools behind
// `python -m torch_tpu.cache`, and private hooks for the tests of what the key covers.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <c10/util/Exception.h>

#include "cache/cache_key.h"
#include "cache/disk_cache.h"
#include "cache/program_cache.h"
#include "cache/stable_hash.h"
#include "exec/executor.h"

namespace py = pybind11;

namespace tpu::python {

namespace {

// TORCH_WARN, not PyErr_WarnEx: the cache warns from inside ops, possibly under the executor's
// lock, and taking the GIL there could deadlock with a Python thread waiting for that lock.
// PyTorch's bindings (and the autograd engine) hand the warning to Python when the op returns.
// TORCH_WARN, not PyErr_WarnEx: the cache and the executor warn while holding their locks, and
// taking the GIL there could deadlock with a Python thread waiting for those locks.
void warn_through_torch(const std::string& message) { TORCH_WARN(message); }

py::object directory_or_none(const std::string& directory) {
  return directory.empty() ? py::none() : py::object(py::str(directory));
}

py::dict cache_stats() {
  auto& disk = cache::DiskCache::get();
  auto& memory = cache::ProgramCache::get();
  auto counts = memory.counters();
  auto disk_counts = disk.counters();
  auto usage = cache::scan_directory(disk.directory());
  py::dict d;
  d["memory_hits"] = counts.memory_hits;
  d["disk_hits"] = counts.disk_hits;
  d["misses"] = counts.misses;
  d["compile_seconds"] = exec::counters().compile_seconds;
  d["disk_load_seconds"] = disk_counts.load_seconds;
  d["bytes_on_disk"] = usage.bytes;
  d["entries_on_disk"] = usage.entries;
  d["directory"] = directory_or_none(disk.directory());
  d["writable"] = disk.writable();
  d["max_bytes"] = disk.max_bytes();
  d["memory_entries"] = memory.size();
  d["memory_pressure_evictions"] = counts.pressure_evictions;
  d["disk_writes"] = disk_counts.writes;
  d["damaged_entries"] = disk_counts.damaged;
  d["evicted_entries"] = disk_counts.evicted;
  return d;
}

py::dict key_context_to_dict(const cache::KeyContext& c) {
  py::dict d;
  d["library_version"] = c.library_version;
  d["platform"] = c.platform;
  d["platform_version"] = c.platform_version;
  d["plugin_build"] = c.plugin_build;
  d["api_major"] = c.api_major;
  d["api_minor"] = c.api_minor;
  d["device_kind"] = c.device_kind;
  d["device_count"] = c.device_count;
  d["host_isa"] = c.host_isa;
  d["compile_options"] = py::bytes(c.compile_options);
  d["compiler_flags"] = c.compiler_flags;
  d["salt"] = c.salt;
  return d;
}

cache::KeyContext key_context_from_dict(const py::dict& d) {
  cache::KeyContext c;
  c.library_version = d["library_version"].cast<std::string>();
  c.platform = d["platform"].cast<std::string>();
  c.platform_version = d["platform_version"].cast<std::string>();
  c.plugin_build = d["plugin_build"].cast<std::string>();
  c.api_major = d["api_major"].cast<int>();
  c.api_minor = d["api_minor"].cast<int>();
  c.device_kind = d["device_kind"].cast<std::string>();
  c.device_count = d["device_count"].cast<int>();
  c.host_isa = d["host_isa"].cast<std::string>();
  c.compile_options = d["compile_options"].cast<std::string>();
  c.compiler_flags = d["compiler_flags"].cast<std::string>();
  c.salt = d["salt"].cast<std::string>();
  return c;
}

}  // namespace

void register_cache_bindings(py::module& m) {
  cache::set_warning_handler(&warn_through_torch);

  m.def("_cache_stats", &cache_stats);
  m.def("_cache_directory_from_environment", [] { return directory_or_none(cache::directory_from_environment()); });
  m.def("_cache_scan", [](const std::string& directory) {
    auto usage = cache::scan_directory(directory);
    return std::make_pair(usage.entries, usage.bytes);
  });
  m.def("_cache_clear_directory", &cache::clear_directory);
  m.def("_cache_evict", &cache::evict_until);
  m.def("_cache_check_entry", &cache::check_entry_file);

  // Private test hooks.
  m.def("_cache_key_salt", [](const std::string& salt) {
    cache::DiskCache::get().set_salt(salt);
    cache::ProgramCache::get().clear();
  });
  m.def("_cache_key_context", [] { return key_context_to_dict(cache::current_key_context()); });
  m.def("_cache_full_key", [](const py::bytes& program_key, const py::dict& context) {
    return py::bytes(cache::DiskCache::full_key(key_context_from_dict(context), std::string(program_key)));
  });
  m.def("_cache_entry_file_name", [](const py::bytes& full_key) { return cache::entry_file_name(full_key); });
  m.def("_cache_stable_hash", [](const py::bytes& data) { return cache::fnv1a64(std::string(data)); });
}

}  // namespace tpu::python
