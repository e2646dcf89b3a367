"""The public API: one request in, one typed result out. The CLI (and later the service and the sweeps) call
only this module.

    import specsize
    request = specsize.load_request("examples/llama8b-eagle3-h100.yaml", concurrency=64)
    result = specsize.plan(request)
    result.verdict.verdict, result.to_dict()   # to_dict() is exactly `specsize plan --format json`

This layer reads files (deployment files, traces, the calibration store, the catalog) and hands typed objects
down to the planner, which reads none.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from math import inf
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .core.errors import SpecError
from .core.specs import ModelSpec
from .core.speculation import mean_without_its_k
from .inputs.load import EMBEDDED, load_request, parse_on_off
from .inputs.request import Request, info
from .inputs.resolve import Resolved, check_envelope_scenario, check_scenario, resolve
from .planner.result import PlanResult

if TYPE_CHECKING:  # the other result types load with their commands (numpy, the simulator): `plan` stays light
    from .core.speculation import Acceptance
    from .planner.live import LiveCheck
    from .planner.load_sweep import LoadSweep
    from .planner.report import ReportData
    from .planner.search import SearchResult
    from .planner.simulate import SimulationReport
    from .planner.speedup import SpeedupReport

_LAZY_TYPES = {"LiveCheck": "live", "ReportData": "report", "SearchResult": "search",
               "SimulationReport": "simulate", "SpeedupReport": "speedup", "LoadSweep": "load_sweep"}


def __getattr__(name: str) -> Any:
    if name in _LAZY_TYPES:
        import importlib  # noqa: PLC0415

        return getattr(importlib.import_module(f"specsize.planner.{_LAZY_TYPES[name]}"), name)
    raise AttributeError(f"module 'specsize.api' has no attribute {name!r}")

__all__ = ["Request", "load_request", "plan", "simulate", "speedup", "stops_paying", "report", "search", "check_live",
           "models", "gpus", "published_variant", "PlanResult", "SimulationReport", "SpeedupReport", "LoadSweep",
           "ReportData", "SearchResult", "LiveCheck"]

METRICS_DEADLINE_S = 30.0  # the whole /metrics response, however slowly it trickles in


def _request(request: Request | None, overrides: dict) -> Request:
    if request is None:
        return load_request(**overrides)
    if not isinstance(request, Request):  # plan("d.yaml"): the file goes through load_request
        raise SpecError("request", f"must be a Request, got {type(request).__name__} {request!r:.80}",
                        "specsize.load_request(PATH, ...) or keyword fields (target=..., gpu=...)")
    return request.replace(**overrides) if overrides else request


# speedup's table is --batch-size x -k at --context-len: these settings and the workload's do not enter it
SPEEDUP_UNREAD = ("headroom", "tpot_slo_ms", "acceptance_spread")


def _unread_note(q: Request) -> tuple[str, ...]:
    """The note naming the settings given to `speedup` (flags, keywords) that its table does not read; a deployment
    file's keys are its own to hold. They had been dropped without a word."""
    from .inputs.fields import WORKLOAD  # noqa: PLC0415
    from .inputs.request import FIELDS  # noqa: PLC0415

    unread = [name for name, f in FIELDS.items() if (f.metadata["specsize"].group == WORKLOAD or name in SPEEDUP_UNREAD)
              and q.source_of(name) == "override"]
    if not unread:
        return ()
    return (f"{', '.join(unread)} not used: speedup's table is --batch-size x -k at --context-len (no workload, "
            "headroom policy, TPOT target or acceptance spread enters it)",)


def _progress(progress: object) -> None:
    if progress is not None and not callable(progress):
        raise SpecError("progress", f"must be callable, got {progress!r:.80}", "a function (done, total) -> None")


@lru_cache(maxsize=8)
def catalog_models(vocab_size: int | None = None) -> tuple[ModelSpec, ...]:
    """Every catalog model, or those whose config gives this vocabulary (and those whose config does not say, as
    Medusa's): where the ranked fixes look for smaller drafts and EAGLE heads, which share the target's vocabulary.
    Only those are built (`specsize plan` runs in well under a second)."""
    from .catalog import catalog_ids, load_model  # noqa: PLC0415
    from .catalog.models import catalog_vocab  # noqa: PLC0415

    return tuple(load_model(model_id) for model_id in catalog_ids()
                 if vocab_size is None or catalog_vocab(model_id) in (None, vocab_size))


