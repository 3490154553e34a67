// exec/program_key: a program's key holds everything that shapes its program (op, static
// arguments, dtypes, sizes, strides, storage lengths and positions, how each view is placed) and
// nothing that is a runtime argument (numbers, the offsets of views placed at run time), so that
// equal keys may share one compiled program and x[i] for every i is one program.
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/padding.h"
#include "exec/program_key.h"
#include "exec/storage_state.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::testing;

namespace {

using lowering::Arg;
using Kind = Arg::Kind;

exec::StoragePtr storage_of(int64_t elements) {
  auto s = std::make_shared<exec::Storage>(0, elements * itemsize(DType::F32));
  exec::state_of(*s).dtype = DType::F32;
  return s;
}

exec::TensorView view_of(exec::StoragePtr storage, const Dims& sizes, const Dims& strides, int64_t offset = 0) {
  return {std::move(storage), DType::F32, {sizes, strides, offset}};
}

// out = x + alpha * y, each a whole [4, 3] storage of its own, followed by one static argument of
// every kind so that each can be varied.
exec::OpCall add_call() {
  exec::OpCall call;
  call.name = "add";
  call.overload = "Tensor";
  call.lowering = lowering::find_lowering("add");
  Arg x, y, alpha, dim, list, flag, text, dtype, scales;
  x.kind = y.kind = Kind::Tensor;
  x.slot = 0;
  y.slot = 1;
  alpha.kind = Kind::Number;
  alpha.slot = 0;
  alpha.weak = true;
  dim.kind = Kind::Int;
  dim.i = 1;
  list.kind = Kind::IntList;
  list.ints = {2, 3};
  flag.kind = Kind::Bool;
  text.kind = Kind::String;
  text.s = "mean";
  dtype.kind = Kind::ScalarType;
  scales.kind = Kind::DoubleList;
  scales.doubles = {0.5};
  call.args = {x, y, alpha, dim, list, flag, text, dtype, scales};
  call.inputs = {view_of(storage_of(12), {4, 3}, {3, 1}), view_of(storage_of(12), {4, 3}, {3, 1})};
  call.numbers = {{DType::F64, 2.0, 0}};
  call.outputs = {{DType::F32, {4, 3}}};
  call.destinations = {view_of(storage_of(12), {4, 3}, {3, 1})};
  return call;
}

struct Keyed {
  std::string key;
  std::vector<int64_t> offsets;
};

Keyed key_of(const exec::OpCall& call) {
  Keyed k;
  exec::StorageSet storages;
  exec::append_call_key(k.key, call, storages, k.offsets);
  return k;
}

}  // namespace

TEST(keys_are_the_same_for_calls_built_alike) {
  Keyed first = key_of(add_call());
  EXPECT(!first.key.empty());
  for (int i = 0; i < 3; ++i) {
    Keyed again = key_of(add_call());  // other storages, same structure
    EXPECT(again.key == first.key && again.offsets == first.offsets);
  }
  exec::OpCall call = add_call();
  EXPECT(key_of(call).key == key_of(call).key);  // a storage stamped by an earlier set is new to the next
  EXPECT(first.offsets.empty());                 // whole storages: no runtime offsets
}

