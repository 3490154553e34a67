"""Meta (shape) functions PyTorch lacks for ops that its non-CPU devices reach.

The tpu device computes every result's shape with the op's meta function before lowering it;
ATen's GRU takes the fused cell kernels on any device but the CPU, and those two ops ship no meta
function, so without these the GRU would run on the CPU (and torch.compile could not trace it).
"""
import torch

_library = torch.library.Library("aten", "IMPL")


def _fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    torch._check(input_gates.dim() == 2 and input_gates.shape == hidden_gates.shape,
                 lambda: f"_thnn_fused_gru_cell: gates must be 2-D and alike, got {tuple(input_gates.shape)} "
                         f"and {tuple(hidden_gates.shape)}")
    torch._check(input_gates.size(1) == 3 * hx.size(-1),
                 lambda: f"_thnn_fused_gru_cell: {input_gates.size(1)} gates for hidden size {hx.size(-1)}")
    workspace = input_gates.new_empty((input_gates.size(0), 5 * hx.size(-1)))
    return torch.empty_like(hx, memory_format=torch.contiguous_format), workspace


def _fused_gru_cell_backward(grad_hy, workspace, has_bias):
    batch, hidden = grad_hy.shape
    gates = grad_hy.new_empty((batch, 3 * hidden))
    bias = grad_hy.new_empty((3 * hidden,) if has_bias else (0,))
    return gates, torch.empty_like(gates), torch.empty_like(grad_hy), bias, torch.empty_like(bias)


def register():
    for name, fn in (("_thnn_fused_gru_cell", _fused_gru_cell),
                     ("_thnn_fused_gru_cell_backward", _fused_gru_cell_backward)):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta"):
            _library.impl(name, fn, "Meta")
