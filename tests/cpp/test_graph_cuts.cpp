// exec/graph_cuts: a defer-and-fuse graph is cut where a loop whose sizes grow starts again, and
// only there: an op repeated at one size, or a model's layers at one length, are no such loop.
#include <memory>
#include <string>
#include <vector>

#include "exec/graph_cuts.h"
#include "exec/storage_state.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::testing;

namespace {

// The op `name` over one dense [rows, 4] float32 tensor of its own storage.
exec::OpCall call_of(const std::string& name, int64_t rows) {
  exec::OpCall call;
  call.name = name;
  call.overload = "default";
  lowering::Arg x;
  x.kind = lowering::Arg::Kind::Tensor;
  x.slot = 0;
  call.args = {x};
  auto storage = std::make_shared<exec::Storage>(0, rows * 4 * itemsize(DType::F32));
  exec::state_of(*storage).dtype = DType::F32;
  call.inputs = {{storage, DType::F32, {{rows, 4}, {4, 1}, 0}}};
  return call;
}

// A body of ten ops whose first two take `rows` (a sequence's length), repeated once per entry of
// `rows_per_iteration`, after three ops of a prologue.
std::vector<exec::OpCall> loop_of(const std::vector<int64_t>& rows_per_iteration) {
  std::vector<exec::OpCall> calls = {call_of("prologue_a", 3), call_of("prologue_b", 3), call_of("prologue_c", 3)};
  for (int64_t rows : rows_per_iteration) {
    for (int op = 0; op < 10; ++op) calls.push_back(call_of("op" + std::to_string(op), op < 2 ? rows : 16));
  }
  return calls;
}

}  // namespace

TEST(a_loop_whose_sizes_grow_within_a_bucket_is_found_after_its_prologue) {
  exec::LoopSignatures signatures;
  auto [start, period] = exec::growing_loop(loop_of({5, 6, 7, 8}), signatures);
  EXPECT(start == 3 && period == 10);
  // Probed again as the graph grows, the signatures computed before are reused.
  auto calls = loop_of({5, 6, 7, 8, 8});
  EXPECT(signatures.bucketed.size() == 43);
  auto again = exec::growing_loop(calls, signatures);
  EXPECT(signatures.bucketed.size() == calls.size() && again.first == 3 && again.second == 10);
}

TEST(repeats_at_one_size_or_across_buckets_are_no_growing_loop) {
  exec::LoopSignatures same, across;
  EXPECT(exec::growing_loop(loop_of({8, 8, 8, 8}), same).second == 0);
  EXPECT(exec::growing_loop(loop_of({4, 8, 16, 32}), across).second == 0);
  // One op repeated many times at one size: nothing to find, however often the window recurs.
  std::vector<exec::OpCall> same_op(300, call_of("add", 16));
  exec::LoopSignatures repeated;
  EXPECT(exec::growing_loop(same_op, repeated).second == 0);
}
