"""What a first session waits for: programs that serve every position of a view, quick per-op
compiles that upgrade themselves, fused graphs cut where a loop repeats, and the compile cost
visible per kind of program. Values are always compared with the CPU's."""
import copy
import json
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu


def _compiles():
    return torch_tpu.metrics()["compiles"]


def _width(mode):
    """A size no other test uses, one per mode: programs are shared by the modes and the tests,
    and a program compiled elsewhere would hide a compile counted here."""
    return 37 + ["debug", "strict", "defer_and_fuse"].index(mode)


def test_a_read_at_each_index_compiles_once(mode):
    x = torch.randn(8, _width(mode))
    xt = x.to("tpu")
    torch.tpu.synchronize()
    # The first reads may compile (an exact program, then one that serves other sizes too, when
    # this op has met other sizes before); the rest compile nothing.
    for i in range(2):
        torch.testing.assert_close((xt[i] + 1).cpu(), x[i] + 1)
    before = _compiles()
    for i in range(2, 8):
        torch.testing.assert_close((xt[i] + 1).cpu(), x[i] + 1)
    assert _compiles() == before


def test_a_decode_loop_writing_one_cache_position_per_step_compiles_once(mode):
    cache = torch.zeros(2, 16, _width(mode))
    cache_tpu = cache.to("tpu")
    keys = torch.randn(16, 2, _width(mode))
    keys_tpu = keys.to("tpu")
    torch.tpu.synchronize()
    before = _compiles()
    for t in range(16):
        cache[:, t] = keys[t]
        cache_tpu[:, t] = keys_tpu[t]
        torch.tpu.synchronize()  # a sync per step: in defer_and_fuse each step is its own graph
        if t == 1:
            warm = _compiles()
    after = _compiles()
    torch.testing.assert_close(cache_tpu.cpu(), cache)
    # At most one program per kind of write (keys[t] is read at a runtime offset too); none per step.
    assert warm - before <= 2 and after == warm


@pytest.mark.parametrize("offset", [0, 1, 2, 5])
def test_views_at_runtime_offsets_read_and_write_what_cpu_does(mode, offset):
    base = torch.randn(64)
    base_tpu = base.to("tpu")
    layouts = [((3, 2), (6, 2)), ((4, 3), (1, 4)), ((2, 3, 2), (12, 1, 3)), ((5,), (7,)), ((3, 4), (0, 1))]
    for sizes, strides in layouts:
        view, view_tpu = base.as_strided(sizes, strides, offset), base_tpu.as_strided(sizes, strides, offset)
        torch.testing.assert_close((view_tpu * 2).cpu(), view * 2)
        torch.testing.assert_close(view_tpu.sum().cpu(), view.sum())
    for sizes, strides in layouts[:4]:  # no broadcast: an in-place write needs distinct elements
        base.as_strided(sizes, strides, offset).add_(offset + 1)
        base_tpu.as_strided(sizes, strides, offset).add_(offset + 1)
    torch.testing.assert_close(base_tpu.cpu(), base)
    # Slices of a reshaped storage, read and written at their offsets.
    grid, grid_tpu = base.view(8, 8), base_tpu.view(8, 8)
    grid[offset:offset + 2, 1::3].mul_(-1)
    grid_tpu[offset:offset + 2, 1::3].mul_(-1)
    torch.testing.assert_close(grid_tpu.cpu(), grid)
    torch.testing.assert_close(grid_tpu[offset:, ::2].t().contiguous().cpu(), grid[offset:, ::2].t().contiguous())


def test_compile_cost_is_counted_per_kind_of_program():
    torch_tpu.reset_metrics()
    x = torch.randn(7, 3, device="tpu")
    with torch_tpu.eager_mode("strict"):
        (x.cos() * 3).cpu()
    with torch_tpu.eager_mode("defer_and_fuse"):
        (x.sin() * 5 + 1).cpu()
    compiled = torch.compile(lambda t: (t.tan() - 2).relu(), backend="tpu")
    compiled(x).cpu()
    m = torch_tpu.metrics()
    assert m["compiles_per_op"] >= 2
    assert m["compiles_fused_graph"] >= 1
    assert m["compiles_compiled_graph"] >= 1
    assert m["compile_seconds_per_op"] > 0 and m["compile_seconds_fused_graph"] > 0
    total = m["compile_seconds_per_op"] + m["compile_seconds_fused_graph"] + m["compile_seconds_compiled_graph"]
    assert m["compile_seconds"] == pytest.approx(total)
    assert m["compiles"] == m["compiles_per_op"] + m["compiles_fused_graph"] + m["compiles_compiled_graph"]
    assert 0 < m["per_op_compile_median_ms"] < 1000 * m["compile_seconds_per_op"] + 1e-9