TEST(keys_change_with_everything_that_shapes_the_program) {
  using Change = std::function<void(exec::OpCall&)>;
  const std::map<std::string, Change> changes = {
      {"op", [](exec::OpCall& c) { c.name = "sub"; }},
      {"overload", [](exec::OpCall& c) { c.overload = "Scalar"; }},
      {"input dtype", [](exec::OpCall& c) { c.inputs[0].dtype = DType::I32; }},
      {"input sizes", [](exec::OpCall& c) { c.inputs[0].layout = {{3, 4}, {4, 1}, 0}; }},
      {"permuted strides", [](exec::OpCall& c) { c.inputs[0].layout = {{4, 3}, {1, 4}, 0}; }},
      // Placed like "runtime-placed view" below, by a runtime offset: only the stride differs.
      {"row stride", [](exec::OpCall& c) { c.inputs[0].layout = {{2, 3}, {6, 1}, 0}; }},
      {"storage length", [](exec::OpCall& c) { c.inputs[0].storage = storage_of(13); }},
      {"storage room", [](exec::OpCall& c) { exec::state_of(*c.inputs[0].storage).spare_bytes = 64; }},
      {"aliased inputs", [](exec::OpCall& c) { c.inputs[1].storage = c.inputs[0].storage; }},
      {"in-place destination", [](exec::OpCall& c) { c.destinations[0].storage = c.inputs[0].storage; }},
      {"no destination", [](exec::OpCall& c) { c.destinations[0].storage = nullptr; }},
      {"output dtype", [](exec::OpCall& c) { c.outputs[0].dtype = DType::F64; }},
      {"output sizes", [](exec::OpCall& c) { c.outputs[0].dims = {12}; }},
      {"number dtype", [](exec::OpCall& c) { c.numbers[0].dtype = DType::I64; }},
      {"number strength", [](exec::OpCall& c) { c.args[2].weak = false; }},
      {"int", [](exec::OpCall& c) { c.args[3].i = 0; }},
      {"int list values", [](exec::OpCall& c) { c.args[4].ints = {3, 2}; }},
      {"int list length", [](exec::OpCall& c) { c.args[4].ints = {2, 3, 1}; }},
      {"bool", [](exec::OpCall& c) { c.args[5].b = true; }},
      {"string", [](exec::OpCall& c) { c.args[6].s = "sum"; }},
      {"scalar type", [](exec::OpCall& c) { c.args[7].dtype = DType::BF16; }},
      {"double list", [](exec::OpCall& c) { c.args[8].doubles = {0.25}; }},
      {"missing argument", [](exec::OpCall& c) { c.args[3] = Arg{}; }},
      // The same [2, 3] view of a 12-element storage placed by a runtime offset (its rows 1-2) and
      // at a constant one (reaching past the storage's end: only a gather reads it).
      {"runtime-placed view", [](exec::OpCall& c) { c.inputs[0].layout = {{2, 3}, {3, 1}, 3}; }},
      {"view past the end", [](exec::OpCall& c) { c.inputs[0].layout = {{2, 3}, {3, 1}, 10}; }},
      {"view further past the end", [](exec::OpCall& c) { c.inputs[0].layout = {{2, 3}, {3, 1}, 11}; }},
  };
  std::map<std::string, std::string> seen{{key_of(add_call()).key, "the unchanged call"}};
  for (const auto& [name, change] : changes) {
    exec::OpCall call = add_call();
    change(call);
    auto [it, fresh] = seen.emplace(key_of(call).key, name);
    if (!fresh) throw Failure{"the key does not tell '" + name + "' from '" + it->second + "'"};
  }
  // Whether a storage holds a value: one that does not is read as zeros, not as a parameter.
  if (have_plugin()) {
    exec::OpCall call = add_call();
    std::vector<float> zeros(12, 0.0f);
    exec::state_of(*call.inputs[0].storage).buffer = runtime::Client::get().from_host(zeros.data(), {DType::F32, {12}}, 0);
    EXPECT(!seen.count(key_of(call).key));
  }
}

