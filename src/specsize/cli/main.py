"""`specsize`: a command table over the public API. Each command builds a request from its flags (options
generated from the field table), calls `specsize.api`, renders with `specsize.reports`, and exits.

Exit codes (docs/cli.md): `check` 0 fits, 1 thin, 3 does_not_fit; `plan` and `report` 0 once written (the
verdict with --fail-on); `simulate` and `check-live` 0 / 1 for holds / does not hold, `search` 0 / 3 for found /
none; 2 bad input, 4 internal error everywhere.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from types import ModuleType

import click

from .. import __version__
from ..inputs.fields import DEPLOYMENT, WORKLOAD
from ..engines.emit import EMITTERS
from .options import command_options, finite as _finite, option_for, request_from, request_options
from .output import check_targets, write_output, write_series
from .sweep import sweep as sweep_command

EXIT_FOR_VERDICT = {"fits": 0, "thin": 1, "does_not_fit": 3}
FAIL_ON = ("never", "thin", "does_not_fit")


def verdict_exit(verdict: str, fail_on: str) -> int:
    """`plan` and `report` exit 0 once they have produced their output; `--fail-on thin` turns a thin plan into
    exit 1 and one that does not fit into 3, `--fail-on does_not_fit` only the latter. `check` is the gate."""
    if fail_on == "never" or (fail_on == "does_not_fit" and verdict == "thin"):
        return 0
    return EXIT_FOR_VERDICT[verdict]


def _database(_ctx, param, value: str | None) -> str | None:
    """--store / --db: a named pipe (or socket, device) there is refused, not opened by SQLite, which waits on it."""
    from ..inputs.load import database_path  # noqa: PLC0415

    return database_path(value, param.name if param.name != "db_url" else "db")


# what `speedup` prices is set by --batch-size, -k and --context-len: its flags of a workload (shared with `plan` and
# `simulate`, as a deployment file is), a headroom policy, a TPOT target or an acceptance spread (which only a
# simulation draws from) change nothing in its table, and had been taken without a word


def _refuse_unsimulated(request, command: str, default: bool) -> None:
    """`plan`/`check` (and `report --no-simulate`) run no simulation: a --duration or --seed typed for one that does
    not run would be dropped, so it is refused (as `plan --simulate` refuses a scenario it cannot take). The command
    line's rule only: the API's callers (a sweep's cells) pass one request to several computations."""
    from ..core.errors import SpecError  # noqa: PLC0415

    if request.simulates(default):
        return
    for name in ("duration", "seed"):
        if request.source_of(name) == "override":
            raise SpecError(name, f"sets the burst simulation, and {command} runs none here",
                            f"--simulate with it ({command} --simulate --{name} ...), or leave it out")


# what `simulate` runs: a trace replays its own arrivals and lengths, for as long as they last; a closed loop sends
# --num-requests as its clients' answers come back (planner.scenario.run_simulation); a --rate given is the arrival
# rate, where --concurrency only sets one by Little's law; a lengths file's prompts are resampled with the images
# every request carries added, as generated prompts take them (api.simulate). `simulate --trace T --duration 60` had
# replayed the whole trace and echoed duration_s 60, `--client-concurrency 8 --burst-factor 3` ran 8 clients without
# a burst: the same JSON, byte for byte, without a word; so had --percentile, which no simulation reads. The scenario's own --duration is refused, as
# `plan --duration` is; the workload's flags, shared with plan as a deployment file is, stay and a note names them,
# as speedup's do (api._unread_note).
TRACE_READS_NOT = ("concurrency", "burst_factor", "samples_file", "prompt_tokens", "output_tokens",
                   "images_per_request", "image_tokens")
CLOSED_LOOP_READS_NOT = ("concurrency", "burst_factor")
LENGTHS_FILE_GIVES = ("samples_file", "prompt_tokens", "output_tokens")


def _unread_scenario(request, command: str) -> tuple[str, ...]:
    """The notes naming the workload's flags the scenario of `simulate` (or `stops-paying`) does not read; a
    --duration it does not read is refused (exit 2). The command line's rule only: a deployment file's workload
    describes the deployment (plan reads it), and a sweep gives every cell, a trace's too, one duration."""
    from ..core.errors import SpecError  # noqa: PLC0415

    if command == "stops-paying" and (request.trace is not None or request.client_concurrency is not None):
        return ()  # its load sweep refuses both itself (api.stops_paying)
    unread: list[str] = []
    why = ""
    if request.trace is not None or request.client_concurrency is not None:
        trace = request.trace is not None
        why = ("a trace sets the arrivals, their number and lengths itself" if trace else
               "a closed loop sends --num-requests requests, each when an answer comes back")
        if request.source_of("duration") == "override":
            raise SpecError("duration", f"is not read by {command} here: {why}",
                            "either --trace or a duration" if trace else
                            "--num-requests N for the closed loop's length, or an open loop with --duration")
        unread = [name for name in (TRACE_READS_NOT if trace else CLOSED_LOOP_READS_NOT)
                  if request.source_of(name) == "override"]
    elif request.rate is not None and request.source_of("concurrency") == "override":
        unread, why = ["concurrency"], "--rate sets the arrival rate (concurrency derives one only without it)"
    notes = [f"{', '.join(unread)} not used by {command}: {why}"] if unread else []
    if request.trace is None and request.lengths_file is not None and (
            request.rate is not None or request.client_concurrency is not None):
        # the workload's lengths only set the rate of Little's law, and a rate is given or none is needed
        lengths = [name for name in LENGTHS_FILE_GIVES if request.source_of(name) == "override"]
        lengths = lengths[:1] if lengths[:1] == ["samples_file"] else lengths  # its lengths are its own to name
        if lengths:
            notes.append(f"{', '.join(lengths)} not used by {command}: the lengths file gives each request's "
                         "lengths, and " + ("--rate the arrivals" if request.rate is not None else
                                            "the closed loop's clients their pace"))
    if request.source_of("percentile") == "override":  # the same JSON, byte for byte, at p50 and at max
        notes.append(f"percentile not used by {command}: it picks the envelope's request shape, which plan sizes; a "
                     "simulation draws every request's lengths from the whole distribution")
    return tuple(notes)


ACCEPTANCE_FLAGS = ("acceptance_rate", "mean_accepted_length", "measured_at_k", "acceptance_spread",
                    "acceptance_from_store")


def _unread_acceptance(request, report) -> tuple[str, ...]:
    """A trace's acceptance_rate column gives every request its own (planner.scenario.run_simulation reads no other):
    `--acceptance-rate 0.9` beside it had run at the column's 0.5 without a word."""
    if report.scenario is None or report.scenario.acceptance_source != "trace":
        return ()
    given = [name for name in ACCEPTANCE_FLAGS if request.source_of(name) == "override"]
    return (f"{', '.join(given)} not used by simulate: the trace's acceptance_rate column gives each request its "
            "own",) if given else ()


def fail_on_option(func):
    return click.option("--fail-on", type=click.Choice(list(FAIL_ON)), default="never", show_default=True,
                        help="Exit non-zero on a verdict this bad or worse (1 thin, 3 does_not_fit); "
                             "`specsize check` is the pipeline gate.")(func)
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 4


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    click.echo(f"specsize: error: {message}", err=True)
    sys.exit(code)


# the format an output file's name says it holds, where --format is not given (`plan -o plan.json` had written the text
# report into plan.json, which `check-live --plan plan.json` then refused as "not JSON")
FORMAT_OF_SUFFIX = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
                    ".txt": "text"}


