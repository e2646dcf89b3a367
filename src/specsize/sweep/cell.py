"""One chunk of cells -> their rows. Runs in a worker process (a local pool's or a Ray task's): it calls only
`specsize.api`, and each row depends on nothing but its cell, so any worker gives the same row."""

from __future__ import annotations

from .. import api
from ..core.errors import SpecError
from ..inputs.study import Cell, Compute
from ..reports import sweep as columns


def evaluate(cell: Cell, compute: Compute) -> dict:
    row = columns.cell_row(cell)
    try:
        request = api.load_request(**cell.values)
        result = api.plan(request)
        row.update(columns.plan_terms(result))
        if not compute.speedup:
            for name, _ in columns.PERF:
                row.pop(name, None)
        wanted = ("fits",) if compute.simulate_on == "fits" else ("fits", "thin")
        row["simulated"] = False
        if compute.simulate and result.verdict.verdict in wanted:
            try:
                report = api.simulate(request, duration=compute.duration_s, seed=cell.seed,
                                      no_compare=compute.no_compare)
                row.update(columns.simulation_terms(report, result.deployment.speculative.enabled))
            except SpecError as err:  # planned, but its scenario cannot run (no arrivals): the plan stays
                row["error"] = f"simulation: {err}"
    except SpecError as err:  # the cell's inputs cannot be planned: recorded, the study goes on
        row = columns.cell_row(cell, "invalid", str(err))
    except Exception as err:  # noqa: BLE001 - a bug in one cell must not lose the others; it is reported
        row = columns.cell_row(cell, "error", f"{type(err).__name__}: {err}")
    return row


TIMED_OUT = "timed out: "  # the error of a cell stopped at its time limit (a rerun tries it again)


class CellTimeout(BaseException):
    """A cell ran past its time limit (a BaseException: evaluate's `except Exception` must not make it a bug's row)."""


def run_chunk(job: tuple) -> list[dict]:
    """The rows of a job `(compute, cells)` or `(compute, cells, seconds)`: with `seconds`, a cell still running after
    that long is stopped and recorded as timed out (SIGALRM, where the job runs on its process's main thread, as in the
    local pool's workers; elsewhere the cells run without a limit)."""
    compute, cells = job[0], job[1]
    limit = job[2] if len(job) > 2 else None
    if not limit:
        return [evaluate(cell, compute) for cell in cells]
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return [evaluate(cell, compute) for cell in cells]

    def expire(_signum, _frame):
        raise CellTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    rows = []
    try:
        for cell in cells:
            try:
                signal.setitimer(signal.ITIMER_REAL, limit)
                row = evaluate(cell, compute)
                signal.setitimer(signal.ITIMER_REAL, 0)
            except CellTimeout:
                row = columns.cell_row(cell, "error", f"{TIMED_OUT}the cell ran past --cell-timeout {limit:g} s; a "
                                       "rerun tries it again (with a longer --cell-timeout, or none)")
            rows.append(row)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return rows
