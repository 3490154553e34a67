"""The advisor: runs a program and says what to change for it to run well on the tpu device.

    python -m torch_tpu.advisor script.py [args]      # text report after the script
    python -m torch_tpu.advisor --json script.py      # the same as JSON

    with torch_tpu.advisor.watch() as report:
        train_step()
    print(report)                  # or report.findings, report.to_json()

Findings, ranked by the time each is estimated to cost: ops that run on the CPU, recompiles and
what changed, host reads inside loops and the fused-graph flushes they cause, torch.compile graph
breaks, time the device waits for the host, matrix products, convolutions and attention whose
dimensions leave a TPU's matrix unit partly idle, float32 products that autocast would run in
bfloat16, sizes that change every step, and memory near the device's limit. Each says what to
change. The figures come from torch_tpu.metrics(), torch_tpu.fallback_counts() and
torch.tpu's memory statistics; the advisor adds where in the user's code each thing happened.

Watching costs time (on 2 CPU cores, 100-200 microseconds per op), which the advisor takes out of
the time it compares. It synchronizes the devices when it starts and ends, and resets their peak
memory statistics when it starts. docs/advisor.md says how each figure is measured or estimated.
"""
import contextlib

from ._findings import Finding
from ._report import Report
from ._session import Session

__all__ = ["watch", "Report", "Finding"]


@contextlib.contextmanager
def watch():
    """Watches the block; the Report it yields is filled in when the block ends, also when it
    raises."""
    report = Report()
    session = Session()
    session.start()
    try:
        yield report
    finally:
        session.stop(report)
