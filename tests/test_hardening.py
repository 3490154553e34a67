"""Regressions of calls that crashed the process or broke `import torch`; each must now do what
the CPU (or CUDA, for device-only calls) does. Calls that used to kill the process run in a
subprocess, so that a crash fails the test instead of ending the session."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_tpu


def _run(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("typed", [False, True])
def test_set_storage_without_strides_is_contiguous_as_on_cpu(mode, typed):
    def run(device):
        x = torch.arange(12.0, device=device)
        y = torch.empty(0, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # TypedStorage's deprecation
            storage = x.storage() if typed else x.untyped_storage()
        y.set_(storage, 2, (2, 3))
        return y * 1

    torch.testing.assert_close(run("tpu").cpu(), run("cpu"))


def test_set_storage_with_mismatched_strides_raises_as_on_cpu():
    for device in ("cpu", "tpu"):
        x = torch.arange(12.0, device=device)
        with pytest.raises(RuntimeError, match=r"unequal size length \(2\) and stride length \(1\)"):
            torch.empty(0, device=device).set_(x.untyped_storage(), 0, (2, 3), (1,))


def test_as_strided_whose_storage_size_overflows_raises_as_on_cpu():
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
            torch.empty(1, device=device).as_strided((2**62 + 1,), (4,))


def test_rng_state_must_be_a_cpu_byte_tensor():
    done = _run(r"""
import torch
state = torch.tpu.get_rng_state()
for setter in (torch.tpu.set_rng_state, torch.Generator("tpu").set_state):
    try:
        setter(state.to("tpu"))
    except TypeError as error:
        assert "ByteTensor" in str(error), error
    else:
        raise AssertionError("a tpu tensor was accepted as a generator state")
torch.tpu.set_rng_state(state)
print("ok")
""")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_rng_state_is_read_under_fake_tensor_mode():
    done = _run(r"""
import torch
from torch._subclasses import FakeTensorMode
expected = torch.tpu.get_rng_state()
generator = torch.Generator("tpu")
with FakeTensorMode():
    states = [torch.tpu.get_rng_state(), generator.get_state(), generator.clone_state().get_state()]
assert all(s.device.type == "cpu" and s.dtype == torch.uint8 and s.numel() == 16 for s in states)
assert torch.equal(states[0], expected)
print("ok")
""")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_generic_stream_belongs_to_the_current_device():
    for index in range(torch.tpu.device_count()):
        with torch.tpu.device(index):
            stream = torch.Stream(device="tpu")
            assert stream.device_index == index
            with stream:
                x = torch.ones(3, device="tpu") * 2
            stream.synchronize()
            assert x.cpu().tolist() == [2.0, 2.0, 2.0]


def test_an_unknown_eager_mode_in_the_environment_warns_and_runs_strict():
    done = _run(r"""
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch, torch_tpu
print(torch_tpu.get_eager_mode().name, any("TORCH_TPU_EAGER_MODE" in str(w.message) for w in caught))
print((torch.ones(2, device="tpu") + 1).cpu().tolist())
""", TORCH_TPU_EAGER_MODE="fusd")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "DEFER_NEVER True"
    assert lines[1] == "[2.0, 2.0]"