def _notes(r: Resolved) -> tuple[str, ...]:
    from .engines.registry import beyond_known  # noqa: PLC0415

    notes = []
    if r.workload_defaulted:
        notes.append("no workload given; using the default envelope of the embedded deployment")
    newer = beyond_known(r.request.engine, r.request.engine_version)
    if newer:
        notes.append(newer)
    from .engines.emit import flags_note  # noqa: PLC0415

    older = flags_note(r.request.engine, r.request.engine_version)
    if older:
        notes.append(older)
    gpu = r.deployment.gpu
    if gpu.segment != "datacenter" and not (r.request.given("other_processes_gib") or r.request.nvidia_smi
                                            or r.request.given("shared_reserved_gib")):
        effect = ("shrinks SGLang's pool by mem_fraction_static x that" if r.profile.engine == "sglang" else
                  "makes vLLM refuse a gpu_memory_utilization above the free share")
        notes.append(f"{gpu.name} is a {gpu.segment} card: a desktop, WSL or other processes often hold memory on "
                     f"it, which {effect}; give --other-processes-gib or --nvidia-smi FILE")
    return _model_notes(r) + tuple(notes) + _drafter_notes(r) + _unused_notes(r)


def _unused_notes(r: Resolved) -> tuple[str, ...]:
    """A drafter's settings beside no drafter: said, not refused (a sweep's `base:` or a what-if may hold them for
    the cells that do speculate, beside a `method: none` one)."""
    if r.deployment.speculative.enabled:
        return ()
    unused = [name for name in ("acceptance_rate", "mean_accepted_length", "tree_topk", "num_draft_tokens")
              if r.request.given(name) and not (name == "tree_topk" and r.request.tree_topk == 1)]  # 1: the chain
    return (f"{', '.join(unused)} not used: the deployment has no speculative method",) if unused else ()


def _model_notes(r: Resolved) -> tuple[str, ...]:
    """What a target or drafter read as a published variant of a catalog model was priced as
    (catalog.models.variant_note)."""
    from .catalog.models import variant_note  # noqa: PLC0415

    draft = r.deployment.speculative.draft
    return tuple(note for note in (variant_note(r.deployment.target), draft and variant_note(draft)) if note)


def _drafter_notes(r: Resolved, candidates: tuple = ()) -> tuple[str, ...]:
    """What the drafter was taken as where the request left it open: a head derived from the target's config, the
    drafter's shape SGLang picks itself, k as vLLM defaults it for MTP, or the share of decode steps the engine's
    n-gram lookup is taken to propose in (AccountingProfile.ngram_proposal_rate), for the request's drafter or a
    `speedup` candidate."""
    sp = r.deployment.speculative
    notes = [r.drafter_note] if r.drafter_note else []
    drafts = [("", sp.draft)] + [(f"candidate {c.label}: ", c.speculative.draft) for c in candidates]
    for whose, draft in drafts:  # the request's drafter, and each `speedup --candidate`
        if draft is not None and draft.is_derived:
            flag = "draft=" if whose else "--draft "
            notes.append(f"{whose}no readable head config: priced {draft.source} (catalog.configs.standard_head), in "
                         "memory and in time; " + (f"give the head's config.json or model directory ({flag}PATH) for "
                                                   "its own layout" if draft.names_checkpoint else
                                                   f"pass {flag.strip()} for the real one"))
    rates = [sp.proposal_rate] if sp.method == "ngram" and not r.request.given("proposal_rate") else []
    if candidates:  # `speedup --candidate`s: each a drafter of its own
        from .inputs.candidates import candidate_fields  # noqa: PLC0415

        rates += [c.speculative.proposal_rate for c in candidates
                  if c.speculative.method == "ngram" and "proposal_rate" not in candidate_fields(c.label)]
    if any(rate == r.profile.ngram_proposal_rate < 1 for rate in rates):  # the engine's share stood in
        from .engines.vllm import NGRAM_LOOKUP, NGRAM_PROPOSAL_SPREAD  # noqa: PLC0415

        low, high = NGRAM_PROPOSAL_SPREAD
        notes.append(f"n-gram priced with a lookup match in {r.profile.ngram_proposal_rate:.0%} of decode steps (no "
                     f"--proposal-rate given: vLLM's lookup as specsize deploys it, prompt_lookup_min "
                     f"{NGRAM_LOOKUP[0]} / max {NGRAM_LOOKUP[1]}, matched in {low:.0%}-{high:.0%} of steps on four "
                     "published workloads; docs/performance.md); the share is your workload's: give --proposal-rate, "
                     "or read it from a running server with check-live")
    return tuple(notes)


