#include "aten/events.h"

#include <c10/util/Exception.h>

#include "exec/device_queue.h"
#include "exec/executor.h"

namespace tpu::aten {

namespace {

exec::MarkerPtr& marker(void* event) { return *static_cast<exec::MarkerPtr*>(event); }

}  // namespace

void record_event(void** event, const c10::Stream& stream, c10::EventFlag flag) {
  auto recorded = exec::record_marker(stream.device_index(), flag == c10::EventFlag::BACKEND_DEFAULT);
  if (*event) delete static_cast<exec::MarkerPtr*>(*event);
  *event = new exec::MarkerPtr(std::move(recorded));
}

bool query_event(void* event) { return !event || marker(event)->ready(); }

void synchronize_event(void* event) {
  if (event) marker(event)->wait();
}

void destroy_event(void* event) noexcept { delete static_cast<exec::MarkerPtr*>(event); }

double elapsed_ms(void* start, void* end) {
  TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
  marker(start)->wait();
  marker(end)->wait();
  return marker(end)->finished_ms() - marker(start)->finished_ms();
}

}  // namespace tpu::aten
