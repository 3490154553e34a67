"""Complex tensors never give a silently wrong answer: an op whose lowering would drop the
imaginary part takes the CPU path, and conjugate / negative views (bits PyTorch sets instead of
copying) are resolved before a lowering reads them. Compared with CPU in every mode."""
import pytest
import torch

from conftest import to_cpu


def complex_sample(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(*shape, generator=generator), torch.randn(*shape, generator=generator))


@pytest.mark.parametrize("fn", [torch.abs, torch.angle, torch.isnan, torch.isfinite, torch.sgn,
                                lambda z: z.real * 2, lambda z: z.imag + 1],
                         ids=["abs", "angle", "isnan", "isfinite", "sgn", "real", "imag"])
def test_complex_to_real_ops_match_cpu(mode, fn):
    z = complex_sample(3, 4)
    torch.testing.assert_close(to_cpu(fn(z.to("tpu"))), fn(z))


@pytest.mark.parametrize("fn", [
    lambda a, b: a.conj() @ b,
    lambda a, b: a.mT.conj() @ b.mT,
    lambda a, b: a.conj() * b,
    lambda a, b: torch.cov(a),
    lambda a, b: torch._neg_view(a) + b,
    lambda a, b: torch.cat([a.conj(), b]),
], ids=["conj_matmul", "adjoint_matmul", "conj_mul", "cov", "neg_view_add", "conj_cat"])
def test_conjugate_and_negative_views_are_read_resolved(mode, fn):
    a, b = complex_sample(4, 4, seed=1), complex_sample(4, 4, seed=2)
    torch.testing.assert_close(to_cpu(fn(a.to("tpu"), b.to("tpu"))), fn(a, b))


def test_writes_through_a_conjugate_view_match_cpu(mode):
    a = complex_sample(5)
    t = a.to("tpu")
    a.conj().mul_(2)
    t.conj().mul_(2)
    torch.testing.assert_close(t.cpu(), a)
