#include "exec/program_key.h"

#include <cstring>

#include "exec/storage_state.h"

#include "cache/stable_hash.h"
#include "exec/padding.h"
#include "exec/word_hash.h"

namespace tpu::exec {

namespace {

std::atomic<uint64_t> g_next_epoch{1};

void append_int(std::string& key, int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }

void append_dims(std::string& key, const Dims& dims) {
  append_int(key, static_cast<int64_t>(dims.size()));
  key.append(reinterpret_cast<const char*>(dims.data()), dims.size() * sizeof(int64_t));
}

// Gathers one view's fields on the stack and appends them to the key at once: a call of
// std::string's append costs more than the eight bytes most fields add (a third of the key's
// instructions went to it).
class KeyBytes {
 public:
  explicit KeyBytes(std::string& key) : key_(key) {}
  ~KeyBytes() { key_.append(buffer_, used_); }
  KeyBytes(const KeyBytes&) = delete;
  KeyBytes& operator=(const KeyBytes&) = delete;

  void add_char(char c) { add(&c, 1); }
  void add_int(int64_t v) { add(&v, sizeof v); }
  void add_dims(const Dims& dims) {
    add_int(static_cast<int64_t>(dims.size()));
    add(dims.data(), dims.size() * sizeof(int64_t));
  }

 private:
  void add(const void* bytes, size_t n) {
    if (used_ + n > sizeof buffer_) {
      key_.append(buffer_, used_);
      used_ = 0;
      if (n > sizeof buffer_) {
        key_.append(static_cast<const char*>(bytes), n);
        return;
      }
    }
    std::memcpy(buffer_ + used_, bytes, n);
    used_ += n;
  }

  std::string& key_;
  char buffer_[240];
  size_t used_ = 0;
};

// The views of a call in for_each_view's order, with what its padding plan says of each.
struct ViewCursor {
  const PaddingPlan* plan;  // null unless the call runs padded
  size_t next = 0;
  PaddedWrites* writes = nullptr;
  bool destination = false;
};

void append_view(std::string& key, StorageSet& storages, const TensorView& view, std::vector<int64_t>& offsets,
                 ViewCursor& cursor) {
  KeyBytes bytes(key);
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

void append_static_argument(std::string& key, const lowering::Arg& arg, const OpCall& call, bool list_values) {
  using Kind = lowering::Arg::Kind;
  switch (arg.kind) {
    case Kind::Number:
      key.push_back(static_cast<char>(call.numbers[arg.slot].dtype));
      key.push_back(arg.weak ? 'w' : 's');
      break;
    case Kind::NumberList:
      append_int(key, static_cast<int64_t>(arg.slots.size()));
      for (int32_t slot : arg.slots) key.push_back(static_cast<char>(call.numbers[slot].dtype));
      break;
    case Kind::Int:
      append_int(key, arg.i);
      break;
    case Kind::IntList:
      if (list_values) {
        append_dims(key, arg.ints);
      } else {
        append_int(key, static_cast<int64_t>(arg.ints.size()));
      }
      break;
    case Kind::DoubleList:
      append_int(key, static_cast<int64_t>(arg.doubles.size()));
      key.append(reinterpret_cast<const char*>(arg.doubles.data()), arg.doubles.size() * sizeof(double));
      break;
    case Kind::Bool:
      key.push_back(arg.b ? '1' : '0');
      break;
    case Kind::String:
      key += arg.s;
      key.push_back('\0');
      break;
    case Kind::ScalarType:
      key.push_back(static_cast<char>(arg.dtype));
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
  ViewCursor cursor{call.padded ? call.padding.get() : nullptr, 0, writes};
  if (cursor.plan) key.push_back('P');
  key += call.name;
  key += '.';
  key += call.overload;
  key.push_back('\0');
  for (const auto& arg : call.args) {
    key.push_back(static_cast<char>(arg.kind));
    switch (arg.kind) {
      case Kind::Tensor:
        append_view(key, storages, call.inputs[arg.slot], offsets, cursor);
        break;
      case Kind::TensorList:
        append_int(key, static_cast<int64_t>(arg.slots.size()));
        for (int32_t slot : arg.slots) {
          if (slot < 0) {
            key.push_back('n');
          } else {
            append_view(key, storages, call.inputs[slot], offsets, cursor);
          }
        }
        break;
      default:
        append_static_argument(key, arg, call, /*list_values=*/true);
        break;
    }
  }
  key.push_back('|');
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    key.push_back(static_cast<char>(call.outputs[i].dtype));
    append_dims(key, cursor.plan ? cursor.plan->output_dims[i] : call.outputs[i].dims);
    if (i < call.destinations.size() && call.destinations[i].storage) {
      size_t index = cursor.next;
      cursor.destination = true;
      append_view(key, storages, call.destinations[i], offsets, cursor);
      if (writes) {
        bool placed = cursor.plan && cursor.plan->view_placed[index];
        writes->wrote(call.destinations[i], placed ? &cursor.plan->view_sizes[index] : nullptr);
      }
    } else {
      key.push_back('x');
    }
  }
  key.push_back(';');
}

}  // namespace

}  // namespace tpu::exec
