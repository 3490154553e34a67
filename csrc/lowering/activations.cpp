// Activation functions and their backward ops.
//
// Floating math runs in the result's accumulation_type (f32 for f16 / bf16) and rounds once at
// the end, as PyTorch's CPU kernels do. Scalar parameters (slopes, thresholds, alpha...) are
// runtime numbers.
#include <cmath>

#include "lowering/elementwise.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

Value less_equal(Builder& b, Value x, Value y) { return b.compare(x, y, "LE"); }
Value greater(Builder& b, Value x, Value y) { return b.compare(x, y, "GT"); }
Value either(Builder& b, Value p, Value q) { return b.binary("stablehlo.or", p, q); }
Value zeros_like(Builder& b, Value x) { return splat(b, 0, x); }

Value sigmoid(Builder& b, Value x) { return op(b, "logistic", x); }
Value softplus(Builder& b, Value x) { return op(b, "log_plus_one", op(b, "exponential", x)); }

// ---------------------------------------------------------------------------------------------
// Piecewise-linear activations. These keep integer dtypes where PyTorch does.

std::vector<Value> lower_relu(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (r.dtype == DType::Bool) throw Unsupported("relu of a bool tensor");
  Value x = arg_as(ctx, 0, r);
  return finish(ctx, r, max_propagating_nan(ctx.b, x, zeros_like(ctx.b, x)));
}
TPU_LOWERING("relu", lower_relu);

// hardtanh(self, min_val, max_val): a clamp in which nan stays nan.
Value clamp(Builder& b, Value x, Value lo, Value hi) {
  return min_propagating_nan(b, max_propagating_nan(b, x, lo), hi);
}

std::vector<Value> lower_hardtanh(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  if (r.dtype == DType::Bool) throw Unsupported("hardtanh of a bool tensor");
  Value x = arg_as(ctx, 0, r);
  Value lo = ctx.has(1) ? param_as(ctx, 1, r) : splat(ctx.b, -1, x);
  Value hi = ctx.has(2) ? param_as(ctx, 2, r) : splat(ctx.b, 1, x);
  return finish(ctx, r, clamp(ctx.b, x, lo, hi));
}
TPU_LOWERING("hardtanh", lower_hardtanh);

// CompositeImplicit in ATen (eager mode reaches hardtanh); kept for callers by name.
std::vector<Value> lower_relu6(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Value x = arg_as(ctx, 0, r);
  return finish(ctx, r, clamp(ctx.b, x, zeros_like(ctx.b, x), splat(ctx.b, 6, x)));
}
TPU_LOWERING("relu6", lower_relu6);

// hardtanh_backward(grad_output, self, min_val, max_val): the gradient passes strictly inside
// (min_val, max_val), and where self is nan.
std::vector<Value> lower_hardtanh_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  Value outside = either(b, less_equal(b, x, param_as(ctx, 2, r)), b.compare(x, param_as(ctx, 3, r), "GE"));
  return finish(ctx, r, b.select(outside, zeros_like(b, grad), grad));
}
TPU_LOWERING("hardtanh_backward", lower_hardtanh_backward);

// threshold(self, threshold, value): value where self <= threshold, else self.
std::vector<Value> lower_threshold(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  return finish(ctx, r, b.select(less_equal(b, x, param_as(ctx, 1, r)), param_as(ctx, 2, r), x));
}
TPU_LOWERING("threshold", lower_threshold);

// threshold_backward(grad_output, self, threshold): relu's backward with threshold 0.
std::vector<Value> lower_threshold_backward(Context& ctx) {
  ElementwiseResult r = result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r);
  Value below = less_equal(b, arg_as(ctx, 1, r), param_as(ctx, 2, r));
  return finish(ctx, r, b.select(below, zeros_like(b, grad), grad));
}
TPU_LOWERING("threshold_backward", lower_threshold_backward);

// leaky_relu(self, negative_slope)
std::vector<Value> lower_leaky_relu(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value slope = ctx.has(1) ? param_as(ctx, 1, r) : splat(b, 0.01, x);
  return finish(ctx, r, b.select(greater(b, x, zeros_like(b, x)), x, b.mul(x, slope)));
}
TPU_LOWERING("leaky_relu", lower_leaky_relu);

