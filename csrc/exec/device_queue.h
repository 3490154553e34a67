// What has been launched on each device and not yet seen to finish: synchronize() waits for it,
// and events (torch.tpu.Event, torch.Event) are markers in it.
//
// PJRT gives one completion event per launched program; programs on a device run in the order
// their data dependencies allow, so "everything launched before" is the set of events still
// pending at the time a marker is made.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

struct PJRT_Event;
struct PJRT_Error;

namespace tpu::exec {

// One launched program's completion, shared by the device queue and the markers that wait on it.
class Completion : public std::enable_shared_from_this<Completion> {
 public:
  explicit Completion(PJRT_Event* event) : event_(event) {}
  ~Completion();
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  bool ready();
  void wait();  // throws the program's error
  // Asks to be told the host time at which the program finishes (for elapsed_time).
  void watch();
  int64_t finished_ns() const { return finished_ns_.load(); }  // -1 until seen
  // finished_ns() of a watched program known to be done: its ready callback may still be on its
  // way once wait() has returned, so this waits for it briefly.
  int64_t seen_finished_ns() const;

 private:
  static void on_finished(PJRT_Error* error, void* self);
  PJRT_Event* event_;
  std::atomic<int64_t> finished_ns_{-1};
  std::once_flag watching_;
};
using CompletionPtr = std::shared_ptr<Completion>;

// Everything launched on a device up to the moment it was made.
class Marker {
 public:
  Marker(std::vector<CompletionPtr> work, bool timing);
  bool ready();
  void wait();
  // Host time, in ms, at which the marked work was seen finished; needs wait() first.
  double finished_ms() const;

 private:
  std::vector<CompletionPtr> work_;
  int64_t made_ns_;
};
using MarkerPtr = std::shared_ptr<Marker>;

int64_t steady_now_ns();

// Queues a launched program's completion event (null: nothing to track) and returns it.
CompletionPtr track(int device, PJRT_Event* event);
// Waits for everything launched on `device` (-1: every device); throws the first error.
void wait_for_device(int device);
bool device_idle(int device);
// Waits, without raising, until the programs launched on `device` so far have finished. A host
// read calls it: on CUDA a read waits for all earlier work on its stream (so events recorded
// before it report done), and every stream of ours feeds one queue. A program's outputs can be
// ready a moment before its completion event; errors surface where they always do.
void settle_device(int device);
// A marker of the work launched on `device` so far (the caller flushes pending graphs first).
MarkerPtr mark(int device, bool timing);

}  // namespace tpu::exec
