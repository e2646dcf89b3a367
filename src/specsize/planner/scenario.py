"""Turn simulation settings (flags or a deployment's envelope) into a request stream and run it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..catalog.deployment import PlanInputs
from ..catalog.traces import read_trace, read_trace_lengths
from ..core.errors import SpecError
from ..core.memory import account
from ..core.perf import Efficiency
from ..core.specs import SpeculativeConfig, quantization_override
from ..engines import resolve_profile
from ..simulator.workload import Burst, LengthSpec, RateProfile, from_arrays, generate
from .perf import Acceptance, Tree
from .plan import replica_workload, validate
from .simulate import SimulationReport, Slo, acceptance_spec, rate_for_concurrency, run


def run_simulation(inputs: PlanInputs, eff: Efficiency, acceptance: Acceptance | None, tpot_slo_s: float | None,
                   tree: Tree, sim: dict, burst_factor: float | None, progress=None) -> SimulationReport:
    d, w = inputs.deployment, inputs.workload
    validate(d, w, inputs.headroom)
    w = replica_workload(d, w)  # one engine instance is simulated: it gets its replica's share of the load
    if d.gpu.memory_bandwidth_bytes_s <= 0:
        raise SpecError("gpu", "simulation needs a catalog GPU (bandwidth and FLOP/s)", "a GPU id from `specsize gpus`")
    if d.speculative.enabled and acceptance is None:
        raise SpecError("acceptance_rate", "simulating speculation needs the drafter's acceptance",
                        "--acceptance-rate A or --mean-accepted-length T (measured, never assumed)")
    for name in ("duration",):
        if not sim[name] > 0:
            raise SpecError(name, f"must be positive, got {sim[name]}", "seconds > 0")
    if not 0 <= sim["prefix_hit_rate"] < 1:
        raise SpecError("prefix_hit_rate", f"must be in [0, 1), got {sim['prefix_hit_rate']}", "a fraction")
    profile = resolve_profile(inputs.engine, inputs.engine_version)
    quant = quantization_override(d.engine.quantization, d.target)
    mem = account(d, profile, quant)
    if mem.kv_blocks <= 0:
        raise SpecError("deployment", "the KV cache is empty: nothing to simulate (see `specsize plan`)",
                        "a deployment that starts")
    plain = account(replace(d, speculative=SpeculativeConfig()), profile, quant) if not sim["no_compare"] else None
    k = d.speculative.num_speculative_tokens or 1
    acc = acceptance_spec(acceptance, k, sim["acceptance_spread"])
    limit = mem.settings.max_model_len
    if sim["trace"]:
        t = read_trace(sim["trace"])
        per_request = t.acceptance or acc.sample(np.random.default_rng(sim["seed"]), len(t.arrival_s))
        share = slice(0, None, d.replicas)  # requests spread round-robin over the replicas
        req = from_arrays(t.arrival_s[share], t.prompt_tokens[share], t.output_tokens[share],
                          list(per_request)[share], maximum=limit,
                          description=f"trace {sim['trace']} ({len(t.arrival_s)} requests"
                                      + (f", 1/{d.replicas} per replica)" if d.replicas > 1 else ")"))
    else:
        rate = sim["rate"] / d.replicas if sim["rate"] else rate_for_concurrency(d, mem, eff, w, acceptance, tree)
        if not rate > 0:
            raise SpecError("rate", f"must be positive, got {rate}", "requests/s > 0")
        factor = burst_factor if burst_factor is not None else w.burst_factor
        bursts = ()
        on_off = None
        if sim["on_off"]:
            try:
                period, on = (float(v) for v in sim["on_off"].split(","))
            except ValueError:
                raise SpecError("on_off", f"cannot read {sim['on_off']!r}", "PERIOD,ON in seconds") from None
            on_off = (period, on, factor)
        elif factor > 1 or sim["burst_start"] is not None:
            start = sim["burst_start"] if sim["burst_start"] is not None else sim["duration"] / 3
            length = sim["burst_duration"] if sim["burst_duration"] is not None else sim["duration"] / 6
            bursts = (Burst(start, length, factor),)
        if sim.get("lengths_file"):
            lengths = read_trace_lengths(sim["lengths_file"])
            prompt = LengthSpec("empirical", values=tuple(lengths.prompt_tokens), maximum=limit - 1)
            output = LengthSpec("empirical", values=tuple(lengths.output_tokens), maximum=limit // 2)
        else:
            prompt = LengthSpec.lognormal(sim["prompt_tokens_median"] or w.prompt_tokens.p50,
                                          sim["prompt_tokens_p99"] or w.prompt_tokens.p99, maximum=limit - 1)
            output = LengthSpec.lognormal(sim["output_tokens_median"] or max(1, w.output_tokens.p50),
                                          sim["output_tokens_p99"] or w.output_tokens.p99, maximum=limit // 2)
        rates = RateProfile(rate, bursts, on_off, sim["ramp_to"])
        req = generate(rates, sim["duration"], prompt, output, acc, sim["seed"])
        if sim.get("lengths_file"):  # keep each request's (prompt, output) pair together
            pick = np.random.default_rng(sim["seed"] + 1).integers(0, len(lengths.prompt_tokens), len(req))
            req = replace(req, prompt_tokens=np.minimum(np.asarray(lengths.prompt_tokens)[pick], limit - 1),
                          output_tokens=np.minimum(np.asarray(lengths.output_tokens)[pick], limit // 2))
        shape = f"Poisson {rate:.2f} req/s for {sim['duration']:g} s"
        if bursts:
            shape += f", x{factor:g} from {bursts[0].start_s:g} s for {bursts[0].duration_s:g} s"
        if on_off:
            shape += f", x{factor:g} for {on_off[1]:g} s every {on_off[0]:g} s"
        if sim["ramp_to"] is not None:
            shape += f", ramping to {sim['ramp_to']:g} req/s"
        req = replace(req, description=shape)
    if not len(req):
        raise SpecError("rate", "the scenario produced no requests", "a higher rate or a longer duration")
    slo = Slo(ttft_s=sim["ttft_slo_ms"] / 1e3 if sim["ttft_slo_ms"] else None, tpot_s=tpot_slo_s)
    return run(d, mem, plain, eff, req, sim["seed"], slo, tree=tree, prefix_hit_rate=sim["prefix_hit_rate"],
               progress=progress)


DEFAULT_SIM = {"rate": None, "duration": 300.0, "lengths_file": None, "prompt_tokens_median": None, "prompt_tokens_p99": None,
               "output_tokens_median": None, "output_tokens_p99": None, "burst_start": None, "burst_duration": None,
               "on_off": None, "ramp_to": None, "trace": None, "acceptance_spread": 0.0, "prefix_hit_rate": 0.0,
               "ttft_slo_ms": None, "seed": 0, "no_compare": False}


def with_simulation(result, inputs: PlanInputs, eff: Efficiency, acceptance: Acceptance | None,
                    tpot_slo_s: float | None, tree: Tree, duration_s: float = 300.0, seed: int = 0):
    """`plan --simulate`: run the envelope's burst scenario and fold what it finds into the verdict.

    Cache thrashing or requests left unfinished make the plan does_not_fit; queue growth or scheduling
    instability alone make a fitting plan thin.
    """
    from .plan import PlanResult  # noqa: PLC0415
    from ..core.envelope import DOES_NOT_FIT, FITS, THIN  # noqa: PLC0415

    sim = dict(DEFAULT_SIM, duration=duration_s, seed=seed)
    report = run_simulation(inputs, eff, acceptance, tpot_slo_s, tree, sim, None)
    v = result.verdict
    problems = report.spec.problems
    verdict = v.verdict
    reasons = list(v.reasons)
    if problems:
        severe = any(p.startswith("cache thrashing") or "unfinished" in p for p in problems)
        if severe:
            verdict = DOES_NOT_FIT
        elif verdict == FITS:
            verdict = THIN
        reasons += [f"simulated burst: {p}" for p in problems]
    breaks = v.breaks_first if not problems or v.reasons else f"Under the simulated burst: {problems[0]}."
    new_verdict = replace(v, verdict=verdict, reasons=tuple(reasons), breaks_first=breaks)
    assert isinstance(result, PlanResult)
    return replace(result, verdict=new_verdict, simulation=report)
