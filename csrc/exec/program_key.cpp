#include "exec/program_key.h"

#include "cache/stable_hash.h"

namespace tpu::exec {

namespace {

std::atomic<uint64_t> g_next_epoch{1};

void append_int(std::string& key, int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }

void append_dims(std::string& key, const Dims& dims) {
  append_int(key, static_cast<int64_t>(dims.size()));
  key.append(reinterpret_cast<const char*>(dims.data()), dims.size() * sizeof(int64_t));
}

void append_view(std::string& key, StorageSet& storages, const TensorView& view, std::vector<int64_t>& offsets) {
  Storage* s = view.storage.get();
  append_int(key, storages.index(s));
  key.push_back(static_cast<char>(s->buffer ? static_cast<int>(s->dtype) : -1));
  append_int(key, s->nbytes);
  key.push_back(static_cast<char>(view.dtype));
  append_dims(key, view.layout.sizes);
  append_dims(key, view.layout.strides);
  if (runtime_offset(view)) {
    key.push_back('r');
    offsets.push_back(view.layout.offset);
  } else {
    key.push_back('c');
    append_int(key, view.layout.offset);
  }
}

}  // namespace

StorageSet::StorageSet() : epoch_(g_next_epoch++) {}

int32_t StorageSet::index(Storage* s) {
  if (s->set_epoch == epoch_) return s->set_index;
  s->set_epoch = epoch_;
  s->set_index = static_cast<int32_t>(items_.size());
  items_.push_back(s);
  return s->set_index;
}

int32_t StorageSet::find(const Storage* s) const { return s->set_epoch == epoch_ ? s->set_index : -1; }

uint64_t call_signature(const OpCall& call) {
  std::string text = call.name + '.' + call.overload;
  text.push_back('\0');
  for_each_view(call, [&](const TensorView& view, int32_t slot) {
    append_int(text, slot);
    text.push_back(static_cast<char>(view.dtype));
    append_int(text, view.storage->nbytes);
    append_dims(text, view.layout.sizes);
    append_dims(text, view.layout.strides);
  });
  return cache::fnv1a64(text);
}

bool runtime_offset(const TensorView& view) {
  return lowering::offset_is_runtime(view.layout, view.storage->length_as(view.dtype));
}

void append_call_key(std::string& key, const OpCall& call, StorageSet& storages, std::vector<int64_t>& offsets) {
  using Kind = lowering::Arg::Kind;
  key += call.name;
  key += '.';
  key += call.overload;
  key.push_back('\0');
  for (const auto& arg : call.args) {
    key.push_back(static_cast<char>(arg.kind));
    switch (arg.kind) {
      case Kind::Tensor:
        append_view(key, storages, call.inputs[arg.slot], offsets);
        break;
      case Kind::TensorList:
        append_int(key, static_cast<int64_t>(arg.slots.size()));
        for (int32_t slot : arg.slots) {
          if (slot < 0) {
            key.push_back('n');
          } else {
            append_view(key, storages, call.inputs[slot], offsets);
          }
        }
        break;
      case Kind::Number:
        key.push_back(static_cast<char>(call.numbers[arg.slot].dtype));
        key.push_back(arg.weak ? 'w' : 's');
        break;
      case Kind::Int:
        append_int(key, arg.i);
        break;
      case Kind::IntList:
        append_dims(key, arg.ints);
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
      case Kind::None:
        break;
    }
  }
  key.push_back('|');
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    key.push_back(static_cast<char>(call.outputs[i].dtype));
    append_dims(key, call.outputs[i].dims);
    if (i < call.destinations.size() && call.destinations[i].storage) {
      append_view(key, storages, call.destinations[i], offsets);
    } else {
      key.push_back('x');
    }
  }
  key.push_back(';');
}

}  // namespace tpu::exec
