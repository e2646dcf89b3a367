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
    assert job is not None
    assert runner.submit("simulate", {"body": {}}, "planner") is None  # one worker: the second is refused
    started = time.monotonic()
    done = _wait(runner, job.id)
    assert done["status"] == "timed_out" and done["error"]["field"] == "timeout", done["error"]
    assert time.monotonic() - started < 30


def test_a_failing_job_reports_the_field():
    runner = JobRunner(workers=1, timeout_s=60.0)
    job = runner.submit("simulate", {"body": {"concurrency": 0}}, "planner")
    assert job is not None
    done = _wait(runner, job.id)
    assert done["status"] == "failed" and done["error"]["field"] == "concurrency"
