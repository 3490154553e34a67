"""torch.nn.attention.flex_attention on tpu.

FlexAttention's eager path and its torch.compile path both end in the flex_attention higher-order
op, whose CompositeExplicitAutograd implementation (PyTorch's dense one: scores, score_mod and
mask_mod applied over index grids, safe softmax, then the product with V) and whose backward are
made of ATen ops. On tpu those ops are lowered like any others: strict runs them as per-op
programs, defer-and-fuse records them into the surrounding graph, and torch.compile(backend="tpu")
replays them into the graph's one program, so the whole attention, masks and score_mod included,
is one XLA computation with no fallback. XLA fuses the score_mod into the scores' producer
itself, which is what Inductor's FlexAttention template does by hand on CUDA.

Two things in PyTorch stand in the way and are handled here: the device allow-list in
flex_attention's input checks (a patch, see _torch_patches.flex_attention_accepts_tpu) and the
missing autocast rule for PrivateUse1 (a kernel registered on the op for AutocastPrivateUse1, the
registration higher-order ops offer).
"""
import torch


def accepting_tpu(original):
    """flex_attention's _validate_device(query, key, value), passing tpu tensors: tpu runs the
    dense implementation forward and backward, so it needs neither the allow-list nor CPU's
    refusal of backward."""
    def validate_device(query, key, value, *args, **kwargs):
        if query.device.type == "tpu":
            return None
        return original(query, key, value, *args, **kwargs)

    return validate_device


def register_autocast(hop_module):
    """flex_attention under torch.autocast("tpu"): cast Q, K and V to the autocast dtype, as
    PyTorch's CUDA and CPU rules do, then run the op with tpu's autocast key excluded. Without
    it the op has no kernel for AutocastPrivateUse1 and raises inside autocast regions."""
    from torch._C import DispatchKey

    op = hop_module.flex_attention
    if DispatchKey.AutocastPrivateUse1 in op.py_kernels:
        return

    def cast(tensor, dtype):
        return tensor.to(dtype) if tensor.is_floating_point() and tensor.dtype != dtype else tensor

    @op.py_impl(DispatchKey.AutocastPrivateUse1)
    def flex_attention_autocast_tpu(query, key, value, score_mod, block_mask, scale, kernel_options,
                                    score_mod_other_buffers=(), mask_mod_other_buffers=()):
        dtype = torch.get_autocast_dtype(query.device.type)
        query, key, value = (cast(t, dtype) for t in (query, key, value))
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(DispatchKey.AutocastPrivateUse1)):
            return op(query, key, value, score_mod, block_mask, scale, kernel_options,
                      score_mod_other_buffers, mask_mod_other_buffers)
