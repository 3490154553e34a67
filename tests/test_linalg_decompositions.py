"""QR (Householder), eigh and SVD (Jacobi) on the device against CPU, in every mode: shapes tall,
wide, square, odd and batched, float32 and float64, every mode of qr, full and reduced SVD,
rank-deficient matrices, and gradients. Eigenvectors and singular vectors are compared up to
sign (the only freedom they have for simple eigenvalues), everything else directly."""
import pytest
import torch

from conftest import to_cpu


def matrix(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def symmetric(*shape, seed=0, dtype=torch.float64):
    a = matrix(*shape, seed=seed, dtype=dtype)
    return a + a.mT


def signs_to(actual, expected):
    """Each column of `actual` turned to point as `expected`'s does."""
    dots = (actual * expected).sum(-2, keepdim=True)
    return torch.where(dots < 0, -1.0, 1.0).to(actual.dtype)


SHAPES = [(4, 4), (6, 3), (3, 6), (2, 5, 4), (2, 3, 7, 7), (1, 1), (5, 1)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("qr_mode", ["reduced", "complete", "r"])
def test_qr_matches_cpu(mode, shape, qr_mode, no_fallback):
    a = matrix(*shape)
    q, r = torch.linalg.qr(a.to("tpu"), mode=qr_mode)
    want_q, want_r = torch.linalg.qr(a, mode=qr_mode)
    torch.testing.assert_close(to_cpu(q), want_q)
    torch.testing.assert_close(to_cpu(r), want_r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_geqrf_and_householder_product_match_cpu(mode, dtype, no_fallback):
    a = matrix(3, 6, 4, seed=1, dtype=dtype)
    reflectors, tau = torch.geqrf(a.to("tpu"))
    want_reflectors, want_tau = torch.geqrf(a)
    assert reflectors.stride() == want_reflectors.stride()
    torch.testing.assert_close(to_cpu(reflectors), want_reflectors)
    torch.testing.assert_close(to_cpu(tau), want_tau)
    product = torch.linalg.householder_product(want_reflectors.to("tpu"), want_tau.to("tpu"))
    torch.testing.assert_close(to_cpu(product), torch.linalg.householder_product(want_reflectors, want_tau))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_ormqr_applies_the_reflectors_as_cpu_does(mode, left, transpose, no_fallback):
    reflectors, tau = torch.geqrf(matrix(2, 5, 3, seed=2))
    other = matrix(2, 5, 4, seed=3) if left else matrix(2, 4, 5, seed=3)
    want = torch.ormqr(reflectors, tau, other, left=left, transpose=transpose)
    got = torch.ormqr(reflectors.to("tpu"), tau.to("tpu"), other.to("tpu"), left=left, transpose=transpose)
    torch.testing.assert_close(to_cpu(got), want)


def test_qr_gradients_match_cpu(mode, no_fallback):
    a = matrix(5, 3, seed=2)
    grads = []
    for device in ("cpu", "tpu"):
        leaf = a.clone().to(device).requires_grad_()
        q, r = torch.linalg.qr(leaf)
        (q.sum() + (r * r).sum()).backward()
        grads.append(to_cpu(leaf.grad))
    torch.testing.assert_close(grads[1], grads[0])


EIGH_SHAPES = [(1, 1), (2, 2), (3, 3), (4, 4), (7, 7), (2, 3, 6, 6), (16, 16)]


@pytest.mark.parametrize("shape", EIGH_SHAPES, ids=str)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_matches_cpu_up_to_signs(mode, shape, uplo, no_fallback):
    a = matrix(*shape, seed=3)  # not symmetric: UPLO picks the triangle that counts
    values, vectors = torch.linalg.eigh(a.to("tpu"), UPLO=uplo)
    want_values, want_vectors = torch.linalg.eigh(a, UPLO=uplo)
    values, vectors = to_cpu(values), to_cpu(vectors)
    torch.testing.assert_close(values, want_values)
    torch.testing.assert_close(vectors * signs_to(vectors, want_vectors), want_vectors)
    torch.testing.assert_close(torch.linalg.eigvalsh(a.to("tpu"), UPLO=uplo).cpu(), want_values)


def test_eigh_in_float32_and_its_gradient_match_cpu(mode, no_fallback):
    a = symmetric(2, 8, 8, seed=4, dtype=torch.float32)
    values = torch.linalg.eigvalsh(a.to("tpu"))
    torch.testing.assert_close(to_cpu(values), torch.linalg.eigvalsh(a), atol=1e-5, rtol=1e-5)
    grads = []
    for device in ("cpu", "tpu"):
        leaf = symmetric(6, 6, seed=5).to(device).requires_grad_()
        w, v = torch.linalg.eigh(leaf)
        (w.square().sum() + (v * v).pow(2).sum()).backward()  # invariant under the vectors' signs
        grads.append(to_cpu(leaf.grad))
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_matches_cpu_up_to_signs(mode, shape, full_matrices, no_fallback):
    a = matrix(*shape, seed=6)
    u, s, vh = (to_cpu(t) for t in torch.linalg.svd(a.to("tpu"), full_matrices=full_matrices))
    want_u, want_s, want_vh = torch.linalg.svd(a, full_matrices=full_matrices)
    k = s.shape[-1]
    assert u.shape == want_u.shape and vh.shape == want_vh.shape
    torch.testing.assert_close(s, want_s)
    signs = signs_to(u[..., :k], want_u[..., :k])
    torch.testing.assert_close(u[..., :k] * signs, want_u[..., :k])
    torch.testing.assert_close(vh[..., :k, :] * signs.mT, want_vh[..., :k, :])
    eye = torch.eye(u.shape[-1], dtype=u.dtype)
    torch.testing.assert_close(u.mT @ u, eye.expand_as(u.mT @ u))  # completion columns orthonormal too
    torch.testing.assert_close(vh @ vh.mT, torch.eye(vh.shape[-2], dtype=u.dtype).expand_as(vh @ vh.mT))


def test_rank_deficient_svd_keeps_orthonormal_vectors(mode, no_fallback):
    a = matrix(6, 4, seed=7)
    a[:, 3] = a[:, 0] - a[:, 1]  # rank 3
    a[:, 2] = 0
    u, s, vh = (to_cpu(t) for t in torch.linalg.svd(a.to("tpu"), full_matrices=False))
    torch.testing.assert_close(s, torch.linalg.svdvals(a))
    torch.testing.assert_close(u.mT @ u, torch.eye(4, dtype=a.dtype))
    torch.testing.assert_close(u @ torch.diag(s) @ vh, a)
    for fn in (torch.linalg.pinv, torch.linalg.matrix_rank, lambda x: torch.linalg.matrix_norm(x, ord="nuc")):
        torch.testing.assert_close(to_cpu(fn(a.to("tpu"))), fn(a))


def test_svd_in_float32_and_singular_value_gradients_match_cpu(mode, no_fallback):
    a = matrix(3, 7, 5, seed=8, dtype=torch.float32)
    torch.testing.assert_close(to_cpu(torch.linalg.svdvals(a.to("tpu"))), torch.linalg.svdvals(a))
    grads = []
    for device in ("cpu", "tpu"):
        leaf = matrix(4, 6, seed=9).to(device).requires_grad_()
        torch.linalg.svdvals(leaf).pow(3).sum().backward()
        grads.append(to_cpu(leaf.grad))
    torch.testing.assert_close(grads[1], grads[0])
    torch.testing.assert_close(to_cpu(torch.linalg.cond(a.to("tpu"))), torch.linalg.cond(a))


@pytest.mark.parametrize("scale", [0.0, 0.5, 3.0, 30.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matrix_exp_matches_cpu_across_norms(mode, scale, dtype, no_fallback):
    a = matrix(3, 5, 5, seed=10, dtype=dtype) * scale
    exact = torch.matrix_exp(a.double())
    got = to_cpu(torch.matrix_exp(a.to("tpu"))).double()
    # Errors relative to the largest entry (entries far below it carry the squarings' rounding),
    # no larger than CPU's own or the dtype's precision (float32 at norm 30: CPU 4.4e-6, tpu 1.1e-6).
    largest = exact.abs().amax((-2, -1), keepdim=True)
    cpu_error = ((torch.matrix_exp(a).double() - exact) / largest).abs().max().item()
    tpu_error = ((got - exact) / largest).abs().max().item()
    assert tpu_error <= max(cpu_error, 2e-6 if dtype == torch.float32 else 1e-13)


def test_matrix_exp_gradient_and_orthogonal_parametrization_match_cpu(mode, no_fallback):
    a = matrix(4, 4, seed=11)
    grads = []
    for device in ("cpu", "tpu"):
        leaf = a.clone().to(device).requires_grad_()
        torch.matrix_exp(leaf).square().sum().backward()
        grads.append(to_cpu(leaf.grad))
    torch.testing.assert_close(grads[1], grads[0])
    torch.manual_seed(0)
    layer = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(6, 6).double(), orthogonal_map="matrix_exp")
    moved = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(6, 6).double(), orthogonal_map="matrix_exp")
    moved.load_state_dict(layer.state_dict())
    torch.testing.assert_close(to_cpu(moved.to("tpu").weight), layer.weight)


LSTSQ_CASES = {
    "tall": ((6, 3), (6, 2)),
    "wide_min_norm": ((3, 6), (3, 2)),
    "batched_broadcast": ((1, 5, 3), (2, 5, 4)),
    "vector": ((2, 5, 3), (2, 5)),
    "square": ((4, 4), (4, 1)),
}


@pytest.mark.parametrize("case", list(LSTSQ_CASES))
def test_lstsq_matches_cpu(mode, case, no_fallback):
    a_shape, b_shape = LSTSQ_CASES[case]
    a, rhs = matrix(*a_shape, seed=12), matrix(*b_shape, seed=13)
    got = torch.linalg.lstsq(a.to("tpu"), rhs.to("tpu"))
    want = torch.linalg.lstsq(a, rhs)
    torch.testing.assert_close(to_cpu(got.solution), want.solution)
    torch.testing.assert_close(to_cpu(got.rank), want.rank)
    assert got.residuals.shape == want.residuals.shape and got.singular_values.shape == want.singular_values.shape


def test_lstsq_of_a_rank_deficient_matrix_and_its_gradient_match_cpu(mode, no_fallback):
    a, rhs = matrix(6, 4, seed=14), matrix(6, 2, seed=15)
    a[:, 3] = a[:, 0] + a[:, 1]  # rank 3: the minimum-norm solution
    got = torch.linalg.lstsq(a.to("tpu"), rhs.to("tpu"))
    # CPU's reference comes from its SVD, not from its gelsy: MKL's gelsy has been seen to call
    # this matrix rank 2 (and return another solution) on some runs and rank 3 on the rest.
    torch.testing.assert_close(to_cpu(got.solution), torch.linalg.pinv(a) @ rhs)
    assert int(got.rank) == int(torch.linalg.matrix_rank(a)) == 3
    grads = []
    for device in ("cpu", "tpu"):
        leaf = matrix(5, 3, seed=16).to(device).requires_grad_()
        torch.linalg.lstsq(leaf, rhs[:5].to(device)).solution.square().sum().backward()
        grads.append(to_cpu(leaf.grad))
    torch.testing.assert_close(grads[1], grads[0])


def test_lstsq_with_another_driver_gives_cpus_results(mode):
    a, rhs = matrix(6, 3, seed=17), matrix(6, 2, seed=18)
    got, want = torch.linalg.lstsq(a.to("tpu"), rhs.to("tpu"), driver="gelsd"), torch.linalg.lstsq(a, rhs, driver="gelsd")
    for name in ("solution", "residuals", "rank", "singular_values"):
        torch.testing.assert_close(to_cpu(getattr(got, name)), getattr(want, name))


def test_empty_operands_need_no_cpu(mode, no_fallback):
    empty = torch.zeros(0, 0, dtype=torch.float64)
    torch.testing.assert_close(to_cpu(torch.cholesky_inverse(empty.to("tpu"))), torch.cholesky_inverse(empty))
    x, index = torch.arange(5.0), torch.zeros(2, 0, dtype=torch.int64)
    torch.testing.assert_close(to_cpu(torch.gather(x.to("tpu"), 0, index.to("tpu"))), torch.gather(x, 0, index))


def eigenpairs_in_cpus_order(values, vectors, want_values, want_vectors):
    """tpu's eigenpairs in CPU's order (each CPU eigenvalue takes the nearest left) and phases."""
    from torch_tpu.tools.opinfo_runner import _eigenpairs_as
    return _eigenpairs_as((values, vectors), (want_values, want_vectors))


EIG_CASES = {
    "random": matrix(5, 5, seed=4),
    "batched": matrix(2, 3, 6, 6, seed=5),
    "float32": matrix(4, 4, seed=6, dtype=torch.float32),
    "complex": torch.complex(matrix(4, 4, seed=7), matrix(4, 4, seed=8)),
    "rotation": torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64),
    "permutation": torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64),
    "upper_triangular": torch.triu(matrix(4, 4, seed=9)),
    "one_by_one": matrix(3, 1, 1, seed=10),
}


@pytest.mark.parametrize("case", list(EIG_CASES))
def test_eig_matches_cpu_up_to_order_and_phase(mode, case, no_fallback):
    a = EIG_CASES[case]
    want_values, want_vectors = torch.linalg.eig(a)
    values, vectors = to_cpu(torch.linalg.eig(a.to("tpu")))
    assert values.dtype == want_values.dtype and vectors.dtype == want_vectors.dtype
    # Eigenpairs themselves: A v = lambda v, unit vectors.
    tolerance = dict(atol=1e-4, rtol=1e-4) if a.dtype in (torch.float32, torch.complex64) else {}
    torch.testing.assert_close(a.to(vectors.dtype) @ vectors, vectors * values.unsqueeze(-2), **tolerance)
    torch.testing.assert_close(torch.linalg.vector_norm(vectors, dim=-2), torch.ones(values.shape, dtype=a.real.dtype))
    values, vectors = eigenpairs_in_cpus_order(values, vectors, want_values, want_vectors)
    torch.testing.assert_close(values, want_values, **tolerance)
    torch.testing.assert_close(vectors, want_vectors, **tolerance)
    eigvals = to_cpu(torch.linalg.eigvals(a.to("tpu")))
    torch.testing.assert_close(eigenpairs_in_cpus_order(eigvals, vectors, want_values, want_vectors)[0], want_values,
                               **tolerance)


def test_eig_of_defective_and_zero_matrices_stays_finite(mode, no_fallback):
    # A Jordan block has one eigenvector for a repeated eigenvalue: LAPACK returns it twice, up to
    # rounding; the zero matrix every unit vector.
    for a in (torch.tensor([[2.0, 1.0], [0.0, 2.0]]), torch.zeros(3, 3)):
        values, vectors = to_cpu(torch.linalg.eig(a.to("tpu")))
        torch.testing.assert_close(values, torch.linalg.eig(a)[0])
        assert bool(vectors.isfinite().all())
        torch.testing.assert_close(a.to(vectors.dtype) @ vectors, vectors * values.unsqueeze(-2))


def test_eig_gradient_of_a_phase_free_loss_matches_cpu(mode, no_fallback):
    # The eigenvalues, and the vectors' magnitudes: a loss their phases cannot change, as PyTorch
    # requires of eig's gradient (which solves complex systems: complex LU on the device).
    def grad(device):
        a = matrix(4, 4, seed=11).to(device).requires_grad_()
        values, vectors = torch.linalg.eig(a)
        (values.real.square().sum() + values.imag.abs().sum() + vectors.abs().square().mul(
            torch.arange(4.0, device=device, dtype=torch.float64).unsqueeze(-1)).sum()).backward()
        return a.grad
    torch.testing.assert_close(to_cpu(grad("tpu")), grad("cpu"))
