// torch_tpu._C's entry points for torch.compile(backend="tpu"): capturing a graph's program on
// its first call and replaying it on later calls (see aten/graph_replay.h).
#include <torch/csrc/utils/pybind.h>

#include "aten/graph_replay.h"

namespace py = pybind11;

namespace tpu::python {

void register_compile_bindings(py::module& m) {
  using tpu::aten::GraphReplay;
  py::class_<GraphReplay, std::shared_ptr<GraphReplay>>(m, "_GraphReplay")
      .def("run", [](const GraphReplay& replay, const GraphReplay::Tensors& inputs) {
        py::gil_scoped_release no_gil;
        return replay.run(inputs);
      });
  m.def("_swap_thread_mode", [](int mode) { return tpu::exec::swap_thread_mode(mode); });
  m.def("_begin_capture", [] {
    py::gil_scoped_release no_gil;
    tpu::exec::begin_capture();
  });
  m.def("_end_capture", [](const GraphReplay::Tensors& inputs, const GraphReplay::Tensors& outputs) {
    std::shared_ptr<tpu::exec::Capture> capture;
    {
      py::gil_scoped_release no_gil;
      capture = tpu::exec::end_capture();
    }
    std::string why_not;
    auto replay = GraphReplay::bind(std::move(capture), inputs, outputs, &why_not);
    return std::make_pair(replay, why_not);
  });
}

}  // namespace tpu::python
