"""A finding: what the advisor saw, where, what to change, and the time it estimates is lost."""
import dataclasses
import os


@dataclasses.dataclass
class Finding:
    kind: str          # cpu_fallback, recompile, host_read, flush, graph_break, host_bound,
    #                    matmul_shape, attention_shape, conv_shape, float32_matmul, changing_sizes, memory
    title: str
    advice: str        # what to change, in plain words
    seconds: float     # estimated time lost
    estimate: str      # how `seconds` was estimated
    file: str = None
    line: int = None
    module: str = None
    count: int = 0
    details: dict = dataclasses.field(default_factory=dict)

    @property
    def where(self):
        if self.file is None:
            return ""
        return f"{os.path.basename(self.file)}:{self.line}"

    def to_dict(self):
        return dataclasses.asdict(self)


def sentence(text):
    """`text` with its first letter capitalised and a full stop, the rest left as it is."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def ranked(findings):
    """Most time lost first; ties keep the order the analyses produced them in."""
    return sorted(findings, key=lambda f: -f.seconds)


def by_line(sites, keep):
    """{(file, line): [sites]} of the sites for which keep(site) holds, in first-seen order."""
    groups = {}
    for site in sites:
        if keep(site):
            groups.setdefault((site.file, site.line), []).append(site)
    return groups