def _format_of_output(formats: tuple[str, ...], kw: dict) -> None:
    """--format from -o's suffix when the command line gives no --format and the command writes that format (a name
    without a known suffix, or one the command does not write, keeps the default). --format given always wins."""
    output = kw.get("output")
    if not output or output == "-" or kw.get("emit"):  # --emit prints a shell command, whatever the file is called
        return
    from pathlib import Path  # noqa: PLC0415

    named = FORMAT_OF_SUFFIX.get(Path(output).suffix.lower())
    if named in formats and click.get_current_context().get_parameter_source("fmt") in (
            click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP):
        kw["fmt"] = named


def output_options(formats: tuple[str, ...], default: str | None = None, output_help: str = "Write to FILE "
                   "instead of stdout.", format_from_output: bool = True):
    def decorate(command):
        @functools.wraps(command)
        def func(*args, **kw):
            check_targets(kw.get("force", False), output=kw.get("output"))  # before the work: none of it lost to a path
            if format_from_output:
                _format_of_output(formats, kw)
            return command(*args, **kw)

        func = click.option("--force", is_flag=True, help="Replace an existing output file.")(func)
        func = click.option("-o", "--output", "output", type=click.Path(dir_okay=False), help=output_help)(func)
        return click.option("--format", "fmt", type=click.Choice(list(formats)), default=default or formats[0],
                            show_default=True, help="Default: the one -o's name says (.json, .md, .html, .txt) "
                            "where the command writes it." if format_from_output else None)(func)
    return decorate


