"""A process that ran a backward pass on tpu exits cleanly (torch_tpu/_autograd_shutdown.py).

The autograd engine's tpu device thread may release the last graph task after the program's last
line, when Python has begun finalizing; releasing its Python objects then aborted the process
("terminate called without an active exception"). The script below widens that window: the
backward's stored context holds the only reference to an object whose release sleeps, so when
the device thread is the one to release it, it is still at work while the interpreter exits.
Whether the device thread or the caller releases it last is a race, so the script runs several
times; each run must exit with status 0.
"""
import subprocess
import sys

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