TEST(keys_leave_out_runtime_numbers_and_runtime_offsets) {
  Keyed plain = key_of(add_call());
  for (double alpha : {-7.5, 0.0, 1e30, std::nan("")}) {
    exec::OpCall call = add_call();
    call.numbers[0].f = alpha;
    call.numbers[0].i = 12345;
    Keyed k = key_of(call);
    EXPECT(k.key == plain.key && k.offsets.empty());
  }
  // Nor where the user's code called it, nor the random stream's position.
  exec::OpCall elsewhere = add_call();
  static const int code_object = 0;
  elsewhere.location = {&code_object, 12};
  elsewhere.seed = 99;
  elsewhere.offset = 7;
  EXPECT(key_of(elsewhere).key == plain.key);
  // out[i] = x[i] + alpha * y for every row i: one key; the offsets, in for_each_view's order
  // (inputs, then destinations), are the program's runtime arguments.
  std::string row_key;
  for (int64_t i = 0; i < 4; ++i) {
    exec::OpCall call = add_call();
    call.inputs[0].layout = {{3}, {1}, 3 * i};
    call.inputs[1].layout = {{3}, {1}, 0};
    call.outputs[0].dims = {3};
    call.destinations[0].layout = {{3}, {1}, 9 - 3 * i};
    Keyed k = key_of(call);
    if (i == 0) row_key = k.key;
    EXPECT(k.key == row_key);
    EXPECT((k.offsets == std::vector<int64_t>{3 * i, 0, 9 - 3 * i}));
  }
  EXPECT(row_key != plain.key);
}

namespace {

// The add call at `rows` of 3 columns, planned to run at a bucket of `bucket` rows: every view is
// placed by runtime values (offset, sizes, strides), its storage has room for the bucket.
exec::OpCall padded_add(int64_t rows, int64_t bucket) {
  exec::OpCall call = add_call();
  auto fill = [&](exec::TensorView& view) {
    view.storage = storage_of(rows * 3);
    exec::state_of(*view.storage).spare_bytes = (bucket - rows) * 3 * itemsize(DType::F32);
    view.layout = {{rows, 3}, {3, 1}, 0};
  };
  for (auto& view : call.inputs) fill(view);
  fill(call.destinations[0]);
  call.outputs[0].dims = {rows, 3};
  auto plan = std::make_shared<exec::PaddingPlan>();
  plan->view_placed.assign(3, true);
  plan->view_prefix.assign(3, false);
  plan->view_window_strides.assign(3, Dims{});
  plan->view_sizes.assign(3, Dims{bucket, 3});
  plan->view_padded.assign(3, 1);
  plan->view_fills.assign(3, std::nan(""));
  plan->output_dims = {{bucket, 3}};
  call.padding = plan;
  call.padded = true;
  return call;
}

}  // namespace

TEST(padded_calls_are_keyed_by_their_bucket_and_pass_their_layouts_at_run_time) {
  Keyed five = key_of(padded_add(5, 8)), seven = key_of(padded_add(7, 8));
  EXPECT(five.key == seven.key);
  // Per view: offset, sizes, strides.
  EXPECT((seven.offsets == std::vector<int64_t>{0, 7, 3, 3, 1, 0, 7, 3, 3, 1, 0, 7, 3, 3, 1}));
  EXPECT(key_of(padded_add(5, 16)).key != five.key);
  exec::OpCall exact = padded_add(5, 8);
  exact.padded = false;  // planned, but this launch runs it at its own sizes
  Keyed k = key_of(exact);
  EXPECT(k.key != five.key && k.key != key_of(padded_add(7, 8)).key);
  // Its views no longer cover their storages (the room follows them): their offsets are runtime.
  EXPECT((k.offsets == std::vector<int64_t>{0, 0, 0}));
}

