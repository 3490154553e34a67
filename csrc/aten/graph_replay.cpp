#include "aten/graph_replay.h"

#include <unordered_map>

#include <c10/core/TensorImpl.h>

#include <ATen/ops/empty.h>

#include "aten/device_checks.h"
#include "aten/tpu_tensor.h"
#include "cache/program_cache.h"
#include "lowering/view_access.h"

namespace tpu::aten {

namespace {

bool on_tpu(const std::optional<at::Tensor>& t) {
  return t && t->defined() && t->device().type() == c10::DeviceType::PrivateUse1;
}

Dims vec(at::IntArrayRef values) { return Dims(values.begin(), values.end()); }

// The captured program read its arguments through views whose size-1 dims have canonical strides
// (aten/tpu_tensor.cpp), so arguments that differ only there replay it too.
std::vector<int64_t> unit_strides_canonical(const at::Tensor& t) {
  Dims strides = vec(t.strides());
  lowering::canonicalize_unit_strides(strides, vec(t.sizes()));
  return strides;
}

at::Tensor view_of_storage(const c10::Storage& storage, at::ScalarType dtype, const std::vector<int64_t>& sizes,
                           const std::vector<int64_t>& strides, int64_t offset) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage),
                                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                   caffe2::TypeMeta::fromScalarType(dtype));
  impl->set_sizes_and_strides(sizes, strides, offset);
  return at::Tensor(std::move(impl));
}

}  // namespace

std::shared_ptr<GraphReplay> GraphReplay::bind(std::shared_ptr<exec::Capture> capture, const Tensors& inputs,
                                               const Tensors& outputs, std::string* why_not) {
  auto fail = [&](const char* reason) -> std::shared_ptr<GraphReplay> {
    *why_not = reason;
    return nullptr;
  };
  if (!capture) return fail("the graph has random ops or was split by a sync point");
  auto replay = std::shared_ptr<GraphReplay>(new GraphReplay());
  std::unordered_map<const exec::Storage*, int> input_of_storage;
  for (size_t i = 0; i < inputs.size(); ++i) {
    InputLayout layout;
    if (inputs[i] && inputs[i]->defined()) {
      // A CPU tensor argument reaches the program as a number or a copy: its value is not a
      // storage the program can be rebound to.
      if (!on_tpu(inputs[i])) return fail("an argument is not a tpu tensor");
      const at::Tensor& t = *inputs[i];
      layout.tensor = true;
      layout.dtype = t.scalar_type();
      layout.sizes = vec(t.sizes());
      layout.strides = unit_strides_canonical(t);
      layout.offset = t.storage_offset();
      auto [it, inserted] = input_of_storage.emplace(storage_of(t).get(), static_cast<int>(i));
      if (!inserted) layout.shares_storage_with = it->second;
    }
    replay->inputs_.push_back(std::move(layout));
  }

  std::unordered_map<const exec::Storage*, int> capture_index;
  for (size_t s = 0; s < capture->storages.size(); ++s) capture_index.emplace(capture->storages[s].get(), s);
  std::vector<bool> written(capture->storages.size(), false);
  for (int32_t s : capture->program->output_storages) written[s] = true;

  replay->roles_.resize(capture->storages.size());
  // Error flags of checked ops (indices in range): each replay makes new ones to be read later.
  auto checks = pending_device_checks();
  std::unordered_map<const exec::Storage*, int> fresh_of_storage;
  for (const auto& output : outputs) {
    OutputLayout layout;
    if (output && output->defined()) {
      if (!on_tpu(output)) return fail("an output is not a tpu tensor");
      const at::Tensor& t = *output;
      layout.tensor = true;
      layout.dtype = t.scalar_type();
      layout.sizes = vec(t.sizes());
      layout.strides = vec(t.strides());
      layout.offset = t.storage_offset();
      const exec::Storage* storage = storage_of(t).get();
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i] && inputs[i]->defined() && inputs[i]->unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
          layout.same_as_input = static_cast<int>(i);
          break;
        }
      }
      auto input = input_of_storage.find(storage);
      if (layout.same_as_input < 0 && input != input_of_storage.end()) {
        layout.storage_of_input = input->second;
      } else if (layout.same_as_input < 0) {
        auto [it, inserted] = fresh_of_storage.emplace(storage, static_cast<int>(replay->fresh_.size()));
        if (inserted) {
          auto s = capture_index.find(storage);
          // A returned storage the program neither wrote nor created would come back empty.
          if (s != capture_index.end() && !(written[s->second] && !capture->states[s->second].had_buffer)) {
            return fail("an output's storage is neither an argument's nor written by the program");
          }
          replay->fresh_.push_back({storage->nbytes, exec::room_of(*storage)});
        }
        layout.fresh_storage = it->second;
      }
    }
    replay->outputs_.push_back(std::move(layout));
  }

  for (size_t s = 0; s < capture->storages.size(); ++s) {
    const exec::Storage* storage = capture->storages[s].get();
    if (storage == nullptr) continue;  // in the set, but no call of the program uses it
    StorageRole& role = replay->roles_[s];
    if (auto it = input_of_storage.find(storage); it != input_of_storage.end()) {
      role = {StorageRole::Kind::Input, it->second};
    } else if (auto fresh = fresh_of_storage.find(storage); fresh != fresh_of_storage.end()) {
      role = {StorageRole::Kind::Fresh, fresh->second};
    } else if (auto check = checks.find(storage); written[s] && check != checks.end()) {
      role = {StorageRole::Kind::Check, static_cast<int>(replay->check_ops_.size())};
      replay->check_ops_.push_back(check->second);
    } else if (written[s]) {
      // A value kept alive elsewhere: replaying would have to update it too.
      return fail("the program writes a storage that is neither an argument nor an output");
    } else if (capture->states[s].had_buffer) {
      role = {StorageRole::Kind::Constant, -1};  // read, never written: the same storage serves
      continue;
    }
    // Holding them would keep the first call's activations alive as long as the graph.
    capture->storages[s].reset();
  }
  replay->capture_ = std::move(capture);
  return replay;
}

