"""Workload envelope and verdict: KV demand of the worst case and of the expected mix against the pool.

Per request: prompt + output + k lookahead slots (SGLang: its decode reserve less one), in whole blocks per layer (a
sliding-window layer holds at most its window). Worst case: every running request at the chosen percentile shape, at
concurrency x burst factor (capped by max_num_seqs: the scheduler queues the rest).
headroom = 1 - demand / capacity. fits: headroom >= policy; thin: 0 <= headroom < policy; else does_not_fit. An engine
that does not start (MemoryAccount.startup_problem) has no headroom (-inf, "none") and does not fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .kvcache import request_kv_bytes
from .memory import MemoryAccount, ResolvedSettings
from .specs import LengthDistribution, Workload
from .units import GiB

FITS, THIN, DOES_NOT_FIT = "fits", "thin", "does_not_fit"
VERDICTS = (FITS, THIN, DOES_NOT_FIT)
VERDICT_RANK = {FITS: 2, THIN: 1, DOES_NOT_FIT: 0}  # higher is better


def verdict_for(headroom: float, policy: float) -> str:
    """The headroom rule: below 0 does not fit, below the policy is thin (exactly at it fits)."""
    if headroom < 0:
        return DOES_NOT_FIT
    return THIN if headroom < policy - 1e-9 else FITS  # the tolerance absorbs float ratios


def headroom_text(headroom: float, policy: float, digits: int = 1) -> str:
    """A headroom as a percentage that reads as its verdict (verdict_for): with more decimals than `digits` where
    rounding would cross the policy or 0 (0.19979 against 20% is "19.98%" under THIN, not "20%"; a plan short by
    0.03% is "-0.03%", not "-0%"; a few bytes short of a line is "just under 0%"); "none" without a KV cache to have headroom in (-inf)."""
    if not math.isfinite(headroom):
        return "none"
    verdict = verdict_for(headroom, policy)
    for shown in range(digits, digits + 5):
        text = f"{headroom:.{shown}%}"
        if verdict_for(float(text[:-1]) / 100, policy) == verdict:
            return text
    # bytes short of the line: no rounding reads so
    return f"just under {policy_text(0.0 if verdict == DOES_NOT_FIT else policy)}"


def policy_text(policy: float) -> str:
    """A headroom policy as it was set: "20%", "12.5%" (at no decimals 12.5% had read "12%")."""
    return f"{round(100 * policy, 9):g}%"


@dataclass(frozen=True)
class ShapeCapacity:
    label: str  # p50 / p95 / p99 / max
    prompt_tokens: int
    output_tokens: int
    request_tokens: int  # prompt + output + lookahead
    request_kv_bytes: int
    max_concurrency: int  # requests of this shape the pool holds at once (before max_num_seqs)
    within_max_model_len: bool


@dataclass(frozen=True)
class EnvelopeCase:
    label: str  # "worst_case" or "expected"
    percentile: str
    prompt_tokens: int
    output_tokens: int
    requested_concurrency: int  # what the load asks for (target, or target x burst)
    concurrency: int  # what the engine runs at once (<= max_num_seqs)
    queued: int  # requests the scheduler holds back at max_num_seqs
    demand_bytes: int
    capacity_bytes: int
    headroom_fraction: float

    @property
    def request_len(self) -> int:
        """Prompt + output tokens of the case's request: what max_model_len must take."""
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class Verdict:
    verdict: str
    headroom_policy: float
    worst_case: EnvelopeCase
    expected: EnvelopeCase
    shapes: tuple[ShapeCapacity, ...]
    breaks_first: str
    reasons: tuple[str, ...]


def _headroom(demand: int, capacity: int) -> float:
    if capacity <= 0:
        return -math.inf if demand > 0 else 0.0
    return 1.0 - demand / capacity


def _case(mem: MemoryAccount, label: str, shape: ShapeCapacity, requested: int) -> EnvelopeCase:
    """`requested` concurrent requests of `shape` against the pool. An engine that does not start (a startup problem)
    serves no request: its headroom is none (-inf), whatever pool it was asked for. A --kv-cache-memory-bytes larger
    than the card had read "DOES NOT FIT: worst-case headroom 100.0%": vLLM takes the figure as it is (v1/worker/
    gpu_worker.py determine_available_memory returns it without profiling, no check against the card) and runs out of
    memory allocating that pool (v1/worker/utils.py allocate_kv_cache), so there is no pool to have headroom in."""
    running = min(requested, mem.settings.max_num_seqs)
    demand = running * shape.request_kv_bytes
    capacity = mem.pool_bytes
    prompt, output = shape.prompt_tokens, shape.output_tokens
    headroom = -math.inf if mem.startup_problem else _headroom(demand, capacity)
    return EnvelopeCase(label=label, percentile=shape.label, prompt_tokens=prompt, output_tokens=output,
                        requested_concurrency=requested, concurrency=running, queued=max(0, requested - running),
                        demand_bytes=demand, capacity_bytes=capacity, headroom_fraction=headroom)


