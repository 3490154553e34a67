// The boxed kernel behind every ATen op without a dedicated tpu kernel.
//
// It asks PyTorch's meta function for the op's result dtypes and shapes (which also raises the
// same argument errors CPU raises), turns the arguments into an exec::OpCall and runs it through
// the op's lowering. Ops with no lowering, or an argument combination their lowering declines,
// run on the CPU through the counted fallback.
#include "aten/lowered_dispatch.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "aten/argument_checks.h"
#include "aten/cpu_fallback.h"
#include "aten/device_allocator.h"
#include "aten/device_checks.h"
#include "aten/generator.h"
#include "aten/meta_results.h"
#include "aten/op_adapters.h"
#include "aten/tpu_tensor.h"
#include "exec/key_bytes.h"

namespace tpu::aten {

namespace {

using lowering::Arg;
constexpr auto kTpu = c10::DeviceType::PrivateUse1;

bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == kTpu; }

// Thrown inside this file when the lowered path cannot take an op; the op then runs on the CPU.
struct NotLowerable {};

at::Tensor meta_like(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
}

// The meta key's buffer between ops: every op builds one, and a fresh buffer is an allocation. An
// op lowered while another's builder is alive (none is today) would just build into a new one.
thread_local std::string t_spare_meta_key;

class CallBuilder {
 public:
  // `shape_depends_on_numbers`: the result sizes follow the values of the numbers (arange).
  CallBuilder(const c10::OperatorHandle& op, const lowering::Entry* entry, bool shape_depends_on_numbers)
      : schema_(op.schema()),
        meta_key_(std::move(t_spare_meta_key)),
        shape_depends_on_numbers_(shape_depends_on_numbers) {
    meta_key_.clear();
    call_.name = schema_.name().substr(schema_.name().find("::") + 2);
    call_.overload = schema_.overload_name();
    call_.lowering = entry;
  }
  ~CallBuilder() { t_spare_meta_key = std::move(meta_key_); }
  CallBuilder(const CallBuilder&) = delete;
  CallBuilder& operator=(const CallBuilder&) = delete;

  // Converts the boxed arguments into the call, and builds the key of their meta results.
  void convert(at::ArrayRef<c10::IValue> args) {
    args_ = args;
    call_.args.reserve(args.size());
    call_.inputs.reserve(args.size());  // most arguments of most ops are tensors
    exec::KeyBytes key(meta_key_);
    key.add_text(schema_.name());
    key.add_char('.');
    key.add_text(schema_.overload_name());
    key.add_char('\0');
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::Argument& argument = schema_.arguments()[i];
      const c10::IValue& value = args[i];
      c10::TypePtr type = argument.real_type();
      if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
      bool is_out = argument.is_out();
      Arg arg;
      switch (type->kind()) {
        case c10::TypeKind::TensorType:
          tensor_arg(value, argument, &arg);
          break;
        case c10::TypeKind::ListType: {
          auto element = type->castRaw<c10::ListType>()->getElementType();
          if (auto optional = element->cast<c10::OptionalType>()) element = optional->getElementType();
          list_arg(value, element->kind(), &arg);
          break;
        }
        case c10::TypeKind::NumberType:
        case c10::TypeKind::FloatType:
          if (!value.isNone()) number_arg(value, &arg);
          if (shape_depends_on_numbers_ && !value.isNone()) {
            double exact = value.toScalar().toDouble();
            key.add(&exact, sizeof exact);
          }
          break;
        case c10::TypeKind::IntType:
        case c10::TypeKind::SymIntType:
          if (!value.isNone()) {
            arg.kind = Arg::Kind::Int;
            arg.i = value.isSymInt() ? value.toSymInt().expect_int() : value.toInt();
          }
          break;
        case c10::TypeKind::ScalarTypeType:
          if (!value.isNone()) {
            arg.kind = Arg::Kind::ScalarType;
            arg.dtype = to_dtype(static_cast<at::ScalarType>(value.toInt()));
          }
          break;
        case c10::TypeKind::BoolType:
          if (!value.isNone()) {
            arg.kind = Arg::Kind::Bool;
            arg.b = value.toBool();
          }
          break;
        case c10::TypeKind::StringType:
          if (!value.isNone()) {
            arg.kind = Arg::Kind::String;
            arg.s = value.toStringRef();
          }
          break;
        case c10::TypeKind::DeviceObjType:
          if (!value.isNone()) {
            at::Device device = value.toDevice();
            if (device.type() == kTpu) {
              // Results are made without empty_strided's dispatch (fresh_result): its check is here.
              int index = device.has_index() ? device.index() : current_device();
              check_device_exists(index);
              use_device(index);
            }
          }
          break;
        case c10::TypeKind::GeneratorType:
          if (!value.isNone()) generator_ = value.toGenerator();
          break;
        case c10::TypeKind::LayoutType:
        case c10::TypeKind::MemoryFormatType:
        case c10::TypeKind::NoneType:
          if (!value.isNone()) key.add_text(std::to_string(value.toInt()));
          break;
        default:
          throw NotLowerable{};
      }
      append_meta_key(key, arg, is_out ? i : -1);
      if (!is_out) call_.args.push_back(std::move(arg));
    }
  }

