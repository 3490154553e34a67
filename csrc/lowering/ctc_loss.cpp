// CTC loss and its gradient on the device: _ctc_loss.Tensor and _ctc_loss_backward.Tensor, with
// targets padded to [batch, S] and the lengths as runtime i64 tensors, so that one program serves
// every batch of the same sizes whatever its lengths. aten/ctc_loss_kernel.cpp brings the int[]
// forms (what torch.nn.functional.ctc_loss calls) into that shape after CPU's checks.
//
// The forward variable alpha and the backward variable beta are the log-space recursions of
// Graves et al. over the extended label sequence l' (blanks around and between the labels,
// length L = 2 S + 1), one while loop over time each, every batch element at once: positions past
// an element's own lengths are -inf, as in CPU's kernel, so log_alpha is CPU's. The gradient with
// respect to the log-probabilities is exp(lp) - occupancy, the occupancy of a class at a step
// being the share of p(l | x) that passes through the positions of l' carrying it: alpha beta / y
// summed per class (a scatter-add, after subtracting the step's maximum) over their sum. CPU
// divides by exp(-nll) instead; with nll in the hundreds that rounds in float32, the share does
// not (float32 gradients land closer to float64's than CPU's do).
#include <cmath>
#include <limits>

#include "lowering/elementwise.h"
#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// `x` ([N, L]) moved `by` positions along the last dim, toward higher s (by > 0) or lower s
// (by < 0), `fill` coming in.
Value shifted(Builder& b, Value x, int64_t by, double fill = kNegInf) {
  Dims dims = b.dims(x);
  int64_t length = dims.back(), distance = by < 0 ? -by : by;
  if (distance >= length) return b.full(fill, b.type(x));
  Value filler = b.constant(fill, b.dtype(x));
  if (by > 0) return b.slice(b.pad(x, filler, {0, by}, {0, 0}, {0, 0}), {0, 0}, {dims[0], length}, {1, 1});
  return b.slice(b.pad(x, filler, {0, 0}, {0, distance}, {0, 0}), {0, distance}, {dims[0], length + distance}, {1, 1});
}

// log(exp(a) + exp(b) + exp(c)) with CPU's guard: all -inf gives -inf, not nan.
Value log_add3(Builder& b, Value x, Value y, Value z) {
  Value m = b.max(b.max(x, y), z);
  Value finite = b.compare(m, splat(b, kNegInf, m), "NE");
  Value shift = b.select(finite, m, b.zeros(b.type(m)));
  Value sum = b.add(b.add(op(b, "exponential", b.sub(x, shift)), op(b, "exponential", b.sub(y, shift))), op(b, "exponential", b.sub(z, shift)));
  return b.add(op(b, "log", sum), shift);
}

struct Labels {
  Value extended;     // i32 [N, L]: l', blank at even positions, the targets at odd ones
  Value skip;         // bool [N, L]: alpha[s] may come from alpha[s - 2] (a label unlike the one before it)
  Value within;       // bool [N, L]: s <= 2 * target_length
  Value target_twice; // i32 [N]: 2 * target_length
  Value input_length; // i32 [N]
};

Labels labels(Context& ctx, size_t targets, size_t input_lengths, size_t target_lengths, int64_t blank,
              int64_t batch) {
  Builder& b = ctx.b;
  Value padded = b.convert(ctx.tensor(targets), DType::I32);
  int64_t width = b.dims(padded).at(1), length = 2 * width + 1;
  TensorType positions_type{DType::I32, {batch, length}};
  Value s = b.iota(positions_type, 1);
  Value blanks = b.full(static_cast<double>(blank), positions_type);
  Labels l;
  if (width == 0) {
    l.extended = blanks;
  } else {
    Value label_index = b.div(s, b.full(2, positions_type));  // (s - 1) / 2 at odd s, clamped below
    label_index = b.min(label_index, b.full(static_cast<double>(width - 1), positions_type));
    Value odd = b.compare(b.binary("stablehlo.remainder", s, b.full(2, positions_type)), b.full(1, positions_type), "EQ");
    l.extended = b.select(odd, take_along(b, padded, 1, label_index), blanks);
  }
  Value before = shifted(b, l.extended, 2, -1);
  l.skip = op(b, "and", op(b, "and", b.compare(s, b.full(2, positions_type), "GE"),
                              b.compare(l.extended, blanks, "NE")),
              b.compare(l.extended, before, "NE"));
  Value tl = b.convert(ctx.tensor(target_lengths), DType::I32);
  l.target_twice = b.mul(tl, b.full(2, b.type(tl)));
  l.within = b.compare(s, b.broadcast_in_dim(l.target_twice, {batch, length}, {0}), "LE");
  l.input_length = b.convert(ctx.tensor(input_lengths), DType::I32);
  return l;
}

