"""Turn simulation settings into a typed `Scenario` and a request stream, run it, and fold it into a plan.

Pure orchestration: traces and length files arrive already read (the API layer reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..core.envelope import DOES_NOT_FIT, FITS, THIN
from ..core.envelope import VERDICT_RANK as RANK
from ..core.errors import SpecError
from ..core.memory import AccountingProfile, account, pool_never_built, unstarted
from ..core.perf import Efficiency, offline_efficiency
from ..core.specs import Deployment, RequestTrace, SpeculativeConfig, Workload
from ..core.speculation import Acceptance, Tree
from ..simulator.scenario import Scenario
from ..simulator.workload import Burst, LengthSpec, RateProfile, Requests, from_arrays, generate
from .plan import PlanResult, replica_workload, validate
from .simulate import (MAX_STEPS, SEVERE, SimulationReport, Slo, Thresholds, acceptance_spec, depth_rates,
                       rate_for_concurrency, run, simulated_outputs)


MAX_REQUESTS = 2_000_000  # the largest simulation accepted (about 3 minutes and 1 GiB here); docs/simulation.md


@dataclass(frozen=True)
class SimSettings:
    """What shapes a simulation, beyond the deployment and workload. None: not given."""

    duration_s: float = 300.0
    seed: int = 0
    rate_req_s: float | None = None  # all replicas together
    prompt_median: float | None = None
    prompt_p99: float | None = None
    output_median: float | None = None
    output_p99: float | None = None
    burst_factor: float | None = None  # None: no burst unless the scenario is the envelope's
    burst_source: str | None = None
    burst_start_s: float | None = None
    burst_duration_s: float | None = None
    on_off: tuple[float, float] | None = None  # (period s, on s)
    ramp_to_req_s: float | None = None
    prefix_hit_rate: float = 0.0
    compare: bool = True
    offline: bool = False  # no API server in front (LLM.generate): core.perf.offline_efficiency
    ttft_slo_s: float | None = None
    lengths_source: str = "the workload"
    trace: RequestTrace | None = None
    lengths: RequestTrace | None = None  # only the lengths are read
    client_concurrency: int | None = None  # closed loop: requests in flight (vllm bench serve --max-concurrency)
    num_requests: int = 1000  # requests a closed loop sends
    # the plan's own burst scenario (envelope_settings: plan --simulate, report): an engine that does not start is left
    # to the plan's verdict (fold_simulation attaches no simulation), where `simulate` refuses it (run_simulation)
    envelope: bool = False


def _lengths(median: float | None, p99: float | None, fallback: tuple[int, int, int], maximum: int,
             field: str) -> tuple[LengthSpec, bool]:
    """(lengths, given by flags): a median alone is a fixed length; with a p99, lognormal; neither: the
    workload's (p50, p99, max), its lognormal tail cut at the workload's max (no longer request is sent). Lengths
    stop at `maximum`, max_model_len: a request reaching it is refused whatever its exact length (_refuse_longer)."""
    if median is None and p99 is not None:
        raise SpecError(f"{field}_p99", "a p99 needs the median too", f"--{field.replace('_', '-')}-median N")
    if median is not None and p99 is not None and p99 < median:  # named as the flag that holds it, not the generator's
        raise SpecError(f"{field}_p99", f"{p99:g} is below the median {median:g}",
                        f"--{field.replace('_', '-')}-p99 at least the median")
    if median is not None:
        return LengthSpec.lognormal(median, p99 if p99 is not None else median, maximum=maximum), True
    p50, p99_, most = fallback
    return LengthSpec.lognormal(p50, p99_, maximum=min(maximum, most)), False


def build_scenario(d: Deployment, w: Workload, rate_per_replica: float | None, sim: SimSettings,
                   limit: int) -> Scenario:
    """The scenario for generated arrivals (not a trace). `w` is one replica's workload."""
    factor = sim.burst_factor
    bursts: tuple[Burst, ...] = ()
    on_off = None
    if sim.on_off is not None:
        period, on = sim.on_off  # checked where it is read (inputs.load.parse_on_off)
        on_off = (period, on, factor or 1.0)
    elif factor and (factor > 1 or sim.burst_start_s is not None):
        start = sim.burst_start_s if sim.burst_start_s is not None else sim.duration_s / 3
        # a sixth of the run unless given, never past its end (a start at 55 s of 60 had read "for 10 s" and run 5)
        length = sim.burst_duration_s if sim.burst_duration_s is not None else min(sim.duration_s / 6,
                                                                                    sim.duration_s - start)
        bursts = (Burst(start, length, factor),)
    if sim.lengths is not None:
        # lengths at most max_model_len (`limit`): a longer one, like any request over it, is refused (_refuse_longer)
        prompt = LengthSpec("empirical", values=tuple(sim.lengths.prompt_tokens), maximum=limit)
        output = LengthSpec("empirical", values=tuple(sim.lengths.output_tokens), maximum=limit)
        source = f"lengths file {sim.lengths.path}"
        if sim.lengths.acceptance is not None and d.speculative.enabled:
            # every request's acceptance_rate had been dropped without a word, the flag's rate drawn instead
            source += ("; its acceptance_rate column not read: a lengths file gives lengths, --trace replays each "
                       "request's acceptance")
    else:
        prompt, p_given = _lengths(sim.prompt_median, sim.prompt_p99,
                                   (w.prompt_tokens.p50, w.prompt_tokens.p99, max(1, w.prompt_tokens.max)), limit,
                                   "prompt_tokens")
        output, o_given = _lengths(sim.output_median, sim.output_p99,
                                   (*simulated_outputs(w), max(1, w.output_tokens.max)), limit, "output_tokens")
        source = ("flags" if p_given and o_given else
                  f"flags (prompts) and {sim.lengths_source} (outputs)" if p_given else
                  f"{sim.lengths_source} (prompts) and flags (outputs)" if o_given else sim.lengths_source)
    assert rate_per_replica is not None
    rates = RateProfile(rate_per_replica, bursts, on_off,
                        None if sim.ramp_to_req_s is None else sim.ramp_to_req_s / d.replicas)
    expected = rates.peak() * sim.duration_s
    if expected > MAX_REQUESTS:
        ramped = sim.ramp_to_req_s is not None and sim.ramp_to_req_s / d.replicas >= rate_per_replica
        raise SpecError("ramp_to" if ramped else "rate" if sim.rate_req_s is not None else "duration",
                        f"about {expected:,.0f} requests at {rates.peak():,.1f} req/s (peak) for {sim.duration_s:g} s; "
                        f"at most {MAX_REQUESTS:,} are simulated",
                        f"a lower {'ramp_to' if ramped else 'rate'} or a shorter duration")
    return Scenario(arrivals="poisson", duration_s=sim.duration_s, rate_req_s=rate_per_replica,
                    rate_source="rate" if sim.rate_req_s is not None else "littles_law", rates=rates, prompt=prompt,
                    output=output, lengths_source=source, burst_source=sim.burst_source if (bursts or on_off) else None,
                    replicas=d.replicas)


