"""Bad arguments that CPU kernels reject from their values (not from shapes, which meta functions
check): the tpu device raises the same exception with the same message, in every mode. Checks
that need the device's data (a target or probability out of range) raise at the op in debug mode
and at the next host read in the others."""
import pytest
import torch
import torch.nn.functional as F


def _raised(fn, device):
    """The exception fn(device) raises, reading its result on the host (where deferred checks land)."""
    try:
        result = fn(device)
        if isinstance(result, torch.Tensor):
            result.cpu()
        torch.tpu.synchronize()
    except Exception as error:  # noqa: BLE001  (compared with CPU's below)
        return error
    return None


def _assert_raises_like_cpu(fn, message=None):
    expected = _raised(fn, "cpu")
    assert expected is not None, "the CPU accepts this call; the test is wrong"
    got = _raised(fn, "tpu")
    assert got is not None, f"tpu accepted what CPU rejects with {type(expected).__name__}: {expected}"
    assert type(got) is type(expected), f"tpu raised {type(got).__name__}: {got}; CPU raised {expected!r}"
    assert (message or str(expected).splitlines()[0]) in str(got)


def _nll_with_target(target):
    return lambda d: F.nll_loss(torch.randn(3, 4, device=d).log_softmax(1), torch.tensor(target, device=d))


@pytest.mark.parametrize("target", [[0, 4, 1], [0, -2, 1], [7, 1, 1]])
def test_nll_loss_target_out_of_range_raises(mode, target):
    _assert_raises_like_cpu(_nll_with_target(target), "out of bounds")


def test_cross_entropy_target_out_of_range_raises(mode):
    _assert_raises_like_cpu(lambda d: F.cross_entropy(torch.randn(2, 3, 5, device=d), torch.full((2, 5), 3, device=d)),
                            "out of bounds")


def test_nll_loss_ignore_index_outside_the_classes_is_accepted(mode):
    def loss(device):
        logp = torch.arange(12.0, device=device).reshape(3, 4).log_softmax(1)
        return F.nll_loss(logp, torch.tensor([0, -100, 3], device=device))

    torch.testing.assert_close(loss("tpu").cpu(), loss("cpu"))


@pytest.mark.parametrize("probs", [[0.0, 0.0, 0.0], [1.0, -1.0, 2.0], [1.0, float("nan"), 2.0],
                                   [1.0, float("inf"), 2.0]])
@pytest.mark.parametrize("replacement", [False, True])
def test_multinomial_invalid_probabilities_raise(mode, probs, replacement):
    _assert_raises_like_cpu(lambda d: torch.multinomial(torch.tensor(probs, device=d), 2, replacement))


def test_multinomial_rows_are_checked_separately(mode):
    _assert_raises_like_cpu(lambda d: torch.multinomial(torch.tensor([[1.0, 2.0], [0.0, 0.0]], device=d), 1))


@pytest.mark.parametrize("op", ["max", "min"])
def test_full_max_min_of_an_empty_tensor_raise(mode, op):
    _assert_raises_like_cpu(lambda d: getattr(torch.ones(0, device=d), op)())
    _assert_raises_like_cpu(lambda d: getattr(torch, op)(torch.ones(2, 0, device=d)))


def test_index_put_with_another_dtype_raises(mode):
    def assign(device):
        x = torch.zeros(4, device=device)
        x[torch.tensor([1], device=device)] = torch.ones(1, dtype=torch.float64, device=device)
        return x

    def index_put(device):
        x = torch.zeros(4, device=device)
        return x.index_put_((torch.tensor([1], device=device),), torch.ones(1, dtype=torch.float64, device=device),
                            accumulate=True)

    _assert_raises_like_cpu(assign)
    _assert_raises_like_cpu(index_put)


_OVERLAPPING_WRITES = {
    "add_out": lambda x: torch.add(x[:-1], 1, out=x[1:]),
    "copy_": lambda x: x[1:].copy_(x[:-1]),
    "in_place_broadcast": lambda x: x.view(2, 3).add_(x.view(2, 3)[0]),
    "index_select_out": lambda x: torch.index_select(x, 0, torch.tensor([0, 1], device=x.device), out=x[1:3]),
    "cat_out": lambda x: torch.cat([x[:2]], out=x[1:3]),
    "foreach": lambda x: torch._foreach_add_([x[:2], x[2:4]], [x[1:3], x[4:6]]),
    "copy_into_expanded": lambda x: x[:3].expand(2, 3).copy_(torch.ones(2, 3, device=x.device)),
}


@pytest.mark.parametrize("write", list(_OVERLAPPING_WRITES))
def test_writes_that_partly_overlap_their_input_raise(mode, write):
    _assert_raises_like_cpu(lambda d: _OVERLAPPING_WRITES[write](torch.arange(6.0, device=d)))


def test_writes_onto_their_own_input_still_work(mode):
    def run(device):
        x = torch.arange(6.0, device=device)
        torch.mul(x, 2, out=x)
        x.add_(x)
        x[::2].copy_(x[1::2])
        return x

    torch.testing.assert_close(run("tpu").cpu(), run("cpu"))


@pytest.mark.parametrize("order", ["tpu_first", "cpu_first"])
def test_cat_of_tensors_on_two_devices_raises(mode, order):
    def cat(device):
        other = "cpu" if device == "tpu" else "meta"
        parts = [torch.ones(2, device=device), torch.ones(2, device=other)]
        return torch.cat(parts if order == "tpu_first" else parts[::-1])

    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        cat("tpu")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.stack([torch.ones(2, device="tpu"), torch.ones(2)])


@pytest.mark.parametrize("call", [
    lambda d: torch._assert_async(torch.tensor(0.0, device=d)),
    lambda d: torch.ops.aten._assert_async.msg(torch.tensor(False, device=d), "the shapes disagree"),
    lambda d: torch._assert_async(torch.tensor([1, 1], device=d)),
], ids=["zero", "message", "two_values"])
def test_assert_async_raises_like_cpu(mode, call):
    _assert_raises_like_cpu(call)


def test_assert_async_of_a_true_value_passes_on_the_device(mode, no_fallback):
    torch._assert_async(torch.tensor(2.5, device="tpu"))
    torch.ops.aten._assert_async.msg(torch.tensor([True], device="tpu"), "never raised")
    torch.tpu.synchronize()
