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
