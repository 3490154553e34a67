// Unboxed kernels for ops whose arguments are plain tensors and numbers (add, mul_, addcmul_, ...).
//
// Why: the boxed kernel receives its arguments on a stack of IValues, and PyTorch's wrapper copies
// each tensor onto it. A tensor that only Python holds has one C++ reference; the copy makes it
// two, and that transition increfs the tensor's PyObject, which takes the GIL (released around
// every op by the Python bindings); popping the stack takes it again. Two GIL round trips per
// tensor argument cost about a tenth of a small op's host time. These kernels take the arguments
// as the dispatcher passes them and hand the lowered path IValues that borrow the tensors, without
// touching their reference counts. What the lowering declines runs on the CPU from a stack of owned
// copies, without the checks and lowering attempt again. Ops whose adapter rewrites arguments keep
// the boxed kernel.
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <string>
#include <unordered_map>

#include "aten/cpu_fallback.h"
#include "aten/lowered_dispatch.h"
#include "aten/op_adapters.h"

namespace tpu::aten {

namespace {

c10::IValue borrow(const at::Tensor& t) { return c10::IValue(c10::MaybeOwnedTraits<at::Tensor>::createBorrow(t)); }
c10::IValue borrow(const c10::Scalar& s) { return c10::IValue(s); }
c10::IValue borrow(bool b) { return c10::IValue(b); }
c10::IValue borrow(int64_t i) { return c10::IValue(i); }

// The arguments as IValues; the tensors among them borrowed, and let go without a decref.
template <size_t N>
class BorrowedArguments {
 public:
  template <class... Args>
  explicit BorrowedArguments(const Args&... args) : values_{borrow(args)...} {}
  ~BorrowedArguments() {
    for (c10::IValue& v : values_) {
      if (v.isTensor()) c10::MaybeOwnedTraits<c10::IValue>::destroyBorrow(v);
    }
  }
  BorrowedArguments(const BorrowedArguments&) = delete;
  BorrowedArguments& operator=(const BorrowedArguments&) = delete;

  at::ArrayRef<c10::IValue> values() const { return values_; }
  // Owned copies, for the boxed path.
  torch::jit::Stack stack() const { return torch::jit::Stack(values_.begin(), values_.end()); }

