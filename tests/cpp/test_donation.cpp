// Donation (exec/launch.cpp, exec/program_builder.cpp): a program that reads a storage and
// replaces its whole value writes the result into the old buffer, unless something else still
// holds that buffer, which then keeps its value.
#include <memory>
#include <vector>

#include "exec/executor.h"
#include "exec/storage_state.h"
#include "lowering/view_access.h"
#include "runtime/runtime.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::testing;

namespace {

constexpr int64_t kElements = 1 << 16;

std::vector<float> read_back(const runtime::Buffer& buffer) {
  std::vector<float> values(static_cast<size_t>(buffer.nbytes() / sizeof(float)));
  runtime::Client::get().to_host(buffer, values.data());
  return values;
}

// Copies the storage onto itself reversed: the program reads it and replaces its whole value.
// Returns the device memory the launch needed beyond what was held before it.
int64_t reverse_in_place(const exec::StoragePtr& storage) {
  exec::synchronize(0);
  int64_t before = runtime::device_memory(0).current;
  runtime::reset_device_memory_peak(0);
  lowering::ViewLayout reversed{{kElements}, {-1}, kElements - 1};
  exec::copy_view({storage, DType::F32, reversed}, {storage, DType::F32, lowering::dense_layout({kElements})});
  exec::synchronize(0);
  return runtime::device_memory(0).peak - before;
}

}  // namespace

TEST(a_whole_storage_update_reuses_its_buffer_unless_it_is_held_elsewhere) {
  REQUIRE_PLUGIN();
  std::vector<float> values = sample(kElements, 7);
  auto storage = std::make_shared<exec::Storage>(0, kElements * 4);
  exec::upload({storage, DType::F32, lowering::dense_layout({kElements})}, values.data(), DType::F32);

  // Nothing else holds the buffer: the result takes its memory.
  EXPECT(reverse_in_place(storage) < kElements * 4);
  std::vector<float> once = read_back(*exec::state_of(*storage).buffer);
  for (int64_t i = 0; i < kElements; ++i) EXPECT(once[i] == values[kElements - 1 - i]);

  // A holder of the old buffer keeps it, and its value.
  runtime::BufferPtr held = exec::state_of(*storage).buffer;
  EXPECT(reverse_in_place(storage) >= kElements * 4);
  std::vector<float> kept = read_back(*held);
  std::vector<float> twice = read_back(*exec::state_of(*storage).buffer);
  for (int64_t i = 0; i < kElements; ++i) {
    EXPECT(kept[i] == once[i]);
    EXPECT(twice[i] == values[i]);
  }
}
