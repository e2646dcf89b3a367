"""`specsize sweep`: a fleet study on a local process pool or a Ray cluster. A shell: the driver (`specsize.sweep`)
runs the cells through `specsize.api`; this module parses the flags, shows progress and writes the summary."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .options import finite
from .output import write_file


def _progress():
    """A rich progress bar on stderr: cells done, rate, ETA, failures."""
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,  # noqa: PLC0415
                               TimeElapsedColumn, TimeRemainingColumn)

    return Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("cells"),
                    TextColumn("{task.fields[rate]:>8.1f} cells/s"), TextColumn("ETA"), TimeRemainingColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[failed]} failed"),
                    console=Console(stderr=True), transient=False)


def _check_places(output: Path, html: Path) -> None:
    """Refused before the run, not after it: a folder, pipe or socket at -o or --html (reading a pipe to see
    whether it is a sweep's would block; --html may be a character device such as /dev/null, with --force), a
    file where the table's parts folder goes, an HTML summary in a folder that does not exist (the table's own
    folder is made by the run), or a folder this user cannot write."""
    import os  # noqa: PLC0415

    from ..adapters.results import ResultsFile  # noqa: PLC0415
    from ..core.errors import SpecError  # noqa: PLC0415

    for name, path, device_ok in (("output", output, False), ("html", html, True)):
        if path.exists() and not (path.is_file() or (device_ok and path.is_char_device())):
            raise SpecError(name, f"{path} is not a regular file (a folder, pipe, socket or device)",
                            "a path to a regular file or a new one")
        if path.parent.is_dir() and not os.access(path.parent, os.W_OK | os.X_OK):
            raise SpecError(name, f"cannot write in folder {path.parent}", "a path in a folder you can write")
    parts = ResultsFile(output, ()).parts
    if parts.exists() and not parts.is_dir():
        raise SpecError("output", f"{parts} is in the way: the run keeps the table's parts in a folder of that name",
                        "another -o, or move that file")
    if not html.parent.is_dir() and html.parent.resolve() != output.parent.resolve():
        raise SpecError("html", f"folder {html.parent} does not exist", "a path in an existing folder")


def _check_targets(study: Path, output: Path, html: Path, force: bool) -> None:
    """Nothing the user wrote is replaced without --force: -o must be new or this study's own table (a rerun
    resumes it), --html new or a summary a sweep wrote; neither may be the study file, a file it reads or the
    other output."""
    from ..adapters.results import ResultsFile  # noqa: PLC0415
    from ..core.errors import SpecError  # noqa: PLC0415
    from ..inputs.load import resolved  # noqa: PLC0415

    # each path as it resolves, or a one-line error naming it where its links go round in a loop (had been exit 4)
    at = {name: resolved(path, name) for name, path in (("study", study), ("output", output), ("html", html))}
    for name, path in (("output", output), ("html", html)):
        if at[name] == at["study"]:
            raise SpecError(name, f"{path} is the study file", "a path other than the study's")
    _check_places(output, html)
    if at["output"] == at["html"]:
        raise SpecError("html", f"{html} is also the results table (-o)", "another path for the HTML summary")
    if not (output.exists() or html.exists() or ResultsFile(output, ()).parts.is_dir()):
        return
    from ..inputs.study import read_study  # noqa: PLC0415

    read = read_study(study)
    reads = {Path(p).resolve() for p in read.digests}
    reads |= {p / "config.json" for p in reads if p.is_dir()}  # a model folder: its config
    for name, path in (("output", output), ("html", html)):  # never a file the study reads (a trace), --force or not
        if path.exists() and path.resolve() in reads:
            raise SpecError(name, f"{path} is a file the study reads", "a path of its own for the output")
    if not force:
        _check_ours(read.name, output, html)


def _check_ours(study_name: str, output: Path, html: Path) -> None:
    """An existing -o must be the table of an earlier run of this study (resuming another study's table would drop
    all its rows), an existing --html a summary a sweep wrote."""
    from ..adapters.results import ResultsFile  # noqa: PLC0415
    from ..core.errors import SpecError  # noqa: PLC0415
    from ..reports.sweep import TITLE_MARK  # noqa: PLC0415 - the mark of a summary a sweep wrote

    table = ResultsFile(output, ())
    if table.foreign():
        raise SpecError("output", f"{output} exists and is not a sweep's results table",
                        "a new path, the table of an earlier run of this sweep (it resumes), or --force")
    theirs = table.study_name()
    if theirs is not None and theirs != study_name:
        raise SpecError("output", f"{output} is the results table of study {theirs!r}, not of {study_name!r}",
                        "a new path, the table of an earlier run of this study (it resumes), or --force")
    # the cells an interrupted run saved beside a table not yet written are that study's: another study's run had
    # resumed none of them and removed them all when it wrote its table
    interrupted = table.parts_study_name() if theirs is None else None
    if interrupted is not None and interrupted != study_name:
        raise SpecError("output", f"{table.parts} holds the cells of an interrupted run of study {interrupted!r}, not "
                        f"of {study_name!r}", "a new path, the study that run was of (it resumes), or --force")
    if html.exists():
        try:
            with open(html, "rb") as handle:
                ours = TITLE_MARK.encode() in handle.read(4096)
        except OSError:
            ours = False
        if not ours:
            raise SpecError("html", f"{html} exists and is not a sweep's HTML summary", "a new path, or --force")


def _unwritable(err: OSError, output: str, html: str) -> Exception:
    """An OS error on the way to -o or --html as bad input naming the flag (a full disk, a read-only folder)."""
    from ..core.errors import SpecError  # noqa: PLC0415

    where = str(err.filename or output)
    name = "html" if where == html else "output"
    return SpecError(name, f"cannot write {where}: {err.strerror or err}", "a writable folder with room for the results")


@click.command()
@click.argument("study_file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The results table (Parquet, one row per cell). Rerunning resumes an interrupted sweep.")
@click.option("--workers", type=click.IntRange(1, 4096), help="Local worker processes (default: the CPUs this process "
              "may use, a container's CPU limit included).")
@click.option("--ray", "ray_address", metavar="auto|ADDRESS",
              help="Run on a Ray cluster: HOST:PORT of `ray start --head`, ray://HOST:10001, or auto.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="The HTML summary (default: RESULTS.html beside the table).")
@click.option("--chunk-size", type=click.IntRange(1, 100_000), help="Cells per task (default: about 8 per worker, "
              "at most 64).")
@click.option("--cell-timeout", "cell_timeout", type=click.FloatRange(0, 1e6, min_open=True), metavar="SECONDS",
              callback=lambda _ctx, _param, value: finite("cell_timeout", value),  # FloatRange lets nan through
              help="Stop a cell still running after this long and record it as timed out (a rerun tries it again); "
              "local workers only (default: no limit).")
@click.option("--force", is_flag=True, help="Replace an existing file at -o or --html that is not this sweep's own "
              "table or summary.")
def sweep(study_file: str, output: str, workers: int | None, ray_address: str | None, html_path: str | None,
          chunk_size: int | None, cell_timeout: float | None, force: bool) -> None:
    """Plan (and simulate where it fits) every cell of a fleet study: models x drafters x k x GPUs x TP x
    quantization x KV dtype x engines x workloads x load x bursts.

    Writes one Parquet row per cell (inputs, verdict, headroom, memory terms, TTFT/TPOT percentiles,
    throughput, preemptions, cost per million tokens; invalid cells with their error) and an HTML summary.
    Interrupted (Ctrl-C, a kill, a lost worker)? Run the same command again: finished cells are kept. The same
    study gives the same table on 1 worker, N workers or Ray. Exit 0 when the table is written, 2 on a bad
    study, 130 when interrupted. See docs/sweep.md.
    """
    import time  # noqa: PLC0415

    from ..core.errors import SpecError  # noqa: PLC0415
    from ..sweep import driver  # noqa: PLC0415

    if workers is not None and ray_address is not None:
        raise SpecError("workers", "--workers and --ray both given", "one executor: --workers N or --ray ADDRESS")
    if cell_timeout is not None and ray_address is not None:  # a Ray task may run off its worker's main thread
        raise SpecError("cell_timeout", "--cell-timeout is not applied to Ray tasks", "--cell-timeout with local "
                        "workers (--workers N), or Ray without it")
    driver.check_output(output)
    html_target = html_path or str(Path(output).with_suffix(".html"))
    try:
        _check_targets(Path(study_file), Path(output), Path(html_target), force)
    except OSError as err:  # a path that cannot be looked at (a folder this user may not enter)
        raise _unwritable(err, output, html_target) from None
    bar = _progress()
    state: dict = {}

    def start(run) -> None:
        bar.start()
        state["started"] = True
        state["t0"] = time.perf_counter()
        state["task"] = bar.add_task("sweep", total=run.total, completed=run.skipped, rate=0.0, failed=0)
        if run.skipped:
            click.echo(f"specsize: resuming: {run.skipped:,} of {run.total:,} cells already done", err=True)
        state["run"] = run

    def chunk(cells: int, failed: int) -> None:
        run = state["run"]
        rate = run.computed / max(time.perf_counter() - state["t0"], 1e-9)
        bar.update(state["task"], advance=cells, rate=rate, failed=run.failed)

    def stop() -> None:
        if state.pop("started", False):  # a bar never started prints nothing (a bad study is one line)
            bar.stop()

    import signal  # noqa: PLC0415

    def terminated(signum, _frame) -> None:  # SIGTERM (Kubernetes, systemd, timeout) stops the run as Ctrl-C does:
        state["signal"] = signum  # the workers stopped, the message, no half-written table; it had ended the driver
        raise KeyboardInterrupt  # at once, silent, its lock file left and the pool's semaphores reported leaked

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        run = driver.run(study_file, output, workers=workers, ray_address=ray_address, chunk=chunk_size,
                         on_start=start, on_chunk=chunk, cell_timeout_s=cell_timeout)
    except OSError as err:  # the table's folder, lock or parts cannot be written (read-only, full, in the way)
        raise _unwritable(err, output, html_target) from None
    except KeyboardInterrupt:
        stop()
        done = state["run"].computed if "run" in state else 0
        how = "terminated" if state.get("signal") == signal.SIGTERM else "interrupted"
        click.echo(f"specsize: {how} after {done:,} new cells; they are saved: run the same command to resume",
                   err=True)
        sys.exit(128 + signal.SIGTERM if how == "terminated" else 130)
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop()
    written = write_file(html_target, lambda temporary: temporary.write_text(run.summary_html()), True, "html")
    click.echo(f"specsize: wrote {written}", err=True)
    rate = run.computed / run.elapsed_s if run.elapsed_s else 0.0
    click.echo(f"specsize: wrote {output}: {run.rows:,} cells ({run.computed:,} computed in {run.elapsed_s:.1f} s, "
               f"{rate:,.1f} cells/s on {run.workers} {run.executor} worker(s); {run.skipped:,} resumed; "
               f"{run.failed:,} invalid or failed)", err=True)
    sys.exit(0)
