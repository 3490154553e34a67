// The boxed kernel behind every ATen op without a dedicated tpu kernel (lowered_dispatch.cpp).
#pragma once

namespace tpu::aten {

// Routes structured ops' functional and in-place forms that have a lowering to the boxed kernel
// instead of PyTorch's allocate-then-out= wrapper. Called once, when the Python module loads:
// after every kernel registered at static initialisation, so that none is overridden.
void register_structured_functional_kernels();

}  // namespace tpu::aten
