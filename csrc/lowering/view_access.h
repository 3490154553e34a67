// Reading and writing strided views of a storage inside a program.
//
// A storage's device value is a 1-D array. A tensor is a view of it (sizes, strides, offset, all
// in elements), so every kernel first recovers its operands from their bases and finally writes
// its results back into theirs. Common layouts get cheap forms (a contiguous range, a
// permutation, a broadcast, a strided slice); anything else gathers / scatters by index.
#pragma once

#include "hlo/builder.h"

namespace tpu::lowering {

struct ViewLayout {
  Dims sizes;
  Dims strides;
  int64_t offset = 0;
};

bool is_contiguous(const ViewLayout& layout);
// A dense row-major layout of `sizes` starting at element `offset`.
ViewLayout dense_layout(const Dims& sizes, int64_t offset = 0);

// The view's logical value (shape `sizes`) from a 1-D `base`.
hlo::Value read_view(hlo::Builder& b, hlo::Value base, const ViewLayout& layout);

// `base` with the view's elements replaced by `update` (shape `sizes`).
hlo::Value write_view(hlo::Builder& b, hlo::Value base, hlo::Value update, const ViewLayout& layout);

}  // namespace tpu::lowering
