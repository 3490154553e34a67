// The _foreach_* ops: torch.optim's default path on tpu (PyTorch lists tpu among the devices with
// foreach kernels, as it does CUDA) and clip_grad_norm_'s.
//
// A call over lists of one floating dtype with contiguous entries of matching sizes (what an
// optimizer passes) is recorded as one op whose lowering applies the element op to every entry
// (lowering/foreach.cpp): one program in strict mode, one node of a fused graph, and no meta
// function, since its results have their inputs' sizes and dtype. Anything else (mixed dtypes,
// integer lists, broadcasting entries, lists on several devices, a CPU scalar list, ops without
// a list lowering) runs PyTorch's composite kernel, which loops over the tensors one op at a time
// and raises CPU's errors; in strict mode that loop is grouped into one program (aten/op_groups.h).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "aten/op_groups.h"
#include "aten/tpu_tensor.h"

namespace tpu::aten {
namespace {

using lowering::Arg;
constexpr c10::DispatchKey kComposite = c10::DispatchKey::CompositeExplicitAutograd;

bool is_list_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// Builds the call of one foreach op as a list op; false (nothing recorded) where the arguments
// are not the plain case.
class ListCall {
 public:
  ListCall(const c10::OperatorHandle& op, const lowering::Entry* entry) : schema_(op.schema()) {
    call_.name = schema_.name().substr(6);
    call_.overload = schema_.overload_name();
    call_.lowering = entry;
  }

  bool convert(at::ArrayRef<c10::IValue> args) {
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::IValue& value = args[i];
      Arg arg;
      if (value.isTensorList()) {
        if (!tensor_list(value.toTensorList(), &arg)) return false;
      } else if (value.isList()) {  // Scalar[]
        if (!number_list(value.toListRef(), &arg)) return false;
      } else if (value.isTensor()) {
        if (!scalar_tensor(value.toTensor(), &arg)) return false;
      } else if (value.isScalar()) {
        if (!number(value.toScalar(), &arg)) return false;
      } else if (!value.isNone()) {
        return false;  // a dtype for _foreach_norm, a bool for _foreach_copy_: the composite's
      }
      call_.args.push_back(std::move(arg));
    }
    return !self_.empty();
  }

  // The results: written into `self` for an in-place op, fresh tensors otherwise.
  c10::optional<c10::IValue> plan_outputs() {
    bool in_place = schema_.returns().empty();
    if (!in_place && (schema_.returns().size() != 1 || schema_.arguments()[0].alias_info())) return c10::nullopt;
    bool reduces = call_.name == "_foreach_norm";
    if (in_place && reduces) return c10::nullopt;
    std::vector<at::Tensor> fresh;
    for (const at::Tensor& t : self_) {
      at::Tensor result = in_place ? t : at::empty(reduces ? at::IntArrayRef{} : t.sizes(), t.options());
      call_.outputs.push_back({to_dtype(result.scalar_type()), Dims(result.sizes().begin(), result.sizes().end())});
      call_.destinations.push_back(view_of(result));
      if (!in_place) fresh.push_back(result);
    }
    call_.device = device_;
    return in_place ? c10::IValue() : c10::IValue(fresh);
  }

  exec::OpCall take() { return std::move(call_); }
  int device() const { return device_; }

 private:
  bool same_device(const at::Tensor& t) {
    if (device_ < 0) device_ = t.device().index();
    return t.device().index() == device_;
  }

  bool tensor_list(const c10::List<at::Tensor>& list, Arg* arg) {
    const bool first = self_.empty();
    if (list.empty() || (!first && list.size() != self_.size())) return false;
    arg->kind = Arg::Kind::TensorList;
    for (size_t i = 0; i < list.size(); ++i) {
      at::Tensor t = list.get(i);
      if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 || !same_device(t)) return false;
      if (!is_list_dtype(t.scalar_type()) || t.is_conj() || t.is_neg() || !t.is_contiguous()) return false;
      const at::Tensor& like = first ? list.get(0) : self_[i];
      if (t.scalar_type() != like.scalar_type() || (!first && t.sizes() != self_[i].sizes())) return false;
      if (!first && t.scalar_type() != self_[0].scalar_type()) return false;
      if (!distinct_from_other_entries(t, i, first)) return false;
      arg->slots.push_back(static_cast<int32_t>(call_.inputs.size()));
      call_.inputs.push_back(view_of(t));
      if (first) self_.push_back(t);
    }
    return true;
  }

