"""The torch.tpu.* names a CUDA program calls, torch.accelerator's capability query, Dynamo's
device interface, pinned host memory, and the clear refusals (graph capture, quantized tensors):
each behaves as its torch.cuda counterpart does or says what to use instead."""
import pytest
import torch
import torch_tpu
from torch.utils.data import DataLoader, TensorDataset


def test_mem_get_info_is_free_and_total_bytes():
    x = torch.empty(1 << 20, device="tpu")
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    assert torch.tpu.mem_get_info(0)[1] == total
    assert torch.accelerator.get_memory_info(0)[1] == total
    del x


def test_memory_snapshot_holds_the_live_storages():
    x = torch.empty(1 << 16, device="tpu")
    segments = torch.tpu.memory_snapshot()
    assert any(s["device"] == 0 and s["total_size"] >= x.untyped_storage().nbytes() for s in segments)
    assert all(sum(b["size"] for b in s["blocks"]) == s["total_size"] for s in segments)


def test_the_device_of_a_data_pointer_is_the_device_that_allocated_it():
    tensors = [torch.empty(64, device=f"tpu:{d}") for d in range(torch.tpu.device_count())]
    # Whatever the current device: the pointer's reserved range names its device.
    for current in range(torch.tpu.device_count()):
        with torch.tpu.device(current):
            for d, t in enumerate(tensors):
                assert torch_tpu._C._device_of_pointer(t.data_ptr()) == d
                assert torch_tpu._C._device_of_pointer(t[7:].data_ptr()) == d
    with pytest.raises(RuntimeError, match="not handed out by the tpu allocator"):
        torch_tpu._C._device_of_pointer(torch.empty(4).data_ptr())


def test_capabilities_and_architectures():
    major, minor = torch.tpu.get_device_capability()
    assert isinstance(major, int) and isinstance(minor, int)
    dtypes = torch.accelerator.get_device_capability()["supported_dtypes"]
    for dtype in dtypes:  # each claimed dtype really makes a tensor
        assert torch.zeros(2, dtype=dtype, device="tpu").cpu().dtype == dtype
    assert torch.float32 in dtypes and torch.qint8 not in dtypes
    arch = torch.tpu.get_arch_list()
    assert arch and all(isinstance(a, str) for a in arch)
    assert torch.tpu.ipc_collect() is None


def test_graph_capture_says_what_to_use_instead():
    assert torch.tpu.is_current_stream_capturing() is False
    for make in (torch.tpu.CUDAGraph, torch.tpu.graph, torch.tpu.make_graphed_callables):
        with pytest.raises(RuntimeError, match="torch.compile"):
            make(object())


def test_stream_context_sets_and_restores_the_current_stream():
    s = torch.tpu.Stream()
    before = torch.tpu.current_stream()
    with torch.tpu.StreamContext(s):
        assert torch.tpu.current_stream() == s
    assert torch.tpu.current_stream() == before
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() == s
    with torch.tpu.device_of(torch.ones(1, device="tpu:1")):
        assert torch.tpu.current_device() == 1
    assert torch.tpu.current_device() == 0


def test_pinned_host_memory_is_recognised_and_counted():
    before = torch.tpu.host_memory_stats()
    assert not torch.ones(4).is_pinned()
    pinned = torch.arange(8.0).pin_memory()
    assert pinned.is_pinned() and pinned[3:].is_pinned()
    assert pinned.pin_memory() is pinned  # already pinned: no second copy
    after = torch.tpu.host_memory_stats()
    assert after["allocated_bytes.current"] - before["allocated_bytes.current"] == pinned.untyped_storage().nbytes()
    assert after["num_host_alloc"] == before["num_host_alloc"] + 1
    torch.testing.assert_close(pinned.to("tpu", non_blocking=True).cpu(), torch.arange(8.0))
    del pinned
    assert torch.tpu.host_memory_stats()["allocated_bytes.current"] == before["allocated_bytes.current"]


def test_dataloader_pin_memory_gives_pinned_batches():
    data = TensorDataset(torch.arange(12.0).reshape(6, 2), torch.arange(6))
    batches = list(DataLoader(data, batch_size=3, pin_memory=True))
    assert all(t.is_pinned() for batch in batches for t in batch)
    torch.testing.assert_close(torch.cat([b[0].to("tpu", non_blocking=True) for b in batches]).cpu(),
                               torch.arange(12.0).reshape(6, 2))


def test_dynamo_device_interface():
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device("tpu")
    assert interface.device_count() == torch.tpu.device_count()
    assert interface.is_available()
    assert interface.current_device() == torch.tpu.current_device()
    assert interface.get_device_properties()["index"] == 0
    assert interface.is_dtype_supported(torch.float32) and not interface.is_dtype_supported(torch.qint8)
    with interface.device(1):
        assert torch.tpu.current_device() == 1
    assert interface.current_stream() == torch.tpu.current_stream()
    interface.synchronize()


def test_a_quantized_tensor_moved_to_tpu_raises_what_to_do():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized creation functions are deprecated
        q = torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8)
    with pytest.raises(NotImplementedError, match="dequantize"):
        q.to("tpu")
    torch.testing.assert_close(q.dequantize().to("tpu").cpu(), q.dequantize())
