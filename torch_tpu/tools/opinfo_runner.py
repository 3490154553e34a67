"""Runs PyTorch's OpInfo samples on the tpu device against CPU; shared by the coverage tool and
tests/test_opinfo.py.

Samples are generated on the CPU and copied to tpu, so both sides see identical data. A sample
whose CPU reference itself raises is skipped (PyTorch's sample generators occasionally produce
inputs the CPU kernel rejects on purpose). Results are compared with torch.testing.assert_close
at PyTorch's default per-dtype tolerances, except for the few ops listed in TOLERANCES.

Besides forward and backward, two checks of PyTorch's own device tests (test_ops.py): run_out
calls ops that support out= with out= tensors (test_out's first case), and run_forward /
run_backward with noncontiguous=True take each sample's non-contiguous version
(test_noncontiguous_samples). Each check reports its own Outcome, so one failing hides no other.
"""
import dataclasses
import math
import time

import torch

import torch_tpu

# Ops whose results are random or unspecified (memory left uninitialised): only the dtypes and
# shapes of the results can be compared with the CPU's.
METADATA_ONLY = {
    "bernoulli", "normal", "normal.number_mean", "normal.in_place", "uniform", "multinomial",
    "cauchy", "exponential", "geometric", "log_normal", "rand_like", "randn_like", "randint",
    "randint_like", "randn", "rand", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.feature_alpha_dropout.without_train",
    "nn.functional.rrelu", "empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
    "empty_permuted", "torch.empty_permuted", "nn.functional.multi_head_attention_forward",
    "randint_like", "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
}

# Samples whose results are random although their op is not always: attention with dropout.
def _is_random(key, sample):
    return key in METADATA_ONLY or (key == "nn.functional.scaled_dot_product_attention"
                                    and sample.kwargs.get("dropout_p", 0.0) > 0)


# op -> positions (in sample.args) of arguments PyTorch requires on the CPU whatever the device
# of the input, as on CUDA: they stay there.
HOST_ARGUMENTS = {"tensor_split": {0}}

# op -> (atol, rtol, why the default tolerance is too tight for a correct result).
_POLYGAMMA = (1e-5, 3e-5, "psi^(n) is ill-conditioned near its poles and zeros: f32 results "
              "differ from CPU's by up to 2e-5 relative there (CPU's own f32 trigamma is 1e-3 "
              "from the f64 value at x = -8.0008)")
_ACCUMULATION = ("sums of hundreds of f32 products, accumulated in another order than CPU's: the "
                 "largest samples differ by 2e-7 of their largest value, and both results are as far "
                 "from the float64 one")
_FFT_SUMS = ("each output of a multi-dimensional FFT sums every input value (210 in OpInfo's 3-D sample), "
             "in XLA's order rather than pocketfft's: the largest difference, 2.3e-5 on outputs up to 251, "
             "is 1e-7 of the largest output, and CPU's result is as far (2.2e-5) from the float64 one")
_BESSEL_FITS = ("CPU's Bessel J / Y kernels are rational fits good to about 1e-7, in float64 too (3e-7 off "
                "near x = 5); the tpu's are accurate to float64's rounding (tests/test_special_functions.py "
                "checks them by the Wronskian)")
TOLERANCES = {
    **{f"polygamma.polygamma_n_{n}": _POLYGAMMA for n in range(5)},
    "special.polygamma.special_polygamma_n_0": _POLYGAMMA,
    "digamma": (1e-5, 3e-5, "its gradient is polygamma(1, x); see polygamma"),
    "erfinv": (1e-5, 1e-5, "the gradient exp(erfinv(x)^2) magnifies a 1-ulp difference of erfinv "
                           "near +-1 into 6e-6 relative"),
    **{name: (5e-5, 1.3e-6, _ACCUMULATION) for name in ("matmul", "__rmatmul__", "nn.functional.conv2d",
                                                        "nn.functional.scaled_dot_product_attention")},
    **{name: (3e-4, 1.3e-6, _ACCUMULATION) for name in ("nn.functional.conv3d", "nn.functional.conv_transpose3d")},
    **{name: (5e-5, 1.3e-6, _FFT_SUMS) for name in ("fft.hfft2", "fft.hfftn")},
    **{f"special.bessel_{name}": (1e-6, 1e-6, _BESSEL_FITS) for name in ("j0", "j1", "y0", "y1")},
}


