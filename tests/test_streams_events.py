"""Streams and events on tpu, through torch.tpu and the generic torch.Stream / torch.Event.

Every stream of a device feeds one queue that runs programs as their data dependencies allow, so
cross-stream ordering holds by construction and is not what these tests check: they check the
API's state (current stream, completion, recorded or not) and the consistency of event timing,
without comparing against wall-clock time."""
import pytest
import torch


def test_streams_are_distinct_and_selectable(mode):
    default = torch.tpu.current_stream()
    assert default == torch.tpu.default_stream()
    side = torch.tpu.Stream()
    assert side != default and side.device == torch.device("tpu", 0)
    with torch.tpu.stream(side):
        assert torch.tpu.current_stream() == side
        assert torch.accelerator.current_stream() == side
    assert torch.tpu.current_stream() == default
    generic = torch.Stream(device="tpu")
    assert generic.device_index == torch.tpu.current_device()
    with generic:
        assert torch.accelerator.current_stream() == generic
    assert torch.tpu.current_stream() == default


def test_values_computed_on_a_side_stream_are_right_after_wait_event(mode):
    x = torch.randn(256, 256, device="tpu")
    side = torch.tpu.Stream()
    with torch.tpu.stream(side):
        y = (x @ x).relu()
        done = torch.tpu.Event()
        done.record()
    torch.tpu.current_stream().wait_event(done)
    z = y.sum()
    torch.testing.assert_close(z.cpu(), (x.cpu() @ x.cpu()).relu().sum(), rtol=1e-4, atol=1e-2)
    done.synchronize()
    assert done.query()


def test_an_event_recorded_with_nothing_outstanding_is_complete(mode):
    torch.tpu.synchronize()
    event = torch.tpu.Event()
    event.record()
    assert event.query()  # no synchronize: nothing was issued before it
    assert torch.tpu.current_stream().query()


def test_event_synchronize_completes_the_recorded_work(mode):
    event = torch.Event(device="tpu")
    assert isinstance(event, torch.tpu.Event)
    x = torch.randn(512, 512, device="tpu")
    for _ in range(4):
        x = torch.tanh(x @ x)
    event.record()
    event.synchronize()
    assert event.query()
    stream = torch.tpu.current_stream()
    stream.synchronize()
    assert stream.query()


def test_elapsed_times_are_consistent(mode):
    x = torch.randn(384, 384, device="tpu")
    torch.tpu.synchronize()
    marks = [torch.tpu.Event(enable_timing=True) for _ in range(3)]
    marks[0].record()
    for _ in range(3):
        x = (x @ x) / 384
    marks[1].record()
    for _ in range(3):
        x = (x @ x) / 384
    marks[2].record()
    marks[2].synchronize()
    first, second, both = (marks[0].elapsed_time(marks[1]), marks[1].elapsed_time(marks[2]),
                           marks[0].elapsed_time(marks[2]))
    assert first >= 0 and second >= 0
    assert both == pytest.approx(first + second, abs=1e-3)  # one clock for every event
    assert marks[1].elapsed_time(marks[1]) == 0


def test_elapsed_time_needs_recorded_timing_events(mode):
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    with pytest.raises(ValueError, match="Both events must be recorded"):
        start.elapsed_time(end)
    plain_start, plain_end = torch.tpu.Event(), torch.tpu.Event()
    plain_start.record()
    plain_end.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        plain_start.elapsed_time(plain_end)
