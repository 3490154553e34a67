"""Live tpu tensors and the largest ones near the peak.

The device's own counters (torch.tpu.max_memory_allocated) give the peak; they do not say which
tensors made it. For that the advisor follows the storages it sees go through ops, by weak
reference, and keeps a running sum of their bytes: when the sum reaches a new high (5% above the
last list taken, so that a growing phase does not list at every op) it lists the largest live
ones. Storages made before the advisor started are followed from the first op that reads them.
"""
import heapq
import weakref

import torch

from ._findings import Finding

_TOP = 5


class LiveTensors:
    def __init__(self, parameter_names):
        self._parameter_names = parameter_names
        self._live = {}  # storage id -> [bytes, description, {tensor id: weak reference}]
        self.live_bytes = 0
        self.peak_bytes = 0
        self.largest_at_peak = []  # [(bytes, description)]
        self._listed_at = 0

    def _release(self, key, tensor_id):
        entry = self._live.get(key)
        if entry is None:
            return
        entry[2].pop(tensor_id, None)
        if not entry[2]:
            del self._live[key]
            self.live_bytes -= entry[0]

    def follow(self, tensor, describe):
        """Follows `tensor` and its storage, which stays live while any tensor followed on it
        does; `describe()` names the storage the first time it is seen, a parameter's name
        replaces that."""
        storage = tensor.untyped_storage()
        key = storage._cdata
        entry = self._live.get(key)
        if entry is None:
            entry = self._live[key] = [storage.nbytes(), None, {}]
            self.live_bytes += entry[0]
        elif id(tensor) in entry[2]:
            return
        name = self._parameter_names.get(id(tensor))
        if name is not None or entry[1] is None:
            entry[1] = name or describe()
        tensor_id = id(tensor)
        entry[2][tensor_id] = weakref.ref(tensor, lambda _, key=key, tensor_id=tensor_id: self._release(key, tensor_id))

    def note_peak(self):
        if self.live_bytes <= self.peak_bytes:
            return
        self.peak_bytes = self.live_bytes
        if self.live_bytes >= 1.05 * self._listed_at:
            self._listed_at = self.live_bytes
            self.largest_at_peak = [(b, d) for b, d, _ in heapq.nlargest(_TOP, self._live.values(), key=lambda e: e[0])]


def device_peak(device_indices):
    """{device: peak bytes allocated} from the device's own counters."""
    return {i: torch.tpu.max_memory_allocated(i) for i in device_indices}


def memory_findings(peaks, largest):
    """A finding only where the peak comes near what the device has: the figures themselves are
    in the report's summary whatever they are."""
    findings = []
    for index, peak in peaks.items():
        try:
            free, total = torch.tpu.mem_get_info(index)
        except RuntimeError:
            continue
        if not total or peak < 0.8 * total:
            continue
        names = ", ".join(f"{d} ({b / 2**20:.1f} MiB)" for b, d in largest[:3])
        findings.append(Finding(
            "memory", f"peak device memory {peak / 2**30:.2f} GiB is {peak / total:.0%} of tpu:{index}",
            "Make room before it runs out: keep weights and activations in bfloat16, recompute "
            "activations in the backward pass (torch.utils.checkpoint), or use a smaller batch. "
            f"Largest live tensors near the peak: {names}.",
            0.0, "not a time: memory pressure", count=1,
            details={"device": index, "peak_bytes": peak, "device_bytes": total}))
    return findings
