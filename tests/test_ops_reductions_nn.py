"""Reductions, matrix products, normalization and loss layers, indexing: tpu against CPU.

Every test runs in each eager mode (`mode`) and fails if an op silently ran on the CPU
(`no_fallback`). Backward tests compare the gradients autograd computes through our lowerings.
"""
import pytest
import torch
import torch.nn.functional as F
import torch_tpu

from conftest import assert_same_as_cpu, to_cpu, to_tpu

nan, inf = float("nan"), float("inf")
HALF = (torch.float16, torch.bfloat16)


def same(fn, *args, atol=None, rtol=None, **kwargs):
    """fn on CPU and on tpu copies of its arguments agree (values, dtypes, shapes)."""
    expected = fn(*args, **kwargs)
    actual = fn(*to_tpu(args), **{k: to_tpu(v) for k, v in kwargs.items()})
    torch.testing.assert_close(to_cpu(actual), expected, atol=atol, rtol=rtol, equal_nan=True)


def same_grads(fn, *inputs, atol=None, rtol=None):
    """fn's result and the gradients of its floating-point inputs agree on CPU and tpu."""
    def leaves(device):
        return [x.detach().to(device).requires_grad_(x.is_floating_point()) for x in inputs]

    cpu, tpu = leaves("cpu"), leaves("tpu")
    expected, actual = fn(*cpu), fn(*tpu)
    torch.testing.assert_close(actual.cpu(), expected, atol=atol, rtol=rtol, equal_nan=True)
    seed = torch.randn_like(expected)
    expected.backward(seed)
    actual.backward(seed.to("tpu"))
    for c, t in zip(cpu, tpu):
        if c.grad is not None:
            torch.testing.assert_close(t.grad.cpu(), c.grad, atol=atol, rtol=rtol)


def randn(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape) * scale).to(dtype)


def loose(dtype):
    """Tolerances for half types: PyTorch's CPU kernels round some intermediate results (batch
    sums of bf16 gradients, for one) where we accumulate in f32 and round once, so the two may
    differ by a few ulps even where ours is the closer to the exact value."""
    return dict(atol=3e-2, rtol=3e-2) if dtype in HALF else {}


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
def test_sum_mean_prod(mode, no_fallback, dtype):
    x = randn(3, 4, 5, scale=3).to(dtype)
    same(torch.sum, x)
    same(torch.sum, x, dim=1, keepdim=True)
    same(torch.sum, x, dim=(0, -1))
    same(lambda t: t.sum(1, dtype=torch.float64 if dtype.is_floating_point else torch.int64), x)
    same(lambda t: torch.prod((t.abs() + 1) if dtype != torch.bool else t, 1), x, **loose(dtype))
    same(lambda t: t.prod(), x[:2, :2, 0])
    if dtype.is_floating_point:
        same(torch.mean, x)
        same(torch.mean, x, dim=(0, 2), keepdim=True)
        same(torch.mean, torch.empty(0, 3, dtype=dtype), 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_extremes(mode, no_fallback, dtype):
    x = randn(4, 6, scale=5).to(dtype)
    same(torch.amax, x, 1)
    same(torch.amin, x, (0, 1), keepdim=True)
    same(torch.max, x)
    same(torch.min, x)
    same(torch.max, x, 1)
    same(torch.min, x, 0, keepdim=True)
    same(torch.argmax, x)
    same(torch.argmin, x, 1, keepdim=True)
    same(torch.max, x, randn(4, 6, scale=5).to(dtype))
    same(torch.min, x, randn(6, scale=5).to(dtype))


def test_extremes_nan_and_ties(mode, no_fallback):
    x = torch.tensor([[1.0, nan, 3.0, nan], [2.0, 2.0, -inf, 2.0], [-inf, -inf, -inf, -inf]])
    for fn in (torch.argmax, torch.argmin):
        same(fn, x, 1)
    for fn in (torch.max, torch.min):
        same(fn, x)
        same(fn, x, 1)
        same(fn, x, torch.zeros(4))
    same(torch.amax, x, 1)
    same(torch.argmax, torch.tensor([3, 1, 3, 1]))
    same(torch.argmin, torch.tensor([3, 1, 3, 1]))


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.float32])
def test_any_all(mode, no_fallback, dtype):
    x = (torch.rand(3, 4) > 0.6).to(dtype)
    for fn in (torch.any, torch.all):
        same(fn, x)
        same(fn, x, 1)
        same(fn, x, dim=0, keepdim=True)


