// torch_tpu._C's entry points for torch.compile(backend="tpu"): capturing a graph's program on
// its first call and replaying it on later calls (see aten/graph_replay.h).
#include <torch/csrc/utils/pybind.h>

#include "aten/graph_replay.h"
#include "aten/tpu_tensor.h"
#include "exec/padding.h"

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
  m.def("_begin_capture", [](bool sizes_vary, uint64_t graph) {
    py::gil_scoped_release no_gil;
    tpu::exec::begin_capture(sizes_vary, graph);
  });
  // A graph traced with symbolic sizes pads the sizes that changed to their buckets: an argument
  // that covers a storage of exact length moves into one with its bucket's room (`dims`: its dims
  // whose size changed between calls), so that every size of the bucket runs the same program.
  m.def("_extend_to_bucket", [](const at::Tensor& tensor, const std::vector<int64_t>& dims) {
    if (tensor.device().type() != c10::DeviceType::PrivateUse1 || !tensor.is_contiguous() ||
        tensor.storage_offset() != 0 || tensor.numel() == 0) {
      return;
    }
    auto storage = tpu::aten::storage_of(tensor);
    if (static_cast<int64_t>(tensor.nbytes()) != storage->nbytes) return;
    int64_t bucket = static_cast<int64_t>(tensor.element_size());
    for (int64_t d = 0; d < tensor.dim(); ++d) {
      bool symbolic = std::find(dims.begin(), dims.end(), d) != dims.end();
      bucket *= symbolic ? tpu::exec::bucket_size(tensor.size(d)) : tensor.size(d);
    }
    py::gil_scoped_release no_gil;
    tpu::exec::extend_to_bucket(storage, bucket);
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