  // The stack the meta function runs on: tpu tensors become meta tensors of the same layout.
  // The boxed argument i as a bool (false when it is not one).
  bool arg_bool(size_t i) const { return i < args_.size() && args_[i].isBool() && args_[i].toBool(); }

  torch::jit::Stack meta_stack() const {
    torch::jit::Stack meta;
    meta.reserve(args_.size());
    for (size_t i = 0; i < args_.size(); ++i) {
      const c10::IValue& value = args_[i];
      if (value.isTensor() && is_tpu(value.toTensor())) {
        meta.emplace_back(meta_like(value.toTensor()));
      } else if (value.isTensor() && value.toTensor().defined() &&
                 !value.toTensor().unsafeGetTensorImpl()->is_wrapped_number()) {
        // A 0-dim CPU tensor (the only kind that gets here) joins the meta tensors as one more
        // meta tensor: some reference meta functions reject mixing devices that CUDA accepts.
        // Wrapped Python numbers stay on the CPU, where every meta function expects them.
        meta.emplace_back(meta_like(value.toTensor()));
      } else if (value.isTensorList()) {
        std::vector<at::Tensor> list;
        for (const at::Tensor& t : value.toTensorVector()) list.push_back(meta_like(t));
        meta.emplace_back(list);
      } else if (value.isList() && schema_.arguments()[i].real_type()->kind() == c10::TypeKind::ListType &&
                 !value.isIntList() && !value.isBoolList() && !value.isDoubleList() && !value.isSymIntList()) {
        c10::List<c10::optional<at::Tensor>> list;
        for (const c10::IValue& entry : value.toListRef()) {
          if (entry.isNone() || !entry.toTensor().defined()) {
            list.push_back(c10::nullopt);
          } else {
            list.push_back(meta_like(entry.toTensor()));
          }
        }
        meta.emplace_back(list);
      } else if (value.isDevice()) {
        meta.emplace_back(at::Device(at::kMeta));
      } else if (value.isGenerator()) {
        meta.emplace_back();
      } else {
        meta.push_back(value);
      }
    }
    return meta;
  }

  const std::string& meta_key() const { return meta_key_; }

  // Allocates fresh outputs, resizes out= arguments, and picks each result's storage.
  void plan_outputs(const std::vector<ResultShape>& shapes, LoweredReturns* returns) {
    const auto& schema_returns = schema_.returns();
    returns->fresh.reserve(schema_returns.size());
    returns->argument.reserve(schema_returns.size());
    call_.outputs.reserve(schema_returns.size() + 1);
    call_.destinations.reserve(schema_returns.size() + 1);
    for (size_t r = 0; r < schema_returns.size(); ++r) {
      const c10::Argument& ret = schema_returns[r];
      const ResultShape& shape = shapes[r];
      if (ret.alias_info()) {
        int argument = aliased_argument(ret);
        const at::Tensor& target = *written(argument);
        if (target.sizes() != at::IntArrayRef(shape.sizes)) target.resize_(shape.sizes);
        add_destination(target);
        returns->fresh.emplace_back();
        returns->argument.push_back(argument);
        continue;
      }
      returns->argument.push_back(-1);
      if (!shape.defined) {
        call_.outputs.push_back({DType::F32, {}});
        call_.destinations.push_back({});
        returns->fresh.emplace_back(at::Tensor());
        continue;
      }
      at::Tensor fresh = fresh_result(shape.sizes, shape.strides, shape.dtype, device());
      add_destination(fresh);
      returns->fresh.emplace_back(std::move(fresh));
    }
    if (call_.lowering->checked) {
      flag_ = fresh_result({}, std::nullopt, at::kBool, device());
      add_destination(flag_);
    }
    if (call_.lowering->random) {
      uint64_t draws = 0;
      for (const auto& out : call_.outputs) draws = std::max<uint64_t>(draws, numel(out.dims));
      // Normal samples take two draws each; reserve four to keep streams apart.
      auto [seed, offset] = next_philox(generator_, device(), (draws + 1) * 4);
      call_.seed = seed;
      call_.offset = offset;
    }
    call_.device = device();
  }

