// The accelerator hooks (at::PrivateUse1HooksInterface): what torch.accelerator, pinned memory,
// generators and storage resizing ask the tpu backend.
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "aten/device_allocator.h"
#include "aten/generator.h"
#include "aten/pinned_memory.h"
#include "aten/tpu_tensor.h"

namespace tpu::aten {

void resize_storage_bytes(const c10::Storage& storage, size_t newsize);  // aten/storage_kernels.cpp

namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return runtime::Client::available(); }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_device()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto previous = getCurrentDevice();
    set_current_device(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device < 0 ? current_device() : device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    int count = device_count();
    TORCH_CHECK(device < count, "tpu device index ", static_cast<int>(device), " is out of range: ", count,
                " device(s) available");
    return new_generator(device < 0 ? current_device() : device);
  }
  // Each device hands out data pointers from its own reserved range (aten/device_allocator.h).
  at::Device getDeviceFromPtr(void* data) const override {
    int device = device_of_address(data);
    TORCH_CHECK(device >= 0, "tpu: the pointer ", data, " was not handed out by the tpu allocator");
    return at::Device(kTpu, static_cast<c10::DeviceIndex>(device));
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_pointer(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_memory_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

}  // namespace

void register_hooks() {
  static TpuHooks hooks;
  static bool once = [] {
    at::RegisterPrivateUse1HooksInterface(&hooks);
    return true;
  }();
  (void)once;
}

}  // namespace tpu::aten