def _no_requests(sim: SimSettings, scenario: Scenario) -> SpecError:
    """An empty scenario, named by what made it empty: a duration too short for one arrival at a sensible rate, else
    the rate (the one given, or the envelope's, which the deployment's capacity sets)."""
    rate = scenario.rate_req_s
    if rate is None:
        return SpecError("duration", f"the scenario produced no requests in {sim.duration_s:g} s",
                         "a longer duration")
    said = "" if sim.rate_req_s is not None else " (the envelope's, from the deployment's capacity and overheads)"
    field = "duration" if rate * 3600 >= 1 else "rate"
    return SpecError(field, f"the scenario produced no requests: {rate:.3g} req/s{said} for {sim.duration_s:g} s",
                     "a longer duration" if field == "duration" else "a higher rate, or a deployment that serves one")


def _requests(scenario: Scenario, sim: SimSettings, acc) -> Requests:
    assert scenario.rates is not None and scenario.prompt is not None and scenario.output is not None
    req = generate(scenario.rates, sim.duration_s, scenario.prompt, scenario.output, acc, sim.seed)
    if sim.lengths is not None:  # keep each request's (prompt, output) pair together
        pick = np.random.default_rng(sim.seed + 1).integers(0, len(sim.lengths.prompt_tokens), len(req))
        req = replace(req, prompt_tokens=np.asarray(sim.lengths.prompt_tokens)[pick],
                      output_tokens=np.asarray(sim.lengths.output_tokens)[pick])
    return replace(req, description=scenario.description)


