"""A tpu tensor or the device crossing a process or framework boundary: fork, multiprocessing
pickling, DLPack. Each either works as on CUDA or raises a message that says what to do; none
may hang or crash. Scenarios that fork or spawn run in a subprocess with a timeout, so a hang
fails the test instead of stalling the session."""
import os
import subprocess
import sys

import pytest
import torch


def _run(code, timeout=180):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("mode", ["debug", "strict", "defer_and_fuse"])
def test_a_child_forked_after_the_device_was_used_raises_instead_of_hanging(mode):
    out = _run(rf"""
import multiprocessing as mp
import torch, torch_tpu
torch_tpu.set_eager_mode("{mode}")
x = torch.ones(3, device="tpu") + 1
x.cpu()

def use_inherited(q):
    try:
        q.put(("ran", str((x + 1).cpu())))
    except RuntimeError as error:
        q.put(("raised", str(error)))

def make_new(q):
    try:
        torch.ones(2, device="tpu")
        q.put(("ran", ""))
    except RuntimeError as error:
        q.put(("raised", str(error), torch.tpu._is_in_bad_fork()))

ctx = mp.get_context("fork")
for target in (use_inherited, make_new):
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0, p.exitcode
    result = q.get(timeout=5)
    assert result[0] == "raised", result
    assert "forked subprocess" in result[1] and "spawn" in result[1], result
    if target is make_new:
        assert result[2] is True
assert not torch.tpu._is_in_bad_fork()
print((x * 2).cpu().tolist())
""")
    assert out.strip().splitlines()[-1] == str((torch.ones(3) * 4).tolist())


def test_a_child_forked_before_the_device_was_used_can_use_it():
    out = _run(r"""
import multiprocessing as mp
import torch, torch_tpu

def child(q):
    q.put((torch.arange(3.0, device="tpu") * 2).cpu().tolist())

ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
print(q.get(timeout=120))
p.join(60)
assert p.exitcode == 0
""")
    assert out.strip() == str((torch.arange(3.0) * 2).tolist())


def test_a_tpu_tensor_sent_to_another_process_raises_at_the_sender_instead_of_hanging():
    out = _run(r"""
import multiprocessing as mp
import torch, torch_tpu

def refused(send):
    try:
        send()
    except RuntimeError as error:
        assert "cpu()" in str(error), error
        return True
    return False

ctx = mp.get_context("spawn")
t = torch.ones(2, device="tpu")
for sent in (t, t.untyped_storage(), torch.nn.Parameter(t.clone()), (1, {"x": [t]})):
    assert refused(lambda: ctx.Queue().put(sent)), sent
    assert refused(lambda: ctx.SimpleQueue().put(sent)), sent
    assert refused(lambda: ctx.Pipe()[1].send(sent)), sent
# Deeper than put() looks: the feeder thread pickles it, and the receiver's get() raises.
q = ctx.Queue()
q.put([[[[[t]]]]])
assert refused(lambda: q.get(timeout=60))
q = ctx.Queue()
q.put(torch.arange(3.0))  # CPU tensors still go through shared memory
print(q.get(timeout=60).tolist())
""")
    assert out.strip() == "[0.0, 1.0, 2.0]"


def test_dlpack_export_of_a_tpu_tensor_raises_a_clear_buffer_error():
    t = torch.ones(3, device="tpu")
    for export in (torch.from_dlpack, lambda x: x.__dlpack__(), lambda x: x.__dlpack_device__(),
                   torch.utils.dlpack.to_dlpack):
        with pytest.raises(BufferError, match=r"cpu\(\)"):
            export(t)
    # The CPU path is untouched, and the copy that the message suggests works.
    torch.testing.assert_close(torch.from_dlpack(t.cpu()), torch.ones(3))
