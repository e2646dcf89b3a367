"""Simulate a deployment under a request stream, spec vs no-spec, and judge whether it holds.

The deployment "sustains the expected request shape without cache thrashing, scheduling instability or
queue growth" when none of these trips (thresholds in `Thresholds`, documented in docs/simulation.md):

- cache thrashing: more than `preemptions_per_request` preemptions per completed request;
- queue growth: requests left unfinished when the run ends, or a drain after the last arrival longer than
  `drain_factor` x a request's p50 time from its first token to its last (and `min_drain_s`);
- scheduling instability: p90 TTFT of the last quarter of arrivals above `ttft_growth` x that of the first
  quarter (and above `min_ttft_s`): latency that keeps degrading instead of settling; not for requests all sent at
  once (a batch), where the last wait behind the first by construction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..core.accuracy import TimingAccuracy
from ..core.memory import MemoryAccount
from ..core.perf import (Efficiency, draft_extend_tokens, draft_forward_overhead, handover_time, spec_host_per_seq_s,
                         tree_level_acceptance)
from ..core.specs import Deployment, SpeculativeConfig, Workload
from ..core.speculation import Acceptance, Tree, keeps_overlap
from ..core.traffic import decode_context, shared_prefill_rate
from ..simulator.engine import EngineConfig, SimResult, simulate
from ..simulator.scenario import Scenario
from ..simulator.workload import AcceptanceSpec, LengthSpec, Requests
from .perf import costs_for

# the most engine steps one simulated run may take (each of spec and no-spec): 3 million run in 1-4 minutes here
# (14,000-70,000 steps/s); the 72,000-request hour of bench/sim_speed.py takes 89,000; docs/simulation.md
MAX_STEPS = 3_000_000

CACHE_THRASHING, UNFINISHED, QUEUE_GROWTH, INSTABILITY, THIN_HEADROOM, SLO_MISSED = (
    "cache_thrashing", "unfinished", "queue_growth", "scheduling_instability", "thin_headroom", "slo_missed")
PROBLEM_KINDS = (CACHE_THRASHING, UNFINISHED, QUEUE_GROWTH, INSTABILITY, THIN_HEADROOM, SLO_MISSED)
SEVERE = frozenset({CACHE_THRASHING, UNFINISHED})  # these make a plan does_not_fit; the others make it thin


class Problem(str):
    """What a simulation found, as a kind (`PROBLEM_KINDS`) with its sentence. A `str` of the sentence, so
    renderers print it; the verdict reads `kind`."""

    kind: str

    def __new__(cls, kind: str, message: str) -> "Problem":
        assert kind in PROBLEM_KINDS
        obj = super().__new__(cls, message)
        obj.kind = kind
        return obj


@dataclass(frozen=True)
class Percentiles:
    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None

    def to_dict(self) -> dict:
        return {"p50": self.p50, "p90": self.p90, "p99": self.p99, "mean": self.mean}


@dataclass(frozen=True)
class Thresholds:
    preemptions_per_request: float = 0.01
    drain_factor: float = 3.0
    min_drain_s: float = 30.0
    ttft_growth: float = 3.0
    min_ttft_s: float = 2.0
    kv_headroom: float | None = None  # the plan's headroom policy: a KV peak above 1 - policy is thin
    slo_attainment: float = 0.99  # with a TTFT / TPOT SLO: the share of requests that must finish within it


@dataclass(frozen=True)
class Slo:
    ttft_s: float | None = None
    tpot_s: float | None = None


def engine_config(d: Deployment, mem: MemoryAccount, eff: Efficiency, tree: Tree = Tree(),
                  prefix_hit_rate: float = 0.0) -> EngineConfig:
    s = mem.settings
    k = s.num_speculative_tokens if d.speculative.enabled else 0
    costs = costs_for(d, mem, eff, k, tree)
    eff = costs.eff  # with the engine release's own host and API-server costs
    cpu_drafted = d.speculative.kind.cpu_drafted  # the n-gram lookup on the host: its time per sequence and per token
    assert costs.target_co is not None
    if k and tree.topk > 1:  # a tree of fewer draft nodes than depths verifies a chain of them: N - 1 drafts at most
        k = min(k, tree.nodes(k) - 1)
    return EngineConfig(
        num_blocks=mem.usable_blocks, block_size=s.block_size, max_num_seqs=s.max_num_seqs,
        # a round on pipeline stages schedules a batch a stage, each within the budget (core.perf.StepCoefficients.
        # stages): the simulated step is the round
        max_num_batched_tokens=s.max_num_batched_tokens * costs.target_co.stages, k=k, target=costs.target_co,
        draft=costs.draft_co, draft_steps=costs.draft_steps, draft_width=costs.draft_width,
        # an extend over the accepted tokens (vLLM 0.8-0.10, SGLang before 0.4.10) priced at its k + 1 bound
        draft_extend_tokens=draft_extend_tokens(costs),
        tree_extra=tree.nodes(k) - 1 - k if k and tree.topk > 1 else 0,
        draft_prefills=costs.draft_prefills, expansion_query_s=costs.expansion_query_s,
        serial_output_s=costs.serial_output_s,
        spec_step_overhead_s=eff.spec_step_overhead_s + handover_time(costs) if k else 0.0,
        draft_setup_overhead_s=costs.draft_setup_s,  # core.perf: only a drafter that keeps KV cache runs that pass
        draft_step_overhead_s=draft_forward_overhead(costs), frontend_latency_s=eff.frontend_latency_s,
        frontend_serial_s=eff.frontend_serial_s, prefill_first=s.prefill_first, scheduler_steps=s.scheduler_steps,
        group_streams=s.group_streams,
        cpu_draft_per_seq_s=spec_host_per_seq_s(costs) if k else 0.0,
        cpu_draft_per_token_s=eff.ngram_scan_per_token_s if cpu_drafted else 0.0,
        proposal_rate=d.speculative.proposal_rate,
        prefix_hit_rate=prefix_hit_rate, kv_layers=mem.pool_layers, recv_interval=s.recv_interval,
        graph_max_tokens=s.graph_max_tokens, graph_prompt_tokens=s.graph_prompt_tokens,
        graph_max_context=s.graph_max_context,
        admission=s.admission, mla_prompt_mha=s.mla_prompt_mha, decode_reserve=s.decode_reserve,
        scheduled_ahead=s.scheduled_ahead and (not k or keeps_overlap(d.speculative.kind, s.async_drafters,
                                                                       s.spec_v2, tree.topk)))


def _pct(values: np.ndarray) -> Percentiles:
    v = values[~np.isnan(values)]
    if not len(v):
        return Percentiles(None, None, None, None)
    p50, p90, p99 = np.percentile(v, [50, 90, 99])
    return Percentiles(float(p50), float(p90), float(p99), float(v.mean()))


@dataclass
class SimSummary:
    label: str
    requests: int
    completed: int
    unfinished: int  # too_long included
    ttft_s: Percentiles
    tpot_s: Percentiles
    e2e_s: Percentiles
    throughput_tok_s: float
    goodput_req_s: float | None
    preemptions: int
    recomputed_tokens: int
    max_queue: int
    kv_peak_fraction: float
    steps: int
    end_time_s: float
    littles_law: dict
    sustains: bool
    problems: list[Problem]
    series: dict = field(repr=False)
    too_long: int = 0  # requests longer than the whole KV pool: never run (SimResult.too_long)


def _served_p50(r: SimResult) -> float:
    """The median time the finished requests took from their first token to their last: their decode, which a queue
    in front of the engine does not lengthen."""
    decode = (r.e2e_s - r.ttft_s)[r.finished]
    return float(np.median(decode)) if len(decode) else 0.0


def summarize(label: str, r: SimResult, req: Requests, slo: Slo, th: Thresholds) -> SimSummary:
    completed = int(r.finished.sum())
    sent = r.arrival_s[np.isfinite(r.arrival_s)]  # a closed loop's arrivals are known only after the run
    window = float(sent.max()) if len(sent) else 0.0
    span = max(r.end_time_s, 1e-9)
    throughput = float(r.output_tokens[r.finished].sum()) / span
    goodput = met = None
    if slo.ttft_s or slo.tpot_s:
        ok = r.finished.copy()
        if slo.ttft_s:
            ok &= r.ttft_s <= slo.ttft_s
        if slo.tpot_s:
            ok &= np.nan_to_num(r.tpot_s, nan=0.0) <= slo.tpot_s
        goodput = float(ok.sum()) / span
        met = float(ok.sum()) / max(1, len(req))
    e2e = _pct(r.e2e_s)
    problems: list[Problem] = []
    if completed and r.preemptions > th.preemptions_per_request * completed:
        problems.append(Problem(CACHE_THRASHING, f"cache thrashing: {r.preemptions} preemptions for {completed} completed requests "
                        f"({r.recomputed_tokens:,} tokens recomputed)"))
    unfinished = len(req) - completed
    drain = r.end_time_s - window
    # requests all sent at once (a batch) have no arrivals to outlast and wait their turn by construction: neither a
    # drain nor a growing TTFT is a problem there
    spread = window > 0
    if r.too_long:  # the engine refuses these (vLLM does not start with a max_model_len the pool cannot hold)
        many = r.too_long > 1
        problems.append(Problem(UNFINISHED, f"{r.too_long} request{'s' if many else ''} need{'' if many else 's'} more "
                                            "KV blocks than the whole pool holds: the engine can never run "
                                            f"{'them' if many else 'it'}"))
    left = unfinished - r.too_long
    if left > 0:
        problems.append(Problem(UNFINISHED, f"queue growth: {left} request{'s' if left > 1 else ''} unfinished when "
                                            "the run stopped"))
    # a closed loop holds its clients' requests and no more: its queue cannot grow, and its last request, sent when
    # an answer came, drains behind the others in flight (one end-to-end latency, queueing included) by construction
    elif completed and spread and not req.clients and \
            drain > max(th.min_drain_s, th.drain_factor * (served := _served_p50(r))):
        # against a request's own time in the engine (first token to last), not its end-to-end latency, which the
        # backlog itself lengthens: a burst whose queue outlasts the arrivals is growth however long everyone waited
        problems.append(Problem(QUEUE_GROWTH, f"queue growth: {drain:.0f} s to drain the backlog after the last "
                                              f"arrival ({th.drain_factor:g} x a request's p50 {served:.1f} s from "
                                              f"first token to last allowed; p50 end-to-end {e2e.p50:.1f} s)"))
    if len(req) >= 40 and spread:
        quarter = len(req) // 4
        first = r.ttft_s[:quarter]
        last = r.ttft_s[-quarter:]
        f90 = np.nanpercentile(first, 90) if np.isfinite(first).any() else math.nan
        l90 = np.nanpercentile(last, 90) if np.isfinite(last).any() else math.inf
        if l90 > th.ttft_growth * f90 and l90 > th.min_ttft_s:
            last_part = f"{l90:.2f} s" if math.isfinite(l90) else "no first token at all"
            problems.append(Problem(INSTABILITY, f"scheduling instability: p90 TTFT grows from {f90:.2f} s (first "
                                                 f"quarter) to {last_part} (last quarter)"))
    kv_peak = r.kv_peak_fraction
    if th.kv_headroom is not None and kv_peak > 1 - th.kv_headroom + 1e-9 and not problems:
        problems.append(Problem(THIN_HEADROOM, f"thin headroom: the KV cache peaked at {kv_peak:.1%} of its blocks, "
                                               f"leaving less than the {th.kv_headroom:.0%} headroom policy"))
    if met is not None and met < th.slo_attainment:  # after the others: an overloaded run misses it as a consequence
        limits = " and ".join(f"{name} <= {value * 1e3:g} ms" for name, value in (("TTFT", slo.ttft_s),
                                                                               ("TPOT", slo.tpot_s)) if value)
        problems.append(Problem(SLO_MISSED, f"SLO missed: {met:.1%} of the requests finished within {limits} "
                                            f"(at least {th.slo_attainment:.0%} asked)"))
    in_system = r.area_in_system / span
    rate = len(sent) / span
    mean_e2e = float(np.nanmean(r.e2e_s)) if completed else math.nan
    return SimSummary(
        label=label, requests=len(req), completed=completed, unfinished=unfinished, ttft_s=_pct(r.ttft_s),
        tpot_s=_pct(r.tpot_s), e2e_s=e2e, throughput_tok_s=throughput, goodput_req_s=goodput,
        preemptions=r.preemptions, recomputed_tokens=r.recomputed_tokens,
        max_queue=r.max_waiting,
        kv_peak_fraction=kv_peak,
        steps=r.steps, end_time_s=r.end_time_s,
        # None where nothing completed (no mean end-to-end time): to_dict stays valid JSON for a library caller too
        littles_law={"mean_in_system": in_system, "arrival_rate_x_mean_e2e": rate * mean_e2e if completed else None},
        sustains=not problems, problems=problems, series=r.series, too_long=r.too_long)


@dataclass(frozen=True)
class SimulationReport:
    spec: SimSummary
    no_spec: SimSummary | None
    description: str
    seed: int
    scenario: Scenario | None = None
    # the simulator's measured error on published runs it was not fitted on (catalog; api.simulate attaches it)
    accuracy: TimingAccuracy | None = None
    notes: tuple[str, ...] = ()  # what the run took where the request left an input open (api.simulate)

    def to_dict(self) -> dict:
        """The `sim` object of `specsize simulate --format json` (docs/json.md)."""
        return report_to_dict(self)


def run(d: Deployment, mem_spec: MemoryAccount, mem_plain: MemoryAccount | None, eff: Efficiency, req: Requests,
        seed: int, slo: Slo = Slo(), th: Thresholds = Thresholds(), tree: Tree = Tree(),
        prefix_hit_rate: float = 0.0, progress=None) -> SimulationReport:
    """Simulate the deployment as given and, when `mem_plain` is given, the same without speculation."""
    spec_cfg = engine_config(d, mem_spec, eff, tree, prefix_hit_rate)
    label = d.speculative.method if d.speculative.enabled else "none"
    spec = summarize(label, simulate(spec_cfg, req, seed, progress=progress, max_steps=MAX_STEPS), req, slo, th)
    plain = None
    if mem_plain is not None and d.speculative.enabled:
        plain_d = replace(d, speculative=SpeculativeConfig())
        plain_cfg = engine_config(plain_d, mem_plain, eff, Tree(), prefix_hit_rate)
        plain = summarize("none", simulate(plain_cfg, req, seed, max_steps=MAX_STEPS), req, slo, th)
    return SimulationReport(spec=spec, no_spec=plain, description=req.description, seed=seed)


def acceptance_spec(acceptance: Acceptance | None, k: int, spread: float = 0.0, tree: Tree = Tree()) -> AcceptanceSpec:
    """The per-token acceptance the simulator draws each position at: on an SGLang tree, each depth's (its candidates
    widen a per-token rate given; a mean accepted length measured on the tree already holds that gain), as the
    performance model's pass_tokens reads it."""
    if acceptance is None:
        return AcceptanceSpec(0.0)
    rate = acceptance.per_token(k)
    if acceptance.mean_accepted_length is None:
        rate = float(depth_rates(np.asarray([rate]), k, tree)[0])
    return AcceptanceSpec(rate, spread)


