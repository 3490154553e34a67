"""Many architectures in worker processes: `run` hands each architecture to a worker (so a crash
or a hang past the timeout costs that architecture only), resumes from the results an earlier
run saved, merges the modes each run recorded, prints progress, and rewrites the results after
every architecture; `_worker` is the loop each worker process runs."""
import json
import os
import sys
import time

from torch_tpu.tools import worker_pool
from torch_tpu.tools.model_zoo.compare import MODES, _first_line, failing_op, run_arch
from torch_tpu.tools.model_zoo.report import _ordered, _summary, totals, write_results
from torch_tpu.tools.model_zoo.selection import _family_of


def _quiet_transformers():
    # Default configs of large models warn about token ids outside the vocabulary they are
    # about to be shrunk to; thousands of such lines would bury the progress bar.
    import transformers

    transformers.logging.set_verbosity_error()


# A worker process is replaced after this many architectures: every mode of a large one
# compiles a few thousand programs, and a process that holds about 12 000 executables exceeds
# the kernel's memory-map limit, where the XLA CPU plugin crashes (see worker_pool).
ARCHITECTURES_PER_WORKER = 4


def _worker():
    import torch  # noqa: F401

    import torch_tpu  # noqa: F401

    _quiet_transformers()
    worker_pool.announce_ready()
    for job in worker_pool.jobs():
        try:
            record = run_arch(job["arch"], job["modes"])
        except BaseException as error:  # noqa: BLE001
            record = {"arch": job["arch"], "status": "attempted", "family": _family_of(job["arch"]),
                      "modes": {m: _crash(f"worker: {_first_line(error)}") for m in job["modes"]},
                      "seconds": 0.0}
        worker_pool.answer(record)


def _crash(reason):
    return {"forward": "fail", "train": "fail", "error": reason, "op": failing_op(reason),
            "fallbacks": {}, "compiles": 0, "seconds": 0.0, "native": False}


def _bar(done, total, width=30):
    filled = int(width * done / total) if total else width
    return "#" * filled + "." * (width - filled)


def _needs_rerun(record, modes, rerun):
    if record["status"] == "not_applicable":
        return "na" in rerun
    if any(m not in record["modes"] for m in modes):
        return True
    if record.get("task") == "causal_lm" and "generate_reference" not in record:
        return True  # recorded before causal LMs generated too
    return "failed" in rerun and any(
        record["modes"][m]["forward"] != "pass" or record["modes"][m]["train"] != "pass"
        for m in modes)


def run(archs, modes=MODES, out_dir="model_zoo", jobs=1, timeout=600.0, resume=True,
        progress=True, command=None, rerun=()):
    """Runs the architectures in worker processes; returns (records, totals). Records already
    in out_dir/model_zoo.json for the same architecture and modes are kept (resume), except
    those `rerun` names: "na" (not applicable) and "failed" (a failure in one of the modes)."""
    progress = sys.stderr if progress is True else progress
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "model_zoo.json")
    previous = {}
    if resume and os.path.exists(path):
        with open(path) as f:
            for r in json.load(f).get("architectures", []):
                previous[r["arch"]] = r
    records = {}
    todo = []
    for arch in archs:
        old = previous.get(arch)
        if old and not _needs_rerun(old, modes, rerun):
            records[arch] = old
        else:
            todo.append(arch)
    meta = {"command": command or "python -m torch_tpu.tools.model_zoo", "modes": list(modes)}
    for arch, old in previous.items():
        # A resumed run keeps what an earlier, wider run recorded.
        if arch not in records and arch not in todo:
            records[arch] = old
    log = open(os.path.join(out_dir, "model_zoo_workers.log"), "a")
    start = time.monotonic()
    done = len(archs) - len(todo)

    def finish(job, record):
        nonlocal done
        old = records.get(record["arch"]) or previous.get(record["arch"])
        if old and old.get("modes") and record["status"] == "attempted":
            # Modes that an earlier run recorded and this one did not run stay.
            record["modes"] = {**old["modes"], **record.get("modes", {})}
        records[record["arch"]] = record
        done += 1
        write_results(out_dir, _ordered(records, archs), modes, meta)
        if progress:
            print(f"[{_bar(done, len(archs))}] {done}/{len(archs)} "
                  f"{time.monotonic() - start:.0f}s {record['arch']}: {_summary(record, modes)}",
                  file=progress, flush=True)

    def crashed(job, reason, seconds):
        finish(job, {"arch": job["arch"], "status": "attempted", "family": _family_of(job["arch"]),
                     "modes": {m: _crash(reason) for m in modes}, "seconds": round(seconds, 1)})

    if progress and todo != list(archs):
        print(f"resuming: {done} of {len(archs)} already in {path}", file=progress, flush=True)
    worker_pool.run([sys.executable, "-m", "torch_tpu.tools.model_zoo", "--worker"],
                    [{"arch": arch, "modes": list(modes)} for arch in todo], jobs, timeout, log, finish,
                    crashed, jobs_per_worker=ARCHITECTURES_PER_WORKER)
    ordered = _ordered(records, archs)
    write_results(out_dir, ordered, modes, meta)
    return ordered, totals(ordered, modes)