def _lengths_source(request: Request) -> str:
    source = request.source_of("prompt_tokens")
    if request.samples_file and source != EMBEDDED:
        return f"samples {request.samples_file}"
    return {"file": "the deployment file", "override": "the given lengths"}.get(source, f"the {source}")


def _envelope_simulation(r: Resolved, duration_s: float, result: PlanResult) -> PlanResult:
    from .planner.scenario import envelope_settings, fold_simulation, run_simulation  # noqa: PLC0415

    q = r.request
    settings = envelope_settings(r.workload, duration_s, q.seed, _lengths_source(q), r.ttft_slo_s)
    report_ = run_simulation(r.deployment, r.workload, r.profile, r.efficiency, r.acceptance, r.tpot_slo_s, r.tree,
                             settings, q.headroom)
    return fold_simulation(result, _with_accuracy(report_))


def _base_plan(r: Resolved) -> PlanResult:
    from .planner.plan import plan as make_plan  # noqa: PLC0415

    return make_plan(r.deployment, r.workload, r.profile, r.request.headroom, efficiency=r.efficiency,
                     acceptance=r.acceptance, tpot_slo_s=r.tpot_slo_s, tree=r.tree)


def _plan(r: Resolved, simulate_s: float | None, result: PlanResult | None = None) -> PlanResult:
    from .planner.analysis import analyse_plan  # noqa: PLC0415

    q = r.request
    result = result or _base_plan(r)
    if simulate_s is not None:
        result = _envelope_simulation(r, simulate_s, result)
    result = analyse_plan(result, r.profile, r.efficiency, r.acceptance, gpus_per_node=q.gpus_per_node,
                          spare=q.spare, failure_unit=q.failure_unit, storage_bandwidth_bytes_s=q.storage_gbs * 1e9,
                          ttft_slo_s=r.ttft_slo_s, tpot_slo_s=r.tpot_slo_s, fragile_below=q.fragile_below,
                          catalog=lambda: catalog_models(r.deployment.target.vocab_size), engine_version=q.engine_version)
    return replace(result, notes=_notes(r) + tuple(result.memory.engine_terms.get("notes", ())))


def plan(request: Request | None = None, **overrides: Any) -> PlanResult:
    """The whole plan: memory, envelope, verdict, performance, ranked fixes, robustness, placement, engine
    commands, and (with `simulate=True`) the burst simulation folded into the verdict."""
    q = _request(request, overrides)
    if q.simulate:
        check_envelope_scenario(q, "plan")
    return _plan(resolve(q), q.duration if q.simulate else None)


def _burst(q: Request, w) -> tuple[float | None, str | None]:
    """The burst factor a simulation applies and where it came from. Without a rate the scenario is the
    envelope's own burst; with a rate, only a burst someone asked for applies (never a default's)."""
    if q.client_concurrency is not None:
        return None, None
    if q.rate is None or q.given("burst_factor") or q.burst_start is not None or q.on_off is not None:
        return w.burst_factor, f"burst_factor ({q.source_of('burst_factor')})"
    return None, None


def _trace(path: str | None, lengths_only: bool = False, image_tokens: int = 0):
    """The trace (or lengths file) at `path`, refused past the requests a simulation takes before its rows are built;
    a lengths file's prompts with `image_tokens` more each: the images of every request join its prompt, as they
    join the envelope's and the generated prompts (`--lengths-file F --images-per-request 2` had resampled prompts
    without them)."""
    if path is None:
        return None
    from .catalog.traces import read_trace, read_trace_lengths  # noqa: PLC0415
    from .planner.scenario import MAX_REQUESTS  # noqa: PLC0415

    if not lengths_only:
        return read_trace(path, MAX_REQUESTS)
    lengths = read_trace_lengths(path, MAX_REQUESTS)
    if image_tokens:
        lengths = replace(lengths, prompt_tokens=[tokens + image_tokens for tokens in lengths.prompt_tokens])
    return lengths


