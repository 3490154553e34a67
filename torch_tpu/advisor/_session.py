"""One watched stretch of a program: starts the collectors, stops them, and turns what they saw
into the report."""
import sys
import time

import torch

import torch_tpu

from . import _hardware, _memory, _runtime
from ._collector import Collector, dispatch_overhead
from ._findings import ranked
from ._dynamo import DynamoListener
from ._sites import ModuleStack


def _dynamo_seconds():
    """Seconds Dynamo has spent tracing and compiling frames: host work, like our own compiles."""
    if "torch._dynamo" not in sys.modules:
        return 0.0
    from torch._dynamo.utils import compilation_time_metrics
    return sum(compilation_time_metrics.get("_compile.compile_inner", []))


_MODE_NAMES = {torch_tpu.EagerMode.DEFER_NEVER: "strict",
               torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING: "debug",
               torch_tpu.EagerMode.DEFER_AND_FUSE: "defer_and_fuse"}


class Session:
    def __init__(self):
        self.modules = ModuleStack()
        self.memory = _memory.PeakMemory(self.modules)
        self.listener = DynamoListener()
        self.collector = None
        self._synchronize = None
        self._start_metrics = None

    def start(self):
        self._devices = list(range(torch.tpu.device_count()))
        for index in self._devices:
            torch.tpu.reset_peak_memory_stats(index)
        self._start_metrics = torch_tpu.metrics()
        self._start_fallbacks = sum(torch_tpu.fallback_counts().values())
        self._start_dynamo = _dynamo_seconds()
        self._dispatch_overhead = dispatch_overhead()
        for index in self._devices:
            torch.tpu.synchronize(index)
        # The device events torch.profiler shows; a profiler trace already running owns them, and
        # the idle share is then estimated from the host's side.
        self._device_trace = torch_tpu._C._device_trace_start()
        self._wall_minus_perf_ns = time.time_ns() - time.perf_counter_ns()
        self.modules.__enter__()
        self.listener.__enter__()
        self.memory.start(self._devices)
        self.collector = Collector(self.modules)
        # torch.tpu.synchronize and its re-export torch_tpu.synchronize: the same function.
        self._synchronize = torch_tpu.tpu.synchronize
        torch_tpu.tpu.synchronize = torch_tpu.synchronize = self.collector.wrap_synchronize(self._synchronize)
        self.collector.__enter__()

    def stop(self, report):
        collector = self.collector
        try:
            collector.__exit__(None, None, None)
        finally:
            torch_tpu.tpu.synchronize = torch_tpu.synchronize = self._synchronize
            self.listener.__exit__()
            self.modules.__exit__()
        # What is still pending runs now, so that its compiles and flushes are in the report.
        start = time.perf_counter()
        for index in self._devices:
            self._synchronize(index)
        collector.finish(time.perf_counter() - start)
        self.memory.stop()
        self._fill(report)

    def _fill(self, report):
        collector, metrics = self.collector, torch_tpu.metrics()
        sites = list(collector.sites.values())
        moved = {k: metrics[k] - self._start_metrics[k] for k in (
            "compiles", "compile_seconds", "compiled_graphs", "compile_seconds_compiled_graph")}
        mode_name = _MODE_NAMES[torch_tpu.get_eager_mode()]
        timing = collector.timing(self._dispatch_overhead)
        timing["dynamo_seconds"] = _dynamo_seconds() - self._start_dynamo
        timing["compile_seconds"] += timing["dynamo_seconds"]
        timing["device_busy_seconds"] = (collector.device_busy(torch_tpu._C._device_trace_take(),
                                                               self._wall_minus_perf_ns)
                                         if self._device_trace else None)
        idle_findings, idle = _runtime.host_bound(timing, mode_name)
        recompiles = _runtime.recompiles(sites) + _runtime.compiled_recompiles(self.listener)
        peaks = _memory.device_peak(self._devices)
        per_graph = ((moved["compile_seconds_compiled_graph"] + timing["dynamo_seconds"])
                     / max(moved["compiled_graphs"], 1))
        findings = (_runtime.fallbacks(sites) + recompiles
                    + _runtime.changing_sizes(sites, {(f.file, f.line) for f in recompiles})
                    + _runtime.host_reads(sites, collector.syncs, timing) + _runtime.flushes(sites)
                    + _runtime.graph_breaks(self.listener, per_graph) + idle_findings
                    + _hardware.shape_findings(sites) + _hardware.float32_findings(sites)
                    + _memory.memory_findings(peaks, self.memory.largest_at_peak))
        report.findings = ranked(findings)
        report.summary = {
            "mode": mode_name,
            "span_seconds": timing["span_seconds"],
            "device_ops": sum(s.calls for s in sites),
            "compiles": moved["compiles"],
            "compile_seconds": moved["compile_seconds"],
            "compiled_graphs": moved["compiled_graphs"],
            "fallback_calls": sum(torch_tpu.fallback_counts().values()) - self._start_fallbacks,
            "graph_breaks": len(self.listener.breaks) + sum(self.listener.unplaced_reasons().values()),
            "flushes": [{"reason": r, "file": f, "line": l, "count": n}
                        for r, f, l, n in _runtime.flush_table(sites, collector.syncs)],
            "host_bound": idle,
            "timing": timing,
            "peak_memory_bytes": peaks,
            "largest_tensors": [{"bytes": b, "name": d} for b, d in self.memory.largest_at_peak],
        }
