// The persistent cache's key: the executor's program key, prefixed by everything else that can
// change the executable XLA would produce for it.
//
// In memory the executor's key alone suffices (the rest is fixed for the life of the process); on
// disk, entries outlive the process, so a new plugin, device, compile option or torch_tpu build
// must miss instead of loading an executable made for something else.
#pragma once

#include <string>

namespace tpu::cache {

// Bump when the entry layout (entry_file.h) or the meaning of the executor's key changes.
constexpr int kCacheFormatVersion = 2;
constexpr const char* kLibraryVersion = "torch_tpu-0.1.0";

struct KeyContext {
  // Ours: release, cache format, and the build identity of the code that lowered the program,
  // because lowerings change between builds without the release changing.
  std::string library_version;
  std::string platform;
  std::string platform_version;
  // The plugin binary's build identity: some plugins report a bare platform version (the CPU
  // plugin says "cpu"), which would let two different XLA builds share entries.
  std::string plugin_build;
  int api_major = 0;
  int api_minor = 0;
  std::string device_kind;
  int device_count = 0;
  // The host's instruction-set extensions, where the host is the device (the CPU plugin): XLA
  // compiles for the CPU it runs on, so an entry made where AVX-512 exists dies with SIGILL on a
  // machine without it (a cache directory on a shared disk, or restored onto another CI runner).
  // Empty on other platforms, whose executables do not depend on the host's CPU.
  std::string host_isa;
  std::string compile_options;  // the serialized CompileOptionsProto
  // Flags the plugin reads from the environment when it compiles (XLA_FLAGS, LIBTPU_INIT_ARGS):
  // they change the executable as much as the compile options do.
  std::string compiler_flags;
  std::string salt;             // only tests set it, to stand in for a version change
};

// The context of this process's PJRT client; creates the client if needed.
KeyContext current_key_context();

// The CPUID feature words (x86) or hardware capability words (Arm) of this CPU, in hex.
std::string host_instruction_set();

// Unambiguous: every field is named and length-prefixed, so no two contexts encode alike.
std::string encode_key_prefix(const KeyContext& context);

// "<16 hex digits>.tpuexec": a stable hash of the full key.
std::string entry_file_name(const std::string& full_key);

// The build identity (GNU build-id, else a sampled hash of the file) of the loaded binary holding
// `address`; "" if none can be found.
std::string binary_identity(const void* address);

}  // namespace tpu::cache
