"""torch.tpu.memory._record_memory_history / _snapshot: allocations and frees with the Python
stack that made them, in the snapshot shape PyTorch's memory visualiser reads."""
import pickle

import pytest
import torch
import torch.cuda._memory_viz as memory_viz

import torch_tpu  # noqa: F401


def make_activation():
    return torch.ones(4096, device="tpu") * 2  # the line the snapshot must name


@pytest.fixture
def recording():
    torch.tpu.memory._record_memory_history(max_entries=10000)
    yield
    torch.tpu.memory._record_memory_history(enabled=None)


def frames_name(entry, function):
    return [f for f in entry["frames"] if f["name"] == function]


def test_allocations_and_frees_carry_the_python_stack(mode, recording):
    kept = make_activation()
    dropped = make_activation()
    dropped_address = dropped.untyped_storage().data_ptr()
    del dropped
    torch.tpu.synchronize()
    snapshot = torch.tpu.memory._snapshot()
    trace = snapshot["device_traces"][0]
    allocations = [e for e in trace if e["action"] == "alloc" and frames_name(e, "make_activation")]
    assert allocations and all(e["size"] >= 4096 * 4 for e in allocations)
    line = make_activation.__code__.co_firstlineno + 1
    assert all(frames_name(e, "make_activation")[0]["line"] == line for e in allocations)
    assert any(e["action"] == "free_completed" and e["addr"] == dropped_address for e in trace)
    live = {s["address"]: s for s in snapshot["segments"]}
    segment = live[kept.untyped_storage().data_ptr()]
    assert segment["total_size"] == kept.untyped_storage().nbytes()
    assert frames_name(segment["blocks"][0], "make_activation")
    assert dropped_address not in live or live[dropped_address]["blocks"][0]["frames"] != allocations[-1]["frames"]


def test_pytorch_memory_visualiser_reads_the_snapshot(recording, tmp_path):
    kept = make_activation()  # noqa: F841
    path = tmp_path / "snapshot.pickle"
    torch.tpu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    # The allocation timeline, the live blocks by stack (flame graph lines) and the HTML viewer.
    assert "cudaMalloc" in memory_viz.trace(snapshot)
    assert "make_activation" in memory_viz.memory(snapshot, format_flamegraph=lambda lines: lines)
    assert "<html>" in memory_viz.trace_plot(snapshot).lower()


def test_stopping_forgets_the_history():
    torch.tpu.memory._record_memory_history()
    make_activation()
    torch.tpu.memory._record_memory_history(enabled=None)
    assert torch.tpu.memory._snapshot() == {"segments": [], "device_traces": [[] for _ in range(torch.tpu.device_count())]}
    with pytest.raises(ValueError):
        torch.tpu.memory._record_memory_history(enabled="sometimes")
