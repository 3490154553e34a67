// torch.histc. Mixture-of-experts layers count the tokens routed to each expert with histc over
// integer expert ids (transformers takes that path on every device but the CPU, whose kernel
// has no integer histc), so integer inputs are lowered as well as floating ones.
#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

// histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor
std::vector<Value> lower_histc(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType in = b.dtype(x);
  if (is_complex(in) || in == DType::Bool) throw Unsupported("histc: " + ctx.op + " dtype");
  int64_t bins = ctx.int_arg(1, 100);
  if (bins <= 0) throw Unsupported("histc: bins must be positive");
  // Integers and float64 bin in float64, so that (x - min) * bins / (max - min) floors
  // exactly as the integer arithmetic of a device's integer kernel does for moderate values.
  DType calc = (in == DType::F32 || in == DType::F16 || in == DType::BF16) ? DType::F32 : DType::F64;
  Dims flat{count_over(b.dims(x), all_dims(b.rank(x)))};
  Value v = b.convert(b.reshape(x, flat), calc);
  Value lo = ctx.has(2) ? b.convert(ctx.tensor(2), calc) : b.constant(0.0, calc);
  Value hi = ctx.has(3) ? b.convert(ctx.tensor(3), calc) : b.constant(0.0, calc);
  lo = b.reshape(lo, {});
  hi = b.reshape(hi, {});
  // min == max means "the data's own range"; a range that is still empty widens by 1 each side.
  Value data_lo = b.reduce(v, b.constant(highest(calc), calc), {0}, "stablehlo.minimum");
  Value data_hi = b.reduce(v, b.constant(lowest(calc), calc), {0}, "stablehlo.maximum");
  Value auto_range = b.compare(lo, hi, "EQ");
  lo = b.select(auto_range, data_lo, lo);
  hi = b.select(auto_range, data_hi, hi);
  Value empty = b.compare(lo, hi, "EQ");
  Value one = b.constant(1.0, calc);
  lo = b.select(empty, b.sub(lo, one), lo);
  hi = b.select(empty, b.add(hi, one), hi);

  Value lo_n = b.broadcast_to(lo, flat);
  Value hi_n = b.broadcast_to(hi, flat);
  Value scale = b.div(b.constant(static_cast<double>(bins), calc), b.sub(hi, lo));
  Value pos = b.unary("stablehlo.floor", b.mul(b.sub(v, lo_n), b.broadcast_to(scale, flat)));
  // The right edge belongs to the last bin.
  Value last = b.full(static_cast<double>(bins - 1), {calc, flat});
  pos = b.min(pos, last);
  Value inside = b.binary("stablehlo.and", b.compare(v, lo_n, "GE"), b.compare(v, hi_n, "LE"));
  Value index = b.select(inside, b.convert(pos, DType::I64), b.full(-1.0, {DType::I64, flat}));

  Dims grid{flat[0], bins};
  Value bin_ids = b.iota({DType::I64, grid}, 1);
  Value hit = b.compare(b.broadcast_in_dim(index, grid, {0}), bin_ids, "EQ");
  DType out = ctx.outputs.at(0).dtype;
  DType count_type = is_floating(out) ? accumulation_type(out) : DType::I64;
  Value counts = sum_over(b, b.convert(hit, count_type), {0});
  return {as_output(ctx, b.convert(counts, out))};
}

}  // namespace

TPU_LOWERING("histc", lower_histc);

}  // namespace tpu::lowering