  // Checks that every result is a tensor this path can produce (not a view, not a list).
  void check_returns() const {
    for (const c10::Argument& ret : schema_.returns()) {
      if (ret.type()->kind() != c10::TypeKind::TensorType) throw NotLowerable{};
      if (ret.alias_info()) {
        if (!ret.alias_info()->isWrite()) throw NotLowerable{};  // a view op: must not be copied
        aliased_argument(ret);
      }
    }
  }

  const exec::OpCall& call() const { return call_; }
  const at::Tensor& flag() const { return flag_; }
  exec::OpCall take_call() { return std::move(call_); }
  int device() const { return device_ < 0 ? current_device() : device_; }
  bool has_complex_number() const {
    return std::any_of(call_.numbers.begin(), call_.numbers.end(),
                       [](const exec::RuntimeNumber& n) { return n.dtype == DType::C128; });
  }

 private:
  void append_meta_key(exec::KeyBytes& key, const Arg& arg, long out_index) {
    key.add_char(static_cast<char>(arg.kind));
    auto append_layout = [&](const exec::TensorView& v) {
      key.add_char(static_cast<char>(v.dtype));
      key.add_dims(v.layout.sizes);
      for (int64_t d : v.layout.strides) key.add_int(d);
    };
    switch (arg.kind) {
      case Arg::Kind::Tensor: append_layout(call_.inputs[arg.slot]); break;
      case Arg::Kind::TensorList:
        key.add_int(static_cast<int64_t>(arg.slots.size()));
        for (int32_t slot : arg.slots) {
          if (slot < 0) key.add_char('n'); else append_layout(call_.inputs[slot]);
        }
        break;
      case Arg::Kind::Number: key.add_char(static_cast<char>(call_.numbers[arg.slot].dtype)); break;
      case Arg::Kind::NumberList: throw NotLowerable{};  // made by the foreach kernels only
      case Arg::Kind::Int: key.add_int(arg.i); break;
      case Arg::Kind::IntList: key.add_dims(arg.ints); break;
      case Arg::Kind::DoubleList:
        key.add(arg.doubles.data(), arg.doubles.size() * sizeof(double));
        break;
      case Arg::Kind::Bool: key.add_char(arg.b ? '1' : '0'); break;
      case Arg::Kind::String: key.add_text(arg.s); key.add_char('\0'); break;
      case Arg::Kind::ScalarType: key.add_char(static_cast<char>(arg.dtype)); break;
      case Arg::Kind::None: break;
    }
    if (out_index >= 0) {
      if (const at::Tensor* out = written(static_cast<int>(out_index))) append_layout(view_of(*out));
    }
  }

  void use_device(int index) {
    if (device_ < 0) {
      device_ = index;
    } else {
      TORCH_CHECK(device_ == index, "Expected all tensors to be on the same device, but found at least two "
                  "devices, tpu:", device_, " and tpu:", index, "!");
    }
  }

  void add_destination(const at::Tensor& t) {
    call_.outputs.push_back({to_dtype(t.scalar_type()), Dims(t.sizes().begin(), t.sizes().end())});
    call_.destinations.push_back(view_of(t));
  }

  int aliased_argument(const c10::Argument& ret) const {
    for (size_t i = 0; i < schema_.arguments().size(); ++i) {
      const auto& info = schema_.arguments()[i].alias_info();
      if (info && info->isWrite() && info->beforeSets() == ret.alias_info()->beforeSets()) {
        if (!written(static_cast<int>(i))) throw NotLowerable{};
        return static_cast<int>(i);
      }
    }
    throw NotLowerable{};
  }

  // The argument `index` when the op writes it; null otherwise.
  const at::Tensor* written(int index) const {
    for (const auto& [i, t] : written_) {
      if (i == index) return t;
    }
    return nullptr;
  }

  static at::Tensor resolved(const at::Tensor& t) { return t.resolve_conj().resolve_neg(); }

  int32_t add_input(const at::Tensor& t) {
    use_device(t.device().index());
    call_.inputs.push_back(view_of(t));
    return static_cast<int32_t>(call_.inputs.size()) - 1;
  }

  void number_from(const c10::Scalar& s, bool weak, Arg* arg) {
    std::optional<exec::RuntimeNumber> number = runtime_number(s);
    if (!number) throw NotLowerable{};  // complex and symbolic numbers
    arg->kind = Arg::Kind::Number;
    arg->weak = weak;
    arg->slot = static_cast<int32_t>(call_.numbers.size());
    call_.numbers.push_back(*number);
  }