bool GraphReplay::matches(const Tensors& inputs) const {
  if (inputs.size() != inputs_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputLayout& layout = inputs_[i];
    bool tensor = inputs[i] && inputs[i]->defined();
    if (tensor != layout.tensor) return false;
    if (!tensor) continue;
    const at::Tensor& t = *inputs[i];
    if (!on_tpu(inputs[i]) || t.scalar_type() != layout.dtype || t.sizes() != at::IntArrayRef(layout.sizes) ||
        unit_strides_canonical(t) != layout.strides || t.storage_offset() != layout.offset) {
      return false;
    }
  }
  // Arguments must share storages exactly as they did: the program reads each storage once.
  std::unordered_map<const c10::StorageImpl*, int> first_with_storage;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs_[i].tensor) continue;
    auto [it, inserted] =
        first_with_storage.emplace(inputs[i]->storage().unsafeGetStorageImpl(), static_cast<int>(i));
    if ((inserted ? -1 : it->second) != inputs_[i].shares_storage_with) return false;
  }
  return true;
}

std::optional<GraphReplay::Tensors> GraphReplay::run(const Tensors& inputs) const {
  if (!matches(inputs)) return std::nullopt;
  int device = capture_->device;
  std::vector<c10::Storage> fresh;
  fresh.reserve(fresh_.size());
  for (const FreshStorage& spec : fresh_) {
    fresh.emplace_back(c10::Storage::use_byte_size_t(), spec.nbytes, allocate_on(spec.nbytes, device), allocator(),
                       /*resizable=*/true);
    exec::give_room(*storage_of(fresh.back()), spec.room);
  }
  std::vector<at::Tensor> flags;
  for (size_t i = 0; i < check_ops_.size(); ++i) {
    flags.push_back(at::empty({}, at::TensorOptions().dtype(at::kBool).device(c10::DeviceType::PrivateUse1,
                                                                             static_cast<c10::DeviceIndex>(device))));
  }
  std::vector<exec::StoragePtr> storages(roles_.size());
  for (size_t s = 0; s < roles_.size(); ++s) {
    const StorageRole& role = roles_[s];
    switch (role.kind) {
      case StorageRole::Kind::Input: storages[s] = storage_of(*inputs[role.index]); break;
      case StorageRole::Kind::Fresh: storages[s] = storage_of(fresh[role.index]); break;
      case StorageRole::Kind::Constant: storages[s] = capture_->storages[s]; break;
      case StorageRole::Kind::Check: storages[s] = storage_of(flags[role.index]); break;
      case StorageRole::Kind::Unused: break;
    }
  }
  if (!exec::replay(*capture_, storages)) return std::nullopt;
  for (size_t i = 0; i < flags.size(); ++i) note_device_check(flags[i], check_ops_[i]);

  Tensors outputs;
  outputs.reserve(outputs_.size());
  for (const OutputLayout& layout : outputs_) {
    if (!layout.tensor) {
      outputs.emplace_back(std::nullopt);
    } else if (layout.same_as_input >= 0) {
      outputs.emplace_back(*inputs[layout.same_as_input]);
    } else {
      const c10::Storage& storage =
          layout.storage_of_input >= 0 ? inputs[layout.storage_of_input]->storage() : fresh[layout.fresh_storage];
      outputs.emplace_back(view_of_storage(storage, layout.dtype, layout.sizes, layout.strides, layout.offset));
    }
  }
  return outputs;
}

}  // namespace tpu::aten
