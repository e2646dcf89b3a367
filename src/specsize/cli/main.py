"""`specsize`: thin shell over the library. Parse, call, render; no arithmetic here.

Exit codes (docs/cli.md): 0 fits, 1 thin, 3 does_not_fit, 2 bad input, 4 internal error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .. import __version__

EXIT_FOR_VERDICT = {"fits": 0, "thin": 1, "does_not_fit": 3}
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 4


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    click.echo(f"specsize: error: {message}", err=True)
    sys.exit(code)


def write_output(text: str, path: str | None, force: bool) -> None:
    """stdout, or a file written atomically (temporary file, then rename); an existing file needs --force."""
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(path)
    if target.exists() and not force:
        _fail(f"output: {target} exists; pass --force to replace it")
    if not target.parent.exists():
        _fail(f"output: folder {target.parent} does not exist")
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text)
        os.replace(temporary, target)
    finally:
        if temporary.exists():
            temporary.unlink()
    click.echo(f"specsize: wrote {target}", err=True)


def deployment_options(func):
    """The flags that describe a deployment; shared by every command that sizes one."""
    options = [
        click.argument("deployment_file", required=False, type=click.Path(dir_okay=False)),
        click.option("--target", help="Target model: catalog id, config.json, model directory or hub id."),
        click.option("--draft", help="Draft model or head (draft_model, eagle, eagle3, medusa)."),
        click.option("--method", type=click.Choice(["none", "draft_model", "eagle", "eagle3", "mtp", "medusa", "ngram"]),
                     help="Speculative method."),
        click.option("-k", "--num-speculative-tokens", help="Tokens drafted per step (k); `speedup` takes a list K,K,..."),
        click.option("--draft-tp", type=int, help="Tensor parallel size of a separate draft model (default 1)."),
        click.option("--gpu", help="GPU id from `specsize gpus`."),
        click.option("--gpus", type=int, help="GPUs in total (a multiple of tp x pp; more means replicas)."),
        click.option("--tp", type=int, help="Tensor parallel size."),
        click.option("--pp", type=int, help="Pipeline parallel size."),
        click.option("--gpu-memory-gib", type=float, help="Override the GPU's memory (GiB as the driver reports it)."),
        click.option("--gpu-memory-utilization", type=float, help="Fraction of GPU memory the engine may use."),
        click.option("--shared-reserved-gib", type=float,
                     help="GiB of each GPU another workload holds (shared pools)."),
        click.option("--max-model-len", type=int),
        click.option("--max-num-seqs", type=int),
        click.option("--max-num-batched-tokens", type=int),
        click.option("--kv-cache-dtype", help="auto or fp8 (fp8_e4m3, fp8_e5m2)."),
        click.option("--kv-cache-memory-bytes", type=int, help="vLLM's flag: fix the KV pool size in bytes."),
        click.option("--quantization", help="Override weights: fp8, int8, int4, mxfp4, nvfp4, none."),
        click.option("--dtype", help="auto, bfloat16, float16, float32."),
        click.option("--enforce-eager/--no-enforce-eager", default=None, help="No CUDA graphs."),
        click.option("--block-size", type=int),
        click.option("--device", type=click.Choice(["cuda", "cpu"]), help="Accelerator the engine runs on."),
        click.option("--engine", type=click.Choice(["vllm"]), help="Serving engine whose accounting to follow."),
        click.option("--engine-version", help="Engine release X.Y (default: newest profile)."),
        click.option("--prompt-tokens", help="Prompt lengths: p50=N,p95=N,p99=N,max=N | N,N,... samples | @FILE."),
        click.option("--output-tokens", help="Output lengths, same forms as --prompt-tokens."),
        click.option("--samples-file", type=click.Path(dir_okay=False),
                     help="JSONL/CSV of requests with prompt_tokens and output_tokens."),
        click.option("--concurrency", type=int, help="Target concurrent requests."),
        click.option("--burst-factor", type=float, help="Peak concurrency = concurrency x burst factor."),
        click.option("--percentile", type=click.Choice(["p50", "p95", "p99", "max"]),
                     help="Request shape of the worst-case envelope (default p99)."),
        click.option("--headroom", type=float, help="Headroom policy: below it the verdict is thin (default 0.2)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


WORKLOAD_FLAGS = ("prompt_tokens", "output_tokens", "samples_file", "concurrency", "burst_factor", "percentile")
PERF_FLAGS = ("acceptance_rate", "mean_accepted_length", "measured_at_k", "tree_topk", "num_draft_tokens",
              "tpot_slo_ms", "memory_efficiency", "compute_efficiency", "step_overhead_ms", "acceptance_from_store",
              "store")


def perf_options(func):
    """Inputs of the performance model: acceptance (never guessed), tree drafting, SLO, efficiencies."""
    options = [
        click.option("--acceptance-rate", type=float, help="Per-token acceptance rate a in [0, 1]."),
        click.option("--mean-accepted-length", type=float,
                     help="Mean tokens per target pass incl. the bonus token, as measured (see --measured-at-k)."),
        click.option("--measured-at-k", type=int, help="k at which --mean-accepted-length was measured "
                     "(default: the deployment's k)."),
        click.option("--tree-topk", type=int, default=1, show_default=True, help="Tree drafting: top-k branches."),
        click.option("--num-draft-tokens", type=int, help="Tree drafting: tokens verified per sequence (N)."),
        click.option("--tpot-slo-ms", type=float, help="TPOT target: report the concurrency that still meets it."),
        click.option("--memory-efficiency", type=float, help="Override the achieved fraction of HBM bandwidth."),
        click.option("--compute-efficiency", type=float, help="Override the achieved fraction of FLOP/s."),
        click.option("--step-overhead-ms", type=float, help="Override the fixed cost of one forward step (ms)."),
        click.option("--acceptance-from-store", metavar="TAG",
                     help="Use the newest acceptance recorded under TAG in the calibration store."),
        click.option("--store", type=click.Path(dir_okay=False), help="Calibration store (SQLite) path."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def perf_inputs(kw: dict, gpu, default_k: int | None, inputs=None):
    """(efficiency, acceptance or None, tpot SLO in s, tree) from the perf flags (popped from kw); the
    deployment file's acceptance applies when no flag gives one."""
    from ..catalog.gpus import load_efficiency  # noqa: PLC0415
    from ..core.errors import SpecError  # noqa: PLC0415
    from ..planner.perf import Acceptance, Tree  # noqa: PLC0415

    f = {name: kw.pop(name, None) for name in PERF_FLAGS}
    if f["acceptance_rate"] is not None and f["mean_accepted_length"] is not None:
        raise SpecError("acceptance_rate", "give either --acceptance-rate or --mean-accepted-length, not both",
                        "one of the two")
    acceptance = None
    if f["acceptance_from_store"]:
        if f["acceptance_rate"] is not None or f["mean_accepted_length"] is not None:
            raise SpecError("acceptance_from_store", "give the acceptance once: a rate, a mean length or a store tag",
                            "one of --acceptance-rate, --mean-accepted-length, --acceptance-from-store")
        from ..store import Store  # noqa: PLC0415

        with Store(f["store"]) as store:
            spec = inputs.deployment.speculative if inputs is not None else None
            found = store.latest_acceptance(f["acceptance_from_store"],
                                            target=inputs.deployment.target.model_id if inputs else None,
                                            draft=spec.draft.model_id if spec and spec.draft else None,
                                            method=spec.method if spec else None)
        acceptance = Acceptance(rate=found.acceptance_rate, mean_accepted_length=None if found.acceptance_rate
                                is not None else found.mean_accepted_length,
                                measured_at_k=found.k or default_k, source=found.provenance)
    elif f["acceptance_rate"] is not None or f["mean_accepted_length"] is not None:
        acceptance = Acceptance(rate=f["acceptance_rate"], mean_accepted_length=f["mean_accepted_length"],
                                measured_at_k=f["measured_at_k"] or default_k)
    elif inputs is not None and (inputs.acceptance_rate is not None or inputs.mean_accepted_length is not None):
        acceptance = Acceptance(rate=inputs.acceptance_rate, mean_accepted_length=inputs.mean_accepted_length,
                                measured_at_k=inputs.measured_at_k or default_k,
                                source=inputs.acceptance_source or "deployment file")
    if f["tree_topk"] is not None and f["tree_topk"] < 1:
        raise SpecError("tree_topk", f"must be >= 1, got {f['tree_topk']}", "an integer >= 1")
    if f["num_draft_tokens"] is not None and f["num_draft_tokens"] < 1:
        raise SpecError("num_draft_tokens", f"must be >= 1, got {f['num_draft_tokens']}", "an integer >= 1")
    if f["tpot_slo_ms"] is not None and not f["tpot_slo_ms"] > 0:
        raise SpecError("tpot_slo_ms", f"must be positive, got {f['tpot_slo_ms']}", "milliseconds > 0")
    overrides = {"memory": f["memory_efficiency"], "compute": f["compute_efficiency"],
                 "step_overhead_s": f["step_overhead_ms"] / 1e3 if f["step_overhead_ms"] else None}
    for key in ("memory", "compute"):
        if overrides[key] is not None and not 0 < overrides[key] <= 1:
            raise SpecError(f"{key}_efficiency", f"must be in (0, 1], got {overrides[key]}", "a fraction")
    eff = load_efficiency(gpu, overrides)
    tree = Tree(topk=f["tree_topk"] or 1, num_draft_tokens=f["num_draft_tokens"])
    return eff, acceptance, (f["tpot_slo_ms"] / 1e3 if f["tpot_slo_ms"] else None), tree


