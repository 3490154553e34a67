// Random number generators for tpu (at::Generator for PrivateUse1): one default generator per
// device, behind torch.manual_seed and torch.tpu.manual_seed, and new ones for torch.Generator.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <utility>

namespace tpu::aten {

at::Generator& default_generator(int device);
at::Generator new_generator(int device);
void seed_all(uint64_t seed);  // every default generator, and those created later

// The generator's (seed, offset) for the next random program, with the offset advanced by
// `increment`; `generator` if given, else `device`'s default one.
std::pair<uint64_t, uint64_t> next_philox(const c10::optional<at::Generator>& generator, int device,
                                          uint64_t increment);

}  // namespace tpu::aten
