"""Meta (shape) functions PyTorch lacks, or gets wrong, for ops that its non-CPU devices reach.

The tpu device computes every result's shape with the op's meta function before lowering it;
ATen's GRU takes the fused cell kernels on any device but the CPU, and those two ops ship no meta
function, so without these the GRU would run on the CPU (and torch.compile could not trace it).
_torch_patches registers them, and relaxes PyTorch's meta function of _grouped_mm.
"""
import torch


def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    torch._check(input_gates.dim() == 2 and input_gates.shape == hidden_gates.shape,
                 lambda: f"_thnn_fused_gru_cell: gates must be 2-D and alike, got {tuple(input_gates.shape)} "
                         f"and {tuple(hidden_gates.shape)}")
    torch._check(input_gates.size(1) == 3 * hx.size(-1),
                 lambda: f"_thnn_fused_gru_cell: {input_gates.size(1)} gates for hidden size {hx.size(-1)}")
    workspace = input_gates.new_empty((input_gates.size(0), 5 * hx.size(-1)))
    return torch.empty_like(hx, memory_format=torch.contiguous_format), workspace


def fused_gru_cell_backward(grad_hy, workspace, has_bias):
    batch, hidden = grad_hy.shape
    gates = grad_hy.new_empty((batch, 3 * hidden))
    bias = grad_hy.new_empty((3 * hidden,) if has_bias else (0,))
    return gates, torch.empty_like(gates), torch.empty_like(grad_hy), bias, torch.empty_like(bias)


def grouped_mm_for_tpu(original):
    """PyTorch's meta function for _grouped_mm accepts only bfloat16, CUDA's restriction; the tpu
    device runs it (its composite kernel) in any floating dtype, and Hugging Face's MoE layers
    call it in float32 on tpu, also under torch.compile, whose fake tensors reach this check."""

    def meta(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
        # Inside a fake-tensor kernel the tensors report the meta device, not tpu. CPU accepts
        # these dtypes too, so only CUDA's path keeps the bfloat16 restriction.
        if (mat_a.device.type in ("tpu", "meta") and mat_a.dtype == mat_b.dtype
                and mat_a.dtype in (torch.float32, torch.float16)):
            result = original(mat_a.to(torch.bfloat16), mat_b.to(torch.bfloat16), offs,
                              None if bias is None else bias.to(torch.bfloat16), out_dtype)
            return result if out_dtype is not None else result.to(mat_a.dtype)
        return original(mat_a, mat_b, offs, bias, out_dtype)

    return meta