def parse_int_list(value: str | None, field: str) -> list[int] | None:
    from ..core.errors import SpecError  # noqa: PLC0415

    if value is None:
        return None
    try:
        items = [int(v) for v in str(value).replace(" ", "").split(",") if v]
    except ValueError:
        raise SpecError(field, f"cannot read {value!r}", "an integer or a comma-separated list") from None
    if not items:
        raise SpecError(field, "empty list", "an integer or a comma-separated list")
    return items


def plan_from_flags(kw: dict):
    """Flags -> (inputs, profile, efficiency, acceptance, TPOT SLO, tree, plan result): what plan, check and
    report share."""
    from ..engines import resolve_profile  # noqa: PLC0415
    from ..planner.plan import plan as make_plan  # noqa: PLC0415

    perf_flags = {name: kw.pop(name, None) for name in PERF_FLAGS}
    inputs = load_inputs(kw)
    d = inputs.deployment
    eff, acceptance, slo, tree = perf_inputs(perf_flags, d.gpu, d.speculative.num_speculative_tokens or None, inputs)
    profile = resolve_profile(inputs.engine, inputs.engine_version)
    result = make_plan(d, inputs.workload, profile, inputs.headroom, efficiency=eff, acceptance=acceptance,
                       tpot_slo_s=slo, tree=tree)
    return inputs, profile, eff, acceptance, slo, tree, result


