"""Cholesky factorizations and triangular solves on the device (lowering/triangular.cpp), against
CPU in every mode, batched, forward and backward, with no CPU fallback."""
import pytest
import torch

from conftest import to_cpu


def spd(*batch, n=5, seed=0, dtype=torch.float32):
    a = torch.randn(*batch, n, n, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    return a @ a.mT + n * torch.eye(n, dtype=dtype)


def triangular(*batch, n=5, upper=False, seed=1):
    a = torch.randn(*batch, n, n, generator=torch.Generator().manual_seed(seed))
    a = a.triu() if upper else a.tril()
    return a + 3 * torch.eye(n)


def rhs(*shape, seed=2):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# Each case takes `t`, which moves a CPU-built operand to the device under test.
CASES = {
    "cholesky": lambda t: torch.linalg.cholesky(t(spd(3))),
    "cholesky_upper_f64": lambda t: torch.linalg.cholesky(t(spd(2, dtype=torch.float64)), upper=True),
    "cholesky_ex_info": lambda t: torch.linalg.cholesky_ex(t(spd(4)))[1],
    "deprecated_cholesky": lambda t: torch.cholesky(t(spd(2))),
    "deprecated_cholesky_upper": lambda t: torch.cholesky(t(spd(n=3)), upper=True),
    "solve_triangular_lower": lambda t: torch.linalg.solve_triangular(t(triangular(3)), t(rhs(3, 5, 2)), upper=False),
    "solve_triangular_upper_right": lambda t: torch.linalg.solve_triangular(
        t(triangular(n=4, upper=True)), t(rhs(2, 3, 4)), upper=True, left=False),
    "solve_triangular_unit_broadcast": lambda t: torch.linalg.solve_triangular(
        t(triangular(2, 1)), t(rhs(2, 3, 5, 2)), upper=False, unitriangular=True),
    "triangular_solve_transpose": lambda t: torch.triangular_solve(
        t(rhs(5, 3)), t(triangular(upper=True)), transpose=True)[0],
    "cholesky_solve": lambda t: torch.cholesky_solve(t(rhs(2, 5, 3)), torch.linalg.cholesky(t(spd(2)))),
    "cholesky_inverse": lambda t: torch.cholesky_inverse(torch.linalg.cholesky(t(spd(2)))),
    "cholesky_solve_upper": lambda t: torch.cholesky_solve(
        t(rhs(5, 3)), torch.linalg.cholesky(t(spd()), upper=True), upper=True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_cpu(mode, name, no_fallback):
    want = CASES[name](lambda x: x)
    got = CASES[name](lambda x: x.to("tpu"))
    assert got.dtype == want.dtype
    torch.testing.assert_close(to_cpu(got), want, atol=1e-4, rtol=1e-4)


def test_not_positive_definite_raises_cpus_error(mode):
    a = spd(2)
    a[1, 2, 2] = -100.0
    with pytest.raises(torch.linalg.LinAlgError) as on_cpu:
        torch.linalg.cholesky(a)
    with pytest.raises(torch.linalg.LinAlgError) as on_tpu:
        torch.linalg.cholesky(a.to("tpu"))
    assert str(on_tpu.value) == str(on_cpu.value)
    info_cpu = torch.linalg.cholesky_ex(a).info
    torch.testing.assert_close(to_cpu(torch.linalg.cholesky_ex(a.to("tpu")).info), info_cpu)


def test_deprecated_cholesky_raises_cpus_errors(mode):
    # torch.cholesky checks LAPACK's info on the host before returning, as on CPU.
    a = spd(2)
    a[1, 2, 2] = -100.0
    for bad in (a, a[1], torch.ones(2, 3)):
        with pytest.raises(RuntimeError) as on_cpu:
            torch.cholesky(bad)
        with pytest.raises(type(on_cpu.value)) as on_tpu:
            torch.cholesky(bad.to("tpu"))
        assert str(on_tpu.value) == str(on_cpu.value)


def test_gradients_match_cpu(mode, no_fallback):
    def grads(device):
        a = spd(2, n=4).to(device).requires_grad_()
        t = triangular(2, n=4, seed=5).to(device).requires_grad_()
        b = rhs(2, 4, 3).to(device).requires_grad_()
        factor = torch.linalg.cholesky(a)
        x = torch.linalg.solve_triangular(t, b, upper=False)
        (factor.sum() + (x * x).sum()).backward()
        return a.grad, t.grad, b.grad

    for got, want in zip(grads("tpu"), grads("cpu")):
        torch.testing.assert_close(to_cpu(got), want, atol=1e-4, rtol=1e-4)
