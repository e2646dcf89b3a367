"""The sweep driver: read the study, skip the cells already written, stream chunks of the rest through an
executor into part files, then write the one sorted table. Memory stays flat: cells are generated lazily, at
most a few chunks are in flight, and each finished chunk goes straight to disk.

Reproducible: a row depends only on its cell (inputs, compute settings, seed from the cell key, the model
version), and the table is sorted by cell key, so 1 worker, N workers and Ray write the same table.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..adapters.executors import make_executor
from ..adapters.results import ResultsFile
from ..core.errors import SpecError
from ..inputs.study import Cell, Study, read_study
from ..reports import sweep as report

MAX_CHUNK = 64
WORKER_MODULE = "specsize.sweep.cell"
# the error of a cell whose worker kept dying (the OOM killer, a lost node): its row says so, and a rerun tries it again
LOST = "worker lost: "


@dataclass
class SweepRun:
    study: Study
    output: Path
    total: int
    skipped: int  # already written by an earlier (interrupted) run
    computed: int = 0
    failed: int = 0  # invalid or error rows computed in this run
    rows: int = 0  # in the final table
    elapsed_s: float = 0.0
    executor: str = ""
    workers: int = 0
    retried: int = 0

    def summary_html(self) -> str:
        names = ["key", "status", "error", "verdict", "speculative", "headroom_worst_case", "simulated", "cost_per_mtok",
                 "price_per_gpu_hour", "speedup",
                 "gpus_per_instance", "spec_slo_attainment", "nospec_slo_attainment", "spec_throughput_tok_s",
                 "nospec_throughput_tok_s", "spec_sustains", "nospec_sustains", "spec_tpot_p50_s", "nospec_tpot_p50_s"]
        names += list(self.study.group_axes()) + list(self.study.input_fields())
        wanted = [n for n, _ in report.columns(self.study) if n in set(names)]
        rows = ResultsFile(self.output, report.columns(self.study)).read_rows(wanted)
        load = self.study.load_column()
        return report.render_html(self.study, rows, self.study.tenant_columns(), load, self.elapsed_s)


def _split(job: tuple) -> list[tuple]:
    """A job `(compute, cells, ...)` of several cells as one job per cell (to find the cell that kills its worker)."""
    return [(job[0], [cell], *job[2:]) for cell in job[1]]


def _lost(job: tuple, why: str) -> list[dict]:
    """The rows of cells whose worker kept dying: status error, the error saying so; a rerun computes them again."""
    cells: list[Cell] = job[1]
    return [report.cell_row(cell, "error", f"{LOST}{why}; rerun the sweep to try it again (with more memory per "
                            "worker: fewer --workers)") for cell in cells]


def _chunks(cells: Iterator[Cell], size: int) -> Iterator[list[Cell]]:
    while True:
        chunk = list(itertools.islice(cells, size))
        if not chunk:
            return
        yield chunk


def chunk_size(total: int, workers: int) -> int:
    """About eight chunks per worker (even progress, little lost to a killed worker), at most MAX_CHUNK."""
    return max(1, min(MAX_CHUNK, math.ceil(total / (8 * workers)))) if total else 1


def check_output(output: str | Path) -> Path:
    """The results table's path: a .parquet file."""
    if Path(output).suffix != ".parquet":
        raise SpecError("output", f"{output or 'an empty path'} is not a .parquet file", "-o RESULTS.parquet")
    return Path(output)


def open_study(study_path: str | Path, output: str | Path) -> tuple[Study, ResultsFile]:
    study = read_study(study_path)
    cols = report.columns(study)
    names = [name for name, _ in cols]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise SpecError(f"axes.{clash[0]}", "an axis name is also a results column", "another axis name")
    check_output(output)
    meta = {"specsize.results_version": report.RESULTS_VERSION, "specsize.study": study.name,
            "specsize.model_version": study.model_version, "specsize.seed": study.seed}
    return study, ResultsFile(output, cols, meta)