def load_inputs(kw: dict):
    """Deployment file (or the embedded default) merged with flags, validated."""
    from ..catalog.deployment import build_inputs, default_deployment, merge, read_deployment_file  # noqa: PLC0415

    path = kw.pop("deployment_file", None)
    ks = parse_int_list(kw.get("num_speculative_tokens"), "num_speculative_tokens")
    if ks is not None:
        if len(ks) > 1:
            from ..core.errors import SpecError  # noqa: PLC0415

            raise SpecError("num_speculative_tokens", f"plan takes one k, got {len(ks)}", "a single integer")
        kw["num_speculative_tokens"] = ks[0]
    workload = {name: kw.pop(name, None) for name in WORKLOAD_FLAGS}
    flags = {key: value for key, value in kw.items() if value is not None}
    if path:
        base = read_deployment_file(path)
    elif "target" in flags:
        base = {}
    else:
        base = default_deployment()
    if workload.get("samples_file"):
        workload["samples_file"] = str(Path(workload["samples_file"]).resolve())
    if any(v is not None for v in workload.values()):
        flags["workload"] = workload
        if not (base.get("workload") or {}).get("prompt_tokens") and workload.get("prompt_tokens") is None \
                and not workload.get("samples_file"):
            flags["workload"] = {**default_deployment()["workload"], **{k: v for k, v in workload.items() if v}}
    return build_inputs(merge(base, flags))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="specsize")
def cli() -> None:
    """Will a speculative-decoding deployment fit, with headroom, at the load you expect?

    Sizes target + draft weights, the KV cache of both, activations, CUDA graphs and engine overhead per GPU,
    the way the serving engine accounts for them, against a worst-case workload envelope.
    """


@cli.command()
@deployment_options
@perf_options
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option("--simulate", "run_sim", is_flag=True,
              help="Also simulate the envelope's burst scenario and use the result in the verdict.")
@click.option("--sim-duration", type=float, default=300.0, show_default=True, help="Seconds of arrivals simulated.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the simulation.")
@click.option("--emit", type=click.Choice(["vllm", "sglang"]),
              help="Print the engine's launch command (and vLLM's YAML config) for this plan instead of the report.")
@click.option("--ttft-slo-ms", type=float, help="TTFT limit: the failover backlog must stay within it.")
@click.option("--gpus-per-node", type=int, default=8, show_default=True)
@click.option("--spare", type=int, default=1, show_default=True, help="Replicas (or nodes) that may fail: N+k.")
@click.option("--failure-unit", type=click.Choice(["replica", "node"]), default="replica", show_default=True)
@click.option("--storage-gbs", type=float, default=2.0, show_default=True,
              help="Storage read bandwidth in GB/s for cold starts (local NVMe ~3-7, network volume ~0.5-2).")
@click.option("--fragile-below", type=float, default=0.15, show_default=True,
              help="Flag the plan fragile when an input can grow less than this before the verdict flips.")
def plan(fmt: str, output: str | None, force: bool, run_sim: bool, sim_duration: float, seed: int,
         emit: str | None, ttft_slo_ms: float | None, gpus_per_node: int, spare: int, failure_unit: str,
         storage_gbs: float, fragile_below: float, **kw) -> None:
    """Plan a deployment: per-GPU memory, KV capacity, envelope, verdict.

    With no arguments it plans the embedded default (Llama-3.1-70B-Instruct with a Llama-3.2-1B-Instruct
    draft on 4 x H100). Flags override the DEPLOYMENT_FILE. Exit code: 0 fits, 1 thin, 3 does not fit,
    2 bad input.
    """
    inputs, profile, eff, acceptance, slo, tree, result = plan_from_flags(kw)
    d = inputs.deployment
    if run_sim:
        from ..planner.scenario import with_simulation  # noqa: PLC0415

        result = with_simulation(result, inputs, eff, acceptance, slo, tree, sim_duration, seed)
    from ..core.errors import SpecError  # noqa: PLC0415
    from ..planner.analysis import analyse_plan  # noqa: PLC0415

    for name, value in (("gpus_per_node", gpus_per_node), ("spare", spare + 1), ("storage_gbs", storage_gbs)):
        if not value > 0:
            raise SpecError(name, f"must be positive, got {value}", "a positive number")
    result = analyse_plan(result, profile, eff, acceptance, gpus_per_node=gpus_per_node, spare=spare,
                          failure_unit=failure_unit, storage_bandwidth_bytes_s=storage_gbs * 1e9,
                          ttft_slo_s=ttft_slo_ms / 1e3 if ttft_slo_ms else None, tpot_slo_s=slo,
                          fragile_below=fragile_below)
    if emit and fmt == "text":
        command = next((c for c in result.commands if c.engine == emit), None)
        if command is None:
            raise SpecError("emit", f"{emit} cannot serve method {d.speculative.method}", "vllm")
        text = f"# {command.engine} {command.versions}\n{command.shell}\n"
        if command.config_yaml:
            text += "\n" + command.config_yaml
        write_output(text, output, force)
        sys.exit(EXIT_FOR_VERDICT[result.verdict.verdict])
    if inputs.workload_defaulted:
        click.echo("specsize: note: no workload given; using the default envelope of the embedded deployment",
                   err=True)
    if fmt == "json":
        from ..reports import jsonout as renderer  # noqa: PLC0415
    elif fmt == "markdown":
        from ..reports import markdown as renderer  # noqa: PLC0415
    else:
        from ..reports import text as renderer  # noqa: PLC0415
    write_output(renderer.render(result), output, force)
    sys.exit(EXIT_FOR_VERDICT[result.verdict.verdict])


