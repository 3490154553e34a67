"""Out-of-range indices raise what CPU raises instead of being clamped (XLA's gather clamps them,
its scatter drops them).

Debug mode raises at the op. Strict and defer-and-fuse launch the op without waiting, so the device
flags the bad index and the error comes at the next sync point at the latest (a host read or
torch.tpu.synchronize()), naming the op.
"""
import pytest
import torch

import torch_tpu

from conftest import assert_same_as_cpu


def _x():
    return torch.arange(12.0).reshape(3, 4)


# name -> (the call, the ATen op the error names, the exception CPU raises)
CASES = {
    "index_select": (lambda x: torch.index_select(x, 0, torch.tensor([0, 3], device=x.device)),
                     "index_select", IndexError),
    "embedding": (lambda x: torch.nn.functional.embedding(torch.tensor([[1, 5]], device=x.device), x),
                  "index_select", IndexError),
    "gather": (lambda x: torch.gather(x, 1, torch.tensor([[0, 4]], device=x.device)), "gather", RuntimeError),
    "index": (lambda x: x[torch.tensor([1, -4], device=x.device)], "index", IndexError),
    "index_put_": (lambda x: x.index_put_((torch.tensor([3], device=x.device),), torch.tensor(1.0)),
                   "index_put", IndexError),
    "index_add": (lambda x: x.index_add(0, torch.tensor([5], device=x.device), torch.ones(1, 4, device=x.device)),
                  "index_add", RuntimeError),
    "scatter_add": (lambda x: x.scatter_add(0, torch.tensor([[7, 0, 0, 0]], device=x.device),
                                            torch.ones(1, 4, device=x.device)),
                    "scatter_add", RuntimeError),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_raises_the_same_type(case):
    fn, _, error = CASES[case]
    with pytest.raises(error):
        fn(_x())


@pytest.mark.parametrize("case", sorted(CASES))
def test_out_of_range_index_raises(mode, case):
    fn, op, error = CASES[case]
    x = _x().to("tpu")
    with pytest.raises(error, match=op) as info:
        result = fn(x)
        if mode == "debug":
            pytest.fail("debug mode must raise at the op")
        torch.tpu.synchronize()
    assert "out of range" in str(info.value)
    # The error was reported once; the device keeps working.
    torch.tpu.synchronize()
    assert_same_as_cpu(lambda t: t * 2, _x())


def test_negative_index_select_raises(mode):
    # CPU raises a RuntimeError from its vectorized kernel here and an IndexError for indices past
    # the end; the device cannot tell the two apart, and reports both as IndexError.
    x = _x().to("tpu")
    with pytest.raises(IndexError, match="index_select"):
        torch.index_select(x, 1, torch.tensor([-1], device="tpu"))
        torch.tpu.synchronize()


def test_raises_at_the_next_host_read(mode):
    """Reading any value, even one the bad op did not touch, is a sync point that raises."""
    x = _x().to("tpu")
    with pytest.raises(IndexError, match="index_select") as info:
        y = torch.index_select(x, 0, torch.tensor([9], device="tpu"))
        z = x.sum()
        assert mode != "debug", "debug mode must raise at the op"
        z.item()
    assert "out of range" in str(info.value)


def test_in_range_indices_do_not_raise(mode):
    assert_same_as_cpu(lambda t, i: torch.index_select(t, 0, i), _x(), torch.tensor([2, 0]))
    assert_same_as_cpu(lambda t, i: torch.gather(t, 1, i), _x(), torch.tensor([[3], [0], [1]]))
    assert_same_as_cpu(lambda t, i: t[i], _x(), torch.tensor([-3, 2]))
    assert_same_as_cpu(lambda t, i: torch.nn.functional.embedding(i, t), _x(), torch.tensor([[0, 2]]))
    assert_same_as_cpu(lambda t, i: t.index_put((i,), torch.tensor(5.0)), _x(), torch.tensor([-1]))
    torch.tpu.synchronize()
