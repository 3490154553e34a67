// GradScaler's two device ops, so that mixed-precision training with torch.amp.GradScaler("tpu")
// never reads the scale on the host: _amp_foreach_non_finite_check_and_unscale_ (one op over the
// gradient list, aten/grad_scaler_kernels.cpp) and _amp_update_scale_. As CUDA's kernels: each
// gradient is multiplied by inv_scale in float32 and stored in its dtype, found_inf becomes 1
// where any gradient held an inf or NaN; the scale backs off after an inf and grows every
// growth_interval steps without one, unless growing it would overflow.
#include <vector>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

Value rank0(Builder& b, Value v, DType t) { return b.convert(b.reshape(v, {}), t); }

// (grads..., found_inf, inv_scale) -> (unscaled grads..., found_inf)
std::vector<Value> lower_unscale(Context& ctx) {
  Builder& b = ctx.b;
  const auto& grads = ctx.arg(0).values;
  Value found_inf = ctx.tensor(1);
  Value inv_scale = rank0(b, ctx.tensor(2), DType::F32);
  Value any_nonfinite = b.constant(0, DType::Bool);
  std::vector<Value> results;
  for (Value grad : grads) {
    Value g = b.convert(grad, DType::F32);
    Value finite = b.op1("stablehlo.is_finite", {g}, {DType::Bool, b.dims(g)});
    Value all_finite = b.reduce(finite, b.constant(1, DType::Bool), all_dims(b.rank(g)), "stablehlo.and");
    any_nonfinite = b.binary("stablehlo.or", any_nonfinite, b.unary("stablehlo.not", all_finite));
    results.push_back(b.convert(b.mul(g, b.broadcast_to(inv_scale, b.dims(g))), b.dtype(grad)));
  }
  TensorType flag_type{b.dtype(found_inf), b.dims(found_inf)};
  results.push_back(b.select(b.broadcast_to(any_nonfinite, flag_type.dims), b.full(1, flag_type), found_inf));
  return results;
}
TPU_LOWERING("_amp_foreach_non_finite_check_and_unscale", lower_unscale);

// (scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval)
//   -> (scale, growth_tracker)
std::vector<Value> lower_update_scale(Context& ctx) {
  Builder& b = ctx.b;
  Value scale = ctx.tensor(0), tracker = ctx.tensor(1);
  const DType scale_dtype = b.dtype(scale), tracker_dtype = b.dtype(tracker);
  Value current = rank0(b, scale, DType::F32);
  Value found = b.compare(rank0(b, ctx.tensor(2), DType::F32), b.constant(0, DType::F32), "NE");
  Value successful = b.add(rank0(b, tracker, DType::I64), b.constant(1, DType::I64));
  Value grows = b.compare(successful, b.convert(ctx.tensor(5), DType::I64), "EQ");
  Value grown = b.mul(current, b.convert(ctx.tensor(3), DType::F32));
  Value grown_finite = b.op1("stablehlo.is_finite", {grown}, {DType::Bool, {}});
  Value kept_or_grown = b.select(b.binary("stablehlo.and", grows, grown_finite), grown, current);
  Value new_scale = b.select(found, b.mul(current, b.convert(ctx.tensor(4), DType::F32)), kept_or_grown);
  Value zero = b.constant(0, DType::I64);
  Value new_tracker = b.select(b.binary("stablehlo.or", found, grows), zero, successful);
  return {b.reshape(b.convert(new_scale, scale_dtype), b.dims(scale)),
          b.reshape(b.convert(new_tracker, tracker_dtype), b.dims(tracker))};
}
TPU_LOWERING("_amp_update_scale", lower_update_scale);

}  // namespace
}  // namespace tpu::lowering
