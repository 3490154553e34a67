"""Complex tensors never give a silently wrong answer: an op whose lowering would drop the
imaginary part takes the CPU path, and conjugate / negative views (bits PyTorch sets instead of
copying) are resolved before a lowering reads them. Compared with CPU in every mode."""
import pytest
import torch

from conftest import to_cpu


def complex_sample(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(*shape, generator=generator), torch.randn(*shape, generator=generator))


@pytest.mark.parametrize("fn", [torch.abs, torch.angle, torch.isnan, torch.isinf, torch.isfinite, torch.sgn,
                                lambda z: z.real * 2, lambda z: z.imag + 1, lambda z: z.sum(0), torch.sum,
                                lambda z: z.mean(1), lambda z: z.prod(-1)],
                         ids=["abs", "angle", "isnan", "isinf", "isfinite", "sgn", "real", "imag", "sum_dim", "sum",
                              "mean", "prod"])
def test_complex_to_real_ops_and_reductions_match_cpu(mode, fn, no_fallback):
    z = complex_sample(3, 4)
    z[0, 1] = complex(float("nan"), 1.0)
    z[1, 2] = complex(2.0, float("-inf"))
    z[2, 3] = 0
    torch.testing.assert_close(to_cpu(fn(z.to("tpu"))), fn(z), equal_nan=True)


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


COMPLEX_ARITHMETIC = {
    "mul": lambda a, b, r: a * b,
    "add": lambda a, b, r: a + b,
    "sub_alpha": lambda a, b, r: torch.sub(a, b, alpha=2.5),
    "times_real": lambda a, b, r: a * r,
    "real_plus": lambda a, b, r: r + a,
    "numbers": lambda a, b, r: a * 3 - 1.5,
    "neg": lambda a, b, r: -a,
    "conj_physical": lambda a, b, r: torch.conj_physical(a),
    "conj_physical_of_real": lambda a, b, r: torch.conj_physical(r),
    "times_conj_view": lambda a, b, r: a * b.conj(),
    "mul_": lambda a, b, r: a.clone().mul_(b),
    "conj_physical_": lambda a, b, r: a.clone().conj_physical_(),
    "div": lambda a, b, r: a / b,
    "div_by_real": lambda a, b, r: a / r,
    "real_by_complex": lambda a, b, r: r / a,
    "sgn": lambda a, b, r: torch.sgn(a * (r > 0)),  # zeros among the values
    # Complex Python numbers are runtime parameters, as real ones are.
    "times_i": lambda a, b, r: a * 1j,
    "real_times_number": lambda a, b, r: r * (2 - 1j),
    "complex_alpha": lambda a, b, r: torch.add(a, b, alpha=2 - 1j),
    "where": lambda a, b, r: torch.where(r > 0, a, b),
    "where_number": lambda a, b, r: torch.where(r > 0, a, 3j),
    "masked_fill_number": lambda a, b, r: a.masked_fill(r > 0, 0.5 - 2j),
}


@pytest.mark.parametrize("name", list(COMPLEX_ARITHMETIC))
def test_complex_arithmetic_runs_on_the_device(mode, name, no_fallback):
    a, b = complex_sample(5, 3, seed=3), complex_sample(3, seed=4)
    r = torch.randn(5, 3, generator=torch.Generator().manual_seed(5))
    fn = COMPLEX_ARITHMETIC[name]
    want = fn(a, b, r)
    got = fn(a.to("tpu"), b.to("tpu"), r.to("tpu"))
    assert got.dtype == want.dtype
    torch.testing.assert_close(to_cpu(got), want)


def test_a_complex_number_with_a_real_result_matches_cpu(mode):
    # Keeping the real part of 1j would compare with 0: the CPU path compares the whole number.
    a = complex_sample(4, seed=6)
    a[1] = 1j
    assert torch.equal(to_cpu(a.to("tpu") == 1j), a == 1j)
    with pytest.raises(RuntimeError, match="cannot be converted"):
        torch.zeros(3).fill_(1j)
    with pytest.raises(RuntimeError, match="cannot be converted"):
        to_cpu(torch.zeros(3, device="tpu").fill_(1j))


class RotaryProjection(torch.nn.Module):
    """A projection followed by rotary embeddings in complex numbers, as Meta's reference Llama
    and PyTorch's large-scale training library write them (view_as_complex, a complex freqs_cis
    buffer, complex mul, view_as_real)."""

    def __init__(self, heads=4, head_dim=16, length=8):
        super().__init__()
        self.heads = heads
        self.proj = torch.nn.Linear(heads * head_dim, heads * head_dim)
        angles = torch.outer(torch.arange(length, dtype=torch.float32),
                             1.0 / 10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def forward(self, x):
        b, t, _ = x.shape
        q = self.proj(x).view(b, t, self.heads, -1)
        q_complex = torch.view_as_complex(q.float().reshape(b, t, self.heads, -1, 2))
        rotated = torch.view_as_real(q_complex * self.freqs_cis[:t].view(1, t, 1, -1)).flatten(3)
        return rotated.type_as(x)


def rotary_training(device, compiled=False, steps=3):
    torch.manual_seed(0)
    model = RotaryProjection().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    forward = torch.compile(model, backend="tpu") if compiled else model

    def train_step(x):
        loss = forward(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    inputs = [torch.randn(2, 8, 64, generator=torch.Generator().manual_seed(step)) for step in range(steps)]
    losses = [train_step(x.to(device)) for x in inputs]
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_rotary_embeddings_in_complex_numbers_train_on_the_device(mode, no_fallback):
    losses, params = rotary_training("tpu")
    cpu_losses, cpu_params = rotary_training("cpu")
    torch.testing.assert_close(losses, cpu_losses)
    torch.testing.assert_close(params, cpu_params)


def test_compiled_rotary_training_step_is_replayed(no_fallback):
    import torch_tpu

    torch_tpu.reset_metrics()
    losses, _ = rotary_training("tpu", compiled=True, steps=4)
    metrics = torch_tpu.metrics()
    cpu_losses, _ = rotary_training("cpu", steps=4)
    torch.testing.assert_close(losses, cpu_losses)
    # The forward and backward graphs are recorded once each, then replayed on every other call.
    assert metrics["compiled_graph_calls"] == 8
    assert metrics["graph_replays"] == 6


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_and_polar_build_complex_tensors_on_the_device(mode, dtype, no_fallback):
    g = torch.Generator().manual_seed(6)
    first, second = torch.randn(4, 3, generator=g, dtype=dtype), torch.randn(3, generator=g, dtype=dtype)
    for fn in (torch.complex, lambda a, b: torch.polar(a.abs(), b)):
        want = fn(first, second)
        got = fn(first.to("tpu"), second.to("tpu"))
        assert got.dtype == want.dtype
        torch.testing.assert_close(to_cpu(got), want)