def request_tokens(s: ResolvedSettings, prompt: int, output: int) -> int:
    """The KV slots a request of `prompt` + `output` tokens holds at its last step: k lookahead beyond them (vLLM), or
    what the engine's decode check keeps free for it less the token it decodes (ResolvedSettings.decode_reserve:
    SGLang's per release, N + topk x steps for a tree on 0.4.3.post4 - 0.5.8), as the simulator holds them. The one
    owner: the verdict and the report's demand curve read it."""
    lookahead = s.decode_reserve - 1 if s.decode_reserve else s.num_speculative_tokens
    return prompt + output + lookahead


def evaluate(mem: MemoryAccount, workload: Workload, headroom_policy: float = 0.20, detail: bool = True) -> Verdict:
    """The verdict; with `detail=False` (screening many configurations) only the worst case is worked out."""
    s = mem.settings
    k = s.num_speculative_tokens
    peak = math.ceil(workload.concurrency * workload.burst_factor - 1e-9)
    pct = workload.percentile
    shapes = []
    for label in LengthDistribution.PERCENTILES if detail else (pct,):
        prompt, output = workload.prompt_tokens.at(label), workload.output_tokens.at(label)
        tokens = request_tokens(s, prompt, output)
        per_request = request_kv_bytes(mem.pool_layers, tokens, s.block_size, in_flight=k + 1)
        shapes.append(ShapeCapacity(label=label, prompt_tokens=prompt, output_tokens=output, request_tokens=tokens,
                                    request_kv_bytes=per_request,
                                    max_concurrency=mem.pool_bytes // per_request if per_request else 0,
                                    within_max_model_len=prompt + output <= s.max_model_len))
    by_label = {sh.label: sh for sh in shapes}
    worst = _case(mem, "worst_case", by_label[pct], peak)
    expected = worst if not detail else _case(mem, "expected", by_label["p50"], workload.concurrency)
    reasons: list[str] = []
    if mem.startup_problem:
        reasons.append(mem.startup_problem)
    worst_shape = by_label[pct]
    if not worst_shape.within_max_model_len:
        reasons.append(f"{pct} requests ({worst_shape.prompt_tokens} + {worst_shape.output_tokens} tokens) exceed "
                       f"max_model_len={s.max_model_len}: the engine rejects them")
    if mem.startup_problem or not worst_shape.within_max_model_len:
        verdict = DOES_NOT_FIT
    else:
        verdict = verdict_for(worst.headroom_fraction, headroom_policy)
    breaks_first = _breaks_first(mem, worst, worst_shape, verdict, headroom_policy, reasons)
    return Verdict(verdict=verdict, headroom_policy=headroom_policy, worst_case=worst, expected=expected,
                   shapes=tuple(shapes), breaks_first=breaks_first, reasons=tuple(reasons))


def _breaks_first(mem: MemoryAccount, worst: EnvelopeCase, shape: ShapeCapacity, verdict: str,
                  policy: float, reasons: list[str]) -> str:
    """One sentence a reviewer can read: the first limit this deployment hits as load grows."""
    if reasons:
        return reasons[0][0].upper() + reasons[0][1:] + "."
    s = mem.settings
    holds = shape.max_concurrency
    if verdict == DOES_NOT_FIT:
        return (f"The KV cache: at {worst.concurrency} concurrent {worst.percentile} requests "
                f"({shape.request_tokens:,} tokens each) the cache needs {worst.demand_bytes / GiB:.1f} GiB per GPU but "
                f"holds {worst.capacity_bytes / GiB:.1f} GiB, so the engine preempts and recomputes beyond "
                f"{holds} such requests.")
    if worst.queued and holds >= s.max_num_seqs:
        return (f"The scheduler: max_num_seqs={s.max_num_seqs} caps the {worst.requested_concurrency} requests of the "
                f"burst, so {worst.queued} wait in the queue while the KV cache still has "
                f"{headroom_text(worst.headroom_fraction, policy)} headroom.")
    tail = "thinner than the policy" if verdict == THIN else "within the policy"
    return (f"The KV cache: it holds {holds:,} concurrent {worst.percentile} requests ({shape.request_tokens:,} "
            f"tokens each) against {worst.concurrency:,} at peak, {headroom_text(worst.headroom_fraction, policy)} "
            f"headroom ({tail} of {policy_text(policy)}); past {holds:,} the engine preempts.")
