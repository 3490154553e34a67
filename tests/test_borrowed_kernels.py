"""Ops with plain tensor and number arguments take them unboxed and borrowed
(csrc/aten/borrowed_kernels.cpp): the kernel must never change a tensor's reference count,
whichever way the op goes (lowered, CPU fallback, an error), and must give CPU's results."""
import gc
import sys
import weakref

import pytest
import torch

import torch_tpu

from conftest import assert_same_as_cpu


def test_the_common_training_ops_have_a_borrowing_kernel():
    for name in ("aten::add.Tensor", "aten::mul_.Tensor", "aten::addcmul_", "aten::sqrt", "aten::mm",
                 "aten::addmm", "aten::lerp_.Scalar", "aten::div.Tensor"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"), name


@pytest.mark.parametrize("fn", [
    lambda x, y: x + y,
    lambda x, y: x - 2.5 * y,
    lambda x, y: torch.add(x, y, alpha=3),
    lambda x, y: x * 2,
    lambda x, y: torch.sqrt(x.abs()),
    lambda x, y: torch.where(x > 0, x, y),
    lambda x, y: torch.addmm(x[:3, :3], x[:3], y[:3].t(), beta=0.5, alpha=2),
    lambda x, y: torch.softmax(x, 1),
    lambda x, y: torch.nn.functional.hardtanh(x, -0.5, 0.5),
], ids=["add", "sub_alpha", "add_alpha", "mul_scalar", "sqrt", "where", "addmm", "softmax", "hardtanh"])
def test_functional_ops_match_cpu(mode, fn):
    torch.manual_seed(0)
    assert_same_as_cpu(fn, torch.randn(4, 5), torch.randn(4, 5))


@pytest.mark.parametrize("fn", [
    lambda x, y: x.add_(y, alpha=2),
    lambda x, y: x.mul_(y),
    lambda x, y: x.mul_(3),
    lambda x, y: x.addcmul_(y, y, value=0.5),
    lambda x, y: x.addcdiv_(y, y.abs() + 1, value=-2),
    lambda x, y: x.lerp_(y, 0.25),
    lambda x, y: x.relu_(),
    lambda x, y: x[1:, ::2].add_(y[1:, ::2]),
], ids=["add_", "mul_", "mul_scalar_", "addcmul_", "addcdiv_", "lerp_", "relu_", "add_view_"])
def test_in_place_ops_write_and_return_their_argument(mode, fn):
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    tx, ty = x.to("tpu"), y.to("tpu")
    expected, returned = fn(x, y), fn(tx, ty)
    # What comes back is the argument (or, for the view case, the view) over the written storage.
    assert returned.untyped_storage().data_ptr() == tx.untyped_storage().data_ptr()
    torch.testing.assert_close(returned.cpu(), expected)
    torch.testing.assert_close(tx.cpu(), x)


def test_an_in_place_op_returns_the_very_tensor_it_was_called_on(mode):
    x = torch.randn(5).to("tpu")
    assert x.add_(1) is x
    assert x.mul_(torch.ones(5, device="tpu")) is x


def test_reference_counts_are_unchanged_by_lowered_ops(mode):
    x, y = torch.randn(8).to("tpu"), torch.randn(8).to("tpu")
    before = (sys.getrefcount(x), sys.getrefcount(y))
    for _ in range(50):
        z = x + y
        x.mul_(1.0)
        torch.addcmul(x, x, y)
    del z
    torch.tpu.synchronize()
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before


def test_tensors_are_freed_once_python_drops_them(mode):
    x, y = torch.randn(8).to("tpu"), torch.randn(8).to("tpu")
    z = (x + y).mul_(2)
    watched = weakref.ref(z)
    torch.tpu.synchronize()
    del z
    gc.collect()
    assert watched() is None
    # The arguments outlive the op, and hold their values.
    torch.testing.assert_close(x.cpu() + y.cpu(), (x + y).cpu())


def test_an_op_the_lowering_declines_runs_on_the_cpu_with_owned_arguments(mode):
    # A complex number against a real tensor: the lowered path declines, the CPU decides.
    x = torch.tensor([1.0, 2.0])
    tx = x.to("tpu")
    before = sys.getrefcount(tx)
    torch.testing.assert_close((tx == 1j).cpu(), x == 1j)
    torch.testing.assert_close(tx.mul(2j).cpu(), x.mul(2j))
    torch.tpu.synchronize()
    assert sys.getrefcount(tx) == before


def test_errors_match_cpu_and_leave_reference_counts_alone(mode):
    x, y = torch.randn(3).to("tpu"), torch.randn(4).to("tpu")
    before = (sys.getrefcount(x), sys.getrefcount(y))
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.randn(3) + torch.randn(4)
    for _ in range(3):
        with pytest.raises(RuntimeError, match="must match the size"):
            x + y
        with pytest.raises(RuntimeError, match="must match the size"):
            x.add_(y)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + torch.randn(3)
    torch.tpu.synchronize()
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before


def test_autograd_through_borrowing_kernels_matches_cpu(mode):
    torch.manual_seed(0)
    a, b = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    ta, tb = a.detach().to("tpu").requires_grad_(), b.detach().to("tpu").requires_grad_()
    for u, v in ((a, b), (ta, tb)):
        (torch.mm(u, v).sqrt().mul(2) + u * v).sum().backward()
    torch.testing.assert_close(ta.grad.cpu(), a.grad, equal_nan=True)
    torch.testing.assert_close(tb.grad.cpu(), b.grad, equal_nan=True)


def test_ops_reach_the_lowering_not_the_fallback(mode, no_fallback):
    x, y = torch.randn(4).to("tpu"), torch.randn(4).to("tpu")
    x.add_(y).mul_(y).addcmul_(y, y)
    (x + y * 2).sqrt()
    torch.tpu.synchronize()