def depth_rates(rates: np.ndarray, k: int, tree: Tree = Tree()) -> np.ndarray:
    """Per-token acceptance rates (a flag's, or a trace's acceptance_rate column, one a request) as the simulator draws
    each position: on an SGLang tree, each depth's rate, which its candidates widen (tree_level_acceptance, once per
    distinct rate); on a chain, the rates themselves."""
    if tree.topk <= 1 or not len(rates):
        return rates
    distinct, where = np.unique(rates, return_inverse=True)
    levels = [tree_level_acceptance(float(rate), k, tree.topk, tree.nodes(k)) for rate in distinct]
    return np.asarray(levels, dtype=float)[where]


def simulated_outputs(w: Workload) -> tuple[int, int]:
    """(median, p99) of the outputs a simulation draws from the workload's: at least one token each, as an engine
    emits (the first is what TTFT times), where the workload says 0."""
    return max(1, w.output_tokens.p50), max(1, w.output_tokens.p99)


def rate_for_concurrency(d: Deployment, mem: MemoryAccount, eff: Efficiency, w: Workload,
                         acceptance: Acceptance | None, tree: Tree = Tree()) -> float:
    """Requests/s that keep `w.concurrency` requests in flight: Little's law, rate = L / W, where W is the
    TTFT plus the mean output times a TPOT, E unshared, stretched by the share u = rate x P of each step spent
    prefilling the arrivals' prompts (P seconds each: core.perf.prefill_share): W = E / (1 - rate x P), so
    rate = L / (E + L x P), the fixed point in closed form (u < 1 at any load: an engine that spends P on each prompt
    completes at most 1 / P of them a second)."""
    from ..core.perf import prefill_share  # noqa: PLC0415
    from .perf import costs_for  # noqa: PLC0415
    from .perf import summarize as perf_summary  # noqa: PLC0415

    s = mem.settings
    batch = max(1, min(w.concurrency, s.max_num_seqs))
    prompt_mean = LengthSpec.lognormal(w.prompt_tokens.p50, w.prompt_tokens.p99).mean
    output_mean = LengthSpec.lognormal(*simulated_outputs(w)).mean
    context = decode_context(prompt_mean, output_mean)
    p = perf_summary(d, mem, eff, acceptance if d.speculative.enabled else None, batch, context,
                     int(prompt_mean), None, tree)
    tpot = p.tpot_s if p.tpot_s is not None else p.tpot_s_no_spec
    plain = costs_for(replace(d, speculative=SpeculativeConfig()), mem, eff, 0, Tree())
    per_prompt = prefill_share(plain, 1.0, prompt_mean, s.max_num_batched_tokens)  # seconds of prefill per arrival
    # an iteration to this point, damped and with u capped at 0.95, had oscillated once u passed 0.75 and settled
    # beyond the cap where prefill alone needed more than the GPU (1-token outputs: 181% of it, 69.9 req/s for 37.4)
    return shared_prefill_rate(w.concurrency, p.ttft_s + output_mean * tpot, per_prompt)


