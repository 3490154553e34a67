// The runner the torch-free unit tests share: TEST registers a test, EXPECT fails it, and helpers
// run programs on the CPU plugin given on the command line (tests that need one skip without it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runtime/runtime.h"

namespace tpu::testing {

struct Failure {
  std::string what;
};

inline std::vector<std::pair<std::string, std::function<void()>>>& registry() {
  static std::vector<std::pair<std::string, std::function<void()>>> tests;
  return tests;
}

struct Register {
  Register(const char* name, std::function<void()> fn) { registry().emplace_back(name, std::move(fn)); }
};

inline std::string& plugin_path() {
  static std::string path;
  return path;
}

// Whether the command line named a plugin, so that programs can be compiled and run.
inline bool have_plugin() { return !plugin_path().empty(); }

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Relative for large values, absolute near zero: results of float programs and double loops differ
// in rounding only.
inline bool close(double actual, double expected, double tolerance = 1e-5) {
  if (std::isnan(expected)) return std::isnan(actual);
  return std::fabs(actual - expected) <= tolerance * std::max(1.0, std::fabs(expected));
}

// Deterministic values in [-1, 1) that differ from one another, so that a misplaced element shows.
inline std::vector<float> sample(size_t n, uint32_t seed) {
  std::vector<float> out(n);
  uint32_t state = seed * 2654435761u + 1;
  for (auto& v : out) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return out;
}

// A host array with its type: a program's argument or result.
struct HostTensor {
  TensorType type;
  std::vector<unsigned char> bytes;

  template <typename T>
  static HostTensor of(DType dtype, const Dims& dims, const std::vector<T>& values) {
    HostTensor t{{dtype, dims}, std::vector<unsigned char>(values.size() * sizeof(T))};
    if (static_cast<int64_t>(values.size()) != numel(dims) || static_cast<int64_t>(sizeof(T)) != itemsize(dtype)) {
      throw std::invalid_argument("HostTensor: values do not match the type");
    }
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
  }
  template <typename T>
  std::vector<T> values() const {
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
  }
};

// Compiles `text` and runs it on device 0 with `arguments`; returns its results, read back.
inline std::vector<HostTensor> run_program(const std::string& text, const std::vector<HostTensor>& arguments,
                                           const std::vector<TensorType>& result_types, bool quick = true) {
  auto& client = runtime::Client::get();
  auto exe = quick ? client.compile_quick(text) : client.compile(text);
  std::vector<runtime::BufferPtr> keep;
  std::vector<const runtime::Buffer*> raw;
  for (const HostTensor& a : arguments) {
    keep.push_back(client.from_host(a.bytes.data(), a.type, 0));
    raw.push_back(keep.back().get());
  }
  auto out = client.execute(*exe, 0, raw, result_types);
  client.wait(out.done);
  std::vector<HostTensor> results;
  for (size_t i = 0; i < result_types.size(); ++i) {
    HostTensor r{result_types[i], std::vector<unsigned char>(out.outputs[i]->nbytes())};
    client.to_host(*out.outputs[i], r.bytes.data());
    results.push_back(std::move(r));
  }
  return results;
}

// Runs a program of one flat f32 parameter followed by rank-0 i64 ones (offsets, sizes, strides)
// and returns its one f32 result.
inline std::vector<float> run_f32(const std::string& text, const std::vector<float>& input,
                                  const std::vector<int64_t>& scalars, const TensorType& result, bool quick = true) {
  std::vector<HostTensor> arguments{HostTensor::of(DType::F32, {static_cast<int64_t>(input.size())}, input)};
  for (int64_t value : scalars) arguments.push_back(HostTensor::of(DType::I64, {}, std::vector<int64_t>{value}));
  return run_program(text, arguments, {result}, quick)[0].values<float>();
}

inline int run_all_tests(int argc, char** argv) {
  if (argc > 1) plugin_path() = argv[1];
  // Programs made here are never worth keeping: nothing the tests insert reaches the user's cache
  // directory, and a lookup never needs the plugin to name its context.
  setenv("TORCH_TPU_CACHE_DIR", "", 1);
  if (have_plugin()) runtime::set_plugin_candidates({{"cpu", plugin_path()}});
  int failed = 0, passed = 0;
  for (auto& [name, fn] : registry()) {
    try {
      fn();
      ++passed;
      std::printf("PASS %s\n", name.c_str());
    } catch (const Failure& f) {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), f.what.c_str());
    } catch (const std::exception& e) {
      ++failed;
      std::printf("FAIL %s: exception %s\n", name.c_str(), e.what());
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

}  // namespace tpu::testing

#define TPU_TEST_CAT2(a, b) a##b
#define TPU_TEST_CAT(a, b) TPU_TEST_CAT2(a, b)
// Test names are file-local, so two files may not clash; the runner runs them in link order.
#define TEST(name)                                                   \
  static void name();                                                \
  static ::tpu::testing::Register TPU_TEST_CAT(reg_, name)(#name, name); \
  static void name()
#define EXPECT(cond)                                                                                        \
  do {                                                                                                      \
    if (!(cond)) throw ::tpu::testing::Failure{std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond}; \
  } while (0)
// Skips the rest of a test that must compile and run programs when no plugin was given.
#define REQUIRE_PLUGIN()                                                  \
  do {                                                                    \
    if (!::tpu::testing::have_plugin()) {                                 \
      std::printf("  (skipped: no plugin path given on the command line)\n"); \
      return;                                                             \
    }                                                                     \
  } while (0)