// lp at the extended labels: [T, N, L].
Value label_log_probs(Builder& b, Value log_probs, const Labels& l) {
  Dims dims = b.dims(log_probs);
  Dims ext = b.dims(l.extended);
  return take_along(b, log_probs, 2, b.broadcast_in_dim(l.extended, {dims[0], ext[0], ext[1]}, {1, 2}));
}

// Row t ([N, L]) of a [T, N, L] value.
Value step_of(Builder& b, Value x, Value t) {
  Dims dims = b.dims(x);
  Value zero = b.constant(0, DType::I32);
  return b.reshape(b.dynamic_slice(x, {t, zero, zero}, {1, dims[1], dims[2]}), {dims[1], dims[2]});
}

// Argument i, the [T, N, C] log-probabilities of a Tensor form, in float32 or float64 (CPU's).
Value log_probs_of(Context& ctx, size_t i) {
  if (ctx.overload != "Tensor") throw Unsupported(ctx.op + ": the int[] form is brought to the Tensor one first");
  Value log_probs = ctx.tensor(i);
  DType dtype = ctx.b.dtype(log_probs);
  if (dtype != DType::F32 && dtype != DType::F64) throw Unsupported(ctx.op + ": float32 and float64 only");
  if (ctx.b.rank(log_probs) != 3 || ctx.b.dims(ctx.tensor(i + 1)).size() != 2 || ctx.b.dims(log_probs)[0] == 0) {
    throw Unsupported(ctx.op + ": [T > 0, N, C] and [N, S]");
  }
  return log_probs;
}

