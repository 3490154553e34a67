"""Elementwise math, arithmetic, comparisons, logical/bitwise ops and activations against PyTorch
on CPU, in every eager mode. Every test also fails if an op fell back to the CPU."""
import math

import pytest
import torch

from conftest import assert_same_as_cpu

aten = torch.ops.aten
NAN, INF = float("nan"), float("inf")
FLOATS = [torch.float32, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int8, torch.uint8]

# Values where PyTorch's semantics are easy to get wrong: signed zeros, infinities, nan, halves.
SPECIAL = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 7.0, -7.0, 1e-30])
SPECIAL_OTHER = torch.tensor([1.0, 2.0, -3.0, -0.0, 0.0, NAN, INF, -3.0, 3.0, -INF, 0.0, -2.0, 3.0, NAN])


def uniform(shape, low, high, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)


def integers(shape, low, high, dtype=torch.int64, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        low = max(low, 0)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def nonzero(t):
    return torch.where(t == 0, torch.ones_like(t), t)


# ---------------------------------------------------------------------------------------------
# Unary float math. Domain per op keeps the inputs where the function is finite.

UNARY_DOMAINS = {
    "exp": (-10, 10), "exp2": (-10, 10), "expm1": (-5, 5), "log": (0.01, 100), "log2": (0.01, 100),
    "log10": (0.01, 100), "log1p": (-0.99, 10), "sqrt": (0, 100), "rsqrt": (0.01, 100),
    "reciprocal": (0.1, 10), "sin": (-10, 10), "cos": (-10, 10), "tan": (-1.5, 1.5),
    "asin": (-1, 1), "acos": (-1, 1), "atan": (-20, 20), "sinh": (-12, 12), "cosh": (-12, 12),
    "tanh": (-10, 10), "asinh": (-1e5, 1e5), "acosh": (1, 1e5), "atanh": (-0.999, 0.999),
    "sigmoid": (-20, 20), "erf": (-5, 5), "erfc": (-5, 9), "frac": (-10, 10),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY_DOMAINS))
def test_unary_float_math(mode, no_fallback, name, dtype):
    low, high = UNARY_DOMAINS[name]
    assert_same_as_cpu(getattr(torch, name), uniform((4, 16), low, high, dtype))


@pytest.mark.parametrize("name", ["sinh", "asinh", "atanh", "asin", "atan", "erf", "expm1", "log1p", "tan"])
def test_unary_float_math_near_zero_keeps_relative_accuracy(mode, no_fallback, name):
    assert_same_as_cpu(getattr(torch, name), uniform((32,), -1e-3, 1e-3))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "tanh", "sigmoid", "erf", "erfc",
                                  "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan",
                                  "expm1", "log1p", "rsqrt", "reciprocal", "frac", "exp2", "log2"])
def test_unary_float_math_special_values(mode, no_fallback, name):
    assert_same_as_cpu(getattr(torch, name), SPECIAL)


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_erf_in_float64_and_far_tails(mode, no_fallback, name):
    assert_same_as_cpu(getattr(torch, name), torch.linspace(-6, 26, 401, dtype=torch.float64))
    assert_same_as_cpu(getattr(torch, name), torch.linspace(-4, 9, 401))


@pytest.mark.parametrize("name", ["exp", "sqrt", "sin", "sigmoid", "erf", "log1p", "atan"])
def test_unary_float_math_of_integers_gives_floats(mode, no_fallback, name):
    assert_same_as_cpu(getattr(torch, name), integers((8,), 0, 5, torch.int32))


def test_unary_float_math_in_float16_and_float64(mode, no_fallback):
    for dtype in (torch.float16, torch.float64):
        x = uniform((16,), -3, 3, dtype)
        for fn in (torch.exp, torch.tanh, torch.erf, torch.sigmoid, torch.sin, torch.asinh):
            assert_same_as_cpu(fn, x)


def test_logit(mode, no_fallback):
    for dtype in FLOATS + [torch.float16]:
        assert_same_as_cpu(torch.logit, uniform((16,), 0.01, 0.99, dtype))
        assert_same_as_cpu(lambda x: torch.logit(x, 0.1), uniform((16,), -0.5, 1.5, dtype))


# ---------------------------------------------------------------------------------------------
# Unary ops that keep the dtype.

