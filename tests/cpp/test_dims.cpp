// Dims (hlo/dims.h): the small vector of sizes and strides. Each test compares it with what
// std::vector<int64_t> does for the same calls, inline and past the inline capacity.
#include <numeric>
#include <vector>

#include "hlo/dims.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::testing;

namespace {

std::vector<int64_t> as_vector(const Dims& dims) { return std::vector<int64_t>(dims.begin(), dims.end()); }

std::vector<int64_t> counting(size_t n, int64_t from) {
  std::vector<int64_t> values(n);
  std::iota(values.begin(), values.end(), from);
  return values;
}

}  // namespace

TEST(dims_grow_past_the_inline_capacity_and_keep_their_values) {
  for (size_t n : {size_t{0}, size_t{1}, Dims::kInlineCapacity, Dims::kInlineCapacity + 1, size_t{40}}) {
    Dims dims;
    std::vector<int64_t> expected;
    for (size_t i = 0; i < n; ++i) {
      dims.push_back(static_cast<int64_t>(i * 3));
      expected.push_back(static_cast<int64_t>(i * 3));
    }
    EXPECT(as_vector(dims) == expected);
    EXPECT(dims.size() == n && dims.empty() == (n == 0));
    EXPECT(dims.capacity() >= n);
  }
}

TEST(dims_copy_and_move_inline_and_on_the_heap) {
  for (size_t n : {size_t{3}, size_t{9}}) {
    const std::vector<int64_t> values = counting(n, 5);
    Dims original(values);
    Dims copied(original);
    EXPECT(copied == original && as_vector(copied) == values);
    copied[0] = -1;
    EXPECT(original[0] == 5);  // a copy owns its elements

    Dims moved(std::move(copied));
    EXPECT(moved.size() == n && moved[0] == -1 && copied.empty());
    copied.push_back(7);  // a moved-from Dims is usable
    EXPECT(copied.size() == 1 && copied[0] == 7);

    Dims assigned{1, 2};
    assigned = original;
    EXPECT(assigned == original);
    assigned = std::move(moved);
    EXPECT(assigned.size() == n && assigned[0] == -1);
    assigned = assigned;  // self-assignment keeps the value
    EXPECT(assigned.size() == n && assigned[0] == -1);
  }
}

TEST(dims_edit_like_std_vector) {
  for (size_t n : {size_t{4}, size_t{10}}) {
    std::vector<int64_t> expected = counting(n, 1);
    Dims dims(expected.begin(), expected.end());

    dims.insert(dims.begin() + 1, 100);
    expected.insert(expected.begin() + 1, 100);
    dims.insert(dims.end(), 2, 7);
    expected.insert(expected.end(), 2, 7);
    dims.insert(dims.begin(), dims.begin() + 2, dims.begin() + 4);  // a range from itself
    const std::vector<int64_t> inserted(expected.begin() + 2, expected.begin() + 4);
    expected.insert(expected.begin(), inserted.begin(), inserted.end());
    EXPECT(as_vector(dims) == expected);

    dims.erase(dims.begin() + 2);
    expected.erase(expected.begin() + 2);
    dims.erase(dims.begin(), dims.begin() + 3);
    expected.erase(expected.begin(), expected.begin() + 3);
    EXPECT(as_vector(dims) == expected);

    dims.resize(dims.size() + 5, 9);
    expected.resize(expected.size() + 5, 9);
    dims.resize(2);
    expected.resize(2);
    dims.pop_back();
    expected.pop_back();
    EXPECT(as_vector(dims) == expected);

    dims.assign(12, 4);
    EXPECT(as_vector(dims) == std::vector<int64_t>(12, 4));
    dims.clear();
    EXPECT(dims.empty());
  }
}

TEST(dims_compare_and_convert_like_the_vector_they_replace) {
  const Dims a{2, 3, 4};
  const Dims b{2, 3, 5};
  const Dims longer{2, 3, 4, 1};
  EXPECT(a != b && a < b && a < longer && !(longer < a) && a == Dims({2, 3, 4}));
  EXPECT((a < b) == (as_vector(a) < as_vector(b)));
  EXPECT(Dims(3) == Dims({0, 0, 0}) && Dims(2, 8) == Dims({8, 8}));

  std::vector<int64_t> round_trip = a;
  EXPECT(round_trip == std::vector<int64_t>({2, 3, 4}) && a.vec() == round_trip);
  EXPECT(a == round_trip);  // compares with a vector through the conversion

  Dims swapped_heap(counting(8, 0));
  Dims swapped_inline{1};
  swapped_heap.swap(swapped_inline);
  EXPECT(swapped_heap == Dims({1}) && as_vector(swapped_inline) == counting(8, 0));
  EXPECT(std::vector<int64_t>(a.rbegin(), a.rend()) == std::vector<int64_t>({4, 3, 2}));
}
