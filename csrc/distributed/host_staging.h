// Staging tpu tensors through host memory for the host transport (aten tensors in, aten tensors
// out), for process groups whose collectives are not one replicated XLA program.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Storage.h>

#include <chrono>
#include <vector>

namespace tpu::distributed {

// Host buffers reused by successive blocking operations, one per staged tensor of an operation.
// Small tensors are not pooled: their allocation is cheap and pooling them would pin memory for
// nothing.
// Where a blocking operation's time went: running the graph the collective waited for, copying to
// the host, the transport, copying back. Accumulated over the operations that held the buffers.
struct StagingStats {
  int64_t operations = 0;
  int64_t bytes_to_host = 0;
  int64_t bytes_to_device = 0;
  double flush_seconds = 0;
  double to_host_seconds = 0;
  double to_device_seconds = 0;
  double total_seconds = 0;  // the transport's share is what the other three leave
};

class HostStaging {
 public:
  void begin() { next_ = 0; }
  at::Tensor buffer(const at::Tensor& like);
  StagingStats stats;

 private:
  static constexpr int64_t kMinBytes = 64 * 1024;
  static constexpr size_t kMaxSlots = 16;
  std::vector<c10::Storage> slots_;
  size_t next_ = 0;
};

// The staging buffers of the blocking operation this thread is running, when it holds them.
HostStaging*& thread_staging();

bool on_tpu(const at::Tensor& t);
double seconds_since(std::chrono::steady_clock::time_point start);

// Device -> host through the ordinary copy path, which waits for the value (and in
// defer-and-fuse runs the graph that produces it). CPU tensors are used as they are.
at::Tensor stage_in(const at::Tensor& t);
std::vector<at::Tensor> stage_in(const std::vector<at::Tensor>& ts);
std::vector<std::vector<at::Tensor>> stage_in(const std::vector<std::vector<at::Tensor>>& ts);
// A host buffer the transport writes; nothing is read from the device.
at::Tensor stage_out(const at::Tensor& t);
std::vector<at::Tensor> stage_out(const std::vector<at::Tensor>& ts);
std::vector<std::vector<at::Tensor>> stage_out(const std::vector<std::vector<at::Tensor>>& ts);
// Host -> device in place, so every view and alias of the destination sees the result.
void copy_back(const std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& host);
void copy_back(const std::vector<std::vector<at::Tensor>>& dst, const std::vector<std::vector<at::Tensor>>& host);

// Gloo takes all_gather_into_tensor's output and reduce_scatter_tensor's input only in the
// concatenated form ([world * n, ...]); NCCL also takes the stacked one ([world, *shape]) that
// DTensor and FSDP2 pass. In row-major order both are the same bytes, so Gloo gets flat views.
at::Tensor flat_view(const at::Tensor& t);

}  // namespace tpu::distributed