  void number_arg(const c10::IValue& value, Arg* arg) {
    if (value.isTensor()) throw NotLowerable{};
    number_from(value.toScalar(), true, arg);
  }

  void tensor_arg(const c10::IValue& value, const c10::Argument& argument, Arg* arg) {
    if (value.isNone()) return;
    const at::Tensor& t = value.toTensor();
    if (!t.defined()) return;
    bool writes = argument.alias_info() && argument.alias_info()->isWrite();
    if (!is_tpu(t)) {
      // 0-dim CPU tensors (wrapped Python numbers included) act as numbers, as they do on CUDA.
      if (t.dim() == 0 && !writes && t.device().is_cpu()) {
        number_from(t.item(), true, arg);
        return;
      }
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, tpu:",
                  device(), " and ", t.device(), "!");
    }
    // A conjugate or negative view carries its transformation as a bit that lowerings do not
    // read: an input is resolved into a plain tensor first (a device copy), as PyTorch's own
    // fallback for those bits does; a written one takes the CPU path, which handles the bits.
    bool has_bits = t.is_conj() || t.is_neg();
    if (writes && has_bits) throw NotLowerable{};
    if (writes) written_.emplace_back(static_cast<int>(&argument - schema_.arguments().data()), &t);
    if (!argument.is_out()) {
      arg->kind = Arg::Kind::Tensor;
      // Not a conditional expression: it would copy `t`, and a copy of a tensor Python holds takes the GIL.
      arg->slot = has_bits ? add_input(resolved(t)) : add_input(t);
      arg->weak = t.dim() == 0;
    } else {
      use_device(t.device().index());
    }
  }

  void list_arg(const c10::IValue& value, c10::TypeKind element, Arg* arg) {
    switch (element) {
      case c10::TypeKind::TensorType:
        arg->kind = Arg::Kind::TensorList;
        for (const c10::IValue& entry : value.toListRef()) {
          // Python indexing passes undefined tensors where the index has a plain slice.
          if (entry.isNone() || !entry.toTensor().defined()) {
            arg->slots.push_back(-1);
            continue;
          }
          const at::Tensor& t = entry.toTensor();
          if (!is_tpu(t)) throw NotLowerable{};
          arg->slots.push_back(t.is_conj() || t.is_neg() ? add_input(resolved(t)) : add_input(t));
        }
        return;
      case c10::TypeKind::IntType:
      case c10::TypeKind::SymIntType:
        if (value.isNone()) return;
        arg->kind = Arg::Kind::IntList;
        if (value.isIntList()) {
          arg->ints = value.toIntVector();
        } else {
          for (const auto& s : value.toSymIntVector()) arg->ints.push_back(s.expect_int());
        }
        return;
      case c10::TypeKind::BoolType:
        if (value.isNone()) return;
        arg->kind = Arg::Kind::IntList;
        for (bool b : value.toBoolList()) arg->ints.push_back(b);
        return;
      case c10::TypeKind::FloatType:
        if (value.isNone()) return;
        arg->kind = Arg::Kind::DoubleList;
        arg->doubles = value.toDoubleVector();
        return;
      default:
        throw NotLowerable{};
    }
  }

  const c10::FunctionSchema& schema_;
  at::ArrayRef<c10::IValue> args_;
  exec::OpCall call_ = exec::reused_call();
  std::string meta_key_;
  bool shape_depends_on_numbers_;
  int device_ = -1;
  c10::optional<at::Generator> generator_;
  // The arguments the op writes, by index: references into the arguments, which outlive the call
  // (no copy: a copy of a tensor that Python holds takes the GIL, released around every op).
  std::vector<std::pair<int, const at::Tensor*>> written_;
  at::Tensor flag_;  // the error flag of a checked lowering
};

