// The "tpu_dist" c10d backend.
//
// Where one PJRT client drives every rank's device (the ranks are threads of one process), the
// collectives XLA has (all_reduce, broadcast, all_gather, reduce_scatter, even all_to_all) run as
// one replicated XLA program over the ranks' devices, met at a ReplicaRendezvous; the other
// operations, and every operation where the client does not span the devices, take the host path.
//
// Where one PJRT client does not span the participating devices (separate processes on the CPU
// plugin), tpu tensors are staged through host memory and moved by a Gloo backend held inside this
// one: device -> host through the ordinary copy path (a sync point of the executor), the Gloo
// collective on the host copies, host -> device in place, so views and aliases of the results see
// them. CPU tensors handed to the same process group go to Gloo directly.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/host_staging.h"
#include "distributed/replica_rendezvous.h"

namespace tpu::distributed {

// A collective's Work. Collectives finish before they return (the host copies are what Gloo
// moves, so nothing could overlap with them anyway); point-to-point operations stay pending until
// wait(), because a blocking send would deadlock a pair of ranks that both send first.
// The message of an exception in flight (std::current_exception()), for errors that must cross
// threads or ranks as text.
std::string describe_error(std::exception_ptr e);

class TpuWork : public c10d::Work {
 public:
  TpuWork(int rank, c10d::OpType type, std::string name, std::vector<at::Tensor> outputs,
          c10::intrusive_ptr<c10d::Work> inner, std::function<void()> finish,
          std::chrono::milliseconds timeout);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Waits for the transport and copies results back; throws c10::DistBackendError naming the
  // operation when the transport failed or timed out.
  void complete(std::chrono::milliseconds timeout = kNoTimeout);

 private:
  std::string name_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10d::Work> inner_;
  std::function<void()> finish_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  bool done_ = false;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupTPU : public c10d::Backend {
 public:
  // `replicas`: the rendezvous of the group's ranks when this process drives all their devices
  // through one client, else null.
  ProcessGroupTPU(c10::intrusive_ptr<c10d::Backend> transport, int rank, int size,
                  std::chrono::milliseconds timeout, std::shared_ptr<ReplicaRendezvous> replicas = nullptr);

  const std::string getBackendName() const override { return "tpu_dist"; }
  c10::intrusive_ptr<c10d::Backend> transport() const { return transport_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // What the debug mode's check compares across ranks besides the collective's name.
  struct Agreement {
    int64_t numel;  // -1 where ranks may pass different sizes (uneven all_to_all splits)
    int64_t dtype;
    int64_t root;
  };

  // Collectives run so far (the debug mode's agreement check numbers them).
  int64_t collectives() const { return sequence_; }
  // Collectives this rank ran as replicated XLA programs.
  int64_t replicated_collectives() const { return replicated_; }
  bool spans_devices() const { return replicas_ != nullptr; }
  StagingStats staging_stats();
  void reset_staging_stats();

 private:
  // Runs one operation: the executor's pending work is flushed (a collective is a sync point);
  // for a collective (`agreement` set) in debug mode the ranks first check that they all called
  // the same one; then `launch` starts the transport on host copies, and `finish` copies results
  // back. `blocking` completes it before returning.
  c10::intrusive_ptr<c10d::Work> run(const char* name, c10d::OpType type,
                                     const Agreement* agreement,
                                     const std::vector<at::Tensor>& involved,
                                     std::vector<at::Tensor> outputs,
                                     const std::function<c10::intrusive_ptr<c10d::Work>()>& launch,
                                     std::function<void()> finish, bool blocking = true);
  // The host path of an operation with one output and one input tensor, which Gloo takes flat.
  using FlatTransport = std::function<c10::intrusive_ptr<c10d::Work>(at::Tensor& output, at::Tensor& input)>;
  c10::intrusive_ptr<c10d::Work> run_flat(const char* name, c10d::OpType type, const Agreement& agreement,
                                          at::Tensor& output, at::Tensor& input, const FlatTransport& transport);
  void check_agreement(const char* name, const Agreement& agreement);
  // Runs the collective as a replicated XLA program when the ranks' devices allow it and writes
  // this rank's result, in order, into `outputs`; returns null (having changed nothing) where the
  // host path must serve it instead. The caller checks that the outputs hold the result exactly.
  c10::intrusive_ptr<c10d::Work> run_replicated(const char* name, c10d::OpType type, CollectiveSpec spec,
                                                const at::Tensor& input, const std::vector<at::Tensor>& outputs);

  c10::intrusive_ptr<c10d::Backend> transport_;
  std::chrono::milliseconds timeout_;
  std::mutex staging_mutex_;
  HostStaging staging_;
  int64_t sequence_ = 0;
  std::shared_ptr<ReplicaRendezvous> replicas_;
  int64_t replica_sequence_ = 0;
  int64_t replicated_ = 0;
};

}  // namespace tpu::distributed
