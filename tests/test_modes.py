"""The eager-mode API and what each mode promises."""
import os
import subprocess
import sys
import threading

import pytest
import torch

import torch_tpu
from torch_tpu import EagerMode


def mode_in_subprocess(**env):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("TPU_LAUNCH_BLOCKING", "TORCH_TPU_DEFER_AND_FUSE", "TPU_DEFER_AND_FUSE",
                          "TORCH_TPU_EAGER_MODE")}
    clean.update(env)
    result = subprocess.run([sys.executable, "-c", "import torch, torch_tpu; print(torch_tpu.get_eager_mode().name)"],
                            capture_output=True, text=True, env=clean, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_names_and_aliases():
    for name, expected in [("debug", EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING), ("strict", EagerMode.DEFER_NEVER),
                           ("defer_and_fuse", EagerMode.DEFER_AND_FUSE), ("fused", EagerMode.DEFER_AND_FUSE),
                           (EagerMode.DEFER_NEVER, EagerMode.DEFER_NEVER), ("DEFER_AND_FUSE", EagerMode.DEFER_AND_FUSE)]:
        with torch_tpu.eager_mode(name):
            assert torch_tpu.get_eager_mode() is expected
    with pytest.raises(ValueError, match="unknown tpu eager mode"):
        torch_tpu.set_eager_mode("turbo")


def test_default_comes_from_the_environment_and_context_manager_restores():
    # Strict when the environment names no mode (test_mode_from_environment covers each name).
    default = torch_tpu.mode_from_environment()
    assert torch_tpu.get_eager_mode() is default
    with torch_tpu.eager_mode("debug"):
        assert torch_tpu.get_eager_mode() is EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
        with torch_tpu.eager_mode("fused"):
            assert torch_tpu.get_eager_mode() is EagerMode.DEFER_AND_FUSE
        assert torch_tpu.get_eager_mode() is EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
    assert torch_tpu.get_eager_mode() is default


def test_mode_is_per_thread():
    seen = {}
    with torch_tpu.eager_mode("debug"):
        def other():
            seen["mode"] = torch_tpu.get_eager_mode()
            torch_tpu.set_eager_mode("fused")
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert torch_tpu.get_eager_mode() is EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
    # A new thread starts in the process's default mode, not its creator's.
    assert seen["mode"] is torch_tpu.mode_from_environment()


@pytest.mark.parametrize("env,expected", [
    ({}, "DEFER_NEVER"),
    ({"TPU_LAUNCH_BLOCKING": "1"}, "DEFER_NEVER_AND_LAUNCH_BLOCKING"),
    ({"TPU_LAUNCH_BLOCKING": "1", "TORCH_TPU_DEFER_AND_FUSE": "1"}, "DEFER_NEVER_AND_LAUNCH_BLOCKING"),
    ({"TORCH_TPU_DEFER_AND_FUSE": "1"}, "DEFER_AND_FUSE"),
    ({"TPU_DEFER_AND_FUSE": "1"}, "DEFER_AND_FUSE"),
    ({"TORCH_TPU_EAGER_MODE": "debug"}, "DEFER_NEVER_AND_LAUNCH_BLOCKING"),
    ({"TORCH_TPU_EAGER_MODE": "fused"}, "DEFER_AND_FUSE"),
])
def test_mode_from_environment(env, expected):
    assert mode_in_subprocess(**env) == expected


def test_same_results_in_every_mode():
    x = torch.randn(8, 8)
    results = []
    for name in ("debug", "strict", "defer_and_fuse"):
        with torch_tpu.eager_mode(name):
            t = x.to("tpu")
            results.append(((t @ t.t()).softmax(-1) * 3 - t.abs()).cpu())
    torch.testing.assert_close(results[0], results[1])
    torch.testing.assert_close(results[0], results[2])


def test_debug_mode_error_names_the_op_and_the_python_line():
    code = (
        "import torch, torch_tpu\n"
        "torch_tpu.set_eager_mode('debug')\n"
        "x = torch.ones(3, device='tpu')\n"
        "try:\n"
        "    y = torch.exp(x)  # line 5\n"
        "except RuntimeError as e:\n"
        "    print('ERROR', e)\n"
        "print('after', (x + 1).sum().item())\n")
    env = dict(os.environ, TORCH_TPU_INJECT_COMPILE_FAILURE="exp")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "ERROR" in result.stdout, result.stdout
    message = result.stdout
    assert "aten::exp" in message
    assert "<string>:5" in message
    assert "could not be compiled" in message and ".mlir" in message
    assert "after 6.0" in message  # the process and the device stay usable
