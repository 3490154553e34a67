#include "aten/argument_checks.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/Tensor.h>
#include <c10/util/SmallVector.h>

#include <unordered_map>
#include <string>
#include <vector>

#include "aten/op_adapters.h"

namespace tpu::aten {

namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

bool is_tensor_list_type(const c10::Argument& argument) {
  auto list = argument.real_type()->cast<c10::ListType>();
  return list && list->getElementType()->kind() == c10::TypeKind::TensorType;  // not Tensor?[]
}

// Every tensor among the arguments, with whether the op writes it.
struct TensorArgument {
  const at::Tensor* tensor;
  bool written;
};

using TensorArguments = c10::SmallVector<TensorArgument, 8>;

TensorArguments tensor_arguments(const c10::FunctionSchema& schema, at::ArrayRef<c10::IValue> args) {
  TensorArguments tensors;
  for (size_t i = 0; i < args.size() && i < schema.arguments().size(); ++i) {
    const auto& info = schema.arguments()[i].alias_info();
    bool written = info && info->isWrite();
    const c10::IValue& value = args[i];
    if (value.isTensor()) {
      if (value.toTensor().defined()) tensors.push_back({&value.toTensor(), written});
    } else if (value.isTensorList()) {
      for (const c10::IValue& entry : value.toListRef()) {
        if (entry.isTensor() && entry.toTensor().defined()) tensors.push_back({&entry.toTensor(), written});
      }
    }
  }
  return tensors;
}

// A tensor list (cat, stack, the _foreach ops) mixing devices: CUDA's device check raises; the CPU
// fallback would quietly copy the other device's tensors. 0-dim CPU tensors pass, as scalars do.
void check_list_devices(const c10::FunctionSchema& schema, at::ArrayRef<c10::IValue> args) {
  for (size_t i = 0; i < args.size() && i < schema.arguments().size(); ++i) {
    if (!args[i].isTensorList() || !is_tensor_list_type(schema.arguments()[i])) continue;
    const at::Tensor* device_tensor = nullptr;
    const at::Tensor* other = nullptr;
    for (const c10::IValue& entry : args[i].toListRef()) {
      const at::Tensor& t = entry.toTensor();
      if (!t.defined()) continue;
      if (t.device().type() == kTpu) {
        if (!device_tensor) device_tensor = &t;
      } else if (!other && !(t.dim() == 0 && t.device().is_cpu())) {
        other = &t;
      }
    }
    TORCH_CHECK(!device_tensor || !other, "Expected all tensors to be on the same device, but found at least two "
                "devices, ", device_tensor->device(), " and ", other->device(), "! (when checking argument ",
                schema.arguments()[i].name(), " of ", schema.name(), ")");
  }
}

// ATen's memory-overlap rule (TensorIterator and most out= kernels): a written tensor may be an
// input itself, but must not share only some of its elements with one.
void check_overlap(const TensorArguments& tensors) {
  for (const auto& written : tensors) {
    if (!written.written || written.tensor->device().type() != kTpu) continue;
    for (const auto& input : tensors) {
      if (input.written || input.tensor->device().type() != kTpu) continue;
      at::assert_no_partial_overlap(*written.tensor, *input.tensor);
    }
  }
}

// Which checks can apply to an op, from its schema alone: worked out once per op, since this runs
// before every op (most ops, functional ones with no tensor list, need none).
enum Applicable : uint8_t { kListDevices = 1, kWrites = 2 };

uint8_t applicable_checks(const c10::FunctionSchema& schema) {
  // Per thread, so that the lookup before every op takes no lock.
  thread_local std::unordered_map<const c10::FunctionSchema*, uint8_t> cache;
  auto [it, inserted] = cache.try_emplace(&schema, 0);  // emplace would allocate a node every time
  if (!inserted) return it->second;
  uint8_t checks = 0;
  for (const c10::Argument& argument : schema.arguments()) {
    if (is_tensor_list_type(argument)) checks |= kListDevices;
    if (argument.alias_info() && argument.alias_info()->isWrite()) checks |= kWrites;
  }
  return it->second = checks;
}

}  // namespace

void check_arguments_like_cpu(const c10::OperatorHandle& op, at::ArrayRef<c10::IValue> args,
                              const OpAdapter* adapter) {
  const c10::FunctionSchema& schema = op.schema();
  if (adapter && adapter->check_arguments) adapter->check_arguments(schema, args);
  uint8_t checks = applicable_checks(schema);
  if (checks == 0) return;
  if (checks & kListDevices) check_list_devices(schema, args);
  if (checks & kWrites) check_overlap(tensor_arguments(schema, args));
}

}  // namespace tpu::aten
