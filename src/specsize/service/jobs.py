"""Long jobs (simulate, stops-paying, search) run in a process of their own, with a deadline: the request returns a job id at
once, `GET /api/v1/jobs/{id}` reports queued / running / done / failed / timed_out / cancelled, a job past its
deadline is killed (a thread could not be), and `DELETE /api/v1/jobs/{id}` kills one at once (`cancel`). At most `workers` jobs run at once, and one user runs at most `per_owner` of them
(all but one worker), so one user cannot hold every worker; more are refused (429), not queued without bound. Jobs are kept in memory: a restart forgets them (the deployments they served are in the
database)."""

from __future__ import annotations

import multiprocessing
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

KEEP_FINISHED_S = 3600.0


def _run(kind: str, payload: dict, conn) -> None:
    """The job's body, in the child process: call the library, send back the JSON contract. It ends itself once the
    service that started it is gone (killed, or stopped without its shutdown): the deadline is the service's to
    enforce, so an orphaned job had run on unbounded, a CPU held for nothing."""
    import os  # noqa: PLC0415

    from ..adapters.lifetime import exit_with  # noqa: PLC0415

    exit_with(os.getppid())
    try:
        from .. import api  # noqa: PLC0415

        if kind == "simulate":
            from .requests import build  # noqa: PLC0415

            report = api.simulate(build(payload["body"], None, payload.get("store")))  # the body as sent: the same provenance
            import json  # noqa: PLC0415

            from ..reports import svg  # noqa: PLC0415
            from ..reports.simulation import render  # noqa: PLC0415 - the JSON of `specsize simulate --format json`

            conn.send(("done", {"result": json.loads(render(report, "json")), "timeline_svg": svg.timeline(report)}))
        elif kind == "stops_paying":
            import json  # noqa: PLC0415

            from ..reports.load_sweep import render as render_sweep  # noqa: PLC0415 - `stops-paying --format json`
            from .requests import build  # noqa: PLC0415

            sweep = api.stops_paying(build(payload["body"], None, payload.get("store")))
            conn.send(("done", {"result": json.loads(render_sweep(sweep, "json"))}))
        elif kind == "search":
            import os  # noqa: PLC0415
            import tempfile  # noqa: PLC0415

            from ..reports.search import to_dict  # noqa: PLC0415

            from ..core.errors import SpecError  # noqa: PLC0415

            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "search.yaml")
                with open(path, "w") as handle:
                    handle.write(payload["spec"])
                try:
                    result = api.search(path, simulate=payload.get("simulate", True))
                except SpecError as err:  # the server's temporary file is no name of the caller's
                    raise SpecError(err.field, err.problem.replace(path, "the search spec"), err.accepted) from None
            conn.send(("done", {"result": to_dict(result)}))
        else:
            conn.send(("failed", {"error": {"field": "kind", "problem": f"unknown job {kind}",
                                            "accepted": "simulate, stops_paying, search"}}))
    except Exception as err:  # noqa: BLE001 - reported as the job's error, never a traceback
        from ..core.errors import SpecError  # noqa: PLC0415

        if isinstance(err, SpecError):
            conn.send(("failed", {"error": {"field": err.field, "problem": err.problem, "accepted": err.accepted}}))
        else:
            conn.send(("failed", {"error": {"field": None, "problem": f"internal error: {type(err).__name__}",
                                            "accepted": None}}))
    finally:
        conn.close()


@dataclass
class Job:
    id: str
    kind: str
    owner: str
    created: float
    timeout_s: float
    status: str = "queued"
    outcome: dict = field(default_factory=dict)
    finished: float | None = None

    def to_dict(self, with_result: bool = True) -> dict:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "owner": self.owner, "status": self.status,
                               "timeout_s": self.timeout_s,
                               "elapsed_s": round((self.finished or time.time()) - self.created, 3)}
        if with_result:
            out.update(self.outcome)
        return out