// leaky_relu_backward(grad_output, self, negative_slope, self_is_result)
std::vector<Value> lower_leaky_relu_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  Value positive = greater(b, x, zeros_like(b, x));
  return finish(ctx, r, b.select(positive, grad, b.mul(grad, param_as(ctx, 2, r))));
}
TPU_LOWERING("leaky_relu_backward", lower_leaky_relu_backward);

// hardsigmoid(x) = min(max(x + 3, 0), 6) / 6
Value hardsigmoid_of(Builder& b, Value x) {
  Value shifted = b.add(x, splat(b, 3, x));
  return b.div(clamp(b, shifted, zeros_like(b, x), splat(b, 6, x)), splat(b, 6, x));
}

std::vector<Value> lower_hardsigmoid(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  return finish(ctx, r, hardsigmoid_of(ctx.b, arg_as(ctx, 0, r)));
}
TPU_LOWERING("hardsigmoid", lower_hardsigmoid);

// hardsigmoid_backward(grad_output, self): grad / 6 strictly inside (-3, 3).
std::vector<Value> lower_hardsigmoid_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  Value inside = b.binary("stablehlo.and", greater(b, x, splat(b, -3, x)),
                          b.compare(x, splat(b, 3, x), "LT"));
  return finish(ctx, r, b.select(inside, b.div(grad, splat(b, 6, x)), zeros_like(b, grad)));
}
TPU_LOWERING("hardsigmoid_backward", lower_hardsigmoid_backward);

// hardswish(x) = x * min(max(x + 3, 0), 6) / 6
std::vector<Value> lower_hardswish(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value shifted = b.add(x, splat(b, 3, x));
  Value gate = clamp(b, shifted, zeros_like(b, x), splat(b, 6, x));
  return finish(ctx, r, b.div(b.mul(x, gate), splat(b, 6, x)));
}
TPU_LOWERING("hardswish", lower_hardswish);

// hardswish_backward(grad_output, self): 0 up to -3, grad * (x / 3 + 1/2) below 3, then grad.
std::vector<Value> lower_hardswish_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  Value slope = b.add(b.div(x, splat(b, 3, x)), splat(b, 0.5, x));
  Value middle = b.select(b.compare(x, splat(b, 3, x), "LT"), b.mul(grad, slope), grad);
  return finish(ctx, r, b.select(less_equal(b, x, splat(b, -3, x)), zeros_like(b, grad), middle));
}
TPU_LOWERING("hardswish_backward", lower_hardswish_backward);

// ---------------------------------------------------------------------------------------------
// Smooth activations.

// elu(self, alpha, scale, input_scale): scale * x above 0, alpha * scale * expm1(x * input_scale)
// at or below.
Value elu_of(Builder& b, Value x, Value alpha, Value scale, Value input_scale) {
  Value negative = b.mul(op(b, "exponential_minus_one", b.mul(x, input_scale)), b.mul(alpha, scale));
  return b.select(less_equal(b, x, zeros_like(b, x)), negative, b.mul(x, scale));
}

// A scalar parameter, or `fallback` where it was not given.
Value param_or(Context& ctx, size_t i, const ElementwiseResult& r, double fallback) {
  return ctx.has(i) ? param_as(ctx, i, r) : ctx.b.full(fallback, {r.compute, r.dims});
}

std::vector<Value> lower_elu(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Value x = arg_as(ctx, 0, r);
  return finish(ctx, r, elu_of(ctx.b, x, param_or(ctx, 1, r, 1), param_or(ctx, 2, r, 1),
                               param_or(ctx, 3, r, 1)));
}
TPU_LOWERING("elu", lower_elu);

// celu(self, alpha) = elu(self, alpha, 1, 1 / alpha)
std::vector<Value> lower_celu(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value alpha = param_or(ctx, 1, r, 1);
  Value one = splat(b, 1, x);
  return finish(ctx, r, elu_of(b, x, alpha, one, b.div(one, alpha)));
}
TPU_LOWERING("celu", lower_celu);

// elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
std::vector<Value> lower_elu_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r);
  Value alpha = param_as(ctx, 1, r), scale = param_as(ctx, 2, r), input_scale = param_as(ctx, 3, r);
  bool is_result = ctx.bool_arg(4, false);
  Value v = arg_as(ctx, 5, r);
  Value negative_scale = b.mul(alpha, scale);
  Value negative;
  if (is_result) {
    // v = elu(x) = negative_scale * (exp(x * input_scale) - 1) on the negative side.
    negative = b.mul(b.mul(grad, input_scale), b.add(v, negative_scale));
  } else {
    Value e = op(b, "exponential", b.mul(v, input_scale));
    negative = b.mul(b.mul(b.mul(grad, input_scale), negative_scale), e);
  }
  Value positive = b.mul(grad, scale);
  return finish(ctx, r, b.select(less_equal(b, v, zeros_like(b, v)), negative, positive));
}
TPU_LOWERING("elu_backward", lower_elu_backward);

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrtTwoOverPi = 0.79788456080286535588;
constexpr double kInvSqrtTwoPi = 0.39894228040143267794;
constexpr double kGeluCubic = 0.044715;

