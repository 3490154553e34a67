// Device timing for PyTorch's profiler (torch.autograd.profiler.profile(use_device="tpu")): the
// stubs it calls around every op to mark the device's progress, as CUDA's record events.
//
// A marker is taken without flushing a pending defer-and-fuse graph, so profiling never changes
// how ops fuse: an op still waiting in a graph has no device time of its own, and the graph's
// time falls to the op whose host read or sync ran it.
#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "aten/tpu_tensor.h"
#include "exec/device_queue.h"
#include "exec/executor.h"

namespace tpu::aten {

namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct TpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    int index = current_device();
    if (device) *device = static_cast<c10::DeviceIndex>(index);
    if (event) *event = exec::mark(index, /*timing=*/true);
    if (cpu_ns) *cpu_ns = c10::getTime();
  }
  // Microseconds between the two markers' work finishing, as CUDA's stubs report.
  float elapsed(const ProfilerVoidEventStub* first, const ProfilerVoidEventStub* second) const override {
    TORCH_CHECK(first && second && *first && *second, "tpu profiler: an event was not recorded");
    auto* start = static_cast<exec::Marker*>(first->get());
    auto* end = static_cast<exec::Marker*>(second->get());
    start->wait();
    end->wait();
    return static_cast<float>((end->finished_ms() - start->finished_ms()) * 1000.0);
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (int index = 0; index < device_count(); ++index) {
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
      op(index);
    }
  }
  void synchronize() const override {
    for (int index = 0; index < device_count(); ++index) exec::synchronize(index);
  }
};

const bool g_registered = [] {
  static TpuProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

}  // namespace

}  // namespace tpu::aten