def op_key(op):
    """The OpInfo's unique name: `name` or `name.variant_test_name`."""
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def load_ops():
    """(ops, excluded): every OpInfo that supports float32 on CPU and is not a sparse-layout or
    CUDA-only entry; `excluded` maps each other entry to why it is left out."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops, excluded = [], {}
    for op in op_db:
        key = op_key(op)
        dtypes = op.supported_dtypes("cpu")
        if "sparse" in op.name:
            excluded[key] = "sparse layout"
        elif op.name.startswith("jiterator_"):
            # Its dtype list claims CPU, but torch.cuda.jiterator raises on CPU for every sample.
            excluded[key] = "CUDA-only (torch.cuda.jiterator): no CPU reference to compare with"
        elif torch.float32 not in dtypes:
            if dtypes and all(d.is_complex for d in dtypes):
                excluded[key] = "complex only"
            else:
                excluded[key] = "no float32 on CPU: " + ",".join(str(d).replace("torch.", "")
                                                                   for d in sorted(dtypes, key=str))
        else:
            ops.append(op)
    return ops, excluded


def _map(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return [_map(v, fn) for v in value] if not isinstance(value, tuple) else \
            tuple(_map(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return value


def _flatten(value, out):
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _flatten(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _flatten(v, out)
    return out


def _to_cpu(value):
    return _map(value, lambda t: t.detach().cpu())


def _call(op, sample, inputs, **extra):
    first, args, kwargs = inputs
    return op.op(first, *args, **kwargs, **extra)


def _cpu_inputs(sample):
    return sample.input, tuple(sample.args), dict(sample.kwargs)


def _same_layout_on_tpu(t):
    """t on tpu; a view into a larger storage keeps that storage around it (its offset and the
    elements outside it), since ops such as as_strided address the storage, not the view."""
    if t.layout != torch.strided or t.numel() == 0:
        return t.to("tpu")
    storage_elements = t.untyped_storage().nbytes() // t.element_size()
    if t.storage_offset() == 0 and storage_elements == t.numel():
        return t.to("tpu")
    whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (storage_elements,), (1,))
    return whole.to("tpu").as_strided(t.shape, t.stride(), t.storage_offset())


def _tpu_inputs(sample, memo, key=""):
    """The sample's tensors copied to tpu; one tpu tensor per distinct CPU tensor, keeping
    requires_grad (the copies are leaves). HOST_ARGUMENTS stay where they are."""
    def move(t):
        if id(t) not in memo:
            moved = _same_layout_on_tpu(t.detach())
            if t.requires_grad:
                moved.requires_grad_(True)
            memo[id(t)] = (t, moved)
        return memo[id(t)][1]

    first, args, kwargs = _map(_cpu_inputs(sample), move)
    kept = HOST_ARGUMENTS.get(key, ())
    args = tuple(sample.args[i] if i in kept else a for i, a in enumerate(args))
    return first, args, kwargs


def _compare(op_name, actual, expected, metadata_only=False):
    if metadata_only:
        a, e = _flatten(actual, []), _flatten(expected, [])
        assert len(a) == len(e), f"{len(a)} tensors, expected {len(e)}"
        for x, y in zip(a, e):
            assert x.dtype == y.dtype and x.shape == y.shape, \
                f"{x.dtype}{list(x.shape)} != {y.dtype}{list(y.shape)}"
        return
    atol, rtol = TOLERANCES.get(op_name, (None, None, ""))[:2]
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)


# Ops that may return equal values in any order (PyTorch promises nothing about ties unless
# stable=True, and CPU's own order changes with the input's size): name -> where `dim` is among
# the positional arguments after the input (None: never), and its default. Their indices are
# checked by what they pick from the input, not by position, and their gradients per group of
# equal values.
TIES_IN_ANY_ORDER = {"sort": (0, -1), "argsort": (0, -1), "topk": (1, -1), "kthvalue": (1, -1),
                     "msort": (None, 0), "mode": (0, -1)}


def _tie_dim(op_name, sample):
    position, default = TIES_IN_ANY_ORDER[op_name]
    args = sample.args
    return sample.kwargs.get("dim", args[position] if position is not None and len(args) > position else default)


def _indices_pick_the_values(op_name, sample, actual, expected):
    dim = _tie_dim(op_name, sample)
    x = sample.input.detach()
    if op_name == "msort":  # values only
        torch.testing.assert_close(actual, expected, equal_nan=True)
        return
    if x.dim() == 0:
        x = x.reshape(1)
    actual_indices = actual if op_name == "argsort" else actual[1]
    expected_indices = expected if op_name == "argsort" else expected[1]
    if op_name != "argsort":
        torch.testing.assert_close(actual[0], expected[0], equal_nan=True)  # the values themselves
    if actual_indices.dim() < x.dim():  # kthvalue without keepdim
        actual_indices = actual_indices.unsqueeze(dim)
        expected_indices = expected_indices.unsqueeze(dim)
    torch.testing.assert_close(actual_indices.shape, expected_indices.shape)
    picked = x.gather(dim, actual_indices.long())
    torch.testing.assert_close(picked, x.gather(dim, expected_indices.long()), equal_nan=True)


def _gradients_agree_up_to_ties(op_name, sample, actual, expected):
    """The input's gradient of an op in TIES_IN_ANY_ORDER may go to any of several equal values:
    compared per group of equal values in each slice along `dim`, by its sum."""
    dim = _tie_dim(op_name, sample)
    x = sample.input.detach()
    assert len(actual) == len(expected) == 1, "one gradient (the input's) expected"
    a, e = actual[0], expected[0]
    assert a.shape == e.shape == x.shape, f"{list(a.shape)} != {list(e.shape)}"
    if x.dim() == 0 or x.numel() == 0:
        torch.testing.assert_close(a, e)
        return
    rows = [t.movedim(dim, -1).reshape(-1, x.shape[dim]) for t in (x, a, e)]
    for values, a_row, e_row in zip(*rows):
        _, group = torch.unique(values, return_inverse=True)
        sums = [torch.zeros(int(group.max()) + 1, dtype=torch.float64).index_add_(0, group, g.double())
                for g in (a_row, e_row)]
        torch.testing.assert_close(sums[0].to(a.dtype), sums[1].to(a.dtype))


def _in_float64(sample):
    """The sample's inputs with every floating tensor in float64 (one copy per distinct tensor,
    keeping requires_grad, so gradients can be taken against them)."""
    memo = {}

    def widen(t):
        if not t.is_floating_point():
            return t
        if id(t) not in memo:
            memo[id(t)] = t.detach().double().requires_grad_(t.requires_grad)
        return memo[id(t)]
    return _map(_cpu_inputs(sample), widen)


# Ops whose f16 / bf16 statistics outputs (mean, rstd, saved mean and invstd) are float32 on tpu,
# as PyTorch's meta functions and CUDA make them; CPU returns them in the input's dtype.
STATISTICS_IN_FLOAT32 = {"native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
                         "_batch_norm_with_update"}


REDUCED_PRECISION = (torch.float16, torch.bfloat16)
# Floating dtypes whose results are also judged against float64 when they differ from CPU's, with
# the relative tolerance torch.testing.assert_close uses for each.
JUDGED_AGAINST_FLOAT64 = {torch.float32: 1.3e-6, torch.float16: 1e-3, torch.bfloat16: 1.6e-2}


def _at_least_as_close_as_cpu(key, actual, expected, reference):
    """For floating results that differ from CPU's (CPU's kernels round intermediates of their
    own, most of all in f16 / bf16, and sum in their own order): the tpu results count as right
    when each is no farther from the float64 result than CPU's is, element by element (CPU's
    error, or the dtype's tolerance, whichever is larger) or as a whole (its largest error no
    larger than CPU's: a gradient that cancels, such as softmax's, turns a one-ulp difference in
    the forward output into a large relative one near zero). Anything else must match."""
    actual, expected, reference = _flatten(actual, []), _flatten(expected, []), _flatten(reference, [])
    assert len(actual) == len(expected) == len(reference), "the float64 reference has other outputs"
    for a, e, r in zip(actual, expected, reference):
        if not e.is_floating_point():
            torch.testing.assert_close(a, e, equal_nan=True)
            continue
        if key in STATISTICS_IN_FLOAT32 and a.dtype == torch.float32:
            a = a.to(e.dtype)
        assert a.dtype == e.dtype and a.shape == e.shape, f"{a.dtype}{list(a.shape)} != {e.dtype}{list(e.shape)}"
        assert torch.equal(a.isnan(), e.isnan()), "NaN where CPU has none, or the reverse"
        finite = ~e.isnan()
        r = r.detach().to(torch.float64)[finite]
        tpu_error = (a.double()[finite] - r).abs().nan_to_num(posinf=math.inf)
        cpu_error = (e.double()[finite] - r).abs().nan_to_num(posinf=math.inf)
        rtol = JUDGED_AGAINST_FLOAT64.get(e.dtype, 1e-7)
        allowed = torch.maximum(cpu_error, rtol * r.abs() + 1e-5)
        elementwise = bool((tpu_error <= allowed).all())
        as_a_whole = tpu_error.numel() == 0 or bool(tpu_error.max() <= cpu_error.max())
        assert elementwise or as_a_whole, \
            f"differs from CPU and is farther than CPU from the float64 result (by {float((tpu_error - allowed).max()):.3g})"


def _column_signs(actual, expected):
    """+-1 per column (last dim) making `actual`'s columns point as `expected`'s do."""
    dots = (actual.double() * expected.double()).sum(-2, keepdim=True)
    return torch.where(dots < 0, -1.0, 1.0).to(actual.dtype)


def _eigenvectors_as(result, like):
    values, vectors = result
    return type(result)((values, vectors * _column_signs(vectors, like[1])))


def _same_span(actual, expected):
    """Columns completing a basis (full_matrices) are any orthonormal basis of the complement:
    checked to span CPU's, then taken as CPU's."""
    if actual.shape[-1]:
        projector = actual.double() @ actual.double().mT
        torch.testing.assert_close(projector, expected.double() @ expected.double().mT, atol=1e-4, rtol=0)
    return expected


def _singular_vectors_as(result, like, vh=True):
    u, s, v = result
    if u.numel() == 0 or s.numel() == 0:
        return result
    k = s.shape[-1]
    v_columns, like_v_columns = (v.mT, like[2].mT) if vh else (v, like[2])
    signs = _column_signs(u[..., :k], like[0][..., :k])
    u = torch.cat([u[..., :k] * signs, _same_span(u[..., k:], like[0][..., k:])], -1)
    v_columns = torch.cat([v_columns[..., :k] * signs, _same_span(v_columns[..., k:], like_v_columns[..., k:])], -1)
    return type(result)((u, s, v_columns.mT if vh else v_columns))


def _eigen_order_as(values, like):
    """Indices [..., n] putting the eigenvalues `values` in `like`'s order: each of like's takes the
    nearest of values' not yet taken."""
    n = values.shape[-1]
    if values.numel() == 0:
        return torch.zeros(values.shape, dtype=torch.long)
    order = []
    for mine, theirs in zip(values.reshape(-1, n).tolist(), like.reshape(-1, n).tolist()):
        free, picked = list(range(n)), []
        for target in theirs:
            nearest = min(free, key=lambda k: abs(mine[k] - target))
            free.remove(nearest)
            picked.append(nearest)
        order.append(picked)
    return torch.tensor(order, dtype=torch.long).reshape(values.shape)


