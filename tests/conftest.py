"""Shared test fixtures: every behavioural test runs in each eager mode."""
import atexit
import os
import shutil
import tempfile

# Programs an earlier run left in the user's compilation cache would turn the compiles that tests
# count into disk hits: the session (and its subprocesses) gets an empty cache directory instead.
_CACHE_DIR = tempfile.mkdtemp(prefix="torch_tpu_test_cache_")
os.environ["TORCH_TPU_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, True)

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_tpu  # noqa: E402

MODES = ["debug", "strict", "defer_and_fuse"]


@pytest.fixture(autouse=True)
def fresh_shape_history():
    """Which ops have met which sizes is process-wide (csrc/exec/padding.h): each test starts
    without the sizes earlier tests used, so that the programs it counts are its own."""
    torch_tpu._C._forget_shape_history()
    yield


@pytest.fixture(params=MODES)
def mode(request):
    """Runs the test inside torch_tpu.eager_mode(<mode>) for each of the three eager modes."""
    with torch_tpu.eager_mode(request.param):
        yield request.param
    torch.tpu.synchronize()


@pytest.fixture
def no_fallback():
    """Fails the test if any op ran through the CPU fallback instead of a tpu lowering."""
    torch_tpu.reset_fallback_counts()
    yield
    counts = torch_tpu.fallback_counts()
    assert not counts, f"ops ran on the CPU instead of the tpu device: {counts}"


def to_tpu(value):
    if isinstance(value, torch.Tensor):
        return value.to("tpu")
    if isinstance(value, (list, tuple)):
        return type(value)(to_tpu(v) for v in value)
    return value


def to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def assert_same_as_cpu(fn, *args, **kwargs):
    """Calls fn on CPU tensors and on their tpu copies, and compares the results (values, dtypes,
    shapes) at PyTorch's default tolerances for the dtype."""
    expected = fn(*args, **kwargs)
    actual = fn(*to_tpu(args), **{k: to_tpu(v) for k, v in kwargs.items()})
    torch.testing.assert_close(to_cpu(actual), expected, equal_nan=True)
    return actual
