"""Random numbers come from a device-side generator seeded by torch.manual_seed."""
import pytest
import torch

import torch_tpu


def draws():
    return [torch.rand(1000, device="tpu").cpu(), torch.randn(1000, device="tpu").cpu(),
            torch.randint(3, 9, (1000,), device="tpu").cpu()]


def test_same_seed_same_numbers_in_every_mode():
    results = []
    for mode in ("debug", "strict", "defer_and_fuse"):
        with torch_tpu.eager_mode(mode):
            torch.manual_seed(1234)
            results.append(draws())
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a, b)
    torch.manual_seed(1235)
    assert not torch.equal(draws()[0], results[0][0])


def test_distributions(mode, no_fallback):
    torch.manual_seed(0)
    u = torch.rand(20000, device="tpu").cpu()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    n = torch.randn(20000, device="tpu").cpu()
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    i = torch.randint(-2, 5, (20000,), device="tpu").cpu()
    assert i.dtype == torch.int64 and i.min() == -2 and i.max() == 4
    b = torch.empty(20000, device="tpu").bernoulli_(0.3).cpu()
    assert abs(b.mean() - 0.3) < 0.02
    scaled = torch.empty(20000, dtype=torch.float64, device="tpu").uniform_(-3, -1).cpu()
    assert scaled.min() >= -3 and scaled.max() < -1
    normal = torch.empty(20000, device="tpu").normal_(5, 2).cpu()
    assert abs(normal.mean() - 5) < 0.1 and abs(normal.std() - 2) < 0.1


def test_dropout_keeps_expectation_and_masks_consistently(mode, no_fallback):
    torch.manual_seed(0)
    x = torch.ones(10000, device="tpu", requires_grad=True)
    y = torch.nn.functional.dropout(x, p=0.25, training=True)
    y.sum().backward()
    out, grad = y.detach().cpu(), x.grad.cpu()
    kept = out != 0
    assert abs(kept.float().mean() - 0.75) < 0.02
    torch.testing.assert_close(out[kept], torch.full_like(out[kept], 1 / 0.75))
    torch.testing.assert_close(grad, out)  # the backward uses the same mask
    assert torch.equal(torch.nn.functional.dropout(x, p=0.25, training=False).detach().cpu(), torch.ones(10000))


def test_generator_state_restores_the_stream(mode, no_fallback):
    torch.manual_seed(7)
    state = torch.tpu.get_rng_state()
    first = torch.randn(50, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    again = torch.randn(50, device="tpu").cpu()
    assert torch.equal(first, again)
    generator = torch.Generator(device="tpu").manual_seed(3)
    a = torch.rand(10, device="tpu", generator=generator).cpu()
    generator.manual_seed(3)
    b = torch.rand(10, device="tpu", generator=generator).cpu()
    assert torch.equal(a, b)
    assert torch.tpu.initial_seed() == 7
