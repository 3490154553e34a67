// The fused recurrent cells. ATen's LSTM and GRU take these kernels for every device that is not
// the CPU (CUDA's, and any PrivateUse1 device's): the gate matmuls happen outside, the cell gets
// the pre-activation gates and keeps the activated gates in a workspace for its backward.
//
// LSTM gates are laid out [input, forget, cell, output] along dim 1; GRU gates [reset, update,
// new], and the GRU workspace holds [reset, update, new, hx, hidden new-gate].
#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

// Gate `k` of `count` along dim 1 of a [batch, count * hidden] value.
Value gate(Builder& b, Value x, int64_t k, int64_t count) {
  const Dims& d = b.dims(x);
  int64_t hidden = d[1] / count;
  return b.slice(x, {0, k * hidden}, {d[0], (k + 1) * hidden}, {1, 1});
}

Value sigmoid(Builder& b, Value x) { return b.unary("stablehlo.logistic", x); }
Value tanh(Builder& b, Value x) { return b.unary("stablehlo.tanh", x); }
Value one_minus(Builder& b, Value x) { return b.sub(b.full(1, b.type(x)), x); }
// The derivative of sigmoid and of tanh, from their outputs.
Value sigmoid_slope(Builder& b, Value s) { return b.mul(s, one_minus(b, s)); }
Value tanh_slope(Builder& b, Value t) { return one_minus(b, b.mul(t, t)); }

// args[i] in the compute type; absent optional arguments give an invalid Value.
Value input(Context& ctx, size_t i, DType compute) {
  if (!ctx.has(i)) return Value{};
  return ctx.b.convert(ctx.tensor(i), compute);
}

// Pre-activation gates: input_gates + hidden_gates (+ both biases, broadcast over the batch).
Value gates_with_bias(Context& ctx, Value input_gates, Value hidden_gates, DType compute) {
  Builder& b = ctx.b;
  Value gates = b.add(input_gates, hidden_gates);
  for (size_t i : {3, 4}) {
    Value bias = input(ctx, i, compute);
    if (bias.valid()) gates = b.add(gates, b.broadcast_in_dim(bias, b.dims(gates), {1}));
  }
  return gates;
}

Value bias_gradient(Context& ctx, Value grad_gates, size_t output, bool has_bias) {
  Builder& b = ctx.b;
  if (!has_bias) return b.full(0, ctx.out_type(output));
  return as_output(ctx, sum_over(b, grad_gates, {0}), output);
}

// _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?, hidden_bias?)
//   -> (hy, cy, workspace)
std::vector<Value> lower_fused_lstm_cell(Context& ctx) {
  Builder& b = ctx.b;
  DType compute = accumulation_type(ctx.outputs[0].dtype);
  Value gates = gates_with_bias(ctx, input(ctx, 0, compute), input(ctx, 1, compute), compute);
  Value cx = input(ctx, 2, compute);
  Value i = sigmoid(b, gate(b, gates, 0, 4));
  Value f = sigmoid(b, gate(b, gates, 1, 4));
  Value g = tanh(b, gate(b, gates, 2, 4));
  Value o = sigmoid(b, gate(b, gates, 3, 4));
  Value cy = b.add(b.mul(f, cx), b.mul(i, g));
  Value hy = b.mul(o, tanh(b, cy));
  Value workspace = b.concatenate({i, f, g, o}, 1);
  return {as_output(ctx, hy, 0), as_output(ctx, cy, 1), as_output(ctx, workspace, 2)};
}
TPU_LOWERING("_thnn_fused_lstm_cell", lower_fused_lstm_cell);

