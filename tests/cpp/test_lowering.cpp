// lowering/: the registry, and a representative lowering of each family (elementwise, reduction,
// matrix product, indexing, softmax and a norm, pooling, convolution) called as the executor calls
// it. Each program's text must hold the ops that make it what it is, and its results on the CPU
// plugin must equal a plain loop over the same inputs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "lowering/registry.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::testing;

namespace {

using lowering::Arg;
using Kind = Arg::Kind;

template <typename Set>
Arg arg_of(Kind kind, Set set) {
  Arg a;
  a.kind = kind;
  set(a);
  return a;
}
Arg tensor_arg() { return arg_of(Kind::Tensor, [](Arg&) {}); }
// Python numbers are weak: they lift an operand's category, never its width.
Arg number_arg() { return arg_of(Kind::Number, [](Arg& a) { a.weak = true; }); }
Arg int_arg(int64_t i) { return arg_of(Kind::Int, [&](Arg& a) { a.i = i; }); }
Arg ints_arg(const Dims& ints) { return arg_of(Kind::IntList, [&](Arg& a) { a.ints = ints; }); }
Arg bool_arg(bool value) { return arg_of(Kind::Bool, [&](Arg& a) { a.b = value; }); }

HostTensor f32(const Dims& dims, const std::vector<float>& values) { return HostTensor::of(DType::F32, dims, values); }
HostTensor i64(const Dims& dims, const std::vector<int64_t>& values) { return HostTensor::of(DType::I64, dims, values); }
// Runtime numbers reach a program as rank-0 f64 or i64 parameters, as the executor passes them.
HostTensor f64_number(double v) { return HostTensor::of(DType::F64, {}, std::vector<double>{v}); }

// One op with its arguments in schema order; each Tensor and Number argument takes the next of
// `operands` as a parameter of the program.
struct Call {
  std::string op, overload;
  std::vector<Arg> args;
  std::vector<HostTensor> operands;
  std::vector<lowering::Output> outputs;
};

struct Lowered {
  std::string text;
  std::vector<TensorType> result_types;  // the outputs, then a checked lowering's flag
};

Lowered lower(Call call) {
  const lowering::Entry* entry = lowering::find_lowering(call.op);
  if (!entry) throw Failure{"no lowering registered for " + call.op};
  hlo::Builder b;
  size_t next = 0;
  for (Arg& a : call.args) {
    if (a.kind == Kind::Tensor || a.kind == Kind::Number) a.value = b.parameter(call.operands.at(next++).type);
  }
  EXPECT(next == call.operands.size());
  lowering::Context ctx{b, call.op, call.overload, call.args, call.outputs, {}};
  std::vector<hlo::Value> results = entry->fn(ctx);
  Lowered lowered;
  for (const auto& out : call.outputs) lowered.result_types.push_back({out.dtype, out.dims});
  if (entry->checked) lowered.result_types.push_back({DType::Bool, {}});
  EXPECT(results.size() == lowered.result_types.size());
  for (size_t i = 0; i < results.size(); ++i) EXPECT(b.type(results[i]) == lowered.result_types[i]);
  lowered.text = b.module_text(results);
  return lowered;
}

std::vector<HostTensor> run(const Call& call, const Lowered& lowered) {
  return run_program(lowered.text, call.operands, lowered.result_types);
}

bool all_close(const std::vector<float>& actual, const std::vector<double>& expected, double tolerance) {
  if (actual.size() != expected.size()) return false;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!close(actual[i], expected[i], tolerance)) return false;
  }
  return true;
}

bool declines(const Call& call) {
  try {
    lower(call);
  } catch (const lowering::Unsupported&) {
    return true;
  }
  return false;
}

}  // namespace

