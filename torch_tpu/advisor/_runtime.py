"""Findings about how the program ran: CPU fallbacks, recompiles, host reads and the flushes
they cause, graph breaks, and time the device waited for the host."""
import collections

from . import _signatures
from ._findings import Finding, by_line, sentence
from ._dynamo import parse_reason

# Flush reasons that are the design working (a loop cut where its body repeats, a compiled graph's
# capture, strict mode running a foreach op or an optimizer step as one program) rather than
# something to change; host reads and fallbacks have findings of their own.
# Strict mode runs a foreach op's or an optimizer step's per-tensor ops as one program: a group
# ending, not a pending graph's.
_PROGRAM_GROUPS = {"foreach op", "fused optimizer", "optimizer step"}
_EXPECTED_FLUSHES = {"loop iteration", "loop start", "graph capture", "host access", "fallback op"} | _PROGRAM_GROUPS
_FLUSH_ADVICE = {
    "device change": "keep the tensors of one step on one device: an op on another device flushes "
                     "the pending graph of this one",
    "event record": "record events outside the loop: each record ends the pending graph",
    "op of another thread": "let one thread own the tensors of a step: a storage another thread's "
                            "pending graph holds makes that graph run first",
    "mode change": "set the eager mode once, outside the loop",
    "collective": "collectives end the pending graph; bucket them (fewer, larger collectives)",
}
_READ_KINDS = {
    "_local_scalar_dense": ".item() (or bool(), int(), float() of a tensor, or a Python `if` on one)",
    "_to_copy": ".cpu(), .tolist(), .numpy() or printing a tensor",
    "copy_": "a copy into a CPU tensor",
}


def fallbacks(sites):
    findings = []
    for (file, line), group in by_line(sites, lambda s: s.fallbacks).items():
        counts = collections.Counter()
        for site in group:
            counts.update(site.fallbacks)
        flushes = sum(s.flush_reasons.get("fallback op", 0) for s in group)
        for name, count in counts.most_common():
            seconds = sum(s.fallback_seconds for s in group if name in s.fallbacks)
            module = next((s.module for s in group if s.module), None)
            cut = (f"; in defer_and_fuse it also ended the pending graph ({flushes} flushes)" if flushes else "")
            findings.append(Finding(
                "cpu_fallback", f"{name} runs on the CPU ({count} call{'s' * (count > 1)})",
                f"{name} has no tpu lowering: every call copies its inputs to the host, runs the CPU "
                f"kernel and copies the result back{cut}. Compute it with ops that have a lowering "
                f"(torch_tpu.lowered_ops() lists them), or file an issue asking for a lowering of {name}.",
                seconds, "host time spent in the calls that fell back", file, line, module, count,
                {"op": name, "flushes": flushes}))
    return findings


def _advice_for_changes(descriptions):
    text = " ".join(descriptions)
    advice = []
    if " shape " in text or " rank " in text:
        advice.append("give the sizes that change a few fixed values (pad a sequence to a multiple of "
                      "128 or to the next power of two, or a fixed maximum length with a mask)")
    if " dtype " in text:
        advice.append("cast to one dtype once, before the loop, so every call sees the same dtype")
    if "layout" in text:
        advice.append("call .contiguous() (or keep one memory layout) before this line, so every call "
                      "sees the same strides")
    return "; ".join(advice) or "keep this line's arguments the same from call to call"


def recompiles(sites):
    findings = []
    for (file, line), group in by_line(sites, lambda s: s.recompiles).items():
        events = [e for s in group for e in s.recompiles]
        descriptions = list(dict.fromkeys(e[0] for e in events))
        programs = sorted({f"{e[1]} ({s.op})" for s in group for e in s.recompiles})
        sizes = max(len({_signatures.sizes_only(sig) for sig in s.signatures}) for s in group)
        calls = max(s.calls for s in group)
        seconds = sum(e[2] for e in events)
        module = next((s.module for s in group if s.module), None)
        every_step = f"; its sizes took {sizes} values over {calls} calls" if sizes > 2 else ""
        findings.append(Finding(
            "recompile", f"{len(events)} new program{'s' * (len(events) > 1)} for changed arguments: "
            f"{', '.join(programs)}",
            sentence(_advice_for_changes(descriptions)) + " " + sentence(
                f"What changed: {'; '.join(descriptions[:4])}{every_step}"),
            seconds, "compile seconds of the programs these changes made (torch_tpu.metrics()); a program "
            "loaded from the cache directory instead counts as none",
            file, line, module, len(events),
            {"programs": programs, "changes": descriptions, "distinct_sizes": sizes}))
    return findings


