// exec/device_trace: the device spans a profiler trace shows come from enqueue and completion
// times under the in-order model, and programs are named after their ops without reading as the
// PyTorch op that launched them.
#include <array>
#include <string>
#include <vector>

#include "exec/device_trace.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::testing;
using exec::trace::ProgramRun;

namespace {

// Runs from {device, enqueued, end} triples, in launch order.
std::vector<ProgramRun> runs_of(const std::vector<std::array<int64_t, 3>>& specs) {
  std::vector<ProgramRun> runs(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    runs[i].device = static_cast<int>(specs[i][0]);
    runs[i].enqueued_ns = specs[i][1];
    runs[i].end_ns = specs[i][2];
  }
  return runs;
}

}  // namespace

TEST(a_program_starts_when_enqueued_or_when_its_predecessor_ends) {
  std::vector<ProgramRun> runs = runs_of({{0, 100, 500}, {0, 200, 900}, {0, 1000, 1200}});
  exec::trace::resolve_spans(runs);
  EXPECT(runs[0].start_ns == 100 && runs[0].end_ns == 500);
  EXPECT(runs[1].start_ns == 500 && runs[1].end_ns == 900);  // queued behind the first
  EXPECT(runs[2].start_ns == 1000 && runs[2].end_ns == 1200);  // the device was idle before it
}

TEST(device_spans_never_overlap_or_run_backwards) {
  // The second's completion was seen before the first's (callbacks race): it ran inside it.
  std::vector<ProgramRun> runs = runs_of({{0, 100, 800}, {0, 150, 700}, {1, 120, 300}});
  exec::trace::resolve_spans(runs);
  EXPECT(runs[1].start_ns == 700 && runs[1].end_ns == 700);
  EXPECT(runs[2].start_ns == 120 && runs[2].end_ns == 300);  // another device has its own queue
  for (const ProgramRun& run : runs) EXPECT(run.start_ns <= run.end_ns);
}

TEST(programs_are_named_by_kind_and_ops) {
  std::string counts;
  EXPECT(exec::trace::summarize_ops("per_op", {"aten::mm.out"}, &counts) == "per_op: aten::mm.out");
  EXPECT(counts == "aten::mm.out x1");
  std::vector<std::string> ops = {"aten::mm.out", "aten::add.out", "aten::mm.out", "aten::tanh.out", "aten::relu.out"};
  EXPECT(exec::trace::summarize_ops("fused_graph", ops, &counts) ==
         "fused_graph: 5 ops (aten::mm.out, aten::add.out, aten::tanh.out, ...)");
  EXPECT(counts == "aten::mm.out x2, aten::add.out x1, aten::tanh.out x1, aten::relu.out x1");
}

TEST(nothing_is_recorded_outside_a_trace) {
  exec::trace::stop();
  exec::trace::record_run(runs_of({{0, 1, 2}})[0]);
  exec::trace::start();
  exec::trace::record_compile({"compile per_op", "1 op", false, 0, 0, 10, 20});
  exec::trace::stop();
  exec::trace::Trace trace = exec::trace::take();
  EXPECT(trace.runs.empty());
  EXPECT(trace.compiles.size() == 1 && trace.compiles[0].thread != 0);
}

TEST(correlations_nest_per_thread) {
  EXPECT(exec::trace::current_correlation() == 0);
  exec::trace::push_correlation(7);
  exec::trace::push_correlation(9);
  EXPECT(exec::trace::current_correlation() == 9);
  exec::trace::pop_correlation();
  EXPECT(exec::trace::current_correlation() == 7);
  exec::trace::pop_correlation();
  exec::trace::pop_correlation();  // unbalanced pops are harmless
  EXPECT(exec::trace::current_correlation() == 0);
}
