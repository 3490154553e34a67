// Reflection and replication padding (1-D, 2-D, 3-D) and their backward ops.
//
// Each padded dim is an index map from output positions to input positions, computed in the
// program from an iota: reflect folds the position back at the edges, replicate clamps it.
// The forward gathers along each padded dim in turn; the backward scatter-adds the gradient
// back through the same maps, in reverse order.
#include <cstdlib>
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

enum class Mode { Reflect, Replicate };

// Input position of each of the `out_size` output positions of a dim of `size` padded by `low`.
Value source_positions(Builder& b, int64_t size, int64_t low, int64_t out_size, Mode mode) {
  TensorType t{DType::I64, {out_size}};
  Value i = b.sub(b.iota(t, 0), b.full(static_cast<double>(low), t));
  Value last = b.full(static_cast<double>(size - 1), t);
  if (mode == Mode::Replicate) return b.min(b.max(i, b.zeros(t)), last);
  // Reflect about 0, then about size - 1.
  i = b.unary("stablehlo.abs", i);
  return b.sub(last, b.unary("stablehlo.abs", b.sub(last, i)));
}

// The padded dims of `shape` for a padding list whose pairs run from the last dim backwards.
struct PadDim {
  int64_t dim, low, high;
};
std::vector<PadDim> pad_dims(const Context& ctx, const Dims& shape, const Dims& padding) {
  int64_t rank = static_cast<int64_t>(shape.size());
  if (padding.size() % 2 != 0 || static_cast<int64_t>(padding.size()) > 2 * rank) {
    throw Unsupported(ctx.op + ": malformed padding");
  }
  std::vector<PadDim> dims;
  for (size_t i = 0; i < padding.size() / 2; ++i) {
    dims.push_back({rank - 1 - static_cast<int64_t>(i), padding[2 * i], padding[2 * i + 1]});
  }
  return dims;
}

template <Mode mode>
std::vector<Value> lower_pad(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (numel(ctx.outputs.at(0).dims) == 0) return {b.zeros(ctx.out_type())};
  for (const PadDim& p : pad_dims(ctx, b.dims(x), ctx.arg(1).ints)) {
    int64_t size = b.dims(x)[p.dim];
    int64_t out_size = size + p.low + p.high;
    x = gather_along(b, x, p.dim, source_positions(b, size, p.low, out_size, mode));
  }
  return {as_output(ctx, x)};
}

// *_backward(grad_output, self, padding)
template <Mode mode>
std::vector<Value> lower_pad_backward(Context& ctx) {
  Builder& b = ctx.b;
  Value grad = ctx.tensor(0);
  const Dims& in_shape = b.dims(ctx.tensor(1));
  if (numel(ctx.outputs.at(0).dims) == 0 || numel(b.dims(grad)) == 0) return {b.zeros(ctx.out_type())};
  DType acc = accumulation_type(b.dtype(grad));
  grad = b.convert(grad, acc);
  std::vector<PadDim> dims = pad_dims(ctx, in_shape, ctx.arg(2).ints);
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    int64_t size = in_shape[it->dim];
    int64_t out_size = b.dims(grad)[it->dim];
    Dims unpadded = b.dims(grad);
    unpadded[it->dim] = size;
    grad = scatter_add_along(b, b.zeros({b.dtype(grad), unpadded}), it->dim,
                             source_positions(b, size, it->low, out_size, mode), grad);
  }
  return {as_output(ctx, grad)};
}

}  // namespace

TPU_LOWERING("reflection_pad1d", lower_pad<Mode::Reflect>);
TPU_LOWERING("reflection_pad2d", lower_pad<Mode::Reflect>);
TPU_LOWERING("reflection_pad3d", lower_pad<Mode::Reflect>);
TPU_LOWERING("replication_pad1d", lower_pad<Mode::Replicate>);
TPU_LOWERING("replication_pad2d", lower_pad<Mode::Replicate>);
TPU_LOWERING("replication_pad3d", lower_pad<Mode::Replicate>);
TPU_LOWERING("reflection_pad1d_backward", lower_pad_backward<Mode::Reflect>);
TPU_LOWERING("reflection_pad2d_backward", lower_pad_backward<Mode::Reflect>);
TPU_LOWERING("reflection_pad3d_backward", lower_pad_backward<Mode::Reflect>);
TPU_LOWERING("replication_pad1d_backward", lower_pad_backward<Mode::Replicate>);
TPU_LOWERING("replication_pad2d_backward", lower_pad_backward<Mode::Replicate>);
TPU_LOWERING("replication_pad3d_backward", lower_pad_backward<Mode::Replicate>);

}  // namespace tpu::lowering
