#include "runtime/compile_options.h"

namespace tpu::runtime {

namespace {
constexpr int kVarint = 0;
constexpr int kLengthDelimited = 2;

// Field numbers of xla.ExecutableBuildOptionsProto and xla.CompileOptionsProto.
constexpr int kBuildDeviceOrdinal = 1;
constexpr int kBuildNumReplicas = 4;
constexpr int kBuildNumPartitions = 5;
constexpr int kCompileBuildOptions = 3;
constexpr int kCompilePortable = 4;
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

  std::string out;
  append_tag(out, kCompileBuildOptions, kLengthDelimited);
  append_varint(out, build.size());
  out += build;
  if (options.portable) {
    append_tag(out, kCompilePortable, kVarint);
    append_varint(out, 1);
  }
  return out;
}

}  // namespace tpu::runtime
