// Reductions: sums, means, products, extremes and their indices, boolean reductions, variance,
// logsumexp, softmax and its gradients, cumulative sums and products, vector norms.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;
using Kind = Arg::Kind;

// Complex results only where `complex_too` (sums, means and products, whose StableHLO reductions
// take complex operands as they are).
void require_arithmetic(const Context& ctx, DType dtype, bool complex_too = false) {
  if (dtype == DType::Bool || (is_complex(dtype) && !complex_too)) {
    throw Unsupported(ctx.op + ": " + mlir_name(dtype) + " is not lowered");
  }
}

void require_floating(const Context& ctx, DType dtype) {
  if (!is_floating(dtype)) throw Unsupported(ctx.op + ": " + mlir_name(dtype) + " is not lowered");
}

// `x` cast to the result dtype first (PyTorch's dtype= semantics), then widened to accumulate.
Value reduction_input(Builder& b, Value x, DType result) {
  return b.convert(b.convert(x, result), accumulation_type(result));
}

Value reduce_with(Builder& b, Value x, const Dims& dims, const char* combiner, double init) {
  if (dims.empty()) return x;
  return b.reduce(x, b.constant(init, b.dtype(x)), dims, combiner);
}

Value logical_or(Builder& b, Value x, Value y) { return b.binary("stablehlo.or", x, y); }
Value logical_and(Builder& b, Value x, Value y) { return b.binary("stablehlo.and", x, y); }

// The larger (smaller) of x and y; NaN wins, as in PyTorch (XLA's maximum may drop it).
Value extreme(Builder& b, Value x, Value y, bool is_max) {
  DType dtype = b.dtype(x);
  if (dtype == DType::Bool) return is_max ? logical_or(b, x, y) : logical_and(b, x, y);
  if (!is_floating(dtype)) return is_max ? b.max(x, y) : b.min(x, y);
  Value keep_x = logical_or(b, b.compare(x, y, is_max ? "GT" : "LT"), is_nan(b, x));
  return b.select(keep_x, x, y);
}

Value extreme_over(Builder& b, Value x, const Dims& dims, bool is_max) {
  if (dims.empty()) return x;
  DType dtype = b.dtype(x);
  Value init = b.constant(is_max ? lowest(dtype) : highest(dtype), dtype);
  auto body = [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{extreme(r, a[0], a[1], is_max)};
  };
  return b.reduce({x}, {init}, dims, body)[0];
}

// sum, mean and prod: (self, dtype) reduces every dim, (self, dim, keepdim, dtype) the given ones.
Dims summed_dims(const Context& ctx, Value x) {
  int64_t rank = ctx.b.rank(x);
  return ctx.args.size() <= 2 ? all_dims(rank) : reduction_dims(ctx, 1, rank);
}

std::vector<Value> lower_sum(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType out = ctx.outputs.at(0).dtype;
  require_arithmetic(ctx, out, true);
  return {as_output(ctx, sum_over(b, reduction_input(b, x, out), summed_dims(ctx, x)))};
}

std::vector<Value> lower_mean(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType out = ctx.outputs.at(0).dtype;
  if (!is_complex(out)) require_floating(ctx, out);
  return {as_output(ctx, mean_over(b, reduction_input(b, x, out), summed_dims(ctx, x)))};
}

std::vector<Value> lower_prod(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType out = ctx.outputs.at(0).dtype;
  require_arithmetic(ctx, out, true);
  Value input = reduction_input(b, x, out);
  return {as_output(ctx, reduce_with(b, input, summed_dims(ctx, x), "stablehlo.multiply", 1))};
}

