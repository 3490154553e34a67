// Appends a key's fields to a std::string through a buffer on the stack. Keys (a program's, a
// meta result's) are built for every op from many fields of a few bytes each, and one call of
// std::string's append costs more than the eight bytes most fields add: gathered here, a whole
// call's key reaches the string in one or two appends. The bytes are exactly those the fields
// would add one by one.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "hlo/dims.h"

namespace tpu::exec {

class KeyBytes {
 public:
  explicit KeyBytes(std::string& key) : key_(key) {}
  ~KeyBytes() { flush(); }
  KeyBytes(const KeyBytes&) = delete;
  KeyBytes& operator=(const KeyBytes&) = delete;

  void add_char(char c) {
    if (used_ == sizeof buffer_) flush();
    buffer_[used_++] = c;
  }
  void add_int(int64_t v) { add(&v, sizeof v); }
  void add_text(std::string_view text) { add(text.data(), text.size()); }
  // The count, then each value: a dims list of a few entries copies word by word, where a
  // memcpy of a length not known here would be a library call.
  void add_dims(const Dims& dims) {
    add_int(static_cast<int64_t>(dims.size()));
    for (int64_t d : dims) add_int(d);
  }
  void add(const void* bytes, size_t n) {
    if (used_ + n > sizeof buffer_) {
      flush();
      if (n > sizeof buffer_) {
        key_.append(static_cast<const char*>(bytes), n);
        return;
      }
    }
    std::memcpy(buffer_ + used_, bytes, n);
    used_ += n;
  }

  // The key with everything added so far, for code that appends to the string itself.
  std::string& flushed() {
    flush();
    return key_;
  }

 private:
  void flush() {
    if (used_ == 0) return;
    key_.append(buffer_, used_);
    used_ = 0;
  }

  std::string& key_;
  char buffer_[248];
  size_t used_ = 0;
};

}  // namespace tpu::exec
