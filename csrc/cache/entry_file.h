// The bytes of one persistent cache entry, and their validation.
//
// Layout, integers little-endian:
//   magic "TPUXCACH" | u32 format version | u32 zero | u64 key size | u64 payload size |
//   u64 FNV-1a of the payload | key | payload
// payload: u32 parameter count, per parameter (u8 source, i32 index); u32 output count, per
//   output (u8 dtype, u32 rank, i64 dims[rank], i32 storage, u8 storage dtype); then u64
//   executable size and PJRT's serialized executable.
// The full key in the header makes a hash collision or a foreign entry a miss, never a wrong
// program; the checksum catches torn or flipped bytes that PJRT would otherwise load silently.
#pragma once

#include <string>

#include "cache/program_cache.h"

namespace tpu::cache {

// `executable` is PJRT's serialization of program.executable.
std::string encode_entry(const std::string& full_key, const Program& program, const std::string& executable);

// Why `bytes` cannot be used as the entry for `full_key` ("" when it can), e.g. "truncated".
// On success fills everything of `program` but its executable, whose bytes go to `executable`.
// An empty `full_key` skips the key comparison (for checking files whose context is unknown).
std::string decode_entry(const std::string& bytes, const std::string& full_key, Program& program,
                         std::string& executable);

}  // namespace tpu::cache