@pytest.mark.filterwarnings("ignore:var\\(\\).*degrees of freedom")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_var_std(mode, no_fallback, dtype):
    x = randn(4, 6, 3, dtype=dtype)
    tol = loose(dtype)
    for fn in (torch.var, torch.std, torch.var_mean, torch.std_mean):
        same(fn, x, **tol)
        same(fn, x, 1, keepdim=True, **tol)
        same(lambda t: fn(t, (0, 2), correction=0), x, **tol)
        same(lambda t: fn(t, None, correction=2.5), x, **tol)
    same(torch.var, torch.randn(1, 3), 0)  # nothing left after the correction: nan


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_safe_softmax_zeroes_fully_masked_rows(mode, no_fallback, dtype):
    # Attention's softmax (scaled_dot_product_attention's math path): a row that is all -inf gives
    # 0, not NaN; a row with a NaN stays NaN.
    safe_softmax = torch.ops.aten._safe_softmax
    x = randn(4, 6, dtype=dtype, scale=3)
    x[1] = -inf
    x[2, :3] = -inf
    x[3, 0], x[3, 1] = -inf, nan
    tol = loose(dtype)
    for dim in (0, 1):
        same(safe_softmax, x, dim, **tol)
    same(lambda t: safe_softmax(t, 1, torch.float32), x, **tol)
    same(lambda t: safe_softmax(t, 1, torch.float16), torch.tensor([[-1e10, -1e10], [-inf, -inf]]))
    same(lambda t: safe_softmax(t, 0, torch.float32), torch.tensor([torch.iinfo(torch.int64).min] * 3))
    finite = randn(3, 5, dtype=dtype)
    finite[0] = -inf
    same_grads(lambda t: safe_softmax(t, 1), finite, **tol)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    mask[0] = False  # a query that may attend nowhere
    q, k, v = (randn(2, 3, 5, 4, dtype=dtype) for _ in range(3))
    same_grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.device)), q, k, v, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_logsumexp(mode, no_fallback, dtype):
    x = randn(3, 7, dtype=dtype, scale=3)
    tol = loose(dtype)
    for dim in (0, -1):
        same(torch.softmax, x, dim, **tol)
        same(torch.log_softmax, x, dim, **tol)
        same(torch.logsumexp, x, dim, **tol)
    same(torch.logsumexp, torch.tensor([[-inf, -inf], [inf, 1.0], [nan, 1.0]]), 1)
    same(torch.softmax, torch.tensor([[-inf, 1.0], [-inf, -inf]]), 1)
    same(torch.logsumexp, torch.arange(6).reshape(2, 3), 1)
    same_grads(lambda t: torch.softmax(t, 1), x, **tol)
    same_grads(lambda t: torch.log_softmax(t, 0), x, **tol)
    same_grads(lambda t: torch.logsumexp(t, 1), x, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
def test_cumulative(mode, no_fallback, dtype):
    x = randn(4, 6, scale=3).to(dtype)
    same(torch.cumsum, x, 1, **loose(dtype))
    same(torch.cumsum, x, 0, **loose(dtype))
    if dtype != torch.bool:
        same(torch.cumprod, (torch.rand(3, 5) + 0.5).to(dtype) if dtype.is_floating_point else x, 1,
             **loose(dtype))


@pytest.mark.parametrize("ord", [2, 1, inf, -inf, 0, 3.5])
def test_vector_norm(mode, no_fallback, ord):
    x = randn(4, 5)
    x[0, 0] = 0
    same(torch.linalg.vector_norm, x, ord)
    same(torch.linalg.vector_norm, x, ord, 1, True)
    same(torch.linalg.vector_norm, x.bfloat16(), ord, 0, **loose(torch.bfloat16))
    if ord == 2:
        same(lambda t: t.norm(), x)
        same_grads(lambda t: torch.linalg.vector_norm(t, ord, 1), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_matrix_products(mode, no_fallback, dtype):
    def m(*shape):
        return randn(*shape, scale=2).to(dtype)

    tol = loose(dtype)
    alpha, beta = (2, 3) if dtype == torch.int64 else (0.5, 1.5)
    same(torch.mm, m(3, 4), m(4, 5), **tol)
    same(torch.bmm, m(2, 3, 4), m(2, 4, 5), **tol)
    same(torch.dot, m(6), m(6), **tol)
    same(torch.mv, m(3, 4), m(4), **tol)
    same(torch.matmul, m(2, 3, 4), m(4, 5), **tol)
    same(torch.addmm, m(5), m(3, 4), m(4, 5), beta=beta, alpha=alpha, **tol)
    same(torch.baddbmm, m(2, 3, 5), m(2, 3, 4), m(2, 4, 5), beta=beta, alpha=alpha, **tol)
    same(torch.addbmm, m(3, 5), m(2, 3, 4), m(2, 4, 5), beta=beta, alpha=alpha, **tol)
    same(torch.addmv, m(3), m(3, 4), m(4), beta=beta, alpha=alpha, **tol)


def test_matrix_products_beta_zero_ignores_self(mode, no_fallback):
    a, b = randn(3, 4), randn(4, 5)
    same(torch.addmm, torch.full((3, 5), nan), a, b, beta=0, alpha=2.0)
    same(torch.addmv, torch.full((3,), inf), a, randn(4), beta=0.0)
    same_grads(lambda x, w, bias: F.linear(x, w, bias), randn(3, 4), randn(5, 4), randn(5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norm(mode, no_fallback, dtype):
    x, w, b = randn(2, 3, 8, dtype=dtype), randn(8, dtype=dtype), randn(8, dtype=dtype)
    tol = loose(dtype)
    same_grads(lambda x, w, b: F.layer_norm(x, (8,), w, b), x, w, b, **tol)
    same_grads(lambda x: F.layer_norm(x, (3, 8), eps=1e-3), x, **tol)


def test_group_norm(mode, no_fallback):
    x, w, b = randn(2, 6, 5), randn(6), randn(6)
    same_grads(lambda x, w, b: F.group_norm(x, 3, w, b), x, w, b)
    same_grads(lambda x: F.group_norm(x, 2), x.reshape(2, 6, 5, 1))


def test_batch_norm(mode, no_fallback):
    x, w, b = randn(4, 3, 5), randn(3), randn(3)
    mean, var = randn(3), torch.rand(3) + 0.5
    same_grads(lambda x, w, b: F.batch_norm(x, mean.to(x.device), var.to(x.device), w, b), x, w, b)
    same_grads(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, w, b)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_and_cross_entropy(mode, no_fallback, reduction):
    logits = randn(5, 4)
    target = torch.tensor([0, 3, 1, 2, 1])
    weight = torch.rand(4)
    for ignore in (-100, 1):
        same_grads(lambda x: F.cross_entropy(x, target.to(x.device), reduction=reduction,
                                             ignore_index=ignore), logits)
        same_grads(lambda x, w: F.nll_loss(F.log_softmax(x, 1), target.to(x.device), w.detach(),
                                           reduction=reduction, ignore_index=ignore),
                   logits, weight)
    same_grads(lambda x: F.nll_loss(x, target[0].to(x.device), reduction=reduction), logits[0])
    images, pixels = randn(2, 4, 3, 3), torch.randint(0, 4, (2, 3, 3))
    same_grads(lambda x: F.cross_entropy(x, pixels.to(x.device), weight.to(x.device),
                                         reduction=reduction, ignore_index=2), images)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_and_bce(mode, no_fallback, reduction):
    x, t = randn(3, 4), randn(3, 4)
    same_grads(lambda x, t: F.mse_loss(x, t, reduction=reduction), x, t)
    p, q, w = torch.rand(3, 4).clamp(0.01, 0.99), torch.rand(3, 4), torch.rand(4)
    same_grads(lambda p: F.binary_cross_entropy(p, q.to(p.device), reduction=reduction), p)
    same_grads(lambda p: F.binary_cross_entropy(p, q.to(p.device), w.to(p.device),
                                                reduction=reduction), p)
    same(F.binary_cross_entropy, torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0]),
         reduction=reduction)


def test_embedding_backward(mode, no_fallback):
    weight = randn(6, 4)
    idx = torch.tensor([[0, 2, 2], [5, 0, 1]])
    same_grads(lambda w: F.embedding(idx.to(w.device), w), weight)
    same_grads(lambda w: F.embedding(idx.to(w.device), w, padding_idx=2), weight)
    same_grads(lambda w: F.embedding(idx.to(w.device), w, scale_grad_by_freq=True), weight)
    same_grads(lambda w: F.embedding(idx.int().to(w.device), w, padding_idx=0), weight.bfloat16(),
               **loose(torch.bfloat16))


def test_dropout_backward(mode, no_fallback):
    x = (torch.rand(8, 16) + 0.5).to("tpu").requires_grad_()
    y = F.dropout(x, 0.3, training=True)
    y.backward(torch.ones_like(y))
    kept = (y.detach() != 0).cpu()
    torch.testing.assert_close(x.grad.cpu(), kept.float() / 0.7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_cat(mode, no_fallback, dtype):
    parts = [randn(2, k, scale=3).to(dtype) for k in (1, 3, 0, 2)]
    same(torch.cat, parts, 1)
    same(torch.cat, [randn(2, 3).to(dtype), torch.empty(0), randn(1, 3).to(dtype)])
    same(torch.cat, [randn(2, 3).to(dtype), torch.randint(0, 4, (2, 3))], -1)
    same(torch.stack, [randn(2, 3).to(dtype), randn(2, 3).to(dtype)], 1)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_gather_scatter(mode, no_fallback):
    x = randn(4, 5)
    idx = torch.tensor([[0, 1, 4], [2, 2, 0]])
    same(torch.index_select, x, 1, torch.tensor([4, 0, 0]))
    same(torch.index_select, x, 0, torch.tensor([3, 1], dtype=torch.int32))
    same(torch.gather, x, 1, idx)
    same(torch.scatter, x, 1, torch.tensor([[4, 1, 0, 3, 2]]), randn(2, 6))
    same(torch.scatter, x, 1, idx, 2.5)
    same(lambda *a: torch.scatter(*a, reduce="multiply"), x, 1, idx, randn(2, 3))
    same(torch.scatter_add, x, 1, idx, randn(2, 3))
    same(torch.index_add, x, 0, torch.tensor([1, 1, 3]), randn(3, 5), alpha=2)
    same(torch.index_add, torch.arange(6).reshape(2, 3), 1, torch.tensor([2, 2]),
         torch.ones(2, 2, dtype=torch.int64))
    for reduce in ("sum", "prod", "mean"):
        same(lambda *a: torch.scatter_reduce(*a, reduce, include_self=False),
             x, 1, idx, randn(2, 3))
    same(lambda *a: torch.scatter_reduce(*a, "amax"), torch.arange(8).reshape(2, 4), 1,
         torch.tensor([[0, 0, 3]]), torch.tensor([[5, -2, 1]]))
    same_grads(lambda t: torch.gather(t, 1, idx.to(t.device)), x)
    same_grads(lambda t: t.index_select(0, torch.tensor([3, 3, 0], device=t.device)), x)


def test_advanced_indexing(mode, no_fallback):
    x = randn(4, 5, 6)
    i, j = torch.tensor([0, 3, -1]), torch.tensor([[1], [4]])
    same(lambda t: t[to_like(i, t)], x)
    same(lambda t: t[:, to_like(j, t)], x)
    same(lambda t: t[to_like(i, t), to_like(j, t)], x)
    same(lambda t: t[to_like(i, t), :, to_like(torch.tensor([5, 0, 1]), t)], x)
    same_grads(lambda t: t[to_like(torch.tensor([0, 0, 2]), t)], x)

    def put(t, index, value, accumulate=False):
        t = t.clone()
        return t.index_put_(index, value, accumulate=accumulate)

    same(lambda t: put(t, (to_like(i, t),), torch.ones(3, 5, 6, device=t.device)), x)
    same(lambda t: put(t, (to_like(torch.tensor([0, 0, 2]), t),),
                       torch.ones(5, 6, device=t.device), True), x)
    same(lambda t: put(t, (to_like(torch.tensor([1, 1]), t), to_like(torch.tensor([2, 2]), t)),
                       torch.arange(6.0, device=t.device), True), x)

    def masked_assign(t, value):
        t = t.clone()
        t[t > 0] = value
        return t

    same(lambda t: masked_assign(t, 0.0), x)
    same(lambda t: masked_assign(t, torch.tensor(-1.0, device=t.device)), x)


def to_like(index, t):
    return index.to(t.device)


def test_rearrangements(mode, no_fallback):
    x = randn(3, 4, 5)
    same(F.pad, x, (1, 2), value=0.5)
    same(F.pad, x, (1, 2, -1, 0, 0, 3))
    same(torch.flip, x, (0, -1))
    same(torch.roll, x, 2, 1)
    same(torch.roll, x, (-7, 3), (2, 0))
    same(torch.roll, x, 5)
    for diagonal in (-1, 0, 2):
        same(torch.tril, x, diagonal)
        same(torch.triu, x, diagonal)
    same(torch.clone, x)
    same_grads(lambda t: torch.tril(F.pad(t, (1, 1)).flip(0)), x)


@pytest.mark.parametrize("args,kwargs", [((3, 4), {}), ((5,), {}), ((4, 2), {"dtype": torch.int64}), ((0, 3), {}),
                                         ((3,), {"dtype": torch.bool})])
def test_eye(mode, args, kwargs, no_fallback):
    got, want = torch.eye(*args, device="tpu", **kwargs), torch.eye(*args, **kwargs)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)


def test_arange(mode, no_fallback):
    def both(*args, **kwargs):
        expected = torch.arange(*args, **kwargs)
        actual = torch.arange(*args, device="tpu", **kwargs)
        torch.testing.assert_close(actual.cpu(), expected)

    both(5)
    both(2, 9)
    both(0, 1, 0.1)
    both(10, -3, -2.5)
    both(0, 5, 1.5, dtype=torch.int64)
    both(0, 10, 1, dtype=torch.bfloat16)
    both(0.5, 4.0, 0.25, dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32])
def test_linspace(mode, no_fallback, dtype):
    # CPU steps from each end half way; integer results truncate a float64 ramp.
    for start, end, steps in ((0, 1, 7), (-3, 5, 9), (2.5, -4, 10), (0.1, 1, 1001), (3, 3, 4),
                              (1, 2, 1), (1, 2, 0), (-7, 7, 2)):
        expected = torch.linspace(start, end, steps, dtype=dtype)
        actual = torch.linspace(start, end, steps, dtype=dtype, device="tpu")
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        torch.testing.assert_close(actual.cpu(), expected, atol=0, rtol=2e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_sort_topk(mode, no_fallback, dtype):
    x = randn(4, 7, scale=3).to(dtype)
    if dtype.is_floating_point:
        x[0, 1] = nan
        x[1, 2:5] = 1.0
    for descending in (False, True):
        same(lambda t: torch.sort(t, stable=True, dim=1, descending=descending), x)
        same(lambda t: torch.sort(t, 0, descending), x)
    y = torch.randperm(28).reshape(4, 7).to(dtype)
    same(torch.topk, y, 3)
    same(torch.topk, y, 2, 0, False)
    same(torch.argsort, y, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_mode_picks_cpus_value_and_an_index_of_it(mode, no_fallback, dtype):
    # Ties between values go to the smallest; the index is one of the value's places (CPU's is the
    # last in its own sort order, which on small inputs is the last place).
    x = torch.randint(0, 4, (3, 9, 6), generator=torch.Generator().manual_seed(1)).to(dtype)
    for dim, keepdim in ((1, False), (-1, True), (0, False)):
        want = torch.mode(x, dim, keepdim)
        got = torch.mode(x.to("tpu"), dim, keepdim)
        torch.testing.assert_close(got.values.cpu(), want.values)
        picked = x.gather(dim, got.indices.cpu() if keepdim else got.indices.cpu().unsqueeze(dim))
        torch.testing.assert_close(picked if keepdim else picked.squeeze(dim), want.values)
    torch.testing.assert_close(torch.mode(x[0, :, 0].to("tpu")).indices.cpu(), torch.mode(x[0, :, 0]).indices)


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_resizing_uint8_images_rounds_and_saturates_like_cpu(mode, no_fallback, interpolation):
    # uint8 images used to be weighted in an integer dtype, which made the result garbage.
    # CPU rounds fixed-point sums; ours are f32, so at most one level may differ now and then.
    image = torch.randint(0, 256, (2, 3, 7, 9), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    for align_corners in (False, True):
        expected = F.interpolate(image, size=(11, 5), mode=interpolation, align_corners=align_corners)
        actual = F.interpolate(image.to("tpu"), size=(11, 5), mode=interpolation, align_corners=align_corners)
        assert actual.dtype == torch.uint8
        difference = (actual.cpu().int() - expected.int()).abs()
        assert difference.max() <= 1 and (difference > 0).float().mean() < 0.02


@pytest.mark.parametrize("options", [dict(scale_factor=2, mode="bilinear", align_corners=True),
                                     dict(size=(9, 4), mode="bilinear"),
                                     dict(scale_factor=1.7, mode="bicubic"),
                                     dict(size=(11, 13), mode="bicubic", align_corners=True)],
                         ids=["bilinear_corners", "bilinear_size", "bicubic_scale", "bicubic_corners"])
def test_float64_resizing_weighs_in_float64_like_cpu(mode, no_fallback, options):
    # CPU computes a float64 image's positions and weights in float64: float32 weights would be
    # 1e-8 off, which a network's float64 check (and anything ill-conditioned after it) sees.
    x = torch.randn(2, 3, 5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x.requires_grad_()
    expected = F.interpolate(x, **options)
    expected_grad, = torch.autograd.grad(expected.square().sum(), x)
    on_tpu = x.detach().to("tpu").requires_grad_()
    actual = F.interpolate(on_tpu, **options)
    actual_grad, = torch.autograd.grad(actual.square().sum(), on_tpu)
    torch.testing.assert_close(actual.cpu(), expected, atol=1e-13, rtol=1e-13)
    torch.testing.assert_close(actual_grad.cpu(), expected_grad, atol=1e-12, rtol=1e-12)


ANTIALIASED_RESIZES = {
    "bilinear": lambda x, size, corners: F.interpolate(x, size=size, mode="bilinear", antialias=True,
                                                       align_corners=corners),
    "bicubic": lambda x, size, corners: F.interpolate(x, size=size, mode="bicubic", antialias=True,
                                                      align_corners=corners),
    "lanczos": lambda x, size, corners: torch.ops.aten._upsample_lanczos2d_aa(x, list(size), corners),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("resize", sorted(ANTIALIASED_RESIZES))
def test_antialiased_resizing_and_its_backward_match_cpu(mode, no_fallback, resize, dtype):
    # Shrinking widens the filter (its window per output grows with the scale); 7 -> 3 and
    # 9 -> 5 put a window's edge just below an integer, where a fused multiply-add moved it.
    fn = ANTIALIASED_RESIZES[resize]
    g = torch.Generator().manual_seed(0)
    cases = [((1, 2, 9, 7), (9, 3), False), ((2, 3, 8, 9), (16, 5), False), ((1, 1, 20, 20), (7, 7), True)]
    if dtype == torch.float64:
        cases = [((1, 2, 17, 13), (5, 4), False)]
    for shape, size, corners in cases:
        x = torch.randn(*shape, dtype=dtype, generator=g, requires_grad=True)
        expected = fn(x, size, corners)
        weights = torch.randn(expected.shape, dtype=dtype, generator=g)
        expected_grad, = torch.autograd.grad((expected * weights).sum(), x)
        on_tpu = x.detach().to("tpu").requires_grad_()
        actual = fn(on_tpu, size, corners)
        actual_grad, = torch.autograd.grad((actual * weights.to("tpu")).sum(), on_tpu)
        torch.testing.assert_close(actual.cpu(), expected, msg=lambda m: f"{shape} -> {size}: {m}")
        torch.testing.assert_close(actual_grad.cpu(), expected_grad, msg=lambda m: f"{shape} -> {size}: {m}")


def test_antialiased_resizing_by_a_scale_factor_matches_cpu(mode, no_fallback):
    x = torch.randn(2, 3, 23, 17, generator=torch.Generator().manual_seed(1))
    assert_same_as_cpu(lambda t: F.interpolate(t, scale_factor=0.37, mode="bilinear", antialias=True), x)
    assert_same_as_cpu(lambda t: F.interpolate(t, scale_factor=(0.5, 2.0), mode="bicubic", antialias=True), x)


def random_grid(n, h, w, reach=1.3, dtype=torch.float32):
    """Sampling points spread over [-reach, reach]: some inside the image, some past its edges."""
    return ((torch.rand(n, h, w, 2) * 2 - 1) * reach).to(dtype)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
def test_grid_sample(mode, no_fallback, interpolation, padding_mode, align_corners):
    # Reflection folds points from well past the edges (up to two periods) back into the image.
    reach = 2.7 if padding_mode == "reflection" else 1.3
    x, grid = randn(2, 3, 5, 7), random_grid(2, 4, 6, reach)
    same_grads(lambda x, grid: F.grid_sample(x, grid, mode=interpolation, padding_mode=padding_mode,
                                             align_corners=align_corners), x, grid)


def test_grid_sample_nearest_rounds_ties_to_even(mode, no_fallback):
    # With align_corners=False and width 4 these points fall on -0.5, 0.5, 1.5, 2.5 and 3.5 pixels:
    # -0.5 rounds to pixel 0 (half away from zero would leave the image and read zero) and 3.5 to
    # pixel 4, outside.
    values = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0])
    grid = torch.stack(torch.meshgrid(values, values, indexing="xy"), dim=-1)[None]
    x = torch.arange(1.0, 17.0).reshape(1, 1, 4, 4)
    same(lambda x, grid: F.grid_sample(x, grid, mode="nearest", align_corners=False), x, grid)


def test_grid_sample_gradient_of_the_grid_alone(mode, no_fallback):
    # A fixed image sampled at learned points (deformable attention's offsets): output_mask asks
    # for no input gradient.
    x, grid = randn(2, 4, 6, 5), random_grid(2, 3, 8)
    grids = [grid.clone().requires_grad_(), grid.to("tpu").requires_grad_()]
    outs = [F.grid_sample(x.to(g.device), g, align_corners=False) for g in grids]
    seed = torch.randn_like(outs[0])
    outs[0].backward(seed)
    outs[1].backward(seed.to("tpu"))
    torch.testing.assert_close(outs[1].cpu(), outs[0])
    torch.testing.assert_close(grids[1].grad.cpu(), grids[0].grad)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_grid_sample_dtypes(mode, no_fallback, dtype):
    x, grid = randn(1, 2, 6, 4, dtype=dtype), random_grid(1, 5, 3, dtype=dtype)
    if dtype == torch.float64:
        same_grads(lambda x, grid: F.grid_sample(x, grid, padding_mode="border", align_corners=True), x, grid)
        return
    # Half types are sampled in f32 and rounded once; CPU's kernels round each step in bf16, so the
    # reference is CPU's float32 result on the same values, rounded.
    def run(x, grid):
        x, grid = x.requires_grad_(), grid.requires_grad_()
        out = F.grid_sample(x, grid, align_corners=False)
        out.backward(torch.ones_like(out))
        return [out, x.grad, grid.grad]

    expected = [t.to(dtype) for t in run(x.float(), grid.float())]
    actual = run(x.to("tpu"), grid.to("tpu"))
    for e, a in zip(expected, actual):
        assert a.dtype == dtype
        torch.testing.assert_close(a.cpu(), e)


@pytest.mark.filterwarnings("ignore:tpu. aten..grid_sampler_2d is not lowered")
def test_grid_sample_bicubic_still_runs_on_cpu(mode):
    x, grid = randn(1, 2, 5, 6), random_grid(1, 3, 4)
    torch_tpu.reset_fallback_counts()
    same(lambda x, grid: F.grid_sample(x, grid, mode="bicubic", align_corners=False), x, grid)
    assert any("grid_sampler_2d" in op for op in torch_tpu.fallback_counts())
