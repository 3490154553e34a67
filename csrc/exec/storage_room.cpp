// A storage's room past its bytes (exec/padding.h) and the swaps of its whole value from outside
// a program: what the executor's padded programs and its host transfers need of a StorageState.
#include "exec/executor_internal.h"
#include "exec/storage_state.h"
#include "lowering/view_access.h"

namespace tpu::exec {

StorageRoom room_of(const Storage& storage) {
  const StorageState& state = state_of(storage);
  return {state.spare_bytes, state.sized_to_bucket, state.grows};
}

void give_room(Storage& storage, const StorageRoom& room) {
  StorageState& state = state_of(storage);
  state.spare_bytes = room.spare_bytes;
  state.sized_to_bucket = room.sized_to_bucket;
  state.grows = room.grows;
}

void install_buffer(Storage& storage, runtime::BufferPtr buffer, DType dtype, const StorageRoom& room) {
  Lock lock(executor_mutex());
  state_of(storage).buffer = std::move(buffer);
  state_of(storage).dtype = dtype;
  give_room(storage, room);
}

void extend_to_bucket(const StoragePtr& storage, int64_t bucket_bytes) {
  StorageState& state = state_of(*storage);
  {
    Lock lock(executor_mutex());
    if (state.sized_to_bucket || state.exact_length || bucket_bytes < storage->nbytes) return;
    if (bucket_bytes == storage->nbytes) {  // a full bucket: no room to add
      state.sized_to_bucket = true;
      return;
    }
  }
  materialize(*storage);
  DType dtype;
  int64_t spare_bytes;
  {
    Lock lock(executor_mutex());
    if (!state.buffer || state.sized_to_bucket || state.exact_length) return;
    dtype = state.dtype;
    spare_bytes = bucket_bytes - storage->nbytes;
    if (spare_bytes <= 0 || storage->nbytes % itemsize(dtype) != 0) return;
  }
  auto roomy = std::make_shared<Storage>(storage->device, storage->nbytes);
  give_room(*roomy, {spare_bytes, /*sized_to_bucket=*/true, /*grows=*/false});
  Dims length{storage->nbytes / itemsize(dtype)};
  int caller_mode = swap_thread_mode(static_cast<int>(Mode::Strict));
  try {
    copy_view({storage, dtype, lowering::dense_layout(length)}, {roomy, dtype, lowering::dense_layout(length)});
  } catch (...) {
    swap_thread_mode(caller_mode);
    throw;
  }
  swap_thread_mode(caller_mode);
  materialize(*roomy);
  Lock lock(executor_mutex());
  // Another thread gave it room first, or recorded a graph whose key holds its old length.
  if (state.sized_to_bucket || !state_of(*roomy).buffer || graph_pending_locked(state.graph_epoch)) return;
  state.buffer = state_of(*roomy).buffer;
  give_room(*storage, room_of(*roomy));
}

StorageState held_value(const Storage& storage) {
  Lock lock(executor_mutex());
  return state_of(storage);
}

}  // namespace tpu::exec