def cell_index(study: Study) -> dict[str, int]:
    """{cell key: its index in the cross product}, refusing a study in which two cells are one: a value of an axis
    that, with what base: sets, repeats another value's settings (base `burst_factor: 1.5` beside the values
    `{concurrency: 8}` and `{concurrency: 8, burst_factor: 1.5}`). inputs.study compares an axis's values with each
    other only; here the cells are compared whole. Such cells share a key, are computed once and leave one row: the
    other value's label had vanished from the table (3 cells, 2 rows, exit 0)."""
    index_of: dict[str, int] = {}
    for cell in study.cells():
        first = index_of.setdefault(cell.key, cell.index)
        if first != cell.index:
            raise _one_cell_twice(study, first, cell.index)
    return index_of


def _one_cell_twice(study: Study, first: int, second: int) -> SpecError:
    """The error naming the axis whose two values give one cell (cells at `first` and `second`)."""
    picks = []
    for index in (first, second):
        pick = []
        for axis in reversed(study.axes):  # cells()' order: the last axis varies fastest
            index, value = divmod(index, len(axis.values))
            pick.append(value)
        picks.append(pick[::-1])
    axis, a, b = next((axis, a, b) for axis, a, b in zip(study.axes, *picks) if a != b)
    return SpecError(f"axes.{axis.name}", f"values {axis.labels[a]!r} and {axis.labels[b]!r} give the same cell once "
                     "base: is applied (base: sets what the other value adds): it would be computed once and one of "
                     "them would vanish from the table", "values that differ from each other with base: applied "
                     "(drop the repeat, or take the field out of base:)")


def run(study_path: str | Path, output: str | Path, workers: int | None = None, ray_address: str | None = None,
        chunk: int | None = None, on_start: Callable[[SweepRun], None] | None = None,
        on_chunk: Callable[[int, int], None] | None = None, cell_timeout_s: float | None = None) -> SweepRun:
    """Run (or resume) the study at `study_path` into `output`. `on_chunk(cells, failed)` after each chunk. A cell still
    running after `cell_timeout_s` is stopped and recorded as timed out (cell.run_chunk)."""
    started = time.perf_counter()
    study, results = open_study(study_path, output)
    index_of = cell_index(study)  # before anything is written: a study with one cell twice is refused
    with results.lock():
        return _run(study, results, index_of, started, workers, ray_address, chunk, on_start, on_chunk,
                    cell_timeout_s)


def _run(study: Study, results: ResultsFile, index_of: dict[str, int], started: float, workers: int | None,
         ray_address: str | None, chunk: int | None, on_start: Callable[[SweepRun], None] | None,
         on_chunk: Callable[[int, int], None] | None, cell_timeout_s: float | None = None) -> SweepRun:
    from .cell import TIMED_OUT, run_chunk  # noqa: PLC0415 - the workers import it by name; the driver needs the name

    redo = (LOST, TIMED_OUT)  # rows a rerun computes again: cells whose worker died, cells stopped at their limit
    done = results.done_keys(redo=redo)
    total = study.size
    skipped = sum(1 for key in done if key in index_of)
    executor = make_executor(workers, ray_address, preload=(WORKER_MODULE,))
    sweep = SweepRun(study=study, output=results.output, total=total, skipped=skipped, executor=executor.kind,
                     workers=executor.workers)
    if on_start:
        on_start(sweep)
    size = chunk or chunk_size(total - skipped, executor.workers)
    todo = (cell for cell in study.cells() if cell.key not in done)
    jobs = ((study.compute, cells, cell_timeout_s) for cells in _chunks(todo, size))
    try:
        for rows in executor.map_unordered(run_chunk, jobs, split=_split, lost=_lost):
            results.write_part(rows)
            failed = sum(1 for row in rows if row["status"] != "ok")
            sweep.computed += len(rows)
            sweep.failed += failed
            if on_chunk:
                on_chunk(len(rows), failed)
    finally:
        sweep.retried = executor.retried
        executor.close()
    sweep.rows = results.finish(index_of, partial(report.restated, study=study, index_of=index_of),
                                report.RESTATE_INPUTS, redo=redo)
    sweep.elapsed_s = time.perf_counter() - started
    return sweep