SAME_DTYPE_UNARY = ["neg", "abs", "sign", "sgn", "floor", "ceil", "round", "trunc"]


@pytest.mark.parametrize("name", SAME_DTYPE_UNARY + ["frac", "isnan", "isinf", "isposinf", "isneginf",
                                                     "signbit", "logical_not", "nan_to_num"])
def test_float_unary_on_special_values(mode, no_fallback, name):
    for dtype in FLOATS + [torch.float64]:
        assert_same_as_cpu(getattr(torch, name), SPECIAL.to(dtype))


@pytest.mark.parametrize("name", SAME_DTYPE_UNARY + ["bitwise_not", "logical_not", "signbit", "isnan",
                                                     "isinf"])
def test_integer_unary(mode, no_fallback, name):
    for dtype in INTS:
        assert_same_as_cpu(getattr(torch, name), integers((12,), -100, 100, dtype))


def test_bool_unary(mode, no_fallback):
    x = torch.tensor([True, False, True])
    for fn in (torch.bitwise_not, torch.logical_not, torch.sign, torch.isnan):
        assert_same_as_cpu(fn, x)


def test_round_to_even_and_decimals(mode, no_fallback):
    assert_same_as_cpu(torch.round, torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5]))
    for dtype in FLOATS + [torch.float64]:
        x = uniform((16,), -100, 100, dtype)
        assert_same_as_cpu(lambda t: torch.round(t, decimals=2), x)
        assert_same_as_cpu(lambda t: torch.round(t, decimals=-1), x)


def test_nan_to_num_with_replacements(mode, no_fallback):
    for dtype in FLOATS + [torch.float16]:
        x = SPECIAL.to(dtype)
        assert_same_as_cpu(lambda t: torch.nan_to_num(t, nan=1.5, posinf=100.0, neginf=-7.0), x)
        assert_same_as_cpu(lambda t: torch.nan_to_num(t, posinf=100.0), x)
    assert_same_as_cpu(torch.nan_to_num, integers((5,), -3, 3))


# ---------------------------------------------------------------------------------------------
# Binary arithmetic.

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "remainder": torch.remainder, "fmod": torch.fmod, "floor_divide": torch.floor_divide,
    "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax,
    "fmin": torch.fmin, "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
    "xlogy": torch.xlogy,
}
WITH_SCALAR = ["add", "sub", "mul", "div", "remainder", "fmod", "floor_divide", "pow", "copysign", "xlogy"]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float_broadcasting(mode, no_fallback, name, dtype):
    x, y = uniform((3, 8), -4, 4, dtype, seed=1), uniform((8,), -4, 4, dtype, seed=2)
    if name == "pow":
        x = x.abs()
    assert_same_as_cpu(BINARY[name], x, y)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_values(mode, no_fallback, name):
    assert_same_as_cpu(BINARY[name], SPECIAL, SPECIAL_OTHER)
    assert_same_as_cpu(BINARY[name], SPECIAL.double(), SPECIAL_OTHER.double())


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "remainder", "fmod", "floor_divide", "pow",
                                  "maximum", "minimum", "atan2", "copysign"])
def test_binary_integers(mode, no_fallback, name):
    for dtype in INTS:
        x, y = integers((3, 8), -20, 20, dtype, seed=1), nonzero(integers((8,), -20, 20, dtype, seed=2))
        if name == "pow":
            y = y.abs() % 4
        assert_same_as_cpu(BINARY[name], x, y)


@pytest.mark.parametrize("name", WITH_SCALAR)
def test_binary_with_python_numbers(mode, no_fallback, name):
    fn = BINARY[name]
    assert_same_as_cpu(lambda t: fn(t, 2.5), uniform((3, 8), 0.1, 4))
    assert_same_as_cpu(lambda t: fn(t, 1.7), uniform((3, 8), 0.1, 4, torch.bfloat16))
    assert_same_as_cpu(lambda t: fn(t, 3), integers((3, 8), 1, 20))
    assert_same_as_cpu(lambda t: fn(t, 2.5), integers((3, 8), 1, 20, torch.int32))  # int -> float
    assert_same_as_cpu(lambda t: fn(t, torch.tensor(1.5)), uniform((3, 8), 0.1, 4))  # 0-dim CPU tensor