@cli.command()
@deployment_options
@perf_options
@click.option("--batch-size", "batch_sizes", default="1,2,4,8,16,32,64,128", show_default=True,
              help="Batch sizes B[,B...].")
@click.option("--context-len", type=int, default=2048, show_default=True, help="Context length L of each sequence.")
@click.option("--candidate", "candidates", multiple=True,
              help="Compare another drafter: method=M[,draft=MODEL][,acceptance=A|mean_accepted_length=T][,k=K]. "
                   "Repeatable.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
def speedup(batch_sizes: str, context_len: int, candidates: tuple[str, ...], fmt: str, output: str | None,
            force: bool, **kw) -> None:
    """What speculation is worth at each batch size and k: TPOT, throughput, speed-up, crossover, best k.

    Takes the deployment flags of `plan`; acceptance must be given (--acceptance-rate or
    --mean-accepted-length). speed-up = TPOT without speculation / TPOT with it, at the same batch size.
    """
    from ..core.errors import SpecError  # noqa: PLC0415
    from ..engines import resolve_profile  # noqa: PLC0415
    from ..planner.speedup import compare_drafters  # noqa: PLC0415

    batches = parse_int_list(batch_sizes, "batch_size")
    ks = parse_int_list(kw.get("num_speculative_tokens"), "num_speculative_tokens")
    kw["num_speculative_tokens"] = None if ks is None else ks[0]
    perf_flags = {name: kw.pop(name, None) for name in PERF_FLAGS}
    inputs = load_inputs(kw)
    d = inputs.deployment
    eff, acceptance, _, tree = perf_inputs(perf_flags, d.gpu, d.speculative.num_speculative_tokens or None, inputs)
    if acceptance is None:
        raise SpecError("acceptance_rate", "speedup needs the acceptance of the drafter",
                        "--acceptance-rate A or --mean-accepted-length T (measured, never assumed)")
    if context_len < 1:
        raise SpecError("context_len", f"must be >= 1, got {context_len}", "tokens >= 1")
    if d.gpu.memory_bandwidth_bytes_s <= 0:
        raise SpecError("gpu", "a GPU given only by --gpu-memory-gib has no bandwidth or FLOP/s", "a catalog GPU id")
    profile = resolve_profile(inputs.engine, inputs.engine_version)
    result = compare_drafters(d, profile, eff, acceptance, batches, ks or [d.speculative.num_speculative_tokens],
                              context_len, tree, candidates)
    from ..reports import speedup as renderer  # noqa: PLC0415

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


def write_series(series: dict, path: str, force: bool) -> None:
    """The simulation's time series as CSV (or Parquet when pyarrow is installed)."""
    from ..core.errors import SpecError  # noqa: PLC0415

    columns = list(series)
    if path.endswith(".parquet"):
        try:
            import pyarrow as pa  # noqa: PLC0415
            import pyarrow.parquet as pq  # noqa: PLC0415
        except ImportError:
            raise SpecError("series", "writing Parquet needs pyarrow (pip install pyarrow)", "a .csv path") from None
        target = Path(path)
        if target.exists() and not force:
            _fail(f"series: {target} exists; pass --force to replace it")
        temporary = target.with_name(f".{target.name}.tmp")
        pq.write_table(pa.table({c: series[c] for c in columns}), temporary)
        os.replace(temporary, target)
        return
    lines = [",".join(columns)]
    for row in zip(*(series[c] for c in columns)):
        lines.append(",".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in row))
    write_output("\n".join(lines) + "\n", path, force)


@cli.command()
@deployment_options
@perf_options
@click.option("--rate", type=float, help="Requests/s (default: what keeps --concurrency requests in flight).")
@click.option("--duration", type=float, default=600.0, show_default=True, help="Seconds of arrivals.")
@click.option("--prompt-tokens-median", type=float)
@click.option("--prompt-tokens-p99", type=float)
@click.option("--output-tokens-median", type=float)
@click.option("--output-tokens-p99", type=float)
@click.option("--burst-start", type=float, help="Seconds; the burst multiplies the rate by --burst-factor.")
@click.option("--burst-duration", type=float)
@click.option("--on-off", help="Repeating bursts PERIOD,ON seconds at x --burst-factor.")
@click.option("--ramp-to", type=float, help="Ramp the rate linearly from --rate to this over the duration.")
@click.option("--trace", type=click.Path(dir_okay=False), help="Replay a CSV/JSONL trace (Azure columns accepted).")
@click.option("--lengths-file", type=click.Path(dir_okay=False),
              help="Resample prompt and output lengths from this CSV/JSONL (empirical), arrivals as --rate says.")
@click.option("--acceptance-spread", type=float, default=0.0, show_default=True,
              help="Std. dev. of per-request acceptance (Beta-distributed around the mean).")
