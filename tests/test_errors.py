"""Bad input gets the error PyTorch raises on CPU, and the device stays usable afterwards."""
import gc

import pytest
import torch

import torch_tpu


def same_error(fn, *cpu_args):
    """Runs fn on CPU and on tpu copies; both must raise the same exception type."""
    with pytest.raises(Exception) as on_cpu:
        fn(*cpu_args)
    tpu_args = [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in cpu_args]
    with pytest.raises(type(on_cpu.value)) as on_tpu:
        fn(*tpu_args)
    return str(on_cpu.value), str(on_tpu.value)


def test_shape_mismatch(mode):
    cpu_message, tpu_message = same_error(torch.add, torch.ones(3), torch.ones(4))
    assert "must match the size" in tpu_message
    assert torch.ones(2, device="tpu").sum().item() == 2


def test_matmul_shape_and_dtype_mismatch(mode):
    same_error(torch.mm, torch.ones(2, 3), torch.ones(2, 3))
    _, message = same_error(torch.mm, torch.ones(2, 3), torch.ones(3, 2, dtype=torch.float64))
    assert "dtype" in message or "same" in message


def test_invalid_view_and_dims(mode):
    same_error(lambda t: t.view(5), torch.ones(6))
    same_error(lambda t: t.sum(dim=3), torch.ones(2, 2))
    same_error(lambda t: t.transpose(0, 2), torch.ones(2, 2))
    same_error(lambda t: torch.cat([t, t.view(4)]), torch.ones(2, 2))


def test_cross_entropy_with_wrong_target_shape(mode):
    same_error(torch.nn.functional.cross_entropy, torch.randn(4, 3), torch.zeros(5, dtype=torch.long))


def test_unsupported_dtype_raises_type_error():
    with pytest.raises(TypeError, match="does not support dtype"):
        torch.empty(2, dtype=torch.float8_e4m3fn, device="tpu")


def test_out_of_memory_is_torch_out_of_memory_error_and_recoverable(mode):
    torch.tpu.set_per_process_memory_fraction(0.001)
    try:
        keep = torch.ones(1024, device="tpu")
        limit = torch.tpu.memory_stats()["limit_bytes"]
        with pytest.raises(torch.OutOfMemoryError, match=rf"Tried to allocate {(limit // 4) * 4} bytes"):
            torch.empty(limit // 4, device="tpu")
        del keep
        assert torch.ones(16, device="tpu").sum().item() == 16
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)


def test_memory_counters_follow_live_tensors():
    gc.collect()  # tensors of earlier tests must not be freed in the middle of this one
    gc.disable()
    try:
        check_memory_counters()
    finally:
        gc.enable()


def check_memory_counters():
    before = torch.tpu.memory_allocated()
    reserved = torch.tpu.memory_reserved()
    t = torch.ones(1000, device="tpu")
    torch.tpu.synchronize()
    # Allocated counts device buffers: the tensor's 4000 bytes, plus at most a few rank-0 buffers
    # holding the numbers the program took.
    assert 4000 <= torch.tpu.memory_allocated() - before < 4000 + 256
    assert torch.tpu.memory_reserved() == reserved + 4000
    assert torch.tpu.max_memory_allocated() >= before + 4000
    assert torch.accelerator.memory_allocated() == torch.tpu.memory_allocated()
    del t
    assert torch.tpu.memory_allocated() - before < 256
    assert torch.tpu.memory_reserved() == reserved
