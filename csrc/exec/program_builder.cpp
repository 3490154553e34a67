#include "exec/program_builder.h"
#include "exec/storage_state.h"

#include <algorithm>
#include <cmath>

#include "exec/padding.h"
#include "runtime/runtime.h"

namespace tpu::exec {

namespace {

// The same bytes seen as another element type (a storage read or written through view(dtype)).
// Widths may differ: narrowing splits each element, widening joins neighbours.
hlo::Value reinterpret(hlo::Builder& b, hlo::Value flat, DType to) {
  DType from = b.dtype(flat);
  if (from == to) return flat;
  // A complex element is its real part followed by its imaginary part (view_as_real); other
  // dtypes reach complex storage through that component type.
  if (is_complex(from)) {
    DType part = from == DType::C64 ? DType::F32 : DType::F64;
    int64_t n = b.dims(flat)[0];
    hlo::Value re = b.reshape(b.op1("stablehlo.real", {flat}, {part, {n}}), {n, 1});
    hlo::Value im = b.reshape(b.op1("stablehlo.imag", {flat}, {part, {n}}), {n, 1});
    return reinterpret(b, b.reshape(b.concatenate({re, im}, 1), {2 * n}), to);
  }
  if (is_complex(to)) {
    DType part = to == DType::C64 ? DType::F32 : DType::F64;
    hlo::Value parts = reinterpret(b, flat, part);
    int64_t whole = b.dims(parts)[0] / 2;
    hlo::Value pairs = b.reshape(b.slice(parts, {0}, {2 * whole}, {1}), {whole, 2});
    hlo::Value re = b.reshape(b.slice(pairs, {0, 0}, {whole, 1}, {1, 1}), {whole});
    hlo::Value im = b.reshape(b.slice(pairs, {0, 1}, {whole, 2}, {1, 1}), {whole});
    return b.op1("stablehlo.complex", {re, im}, {to, {whole}});
  }
  if (from == DType::Bool) return reinterpret(b, b.convert(flat, DType::U8), to);
  if (to == DType::Bool) return b.convert(reinterpret(b, flat, DType::U8), DType::Bool);
  int64_t n = b.dims(flat)[0];
  int64_t from_width = itemsize(from), to_width = itemsize(to);
  if (from_width == to_width) return b.bitcast_convert(flat, to);
  if (from_width > to_width) {
    int64_t ratio = from_width / to_width;
    hlo::Value split = b.op1("stablehlo.bitcast_convert", {flat}, {to, {n, ratio}});
    return b.reshape(split, {n * ratio});
  }
  int64_t ratio = to_width / from_width;
  int64_t whole = n / ratio;
  if (whole * ratio != n) flat = b.slice(flat, {0}, {whole * ratio}, {1});
  return b.op1("stablehlo.bitcast_convert", {b.reshape(flat, {whole, ratio})}, {to, {whole}});
}

}  // namespace

std::string describe(const OpCall& call) {
  return "aten::" + call.name + (call.overload.empty() ? "" : "." + call.overload);
}

ProgramBuilder::ProgramBuilder(const StorageSet& storages)
    : storages_(storages),
      value_(storages.size()),
      parameter_value_(storages.size()),
      parameter_position_(storages.size(), -1),
      written_(storages.size(), false),
      settled_(storages.size(), false) {}

// A storage the program came in with, written and then read by another op, is read through an
// optimization barrier. Its new value goes back into the parameter's buffer (donation), and
// without the barrier XLA fuses the writer's arithmetic into each reader again, so the readers
// read the old buffer after the writer has overwritten it and XLA copies the old buffer first
// (measured: an AdamW step over 54 parameters copied 57 of its buffers each step, a quarter of
// the step's time on XLA:CPU). Behind the barrier the readers read the new value once written.
void ProgramBuilder::settle_for_readers(int32_t s, const OpCall& reader) {
  if (!written_[s] || settled_[s] || parameter_position_[s] < 0) return;
  for (const auto& dest : reader.destinations) {
    if (dest.storage && storages_.find(dest.storage.get()) == s) return;  // its own in-place update
  }
  value_[s] = b_.unary("stablehlo.optimization_barrier", value_[s]);
  settled_[s] = true;
}

hlo::Value ProgramBuilder::base_as(int32_t s, DType dtype) {
  const Storage* st = storages_.items()[s];
  if (!value_[s].valid()) {
    // Never written, in the program or before: what uninitialised memory may hold anyway.
    const StorageState& state = state_of(*st);
    if (!state.buffer) return b_.zeros({dtype, {st->length_as(dtype)}});
    value_[s] = parameter_value_[s] = b_.parameter({state.dtype, {st->length_as(state.dtype)}});
    parameter_position_[s] = static_cast<int32_t>(parameters_.size());
    parameters_.push_back({cache::Program::Parameter::Source::Storage, s});
  }
  return reinterpret(b_, value_[s], dtype);
}

hlo::Value ProgramBuilder::read(const TensorView& view, hlo::Value offset) {
  int32_t s = storages_.find(view.storage.get());
  if (!value_[s].valid() && !state_of(*view.storage).buffer) return b_.zeros({view.dtype, view.layout.sizes});
  return lowering::read_view(b_, base_as(s, view.dtype), view.layout, offset);
}

void ProgramBuilder::lower(const OpCall& call) {
  static const char* broken_op = std::getenv("TORCH_TPU_INJECT_COMPILE_FAILURE");  // for error tests
  inject_failure_ |= broken_op && call.name == broken_op;

  std::vector<hlo::Value> numbers;
  for (const auto& number : call.numbers) {
    numbers.push_back(b_.parameter({number.dtype, {}}));
    parameters_.push_back({cache::Program::Parameter::Source::Number, numbers_seen_++});
  }
  lowering::Context ctx{b_, call.name, call.overload, call.args, call.outputs, {}};
  if (call.lowering->random) {
    ctx.rng_state = b_.parameter({DType::U64, {2}});
    parameters_.push_back({cache::Program::Parameter::Source::RngState, random_calls_seen_++});
  }
  // The runtime placement of the call's views, by input slot and by destination: an offset, or
  // for a padded view its whole layout.
  const PaddingPlan* plan = call.padded ? call.padding.get() : nullptr;
  std::vector<hlo::Value> input_offset(call.inputs.size()), destination_offset(call.destinations.size());
  std::vector<int32_t> input_view(call.inputs.size(), -1), destination_view(call.destinations.size(), -1);
  std::vector<lowering::RuntimeLayout> padded;
  auto runtime_number = [&] {
    hlo::Value v = b_.parameter({DType::I64, {}});
    parameters_.push_back({cache::Program::Parameter::Source::Offset, offsets_seen_++});
    return v;
  };
  size_t view_index = 0;
  for_each_view(call, [&](const TensorView& view, int32_t slot) {
    size_t index = view_index++;
    if (plan && plan->view_placed[index]) {
      lowering::RuntimeLayout layout{plan->view_sizes[index], plan->view_padded[index], plan->view_prefix[index],
                                     plan->view_window_strides[index], runtime_number(), {}, {}};
      for (size_t d = 0; d < view.layout.sizes.size(); ++d) layout.runtime_sizes.push_back(runtime_number());
      for (size_t d = 0; d < view.layout.sizes.size(); ++d) layout.strides.push_back(runtime_number());
      (slot >= 0 ? input_view[slot] : destination_view[-1 - slot]) = static_cast<int32_t>(index);
      padded.resize(std::max(padded.size(), index + 1));
      padded[index] = std::move(layout);
      return;
    }
    if (!runtime_offset(view)) return;
    (slot >= 0 ? input_offset[slot] : destination_offset[-1 - slot]) = runtime_number();
  });
  auto read_input = [&](int32_t slot, lowering::Arg& arg) {
    const TensorView& view = call.inputs[slot];
    int32_t index = input_view[slot];
    if (plan) {
      // Lowerings that move results by a padded size (cat) read every dim's real size.
      std::vector<hlo::Value> sizes;
      if (index >= 0) {
        sizes = padded[index].runtime_sizes;
      } else {
        for (int64_t size : view.layout.sizes) sizes.push_back(b_.constant(static_cast<double>(size), DType::I64));
      }
      arg.padded_dims.push_back(index >= 0 ? padded[index].padded : 0);
      arg.runtime_sizes.push_back(std::move(sizes));
    }
    settle_for_readers(storages_.find(view.storage.get()), call);
    if (index < 0) return read(view, input_offset[slot]);
    if (padded_writes_.forwards(view, padded[index].sizes)) {
      hlo::Value value = written_padded_.at(view.storage.get());
      double fill = plan->view_fills[index];
      hlo::Value real = std::isnan(fill) ? hlo::Value{} : lowering::padding_mask(b_, padded[index]);
      return real.valid() ? b_.select(real, value, b_.full(fill, {view.dtype, padded[index].sizes})) : value;
    }
    int32_t s = storages_.find(view.storage.get());
    if (!value_[s].valid() && !state_of(*view.storage).buffer) return b_.zeros({view.dtype, padded[index].sizes});
    return lowering::read_padded_view(b_, base_as(s, view.dtype), padded[index], plan->view_fills[index]);
  };
  for (auto& arg : ctx.args) {
    arg.padded_dims.clear();
    arg.runtime_sizes.clear();
    if (arg.kind == lowering::Arg::Kind::Tensor) {
      arg.value = read_input(arg.slot, arg);
      arg.contiguous = lowering::is_contiguous(call.inputs[arg.slot].layout);
    } else if (arg.kind == lowering::Arg::Kind::Number) {
      arg.value = numbers[arg.slot];
    } else if (arg.kind == lowering::Arg::Kind::NumberList) {
      arg.values.clear();
      for (int32_t slot : arg.slots) arg.values.push_back(numbers[slot]);
    } else if (arg.kind == lowering::Arg::Kind::TensorList) {
      arg.values.clear();
      for (int32_t slot : arg.slots) {
        if (slot >= 0) {
          arg.values.push_back(read_input(slot, arg));
        } else {
          arg.values.push_back(hlo::Value{});
          if (plan) {
            arg.padded_dims.push_back(0);
            arg.runtime_sizes.emplace_back();
          }
        }
      }
    }
  }
  if (plan) {
    for (size_t i = 0; i < ctx.outputs.size(); ++i) ctx.outputs[i].dims = plan->output_dims[i];
  }
  std::vector<hlo::Value> results = call.lowering->fn(ctx);
  if (results.size() < call.destinations.size()) {
    throw std::logic_error(describe(call) + ": lowering returned too few results");
  }
  for (size_t i = 0; i < call.destinations.size(); ++i) {
    const TensorView& dest = call.destinations[i];
    if (!dest.storage) continue;
    if (b_.dims(results[i]) != ctx.outputs[i].dims) {
      throw std::logic_error(describe(call) + ": lowering produced a result of the wrong shape");
    }
    int32_t s = storages_.find(dest.storage.get());
    // The storage takes the writer's element type; what it held is reinterpreted to match.
    hlo::Value target = base_as(s, dest.dtype);
    hlo::Value result = b_.convert(results[i], dest.dtype);
    if (destination_view[i] >= 0) {
      const lowering::RuntimeLayout& layout = padded[destination_view[i]];
      value_[s] = lowering::write_padded_view(b_, target, result, layout);
      padded_writes_.wrote(dest, &layout.sizes);
      written_padded_[dest.storage.get()] = result;
    } else {
      value_[s] = lowering::write_view(b_, target, result, dest.layout, destination_offset[i]);
      padded_writes_.wrote(dest, nullptr);
    }
    written_[s] = true;
    settled_[s] = false;
  }
}

cache::Program ProgramBuilder::finish(const std::function<bool(const Storage&)>& keep) {
  cache::Program program;
  std::vector<hlo::Value> outputs;
  for (size_t s = 0; s < written_.size(); ++s) {
    if (!written_[s] || !keep(*storages_.items()[s])) continue;
    outputs.push_back(value_[s]);
    program.output_storages.push_back(static_cast<int32_t>(s));
    program.output_dtypes.push_back(b_.dtype(value_[s]));
    program.output_types.push_back(b_.type(value_[s]));
  }
  program.parameters = parameters_;
  // A storage's buffer may come back in its value's own shape where the plugin allows: XLA:CPU
  // would otherwise compute a value once for the flat result and again for each later reader.
  std::vector<hlo::Value> results = runtime::Client::get().buffers_reshape_freely() ? b_.unreshaped(outputs) : outputs;
  // A storage the program reads and replaces whole may give its buffer to its new value
  // (donation): an in-place update then needs no second copy of what it updates. Whether it does
  // is decided at each launch (exec/launch.cpp), where other holders of the buffer are known.
  // Such a result comes back in the parameter's own (flat) shape: XLA:CPU copies a buffer in and
  // out of a program where an aliased result's shape differs from its parameter's.
  std::vector<int32_t> result_of_parameter(parameters_.size(), -1);
  for (size_t j = 0; j < results.size(); ++j) {
    int32_t s = program.output_storages[j];
    const TensorType& result = b_.type(outputs[j]);
    const TensorType& parameter = b_.type(parameter_value_[s].valid() ? parameter_value_[s] : outputs[j]);
    if (parameter_position_[s] >= 0 && result.dtype == parameter.dtype && numel(result.dims) == numel(parameter.dims)) {
      result_of_parameter[parameter_position_[s]] = static_cast<int32_t>(j);
      results[j] = outputs[j];
    }
  }
  text_ = b_.module_text(results, 1, result_of_parameter);
  if (inject_failure_) text_ += "this is not StableHLO\n";
  return program;
}

}  // namespace tpu::exec
