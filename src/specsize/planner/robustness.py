"""How far each uncertain input may move before the verdict flips.

For prompt lengths, output lengths, concurrency and burst factor: the largest factor (up to `ceiling`) by
which the input can grow with the verdict unchanged, found by bisection on re-planned verdicts (a plan that
does not fit reports how far the input must shrink instead). For acceptance: the rate below which
speculation stops paying at the expected load (or misses the TPOT SLO when one is given), or where it does not pay
now, the rate it must rise to. A plan is fragile when any growth margin is below `fragile_below` (default 15%),
acceptance can fall by less than `fragile_acceptance` (default 0.05) before speculation stops paying, or
speculation does not pay at the current acceptance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..core.envelope import VERDICT_RANK as RANK
from ..core.envelope import evaluate
from ..core.memory import MemoryAccount
from ..core.specs import LengthDistribution, Workload
from ..core.speculation import tokens_per_pass
from .perf import Acceptance, summarize
from .plan import PlanResult, replica_workload



@dataclass(frozen=True)
class Margin:
    input: str
    factor: float | None  # the largest growth factor that keeps the verdict (None: holds up to the ceiling)
    limit_value: float | None  # the input's value at that factor
    current_value: float
    sentence: str


@dataclass(frozen=True)
class Robustness:
    margins: tuple[Margin, ...]
    # the lowest acceptance rate at which speculation pays (or meets the TPOT SLO): below it, it does not; None where
    # not worked out (no acceptance or efficiency) or where no rate up to 1 makes it pay
    acceptance_floor: float | None
    acceptance_current: float | None
    fragile: bool
    fragile_reasons: tuple[str, ...]
    speculation_pays: bool | None = None  # at the current acceptance (None: not worked out)


def _scale(dist: LengthDistribution, factor: float) -> LengthDistribution:
    return LengthDistribution(*(max(1, math.ceil(v * factor)) for v in (dist.p50, dist.p95, dist.p99, dist.max)))


def scaled_workload(w: Workload, name: str, factor: float) -> Workload:
    if name == "prompt_tokens":
        return replace(w, prompt_tokens=_scale(w.prompt_tokens, factor))
    if name == "output_tokens":
        return replace(w, output_tokens=_scale(w.output_tokens, factor))
    if name == "concurrency":
        return replace(w, concurrency=max(1, math.floor(w.concurrency * factor)))
    if name == "burst_factor":
        return replace(w, burst_factor=max(1.0, w.burst_factor * factor))
    raise ValueError(name)


def _verdict(d, mem: MemoryAccount, w: Workload, policy: float) -> str:
    """The verdict for the deployment's total workload `w` (its replicas share it)."""
    return evaluate(mem, replica_workload(d, w), policy, detail=False).verdict


