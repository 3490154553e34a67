#include "cache/cache_key.h"

#include <cstdlib>

#include <elf.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cache/stable_hash.h"
#include "runtime/runtime.h"

namespace tpu::cache {

namespace {

void append_field(std::string& out, const char* name, const std::string& value) {
  out += name;
  out.push_back('=');
  uint64_t size = value.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((size >> (8 * i)) & 0xFF));
  out += value;
}

struct BinarySearch {
  uintptr_t address = 0;
  bool found = false;
  std::string path;
  std::string build_id;
};

std::string hex_bytes(const unsigned char* bytes, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 0xF]);
  }
  return out;
}

std::string gnu_build_id(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const size_t align = segment.p_align >= 8 ? 8 : 4;
    auto round_up = [align](size_t n) { return (n + align - 1) / align * align; };
    const auto* cursor = reinterpret_cast<const unsigned char*>(info->dlpi_addr + segment.p_vaddr);
    const unsigned char* end = cursor + segment.p_memsz;
    while (cursor + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, cursor, sizeof note);
      const unsigned char* name = cursor + sizeof note;
      const unsigned char* desc = name + round_up(note.n_namesz);
      if (desc + note.n_descsz > end) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        return hex_bytes(desc, note.n_descsz);
      }
      cursor = desc + round_up(note.n_descsz);
    }
  }
  return "";
}

int visit_binary(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<BinarySearch*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD) continue;
    uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (search->address >= start && search->address < start + segment.p_memsz) {
      search->found = true;
      search->path = info->dlpi_name ? info->dlpi_name : "";
      search->build_id = gnu_build_id(info);
      return 1;
    }
  }
  return 0;
}

// Hashing a whole plugin (XLA's CPU plugin is 250 MB, without a build-id) would cost every
// process a noticeable fraction of a second, so a binary without a build-id is identified by its
// size, its first and last MiB (ELF headers, symbol and section tables) and 32 slices spread over
// the rest: any rebuild that moves code or data changes some of them.
std::string sampled_hash_of_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat info;
  if (fstat(fd, &info) != 0) {
    close(fd);
    return "";
  }
  const off_t size = info.st_size;
  uint64_t state = fnv1a64(&size, sizeof size);
  std::vector<char> chunk(1 << 20);
  auto hash_range = [&](off_t offset, size_t length) {
    length = static_cast<size_t>(std::min<off_t>(static_cast<off_t>(length), size - offset));
    ssize_t n = pread(fd, chunk.data(), length, offset);
    if (n > 0) state = fnv1a64(chunk.data(), static_cast<size_t>(n), state);
  };
  constexpr off_t kEnds = 1 << 20, kSlice = 1 << 16, kSlices = 32;
  hash_range(0, kEnds);
  if (size > kEnds) hash_range(std::max<off_t>(kEnds, size - kEnds), kEnds);
  for (off_t i = 1; i <= kSlices && size > 2 * kEnds; ++i) hash_range(size / (kSlices + 1) * i, kSlice);
  close(fd);
  return hex64(state);
}

// Any function of this library will do: its address says which loaded binary we are.
void locate_this_library() {}

}  // namespace

std::string binary_identity(const void* address) {
  BinarySearch search;
  search.address = reinterpret_cast<uintptr_t>(address);
  dl_iterate_phdr(&visit_binary, &search);
  if (!search.found) return "";
  if (!search.build_id.empty()) return "build-id:" + search.build_id;
  // The main program reports an empty name.
  std::string path = search.path.empty() ? "/proc/self/exe" : search.path;
  std::string hash = sampled_hash_of_file(path);
  return hash.empty() ? "" : "sampled:" + hash;
}

std::string host_instruction_set() {
  std::string words;
  auto add = [&words](uint64_t word) { words += hex64(word) + "."; };
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // Leaf 1 ECX/EDX (SSE..AVX, FMA, F16C), leaf 7 (AVX2, AVX-512, AMX), the extended leaf (LZCNT,
  // SSE4a), and XCR0, which says whether the OS saves the AVX and AVX-512 registers. Leaf 1's EBX
  // (which core asked) and the model numbers are left out: they change no instruction.
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) add(uint64_t{ecx} << 32 | edx);
  const bool os_saves_state = (ecx >> 27) & 1;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    add(uint64_t{ebx} << 32 | ecx);
    add(edx);
  }
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) add(eax);
  if (__get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx)) add(uint64_t{ecx} << 32 | edx);
  if (os_saves_state) {
    unsigned xcr0_low = 0, xcr0_high = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    add(uint64_t{xcr0_high} << 32 | xcr0_low);
  }
#elif defined(__aarch64__)
  add(getauxval(AT_HWCAP));
  add(getauxval(AT_HWCAP2));
#endif
  return words;
}

std::string compiler_flags_from_environment() {
  std::string flags;
  for (const char* name : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"}) {
    const char* value = std::getenv(name);
    flags += std::string(name) + "=" + (value ? value : "") + ";";
  }
  return flags;
}

KeyContext current_key_context() {
  static const std::string our_build = binary_identity(reinterpret_cast<const void*>(&locate_this_library));
  auto& client = runtime::Client::get();
  KeyContext context;
  context.library_version = std::string(kLibraryVersion) + "/format-" + std::to_string(kCacheFormatVersion) +
                            "/" + our_build;
  context.platform = client.platform();
  context.platform_version = client.platform_version();
  context.plugin_build = binary_identity(client.api());
  context.api_major = client.api_major();
  context.api_minor = client.api_minor();
  context.device_kind = client.device_kind(0);
  context.device_count = client.device_count();
  if (context.platform == "cpu") {
    static const std::string isa = host_instruction_set();
    context.host_isa = isa;
  }
  context.compile_options = client.compile_options();
  context.compiler_flags = compiler_flags_from_environment();
  return context;
}

std::string encode_key_prefix(const KeyContext& context) {
  std::string out;
  append_field(out, "library", context.library_version);
  append_field(out, "platform", context.platform);
  append_field(out, "platform_version", context.platform_version);
  append_field(out, "plugin_build", context.plugin_build);
  append_field(out, "pjrt_api", std::to_string(context.api_major) + "." + std::to_string(context.api_minor));
  append_field(out, "device_kind", context.device_kind);
  append_field(out, "device_count", std::to_string(context.device_count));
  append_field(out, "host_isa", context.host_isa);
  append_field(out, "compile_options", context.compile_options);
  append_field(out, "compiler_flags", context.compiler_flags);
  append_field(out, "salt", context.salt);
  out.push_back('\n');
  return out;
}

std::string entry_file_name(const std::string& full_key) { return hex64(fnv1a64(full_key)) + ".tpuexec"; }

}  // namespace tpu::cache
