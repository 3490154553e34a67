// Lets the autograd engine's tpu device thread finish its last graph task before Python
// finalizes (torch_tpu/_exit.py says why that matters).
//
// The probe is a backward pass built here, in C++, so nothing in it is tied to a Python object:
// its leaf never reaches Python, it returns no gradients, and it runs after the Python context
// that backward() stores in thread-local state was removed. Whichever thread drops the probe's
// graph task last, dropping it never needs the GIL; and since a device thread takes its next
// task only after releasing the previous one, the probe's return means every earlier graph task
// on that thread has been released, while the GIL was free for it.
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

namespace tpu::python {

namespace {

void run_probe_backward(int device_index) {
  c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device_index));
  auto options = at::TensorOptions().device(device).dtype(at::kFloat);
  at::Tensor leaf = at::empty({}, options).requires_grad_(true);
  at::Tensor output = leaf.view(at::IntArrayRef{});
  torch::autograd::backward({output}, {at::empty({}, options)});
}

}  // namespace

void register_autograd_shutdown_bindings(py::module& m) {
  m.def("_drain_autograd_device_thread", [](int device_index) {
    py::gil_scoped_release no_gil;
    run_probe_backward(device_index);
  });
}

}  // namespace tpu::python
