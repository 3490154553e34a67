// FNV-1a, 64 bits: a hash whose value never changes between builds, compilers or machines, so it
// can name files that other processes (and later versions of this code) will look for.
// std::hash promises none of that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tpu::cache {

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

inline uint64_t fnv1a64(const void* data, size_t size, uint64_t state = kFnvOffsetBasis) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    state ^= bytes[i];
    state *= kFnvPrime;
  }
  return state;
}

inline uint64_t fnv1a64(const std::string& text) { return fnv1a64(text.data(), text.size()); }

inline std::string hex64(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[i] = digits[value & 0xF];
  return out;
}

}  // namespace tpu::cache
