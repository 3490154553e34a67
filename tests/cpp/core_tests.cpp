// Unit tests of the torch-free layers: builder and printer, compile-options encoder, PJRT binding.
// Run as `core_tests [plugin.so]`; the runtime tests are skipped (and say so) without a plugin.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cache/entry_file.h"
#include "cache/stable_hash.h"
#include "distributed/collective_program.h"
#include "distributed/replica_rendezvous.h"
#include "hlo/builder.h"
#include "lowering/view_access.h"
#include "runtime/compile_options.h"
#include "runtime/runtime.h"

using namespace tpu;

namespace {
int g_failures = 0;
int g_passed = 0;
std::vector<std::pair<std::string, std::function<void()>>>& registry() {
  static std::vector<std::pair<std::string, std::function<void()>>> tests;
  return tests;
}
struct Register {
  Register(const char* name, std::function<void()> fn) { registry().emplace_back(name, fn); }
};
struct Failure {
  std::string what;
};
#define TEST(name) \
  void name();     \
  Register reg_##name(#name, name); \
  void name()
#define EXPECT(cond)                                                                   \
  do {                                                                                 \
    if (!(cond)) throw Failure{std::string(__FILE__ ":") + std::to_string(__LINE__) + \
                               ": " #cond};                                            \
  } while (0)
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
std::string g_plugin;
}  // namespace

TEST(printer_is_deterministic_and_generic) {
  auto build = [] {
    hlo::Builder b;
    auto x = b.parameter({DType::F32, {2, 3}});
    auto y = b.add(x, b.full(1.0, {DType::F32, {2, 3}}));
    auto s = b.reduce(y, b.constant(0.0, DType::F32), {1}, "stablehlo.add");
    return b.module_text({s});
  };
  std::string text = build();
  EXPECT(text == build());
  EXPECT(contains(text, "func.func public @main(%v0: tensor<2x3xf32>) -> (tensor<2xf32>)"));
  EXPECT(contains(text, "\"stablehlo.add\"(%v0, %v2)"));
  EXPECT(contains(text, "dense<0x3F800000> : tensor<f32>"));
  EXPECT(contains(text, "dimensions = array<i64: 1>"));
  EXPECT(contains(text, "^bb0("));
}

TEST(shape_helpers_skip_identities) {
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {4, 5}});
  int64_t before = b.num_ops();
  EXPECT(b.reshape(x, {4, 5}).id == x.id);
  EXPECT(b.transpose(x, {0, 1}).id == x.id);
  EXPECT(b.convert(x, DType::F32).id == x.id);
  EXPECT(b.slice(x, {0, 0}, {4, 5}, {1, 1}).id == x.id);
  EXPECT(b.num_ops() == before);
  auto t = b.transpose(x, {1, 0});
  EXPECT((b.dims(t) == Dims{5, 4}));
  auto s = b.slice(x, {1, 0}, {4, 5}, {2, 2});
  EXPECT((b.dims(s) == Dims{2, 3}));
}

TEST(unreshaped_results_are_the_reshaped_values) {
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {6}});
  auto square = b.transpose(b.reshape(x, {2, 3}), {1, 0});
  auto flat = b.reshape(square, {6});
  auto doubled = b.add(x, x);
  auto results = b.unreshaped({flat, doubled, x});
  EXPECT(results[0].id == square.id);
  EXPECT(results[1].id == doubled.id);
  EXPECT(results[2].id == x.id);
}

