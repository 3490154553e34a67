// The device half of Tensor.copy_: the source converted to the destination's dtype and broadcast
// to its shape. The executor then writes it into the destination view like any result.
#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

std::vector<Value> lower_copy(Context& ctx) {
  TensorType out = ctx.out_type();
  return {operand_as(ctx, 0, out.dtype, out.dims)};
}

TPU_LOWERING("_tpu_copy", lower_copy);

}  // namespace
}  // namespace tpu::lowering
