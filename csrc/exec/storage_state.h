// The executor's access to a storage's value (StorageState), for the executor's own files only:
// every read and write of a buffer, its dtype or its room happens under the executor's lock or
// after materialize(), which only these files can promise.
#pragma once

#include "exec/executor.h"

namespace tpu::exec {

inline StorageState& state_of(Storage& storage) { return storage.state_; }
inline const StorageState& state_of(const Storage& storage) { return storage.state_; }

// A copy of a storage's value taken under the executor's lock, for code that reads the buffer
// from outside a program: holding it keeps a concurrent launch from donating the buffer, and the
// buffer, dtype and room are seen together.
StorageState held_value(const Storage& storage);

// Replaces a storage's value under the executor's lock, after materialize(): the whole-storage
// paths of upload and install.
void install_buffer(Storage& storage, runtime::BufferPtr buffer, DType dtype, const StorageRoom& room);

}  // namespace tpu::exec