  // The composite loop updates entry by entry, so an in-place op whose entry i reads what an
  // earlier entry wrote (two entries of `self` sharing a storage, or another list's entry i being
  // a different entry of `self`) would see other values in one program: those take the loop.
  bool distinct_from_other_entries(const at::Tensor& t, size_t i, bool first) {
    if (!schema_.returns().empty()) return true;
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    for (size_t j = 0; j < self_.size(); ++j) {
      if ((first || j != i) && self_[j].storage().unsafeGetStorageImpl() == storage) return false;
    }
    return true;
  }

  bool number_list(c10::ArrayRef<c10::IValue> scalars, Arg* arg) {
    if (scalars.size() != self_.size()) return false;
    arg->kind = Arg::Kind::NumberList;
    for (const c10::IValue& s : scalars) {
      Arg one;
      if (!s.isScalar() || !number(s.toScalar(), &one)) return false;
      arg->slots.push_back(one.slot);
    }
    return true;
  }

  // A foreach op's single Tensor operand: a 0-dim tensor, on this device in the lists' dtype, or
  // on the CPU, where it acts as a number as it does on CUDA.
  bool scalar_tensor(const at::Tensor& t, Arg* arg) {
    if (!t.defined() || t.dim() != 0 || self_.empty()) return false;
    if (t.device().is_cpu()) return number(t.item(), arg);
    if (t.device().type() != c10::DeviceType::PrivateUse1 || !same_device(t)) return false;
    if (t.scalar_type() != self_[0].scalar_type() || t.is_conj() || t.is_neg()) return false;
    arg->kind = Arg::Kind::Tensor;
    arg->weak = true;
    arg->slot = static_cast<int32_t>(call_.inputs.size());
    call_.inputs.push_back(view_of(t));
    return true;
  }

  bool number(const c10::Scalar& s, Arg* arg) {
    exec::RuntimeNumber n;
    if (s.isFloatingPoint()) {
      n.dtype = DType::F64;
      n.f = s.toDouble();
    } else if (s.isIntegral(false)) {
      n.dtype = DType::I64;
      n.i = s.toLong();
    } else {
      return false;  // complex, bool and symbolic numbers: the composite's
    }
    arg->kind = Arg::Kind::Number;
    arg->weak = true;
    arg->slot = static_cast<int32_t>(call_.numbers.size());
    call_.numbers.push_back(n);
    return true;
  }

  const c10::FunctionSchema& schema_;
  exec::OpCall call_;
  std::vector<at::Tensor> self_;  // the first list's tensors
  int device_ = -1;
};

bool run_as_list_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const lowering::Entry* entry = lowering::find_lowering(op.schema().name().substr(6));
  if (!entry) return false;
  const size_t num_args = op.schema().arguments().size();
  ListCall call(op, entry);
  if (!call.convert(torch::jit::last(*stack, num_args))) return false;
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(call.device())));
  c10::optional<c10::IValue> results = call.plan_outputs();
  if (!results) return false;
  try {
    exec::run(call.take());
  } catch (const lowering::Unsupported&) {
    return false;  // nothing was recorded or run
  }
  torch::jit::drop(*stack, num_args);
  if (!results->isNone()) stack->push_back(std::move(*results));
  return true;
}

void foreach_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  if (run_as_list_op(op, stack)) return;
  as_one_program("foreach op", [&] { op.redispatchBoxed(c10::DispatchKeySet(kComposite), stack); });
}

bool is_foreach_with_composite_kernel(const c10::OperatorName& name) {
  if (name.name.rfind("aten::_foreach_", 0) != 0) return false;
  auto handle = c10::Dispatcher::singleton().findOp(name);
  return handle && handle->hasKernelForDispatchKey(kComposite);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (!is_foreach_with_composite_kernel(name)) continue;
    std::string qualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    m.impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&foreach_kernel>());
  }
}

}  // namespace
}  // namespace tpu::aten
