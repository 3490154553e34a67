"""PyTorch's profiler with the tpu device: device events get device timestamps from the same
clock as their own start (no negative or absurd durations), in every mode."""
import warnings

import torch


def _profile_a_matmul_chain():
    x = torch.randn(128, 128, device="tpu")
    torch.tpu.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autograd.profiler.profile(use_device="tpu") as prof:
            for _ in range(3):
                x = (x @ x).tanh()
            x.cpu()
    return prof, caught


def test_profiled_ops_have_sane_host_and_device_times(mode):
    prof, caught = _profile_a_matmul_chain()
    events = prof.function_events
    assert any(e.name == "aten::mm" for e in events)
    wall_us = (max(e.time_range.end for e in events) - min(e.time_range.start for e in events))
    for e in events:
        assert 0 <= e.time_range.elapsed_us() <= wall_us, (e.name, e.time_range)
        assert 0 <= e.device_time <= wall_us * 1.01 + 1000, (e.name, e.device_time)
    assert not [w for w in caught if "INTERNAL ASSERT" in str(w.message)]


def test_device_time_is_attributed_in_strict_mode():
    import torch_tpu

    with torch_tpu.eager_mode("strict"):
        prof, _ = _profile_a_matmul_chain()
    # Strict runs each op as it comes: the matmuls' programs take measurable device time.
    assert sum(e.device_time for e in prof.function_events if e.name == "aten::mm") > 0
    assert "aten::mm" in prof.key_averages().table(sort_by="self_device_time_total")


# ---------------------------------------------------------------------------------------------
# torch.profiler with ProfilerActivity.PrivateUse1: device events from the Kineto child profiler
# (csrc/aten/kineto_device_trace.cpp).

import json  # noqa: E402

from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

DEVICE_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _train_steps(model, opt, x, y, steps=2):
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss


def _profile_training(**kwargs):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(16, 32, device="tpu"), torch.randn(16, 8, device="tpu")
    _train_steps(model, opt, x, y)  # compiled before the trace
    torch.tpu.synchronize()
    with profile(activities=DEVICE_ACTIVITIES, **kwargs) as prof:
        with record_function("step"):
            loss = _train_steps(model, opt, x, y)
            loss.item()
            torch.tpu.synchronize()
    return prof


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]


def test_device_events_are_timed_linked_and_inside_the_step(mode):
    prof = _profile_training()
    events = prof.events()
    device = _device_events(prof)
    assert device, "no device events were recorded"
    step = next(e for e in events if e.name == "step")
    wall = step.time_range.elapsed_us()
    for e in device:
        assert e.time_range.elapsed_us() >= 0, (e.name, e.time_range)
        # Every program launched in the step ran inside it: the step ends with a synchronize.
        assert step.time_range.start <= e.time_range.start and e.time_range.end <= step.time_range.end, e.name
        assert e.name.split(": ")[0] in ("per_op", "fused_graph", "compiled_graph"), e.name
    assert sum(e.time_range.elapsed_us() for e in device) > 0
    assert sum(e.time_range.elapsed_us() for e in device) <= wall
    # Each device event's time is added to the PyTorch op that launched it.
    launched_by = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU and e.kernels]
    assert launched_by, "no host op was linked to a device event"
    linked_total = sum(k.duration for e in launched_by for k in e.kernels)
    assert abs(linked_total - sum(e.time_range.elapsed_us() for e in device)) < 1.0
    if mode == "debug":
        # Debug mode waits for each op's program inside the op: its device time nests in the op.
        for op in launched_by:
            assert op.time_range.start <= op.time_range.end
            assert op.self_device_time_total <= op.time_range.elapsed_us() + 1.0, op.name


def test_key_averages_give_device_totals_per_op():
    import torch_tpu

    with torch_tpu.eager_mode("strict"):
        prof = _profile_training()
    averages = {a.key: a for a in prof.key_averages()}
    assert averages["aten::addmm"].self_device_time_total > 0
    assert averages["aten::addmm"].device_time_total >= averages["aten::addmm"].self_device_time_total
    assert any(key.startswith("per_op: aten::addmm") for key in averages), list(averages)
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=10)
    assert "TPU" in table and "aten::addmm" in table


def test_chrome_trace_has_host_and_device_lanes_joined_by_flows(mode, tmp_path):
    prof = _profile_training()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    host_ops = [e for e in events if e.get("cat") == "cpu_op"]
    assert kernels and host_ops
    device_pids = {e["pid"] for e in kernels}
    host_pids = {e["pid"] for e in host_ops}
    assert not device_pids & host_pids, "device events share the host's lane"
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert all(names.get(pid, "").startswith("TPU ") for pid in device_pids), names
    for e in kernels:
        assert e["ph"] == "X" and e["dur"] >= 0 and "ops" in e["args"] and e["args"]["output bytes"] >= 0
    # The flows: each launch ("s", on the host) has its program ("f", on the device).
    starts = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
    assert starts and set(starts) == set(finishes)
    assert all(finishes[i]["pid"] in device_pids and starts[i]["pid"] in host_pids for i in starts)
    external_ids = {e["args"].get("External id") for e in host_ops}
    assert all(e["args"]["External id"] in external_ids for e in kernels)
    if mode == "debug":
        # Debug mode waits for each op's program inside the op: the device event nests in the
        # window of the host op that launched it (the innermost op with its External id).
        for kernel in kernels:
            owners = [e for e in host_ops if e["args"].get("External id") == kernel["args"]["External id"]]
            owner = min(owners, key=lambda e: e["dur"])
            assert owner["ts"] <= kernel["ts"] and kernel["ts"] + kernel["dur"] <= owner["ts"] + owner["dur"] + 1.0, (
                kernel["name"], owner["name"])


def test_compiles_are_events_and_memory_is_attributed():
    import torch_tpu

    with torch_tpu.eager_mode("strict"):
        x = torch.randn(29, 31, device="tpu")  # a shape no other test compiles
        torch.tpu.synchronize()
        with profile(activities=DEVICE_ACTIVITIES, profile_memory=True) as prof:
            y = torch.atan2(x, x + 1)
            y.cpu()
    compiles = [e for e in prof.events() if e.name == "compile per_op"]
    assert compiles and all(e.time_range.elapsed_us() > 0 for e in compiles)
    # The op's device allocations (its result, its operand x + 1) are counted as its memory.
    averages = {a.key: a for a in prof.key_averages()}
    assert averages["aten::atan2"].device_memory_usage >= 29 * 31 * 4


def test_compiled_graphs_appear_as_device_events():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()).to("tpu")
    compiled = torch.compile(model, backend="tpu")
    x = torch.randn(4, 16, device="tpu")
    for _ in range(2):
        compiled(x).cpu()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        out = compiled(x)
        out.cpu()
    names = [e.name for e in _device_events(prof)]
    assert any(n.startswith("compiled_graph: ") for n in names), names


def test_cpu_only_profile_records_no_device_events():
    x = torch.randn(8, 8, device="tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x @ x).cpu()
    assert not _device_events(prof)
    assert any(e.name == "aten::mm" for e in prof.events())
