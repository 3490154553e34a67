#include "aten/generator.h"

#include <ATen/EmptyTensor.h>
#include <ATen/Tensor.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/GeneratorImpl.h>

#include <deque>
#include <mutex>
#include <random>

namespace tpu::aten {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

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

at::Generator new_generator(int device) { return at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(device)); }

std::pair<uint64_t, uint64_t> next_philox(const c10::optional<at::Generator>& generator, int device,
                                          uint64_t increment) {
  at::Generator gen = generator.has_value() && generator->defined() ? *generator : default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<TpuGenerator>()->advance(increment);
}

}  // namespace tpu::aten