def simulate(request: Request | None = None, progress: Callable[[int, int], None] | None = None,
             **overrides: Any) -> SimulationReport:
    """Replay the scenario the request describes on a continuous-batching, paged-KV server, spec vs no-spec.
    The report's `scenario` says what ran and where each part of it came from."""
    from .planner.scenario import SimSettings, run_simulation  # noqa: PLC0415

    _progress(progress)
    q = _request(request, overrides)
    check_scenario(q)
    r = resolve(q)
    factor, source = _burst(q, r.workload)
    settings = SimSettings(
        duration_s=q.duration, seed=q.seed, rate_req_s=q.rate,
        # images (r.workload.image_tokens_per_request) join the simulated prompts as they join the envelope's
        prompt_median=_plus(q.prompt_tokens_median, r.workload.image_tokens_per_request),
        prompt_p99=_plus(q.prompt_tokens_p99, r.workload.image_tokens_per_request), output_median=q.output_tokens_median,
        output_p99=q.output_tokens_p99, burst_factor=factor, burst_source=source, burst_start_s=q.burst_start,
        burst_duration_s=q.burst_duration, on_off=parse_on_off(q.on_off), ramp_to_req_s=q.ramp_to,
        prefix_hit_rate=q.prefix_hit_rate, compare=not q.no_compare, ttft_slo_s=r.ttft_slo_s,
        lengths_source=_lengths_source(q), trace=_trace(q.trace),
        lengths=_trace(q.lengths_file, lengths_only=True, image_tokens=r.workload.image_tokens_per_request),
        client_concurrency=q.client_concurrency, num_requests=q.num_requests, offline=q.offline)
    report_ = run_simulation(r.deployment, r.workload, r.profile, r.efficiency, r.acceptance, r.tpot_slo_s, r.tree,
                             settings, q.headroom, progress)
    return replace(_with_accuracy(report_), notes=_model_notes(r) + _unused_notes(r))


def _with_accuracy(report_: SimulationReport) -> SimulationReport:
    """The simulation with the simulator's measured accuracy on published runs (catalog/data/timing_accuracy.json),
    shown beside its timings."""
    from .catalog.accuracy import load_timing_accuracy  # noqa: PLC0415

    return replace(report_, accuracy=load_timing_accuracy())


def _plus(tokens: float | None, extra: int) -> float | None:
    return None if tokens is None else tokens + extra


def _needs_speculation(r: Resolved, no_method: str, no_acceptance: str) -> Acceptance:
    """The request's measured acceptance, given a speculative method; else a SpecError naming the missing one."""
    if not r.deployment.speculative.enabled:
        raise SpecError("method", no_method, "draft_model, eagle, eagle3, mtp, medusa, ngram")
    if r.acceptance is None:
        raise SpecError("acceptance_rate", no_acceptance,
                        "--acceptance-rate A or --mean-accepted-length T (measured, never assumed)")
    return r.acceptance


MAX_CANDIDATES = 32  # drafters compared beside the deployment's own in one speed-up table
MAX_SPEEDUP_CELLS = 20_000  # batch sizes x k x drafters (1,000 x 64 took 2.4 s and 22 MB; 20,000 x 64 minutes)


