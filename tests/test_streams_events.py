"""Streams and events on tpu, through torch.tpu and the generic torch.Stream / torch.Event."""
import time

import torch

import torch_tpu


def test_streams_are_distinct_and_selectable(mode):
    default = torch.tpu.current_stream()
    assert default == torch.tpu.default_stream()
    side = torch.tpu.Stream()
    assert side != default and side.device == torch.device("tpu", 0)
    with torch.tpu.stream(side):
        assert torch.tpu.current_stream() == side
        assert torch.accelerator.current_stream() == side
    assert torch.tpu.current_stream() == default


def test_work_ordered_through_an_event_across_streams(mode):
    x = torch.randn(256, 256, device="tpu")
    side = torch.tpu.Stream()
    with torch.tpu.stream(side):
        y = (x @ x).relu()
        done = torch.tpu.Event()
        done.record()
    torch.tpu.current_stream().wait_event(done)
    z = y.sum()
    torch.testing.assert_close(z.cpu(), (x.cpu() @ x.cpu()).relu().sum(), rtol=1e-4, atol=1e-2)
    assert done.query()


def test_event_query_synchronize_and_generic_event(mode):
    event = torch.Event(device="tpu")
    assert isinstance(event, torch.tpu.Event)
    x = torch.randn(512, 512, device="tpu")
    for _ in range(4):
        x = torch.tanh(x @ x)
    event.record()
    event.synchronize()
    assert event.query()
    assert torch.tpu.current_stream().query()


def test_the_cuda_timing_idiom_measures_device_time(mode):
    x = torch.randn(768, 768, device="tpu")
    torch.tpu.synchronize()
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    host_start = time.perf_counter()
    start.record()
    for _ in range(6):
        x = (x @ x) / 768
    end.record()
    end.synchronize()
    host_ms = (time.perf_counter() - host_start) * 1e3
    device_ms = start.elapsed_time(end)
    assert 0 < device_ms <= host_ms + 1.0  # the work really finished inside the timed window
    empty_start, empty_end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    empty_start.record()
    empty_end.record()
    empty_end.synchronize()
    assert empty_start.elapsed_time(empty_end) < device_ms  # nothing between them
