"""The sweeps' worker pool (torch_tpu.tools.worker_pool): answers, crashes, hangs, start-up failures.

Workers here are small Python processes that load the pool module by path, so the tests need
neither torch nor the device.
"""
import sys

from torch_tpu.tools import worker_pool

WORKER = f"""
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("worker_pool", {worker_pool.__file__!r})
pool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pool)
if os.environ.get("FAIL_AT_START"):
    sys.exit(3)
pool.announce_ready()
for job in pool.jobs():
    if job == "crash":
        os._exit(7)
    if job == "hang":
        time.sleep(60)
    print("noise that is not an answer")  # unflushed: it reaches the pipe with the answer
    pool.answer({{"job": job, "pid": os.getpid()}})
"""


def run(jobs, parallel=2, timeout=30.0, tmp_path=None):
    answers, failures = {}, {}
    with open(tmp_path / "workers.log", "w") as log:
        worker_pool.run([sys.executable, "-c", WORKER], jobs, parallel, timeout, log,
                        lambda job, record: answers.__setitem__(job, record),
                        lambda job, reason, seconds: failures.__setitem__(job, reason))
    return answers, failures


def test_every_job_is_answered_once(tmp_path):
    jobs = [f"job{i}" for i in range(6)]
    answers, failures = run(jobs, tmp_path=tmp_path)
    assert failures == {}
    assert sorted(answers) == jobs
    assert all(answers[j]["job"] == j for j in jobs)


def test_a_crash_and_a_hang_fail_only_their_own_job(tmp_path):
    answers, failures = run(["a", "crash", "b", "hang", "c"], timeout=3.0, tmp_path=tmp_path)
    assert sorted(answers) == ["a", "b", "c"]
    assert failures["crash"] == "worker died (exit 7)"
    assert failures["hang"] == "timeout after 3s"


def test_workers_that_cannot_start_fail_every_job_instead_of_respawning(tmp_path, monkeypatch):
    monkeypatch.setenv("FAIL_AT_START", "1")
    answers, failures = run(["a", "b", "c"], tmp_path=tmp_path)
    assert answers == {}
    assert sorted(failures) == ["a", "b", "c"]
    assert all("no worker could start" in reason for reason in failures.values())
