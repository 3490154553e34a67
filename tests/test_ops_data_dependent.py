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


def _put(t, m, v, accumulate):
    t = t.clone()
    t.index_put_((m,), v, accumulate=accumulate)
    return t


def test_boolean_mask_index_put(mode, no_fallback):
    x = _x()
    rows = torch.tensor([True, False, True, True])
    assert_same_as_cpu(lambda t, m, v: _put(t, m, v, False), x, rows, torch.arange(15.0).reshape(3, 5))
    assert_same_as_cpu(lambda t, m, v: _put(t, m, v, True), x, rows, torch.arange(5.0))
    assert_same_as_cpu(lambda t, m, v: _put(t, m, v, True), x, x > 0, torch.ones(int((x > 0).sum())))

    def set_masked(t, m, v):
        t = t.clone()
        t[:, m] = v
        return t
    assert_same_as_cpu(set_masked, x, torch.tensor([False, True, False, True, True]), torch.arange(12.0).reshape(4, 3))


def test_boolean_mask_indexing_backward(mode, no_fallback):
    # x[mask]'s gradient is an accumulating index_put with the mask (multimodal
    # embedding merges in audio and vision language models, masked losses).
    x = _x()
    mask = x > 0

    def grad_of(t, m):
        t = t.clone().requires_grad_()
        (t[m] * torch.arange(1.0, int(m.sum()) + 1, device=t.device)).sum().backward()
        return t.grad
    assert_same_as_cpu(grad_of, x, mask)


def test_boolean_mask_of_another_shape_raises_like_cpu(mode):
    x = _x()
    for device in ("cpu", "tpu"):
        with pytest.raises(IndexError, match=r"The shape of the mask \[3\] at index 0 does not match"):
            x.to(device).index_put_((torch.tensor([True, False, True], device=device),), torch.tensor(1.0, device=device))


def test_index_tensors_on_the_cpu_index_a_tpu_tensor(mode, no_fallback):
    # As on CUDA: the indices are uploaded (DETR's matcher computes them on the CPU with scipy).
    rows, cols = torch.tensor([3, 0, 3]), torch.tensor([1, 2, 0])
    mask = torch.tensor([True, False, True, True])
    assert_same_as_cpu(lambda t: t[rows, cols], _x())
    assert_same_as_cpu(lambda t: t[mask], _x())
    assert_same_as_cpu(lambda t: t.clone().index_put_((rows,), torch.tensor(7.0).to(t.device)), _x())
    x = _x().requires_grad_()
    on_tpu = x.detach().to("tpu").requires_grad_()
    (x[rows, cols] * torch.arange(3.0)).sum().backward()
    (on_tpu[rows, cols] * torch.arange(3.0, device="tpu")).sum().backward()
    assert torch.equal(on_tpu.grad.cpu(), x.grad)


def test_bincount(mode, no_fallback):
    values = torch.tensor([4, 1, 1, 0, 7, 4, 4])
    assert_same_as_cpu(torch.bincount, values)
    assert_same_as_cpu(lambda v: torch.bincount(v, minlength=12), values)
    assert_same_as_cpu(lambda v: torch.bincount(v, minlength=3), torch.tensor([], dtype=torch.long))
    assert_same_as_cpu(torch.bincount, values.to(torch.uint8))
    # float32 weights count in float32, other weights in float64, as on the CPU
    for dtype in (torch.float32, torch.float64, torch.int32):
        weights = torch.arange(7).to(dtype) / 2 if dtype.is_floating_point else torch.arange(7, dtype=dtype)
        assert_same_as_cpu(lambda v, w: torch.bincount(v, w), values, weights)


@pytest.mark.parametrize("bad, error, match", [
    (lambda: torch.bincount(torch.tensor([[1, 2]])), RuntimeError, "1-d non-negative"),
    (lambda: torch.bincount(torch.tensor([3, -1, 2])), RuntimeError, "1-d non-negative"),
    (lambda: torch.bincount(torch.tensor([1.0, 2.0])), NotImplementedError, "Float"),
    (lambda: torch.bincount(torch.tensor([1, 2]), minlength=-1), RuntimeError, "minlength"),
    (lambda: torch.bincount(torch.tensor([1, 2]), torch.ones(3)), RuntimeError, "same length"),
])
def test_bincount_bad_input_raises_like_cpu(mode, bad, error, match):
    with pytest.raises(error, match=match):
        bad()  # the CPU's
    with torch.device("tpu"):
        with pytest.raises(error, match=match):
            bad()


def test_unique(mode, no_fallback):
    x = torch.tensor([[3.0, float("nan"), 1.0], [float("nan"), 3.0, -2.0]])
    for kwargs in ({}, {"return_inverse": True}, {"return_counts": True},
                   {"return_inverse": True, "return_counts": True}):
        assert_same_as_cpu(lambda t: torch.unique(t, **kwargs), x)
        assert_same_as_cpu(lambda t: torch.unique(t, **kwargs), torch.tensor([5, 1, 5, 5, 0, 1]))
        assert_same_as_cpu(lambda t: torch.unique(t, **kwargs), torch.tensor([True, False, True]))
        assert_same_as_cpu(lambda t: torch.unique(t, **kwargs), torch.tensor([], dtype=torch.long))
    # Each unrequested result is empty, as the CPU returns it.
    assert_same_as_cpu(lambda t: torch.ops.aten._unique2(t, True, False, False), torch.tensor([[2, 1], [2, 0]]))
    values, inverse = torch.unique(torch.tensor([3, 1, 3, 2]).to("tpu"), sorted=False, return_inverse=True)
    assert torch.equal(values.cpu()[inverse.cpu()], torch.tensor([3, 1, 3, 2]))