@click.option("--prefix-hit-rate", type=float, default=0.0, show_default=True)
@click.option("--ttft-slo-ms", type=float, help="TTFT limit for goodput.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--no-compare", is_flag=True, help="Skip the run without speculation.")
@click.option("--series", "series_path", type=click.Path(dir_okay=False),
              help="Write the time series (KV occupancy, running, waiting, preemptions) to CSV or Parquet.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@click.option("--force", is_flag=True, help="Replace existing output files.")
def simulate(fmt: str, output: str | None, force: bool, series_path: str | None, **kw) -> None:
    """Replay steady state and bursts on a continuous-batching, paged-KV server, spec vs no-spec.

    Exit code 0 when the deployment sustains the load without cache thrashing, scheduling instability or
    queue growth (docs/simulation.md), 1 when it does not, 2 on bad input.
    """
    from ..planner.scenario import run_simulation  # noqa: PLC0415
    from ..reports import simulation as renderer  # noqa: PLC0415

    sim = {name: kw.pop(name) for name in ("rate", "duration", "prompt_tokens_median", "prompt_tokens_p99",
                                           "output_tokens_median", "output_tokens_p99", "burst_start",
                                           "burst_duration", "on_off", "ramp_to", "trace", "lengths_file",
                                           "acceptance_spread",
                                           "prefix_hit_rate", "ttft_slo_ms", "seed", "no_compare")}
    perf_flags = {name: kw.pop(name, None) for name in PERF_FLAGS}
    burst_factor = kw.get("burst_factor")
    inputs = load_inputs(kw)
    d = inputs.deployment
    eff, acceptance, tpot_slo, tree = perf_inputs(perf_flags, d.gpu, d.speculative.num_speculative_tokens or None, inputs)
    bar, update = _progress_callback()
    if bar is not None:
        bar.start()
    try:
        report = run_simulation(inputs, eff, acceptance, tpot_slo, tree, sim, burst_factor, update)
    finally:
        if bar is not None:
            bar.stop()
    write_output(renderer.render(report, fmt), output, force)
    if series_path:
        write_series(report.spec.series, series_path, force)
    sys.exit(0 if report.spec.sustains else 1)


@cli.command()
@deployment_options
@perf_options
@click.option("--format", "fmt", type=click.Choice(["html", "markdown"]), default="html", show_default=True)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False),
              help="Write to FILE (default: stdout for Markdown; HTML needs a file).")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option("--no-simulate", is_flag=True, help="Skip the burst simulation.")