TEST(signatures_ignore_storage_positions_and_drop_sizes_by_kind) {
  using exec::Signature;
  exec::OpCall call = add_call();
  // The same call keyed after another storage took position 0 of the program's set.
  std::string alone, later;
  std::vector<int64_t> offsets;
  exec::StorageSet fresh, shared;
  exec::append_call_key(alone, call, fresh, offsets);
  shared.index(storage_of(4).get());
  exec::append_call_key(later, call, shared, offsets);
  EXPECT(alone != later);
  EXPECT(exec::call_signature(call, Signature::Sizes) == exec::call_signature(add_call(), Signature::Sizes));
  // Sizes ignore the storage's length (its room); Bucketed holds its bucket: room within the
  // bucket of the storage's bytes (12 elements to 16) leaves it as it was, room past it does not.
  exec::OpCall roomy = add_call(), roomier = add_call();
  roomy.inputs[0].storage = storage_of(16);
  roomier.inputs[0].storage = storage_of(32);
  EXPECT(exec::call_signature(roomier, Signature::Sizes) == exec::call_signature(call, Signature::Sizes));
  EXPECT(exec::call_signature(roomy, Signature::Bucketed) == exec::call_signature(call, Signature::Bucketed));
  EXPECT(exec::call_signature(roomier, Signature::Bucketed) != exec::call_signature(call, Signature::Bucketed));

  exec::OpCall small = padded_add(5, 8), large = padded_add(7, 8), other_bucket = padded_add(9, 16);
  EXPECT(exec::call_signature(small, Signature::Sizes) != exec::call_signature(large, Signature::Sizes));
  EXPECT(exec::call_signature(small, Signature::Bucketed) == exec::call_signature(large, Signature::Bucketed));
  EXPECT(exec::call_signature(small, Signature::Bucketed) != exec::call_signature(other_bucket, Signature::Bucketed));
  EXPECT(exec::call_signature(small, Signature::Ranks) == exec::call_signature(other_bucket, Signature::Ranks));
  // Ranks still tell dtypes, ranks and ops apart.
  exec::OpCall wider = add_call(), flat = add_call(), sub = add_call();
  wider.inputs[0].dtype = DType::F64;
  flat.inputs[0].layout = {{12}, {1}, 0};
  sub.name = "sub";
  for (const exec::OpCall* c : {&wider, &flat, &sub}) {
    EXPECT(exec::call_signature(*c, Signature::Ranks) != exec::call_signature(call, Signature::Ranks));
  }
  // The loop search's pair is the two signatures computed together.
  for (const exec::OpCall* c : {&call, &small, &large, &roomier, &flat}) {
    exec::LoopSignature both = exec::call_signatures(*c);
    EXPECT(both.bucketed == exec::call_signature(*c, Signature::Bucketed));
    EXPECT(both.sizes == exec::call_signature(*c, Signature::Sizes));
  }
  // The op's name and overload are hashed apart: "add" "_" is not "add_" "".
  exec::OpCall split = add_call(), joined = add_call();
  split.name = "add";
  split.overload = "_";
  joined.name = "add_";
  joined.overload = "";
  EXPECT(exec::call_signature(split, Signature::Ranks) != exec::call_signature(joined, Signature::Ranks));
}

TEST(static_arguments_and_storage_sets) {
  exec::OpCall call = add_call();
  auto part = [&](const Arg& arg, bool list_values) {
    std::string key;
    exec::KeyBytes bytes(key);
    exec::append_static_argument(bytes, arg, call, list_values);
    return bytes.flushed();
  };
  Arg list = call.args[4], other = call.args[4], longer = call.args[4];
  other.ints = {7, 9};
  longer.ints = {2, 3, 4};
  // A size history keys a list by its length only; a program key by its values.
  EXPECT(part(list, false) == part(other, false) && part(list, false) != part(longer, false));
  EXPECT(part(list, true) != part(other, true));
  exec::OpCall other_value = add_call();
  other_value.numbers[0].f = -1;
  std::string a, b;
  {
    exec::KeyBytes a_bytes(a), b_bytes(b);
    exec::append_static_argument(a_bytes, call.args[2], call, true);
    exec::append_static_argument(b_bytes, other_value.args[2], other_value, true);
  }
  EXPECT(!a.empty() && a == b);

  auto s0 = storage_of(1), s1 = storage_of(1), s2 = storage_of(1);
  exec::StorageSet set;
  EXPECT(set.index(s1.get()) == 0 && set.index(s0.get()) == 1 && set.index(s1.get()) == 0);
  EXPECT(set.find(s0.get()) == 1 && set.find(s2.get()) == -1 && set.size() == 2);
  EXPECT(set.items()[0] == s1.get());
  exec::StorageSet next;  // a storage's stamp from another set means nothing here
  EXPECT(next.find(s1.get()) == -1 && next.index(s0.get()) == 0);
}
