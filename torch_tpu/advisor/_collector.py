"""What the advisor sees of each op: a TorchDispatchMode between PyTorch and the tpu kernels.

Per op it notes the user's line and owning module (a *site*), the op's signature, its host time,
and what the executor's counters (torch_tpu.metrics(), torch_tpu.fallback_counts()) moved by
while it ran: compiles, flushes by reason, CPU fallbacks. The counters are read once per op; what
moved between two ops is charged to the second, except around torch.tpu.synchronize(), which the
collector wraps while it watches. `ignore_compile_internals` keeps the mode out of Dynamo's
tracing (an active mode would otherwise stop torch.compile from compiling at all) while still
seeing the ops a compiled graph runs through the eager kernels.
"""
import collections
import os
import sys
import threading
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tpu

from . import _signatures
from ._sites import Statements, user_frame

_FUSED = torch_tpu.EagerMode.DEFER_AND_FUSE
# Ops whose result the host has to wait for: a value read back, or a size that depends on data.
_HOST_READ_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim",
                  "unique_consecutive", "bincount", "repeat_interleave", "item"}
_COPY_OPS = {"_to_copy", "copy_", "to"}
# Frames of the torch._dynamo.disable wrapper PyTorch puts around every __torch_dispatch__: made
# per op, they would make each op look like a call of its own.
_DISPATCH_WRAPPERS = (os.path.join("torch", "_dynamo", "eval_frame.py"), os.path.join("torch", "_compile.py"))
_MAX_SIGNATURES = 64


class Site:
    """One call site of one op, with everything the analyses need about it."""

    def __init__(self, op, file, line, module, view):
        self.op, self.file, self.line, self.module = op, file, line, module
        self.view = view  # a view op: metadata only, no program of its own
        self.calls = 0
        self.signatures = collections.Counter()  # signature -> calls (the first _MAX_SIGNATURES)
        self.tensor_keys = set()  # their _signatures.tensor_key
        self.last_signature = None
        self.size_changes = 0
        self.recompiles = []  # (description, program kind, compile seconds)
        self.fallbacks = collections.Counter()  # the executor's op name -> calls run on the CPU
        self.fallback_seconds = 0.0
        self.flush_reasons = collections.Counter()
        self.host_reads = 0
        self.wait_seconds = 0.0
        self.backward = False
        self.requires_grad = False
        self.role = None  # "attention scores" / "attention values": a bmm inside attention
        self.upcast = False  # attention whose half-precision inputs PyTorch's math path widened


def _tensors(values):
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    yield item


def _is_tpu(tensor):
    # The advisor runs on tpu programs, where a tensor is on the CPU or on the device (is_cpu is
    # a cheap flag; .device builds an object).
    return not tensor.is_cpu and not tensor.is_meta


def _is_host_read(name, args, kwargs, out):
    if name in _HOST_READ_OPS:
        return True
    if name not in _COPY_OPS:
        return False
    if name == "copy_":
        return len(args) > 1 and isinstance(args[1], torch.Tensor) and _is_tpu(args[1]) and not _is_tpu(args[0])
    return (isinstance(out, torch.Tensor) and not _is_tpu(out) and bool(args)
            and isinstance(args[0], torch.Tensor) and _is_tpu(args[0]))


def _counter_delta(after, before):
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