@click.option("--sim-duration", type=float, default=120.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--ttft-slo-ms", type=float)
def report(fmt: str, output: str | None, force: bool, no_simulate: bool, sim_duration: float, seed: int,
           ttft_slo_ms: float | None, **kw) -> None:
    """A report a reviewer can read: verdict, memory per GPU, KV demand vs capacity, speed-up, the burst
    simulation, recommendations, the engine command and the standards mapping, with inline SVG figures.

    Exit code as `plan`: 0 fits, 1 thin, 3 does not fit, 2 bad input.
    """
    from ..engines import resolve_profile  # noqa: PLC0415
    from ..planner.report import build_report  # noqa: PLC0415

    if fmt == "html" and not output:
        from ..core.errors import SpecError  # noqa: PLC0415

        raise SpecError("output", "an HTML report needs a file", "-o report.html")
    perf_flags = {name: kw.pop(name, None) for name in PERF_FLAGS}
    inputs = load_inputs(kw)
    d = inputs.deployment
    eff, acceptance, slo, tree = perf_inputs(perf_flags, d.gpu, d.speculative.num_speculative_tokens or None, inputs)
    profile = resolve_profile(inputs.engine, inputs.engine_version)
    data = build_report(inputs, profile, eff, acceptance, slo, tree, simulate=not no_simulate,
                        sim_duration_s=sim_duration, seed=seed, ttft_slo_s=ttft_slo_ms / 1e3 if ttft_slo_ms else None)
    if fmt == "html":
        from ..reports import html as renderer  # noqa: PLC0415
    else:
        from ..reports import report_markdown as renderer  # noqa: PLC0415
    write_output(renderer.render(data), output, force)
    sys.exit(EXIT_FOR_VERDICT[data.result.verdict.verdict])


@cli.command()
@deployment_options
@click.option("--batch-size", type=int, default=2, show_default=True, help="Sequences B in the KV cache.")
@click.option("--prompt-len", type=int, help="Prompt tokens per sequence (default: the workload's p50, at most 512).")
@click.option("--weights", type=click.Choice(["random", "local"]), default="random", show_default=True,
              help="Random weights from the config, or the real weights of a local model directory.")
@click.option("--prompts", type=click.Path(dir_okay=False),
              help="JSONL of prompts ({'prompt_ids': [...]} or {'prompt': '...'}) to measure acceptance (local weights).")
@click.option("--max-new-tokens", type=int, default=64, show_default=True)
@click.option("--temperature", type=float, default=1.0, show_default=True)
@click.option("--record", metavar="TAG", help="Record measured acceptance and footprint in the calibration store.")
@click.option("--store", type=click.Path(dir_okay=False), help="Calibration store (SQLite) path.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def measure(batch_size: int, prompt_len: int | None, weights: str, prompts: str | None, max_new_tokens: int,
            temperature: float, record: str | None, store: str | None, fmt: str, **kw) -> None:
    """Build the target and drafter with PyTorch and measure weights, KV cache and activations against the
    prediction; with real weights and --prompts, measure the pair's acceptance (greedy and sampled).

    Needs `pip install 'specsize[measure]'`. CUDA when present, else CPU.
    """
    import json  # noqa: PLC0415

    from ..catalog.models import load_config_dict  # noqa: PLC0415
    from ..core.errors import SpecError  # noqa: PLC0415
    from ..measure.run import build_model, measure as run_measure, measure_acceptance  # noqa: PLC0415

    kw_device = kw.get("device")
    inputs = load_inputs(kw)
    d = inputs.deployment
    k = d.speculative.num_speculative_tokens
    prompt = prompt_len or min(512, inputs.workload.prompt_tokens.p50)
    if batch_size < 1 or prompt < 1:
        raise SpecError("batch_size", "batch size and prompt length must be positive", "integers >= 1")
    target_cfg, target_dir = load_config_dict(str(inputs.raw.get("target")))
    draft_cfg = draft_dir = None
    if d.speculative.draft is not None:
        draft_cfg, draft_dir = load_config_dict(str(inputs.raw.get("draft")))
    if weights == "local" and (target_dir is None or (d.speculative.draft is not None and draft_dir is None)):
        raise SpecError("weights", "local weights need local model directories for the target and the drafter",
                        "--target DIR [--draft DIR] with their safetensors")
    dtype = d.engine.dtype if d.engine.dtype != "auto" else d.target.dtype
    device = None if kw_device in (None, "cuda") else "cpu"
    result = run_measure(d.target, target_cfg, target_dir if weights == "local" else None, d.speculative.draft,
                         draft_cfg, draft_dir if weights == "local" else None, batch_size=batch_size,
                         prompt_tokens=prompt, k=k, dtype=dtype, device=device)
    if prompts:
        if weights != "local" or d.speculative.draft is None:
            raise SpecError("prompts", "measuring acceptance needs real weights of a target and a draft model",
                            "--weights local --target DIR --draft DIR --method draft_model")
        ids = []
        for line in Path(prompts).read_text().splitlines():
            if line.strip():
                item = json.loads(line)
                if "prompt_ids" in item:
                    ids.append([int(t) for t in item["prompt_ids"]])
                else:
                    from transformers import AutoTokenizer  # noqa: PLC0415

                    ids.append(AutoTokenizer.from_pretrained(target_dir).encode(item["prompt"]))
        target_model = build_model(None, target_dir, dtype, result.device)
        draft_model = build_model(None, draft_dir, dtype, result.device)
        result.acceptance = measure_acceptance(target_model, draft_model, ids, k, max_new_tokens, temperature)
    if record:
        from ..store import Store  # noqa: PLC0415

        with Store(store) as s:
            payload = {"terms": [t.__dict__ for t in result.terms], "device": result.device,
                       "batch_size": batch_size, "prompt_tokens": prompt}
            s.add("footprint", record, payload, "specsize measure", target=d.target.model_id,
                  draft=d.speculative.draft.model_id if d.speculative.draft else None, method=d.speculative.method, k=k)
            if result.acceptance:
                for mode, figures in result.acceptance.items():
                    s.add("acceptance", record, figures | {"verification": mode}, f"specsize measure ({mode})",
                          target=d.target.model_id, draft=d.speculative.draft.model_id, method=d.speculative.method,
                          k=k, acceptance_rate=figures["acceptance_rate"],
                          mean_accepted_length=figures["mean_accepted_length"])
    terms = [{"term": t.name, "predicted_bytes": None if t.predicted != t.predicted else int(t.predicted),
              "measured_bytes": int(t.measured), "error": t.error if t.predicted == t.predicted else None,
              "note": t.note} for t in result.terms]
    if fmt == "json":
        click.echo(json.dumps({"schema_version": "1.0", "device": result.device, "dtype": result.dtype,
                               "batch_size": batch_size, "prompt_tokens": prompt, "k": k, "terms": terms,
                               "acceptance": result.acceptance}, indent=2))
    else:
        click.echo(f"measured on {result.device} ({result.dtype}), {batch_size} sequences x {prompt} prompt tokens, k={k}")
        click.echo(f"{'term':44} {'predicted MiB':>14} {'measured MiB':>13} {'error':>8}")
        for t in terms:
            predicted = "-" if t["predicted_bytes"] is None else f"{t['predicted_bytes'] / 2**20:,.3f}"
            error = "-" if t["error"] is None else f"{t['error']:+.2%}"
            click.echo(f"{t['term']:44} {predicted:>14} {t['measured_bytes'] / 2**20:>13,.3f} {error:>8}")
        if result.acceptance:
            for mode, figures in result.acceptance.items():
                click.echo(f"acceptance ({mode}): mean accepted length {figures['mean_accepted_length']:.2f}, "
                           f"a = {figures['acceptance_rate']:.3f} over {figures['steps']} steps")
    sys.exit(0)


@cli.command("check-live")
@click.option("--metrics", "metrics_source", help="A vLLM server's /metrics URL, or a file holding its text.")
@click.option("--log", "log_file", type=click.Path(dir_okay=False), help="The server's start-up log.")
@click.option("--plan", "plan_file", required=True, type=click.Path(dir_okay=False),
              help="The plan to hold reality against (specsize plan --format json -o plan.json).")
@click.option("--record", metavar="TAG", help="Also record the observation in the calibration store under TAG.")
@click.option("--store", type=click.Path(dir_okay=False), help="Calibration store (SQLite) path.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def check_live(metrics_source: str | None, log_file: str | None, plan_file: str, record: str | None,
               store: str | None, fmt: str) -> None:
    """Hold a running vLLM server against a saved plan: KV capacity and usage, preemptions, acceptance.

    Exit 0 when reality keeps the plan's verdict, 1 when it changes it, 2 on bad input.
    """
    import json  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    from ..core.errors import SpecError  # noqa: PLC0415
    from ..engines.readers import read_metrics, read_startup_log  # noqa: PLC0415
    from ..planner.live import check  # noqa: PLC0415

    from ..catalog.files import read_text as read_file  # noqa: PLC0415

    def read_text(path: str, field: str) -> str:
        return read_file(path, field, "a readable file")

    try:
        plan = json.loads(read_text(plan_file, "plan"))
    except json.JSONDecodeError as err:
        raise SpecError("plan", f"{plan_file} is not JSON ({err.msg})", "specsize plan --format json output") from None
    if not isinstance(plan, dict):
        raise SpecError("plan", f"{plan_file} does not hold a plan object", "specsize plan --format json output")
    metrics = None
    if metrics_source:
        if metrics_source.startswith(("http://", "https://")):
            try:
                with urllib.request.urlopen(metrics_source, timeout=10) as response:
                    text = response.read().decode(errors="replace")
            except Exception as err:
                raise SpecError("metrics", f"cannot fetch {metrics_source} ({type(err).__name__}: {err})",
                                "a reachable /metrics URL or a file") from None
        else:
            text = read_text(metrics_source, "metrics")
        metrics = read_metrics(text)
    log = read_startup_log(read_text(log_file, "log")) if log_file else None
    result = check(plan, metrics, log)
    if record:
        from ..store import Store  # noqa: PLC0415

        inputs = plan.get("inputs") or {}
        with Store(store) as s:
            s.add("live", record, result.observed | {"violations": result.violations}, f"check-live {metrics_source}",
                  target=inputs.get("target"), draft=inputs.get("draft"), method=inputs.get("method"),
                  k=inputs.get("num_speculative_tokens"), acceptance_rate=result.observed["acceptance_rate"],
                  mean_accepted_length=result.observed["mean_accepted_length"])
    if fmt == "json":
        click.echo(json.dumps({"schema_version": "1.0", "observed": result.observed, "violations": result.violations,
                               "notes": result.notes, "planned_verdict": result.planned_verdict,
                               "verdict_now": result.verdict_now, "verdict_changes": result.verdict_changes},
                              indent=2))
    else:
        o = result.observed
        click.echo(f"plan: {result.planned_verdict}; reality: {result.verdict_now}"
                   + (" (the verdict changes)" if result.verdict_changes else ""))
        click.echo(f"observed: KV cache {o['kv_cache_tokens'] or '?'} tokens, usage "
                   f"{'?' if o['kv_usage_fraction'] is None else format(o['kv_usage_fraction'], '.0%')}, "
                   f"preemptions {o['preemptions'] if o['preemptions'] is not None else '?'}"
                   + (f", acceptance {o['acceptance_rate']:.2f}" if o["acceptance_rate"] is not None else ""))
        for line in result.violations:
            click.echo(f"! {line}")
        for line in result.notes:
            click.echo(f"  {line}")
    sys.exit(1 if result.verdict_changes else 0)


@cli.command()
@click.argument("spec_file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option("--no-simulate", is_flag=True, help="Screen only; do not simulate the finalists.")
def search(spec_file: str, fmt: str, output: str | None, force: bool, no_simulate: bool) -> None:
    """Search GPU type x count x TP x replicas x drafter x k x KV dtype x max_num_seqs against an SLO.

    Prints the cheapest configuration that meets the SLO with headroom (confirmed by simulation), the
    Pareto front of cost vs headroom vs throughput, and why each rejected family fails. Exit 0 when a
    configuration meets the SLO with headroom, 3 when none does, 2 on bad input.
    """
    from ..catalog.gpus import load_efficiency  # noqa: PLC0415
    from ..catalog.search_spec import read_search_spec  # noqa: PLC0415
    from ..engines import resolve_profile  # noqa: PLC0415
    from ..planner.search import run_search  # noqa: PLC0415
    from ..planner.search_confirm import confirmer  # noqa: PLC0415
    from ..reports import search as renderer  # noqa: PLC0415

    space = read_search_spec(spec_file)
    profile = resolve_profile("vllm", space.engine_version)
    confirm = None if no_simulate else confirmer(space, profile, load_efficiency)
    result = run_search(space, profile, load_efficiency, confirm)
    write_output(renderer.render(result, fmt), output, force)
    sys.exit(0 if result.cheapest is not None else 3)


@cli.command()
@deployment_options
@perf_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), help="Write the JSON to FILE.")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
def check(fmt: str, output: str | None, force: bool, **kw) -> None:
    """Gate for deployment pipelines: exit 0 fits, 1 thin, 3 does not fit, 2 bad input.

    Prints one line (text) or the plan's JSON; `-o FILE` keeps the JSON for the pipeline either way.
    """
    from ..reports import jsonout  # noqa: PLC0415

    if not kw.get("deployment_file"):
        from ..core.errors import SpecError  # noqa: PLC0415

        raise SpecError("deployment", "check needs a deployment file", "specsize check DEPLOYMENT.yaml")
    result = plan_from_flags(kw)[-1]
    document = jsonout.render(result)
    if output:
        write_output(document, output, force)
    if fmt == "json":
        sys.stdout.write(document)
    else:
        v = result.verdict
        headroom = v.worst_case.headroom_fraction
        click.echo(f"{v.verdict}: worst-case headroom {headroom:.1%} (policy {v.headroom_policy:.0%}); "
                   f"{v.breaks_first}")
    sys.exit(EXIT_FOR_VERDICT[result.verdict.verdict])