TEST(registry_finds_lowerings_by_schema_name) {
  const lowering::Entry* add = lowering::find_lowering("add");
  EXPECT(add && add->fn && !add->random && !add->checked);
  // An in-place name without a lowering of its own is its functional op, which writes back.
  EXPECT(lowering::find_lowering("add_") == add);
  // One with its own (it draws into its input) keeps it.
  const lowering::Entry* normal_ = lowering::find_lowering("normal_");
  EXPECT(normal_ && normal_->random && normal_ != lowering::find_lowering("normal"));
  EXPECT(lowering::find_lowering("index_select")->checked);
  EXPECT(!lowering::find_lowering("no_such_op") && !lowering::find_lowering("no_such_op_"));
  EXPECT(!lowering::find_lowering("") && !lowering::find_lowering("_"));
  std::vector<std::string> names = lowering::lowered_op_names();
  EXPECT(std::is_sorted(names.begin(), names.end()));
  EXPECT(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  for (const char* op : {"add", "sum", "mm", "index_select", "_softmax", "native_layer_norm", "convolution"}) {
    EXPECT(std::binary_search(names.begin(), names.end(), op));
  }
  for (const auto& name : names) EXPECT(lowering::find_lowering(name) != nullptr);
}

TEST(add_broadcasts_and_scales_by_a_runtime_alpha) {
  std::vector<float> x = sample(6, 1), y = sample(3, 2);
  Call call{"add", "Tensor", {tensor_arg(), tensor_arg(), number_arg()},
            {f32({2, 3}, x), f32({3}, y), f64_number(2.5)}, {{DType::F32, {2, 3}}}};
  Lowered lowered = lower(call);
  EXPECT(contains(lowered.text, "stablehlo.add") && contains(lowered.text, "stablehlo.multiply"));
  EXPECT(contains(lowered.text, "stablehlo.broadcast_in_dim"));
  // alpha is a parameter, not a constant: another alpha is the same program.
  Call other = call;
  other.operands[2] = f64_number(-4);
  EXPECT(lower(other).text == lowered.text);
  REQUIRE_PLUGIN();
  for (const Call& c : {call, other}) {
    double alpha = c.operands[2].values<double>()[0];
    std::vector<double> expected;
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) expected.push_back(x[i * 3 + j] + alpha * y[j]);
    }
    EXPECT(all_close(run(c, lowered)[0].values<float>(), expected, 1e-6));
  }
  // Integers stay exact past float's 24 bits.
  std::vector<int64_t> a{int64_t{1} << 40, -7, 0, 123456789012}, b{3, int64_t{1} << 41, -1, 5};
  Call ints{"add", "Tensor", {tensor_arg(), tensor_arg(), number_arg()},
            {i64({4}, a), i64({4}, b), HostTensor::of(DType::I64, {}, std::vector<int64_t>{3})},
            {{DType::I64, {4}}}};
  std::vector<int64_t> sums = run(ints, lower(ints))[0].values<int64_t>();
  for (int i = 0; i < 4; ++i) EXPECT(sums[i] == a[i] + 3 * b[i]);
}

TEST(sum_and_mean_reduce_the_given_dims) {
  std::vector<float> x = sample(60, 3);
  auto at = [&](int i, int j, int k) { return static_cast<double>(x[(i * 4 + j) * 5 + k]); };
  Call sum{"sum", "dim_IntList", {tensor_arg(), ints_arg({0, 2}), bool_arg(false), Arg{}}, {f32({3, 4, 5}, x)},
           {{DType::F32, {4}}}};
  Lowered summed = lower(sum);
  EXPECT(contains(summed.text, "stablehlo.reduce") && contains(summed.text, "dimensions = array<i64: 0, 2>"));
  // Every dim, keepdim: (self, dtype) and a trailing dim given as -1.
  Call total{"sum", "", {tensor_arg(), Arg{}}, {f32({3, 4, 5}, x)}, {{DType::F32, {}}}};
  Call mean{"mean", "dim", {tensor_arg(), ints_arg({-1}), bool_arg(true), Arg{}}, {f32({3, 4, 5}, x)},
            {{DType::F32, {3, 4, 1}}}};
  REQUIRE_PLUGIN();
  std::vector<double> by_column(4, 0.0), by_row;
  double everything = 0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      double row = 0;
      for (int k = 0; k < 5; ++k) {
        by_column[j] += at(i, j, k);
        row += at(i, j, k);
      }
      by_row.push_back(row / 5);
      everything += row;
    }
  }
  EXPECT(all_close(run(sum, summed)[0].values<float>(), by_column, 1e-5));
  EXPECT(all_close(run(total, lower(total))[0].values<float>(), {everything}, 1e-5));
  EXPECT(all_close(run(mean, lower(mean))[0].values<float>(), by_row, 1e-5));
}

