// The device guard (c10::impl::DeviceGuardImplInterface for PrivateUse1): how PyTorch sets and
// reads the current tpu device, and reaches its streams and events (aten/streams.h,
// aten/events.h).
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "aten/events.h"
#include "aten/streams.h"
#include "aten/tpu_tensor.h"

namespace tpu::aten {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

// torch.Stream(device="tpu") names no index: like CUDA's, the stream belongs to the current device.
c10::Device indexed(c10::Device device) {
  return device.has_index() ? device : c10::Device(kTpu, static_cast<c10::DeviceIndex>(current_device()));
}

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kTpu; }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device previous = getDevice();
    if (device.index() != previous.index()) setDevice(device);
    return previous;
  }
  c10::Device getDevice() const override {
    return c10::Device(kTpu, static_cast<c10::DeviceIndex>(current_device()));
  }
  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kTpu, "expected a tpu device, got ", device);
    int count = device_count();
    TORCH_CHECK(device.index() >= 0 && device.index() < count, "tpu device index ",
                static_cast<int>(device.index()), " is out of range: ", count, " device(s) available");
    set_current_device(device.index());
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0) set_current_device(device.index());
  }
  // The dtypes a tpu storage holds (every PJRT element type PyTorch has): not the quantized ones.
  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    c10::DeviceCapability capability;
    capability.capability_data.capability_bits = 0;
    for (c10::ScalarType type : {c10::kBool, c10::kByte, c10::kChar, c10::kShort, c10::kInt, c10::kLong,
                                 c10::kUInt16, c10::kUInt32, c10::kUInt64, c10::kHalf, c10::kBFloat16,
                                 c10::kFloat, c10::kDouble, c10::kComplexFloat, c10::kComplexDouble}) {
      capability.capability_data.capability_bits |= uint64_t{1} << static_cast<int>(type);
    }
    return capability;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(device_count()); }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override { exec::synchronize(device_index); }

  c10::Stream getStream(c10::Device device) const override { return current_stream(indexed(device)); }
  c10::Stream getDefaultStream(c10::Device device) const override { return default_stream(indexed(device)); }
  c10::Stream getNewStream(c10::Device device, int) const override { return new_stream(indexed(device)); }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool) const override { return new_stream(indexed(device)); }
  c10::Stream exchangeStream(c10::Stream stream) const override { return exchange_stream(stream); }
  void synchronizeStream(const c10::Stream& stream) const override { synchronize_stream(stream); }
  bool queryStream(const c10::Stream& stream) const override { return query_stream(stream); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex, const c10::EventFlag flag) const override {
    record_event(event, stream, flag);
  }
  void block(void*, const c10::Stream&) const override {}  // later work already follows it: one queue
  bool queryEvent(void* event) const override { return query_event(event); }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { destroy_event(event); }
  void synchronizeEvent(void* event) const override { synchronize_event(event); }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override { return elapsed_ms(start, end); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace
}  // namespace tpu::aten
