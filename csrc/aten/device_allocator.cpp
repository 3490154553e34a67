#include "aten/device_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include "aten/memory_history.h"
#include "aten/tpu_tensor.h"

namespace tpu::aten {

namespace {

// What a DataPtr's context points at: a storage and its address, in one allocation per tensor
// made. `storage` points into the block itself and owns it, so the block lives until
// delete_storage lets that pointer go and the executor is done with the storage.
struct StorageContext {
  StorageContext(int device, int64_t nbytes) : value(device, nbytes) {}
  exec::Storage value;
  exec::StoragePtr storage;
  void* address = nullptr;
  size_t span = 0;
};

// Address space that faults on any access, one per device, handed out in aligned spans and
// recycled by size, so data_ptr() values are unique among live tensors exactly as on CUDA, and
// the range a pointer lies in names its device.
class AddressSpace {
 public:
  explicit AddressSpace(int device) : device_(device) {}
  void* take(size_t nbytes, size_t* span) {
    size_t size = round_up(nbytes == 0 ? 1 : nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* address = it->second.back();
      it->second.pop_back();
      *span = size;
      return address;
    }
    if (next_ + size > end_) reserve(size);
    void* address = reinterpret_cast<void*>(next_);
    next_ += size;
    *span = size;
    return address;
  }
  void give_back(void* address, size_t span) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[span].push_back(address);
  }

 private:
  static size_t round_up(size_t n) {
    constexpr size_t kGranule = 512;
    if (n <= (size_t{1} << 20)) return (n + kGranule - 1) / kGranule * kGranule;
    size_t p = size_t{1} << 20;
    while (p < n) p <<= 1;
    return p;
  }
  void reserve(size_t at_least);
  int device_;
  std::mutex mutex_;
  uintptr_t next_ = 0, end_ = 0;
  std::map<size_t, std::vector<void*>> free_;
};

// Every reserved range, with its device: few (one per device, more only past a terabyte).
struct Range {
  uintptr_t begin, end;
  int device;
};
std::mutex g_ranges_mutex;
std::vector<Range> g_ranges;

void AddressSpace::reserve(size_t at_least) {
  size_t size = std::max<size_t>(size_t{1} << 40, at_least);
  void* region = MAP_FAILED;
  while (size >= at_least && region == MAP_FAILED) {
    region = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (region == MAP_FAILED) size /= 2;
  }
  TORCH_CHECK(region != MAP_FAILED, "tpu: could not reserve address space for device pointers");
  next_ = reinterpret_cast<uintptr_t>(region);
  end_ = next_ + size;
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  g_ranges.push_back({next_, end_, device_});
}

AddressSpace& address_space(int device) {
  // Every allocation and free looks its device's space up: the common devices without a lock.
  constexpr int kLockFree = 64;
  static std::atomic<AddressSpace*> lock_free[kLockFree];
  bool fast = device >= 0 && device < kLockFree;
  if (fast) {
    if (AddressSpace* space = lock_free[device].load(std::memory_order_acquire)) return *space;
  }
  static std::mutex mutex;
  static auto* spaces = new std::map<int, AddressSpace*>();
  std::lock_guard<std::mutex> lock(mutex);
  AddressSpace*& space = (*spaces)[device];
  if (!space) space = new AddressSpace(device);
  if (fast) lock_free[device].store(space, std::memory_order_release);
  return *space;
}

std::mutex g_stats_mutex;
std::map<int, MemoryStats> g_stats;

int64_t default_limit() {
  if (const char* env = std::getenv("TORCH_TPU_MEMORY_LIMIT")) return std::atoll(env);
  // The CPU plugin's device memory is host memory.
  if (runtime::Client::get().platform() == "cpu") {
    return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  }
  return -1;  // the plugin reports its own exhaustion
}

// PyTorch's profiler (profile_memory=True) counts each op's device allocations from these, as
// CUDA's caching allocator reports them; reserved equals allocated here.
void report_to_profiler(void* address, int64_t delta, int64_t total, int device) {
  if (!c10::memoryProfilingEnabled()) return;
  c10::reportMemoryUsageToProfiler(address, delta, static_cast<size_t>(total), static_cast<size_t>(total),
                                   c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
}

void delete_storage(void* raw) {
  auto* context = static_cast<StorageContext*>(raw);
  context->storage->mark_freed();  // a pending fused graph must not materialise it
  int device = context->storage->device;
  int64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(g_stats_mutex);
    MemoryStats& stats = g_stats[device];
    stats.bytes.decrease(static_cast<size_t>(context->storage->nbytes));
    stats.allocations.decrease(1);
    total = stats.bytes.current;
  }
  report_to_profiler(context->address, -context->storage->nbytes, total, device);
  if (recording_memory_history()) note_free(device, context->address, context->storage->nbytes);
  address_space(device).give_back(context->address, context->span);
  exec::StoragePtr last = std::move(context->storage);  // may free the context itself
}

// Also a DeviceAllocator, which is what torch.accelerator.memory_* reads. Storages release their
// device buffers when they die, so there is no cache to empty and reserved equals allocated.
class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return allocate_on(nbytes, current_device()); }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu memory cannot be copied through host pointers; use Tensor.copy_");
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    MemoryStats stats = memory_stats(device);
    runtime::DeviceMemory held = runtime::device_memory(device);
    c10::CachingDeviceAllocator::DeviceStats out;
    constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    // Allocated: bytes of live device buffers (a storage holds none until a program writes it,
    // and a fused graph's dead intermediates never get one). Reserved: the storages' sizes.
    for (auto* bytes : {&out.allocated_bytes, &out.active_bytes}) {
      (*bytes)[all].current = held.current;
      (*bytes)[all].peak = held.peak;
    }
    for (auto* bytes : {&out.reserved_bytes, &out.requested_bytes}) (*bytes)[all] = stats.bytes;
    for (auto* count : {&out.allocation, &out.segment, &out.active}) (*count)[all] = stats.allocations;
    out.num_ooms = stats.num_ooms;
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { reset_accumulated_memory(device); }
  void resetPeakStats(c10::DeviceIndex device) override { reset_peak_memory(device); }
  // (free, total): the tighter of this process's cap (set_per_process_memory_fraction; for the
  // CPU plugin, the host's memory) and the plugin's own limit, with what counts against it.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    MemoryStats stats = memory_stats(device);
    int64_t total = stats.limit == 0 ? default_limit() : stats.limit, in_use = stats.bytes.current;
    runtime::Client::AllocatorStats plugin = runtime::Client::get().allocator_stats(device);
    if (plugin.bytes_limit > 0 && (total <= 0 || plugin.bytes_limit < total)) {
      total = plugin.bytes_limit;
      in_use = plugin.bytes_in_use;
    }
    if (total <= 0) return {0, 0};
    return {static_cast<size_t>(std::max<int64_t>(total - in_use, 0)), static_cast<size_t>(total)};
  }
};

}  // namespace