// _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace, has_bias)
//   -> (grad_gates, grad_cx, grad_bias)
std::vector<Value> lower_fused_lstm_cell_backward(Context& ctx) {
  Builder& b = ctx.b;
  DType compute = accumulation_type(ctx.outputs[0].dtype);
  Value workspace = input(ctx, 4, compute);
  Value cx = input(ctx, 2, compute);
  Value cy = input(ctx, 3, compute);
  Value i = gate(b, workspace, 0, 4), f = gate(b, workspace, 1, 4);
  Value g = gate(b, workspace, 2, 4), o = gate(b, workspace, 3, 4);
  Value zero = b.full(0, b.type(cy));
  Value grad_hy = ctx.has(0) ? input(ctx, 0, compute) : zero;
  Value grad_cy = ctx.has(1) ? input(ctx, 1, compute) : zero;
  Value tanh_cy = tanh(b, cy);
  Value grad_c = b.add(grad_cy, b.mul(b.mul(grad_hy, o), tanh_slope(b, tanh_cy)));
  Value grad_i = b.mul(b.mul(grad_c, g), sigmoid_slope(b, i));
  Value grad_f = b.mul(b.mul(grad_c, cx), sigmoid_slope(b, f));
  Value grad_g = b.mul(b.mul(grad_c, i), tanh_slope(b, g));
  Value grad_o = b.mul(b.mul(grad_hy, tanh_cy), sigmoid_slope(b, o));
  Value grad_gates = b.concatenate({grad_i, grad_f, grad_g, grad_o}, 1);
  return {as_output(ctx, grad_gates, 0), as_output(ctx, b.mul(grad_c, f), 1),
          bias_gradient(ctx, grad_gates, 2, ctx.bool_arg(5, true))};
}
TPU_LOWERING("_thnn_fused_lstm_cell_backward_impl", lower_fused_lstm_cell_backward);

// _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace)
std::vector<Value> lower_fused_gru_cell(Context& ctx) {
  Builder& b = ctx.b;
  DType compute = accumulation_type(ctx.outputs[0].dtype);
  Value input_gates = input(ctx, 0, compute), hidden_gates = input(ctx, 1, compute);
  Value hx = input(ctx, 2, compute);
  Value input_bias = input(ctx, 3, compute), hidden_bias = input(ctx, 4, compute);
  if (input_bias.valid()) input_gates = b.add(input_gates, b.broadcast_in_dim(input_bias, b.dims(input_gates), {1}));
  if (hidden_bias.valid()) {
    hidden_gates = b.add(hidden_gates, b.broadcast_in_dim(hidden_bias, b.dims(hidden_gates), {1}));
  }
  Value r = sigmoid(b, b.add(gate(b, input_gates, 0, 3), gate(b, hidden_gates, 0, 3)));
  Value z = sigmoid(b, b.add(gate(b, input_gates, 1, 3), gate(b, hidden_gates, 1, 3)));
  Value hidden_new = gate(b, hidden_gates, 2, 3);
  Value n = tanh(b, b.add(gate(b, input_gates, 2, 3), b.mul(r, hidden_new)));
  Value hy = b.add(n, b.mul(z, b.sub(hx, n)));
  Value workspace = b.concatenate({r, z, n, hx, hidden_new}, 1);
  return {as_output(ctx, hy, 0), as_output(ctx, workspace, 1)};
}
TPU_LOWERING("_thnn_fused_gru_cell", lower_fused_gru_cell);

// _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias)
//   -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)
std::vector<Value> lower_fused_gru_cell_backward(Context& ctx) {
  Builder& b = ctx.b;
  DType compute = accumulation_type(ctx.outputs[0].dtype);
  Value grad_hy = input(ctx, 0, compute);
  Value workspace = input(ctx, 1, compute);
  Value r = gate(b, workspace, 0, 5), z = gate(b, workspace, 1, 5), n = gate(b, workspace, 2, 5);
  Value hx = gate(b, workspace, 3, 5), hidden_new = gate(b, workspace, 4, 5);
  Value grad_z = b.mul(b.mul(grad_hy, b.sub(hx, n)), sigmoid_slope(b, z));
  Value grad_n = b.mul(b.mul(grad_hy, one_minus(b, z)), tanh_slope(b, n));
  Value grad_r = b.mul(b.mul(grad_n, hidden_new), sigmoid_slope(b, r));
  Value grad_input_gates = b.concatenate({grad_r, grad_z, grad_n}, 1);
  Value grad_hidden_gates = b.concatenate({grad_r, grad_z, b.mul(grad_n, r)}, 1);
  bool has_bias = ctx.bool_arg(2, true);
  return {as_output(ctx, grad_input_gates, 0), as_output(ctx, grad_hidden_gates, 1),
          as_output(ctx, b.mul(grad_hy, z), 2), bias_gradient(ctx, grad_input_gates, 3, has_bias),
          bias_gradient(ctx, grad_hidden_gates, 4, has_bias)};
}
TPU_LOWERING("_thnn_fused_gru_cell_backward", lower_fused_gru_cell_backward);

}  // namespace
}  // namespace tpu::lowering
