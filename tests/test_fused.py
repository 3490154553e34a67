"""What defer-and-fuse adds to strict's semantics: fusion, sync points, liveness, attribution."""
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_tpu


def flushes(fn):
    before = torch_tpu.metrics()
    fn()
    after = torch_tpu.metrics()
    reasons = {k: v - before["flush_reasons"].get(k, 0) for k, v in after["flush_reasons"].items()
               if v != before["flush_reasons"].get(k, 0)}
    return after["executions"] - before["executions"], reasons


def test_ops_are_recorded_until_a_sync_point():
    x = torch.randn(16, device="tpu")
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        executions, reasons = flushes(lambda: [(x * 2).exp().sum() for _ in range(3)])
        assert executions == 0 and not reasons
        y = (x * 3).sin()
        executions, reasons = flushes(lambda: y.cpu())
        assert executions == 1 and reasons == {"host access": 1}, (executions, reasons)
        torch.testing.assert_close(y.cpu(), (x.cpu() * 3).sin())


def test_sync_points():
    x = torch.randn(8, device="tpu")
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        _, reasons = flushes(lambda: ((x + 1).sum().item(), None))
        assert reasons == {"host access": 1}
        _, reasons = flushes(lambda: (x.add_(1), torch.tpu.synchronize()))
        assert reasons == {"synchronize": 1}
        torch_tpu.set_fallback_warnings(False)
        try:
            # airy_ai has no lowering yet: it runs on the CPU.
            _, reasons = flushes(lambda: (x.mul_(2), torch.special.airy_ai(x)))
        finally:
            torch_tpu.set_fallback_warnings(True)
        assert reasons.get("fallback op") == 1
        x.add_(1)
        before = torch_tpu.metrics()["flush_reasons"].get("mode change", 0)
    # Leaving the mode ran the pending add_.
    assert torch_tpu.metrics()["flush_reasons"].get("mode change", 0) == before + 1
    _, reasons = flushes(lambda: None)
    assert reasons == {}


def test_pending_op_bound():
    x = torch.zeros(4, device="tpu")
    torch.tpu.synchronize()
    torch_tpu._C._set_max_pending_ops(10)
    try:
        with torch_tpu.eager_mode("fused"):
            _, reasons = flushes(lambda: [x.add_(1) for _ in range(25)])
            assert reasons == {"pending-op bound": 2}
            assert x.cpu().tolist() == [25.0] * 4
    finally:
        torch_tpu._C._set_max_pending_ops(20000)


def test_a_list_op_counts_each_tensor_it_writes_toward_the_bound():
    # A foreach call's program holds each entry's update, so it weighs as many ops.
    tensors = [torch.zeros(4, device="tpu") for _ in range(6)]
    torch.tpu.synchronize()
    torch_tpu._C._set_max_pending_ops(10)
    try:
        with torch_tpu.eager_mode("fused"):
            _, reasons = flushes(lambda: [torch._foreach_add_(tensors, 1.0) for _ in range(4)])
            assert reasons == {"pending-op bound": 2}
            assert [t.cpu().tolist() for t in tensors] == [[4.0] * 4] * 6
    finally:
        torch_tpu._C._set_max_pending_ops(20000)


def test_dead_intermediates_are_never_materialised():
    x = torch.randn(64, device="tpu")
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        before = torch_tpu.metrics()["program_outputs"]
        a = x * 2
        b = a.exp()
        c = b - a
        del a, b
        torch.tpu.synchronize()
        assert torch_tpu.metrics()["program_outputs"] - before == 1  # only c
        torch.testing.assert_close(c.cpu(), (x.cpu() * 2).exp() - x.cpu() * 2)


