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
#include <torch/library.h>

#include <string>
#include <vector>

#include "aten/list_ops.h"
#include "aten/lowered_dispatch.h"
#include "aten/op_groups.h"

namespace tpu::aten {
namespace {

constexpr c10::DispatchKey kComposite = c10::DispatchKey::CompositeExplicitAutograd;

bool is_list_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// Whether `list` has `self`'s length and, entry by entry, its sizes and its one floating dtype.
bool like_self(at::TensorList list, at::TensorList self) {
  if (list.size() != self.size()) return false;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].defined() || list[i].scalar_type() != self[0].scalar_type() || list[i].sizes() != self[i].sizes()) {
      return false;
    }
  }
  return is_list_dtype(self[0].scalar_type());
}

// The call as one list op (lowering/foreach.cpp), when its arguments are the plain case.
bool run_as_list_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const lowering::Entry* entry = lowering_of(schema);
  const size_t num_args = schema.arguments().size();
  at::ArrayRef<c10::IValue> args = torch::jit::last(*stack, num_args);
  if (!entry || args.empty() || !args[0].isTensorList() || args[0].toTensorList().empty()) return false;
  const std::vector<at::Tensor> self = args[0].toTensorVector();
  const bool in_place = schema.returns().empty();
  const bool reduces = schema.name() == "aten::_foreach_norm";
  if ((!in_place && schema.returns().size() != 1) || (in_place && reduces)) return false;
  ListCall call(schema.name().substr(6), schema.overload_name(), entry);
  size_t tensors = 0;
  for (const c10::IValue& value : args) tensors += value.isTensorList() ? value.toListRef().size() : value.isTensor();
  call.reserve(tensors, self.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& value = args[i];
    const c10::TypeKind kind = schema.arguments()[i].real_type()->kind();
    bool taken = false;
    if (value.isTensorList()) {
      std::vector<at::Tensor> list = value.toTensorVector();
      taken = like_self(list, self) && call.add_tensor_list(list);
    } else if (value.isList()) {  // Scalar[]
      taken = value.toListRef().size() == self.size() && call.add_number_list(value.toListRef());
    } else if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      taken = (t.device().is_cpu() || t.scalar_type() == self[0].scalar_type()) && call.add_scalar_tensor(t);
    } else if (value.isNone()) {
      call.add_none();
      taken = true;
    } else if (kind == c10::TypeKind::NumberType) {
      taken = call.add_number(value.toScalar());
    }  // else a dtype for _foreach_norm (its results would take it), a bool for _foreach_copy_
    if (!taken) return false;
  }
  std::vector<at::Tensor> results;
  if (in_place) {
    call.write_into(self);
  } else {
    results = call.fresh_results(self, reduces);
  }
  if (!call.run()) return false;
  // As CPU's per-tensor loop and CUDA's kernels do: autograd then refuses a backward pass through
  // a value this call changed.
  if (in_place) {
    for (const at::Tensor& t : self) t.unsafeGetTensorImpl()->bump_version();
  }
  torch::jit::drop(*stack, num_args);
  if (!in_place) stack->push_back(c10::IValue(results));
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
