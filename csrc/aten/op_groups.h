// Runs the ATen ops a kernel issues (a foreach op's per-tensor loop, an optimizer's update) as one
// program in strict mode: they are recorded as in defer-and-fuse and flushed together when the
// kernel returns. Other modes run them as they would anyway (debug: one program per op, to name a
// failing one; defer-and-fuse: recorded into the pending graph).
#pragma once

#include "exec/executor.h"

namespace tpu::aten {

template <typename Fn>
void as_one_program(const char* reason, Fn&& fn) {
  if (exec::current_mode() != exec::Mode::Strict) {
    fn();
    return;
  }
  int strict = exec::swap_thread_mode(static_cast<int>(exec::Mode::Fused));
  try {
    fn();
  } catch (...) {
    // What was recorded before the error still runs, as it would have op by op.
    exec::swap_thread_mode(strict);
    exec::flush(reason);
    throw;
  }
  exec::swap_thread_mode(strict);
  exec::flush(reason);
}

}  // namespace tpu::aten