std::vector<Value> lower_amax_amin(Context& ctx, bool is_max) {
  Value x = ctx.tensor(0);
  if (is_complex(ctx.b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  Dims dims = reduction_dims(ctx, 1, ctx.b.rank(x));
  return {as_output(ctx, extreme_over(ctx.b, x, dims, is_max))};
}

std::vector<Value> lower_amax(Context& ctx) { return lower_amax_amin(ctx, true); }
std::vector<Value> lower_amin(Context& ctx) { return lower_amax_amin(ctx, false); }

// The first maximum (minimum) along `dim` and its int64 index. NaN beats every number, so a
// NaN wins both reductions, as in PyTorch.
std::pair<Value, Value> arg_extreme(Builder& b, Value x, int64_t dim, bool is_max) {
  DType dtype = b.dtype(x);
  Value index = b.iota({DType::I64, b.dims(x)}, dim);
  bool floating = is_floating(dtype);
  auto body = [&](Builder& r, const std::vector<Value>& a) {
    Value best = a[0], best_index = a[1], candidate = a[2], candidate_index = a[3];
    Value better = r.compare(candidate, best, is_max ? "GT" : "LT");
    Value tied = r.compare(candidate, best, "EQ");
    if (floating) {
      Value candidate_nan = is_nan(r, candidate), best_nan = is_nan(r, best);
      better = logical_or(r, better,
                          logical_and(r, candidate_nan, r.unary("stablehlo.not", best_nan)));
      tied = logical_or(r, tied, logical_and(r, candidate_nan, best_nan));
    }
    Value earlier = r.compare(candidate_index, best_index, "LT");
    Value take = logical_or(r, better, logical_and(r, tied, earlier));
    return std::vector<Value>{r.select(take, candidate, best),
                              r.select(take, candidate_index, best_index)};
  };
  Value init = b.constant(is_max ? lowest(dtype) : highest(dtype), dtype);
  Value init_index = b.constant(highest(DType::I64), DType::I64);
  auto results = b.reduce({x, index}, {init, init_index}, {dim}, body);
  return {results[0], results[1]};
}

// max / min: the full reduction (self), the elementwise form (self, other) and the dim form
// (self, dim, keepdim) -> (values, indices) all arrive under one name.
std::vector<Value> lower_max_min(Context& ctx, bool is_max) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (is_complex(b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  if (ctx.args.size() == 1) {
    return {as_output(ctx, extreme_over(b, x, all_dims(b.rank(x)), is_max))};
  }
  Kind second = ctx.arg(1).kind;
  if (second == Kind::Tensor || second == Kind::Number) {
    const Output& out = ctx.outputs.at(0);
    Value lhs = operand_as(ctx, 0, out.dtype, out.dims);
    Value rhs = operand_as(ctx, 1, out.dtype, out.dims);
    return {extreme(b, lhs, rhs, is_max)};
  }
  Value input = at_least_1d(b, x);
  int64_t dim = wrap_dim(ctx.int_arg(1, 0), b.rank(input));
  auto [values, indices] = arg_extreme(b, input, dim, is_max);
  return {as_output(ctx, values, 0), as_output(ctx, indices, 1)};
}

std::vector<Value> lower_max(Context& ctx) { return lower_max_min(ctx, true); }
std::vector<Value> lower_min(Context& ctx) { return lower_max_min(ctx, false); }

// argmax / argmin (self, dim?, keepdim): no dim means the index into the flattened tensor.
std::vector<Value> lower_arg_extreme(Context& ctx, bool is_max) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (is_complex(b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  Value input = ctx.has(1) ? at_least_1d(b, x) : b.reshape(x, {numel(b.dims(x))});
  int64_t dim = ctx.has(1) ? wrap_dim(ctx.int_arg(1, 0), b.rank(input)) : 0;
  return {as_output(ctx, arg_extreme(b, input, dim, is_max).second)};
}

std::vector<Value> lower_argmax(Context& ctx) { return lower_arg_extreme(ctx, true); }
std::vector<Value> lower_argmin(Context& ctx) { return lower_arg_extreme(ctx, false); }

// any / all: (self), (self, dim, keepdim) and (self, dim?, keepdim). The result is bool, except
// uint8 in uint8 out.
std::vector<Value> lower_any_all(Context& ctx, bool is_any) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  Dims dims = ctx.args.size() == 1 ? all_dims(b.rank(x)) : reduction_dims(ctx, 1, b.rank(x));
  return {as_output(ctx, extreme_over(b, b.convert(x, DType::Bool), dims, is_any))};
}

std::vector<Value> lower_any(Context& ctx) { return lower_any_all(ctx, true); }
std::vector<Value> lower_all(Context& ctx) { return lower_any_all(ctx, false); }

// var / std / var_mean / std_mean: (self, unbiased), (self, dim, unbiased, keepdim) and
// (self, dim, correction?, keepdim). The correction is a runtime number; no correction means 1.
std::vector<Value> lower_variance(Context& ctx, bool take_sqrt, bool with_mean) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType out = ctx.outputs.at(0).dtype;
  require_floating(ctx, b.dtype(x));
  DType acc = accumulation_type(out);
  Value input = reduction_input(b, x, out);
  Dims shape = b.dims(x);

  bool whole = ctx.args.size() <= 2;
  Dims dims = whole ? all_dims(b.rank(x)) : reduction_dims(ctx, 1, b.rank(x));
  size_t correction_index = whole ? 1 : 2;
  Value correction;
  if (ctx.has(correction_index) && ctx.arg(correction_index).kind == Kind::Number) {
    correction = b.convert(ctx.tensor(correction_index), acc);
  } else {
    correction = b.constant(ctx.bool_arg(correction_index, true) ? 1.0 : 0.0, acc);
  }

  double count = static_cast<double>(count_over(shape, dims));
  Value sum = sum_over(b, input, dims);
  Value mean = b.div(sum, b.full(count, b.type(sum)));
  Value centered = b.sub(input, expand_back(b, mean, shape, dims));
  Value squares = sum_over(b, b.mul(centered, centered), dims);
  Value divisor = b.max(b.sub(b.constant(count, acc), correction), b.constant(0, acc));
  Value result = b.div(squares, b.broadcast_to(divisor, b.dims(squares)));
  if (take_sqrt) result = b.unary("stablehlo.sqrt", result);
  if (!with_mean) return {as_output(ctx, result)};
  return {as_output(ctx, result, 0), as_output(ctx, mean, 1)};
}

std::vector<Value> lower_var(Context& ctx) { return lower_variance(ctx, false, false); }
std::vector<Value> lower_std(Context& ctx) { return lower_variance(ctx, true, false); }
std::vector<Value> lower_var_mean(Context& ctx) { return lower_variance(ctx, false, true); }
std::vector<Value> lower_std_mean(Context& ctx) { return lower_variance(ctx, true, true); }

// log(sum(exp(x))) shifted by the max, with a zero shift where the max is infinite so that
// all -inf gives -inf and any +inf gives +inf.
std::vector<Value> lower_logsumexp(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType out = ctx.outputs.at(0).dtype;
  require_floating(ctx, out);
  Value input = reduction_input(b, x, out);
  Dims shape = b.dims(input);
  Dims dims = reduction_dims(ctx, 1, b.rank(input));
  if (dims.empty()) return {as_output(ctx, input)};
  Value peak = extreme_over(b, input, dims, true);
  Value infinite = b.compare(b.unary("stablehlo.abs", peak),
                             b.full(highest(b.dtype(peak)), b.type(peak)), "EQ");
  Value shift = b.select(infinite, b.zeros(b.type(peak)), peak);
  Value exps = b.unary("stablehlo.exponential", b.sub(input, expand_back(b, shift, shape, dims)));
  Value result = b.add(b.unary("stablehlo.log", sum_over(b, exps, dims)), shift);
  return {as_output(ctx, result)};
}

// Softmax family: (self, dim, half_to_float); the result dtype comes from the meta function.
struct SoftmaxParts {
  Value max;      // max(x), broadcast back
  Value shifted;  // x - max(x)
  Value exps;     // exp(shifted)
  Value sum_exp;  // sum(exps), broadcast back
};

SoftmaxParts softmax_parts(Context& ctx) {
  Builder& b = ctx.b;
  DType out = ctx.outputs.at(0).dtype;
  require_floating(ctx, out);
  Value input = at_least_1d(b, reduction_input(b, ctx.tensor(0), out));
  int64_t dim = wrap_dim(ctx.int_arg(1, -1), b.rank(input));
  Dims shape = b.dims(input);
  Value max = expand_back(b, extreme_over(b, input, {dim}, true), shape, {dim});
  Value shifted = b.sub(input, max);
  Value exps = b.unary("stablehlo.exponential", shifted);
  return {max, shifted, exps, expand_back(b, sum_over(b, exps, {dim}), shape, {dim})};
}

std::vector<Value> lower_softmax(Context& ctx) {
  SoftmaxParts parts = softmax_parts(ctx);
  return {as_output(ctx, ctx.b.div(parts.exps, parts.sum_exp))};
}

// _safe_softmax(self, dim, dtype?), attention's softmax: 0 over a slice whose elements are all
// -inf (a fully masked row), where softmax gives NaN. Exactly then is the slice's maximum -inf,
// so one reduction serves both; a dtype= that narrows the input could turn finite elements into
// -inf, and then the mask is taken from the input as given.
std::vector<Value> lower_safe_softmax(Context& ctx) {
  Builder& b = ctx.b;
  SoftmaxParts parts = softmax_parts(ctx);
  Value probabilities = b.div(parts.exps, parts.sum_exp);
  Value self = at_least_1d(b, ctx.tensor(0));
  if (!is_floating(b.dtype(self))) return {as_output(ctx, probabilities)};  // no element is -inf
  Value max = parts.max;
  if (b.dtype(self) != ctx.outputs.at(0).dtype) {
    int64_t dim = wrap_dim(ctx.int_arg(1, -1), b.rank(self));
    max = expand_back(b, extreme_over(b, self, {dim}, true), b.dims(self), {dim});
  }
  Value masked = b.compare(max, b.full(lowest(b.dtype(max)), b.type(max)), "EQ");
  return {as_output(ctx, b.select(masked, b.zeros(b.type(probabilities)), probabilities))};
}

std::vector<Value> lower_log_softmax(Context& ctx) {
  SoftmaxParts parts = softmax_parts(ctx);
  return {as_output(ctx, ctx.b.sub(parts.shifted, ctx.b.unary("stablehlo.log", parts.sum_exp)))};
}

// (grad_output, output, dim, input_dtype): both gradients need sum over dim of a product.
struct SoftmaxGradInputs {
  Value grad, output;
  int64_t dim;
};

SoftmaxGradInputs softmax_grad_inputs(Context& ctx) {
  Builder& b = ctx.b;
  Value grad = ctx.tensor(0), output = ctx.tensor(1);
  DType acc = accumulation_type(promote_types(b.dtype(grad), b.dtype(output)));
  require_floating(ctx, acc);
  grad = at_least_1d(b, b.convert(grad, acc));
  output = at_least_1d(b, b.convert(output, acc));
  return {grad, output, wrap_dim(ctx.int_arg(2, -1), b.rank(grad))};
}

std::vector<Value> lower_softmax_backward(Context& ctx) {
  Builder& b = ctx.b;
  auto [grad, output, dim] = softmax_grad_inputs(ctx);
  Dims shape = b.dims(grad);
  Value dot = expand_back(b, sum_over(b, b.mul(grad, output), {dim}), shape, {dim});
  return {as_output(ctx, b.mul(output, b.sub(grad, dot)))};
}

std::vector<Value> lower_log_softmax_backward(Context& ctx) {
  Builder& b = ctx.b;
  auto [grad, output, dim] = softmax_grad_inputs(ctx);
  Dims shape = b.dims(grad);
  Value total = expand_back(b, sum_over(b, grad, {dim}), shape, {dim});
  return {as_output(ctx, b.sub(grad, b.mul(b.unary("stablehlo.exponential", output), total)))};
}

// Inclusive scan along `dim` with an arbitrary associative body over (accumulated, next), as a
// reduce_window whose window covers everything up to each position (XLA rewrites long scan
// windows into a tree on CPU and GPU).
Value scan_with(Builder& b, Value x, int64_t dim, double init,
                const std::function<Value(Builder&, Value, Value)>& combine) {
  int64_t rank = b.rank(x);
  int64_t n = b.dims(x)[dim];
  if (numel(b.dims(x)) == 0 || n == 1) return x;
  Dims window(rank, 1), strides(rank, 1);
  window[dim] = n;
  std::string padding = "dense<[";
  for (int64_t d = 0; d < rank; ++d) {
    padding += d ? ", [" : "[";
    padding += std::to_string(d == dim ? n - 1 : 0) + ", 0]";
  }
  padding += "]> : tensor<" + std::to_string(rank) + "x2xi64>";
  TensorType scalar{b.dtype(x), {}};
  hlo::RegionRef body = b.region({scalar, scalar}, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{combine(r, a[0], a[1])};
  });
  return b.op1("stablehlo.reduce_window", {x, b.constant(init, scalar.dtype)}, b.type(x),
               "window_dimensions = " + hlo::i64_array(window) +
                   ", window_strides = " + hlo::i64_array(strides) + ", padding = " + padding,
               {body});
}

// Inclusive scan along `dim` combining with one StableHLO binary op (e.g. "stablehlo.add").
Value scan(Builder& b, Value x, int64_t dim, const char* combiner, double init) {
  return scan_with(b, x, dim, init, [&](Builder& r, Value acc, Value next) { return r.binary(combiner, acc, next); });
}

// cummax / cummin(self, dim) -> (values, indices). The index is the latest position that set the
// running extreme: a NaN, or an element equal to the running extreme at its own position (ties
// go to the later one, as in PyTorch's loop).
std::vector<Value> lower_cumulative_extreme(Context& ctx, bool is_max) {
  Builder& b = ctx.b;
  Value x = at_least_1d(b, ctx.tensor(0));
  if (is_complex(b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  int64_t dim = wrap_dim(ctx.int_arg(1, 0), b.rank(x));
  DType dtype = b.dtype(x);
  if (numel(b.dims(x)) == 0) return {as_output(ctx, x, 0), as_output(ctx, b.zeros({DType::I64, b.dims(x)}), 1)};
  Value values = scan_with(b, x, dim, is_max ? lowest(dtype) : highest(dtype),
                           [&](Builder& r, Value p, Value q) { return extreme(r, p, q, is_max); });
  Value setter = b.compare(x, values, "EQ");
  if (is_floating(dtype)) setter = logical_or(b, setter, is_nan(b, x));
  Value position = b.iota({DType::I64, b.dims(x)}, dim);
  Value candidate = b.select(setter, position, b.full(-1, {DType::I64, b.dims(x)}));
  Value indices = scan_with(b, candidate, dim, -1, [](Builder& r, Value p, Value q) { return r.max(p, q); });
  return {as_output(ctx, values, 0), as_output(ctx, indices, 1)};
}
std::vector<Value> lower_cummax(Context& ctx) { return lower_cumulative_extreme(ctx, true); }
std::vector<Value> lower_cummin(Context& ctx) { return lower_cumulative_extreme(ctx, false); }

// logcumsumexp(self, dim): a scan of logaddexp, in the accumulation type.
std::vector<Value> lower_logcumsumexp(Context& ctx) {
  Builder& b = ctx.b;
  DType out = ctx.outputs.at(0).dtype;
  require_floating(ctx, out);
  Value x = at_least_1d(b, reduction_input(b, ctx.tensor(0), out));
  int64_t dim = wrap_dim(ctx.int_arg(1, 0), b.rank(x));
  double inf = highest(b.dtype(x));
  auto logaddexp = [inf](Builder& r, Value p, Value q) {
    TensorType t = r.type(p);
    Value big = extreme(r, p, q, true), small = extreme(r, p, q, false);
    Value sum = r.add(big, r.unary("stablehlo.log_plus_one", r.unary("stablehlo.exponential", r.sub(small, big))));
    // -inf + -inf and inf + anything: the difference is NaN, the answer is big.
    Value infinite = r.compare(r.unary("stablehlo.abs", big), r.full(inf, t), "EQ");
    Value nan = logical_or(r, is_nan(r, p), is_nan(r, q));
    return r.select(logical_and(r, infinite, r.unary("stablehlo.not", nan)), big, sum);
  };
  return {as_output(ctx, scan_with(b, x, dim, -inf, logaddexp))};
}

// cumsum / cumprod (self, dim, dtype?).
std::vector<Value> lower_cumulative(Context& ctx, const char* combiner, double init) {
  Builder& b = ctx.b;
  DType out = ctx.outputs.at(0).dtype;
  require_arithmetic(ctx, out);
  Value input = at_least_1d(b, reduction_input(b, ctx.tensor(0), out));
  int64_t dim = wrap_dim(ctx.int_arg(1, 0), b.rank(input));
  return {as_output(ctx, scan(b, input, dim, combiner, init))};
}

std::vector<Value> lower_cumsum(Context& ctx) { return lower_cumulative(ctx, "stablehlo.add", 0); }
std::vector<Value> lower_cumprod(Context& ctx) {
  return lower_cumulative(ctx, "stablehlo.multiply", 1);
}

// linalg_vector_norm(self, ord, dim?, keepdim, dtype?). `ord` is a runtime number, so every
// kind of norm is computed and the right one selected: max |x| for inf, min |x| for -inf, the
// count of non-zeros for 0, (sum |x|^ord)^(1/ord) otherwise.
std::vector<Value> lower_linalg_vector_norm(Context& ctx) {
  Builder& b = ctx.b;
  DType out = ctx.outputs.at(0).dtype;
  require_floating(ctx, out);
  require_floating(ctx, b.dtype(ctx.tensor(0)));
  Value magnitude = b.unary("stablehlo.abs", reduction_input(b, ctx.tensor(0), out));
  DType acc = b.dtype(magnitude);
  Dims dims = reduction_dims(ctx, 2, b.rank(magnitude));
  Value ord = b.convert(ctx.tensor(1), acc);

  Value powered = b.binary("stablehlo.power", magnitude, b.broadcast_to(ord, b.dims(magnitude)));
  Value sum = sum_over(b, powered, dims);
  Dims reduced_shape = b.dims(sum);
  auto spread = [&](Value scalar) { return b.broadcast_to(scalar, reduced_shape); };
  Value inverse_ord = b.div(b.constant(1, acc), ord);
  Value p_norm = b.binary("stablehlo.power", sum, spread(inverse_ord));
  Value nonzero = b.convert(b.convert(magnitude, DType::Bool), acc);
  Value zero_norm = sum_over(b, nonzero, dims);
  Value inf_norm = extreme_over(b, magnitude, dims, true);
  Value neg_inf_norm = extreme_over(b, magnitude, dims, false);

  auto ord_is = [&](double v) { return spread(b.compare(ord, b.constant(v, acc), "EQ")); };
  double inf = highest(acc);
  Value result = b.select(ord_is(0), zero_norm, p_norm);
  result = b.select(ord_is(inf), inf_norm, result);
  result = b.select(ord_is(-inf), neg_inf_norm, result);
  return {as_output(ctx, result)};
}


// norm(self, p?, dim?, keepdim?, dtype?) in any of its overloads: linalg_vector_norm with the
// arguments found by kind (a missing p is 2).
std::vector<Value> lower_norm(Context& ctx) {
  Builder& b = ctx.b;
  std::vector<Arg> args(5);
  args[0] = ctx.arg(0);
  if (ctx.has(1)) {
    args[1] = ctx.arg(1);
  } else {
    args[1].kind = Kind::Number;
    args[1].value = b.constant(2.0, DType::F64);
  }
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    const Arg& a = ctx.args[i];
    if (a.kind == Kind::IntList) args[2] = a;
    if (a.kind == Kind::Bool) args[3] = a;
  }
  Context inner{b, "linalg_vector_norm", "", args, ctx.outputs, {}};
  return lower_linalg_vector_norm(inner);
}

// nansum(self, dim?, keepdim, dtype?): nan counts as zero.
std::vector<Value> lower_nansum(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType out = ctx.outputs.at(0).dtype;
  require_arithmetic(ctx, out);
  Value wide = reduction_input(b, x, out);
  if (is_floating(b.dtype(wide))) wide = b.select(is_nan(b, wide), b.zeros(b.type(wide)), wide);
  return {as_output(ctx, sum_over(b, wide, reduction_dims(ctx, 1, b.rank(x))))};
}

// count_nonzero(self, dim): int64 count of non-zero elements (nan counts).
std::vector<Value> lower_count_nonzero(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  if (is_complex(b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  Dims dims;
  if (ctx.arg(1).kind == Kind::Int) {
    dims.push_back(wrap_dim(ctx.arg(1).i, b.rank(x)));
  } else {
    dims = reduction_dims(ctx, 1, b.rank(x));
  }
  Value nonzero = b.compare(x, b.zeros(b.type(x)), "NE");
  return {as_output(ctx, sum_over(b, b.convert(nonzero, DType::I64), dims))};
}

// aminmax(self, dim?, keepdim): (amin, amax).
std::vector<Value> lower_aminmax(Context& ctx) {
  Builder& b = ctx.b;
  Value x = at_least_1d(b, ctx.tensor(0));
  if (is_complex(b.dtype(x))) throw Unsupported(ctx.op + ": complex");
  Dims dims = ctx.arg(1).kind == Kind::Int ? Dims{wrap_dim(ctx.arg(1).i, b.rank(x))} : all_dims(b.rank(x));
  return {as_output(ctx, extreme_over(b, x, dims, false), 0), as_output(ctx, extreme_over(b, x, dims, true), 1)};
}

// renorm(self, p, dim, maxnorm): each slice along dim whose p-norm exceeds maxnorm is scaled down
// to norm maxnorm (PyTorch divides by norm + 1e-7).
std::vector<Value> lower_renorm(Context& ctx) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType out = ctx.outputs.at(0).dtype;
  require_floating(ctx, out);
  DType acc = accumulation_type(out);
  Value wide = b.convert(x, acc);
  int64_t rank = b.rank(wide);
  if (rank == 0) throw Unsupported(ctx.op + ": rank 0");
  int64_t dim = wrap_dim(ctx.int_arg(2, 0), rank);
  Dims others = all_but(rank, dim);
  Value p = b.convert(ctx.tensor(1), acc);
  Value maxnorm = b.convert(ctx.tensor(3), acc);
  Value powered = b.binary("stablehlo.power", b.unary("stablehlo.abs", wide), b.broadcast_to(p, b.dims(wide)));
  Value sum = sum_over(b, powered, others);
  Value norm = b.binary("stablehlo.power", sum, b.broadcast_to(b.div(b.constant(1, acc), p), b.dims(sum)));
  Value is_inf = b.compare(p, b.constant(highest(acc), acc), "EQ");
  norm = b.select(b.broadcast_to(is_inf, b.dims(norm)), extreme_over(b, b.unary("stablehlo.abs", wide), others, true), norm);
  Value limit = b.broadcast_to(maxnorm, b.dims(norm));
  Value factor = b.div(limit, b.add(norm, b.full(1e-7, b.type(norm))));
  factor = b.select(b.compare(norm, limit, "GT"), factor, b.full(1, b.type(norm)));
  return {as_output(ctx, b.mul(wide, expand_back(b, factor, b.dims(wide), others)))};
}
}  // namespace

TPU_LOWERING("sum", lower_sum);
TPU_LOWERING("mean", lower_mean);
TPU_LOWERING("prod", lower_prod);
TPU_LOWERING("amax", lower_amax);
TPU_LOWERING("amin", lower_amin);
TPU_LOWERING("max", lower_max);
TPU_LOWERING("min", lower_min);
TPU_LOWERING("argmax", lower_argmax);
TPU_LOWERING("argmin", lower_argmin);
TPU_LOWERING("any", lower_any);
TPU_LOWERING("all", lower_all);
TPU_LOWERING("var", lower_var);
TPU_LOWERING("std", lower_std);
TPU_LOWERING("var_mean", lower_var_mean);
TPU_LOWERING("std_mean", lower_std_mean);
TPU_LOWERING("logsumexp", lower_logsumexp);
TPU_LOWERING("_softmax", lower_softmax);
TPU_LOWERING("_log_softmax", lower_log_softmax);
TPU_LOWERING("_safe_softmax", lower_safe_softmax);
TPU_LOWERING("_softmax_backward_data", lower_softmax_backward);
TPU_LOWERING("_log_softmax_backward_data", lower_log_softmax_backward);
TPU_LOWERING("cumsum", lower_cumsum);
TPU_LOWERING("cumprod", lower_cumprod);
TPU_LOWERING("cummax", lower_cummax);
TPU_LOWERING("cummin", lower_cummin);
TPU_LOWERING("logcumsumexp", lower_logcumsumexp);
TPU_LOWERING("linalg_vector_norm", lower_linalg_vector_norm);
TPU_LOWERING("norm", lower_norm);
TPU_LOWERING("renorm", lower_renorm);
TPU_LOWERING("nansum", lower_nansum);
TPU_LOWERING("count_nonzero", lower_count_nonzero);
TPU_LOWERING("aminmax", lower_aminmax);

Value cumulative(Builder& b, Value x, int64_t dim, const char* combiner, double init) {
  return scan(b, x, dim, combiner, init);
}

}  // namespace tpu::lowering