def _eigenpairs_as(result, like):
    values, vectors = result
    order = _eigen_order_as(values, like[0])
    values = values.gather(-1, order)
    vectors = vectors.gather(-1, order.unsqueeze(-2).expand(vectors.shape))
    dots = (vectors.conj() * like[1]).sum(-2, keepdim=True)
    phases = torch.where(dots.abs() > 0, dots / dots.abs(), torch.ones_like(dots))
    return type(result)((values, vectors * phases))


# Where the results hold a choice that LAPACK makes by accident of its algorithm, tpu's are
# aligned with CPU's before comparing: eigenvectors and singular vectors are unique up to sign
# (a complex phase for a general matrix's), so each is turned to point as CPU's does (for simple
# eigenvalues and singular values, as every OpInfo sample of these ops has); a general matrix's
# eigenvalues come in no promised order, so each eigenpair takes the place of CPU's nearest.
ALIGNED_TO_CPU = {
    "linalg.eigh": _eigenvectors_as,
    "linalg.svd": _singular_vectors_as,
    "svd": lambda result, like: _singular_vectors_as(result, like, vh=False),
    "linalg.eig": _eigenpairs_as,
    "linalg.eigvals": lambda values, like: values.gather(-1, _eigen_order_as(values, like)),
}


def _agrees(key, dtype, sample, actual, expected, tied, in_float64):
    """Raises AssertionError unless tpu's results (on the CPU) agree with CPU's. `tied` checks the
    ops in TIES_IN_ANY_ORDER; `in_float64()` computes the float64 reference that floating results
    which differ from CPU's are judged against."""
    if key in TIES_IN_ANY_ORDER:
        tied(key, sample, actual, expected)
        return
    random = _is_random(key, sample)
    try:
        _compare(key, actual, expected, random)
    except AssertionError:
        if dtype not in JUDGED_AGAINST_FLOAT64 or random:
            raise
        _at_least_as_close_as_cpu(key, actual, expected, in_float64())


