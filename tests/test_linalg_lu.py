"""LU factorization with partial pivoting and what PyTorch builds on it (lowering/lu.cpp):
linalg.lu_factor, lu_solve, solve, inv, det, slogdet, lu_unpack, against CPU in every mode,
batched, forward and backward, with no CPU fallback."""
import pytest
import torch

from conftest import to_cpu


def matrix(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def complex_matrix(*shape, seed=0, dtype=torch.complex64):
    return torch.complex(matrix(*shape, seed=seed), matrix(*shape, seed=seed + 100)).to(dtype)


def singular(n=4):
    a = matrix(n, n, seed=3)
    a[:, 2] = a[:, 0] * 2.0  # rank n - 1: a zero pivot at the last step
    return a


# Each case takes `t`, which moves a CPU-built operand to the device under test.
CASES = {
    "lu_factor": lambda t: torch.linalg.lu_factor(t(matrix(3, 5, 5))),
    "lu_factor_pivots": lambda t: torch.linalg.lu_factor(t(matrix(2, 6, 6, seed=1)))[1],
    "lu_factor_rectangular_tall": lambda t: torch.linalg.lu_factor(t(matrix(7, 4))),
    "lu_factor_rectangular_wide": lambda t: torch.linalg.lu_factor(t(matrix(2, 3, 6))),
    "lu_factor_ex_info_singular": lambda t: torch.linalg.lu_factor_ex(t(torch.zeros(2, 3, 3)))[2],
    "lu_solve": lambda t: torch.linalg.lu_solve(*torch.linalg.lu_factor(t(matrix(2, 4, 4))), t(matrix(2, 4, 3, seed=2))),
    "lu_solve_adjoint_right": lambda t: torch.linalg.lu_solve(
        *torch.linalg.lu_factor(t(matrix(4, 4))), t(matrix(3, 4, seed=2)), left=False, adjoint=True),
    "solve": lambda t: torch.linalg.solve(t(matrix(3, 5, 5)), t(matrix(3, 5, 2, seed=1))),
    "solve_vector": lambda t: torch.linalg.solve(t(matrix(5, 5)), t(matrix(5, seed=1))),
    "solve_batched_vector": lambda t: torch.linalg.solve(t(matrix(2, 5, 5)), t(matrix(2, 5, seed=1))),
    "solve_broadcast": lambda t: torch.linalg.solve(t(matrix(5, 5)), t(matrix(3, 5, 2, seed=1))),
    "solve_right_f64": lambda t: torch.linalg.solve(t(matrix(4, 4, dtype=torch.float64)),
                                                    t(matrix(2, 3, 4, seed=1, dtype=torch.float64)), left=False),
    "inv": lambda t: torch.linalg.inv(t(matrix(3, 4, 4))),
    "inverse_f64": lambda t: torch.inverse(t(matrix(6, 6, dtype=torch.float64))),
    "det": lambda t: torch.linalg.det(t(matrix(4, 5, 5))),
    "det_singular": lambda t: torch.linalg.det(t(singular())),
    "slogdet": lambda t: torch.stack(torch.linalg.slogdet(t(matrix(3, 4, 4, seed=4)))),
    "logdet_spd": lambda t: torch.logdet(t(matrix(4, 4) @ matrix(4, 4).mT + torch.eye(4))),
    # CPU factors A^T when A is contiguous, and det's backward expects that LU: so must we.
    "det_factorization": lambda t: torch.cat([x.flatten().double() for x in torch.ops.aten._linalg_det(t(matrix(2, 4, 4)))]),
    "det_factorization_of_a_transposed_view": lambda t: torch.cat(
        [x.flatten().double() for x in torch.ops.aten._linalg_slogdet(t(matrix(2, 4, 4)).mT)]),
    "lu_unpack": lambda t: torch.cat([x.flatten() for x in torch.lu_unpack(*torch.linalg.lu_factor(t(matrix(2, 5, 3))))]),
    "linalg_lu": lambda t: torch.cat([x.flatten() for x in torch.linalg.lu(t(matrix(4, 4)))]),
    # Complex matrices pivot on |re| + |im|, as LAPACK's izamax does.
    "complex_lu_factor": lambda t: torch.linalg.lu_factor(t(complex_matrix(2, 5, 5)))[0],
    "complex_lu_factor_pivots": lambda t: torch.linalg.lu_factor(t(complex_matrix(2, 5, 5, seed=1)))[1],
    "complex_solve": lambda t: torch.linalg.solve(t(complex_matrix(3, 4, 4)), t(complex_matrix(3, 4, 2, seed=1))),
    "complex_solve_right_c128": lambda t: torch.linalg.solve(
        t(complex_matrix(4, 4, dtype=torch.complex128)), t(complex_matrix(3, 4, seed=1, dtype=torch.complex128)),
        left=False),
    "complex_inv": lambda t: torch.linalg.inv(t(complex_matrix(2, 4, 4))),
    "complex_lu_solve_adjoint": lambda t: torch.linalg.lu_solve(
        *torch.linalg.lu_factor(t(complex_matrix(4, 4))), t(complex_matrix(4, 3, seed=2)), adjoint=True),
    "complex_lu_solve_adjoint_right": lambda t: torch.linalg.lu_solve(
        *torch.linalg.lu_factor(t(complex_matrix(4, 4))), t(complex_matrix(3, 4, seed=2)), left=False, adjoint=True),
    "complex_lu_solve_right": lambda t: torch.linalg.lu_solve(
        *torch.linalg.lu_factor(t(complex_matrix(4, 4))), t(complex_matrix(3, 4, seed=2)), left=False),
    "complex_linalg_lu": lambda t: torch.cat([x.flatten() for x in torch.linalg.lu(t(complex_matrix(4, 4)))]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_cpu(mode, name, no_fallback):
    want = CASES[name](lambda x: x)
    got = CASES[name](lambda x: x.to("tpu"))
    want, got = (want, got) if isinstance(want, torch.Tensor) else (torch.cat([w.flatten().double() for w in want]),
                                                                    torch.cat([g.flatten().double() for g in got]))
    assert got.dtype == want.dtype
    torch.testing.assert_close(to_cpu(got), want, atol=1e-4, rtol=1e-4)


def test_singular_solve_raises_cpus_error(mode):
    a, b = singular(), matrix(4, 2)
    a[:, 2] = 0.0  # exactly singular
    with pytest.raises(torch.linalg.LinAlgError) as on_cpu:
        torch.linalg.solve(a, b)
    with pytest.raises(torch.linalg.LinAlgError) as on_tpu:
        torch.linalg.solve(a.to("tpu"), b.to("tpu"))
    assert str(on_tpu.value) == str(on_cpu.value)


def test_gradients_match_cpu(mode, no_fallback):
    def grads(device):
        a = (matrix(2, 4, 4) + 4 * torch.eye(4)).to(device).requires_grad_()
        b = matrix(2, 4, 3, seed=1).to(device).requires_grad_()
        c = matrix(4, 4, seed=2).to(device).requires_grad_()
        x = torch.linalg.solve(a, b)
        loss = (x * x).sum() + torch.linalg.det(c) + torch.linalg.inv(c).sum() + torch.linalg.slogdet(a)[1].sum()
        loss.backward()
        return a.grad, b.grad, c.grad

    for got, want in zip(grads("tpu"), grads("cpu")):
        torch.testing.assert_close(to_cpu(got), want, atol=1e-3, rtol=1e-3)
