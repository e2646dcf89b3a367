"""Background jobs in real processes: a job past its deadline is killed and reported, and no more than `workers`
run at once."""

from __future__ import annotations

import time

from specsize.service.jobs import JobRunner


def _wait(runner: JobRunner, job_id: str, limit: float = 120.0) -> dict:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        job = runner.get(job_id)
        assert job is not None
        if job.status not in ("queued", "running"):
            return job.to_dict()
        time.sleep(0.1)
    raise AssertionError("the job neither finished nor timed out")


def test_a_job_past_its_deadline_is_killed_and_reported():
    runner = JobRunner(workers=1, timeout_s=2.0)
    # 1.5 million simulated requests (5 req/s for 300,000 s): far longer than 2 s of CPU
    job = runner.submit("simulate", {"body": {"acceptance_rate": 0.7, "rate": 5, "duration": 300_000}}, "planner")
    assert not isinstance(job, str)
    assert runner.submit("simulate", {"body": {}}, "other") == "full"  # one worker: the second is refused
    started = time.monotonic()
    done = _wait(runner, job.id)
    assert done["status"] == "timed_out" and done["error"]["field"] == "timeout", done["error"]
    assert time.monotonic() - started < 30


def test_a_failing_job_reports_the_field():
    runner = JobRunner(workers=1, timeout_s=60.0)
    job = runner.submit("simulate", {"body": {"concurrency": 0}}, "planner")
    assert not isinstance(job, str)
    done = _wait(runner, job.id)
    assert done["status"] == "failed" and done["error"]["field"] == "concurrency"


def test_one_user_cannot_hold_every_worker():
    """Fuzz pass 5: one planner filled both job slots and every other user got 429 until a job ended. A user now runs
    at most all but one of the workers (one of two), so another user still gets one."""
    runner = JobRunner(workers=2, timeout_s=3.0)
    long = {"body": {"acceptance_rate": 0.7, "rate": 5, "duration": 300_000}}
    first = runner.submit("simulate", long, "alice")
    assert not isinstance(first, str)
    assert runner.submit("simulate", long, "alice") == "owner"
    second = runner.submit("simulate", long, "bob")
    assert not isinstance(second, str)
    assert runner.submit("simulate", long, "carol") == "full"
    assert runner.per_owner == 1 and JobRunner(workers=1).per_owner == 1 and JobRunner(workers=4).per_owner == 3
    for job in (first, second):
        assert _wait(runner, job.id)["status"] == "timed_out"
