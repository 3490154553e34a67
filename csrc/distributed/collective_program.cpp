#include "distributed/collective_program.h"

#include <stdexcept>

#include "hlo/builder.h"

namespace tpu::distributed {

namespace {

using hlo::Builder;
using hlo::Value;

std::string replica_groups(int64_t replicas) {
  std::string ids;
  for (int64_t r = 0; r < replicas; ++r) ids += (r ? ", " : "") + std::to_string(r);
  return "replica_groups = dense<[[" + ids + "]]> : tensor<1x" + std::to_string(replicas) + "xi64>";
}

const char* combiner(Reduction reduction) {
  switch (reduction) {
    case Reduction::Sum:
    case Reduction::Average:
      return "stablehlo.add";
    case Reduction::Product:
      return "stablehlo.multiply";
    case Reduction::Min:
      return "stablehlo.minimum";
    case Reduction::Max:
      return "stablehlo.maximum";
  }
  return "stablehlo.add";
}

// The reduction's body, over scalars of `dtype`.
hlo::RegionRef reduction_region(Builder& b, Reduction reduction, DType dtype) {
  TensorType scalar{dtype, {}};
  const char* name = combiner(reduction);
  return b.region({scalar, scalar},
                  [name](Builder& r, const std::vector<Value>& a) { return std::vector<Value>{r.binary(name, a[0], a[1])}; });
}

// Bool has no arithmetic: it is reduced as 0 / 1 in i32, and any non-zero result is true.
DType reduced_dtype(DType dtype) { return dtype == DType::Bool ? DType::I32 : dtype; }

Value from_reduced(Builder& b, Value x, DType dtype) {
  if (dtype != DType::Bool) return x;
  return b.compare(x, b.zeros(b.type(x)), "NE");
}

void require_even_split(const CollectiveSpec& spec, const char* what) {
  if (numel(spec.input.dims) % spec.replicas != 0) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(numel(spec.input.dims)) +
                                " elements do not split into " + std::to_string(spec.replicas) + " equal parts");
  }
}

}  // namespace

int64_t collective_output_numel(const CollectiveSpec& spec) {
  int64_t n = numel(spec.input.dims);
  switch (spec.kind) {
    case CollectiveKind::AllGather:
      return n * spec.replicas;
    case CollectiveKind::ReduceScatter:
      return n / spec.replicas;
    default:
      return n;
  }
}

std::string collective_module(const CollectiveSpec& spec) {
  Builder b;
  DType dtype = spec.input.dtype;
  int64_t n = numel(spec.input.dims);
  Value flat = b.reshape(b.parameter(spec.input), {n});
  std::string groups = replica_groups(spec.replicas);
  bool reduces = spec.kind == CollectiveKind::AllReduce || spec.kind == CollectiveKind::ReduceScatter;
  if (reduces && dtype == DType::Bool && spec.reduction == Reduction::Average) {
    throw std::invalid_argument("average of bool tensors");
  }
  DType wide = reduced_dtype(dtype);
  Value result;
  switch (spec.kind) {
    case CollectiveKind::AllReduce:
    case CollectiveKind::ReduceScatter: {
      Value x = b.convert(flat, wide);
      int64_t out = collective_output_numel(spec);
      if (spec.kind == CollectiveKind::AllReduce) {
        result = b.op1("stablehlo.all_reduce", {x}, {wide, {out}}, groups,
                       {reduction_region(b, spec.reduction, wide)});
      } else {
        require_even_split(spec, "reduce_scatter");
        result = b.op1("stablehlo.reduce_scatter", {x}, {wide, {out}}, "scatter_dimension = 0 : i64, " + groups,
                       {reduction_region(b, spec.reduction, wide)});
      }
      if (spec.reduction == Reduction::Average) {
        result = b.div(result, b.full(static_cast<double>(spec.replicas), b.type(result)));
      }
      result = from_reduced(b, result, dtype);
      break;
    }
    case CollectiveKind::AllGather:
      result = b.op1("stablehlo.all_gather", {flat}, {dtype, {n * spec.replicas}}, "all_gather_dim = 0 : i64, " + groups);
      break;
    case CollectiveKind::Broadcast: {
      // Every replica gathers every value and keeps the root's: one program, no per-rank branch.
      Value all = b.op1("stablehlo.all_gather", {flat}, {dtype, {n * spec.replicas}}, "all_gather_dim = 0 : i64, " + groups);
      result = b.slice(all, {spec.root * n}, {(spec.root + 1) * n}, {1});
      break;
    }
    case CollectiveKind::AllToAll:
      require_even_split(spec, "all_to_all");
      result = b.op1("stablehlo.all_to_all", {flat}, {dtype, {n}},
                     "split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = " +
                         std::to_string(spec.replicas) + " : i64, " + groups);
      break;
  }
  return b.module_text({result}, spec.replicas);
}

std::string describe(const CollectiveSpec& spec) {
  static const char* kinds[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all"};
  static const char* reductions[] = {"sum", "avg", "product", "min", "max"};
  std::string out = kinds[static_cast<int>(spec.kind)];
  if (spec.kind == CollectiveKind::AllReduce || spec.kind == CollectiveKind::ReduceScatter) {
    out += std::string("(") + reductions[static_cast<int>(spec.reduction)] + ")";
  }
  if (spec.kind == CollectiveKind::Broadcast) out += "(root " + std::to_string(spec.root) + ")";
  out += " of " + std::string(mlir_name(spec.input.dtype)) + "[" + std::to_string(numel(spec.input.dims)) + "]";
  return out;
}

}  // namespace tpu::distributed
