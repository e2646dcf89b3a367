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


def run_chunk(job: tuple[Compute, list[Cell]]) -> list[dict]:
    compute, cells = job
    return [evaluate(cell, compute) for cell in cells]
