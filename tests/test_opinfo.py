"""PyTorch's OpInfo samples on tpu against CPU: a representative slice of op_db.

Each op in SLICE runs its float32 sample inputs (generated on the CPU, then copied to tpu, so the
data is identical) forward, and backward where it supports autograd, comparing results and
gradients with CPU at PyTorch's default tolerances (torch_tpu/tools/opinfo_runner.py lists the
rare op with a documented looser one); a floating result that differs still agrees when it is no
farther than CPU's from the result computed in float64. Forward samples must also run natively: no op of the
slice may reach the CPU fallback unless FALLBACK names it.

Two smaller slices run the checks of PyTorch's own device tests (test_ops.py) that the plain
forward cannot see: out= (each sample with out= tensors filled with values the op must overwrite:
the values, and that the op returns those tensors, in place) and non-contiguous samples (each
tensor of a sample a strided view with NaN between its elements), forward and backward.

The slice runs in strict mode only, the default mode that every other one builds on; the three
modes share the lowerings, and tests/test_ops_*.py cover the modes themselves. The full sweep of
op_db (every op, more dtypes, any mode, out= and non-contiguous samples for every op) is
`python -m torch_tpu.tools.op_coverage`, or this file with TORCH_TPU_FULL_OPINFO=1.
"""
import os

import pytest
import torch

import torch_tpu
from torch_tpu.tools import opinfo_runner as runner

# A fixed list, so CI is deterministic: every op family the lowerings cover, each with a few of
# its variants. About 3 minutes on 2 cores.
SLICE = [
    # elementwise
    "add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding", "pow", "exp", "log1p",
    "sqrt", "rsqrt", "sin", "tanh", "sigmoid", "abs", "neg", "clamp", "where", "masked_fill",
    "lerp", "addcmul", "nan_to_num", "atan2", "remainder", "eq", "logical_and",
    # special functions
    "lgamma", "polygamma.polygamma_n_2", "erfinv", "logaddexp", "sinc",
    # activations
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.leaky_relu",
    "nn.functional.hardtanh", "nn.functional.elu", "nn.functional.softplus",
    # reductions
    "sum", "mean", "amax", "argmax", "max.reduction_with_dim", "var", "std", "softmax",
    "log_softmax", "logsumexp", "cumsum", "cumprod", "linalg.vector_norm", "any", "norm", "cummax",
    "median", "nanmedian", "kthvalue",
    "nansum", "aminmax", "trace",
    # sort / indexing / shape
    "sort", "topk", "cat", "index_select", "gather", "scatter_add", "index_add", "index_put",
    "index_reduce.amax", "scatter_reduce.amin",
    "flip", "roll", "tril", "nn.functional.pad.constant", "nn.functional.pad.reflect", "take",
    "index_copy", "index_fill", "searchsorted", "isin", "histc", "nonzero", "masked_select",
    "masked_scatter", "__getitem__", "repeat_interleave", "frexp", "nn.functional.unfold",
    "nn.functional.pad.replicate",
    # matrix products
    "mm", "bmm", "addmm", "mv",
    # nn layers and losses
    "nn.functional.layer_norm", "nn.functional.group_norm", "nn.functional.batch_norm",
    "nn.functional.cross_entropy", "nn.functional.mse_loss", "nn.functional.binary_cross_entropy",
    "nn.functional.huber_loss", "nn.functional.smooth_l1_loss", "nn.functional.softshrink",
    "nn.functional.multi_margin_loss", "nn.functional.multilabel_margin_loss", "native_batch_norm",
    "_batch_norm_with_update",
    "nn.functional.embedding",
    # convolution and pooling
    "nn.functional.conv2d", "nn.functional.conv_transpose2d", "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d", "nn.functional.max_unpool2d",
    "nn.functional.adaptive_max_pool2d", "cdist", "nn.functional.pdist",
    # resampling
    "nn.functional.interpolate.nearest", "nn.functional.interpolate.bilinear",
    "nn.functional.interpolate.bicubic",
]

# Samples per op and direction in the slice: the first ones cover the common shapes, and the
# rest mostly repeat them with more arguments at the cost of a compile each.
SLICE_SAMPLES = 12

# op -> why its results or gradients differ from CPU's (each one is a bug to fix).
XFAIL = {}


def _conv_reaches_lowering():
    """PyTorch sends convolutions on out-of-tree devices to convolution_overrideable, whose
    default kernel raises until the ATen layer registers it for PrivateUse1."""
    try:
        x = torch.ones(1, 1, 3, device="tpu")
        torch.nn.functional.conv1d(x, torch.ones(1, 1, 1, device="tpu")).cpu()
        return True
    except NotImplementedError:
        return False


if not _conv_reaches_lowering():
    for _name in ("nn.functional.conv2d", "nn.functional.conv_transpose2d"):
        XFAIL[_name] = "csrc/aten does not yet route convolution_overrideable to the boxed kernel"

# op -> why its forward samples still run (partly) on the CPU.
FALLBACK = {
    "gather": "a sample with an empty uint8 index: uint8 indices are not lowered",
}

FULL = os.environ.get("TORCH_TPU_FULL_OPINFO") == "1"

_OPS = None


def _ops():
    global _OPS
    if _OPS is None:
        _OPS = {runner.op_key(op): op for op in runner.load_ops()[0]}
    return _OPS


def _params(names=SLICE, xfail=XFAIL, applies=lambda op: True):
    names = sorted(n for n, op in _ops().items() if applies(op)) if FULL else names
    params = []
    for name in names:
        marks = [pytest.mark.xfail(reason=xfail[name], strict=not FULL)] if name in xfail else []
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.fixture(autouse=True)
def strict_mode():
    torch_tpu.set_fallback_warnings(False)
    with torch_tpu.eager_mode("strict"):
        yield
    torch.tpu.synchronize()
    torch_tpu.set_fallback_warnings(True)