TEST(builder_rejects_bad_shapes) {
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {4}});
  auto y = b.parameter({DType::F32, {5}});
  bool threw = false;
  try {
    b.add(x, y);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  EXPECT(threw);
  threw = false;
  try {
    b.reshape(x, {3});
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  EXPECT(threw);
}

TEST(integer_literals_saturate) {
  hlo::Builder b;
  b.constant(1e30, DType::I32);
  b.constant(-1e30, DType::I64);
  std::string text = b.module_text({});
  EXPECT(contains(text, "dense<2147483647> : tensor<i32>"));
  EXPECT(contains(text, "dense<-9223372036854775808> : tensor<i64>"));
}

TEST(compile_options_wire_format) {
  std::string bytes = runtime::encode_compile_options({});
  // field 3, length-delimited, then device_ordinal=-1 as a 10-byte varint.
  EXPECT(static_cast<unsigned char>(bytes[0]) == 0x1A);
  EXPECT(static_cast<unsigned char>(bytes[2]) == 0x08);
  std::string v;
  runtime::append_varint(v, 300);
  EXPECT(v.size() == 2 && static_cast<unsigned char>(v[0]) == 0xAC && v[1] == 0x02);
  EXPECT(static_cast<unsigned char>(bytes[bytes.size() - 2]) == 0x20);  // portable flag
}

TEST(compile_option_overrides_are_map_entries_of_field_7) {
  runtime::CompileOptions options;
  options.overrides = {{"xla_flag_a", runtime::OptionOverride::Kind::Int, 0},
                       {"b", runtime::OptionOverride::Kind::Bool, 1}};
  std::string bytes = runtime::encode_compile_options(options);
  std::string plain = runtime::encode_compile_options({});
  EXPECT(bytes.compare(0, plain.size(), plain) == 0);
  // Field 7 (0x3A), entry {key = 1 (0x0A) "b", value = 2 (0x12) {bool_field = 2 (0x10) 1}}.
  const std::string bool_entry("\x3A\x07\x0A\x01" "b" "\x12\x02\x10\x01", 9);
  EXPECT(bytes.size() >= bool_entry.size());
  EXPECT(bytes.compare(bytes.size() - bool_entry.size(), bool_entry.size(), bool_entry) == 0);
  // The int override: int_field = 3 (0x18), 0.
  EXPECT(contains(bytes, std::string("\x0A\x0A" "xla_flag_a" "\x12\x02\x18\x00", 16)));
}

TEST(compile_options_name_the_replicas_devices) {
  runtime::CompileOptions options;
  options.num_replicas = 2;
  options.replica_devices = {5, 3};
  std::string bytes = runtime::encode_compile_options(options);
  // device_assignment (field 9, length-delimited) holds replica_count 2, computation_count 1 and
  // one computation whose replica_device_ids are 5 then 3.
  std::string assignment = std::string("\x4A\x0A\x08\x02\x10\x01\x1A\x04\x08\x05\x08\x03", 12);
  EXPECT(contains(bytes, assignment));
  EXPECT(static_cast<unsigned char>(bytes[bytes.size() - 2]) != 0x20);  // never portable
}

TEST(collective_programs_name_their_replica_group) {
  distributed::CollectiveSpec spec;
  spec.replicas = 2;
  spec.input = {DType::F32, {2, 3}};
  spec.reduction = distributed::Reduction::Average;
  std::string all_reduce = distributed::collective_module(spec);
  EXPECT(contains(all_reduce, "\"stablehlo.all_reduce\""));
  EXPECT(contains(all_reduce, "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>"));
  EXPECT(contains(all_reduce, "mhlo.num_replicas = 2"));
  EXPECT(contains(all_reduce, "stablehlo.divide"));  // the average
  spec.kind = distributed::CollectiveKind::AllGather;
  EXPECT(distributed::collective_output_numel(spec) == 12);
  EXPECT(contains(distributed::collective_module(spec), "-> tensor<12xf32>"));
  spec.kind = distributed::CollectiveKind::ReduceScatter;
  spec.input = {DType::F32, {5}};
  bool threw = false;
  try {
    distributed::collective_module(spec);
  } catch (const std::invalid_argument& e) {
    threw = contains(e.what(), "do not split into 2 equal parts");
  }
  EXPECT(threw);
  spec.kind = distributed::CollectiveKind::AllReduce;
  spec.input = {DType::Bool, {4}};
  spec.reduction = distributed::Reduction::Sum;
  EXPECT(contains(distributed::collective_module(spec), "xi32>"));  // bool is reduced as 0 / 1
  EXPECT(distributed::describe(spec) == "all_reduce(sum) of i1[4]");
}

TEST(runtime_compiles_and_runs_on_every_device) {
  if (g_plugin.empty()) {
    std::printf("  (skipped: no plugin path given on the command line)\n");
    return;
  }
  runtime::set_plugin_candidates({{"cpu", g_plugin}});
  auto& client = runtime::Client::get();
  EXPECT(client.device_count() >= 2);
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {3}});
  auto y = b.mul(x, x);
  auto exe = client.compile(b.module_text({y}));
  float host[3] = {1, 2, 3};
  for (int device = 0; device < client.device_count(); ++device) {
    auto in = client.from_host(host, {DType::F32, {3}}, device);
    auto result = client.execute(*exe, device, {in.get()}, {{DType::F32, {3}}});
    client.wait(result.done);
    float out[3];
    client.to_host(*result.outputs[0], out);
    EXPECT(out[0] == 1 && out[1] == 4 && out[2] == 9);
    auto moved = client.copy_to_device(*result.outputs[0], (device + 1) % client.device_count());
    float again[3];
    client.to_host(*moved, again);
    EXPECT(again[2] == 9);
  }
}

