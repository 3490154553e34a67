// How PyTorch finds the tpu device: device guard, accelerator hooks, default generators.
#include <ATen/EmptyTensor.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <torch/library.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <random>

#include "aten/pinned_memory.h"
#include "aten/tpu_tensor.h"
#include "exec/device_queue.h"

namespace tpu::aten {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

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
  // Streams: every stream of a device feeds the same PJRT queue, where programs run in the order
  // their data dependencies dictate, so work ordered by events across streams stays ordered.
  // Stream objects still carry their identity, so user code that juggles them works unchanged.
  c10::Stream getStream(c10::Device device) const override { return current_stream(indexed(device)); }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, indexed(device));
  }
  // torch.Stream(device="tpu") names no index: like CUDA, the stream belongs to the current device.
  c10::Stream getNewStream(c10::Device device, int) const override {
    return c10::Stream(c10::Stream::UNSAFE, indexed(device), g_next_stream_id++);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool) const override {
    return getNewStream(device, 0);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    c10::Stream previous = current_stream(stream.device());
    t_current_streams[stream.device_index()] = stream.id();
    return previous;
  }
  // Events are markers of everything issued to the device before them.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex, const c10::EventFlag flag) const override {
    auto marker = exec::record_marker(stream.device_index(), flag == c10::EventFlag::BACKEND_DEFAULT);
    if (*event) delete static_cast<exec::MarkerPtr*>(*event);
    *event = new exec::MarkerPtr(std::move(marker));
  }
  void block(void*, const c10::Stream&) const override {}  // later work already follows it
  bool queryEvent(void* event) const override {
    return !event || (*static_cast<exec::MarkerPtr*>(event))->ready();
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<exec::MarkerPtr*>(event);
  }
  void synchronizeEvent(void* event) const override {
    if (event) (*static_cast<exec::MarkerPtr*>(event))->wait();
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    auto& first = *static_cast<exec::MarkerPtr*>(start);
    auto& second = *static_cast<exec::MarkerPtr*>(end);
    first->wait();
    second->wait();
    return second->finished_ms() - first->finished_ms();
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    exec::synchronize(device_index);
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    exec::synchronize(stream.device_index());
  }
  bool queryStream(const c10::Stream& stream) const override { return exec::idle(stream.device_index()); }

 private:
  static c10::Device indexed(c10::Device device) {
    return device.has_index() ? device : c10::Device(kTpu, static_cast<c10::DeviceIndex>(current_device()));
  }
  static c10::Stream current_stream(c10::Device device) {
    auto it = t_current_streams.find(device.index());
    if (it == t_current_streams.end() || it->second == 0) return c10::Stream(c10::Stream::DEFAULT, device);
    return c10::Stream(c10::Stream::UNSAFE, device, it->second);
  }
  static inline std::atomic<c10::StreamId> g_next_stream_id{1};
  static inline thread_local std::map<c10::DeviceIndex, c10::StreamId> t_current_streams;
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

// Counter-based generator state: programs derive their bits from (seed, offset), so the state is
// two integers and restoring it reproduces the same numbers.
class TpuGenerator final : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex device)
      : c10::GeneratorImpl(c10::Device(kTpu, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    set_current_seed(s);
    return s;
  }
  void set_state(const c10::TensorImpl& state) override {
    // A state lives in host memory, as CUDA's does: a tpu tensor's data cannot be read here.
    TORCH_CHECK_TYPE(state.layout() == at::kStrided && state.device().is_cpu() && state.dtype() == at::kByte,
                     "RNG state must be a torch.ByteTensor (a CPU uint8 tensor); move it with .cpu() first");
    TORCH_CHECK(state.numel() == 16 && state.is_contiguous(), "tpu generator state must be a uint8 tensor of 16 bytes");
    const auto* bytes = static_cast<const uint64_t*>(state.data());
    seed_ = bytes[0];
    offset_ = bytes[1];
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    // Allocated directly, not through the dispatcher: under FakeTensorMode (torch.compile's tracing)
    // at::empty would hand back a fake tensor without memory.
    at::Tensor state = at::detail::empty_cpu({16}, at::kByte, c10::nullopt, c10::nullopt, c10::nullopt, c10::nullopt);
    auto* bytes = static_cast<uint64_t*>(state.data_ptr());
    bytes[0] = seed_;
    bytes[1] = offset_;
    return state.getIntrusivePtr();
  }
  std::pair<uint64_t, uint64_t> advance(uint64_t increment) {
    uint64_t offset = offset_;
    offset_ += increment;
    return {seed_, offset};
  }

 private:
  TpuGenerator* clone_impl() const override {
    auto* copy = new TpuGenerator(device().index());
    copy->seed_ = seed_;
    copy->offset_ = offset_;
    return copy;
  }
  uint64_t seed_ = 67280421310721ULL;  // PyTorch's default seed
  uint64_t offset_ = 0;
};

std::mutex g_generators_mutex;
std::deque<at::Generator> g_generators;
c10::optional<uint64_t> g_seed_for_new_generators;

}  // namespace

at::Generator& default_generator(int device) {
  std::lock_guard<std::mutex> lock(g_generators_mutex);
  while (static_cast<int>(g_generators.size()) <= device) {
    auto gen = at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(g_generators.size()));
    if (g_seed_for_new_generators) gen.set_current_seed(*g_seed_for_new_generators);
    g_generators.push_back(gen);
  }
  return g_generators[device];
}

void seed_all(uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_generators_mutex);
  g_seed_for_new_generators = seed;
  for (auto& gen : g_generators) {
    std::lock_guard<std::mutex> gen_lock(gen.mutex());
    gen.set_current_seed(seed);
  }
}

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return runtime::Client::available(); }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto previous = getCurrentDevice();
    set_current_device(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device < 0 ? current_device() : device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    int count = device_count();
    TORCH_CHECK(device < count, "tpu device index ", static_cast<int>(device), " is out of range: ", count,
                " device(s) available");
    return at::make_generator<TpuGenerator>(device < 0 ? current_device() : device);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(kTpu, static_cast<c10::DeviceIndex>(current_device()));
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_pointer(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_memory_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

}  // namespace

std::pair<uint64_t, uint64_t> next_philox(const c10::optional<at::Generator>& generator, int device,
                                          uint64_t increment) {
  at::Generator gen = generator.has_value() && generator->defined() ? *generator : default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<TpuGenerator>()->advance(increment);
}

void resize_storage_bytes(const c10::Storage& storage, size_t newsize);

void TpuHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  resize_storage_bytes(storage, newsize);
}

namespace {

// Quantized tensors moved to tpu (quantize_per_tensor(...).to("tpu")) reach this dispatch key
// first; without it the user would see "Could not run 'aten::empty_quantized' ..." from deep inside
// the dispatcher.
void refuse_quantized(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().name(), ": quantized tensors (torch.qint8, torch.quint8, "
                              "torch.qint32, ...) are not supported on the tpu device. Dequantize first "
                              "(q.dequantize().to(\"tpu\")), or keep quantized work on the CPU.");
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_quantized>());
}

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