class JobRunner:
    def __init__(self, workers: int = 2, timeout_s: float = 300.0):
        self.workers, self.timeout_s = workers, timeout_s
        self.per_owner = max(1, workers - 1)
        self.jobs: dict[str, Job] = {}
        self._processes: dict[str, Any] = {}  # job id -> its running process
        self._stopping = False
        self._lock = threading.Lock()
        self._context = multiprocessing.get_context("spawn")  # no fork of a threaded server

    def running(self, owner: str | None = None) -> int:
        return sum(1 for j in self.jobs.values() if j.status in ("queued", "running") and owner in (None, j.owner))

    def submit(self, kind: str, payload: dict, owner: str) -> Job | str:
        """A new job; or why not: "full" when `workers` jobs already run, "owner" when `owner` already runs
        `per_owner` of them."""
        with self._lock:
            self._forget_old()
            if self._stopping:
                return "stopping"
            if self.running() >= self.workers:
                return "full"
            if self.running(owner) >= self.per_owner:
                return "owner"
            job = Job(secrets.token_hex(8), kind, owner, time.time(), self.timeout_s)
            self.jobs[job.id] = job
        threading.Thread(target=self._watch, args=(job, payload), daemon=True).start()
        return job

    def refusal(self, why: str) -> dict:
        """The error of a refused submission (`submit`'s "full", "owner" or "stopping"), answered with
        refusal_status(why)."""
        if why == "stopping":
            return {"field": "jobs", "problem": "the service is stopping",
                    "accepted": "the same request once the service is back"}
        if why == "owner":
            n = self.per_owner
            problem = f"you already run {n} job{'s' if n > 1 else ''}, the most one user may run at once"
        else:
            problem = f"{self.workers} jobs are already running"
        return {"field": "jobs", "problem": problem, "accepted": "wait for one to finish (GET /api/v1/jobs/ID)"}

    @staticmethod
    def refusal_status(why: str) -> int:
        """The HTTP status of a refused submission, for the API and the UI alike: 503 while the service stops, else
        429 (too many jobs at once)."""
        return 503 if why == "stopping" else 429

    def _watch(self, job: Job, payload: dict) -> None:
        try:
            self._supervise(job, payload)
        except Exception as err:  # noqa: BLE001 - a process that cannot start: the job fails, never stays "running"
            self._finish(job, "failed", {"error": {"field": None, "accepted": None,
                                                   "problem": f"the job could not run ({type(err).__name__})"}})
        finally:
            self._processes.pop(job.id, None)

    def _supervise(self, job: Job, payload: dict) -> None:
        parent, child = self._context.Pipe(duplex=False)
        process = self._context.Process(target=_run, args=(job.kind, payload, child), daemon=True)
        with self._lock:
            if self._stopping:
                raise RuntimeError("the service is stopping")
            if job.finished is not None:  # cancelled before its process started: it never starts
                parent.close()
                child.close()
                return
            job.status = "running"
            self._processes[job.id] = process
        process.start()  # one that starts after shutdown() ends itself once the service is gone (_run: exit_with)
        child.close()
        if parent.poll(job.timeout_s):
            try:
                status, outcome = parent.recv()
            except EOFError:
                status, outcome = "failed", {"error": {"field": None, "problem": "the job's process ended",
                                                        "accepted": None}}
        else:
            status, outcome = "timed_out", {"error": {"field": "timeout", "problem": f"the job ran past "
                                                      f"{job.timeout_s:g} s and was stopped",
                                                      "accepted": "a shorter duration or a smaller search"}}
        if process.is_alive():
            process.kill()
        process.join(5)
        parent.close()
        self._finish(job, status, outcome)

    def _finish(self, job: Job, status: str, outcome: dict) -> None:
        """Record how `job` ended, once: the first to say wins (shutdown() says why a job it stopped ended; its
        watcher, woken by the closed pipe, had overwritten that with "the job's process ended")."""
        with self._lock:
            if job.finished is None:
                job.outcome, job.finished, job.status = outcome, time.time(), status

    def cancel(self, job: Job, by: str) -> bool:
        """End `job` now at `by`'s request: its process killed, its status "cancelled", and its worker (and its owner's
        turn) free at once. A planner who started a long search by mistake had held their one job for the whole
        deadline (300 s by default), unable to run another. False when the job had already ended."""
        with self._lock:
            if job.finished is not None:
                return False
            job.outcome, job.finished, job.status = {"error": {
                "field": "job", "problem": f"cancelled by {by}", "accepted": "the same request again"}}, time.time(), \
                "cancelled"
            process = self._processes.get(job.id)
        if process is not None and process.is_alive():
            process.kill()  # its watcher wakes on the closed pipe; the first to say how the job ended wins (_finish)
        return True

    def shutdown(self) -> None:
        """Stop every running job's process (the service is stopping): a job the service no longer watches would run
        on past its deadline (uvicorn ends the process by re-raising SIGTERM, so no atexit handler kills them)."""
        with self._lock:
            self._stopping = True
            processes = list(self._processes.items())
        for job_id, process in processes:
            if process.is_alive():
                process.kill()
            job = self.jobs.get(job_id)
            if job is not None:
                self._finish(job, "failed", {"error": {"field": None, "problem": "the service stopped while the job ran",
                                                       "accepted": "the same request again"}})
        for _, process in processes:
            process.join(5)

    def _forget_old(self) -> None:
        cutoff = time.time() - KEEP_FINISHED_S
        for key in [k for k, j in self.jobs.items() if j.finished and j.finished < cutoff]:
            del self.jobs[key]

    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)