TEST(a_result_in_its_own_shape_serves_as_a_flat_parameter) {
  if (g_plugin.empty()) return;
  auto& client = runtime::Client::get();
  if (!client.buffers_reshape_freely()) return;
  hlo::Builder first;
  auto x = first.parameter({DType::F32, {6}});
  auto transposed = first.transpose(first.reshape(x, {2, 3}), {1, 0});
  auto produce = client.compile(first.module_text(first.unreshaped({first.reshape(transposed, {6})})));
  hlo::Builder second;
  auto flat = second.parameter({DType::F32, {6}});
  auto consume = client.compile(second.module_text({second.add(flat, flat)}));
  float host[6] = {0, 1, 2, 3, 4, 5};
  auto in = client.from_host(host, {DType::F32, {6}}, 0);
  auto produced = client.execute(*produce, 0, {in.get()}, {{DType::F32, {6}}});
  auto consumed = client.execute(*consume, 0, {produced.outputs[0].get()}, {{DType::F32, {6}}});
  client.wait(consumed.done);
  float out[6];
  client.to_host(*consumed.outputs[0], out);
  const float expected[6] = {0, 6, 2, 8, 4, 10};  // [[0,1,2],[3,4,5]] transposed, row-major, doubled
  for (int i = 0; i < 6; ++i) EXPECT(out[i] == expected[i]);
}

// Runs a one-parameter program on `input` and returns its one f32 result.
std::vector<float> run_f32(const std::string& text, const std::vector<float>& input,
                           const std::vector<int64_t>& scalars, const TensorType& result, bool quick) {
  auto& client = runtime::Client::get();
  auto exe = quick ? client.compile_quick(text) : client.compile(text);
  auto in = client.from_host(input.data(), {DType::F32, {static_cast<int64_t>(input.size())}}, 0);
  std::vector<runtime::BufferPtr> keep{in};
  std::vector<const runtime::Buffer*> arguments{in.get()};
  for (int64_t value : scalars) {
    keep.push_back(client.from_host(&value, {DType::I64, {}}, 0));
    arguments.push_back(keep.back().get());
  }
  auto out = client.execute(*exe, 0, arguments, {result});
  client.wait(out.done);
  std::vector<float> host(static_cast<size_t>(numel(result.dims)));
  client.to_host(*out.outputs[0], host.data());
  return host;
}

TEST(quick_compiles_compute_what_full_compiles_do) {
  if (g_plugin.empty()) return;
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {64}});
  auto y = b.reduce(b.mul(b.unary("stablehlo.exponential", x), x), b.constant(0, DType::F32), {0}, "stablehlo.add");
  std::string text = b.module_text({y});
  std::vector<float> input(64);
  for (int i = 0; i < 64; ++i) input[i] = 0.01f * static_cast<float>(i);
  auto quick = run_f32(text, input, {}, {DType::F32, {}}, true);
  auto full = run_f32(text, input, {}, {DType::F32, {}}, false);
  EXPECT(std::fabs(quick[0] - full[0]) <= 1e-4f * std::fabs(full[0]));
  EXPECT(runtime::Client::get().quick_compiles());
}

