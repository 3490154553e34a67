// KeyBytes (exec/key_bytes.h): the stack buffer keys are built through. Each test builds the same
// fields into a std::string one append at a time and checks that the bytes agree, below, across
// and past the buffer's size.
#include <string>

#include "exec/key_bytes.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::exec;
using namespace tpu::testing;

namespace {

void append_int(std::string& key, int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }

// `fields` of each kind, added in turn to the buffer and to a plain string.
std::pair<std::string, std::string> built(int fields, const std::string& prefix = "") {
  std::string through_buffer = prefix, plain = prefix;
  {
    KeyBytes bytes(through_buffer);
    for (int i = 0; i < fields; ++i) {
      bytes.add_char(static_cast<char>('a' + i % 26));
      plain.push_back(static_cast<char>('a' + i % 26));
      bytes.add_int(i * 1000003LL);
      append_int(plain, i * 1000003LL);
      Dims dims;
      for (int d = 0; d < i % 9; ++d) dims.push_back(d - i);
      bytes.add_dims(dims);
      append_int(plain, static_cast<int64_t>(dims.size()));
      for (int64_t d : dims) append_int(plain, d);
      std::string text(static_cast<size_t>(i % 5), 'x');
      bytes.add_text(text);
      plain += text;
    }
  }
  return {through_buffer, plain};
}

}  // namespace

TEST(key_bytes_equal_the_fields_appended_one_by_one) {
  for (int fields : {0, 1, 3, 10, 200}) {
    auto [through_buffer, plain] = built(fields, "prefix:");
    EXPECT(through_buffer == plain);
  }
}

TEST(key_bytes_take_a_field_larger_than_the_buffer) {
  std::string key, plain;
  const std::string large(1000, 'q');
  {
    KeyBytes bytes(key);
    bytes.add_char('<');
    bytes.add_text(large);
    bytes.add_char('>');
  }
  plain = "<" + large + ">";
  EXPECT(key == plain);
}

TEST(key_bytes_flushed_gives_the_key_so_far) {
  std::string key = "k";
  KeyBytes bytes(key);
  bytes.add_char('1');
  bytes.add_int(7);
  std::string& so_far = bytes.flushed();
  EXPECT(&so_far == &key);
  EXPECT(so_far.size() == 1 + 1 + sizeof(int64_t));
  so_far.push_back('!');  // appended directly: what the buffer adds next comes after it
  bytes.add_char('2');
  EXPECT(bytes.flushed() == std::string("k1") + std::string("\x07\0\0\0\0\0\0\0", 8) + "!2");
}
