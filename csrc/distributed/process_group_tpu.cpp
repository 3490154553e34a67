#include "distributed/process_group_tpu.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <thread>

#include "aten/tpu_tensor.h"
#include "distributed/host_staging.h"
#include "exec/executor.h"

namespace tpu::distributed {

namespace {

std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& ts) {
  std::vector<at::Tensor> out;
  for (const auto& v : ts) out.insert(out.end(), v.begin(), v.end());
  return out;
}

std::vector<at::Tensor> join(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The debug mode's agreement check sends a collective's name as an index into this table.
const char* const kCollectiveNames[] = {
    "broadcast",       "all_reduce",     "all_reduce_coalesced",   "reduce",
    "all_gather",      "all_gather_into_tensor", "all_gather_coalesced",
    "all_gather_into_tensor_coalesced", "gather", "scatter", "reduce_scatter",
    "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced", "all_to_all_single",
    "all_to_all",      "barrier"};
constexpr int64_t kCollectiveCount = sizeof(kCollectiveNames) / sizeof(kCollectiveNames[0]);

int64_t collective_code(const char* name) {
  for (int64_t i = 0; i < kCollectiveCount; ++i) {
    if (std::string(kCollectiveNames[i]) == name) return i;
  }
  return -1;
}

std::string describe_call(const int64_t* f) {
  std::ostringstream s;
  s << (f[0] >= 0 && f[0] < kCollectiveCount ? kCollectiveNames[f[0]] : "an unknown collective");
  if (f[1] >= 0) s << " of " << f[1] << " elements";
  if (f[2] >= 0) s << " of " << c10::toString(static_cast<c10::ScalarType>(f[2]));
  if (f[3] >= 0) s << " with root " << f[3];
  return s.str();
}

}  // namespace

ProcessGroupTPU::ProcessGroupTPU(c10::intrusive_ptr<c10d::Backend> transport, int rank, int size,
                                 std::chrono::milliseconds timeout, std::shared_ptr<ReplicaRendezvous> replicas)
    : c10d::Backend(rank, size), transport_(std::move(transport)), timeout_(timeout), replicas_(std::move(replicas)) {
  TORCH_CHECK(transport_, "tpu_dist needs a transport backend");
}

namespace {

// Writes elements [offset, offset + dst.numel()) of a replicated program's 1-D result into `dst`.
void install(const at::Tensor& dst, const runtime::BufferPtr& flat, int64_t offset = 0) {
  exec::install(aten::view_of(dst), flat, offset);
}

// The reductions XLA's collectives take; the bitwise ones and PREMUL_SUM take the host path.
std::optional<Reduction> reduction_of(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return Reduction::Sum;
    case c10d::ReduceOp::AVG:
      return Reduction::Average;
    case c10d::ReduceOp::PRODUCT:
      return Reduction::Product;
    case c10d::ReduceOp::MIN:
      return Reduction::Min;
    case c10d::ReduceOp::MAX:
      return Reduction::Max;
    default:
      return std::nullopt;
  }
}

CollectiveSpec spec_of(CollectiveKind kind, Reduction reduction = Reduction::Sum, int64_t root = 0) {
  CollectiveSpec spec;
  spec.kind = kind;
  spec.reduction = reduction;
  spec.root = root;
  return spec;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::run_replicated(const char* name, c10d::OpType type,
                                                               CollectiveSpec spec, const at::Tensor& input,
                                                               const std::vector<at::Tensor>& outputs) {
  if (!replicas_ || !on_tpu(input) || input.numel() == 0) return nullptr;
  for (const auto& output : outputs) {
    if (!on_tpu(output) || output.device() != input.device() || output.scalar_type() != input.scalar_type()) {
      return nullptr;
    }
  }
  exec::flush("collective");
  exec::TensorView view = aten::view_of(input);
  runtime::BufferPtr operand = exec::dense_buffer(view);
  spec.input = operand->type();
  spec.replicas = size_;
  runtime::BufferPtr result;
  try {
    result = replicas_->run(rank_, ++replica_sequence_, spec, operand, view.storage->device, timeout_);
  } catch (const RendezvousTimeout& e) {
    C10_THROW_ERROR(DistBackendError, c10::str("tpu_dist: ", name, " timed out on rank ", rank_,
                                               " (process group timeout ", timeout_.count(), " ms): ", e.what()));
  } catch (const RendezvousMismatch& e) {
    C10_THROW_ERROR(DistBackendError, c10::str("tpu_dist: ranks called different collectives: ", e.what()));
  } catch (const std::exception& e) {
    C10_THROW_ERROR(DistBackendError, c10::str("tpu_dist: ", name, " failed on rank ", rank_, ": ", e.what()));
  }
  if (!result) return nullptr;
  ++sequence_;
  int64_t offset = 0;
  for (const auto& output : outputs) {
    install(output, result, offset);
    offset += output.numel();
  }
  ++replicated_;
  auto work = c10::make_intrusive<TpuWork>(rank_, type, name, outputs, nullptr, nullptr, timeout_);
  work->complete();
  return work;
}

void ProcessGroupTPU::check_agreement(const char* name, const Agreement& a) {
  at::Tensor mine = at::empty({4}, at::kLong);
  int64_t* f = mine.data_ptr<int64_t>();
  f[0] = collective_code(name);
  f[1] = a.numel;
  f[2] = a.dtype;
  f[3] = a.root;
  std::vector<std::vector<at::Tensor>> all(1);
  for (int i = 0; i < size_; ++i) all[0].push_back(at::empty({4}, at::kLong));
  std::vector<at::Tensor> in{mine};
  try {
    transport_->allgather(all, in)->wait();
  } catch (...) {
    std::string reason = describe_error(std::current_exception());
    C10_THROW_ERROR(DistBackendError,
                    c10::str("tpu_dist: ", name, " failed on rank ", rank_, " while the ranks ",
                             "compared their calls (process group timeout ",
                             timeout_.count(), " ms): ", reason));
  }
  bool same = true;
  for (int i = 0; i < size_; ++i) same = same && at::equal(all[0][i], mine);
  if (same) return;
  std::ostringstream s;
  s << "tpu_dist: the ranks called different collectives at collective #" << sequence_ << ":";
  for (int i = 0; i < size_; ++i) {
    s << (i ? "," : "") << " rank " << i << " called " << describe_call(all[0][i].data_ptr<int64_t>());
  }
  C10_THROW_ERROR(DistBackendError, s.str());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::run(
    const char* name, c10d::OpType type, const Agreement* agreement,
    const std::vector<at::Tensor>& involved, std::vector<at::Tensor> outputs,
    const std::function<c10::intrusive_ptr<c10d::Work>()>& launch, std::function<void()> finish,
    bool blocking) {
  // Anything the graph still owes is run first: the collective reads device values, and in
  // defer-and-fuse every rank's graphs then end at the same places, so MPMD work on one rank
  // never changes what the others compile.
  auto start = std::chrono::steady_clock::now();
  bool staged = std::any_of(involved.begin(), involved.end(), on_tpu);
  if (staged) exec::flush("collective");
  double flush_seconds = seconds_since(start);
  // The ranks compare what they are about to call (one small exchange) in every mode: a size
  // or dtype that differs between ranks makes Gloo abort the process, where this raises
  // DistBackendError on every rank.
  if (agreement) {
    ++sequence_;
    check_agreement(name, *agreement);
  }
  // A blocking operation reuses this group's host buffers: allocating and faulting in fresh
  // pages for every large collective costs as much as copying the data. Another thread already
  // using them (or a non-blocking operation, whose buffers outlive this call) allocates its own.
  std::unique_lock<std::mutex> staging_lock(staging_mutex_, std::defer_lock);
  struct StagingScope {
    HostStaging* previous = thread_staging();
    ~StagingScope() { thread_staging() = previous; }
  } scope;
  if (blocking && staging_lock.try_lock()) {
    staging_.begin();
    thread_staging() = &staging_;
  }
  // Errors while starting (bad arguments, which the transport checks as it does for CPU tensors)
  // pass through unchanged, so tpu tensors raise what CPU tensors raise.
  c10::intrusive_ptr<c10d::Work> inner = launch();
  auto work = c10::make_intrusive<TpuWork>(rank_, type, name, std::move(outputs), std::move(inner),
                                           std::move(finish), timeout_);
  if (blocking) work->complete();
  // Only operations that staged tpu tensors count: the stats say what staging costs.
  if (thread_staging() && staged) {
    thread_staging()->stats.operations += 1;
    thread_staging()->stats.flush_seconds += flush_seconds;
    thread_staging()->stats.total_seconds += seconds_since(start);
  }
  return work;
}

StagingStats ProcessGroupTPU::staging_stats() {
  std::lock_guard<std::mutex> lock(staging_mutex_);
  return staging_.stats;
}

void ProcessGroupTPU::reset_staging_stats() {
  std::lock_guard<std::mutex> lock(staging_mutex_);
  staging_.stats = StagingStats();
}

namespace {

ProcessGroupTPU::Agreement agree(const std::vector<at::Tensor>& ts, int64_t root = -1,
                                 bool same_numel = true) {
  int64_t numel = 0;
  for (const auto& t : ts) numel += t.numel();
  int64_t dtype = ts.empty() ? -1 : static_cast<int64_t>(ts.front().scalar_type());
  return {same_numel ? numel : -1, dtype, root};
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  if (tensors.size() == 1 && opts.rootTensor == 0) {
    auto spec = spec_of(CollectiveKind::Broadcast, Reduction::Sum, opts.rootRank);
    if (auto work = run_replicated("broadcast", c10d::OpType::BROADCAST, spec, tensors[0], {tensors[0]})) return work;
  }
  auto a = agree(tensors, opts.rootRank);
  std::vector<at::Tensor> host;
  bool root = rank_ == opts.rootRank;
  return run("broadcast", c10d::OpType::BROADCAST, &a, tensors, tensors,
             [&] {
               // Non-roots only receive: their old values need not leave the device.
               host = root ? stage_in(tensors) : stage_out(tensors);
               return transport_->broadcast(host, opts);
             },
             [&tensors, &host, root] {
               if (!root) copy_back(tensors, host);
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  auto reduction = reduction_of(opts.reduceOp);
  if (tensors.size() == 1 && reduction) {
    auto spec = spec_of(CollectiveKind::AllReduce, *reduction);
    if (auto work = run_replicated("all_reduce", c10d::OpType::ALLREDUCE, spec, tensors[0], {tensors[0]})) return work;
  }
  auto a = agree(tensors);
  std::vector<at::Tensor> host;
  return run("all_reduce", c10d::OpType::ALLREDUCE, &a, tensors, tensors,
             [&] {
               host = stage_in(tensors);
               return transport_->allreduce(host, opts);
             },
             [&] { copy_back(tensors, host); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  auto a = agree(tensors);
  std::vector<at::Tensor> host;
  return run("all_reduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, &a, tensors, tensors,
             [&] {
               host = stage_in(tensors);
               return transport_->allreduce_coalesced(host, opts);
             },
             [&] { copy_back(tensors, host); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  auto a = agree(tensors, opts.rootRank);
  std::vector<at::Tensor> host;
  bool root = rank_ == opts.rootRank;
  return run("reduce", c10d::OpType::REDUCE, &a, tensors, tensors,
             [&] {
               host = stage_in(tensors);
               return transport_->reduce(host, opts);
             },
             [&tensors, &host, root] {
               if (root) copy_back(tensors, host);
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  if (inputs.size() == 1 && outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_ &&
      std::all_of(outputs[0].begin(), outputs[0].end(), [&](const at::Tensor& o) { return o.numel() == inputs[0].numel(); })) {
    auto spec = spec_of(CollectiveKind::AllGather);
    if (auto work = run_replicated("all_gather", c10d::OpType::ALLGATHER, spec, inputs[0], outputs[0])) return work;
  }
  auto a = agree(inputs);
  std::vector<at::Tensor> host_in;
  std::vector<std::vector<at::Tensor>> host_out;
  return run("all_gather", c10d::OpType::ALLGATHER, &a, join(flat(outputs), inputs), flat(outputs),
             [&] {
               host_in = stage_in(inputs);
               host_out = stage_out(outputs);
               return transport_->allgather(host_out, host_in, opts);
             },
             [&] { copy_back(outputs, host_out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::run_flat(const char* name, c10d::OpType type,
                                                         const Agreement& agreement, at::Tensor& output,
                                                         at::Tensor& input, const FlatTransport& transport) {
  at::Tensor host_in, host_out, flat_in, flat_out;
  return run(name, type, &agreement, {output, input}, {output},
             [&] {
               host_in = stage_in(input);
               host_out = stage_out(output);
               flat_in = flat_view(host_in);
               flat_out = flat_view(host_out);
               return transport(flat_out, flat_in);
             },
             [&] { copy_back({output}, {host_out}); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::_allgather_base(at::Tensor& output,
                                                                at::Tensor& input,
                                                                const c10d::AllgatherOptions& opts) {
  if (output.numel() == input.numel() * size_) {
    auto spec = spec_of(CollectiveKind::AllGather);
    if (auto work = run_replicated("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, spec, input, {output})) {
      return work;
    }
  }
  return run_flat("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, agree({input}), output, input,
                  [&](at::Tensor& out, at::Tensor& in) { return transport_->_allgather_base(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  auto a = agree(inputs);
  std::vector<at::Tensor> host_in;
  std::vector<std::vector<at::Tensor>> host_out;
  return run("all_gather_coalesced", c10d::OpType::ALLGATHER_COALESCED, &a,
             join(flat(outputs), inputs), flat(outputs),
             [&] {
               host_in = stage_in(inputs);
               host_out = stage_out(outputs);
               return transport_->allgather_coalesced(host_out, host_in, opts);
             },
             [&] { copy_back(outputs, host_out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  auto a = agree(inputs);
  std::vector<at::Tensor> host_in, host_out;
  return run("all_gather_into_tensor_coalesced", c10d::OpType::COALESCED, &a,
             join(outputs, inputs), outputs,
             [&] {
               host_in = stage_in(inputs);
               host_out = stage_out(outputs);
               return transport_->allgather_into_tensor_coalesced(host_out, host_in, opts);
             },
             [&] { copy_back(outputs, host_out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::GatherOptions& opts) {
  auto a = agree(inputs, opts.rootRank);
  std::vector<at::Tensor> host_in;
  std::vector<std::vector<at::Tensor>> host_out;
  return run("gather", c10d::OpType::GATHER, &a, join(flat(outputs), inputs), flat(outputs),
             [&] {
               host_in = stage_in(inputs);
               host_out = stage_out(outputs);
               return transport_->gather(host_out, host_in, opts);
             },
             [&] { copy_back(outputs, host_out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::scatter(std::vector<at::Tensor>& outputs,
                                                        std::vector<std::vector<at::Tensor>>& inputs,
                                                        const c10d::ScatterOptions& opts) {
  auto a = agree(outputs, opts.rootRank);
  std::vector<at::Tensor> host_out;
  std::vector<std::vector<at::Tensor>> host_in;
  return run("scatter", c10d::OpType::SCATTER, &a, join(flat(inputs), outputs), outputs,
             [&] {
               host_in = stage_in(inputs);
               host_out = stage_out(outputs);
               return transport_->scatter(host_out, host_in, opts);
             },
             [&] { copy_back(outputs, host_out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  auto a = agree(outputs);
  std::vector<at::Tensor> host_out;
  std::vector<std::vector<at::Tensor>> host_in;
  return run("reduce_scatter", c10d::OpType::REDUCE_SCATTER, &a, join(flat(inputs), outputs),
             outputs,
             [&] {
               host_in = stage_in(inputs);
               host_out = stage_out(outputs);
               return transport_->reduce_scatter(host_out, host_in, opts);
             },
             [&] { copy_back(outputs, host_out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  auto reduction = reduction_of(opts.reduceOp);
  if (reduction && input.numel() == output.numel() * size_) {
    auto spec = spec_of(CollectiveKind::ReduceScatter, *reduction);
    if (auto work = run_replicated("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, spec, input, {output})) {
      return work;
    }
  }
  return run_flat("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, agree({output}), output, input,
                  [&](at::Tensor& out, at::Tensor& in) { return transport_->_reduce_scatter_base(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  auto a = agree(outputs);
  std::vector<at::Tensor> host_in, host_out;
  return run("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, &a,
             join(outputs, inputs), outputs,
             [&] {
               host_in = stage_in(inputs);
               host_out = stage_out(outputs);
               return transport_->reduce_scatter_tensor_coalesced(host_out, host_in, opts);
             },
             [&] { copy_back(outputs, host_out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                              std::vector<int64_t>& output_splits,
                                                              std::vector<int64_t>& input_splits,
                                                              const c10d::AllToAllOptions& opts) {
  if (output_splits.empty() && input_splits.empty() && input.numel() == output.numel() &&
      input.numel() % size_ == 0) {
    auto spec = spec_of(CollectiveKind::AllToAll);
    if (auto work = run_replicated("all_to_all_single", c10d::OpType::ALLTOALL_BASE, spec, input, {output})) return work;
  }
  bool even = output_splits.empty() && input_splits.empty();
  auto a = agree({input}, -1, even);
  at::Tensor host_in, host_out;
  return run("all_to_all_single", c10d::OpType::ALLTOALL_BASE, &a, {output, input}, {output},
             [&] {
               host_in = stage_in(input);
               host_out = stage_out(output);
               return transport_->alltoall_base(host_out, host_in, output_splits, input_splits,
                                                opts);
             },
             [&] { copy_back({output}, {host_out}); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions& opts) {
  auto a = agree(inputs, -1, false);
  std::vector<at::Tensor> host_in, host_out;
  return run("all_to_all", c10d::OpType::ALLTOALL, &a, join(outputs, inputs), outputs,
             [&] {
               host_in = stage_in(inputs);
               host_out = stage_out(outputs);
               return transport_->alltoall(host_out, host_in, opts);
             },
             [&] { copy_back(outputs, host_out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::send(std::vector<at::Tensor>& tensors, int dst,
                                                     int tag) {
  // The host copy must outlive the transport's send: the Work keeps it as its result.
  auto host = std::make_shared<std::vector<at::Tensor>>();
  return run("send", c10d::OpType::SEND, nullptr, tensors, tensors,
             [&] {
               *host = stage_in(tensors);
               return transport_->send(*host, dst, tag);
             },
             [host] {}, /*blocking=*/false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::recv(std::vector<at::Tensor>& tensors, int src,
                                                     int tag) {
  auto host = std::make_shared<std::vector<at::Tensor>>();
  std::vector<at::Tensor> dst = tensors;
  return run("recv", c10d::OpType::RECV, nullptr, tensors, tensors,
             [&] {
               *host = stage_out(tensors);
               return transport_->recv(*host, src, tag);
             },
             [host, dst] { copy_back(dst, *host); }, /*blocking=*/false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::recvAnysource(std::vector<at::Tensor>& tensors,
                                                              int tag) {
  TORCH_CHECK(false, "tpu_dist does not support recv from any source; name the source rank");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::barrier(const c10d::BarrierOptions& opts) {
  Agreement a{-1, -1, -1};
  // A barrier orders what the ranks did on their devices too, so the pending graph runs first.
  exec::flush("collective");
  return run("barrier", c10d::OpType::BARRIER, &a, {}, {},
             [&] { return transport_->barrier(opts); }, nullptr);
}

}  // namespace tpu::distributed
