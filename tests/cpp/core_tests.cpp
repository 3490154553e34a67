// Unit tests of the torch-free layers: builder and printer, compile-options encoder, PJRT binding,
// collective programs. The lowerings, views, program keys and cache have files of their own
// (test_*.cpp), linked into the same binary.
// Run as `core_tests [plugin.so]`; the runtime tests are skipped (and say so) without a plugin.
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "distributed/collective_program.h"
#include "distributed/replica_rendezvous.h"
#include "hlo/builder.h"
#include "runtime/compile_options.h"
#include "runtime/runtime.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::testing;

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
  REQUIRE_PLUGIN();
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
  REQUIRE_PLUGIN();
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

TEST(quick_compiles_compute_what_full_compiles_do) {
  REQUIRE_PLUGIN();
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

TEST(runtime_reports_compile_errors_with_pjrt_message) {
  REQUIRE_PLUGIN();
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
  REQUIRE_PLUGIN();
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

int main(int argc, char** argv) { return run_all_tests(argc, argv); }