def speedup(request: Request | None = None, **overrides: Any) -> SpeedupReport:
    """What speculation is worth at each batch size and k, for the deployment's drafter and any candidates."""
    from .core.perf import offline_efficiency  # noqa: PLC0415
    from .inputs.candidates import parse_candidate  # noqa: PLC0415
    from .planner.plan import validate  # noqa: PLC0415
    from .planner.speedup import compare_drafters  # noqa: PLC0415

    q = _request(request, overrides)
    r = resolve(q)
    d = r.deployment
    validate(d, r.workload, q.headroom)
    acceptance = _needs_speculation(r, "a speed-up needs a speculative method",
                                    "speedup needs the acceptance of the drafter")
    if d.gpu.memory_bandwidth_bytes_s <= 0:
        raise SpecError("gpu", "a GPU given only by --gpu-memory-gib has no bandwidth or FLOP/s", "a catalog GPU id")
    ks = list(q.speedup_ks or (d.speculative.num_speculative_tokens,))
    if mean_without_its_k(q.mean_accepted_length, q.measured_at_k, ks):
        # given beside several k (flags, a service request, or a file that names no k) it had been read at the list's
        # first (GLM-5 MTP at k=3: 2.72x under -k 1,3, 1.50x under -k 3,1). A deployment file's mean beside the file's
        # own k is pinned to that k (inputs.load._keep_measured_k); the request's, not the resolved acceptance, whose
        # measured_at_k defaults to the deployment's k
        raise SpecError("measured_at_k", f"a mean accepted length of {q.mean_accepted_length:g} beside several k "
                        f"({', '.join(map(str, ks))}) and no k it was measured at",
                        "measured_at_k (--measured-at-k K: the k of the measurement), or acceptance_rate (per "
                        "token: no k)")
    cells = len(q.batch_sizes) * len(ks) * (1 + len(q.candidates))
    if len(q.candidates) > MAX_CANDIDATES or cells > MAX_SPEEDUP_CELLS:
        field = "candidate" if len(q.candidates) > MAX_CANDIDATES else "batch_sizes"
        raise SpecError(field, f"{len(q.batch_sizes):,} batch sizes x {len(ks)} values of k x {1 + len(q.candidates)} "
                        f"drafters = {cells:,} table cells", f"at most {MAX_CANDIDATES} candidates and "
                        f"{MAX_SPEEDUP_CELLS:,} cells (a table a reader can use)")
    given_rate = q.proposal_rate if q.given("proposal_rate") else None
    candidates = tuple(parse_candidate(text, r.profile, d.target, d.tp, q.engine_version, given_rate)
                       for text in q.candidates)
    for candidate in candidates:  # each candidate is a deployment of its own: checked as `plan` checks one
        try:
            validate(replace(d, speculative=candidate.speculative), r.workload, q.headroom)
        except SpecError as err:  # the candidate's own field (candidate.method, ...), as parse_candidate names them
            field = err.field if err.field.startswith("candidate") else f"candidate.{err.field}"
            raise SpecError(field, f"{candidate.label}: {err.problem}", err.accepted) from None
    eff = offline_efficiency(r.efficiency) if q.offline else r.efficiency  # LLM.generate: no API server in front
    result = compare_drafters(d, r.profile, eff, acceptance, list(q.batch_sizes), ks, q.context_len, r.tree,
                              candidates)
    return replace(result, notes=_model_notes(r) + _drafter_notes(r, candidates) + result.notes + _unread_note(q))


def stops_paying(request: Request | None = None, progress: Callable[[int, int], None] | None = None,
                 **overrides: Any) -> LoadSweep:
    """Where speculation stops paying as the load grows: `simulate` spec vs no-spec at request rates from 1/8 to 8
    times the request's `rate` (or, without one, the rate that keeps `concurrency` in flight), bisecting the
    first step where the speculative server's mean end-to-end latency reaches the plain one's
    (planner/load_sweep.py). Each simulation runs the request's scenario (`duration`, lengths, bursts) at its rate."""
    from .planner.load_sweep import MAX_RUNG_DURATION_S, LoadPoint, ladder, load_point, sweep_loads  # noqa: PLC0415
    from .planner.scenario import MAX_REQUESTS, replica_envelope_rate  # noqa: PLC0415

    _progress(progress)
    q = _request(request, overrides)
    check_scenario(q)
    if q.trace or q.client_concurrency is not None:
        field = "trace" if q.trace else "client_concurrency"
        raise SpecError(field, "a load sweep sets the request rate itself", "an open-loop scenario (no trace, no "
                        "client_concurrency): the sweep's rates are Poisson arrivals")
    if q.no_compare:
        raise SpecError("no_compare", "a load sweep compares speculation with the same server without it",
                        "leave --no-compare off")
    if q.duration > MAX_RUNG_DURATION_S:
        raise SpecError("duration", f"{q.duration:g} s for each of the sweep's ~20 simulations",
                        f"at most {MAX_RUNG_DURATION_S:,} s per rate in a load sweep (simulate runs longer scenarios)")
    r = resolve(q)
    d = r.deployment
    acceptance = _needs_speculation(r, "where speculation stops paying needs a speculative method",
                                    "simulating speculation needs the drafter's acceptance")
    if q.rate is not None:
        centre, source = q.rate, "rate"
    else:
        centre = d.replicas * replica_envelope_rate(d, r.workload, r.profile, r.efficiency, acceptance, r.tree,
                                                    q.offline)
        source = "littles_law"

    shape: list[str] = []  # the scenario of the rungs, as the first one ran it

    def evaluate(rate: float) -> LoadPoint:
        # a ramp keeps its shape on every rung: from the rung's rate to ramp_to / centre times it (each rung had ramped
        # to the user's ramp_to: the 1 req/s rung of a sweep around 8 -> 16 ran at 8.5 req/s on average)
        ramp = q.ramp_to * rate / centre if q.ramp_to is not None else None
        rep = simulate(q.replace(rate=rate, ramp_to=ramp))
        spec, plain = rep.spec, rep.no_spec
        assert plain is not None  # compare is on
        if not shape and rep.scenario is not None:  # its rate is the sweep's, not one the user gave
            shape.append(replace(rep.scenario, rate_source="swept").summary)
        return load_point(rate, spec, plain)

    top = info("rate").maximum  # the highest rate a simulation takes (the request field's bound)
    max_rate = float(top) if top is not None else inf
    highest = ladder(centre, max_rate)[-1]
    if highest * q.duration > MAX_REQUESTS:  # refused before the first rung runs, as simulate refuses it
        raise SpecError("rate" if q.rate is not None else "duration",
                        f"the sweep's top rung, {highest:,.1f} req/s for {q.duration:g} s, is about "
                        f"{highest * q.duration:,.0f} requests; at most {MAX_REQUESTS:,} are simulated",
                        "a lower rate or a shorter duration")
    result = sweep_loads(evaluate, centre, source, progress=progress, max_rate=max_rate)
    return replace(result, scenario=shape[0] if shape else "")


