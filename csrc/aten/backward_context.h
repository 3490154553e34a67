// Carries the executor's BackwardContext (the eager mode and pending graph of the thread that
// calls backward()) to the autograd engine's threads, which run the backward ops on the device.
#pragma once

namespace tpu::aten {

// Around the engine's run of a backward pass, on the calling thread: PyTorch copies the calling
// thread's debug info into each engine thread while it works for this pass.
void enter_backward();
void exit_backward();

}  // namespace tpu::aten