TEST(addmm_contracts_and_scales_by_runtime_beta_and_alpha) {
  const int n = 3, k = 5, m = 4;
  std::vector<float> bias = sample(m, 4), a = sample(n * k, 5), w = sample(k * m, 6);
  auto call_with = [&](const std::vector<float>& self, double beta, double alpha) {
    return Call{"addmm", "", {tensor_arg(), tensor_arg(), tensor_arg(), number_arg(), number_arg()},
                {f32({m}, self), f32({n, k}, a), f32({k, m}, w), f64_number(beta), f64_number(alpha)},
                {{DType::F32, {n, m}}}};
  };
  Call scaled = call_with(bias, 0.5, 2.0);
  Lowered lowered = lower(scaled);
  EXPECT(contains(lowered.text, "stablehlo.dot_general"));
  EXPECT(contains(lowered.text, "lhs_contracting_dimensions = [1]") &&
         contains(lowered.text, "rhs_contracting_dimensions = [0]"));
  // beta == 0 ignores self, NaN and inf included (PyTorch's rule), in the same program.
  std::vector<float> poisoned(m, std::numeric_limits<float>::quiet_NaN());
  poisoned[1] = std::numeric_limits<float>::infinity();
  Call dropped = call_with(poisoned, 0.0, -1.5);
  EXPECT(lower(dropped).text == lowered.text);
  REQUIRE_PLUGIN();
  for (const Call& c : {scaled, dropped}) {
    double beta = c.operands[3].values<double>()[0], alpha = c.operands[4].values<double>()[0];
    std::vector<float> self = c.operands[0].values<float>();
    std::vector<double> expected;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < m; ++j) {
        double dot = 0;
        for (int p = 0; p < k; ++p) dot += static_cast<double>(a[i * k + p]) * w[p * m + j];
        expected.push_back((beta == 0 ? 0.0 : beta * self[j]) + alpha * dot);
      }
    }
    EXPECT(all_close(run(c, lowered)[0].values<float>(), expected, 1e-5));
  }
}

TEST(index_select_gathers_and_flags_indices_out_of_range) {
  std::vector<float> x = sample(12, 7);
  auto select = [&](int64_t dim, const std::vector<int64_t>& index) {
    Dims out = dim == 0 ? Dims{static_cast<int64_t>(index.size()), 3} : Dims{4, static_cast<int64_t>(index.size())};
    return Call{"index_select", "", {tensor_arg(), int_arg(dim), tensor_arg()},
                {f32({4, 3}, x), i64({static_cast<int64_t>(index.size())}, index)}, {{DType::F32, out}}};
  };
  Call rows = select(0, {3, 0, 0, 2, 1});
  Lowered lowered = lower(rows);
  EXPECT(contains(lowered.text, "stablehlo.gather"));
  REQUIRE_PLUGIN();
  auto check = [&](const Call& call, const Lowered& l, bool bad) {
    auto results = run(call, l);
    std::vector<int64_t> index = call.operands[1].values<int64_t>();
    std::vector<float> got = results[0].values<float>();
    int64_t dim = call.args[1].i;
    for (size_t p = 0; p < index.size() && !bad; ++p) {
      for (int64_t q = 0; q < (dim == 0 ? 3 : 4); ++q) {
        float expected = dim == 0 ? x[index[p] * 3 + q] : x[q * 3 + index[p]];
        EXPECT(got[dim == 0 ? p * 3 + q : q * index.size() + p] == expected);
      }
    }
    EXPECT(results[1].values<uint8_t>()[0] == (bad ? 1 : 0));
  };
  check(rows, lowered, false);
  // The indices are data: out-of-range ones are flagged by the same program, not at lowering.
  check(select(0, {1, 4, 0, 0, 0}), lowered, true);
  check(select(0, {-1, 0, 0, 0, 0}), lowered, true);
  Call columns = select(1, {2, 0});
  check(columns, lower(columns), false);
}

