"""Convolution and pooling lowerings against CPU, forward and backward, in every eager mode.

The OpInfo slice (test_opinfo.py) covers these ops with PyTorch's own samples; these tests pin the
argument combinations real models use (strides, padding, dilation, groups, transposed, ceil mode)
and check that nothing runs on the CPU.
"""
import pytest
import torch
import torch.nn.functional as F


def same_grads(fn, *inputs, atol=None, rtol=None):
    """fn's result and the gradients of all inputs agree on CPU and tpu."""
    cpu = [x.detach().clone().requires_grad_(True) for x in inputs]
    tpu = [x.detach().to("tpu").requires_grad_(True) for x in inputs]
    expected, actual = fn(*cpu), fn(*tpu)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e, atol=atol, rtol=rtol, equal_nan=True)
    seed = torch.randn_like(expected[0])
    expected[0].backward(seed)
    actual[0].backward(seed.to("tpu"))
    for c, t in zip(cpu, tpu):
        torch.testing.assert_close(t.grad.cpu(), c.grad, atol=atol, rtol=rtol)


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


r = torch.randn

CONVS = {
    "2d_stride_pad_dilation": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=2),
                               (2, 3, 9, 8), (4, 3, 3, 2), (4,)),
    "2d_groups": (lambda x, w: F.conv2d(x, w, stride=(2, 3), padding=(1, 0), groups=3),
                  (2, 6, 9, 8), (9, 2, 3, 2)),
    "2d_unbatched": (lambda x, w: F.conv2d(x, w), (3, 8, 8), (4, 3, 3, 3)),
    "1d_groups": (lambda x, w: F.conv1d(x, w, stride=3, padding=2, groups=2), (2, 4, 17), (6, 2, 4)),
    "3d": (lambda x, w: F.conv3d(x, w, stride=2, padding=1), (1, 2, 5, 6, 7), (3, 2, 3, 3, 3)),
    "transposed_2d": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1,
                                                         output_padding=1),
                      (2, 4, 5, 6), (4, 3, 3, 3), (3,)),
    "transposed_2d_groups": (lambda x, w: F.conv_transpose2d(x, w, stride=(2, 3), padding=(1, 2),
                                                             dilation=(2, 1), groups=2),
                             (2, 4, 5, 6), (4, 3, 3, 3)),
    "transposed_3d": (lambda x, w: F.conv_transpose3d(x, w, stride=2), (1, 2, 3, 4, 3),
                      (2, 3, 2, 2, 2)),
}


@pytest.mark.parametrize("case", sorted(CONVS))
def test_convolution(mode, no_fallback, case):
    fn, *shapes = CONVS[case]
    same_grads(fn, *(r(*s) for s in shapes))


POOLS = {
    "max2d": lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
    "max2d_dilation_ceil": lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True,
                                                  return_indices=True),
    "max3d": lambda x: F.max_pool3d(x, 2, 1, return_indices=True),
    "avg2d_ceil_exclude_pad": lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                                     count_include_pad=False),
    "avg2d_divisor": lambda x: F.avg_pool2d(x, (2, 3), 2, 1, ceil_mode=True, divisor_override=5),
    "avg3d": lambda x: F.avg_pool3d(x, 2),
    "adaptive_avg2d_unbatched_upsampling": lambda x: F.adaptive_avg_pool2d(x[0], (5, 11)),
    "adaptive_avg3d": lambda x: F.adaptive_avg_pool3d(x, (2, 3, 5)),
}


@pytest.mark.parametrize("case", sorted(POOLS))
def test_pooling(mode, no_fallback, case):
    same_grads(POOLS[case], r(2, 3, 9, 8))


def test_max_pool_nan_and_ties_pick_like_cpu(mode, no_fallback):
    x = torch.tensor([[[[1.0, 1.0, 0.0], [float("nan"), 2.0, 2.0], [3.0, 3.0, -1.0]]]])
    for args in [(2, 1), (3, 1, 1), (2, 2, 0, 1, True)]:
        expected = F.max_pool2d(x, *args, return_indices=True)
        actual = F.max_pool2d(x.to("tpu"), *args, return_indices=True)
        torch.testing.assert_close(actual[0].cpu(), expected[0], equal_nan=True)
        torch.testing.assert_close(actual[1].cpu(), expected[1])
