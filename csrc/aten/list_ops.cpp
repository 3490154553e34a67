#include "aten/list_ops.h"

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>

#include "aten/device_allocator.h"
#include "aten/tpu_tensor.h"

namespace tpu::aten {

using lowering::Arg;

namespace {

bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

const void* storage_key(const at::Tensor& t) { return t.storage().unsafeGetStorageImpl(); }

}  // namespace

ListCall::ListCall(const std::string& name, const std::string& overload, const lowering::Entry* entry) {
  call_.name = name;
  call_.overload = overload;
  call_.lowering = entry;
}

void ListCall::reserve(size_t tensors, size_t written) {
  call_.inputs.reserve(tensors);
  read_.reserve(tensors);
  call_.outputs.reserve(written);
  call_.destinations.reserve(written);
  written_.reserve(written);
}

bool ListCall::same_device(const at::Tensor& t) {
  if (device_ < 0) device_ = t.device().index();
  return t.device().index() == device_;
}

bool ListCall::add_tensor_list(at::TensorList list) {
  Arg arg;
  arg.kind = Arg::Kind::TensorList;
  arg.slots.reserve(list.size());
  call_.inputs.reserve(call_.inputs.size() + list.size());
  read_.reserve(read_.size() + list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const at::Tensor& t = list[i];
    if (!is_tpu(t) || !same_device(t) || t.is_conj() || t.is_neg() || !t.is_contiguous()) return false;
    arg.slots.push_back(static_cast<int32_t>(call_.inputs.size()));
    call_.inputs.push_back(view_of(t));
    read_.emplace_back(static_cast<int64_t>(i), storage_key(t));
  }
  call_.args.push_back(std::move(arg));
  return true;
}

bool ListCall::add_number_list(c10::ArrayRef<c10::IValue> scalars) {
  Arg arg;
  arg.kind = Arg::Kind::NumberList;
  for (const c10::IValue& s : scalars) {
    if (!s.isScalar() || !add_number(s.toScalar())) return false;
    arg.slots.push_back(call_.args.back().slot);
    call_.args.pop_back();
  }
  call_.args.push_back(std::move(arg));
  return true;
}

bool ListCall::add_scalar_tensor(const at::Tensor& t) {
  if (!t.defined() || t.dim() != 0) return false;
  if (t.device().is_cpu()) return add_number(t.item());
  if (!add_tensor(t)) return false;
  call_.args.back().weak = true;
  return true;
}

bool ListCall::add_tensor(const at::Tensor& t) {
  if (!is_tpu(t) || !same_device(t) || t.is_conj() || t.is_neg()) return false;
  Arg arg;
  arg.kind = Arg::Kind::Tensor;
  arg.slot = static_cast<int32_t>(call_.inputs.size());
  call_.inputs.push_back(view_of(t));
  read_.emplace_back(-1, storage_key(t));
  call_.args.push_back(std::move(arg));
  return true;
}

bool ListCall::add_number(const c10::Scalar& s) {
  std::optional<exec::RuntimeNumber> number = runtime_number(s);
  // The list lowerings compute in real dtypes only; complex numbers take the CPU path.
  if (!number || number->dtype == DType::C128) return false;
  Arg arg;
  arg.kind = Arg::Kind::Number;
  arg.weak = true;
  arg.slot = static_cast<int32_t>(call_.numbers.size());
  call_.numbers.push_back(*number);
  call_.args.push_back(std::move(arg));
  return true;
}

void ListCall::add_bool(bool value) {
  Arg arg;
  arg.kind = Arg::Kind::Bool;
  arg.b = value;
  call_.args.push_back(std::move(arg));
}

void ListCall::add_none() { call_.args.emplace_back(); }

void ListCall::write_into(at::TensorList targets) {
  call_.outputs.reserve(call_.outputs.size() + targets.size());
  call_.destinations.reserve(call_.destinations.size() + targets.size());
  written_.reserve(written_.size() + targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const at::Tensor& t = targets[i];
    call_.outputs.push_back({to_dtype(t.scalar_type()), Dims(t.sizes().begin(), t.sizes().end())});
    call_.destinations.push_back(view_of(t));
    written_.emplace_back(static_cast<int64_t>(i), storage_key(t));
  }
}

void ListCall::write_into(const at::Tensor& target) {
  call_.outputs.push_back({to_dtype(target.scalar_type()), Dims(target.sizes().begin(), target.sizes().end())});
  call_.destinations.push_back(view_of(target));
  written_.emplace_back(-1, storage_key(target));
}

std::vector<at::Tensor> ListCall::fresh_results(at::TensorList like, bool rank0) {
  std::vector<at::Tensor> results;
  results.reserve(like.size());
  call_.outputs.reserve(call_.outputs.size() + like.size());
  call_.destinations.reserve(call_.destinations.size() + like.size());
  for (size_t i = 0; i < like.size(); ++i) {
    const at::Tensor& t = like[i];
    at::Tensor result = fresh_result(rank0 ? at::IntArrayRef{} : t.sizes(), std::nullopt, t.scalar_type(), t.device().index());
    call_.outputs.push_back({to_dtype(result.scalar_type()), Dims(result.sizes().begin(), result.sizes().end())});
    call_.destinations.push_back(view_of(result));
    results.push_back(result);
  }
  return results;
}

bool ListCall::entries_independent() {
  // Sorted by storage, so that a storage's entries sit together: no map per call.
  auto by_storage = [](const ListEntry& a, const ListEntry& b) { return a.second < b.second; };
  std::sort(written_.begin(), written_.end(), by_storage);
  for (size_t i = 1; i < written_.size(); ++i) {
    if (written_[i].second == written_[i - 1].second) return false;  // two writes into one storage
  }
  for (const ListEntry& read : read_) {
    auto it = std::lower_bound(written_.begin(), written_.end(), read, by_storage);
    if (it != written_.end() && it->second == read.second && it->first != read.first) return false;
  }
  return true;
}

bool ListCall::run() {
  if (device_ < 0 || !entries_independent()) return false;
  call_.device = device_;
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device_)));
  try {
    exec::run(std::move(call_));
  } catch (const lowering::Unsupported&) {
    return false;  // nothing was recorded or run
  }
  return true;
}

}  // namespace tpu::aten