def report(request: Request | None = None, **overrides: Any) -> ReportData:
    """Everything a reviewer's report shows: the analysed plan with its burst simulation (unless
    `simulate=False` is given as an override or the plan cannot be simulated), figures' data and controls."""
    from .planner.report import build_report  # noqa: PLC0415
    from .core.memory import pool_never_built  # noqa: PLC0415

    q = _request(request, overrides)
    if q.simulates(True):
        check_envelope_scenario(q, "report")
    r = resolve(q)
    d = r.deployment
    wants = q.simulates(default=True)
    runnable = d.gpu.memory_bandwidth_bytes_s > 0 and (r.acceptance is not None or not d.speculative.enabled)
    base = _base_plan(r)
    # an engine without the memory to start has no burst to simulate (core.memory.pool_never_built)
    runnable = runnable and base.memory.kv_blocks > 0 and not pool_never_built(d, base.memory)
    result = _plan(r, q.duration if wants and runnable else None, base)
    return build_report(result, r.efficiency, r.acceptance, r.tree, q.settings(), q.security)


def search(spec: str | Path, simulate: bool = True) -> SearchResult:
    """The cheapest configuration of a search spec (YAML) that meets its SLO with headroom."""
    from .catalog.gpus import load_efficiency  # noqa: PLC0415
    from .engines import resolve_profile  # noqa: PLC0415
    from .inputs.search_spec import read_search_spec  # noqa: PLC0415
    from .planner.search import run_search  # noqa: PLC0415
    from .planner.search_confirm import confirmer  # noqa: PLC0415

    space = read_search_spec(str(spec))
    profile = resolve_profile(space.engine_name, space.engine_version)
    confirm = confirmer(space, profile, load_efficiency) if simulate else None
    return run_search(space, profile, load_efficiency, confirm)


def _read(path: str | Path, field: str) -> str:
    from .catalog.files import read_text  # noqa: PLC0415

    return read_text(path, field, "a readable file")


def _metrics_text(source: str) -> str:
    """The /metrics text of a URL (adapters.http_fetch: one GET, METRICS_DEADLINE_S for the whole answer, no
    redirects) or a file."""
    if not source.startswith(("http://", "https://")):
        return _read(source, "metrics")
    from .adapters.http_fetch import fetch  # noqa: PLC0415
    from .catalog.files import decode_text, size_limit  # noqa: PLC0415

    limit = size_limit("metrics")
    return decode_text(fetch(source, METRICS_DEADLINE_S, limit), source, "metrics", "the /metrics text", limit)


