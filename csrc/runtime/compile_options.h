// A serialized xla.CompileOptionsProto with the few fields we set, encoded by hand so that we
// need no protobuf dependency. Wire format: https://protobuf.dev/programming-guides/encoding/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::runtime {

struct CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  // A portable executable runs on whichever device Execute names, so one compilation serves every
  // device of the client.
  bool portable = true;
  // For a replicated program (num_replicas > 1): the PJRT device id that runs each replica, in
  // replica order. Replicated programs are never portable.
  std::vector<int64_t> replica_devices;
};

std::string encode_compile_options(const CompileOptions& options);

// Protobuf primitives, exposed for the unit tests.
void append_varint(std::string& out, uint64_t value);
void append_tag(std::string& out, int field, int wire_type);

}  // namespace tpu::runtime
