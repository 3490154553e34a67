"""torch.tpu: the device module, shaped like torch.cuda."""
import contextlib

import torch

from . import _C


def is_available():
    """True when a PJRT plugin loads and reports at least one device. Never raises."""
    return _C._device_count() > 0


def is_initialized():
    return _C._is_available()


def __getattr__(name):
    # torch.utils.checkpoint (like other torch code written for torch.cuda) reads the module flag
    # `_initialized` to decide whether to save and restore the device's RNG state; without it,
    # a checkpointed dropout would draw a different mask when its forward is recomputed.
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module 'torch.tpu' has no attribute {name!r}")


def _lazy_init():
    if not _C._is_available():
        raise RuntimeError(_C._unavailable_reason() or "no PJRT plugin found for the tpu device")


def init():
    _lazy_init()


def device_count():
    return _C._device_count()


def current_device():
    return _C._current_device()


def _index(device):
    """The index `device` names (None: the current device). An index with no device behind it
    raises RuntimeError, as CUDA's calls do for an invalid device ordinal."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != "tpu":
            raise ValueError(f"expected a tpu device, got {device}")
        if device.index is None:
            return current_device()
        index = device.index
    count = device_count()
    if not 0 <= index < count:
        raise RuntimeError(f"tpu device index {index} is out of range: {count} device(s) available")
    return index


def set_device(device):
    _lazy_init()
    _C._set_device(_index(device))


class device:
    """Context manager that makes `index` the current tpu device."""

    def __init__(self, index):
        self.index = _index(index)
        self.previous = None

    def __enter__(self):
        self.previous = current_device()
        set_device(self.index)

    def __exit__(self, *exc):
        set_device(self.previous)
        return False


def synchronize(device=None):
    """Waits for every program launched on `device` (default: the current one) to finish."""
    _lazy_init()
    _C._synchronize(_index(device))


def platform():
    """The PJRT platform doing the work: 'tpu', 'cuda', 'cpu', ..."""
    _lazy_init()
    return _C._platform()


def _properties_index(device):
    # torch.cuda.get_device_properties and the calls built on it assert a valid id.
    try:
        return _index(device)
    except RuntimeError:
        raise AssertionError("Invalid device id") from None


def get_device_name(device=None):
    _lazy_init()
    kind, platform_name = _C._device_kind(_properties_index(device)), _C._platform()
    return f"XLA {platform_name.upper()}" if kind.lower() == platform_name else kind


def get_device_properties(device=None):
    _lazy_init()
    index = _properties_index(device)
    return {"name": _C._device_kind(index), "platform": _C._platform(),
            "platform_version": _C._platform_version(), "index": index}


# Random numbers: one default generator per device, seeded by torch.manual_seed.
def _default_generator(index):
    return _C._default_generator(index)


def manual_seed(seed, device=None):
    _default_generator(_index(device)).manual_seed(int(seed))


def manual_seed_all(seed):
    """Seeds every device's default generator, including ones first used later."""
    _C._seed_all(int(seed))


def seed():
    return _default_generator(current_device()).seed()


def seed_all():
    manual_seed_all(seed())


def initial_seed():
    return _default_generator(current_device()).initial_seed()


def get_rng_state(device=None):
    return _default_generator(_index(device)).get_state()


def set_rng_state(state, device=None):
    _default_generator(_index(device)).set_state(state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states):
    for index, state in enumerate(states):
        set_rng_state(state, index)


def _is_in_bad_fork():
    """True in a process forked after the device was used: there the device cannot be used."""
    return _C._is_in_bad_fork()


# Memory. allocated: bytes of live device buffers (what programs' results really hold; a fused
# graph's dead intermediates never count). reserved: the sizes of live tpu storages, which is
# also what set_per_process_memory_fraction caps.
def memory_stats(device=None):
    return dict(_C._memory_stats(_index(device)))