def _closed_loop(scenario: Scenario, sim: SimSettings, acc, count: int, clients: int) -> Requests:
    """`count` requests for `clients` closed-loop clients: lengths as the scenario says, arrivals set by the run."""
    assert scenario.prompt is not None and scenario.output is not None
    rng = np.random.default_rng(sim.seed)
    prompts, outputs = scenario.prompt.sample(rng, count), scenario.output.sample(rng, count)
    if sim.lengths is not None:  # keep each request's (prompt, output) pair together
        pick = np.random.default_rng(sim.seed + 1).integers(0, len(sim.lengths.prompt_tokens), count)
        prompts = np.asarray(sim.lengths.prompt_tokens)[pick]
        outputs = np.asarray(sim.lengths.output_tokens)[pick]
    return Requests(arrival_s=np.zeros(count), prompt_tokens=prompts, output_tokens=outputs,
                    acceptance=acc.sample(rng, count), duration_s=0.0, description=scenario.description,
                    clients=clients)


def _refuse_longer(req: Requests, scenario: Scenario, limit: int, field: str) -> tuple[Requests, Scenario]:
    """The requests whose prompt + output exceed max_model_len (`limit`) left out: the engine refuses them (vLLM's
    OpenAI server answers 400) and they never run; counted in the scenario (`rejected`). All of them refused is an
    error naming `field`, where the lengths came from."""
    served = req.prompt_tokens + req.output_tokens <= limit
    if served.all():
        return replace(req, description=scenario.description), scenario
    if not served.any():
        share = f" of the simulated replica's share (1 in {scenario.replicas})" if scenario.replicas > 1 else ""
        raise SpecError(field, f"every request{share} has a prompt + output over max_model_len = {limit:,}: the "
                        "engine refuses them all", "requests within max_model_len, or a larger --max-model-len")
    keep = np.flatnonzero(served)
    scenario = replace(scenario, rejected=int(len(req) - len(keep)))
    arrivals = req.arrival_s[keep]
    return replace(req, arrival_s=arrivals, prompt_tokens=req.prompt_tokens[keep],
                   output_tokens=req.output_tokens[keep], acceptance=req.acceptance[keep],
                   duration_s=float(arrivals[-1]) if scenario.arrivals == "trace" else req.duration_s,
                   description=scenario.description), scenario


def replica_envelope_rate(d: Deployment, w_total: Workload, profile: AccountingProfile, eff: Efficiency,
                          acceptance: Acceptance | None, tree: Tree, offline: bool = False) -> float:
    """Requests/s per replica that `simulate` runs without a rate: Little's law at the replica's share of the
    workload's concurrency (planner.simulate.rate_for_concurrency), offline without the API server's costs."""
    if offline:
        eff = offline_efficiency(eff)
    return rate_for_concurrency(d, account(d, profile), eff, replica_workload(d, w_total), acceptance, tree)


