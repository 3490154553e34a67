"""torch.special on the device against CPU, in every mode: the orthogonal polynomials (per-element
degrees, the closed forms CPU takes at the ends of the interval, inside it above a small degree,
and for negative or non-finite degrees)."""
import pytest
import torch

from conftest import to_cpu

POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]

POLYNOMIAL_X = [-1.5, -1.0, -0.73, -0.2, 0.0, 1e-9, 0.25, 0.5, 0.9, 1.0, 1.3, 3.0]
POLYNOMIAL_N = [-2.0, -0.5, 0.0, 1.0, 1.9, 2.0, 3.0, 5.0, 6.0, 7.0, 9.0, 12.0, float("nan"), float("inf")]


@pytest.mark.parametrize("name", POLYNOMIALS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_orthogonal_polynomials_match_cpu(mode, name, dtype, no_fallback):
    fn = getattr(torch.special, name)
    x = torch.tensor(POLYNOMIAL_X, dtype=dtype).view(-1, 1)
    n = torch.tensor(POLYNOMIAL_N, dtype=dtype).view(1, -1)
    torch.testing.assert_close(to_cpu(fn(x.to("tpu"), n.to("tpu"))), fn(x, n), equal_nan=True)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "hermite_polynomial_h", "legendre_polynomial_p"])
def test_orthogonal_polynomials_take_numbers_and_integers_as_cpu_does(mode, name, no_fallback):
    fn = getattr(torch.special, name)
    x = torch.tensor([-2, 0, 1, 3])
    n = torch.tensor([4, 2, 7, 3])
    for args in [(x, n), (x.float() / 3, 5), (0.5, n)]:
        want = fn(*args)
        got = fn(*(a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args))
        assert got.dtype == want.dtype
        torch.testing.assert_close(to_cpu(got), want)


def test_hermite_polynomials_past_cpus_degree_limit_are_nan(mode, no_fallback):
    x = torch.tensor([0.5, 0.5, 0.5])
    n = torch.tensor([100.0, 128.0, 129.0])
    for fn in (torch.special.hermite_polynomial_h, torch.special.hermite_polynomial_he):
        torch.testing.assert_close(to_cpu(fn(x.to("tpu"), n.to("tpu"))), fn(x, n), equal_nan=True)
