"""The advisor (torch_tpu.advisor): a script with one known instance of each problem gets exactly
those findings, each at its line, from the command line and from watch(); a clean script gets none.

Lines come from marker comments in the scripts, and what a finding names is checked against what
really happened (torch_tpu.fallback_counts(), the tensors the script made). host_bound is a
timing estimate, so no test expects it or its absence; its figures are checked for consistency.
"""
import json
import os
import runpy
import subprocess
import sys

import pytest
import torch

import torch_tpu
import torch_tpu.advisor

# Each marker names the finding expected at its line.
KNOWN_PROBLEMS = '''
import sys
import torch
import torch.nn.functional as F

base = int(sys.argv[1]) if len(sys.argv) > 1 else 8
x = torch.randn(64, device="tpu")
y = torch.special.airy_ai(x)  # cpu_fallback

seq = torch.randn(64, 40, device="tpu")
for n in range(base, base + 4):
    part = seq[:n]
    z = torch.tanh(part)  # recompile

total = 0.0
for i in range(3):
    total += (x * i).sum().item()  # host_read


def f(t):
    t = t * 2
    print("inside the compiled function")  # graph_break
    return t + 1


torch.compile(f, backend="tpu")(x)

q = torch.randn(1, 2, 16, 64, device="tpu", dtype=torch.bfloat16)
a = F.scaled_dot_product_attention(q, q, q)  # attention_shape

w = torch.randn(256, 256, device="tpu")
m = w @ w  # float32_matmul
print(m.sum().item())
'''

CLEAN = '''
import torch

model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
model = model.to("tpu", torch.bfloat16)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(256, 256, device="tpu", dtype=torch.bfloat16)
total = torch.zeros((), device="tpu")
for step in range(3):
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    total += loss.detach()
print(total.item())
'''

# Timing estimates, present or not depending on the machine's load.
TIMED = {"host_bound"}


def expected(script):
    return {(line.split("# ")[-1].strip(), number)
            for number, line in enumerate(script.splitlines(), 1) if "  # " in line}


def found(findings, path):
    return {(f["kind"], f["line"]) for f in findings if f["kind"] not in TIMED and f["file"] == str(path)}


def watch_script(path, argv):
    saved = sys.argv
    sys.argv = [str(path)] + argv
    try:
        with torch_tpu.advisor.watch() as report:
            names = runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = saved
    return report, names


def check_host_bound(summary, method="device timeline"):
    idle = summary["host_bound"]
    assert idle is not None and 0.0 <= idle["device_idle_share"] <= 1.0
    assert 0.0 <= idle["idle_seconds"] <= summary["span_seconds"]
    # Measured from the programs' device events in every mode, fused graphs included.
    assert idle["method"] == method


def test_host_bound_is_estimated_while_a_profiler_trace_owns_the_device_events(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    path = tmp_path / "clean.py"
    path.write_text(CLEAN)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        report, _ = watch_script(path, [])
    check_host_bound(report.summary, method="host-side upper bound")
    # The profiler kept its device events.
    assert any(e.device_type == torch.autograd.DeviceType.PrivateUse1 for e in prof.events())


@pytest.fixture
def known(tmp_path):
    path = tmp_path / "known_problems.py"
    path.write_text(KNOWN_PROBLEMS)
    return path


def test_known_problems_found_at_their_lines(mode, known):
    # Programs are shared across tests and modes: each mode's sequence lengths are its own.
    base = 8 + 16 * ["debug", "strict", "defer_and_fuse"].index(mode)
    torch_tpu.reset_fallback_counts()
    report, names = watch_script(known, [str(base)])
    findings = json.loads(report.to_json())["findings"]
    assert found(findings, known) == expected(KNOWN_PROBLEMS)

    by_kind = {f["kind"]: f for f in findings}
    assert by_kind["cpu_fallback"]["details"]["op"] in torch_tpu.fallback_counts()
    assert by_kind["attention_shape"]["details"]["head_dim"] == names["q"].shape[-1]
    assert by_kind["host_read"]["count"] == 3
    assert "dim 0" in " ".join(by_kind["recompile"]["details"]["changes"])
    assert "print" in by_kind["graph_break"]["advice"]
    ranked = [f["seconds"] for f in findings]
    assert ranked == sorted(ranked, reverse=True)
    text = report.to_text()
    for f in findings:
        if f["line"]:
            assert f"{known.name}:{f['line']}" in text
    check_host_bound(report.summary)


def test_clean_script_gets_no_findings(mode, tmp_path):
    path = tmp_path / "clean.py"
    path.write_text(CLEAN)
    report, _ = watch_script(path, [])
    assert [f for f in report.findings if f.kind not in TIMED] == []
    assert report.summary["device_ops"] > 0
    # The weights and the optimizer's step were seen; memory was measured on the device.
    assert report.summary["peak_memory_bytes"][0] == torch.tpu.max_memory_allocated(0)
    assert report.summary["largest_tensors"]


def test_command_line_json(known, tmp_path):
    out = tmp_path / "report.json"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"))
    for name in ("TORCH_TPU_EAGER_MODE", "TPU_LAUNCH_BLOCKING", "TORCH_TPU_DEFER_AND_FUSE", "TPU_DEFER_AND_FUSE"):
        env.pop(name, None)  # the default mode, strict
    run = subprocess.run([sys.executable, "-m", "torch_tpu.advisor", "--json", "-o", str(out), str(known)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "inside the compiled function" in run.stdout  # the script's own output is untouched
    report = json.loads(out.read_text())
    assert found(report["findings"], known) == expected(KNOWN_PROBLEMS)
    assert report["summary"]["mode"] == "strict"
    check_host_bound(report["summary"])


PEAK = '''
import torch
model = torch.nn.Linear(512, 512).to("tpu")
x = torch.randn(8, 512, device="tpu")
for _ in range(2):
    scratch = torch.empty(1024, 1024, device="tpu").fill_(1.0)  # PEAK
    y = model(x).sum() + scratch.sum()
    del scratch
y.item()
'''


def test_largest_storages_at_the_peak_come_from_the_memory_history(mode, tmp_path):
    path = tmp_path / "peak.py"
    path.write_text(PEAK)
    peak_line = next(i for i, text in enumerate(PEAK.splitlines(), start=1) if "# PEAK" in text)
    torch.tpu.memory._record_memory_history()  # the program's own recording survives the advisor
    try:
        report, _ = watch_script(path, [])
        largest = report.summary["largest_tensors"]
        assert largest[0] == {"bytes": 1024 * 1024 * 4, "name": f"allocated at peak.py:{peak_line} in <module>"}
        assert {"bytes": 512 * 512 * 4, "name": "Linear.weight"} in largest
        assert torch_tpu._C._recording_memory_history()
    finally:
        torch.tpu.memory._record_memory_history(enabled=None)
    assert not torch_tpu._C._recording_memory_history()