std::vector<Value> lower_ctc_loss(Context& ctx) {
  Builder& b = ctx.b;
  Value log_probs = log_probs_of(ctx, 0);
  DType dtype = b.dtype(log_probs);
  Dims dims = b.dims(log_probs);
  int64_t steps = dims[0], batch = dims[1];
  // zero_infinity concerns the gradient only: ctc_loss, which calls this, zeroes infinite losses.
  Labels l = labels(ctx, 1, 2, 3, ctx.int_arg(4, 0), batch);
  Value lp = label_log_probs(b, log_probs, l);  // [T, N, L]
  int64_t length = b.dims(lp)[2];
  TensorType row{dtype, {batch, length}}, all{dtype, {batch, steps, length}}, counter{DType::I32, {}};
  Dims row_dims{batch, length};
  Value minus_inf = b.full(kNegInf, row);
  Value s = b.iota({DType::I32, row_dims}, 1);
  Value input_length = b.broadcast_in_dim(l.input_length, row_dims, {0});
  Value first = op(b, "or", b.compare(s, b.full(0, {DType::I32, row_dims}), "EQ"),
                   op(b, "and", b.compare(s, b.full(1, {DType::I32, row_dims}), "EQ"), l.within));
  Value zero = b.constant(0, DType::I32);
  Value alpha0 = b.select(first, step_of(b, lp, zero), minus_inf);
  Value log_alpha = b.dynamic_update_slice(b.full(kNegInf, all), b.reshape(alpha0, {batch, 1, length}), {zero, zero, zero});

  // The loop carries what it reads as well (XLA's while takes no implicit captures).
  std::vector<TensorType> state{row, all, counter, b.type(lp), b.type(l.skip), b.type(l.within), b.type(input_length)};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    return std::vector<Value>{r.compare(v[2], r.constant(static_cast<double>(steps), DType::I32), "LT")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    Value previous = v[0], t = v[2], skip = v[4], within = v[5];
    Value from_skip = r.select(skip, shifted(r, previous, 2), r.full(kNegInf, row));
    Value next = r.add(log_add3(r, previous, shifted(r, previous, 1), from_skip), step_of(r, v[3], t));
    Value live = op(r, "and", within, r.compare(r.broadcast_to(t, row_dims), v[6], "LT"));
    next = r.select(live, next, r.full(kNegInf, row));
    Value z = r.constant(0, DType::I32);
    Value written = r.dynamic_update_slice(v[1], r.reshape(next, {batch, 1, length}), {z, t, z});
    return std::vector<Value>{next, written, r.add(t, r.constant(1, DType::I32)), v[3], skip, within, v[6]};
  });
  log_alpha = b.op("stablehlo.while", {alpha0, log_alpha, b.constant(1, DType::I32), lp, l.skip, l.within, input_length},
                   state, "", {cond, body})[1];

  // nll = -log(alpha[il - 1, 2 tl] + alpha[il - 1, 2 tl - 1]).
  TensorType index_type{DType::I32, {batch, 1}};
  Value last_step = b.max(b.sub(l.input_length, b.full(1, b.type(l.input_length))), b.zeros(b.type(l.input_length)));
  Value final_row = b.reshape(
      take_along(b, b.transpose(log_alpha, {0, 2, 1}), 2,
                 b.broadcast_in_dim(b.reshape(last_step, {batch, 1}), {batch, length, 1}, {0, 2})),
      {batch, length});
  Value end = b.reshape(l.target_twice, {batch, 1});
  Value end_before = b.max(b.sub(end, b.full(1, index_type)), b.zeros(index_type));
  Value l1 = b.reshape(take_along(b, final_row, 1, end), {batch});
  Value l2 = b.reshape(take_along(b, final_row, 1, end_before), {batch});
  l2 = b.select(b.compare(l.target_twice, b.zeros(b.type(l.target_twice)), "GT"), l2, b.full(kNegInf, b.type(l2)));
  Value nll = negate(b, log_add3(b, l1, l2, b.full(kNegInf, b.type(l1))));
  return {nll, log_alpha};
}

