// Replay of a compiled graph's program without recording its ops again (torch.compile).
//
// The first call of a graph runs its ATen calls through the recording path, which builds (or
// finds) one program. The capture that flush leaves behind says which storage each program
// parameter and result belonged to; binding those storages to the graph's arguments and outputs
// lets later calls run the program directly on the new arguments' storages, with fresh storages
// for the outputs. Only the things the program depends on are checked: dtypes, sizes, strides,
// offsets, which arguments share a storage, and the storages' state.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "exec/executor.h"

namespace tpu::aten {

class GraphReplay {
 public:
  using Tensors = std::vector<std::optional<at::Tensor>>;  // nullopt: a non-tensor argument/output

  // Null when the capture cannot be bound: an output that is neither fresh nor an argument, a
  // CPU argument, a storage the program writes that the caller cannot see.
  static std::shared_ptr<GraphReplay> bind(std::shared_ptr<exec::Capture> capture, const Tensors& inputs,
                                           const Tensors& outputs, std::string* why_not);

  // The outputs for `inputs`, or nullopt (nothing ran) when they differ from the captured ones.
  std::optional<Tensors> run(const Tensors& inputs) const;

 private:
  struct InputLayout {
    bool tensor = false;
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    int shares_storage_with = -1;  // the first earlier input with the same storage
  };
  struct OutputLayout {
    bool tensor = false;
    int same_as_input = -1;  // the output is this input itself
    int storage_of_input = -1;  // the output views this input's storage
    int fresh_storage = -1;  // the output views this new storage
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
  };
  // What each of the program's storages becomes at replay.
  struct StorageRole {
    enum class Kind { Unused, Input, Fresh, Constant, Check } kind = Kind::Unused;
    int index = -1;  // the input, the fresh storage, or the error flag
  };

  bool matches(const Tensors& inputs) const;

  std::shared_ptr<exec::Capture> capture_;
  std::vector<InputLayout> inputs_;
  std::vector<OutputLayout> outputs_;
  std::vector<StorageRole> roles_;
  struct FreshStorage {
    int64_t nbytes = 0;
    exec::StorageRoom room;  // a padded program's result is as long as its bucket
  };
  std::vector<FreshStorage> fresh_;
  std::vector<std::string> check_ops_;  // per error flag the program writes, the op it checks
};

}  // namespace tpu::aten
