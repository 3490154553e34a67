// Programs that serve a range of sizes: shape buckets (DESIGN.md, "Programs that serve many sizes").
//
// Every call notes its sizes in the history of its op (its name, arguments and ranks, not its
// sizes). A dim that has taken a second size is a dynamic dim of that op from then on: a storage
// written with it gets room for its bucket (the next power of two), and the call gets a plan to run
// at bucket sizes, where lowering/padding_rules.h allows. Whether a launch uses the plan is
// decided by its keys: a program whose exact key is in the memory cache runs as it is (a model
// whose shapes never change never pads); otherwise the padded program runs once its key has met a
// second exact key, that is once sizes have changed under it.
#pragma once

#include <string>
#include <vector>

#include "exec/executor.h"

namespace tpu::exec {

struct PaddingPlan {
  // Per view, in for_each_view's order: whether runtime values place it (it is padded, or its
  // strides change with a padded size elsewhere), its bucket's sizes, its padded dims, and what its
  // padding must read as (NaN: anything).
  std::vector<bool> view_placed;
  // Whether the view is a dense range of its storage padded at its outermost dim only, with room
  // for its bucket after it: then it is read and written as one slice, not element by element.
  std::vector<bool> view_prefix;
  // Per view: the constant strides it is read and written with as a range of its storage
  // (lowering::RuntimeLayout::window_strides), or empty.
  std::vector<Dims> view_window_strides;
  std::vector<Dims> view_sizes;
  std::vector<uint64_t> view_padded;
  std::vector<double> view_fills;
  std::vector<Dims> output_dims;  // the results' bucket shapes
  // What the plan was made from (per size of the call's history), so that a graph can plan its
  // calls again at the bucket above (take_bucket_above).
  std::vector<bool> varied, growing;
  uint64_t history = 0;  // the key of the history it was planned from
};

// The bucket of a dim of size n: the next power of two.
int64_t bucket_size(int64_t n);

// Notes the call's sizes; fills call.padding, and gives fresh destinations their bucket's room.
// `sizes_vary`: the caller knows that the sizes of its varied dims change (a torch.compile graph
// traced with symbolic sizes), so they count as growing at once. `site` (0: none) gives the call a
// history of its own instead of its op's (padding_site, or the key of the call before it in a
// fused graph). Returns the key of the history the call noted its sizes in (0: none).
uint64_t plan_padding(OpCall& call, bool sizes_vary = false, uint64_t site = 0);

// The site of the `index`-th call of the torch.compile graph `graph`. Its history holds only the
// sizes that call took at the graph's earlier calls: the decode step's query of one token keeps
// its exact layout though the same op's calls elsewhere (the prefill) had other sizes, and only
// what the graph's symbolic sizes move is padded.
uint64_t padding_site(uint64_t graph, uint64_t index);

// What take_bucket_above changed: the fresh results' room and the calls' plans before it, put back
// by undo() when the graph runs its exact program after all.
struct BucketAbove {
  std::vector<std::pair<Storage*, StorageRoom>> rooms;
  std::vector<std::shared_ptr<const PaddingPlan>> plans;  // per call; null where it kept its plan
  void undo(std::vector<OpCall>& calls);
};

// A graph whose padded sizes fill their buckets (a length of 2^k) while the values it reads from
// before it have room for the bucket above (token ids of length 2^k + 1, read without their last
// or first column) would compile a program no other length runs: the graphs of lengths 2^k + 1 ..
// 2^(k+1) take the same values at the bucket above. This plans its padded calls at the bucket
// above (bucket_size(n + 1) for each padded size n) and grows its fresh results' room to match,
// so that it runs their program. Only where every such value holds that bucket as it is and one of
// them has room; false, with nothing changed, otherwise.
bool take_bucket_above(std::vector<OpCall>& calls, BucketAbove& changed);

// Whether some operand was written by an op whose sizes keep growing: the call is part of such a
// computation (a generation loop), and pads at once.
bool takes_growing_operands(const OpCall& call);

// The spare bytes a dense tensor of `sizes` uploaded from the host gets (-1: none, exact length):
// its bucket's room once uploads of that dtype and rank keep taking new sizes (a batch of
// sequences of many lengths), so that the programs reading it can pad.
int64_t upload_spare_bytes(DType dtype, const Dims& sizes);

// Whether to run the padded program `padded_key` instead of the exact one, whose key `exact_key`
// missed the memory cache: once the padded key has met a second exact key, at once when the
// caller knows the sizes grow, or for a fused graph (`structure`: a hash of its calls without their
// sizes; 0 for one op) that has already met several exact keys, in buckets (a hash of its views'
// bucket sizes) it has not run padded in.
bool prefer_padded(const std::string& padded_key, const std::string& exact_key, bool growing, uint64_t structure = 0,
                   uint64_t buckets = 0);

// The padded form of the call failed to lower or compile (its op runs at exact sizes once that
// keeps happening), and so did the program of `padded_key`, which is never tried again.
void decline_padding(const OpCall& call);
void decline_padded_key(const std::string& padded_key);

struct PaddingCounters {
  int64_t padded_launches = 0;  // launches of programs that serve a range of sizes
  int64_t declined = 0;
};
PaddingCounters padding_counters();

// Forgets which ops have met which sizes (tests that count programs start from a clean slate).
void forget_shape_history();
void reset_padding_counters();

}  // namespace tpu::exec
