#include "exec/program_key.h"
#include "exec/storage_state.h"

#include "cache/stable_hash.h"
#include "exec/padding.h"
#include "exec/word_hash.h"

namespace tpu::exec {

namespace {

std::atomic<uint64_t> g_next_epoch{1};

// The views of a call in for_each_view's order, with what its padding plan says of each.
struct ViewCursor {
  const PaddingPlan* plan;  // null unless the call runs padded
  size_t next = 0;
  PaddedWrites* writes = nullptr;
  bool destination = false;
};

void append_view(KeyBytes& bytes, StorageSet& storages, const TensorView& view, std::vector<int64_t>& offsets,
                 ViewCursor& cursor) {
  size_t index = cursor.next++;
  Storage* s = view.storage.get();
  bytes.add_int(storages.index(s));
  const StorageState& state = state_of(*s);
  bytes.add_char(static_cast<char>(state.buffer ? static_cast<int>(state.dtype) : -1));
  bytes.add_int(s->value_bytes());
  bytes.add_char(static_cast<char>(view.dtype));
  if (cursor.plan && cursor.plan->view_placed[index]) {
    // Placed by runtime values: the offset, then every dim's size and stride.
    bool forwarded = !cursor.destination && cursor.writes && cursor.writes->forwards(view, cursor.plan->view_sizes[index]);
    const Dims& window = cursor.plan->view_window_strides[index];
    bytes.add_char(forwarded ? 'w' : cursor.plan->view_prefix[index] ? 'f' : !window.empty() ? 'v' : 'p');
    if (!forwarded && !window.empty()) bytes.add_dims(window);
    bytes.add_dims(cursor.plan->view_sizes[index]);
    bytes.add_int(static_cast<int64_t>(cursor.plan->view_padded[index]));
    offsets.push_back(view.layout.offset);
    offsets.insert(offsets.end(), view.layout.sizes.begin(), view.layout.sizes.end());
    offsets.insert(offsets.end(), view.layout.strides.begin(), view.layout.strides.end());
    return;
  }
  bytes.add_dims(view.layout.sizes);
  bytes.add_dims(view.layout.strides);
  if (runtime_offset(view)) {
    bytes.add_char('r');
    offsets.push_back(view.layout.offset);
  } else {
    bytes.add_char('c');
    bytes.add_int(view.layout.offset);
  }
}

}  // namespace

// Most per-op programs name two to four storages: one allocation instead of one per doubling.
StorageSet::StorageSet() : epoch_(g_next_epoch++) { items_.reserve(8); }

int32_t StorageSet::index(Storage* s) {
  StorageState& state = state_of(*s);
  if (state.set_epoch == epoch_) return state.set_index;
  state.set_epoch = epoch_;
  state.set_index = static_cast<int32_t>(items_.size());
  items_.push_back(s);
  return state.set_index;
}

int32_t StorageSet::find(const Storage* s) const {
  const StorageState& state = state_of(*s);
  return state.set_epoch == epoch_ ? state.set_index : -1;
}

namespace {

WordHash op_hash(const OpCall& call) {
  WordHash hash;
  hash.add(call.name);
  hash.add(call.overload);
  return hash;
}

}  // namespace

uint64_t call_signature(const OpCall& call, Signature kind) {
  if (kind == Signature::Bucketed) return call_signatures(call).bucketed;
  WordHash hash = op_hash(call);
  for_each_view(call, [&](const TensorView& view, int32_t slot) {
    hash.add(static_cast<uint64_t>(static_cast<uint32_t>(slot)) << 8 | static_cast<uint64_t>(view.dtype));
    hash.add(view.layout.sizes.size());
    if (kind == Signature::Sizes) {
      for (int64_t size : view.layout.sizes) hash.add(size);
    }
  });
  return hash.value();
}

LoopSignature call_signatures(const OpCall& call) {
  // Computed for every call of a graph that the loop search probes: one walk for both.
  WordHash bucketed = op_hash(call);
  WordHash sizes = bucketed;
  for_each_view(call, [&](const TensorView& view, int32_t slot) {
    uint64_t placed = static_cast<uint64_t>(static_cast<uint32_t>(slot)) << 8 | static_cast<uint64_t>(view.dtype);
    bucketed.add(placed);
    sizes.add(placed);
    sizes.add(view.layout.sizes.size());
    bucketed.add(view.layout.sizes.size());
    bucketed.add(bucket_size(view.storage->value_bytes()));
    for (int64_t size : view.layout.sizes) {
      sizes.add(size);
      bucketed.add(bucket_size(size));
    }
    for (int64_t stride : view.layout.strides) bucketed.add(bucket_size(stride));
  });
  return {bucketed.value(), sizes.value()};
}

void append_static_argument(KeyBytes& key, const lowering::Arg& arg, const OpCall& call, bool list_values) {
  using Kind = lowering::Arg::Kind;
  switch (arg.kind) {
    case Kind::Number:
      key.add_char(static_cast<char>(call.numbers[arg.slot].dtype));
      key.add_char(arg.weak ? 'w' : 's');
      break;
    case Kind::NumberList:
      key.add_int(static_cast<int64_t>(arg.slots.size()));
      for (int32_t slot : arg.slots) key.add_char(static_cast<char>(call.numbers[slot].dtype));
      break;
    case Kind::Int:
      key.add_int(arg.i);
      break;
    case Kind::IntList:
      if (list_values) {
        key.add_dims(arg.ints);
      } else {
        key.add_int(static_cast<int64_t>(arg.ints.size()));
      }
      break;
    case Kind::DoubleList:
      key.add_int(static_cast<int64_t>(arg.doubles.size()));
      key.add(arg.doubles.data(), arg.doubles.size() * sizeof(double));
      break;
    case Kind::Bool:
      key.add_char(arg.b ? '1' : '0');
      break;
    case Kind::String:
      key.add_text(arg.s);
      key.add_char('\0');
      break;
    case Kind::ScalarType:
      key.add_char(static_cast<char>(arg.dtype));
      break;
    default:  // tensors: the caller's business
      break;
  }
}

bool runtime_offset(const TensorView& view) {
  return lowering::offset_is_runtime(view.layout, view.storage->length_as(view.dtype));
}

namespace {
void append_call_key_tracking(std::string& key, const OpCall& call, StorageSet& storages,
                              std::vector<int64_t>& offsets, PaddedWrites* writes);
}  // namespace

bool PaddedWrites::forwards(const TensorView& view, const Dims& bucket) const {
  auto it = last_.find(view.storage.get());
  if (it == last_.end()) return false;
  const TensorView& written = it->second.view;
  return it->second.bucket == bucket && written.dtype == view.dtype && written.layout.sizes == view.layout.sizes &&
         written.layout.strides == view.layout.strides && written.layout.offset == view.layout.offset;
}

void PaddedWrites::wrote(const TensorView& view, const Dims* bucket) {
  if (bucket) {
    last_[view.storage.get()] = {view, *bucket};
  } else {
    last_.erase(view.storage.get());
  }
}

void append_call_key(std::string& key, const OpCall& call, StorageSet& storages, std::vector<int64_t>& offsets) {
  append_call_key_tracking(key, call, storages, offsets, nullptr);
}

void append_padded_call_key(std::string& key, const OpCall& call, StorageSet& storages, std::vector<int64_t>& offsets,
                            PaddedWrites& writes) {
  append_call_key_tracking(key, call, storages, offsets, &writes);
}

namespace {

void append_call_key_tracking(std::string& key, const OpCall& call, StorageSet& storages,
                              std::vector<int64_t>& offsets, PaddedWrites* writes) {
  using Kind = lowering::Arg::Kind;
  KeyBytes bytes(key);
  ViewCursor cursor{call.padded ? call.padding.get() : nullptr, 0, writes};
  if (cursor.plan) bytes.add_char('P');
  bytes.add_text(call.name);
  bytes.add_char('.');
  bytes.add_text(call.overload);
  bytes.add_char('\0');
  for (const auto& arg : call.args) {
    bytes.add_char(static_cast<char>(arg.kind));
    switch (arg.kind) {
      case Kind::Tensor:
        append_view(bytes, storages, call.inputs[arg.slot], offsets, cursor);
        break;
      case Kind::TensorList:
        bytes.add_int(static_cast<int64_t>(arg.slots.size()));
        for (int32_t slot : arg.slots) {
          if (slot < 0) {
            bytes.add_char('n');
          } else {
            append_view(bytes, storages, call.inputs[slot], offsets, cursor);
          }
        }
        break;
      default:
        append_static_argument(bytes, arg, call, /*list_values=*/true);
        break;
    }
  }
  bytes.add_char('|');
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    bytes.add_char(static_cast<char>(call.outputs[i].dtype));
    bytes.add_dims(cursor.plan ? cursor.plan->output_dims[i] : call.outputs[i].dims);
    if (i < call.destinations.size() && call.destinations[i].storage) {
      size_t index = cursor.next;
      cursor.destination = true;
      append_view(bytes, storages, call.destinations[i], offsets, cursor);
      if (writes) {
        bool placed = cursor.plan && cursor.plan->view_placed[index];
        writes->wrote(call.destinations[i], placed ? &cursor.plan->view_sizes[index] : nullptr);
      }
    } else {
      bytes.add_char('x');
    }
  }
  bytes.add_char(';');
}

}  // namespace

}  // namespace tpu::exec