 private:
  std::array<c10::IValue, N> values_;
};

// What a borrowing kernel knows of its op, looked up once when it is registered.
struct OpFacts {
  c10::OperatorHandle op;
  const lowering::Entry* entry;
  const OpAdapter* adapter;  // null, or one without `prepare`
};

// Runs the op on `borrowed`: the lowered path, or the CPU on owned copies of the arguments (the
// checks already made). The results are on the returned stack for the CPU, in `returns` otherwise.
template <size_t N>
std::optional<torch::jit::Stack> run_borrowed(const OpFacts& facts, const BorrowedArguments<N>& borrowed,
                                              LoweredReturns* returns) {
  if (try_lowered(facts.op, facts.entry, facts.adapter, borrowed.values(), returns)) return std::nullopt;
  torch::jit::Stack stack = borrowed.stack();
  run_on_cpu(facts.op, &stack);
  return stack;
}

template <class Signature>
struct BorrowingKernel;

// A functional op: one fresh tensor.
template <class... Args>
struct BorrowingKernel<at::Tensor(Args...)> {
  OpFacts facts;
  at::Tensor operator()(Args... args) const {
    BorrowedArguments<sizeof...(Args)> borrowed(args...);
    LoweredReturns returns;
    std::optional<torch::jit::Stack> on_cpu = run_borrowed(facts, borrowed, &returns);
    return on_cpu ? std::move(on_cpu->back()).toTensor() : std::move(returns.fresh[0]).toTensor();
  }
};

// An in-place op: writes its first argument and returns it.
template <class... Rest>
struct BorrowingKernel<at::Tensor&(at::Tensor&, Rest...)> {
  OpFacts facts;
  at::Tensor& operator()(at::Tensor& self, Rest... rest) const {
    BorrowedArguments<1 + sizeof...(Rest)> borrowed(self, rest...);
    LoweredReturns returns;
    run_borrowed(facts, borrowed, &returns);
    return self;
  }
};

using T = const at::Tensor&;
using W = at::Tensor&;
using S = const c10::Scalar&;

using Registrar = void (*)(torch::Library&, const std::string&, const OpFacts&);

template <class Signature>
void register_borrowing(torch::Library& library, const std::string& name, const OpFacts& facts) {
  library.impl(name.c_str(), torch::CppFunction(BorrowingKernel<Signature>{facts}));
}

// By the code schema_code gives: the signatures the ops of a training step use most.
const std::unordered_map<std::string, Registrar>& registrars() {
  static const auto* table = new std::unordered_map<std::string, Registrar>{
      {"T(T)", &register_borrowing<at::Tensor(T)>},
      {"T(TT)", &register_borrowing<at::Tensor(T, T)>},
      {"T(TS)", &register_borrowing<at::Tensor(T, S)>},
      {"T(TTS)", &register_borrowing<at::Tensor(T, T, S)>},
      {"T(TTT)", &register_borrowing<at::Tensor(T, T, T)>},
      {"T(TTTSS)", &register_borrowing<at::Tensor(T, T, T, S, S)>},
      {"T(TSS)", &register_borrowing<at::Tensor(T, S, S)>},
      {"T(TIB)", &register_borrowing<at::Tensor(T, int64_t, bool)>},
      {"W(W)", &register_borrowing<at::Tensor&(W)>},
      {"W(WT)", &register_borrowing<at::Tensor&(W, T)>},
      {"W(WS)", &register_borrowing<at::Tensor&(W, S)>},
      {"W(WTS)", &register_borrowing<at::Tensor&(W, T, S)>},
      {"W(WTTS)", &register_borrowing<at::Tensor&(W, T, T, S)>},
      {"W(WTTSS)", &register_borrowing<at::Tensor&(W, T, T, S, S)>},
      {"W(WSS)", &register_borrowing<at::Tensor&(W, S, S)>},
  };
  return *table;
}

// The op's signature as a code: its return (T fresh, W its first argument), then per argument T
// (a tensor), W (the first argument, written), S (a Scalar), I (an int), B (a bool). Empty for
// any other schema (lists, optionals, out= forms, several returns).
std::string schema_code(const c10::FunctionSchema& schema) {
  if (schema.returns().size() != 1 || schema.returns()[0].type()->kind() != c10::TypeKind::TensorType) return "";
  const auto& arguments = schema.arguments();
  const c10::AliasInfo* returned = schema.returns()[0].alias_info();
  std::string code = returned ? "W(" : "T(";
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::Argument& a = arguments[i];
    const c10::AliasInfo* alias = a.alias_info();
    switch (a.real_type()->kind()) {
      case c10::TypeKind::TensorType:
        if (!alias) {
          code += 'T';
        } else if (i == 0 && alias->isWrite() && returned && returned->beforeSets() == alias->beforeSets()) {
          code += 'W';
        } else {
          return "";
        }
        break;
      case c10::TypeKind::NumberType: code += 'S'; break;
      case c10::TypeKind::IntType: code += 'I'; break;
      case c10::TypeKind::BoolType: code += 'B'; break;
      default: return "";
    }
  }
  if (returned && (arguments.empty() || code[2] != 'W')) return "";
  return code + ')';
}

}  // namespace

void register_borrowed_kernels() {
  for_each_lowered_op_without_kernel([](const c10::OperatorHandle& op, const std::string& qualified_name) {
    // Only ops that reach the boxed kernel today (or would, through the structured ops' routing):
    // a composite kernel decomposes the op before our key, and must keep doing so.
    if (op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
      return;
    }
    // An adapter that rewrites the arguments needs them owned: such ops keep the boxed kernel.
    const OpAdapter* adapter = adapter_for(op.schema());
    if (adapter && adapter->prepare) return;
    auto registrar = registrars().find(schema_code(op.schema()));
    if (registrar == registrars().end()) return;
    registrar->second(generic_kernels_library(), qualified_name, OpFacts{op, lowering_of(op.schema()), adapter});
  });
}

}  // namespace tpu::aten
