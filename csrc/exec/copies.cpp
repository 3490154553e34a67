// The executor's copies: a view into another (the copy kernel's device part, across devices
// too) and a view's elements as one dense buffer (what host reads and collectives take). Both
// are ordinary calls through run(), so they follow the calling thread's mode.
#include "exec/executor.h"
#include "exec/storage_state.h"

#include "lowering/view_access.h"

namespace tpu::exec {

void copy_view(const TensorView& src, const TensorView& dst) {
  static const lowering::Entry* copy = lowering::find_lowering("_tpu_copy");
  TensorView source = src;
  if (src.storage->device != dst.storage->device) {
    materialize(*src.storage);
    StorageState value = held_value(*src.storage);
    if (value.buffer) {
      auto moved = std::make_shared<Storage>(dst.storage->device, src.storage->nbytes);
      give_room(*moved, {value.spare_bytes, value.sized_to_bucket, value.grows});
      state_of(*moved).dtype = value.dtype;
      state_of(*moved).buffer = runtime::Client::get().copy_to_device(*value.buffer, dst.storage->device);
      source.storage = moved;
    }
  }
  OpCall call;
  call.name = "_tpu_copy";
  call.lowering = copy;
  lowering::Arg arg;
  arg.kind = lowering::Arg::Kind::Tensor;
  arg.slot = 0;
  call.args.push_back(arg);
  call.inputs.push_back(source);
  call.outputs.push_back({dst.dtype, dst.layout.sizes});
  call.destinations.push_back(dst);
  call.device = dst.storage->device;
  run(std::move(call));
}

runtime::BufferPtr dense_buffer(const TensorView& view) {
  const Storage& s = *view.storage;
  materialize(s);
  int64_t count = numel(view.layout.sizes);
  StorageState state = held_value(s);
  if (state.buffer && state.dtype == view.dtype && view.layout.offset == 0 && count == s.length_as(state.dtype) &&
      lowering::is_contiguous(view.layout)) {
    return state.buffer;
  }
  auto dense = std::make_shared<Storage>(s.device, count * itemsize(view.dtype));
  state_of(*dense).exact_length = true;
  state_of(*dense).dtype = view.dtype;
  TensorView target{dense, view.dtype, lowering::dense_layout(view.layout.sizes)};
  copy_view(view, target);
  materialize(*dense);
  return state_of(*dense).buffer;
}

}  // namespace tpu::exec
