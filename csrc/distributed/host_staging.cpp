// How tpu tensors reach the host transport (Gloo) and come back, when one process drives one
// device: staged through host buffers that blocking operations reuse (HostStaging), with the time
// and bytes of each direction counted.
#include "distributed/host_staging.h"

#include <ATen/ATen.h>

namespace tpu::distributed {

HostStaging*& thread_staging() {
  thread_local HostStaging* staging = nullptr;
  return staging;
}

at::Tensor HostStaging::buffer(const at::Tensor& like) {
  auto options = like.options().device(at::kCPU);
  size_t slot = next_++;
  int64_t nbytes = like.numel() * static_cast<int64_t>(like.element_size());
  if (nbytes < kMinBytes || slot >= kMaxSlots) return at::empty(like.sizes(), options);
  if (slots_.size() <= slot) slots_.resize(slot + 1);
  c10::Storage& storage = slots_[slot];
  // A storage someone else still holds (a result handed out, a transport that kept it) is left to
  // them, and this slot gets a new one.
  if (!storage || static_cast<int64_t>(storage.nbytes()) < nbytes || storage.use_count() > 1) {
    storage = at::empty({nbytes}, options.dtype(at::kByte)).storage();
  }
  return at::empty({0}, options).set_(storage, 0, like.sizes());
}

bool on_tpu(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

namespace {

at::Tensor host_buffer(const at::Tensor& like) {
  if (thread_staging()) return thread_staging()->buffer(like);
  return at::empty(like.sizes(), like.options().device(at::kCPU));
}

}  // namespace

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

at::Tensor stage_in(const at::Tensor& t) {
  if (!on_tpu(t)) return t;
  at::Tensor host = host_buffer(t);
  auto start = std::chrono::steady_clock::now();
  host.copy_(t);
  if (thread_staging()) {
    thread_staging()->stats.to_host_seconds += seconds_since(start);
    thread_staging()->stats.bytes_to_host += host.nbytes();
  }
  return host;
}

at::Tensor stage_out(const at::Tensor& t) { return on_tpu(t) ? host_buffer(t) : t; }

at::Tensor flat_view(const at::Tensor& t) { return t.is_contiguous() ? t.view({-1}) : t; }

std::vector<at::Tensor> stage_in(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(stage_in(t));
  return out;
}

std::vector<at::Tensor> stage_out(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(stage_out(t));
  return out;
}

std::vector<std::vector<at::Tensor>> stage_out(const std::vector<std::vector<at::Tensor>>& ts) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(stage_out(t));
  return out;
}

std::vector<std::vector<at::Tensor>> stage_in(const std::vector<std::vector<at::Tensor>>& ts) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(stage_in(t));
  return out;
}

void copy_back(const std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& host) {
  for (size_t i = 0; i < dst.size(); ++i) {
    if (on_tpu(dst[i])) {
      at::Tensor d = dst[i];
      auto start = std::chrono::steady_clock::now();
      d.copy_(host[i]);
      if (thread_staging()) {
        thread_staging()->stats.to_device_seconds += seconds_since(start);
        thread_staging()->stats.bytes_to_device += host[i].nbytes();
      }
    }
  }
}

void copy_back(const std::vector<std::vector<at::Tensor>>& dst,
               const std::vector<std::vector<at::Tensor>>& host) {
  for (size_t i = 0; i < dst.size(); ++i) copy_back(dst[i], host[i]);
}

}  // namespace tpu::distributed
