"""Ops whose result shape depends on the data (nonzero, masked_select, boolean-mask indexing) or
whose result is a host value (equal), in every mode, against CPU and without the CPU fallback."""
import pytest
import torch

from conftest import assert_same_as_cpu


def _x():
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    x[x.abs() < 0.5] = 0
    return x


def test_nonzero(mode, no_fallback):
    assert_same_as_cpu(torch.nonzero, _x())
    assert_same_as_cpu(torch.nonzero, torch.zeros(3, 2))
    assert_same_as_cpu(torch.nonzero, torch.tensor(2.0))
    assert_same_as_cpu(lambda t: torch.nonzero(t, as_tuple=True), _x())
    assert_same_as_cpu(torch.argwhere, _x() > 0)


def test_nonzero_static(mode, no_fallback):
    assert_same_as_cpu(lambda t: torch.nonzero_static(t, size=30), _x())
    assert_same_as_cpu(lambda t: torch.nonzero_static(t, size=2, fill_value=7), _x())


def test_masked_select_and_boolean_indexing(mode, no_fallback):
    x = _x()
    assert_same_as_cpu(torch.masked_select, x, x > 0)
    assert_same_as_cpu(torch.masked_select, x, torch.tensor([True, False, True, False, True]))
    assert_same_as_cpu(lambda t, m: t[m], x, x < 0)
    assert_same_as_cpu(lambda t, m: t[m], x, torch.tensor([True, False, True, True]))
    assert_same_as_cpu(lambda t, m: t[:, m], x, torch.tensor([False, True, False, True, True]))


def test_masked_scatter(mode, no_fallback):
    x = _x()
    source = torch.arange(20.0).reshape(4, 5)
    assert_same_as_cpu(lambda t, m, s: t.masked_scatter(m, s), x, x > 0, source)
    assert_same_as_cpu(lambda t, m, s: t.clone().masked_scatter_(m, s), x,
                       torch.tensor([True, False, False, True, False]), source)


def test_equal(mode, no_fallback):
    x = _x().to("tpu")
    assert torch.equal(x, x.clone()) is True
    y = x.clone()
    y[1, 2] += 1
    assert torch.equal(x, y) is False
    assert torch.equal(x, x[:, :4]) is False
    assert torch.equal(torch.tensor([float("nan")], device="tpu"), torch.tensor([float("nan")], device="tpu")) is \
        torch.equal(torch.tensor([float("nan")]), torch.tensor([float("nan")]))


def test_bad_mask_dtype_raises_like_cpu(mode):
    x = _x()
    with pytest.raises(RuntimeError, match="BoolTensor"):
        torch.masked_select(x, x.long())
    with pytest.raises(RuntimeError, match="BoolTensor"):
        torch.masked_select(x.to("tpu"), x.long().to("tpu"))
