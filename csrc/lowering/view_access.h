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
// Gives every dim of size 1 the stride a dense layout would give it. Such a stride never moves the
// view, but it would make views that differ only there (x[:, -1] of a sequence that grew) look
// different to a program's key and compile a program each.
void canonicalize_unit_strides(Dims& strides, const Dims& sizes);
// A dense row-major layout of `sizes` starting at element `offset`.
ViewLayout dense_layout(const Dims& sizes, int64_t offset = 0);

// Whether the view's offset is a runtime argument of the programs that read or write it, so that
// one program serves every position of the view in its storage (x[i] for every i, a decode loop's
// cache write at step t). Only two kinds keep a constant offset: a view of the whole storage from
// its start (the common case, which needs no argument) and a view that reaches outside its
// storage of `base_length` elements. Which kind a view is belongs in the program's key.
bool offset_is_runtime(const ViewLayout& layout, int64_t base_length);

// The view's logical value (shape `sizes`) from a 1-D `base`. `offset`, when valid, is a rank-0
// i64 value that stands for layout.offset (only where offset_is_runtime).
hlo::Value read_view(hlo::Builder& b, hlo::Value base, const ViewLayout& layout, hlo::Value offset = {});

// `base` with the view's elements replaced by `update` (shape `sizes`); `offset` as for read_view.
hlo::Value write_view(hlo::Builder& b, hlo::Value base, hlo::Value update, const ViewLayout& layout,
                      hlo::Value offset = {});

// A view placed by runtime values: one program serves every view whose sizes round up to
// `sizes` (its bucket). Dims in `padded` have a runtime size up to sizes[d]; positions past it
// are padding. The offset and every stride are runtime values too, since a padded dim's real
// size shapes the strides of the dims outside it.
struct RuntimeLayout {
  Dims sizes;           // the bucket's sizes
  uint64_t padded = 0;  // bit d: dim d has a runtime size
  // A dense range padded at its outermost dim only, with room for the bucket after it in the
  // base: a slice of it, and written back as one (the padding lands in the room).
  bool prefix = false;
  // Non-empty: the strides of every dim whose bucket size exceeds 1 are these constants (0 for the
  // others), and the view at its bucket's sizes lies inside the base from any offset the program
  // runs at: it is read and written as a (strided) range of the base, not element by element.
  Dims window_strides;
  hlo::Value offset;    // these: rank-0 i64 values
  std::vector<hlo::Value> runtime_sizes;
  std::vector<hlo::Value> strides;
};

// Whether a view of `base_length` elements' base at `bucket` sizes with constant `strides` (0 for
// dims of size 1) from `offset` can be accessed as a range (RuntimeLayout::window_strides).
bool fits_window(const Dims& bucket, const Dims& strides, int64_t offset, int64_t base_length, bool written);

// The view at its bucket's sizes; padding reads as `fill` (NaN: whatever the storage holds there).
hlo::Value read_padded_view(hlo::Builder& b, hlo::Value base, const RuntimeLayout& layout, double fill);

// Whether each bucket position of the view is real (true) or padding; invalid when nothing is padded.
hlo::Value padding_mask(hlo::Builder& b, const RuntimeLayout& layout);

// `base` with the view's real positions replaced by those of `update` (bucket-shaped); its
// padding is dropped.
hlo::Value write_padded_view(hlo::Builder& b, hlo::Value base, hlo::Value update, const RuntimeLayout& layout);

}  // namespace tpu::lowering