def _check_forward(op, key, dtype, sample, actual, expected):
    def in_float64():
        return _call(op, sample, _in_float64(sample))
    if key in ALIGNED_TO_CPU:
        align = ALIGNED_TO_CPU[key]
        actual, unaligned = align(actual, expected), in_float64
        in_float64 = lambda: align(unaligned(), expected)  # noqa: E731
    _agrees(key, dtype, sample, actual, expected, _indices_pick_the_values, in_float64)


def _first_line(error):
    text = f"{type(error).__name__}: {error}".strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line[:200]


@dataclasses.dataclass
class Outcome:
    """What running some samples of one op in one direction found."""
    total: int = 0
    passed: int = 0
    skipped: int = 0            # the CPU reference itself raised
    failures: list = dataclasses.field(default_factory=list)  # first lines of the errors
    fallbacks: dict = dataclasses.field(default_factory=dict)  # aten op -> CPU-fallback calls

    @property
    def ok(self):
        return self.total > 0 and self.passed == self.total

    def add_fallbacks(self, counts):
        for k, v in counts.items():
            self.fallbacks[k] = self.fallbacks.get(k, 0) + v


def _samples(op, dtype, requires_grad, max_samples, noncontiguous=False):
    """The op's first max_samples samples; with noncontiguous, the non-contiguous version of each
    (SampleInput.noncontiguous(): every tensor a strided view with NaN, True or 12 between its
    elements, as test_noncontiguous_samples makes them), leaving out samples it changes nothing in."""
    torch.manual_seed(0)
    samples = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
    for i, sample in enumerate(samples):
        if max_samples is not None and i >= max_samples:
            break
        if noncontiguous:
            changed = sample.noncontiguous()
            if all(a is b for a, b in zip(_flatten(_cpu_inputs(sample), []), _flatten(_cpu_inputs(changed), []))):
                continue
            sample = changed
        yield sample


