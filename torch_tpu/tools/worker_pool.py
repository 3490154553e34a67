"""Runs jobs in a pool of worker subprocesses, one job per worker at a time.

The operator-coverage and model-zoo sweeps run each op or model in a worker process, so that a
crash, a hang or state left behind by one cannot stop or skew the others. A worker calls
`announce_ready()` once it has imported what it needs, then answers each job from `jobs()` with
`answer(record)`. `run` hands the jobs out, replaces a worker that dies or runs past the time
limit, and reports every job's outcome through its callbacks.

A worker may also be replaced after a number of jobs (`jobs_per_worker`): a process that has
run many models holds what they compiled, and the XLA CPU plugin crashes once a process maps
more memory regions than the kernel allows (each executable maps a few). For the same reason a
job whose worker died after running others is run once more in a fresh worker: only a death
there is the job's own.
"""
import json
import os
import selectors
import subprocess
import sys
import time

# Marks the pool's lines on a worker's stdout; anything else a job prints there is ignored.
_PREFIX = "@@torch_tpu_worker@@ "


def announce_ready():
    print(_PREFIX + json.dumps({"ready": True}), flush=True)


def answer(record):
    print(_PREFIX + json.dumps(record, default=str), flush=True)


def jobs():
    """The jobs the parent sends, as it sends them."""
    for line in sys.stdin:
        line = line.strip()
        if line:
            yield json.loads(line)


class _Worker:
    def __init__(self, command, log):
        # Binary pipes: stdout is read raw (lines()), and jobs are written as encoded lines.
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.job = None
        self.started = None
        self.answered = 0
        self._partial = b""

    def lines(self):
        """The complete lines the worker has written since the last call, or None at its end of
        file. Reads the pipe directly: a buffered readline could hold a second line where the
        selector no longer sees it."""
        data = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not data:
            return None
        *complete, self._partial = (self._partial + data).split(b"\n")
        return [line.decode(errors="replace") for line in complete]

    def send(self, job):
        self.job, self.started = job, time.monotonic()
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()

    def stop(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass  # the worker is gone; its end of the pipe with it
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _exit_code(proc):
    """The exit status of a worker whose stdout just closed, once it has finished exiting."""
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return None


def run(command, job_list, parallel, timeout, log, on_answer, on_failure, jobs_per_worker=None):
    """Runs each of `job_list` (JSON values) in one of up to `parallel` workers started with the
    argv `command`, in order. Calls on_answer(job, record) with each worker's answer, and
    on_failure(job, reason, seconds) for a job whose worker died or ran past `timeout` seconds;
    that worker is replaced. A worker that dies before its first job is not replaced (whatever
    stops it would stop the next one too); jobs no worker is left to run fail with that reason.
    Workers' stderr goes to the file `log`. With `jobs_per_worker`, a worker that has answered
    that many jobs is replaced by a fresh one; a job whose worker died after answering others
    is run again once, in a fresh worker."""
    pending = list(reversed(job_list))
    retried = set()
    selector = selectors.DefaultSelector()
    workers = []

    def spawn():
        worker = _Worker(command, log)
        workers.append(worker)
        selector.register(worker.proc.stdout, selectors.EVENT_READ, worker)

    def stop(worker):
        selector.unregister(worker.proc.stdout)
        worker.stop()
        workers.remove(worker)

    def fail(worker, reason):
        job = worker.job
        stop(worker)
        if job is None:
            return
        key = json.dumps(job, sort_keys=True)
        if reason.startswith("worker died") and worker.answered and key not in retried:
            retried.add(key)
            print(f"job {key}: {reason} after {worker.answered} other jobs in that worker; "
                  "running it again in a fresh one", file=log, flush=True)
            pending.append(job)
        else:
            on_failure(job, reason, time.monotonic() - worker.started)
        if pending:
            spawn()

    for _ in range(min(parallel, len(pending))):
        spawn()
    while workers:
        for key, _ in selector.select(timeout=1.0):
            worker = key.data
            lines = worker.lines()
            if lines is None:
                fail(worker, f"worker died (exit {_exit_code(worker.proc)})")
                continue
            for line in lines:
                if not line.startswith(_PREFIX):
                    continue
                message = json.loads(line[len(_PREFIX):])
                if not message.get("ready"):
                    job, worker.job = worker.job, None
                    worker.answered += 1
                    on_answer(job, message)
                if pending and (jobs_per_worker is None or worker.answered < jobs_per_worker):
                    worker.send(pending.pop())
                else:
                    stop(worker)
                    if pending:
                        spawn()
                    break
        now = time.monotonic()
        for worker in list(workers):
            if worker.job is not None and now - worker.started > timeout:
                fail(worker, f"timeout after {timeout:.0f}s")
    while pending:
        on_failure(pending.pop(), "no worker could start (its error is in the workers' log)", 0.0)