def _advice_for_guards(guards):
    text = " ".join(guards)
    advice = []
    if "size mismatch" in text:
        advice.append("mark the dimension that changes dynamic (torch._dynamo.mark_dynamic(tensor, dim)) "
                      "or give it a few fixed sizes")
    if "dtype" in text:
        advice.append("call the function with one dtype (cast before the call)")
    if "stride" in text:
        advice.append("pass tensors with one memory layout (.contiguous() before the call)")
    if not advice and "==" in text:
        advice.append("a Python number the function reads became a constant of its graph: pass it as a "
                      "tensor, or keep it fixed")
    return "; ".join(advice) or "call the function with arguments of the same kind every time"


def compiled_recompiles(listener):
    """torch.compile recompiles, from the guards Dynamo says failed."""
    groups = {}
    for file, line, function, guard, seconds in listener.recompiles():
        groups.setdefault((file, line, function), []).append((guard, seconds))
    findings = []
    for (file, line, function), events in groups.items():
        guards = list(dict.fromkeys(guard for guard, _ in events))
        findings.append(Finding(
            "recompile", f"torch.compile compiled {function} again {len(events)} time{'s' * (len(events) > 1)}",
            sentence(_advice_for_guards(guards)) + " " + sentence("Guards that failed: " + "; ".join(guards[:4])),
            sum(seconds for _, seconds in events), "Dynamo's compile time for these frames (its compilation "
            "metrics)", file, line, None, len(events),
            {"programs": [f"torch.compile graph ({function})"], "changes": guards}))
    return findings


def changing_sizes(sites, already):
    """Lines whose sizes change on most calls that the recompile findings do not already name:
    shape buckets serve them, so they cost padding, not compiles."""
    findings = []
    for (file, line), group in by_line(sites, lambda s: not s.backward and not s.view and s.calls >= 4).items():
        if (file, line) in already:
            continue
        site = max(group, key=lambda s: s.size_changes)
        sizes = len({_signatures.sizes_only(sig) for sig in site.signatures})
        if sizes < 4 or site.size_changes < (site.calls - 1) / 2:
            continue
        findings.append(Finding(
            "changing_sizes", f"sizes change on {site.size_changes} of {site.calls} calls of {site.op}",
            "Give these tensors a fixed size (pad to a multiple of 128 or a fixed maximum length with a "
            "mask): programs for changing sizes run padded to the next power of two, computing on the "
            "padding.", 0.0, "not measured: shape buckets serve these sizes without compiling",
            file, line, site.module, site.size_changes, {"op": site.op, "distinct_sizes": sizes}))
    return findings


def host_reads(sites, syncs, timing):
    """Host reads and synchronize() calls inside loops. What one costs is the overlap it
    prevents: while the host waits, it cannot queue the next step's work. So the time lost is the
    time waited, capped (in proportion) at the host's own work outside waits, which is what could
    have run meanwhile."""
    own = timing["span_seconds"] - timing["advisor_seconds"] - timing["compile_seconds"]
    waited = timing["wait_seconds"]
    overlap = min(1.0, max(0.0, own - waited) / waited) if waited > 0 else 0.0
    estimate = ("time waited in these reads, capped at the host's own work between them (what could have "
                "overlapped with the device's)")
    findings = []
    for (file, line), group in by_line(sites, lambda s: s.host_reads).items():
        count = sum(s.host_reads for s in group)
        if count < 2:  # a single read is how a result leaves the device, not a loop's stall
            continue
        flushes = sum(s.flush_reasons.get("host access", 0) for s in group)
        kinds = sorted({_READ_KINDS.get(s.op, f"{s.op} (its result's size depends on the data)") for s in group})
        cut = f", and each one ended the pending fused graph ({flushes} flushes)" if flushes else ""
        findings.append(Finding(
            "host_read", f"host read inside a loop: {count} reads",
            f"Move {' / '.join(kinds)} out of the loop: every read waits for the device to finish all "
            f"work so far{cut}. Keep the values on the device (accumulate them in a tpu tensor) and read "
            "them once after the loop, or every N steps.",
            sum(s.wait_seconds for s in group) * overlap, estimate, file, line,
            next((s.module for s in group if s.module), None), count,
            {"ops": sorted({s.op for s in group}), "flushes": flushes}))
    for (file, line), (calls, seconds, reasons) in syncs.items():
        if calls < 2:
            continue
        findings.append(Finding(
            "host_read", f"torch.tpu.synchronize() inside a loop: {calls} calls",
            "Remove torch.tpu.synchronize() from the loop: reading a result already waits for it, and "
            "each synchronize stops the host from queueing the next step while the device runs.",
            seconds * overlap, estimate, file, line, None, calls,
            {"ops": ["synchronize"], "flushes": sum(reasons.values())}))
    return findings


