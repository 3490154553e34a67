"""torch._dynamo's device interface for "tpu" (what Dynamo and Inductor ask about a device:
count, current device, streams, properties).

PyTorch ships a placeholder TpuInterface whose device_count() raises; _torch_patches puts
make_interface(DeviceInterface) in its place when torch._dynamo.device_interface is first
imported (importing torch._dynamo costs about a second, which `import torch` must not pay)."""
import torch

# What a tpu storage holds (torch.accelerator.get_device_capability() reports the same set).
_STORABLE_DTYPES = frozenset([
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16,
    torch.uint32, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
    torch.complex64, torch.complex128])


def make_interface(base):
    from . import tpu

    class TpuInterface(base):
        device = tpu.device
        Event = tpu.Event
        Stream = tpu.Stream

        class Worker:
            @staticmethod
            def set_device(device):
                tpu.set_device(device)

            @staticmethod
            def current_device():
                return tpu.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return tpu.get_device_properties(device)

        current_device = staticmethod(tpu.current_device)
        set_device = staticmethod(tpu.set_device)
        device_count = staticmethod(tpu.device_count)
        is_available = staticmethod(tpu.is_available)
        stream = staticmethod(tpu.stream)
        current_stream = staticmethod(tpu.current_stream)
        set_stream = staticmethod(tpu.set_stream)
        synchronize = staticmethod(tpu.synchronize)
        get_device_properties = staticmethod(tpu.get_device_properties)
        memory_allocated = staticmethod(tpu.memory_allocated)
        is_bf16_supported = staticmethod(tpu.is_bf16_supported)

        @staticmethod
        def exchange_device(device):
            previous = tpu.current_device()
            tpu.set_device(device)
            return previous

        @staticmethod
        def maybe_exchange_device(device):
            return TpuInterface.exchange_device(device)

        @staticmethod
        def get_raw_stream(device_idx):
            return tpu.current_stream(device_idx).stream_id

        @staticmethod
        def get_compute_capability(device=None):
            return ""

        @classmethod
        def is_dtype_supported(cls, dtype, including_emulation=False):
            return dtype in _STORABLE_DTYPES

        @staticmethod
        def is_triton_capable(device=None):
            return False

    return TpuInterface