def check_live(plan: dict | str | Path, metrics: str | None = None, log: str | Path | None = None) -> LiveCheck:
    """Hold a running vLLM or SGLang server (its /metrics URL or a saved copy, and/or its start-up log) against a plan
    (the dict of `PlanResult.to_dict()` or a file holding that JSON)."""
    import json  # noqa: PLC0415

    from .engines.readers import read_metrics, read_startup_log  # noqa: PLC0415
    from .planner.live import check  # noqa: PLC0415

    if not isinstance(plan, (dict, str, Path)):
        raise SpecError("plan", f"must be a plan dict or a file, got {type(plan).__name__}",
                        "PlanResult.to_dict(), or a file of specsize plan --format json")
    for name, value in (("metrics", metrics), ("log", log)):
        if value is not None and not isinstance(value, (str, Path)):
            raise SpecError(name, f"must be a path or URL, got {type(value).__name__}", "a string or a Path")
    if not isinstance(plan, dict):
        try:
            plan = json.loads(_read(plan, "plan"))
        except json.JSONDecodeError as err:
            raise SpecError("plan", f"{plan} is not JSON ({err.msg})", "specsize plan --format json output") from None
        except SpecError:  # the file's own read error (missing, unreadable): a ValueError too, said as it is
            raise
        except ValueError:  # a number past Python's 4,300-digit limit on converting digit strings
            raise SpecError("plan", f"{plan} holds a number of more than 4,300 digits",
                            "specsize plan --format json output") from None
        except RecursionError:
            raise SpecError("plan", f"{plan} nests too deeply to be a plan", "specsize plan --format json output") \
                from None
        if not isinstance(plan, dict):
            raise SpecError("plan", "the file does not hold a plan object", "specsize plan --format json output")
    observed = read_metrics(_metrics_text(str(metrics))) if metrics else None
    startup = read_startup_log(_read(log, "log")) if log else None
    return check(plan, observed, startup)


def models() -> list[dict]:
    """The embedded model catalog, one row per model (`specsize models --format json`)."""
    from .catalog import catalog_entry, catalog_ids, load_model  # noqa: PLC0415
    from .core.weights import total_params  # noqa: PLC0415

    rows = []
    for model_id in catalog_ids():
        spec = load_model(model_id)
        kinds = sorted({layer.kind for layer in spec.layers} | {state.kind for state in spec.state_layers})
        rows.append({"id": model_id, "model_type": spec.model_type, "layers": spec.num_layers,
                     "params_b": round(total_params(spec) / 1e9, 3), "moe": spec.is_moe,
                     "attention": "+".join(kinds), "kv_heads": spec.num_kv_heads,
                     "quantization": spec.quantization.method if spec.quantization else None,
                     "source": catalog_entry(model_id)["source"]})
    return rows


def published_variant(model_id: str) -> str | None:
    """The catalog model a published id is read as offline (catalog.variants: a quantized checkpoint, a mirror, a
    revision), from its name alone; None when it is a catalog id itself or no catalog model explains it."""
    from .catalog import catalog_ids  # noqa: PLC0415
    from .catalog.variants import variant_of  # noqa: PLC0415

    variant = variant_of(str(model_id), catalog_ids())
    return variant.base if variant is not None else None


def read_models_by_name_only() -> None:
    """From now on this process, and the processes it starts, read models by name only: catalog ids and their
    published variants, no local path and no hub (the service's promise to its callers)."""
    import os  # noqa: PLC0415

    from .catalog.models import NAMES_ONLY_ENV  # noqa: PLC0415

    os.environ[NAMES_ONLY_ENV] = "1"


def gpus() -> list:
    """The GPU catalog (`specsize gpus`): memory as the driver reports it, bandwidth, FLOP/s, sources."""
    from .catalog import all_gpus  # noqa: PLC0415

    return all_gpus()


def record_live(result: LiveCheck, tag: str, store: str | None, source: str) -> int:
    """Record a live observation in the calibration store under `tag`; returns the row id."""
    from .adapters.store import Store  # noqa: PLC0415

    inputs = result.plan_inputs
    with Store(store) as s:
        # the plan's tree with the row: a tree server's accepted length holds the tree's gain (inputs.resolve reads it)
        tree = {"tree_topk": inputs.get("tree_topk") or 1, "num_draft_tokens": inputs.get("num_draft_tokens")}
        return s.add("live", tag, result.observed.to_dict() | tree | {"violations": result.violations}, source,
                     target=inputs.get("target"), draft=inputs.get("draft"), method=inputs.get("method"),
                     k=inputs.get("num_speculative_tokens"), acceptance_rate=result.observed.acceptance_rate,
                     mean_accepted_length=result.observed.mean_accepted_length)
