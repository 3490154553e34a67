// Where the ranks of one process group meet when a single PJRT client drives all their devices
// (one process, a device per rank): each rank brings its operand, and the last to arrive runs the
// collective as one replicated XLA program over every rank's device. Torch-free.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/collective_program.h"
#include "runtime/runtime.h"

namespace tpu::distributed {

// A rank waited longer than the group's timeout for the others.
class RendezvousTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The ranks asked for different collectives (or operands) at the same step.
class RendezvousMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ReplicaRendezvous {
 public:
  explicit ReplicaRendezvous(int size) : size_(size) {}

  // The rendezvous of the group the ranks of this process agreed to call `id`; the first rank to
  // ask creates it, and it lives while a rank's process group holds it.
  static std::shared_ptr<ReplicaRendezvous> join(const std::string& id, int size);

  // Contributes `input` (on `device`) to the group's collective number `sequence` and returns
  // this rank's result (a 1-D buffer of collective_output_numel(spec) elements). Returns null on
  // every rank when the ranks' devices cannot run one program together (two ranks on one
  // device): the caller then takes the host path.
  runtime::BufferPtr run(int rank, int64_t sequence, const CollectiveSpec& spec, runtime::BufferPtr input,
                         int device, std::chrono::milliseconds timeout);

  int size() const { return size_; }

 private:
  struct Round {
    std::vector<runtime::BufferPtr> inputs;
    std::vector<int> devices;
    std::vector<std::string> asked;
    int arrived = 0;
    int collected = 0;
    bool done = false;
    bool host_path = false;
    std::string error;
    bool mismatch = false;
    std::vector<runtime::BufferPtr> outputs;
  };
  void execute(Round& round, const CollectiveSpec& spec);

  int size_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<int64_t, Round> rounds_;
};

// Replicated programs compiled so far in this process (each is compiled once per collective,
// operand type and device list).
int64_t collective_programs_compiled();
int64_t collective_programs_run();

}  // namespace tpu::distributed
