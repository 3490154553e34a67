#include "exec/device_queue.h"

#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <thread>

#include "exec/executor.h"
#include "runtime/runtime.h"

namespace tpu::exec {

namespace {
std::mutex g_queue_mutex;
std::map<int, std::deque<CompletionPtr>> g_queues;
}  // namespace

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Completion::~Completion() {
  try {
    runtime::Client::get().release(event_);
  } catch (...) {
  }
}

bool Completion::ready() {
  if (finished_ns_.load() >= 0) return true;
  return runtime::Client::get().ready(event_);
}

void Completion::wait() { runtime::Client::get().await(event_); }

void Completion::on_finished(PJRT_Error* error, void* self) {
  auto* keep = static_cast<CompletionPtr*>(self);
  (*keep)->finished_ns_ = steady_now_ns();
  runtime::Client::get().discard(error);  // the error reaches whoever waits on the event
  delete keep;
}

void Completion::watch() {
  std::call_once(watching_, [this] {
    // The callback holds a reference, so the event outlives it even if the queue drops it.
    runtime::Client::get().on_ready(event_, &Completion::on_finished, new CompletionPtr(shared_from_this()));
  });
}

Marker::Marker(std::vector<CompletionPtr> work, bool timing) : work_(std::move(work)), made_ns_(steady_now_ns()) {
  if (timing) {
    for (auto& completion : work_) completion->watch();
  }
}

bool Marker::ready() {
  for (auto& completion : work_) {
    if (!completion->ready()) return false;
  }
  return true;
}

void Marker::wait() {
  for (auto& completion : work_) completion->wait();
}

int64_t Completion::seen_finished_ns() const {
  int64_t finished = finished_ns();
  while (finished < 0) {
    std::this_thread::yield();
    finished = finished_ns();
  }
  return finished;
}

double Marker::finished_ms() const {
  int64_t latest = made_ns_;
  for (const auto& completion : work_) latest = std::max(latest, completion->seen_finished_ns());
  return static_cast<double>(latest) / 1e6;
}

CompletionPtr track(int device, PJRT_Event* event) {
  if (!event) return nullptr;
  auto completion = std::make_shared<Completion>(event);
  std::lock_guard<std::mutex> lock(g_queue_mutex);
  auto& queue = g_queues[device];
  queue.push_back(completion);
  if (queue.size() > 64) {
    // Finished programs leave the queue; an error they carry resurfaces when the buffers they
    // produced are read.
    while (!queue.empty() && queue.front()->ready()) queue.pop_front();
  }
  return completion;
}

void wait_for_device(int device) {
  std::vector<CompletionPtr> work;
  {
    std::lock_guard<std::mutex> lock(g_queue_mutex);
    for (auto& [d, queue] : g_queues) {
      if (device >= 0 && d != device) continue;
      work.insert(work.end(), queue.begin(), queue.end());
      queue.clear();
    }
  }
  std::string first_error;
  for (auto& completion : work) {
    try {
      completion->wait();
    } catch (const runtime::PjrtError& error) {
      if (first_error.empty()) first_error = error.what();
    }
  }
  if (!first_error.empty()) throw OpError("a program failed on the device: " + first_error);
}

bool device_idle(int device) {
  std::lock_guard<std::mutex> lock(g_queue_mutex);
  for (auto& completion : g_queues[device]) {
    if (!completion->ready()) return false;
  }
  return true;
}

namespace {
// The programs launched on `device` and not yet known to have finished, outside the lock.
std::vector<CompletionPtr> launched_on(int device) {
  std::lock_guard<std::mutex> lock(g_queue_mutex);
  auto& queue = g_queues[device];
  return {queue.begin(), queue.end()};
}
}  // namespace

void settle_device(int device) {
  for (auto& completion : launched_on(device)) {
    if (completion->ready()) continue;
    try {
      completion->wait();
    } catch (const runtime::PjrtError&) {
      // Reported by synchronize() or by reading what the failed program wrote.
    }
  }
}

MarkerPtr mark(int device, bool timing) { return std::make_shared<Marker>(launched_on(device), timing); }

}  // namespace tpu::exec
