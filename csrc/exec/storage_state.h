// The executor's access to a storage's value (StorageState), for the executor's own files only:
// every read and write of a buffer, its dtype or its room happens under the executor's lock or
// after materialize(), which only these files can promise.
#pragma once

#include "exec/executor.h"

namespace tpu::exec {

inline StorageState& state_of(Storage& storage) { return storage.state_; }
inline const StorageState& state_of(const Storage& storage) { return storage.state_; }

// Replaces a storage's value under the executor's lock, after materialize(): the whole-storage
// paths of upload and install.
void install_buffer(Storage& storage, runtime::BufferPtr buffer, DType dtype, const StorageRoom& room);

}  // namespace tpu::exec