def run_simulation(d: Deployment, w_total: Workload, profile: AccountingProfile, eff: Efficiency,
                   acceptance: Acceptance | None, tpot_slo_s: float | None, tree: Tree, sim: SimSettings,
                   headroom: float = 0.2, progress=None) -> SimulationReport:
    validate(d, w_total, headroom)
    given_eff = eff
    if sim.offline:
        eff = offline_efficiency(eff)
    w = replica_workload(d, w_total)  # one engine instance is simulated: it gets its replica's share of the load
    if d.gpu.memory_bandwidth_bytes_s <= 0:
        raise SpecError("gpu", "simulation needs a catalog GPU (bandwidth and FLOP/s)", "a GPU id from `specsize gpus`")
    # a trace's acceptance_rate column gives every request its own: no other is needed (nor read)
    per_request = sim.trace.acceptance if sim.trace is not None and sim.trace.acceptance else None
    if d.speculative.enabled and acceptance is None and per_request is None:
        raise SpecError("acceptance_rate", "simulating speculation needs the drafter's acceptance",
                        "--acceptance-rate A or --mean-accepted-length T (measured, never assumed), or a trace with an "
                        "acceptance_rate column")
    mem = account(d, profile)
    why = unstarted(d, mem)
    if why and (mem.kv_blocks <= 0 or not sim.envelope):
        # it had been simulated as if it ran ('sustains the load: yes' beside the plan's 'DOES NOT FIT: the engine
        # does not start'); the envelope's burst (plan --simulate) is left out by fold_simulation instead
        raise SpecError("deployment", f"{why}: nothing to simulate (see `specsize plan`)", "a deployment that starts")
    plain = account(replace(d, speculative=SpeculativeConfig()), profile) if sim.compare else None
    k = d.speculative.num_speculative_tokens or 1
    acc = acceptance_spec(acceptance, k, acceptance.spread if acceptance else 0.0, tree)
    limit = mem.settings.max_model_len
    if sim.trace is not None:
        t = sim.trace
        # the column's per-token rates are drawn as a flag's rate is (acceptance_spec): on an SGLang tree, at each
        # depth's rate (they had been drawn as a chain's, without the tree's gain, where --acceptance-rate had it)
        rates = depth_rates(np.asarray(per_request, dtype=float), k, tree) if per_request is not None else \
            acc.sample(np.random.default_rng(sim.seed), len(t.arrival_s))
        share = slice(0, None, d.replicas)  # requests spread round-robin over the replicas
        scenario = Scenario(arrivals="trace", duration_s=float(t.arrival_s[-1]) if t.arrival_s else 0.0,
                            rate_req_s=None, rate_source="trace", rates=None, prompt=None, output=None,
                            lengths_source="trace", burst_source=None, replicas=d.replicas, trace_path=t.path,
                            requests=len(t.arrival_s),
                            acceptance_source="trace" if per_request is not None and d.speculative.enabled else None)
        req = from_arrays(np.asarray(t.arrival_s[share], dtype=float), np.asarray(t.prompt_tokens[share], float),
                          np.asarray(t.output_tokens[share], float), rates[share])
    elif sim.client_concurrency is not None:
        clients = max(1, -(-sim.client_concurrency // d.replicas))  # each replica gets its share of the clients
        count = max(1, -(-sim.num_requests // d.replicas))
        scenario = build_scenario(d, w, 1.0, replace(sim, burst_factor=None, on_off=None), limit)
        scenario = replace(scenario, arrivals="closed_loop", rate_req_s=None, rate_source="closed_loop", rates=None,
                           burst_source=None, clients=clients, requests=count,
                           clients_total=sim.client_concurrency)
        req = _closed_loop(scenario, sim, acc, count, clients)
    else:
        rate = (sim.rate_req_s / d.replicas if sim.rate_req_s is not None
                else replica_envelope_rate(d, w_total, profile, given_eff, acceptance, tree, sim.offline))
        if not rate > 0:
            raise SpecError("rate", f"must be positive, got {rate}", "requests/s > 0")
        scenario = build_scenario(d, w, rate, sim, limit)
        if sim.rate_req_s is None:  # Little's law at this replica's share of the requests in flight (replica_multiple)
            scenario = replace(scenario, concurrency=w.concurrency, concurrency_total=w_total.concurrency)
        req = _requests(scenario, sim, acc)
    if not len(req):
        raise _no_requests(sim, scenario)
    source = "trace" if sim.trace is not None else "lengths_file" if sim.lengths is not None else "prompt_tokens"
    req, scenario = _refuse_longer(req, scenario, limit, source)
    if len(req) > MAX_REQUESTS:
        raise SpecError("trace", f"the trace has {len(req):,} requests; at most {MAX_REQUESTS:,} are simulated",
                        "a shorter trace")
    _check_steps(req, mem.settings.max_num_seqs, k + 1 if d.speculative.enabled else 1, sim)
    slo = Slo(ttft_s=sim.ttft_slo_s, tpot_s=tpot_slo_s)
    report = run(d, mem, plain, eff, req, sim.seed, slo, Thresholds(kv_headroom=headroom), tree=tree,
                 prefix_hit_rate=sim.prefix_hit_rate, progress=progress)
    return replace(report, scenario=scenario)


def _check_steps(req: Requests, max_num_seqs: int, per_step: int, sim: SimSettings) -> None:
    """Refuse up front a run that needs more than MAX_STEPS engine steps even at its largest batch (every request's
    output over the batch the engine or the clients allow, and the tokens one step can emit): such a run would take
    hours, not fail."""
    batch = min(max_num_seqs, req.clients) if req.clients else max_num_seqs
    least = float(np.sum(req.output_tokens)) / (max(1, batch) * per_step)
    if least > MAX_STEPS:
        field = "num_requests" if req.clients else ("trace" if sim.trace is not None else "duration")
        raise SpecError(field, f"the run needs at least {least:,.0f} engine steps ({int(np.sum(req.output_tokens)):,} "
                        f"output tokens, batches of at most {batch}); at most {MAX_STEPS:,} are simulated",
                        "fewer requests, a shorter duration or trace, or more concurrent clients")


def envelope_settings(w: Workload, duration_s: float, seed: int, lengths_source: str,
                      ttft_slo_s: float | None = None) -> SimSettings:
    """The envelope's burst scenario: the workload's concurrency by Little's law, x burst_factor for a sixth of
    the run starting at a third, lognormal lengths from the workload's p50 and p99."""
    return SimSettings(duration_s=duration_s, seed=seed, burst_factor=w.burst_factor,
                       burst_source="the workload's burst_factor", lengths_source=lengths_source,
                       ttft_slo_s=ttft_slo_s, envelope=True)


def fold_simulation(result: PlanResult, report: SimulationReport) -> PlanResult:
    """`plan --simulate`: fold what the burst simulation finds into the verdict. Cache thrashing or requests
    left unfinished make the plan does_not_fit; queue growth or scheduling instability alone make a fitting
    plan thin. An engine without the memory to start (pool_never_built) has no burst to simulate: the plan keeps its
    verdict and no simulation (a report had shown 'simulated burst: sustained' for a server that never starts)."""
    if pool_never_built(result.deployment, result.memory):
        return result
    v = result.verdict
    problems = report.spec.problems
    verdict = v.verdict
    reasons = list(v.reasons)
    if problems:
        if any(p.kind in SEVERE for p in problems):
            verdict = DOES_NOT_FIT
        elif verdict == FITS:
            verdict = THIN
        reasons += [f"simulated burst: {p}" for p in problems]
    # the simulated problem is what breaks first where it is what worsened the verdict; a plan the envelope already
    # refuses (or one refused at start-up) keeps its own sentence, which says by how much
    worsened = RANK[verdict] < RANK[v.verdict]
    breaks = f"Under the simulated burst: {problems[0]}." if problems and worsened and not v.reasons else v.breaks_first
    new_verdict = replace(v, verdict=verdict, reasons=tuple(reasons), breaks_first=breaks)
    return replace(result, verdict=new_verdict, simulation=report)
