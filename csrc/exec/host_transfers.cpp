// Values crossing between the host and the device, and whole buffers handed to a storage (a
// collective's result): the paths that replace a storage's buffer from outside a program. Each
// first waits for the pending graph the storage takes part in, then either swaps the whole value
// (no program) or stages it in a storage of its own and copies it through a program.
#include <cstring>

#include "exec/device_queue.h"
#include "exec/padding.h"
#include "exec/storage_state.h"
#include "lowering/view_access.h"

namespace tpu::exec {
namespace {

bool is_whole_dense_storage(const TensorView& view, DType dtype) {
  return dtype == view.dtype && view.layout.offset == 0 && lowering::is_contiguous(view.layout) &&
         numel(view.layout.sizes) * itemsize(dtype) == view.storage->nbytes;
}

// A storage of its own for a value already on the device, laid out densely.
StoragePtr staged(const runtime::BufferPtr& buffer, DType dtype, int device) {
  auto storage = std::make_shared<Storage>(device, buffer->nbytes());
  state_of(*storage).dtype = dtype;
  state_of(*storage).buffer = buffer;
  return storage;
}

}  // namespace

void upload(const TensorView& target, const void* host, DType host_dtype) {
  auto& client = runtime::Client::get();
  const Storage& storage = *target.storage;
  int64_t count = numel(target.layout.sizes);
  if (is_whole_dense_storage(target, host_dtype)) {
    materialize(storage);  // a pending graph may still read or write the old value
    int64_t spare = state_of(storage).exact_length ? -1 : upload_spare_bytes(host_dtype, target.layout.sizes);
    runtime::BufferPtr buffer;
    if (spare > 0) {
      // Sizes that keep changing from upload to upload: the buffer gets its bucket's room.
      std::vector<char> roomy(storage.nbytes + spare, 0);
      std::memcpy(roomy.data(), host, storage.nbytes);
      buffer = client.from_host(roomy.data(), {host_dtype, {count + spare / itemsize(host_dtype)}}, storage.device);
    } else {
      buffer = client.from_host(host, {host_dtype, {count}}, storage.device);
    }
    install_buffer(*target.storage, std::move(buffer), host_dtype,
                   {std::max<int64_t>(spare, 0), /*sized_to_bucket=*/spare >= 0, /*grows=*/false});
    return;
  }
  StoragePtr from = staged(client.from_host(host, {host_dtype, {count}}, storage.device), host_dtype, storage.device);
  copy_view({from, host_dtype, lowering::dense_layout(target.layout.sizes)}, target);
}

void download(const TensorView& view, DType dtype, void* host) {
  int64_t count = numel(view.layout.sizes);
  if (count == 0) return;
  const Storage& storage = *view.storage;
  auto& client = runtime::Client::get();
  materialize(storage);
  StorageState state = held_value(storage);
  if (is_whole_dense_storage(view, dtype) && state.buffer && state.spare_bytes > 0 && state.dtype == dtype) {
    // The whole storage, with its bucket's room (exec/padding.h): one transfer, no program.
    runtime::BufferPtr roomy = state.buffer;
    std::vector<char> staging(storage.value_bytes());
    client.to_host(*roomy, staging.data());
    std::memcpy(host, staging.data(), storage.nbytes);
    settle_device(storage.device);
    return;
  }
  runtime::BufferPtr buffer;
  if (dtype == view.dtype) {
    buffer = dense_buffer(view);
  } else {
    auto converted = std::make_shared<Storage>(storage.device, count * itemsize(dtype));
    state_of(*converted).exact_length = true;
    copy_view(view, {converted, dtype, lowering::dense_layout(view.layout.sizes)});
    materialize(*converted);
    buffer = state_of(*converted).buffer;
  }
  client.to_host(*buffer, host);
  settle_device(storage.device);
}

void install(const TensorView& target, const runtime::BufferPtr& flat, int64_t offset) {
  // Same dtype and the storage's byte size: the result is the storage's whole value.
  if (offset == 0 && flat->nbytes() == target.storage->nbytes && is_whole_dense_storage(target, flat->type().dtype)) {
    materialize(*target.storage);  // a pending graph may still read or write the old value
    install_buffer(*target.storage, flat, target.dtype, {});
    return;
  }
  StoragePtr from = staged(flat, flat->type().dtype, flat->device());
  copy_view({from, flat->type().dtype, lowering::dense_layout(target.layout.sizes, offset)}, target);
}

void copy_shared_bytes(const StoragePtr& from, const StoragePtr& to) {
  materialize(*from);
  DType dtype;
  {
    const StorageState& state = state_of(*from);
    if (!state.buffer) return;  // never written: both read as zeros
    dtype = state.dtype;
  }
  int64_t count = std::min(from->nbytes, to->nbytes) / itemsize(dtype);
  if (count <= 0) return;
  copy_view({from, dtype, lowering::dense_layout({count})}, {to, dtype, lowering::dense_layout({count})});
}

}  // namespace tpu::exec
