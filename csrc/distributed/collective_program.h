// StableHLO programs for collectives between the replicas of one PJRT client (the devices one
// process drives): every replica passes its own tensor, flattened, and gets its own result.
// Torch-free, so that the programs have fast unit tests of their own.
#pragma once

#include <cstdint>
#include <string>

#include "hlo/types.h"

namespace tpu::distributed {

enum class CollectiveKind { AllReduce, Broadcast, AllGather, ReduceScatter, AllToAll };
enum class Reduction { Sum, Average, Product, Min, Max };

struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Reduction reduction = Reduction::Sum;  // AllReduce, ReduceScatter
  int64_t root = 0;                      // Broadcast
  int64_t replicas = 1;
  TensorType input;  // each replica's argument, as its buffer holds it
};

// Elements of each replica's (1-D) result.
int64_t collective_output_numel(const CollectiveSpec& spec);

// The module text: one parameter (spec.input), one 1-D result of spec.input's dtype. Throws
// std::invalid_argument for a spec no program can serve (a ReduceScatter or AllToAll whose
// input does not split evenly, a reduction of bool other than min / max / sum).
std::string collective_module(const CollectiveSpec& spec);

// One line naming the collective and its operand, for the check that every replica asked for
// the same one and for the program cache's key.
std::string describe(const CollectiveSpec& spec);

}  // namespace tpu::distributed
