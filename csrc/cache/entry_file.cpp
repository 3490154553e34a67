#include "cache/entry_file.h"

#include <cstring>

#include "cache/cache_key.h"
#include "cache/stable_hash.h"

namespace tpu::cache {

namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'X', 'C', 'A', 'C', 'H'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8 + 8;
constexpr uint32_t kMaxCount = 1u << 24;
constexpr uint32_t kMaxRank = 64;

void put(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

// Reads little-endian integers from a byte range, remembering whether it ever ran past the end.
class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}
  uint64_t take(int bytes) {
    if (overrun_ || size_ - position_ < static_cast<size_t>(bytes)) {
      overrun_ = true;
      return 0;
    }
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) {
      value |= static_cast<uint64_t>(static_cast<unsigned char>(data_[position_ + i])) << (8 * i);
    }
    position_ += bytes;
    return value;
  }
  std::string take_bytes(size_t count) {
    if (overrun_ || size_ - position_ < count) {
      overrun_ = true;
      return "";
    }
    std::string out(data_ + position_, count);
    position_ += count;
    return out;
  }
  bool overrun() const { return overrun_; }
  bool at_end() const { return position_ == size_; }

 private:
  const char* data_;
  size_t size_;
  size_t position_ = 0;
  bool overrun_ = false;
};

bool valid_dtype(uint64_t value) { return value <= static_cast<uint64_t>(DType::C128); }
bool valid_source(uint64_t value) {
  return value <= static_cast<uint64_t>(Program::Parameter::Source::Offset);
}

// A field added to Program that the entry does not store would come back empty from the disk:
// this fails the build until encode_entry and decode_entry (and kCacheFormatVersion) follow.
static_assert(sizeof(Program) == 4 * sizeof(std::vector<int>) + sizeof(runtime::ExecutablePtr) +
                                    sizeof(std::shared_ptr<Program::QuickTier>),
              "Program changed: store the new field in the cache entry and bump kCacheFormatVersion");

}  // namespace

std::string encode_entry(const std::string& full_key, const Program& program, const std::string& executable) {
  std::string payload;
  put(payload, program.parameters.size(), 4);
  for (const auto& parameter : program.parameters) {
    put(payload, static_cast<uint64_t>(parameter.source), 1);
    put(payload, static_cast<uint32_t>(parameter.index), 4);
  }
  put(payload, program.output_types.size(), 4);
  for (size_t i = 0; i < program.output_types.size(); ++i) {
    const TensorType& type = program.output_types[i];
    put(payload, static_cast<uint64_t>(type.dtype), 1);
    put(payload, type.dims.size(), 4);
    for (int64_t d : type.dims) put(payload, static_cast<uint64_t>(d), 8);
    put(payload, static_cast<uint32_t>(program.output_storages.at(i)), 4);
    put(payload, static_cast<uint64_t>(program.output_dtypes.at(i)), 1);
  }
  put(payload, executable.size(), 8);
  payload += executable;
  put(payload, program.quick ? 1 : 0, 1);
  if (program.quick) {
    put(payload, static_cast<uint64_t>(program.quick->elements_per_run), 8);
    put(payload, program.quick->text.size(), 8);
    payload += program.quick->text;
  }

  std::string out(kMagic, sizeof kMagic);
  put(out, kCacheFormatVersion, 4);
  put(out, 0, 4);
  put(out, full_key.size(), 8);
  put(out, payload.size(), 8);
  put(out, fnv1a64(payload), 8);
  out.reserve(out.size() + full_key.size() + payload.size());
  out += full_key;
  out += payload;
  return out;
}

std::string decode_entry(const std::string& bytes, const std::string& full_key, Program& program,
                         std::string& executable) {
  if (bytes.size() < kHeaderSize) return "truncated";
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return "not a torch_tpu cache entry";
  Reader header(bytes.data() + sizeof kMagic, kHeaderSize - sizeof kMagic);
  uint64_t version = header.take(4);
  header.take(4);
  uint64_t key_size = header.take(8);
  uint64_t payload_size = header.take(8);
  uint64_t checksum = header.take(8);
  if (version != static_cast<uint64_t>(kCacheFormatVersion)) {
    return "written in cache format " + std::to_string(version) + " (this torch_tpu reads format " +
           std::to_string(kCacheFormatVersion) + ")";
  }
  size_t body = bytes.size() - kHeaderSize;
  if (key_size > body || payload_size > body - key_size) return "truncated";
  if (key_size + payload_size != body) return "longer than its header says";
  if (!full_key.empty() &&
      (key_size != full_key.size() || bytes.compare(kHeaderSize, key_size, full_key) != 0)) {
    return "made for another program or platform";
  }
  const char* payload = bytes.data() + kHeaderSize + key_size;
  if (fnv1a64(payload, payload_size) != checksum) return "corrupted (checksum mismatch)";

  Reader reader(payload, payload_size);
  Program decoded;
  uint64_t parameters = reader.take(4);
  if (parameters > kMaxCount) return "corrupted (bad parameter count)";
  for (uint64_t i = 0; i < parameters && !reader.overrun(); ++i) {
    uint64_t source = reader.take(1);
    int32_t index = static_cast<int32_t>(static_cast<uint32_t>(reader.take(4)));
    if (!valid_source(source) || index < 0) return "corrupted (bad parameter)";
    decoded.parameters.push_back({static_cast<Program::Parameter::Source>(source), index});
  }
  uint64_t outputs = reader.take(4);
  if (outputs > kMaxCount) return "corrupted (bad output count)";
  for (uint64_t i = 0; i < outputs && !reader.overrun(); ++i) {
    uint64_t dtype = reader.take(1);
    uint64_t rank = reader.take(4);
    if (!valid_dtype(dtype) || rank > kMaxRank) return "corrupted (bad output type)";
    TensorType type{static_cast<DType>(dtype), {}};
    for (uint64_t d = 0; d < rank; ++d) type.dims.push_back(static_cast<int64_t>(reader.take(8)));
    int32_t storage = static_cast<int32_t>(static_cast<uint32_t>(reader.take(4)));
    uint64_t storage_dtype = reader.take(1);
    if (!valid_dtype(storage_dtype) || storage < 0) return "corrupted (bad output storage)";
    decoded.output_types.push_back(std::move(type));
    decoded.output_storages.push_back(storage);
    decoded.output_dtypes.push_back(static_cast<DType>(storage_dtype));
  }
  uint64_t executable_size = reader.take(8);
  std::string executable_bytes = reader.take_bytes(executable_size);
  if (reader.take(1) == 1) {
    decoded.quick = std::make_shared<Program::QuickTier>();
    decoded.quick->elements_per_run = static_cast<int64_t>(reader.take(8));
    decoded.quick->text = reader.take_bytes(reader.take(8));
  }
  if (reader.overrun() || !reader.at_end()) return "corrupted (inconsistent sizes)";
  if (executable_bytes.empty()) return "corrupted (no executable)";
  program = std::move(decoded);
  executable = std::move(executable_bytes);
  return "";
}

}  // namespace tpu::cache
