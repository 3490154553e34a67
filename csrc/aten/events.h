// Events (c10::Event for PrivateUse1): a recorded event is a marker of everything issued to its
// device before it (exec::Marker), which can be waited for and timed.
#pragma once

#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace tpu::aten {

// `*event` is null until the first record; a record replaces the marker it held.
void record_event(void** event, const c10::Stream& stream, c10::EventFlag flag);
bool query_event(void* event);
void synchronize_event(void* event);
void destroy_event(void* event) noexcept;
double elapsed_ms(void* start, void* end);

}  // namespace tpu::aten