def test_binary_mixed_dtypes_promote(mode, no_fallback):
    f16, f32, i32 = uniform((4,), -3, 3, torch.float16), uniform((4,), -3, 3), integers((4,), 1, 9, torch.int32)
    for fn in (torch.add, torch.mul, torch.div, torch.maximum, torch.remainder, torch.atan2):
        assert_same_as_cpu(fn, f16, f32)
        assert_same_as_cpu(fn, i32, f16)
        assert_same_as_cpu(fn, f32, uniform((), 1, 2))  # 0-dim tpu tensor


def test_add_sub_rsub_alpha(mode, no_fallback):
    x, y = uniform((3, 5), -4, 4, seed=1), uniform((5,), -4, 4, seed=2)
    assert_same_as_cpu(lambda a, b: torch.add(a, b, alpha=0.3), x, y)
    assert_same_as_cpu(lambda a, b: torch.sub(a, b, alpha=0.3), x, y)
    assert_same_as_cpu(lambda a, b: torch.rsub(a, b, alpha=0.3), x, y)
    assert_same_as_cpu(lambda a: torch.rsub(a, 2.0), x)
    assert_same_as_cpu(lambda a, b: torch.add(a, b, alpha=0.3), x.bfloat16(), y.bfloat16())
    i, j = integers((3, 5), -9, 9, seed=1), integers((5,), -9, 9, seed=2)
    assert_same_as_cpu(lambda a, b: torch.add(a, b, alpha=3), i, j)
    assert_same_as_cpu(lambda a, b: torch.sub(a, b, alpha=-2), i, j)


def test_bool_arithmetic(mode, no_fallback):
    a, b = torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False])
    for fn in (torch.add, torch.mul, torch.maximum, torch.minimum, lambda x, y: torch.add(x, y, alpha=True)):
        assert_same_as_cpu(fn, a, b)


@pytest.mark.parametrize("rounding_mode", [None, "trunc", "floor"])
def test_div_rounding_modes(mode, no_fallback, rounding_mode):
    divide = lambda a, b: torch.div(a, b, rounding_mode=rounding_mode)  # noqa: E731
    for dtype in FLOATS + [torch.float16, torch.float64]:
        assert_same_as_cpu(divide, uniform((4, 8), -10, 10, dtype, seed=1), uniform((8,), -3, 3, dtype, seed=2))
    for dtype in INTS:
        x, y = integers((4, 8), -50, 50, dtype, seed=1), nonzero(integers((8,), -6, 6, dtype, seed=2))
        assert_same_as_cpu(divide, x, y)
    if rounding_mode is not None:
        assert_same_as_cpu(divide, SPECIAL, SPECIAL_OTHER)