// Every placement kind (contiguous range, strided slice, permutation, broadcast, gather) read and
// written at a runtime offset gives what the same view with its offset as a constant gives.
TEST(views_at_runtime_offsets_equal_views_at_constant_offsets) {
  if (g_plugin.empty()) return;
  struct Case {
    Dims sizes, strides;
  };
  const std::vector<Case> cases = {{{2, 3}, {3, 1}}, {{3, 2}, {6, 2}}, {{3, 4}, {1, 3}}, {{3, 4}, {0, 1}},
                                   {{2, 2}, {5, 3}}, {{4}, {7}}};
  std::vector<float> base(48);
  for (int i = 0; i < 48; ++i) base[i] = static_cast<float>(i);
  for (const Case& c : cases) {
    for (int64_t offset : {0, 1, 4, 9}) {
      lowering::ViewLayout layout{c.sizes, c.strides, offset};
      if (!lowering::offset_is_runtime(layout, 48)) continue;
      for (bool write : {false, true}) {
        if (write && (c.strides[0] == 0 || c.strides[1 % c.strides.size()] == 0)) continue;
        auto build = [&](bool runtime) {
          hlo::Builder b;
          auto x = b.parameter({DType::F32, {48}});
          hlo::Value start = runtime ? b.parameter({DType::I64, {}}) : hlo::Value{};
          auto view = lowering::read_view(b, x, layout, start);
          if (!write) return b.module_text({view});
          auto doubled = b.add(view, view);
          return b.module_text({lowering::write_view(b, x, doubled, layout, start)});
        };
        TensorType result{DType::F32, write ? Dims{48} : c.sizes};
        auto constant = run_f32(build(false), base, {}, result, true);
        auto runtime = run_f32(build(true), base, {offset}, result, true);
        EXPECT(constant == runtime);
      }
    }
  }
}

// A padded view whose strides are constants, read and written as a (strided) range, gives what
// the element-by-element gather and scatter give; a write leaves what its padding covers as it was.
TEST(padded_views_as_ranges_equal_padded_views_by_element) {
  if (g_plugin.empty()) return;
  struct Case {
    Dims real, bucket, strides;
    uint64_t padded;
    int64_t offset;
  };
  // Rows of a [n, 12] storage (q of a split qkv), a transposed [n, 2, 2] head view, a row slice.
  const std::vector<Case> cases = {{{3, 4}, {4, 4}, {12, 1}, 1, 0},
                                   {{3, 4}, {4, 4}, {12, 1}, 1, 8},
                                   {{2, 3, 2}, {2, 4, 2}, {2, 4, 1}, 2, 0},
                                   {{5}, {8}, {3}, 1, 1}};
  std::vector<float> base(48);
  for (int i = 0; i < 48; ++i) base[i] = static_cast<float>(i);
  for (const Case& c : cases) {
    EXPECT(lowering::fits_window(c.bucket, c.strides, c.offset, 48, true));
    for (bool write : {false, true}) {
      auto build = [&](bool window) {
        hlo::Builder b;
        auto x = b.parameter({DType::F32, {48}});
        lowering::RuntimeLayout layout{c.bucket, c.padded, false, window ? c.strides : Dims{}, {}, {}, {}};
        layout.offset = b.parameter({DType::I64, {}});
        for (size_t d = 0; d < c.bucket.size(); ++d) layout.runtime_sizes.push_back(b.parameter({DType::I64, {}}));
        for (size_t d = 0; d < c.bucket.size(); ++d) layout.strides.push_back(b.parameter({DType::I64, {}}));
        auto view = lowering::read_padded_view(b, x, layout, 0.0);
        if (!write) return b.module_text({view});
        return b.module_text({lowering::write_padded_view(b, x, b.add(view, b.full(100.0, b.type(view))), layout)});
      };
      std::vector<int64_t> scalars{c.offset};
      scalars.insert(scalars.end(), c.real.begin(), c.real.end());
      scalars.insert(scalars.end(), c.strides.begin(), c.strides.end());
      TensorType result{DType::F32, write ? Dims{48} : c.bucket};
      EXPECT(run_f32(build(true), base, scalars, result, true) == run_f32(build(false), base, scalars, result, true));
    }
  }
  // A bucket that would reach past the storage from its offset is not a range.
  EXPECT(!lowering::fits_window({8}, {3}, 30, 48, false));
}

TEST(runtime_reports_compile_errors_with_pjrt_message) {
  if (g_plugin.empty()) return;
  auto& client = runtime::Client::get();
  bool threw = false;
  try {
    client.compile("module { this is not mlir }");
  } catch (const runtime::PjrtError& e) {
    threw = contains(e.what(), "XLA compilation failed");
  }
  EXPECT(threw);
}

