// torch_tpu._C's distributed entry point: the "tpu_dist" c10d backend, built by the creator that
// torch_tpu.distributed registers with torch.distributed.
#include <Python.h>
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/process_group_tpu.h"

namespace py = pybind11;

namespace tpu::python {

void register_distributed_bindings(py::module& m) {
  using tpu::distributed::ProcessGroupTPU;
  // c10d::Backend is registered by torch._C._distributed_c10d, which torch imports first.
  py::class_<ProcessGroupTPU, c10d::Backend, c10::intrusive_ptr<ProcessGroupTPU>>(
      m, "ProcessGroupTPU")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& transport, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& replica_group) {
             std::shared_ptr<tpu::distributed::ReplicaRendezvous> replicas;
             if (!replica_group.empty()) replicas = tpu::distributed::ReplicaRendezvous::join(replica_group, size);
             return c10::make_intrusive<ProcessGroupTPU>(transport, rank, size, timeout, replicas);
           }),
           py::arg("transport"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("replica_group") = "")
      .def_property_readonly("spans_devices", &ProcessGroupTPU::spans_devices)
      .def_property_readonly("replicated_collectives", &ProcessGroupTPU::replicated_collectives)
      .def_property_readonly("transport", &ProcessGroupTPU::transport)
      .def_property_readonly("collectives", &ProcessGroupTPU::collectives)
      .def("staging_stats",
           [](ProcessGroupTPU& self) {
             auto s = self.staging_stats();
             py::dict d;
             d["operations"] = s.operations;
             d["bytes_to_host"] = s.bytes_to_host;
             d["bytes_to_device"] = s.bytes_to_device;
             d["flush_seconds"] = s.flush_seconds;
             d["to_host_seconds"] = s.to_host_seconds;
             d["to_device_seconds"] = s.to_device_seconds;
             d["transport_seconds"] =
                 s.total_seconds - s.flush_seconds - s.to_host_seconds - s.to_device_seconds;
             d["total_seconds"] = s.total_seconds;
             return d;
           })
      .def("reset_staging_stats", &ProcessGroupTPU::reset_staging_stats);
  m.def("_collective_programs", [] {
    py::dict d;
    d["compiled"] = tpu::distributed::collective_programs_compiled();
    d["run"] = tpu::distributed::collective_programs_run();
    return d;
  });
}

}  // namespace tpu::python
