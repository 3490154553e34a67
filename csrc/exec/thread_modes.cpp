// Which flush policy a thread's ops follow: its own mode, else (on the autograd engine's threads
// and inside a backward pass) the mode of the thread that called backward(), else the default.
#include <atomic>
#include <optional>

#include "exec/executor_internal.h"

namespace tpu::exec {

namespace {

std::atomic<Mode> g_default_mode{Mode::Strict};
thread_local std::optional<Mode> t_mode;
std::atomic<BackwardContextProvider> g_backward_context{nullptr};

}  // namespace

const BackwardContext* inherited_context() {
  BackwardContextProvider provider = g_backward_context.load();
  return provider ? provider() : nullptr;
}

Mode current_mode() {
  if (t_mode) return *t_mode;  // a mode the thread chose, even inside a backward pass
  if (const BackwardContext* context = inherited_context()) return context->mode;
  return g_default_mode.load();
}
void set_mode(Mode mode) { t_mode = mode; }
void set_default_mode(Mode mode) { g_default_mode = mode; }
int swap_thread_mode(int mode) {
  int previous = t_mode ? static_cast<int>(*t_mode) : -1;
  if (mode < 0) {
    t_mode.reset();
  } else {
    t_mode = static_cast<Mode>(mode);
  }
  return previous;
}

BackwardContext backward_context() { return {current_mode(), current_lane()}; }
void set_backward_context_provider(BackwardContextProvider provider) { g_backward_context = provider; }

}  // namespace tpu::exec