def _bracket(holds, lo: float, hi: float, close=None) -> tuple[float, float]:
    """(the largest x found for which `holds(x)`, the smallest for which it does not), true at lo, false at hi, to
    1e-4, or until `close(lo, hi)` where given: an input in whole tokens or requests is bracketed to one unit of its
    own, as 1e-4 of a factor is 10 tokens of a 100,000-token prompt (a margin had read "must fall to 35,986" where
    35,990 was already thin: the blocks of 16 tokens end at 35,992)."""
    for _ in range(80):
        if (close(lo, hi) if close is not None else hi - lo < 1e-4) or hi - lo < 1e-12:
            break
        mid = (lo + hi) / 2
        if holds(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def _within_one(w: Workload, name: str):
    """For an input counted in whole units (tokens, requests): whether two factors give values of the input at most one
    unit apart; None for the burst factor (a real number, bracketed to 1e-4 of its factor)."""
    if name == "burst_factor":
        return None
    return lambda lo, hi: _current(scaled_workload(w, name, hi), name) - _current(scaled_workload(w, name, lo), name) <= 1


def _bisect(holds, lo: float, hi: float, upper: bool = False, close=None) -> float:
    """The largest x in [lo, hi] for which `holds(x)` (true at lo, false at hi), to 1e-4 (or `close`: _bracket); with
    `upper`, the smallest x for which it no longer holds."""
    held, failed = _bracket(holds, lo, hi, close)
    return failed if upper else held


def _flip_factor(d, mem: MemoryAccount, w: Workload, name: str, policy: float, base: str, ceiling: float
                 ) -> tuple[float, str] | None:
    """The largest factor in [1, ceiling] with the verdict still `base`, and the verdict the input turns the plan to
    just past it (None if it holds at the ceiling): past max_model_len, or past a pool it overflows at once, a fitting
    plan turns does_not_fit, not thin."""
    def same(factor: float) -> bool:
        return _verdict(d, mem, scaled_workload(w, name, factor), policy) == base

    if same(ceiling):
        return None
    held, failed = _bracket(same, 1.0, ceiling, _within_one(w, name))
    return held, _verdict(d, mem, scaled_workload(w, name, failed), policy)


def _shrink_factor(d, mem: MemoryAccount, w: Workload, name: str, policy: float, base: str) -> float | None:
    """For a plan that does not hold: the largest factor < 1 at which the verdict improves."""
    def better(factor: float) -> bool:
        return RANK[_verdict(d, mem, scaled_workload(w, name, factor), policy)] > RANK[base]

    return _bisect(better, 0.01, 1.0, close=_within_one(w, name)) if better(0.01) else None


LABELS = {"prompt_tokens": "prompt length (all percentiles)", "output_tokens": "output length (all percentiles)",
          "concurrency": "concurrency", "burst_factor": "burst factor"}


def _fmt(name: str, value: float) -> str:
    return f"{value:.2f}" if name == "burst_factor" else f"{int(value):,}"


def _pct(fraction: float) -> str:
    """A growth margin, never rounded up: +16.7% is +16%, so an alert set from it fires before the flip."""
    return f"{math.floor(fraction * 100 + 1e-9):+d}%"


def _current(w: Workload, name: str) -> float:
    return {"prompt_tokens": w.prompt_tokens.at(w.percentile), "output_tokens": w.output_tokens.at(w.percentile),
            "concurrency": w.concurrency, "burst_factor": w.burst_factor}[name]


def analyse(result: PlanResult, efficiency=None, acceptance: Acceptance | None = None, ceiling: float = 10.0,
            fragile_below: float = 0.15, fragile_acceptance: float = 0.05,
            tpot_slo_s: float | None = None) -> Robustness:
    mem, w = result.memory, result.workload
    d = result.deployment
    policy = result.verdict.headroom_policy
    # the envelope's own verdict, which each re-plan below gives too: a verdict `plan --simulate` worsened (queue
    # growth) is no verdict an input's growth can keep or flip, and the margins had read "+0%; beyond it the plan
    # turns fits"
    base = _verdict(d, mem, w, policy)
    margins, reasons = [], []
    for name in ("prompt_tokens", "output_tokens", "concurrency", "burst_factor"):
        current = _current(w, name)
        limit: float | None
        if base == "does_not_fit":
            factor = _shrink_factor(d, mem, w, name, policy, base)
            if factor is None:
                limit = None
                sentence = f"{LABELS[name]}: no reduction alone makes it fit"
            else:
                limit = _current(scaled_workload(w, name, factor), name)
                sentence = (f"{LABELS[name]}: must fall to {_fmt(name, limit)} ({_pct(limit / current - 1)}) before "
                            "the plan improves")
        else:
            flip = _flip_factor(d, mem, w, name, policy, base, ceiling)
            if flip is None:
                factor = limit = None
                sentence = f"{LABELS[name]}: holds beyond x{ceiling:g}"
            else:
                factor, turns = flip
                limit = _current(scaled_workload(w, name, factor), name)
                # the margin is what the input itself may grow by (integers: the largest value that still holds)
                factor = limit / current if current else factor
                beyond = (f"at {_fmt(name, limit + 1)} the plan turns {turns}" if name == "concurrency"
                          else f"beyond it the plan turns {turns}")
                sentence = f"{LABELS[name]}: holds up to {_fmt(name, limit)} ({_pct(factor - 1)}); {beyond}"
            if factor is not None and factor - 1 < fragile_below:
                reasons.append(f"{LABELS[name]} can grow only {_pct(factor - 1).lstrip('+')} before the verdict flips")
        margins.append(Margin(name, factor, limit, current, sentence))
    floor = current_rate = pays_now = None
    if efficiency is not None and acceptance is not None and d.speculative.enabled and result.perf is not None:
        k = d.speculative.num_speculative_tokens
        current_rate = acceptance.per_token(k)
        batch = result.perf.batch_size
        context = result.perf.context_len

        measured = acceptance.mean_accepted_length is not None and d.speculative.tree.topk > 1

        def pays(a: float) -> bool:
            # `a` in the terms of the current rate: a tree's measured length holds the tree's gain, its rate is each
            # depth's (planner.perf.pass_tokens), so a candidate rate is priced as a length measured at k too; as a
            # per-branch rate the tree had widened it again (a floor of 0.26 where 1.85 tokens a pass already lose)
            at = Acceptance(mean_accepted_length=tokens_per_pass(a, k), measured_at_k=k) if measured else Acceptance(rate=a)
            p = summarize(d, mem, efficiency, at, batch, context, w.prompt_tokens.p50, None,
                          detail=False)  # only the speed-up at this k is read here
            # an acceptance rate with speculation on: summarize takes its speculative path
            assert p.tpot_s is not None and p.speedup is not None
            if tpot_slo_s is not None:
                return p.tpot_s <= tpot_slo_s
            return p.speedup >= 1.0

        within = " within the TPOT SLO" if tpot_slo_s else ""
        pays_now = pays(current_rate)
        if not pays_now:  # the rate it must rise to, if any does (the speed-up grows with acceptance)
            floor = _bisect(lambda a: not pays(a), current_rate, 1.0, upper=True) if pays(1.0) else None
            needs = f"it needs a >= {floor:.2f}" if floor is not None else "no acceptance rate up to 1 makes it pay"
            reasons.append(f"speculation does not pay{within} at the current acceptance a = {current_rate:.2f}: "
                           f"{needs}")
        elif pays(0.0):
            floor = 0.0
        else:  # the largest drop in acceptance that still pays
            floor = current_rate - _bisect(lambda drop: pays(current_rate - drop), 0.0, current_rate)
        if pays_now and floor is not None and current_rate - floor < fragile_acceptance:
            reasons.append(f"acceptance can fall only from {current_rate:.2f} to {floor:.2f} before speculation "
                           f"stops paying{within}")
    return Robustness(margins=tuple(margins), acceptance_floor=floor, acceptance_current=current_rate,
                      fragile=bool(reasons), fragile_reasons=tuple(reasons), speculation_pays=pays_now)
