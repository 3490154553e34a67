// Weight normalisation, w = g * v / ||v|| with the norm over every dim but `dim`: the fused op
// behind torch.nn.utils.weight_norm and parametrizations.weight_norm, which the positional
// convolution of wav2vec2, HuBERT, WavLM, SEW and their relatives applies on every forward.
#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

struct Norms {
  Dims reduced;  // the dims the norm runs over
  Dims kept;     // v's shape with those dims set to 1 (g's and the norms' shape)
};

Norms norm_dims(const Dims& shape, int64_t dim) {
  int64_t rank = static_cast<int64_t>(shape.size());
  Norms n;
  n.kept = shape;
  int64_t keep = wrap_dim(dim, rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (d == keep) continue;
    n.reduced.push_back(d);
    n.kept[d] = 1;
  }
  return n;
}

// _weight_norm_interface(Tensor v, Tensor g, int dim=0) -> (Tensor w, Tensor norms)
std::vector<Value> lower_weight_norm_interface(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  Value v = b.convert(ctx.tensor(0), acc);
  Dims shape = b.dims(v);
  Norms n = norm_dims(shape, ctx.int_arg(2, 0));
  Value g = b.reshape(b.convert(ctx.tensor(1), acc), n.kept);
  Value norms = b.unary("stablehlo.sqrt", sum_over(b, b.mul(v, v), n.reduced));
  norms = b.reshape(norms, n.kept);
  Value w = b.mul(v, b.broadcast_to(b.div(g, norms), shape));
  return {as_output(ctx, w, 0), as_output(ctx, norms, 1)};
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim)
//   -> (grad_v, grad_g)
// With n = ||v||: grad_g = sum(grad_w * v) / n and grad_v = (g / n) * (grad_w - v * grad_g / n).
std::vector<Value> lower_weight_norm_interface_backward(Context& ctx) {
  Builder& b = ctx.b;
  DType acc = float_compute_type(ctx, 0);
  Value grad = b.convert(ctx.tensor(0), acc);
  Value v = b.convert(ctx.tensor(1), acc);
  Dims shape = b.dims(v);
  Norms n = norm_dims(shape, ctx.int_arg(4, 0));
  Value g = b.reshape(b.convert(ctx.tensor(2), acc), n.kept);
  Value norms = b.reshape(b.convert(ctx.tensor(3), acc), n.kept);
  Value grad_g = b.div(b.reshape(sum_over(b, b.mul(grad, v), n.reduced), n.kept), norms);
  Value along = b.broadcast_to(b.div(grad_g, norms), shape);
  Value grad_v = b.mul(b.broadcast_to(b.div(g, norms), shape), b.sub(grad, b.mul(v, along)));
  return {as_output(ctx, grad_v, 0), as_output(ctx, grad_g, 1)};
}

}  // namespace

TPU_LOWERING("_weight_norm_interface", lower_weight_norm_interface);
TPU_LOWERING("_weight_norm_interface_backward", lower_weight_norm_interface_backward);

}  // namespace tpu::lowering
