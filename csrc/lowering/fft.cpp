// Fourier transforms on stablehlo.fft: _fft_r2c, _fft_c2r and _fft_c2c, the three ops every
// torch.fft function (and stft / istft) reduces to, forward and backward.
//
// stablehlo.fft transforms the trailing dims (one to three of them), so the transformed dims are
// moved last and back. XLA's inverse transforms divide by n where PyTorch's ops are unnormalized;
// `normalization` says which factor PyTorch's result carries: 0 none, 1 1/sqrt(n), 2 1/n.
#include <cmath>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;

struct Moved {
  Value value;
  Dims permutation;  // of the original dims: the untransformed ones, then the transformed ones
  Dims lengths;      // the transformed dims' sizes, in order
};

// The op's tensor argument with its transformed dims (args[1]) moved last, in the given order;
// Unsupported unless it is complex (`complex_input`) or float32 / float64.
Moved transformed_dims_last(Context& ctx, bool complex_input) {
  Builder& b = ctx.b;
  Value x = ctx.tensor(0);
  DType dtype = b.dtype(x);
  if (complex_input ? !is_complex(dtype) : dtype != DType::F32 && dtype != DType::F64) {
    throw Unsupported(ctx.op + " of a " + mlir_name(dtype) + " tensor");
  }
  int64_t rank = b.rank(x);
  const Dims& given = ctx.arg(1).ints;
  if (given.empty() || given.size() > 3) throw Unsupported("a transform over " + std::to_string(given.size()) + " dims");
  std::vector<bool> transformed(rank, false);
  Moved moved;
  Dims dims;
  for (int64_t d : given) {
    int64_t w = wrap_dim(d, rank);
    if (transformed[w]) throw Unsupported("a dim transformed twice");
    transformed[w] = true;
    dims.push_back(w);
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (!transformed[d]) moved.permutation.push_back(d);
  }
  for (int64_t d : dims) {
    moved.permutation.push_back(d);
    moved.lengths.push_back(b.dims(x)[d]);
  }
  moved.value = b.transpose(x, moved.permutation);
  return moved;
}

Value fft(Builder& b, Value x, const char* type, const Dims& lengths, DType result_dtype, const Dims& result_dims) {
  std::string attributes = std::string("fft_type = #stablehlo<fft_type ") + type + ">, fft_length = " + hlo::i64_array(lengths);
  return b.op1("stablehlo.fft", {x}, TensorType{result_dtype, result_dims}, attributes);
}

// The factor PyTorch's result carries for a transform of `n` points; `xla_inverse`: XLA's result
// already carries 1/n.
Value normalized(Context& ctx, Value x, int64_t n, bool xla_inverse) {
  int64_t mode = ctx.int_arg(2, 0);
  if (mode < 0 || mode > 2) throw Unsupported("normalization mode " + std::to_string(mode));
  double factor = mode == 0 ? 1.0 : mode == 1 ? 1.0 / std::sqrt(static_cast<double>(n)) : 1.0 / n;
  if (xla_inverse) factor *= n;
  if (factor == 1.0) return x;
  return ctx.b.mul(x, ctx.b.full(factor, ctx.b.type(x)));
}

// The op's result: the transform `y` of `m`'s points, normalized, its dims moved back.
std::vector<Value> transformed(Context& ctx, const Moved& m, Value y, bool xla_inverse) {
  y = normalized(ctx, y, numel(m.lengths), xla_inverse);
  Dims inverse(m.permutation.size());
  for (size_t i = 0; i < m.permutation.size(); ++i) inverse[m.permutation[i]] = static_cast<int64_t>(i);
  return {as_output(ctx, ctx.b.transpose(y, inverse))};
}

// _fft_r2c(self, dim, normalization, onesided): the last transformed dim keeps n / 2 + 1 points
// when onesided.
std::vector<Value> lower_fft_r2c(Context& ctx) {
  Builder& b = ctx.b;
  Moved m = transformed_dims_last(ctx, false);
  DType real = b.dtype(m.value);
  Dims dims = b.dims(m.value);
  Value y;
  if (ctx.bool_arg(3, true)) {
    dims.back() = m.lengths.back() / 2 + 1;
    y = fft(b, m.value, "RFFT", m.lengths, complex_dtype_of_parts(real), dims);
  } else {
    y = fft(b, b.convert(m.value, complex_dtype_of_parts(real)), "FFT", m.lengths, complex_dtype_of_parts(real), dims);
  }
  return transformed(ctx, m, y, /*xla_inverse=*/false);
}
TPU_LOWERING("_fft_r2c", lower_fft_r2c);

// _fft_c2c(self, dim, normalization, forward)
std::vector<Value> lower_fft_c2c(Context& ctx) {
  Builder& b = ctx.b;
  Moved m = transformed_dims_last(ctx, true);
  bool forward = ctx.bool_arg(3, true);
  Value y = fft(b, m.value, forward ? "FFT" : "IFFT", m.lengths, b.dtype(m.value), b.dims(m.value));
  return transformed(ctx, m, y, /*xla_inverse=*/!forward);
}
TPU_LOWERING("_fft_c2c", lower_fft_c2c);

// _fft_c2r(self, dim, normalization, last_dim_size): the inverse of a onesided transform, whose
// last transformed dim holds last_dim_size / 2 + 1 points.
std::vector<Value> lower_fft_c2r(Context& ctx) {
  Builder& b = ctx.b;
  Moved m = transformed_dims_last(ctx, true);
  int64_t last = ctx.int_arg(3, 0);
  if (last < 1 || m.lengths.back() != last / 2 + 1) throw Unsupported("a last dim other than last_dim_size / 2 + 1");
  m.lengths.back() = last;
  Dims dims = b.dims(m.value);
  dims.back() = last;
  Value y = fft(b, m.value, "IRFFT", m.lengths, complex_part_dtype(b.dtype(m.value)), dims);
  return transformed(ctx, m, y, /*xla_inverse=*/true);
}
TPU_LOWERING("_fft_c2r", lower_fft_c2r);

}  // namespace
}  // namespace tpu::lowering
