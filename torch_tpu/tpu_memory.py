"""torch.tpu.memory: the memory history CUDA users record with torch.cuda.memory.

`_record_memory_history()` notes every tpu storage allocation and free with the Python stack that
caused it; `_snapshot()` returns it in the shape `torch.cuda.memory._snapshot()` does (segments
and device_traces), and `_dump_snapshot(path)` pickles it for PyTorch's memory visualiser
(pytorch.org/memory_viz, or `torch.cuda._memory_viz`). Each storage is its own device buffer, so
each allocation is also its own segment. Recording costs a stack capture per allocation and free;
it is off until asked for.
"""
import pickle
import sys

from . import _C


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
    """Starts (or, with enabled=None, stops and forgets) recording. `context` and `stacks` are
    accepted for CUDA's signature; frames are always the Python stack. `device` is ignored: all
    tpu devices are recorded, each into its own trace."""
    if enabled not in (None, "all", "state"):
        raise ValueError(f"enabled must be None, 'state' or 'all', not {enabled!r}")
    if max_entries <= 0:
        raise ValueError(f"max_entries must be positive, got {max_entries}")
    _C._record_memory_history(enabled is not None, min(max_entries, sys.maxsize))


def _snapshot(device=None):
    """{"segments": the live allocations made while recording, each with the frames that made it;
    "device_traces": per device, the recorded allocations and frees, oldest first}."""
    return _C._memory_snapshot_with_history()


def _dump_snapshot(filename="dump_snapshot.pickle"):
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)