def report_to_dict(rep: SimulationReport) -> dict:
    def one(s: SimSummary) -> dict:
        return {"ttft_s": s.ttft_s.to_dict(), "tpot_s": s.tpot_s.to_dict(), "e2e_s": s.e2e_s.to_dict(),
                "throughput_tok_s": s.throughput_tok_s,
                "goodput_req_s": s.goodput_req_s, "preemptions": s.preemptions,
                "recomputed_tokens": s.recomputed_tokens, "max_queue": s.max_queue,
                "kv_peak_fraction": s.kv_peak_fraction, "requests": s.requests, "completed": s.completed,
                "unfinished": s.unfinished, "too_long": s.too_long, "steps": s.steps, "end_time_s": s.end_time_s,
                "littles_law": s.littles_law, "sustains": s.sustains, "problems": [str(p) for p in s.problems],
                "problem_kinds": [p.kind for p in s.problems]}

    out = one(rep.spec)
    out["method"] = rep.spec.label
    out["no_spec"] = one(rep.no_spec) if rep.no_spec else None
    out["scenario"] = rep.description
    out["scenario_detail"] = rep.scenario.to_dict() if rep.scenario is not None else None
    out["seed"] = rep.seed
    out["timing_accuracy"] = rep.accuracy.to_dict() if rep.accuracy is not None else None
    out["notes"] = list(rep.notes)
    return out