TEST(softmax_is_shifted_by_its_max_and_layer_norm_normalizes) {
  // Rows far from zero: without subtracting the max, exp overflows (row 1) or underflows to 0/0.
  std::vector<float> x = sample(15, 8);
  for (int j = 0; j < 5; ++j) {
    x[5 + j] += 1000.0f + static_cast<float>(j);
    x[10 + j] -= 1000.0f;
  }
  Call softmax{"_softmax", "", {tensor_arg(), int_arg(1), bool_arg(false)}, {f32({3, 5}, x)}, {{DType::F32, {3, 5}}}};
  Lowered lowered = lower(softmax);
  EXPECT(contains(lowered.text, "stablehlo.exponential") && contains(lowered.text, "stablehlo.reduce"));
  EXPECT(contains(lowered.text, "stablehlo.divide"));

  const int rows = 2, width = 12;  // normalized over the trailing [3, 4]
  std::vector<float> in = sample(rows * width, 9), weight = sample(width, 10), bias = sample(width, 11);
  const double eps = 1e-5;
  Call norm{"native_layer_norm", "", {tensor_arg(), ints_arg({3, 4}), tensor_arg(), tensor_arg(), number_arg()},
            {f32({2, 3, 4}, in), f32({3, 4}, weight), f32({3, 4}, bias), f64_number(eps)},
            {{DType::F32, {2, 3, 4}}, {DType::F32, {2, 1, 1}}, {DType::F32, {2, 1, 1}}}};
  Lowered normed = lower(norm);
  EXPECT(contains(normed.text, "stablehlo.reduce") && contains(normed.text, "stablehlo.rsqrt"));
  REQUIRE_PLUGIN();
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i) {
    double peak = -INFINITY, total = 0;
    for (int j = 0; j < 5; ++j) peak = std::max(peak, static_cast<double>(x[i * 5 + j]));
    for (int j = 0; j < 5; ++j) total += std::exp(x[i * 5 + j] - peak);
    for (int j = 0; j < 5; ++j) expected.push_back(std::exp(x[i * 5 + j] - peak) / total);
  }
  EXPECT(all_close(run(softmax, lowered)[0].values<float>(), expected, 1e-5));

  std::vector<double> out, means, rstds;
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < width; ++j) mean += in[r * width + j];
    mean /= width;
    for (int j = 0; j < width; ++j) var += (in[r * width + j] - mean) * (in[r * width + j] - mean);
    double rstd = 1.0 / std::sqrt(var / width + eps);  // the biased variance, as PyTorch's
    for (int j = 0; j < width; ++j) out.push_back((in[r * width + j] - mean) * rstd * weight[j] + bias[j]);
    means.push_back(mean);
    rstds.push_back(rstd);
  }
  auto results = run(norm, normed);
  EXPECT(all_close(results[0].values<float>(), out, 1e-4));
  EXPECT(all_close(results[1].values<float>(), means, 1e-5));
  EXPECT(all_close(results[2].values<float>(), rstds, 1e-4));
}

namespace {

// PyTorch's max pooling over [N, C, H, W]: the first largest element of each window (padding never
// wins), and its index in the input plane.
void max_pool_reference(const std::vector<float>& x, const Dims& in, const Dims& out, int64_t kernel, int64_t stride,
                        int64_t pad, std::vector<float>& values, std::vector<int64_t>& indices) {
  for (int64_t plane = 0; plane < in[0] * in[1]; ++plane) {
    for (int64_t oy = 0; oy < out[2]; ++oy) {
      for (int64_t ox = 0; ox < out[3]; ++ox) {
        float best = -INFINITY;
        int64_t best_index = -1;
        for (int64_t ky = 0; ky < kernel; ++ky) {
          for (int64_t kx = 0; kx < kernel; ++kx) {
            int64_t y = oy * stride - pad + ky, xx = ox * stride - pad + kx;
            if (y < 0 || y >= in[2] || xx < 0 || xx >= in[3]) continue;
            float v = x[(plane * in[2] + y) * in[3] + xx];
            if (best_index < 0 || v > best) best = v, best_index = y * in[3] + xx;
          }
        }
        values.push_back(best);
        indices.push_back(best_index);
      }
    }
  }
}

}  // namespace