@cli.group(invoke_without_command=True)
@click.option("--store", type=click.Path(dir_okay=False), help="Calibration store (SQLite) path.")
@click.option("--kind", type=click.Choice(["acceptance", "footprint", "live"]))
@click.option("--tag")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def calibrations(ctx, store: str | None, kind: str | None, tag: str | None, fmt: str) -> None:
    """List what the calibration store holds (measured acceptance, footprints, live observations)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = {"store": store}
        return
    import json  # noqa: PLC0415

    from ..store import Store  # noqa: PLC0415

    with Store(store) as s:
        rows = s.list(kind=kind, tag=tag)
        path = s.path
    if fmt == "json":
        click.echo(json.dumps([{**r.__dict__} for r in rows], indent=2, default=str))
        return
    click.echo(f"{path}: {len(rows)} observation(s)")
    for r in rows:
        figure = (f"a={r.acceptance_rate:.3f}" if r.acceptance_rate is not None else
                  f"mean accepted length {r.mean_accepted_length:.2f}" if r.mean_accepted_length is not None else "")
        click.echo(f"#{r.id} {r.created_at} {r.kind} '{r.tag}' {r.method or ''} {r.draft or ''} "
                   f"{'k=' + str(r.k) if r.k else ''} {figure} ({r.source})")


@calibrations.command("add")
@click.option("--tag", required=True)
@click.option("--target")
@click.option("--draft")
@click.option("--method")
@click.option("-k", "--num-speculative-tokens", "k", type=int)
@click.option("--acceptance-rate", type=float)
@click.option("--mean-accepted-length", type=float)
@click.option("--source", required=True, help="Where the figure comes from (a benchmark run, a dashboard, ...).")
@click.pass_context
def calibrations_add(ctx, tag, target, draft, method, k, acceptance_rate, mean_accepted_length, source) -> None:
    """Record a measured acceptance by hand (a new row; nothing is overwritten)."""
    from ..core.errors import SpecError  # noqa: PLC0415
    from ..store import Store  # noqa: PLC0415

    if (acceptance_rate is None) == (mean_accepted_length is None):
        raise SpecError("acceptance_rate", "give exactly one of --acceptance-rate or --mean-accepted-length",
                        "one of the two")
    if acceptance_rate is not None and not 0 <= acceptance_rate <= 1:
        raise SpecError("acceptance_rate", f"must be in [0, 1], got {acceptance_rate}", "a rate in [0, 1]")
    with Store((ctx.obj or {}).get("store")) as s:
        row = s.add("acceptance", tag, {"entered_by_hand": True}, source, target=target, draft=draft, method=method,
                    k=k, acceptance_rate=acceptance_rate, mean_accepted_length=mean_accepted_length)
    click.echo(f"recorded observation #{row}")


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def models(fmt: str) -> None:
    """List the embedded model catalog."""
    import json  # noqa: PLC0415

    from ..catalog import catalog_entry, catalog_ids, load_model  # noqa: PLC0415
    from ..core.weights import total_params  # noqa: PLC0415

    rows = []
    for model_id in catalog_ids():
        spec = load_model(model_id)
        kinds = sorted({layer.kind for layer in spec.layers})
        rows.append({"id": model_id, "model_type": spec.model_type, "layers": spec.num_layers,
                     "params_b": round(total_params(spec) / 1e9, 3), "moe": spec.is_moe,
                     "attention": "+".join(kinds), "kv_heads": spec.num_kv_heads,
                     "quantization": spec.quantization.method if spec.quantization else None,
                     "source": catalog_entry(model_id)["source"]})
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    width = max(len(r["id"]) for r in rows)
    click.echo(f"{'id':{width}}  {'type':12} {'layers':>6} {'params':>9}  attention     quant")
    for r in rows:
        click.echo(f"{r['id']:{width}}  {r['model_type']:12} {r['layers']:>6} {r['params_b']:>8.2f}B  "
                   f"{r['attention']:13} {r['quantization'] or '-'}")


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def gpus(fmt: str) -> None:
    """List the GPU catalog (memory as the driver reports it, bandwidth, dense FLOP/s, sources)."""
    import json  # noqa: PLC0415

    from ..catalog import all_gpus  # noqa: PLC0415
    from ..core.units import GiB  # noqa: PLC0415

    specs = all_gpus()
    if fmt == "json":
        click.echo(json.dumps([{"id": g.gpu_id, "name": g.name, "vendor": g.vendor, "memory_bytes": g.memory_bytes,
                                "memory_bandwidth_bytes_s": g.memory_bandwidth_bytes_s, "bf16_flops": g.bf16_flops,
                                "fp8_flops": g.fp8_flops, "interconnect_bytes_s": g.interconnect_bytes_s,
                                "sources": g.sources} for g in specs], indent=2))
        return
    click.echo(f"{'id':20} {'memory GiB':>10} {'HBM TB/s':>9} {'bf16 TFLOP/s':>13} {'fp8 TFLOP/s':>12} {'link GB/s':>10}")
    for g in specs:
        fp8 = f"{g.fp8_flops / 1e12:,.0f}" if g.fp8_flops else "-"
        click.echo(f"{g.gpu_id:20} {g.memory_bytes / GiB:>10.2f} {g.memory_bandwidth_bytes_s / 1e12:>9.2f} "
                   f"{g.bf16_flops / 1e12:>13,.0f} {fp8:>12} {g.interconnect_bytes_s / 1e9:>10.0f}")


def main(argv: list[str] | None = None) -> None:
    from ..core.errors import SpecError  # noqa: PLC0415

    try:
        cli.main(args=argv, prog_name="specsize", standalone_mode=False)
    except SpecError as err:
        _fail(str(err))
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.ClickException as err:
        message = err.format_message().replace("\n", " ")
        _fail(message, EXIT_BAD_INPUT if err.exit_code in (1, 2) else err.exit_code)
    except SystemExit:
        raise
    except Exception as err:  # a bug: one line, unless the user asks for the traceback
        if os.environ.get("SPECSIZE_DEBUG"):
            raise
        _fail(f"internal error: {type(err).__name__}: {err} (set SPECSIZE_DEBUG=1 for the traceback)", EXIT_INTERNAL)
    sys.exit(0)


if __name__ == "__main__":
    main()
