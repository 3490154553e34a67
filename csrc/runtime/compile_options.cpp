#include "runtime/compile_options.h"

namespace tpu::runtime {

namespace {
constexpr int kVarint = 0;
constexpr int kLengthDelimited = 2;

// Field numbers of xla.ExecutableBuildOptionsProto and xla.CompileOptionsProto.
constexpr int kBuildDeviceOrdinal = 1;
constexpr int kBuildNumReplicas = 4;
constexpr int kBuildNumPartitions = 5;
constexpr int kBuildDeviceAssignment = 9;
// xla.DeviceAssignmentProto and its ComputationDevice.
constexpr int kAssignmentReplicaCount = 1;
constexpr int kAssignmentComputationCount = 2;
constexpr int kAssignmentComputationDevices = 3;
constexpr int kComputationReplicaDeviceIds = 1;
constexpr int kCompileBuildOptions = 3;
constexpr int kCompilePortable = 4;
constexpr int kCompileEnvOptionOverrides = 7;
// A map entry (key = 1, value = 2) and xla.OptionOverrideProto's oneof.
constexpr int kMapKey = 1;
constexpr int kMapValue = 2;
constexpr int kOverrideBool = 2;
constexpr int kOverrideInt = 3;

void append_bytes(std::string& out, int field, const std::string& bytes) {
  append_tag(out, field, kLengthDelimited);
  append_varint(out, bytes.size());
  out += bytes;
}
}  // namespace

void append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void append_tag(std::string& out, int field, int wire_type) {
  append_varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

std::string encode_compile_options(const CompileOptions& options) {
  std::string build;
  append_tag(build, kBuildDeviceOrdinal, kVarint);
  append_varint(build, static_cast<uint64_t>(int64_t{-1}));  // any device
  append_tag(build, kBuildNumReplicas, kVarint);
  append_varint(build, static_cast<uint64_t>(options.num_replicas));
  append_tag(build, kBuildNumPartitions, kVarint);
  append_varint(build, static_cast<uint64_t>(options.num_partitions));
  if (!options.replica_devices.empty()) {
    std::string computation;
    for (int64_t id : options.replica_devices) {
      append_tag(computation, kComputationReplicaDeviceIds, kVarint);
      append_varint(computation, static_cast<uint64_t>(id));
    }
    std::string assignment;
    append_tag(assignment, kAssignmentReplicaCount, kVarint);
    append_varint(assignment, options.replica_devices.size());
    append_tag(assignment, kAssignmentComputationCount, kVarint);
    append_varint(assignment, 1);
    append_tag(assignment, kAssignmentComputationDevices, kLengthDelimited);
    append_varint(assignment, computation.size());
    assignment += computation;
    append_tag(build, kBuildDeviceAssignment, kLengthDelimited);
    append_varint(build, assignment.size());
    build += assignment;
  }

  std::string out;
  append_tag(out, kCompileBuildOptions, kLengthDelimited);
  append_varint(out, build.size());
  out += build;
  if (options.portable && options.replica_devices.empty()) {
    append_tag(out, kCompilePortable, kVarint);
    append_varint(out, 1);
  }
  for (const OptionOverride& option : options.overrides) {
    std::string value;
    append_tag(value, option.kind == OptionOverride::Kind::Bool ? kOverrideBool : kOverrideInt, kVarint);
    append_varint(value, static_cast<uint64_t>(option.value));
    std::string entry;
    append_bytes(entry, kMapKey, option.name);
    append_bytes(entry, kMapValue, value);
    append_bytes(out, kCompileEnvOptionOverrides, entry);
  }
  return out;
}

std::vector<OptionOverride> quick_compile_overrides() {
  return {{"xla_backend_optimization_level", OptionOverride::Kind::Int, 0},
          {"xla_cpu_use_fusion_emitters", OptionOverride::Kind::Bool, 0}};
}

}  // namespace tpu::runtime