TEST(max_pool_takes_the_first_maximum_of_each_window) {
  // Halves only, so that windows hold ties: the first of them (in scan order) is the maximum.
  std::vector<float> x = sample(50, 12);
  for (float& v : x) v = std::round(v * 2) / 2;
  struct Case {
    int64_t kernel, stride, pad;
    bool ceil_mode;
    Dims out;
  };
  // Padded windows, then ceil mode, whose last window hangs past the input's end.
  for (const Case& c : {Case{3, 2, 1, false, {1, 2, 3, 3}}, Case{2, 2, 0, true, {1, 2, 3, 3}}}) {
    Call call{"max_pool2d_with_indices", "",
              {tensor_arg(), ints_arg({c.kernel, c.kernel}), ints_arg({c.stride, c.stride}), ints_arg({c.pad, c.pad}),
               ints_arg({1, 1}), bool_arg(c.ceil_mode)},
              {f32({1, 2, 5, 5}, x)},
              {{DType::F32, c.out}, {DType::I64, c.out}}};
    Lowered lowered = lower(call);
    EXPECT(contains(lowered.text, "stablehlo.compare") && contains(lowered.text, "stablehlo.select"));
    if (!have_plugin()) continue;
    std::vector<float> values;
    std::vector<int64_t> indices;
    max_pool_reference(x, {1, 2, 5, 5}, c.out, c.kernel, c.stride, c.pad, values, indices);
    auto results = run(call, lowered);
    EXPECT(results[0].values<float>() == values);
    EXPECT(results[1].values<int64_t>() == indices);
  }
}

namespace {

struct Conv {
  Dims in, weight, out;
  int64_t stride, pad, dilation, groups;
  bool transposed;
  int64_t output_padding;
};

// Every (input, weight) pair a convolution multiplies, with the output position it adds to:
// y[n, o, oy, ox] += x[n, c, iy, ix] * w[...], where oy = iy * stride - pad + ky * dilation for a
// transposed convolution and iy = oy * stride - pad + ky * dilation for a regular one.
std::vector<double> conv_reference(const Conv& c, const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>* bias) {
  std::vector<double> y(static_cast<size_t>(numel(c.out)), 0.0);
  int64_t in_per_group = c.in[1] / c.groups;
  int64_t out_per_group = c.out[1] / c.groups;
  int64_t k = c.weight[2];
  for (int64_t n = 0; n < c.in[0]; ++n) {
    for (int64_t ci = 0; ci < c.in[1]; ++ci) {
      int64_t g = ci / in_per_group;
      for (int64_t og = 0; og < out_per_group; ++og) {
        int64_t o = g * out_per_group + og;
        for (int64_t ky = 0; ky < k; ++ky) {
          for (int64_t kx = 0; kx < k; ++kx) {
            // A transposed weight is [Cin, Cout / groups, k, k]; a regular one [Cout, Cin / groups, k, k].
            double wv = c.transposed ? w[((ci * out_per_group + og) * k + ky) * k + kx]
                                     : w[((o * in_per_group + ci % in_per_group) * k + ky) * k + kx];
            for (int64_t a = 0; a < (c.transposed ? c.in[2] : c.out[2]); ++a) {
              for (int64_t bb = 0; bb < (c.transposed ? c.in[3] : c.out[3]); ++bb) {
                int64_t iy = a, ix = bb, oy = a, ox = bb;
                if (c.transposed) {
                  oy = a * c.stride - c.pad + ky * c.dilation;
                  ox = bb * c.stride - c.pad + kx * c.dilation;
                  if (oy < 0 || oy >= c.out[2] || ox < 0 || ox >= c.out[3]) continue;
                } else {
                  iy = a * c.stride - c.pad + ky * c.dilation;
                  ix = bb * c.stride - c.pad + kx * c.dilation;
                  if (iy < 0 || iy >= c.in[2] || ix < 0 || ix >= c.in[3]) continue;
                }
                y[((n * c.out[1] + o) * c.out[2] + oy) * c.out[3] + ox] +=
                    wv * x[((n * c.in[1] + ci) * c.in[2] + iy) * c.in[3] + ix];
              }
            }
          }
        }
      }
    }
  }
  if (bias) {
    for (size_t i = 0; i < y.size(); ++i) y[i] += (*bias)[(i / (c.out[2] * c.out[3])) % c.out[1]];
  }
  return y;
}

}  // namespace

