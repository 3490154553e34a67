// torch_tpu._C's memory history: turning the recording on and off, and the snapshot in the shape
// torch.cuda.memory._snapshot() gives (segments and device_traces, frames symbolized), which
// PyTorch's memory visualiser (torch.cuda._memory_viz, pytorch.org/memory_viz) reads.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include "aten/memory_history.h"
#include "aten/tpu_tensor.h"

namespace py = pybind11;

// Exported by libtorch_python; declared here because their header includes a JSON library that
// PyTorch's wheels do not ship.
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
void installCapturedTracebackPython();
}  // namespace torch

namespace tpu::python {

namespace {

py::dict memory_snapshot_with_history() {
  aten::MemoryHistory history = aten::memory_history();
  std::vector<torch::CapturedTraceback*> stacks;
  for (const auto& event : history.events) stacks.push_back(event.stack.get());
  for (const auto& [address, live] : history.live) stacks.push_back(live.stack.get());
  std::vector<py::object> frames = torch::py_symbolize(stacks);
  size_t next = 0;

  int devices = std::max(aten::device_count(), 1);
  std::vector<py::list> traces(devices);
  for (const auto& event : history.events) {
    py::object stack = frames[next++];
    // A storage is its own segment: its allocation is a segment's, and its free returns both.
    std::vector<const char*> actions = event.allocation
        ? std::vector<const char*>{"segment_alloc", "alloc"}
        : std::vector<const char*>{"free_requested", "free_completed", "segment_free"};
    for (const char* action : actions) {
      py::dict entry;
      entry["action"] = action;
      entry["addr"] = event.address;
      entry["size"] = event.size;
      entry["stream"] = 0;
      entry["time_us"] = event.time_us;
      entry["frames"] = stack;
      if (event.device >= 0 && event.device < devices) traces[event.device].append(entry);
    }
  }
  py::list segments;
  for (const auto& [address, live] : history.live) {
    py::object stack = frames[next++];
    py::dict block;
    block["size"] = live.size;
    block["requested_size"] = live.size;
    block["address"] = address;
    block["state"] = "active_allocated";
    block["frames"] = stack;
    py::dict segment;
    segment["device"] = live.device;
    segment["address"] = address;
    segment["total_size"] = live.size;
    segment["allocated_size"] = live.size;
    segment["active_size"] = live.size;
    segment["requested_size"] = live.size;
    segment["stream"] = 0;
    segment["segment_type"] = live.size > (1 << 20) ? "large" : "small";
    segment["segment_pool_id"] = py::make_tuple(0, 0);
    segment["blocks"] = py::make_tuple(block);
    segments.append(segment);
  }
  py::dict snapshot;
  snapshot["segments"] = segments;
  py::list device_traces;
  for (auto& trace : traces) device_traces.append(trace);
  snapshot["device_traces"] = device_traces;
  return snapshot;
}

}  // namespace

void register_memory_history_bindings(py::module& m) {
  m.def("_record_memory_history", [](bool enabled, size_t max_entries) {
    if (enabled) torch::installCapturedTracebackPython();
    aten::record_memory_history(enabled, max_entries);
  });
  m.def("_recording_memory_history", &aten::recording_memory_history);
  m.def("_memory_snapshot_with_history", &memory_snapshot_with_history);
}

}  // namespace tpu::python
