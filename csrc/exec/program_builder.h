// Builds one StableHLO program from a sequence of calls: a single op in strict and debug mode, a
// whole pending graph in defer-and-fuse. Each call reads its operands from the current value of
// their storages and writes its results back, so later calls see earlier writes exactly as the
// eager semantics say, and only the final value of each storage leaves the program.
#pragma once

#include <functional>
#include <unordered_map>
#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "exec/program_key.h"

namespace tpu::exec {

class ProgramBuilder {
 public:
  // `storages` must already hold every storage the calls touch (append_call_key puts them there).
  explicit ProgramBuilder(const StorageSet& storages);

  // Lowers one call; throws lowering::Unsupported when its lowering declines.
  void lower(const OpCall& call);

  // The program's metadata and text: its results are the final values of the written storages
  // for which `keep` is true. The executable is left for the caller to compile.
  cache::Program finish(const std::function<bool(const Storage&)>& keep);
  const std::string& text() const { return text_; }
  int64_t work_elements() const { return b_.total_elements(); }

 private:
  hlo::Value base_as(int32_t storage, DType dtype);
  hlo::Value read(const TensorView& view, hlo::Value offset);
  void settle_for_readers(int32_t storage, const OpCall& reader);

  const StorageSet& storages_;
  hlo::Builder b_;
  std::vector<hlo::Value> value_;  // per storage: its current value, once touched
  std::vector<hlo::Value> parameter_value_;  // per storage: the parameter it came in as, if any
  std::vector<int32_t> parameter_position_;  // ... and that parameter's position in @main
  // The bucket-shaped values of the padded writes that later padded reads take as they are.
  PaddedWrites padded_writes_;
  std::unordered_map<const Storage*, hlo::Value> written_padded_;
  std::vector<bool> written_;
  std::vector<bool> settled_;  // per storage: its written value is behind an optimization barrier
  std::vector<cache::Program::Parameter> parameters_;
  int32_t numbers_seen_ = 0;
  int32_t random_calls_seen_ = 0;
  int32_t offsets_seen_ = 0;
  bool inject_failure_ = false;
  std::string text_;
};

std::string describe(const OpCall& call);  // "aten::add.Tensor"

}  // namespace tpu::exec