TEST(convolutions_regular_grouped_and_transposed_match_their_loops) {
  const std::vector<Conv> cases = {
      {{2, 3, 6, 6}, {4, 3, 3, 3}, {2, 4, 3, 3}, 2, 1, 1, 1, false, 0},  // strided, padded, with bias
      {{1, 4, 7, 7}, {6, 2, 3, 3}, {1, 6, 7, 7}, 1, 2, 2, 2, false, 0},  // grouped and dilated
      {{1, 2, 3, 3}, {2, 3, 3, 3}, {1, 3, 6, 6}, 2, 1, 1, 1, true, 1},   // transposed, output padding
  };
  uint32_t seed = 20;
  for (const Conv& c : cases) {
    std::vector<float> x = sample(static_cast<size_t>(numel(c.in)), seed++);
    std::vector<float> w = sample(static_cast<size_t>(numel(c.weight)), seed++);
    std::vector<float> bias = sample(static_cast<size_t>(c.out[1]), seed++);
    bool with_bias = !c.transposed && c.groups == 1;
    Call call{"convolution", "",
              {tensor_arg(), tensor_arg(), with_bias ? tensor_arg() : Arg{}, ints_arg({c.stride, c.stride}),
               ints_arg({c.pad, c.pad}), ints_arg({c.dilation, c.dilation}), bool_arg(c.transposed),
               ints_arg({c.output_padding, c.output_padding}), int_arg(c.groups)},
              {f32(c.in, x), f32(c.weight, w)},
              {{DType::F32, c.out}}};
    if (with_bias) call.operands.push_back(f32({c.out[1]}, bias));
    Lowered lowered = lower(call);
    EXPECT(contains(lowered.text, "stablehlo.convolution"));
    if (c.groups > 1) EXPECT(contains(lowered.text, "feature_group_count = " + std::to_string(c.groups)));
    if (!have_plugin()) continue;
    EXPECT(all_close(run(call, lowered)[0].values<float>(), conv_reference(c, x, w, with_bias ? &bias : nullptr),
                     1e-5));
  }
}

// What a lowering does not handle it declines (the op then runs through the counted CPU fallback);
// it must never emit a program that computes something else.
TEST(lowerings_decline_what_they_do_not_handle) {
  std::vector<uint8_t> flags{1, 0, 1, 1};
  HostTensor bools = HostTensor::of(DType::Bool, {2, 2}, flags);
  EXPECT(declines({"sum", "", {tensor_arg(), Arg{}}, {bools}, {{DType::Bool, {}}}}));
  EXPECT(declines({"mm", "", {tensor_arg(), tensor_arg()}, {bools, bools}, {{DType::Bool, {2, 2}}}}));
  EXPECT(declines({"_softmax", "", {tensor_arg(), int_arg(2), bool_arg(false)}, {f32({2, 2}, sample(4, 30))},
                   {{DType::F32, {2, 2}}}}));
  EXPECT(declines({"convolution", "",
                   {tensor_arg(), tensor_arg(), Arg{}, ints_arg({1}), ints_arg({0}), ints_arg({1}), bool_arg(false),
                    ints_arg({0}), int_arg(1)},
                   {f32({3, 4}, sample(12, 31)), f32({2, 3}, sample(6, 32))},
                   {{DType::F32, {3, 2}}}}));
}
