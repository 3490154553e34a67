// randperm and multinomial on the device, composed from ops that have lowerings (random_, sort,
// exponential_, topk, cumsum), so they draw from the tpu generator that torch.tpu.manual_seed or
// a torch.Generator("tpu") seeds. Through the CPU fallback they could not: the CPU kernels
// refuse a tpu generator, and without one they would use the CPU's stream instead of the
// device's, so torch.tpu.manual_seed would not make them reproducible.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <limits>

#include "aten/device_checks.h"

namespace {

// A uniformly random permutation is the order that sorts i.i.d. uniform keys. 64-bit keys make a
// tie (which the stable sort would break by index, a bias) negligible even for large n.
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> generator, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  // The last index must be representable, exactly also in a floating result type.
  if (n > 0) {
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "randperm", [&] {
      int64_t largest = std::numeric_limits<scalar_t>::is_integer
                            ? static_cast<int64_t>(std::numeric_limits<scalar_t>::max())
                            : (int64_t{1} << std::numeric_limits<scalar_t>::digits);
      TORCH_CHECK(n - 1 <= largest, "n is too large for result tensor type: '", out.toString(), "'");
    });
  }
  out.resize_({n});
  if (n == 0) return out;
  at::Tensor keys = at::empty({n}, out.options().dtype(at::kLong));
  keys.random_(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), generator);
  at::Tensor order = std::get<1>(keys.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  out.copy_(order);
  return out;
}

at::Tensor multinomial_draw(const at::Tensor& self, int64_t num_samples, bool replacement,
                       std::optional<at::Generator> generator) {
  TORCH_CHECK(self.dim() == 1 || self.dim() == 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(num_samples > 0, "cannot sample n_sample <= 0 samples");
  int64_t categories = self.size(-1);
  TORCH_CHECK(replacement || num_samples <= categories,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  at::Tensor probs = self.dim() == 1 ? self.unsqueeze(0) : self;
  // CPU checks the values on the host; reading them here would make every call (every token of
  // generate()) wait for the device, so the device computes one flag per check and the next host
  // read raises (debug mode: this call).
  // CPU's messages differ between its two kernels (with replacement and more than one sample,
  // or not); a NaN fails "entry >= 0" in the first.
  if (probs.numel() > 0) {
    if (replacement && num_samples > 1) {
      tpu::aten::note_device_check(probs.ge(0).logical_not().any(), "aten::multinomial",
                                   "invalid multinomial distribution (encountering probability entry < 0)");
      tpu::aten::note_device_check(probs.isinf().any(), "aten::multinomial",
                                   "invalid multinomial distribution (encountering probability entry = "
                                   "infinity or NaN)");
    } else {
      tpu::aten::note_device_check((probs.isfinite().logical_not() | probs.lt(0)).any(), "aten::multinomial",
                                   "probability tensor contains either `inf`, `nan` or element < 0");
    }
    tpu::aten::note_device_check(probs.sum(-1).le(0).any(), "aten::multinomial",
                                 "invalid multinomial distribution (sum of probabilities <= 0)");
  }
  at::Tensor samples;
  if (!replacement) {
    // Exponential race: category i finishes at E_i / p_i with E_i ~ Exp(1); the first k to
    // finish are a draw of k categories without replacement, in order of drawing.
    at::Tensor races = at::empty_like(probs).exponential_(1.0, generator);
    samples = std::get<1>((probs / races).topk(num_samples, -1, /*largest=*/true, /*sorted=*/true));
  } else {
    // Inverse CDF: a draw u in [0, total) picks the number of cumulative sums <= u. The
    // comparison table has rows * num_samples * categories entries, fine for sampling tokens.
    at::Tensor cdf = probs.cumsum(-1);
    at::Tensor u = at::empty({probs.size(0), num_samples}, probs.options()).uniform_(0, 1, generator);
    u = u * cdf.narrow(-1, categories - 1, 1);
    samples = (u.unsqueeze(-1) >= cdf.unsqueeze(-2)).sum(-1).clamp_max(categories - 1);
  }
  return self.dim() == 1 ? samples.squeeze(0) : samples;
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t num_samples, bool replacement,
                            std::optional<at::Generator> generator, at::Tensor& out) {
  at::Tensor samples = multinomial_draw(self, num_samples, replacement, generator);
  out.resize_(samples.sizes());
  out.copy_(samples);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("randperm.generator_out", TORCH_FN(randperm_out));
  m.impl("multinomial", TORCH_FN(multinomial_draw));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));
}

}  // namespace