std::vector<Value> lower_ctc_loss_backward(Context& ctx) {
  Builder& b = ctx.b;
  Value log_probs = log_probs_of(ctx, 1);
  DType dtype = b.dtype(log_probs);
  Dims dims = b.dims(log_probs);
  int64_t steps = dims[0], batch = dims[1], classes = dims[2];
  Labels l = labels(ctx, 2, 3, 4, ctx.int_arg(7, 0), batch);
  Value lp = label_log_probs(b, log_probs, l);
  int64_t length = b.dims(lp)[2];
  Value log_alpha = ctx.tensor(6);
  if (b.dims(log_alpha) != Dims{batch, steps, length}) throw Unsupported("_ctc_loss_backward: log_alpha of another width");
  Value nll = b.convert(ctx.tensor(5), dtype);
  Value grad_out = b.convert(ctx.tensor(0), dtype);
  bool zero_infinity = ctx.bool_arg(8, false);

  Dims row_dims{batch, length};
  TensorType row{dtype, row_dims}, occupancy_type{dtype, {steps, batch, classes}}, counter{DType::I32, {}};
  Value input_length = b.broadcast_in_dim(l.input_length, row_dims, {0});
  Value s = b.iota({DType::I32, row_dims}, 1);
  Value last = b.broadcast_in_dim(l.target_twice, row_dims, {0});
  Value at_end = op(b, "or", b.compare(s, last, "EQ"),
                    op(b, "and", b.compare(s, b.sub(last, b.full(1, {DType::I32, row_dims})), "EQ"),
                       b.compare(last, b.zeros({DType::I32, row_dims}), "GT")));
  Value skip_back = shifted(b, l.skip, -2, 0);

  // Walks t = T - 1 down to 0 with beta[t], adding each step's occupancy per class. The loop
  // carries what it reads as well (XLA's while takes no implicit captures).
  Value alpha_by_step = b.transpose(log_alpha, {1, 0, 2});  // [T, N, L]
  std::vector<TensorType> state{row, occupancy_type, counter, b.type(lp), b.type(alpha_by_step),
                                b.type(input_length), b.type(at_end), b.type(skip_back), b.type(l.within),
                                b.type(l.extended)};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    return std::vector<Value>{r.compare(v[2], r.constant(0, DType::I32), "GE")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    Value later = v[0], t = v[2], lp_t = step_of(r, v[3], t), alpha_t = step_of(r, v[4], t);
    Value il = v[5], ends = v[6], skip = v[7], within = v[8], class_of_s = v[9];
    Value minus_inf = r.full(kNegInf, row);
    Value t_all = r.broadcast_to(t, row_dims);
    Value il_minus_1 = r.sub(il, r.full(1, {DType::I32, row_dims}));
    Value from_skip = r.select(skip, shifted(r, later, -2), minus_inf);
    Value recurred = r.add(log_add3(r, later, shifted(r, later, -1), from_skip), lp_t);
    Value beta = r.select(r.compare(t_all, il_minus_1, "EQ"), r.select(ends, lp_t, minus_inf),
                          r.select(r.compare(t_all, il_minus_1, "LT"), recurred, minus_inf));
    beta = r.select(within, beta, minus_inf);
    // log(alpha beta / y) per position, shifted by its maximum over s, summed per class.
    Value per_position = r.sub(r.add(alpha_t, beta), lp_t);
    Value m = r.reduce(per_position, r.constant(kNegInf, dtype), {1}, "stablehlo.maximum");
    Value shift = r.select(r.compare(m, r.full(kNegInf, r.type(m)), "NE"), m, r.zeros(r.type(m)));
    Value weights = op(r, "exponential", r.sub(per_position, r.broadcast_in_dim(shift, row_dims, {0})));
    Builder::ScatterDims sd{{}, {0, 1}, {0, 1}, 2};
    Value sums = r.scatter(r.zeros({dtype, {batch, classes}}), coordinates_along(r, class_of_s, 1, 2), weights, sd,
                           "stablehlo.add");
    // Summed over the classes this is p(l | x) at every step before the input's end, so the
    // share of each class is its occupancy, with no exp(-nll) to round.
    Value total = r.reduce(sums, r.constant(0, dtype), {1}, "stablehlo.add");
    Value occupancy = r.div(sums, r.broadcast_in_dim(total, {batch, classes}, {0}));
    Value z = r.constant(0, DType::I32);
    Value written = r.dynamic_update_slice(v[1], r.reshape(occupancy, {1, batch, classes}), {t, z, z});
    return std::vector<Value>{beta, written, r.sub(t, r.constant(1, DType::I32)), v[3], v[4], il, ends, skip,
                              within, class_of_s};
  });
  Value occupancy = b.op("stablehlo.while", {b.full(kNegInf, row), b.zeros(occupancy_type),
                                             b.constant(static_cast<double>(steps - 1), DType::I32), lp,
                                             alpha_by_step, input_length, at_end, skip_back, l.within, l.extended},
                         state, "", {cond, body})[1];

  Dims out{steps, batch, classes};
  Value lp_all = b.convert(log_probs, dtype);
  Value grad = b.sub(op(b, "exponential", lp_all), occupancy);
  grad = b.mul(grad, b.broadcast_in_dim(grad_out, out, {1}));
  Value t_index = b.iota({DType::I32, out}, 0);
  Value live = b.compare(t_index, b.broadcast_in_dim(l.input_length, out, {1}), "LT");
  if (zero_infinity) {
    Value finite = b.compare(nll, splat(b, HUGE_VAL, nll), "NE");
    live = op(b, "and", live, b.broadcast_in_dim(finite, out, {1}));
  }
  return {b.select(live, grad, b.zeros({dtype, out}))};
}

}  // namespace

TPU_LOWERING("_ctc_loss", lower_ctc_loss);
TPU_LOWERING("_ctc_loss_backward", lower_ctc_loss_backward);

}  // namespace tpu::lowering