_NOT_APPLICABLE = object()


def _compare_samples(samples, key, reference, on_tpu, check):
    """Per sample: reference(sample) on the CPU (a sample whose reference raises is skipped, one
    whose reference is _NOT_APPLICABLE is not counted), then on_tpu(sample, tpu inputs, reference)
    with its CPU fallbacks counted, then check(sample, tpu result, reference)."""
    outcome = Outcome()
    for sample in samples:
        try:
            expected = reference(sample)
        except Exception:
            outcome.skipped += 1
            continue
        if expected is _NOT_APPLICABLE:
            continue
        outcome.total += 1
        try:
            inputs = _tpu_inputs(sample, {}, key)
            torch_tpu.reset_fallback_counts()
            try:
                actual = on_tpu(sample, inputs, expected)
            finally:
                outcome.add_fallbacks(torch_tpu.fallback_counts())
            check(sample, actual, expected)
            outcome.passed += 1
        except Exception as error:  # noqa: BLE001 - every failure is reported, none is fatal
            outcome.failures.append(_first_line(error))
    return outcome


def run_forward(op, dtype, max_samples=None, noncontiguous=False):
    """Runs op's samples for `dtype` on CPU and tpu and compares the results."""
    key = op_key(op)
    return _compare_samples(
        _samples(op, dtype, False, max_samples, noncontiguous), key,
        lambda sample: _call(op, sample, _cpu_inputs(sample)),
        lambda sample, inputs, expected: _call(op, sample, inputs),
        lambda sample, actual, expected: _check_forward(op, key, dtype, sample, _to_cpu(actual), _to_cpu(expected)))