def memory_allocated(device=None):
    return _C._memory_stats(_index(device))["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    return _C._memory_stats(_index(device))["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    return _C._memory_stats(_index(device))["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return _C._memory_stats(_index(device))["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    _C._reset_peak_memory(_index(device))


def set_per_process_memory_fraction(fraction, device=None):
    """Caps this process's tpu allocations at `fraction` of the device's memory (for the CPU
    plugin, of the host's physical memory); beyond it allocations raise torch.OutOfMemoryError."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    import os
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    _C._set_memory_limit(_index(device), int(total * fraction))


def empty_cache():
    """Storages free their device memory as soon as they die; nothing is held back to release."""


def ipc_collect():
    """Nothing to collect: tpu tensors are never shared with other processes."""


def mem_get_info(device=None):
    """(free, total) bytes, like torch.cuda.mem_get_info: the plugin's memory limit for the device
    or this process's cap (set_per_process_memory_fraction; for the CPU plugin, the host's
    memory), whichever is tighter, and what is left of it."""
    _lazy_init()
    return torch.accelerator.get_memory_info(torch.device("tpu", _index(device)))


def memory_snapshot():
    """The live allocations, in the shape torch.cuda.memory_snapshot() gives: one segment per
    device holding everything allocated there (each storage is its own device buffer, so there
    is no pool to break down)."""
    segments = []
    for index in range(device_count()):
        stats = memory_stats(index)
        reserved = stats["reserved_bytes.all.current"]
        if reserved == 0:
            continue
        segments.append({
            "device": index, "address": 0, "total_size": reserved,
            "allocated_size": stats["allocated_bytes.all.current"], "active_size": reserved,
            "requested_size": reserved, "stream": 0, "segment_type": "large",
            "blocks": [{"size": reserved, "requested_size": reserved, "address": 0,
                        "state": "active_allocated"}],
        })
    return segments


def host_memory_stats():
    """Statistics of the pinned host memory that Tensor.pin_memory() and
    DataLoader(pin_memory=True) allocate for the tpu device."""
    return dict(_C._host_memory_stats())


def reset_peak_host_memory_stats():
    _C._reset_peak_host_memory_stats()


def get_device_capability(device=None):
    """(major, minor) as CUDA numbers its architectures. TPUs and PJRT devices have no such
    numbering: (0, 0), so that code comparing against a CUDA capability takes its generic path.
    torch.accelerator.get_device_capability() gives the supported dtypes."""
    _lazy_init()
    _properties_index(device)
    return (0, 0)


def get_arch_list():
    """The device architectures this build has kernels for: one XLA platform, compiled at run
    time for whatever device the plugin drives."""
    if not is_available():
        return []
    return [f"xla_{platform()}"]


OutOfMemoryError = torch.OutOfMemoryError


def device_of(obj):
    """Context manager that makes `obj`'s tpu device current (no change for CPU tensors)."""
    if isinstance(obj, torch.Tensor) and obj.device.type == "tpu":
        return device(obj.device.index)
    return contextlib.nullcontext()


# CUDA graphs record a stream's kernels once and replay them. The tpu device gets the same effect
# from compiled programs, so the capture API says what to use instead of pretending to capture.
_GRAPHS_INSTEAD = ("CUDA-style graph capture does not exist for the tpu device: a program is already "
                   "compiled once and replayed. Use torch.compile(model, backend='tpu') (a compiled "
                   "graph replays as one program) or the defer_and_fuse eager mode "
                   "(torch_tpu.set_eager_mode('defer_and_fuse')) instead.")


def is_current_stream_capturing():
    return False


class CUDAGraph:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(_GRAPHS_INSTEAD)


TPUGraph = CUDAGraph


class graph:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(_GRAPHS_INSTEAD)


def make_graphed_callables(*args, **kwargs):
    raise RuntimeError(_GRAPHS_INSTEAD)


# Streams and events: the generic torch.Stream / torch.Event on the tpu device. All streams of a
# device feed one queue that runs programs as their data dependencies allow, so ordering through
# events holds; Event(enable_timing=True).elapsed_time measures when device work finished.
class Stream(torch.Stream):
    def __new__(cls, device=None, priority=0):
        return super().__new__(cls, device=torch.device("tpu", _index(device)), priority=priority)


class _TpuEventType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "tpu"


class Event(metaclass=_TpuEventType):
    """torch.Event on the tpu device. It is a plain torch.Event (PyTorch's event methods only
    accept that exact type), and isinstance(e, torch.tpu.Event) holds for any tpu event."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device=None):
    return torch.accelerator.current_stream(torch.device("tpu", _index(device)))


def default_stream(device=None):
    index = _index(device)
    return torch.Stream(stream_id=0, device_index=index, device_type=current_stream(index).device_type)


def set_stream(stream):
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` the current stream of its device inside the block (None: no change)."""

    def __init__(self, stream):
        self.stream = stream
        self.previous = None

    def __enter__(self):
        if self.stream is not None:
            self.previous = current_stream(self.stream.device)
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.previous is not None:
            set_stream(self.previous)
        return False


def stream(s):
    """Makes `s` the current stream of its device inside the block (None: no change)."""
    return StreamContext(s)


def memory_summary(device=None, abbreviated=False):
    """A printable table of memory_stats(), like torch.cuda.memory_summary(). There is no caching
    allocator, so the table has no per-pool or fragmentation rows and `abbreviated` changes nothing."""
    index = _index(device)
    stats = memory_stats(index)

    def size(n):
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024

    limit = stats.get("limit_bytes", 0)
    rows = [
        ("Allocated memory (live device buffers)", size(stats["allocated_bytes.all.current"]),
         size(stats["allocated_bytes.all.peak"])),
        ("Reserved memory (live tpu storages)", size(stats["reserved_bytes.all.current"]),
         size(stats["reserved_bytes.all.peak"])),
        ("Live storages", str(stats.get("allocation.all.current", 0)),
         f"{stats.get('allocation.all.allocated', 0)} allocated in total"),
        ("Out-of-memory errors", str(stats.get("num_ooms", 0)), ""),
        ("Memory limit", size(limit) if limit else "none", ""),
    ]
    width = max(len(r[0]) for r in rows)
    line = "=" * (width + 46)
    out = [line, f" torch.tpu memory summary, device {index} ({get_device_name(index)})", line,
           f" {'Metric':<{width}} | {'Current':>14} | Peak / total", "-" * len(line)]
    out += [f" {name:<{width}} | {cur:>14} | {peak}" for name, cur, peak in rows]
    out.append(line)
    return "\n".join(out) + "\n"


# Mixed precision. torch.autocast("tpu") asks the device module which dtypes it may use.
def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation=True):
    """Every PJRT platform computes in bfloat16 (TPUs natively; XLA emulates it elsewhere)."""
    return is_available()


from . import amp  # noqa: E402  (torch.tpu.amp, like torch.cuda.amp)
from . import tpu_memory as memory  # noqa: E402  (torch.tpu.memory, like torch.cuda.memory)
