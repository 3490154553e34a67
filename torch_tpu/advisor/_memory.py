"""Peak device memory and the largest live storages at the peak.

The device's own counters (torch.tpu.max_memory_allocated) give the peak; which storages made it
comes from the memory history (torch.tpu.memory._record_memory_history, the record PyTorch's
memory visualiser reads): the advisor records it while it watches, unless the program already
does, and replays its allocations and frees to find the live storages at the highest point. Each
is named after the parameter it holds or the user's line that allocated it. Storages made before
the advisor started are in the device's count from the start: parameters among them by name, the
rest together.
"""
import os
import time

import torch

import torch_tpu

from ._findings import Finding

_TOP = 5
_MAX_ENTRIES = 1_000_000  # the history keeps the newest; a longer run lists from its later part
_LIBRARIES = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
              os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
# The package's model zoo is model code, as a user's own model file would be.
_MODEL_CODE = os.path.join(_LIBRARIES[0], "reference_models.py")


def _is_library(filename):
    path = os.path.abspath(filename)
    return path.startswith(_LIBRARIES) and path != _MODEL_CODE


def _user_line(frames):
    """"file.py:12 in f" of the innermost frame outside torch and torch_tpu's machinery."""
    if not frames:
        # No Python code on the allocating thread: the autograd engine's, in a backward pass.
        return "the backward pass (no Python frame)"
    for frame in frames:
        filename = frame.get("filename", "")
        if filename.startswith("<") or _is_library(filename):
            continue
        return f"{os.path.basename(filename)}:{frame.get('line')} in {frame.get('name')}"
    return "a line inside torch"


class PeakMemory:
    def __init__(self, modules):
        self._modules = modules
        self.largest_at_peak = []  # [(bytes, description)] of the device with the highest peak

    def start(self, devices):
        self._devices = devices
        self._owns_history = not torch_tpu._C._recording_memory_history()
        if self._owns_history:
            torch.tpu.memory._record_memory_history(max_entries=_MAX_ENTRIES)
        self._start_us = time.time_ns() // 1000
        self._before = {i: torch.tpu.memory_allocated(i) for i in devices}

    def stop(self):
        snapshot = torch.tpu.memory._snapshot()
        if self._owns_history:
            torch.tpu.memory._record_memory_history(enabled=None)
        parameters = self._modules.parameter_storages()
        best = (-1, [])
        for device in self._devices:
            traces = snapshot["device_traces"]
            trace = traces[device] if device < len(traces) else []
            peak, largest = self._replay(trace, self._before[device], parameters)
            best = max(best, (peak, largest), key=lambda entry: entry[0])
        self.largest_at_peak = best[1]

    def _replay(self, trace, before, parameters):
        events = [e for e in trace if e["time_us"] >= self._start_us]
        made_here = {e["addr"] for e in events if e["action"] == "alloc"}
        # Parameters allocated before the advisor started, and the rest of what was there then.
        earlier = {addr: [size, name] for addr, (size, name) in parameters.items() if addr not in made_here}
        rest = [max(0, before - sum(size for size, _ in earlier.values()))]
        live = {}  # address -> [bytes, description]
        total = peak = listed_at = before

        def top():
            entries = list(live.values()) + list(earlier.values())
            if rest[0]:
                entries.append([rest[0], "storages made before the advisor started"])
            return [(b, d) for b, d in sorted(entries, key=lambda e: -e[0])[:_TOP]]

        largest = top()
        for event in events:
            if event["action"] == "alloc":
                name = parameters.get(event["addr"], (None, None))[1]
                live[event["addr"]] = [event["size"], name or f"allocated at {_user_line(event['frames'])}"]
                total += event["size"]
            elif event["action"] == "free_completed":
                if live.pop(event["addr"], None) is None and earlier.pop(event["addr"], None) is None:
                    rest[0] = max(0, rest[0] - event["size"])
                total -= event["size"]
            else:
                continue
            # Listing at every new high would list at every op of a growing phase: only 5% above
            # the last list.
            if total > peak:
                peak = total
                if total >= 1.05 * listed_at:
                    listed_at = total
                    largest = top()
        return peak, largest


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