bool gelu_uses_tanh(const Context& ctx, size_t i) {
  if (!ctx.has(i)) return false;
  const std::string& mode = ctx.arg(i).s;
  if (mode == "tanh") return true;
  if (mode == "none") return false;
  throw Unsupported("gelu approximate=" + mode);
}

// sqrt(2/pi) * (x + 0.044715 x^3), the argument of gelu's tanh approximation.
Value gelu_tanh_inner(Builder& b, Value x) {
  Value cube = b.mul(b.mul(x, x), x);
  return b.mul(splat(b, kSqrtTwoOverPi, x), b.add(x, b.mul(splat(b, kGeluCubic, x), cube)));
}

// gelu(self, approximate): x * Phi(x), or its tanh approximation.
std::vector<Value> lower_gelu(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value half_x = b.mul(x, splat(b, 0.5, x));
  Value one = splat(b, 1, x);
  Value gate = gelu_uses_tanh(ctx, 1) ? b.add(one, op(b, "tanh", gelu_tanh_inner(b, x)))
                                      : b.add(one, erf(b, b.mul(x, splat(b, kSqrtHalf, x))));
  return finish(ctx, r, b.mul(half_x, gate));
}
TPU_LOWERING("gelu", lower_gelu);

// gelu_backward(grad_output, self, approximate)
std::vector<Value> lower_gelu_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  Value one = splat(b, 1, x), half = splat(b, 0.5, x);
  Value derivative;
  if (gelu_uses_tanh(ctx, 2)) {
    Value t = op(b, "tanh", gelu_tanh_inner(b, x));
    // d/dx [x/2 (1 + t)] = (1 + t) / 2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    Value inner_slope = b.mul(splat(b, kSqrtTwoOverPi, x),
                              b.add(one, b.mul(splat(b, 3 * kGeluCubic, x), b.mul(x, x))));
    Value tanh_slope = b.mul(b.sub(one, b.mul(t, t)), inner_slope);
    derivative = b.add(b.mul(half, b.add(one, t)), b.mul(b.mul(half, x), tanh_slope));
  } else {
    Value cdf = b.mul(half, b.add(one, erf(b, b.mul(x, splat(b, kSqrtHalf, x)))));
    Value pdf = b.mul(splat(b, kInvSqrtTwoPi, x), op(b, "exponential", b.mul(b.mul(x, x), splat(b, -0.5, x))));
    derivative = b.add(cdf, b.mul(x, pdf));
  }
  return finish(ctx, r, b.mul(grad, derivative));
}
TPU_LOWERING("gelu_backward", lower_gelu_backward);

std::vector<Value> lower_silu(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Value x = arg_as(ctx, 0, r);
  return finish(ctx, r, ctx.b.mul(x, sigmoid(ctx.b, x)));
}
TPU_LOWERING("silu", lower_silu);

// silu_backward(grad_output, self) = grad * s * (1 + x * (1 - s)), s = sigmoid(x)
std::vector<Value> lower_silu_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  Value s = sigmoid(b, x), one = splat(b, 1, x);
  Value slope = b.mul(s, b.add(one, b.mul(x, b.sub(one, s))));
  return finish(ctx, r, b.mul(grad, slope));
}
TPU_LOWERING("silu_backward", lower_silu_backward);

// sigmoid_backward(grad_output, output) = grad * (1 - y) * y
std::vector<Value> lower_sigmoid_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), y = arg_as(ctx, 1, r);
  return finish(ctx, r, b.mul(b.mul(grad, b.sub(splat(b, 1, y), y)), y));
}
TPU_LOWERING("sigmoid_backward", lower_sigmoid_backward);

// tanh_backward(grad_output, output) = grad * (1 - y^2)
std::vector<Value> lower_tanh_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), y = arg_as(ctx, 1, r);
  return finish(ctx, r, b.mul(grad, b.sub(splat(b, 1, y), b.mul(y, y))));
}
TPU_LOWERING("tanh_backward", lower_tanh_backward);

