"""A process that ran a backward pass on tpu exits cleanly (torch_tpu/_exit.py).

The autograd engine's tpu device thread may release the last graph task after the program's last
line, when Python has begun finalizing; releasing its Python objects then aborted the process
("terminate called without an active exception"). The script below widens that window: the
backward's stored context holds the only reference to an object whose release sleeps, so when
the device thread is the one to release it, it is still at work while the interpreter exits.
Whether the device thread or the caller releases it last is a race, so the script runs several
times; each run must exit with status 0.
"""
import os
import subprocess
import sys

import torch

SCRIPT = """
import contextvars, time
import torch, torch_tpu

class SlowToRelease:
    def __del__(self):
        time.sleep(0.3)

held = contextvars.ContextVar("held")
x = torch.randn(3, device="tpu", requires_grad=True)
held.set(SlowToRelease())
(x * 2).sum().backward()
held.set(None)
print(x.grad.sum().item())
"""


def test_exit_after_backward_waits_for_the_autograd_device_thread():
    runs = [subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(4)]
    for run in runs:
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-3000:]
        assert float(stdout) == 6.0


UPGRADING_AT_EXIT = """
import torch, torch_tpu
x = torch.linspace(0, 1, 1 << 21).to("tpu")
for _ in range(12):  # each op's quick program has paid for its full compile: upgrades are queued
    x = torch.sin(x) * 1.001 + torch.cos(x)
print(x[:4].sum().item(), torch_tpu.metrics()["quick_compiles"])
"""


def test_exit_while_programs_are_compiled_again_in_the_background(tmp_path):
    # The full compiles queued by the last steps are dropped at exit and the one in flight is
    # awaited while the plugin is whole (torch_tpu/_exit.py); run from the C exit handlers instead,
    # such a compile spun or crashed inside the plugin.
    runs = []
    for i in range(3):
        # An empty cache directory each: every program is compiled in that process.
        env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / str(i)))
        runs.append(subprocess.Popen([sys.executable, "-c", UPGRADING_AT_EXIT], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env))
    x = torch.linspace(0, 1, 1 << 21)
    for _ in range(12):
        x = torch.sin(x) * 1.001 + torch.cos(x)
    expected = x[:4].sum().item()
    for run in runs:
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-3000:]
        value, quick_compiles = stdout.split()
        assert abs(float(value) - expected) < 1e-3 * max(1.0, abs(expected))
        assert int(quick_compiles) > 0  # quick programs ran enough to be due for their full compile
