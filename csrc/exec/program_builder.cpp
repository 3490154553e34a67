#include "exec/program_builder.h"

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
    : storages_(storages), value_(storages.size()), written_(storages.size(), false) {}

hlo::Value ProgramBuilder::base_as(int32_t s, DType dtype) {
  const Storage* st = storages_.items()[s];
  if (!value_[s].valid()) {
    // Never written, in the program or before: what uninitialised memory may hold anyway.
    if (!st->buffer) return b_.zeros({dtype, {st->length_as(dtype)}});
    value_[s] = b_.parameter({st->dtype, {st->length_as(st->dtype)}});
    parameters_.push_back({cache::Program::Parameter::Source::Storage, s});
  }
  return reinterpret(b_, value_[s], dtype);
}

hlo::Value ProgramBuilder::read(const TensorView& view, hlo::Value offset) {
  int32_t s = storages_.find(view.storage.get());
  if (!value_[s].valid() && !view.storage->buffer) return b_.zeros({view.dtype, view.layout.sizes});
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
  // The runtime offsets of the call's views, by input slot and by destination.
  std::vector<hlo::Value> input_offset(call.inputs.size()), destination_offset(call.destinations.size());
  for_each_view(call, [&](const TensorView& view, int32_t slot) {
    if (!runtime_offset(view)) return;
    hlo::Value offset = b_.parameter({DType::I64, {}});
    parameters_.push_back({cache::Program::Parameter::Source::Offset, offsets_seen_++});
    (slot >= 0 ? input_offset[slot] : destination_offset[-1 - slot]) = offset;
  });
  for (auto& arg : ctx.args) {
    if (arg.kind == lowering::Arg::Kind::Tensor) {
      arg.value = read(call.inputs[arg.slot], input_offset[arg.slot]);
    } else if (arg.kind == lowering::Arg::Kind::Number) {
      arg.value = numbers[arg.slot];
    } else if (arg.kind == lowering::Arg::Kind::TensorList) {
      arg.values.clear();
      for (int32_t slot : arg.slots) {
        arg.values.push_back(slot < 0 ? hlo::Value{} : read(call.inputs[slot], input_offset[slot]));
      }
    }
  }
  std::vector<hlo::Value> results = call.lowering->fn(ctx);
  if (results.size() < call.destinations.size()) {
    throw std::logic_error(describe(call) + ": lowering returned too few results");
  }
  for (size_t i = 0; i < call.destinations.size(); ++i) {
    const TensorView& dest = call.destinations[i];
    if (!dest.storage) continue;
    if (b_.dims(results[i]) != call.outputs[i].dims) {
      throw std::logic_error(describe(call) + ": lowering produced a result of the wrong shape");
    }
    int32_t s = storages_.find(dest.storage.get());
    // The storage takes the writer's element type; what it held is reinterpreted to match.
    hlo::Value target = base_as(s, dest.dtype);
    value_[s] = lowering::write_view(b_, target, b_.convert(results[i], dest.dtype), dest.layout,
                                     destination_offset[i]);
    written_[s] = true;
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
  text_ = b_.module_text(runtime::Client::get().buffers_reshape_freely() ? b_.unreshaped(outputs) : outputs);
  if (inject_failure_) text_ += "this is not StableHLO\n";
  return program;
}

}  // namespace tpu::exec
