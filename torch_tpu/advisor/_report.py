"""The advisor's report: ranked findings and a summary, as text for the terminal or as JSON."""
import json
import os
import textwrap

_WIDTH = 100


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _seconds(s):
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


class Report:
    """Filled in when the watched block ends. `findings`: ranked, most time lost first;
    `summary`: the figures the findings come from (mode, time, compiles, flushes, memory)."""

    def __init__(self):
        self.findings = []
        self.summary = {}

    def to_dict(self):
        return {"findings": [f.to_dict() for f in self.findings], "summary": self.summary}

    def to_json(self, indent=2):
        return json.dumps(self.to_dict(), indent=indent, default=str)

    def __str__(self):
        return self.to_text()

    def to_text(self):
        s = self.summary
        out = [f"TorchTPU advisor: {len(self.findings)} finding{'s' * (len(self.findings) != 1)}, "
               f"ranked by estimated time lost (mode {s.get('mode')}, "
               f"{_seconds(s.get('span_seconds', 0.0))} from the first device op to the last)", ""]
        for i, finding in enumerate(self.findings, 1):
            where = f" {finding.where}" if finding.where else ""
            module = f" [{finding.module}]" if finding.module and finding.module not in finding.title else ""
            out.append(f"{i:>2}. {finding.kind}{where}{module}: {finding.title}")
            indent = " " * 4
            out += textwrap.wrap("change: " + finding.advice, _WIDTH, initial_indent=indent,
                                 subsequent_indent=indent + "  ")
            out += textwrap.wrap(f"time lost: ~{_seconds(finding.seconds)} ({finding.estimate})", _WIDTH,
                                 initial_indent=indent, subsequent_indent=indent + "  ")
        if not self.findings:
            out.append("Nothing to change found.")
        out += ["", "Summary"] + [f"  {line}" for line in self._summary_lines()]
        return "\n".join(out) + "\n"

    def _summary_lines(self):
        s = self.summary
        lines = [f"device ops seen: {s.get('device_ops', 0)}; programs compiled: {s.get('compiles', 0)} "
                 f"({_seconds(s.get('compile_seconds', 0.0))}); CPU fallbacks: {s.get('fallback_calls', 0)}; "
                 f"graph breaks: {s.get('graph_breaks', 0)}"]
        idle = s.get("host_bound")
        if idle:
            lines.append(f"device idle waiting for the host: about {idle['device_idle_share']:.0%} "
                         f"({_seconds(idle['idle_seconds'])}; {idle['method']})")
        flushes = s.get("flushes", [])
        if flushes:
            shown = ", ".join(f"{r['reason']} x{r['count']} at {os.path.basename(r['file'])}:{r['line']}"
                              for r in flushes[:6])
            more = f" and {len(flushes) - 6} more" if len(flushes) > 6 else ""
            lines += textwrap.wrap(f"fused-graph flushes: {shown}{more}", _WIDTH - 2, subsequent_indent="  ")
        for device, peak in s.get("peak_memory_bytes", {}).items():
            if peak:
                    lines.append(f"peak device memory: {_size(peak)} on tpu:{device}")
        largest = s.get("largest_tensors", [])
        if largest:
            lines.append("largest live tensors near the peak:")
            lines += [f"  {_size(t['bytes']):>10}  {t['name']}" for t in largest]
        return lines