def _run(code, **env):
    full_env = dict(os.environ, **env)
    full_env.pop("TORCH_TPU_EAGER_MODE", None)
    done = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_quick_per_op_program_is_compiled_again_once_it_has_run_enough(tmp_path):
    code = r"""
import json, torch, torch_tpu
x, expected = torch.linspace(0, 1, 50000), torch.linspace(0, 1, 50000)
xt = x.to("tpu")
for _ in range(120):
    xt = xt * 1.001 + 0.0001
    expected = expected * 1.001 + 0.0001
torch_tpu.wait_for_background_compiles()
for _ in range(20):
    xt = xt * 1.001 + 0.0001
    expected = expected * 1.001 + 0.0001
torch.testing.assert_close(xt.cpu(), expected)
m = torch_tpu.metrics()
print(json.dumps({k: m[k] for k in ("quick_compiles", "compile_upgrades", "compiles")}))
"""
    first, _ = _run(code, TORCH_TPU_CACHE_DIR=str(tmp_path))
    assert first["quick_compiles"] >= 2
    assert first["compile_upgrades"] >= 2
    # The upgraded programs replaced the quick ones in the cache directory: a new process loads
    # them and neither compiles nor upgrades.
    second, _ = _run(code, TORCH_TPU_CACHE_DIR=str(tmp_path))
    assert second["compiles"] == 0 and second["compile_upgrades"] == 0


def test_a_slow_compile_warns_once_naming_its_ops(tmp_path):
    code = r"""
import json, torch, torch_tpu
torch_tpu.set_eager_mode("defer_and_fuse")
x = torch.randn(5).to("tpu")
(x.exp() + 1).cpu()
(x.log1p() * 2).cpu()
print(json.dumps({"slow": torch_tpu.metrics()["slow_compiles"]}))
"""
    result, stderr = _run(code, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_SLOW_COMPILE_SECONDS="1e-9")
    assert result["slow"] >= 2
    assert stderr.count("compiling a fused_graph program took") == 1
    assert "aten::exp" in stderr and "What would help" in stderr


@pytest.mark.parametrize("bound", [61, 97])
def test_a_loop_without_host_reads_becomes_one_program_run_again(bound):
    """defer_and_fuse: a loop body that repeats is cut where it starts again, so that its graphs
    are the same program; values are the CPU's."""
    torch.manual_seed(0)
    w, h0 = torch.randn(16, 16) * 0.3, torch.randn(4, 16)
    w_tpu, h_tpu, h = w.to("tpu"), h0.to("tpu"), h0.clone()
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch.tpu.synchronize()
        torch_tpu._C._set_max_pending_ops(bound)
        try:
            torch_tpu.reset_metrics()
            for step in range(300):  # 8 ops a step: cut at the bound alone, graphs would start at 8 different ops
                h_tpu = torch.tanh(h_tpu @ w_tpu + 0.1 * step)
                h_tpu = (h_tpu * 0.5 + h_tpu.sin()).neg().abs()
                h = torch.tanh(h @ w + 0.1 * step)
                h = (h * 0.5 + h.sin()).neg().abs()
            result = h_tpu.cpu()
            m = torch_tpu.metrics()
        finally:
            torch_tpu._C._set_max_pending_ops(20000)
    torch.testing.assert_close(result, h)
    assert m["flush_reasons"].get("pending-op bound", 0) >= 5
    # The first graph, the repeated body and the remainder: a constant, not one per graph.
    assert m["compiles"] <= 4, m


def test_cutting_a_graph_keeps_what_its_rest_reads_even_when_python_dropped_it():
    a = torch.randn(6)
    a_tpu = a.to("tpu")
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch.tpu.synchronize()
        torch_tpu._C._set_max_pending_ops(64)
        try:
            outs, expected = [], []
            for step in range(100):
                t = a_tpu * (step + 1)  # t's storage dies when the name is rebound
                outs.append(t + 1 if step % 2 else t.exp())
                e = a * (step + 1)
                expected.append(e + 1 if step % 2 else e.exp())
            results = [o.cpu() for o in outs]
        finally:
            torch_tpu._C._set_max_pending_ops(20000)
    for got, want in zip(results, expected):
        torch.testing.assert_close(got, want)



def test_a_fused_step_whose_sizes_keep_changing_compiles_one_program_per_new_bucket():
    """defer_and_fuse: once a training step has run at several lengths, a length in a bucket it has
    not met compiles that bucket's padded program at once (no exact program first, which the next
    length of the bucket would not reuse); losses are the CPU's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 10), torch.nn.Tanh(), torch.nn.Linear(10, 6))
    model_tpu = copy.deepcopy(model).to("tpu")

    def loss_of(m, x):
        return torch.softmax(m(x), dim=1).mul(x).sum()

    compiled = {}
    with torch_tpu.eager_mode("defer_and_fuse"):
        for length in range(8, 81, 8):  # growing by equal steps: the uploads get their bucket's room
            x = torch.randn(2, length, 6, generator=torch.Generator().manual_seed(length))
            before = _compiles()
            got = loss_of(model_tpu, x.to("tpu")).item()
            compiled[length] = _compiles() - before
            torch.testing.assert_close(got, loss_of(model, x).item(), rtol=1e-5, atol=1e-5)
    # 40 opens bucket 64 with its padded program, which 48 and 56 then run; likewise 72 and 80.
    assert compiled[40] <= 1 and compiled[48] == 0 and compiled[56] == 0, compiled
    assert compiled[72] <= 1 and compiled[80] == 0, compiled
