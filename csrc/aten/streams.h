// Streams (c10::Stream for PrivateUse1). Every stream of a device feeds the same PJRT queue, where
// programs run in the order their data dependencies dictate, so work ordered by events across
// streams stays ordered. Stream objects still carry their identity, so that user code that
// juggles them (torch.tpu.Stream, torch.Stream, with-stream blocks) works unchanged.
#pragma once

#include <c10/core/Stream.h>

namespace tpu::aten {

c10::Stream current_stream(c10::Device device);  // the calling thread's, per device
c10::Stream default_stream(c10::Device device);
c10::Stream new_stream(c10::Device device);
c10::Stream exchange_stream(c10::Stream stream);  // makes it current; returns the previous one
void synchronize_stream(const c10::Stream& stream);
bool query_stream(const c10::Stream& stream);  // nothing pending or running

}  // namespace tpu::aten