c10::DataPtr allocate_on(size_t nbytes, int device) {
  // A negative size that reached here as a size_t (UntypedStorage.resize_(-1)).
  TORCH_CHECK(nbytes <= static_cast<size_t>(std::numeric_limits<int64_t>::max()),
              "tpu: cannot allocate a storage of negative size: ", static_cast<int64_t>(nbytes), " bytes");
  int64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(g_stats_mutex);
    MemoryStats& stats = g_stats[device];
    if (stats.limit == 0) stats.limit = default_limit();
    if (stats.limit > 0 && stats.bytes.current + static_cast<int64_t>(nbytes) > stats.limit) {
      ++stats.num_ooms;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu out of memory. Tried to allocate ", nbytes,
                       " bytes on tpu:", device, " with ", stats.bytes.current, " bytes of ",
                       stats.limit, " already allocated. Free tensors (del, then gc) or lower "
                       "the batch size.");
    }
    stats.bytes.increase(nbytes);
    stats.allocations.increase(1);
    total = stats.bytes.current;
  }
  auto block = std::make_shared<StorageContext>(device, static_cast<int64_t>(nbytes));
  size_t span = 0;
  void* address = address_space(device).take(nbytes, &span);
  if (recording_memory_history()) note_allocation(device, address, static_cast<int64_t>(nbytes));
  report_to_profiler(address, static_cast<int64_t>(nbytes), total, device);
  StorageContext* context = block.get();
  context->storage = exec::StoragePtr(block, &block->value);
  context->address = address;
  context->span = span;
  return c10::DataPtr(address, context, &delete_storage,
                      c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
}

c10::Allocator* allocator() {
  static TpuAllocator instance;
  return &instance;
}

// torch.UntypedStorage(n, device="tpu") and the accelerator memory API find us here.
static bool g_registered = [] {
  c10::SetAllocator(c10::DeviceType::PrivateUse1, allocator());
  return true;
}();

exec::StoragePtr storage_of(const c10::Storage& storage) {
  const c10::DataPtr& data = storage.data_ptr();
  TORCH_CHECK(data.get_deleter() == &delete_storage,
              "tpu: this tensor's storage was not allocated by the tpu allocator (a DLPack import or a "
              "from_blob pointer); the tpu device can only use tensors it made itself");
  return static_cast<StorageContext*>(data.get_context())->storage;
}

void check_device_exists(int device) {
  // Raises the missing-plugin message on first use instead of an obscure failure later.
  int count = runtime::Client::get().device_count();
  TORCH_CHECK(device >= 0 && device < count, "tpu:", device, " does not exist: ", count,
              " tpu device(s) available");
}

at::Tensor fresh_result(at::IntArrayRef sizes, std::optional<at::IntArrayRef> strides, at::ScalarType dtype,
                        int device) {
  to_dtype(dtype);  // raises for a dtype the device does not have
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  if (strides) return at::detail::empty_strided_generic(sizes, *strides, allocator(), keys, dtype);
  return at::detail::empty_generic(sizes, allocator(), keys, dtype, std::nullopt);
}

int device_of_address(const void* address) {
  auto at = reinterpret_cast<uintptr_t>(address);
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  for (const Range& range : g_ranges) {
    if (at >= range.begin && at < range.end) return range.device;
  }
  return -1;
}

MemoryStats memory_stats(int device) {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  return g_stats[device];
}

void reset_peak_memory(int device) {
  runtime::reset_device_memory_peak(device);
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_stats[device].bytes.reset_peak();
  g_stats[device].allocations.reset_peak();
}

void reset_accumulated_memory(int device) {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_stats[device].bytes.reset_accumulated();
  g_stats[device].allocations.reset_accumulated();
  g_stats[device].num_ooms = 0;
}

void set_memory_limit(int device, int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_stats[device].limit = bytes;
}

}  // namespace tpu::aten