// softplus(self, beta, threshold): x where beta * x > threshold, else log1p(exp(beta x)) / beta.
std::vector<Value> lower_softplus(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value beta = param_or(ctx, 1, r, 1), threshold = param_or(ctx, 2, r, 20);
  Value scaled = b.mul(x, beta);
  Value smooth = b.div(softplus(b, scaled), beta);
  return finish(ctx, r, b.select(greater(b, scaled, threshold), x, smooth));
}
TPU_LOWERING("softplus", lower_softplus);

// softplus_backward(grad_output, self, beta, threshold)
std::vector<Value> lower_softplus_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  Value scaled = b.mul(x, param_as(ctx, 2, r));
  Value smooth = b.mul(grad, sigmoid(b, scaled));  // grad * e / (e + 1), e = exp(beta x)
  return finish(ctx, r, b.select(greater(b, scaled, param_as(ctx, 3, r)), grad, smooth));
}
TPU_LOWERING("softplus_backward", lower_softplus_backward);

// mish(x) = x * tanh(softplus(x))
std::vector<Value> lower_mish(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  return finish(ctx, r, b.mul(x, op(b, "tanh", softplus(b, x))));
}
TPU_LOWERING("mish", lower_mish);

// mish_backward(grad_output, self) = grad * (t + x * sigmoid(x) * (1 - t^2)), t = tanh(softplus(x))
std::vector<Value> lower_mish_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  Value t = op(b, "tanh", softplus(b, x));
  Value slope = b.add(t, b.mul(b.mul(x, sigmoid(b, x)), b.sub(splat(b, 1, x), b.mul(t, t))));
  return finish(ctx, r, b.mul(grad, slope));
}
TPU_LOWERING("mish_backward", lower_mish_backward);

// log_sigmoid_forward(self) -> (output, buffer). output = min(x, 0) - log1p(exp(-|x|)); the
// buffer holds exp(-|x|) as on PyTorch's CPU, though our backward recomputes from self.
std::vector<Value> lower_log_sigmoid_forward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r);
  Value e = op(b, "exponential", op(b, "negate", op(b, "abs", x)));
  Value out = b.sub(min_propagating_nan(b, x, zeros_like(b, x)), op(b, "log_plus_one", e));
  const Output& buffer = ctx.outputs.at(1);
  if (buffer.dims != r.dims || buffer.dtype != r.dtype) {
    throw Unsupported("log_sigmoid_forward with an unexpected buffer shape");
  }
  return {b.convert(out, r.dtype), b.convert(e, r.dtype)};
}
TPU_LOWERING("log_sigmoid_forward", lower_log_sigmoid_forward);

// log_sigmoid_backward(grad_output, self, buffer) = grad * sigmoid(-x)
std::vector<Value> lower_log_sigmoid_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r);
  return finish(ctx, r, b.mul(grad, sigmoid(b, op(b, "negate", x))));
}
TPU_LOWERING("log_sigmoid_backward", lower_log_sigmoid_backward);


// hardshrink(self, lambd): 0 on [-lambd, lambd], x elsewhere (nan stays nan).
std::vector<Value> lower_hardshrink(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r), lambd = param_or(ctx, 1, r, 0.5);
  Value inside = b.binary("stablehlo.and", b.compare(x, op(b, "negate", lambd), "GE"), less_equal(b, x, lambd));
  return finish(ctx, r, b.select(inside, zeros_like(b, x), x));
}
TPU_LOWERING("hardshrink", lower_hardshrink);

// softshrink(self, lambd): x - lambd above lambd, x + lambd below -lambd, 0 between; nan stays.
std::vector<Value> lower_softshrink(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r), lambd = param_or(ctx, 1, r, 0.5);
  Value result = b.mul(x, zeros_like(b, x));
  result = b.select(b.compare(x, op(b, "negate", lambd), "LT"), b.add(x, lambd), result);
  result = b.select(greater(b, x, lambd), b.sub(x, lambd), result);
  return finish(ctx, r, result);
}
TPU_LOWERING("softshrink", lower_softshrink);

