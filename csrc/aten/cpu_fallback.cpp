#include "aten/op_adapters.h"
#include "aten/cpu_fallback.h"

#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>

#include "exec/executor.h"

namespace tpu::aten {

namespace {

std::mutex g_fallback_mutex;
std::map<std::string, int64_t> g_fallback_counts;
std::set<std::string> g_warned;
std::atomic<bool> g_warn_on_fallback{true};

FallbackPolicy initial_policy() {
  const char* env = std::getenv("TORCH_TPU_FALLBACK");
  return env && std::string(env) == "error" ? FallbackPolicy::Error : FallbackPolicy::Allow;
}
std::atomic<FallbackPolicy> g_policy{initial_policy()};

}  // namespace

std::string display_name(const c10::FunctionSchema& schema) {
  return schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
}

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = display_name(op.schema());
  TORCH_CHECK_NOT_IMPLEMENTED(g_policy != FallbackPolicy::Error, "tpu: ", name,
                              " has no tpu lowering, and TORCH_TPU_FALLBACK=error forbids running it "
                              "on the CPU");
  bool warn = false;
  {
    std::lock_guard<std::mutex> lock(g_fallback_mutex);
    ++g_fallback_counts[name];
    warn = g_warn_on_fallback && g_warned.insert(name).second;
  }
  if (warn) {
    TORCH_WARN("tpu: ", name, " is not lowered for the tpu device yet; it runs on the CPU (copying its "
               "tensors each way). torch_tpu.fallback_counts() counts these; "
               "torch_tpu.set_fallback_warnings(False) silences this warning.");
  }
  exec::flush("fallback op");
  // An op whose CPU kernel is not what CPU runs (convolution_overrideable only raises) names the op
  // that is, with the same arguments.
  const OpAdapter* adapter = adapter_for(op.schema());
  if (adapter && !adapter->cpu_op.empty()) {
    c10::OperatorHandle substitute = c10::Dispatcher::singleton().findSchemaOrThrow(adapter->cpu_op.c_str(), "");
    at::native::cpu_fallback(substitute, stack, /*error_on_views=*/true);
    return;
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

void set_fallback_policy(FallbackPolicy policy) { g_policy = policy; }
FallbackPolicy fallback_policy() { return g_policy; }
void set_fallback_warnings(bool enabled) { g_warn_on_fallback = enabled; }

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  return g_fallback_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  g_fallback_counts.clear();
  g_warned.clear();
}

}  // namespace tpu::aten
