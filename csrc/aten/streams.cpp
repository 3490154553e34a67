#include "aten/streams.h"

#include <atomic>
#include <map>

#include "exec/executor.h"

namespace tpu::aten {

namespace {

std::atomic<c10::StreamId> g_next_stream_id{1};
thread_local std::map<c10::DeviceIndex, c10::StreamId> t_current_streams;

}  // namespace

c10::Stream current_stream(c10::Device device) {
  auto it = t_current_streams.find(device.index());
  if (it == t_current_streams.end() || it->second == 0) return c10::Stream(c10::Stream::DEFAULT, device);
  return c10::Stream(c10::Stream::UNSAFE, device, it->second);
}

c10::Stream default_stream(c10::Device device) { return c10::Stream(c10::Stream::DEFAULT, device); }

c10::Stream new_stream(c10::Device device) { return c10::Stream(c10::Stream::UNSAFE, device, g_next_stream_id++); }

c10::Stream exchange_stream(c10::Stream stream) {
  c10::Stream previous = current_stream(stream.device());
  t_current_streams[stream.device_index()] = stream.id();
  return previous;
}

// One queue per device: a stream is done when its device is.
void synchronize_stream(const c10::Stream& stream) { exec::synchronize(stream.device_index()); }
bool query_stream(const c10::Stream& stream) { return exec::idle(stream.device_index()); }

}  // namespace tpu::aten
