#include "aten/pinned_memory.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace tpu::aten {

namespace {

constexpr size_t kAlignment = 4096;  // a page: what DMA engines want when a plugin can use it

std::mutex g_mutex;
std::map<uintptr_t, size_t> g_blocks;  // start -> size of each live block
HostMemoryStats g_stats;

void release(void* data) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_blocks.find(reinterpret_cast<uintptr_t>(data));
    if (it != g_blocks.end()) {
      g_stats.current_bytes -= static_cast<int64_t>(it->second);
      g_stats.freed_bytes += static_cast<int64_t>(it->second);
      g_stats.current_blocks -= 1;
      g_blocks.erase(it);
    }
  }
  std::free(data);
}

class PinnedMemoryAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nullptr;
    if (nbytes > 0) {
      size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
      data = std::aligned_alloc(kAlignment, rounded);
      TORCH_CHECK_WITH(OutOfMemoryError, data != nullptr, "out of host memory: pinning ", nbytes, " bytes failed");
      std::lock_guard<std::mutex> lock(g_mutex);
      g_blocks.emplace(reinterpret_cast<uintptr_t>(data), nbytes);
      g_stats.current_bytes += static_cast<int64_t>(nbytes);
      g_stats.allocated_bytes += static_cast<int64_t>(nbytes);
      g_stats.peak_bytes = std::max(g_stats.peak_bytes, g_stats.current_bytes);
      g_stats.current_blocks += 1;
      g_stats.peak_blocks = std::max(g_stats.peak_blocks, g_stats.current_blocks);
      g_stats.allocations += 1;
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

}  // namespace

c10::Allocator* pinned_memory_allocator() {
  static PinnedMemoryAllocator allocator;
  return &allocator;
}

bool is_pinned_pointer(const void* data) {
  auto address = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_blocks.upper_bound(address);
  if (it == g_blocks.begin()) return false;
  --it;
  return address < it->first + std::max<size_t>(it->second, 1);
}

HostMemoryStats host_memory_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats;
}

void reset_peak_host_memory_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_stats.peak_bytes = g_stats.current_bytes;
  g_stats.peak_blocks = g_stats.current_blocks;
}

}  // namespace tpu::aten