def _grads(op, sample, inputs, seed_gen, seeds=None):
    """(gradients of the sample's requires-grad tensors, the seeds used); None when the sample
    has no differentiable output."""
    out = sample.output_process_fn_grad(_call(op, sample, inputs))
    outs = [t for t in _flatten(out, []) if t.requires_grad and t.dtype.is_floating_point]
    leaves = [t for t in _flatten(inputs, []) if t.requires_grad]
    if not outs or not leaves:
        return None, None
    if seeds is None:
        seeds = [torch.randn(o.shape, generator=seed_gen, dtype=o.dtype) for o in outs]
    device_seeds = [s.to(o.device) for s, o in zip(seeds, outs)]
    grads = torch.autograd.grad(outs, leaves, device_seeds, allow_unused=True)
    grads = [torch.zeros_like(leaf) if g is None else g for g, leaf in zip(grads, leaves)]
    return grads, seeds


def _check_backward(op, key, dtype, sample, actual, expected, seeds):
    _agrees(key, dtype, sample, actual, expected, _gradients_agree_up_to_ties,
            lambda: _grads(op, sample, _in_float64(sample), None, [s.double() for s in seeds])[0])


def run_backward(op, dtype, max_samples=None, noncontiguous=False):
    """Compares the gradients of op's samples on tpu with CPU's, for output seeds drawn from a
    fixed generator."""
    key = op_key(op)

    def reference(sample):
        grads, seeds = _grads(op, sample, _cpu_inputs(sample), torch.Generator().manual_seed(0))
        return _NOT_APPLICABLE if grads is None else ([g.detach() for g in grads], seeds)

    def check(sample, actual, expected):
        assert actual is not None, "no differentiable tpu output"
        _check_backward(op, key, dtype, sample, _to_cpu(actual), *expected)

    return _compare_samples(_samples(op, dtype, True, max_samples, noncontiguous), key, reference,
                            lambda sample, inputs, expected: _grads(op, sample, inputs, None, expected[1])[0],
                            check)


def _filled_out(like, device):
    """An out= tensor for a result like `like`, filled as test_out fills it with values the op must
    overwrite: NaN, or the dtype's largest integer."""
    try:
        fill = torch.iinfo(like.dtype).max
    except TypeError:
        fill = float("nan")
    return torch.full_like(like, fill, device=device)


def _returns_out(result, out, layouts):
    """out= tensors come back as the result, keeping their storage and strides."""
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    results = [result] if isinstance(out, torch.Tensor) else list(result)
    assert len(results) == len(outs) and all(r is o for r, o in zip(results, outs)), \
        "the op returned other tensors than its out= arguments"
    assert [(o.data_ptr(), o.stride()) for o in outs] == layouts, "out= got other storage or strides"


def run_out(op, dtype, max_samples=None):
    """For an op that supports out=: each sample with out= tensors on tpu (shaped like CPU's result,
    filled with values the op must overwrite) against the same call on the CPU. The tpu call must
    return its out= tensors themselves, in place."""
    key = op_key(op)

    def reference(sample):
        plain = _call(op, sample, _cpu_inputs(sample))
        if isinstance(plain, torch.Tensor):
            out = _filled_out(plain, "cpu")
        elif isinstance(plain, (list, tuple)) and plain and all(isinstance(t, torch.Tensor) for t in plain):
            out = tuple(_filled_out(t, "cpu") for t in plain)
        else:
            return _NOT_APPLICABLE  # test_out skips results other than tensors
        _call(op, sample, _cpu_inputs(sample), out=out)
        return out

    def on_tpu(sample, inputs, expected):
        out = _map(expected, lambda t: _filled_out(t, "tpu"))
        layouts = [(o.data_ptr(), o.stride()) for o in _flatten(out, [])]
        _returns_out(_call(op, sample, inputs, out=out), out, layouts)
        return out

    return _compare_samples(
        _samples(op, dtype, False, max_samples), key, reference, on_tpu,
        lambda sample, actual, expected: _check_forward(op, key, dtype, sample, _to_cpu(actual), expected))


def supports_backward(op, dtype=torch.float32):
    return op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")


def is_core(key):
    return not key.startswith(("linalg.", "fft.", "special."))


def elapsed(start):
    return round(time.monotonic() - start, 2)


def fmt_fallbacks(fallbacks):
    return ", ".join(f"{k}×{v}" for k, v in sorted(fallbacks.items(), key=lambda kv: -kv[1]))


def nan_safe(x):
    return None if isinstance(x, float) and math.isnan(x) else x