class Collector(TorchDispatchMode):
    @classmethod
    def ignore_compile_internals(cls):
        return True

    def __init__(self, modules):
        super().__init__()
        self.modules = modules
        self.thread = threading.get_ident()
        self.sites = {}
        self.overhead = 0.0  # the collector's own time, taken out of the wall time
        self.op_seconds = 0.0
        self.wait_seconds = 0.0
        self.compile_seconds = 0.0
        self.first_op = self.last_op = None
        self.syncs = {}  # (file, line) -> [calls, seconds waited] of torch.tpu.synchronize()
        self.fused_ops = 0
        self._lock = threading.RLock()
        self._statements = Statements()
        self._pending = []  # sites whose new signature awaits the compile of its fused graph
        self._attention = {}  # (statement, invocation) -> last bmm site / "expect values"
        self._metrics = torch_tpu._C._metrics()
        self._fallbacks = torch_tpu.fallback_counts()

    # -- the mode -------------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        start = time.perf_counter()
        tensors = list(_tensors(args))
        before = time.perf_counter()
        out = func(*args, **kwargs)
        after = time.perf_counter()
        outputs = list(_tensors(out if isinstance(out, (list, tuple)) else [out]))
        device = next((t.device for t in outputs + tensors if _is_tpu(t)), None)
        if device is None:
            self.overhead += before - start
            return out
        fused = torch_tpu.get_eager_mode() == _FUSED
        with self._lock:
            record = self._observe(func, args, kwargs, out, tensors, outputs, after - before, fused,
                                   sys._getframe(1))
            self._apply_all(self._statements.place(
                record["statement"], record["call"], (func, record["invocation"]), record))
            self.fused_ops += fused
            if self.first_op is None:
                self.first_op = start
            self.last_op = time.perf_counter()
            self.overhead += (before - start) + (self.last_op - after)
        return out

    # -- bookkeeping ----------------------------------------------------------------------------

    def _counters(self):
        # torch_tpu.metrics() without the torch.compile counters it adds (read once, at the end):
        # this runs for every op.
        metrics, fallbacks = torch_tpu._C._metrics(), torch_tpu.fallback_counts()
        moved = {k: metrics[k] - self._metrics.get(k, 0) for k in (
            "compiles", "compile_seconds", "flushes", "compiles_per_op", "compiles_fused_graph",
            "compiles_compiled_graph", "cache_entries")}
        # A program new to this process is compiled or loaded from the cache directory; either
        # way it enters the memory cache (a load is counted as a hit, so only the entries show it).
        moved["programs"] = max(moved["compiles"], moved["cache_entries"])
        moved["flush_reasons"] = _counter_delta(metrics["flush_reasons"], self._metrics["flush_reasons"])
        moved["fallbacks"] = _counter_delta(fallbacks, self._fallbacks)
        self._metrics, self._fallbacks = metrics, fallbacks
        return moved

    def _observe(self, func, args, kwargs, out, tensors, outputs, seconds, fused, caller):
        """What the op did, independently of which site it turns out to be: the site waits for
        the statement tracker (Statements) to settle which execution the call belongs to."""
        moved = self._counters()
        name = _op_name(func)
        while caller is not None and caller.f_code.co_filename.endswith(_DISPATCH_WRAPPERS):
            caller = caller.f_back
        frame, child = user_frame(caller, self.thread)
        module, invocation = self.modules.current()
        if frame is None:
            file, line, statement = "<unknown>", 0, None
        else:
            file, line, statement = frame.f_code.co_filename, frame.f_lineno, (id(frame), frame.f_lasti)
        host_read = _is_host_read(name, args, kwargs, out) or "host access" in moved["flush_reasons"]
        waited = max(0.0, seconds - moved["compile_seconds"]) if host_read else 0.0
        self.op_seconds += seconds
        self.wait_seconds += waited
        self.compile_seconds += moved["compile_seconds"]
        return {
            "func": func, "name": name, "file": file, "line": line, "module": module,
            "invocation": invocation, "statement": statement, "call": id(child) if child else None,
            "seconds": seconds, "moved": moved,
            "signature": _signatures.signature(func, args, kwargs, outputs), "host_read": host_read, "waited": waited,
            "backward": torch._C._current_graph_task_id() != -1,
            "requires_grad": any(t.requires_grad for t in tensors),
            "fused": fused,
            "upcast": (name == "_to_copy" and kwargs.get("dtype") == torch.float32 and bool(tensors)
                       and tensors[0].dtype in (torch.bfloat16, torch.float16)),
        }

    def _apply_all(self, placed):
        for record, ordinal in placed:
            self._apply(record, ordinal)

    def _apply(self, record, ordinal):
        func, moved, statement = record["func"], record["moved"], record["statement"]
        key = (func, record["file"], record["line"], statement[1] if statement else 0, record["module"], ordinal)
        site = self.sites.get(key)
        if site is None:
            site = self.sites[key] = Site(record["name"], record["file"], record["line"], record["module"],
                                          func.is_view)
        site.calls += 1
        site.backward |= record["backward"]
        site.requires_grad |= record["requires_grad"]
        if moved["fallbacks"]:
            site.fallbacks.update(moved["fallbacks"])
            site.fallback_seconds += max(0.0, record["seconds"] - moved["compile_seconds"])
        site.flush_reasons.update(moved["flush_reasons"])
        if record["host_read"]:
            site.host_reads += 1
            site.wait_seconds += record["waited"]
        self._follow_signature(site, record["signature"], moved, record["fused"])
        self._note_attention(record["name"], site, (statement, record["invocation"]), record["upcast"])

    def _follow_signature(self, site, sig, moved, fused):
        previous = site.last_signature
        if previous is not None and _signatures.sizes_only(previous) != _signatures.sizes_only(sig):
            site.size_changes += 1
        change = None
        if previous is not None and sig not in site.signatures and not site.view:
            # Numbers are runtime arguments of eager programs: only a tensor change makes a new one.
            tensor_changed = _signatures.tensor_key(sig) not in site.tensor_keys
            change = (site, _signatures.describe_change(previous, sig), tensor_changed)
        if len(site.signatures) < _MAX_SIGNATURES or sig in site.signatures:
            site.signatures[sig] += 1
            site.tensor_keys.add(_signatures.tensor_key(sig))
        site.last_signature = sig
        kind = _program_kind(moved, fused)
        if fused:
            # The fused graph holding the changed call compiles where it is flushed, later.
            if moved["programs"] and self._pending:
                self._blame(self._pending, kind, moved["compile_seconds"])
            if moved["programs"] or moved["flushes"]:
                self._pending = []
            if change:
                self._pending.append(change)
        elif change and moved["programs"]:
            self._blame([change], kind, moved["compile_seconds"])

    def _blame(self, changes, kind, seconds):
        # A compiled graph's new programs follow Dynamo's recompiles, which say which guard failed.
        if kind == "torch.compile graph":
            return
        causes = [c for c in changes if c[2]]
        for site, description, _ in causes:
            site.recompiles.append((description, kind, seconds / len(causes)))

    def _note_attention(self, name, site, context, upcast):
        # scaled_dot_product_attention reaches the device as its math path: bmm(q, k^T),
        # _safe_softmax, bmm(p, v). _safe_softmax is that path's own op, so the bmm before it
        # holds the head dimension. For half-precision inputs the path first widens q, k and v
        # to float32: those products are float32 whatever autocast says.
        state = self._attention.setdefault(context, {})
        if name == "bmm":
            if state.get("expect values"):
                site.role = "attention values"
                self._attention.pop(context)
            else:
                state["scores"] = site
        elif name == "_safe_softmax" and "scores" in state:
            state["scores"].role = "attention scores"
            state["scores"].upcast = state.get("upcast", False)
            state["expect values"] = True
        elif upcast:
            state["upcast"] = True
        if len(self._attention) > 64:
            self._attention.clear()

    # -- torch.tpu.synchronize() ----------------------------------------------------------------

    def wrap_synchronize(self, synchronize):
        def watched_synchronize(device=None):
            start = time.perf_counter()
            result = synchronize(device)
            seconds = time.perf_counter() - start
            with self._lock:
                self._apply_all(self._statements.settle())
                moved = self._counters()
                frame, _ = user_frame(sys._getframe(1), self.thread)
                where = (frame.f_code.co_filename, frame.f_lineno) if frame else ("<unknown>", 0)
                waited = max(0.0, seconds - moved["compile_seconds"])
                entry = self.syncs.setdefault(where, [0, 0.0, collections.Counter()])
                entry[0] += 1
                entry[1] += waited
                entry[2].update(moved["flush_reasons"])
                self.wait_seconds += waited
                self.compile_seconds += moved["compile_seconds"]
                if self.first_op is not None:
                    self.last_op = time.perf_counter()
                self._flushed(moved)
            return result
        watched_synchronize.__wrapped__ = synchronize
        watched_synchronize.__doc__ = synchronize.__doc__
        return watched_synchronize

    def finish(self, final_sync_seconds):
        """Charges what the counters moved by after the last op (the final flush and wait) to no
        site."""
        with self._lock:
            self._apply_all(self._statements.settle())
            moved = self._counters()
            self.compile_seconds += moved["compile_seconds"]
            if self.first_op is not None:
                self.last_op = time.perf_counter()
                self.wait_seconds += max(0.0, final_sync_seconds - moved["compile_seconds"])
            self._flushed(moved)

    def _flushed(self, moved):
        """After a sync point outside any op: the pending graph ran, its new programs (if any)
        are the changed calls' doing."""
        if moved["programs"] and self._pending:
            self._blame(self._pending, _program_kind(moved, torch_tpu.get_eager_mode() == _FUSED),
                        moved["compile_seconds"])
        self._pending = []

    def device_busy(self, runs, wall_minus_perf_ns):
        """Seconds the busiest device ran programs between the first and last op, from the
        device events PyTorch's profiler shows (`runs`: (device, start_ns, end_ns, name) on the
        wall clock, `wall_minus_perf_ns` converting them to perf_counter's)."""
        if self.first_op is None:
            return None
        first, last = self.first_op, self.last_op
        busy = {}
        for device, start_ns, end_ns, _ in runs:
            start = (start_ns - wall_minus_perf_ns) / 1e9
            end = (end_ns - wall_minus_perf_ns) / 1e9
            busy[device] = busy.get(device, 0.0) + max(0.0, min(end, last) - max(start, first))
        return max(busy.values(), default=0.0)

    def timing(self, dispatch_overhead):
        """`dispatch_overhead`: seconds per op that a TorchDispatchMode costs outside the
        collector's own timers (PyTorch's Python dispatch and its wrapper around the handler)."""
        ops = sum(site.calls for site in self.sites.values())
        return {"span_seconds": self.last_op - self.first_op if self.first_op is not None else 0.0,
                "advisor_seconds": self.overhead + ops * dispatch_overhead,
                "compile_seconds": self.compile_seconds, "wait_seconds": self.wait_seconds,
                "op_seconds": self.op_seconds}


def dispatch_overhead(repeats=3, calls=40):
    """Measures what a TorchDispatchMode costs per op beyond what its handler times itself: the
    cheapest of a few rounds of a metadata-only op, with a collector of its own and without."""
    probe = torch.empty(0, device="tpu")
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            probe.view(-1)
        plain = time.perf_counter() - start
        collector = Collector(_NoModules())
        with collector:
            start = time.perf_counter()
            for _ in range(calls):
                probe.view(-1)
            watched = time.perf_counter() - start
        best = min(best, (watched - plain - collector.overhead) / calls)
    return max(0.0, best)


class _NoModules:
    def current(self):
        return None, 0


def _op_name(func):
    return func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)


def _program_kind(moved, fused):
    if moved["compiles_per_op"]:
        return "per-op program"
    if moved["compiles_fused_graph"]:
        return "fused graph"
    if moved["compiles_compiled_graph"]:
        return "torch.compile graph"
    return "fused graph" if fused else "per-op program"  # loaded from the cache directory