def test_forward_backward_and_optimizer_become_one_program():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to("tpu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(5, 4, device="tpu")
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        def step():
            loss = model(x).square().mean()
            optimizer.zero_grad()
            loss.backward()  # runs on the autograd engine's thread, in the caller's mode
            optimizer.step()
            return loss.item()
        step()
        executions, reasons = flushes(step)
    assert executions == 1 and reasons == {"host access": 1}, (executions, reasons)


def _run_where_exp_cannot_compile(code):
    """Runs `code` in a process whose programs containing aten::exp fail to compile."""
    env = dict(os.environ, TORCH_TPU_INJECT_COMPILE_FAILURE="exp")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return result


def test_compile_error_names_the_recorded_op_and_its_line():
    code = (
        "import torch, torch_tpu\n"
        "torch_tpu.set_eager_mode('fused')\n"
        "x = torch.ones(3, device='tpu')\n"
        "y = torch.exp(x)  # line 4: recorded here\n"
        "z = y * 2\n"
        "try:\n"
        "    z.sum().item()  # line 7: the graph runs here\n"
        "except RuntimeError as e:\n"
        "    print('ERROR', e)\n")
    result = _run_where_exp_cannot_compile(code)
    assert "ERROR" in result.stdout and "aten::exp" in result.stdout, result.stdout
    assert "<string>:4" in result.stdout


@pytest.mark.parametrize("position", [0, 1, 2, 3])
def test_a_graph_that_fails_to_compile_keeps_every_write_before_the_failing_op(position):
    """The graph's calls run one by one instead: what was recorded before the op that cannot be
    compiled takes effect, and the error names that op and its line."""
    code = (
        "import json, torch, torch_tpu\n"
        "torch_tpu.set_eager_mode('fused')\n"
        "a, b, c = (torch.full((4,), v).to('tpu') for v in (1.0, 2.0, 3.0))\n"
        "torch.tpu.synchronize()\n"
        f"position = {position}\n"
        "ops = [lambda: a.add_(1), lambda: b.mul_(a), lambda: c.sub_(b)]\n"
        "ops.insert(position, lambda: torch.exp(a))  # the op whose program cannot be compiled\n"
        "for op in ops:\n"
        "    op()\n"
        "try:\n"
        "    torch.tpu.synchronize()\n"
        "    error = ''\n"
        "except RuntimeError as e:\n"
        "    error = str(e)\n"
        "print(json.dumps({'error': error, 'a': a.tolist(), 'b': b.tolist(), 'c': c.tolist()}))\n")
    result = _run_where_exp_cannot_compile(code)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert "aten::exp" in out["error"] and "<string>:7" in out["error"], out["error"]
    # CPU reference: the writes recorded before the failing op, and none after it.
    a, b, c = torch.full((4,), 1.0), torch.full((4,), 2.0), torch.full((4,), 3.0)
    for op in [lambda: a.add_(1), lambda: b.mul_(a), lambda: c.sub_(b)][:position]:
        op()
    assert (out["a"], out["b"], out["c"]) == (a.tolist(), b.tolist(), c.tolist())


def test_a_call_site_that_keeps_recompiling_is_warned_about():
    with torch_tpu.eager_mode("fused"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 12):
            # A new structure every time: programs that serve many sizes cannot help.
            torch.ones(n, device="tpu").sort().values[: n // 2 + 1].sum().item()
    # The site is the user's line, found without the GIL in the recording of each op.
    line = test_a_call_site_that_keeps_recompiling_is_warned_about.__code__.co_firstlineno + 5
    assert any("has been compiled" in str(w.message) and f"test_fused.py:{line}" in str(w.message)
               for w in caught), [str(w.message) for w in caught]


def test_fused_peak_memory_is_lower_than_strict():
    def peak(mode):
        x = torch.randn(2 ** 18, device="tpu")
        torch.tpu.synchronize()
        torch.tpu.reset_peak_memory_stats()
        baseline = torch.tpu.memory_allocated()
        with torch_tpu.eager_mode(mode):
            chain = [x]
            for _ in range(6):
                chain.append(chain[-1].sin())
            result = chain[-1]
            del chain
            torch.tpu.synchronize()
        torch.testing.assert_close(result.cpu(), x.cpu().sin().sin().sin().sin().sin().sin())
        return torch.tpu.max_memory_allocated() - baseline

    strict, fused = peak("strict"), peak("fused")
    assert fused <= strict / 3, (fused, strict)  # strict holds every link of the chain