// Runs `op` on `args` through its lowering; false when it has to go to the CPU instead. The
// arguments stay where they are: the caller owns them (or borrows them) and passes the results on.
bool run_lowered(const c10::OperatorHandle& op, at::ArrayRef<c10::IValue> args, const lowering::Entry* entry,
                 const OpAdapter* adapter, LoweredReturns* returns) {
  CallBuilder builder(op, entry, adapter && adapter->shape_depends_on_numbers);
  try {
    builder.convert(args);
    builder.check_returns();
  } catch (const NotLowerable&) {
    return false;
  }
  MetaCache::Shapes shapes = meta_cache().find(builder.meta_key());
  if (shapes) {
    count_cached_meta();
  } else {
    auto computed = run_meta(op, builder.meta_stack(), args, adapter);
    if (!computed) return false;
    shapes = meta_cache().insert(builder.meta_key(), std::move(*computed));
  }
  // A complex number reaches only lowerings with a complex result, which convert it to that
  // dtype. With a real result (x == 1j, fill_ of a real tensor with 1j) a lowering would keep
  // its real part where the CPU compares the whole number or raises: the CPU path decides.
  if (builder.has_complex_number() &&
      std::none_of(shapes->begin(), shapes->end(), [](const ResultShape& s) { return s.defined && at::isComplexType(s.dtype); })) {
    return false;
  }
  try {
    c10::DeviceGuard guard(c10::Device(kTpu, static_cast<c10::DeviceIndex>(builder.device())));
    builder.plan_outputs(*shapes, returns);
    at::Tensor flag = builder.flag();
    exec::run(builder.take_call());
    if (flag.defined()) note_device_check(flag, display_name(op.schema()));
  } catch (const NotLowerable&) {
    return false;
  } catch (const lowering::Unsupported&) {
    return false;
  } catch (const exec::OpError& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, !e.out_of_memory(), e.what());
    throw;
  }
  return true;
}

}  // namespace

const lowering::Entry* lowering_of(const c10::FunctionSchema& schema) {
  // Per thread, so that the lookup before every op takes no lock.
  thread_local std::unordered_map<const c10::FunctionSchema*, const lowering::Entry*> cache;
  auto [it, inserted] = cache.try_emplace(&schema, nullptr);  // emplace would allocate a node every time
  if (inserted && schema.name().rfind("aten::", 0) == 0) it->second = lowering::find_lowering(schema.name().substr(6));
  return it->second;
}

void run_lowered_or_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t num_args = op.schema().arguments().size();
  const OpAdapter* adapter = adapter_for(op.schema());
  check_arguments_like_cpu(op, torch::jit::last(*stack, num_args), adapter);
  if (adapter && adapter->prepare) adapter->prepare(op, stack);
  if (const lowering::Entry* entry = lowering_of(op.schema())) {
    LoweredReturns returns;
    if (run_lowered(op, torch::jit::last(*stack, num_args), entry, adapter, &returns)) {
      const size_t first = stack->size() - num_args;
      for (size_t r = 0; r < returns.fresh.size(); ++r) {
        if (returns.argument[r] >= 0) returns.fresh[r] = (*stack)[first + returns.argument[r]];
      }
      torch::jit::drop(*stack, num_args);
      for (auto& r : returns.fresh) stack->push_back(std::move(r));
      return;
    }
  }
  run_on_cpu(op, stack);
}

bool try_lowered(const c10::OperatorHandle& op, const lowering::Entry* entry, const OpAdapter* adapter,
                 at::ArrayRef<c10::IValue> args, LoweredReturns* returns) {
  check_arguments_like_cpu(op, args, adapter);
  return run_lowered(op, args, entry, adapter, returns);
}

namespace {

void tpu_boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) { run_lowered_or_on_cpu(op, stack); }

}  // namespace

// Ops whose composite kernels PyTorch would run for tpu (op_adapters.cpp says why each is replaced).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const OpAdapter& adapter : op_adapters()) {
    if (!adapter.over_composite) continue;
    for (const std::string& op : adapter.ops) {
      m.impl(op.c_str() + 6, torch::CppFunction::makeFromBoxedFunction<&tpu_boxed_kernel>());
    }
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_boxed_kernel>());
}

void for_each_lowered_op_without_kernel(
    const std::function<void(const c10::OperatorHandle&, const std::string& qualified_name)>& visit) {
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) || !lowering_of(handle->schema())) {
      continue;
    }
    visit(*handle, name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name));
  }
}

torch::Library& generic_kernels_library() {
  static torch::Library* library =
      new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  return *library;
}

void register_structured_functional_kernels() {
  // A structured op's functional and in-place forms have a CompositeExplicitAutogradNonFunctional
  // kernel that a backend with only the out= form runs: it allocates the result, then dispatches
  // the out= op on it, whose meta function runs again on a result already sized. That is three
  // dispatches instead of one, and ops whose meta function sizes an intermediate in the result
  // first (mse_loss: the elementwise loss, then the reduction) warn that a non-empty result was
  // resized. Where the op has a lowering, the boxed kernel takes the form itself, as CPU's and
  // CUDA's own kernels do. Registered once every static kernel is, so none is overridden.
  for_each_lowered_op_without_kernel([](const c10::OperatorHandle& op, const std::string& qualified_name) {
    if (!op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) return;
    generic_kernels_library().impl(qualified_name.c_str(),
                                   torch::CppFunction::makeFromBoxedFunction<&tpu_boxed_kernel>());
  });
}

}  // namespace tpu::aten