@pytest.mark.parametrize("rounding_mode", ["trunc", "floor"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rounded_division_by_one_element_matches_exactly(mode, no_fallback, rounding_mode, dtype):
    # CPU divides f16 / bf16 by a number or a one-element tensor in f32, reading the number
    # unrounded, and rounds once; by a full tensor it rounds at each step. Quotients are integers
    # here, so anything but equality is a wrong answer.
    x = uniform((4096,), -300, 300, dtype, seed=3)
    divisors = [0.3, -0.7, torch.tensor(0.3, dtype=dtype), torch.full((1,), 0.3, dtype=dtype),
                uniform((4096,), 0.1, 0.5, dtype, seed=4)]
    for divisor in divisors:
        expected = torch.div(x, divisor, rounding_mode=rounding_mode)
        on_tpu = divisor.to("tpu") if isinstance(divisor, torch.Tensor) else divisor
        actual = torch.div(x.to("tpu"), on_tpu, rounding_mode=rounding_mode).cpu()
        assert torch.equal(actual, expected), f"{int((actual != expected).sum())} quotients differ"


def test_remainder_with_number_first(mode, no_fallback):
    assert_same_as_cpu(lambda t: torch.remainder(7, t), nonzero(integers((8,), -5, 5)))
    assert_same_as_cpu(lambda t: torch.remainder(5.5, t), uniform((8,), -3, 3))


def test_pow_variants(mode, no_fallback):
    x = uniform((8,), -3, 3)
    assert_same_as_cpu(lambda t: torch.pow(t, 3), x)  # negative bases, integral exponent
    assert_same_as_cpu(lambda t: torch.pow(t, 2.0), x)
    assert_same_as_cpu(lambda t: torch.pow(t, 0.5), x)  # nan for negative bases
    assert_same_as_cpu(lambda t: torch.pow(2.0, t), x)
    base, exponent = torch.tensor([2, -1, 1, 0, 3, -1, -2]), torch.tensor([-1, -3, -2, 0, 2, -2, 3])
    assert_same_as_cpu(torch.pow, base, exponent)  # integer powers, negative exponents included


# ---------------------------------------------------------------------------------------------
# Comparisons, logical and bitwise ops.

COMPARISONS = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


@pytest.mark.parametrize("fn", COMPARISONS, ids=lambda f: f.__name__)
def test_comparisons(mode, no_fallback, fn):
    assert_same_as_cpu(fn, SPECIAL, SPECIAL_OTHER)
    assert_same_as_cpu(fn, integers((3, 6), -3, 3, seed=1), integers((6,), -3, 3, seed=2))
    assert_same_as_cpu(lambda t: fn(t, 0.5), SPECIAL.bfloat16())
    assert_same_as_cpu(lambda t: fn(t, 2.5), integers((6,), 0, 5, torch.int32))  # compared as floats
    assert_same_as_cpu(fn, integers((6,), -3, 3, torch.int32), uniform((6,), -3, 3, torch.float16))
    assert_same_as_cpu(fn, torch.tensor([True, False]), torch.tensor([True, True]))


@pytest.mark.parametrize("fn", [torch.logical_and, torch.logical_or, torch.logical_xor], ids=lambda f: f.__name__)
def test_logical_binary(mode, no_fallback, fn):
    assert_same_as_cpu(fn, SPECIAL, SPECIAL_OTHER)  # nan counts as true
    assert_same_as_cpu(fn, integers((8,), -1, 2, seed=1), torch.tensor([True, False] * 4))


@pytest.mark.parametrize("fn", [torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", INTS + [torch.bool], ids=str)
def test_bitwise_binary(mode, no_fallback, fn, dtype):
    x, y = integers((3, 8), -100, 100, dtype, seed=1), integers((8,), -100, 100, dtype, seed=2)
    assert_same_as_cpu(fn, x, y)
    if dtype != torch.bool:
        assert_same_as_cpu(lambda t: fn(t, 5), x)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_shifts_including_out_of_range_amounts(mode, no_fallback, dtype):
    x = integers((12,), -100, 100, dtype)
    if dtype == torch.uint8:
        amounts = torch.tensor([0, 1, 3, 7, 8, 9, 10, 2, 5, 6, 4, 200], dtype=dtype)
    else:
        amounts = torch.tensor([0, 1, 3, 7, 8, 15, 16, 31, 32, 63, 64, -1]).to(dtype)
    assert_same_as_cpu(torch.bitwise_left_shift, x, amounts)
    assert_same_as_cpu(torch.bitwise_right_shift, x, amounts)
    assert_same_as_cpu(lambda t: t << 2, x)
    assert_same_as_cpu(lambda t: t >> 1, x)


# ---------------------------------------------------------------------------------------------
# Selection, filling, clamping and fused multiply-adds.

def test_where(mode, no_fallback):
    condition = uniform((3, 5), 0, 1, seed=3) > 0.5
    x, y = uniform((3, 5), -3, 3, seed=1), uniform((5,), -3, 3, torch.float64, seed=2)
    assert_same_as_cpu(torch.where, condition, x, y)
    assert_same_as_cpu(lambda c, a: torch.where(c, a, 2.0), condition, x)
    assert_same_as_cpu(lambda c, a: torch.where(c, 1, a), condition, integers((3, 5), -3, 3))
    assert_same_as_cpu(torch.where, condition, integers((3, 5), -3, 3, torch.int32), x)


def test_masked_fill(mode, no_fallback):
    mask = uniform((3, 5), 0, 1, seed=3) > 0.5
    x = uniform((3, 5), -3, 3)
    assert_same_as_cpu(lambda t, m: t.masked_fill(m, -1.5), x, mask)
    assert_same_as_cpu(lambda t, m, v: t.masked_fill(m, v), x, mask, torch.tensor(2.5))  # 0-dim tpu value
    assert_same_as_cpu(lambda t, m: t.masked_fill(m[0], 3), x, mask)  # broadcast mask
    assert_same_as_cpu(lambda t, m: t.masked_fill(m, 7), integers((3, 5), -3, 3), mask)
    assert_same_as_cpu(lambda t, m: t.clone().masked_fill_(m, -INF), x, mask)


def test_masked_fill_with_a_cpu_scalar_value(mode, no_fallback):
    mask = uniform((3, 5), 0, 1, seed=3) > 0.5
    assert_same_as_cpu(lambda t, m: t.masked_fill(m, torch.tensor(2.5)), uniform((3, 5), -3, 3), mask)


def test_fill_and_zero(mode, no_fallback):
    x = uniform((3, 5), -3, 3)
    assert_same_as_cpu(lambda t: t.clone().fill_(3.25), x)
    assert_same_as_cpu(lambda t: t.clone().fill_(3.75), integers((3, 5), -3, 3))  # truncated
    assert_same_as_cpu(lambda t: t.clone().fill_(torch.tensor(2.0)), x)
    assert_same_as_cpu(lambda t: t.clone().zero_(), x)
    assert_same_as_cpu(lambda t: t.clone().fill_(True), torch.zeros(4, dtype=torch.bool))


@pytest.mark.parametrize("dtype", FLOATS + [torch.float16, torch.float64], ids=str)
def test_clamp(mode, no_fallback, dtype):
    x = SPECIAL.to(dtype)
    assert_same_as_cpu(lambda t: torch.clamp(t, -2.0, 3.0), x)
    assert_same_as_cpu(lambda t: torch.clamp(t, min=-2.0), x)
    assert_same_as_cpu(lambda t: torch.clamp(t, max=3.0), x)
    assert_same_as_cpu(lambda t: torch.clamp(t, 3.0, -2.0), x)  # min > max: max wins
    assert_same_as_cpu(lambda t: torch.clamp_min(t, -2.0), x)
    assert_same_as_cpu(lambda t: torch.clamp_max(t, 1.0), x)
    assert_same_as_cpu(lambda t: torch.clamp(t, min=NAN), x)
    y, low, high = uniform((4, 5), -3, 3, dtype, 1), uniform((5,), -3, 0, dtype, 2), uniform((4, 1), 0, 3, dtype, 3)
    assert_same_as_cpu(torch.clamp, y, low, high)
    assert_same_as_cpu(lambda t, lo: torch.clamp(t, min=lo), y, low)
    assert_same_as_cpu(lambda t, hi: torch.clamp(t, max=hi), y, high)


def test_clamp_integers(mode, no_fallback):
    x = integers((12,), -20, 20)
    assert_same_as_cpu(lambda t: torch.clamp(t, -5, 7), x)
    assert_same_as_cpu(lambda t: torch.clamp(t, 2.5), x)  # a float bound makes a float result
    assert_same_as_cpu(lambda t: t.clone().clamp_(-3, 3), x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.float16, torch.float64], ids=str)
def test_addcmul_addcdiv_lerp(mode, no_fallback, dtype):
    s, t1, t2 = uniform((4, 5), -3, 3, dtype, 1), uniform((5,), -3, 3, dtype, 2), uniform((4, 1), 0.5, 2, dtype, 3)
    assert_same_as_cpu(lambda a, b, c: torch.addcmul(a, b, c, value=0.7), s, t1, t2)
    assert_same_as_cpu(lambda a, b, c: torch.addcdiv(a, b, c, value=-0.3), s, t1, t2)
    assert_same_as_cpu(torch.addcmul, s, t1, t2)
    assert_same_as_cpu(lambda a, b: torch.lerp(a, b, 0.3), s, t1)
    assert_same_as_cpu(lambda a, b: torch.lerp(a, b, 0.8), s, t1)
    assert_same_as_cpu(torch.lerp, s, t1, uniform((4, 5), -0.5, 1.5, dtype, 4))


def test_addcmul_integers(mode, no_fallback):
    x = integers((6,), -5, 5)
    assert_same_as_cpu(lambda a: torch.addcmul(a, a, a, value=2), x)


# ---------------------------------------------------------------------------------------------
# In-place and out= variants share the lowering; the executor writes self or out.

def test_in_place_and_out_variants(mode, no_fallback):
    x, y = uniform((3, 4), -3, 3, seed=1), uniform((4,), 0.5, 3, seed=2)
    assert_same_as_cpu(lambda a, b: a.clone().add_(b, alpha=2), x, y)
    assert_same_as_cpu(lambda a, b: a.clone().mul_(b).div_(b).sub_(1.5), x, y)
    assert_same_as_cpu(lambda a: a.clone().exp_().sqrt_().neg_(), x)
    assert_same_as_cpu(lambda a: a.clone().clamp_(-1, 1).relu_(), x)
    assert_same_as_cpu(lambda a, b: a.clone().lerp_(b, 0.25).addcmul_(a, b, value=0.5), x, y)
    assert_same_as_cpu(lambda a, b: a.clone().div_(b, rounding_mode="floor"), x, y)
    assert_same_as_cpu(lambda a, b: torch.add(a, b, out=torch.empty_like(a)), x, y)
    assert_same_as_cpu(lambda a, b: torch.lt(a, b, out=torch.empty(3, 4, dtype=torch.float32, device=a.device)), x, y)
    assert_same_as_cpu(lambda a: torch.exp(a, out=torch.empty_like(a)), x)
    assert_same_as_cpu(lambda a: a.t().clone().mul_(2.0), x)  # a non-contiguous view
    assert_same_as_cpu(lambda a, b: a[:, 1:3].clone().add_(b[:2]), x, y)


def test_in_place_into_a_view_updates_the_base(mode, no_fallback):
    def fn(a):
        base = a.clone()
        base[:, 1].mul_(10)
        base.t()[0].add_(1)
        return base
    assert_same_as_cpu(fn, uniform((3, 4), -3, 3))


# ---------------------------------------------------------------------------------------------
# Activations and their backward ops.

def activation_input(dtype):
    # Finite values around every kink: PyTorch's own nan / inf handling differs between its scalar
    # and vectorized CPU paths for several of these ops.
    grid = torch.tensor([-30.0, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 20.0, 30.0])
    return torch.cat([grid, uniform((20,), -7, 7)]).to(dtype)


FORWARD_ACTIVATIONS = {
    "relu": torch.relu,
    "relu6": torch.nn.functional.relu6,
    "hardtanh": lambda x: torch.nn.functional.hardtanh(x, -1.5, 2.0),
    "threshold": lambda x: torch.nn.functional.threshold(x, 0.5, -2.0),
    "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.2),
    "elu": lambda x: aten.elu(x, 1.3, 1.1, 0.9),
    "celu": lambda x: torch.nn.functional.celu(x, 0.7),
    "selu": torch.nn.functional.selu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu,
    "softplus": lambda x: torch.nn.functional.softplus(x, 1.5, 10),
    "mish": torch.nn.functional.mish,
    "hardsigmoid": torch.nn.functional.hardsigmoid,
    "hardswish": torch.nn.functional.hardswish,
    "logsigmoid": torch.nn.functional.logsigmoid,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


@pytest.mark.parametrize("name", sorted(FORWARD_ACTIVATIONS))
def test_activation_forward(mode, no_fallback, name):
    for dtype in FLOATS + [torch.float16, torch.float64]:
        assert_same_as_cpu(FORWARD_ACTIVATIONS[name], activation_input(dtype))


def test_activation_nan_passes_through(mode, no_fallback):
    x = torch.tensor([NAN, -1.0, 2.0])
    for fn in (torch.relu, torch.nn.functional.hardtanh, torch.nn.functional.leaky_relu, torch.nn.functional.elu):
        assert_same_as_cpu(fn, x)


def test_integer_activations(mode, no_fallback):
    x = integers((10,), -5, 5)
    assert_same_as_cpu(torch.relu, x)
    assert_same_as_cpu(lambda t: torch.nn.functional.threshold(t, 1, 7), x)
    assert_same_as_cpu(lambda t: torch.nn.functional.hardtanh(t, -2, 3), x)


def backward_cases(x, g):
    y_sigmoid, y_tanh = torch.sigmoid(x), torch.tanh(x)
    y_elu = aten.elu(x, 1.3, 1.1, 0.9)
    buffer = aten.log_sigmoid_forward(x)[1]
    return {
        "hardtanh_backward": lambda: aten.hardtanh_backward(g, x, -1.0, 1.0),
        "threshold_backward": lambda: aten.threshold_backward(g, x, 0),
        "leaky_relu_backward": lambda: aten.leaky_relu_backward(g, x, 0.2, False),
        "elu_backward": lambda: aten.elu_backward(g, 1.3, 1.1, 0.9, False, x),
        "elu_backward_of_result": lambda: aten.elu_backward(g, 1.3, 1.1, 0.9, True, y_elu),
        "gelu_backward": lambda: aten.gelu_backward(g, x),
        "gelu_backward_tanh": lambda: aten.gelu_backward(g, x, approximate="tanh"),
        "silu_backward": lambda: aten.silu_backward(g, x),
        "sigmoid_backward": lambda: aten.sigmoid_backward(g, y_sigmoid),
        "tanh_backward": lambda: aten.tanh_backward(g, y_tanh),
        "softplus_backward": lambda: aten.softplus_backward(g, x, 1.5, 10),
        "mish_backward": lambda: aten.mish_backward(g, x),
        "hardsigmoid_backward": lambda: aten.hardsigmoid_backward(g, x),
        "hardswish_backward": lambda: aten.hardswish_backward(g, x),
        "log_sigmoid_backward": lambda: aten.log_sigmoid_backward(g, x, buffer),
    }


BACKWARD_NAMES = sorted(backward_cases(torch.zeros(1), torch.zeros(1)))
# mish_backward is CompositeImplicitAutograd in ATen: without a PrivateUse1 kernel it decomposes
# into separate bf16 ops whose roundings the CPU's fused kernel does not have. (silu_backward is
# structured: its lowering now takes the functional form directly and rounds as CPU does.)
DECOMPOSED_IN_BF16 = pytest.mark.xfail(strict=True, reason="decomposed into bf16 ops before our lowering")
BACKWARD_CASES = [
    pytest.param(name, dtype, marks=DECOMPOSED_IN_BF16)
    if name == "mish_backward" and dtype == torch.bfloat16 else (name, dtype)
    for name in BACKWARD_NAMES for dtype in FLOATS + [torch.float64]
]


@pytest.mark.parametrize("name,dtype", BACKWARD_CASES, ids=str)
def test_activation_backward_ops(mode, no_fallback, name, dtype):
    x = activation_input(dtype)
    g = uniform(x.shape, -2, 2, dtype, seed=5)
    expected = backward_cases(x, g)[name]()
    actual = backward_cases(x.to("tpu"), g.to("tpu"))[name]()
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu", "elu", "leaky_relu", "softplus", "mish",
                                  "hardswish", "hardsigmoid", "logsigmoid", "relu", "hardtanh", "sigmoid", "tanh"])
def test_activation_gradients_through_autograd(mode, no_fallback, name):
    fn = FORWARD_ACTIVATIONS[name]
    x = activation_input(torch.float32)
    g = uniform(x.shape, -2, 2, seed=5)

    def grad_of(inp, grad_out):
        inp = inp.clone().requires_grad_(True)
        fn(inp).backward(grad_out)
        return inp.grad

    torch.testing.assert_close(grad_of(x.to("tpu"), g.to("tpu")).cpu(), grad_of(x, g))


SPECIAL_EDGES = torch.tensor([0.0, -0.0, 1e-8, 0.3, -0.7, 2.5, -40.0, 90.0, float("inf"), float("-inf"), float("nan")])


@pytest.mark.parametrize("name,fn", [
    ("entr", torch.special.entr),
    ("xlog1py", lambda x: torch.special.xlog1py(x, x.flip(0).abs() - 0.5)),
    ("xlog1py_scalar", lambda x: torch.special.xlog1py(x, 2.0)),
    ("i1e", torch.special.i1e),
    ("spherical_bessel_j0", torch.special.spherical_bessel_j0),
], ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_special_functions_at_their_edges_match_cpu(mode, name, fn, dtype, no_fallback):
    x = SPECIAL_EDGES.to(dtype)
    torch.testing.assert_close(fn(x.to("tpu")).cpu(), fn(x), equal_nan=True)