def _check(outcome, what):
    assert outcome.total > 0, f"{what}: no sample ran (the CPU rejected all of them)"
    assert not outcome.failures, (f"{what}: {outcome.total - outcome.passed} of {outcome.total} "
                                  f"samples differ from CPU, first: {outcome.failures[0]}")


@pytest.mark.parametrize("name", _params())
def test_opinfo(name):
    op = _ops()[name]
    limit = None if FULL else SLICE_SAMPLES
    forward = runner.run_forward(op, torch.float32, limit)
    _check(forward, "forward")
    if not FULL and name not in FALLBACK:
        assert not forward.fallbacks, f"ran on the CPU: {runner.fmt_fallbacks(forward.fallbacks)}"
    if runner.supports_backward(op):
        backward = runner.run_backward(op, torch.float32, limit)
        if backward.total or backward.skipped:
            _check(backward, "backward")


# out= and non-contiguous samples, float32: a few ops of each kind (elementwise, reductions,
# results of several tensors or of data-dependent size, indexing, matrix products, nn layers).
OUT_SLICE = ["add", "mul", "clamp", "where", "exp", "cumsum", "amax", "max.reduction_with_dim", "aminmax",
             "sort", "topk", "frexp", "cat", "index_select", "gather", "masked_select", "nonzero", "mm",
             "addmm", "bmm"]
NONCONTIGUOUS_SLICE = ["add", "mul", "exp", "where", "sum", "mean", "softmax", "cumsum", "sort", "cat",
                       "index_select", "gather", "scatter_add", "masked_fill", "tril", "mm", "bmm", "addmm",
                       "nn.functional.layer_norm", "nn.functional.conv2d", "nn.functional.max_pool2d",
                       "nn.functional.embedding", "nn.functional.cross_entropy"]
SIDE_SAMPLES = 6

# op -> why its out= results differ from CPU's (each one is a bug to fix).
OUT_XFAIL = {}
# op -> why its non-contiguous samples differ from CPU's.
NONCONTIGUOUS_XFAIL = {}


@pytest.mark.parametrize("name", _params(OUT_SLICE, OUT_XFAIL, lambda op: op.supports_out))
def test_opinfo_out(name):
    outcome = runner.run_out(_ops()[name], torch.float32, None if FULL else SIDE_SAMPLES)
    _check(outcome, "out=")


@pytest.mark.parametrize("name", _params(NONCONTIGUOUS_SLICE, NONCONTIGUOUS_XFAIL))
def test_opinfo_noncontiguous(name):
    op = _ops()[name]
    limit = None if FULL else SIDE_SAMPLES
    _check(runner.run_forward(op, torch.float32, limit, noncontiguous=True), "non-contiguous forward")
    if runner.supports_backward(op):
        backward = runner.run_backward(op, torch.float32, limit, noncontiguous=True)
        if backward.total or backward.skipped:
            _check(backward, "non-contiguous backward")


# The other dtypes on ops whose kernels differ by dtype class: integer arithmetic and its
# wrap-around, bool logic, f16 / bf16 rounding, and the dtype rules of reductions, sorting and
# indexing. Forward in every dtype; backward too in f16 and bf16.
DTYPES = [torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
          torch.bool]
DTYPE_SLICE = ["add", "mul", "sub", "div.floor_rounding", "remainder", "abs", "neg", "clamp", "where",
               "eq", "maximum", "sum", "prod", "cumsum", "amax", "argmax", "sort", "topk", "cat",
               "index_select", "gather", "scatter_add", "masked_fill", "flip", "tril", "logical_and",
               "logical_not", "exp", "tanh", "softmax", "mm", "nn.functional.relu", "nn.functional.layer_norm",
               "nn.functional.gelu", "nn.functional.cross_entropy", "nn.functional.group_norm"]
DTYPE_SAMPLES = 6

# (op, dtype) -> why it differs from CPU.
DTYPE_XFAIL = {}


def _dtype_params():
    params = []
    for name in DTYPE_SLICE:
        supported = _ops()[name].supported_dtypes("cpu")
        for dtype in DTYPES:
            if dtype not in supported:
                continue
            key = (name, str(dtype).removeprefix("torch."))
            marks = [pytest.mark.xfail(reason=DTYPE_XFAIL[key], strict=True)] if key in DTYPE_XFAIL else []
            params.append(pytest.param(name, dtype, marks=marks, id=f"{key[0]}-{key[1]}"))
    return params


@pytest.mark.parametrize("name, dtype", _dtype_params())
def test_opinfo_dtypes(name, dtype):
    op = _ops()[name]
    outcomes = [(runner.run_forward(op, dtype, DTYPE_SAMPLES), f"forward in {dtype}")]
    if dtype in runner.REDUCED_PRECISION and runner.supports_backward(op, dtype):
        outcomes.append((runner.run_backward(op, dtype, DTYPE_SAMPLES), f"backward in {dtype}"))
    for outcome, what in outcomes:
        _check(outcome, what)
        if name not in FALLBACK:
            assert not outcome.fallbacks, f"{what} ran on the CPU: {runner.fmt_fallbacks(outcome.fallbacks)}"


def test_slice_names_exist():
    """A renamed OpInfo must not silently shrink the slice."""
    names = SLICE + DTYPE_SLICE + OUT_SLICE + NONCONTIGUOUS_SLICE
    missing = [n for n in names + list(XFAIL) + list(FALLBACK) + list(OUT_XFAIL) + list(NONCONTIGUOUS_XFAIL)
               if n not in _ops()]
    assert not missing, missing
    assert all(_ops()[n].supports_out for n in OUT_SLICE)