def _notes(notes) -> None:
    for note in notes:
        click.echo(f"specsize: note: {note}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="specsize")
def cli() -> None:
    """Will a speculative-decoding deployment fit, with headroom, at the load you expect?

    Sizes target + draft weights, the KV cache of both, activations, CUDA graphs and engine overhead per GPU,
    the way the serving engine accounts for them, against a worst-case workload envelope.
    """


@cli.command()
@command_options("plan")
@output_options(("text", "json", "markdown"))
@click.option("--emit", type=click.Choice(list(EMITTERS)),
              help="Print the engine's launch command (and vLLM's YAML config) for this plan instead of the report.")
@fail_on_option
def plan(fmt: str, output: str | None, force: bool, emit: str | None, fail_on: str, **kw) -> None:
    """Plan a deployment: per-GPU memory, KV capacity, envelope, verdict, fixes, placement, engine flags.

    With no arguments it plans the embedded default (Llama-3.1-70B-Instruct with a Llama-3.2-1B-Instruct
    draft on 4 x H100). Flags override the DEPLOYMENT_FILE. Exit code: 0 once the plan is printed (the verdict
    is in it), 2 bad input; with --fail-on thin: 1 thin, 3 does not fit. `specsize check` is the gate.
    """
    from .. import api  # noqa: PLC0415
    from ..core.errors import SpecError  # noqa: PLC0415

    if emit and fmt != "text":
        raise SpecError("emit", f"--emit prints a shell command, not {fmt}", "--emit without --format, or "
                        "--format json (its engine_commands hold the commands)")
    request = request_from(kw)
    _refuse_unsimulated(request, "plan", False)
    result = api.plan(request)
    if emit and emit != result.profile.engine:  # the verdict printed beside it would be the other engine's
        raise SpecError("emit", f"a {emit} command for a plan of engine {result.profile.engine}",
                        f"--emit {result.profile.engine}, or --engine {emit} to plan for {emit}")
    if emit:
        command = next((c for c in result.commands if c.engine == emit), None)
        if command is None:
            from ..engines.emit import supported  # noqa: PLC0415

            raise SpecError("emit", f"{emit} cannot serve method {result.deployment.speculative.method}",
                            f"a method {emit} supports: {supported(emit)}")
        # on stderr: what to check in the command (flags an older release names otherwise, or lacks)
        _notes(result.notes + result.warnings)
        text = f"# {command.engine} {command.versions}\n{command.shell}\n"
        write_output(text + ("\n" + command.config_yaml if command.config_yaml else ""), output, force)
        click.echo(f"specsize: verdict {result.verdict.verdict}: {result.verdict.breaks_first}", err=True)
        sys.exit(verdict_exit(result.verdict.verdict, fail_on))
    _notes(result.notes)
    renderer: ModuleType  # one of the reports modules, imported only when chosen
    if fmt == "json":
        from ..reports import jsonout as renderer  # noqa: PLC0415
    elif fmt == "markdown":
        from ..reports import markdown as renderer  # noqa: PLC0415
    else:
        from ..reports import text as renderer  # noqa: PLC0415
    write_output(renderer.render(result), output, force)
    sys.exit(verdict_exit(result.verdict.verdict, fail_on))


@cli.command()
@command_options("speedup")
@output_options(("text", "json", "markdown"))
def speedup(fmt: str, output: str | None, force: bool, **kw) -> None:
    """What speculation is worth at each batch size and k: TPOT, throughput, speed-up, crossover, best k.

    Takes the deployment flags of `plan`; acceptance must be given (--acceptance-rate or
    --mean-accepted-length). speed-up = TPOT without speculation / TPOT with it, at the same batch size.
    """
    from .. import api  # noqa: PLC0415
    from ..reports import speedup as renderer  # noqa: PLC0415

    request = request_from(kw, k_list=True)
    result = api.speedup(request)
    write_output(renderer.render(result, fmt), output, force)
    sys.exit(0)


def _progress_callback():
    """A rich progress bar on stderr when it is a terminal; nothing otherwise (logs stay clean)."""
    if not sys.stderr.isatty():
        return None, None
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress  # noqa: PLC0415

    bar = Progress(console=Console(stderr=True), transient=True)
    task = bar.add_task("simulating", total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, update


def _with_progress(call):
    """`call(update)` with a progress bar on stderr while it runs (none when stderr is not a terminal)."""
    bar, update = _progress_callback()
    if bar is not None:
        bar.start()
    try:
        return call(update)
    finally:
        if bar is not None:
            bar.stop()


@cli.command()
@command_options("simulate")
@output_options(("text", "json"))
@click.option("--series", "series_path", type=click.Path(dir_okay=False),
              help="Write the time series (KV occupancy, running, waiting, preemptions) to CSV or Parquet.")
def simulate(fmt: str, output: str | None, force: bool, series_path: str | None, **kw) -> None:
    """Replay steady state and bursts on a continuous-batching, paged-KV server, spec vs no-spec.

    Without --rate the scenario is the deployment's envelope: the rate that keeps `concurrency` requests in
    flight, x burst_factor for a sixth of the run. With --rate only a burst you ask for applies. The
    scenario used, and where each part came from, heads the output. Exit code 0 when the deployment
    sustains the load without cache thrashing, scheduling instability or queue growth (docs/simulation.md),
    1 when it does not, 2 on bad input.
    """
    from .. import api  # noqa: PLC0415
    from ..reports import simulation as renderer  # noqa: PLC0415

    request = request_from(kw)
    unread = _unread_scenario(request, "simulate")
    check_targets(force, output=output, series=series_path)  # before the run: none of it is lost to a bad path
    report = _with_progress(lambda update: api.simulate(request, progress=update))
    unread += _unread_acceptance(request, report)
    if unread:
        from dataclasses import replace  # noqa: PLC0415

        report = replace(report, notes=report.notes + unread)
    _notes(report.notes)
    if series_path:  # first: a series that cannot be written is exit 2 with nothing on stdout (the JSON contract)
        write_series(report.spec.series, series_path, force)
    write_output(renderer.render(report, fmt), output, force)
    sys.exit(0 if report.spec.sustains else 1)


@cli.command("stops-paying")
@command_options("stops-paying")
@output_options(("text", "json"))
def stops_paying(fmt: str, output: str | None, force: bool, **kw) -> None:
    """Where speculation stops paying as the load grows: `simulate` spec vs no-spec at 1/8 to 8 times the
    rate (--rate, or the one that keeps `concurrency` in flight), bisecting the first step where the mean
    end-to-end latency with speculation reaches the latency without it (docs/simulation.md). Each rate runs
    the scenario's --duration (default 300 s: a sweep of 10 rates x 2 servers; --duration 60 for a quick look).

    Exit code 0 once computed, 2 on bad input.
    """
    from .. import api  # noqa: PLC0415
    from ..reports import load_sweep as renderer  # noqa: PLC0415

    request = request_from(kw)
    unread = _unread_scenario(request, "stops-paying")
    sweep = _with_progress(lambda update: api.stops_paying(request, progress=update))
    _notes(unread)
    write_output(renderer.render(sweep, fmt), output, force)
    sys.exit(0)


@cli.command()
@command_options("report")
@output_options(("html", "markdown"), output_help="Write to FILE (default: stdout for Markdown; HTML needs a file).")
@fail_on_option
def report(fmt: str, output: str | None, force: bool, fail_on: str, **kw) -> None:
    """A report a reviewer can read: verdict, memory per GPU, KV demand vs capacity, speed-up, the burst
    simulation (--no-simulate skips it), recommendations, the engine command and the standards mapping, with
    inline SVG figures.

    Exit code as `plan`: 0 once written, 2 bad input; --fail-on as `plan`.
    """
    from .. import api  # noqa: PLC0415

    if fmt == "html" and (not output or output == "-"):
        from ..core.errors import SpecError  # noqa: PLC0415

        raise SpecError("output", "an HTML report needs a file", "-o report.html")
    request = request_from(kw)
    _refuse_unsimulated(request, "report", True)
    data = api.report(request)
    renderer: ModuleType  # one of the reports modules, imported only when chosen
    if fmt == "html":
        from ..reports import html as renderer  # noqa: PLC0415
    else:
        from ..reports import report_markdown as renderer  # noqa: PLC0415
    write_output(renderer.render(data), output, force)
    sys.exit(verdict_exit(data.result.verdict.verdict, fail_on))


@cli.command()
@request_options(DEPLOYMENT, WORKLOAD)
@click.option("--batch-size", "measure_batch", type=click.IntRange(1, 4096), default=2, show_default=True,
              help="Sequences B in the KV cache.")
@click.option("--prompt-len", type=click.IntRange(1, 1 << 20),
              help="Prompt tokens per sequence (default: the workload's p50, at most 512).")
@click.option("--weights", type=click.Choice(["random", "local"]), default="random", show_default=True,
              help="Random weights from the config, or the real weights of a local model directory.")
@click.option("--prompts", type=click.Path(dir_okay=False),
              help="JSONL of prompts ({'prompt_ids': [...]} or {'prompt': '...'}) to measure acceptance (local weights).")
@click.option("--max-new-tokens", type=click.IntRange(1, 1 << 16), default=64, show_default=True)
@click.option("--temperature", type=click.FloatRange(0, 100), default=1.0, show_default=True,
              callback=lambda _ctx, _param, value: _finite("temperature", value))
@click.option("--record", metavar="TAG", help="Record measured acceptance and footprint in the calibration store.")
@click.option("--store", type=click.Path(dir_okay=False), callback=_database,
              help="Calibration store (SQLite) path.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def measure(measure_batch: int, prompt_len: int | None, weights: str, prompts: str | None, max_new_tokens: int,
            temperature: float, record: str | None, store: str | None, fmt: str, **kw) -> None:
    """Build the target and drafter with PyTorch and measure weights, KV cache and activations against the
    prediction; with real weights and --prompts, measure the pair's acceptance (greedy and sampled).

    Needs `pip install 'specsize[measure]'`. CUDA when present, else CPU.
    """
    from ..measure.api import measure as run  # noqa: PLC0415
    from ..reports import measure as renderer  # noqa: PLC0415

    request = request_from(kw)
    result, prompt, k = run(request, batch_size=measure_batch, prompt_len=prompt_len, weights=weights,
                            prompts=prompts, max_new_tokens=max_new_tokens, temperature=temperature, record=record,
                            store=store)
    click.echo(renderer.render(result, measure_batch, prompt, k, fmt), nl=False)
    sys.exit(0)


@cli.command("check-live")
@click.option("--metrics", "metrics_source", help="A vLLM or SGLang server's /metrics URL, or a file holding its text.")
@click.option("--log", "log_file", type=click.Path(dir_okay=False), help="The server's start-up log.")
@click.option("--plan", "plan_file", required=True, type=click.Path(dir_okay=False),
              help="The plan to hold reality against (specsize plan --format json -o plan.json).")
@click.option("--record", metavar="TAG", help="Also record the observation in the calibration store under TAG.")
@click.option("--store", type=click.Path(dir_okay=False), callback=_database,
              help="Calibration store (SQLite) path.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def check_live(metrics_source: str | None, log_file: str | None, plan_file: str, record: str | None,
               store: str | None, fmt: str) -> None:
    """Hold a running vLLM (or SGLang) server against a saved plan: KV capacity and usage, preemptions, acceptance.

    Exit 0 when reality keeps the plan's verdict, 1 when it changes it, 2 on bad input.
    """
    from .. import api  # noqa: PLC0415
    from ..reports import live as renderer  # noqa: PLC0415

    # --record "" had recorded nothing without a word and --record " " a row under a blank tag: refused before the
    # server is read, as the service's POST /api/v1/check-live refuses them (and a tag no store takes: check_tag)
    if record is not None:
        from ..adapters.store import check_tag  # noqa: PLC0415

        check_tag(record, "record")
    result = api.check_live(plan_file, metrics_source, log_file)
    if record is not None:
        api.record_live(result, record, store, f"check-live {metrics_source}")
    click.echo(renderer.render(result, fmt), nl=False)
    sys.exit(1 if result.verdict_changes else 0)


@cli.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
@output_options(("text", "json"))
@click.option("--no-simulate", is_flag=True, help="Screen only; do not simulate the finalists.")
def search(spec_file: str, fmt: str, output: str | None, force: bool, no_simulate: bool) -> None:
    """Search GPU type x count x TP x PP x replicas x drafter x k x KV dtype x max_num_seqs against an SLO.

    Prints the cheapest configuration that meets the SLO with headroom (confirmed by simulation), the
    Pareto front of cost vs headroom vs throughput, and why each rejected family fails. Exit 0 when a
    configuration meets the SLO with headroom, 3 when none does, 2 on bad input.
    """
    from .. import api  # noqa: PLC0415
    from ..inputs.load import count_reads, will_read  # noqa: PLC0415
    from ..reports import search as renderer  # noqa: PLC0415

    # the spec and what it reads (its samples file, a model beside it) are never replaced by the output, --force or
    # not, as a plan's inputs are: `search spec.yaml -o spec.yaml --force` had written the results over the spec
    count_reads(True)
    will_read({"search_spec": spec_file})
    result = api.search(spec_file, simulate=not no_simulate)
    write_output(renderer.render(result, fmt), output, force)
    sys.exit(0 if result.cheapest is not None else 3)


@cli.command()
@command_options("check")
@output_options(("text", "json"), output_help="Write the JSON to FILE.", format_from_output=False)
def check(fmt: str, output: str | None, force: bool, **kw) -> None:
    """Gate for deployment pipelines: exit 0 fits, 1 thin, 3 does not fit, 2 bad input.

    Prints one line (text) or the plan's JSON; `-o FILE` keeps the JSON for the pipeline either way.
    """
    from .. import api  # noqa: PLC0415
    from ..reports import jsonout  # noqa: PLC0415

    if not kw.get("deployment_file"):
        from ..core.errors import SpecError  # noqa: PLC0415

        raise SpecError("deployment", "check needs a deployment file", "specsize check DEPLOYMENT.yaml")
    request = request_from(kw)
    _refuse_unsimulated(request, "check", False)
    result = api.plan(request)
    document = jsonout.render(result)
    if output:
        write_output(document, output, force)
    if fmt == "json":
        sys.stdout.write(document)
    else:
        from ..core.envelope import headroom_text, policy_text  # noqa: PLC0415

        v = result.verdict
        click.echo(f"{v.verdict}: worst-case headroom {headroom_text(v.worst_case.headroom_fraction, v.headroom_policy)} "
                   f"(policy {policy_text(v.headroom_policy)}); {v.breaks_first}")
    sys.exit(EXIT_FOR_VERDICT[result.verdict.verdict])


@cli.group(invoke_without_command=True)
@click.option("--store", type=click.Path(dir_okay=False), callback=_database,
              help="Calibration store (SQLite) path.")
@click.option("--kind", type=click.Choice(["acceptance", "footprint", "live"]))
@click.option("--tag")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def calibrations(ctx, store: str | None, kind: str | None, tag: str | None, fmt: str) -> None:
    """List what the calibration store holds (measured acceptance, footprints, live observations)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = {"store": store}
        return
    from pathlib import Path  # noqa: PLC0415

    from ..adapters.store import POSTGRESQL, Store, default_path, named_store  # noqa: PLC0415
    from ..reports import listings  # noqa: PLC0415

    postgres = str(named_store(store) or "").startswith(POSTGRESQL)  # the service's database (docs/service.md)
    path = Path(store) if store and not postgres else default_path()
    if not (postgres or path.exists() or store or os.environ.get("SPECSIZE_STORE")):
        click.echo(listings.calibrations([], path, fmt), nl=False)  # the default one: none kept yet
        return
    with Store(store, create=False) as s:  # listing reads: a mistyped path must not create a store (nor its folders)
        rows = s.list(kind=kind, tag=tag)
    click.echo(listings.calibrations(rows, "the PostgreSQL store" if postgres else path, fmt), nl=False)


@calibrations.command("add")
@click.option("--tag", required=True)
@click.option("--target")
@click.option("--draft")
@option_for("method")
@click.option("-k", "--num-speculative-tokens", "k", type=click.IntRange(1, 64))
@option_for("acceptance_rate")
@option_for("mean_accepted_length")
@click.option("--source", required=True, help="Where the figure comes from (a benchmark run, a dashboard, ...).")
@click.pass_context
def calibrations_add(ctx, tag, target, draft, method, k, acceptance_rate, mean_accepted_length, source) -> None:
    """Record a measured acceptance by hand (a new row; nothing is overwritten)."""
    from ..adapters.store import Store  # noqa: PLC0415
    from ..core.errors import SpecError  # noqa: PLC0415
    from ..core.speculation import Acceptance  # noqa: PLC0415
    from ..inputs.load import validated  # noqa: PLC0415

    from ..adapters.store import check_tag  # noqa: PLC0415

    check_tag(tag)  # a blank one had been recorded, a row no one can name
    if not source.strip():
        raise SpecError("source", "must not be blank", "where the figure comes from (a benchmark run, a dashboard, ...)")
    method = validated("method", method)
    if method == "none":  # an acceptance of no drafter: no plan reads it (a plan without a method has none)
        raise SpecError("method", "none drafts nothing, so it has no acceptance to record",
                        "draft_model, eagle, eagle3, mtp, medusa, ngram, or no --method")
    if method:  # as plan: n-gram and MTP take no draft model (the row would match no plan)
        from ..inputs.resolve import method_of, refuse_draft  # noqa: PLC0415

        refuse_draft(method_of(method, draft), draft)
    acceptance = Acceptance(rate=validated("acceptance_rate", acceptance_rate),  # checked as every acceptance is
                            mean_accepted_length=validated("mean_accepted_length", mean_accepted_length),
                            measured_at_k=k)
    if not acceptance.given:
        raise SpecError("acceptance_rate", "give exactly one of --acceptance-rate or --mean-accepted-length",
                        "one of the two")
    if acceptance.mean_accepted_length is not None and k is None:
        # the row would be read at the k of whichever plan reads it (inputs.resolve: measured_at_k defaults to the
        # deployment's k): 3.0 tokens a pass measured at k=3 (a = 0.81) had priced a k=5 plan at a = 0.71, 3.0
        # tokens a pass where a = 0.81 drafts 3.78
        raise SpecError("k", "a mean accepted length is measured at a k, and none is given: every plan would read it "
                        "at its own k", "-k K, the k it was measured at (an --acceptance-rate is per token: no k)")
    if k is not None:
        acceptance.per_token(k)  # a mean accepted length above k + 1 cannot have been measured at k
    acceptance_rate, mean_accepted_length = acceptance.rate, acceptance.mean_accepted_length
    with Store((ctx.obj or {}).get("store")) as s:
        row = s.add("acceptance", tag, {"entered_by_hand": True}, source, target=target, draft=draft, method=method,
                    k=k, acceptance_rate=acceptance_rate, mean_accepted_length=mean_accepted_length)
    click.echo(f"recorded observation #{row}")


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def models(fmt: str) -> None:
    """List the embedded model catalog.

    Published variants of these models need no entry: offline, a quantized checkpoint (-FP8, -FP8-dynamic, -AWQ,
    -GPTQ-Int4, -quantized.w8a8, -NVFP4, ...), a mirror under another organisation or a dated revision is read from
    its id and priced as the catalog model, with a note saying so.
    """
    from .. import api  # noqa: PLC0415
    from ..reports import listings  # noqa: PLC0415

    click.echo(listings.models(api.models(), fmt), nl=False)


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def gpus(fmt: str) -> None:
    """List the GPU catalog (memory as the driver reports it, bandwidth, dense FLOP/s, sources)."""
    from .. import api  # noqa: PLC0415
    from ..reports import listings  # noqa: PLC0415

    click.echo(listings.gpus(api.gpus(), fmt), nl=False)


@cli.command()
@click.option("--db", "db_url", callback=_database, help="Database: a SQLite file or postgresql://USER@HOST:PORT/DB "
              "[default: service.sqlite in the user's data directory].")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind; a non-local one needs users.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--rate-limit", type=click.IntRange(1, 1_000_000), default=600, show_default=True,
              help="Requests a minute per user (per client address before login).")
@click.option("--max-body", type=click.IntRange(1024, 1 << 30), default=1 << 20, show_default=True,
              help="Largest request body [bytes].")
@click.option("--job-timeout", type=click.FloatRange(1, 86400), default=300.0, show_default=True,
              callback=lambda _ctx, _param, value: _finite("job_timeout", value),  # FloatRange lets nan through
              help="Seconds a simulate or search job may run.")
@click.option("--cookie-secure", is_flag=True, help="Mark session cookies Secure even on a loopback bind (set it "
              "behind a TLS-terminating reverse proxy on the same host).")
def serve(db_url: str | None, host: str, port: int, rate_limit: int, max_body: int, job_timeout: float,
          cookie_secure: bool) -> None:
    """Serve the API (/api/v1, OpenAPI at /api/v1/openapi.json) and the web UI, access-controlled (docs/service.md).

    Binds 127.0.0.1 unless told otherwise, and refuses a non-local address while no user exists
    (`specsize users add NAME --role admin`).
    """
    from ..inputs.load import count_reads  # noqa: PLC0415
    from ..service.serve import run  # noqa: PLC0415

    count_reads(False)  # a server keeps no count of the files it reads (main's is for one command's outputs)

    run(db_url, host, port, rate_limit, max_body, job_timeout, cookie_secure)


@cli.group()
def users() -> None:
    """Manage the service's users (roles: viewer, planner, admin) and their API tokens."""


@users.command("add")
@click.argument("name")
@click.option("--role", required=True, help="viewer, planner or admin.")
@click.option("--db", "db_url", callback=_database, help="The service's database (as `serve --db`).")
@click.option("--password-stdin", is_flag=True, help="Also read a password for the web UI from stdin (one line).")
def users_add(name: str, role: str, db_url: str | None, password_stdin: bool) -> None:
    """Add a user; prints the new API token once, on the last line of stdout."""
    from ..service.serve import add_user  # noqa: PLC0415

    password = sys.stdin.readline().rstrip("\r\n") if password_stdin else None  # a Windows line end is one too
    token = add_user(db_url, name, role, password)
    click.echo(f"added {name} ({role}); the API token is shown once, now:", err=True)
    click.echo(token)


@users.command("list")
@click.option("--db", "db_url", callback=_database, help="The service's database (as `serve --db`).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def users_list(db_url: str | None, fmt: str) -> None:
    """List users, their roles and whether they are revoked (never a token or a password)."""
    from ..service.serve import list_users  # noqa: PLC0415

    rows = list_users(db_url)
    if fmt == "json":
        import json  # noqa: PLC0415

        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        state = f"revoked {row['revoked_at'][:19]}" if row["revoked_at"] else "active"
        click.echo(f"{row['name']:<24} {row['role']:<8} {state}{'  (password)' if row['password'] else ''}")


@users.command("revoke")
@click.argument("name")
@click.option("--db", "db_url", callback=_database, help="The service's database (as `serve --db`).")
def users_revoke(name: str, db_url: str | None) -> None:
    """Revoke a user: their tokens and sessions stop working at once."""
    from ..service.serve import revoke_user  # noqa: PLC0415

    revoke_user(db_url, name)
    click.echo(f"revoked {name}")


cli.add_command(sweep_command)


# what the command line's own arguments, outside the field table, accept (a folder given as a file)
# (--series, check-live's --plan and --log, search's spec and measure's --prompts had named no accepted value)
ARGUMENTS_ACCEPT = {"deployment_file": "a deployment YAML file (docs/cli.md)", "study_file": "a study YAML file",
                    "output": "a file path (an existing file with --force)", "html": "a file path for the HTML summary",
                    "series": "a file path for the time series: .csv, or .parquet (an existing file with --force)",
                    "plan": "a plan JSON file (specsize plan --format json -o plan.json)",
                    "log": "the server's start-up log, a text file", "spec_file": "a search spec YAML file",
                    "prompts": "a JSONL file of prompts"}


def _accepted(field: str, param: click.Parameter | None = None) -> str:
    """' (accepted: ...)' from the field table for a field click refused (a word for --tp), else from the bounds of a
    flag's click range (`sweep --workers 0`, `--cell-timeout 0` had named none), else ''."""
    from ..inputs.request import FIELDS, info  # noqa: PLC0415

    if field in ARGUMENTS_ACCEPT:
        return f" (accepted: {ARGUMENTS_ACCEPT[field]})"
    if field in FIELDS:
        return f" (accepted: {info(field).accepted})"
    kind = getattr(param, "type", None)
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        noun = "an integer" if isinstance(kind, click.IntRange) else "a number"

        def shown(bound: float) -> str:
            return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"

        bounds = [f"{'>' if kind.min_open else '>='} {shown(kind.min)}" if kind.min is not None else "",
                  f"{'<' if kind.max_open else '<='} {shown(kind.max)}" if kind.max is not None else ""]
        return f" (accepted: {noun} {' and '.join(b for b in bounds if b)})"
    return ""


def main(argv: list[str] | None = None) -> None:
    from ..core.errors import SpecError  # noqa: PLC0415

    try:
        cli.main(args=argv, prog_name="specsize", standalone_mode=False)
    except SpecError as err:
        _fail(str(err))
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.BadParameter as err:  # a value click itself refused: FIELD: problem, as every other bad input
        param = getattr(err, "param", None)
        flags = [o for o in getattr(param, "opts", []) if o.startswith("--")]  # --format, not its variable fmt
        field = (flags[0][2:] if flags else getattr(param, "name", None) or "").replace("-", "_")
        message = (err.message or ("is required" if isinstance(err, click.MissingParameter) else "")).replace("\n", " ")
        _fail(f"{field}: {message}{_accepted(field, param)}" if field else err.format_message().replace("\n", " "))
    except click.ClickException as err:
        message = err.format_message().replace("\n", " ")
        _fail(message, EXIT_BAD_INPUT if err.exit_code in (1, 2) else err.exit_code)
    except SystemExit:
        raise
    except Exception as err:  # a bug: one line, unless the user asks for the traceback
        if isinstance(err, OSError) and err.errno in (errno.ENAMETOOLONG, errno.ELOOP):
            # a path the system cannot look up, whichever flag named it: the user's input, not a bug
            _fail(str(SpecError("path", f"{err.strerror}: {err.filename!r}",
                                "a path of names of at most 255 bytes each, without a symbolic link loop")))
        if isinstance(err, RuntimeError) and str(err).startswith("Symlink loop"):
            # Python 3.11's Path.resolve on a loop (later ones raise OSError ELOOP, above); the readers name their
            # field (inputs.load.resolved): this is the net for a path no reader of ours resolved first
            _fail(str(SpecError("path", str(err), "a path without a symbolic link loop")))
        if os.environ.get("SPECSIZE_DEBUG"):
            raise
        _fail(f"internal error: {type(err).__name__}: {err} (set SPECSIZE_DEBUG=1 for the traceback)", EXIT_INTERNAL)
    sys.exit(0)


if __name__ == "__main__":
    main()
