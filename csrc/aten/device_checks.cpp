#include "aten/device_checks.h"

#include <ATen/ops/any.h>
#include <ATen/ops/cat.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <vector>

#include "aten/op_adapters.h"
#include "aten/tpu_tensor.h"

namespace tpu::aten {

namespace {

// Error flags of checked lowerings (lowering::Entry::checked) not yet read: the device found an
// index out of range, which CPU would have raised at the op. Debug mode reads each at its op;
// strict and defer-and-fuse read them all at the next host read or synchronize.
struct PendingCheck {
  at::Tensor flag;
  std::string op;
  std::string message;  // a RuntimeError's; empty: the index error of raise_index_error
};
std::mutex g_checks_mutex;
std::vector<PendingCheck> g_checks;

// What CPU raises for an out-of-range index of `op` (the first line of CPU's message, then ours).
[[noreturn]] void raise_index_error(const std::string& op) {
  const OpAdapter* adapter = adapter_for(op.substr(0, op.find('.')));
  IndexError kind = adapter ? adapter->index_error : IndexError::IndexError;
  TORCH_CHECK_INDEX(kind != IndexError::TargetOutOfBounds,
                    "Target is out of bounds: a target is neither a class index in [0, classes) nor "
                    "ignore_index (found by the tpu device when ", op, " ran)");
  std::string message = op + ": index out of range in self (an index lies outside the dimension it "
                        "indexes; found by the tpu device when the op ran)";
  TORCH_CHECK(kind != IndexError::RuntimeError, message);
  TORCH_CHECK_INDEX(false, message);
}

}  // namespace

void note_device_check(const at::Tensor& flag, const std::string& op, const std::string& message) {
  size_t pending;
  {
    std::lock_guard<std::mutex> lock(g_checks_mutex);
    g_checks.push_back({flag, op, message});
    pending = g_checks.size();
  }
  // Each pending flag keeps a one-byte device buffer alive; a program that never syncs is read
  // now and then.
  if (exec::current_mode() == exec::Mode::Debug || pending >= 4096) raise_device_errors();
}

std::unordered_map<const exec::Storage*, std::string> pending_device_checks() {
  std::unordered_map<const exec::Storage*, std::string> ops;
  std::lock_guard<std::mutex> lock(g_checks_mutex);
  for (const auto& check : g_checks) ops.emplace(storage_of(check.flag).get(), check.op);
  return ops;
}

void raise_device_errors() {
  std::vector<PendingCheck> checks;
  {
    std::lock_guard<std::mutex> lock(g_checks_mutex);
    checks.swap(g_checks);
  }
  if (checks.empty()) return;
  // One read for all flags; only a failure reads them one by one, to name the op.
  bool any = false;
  if (checks.size() == 1) {
    any = checks[0].flag.item<bool>();
  } else {
    std::vector<at::Tensor> flags;
    flags.reserve(checks.size());
    for (const auto& check : checks) flags.push_back(check.flag.reshape({1}));
    any = at::cat(flags).any().item<bool>();
  }
  if (!any) return;
  for (const auto& check : checks) {
    if (!check.flag.item<bool>()) continue;
    TORCH_CHECK(check.message.empty(), check.message);
    raise_index_error(check.op);
  }
}

namespace {

// Runs before any tpu op can: synchronize() raises what the device flagged.
const bool g_sync_hook_installed = [] {
  exec::set_sync_hook(&raise_device_errors);
  return true;
}();

}  // namespace

}  // namespace tpu::aten