// hardshrink_backward / softshrink_backward(grad_out, self, lambd): grad outside [-lambd, lambd].
std::vector<Value> lower_shrink_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = arg_as(ctx, 0, r), x = arg_as(ctx, 1, r), lambd = param_or(ctx, 2, r, 0.5);
  Value inside = b.binary("stablehlo.and", b.compare(x, op(b, "negate", lambd), "GE"), less_equal(b, x, lambd));
  return finish(ctx, r, b.select(inside, zeros_like(b, x), grad));
}
TPU_LOWERING("hardshrink_backward", lower_shrink_backward);
TPU_LOWERING("softshrink_backward", lower_shrink_backward);

// glu(self, dim): a * sigmoid(b) for the two halves a, b of self along dim.
struct Halves {
  Value a, b;
  int64_t dim;
};
Halves halves(Builder& b, Value x, int64_t dim) {
  Dims start(b.rank(x), 0), limit = b.dims(x), step(b.rank(x), 1);
  int64_t half = limit[dim] / 2;
  limit[dim] = half;
  Value first = b.slice(x, start, limit, step);
  start[dim] = half;
  limit[dim] = 2 * half;
  return {first, b.slice(x, start, limit, step), dim};
}

std::vector<Value> lower_glu(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = b.convert(ctx.tensor(0), r.compute);
  Halves h = halves(b, x, wrap_dim(ctx.int_arg(1, -1), b.rank(x)));
  return finish(ctx, r, b.mul(h.a, sigmoid(b, h.b)));
}
TPU_LOWERING("glu", lower_glu);

// glu_backward(grad_output, self, dim): [grad * sigmoid(b), grad * a * sigmoid(b) (1 - sigmoid(b))]
std::vector<Value> lower_glu_backward(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value grad = b.convert(ctx.tensor(0), r.compute);
  Value x = b.convert(ctx.tensor(1), r.compute);
  Halves h = halves(b, x, wrap_dim(ctx.int_arg(2, -1), b.rank(x)));
  Value s = sigmoid(b, h.b);
  Value grad_a = b.mul(grad, s);
  Value grad_b = b.mul(b.mul(grad_a, h.a), b.sub(splat(b, 1, s), s));
  return finish(ctx, r, b.concatenate({grad_a, grad_b}, h.dim));
}
TPU_LOWERING("glu_backward", lower_glu_backward);

// `v` summed down to `dims` (numpy broadcasting in reverse).
Value sum_to(Builder& b, Value v, const Dims& dims) {
  const Dims& from = b.dims(v);
  int64_t lead = static_cast<int64_t>(from.size()) - static_cast<int64_t>(dims.size());
  Dims reduced;
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d) {
    if (d < lead || (dims[d - lead] == 1 && from[d] != 1)) reduced.push_back(d);
  }
  return b.reshape(sum_over(b, v, reduced), dims);
}

// _prelu_kernel(self, weight): x where x > 0, else weight * x (weight broadcasts).
std::vector<Value> lower_prelu(Context& ctx) {
  ElementwiseResult r = float_result_of(ctx);
  Builder& b = ctx.b;
  Value x = arg_as(ctx, 0, r), w = arg_as(ctx, 1, r);
  return finish(ctx, r, b.select(greater(b, x, zeros_like(b, x)), x, b.mul(w, x)));
}
TPU_LOWERING("_prelu_kernel", lower_prelu);

// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self, grad_weight)
std::vector<Value> lower_prelu_backward(Context& ctx) {
  Builder& b = ctx.b;
  DType dtype = ctx.outputs.at(0).dtype;
  if (!is_floating(dtype)) throw Unsupported(ctx.op + ": non-floating");
  DType c = accumulation_type(dtype);
  Dims full = broadcast_shape(b.dims(ctx.tensor(1)), b.dims(ctx.tensor(2)));
  full = broadcast_shape(full, b.dims(ctx.tensor(0)));
  Value grad = operand_as(ctx, 0, c, full), x = operand_as(ctx, 1, c, full), w = operand_as(ctx, 2, c, full);
  Value positive = greater(b, x, zeros_like(b, x));
  Value grad_x = b.select(positive, grad, b.mul(w, grad));
  Value grad_w = b.select(positive, zeros_like(b, x), b.mul(x, grad));
  return {b.convert(sum_to(b, grad_x, ctx.outputs.at(0).dims), dtype),
          b.convert(sum_to(b, grad_w, ctx.outputs.at(1).dims), ctx.outputs.at(1).dtype)};
}
TPU_LOWERING("_prelu_kernel_backward", lower_prelu_backward);

}  // namespace
}  // namespace tpu::lowering