def flushes(sites):
    findings = []
    groups = by_line(sites, lambda s: set(s.flush_reasons) - _EXPECTED_FLUSHES)
    for (file, line), group in groups.items():
        reasons = collections.Counter()
        for site in group:
            reasons.update({r: n for r, n in site.flush_reasons.items() if r not in _EXPECTED_FLUSHES})
        for reason, count in reasons.items():
            if count < 2:
                continue
            advice = _FLUSH_ADVICE.get(reason, "avoid this sync point inside the loop")
            findings.append(Finding(
                "flush", f"fused graph flushed {count} times: {reason}", sentence(advice),
                0.0, "not measured: each flush splits what could be one program", file, line,
                next((s.module for s in group if s.module), None), count, {"reason": reason}))
    return findings


def flush_table(sites, syncs):
    """[(reason, file, line, count)] of every flush seen, for the report's summary."""
    rows = collections.Counter()
    for site in sites:
        for reason, count in site.flush_reasons.items():
            if reason not in _PROGRAM_GROUPS:
                rows[(reason, site.file, site.line)] += count
    for (file, line), (_, _, reasons) in syncs.items():
        for reason, count in reasons.items():
            rows[(reason, file, line)] += count
    return [(reason, file, line, count) for (reason, file, line), count in rows.most_common()]


def graph_breaks(listener, compile_seconds_per_graph):
    findings = []
    places = collections.Counter((file, line, reason) for file, line, reason in listener.breaks)
    estimate = ("each break adds a graph: Dynamo's and the backend's compile seconds per graph "
                "(torch_tpu.metrics()) per break")
    for (file, line, reason), count in places.items():
        title, explanation, hints = parse_reason(reason)
        advice = "Remove the break so the function stays one graph: " + (
            explanation or title) + (" " + " ".join(hints[:1]) if hints else "")
        findings.append(Finding(
            "graph_break", f"torch.compile graph break: {title}", advice,
            compile_seconds_per_graph * count, estimate, file, line, None, count,
            {"reason": title, "explanation": explanation, "hints": hints}))
    for reason, count in listener.unplaced_reasons().items():
        title, explanation, hints = parse_reason(reason)
        findings.append(Finding(
            "graph_break", f"torch.compile graph break: {title}",
            "Remove the break so the function stays one graph: " + (explanation or title),
            compile_seconds_per_graph * count, estimate, None, None, None, count,
            {"reason": title, "explanation": explanation, "hints": hints}))
    return findings


def host_bound(timing, mode_name):
    """The share of the time the device sat idle waiting for the host, between the first and
    last device op, leaving out compiles (ours and Dynamo's) and the advisor's own time, which
    keep the device idle too but are not the program's.

    It comes from the device events PyTorch's profiler shows (each program's span on its device,
    in every mode). When a profiler trace was already running, the advisor cannot take them, and
    estimates from the host's side: time the host spent neither compiling nor waiting for the
    device (host reads, synchronize) is counted idle, an upper bound."""
    own = timing["span_seconds"] - timing["advisor_seconds"] - timing["compile_seconds"]
    if own <= 0:
        return [], None
    busy = timing.get("device_busy_seconds")
    if busy is not None:
        idle = max(0.0, own - busy)
        how = ("device timeline from the programs' device events (as torch.profiler shows them), "
               "between the first and last op, minus compiles and the advisor's own time")
    else:
        idle = max(0.0, own - timing["wait_seconds"])
        how = ("host time between the first and last device op, minus compiles (ours and Dynamo's), the "
               "advisor's own time and the time the host waited for the device (host reads, synchronize); "
               "an upper bound")
    share = idle / own
    measure = {"device_idle_share": share, "idle_seconds": idle, "estimated_from": how,
               "method": "device timeline" if busy is not None else "host-side upper bound"}
    if share < 0.5 or idle < 0.05:
        return [], measure
    if mode_name == "defer_and_fuse":
        advice = ("The host's own work between device ops dominates: move data preparation out of the step "
                  "(a DataLoader with workers), and give each step more device work (larger batches).")
    else:
        advice = ("Most of the step is the host dispatching ops one by one: run it in defer_and_fuse "
                  "(torch_tpu.set_eager_mode('defer_and_fuse')) or wrap it in torch.compile(backend='tpu'), "
                  "so that a step is one program.")
    bound = "up to " if busy is None else ""
    return [Finding("host_bound", f"the device sat idle {bound}about {share:.0%} of the time, waiting for the host",
                    advice, idle, how, details=measure)], measure
