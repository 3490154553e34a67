// A serialized xla.CompileOptionsProto with the few fields we set, encoded by hand so that we
// need no protobuf dependency. Wire format: https://protobuf.dev/programming-guides/encoding/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::runtime {

// One entry of CompileOptionsProto.env_option_overrides: an XLA debug option by its flag name
// (without the leading --), which the compiler applies over its defaults for this compile only.
struct OptionOverride {
  std::string name;
  enum class Kind : uint8_t { Bool, Int } kind = Kind::Int;
  int64_t value = 0;
};

struct CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  // A portable executable runs on whichever device Execute names, so one compilation serves every
  // device of the client.
  bool portable = true;
  // For a replicated program (num_replicas > 1): the PJRT device id that runs each replica, in
  // replica order. Replicated programs are never portable.
  std::vector<int64_t> replica_devices;
  std::vector<OptionOverride> overrides;
};

// The overrides of a quick compile: what makes sense for a tiny per-op program, whose compile
// time dwarfs its run time until it has run many times. On XLA:CPU they take the median per-op
// compile from about 39 to 16 ms: LLVM at -O0, and elementwise code from the classic emitters
// instead of the MLIR fusion pipeline, whose fixed cost is most of a tiny program's compile.
std::vector<OptionOverride> quick_compile_overrides();

std::string encode_compile_options(const CompileOptions& options);

// Protobuf primitives, exposed for the unit tests.
void append_varint(std::string& out, uint64_t value);
void append_tag(std::string& out, int field, int wire_type);

}  // namespace tpu::runtime
