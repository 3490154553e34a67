// A hash fed a word at a time, for keys that live only in this process (signatures of calls,
// histories of sizes). It does several times less work per value than FNV-1a's byte loop, and
// these keys are computed for every recorded op; what names files on disk stays FNV
// (cache/stable_hash.h), whose values never change.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tpu::exec {

class WordHash {
 public:

  void add(uint64_t value) {
    state_ ^= value * kMultiplier;
    state_ = ((state_ << 27) | (state_ >> 37)) * kRound;
  }
  void add(std::string_view text) {
    size_t i = 0;
    for (; i + 8 <= text.size(); i += 8) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      add(word);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, text.data() + i, text.size() - i);
    add(tail ^ (static_cast<uint64_t>(text.size()) << 56));
  }
  // Mixed once more, so that values differing in a last word's low bits differ in every bit.
  uint64_t value() const {
    uint64_t h = state_;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
  }

 private:
  static constexpr uint64_t kStart = 0x27d4eb2f165667c5ull;
  static constexpr uint64_t kMultiplier = 0xc2b2ae3d27d4eb4full;
  static constexpr uint64_t kRound = 0x9e3779b185ebca87ull;
  uint64_t state_ = kStart;
};

}  // namespace tpu::exec