TEST(replicas_meet_and_reduce_across_devices) {
  if (g_plugin.empty()) return;
  auto& client = runtime::Client::get();
  distributed::CollectiveSpec spec;
  spec.replicas = 2;
  spec.input = {DType::F32, {3}};
  auto rendezvous = distributed::ReplicaRendezvous::join("core_tests", 2);
  std::vector<runtime::BufferPtr> results(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      float host[3] = {1.0f + rank, 2.0f, 3.0f * rank};
      auto in = client.from_host(host, spec.input, rank);
      results[rank] = rendezvous->run(rank, 1, spec, in, rank, std::chrono::seconds(30));
    });
  }
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT(results[rank] && results[rank]->device() == rank);
    float out[3];
    client.to_host(*results[rank], out);
    EXPECT(out[0] == 3 && out[1] == 4 && out[2] == 3);
  }
  // Two ranks on one device cannot run one replicated program: both are told to go another way.
  std::vector<std::thread> crowded;
  for (int rank = 0; rank < 2; ++rank) {
    crowded.emplace_back([&, rank] {
      float host[3] = {1, 2, 3};
      results[rank] = rendezvous->run(rank, 2, spec, client.from_host(host, spec.input, 0), 0,
                                      std::chrono::seconds(30));
    });
  }
  for (auto& t : crowded) t.join();
  EXPECT(!results[0] && !results[1]);
}

TEST(cache_entry_round_trip_and_damage) {
  cache::Program program;
  program.parameters = {{cache::Program::Parameter::Source::Storage, 0},
                        {cache::Program::Parameter::Source::Number, 3},
                        {cache::Program::Parameter::Source::RngState, 1}};
  program.output_types = {{DType::F32, {2, 3}}, {DType::I64, {}}};
  program.output_storages = {0, 2};
  program.output_dtypes = {DType::F32, DType::BF16};
  program.quick = std::make_shared<cache::Program::QuickTier>();
  program.quick->text = "module {}";
  program.quick->elements_per_run = 6;
  const std::string key = std::string("prefix\0program", 14);
  const std::string bytes = cache::encode_entry(key, program, "EXECUTABLE");

  cache::Program back;
  std::string executable;
  EXPECT(cache::decode_entry(bytes, key, back, executable).empty());
  EXPECT(executable == "EXECUTABLE");
  EXPECT(back.parameters.size() == 3 && back.parameters[1].index == 3 &&
         back.parameters[2].source == cache::Program::Parameter::Source::RngState);
  EXPECT(back.output_types == program.output_types);
  EXPECT(back.output_storages == program.output_storages && back.output_dtypes == program.output_dtypes);
  // A quick program loaded from the disk can still be upgraded: it keeps its text and its work.
  EXPECT(back.quick && back.quick->text == "module {}" && back.quick->elements_per_run == 6);

  EXPECT(contains(cache::decode_entry(bytes.substr(0, bytes.size() - 1), key, back, executable), "truncated"));
  EXPECT(contains(cache::decode_entry(bytes.substr(0, 10), key, back, executable), "truncated"));
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 1;
  EXPECT(contains(cache::decode_entry(flipped, key, back, executable), "checksum"));
  std::string foreign = bytes;
  foreign[8] = 7;
  EXPECT(contains(cache::decode_entry(foreign, key, back, executable), "format 7"));
  EXPECT(contains(cache::decode_entry(bytes, key + "x", back, executable), "another program"));
  EXPECT(cache::decode_entry(bytes, "", back, executable).empty());
  EXPECT(cache::fnv1a64(std::string("a")) == 0xaf63dc4c8601ec8cULL);
}

int main(int argc, char** argv) {
  if (argc > 1) g_plugin = argv[1];
  for (auto& [name, fn] : registry()) {
    try {
      fn();
      ++g_passed;
      std::printf("PASS %s\n", name.c_str());
    } catch (const Failure& f) {
      ++g_failures;
      std::printf("FAIL %s: %s\n", name.c_str(), f.what.c_str());
    } catch (const std::exception& e) {
      ++g_failures;
      std::printf("FAIL %s: exception %s\n", name.c_str(), e.what());
    }
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failures);
  return g_failures ? 1 : 0;
}
