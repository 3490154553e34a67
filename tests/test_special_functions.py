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


NORMAL_X = [-40.0, -27.0, -10.0, -5.0, -1.5, -1.0, -0.7, -0.5, -0.2, -0.0, 0.0, 0.3, 0.5, 0.9, 2.0, 5.0, 10.0, 26.0,
            30.0, 1e3, 1e10, float("inf"), float("-inf"), float("nan")]
PROBABILITIES = [0.0, 1e-30, 1e-20, 1e-8, 1e-3, 0.02, 0.1, 0.11, 0.3, 0.5, 0.5000001, 0.7, 0.89, 0.9, 0.999, 1 - 1e-7,
                 1.0, 1.2, -0.1, float("nan")]


@pytest.mark.parametrize("name,values", [("erfcx", NORMAL_X), ("log_ndtr", NORMAL_X), ("ndtr", NORMAL_X),
                                         ("ndtri", PROBABILITIES)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_normal_distribution_functions_match_cpu_into_their_tails(mode, name, values, dtype, no_fallback):
    fn = getattr(torch.special, name)
    x = torch.tensor(values, dtype=dtype)
    torch.testing.assert_close(to_cpu(fn(x.to("tpu"))), fn(x), equal_nan=True)


def test_ndtri_inverts_ndtr_across_the_unit_interval(mode, no_fallback):
    p = torch.rand(1000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(to_cpu(torch.special.ndtri(p.to("tpu"))), torch.special.ndtri(p))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hurwitz_zeta_matches_cpu_at_its_poles_and_domain_edges(mode, dtype, no_fallback):
    x = torch.tensor([1.0, 1.5, 2.0, 3.0, 10.0, 0.5, float("inf"), float("nan"), -1.0], dtype=dtype).view(-1, 1)
    q = torch.tensor([0.5, 1.0, 2.0, 3.5, 1.5, -1.0, -2.5, 0.0, float("inf")], dtype=dtype).view(1, -1)
    torch.testing.assert_close(to_cpu(torch.special.zeta(x.to("tpu"), q.to("tpu"))), torch.special.zeta(x, q),
                               equal_nan=True)


BESSEL_X = [0.0, -0.0, 1e-20, 1e-5, 0.1, 0.5, 0.99, 1.0, 1.01, 2.0, 5.0, 8.4784, 10.0, 19.0, 20.0, 20.01, 30.0, 50.0,
            85.0, 700.0, 1e4, -0.5, -3.0, -8.4784, -25.0, -100.0, float("inf"), float("-inf"), float("nan")]
MODIFIED_BESSEL = [torch.i0, torch.special.i0e, torch.special.i1, torch.special.modified_bessel_i0,
                   torch.special.modified_bessel_i1, torch.special.modified_bessel_k0, torch.special.modified_bessel_k1,
                   torch.special.scaled_modified_bessel_k0, torch.special.scaled_modified_bessel_k1]


@pytest.mark.parametrize("fn", MODIFIED_BESSEL, ids=lambda fn: fn.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_modified_bessel_functions_match_cpu(mode, fn, dtype, no_fallback):
    x = torch.tensor(BESSEL_X, dtype=dtype)
    if dtype == torch.float32 and "k" in fn.__name__:
        x = x[x.abs() < 85]  # K of 85 and more is subnormal in float32, which XLA's CPU flushes to 0
    want = fn(x)
    for tpu_input in (x.to("tpu"), x[7].to("tpu")):  # one element as well: another XLA program shape
        got = to_cpu(fn(tpu_input))
        torch.testing.assert_close(got, want if tpu_input.dim() else want[7], equal_nan=True)


GAMMA_A = [0.0, 1e-4, 0.3, 1.0, 2.5, 9.0, 10.0, 31.7, 1e3, 1e4, float("inf"), float("nan"), -1.0]
GAMMA_X = [0.0, 1e-3, 0.5, 1.0, 1.1, 2.5, 9.5, 30.0, 990.0, 1.01e4, float("inf"), float("nan"), -0.5]


@pytest.mark.parametrize("fn", [torch.special.gammainc, torch.special.gammaincc], ids=["gammainc", "gammaincc"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_regularized_incomplete_gamma_matches_cpu(mode, fn, dtype, no_fallback):
    # Every pairing of the values above: both expansions, large a near x (where CPU switches to
    # an asymptotic expansion), and CPU's values at the domain's edges.
    a = torch.tensor(GAMMA_A, dtype=dtype).view(-1, 1)
    x = torch.tensor(GAMMA_X, dtype=dtype).view(1, -1)
    torch.testing.assert_close(to_cpu(fn(a.to("tpu"), x.to("tpu"))), fn(a, x), equal_nan=True)
    a, x = torch.rand(2, 500, dtype=dtype, generator=torch.Generator().manual_seed(0)) * 40
    torch.testing.assert_close(to_cpu(torch.igamma(a.to("tpu"), x.to("tpu"))), torch.igamma(a, x))


BESSEL_JY = [torch.special.bessel_j0, torch.special.bessel_j1, torch.special.bessel_y0, torch.special.bessel_y1]


@pytest.mark.parametrize("fn", BESSEL_JY, ids=lambda fn: fn.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bessel_functions_of_the_first_and_second_kind_match_cpu(mode, fn, dtype, no_fallback):
    # Each range: the power series near 0, the recurrence up to 25, the asymptotic expansion
    # beyond; the zeros of J_0 (2.4048), Y_0 (0.8936) and J_1 (3.8317) inside; the ends.
    x = torch.tensor(BESSEL_X + [2.4048, 0.8936, 3.8317, 24.99, 25.01, 1e-6, 3e-5], dtype=dtype)
    x = torch.cat([x, torch.linspace(0.01, 60, 397, dtype=dtype)])
    # CPU's kernels are fits good to about 1e-7 (3e-7 off near x = 5 in float64, 2e-6 at 1e4 in
    # float32); the identity below checks the tpu's float64 values to rounding.
    torch.testing.assert_close(to_cpu(fn(x.to("tpu"))), fn(x), equal_nan=True, atol=3e-6, rtol=1e-4)


def test_bessel_functions_of_both_kinds_satisfy_the_wronskian_to_rounding(mode, no_fallback):
    # J_1(x) Y_0(x) - J_0(x) Y_1(x) = 2 / (pi x): an identity no fit satisfies to rounding by chance.
    x = torch.cat([torch.logspace(-4, 1, 60, dtype=torch.float64), torch.linspace(10.5, 200, 120, dtype=torch.float64)])
    j0, j1, y0, y1 = (to_cpu(fn(x.to("tpu"))) for fn in BESSEL_JY)
    torch.testing.assert_close((j1 * y0 - j0 * y1) * (torch.pi * x / 2), torch.ones_like(x), atol=0, rtol=1e-13)


def test_i0_in_half_precision_rounds_like_cpu(mode, no_fallback):
    x = torch.linspace(-12, 12, 97)
    for dtype in (torch.float16, torch.bfloat16):
        torch.testing.assert_close(to_cpu(torch.i0(x.to(dtype).to("tpu"))), torch.i0(x.to(dtype)))


@pytest.mark.parametrize("fn", [torch.special.erfcx, torch.special.ndtri, torch.special.modified_bessel_k0,
                                torch.special.modified_bessel_i1, lambda x: torch.special.zeta(x, x),
                                lambda x: torch.special.legendre_polynomial_p(x, 3)],
                         ids=["erfcx", "ndtri", "modified_bessel_k0", "modified_bessel_i1", "zeta", "legendre"])
def test_half_precision_is_refused_where_cpu_refuses_it(mode, fn):
    x = torch.tensor([0.25, 0.5], dtype=torch.float16)
    with pytest.raises(NotImplementedError) as cpu_error:
        fn(x)
    with pytest.raises(NotImplementedError) as tpu_error:
        fn(x.to("tpu"))
        torch.tpu.synchronize()
    assert str(tpu_error.value).split(" not implemented")[0].replace("_tpu", "_cpu") == \
        str(cpu_error.value).split(" not implemented")[0]
