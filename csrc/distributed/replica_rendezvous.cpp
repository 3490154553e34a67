#include "distributed/replica_rendezvous.h"

#include <atomic>
#include <set>

namespace tpu::distributed {

namespace {

std::mutex g_groups_mutex;
std::map<std::string, std::weak_ptr<ReplicaRendezvous>> g_groups;

std::mutex g_programs_mutex;
std::map<std::string, runtime::ExecutablePtr> g_programs;
std::atomic<int64_t> g_compiled{0};
std::atomic<int64_t> g_run{0};

runtime::ExecutablePtr program_for(const CollectiveSpec& spec, const std::vector<int>& devices) {
  std::string key = describe(spec) + " as " + mlir_name(spec.input.dtype);
  for (int64_t d : spec.input.dims) key += "," + std::to_string(d);
  key += " on";
  for (int d : devices) key += " " + std::to_string(d);
  std::lock_guard<std::mutex> lock(g_programs_mutex);
  auto it = g_programs.find(key);
  if (it != g_programs.end()) return it->second;
  auto executable = runtime::Client::get().compile_replicated(collective_module(spec), devices);
  ++g_compiled;
  g_programs.emplace(key, executable);
  return executable;
}

}  // namespace

int64_t collective_programs_compiled() { return g_compiled.load(); }
int64_t collective_programs_run() { return g_run.load(); }

std::shared_ptr<ReplicaRendezvous> ReplicaRendezvous::join(const std::string& id, int size) {
  std::lock_guard<std::mutex> lock(g_groups_mutex);
  auto existing = g_groups[id].lock();
  if (existing) {
    if (existing->size() != size) throw std::invalid_argument("process group " + id + " joined with another size");
    return existing;
  }
  auto created = std::make_shared<ReplicaRendezvous>(size);
  g_groups[id] = created;
  return created;
}

void ReplicaRendezvous::execute(Round& round, const CollectiveSpec& spec) {
  for (int r = 1; r < size_; ++r) {
    if (round.asked[r] != round.asked[0]) {
      round.mismatch = true;
      round.error = "rank 0 called " + round.asked[0] + " while rank " + std::to_string(r) + " called " +
                    round.asked[r];
      return;
    }
  }
  if (std::set<int>(round.devices.begin(), round.devices.end()).size() != round.devices.size()) {
    round.host_path = true;  // one program cannot run two replicas on one device
    return;
  }
  auto& client = runtime::Client::get();
  try {
    auto executable = program_for(spec, round.devices);
    std::vector<std::vector<const runtime::Buffer*>> arguments;
    for (const auto& input : round.inputs) arguments.push_back({input.get()});
    TensorType out{spec.input.dtype, {collective_output_numel(spec)}};
    auto results = client.execute_replicated(*executable, round.devices, arguments, {out});
    ++g_run;
    for (auto& result : results) client.wait(result.done);
    for (auto& result : results) round.outputs.push_back(result.outputs.at(0));
  } catch (const std::exception& e) {
    round.error = e.what();
  }
}

runtime::BufferPtr ReplicaRendezvous::run(int rank, int64_t sequence, const CollectiveSpec& spec,
                                          runtime::BufferPtr input, int device,
                                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  Round& round = rounds_[sequence];
  if (round.inputs.empty()) {
    round.inputs.resize(size_);
    round.devices.resize(size_, -1);
    round.asked.resize(size_);
  }
  round.inputs[rank] = std::move(input);
  round.devices[rank] = device;
  round.asked[rank] = describe(spec);
  if (++round.arrived == size_) {
    // The last rank runs the program for everyone; the others wait for it.
    execute(round, spec);
    round.done = true;
    round.inputs.clear();
    arrived_.notify_all();
  } else if (!arrived_.wait_for(lock, timeout, [&] { return round.done; })) {
    throw RendezvousTimeout(std::to_string(round.arrived) + " of " + std::to_string(size_) +
                            " ranks reached it within " + std::to_string(timeout.count()) + " ms");
  }
  runtime::BufferPtr mine = round.host_path || !round.error.empty() ? nullptr : round.outputs[rank];
  std::string error = round.error;
  bool mismatch = round.mismatch;
  if (++round.collected == size_) rounds_.erase(sequence);
  if (mismatch) throw RendezvousMismatch(error);
  if (!error.empty()) throw std::runtime_error(error);
  return mine;
}

}  // namespace tpu::distributed
