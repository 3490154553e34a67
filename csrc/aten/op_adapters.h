// Ops whose handling differs from the boxed kernel's generic path (lowered_dispatch.cpp), in one
// table: each adapter names its ops, why they need it, and the test that shows it. The generic
// path asks the table once per op schema; an op without an adapter costs one pointer lookup.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

#include "aten/meta_results.h"

namespace tpu::aten {

// What CPU raises for an index that the device found out of range (aten/device_checks.cpp).
enum class IndexError : uint8_t { IndexError, RuntimeError, TargetOutOfBounds };

struct OpAdapter {
  std::vector<std::string> ops;  // schema names ("aten::index"): every overload of each
  std::string reason;
  std::string test;  // tests/<file>::<test> that fails without the adapter
  // Raises what CPU raises for argument values that no meta function checks.
  void (*check_arguments)(const c10::FunctionSchema& schema, at::ArrayRef<c10::IValue> args) = nullptr;
  // Rewrites the boxed arguments before the op is lowered or run on the CPU.
  void (*prepare)(const c10::OperatorHandle& op, torch::jit::Stack* stack) = nullptr;
  // Computes the meta results on `meta` in place of the op's own meta function.
  void (*run_meta)(torch::jit::Stack* meta) = nullptr;
  // Corrects meta results where the op's CPU kernel returns something else.
  void (*correct_results)(const c10::FunctionSchema& schema, at::ArrayRef<c10::IValue> args,
                          std::vector<ResultShape>& shapes) = nullptr;
  std::string cpu_op;  // what the CPU fallback runs instead (same arguments)
  bool shape_depends_on_numbers = false;  // result sizes follow number values: the meta key holds them
  bool over_composite = false;  // the boxed kernel replaces PyTorch's composite kernel for tpu
  IndexError index_error = IndexError::IndexError;
};

const std::vector<OpAdapter>& op_adapters();
// The adapter of the op with this schema (or schema name), or null: most ops have none.
const OpAdapter* adapter_for(const c10::FunctionSchema& schema);
const OpAdapter* adapter_for(const std::string& schema_name);

}  // namespace tpu::aten
