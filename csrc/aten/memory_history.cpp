#include "aten/memory_history.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>

namespace tpu::aten {
namespace {

std::atomic<bool> g_recording{false};
std::mutex g_mutex;
size_t g_max_entries = 0;
std::deque<MemoryEvent> g_events;
std::map<uintptr_t, LiveAllocation> g_live;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void note(bool allocation, int device, const void* address, int64_t size) {
  // Gathered outside the lock: it takes the GIL.
  auto stack = torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
  auto at = reinterpret_cast<uintptr_t>(address);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_recording.load()) return;
  if (allocation) {
    g_live[at] = {device, size, stack};
  } else {
    g_live.erase(at);
  }
  g_events.push_back({allocation, device, at, size, now_us(), std::move(stack)});
  while (g_events.size() > g_max_entries) g_events.pop_front();
}

}  // namespace

void record_memory_history(bool enabled, size_t max_entries) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_max_entries = max_entries;
  if (!enabled) {
    g_events.clear();
    g_live.clear();
  }
  g_recording = enabled;
}

bool recording_memory_history() { return g_recording.load(std::memory_order_relaxed); }

void note_allocation(int device, const void* address, int64_t size) { note(true, device, address, size); }
void note_free(int device, const void* address, int64_t size) { note(false, device, address, size); }

MemoryHistory memory_history() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return {std::vector<MemoryEvent>(g_events.begin(), g_events.end()), g_live};
}

}  // namespace tpu::aten
