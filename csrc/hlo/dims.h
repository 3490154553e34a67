// Dims: the sizes or strides of a tensor. A vector of int64 that keeps up to six elements inside
// itself and goes to the heap only beyond that.
//
// Why not std::vector: every op the executor records or launches describes each operand by its
// sizes and strides, and each of those was a heap allocation. In an optimizer step over a
// thousand operands, malloc and free were a sixth of the host's recording time. Tensors of rank
// above six are rare enough that their allocation does not matter.
//
// It converts to and from std::vector<int64_t> implicitly, so that code written against the
// vector (and torch's IntArrayRef, which takes any container with data() and size()) keeps working.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace tpu {

class Dims {
 public:
  using value_type = int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  static constexpr size_type kInlineCapacity = 6;

  Dims() noexcept = default;
  explicit Dims(size_type count) { assign(count, 0); }
  Dims(size_type count, int64_t value) { assign(count, value); }
  Dims(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  template <typename Iterator, typename = std::enable_if_t<!std::is_integral_v<Iterator>>>
  Dims(Iterator first, Iterator last) {
    assign(first, last);
  }
  Dims(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }  // NOLINT: implicit
  Dims(const Dims& other) { assign(other.begin(), other.end()); }
  Dims(Dims&& other) noexcept { take(other); }
  ~Dims() { release(); }

  Dims& operator=(const Dims& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Dims& operator=(Dims&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  Dims& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }

  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT
  std::vector<int64_t> vec() const { return *this; }

  size_type size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_type capacity() const { return capacity_; }
  int64_t* data() { return data_; }
  const int64_t* data() const { return data_; }

  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  int64_t& operator[](size_type i) { return data_[i]; }
  const int64_t& operator[](size_type i) const { return data_[i]; }
  int64_t& at(size_type i) {
    if (i >= size_) throw std::out_of_range("Dims::at: index " + std::to_string(i) + " of " + std::to_string(size_));
    return data_[i];
  }
  const int64_t& at(size_type i) const { return const_cast<Dims*>(this)->at(i); }
  int64_t& front() { return data_[0]; }
  const int64_t& front() const { return data_[0]; }
  int64_t& back() { return data_[size_ - 1]; }
  const int64_t& back() const { return data_[size_ - 1]; }

  void reserve(size_type count) {
    if (count > capacity_) grow_to(count);
  }
  void clear() { size_ = 0; }
  void push_back(int64_t value) {
    if (size_ == capacity_) grow_to(size_ + 1);
    data_[size_++] = value;
  }
  int64_t& emplace_back(int64_t value) {
    push_back(value);
    return back();
  }
  void pop_back() { --size_; }
  void resize(size_type count, int64_t value = 0) {
    reserve(count);
    if (count > size_) std::fill(data_ + size_, data_ + count, value);
    size_ = static_cast<uint32_t>(count);
  }

  void assign(size_type count, int64_t value) {
    size_ = 0;
    resize(count, value);
  }
  template <typename Iterator, typename = std::enable_if_t<!std::is_integral_v<Iterator>>>
  void assign(Iterator first, Iterator last) {
    const auto count = static_cast<size_type>(std::distance(first, last));
    size_ = 0;
    reserve(count);
    std::copy(first, last, data_);
    size_ = static_cast<uint32_t>(count);
  }
  void assign(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }

  iterator insert(const_iterator position, int64_t value) { return insert(position, size_type{1}, value); }
  iterator insert(const_iterator position, size_type count, int64_t value) {
    const size_type at = open_gap(position, count);
    std::fill(data_ + at, data_ + at + count, value);
    return data_ + at;
  }
  template <typename Iterator, typename = std::enable_if_t<!std::is_integral_v<Iterator>>>
  iterator insert(const_iterator position, Iterator first, Iterator last) {
    // Copied first: the range may lie inside this vector, which the gap moves or reallocates.
    const Dims values(first, last);
    const size_type at = open_gap(position, values.size());
    std::copy(values.begin(), values.end(), data_ + at);
    return data_ + at;
  }
  iterator insert(const_iterator position, std::initializer_list<int64_t> values) {
    return insert(position, values.begin(), values.end());
  }

  iterator erase(const_iterator position) { return erase(position, position + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto at = static_cast<size_type>(first - data_);
    const auto count = static_cast<size_type>(last - first);
    std::copy(data_ + at + count, data_ + size_, data_ + at);
    size_ -= static_cast<uint32_t>(count);
    return data_ + at;
  }

  void swap(Dims& other) noexcept {
    Dims held(std::move(other));
    other = std::move(*this);
    *this = std::move(held);
  }

  friend bool operator==(const Dims& a, const Dims& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }
  friend bool operator<(const Dims& a, const Dims& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator>(const Dims& a, const Dims& b) { return b < a; }
  friend bool operator<=(const Dims& a, const Dims& b) { return !(b < a); }
  friend bool operator>=(const Dims& a, const Dims& b) { return !(a < b); }

 private:
  bool on_heap() const { return data_ != inline_; }

  void release() {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    size_ = 0;
    capacity_ = kInlineCapacity;
  }

  // Leaves `other` empty and inline.
  void take(Dims& other) noexcept {
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
    } else {
      std::memcpy(inline_, other.inline_, other.size_ * sizeof(int64_t));
    }
    size_ = other.size_;
    other.data_ = other.inline_;
    other.size_ = 0;
    other.capacity_ = kInlineCapacity;
  }

  void grow_to(size_type count) {
    const size_type new_capacity = std::max<size_type>(count, 2 * capacity_);
    auto* grown = new int64_t[new_capacity];
    std::memcpy(grown, data_, size_ * sizeof(int64_t));
    if (on_heap()) delete[] data_;
    data_ = grown;
    capacity_ = static_cast<uint32_t>(new_capacity);
  }

  // Makes room for `count` elements at `position`; returns the index where they go.
  size_type open_gap(const_iterator position, size_type count) {
    const auto at = static_cast<size_type>(position - data_);
    reserve(size_ + count);
    std::copy_backward(data_ + at, data_ + size_, data_ + size_ + count);
    size_ += static_cast<uint32_t>(count);
    return at;
  }

  int64_t* data_ = inline_;
  uint32_t size_ = 0;
  uint32_t capacity_ = kInlineCapacity;
  int64_t inline_[kInlineCapacity];
};

}  // namespace tpu
