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
used = 0
for job in pool.jobs():
    if job == "crash":
        os._exit(7)
    if job == "crash-if-used" and used:  # what a long-lived worker's accumulated state does
        os._exit(9)
    used += 1
    if job == "hang":
        time.sleep(60)
    print("noise that is not an answer")  # unflushed: it reaches the pipe with the answer
    pool.answer({{"job": job, "pid": os.getpid()}})
"""


def run(jobs, parallel=2, timeout=30.0, tmp_path=None, jobs_per_worker=None):
    answers, failures = {}, {}
    with open(tmp_path / "workers.log", "w") as log:
        worker_pool.run([sys.executable, "-c", WORKER], jobs, parallel, timeout, log,
                        lambda job, record: answers.__setitem__(job, record),
                        lambda job, reason, seconds: failures.__setitem__(job, reason),
                        jobs_per_worker=jobs_per_worker)
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


def test_a_worker_is_replaced_after_its_share_of_jobs(tmp_path):
    jobs = [f"job{i}" for i in range(5)]
    answers, failures = run(jobs, parallel=1, tmp_path=tmp_path, jobs_per_worker=2)
    assert failures == {} and sorted(answers) == jobs
    pids = [answers[j]["pid"] for j in jobs]
    assert [pids.count(p) for p in dict.fromkeys(pids)] == [2, 2, 1]


def test_a_job_whose_used_worker_died_runs_again_in_a_fresh_one(tmp_path):
    answers, failures = run(["a", "crash-if-used", "b", "crash"], parallel=1, tmp_path=tmp_path)
    assert sorted(answers) == ["a", "b", "crash-if-used"]
    assert answers["crash-if-used"]["pid"] != answers["a"]["pid"]
    # A job that crashes a fresh worker too fails, once.
    assert failures == {"crash": "worker died (exit 7)"}
    assert "running it again in a fresh one" in (tmp_path / "workers.log").read_text()
