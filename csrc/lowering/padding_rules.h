// Which ops may run at padded sizes, and what their padding must read as.
//
// A program that serves a range of sizes runs an op at the sizes of a bucket: each padded dim of an
// operand is rounded up, and positions past the real size are padding. The padding must never
// reach a result at a real position. For most ops it cannot (an elementwise op, a matmul's rows,
// a softmax over another dim); some need the padding to read as a value that changes nothing (0
// for a contraction or a sum, -inf for a softmax over the padded dim, ignore_index for a loss's
// targets); for the rest (a mean, a sort or a norm over the padded dim) the op runs at its exact
// sizes. This table is that knowledge, per op; an op missing from it is never padded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lowering/registry.h"

namespace tpu::lowering {

// Padded dims, as a bit per dim (bit d: dim d).
using DimMask = uint64_t;

struct PaddedOperand {
  int64_t rank = 0;
  DimMask padded = 0;
};

// What `op` (schema name, in-place or not) needs from padding, given its arguments and, per
// argument, its tensors (one for a Tensor, one per entry for a TensorList, none for the rest):
// per argument, the value its padding must read as (NaN: any value), or nothing when padding
// could reach a result.
std::optional<std::vector<double>> padding_fills(const std::string& op, const std::vector<Arg>& args,
                                                 const std::vector<std::vector<PaddedOperand>>& operands);

// Whether `op` sizes its results itself at padded sizes (cat places its parts at runtime offsets
// along a padded dim, so its result's dim is no operand's), rather than taking each padded dim of
// a result from an operand's.
bool pads_results_itself(const std::string& op);

}  // namespace tpu::lowering
