"""What torch.compile's Dynamo reports: graph breaks and recompiles, with reasons and lines.

Dynamo counts breaks by reason (torch._dynamo.utils.counters["graph_break"]) without a line; the
line is in the message its "graph_breaks" log artifact writes for each break. The advisor listens
on that logger while it watches (without printing anything) and falls back to the counters'
reasons when a message does not parse. Recompiles come from Dynamo's compilation metrics
(torch._dynamo.utils.get_compilation_metrics()), whose records carry the guard that failed.
"""
import logging
import re
import sys

# The artifact loggers Dynamo creates with torch._logging.getArtifactLogger(__name__, "graph_breaks").
_LOGGERS = ("torch._dynamo.symbolic_convert.__graph_breaks", "torch._dynamo.convert_frame.__graph_breaks")
_WHERE = re.compile(r"in user code at (.+?):(\d+)")
_REASON = re.compile(r"Graph Break Reason: (.*?)(?:\nUser code traceback:|\Z)", re.S)
# Lines of Dynamo's reason text that say nothing about this break.
_NOISE = ("Encountered graph break when attempting", "Developer debug context", "For more details",
          "Hint: Please report an issue")


def _dynamo_counts():
    if "torch._dynamo" not in sys.modules:
        return {}
    from torch._dynamo.utils import counters
    return dict(counters["graph_break"])


def parse_reason(reason):
    """(title, explanation, hints) of Dynamo's reason text."""
    lines = [line.strip() for line in reason.strip().splitlines()
             if line.strip() and not line.strip().startswith(_NOISE)]
    title = lines[0] if lines else "graph break"
    explanation = next((l.split(":", 1)[1].strip() for l in lines if l.startswith("Explanation:")), "")
    hints = [l.split(":", 1)[1].strip() for l in lines if l.startswith("Hint:")]
    return title, explanation, hints


def _compilation_records():
    if "torch._dynamo" not in sys.modules:
        return []
    from torch._dynamo.utils import get_compilation_metrics
    return get_compilation_metrics()


_STACK_LINE = re.compile(r'File "(.+?)", line (\d+)')


class DynamoListener(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.breaks = []  # (file, line, reason text)
        self._saved = []
        self._counts_before = {}
        self._records_before = []  # held, so that no new record can take one's id

    def emit(self, record):
        try:
            message = record.getMessage()
        except Exception:  # a message that does not format is still a break, without details
            message = str(record.msg)
        where = _WHERE.search(message)
        reason = _REASON.search(message)
        if where:
            self.breaks.append((where.group(1), int(where.group(2)), reason.group(1) if reason else ""))

    def __enter__(self):
        self._counts_before = _dynamo_counts()
        self._records_before = list(_compilation_records())
        for name in _LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.level, logger.propagate))
            if not logger.isEnabledFor(logging.DEBUG):
                # Listen without printing; a user who asked for these logs keeps seeing them.
                logger.setLevel(logging.DEBUG)
                logger.propagate = False
            logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        for logger, level, propagate in self._saved:
            logger.removeHandler(self)
            logger.setLevel(level)
            logger.propagate = propagate
        self._saved = []
        return False

    def unplaced_reasons(self):
        """{reason: count} of breaks Dynamo counted while watched that no log message placed."""
        after = _dynamo_counts()
        counted = {r: n - self._counts_before.get(r, 0) for r, n in after.items()
                   if n > self._counts_before.get(r, 0)}
        for _, _, reason in self.breaks:
            title = parse_reason(reason)[0]
            for key in counted:
                if counted[key] > 0 and parse_reason(key)[0] == title:
                    counted[key] -= 1
                    break
        return {r: n for r, n in counted.items() if n > 0}

    def recompiles(self):
        """[(file, line, function, reason, compile seconds)] of the frames Dynamo compiled again
        while watched. The line is the one the failed guard names, else the function's first."""
        found = []
        before = {id(r) for r in self._records_before}
        for record in _compilation_records():
            reason = getattr(record, "recompile_reason", None)
            if id(record) in before or not reason:
                continue
            file, line = record.co_filename, record.co_firstlineno
            at = _STACK_LINE.findall(reason)
            if at:
                file, line = at[-1][0], int(at[-1][1])
            first = reason.split("\n")[0]
            # "0/1: k == 3   # <file>:3 in g": the guard, without the compile id and source note.
            first = re.sub(r"^\d+/\d+:\s*", "", first.split("#")[0]).strip()
            found.append((file, line, record.co_name, first, record.entire_frame_compile_time_s or 0.0))
        return found
