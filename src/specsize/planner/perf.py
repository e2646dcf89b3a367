"""What speculation is worth for a deployment: speed-up tables, crossover batch, best k, latency at a load.

Acceptance is always an explicit input (a per-token rate, or a mean accepted length measured at some k);
without it, only the no-speculation figures are given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from ..core.errors import SpecError
from ..core.memory import MemoryAccount, ResolvedSettings
from ..core.perf import (Efficiency, SpecCosts, SpeedupPoint, api_server_scaled, build_costs, concurrency_for_tpot,
                         crossover_batch, decode_step, engine_kernels, prefill_time, speedup_point, streamed_every,
                         tree_tokens_per_pass)
from ..core.specs import Deployment, SpeculativeConfig
from ..core.speculation import Acceptance, Tree, proposed_tokens_per_pass, tokens_per_pass

__all__ = ["Acceptance", "Tree", "PerfSummary", "SpeedupTable", "costs_for", "engine_efficiency", "speedup_table",
           "summarize"]


def pass_tokens(a: float, k: int, tree: Tree, measured_length: bool = False, proposal_rate: float = 1.0) -> float:
    """Tokens per target pass. A tree's mean accepted length, as SGLang reports it, already holds the tree's gain:
    the rate solved from it is each depth's acceptance, not a per-branch one to widen again by top-k. A drafter that
    proposes in only `proposal_rate` of the steps (n-gram) gains tokens in those alone."""
    if tree.topk > 1:
        cap = tree.nodes(k)  # the tree's nodes, its root included
        if measured_length:
            return min(tokens_per_pass(a, k), float(cap))
        return tree_tokens_per_pass(a, k, tree.topk, cap)
    return proposed_tokens_per_pass(tokens_per_pass(a, k), proposal_rate)


def engine_efficiency(eff: Efficiency, mem: MemoryAccount) -> Efficiency:
    """The GPU family's terms as the resolved engine release runs them: what every step of `costs_for` is priced with,
    and what a report shows as the terms in use."""
    return _release_terms(eff, mem.settings)


def _release_terms(eff: Efficiency, s: ResolvedSettings) -> Efficiency:
    eff = api_server_scaled(eff, s.api_cost_scale)  # the engine release's own front end
    # its own MoE kernels, n-gram proposer, MoE layers' launches and all-reduce kernel
    eff = engine_kernels(eff, s.moe_fp8_memory, s.ngram_proposer_per_seq_s, s.eager_gqa_moe_layer_s,
                         s.moe_layer_fixed_s, s.output_per_token_s, s.ngram_scan_per_token_s, s.custom_allreduce,
                         s.mla_layer_fixed_s)
    return streamed_every(eff, s.stream_interval)  # tokens handed to the API server every N (--stream-interval)


def costs_for(d: Deployment, mem: MemoryAccount, eff: Efficiency, k: int, tree: Tree) -> SpecCosts:
    """The step costs of `d` at k as its engine release runs them. Pure in its inputs and immutable, so kept for the
    process (the fixes, the robustness bisections and the best-k search ask for the same ones many times); a
    deployment's models key by identity, its other parts by value."""
    return _costs(d, mem.settings, eff, k, tree)


@lru_cache(maxsize=512)
def _costs(d: Deployment, s: ResolvedSettings, eff: Efficiency, k: int, tree: Tree) -> SpecCosts:
    eff = _release_terms(eff, s)
    tree = tree.at_k(k)  # the nodes a tree of depth k verifies
    if d.speculative.enabled and k != d.speculative.num_speculative_tokens:
        d = replace(d, speculative=replace(d.speculative, num_speculative_tokens=k))
    if s.experts_upcast:  # the engine runs the experts unquantized (ResolvedSettings.experts_upcast)
        d = d.served_unquantized()
    return build_costs(d, eff, s.dtype, s.quantization, s.kv_dtype_bytes, k=k, tree_topk=tree.topk,
                       num_draft_tokens=tree.num_draft_tokens if tree.topk > 1 else None,
                       host_handover=s.spec_host_handover, async_scheduling=s.async_scheduling,
                       draft_extend=s.draft_extend,
                       expansion_query_s=s.spec_expansion_query_s if d.speculative.enabled else 0.0,
                       async_drafters=s.async_drafters, graph_max_tokens=s.graph_max_tokens,
                       plain_graph_max_tokens=s.plain_graph_max_tokens,
                       spec_v2=s.spec_v2, mxfp4_pad=s.mxfp4_pad,
                       eager=s.enforce_eager,  # as the release runs it (bitsandbytes 8-bit runs eager: core.memory)
                       mla_prompt_mha=s.mla_prompt_mha, mla_latent=s.mla_latent_cache,
                       graph_max_context=s.graph_max_context, prefix_kernel=s.prefix_prompt_kernel,
                       fp8_attention_16bit=s.fp8_attention_16bit)


@dataclass(frozen=True)
class SpeedupTable:
    rows: tuple[SpeedupPoint, ...]
    crossover_batch: dict  # k -> B or None
    best_k: dict  # B -> the k of the highest speed-up, None where every k slows decoding
    acceptance_rate: float
    context_len: int


def speedup_table(d: Deployment, mem: MemoryAccount, eff: Efficiency, acceptance: Acceptance,
                  batch_sizes: list[int], ks: list[int], context_len: int, tree: Tree = Tree()) -> SpeedupTable:
    if not d.speculative.enabled:
        raise SpecError("method", "a speed-up needs a speculative method", "draft_model, eagle, eagle3, mtp, medusa, ngram")
    for b in batch_sizes:
        if b < 1:
            raise SpecError("batch_size", f"must be >= 1, got {b}", "integers >= 1")
    for k in ks:
        if k < 1:
            raise SpecError("num_speculative_tokens", f"must be >= 1, got {k}", "integers >= 1")
    a = acceptance.per_token(d.speculative.num_speculative_tokens or ks[0])
    rows = []
    crossover, best = {}, {}
    for k in ks:
        costs = costs_for(d, mem, eff, k, tree)
        per_pass = pass_tokens(a, k, tree, acceptance.mean_accepted_length is not None,
                                    d.speculative.proposal_rate)
        points = [speedup_point(costs, b, context_len, per_pass, k) for b in batch_sizes]
        rows += points
        crossover[k] = crossover_batch(points)
    for b in batch_sizes:  # None where every k given slows decoding: no k is best, serving without speculation is
        top = max((r for r in rows if r.batch_size == b), key=lambda r: r.speedup)
        best[b] = top.k if top.speedup >= 1 else None
    return SpeedupTable(rows=tuple(rows), crossover_batch=crossover, best_k=best, acceptance_rate=a,
                        context_len=context_len)


@dataclass(frozen=True)
class PerfSummary:
    batch_size: int
    context_len: int
    acceptance_rate: float | None
    tokens_per_pass: float | None
    tpot_s: float | None
    tpot_s_no_spec: float
    speedup: float | None
    throughput_tok_s: float | None
    throughput_tok_s_no_spec: float
    crossover_batch: int | None
    best_k: int | None
    ttft_s: float
    bound_no_spec: str
    max_concurrency_for_tpot_slo: int | None
    tpot_slo_s: float | None
    note: str | None
    acceptance_source: str | None = None
    ttft_s_no_spec: float | None = None  # without the drafter's own prefill (ttft_s includes it)


def find_crossover(costs: SpecCosts, per_pass: float, context: int, upper: int) -> int | None:
    """Smallest batch in [1, upper] with speed-up < 1. The speed-up falls with the batch once verification is
    compute-bound, but not always before it (a CPU proposer's or the host's per-sequence work can make it dip below 1
    at a few sequences and rise above it again), so batches are tried on a grid 50% apart from 1 and the crossing
    is bisected between the last grid batch that pays and the first that does not; None where every grid batch
    pays."""
    def slower(b: int) -> bool:
        return speedup_point(costs, b, context, per_pass, 0).speedup < 1

    below = 0  # the last batch tried that pays
    b = 1
    while True:
        if slower(b):
            lo, hi = below + 1, b
            while lo < hi:
                mid = (lo + hi) // 2
                if slower(mid):
                    hi = mid
                else:
                    lo = mid + 1
            return lo
        if b >= upper:
            return None
        below, b = b, min(upper, max(b + 1, b * 3 // 2))


def summarize(d: Deployment, mem: MemoryAccount, eff: Efficiency, acceptance: Acceptance | None,
              batch_size: int, context_len: int, prompt_len: int, tpot_slo_s: float | None = None,
              tree: Tree | None = None, k_range: range = range(1, 9), detail: bool = True) -> PerfSummary:
    """The performance at `batch_size`. With `detail=False` only the rates at this batch and k (TPOT, speed-up,
    throughput, TTFT): no best k, crossover batch or SLO concurrency, each a search over many step costs, for the
    callers that read the rates alone (the ranked fixes, the acceptance-floor bisection). The drafting tree is the
    deployment's own (`SpeculativeConfig.tree`) unless `tree` is given."""
    tree = d.speculative.tree if tree is None else tree
    s = mem.settings
    k = d.speculative.num_speculative_tokens
    spec_on = d.speculative.enabled
    plain_costs = costs_for(replace(d, speculative=SpeculativeConfig()), mem, eff, 0, Tree())
    plain = decode_step(plain_costs, batch_size, context_len)
    ttft = prefill_time(plain_costs, prompt_len, s.max_num_batched_tokens)
    upper = max(1, s.max_num_seqs)
    note = None
    if not spec_on or acceptance is None:
        note = None if not spec_on else ("acceptance not given: pass --acceptance-rate or --mean-accepted-length "
                                         "to price speculation")

        def tpot_plain(b: int) -> float:
            return decode_step(plain_costs, b, context_len).time_s

        slo = concurrency_for_tpot(tpot_plain, tpot_slo_s, upper) if tpot_slo_s and detail else None
        return PerfSummary(batch_size=batch_size, context_len=context_len, acceptance_rate=None,
                           tokens_per_pass=None, tpot_s=None, tpot_s_no_spec=plain.time_s, speedup=None,
                           throughput_tok_s=None, throughput_tok_s_no_spec=batch_size / plain.time_s,
                           crossover_batch=None, best_k=None, ttft_s=ttft, bound_no_spec=plain.bound,
                           max_concurrency_for_tpot_slo=slo, tpot_slo_s=tpot_slo_s, note=note)
    a = acceptance.per_token(k)
    costs = costs_for(d, mem, eff, k, tree)
    ttft = prefill_time(costs, prompt_len, s.max_num_batched_tokens)  # a drafter with a KV cache prefills too
    measured = acceptance.mean_accepted_length is not None
    rate = d.speculative.proposal_rate
    per_pass = pass_tokens(a, k, tree, measured, rate)
    point = speedup_point(costs, batch_size, context_len, per_pass, k)
    best = crossover = slo = None
    if detail:
        speedups = {kk: speedup_point(costs_for(d, mem, eff, kk, tree), batch_size, context_len,
                                      pass_tokens(a, kk, tree, measured, rate), kk).speedup for kk in k_range}
        best = max(speedups, key=lambda kk: speedups[kk])
        best = best if speedups[best] >= 1 else None  # every k slows decoding: none is best
        crossover = find_crossover(costs, per_pass, context_len, upper)
    if tpot_slo_s and detail:
        slo = concurrency_for_tpot(lambda b: speedup_point(costs, b, context_len, per_pass, k).tpot_s,
                                   tpot_slo_s, upper)
    return PerfSummary(batch_size=batch_size, context_len=context_len, acceptance_rate=a, tokens_per_pass=per_pass,
                       tpot_s=point.tpot_s, tpot_s_no_spec=point.tpot_s_no_spec, speedup=point.speedup,
                       throughput_tok_s=point.throughput_tok_s, throughput_tok_s_no_spec=point.throughput_tok_s_no_spec,
                       crossover_batch=crossover, best_k=best, ttft_s=ttft,
                       ttft_s_no_spec=prefill_time(plain_costs, prompt_len, s.max_num_batched_tokens),
                       bound_no_spec=plain.bound, max_concurrency_for_tpot_slo=slo, tpot_slo_s=tpot_slo_s, note=note,
                       acceptance_source=acceptance.source)


# How far from 1 a predicted speed-up must be before its sign can be trusted: the model's median |error| on
# published speed-up measurements is 10.7% (bench/accuracy_speedup.py, the calibration rows of ../shared; 6.8% and
# 3.1% on the fit and held-out parts of bench/data/spec_speedups.jsonl, 5.3% and 4.7% on the fit and held-out parts
# of bench/data/spec_speedups_s56.jsonl), and issue #11 asks for 12%. The band does not catch every row on the wrong
# side of 1: an n-gram run on an NVFP4 MoE predicted 1.27x against 0.72x, AngelSlim's Qwen3-30B-A3B at batch 64
# (over a prompt set that drains the batch) 0.76x against 1.06x
SPEEDUP_MEDIAN_ERROR = 0.107
SPEEDUP_ERROR_BAND = 0.12


def expert_parallel_step(d: Deployment, mem: MemoryAccount, eff: Efficiency, batch: int,
                         context: int) -> tuple[float, float]:
    """(seconds, seconds) of a decode step without speculation at `batch` with the experts split by expert
    (Deployment.ep) and, for comparison, by rows over the same TP: what expert parallelism costs or saves there."""
    plain = replace(d, speculative=SpeculativeConfig())
    split = decode_step(costs_for(plain, mem, eff, 0, Tree()), batch, context).time_s
    # split by rows the engine keeps its experts as stored (ResolvedSettings.experts_upcast is expert parallelism's)
    by_rows = replace(mem, settings=replace(mem.settings, experts_upcast=False))
    rows = decode_step(costs_for(replace(plain, expert_parallel=False), by_rows, eff, 0, Tree()), batch,
                       context).time_s
    return split, rows


def thin_gain(speedup: float) -> bool:
    """A predicted speed-up too near 1 for its sign to be trusted (within SPEEDUP_ERROR_BAND, either side)."""
    return 1 / (1 + SPEEDUP_ERROR_BAND) <= speedup <= 1 + SPEEDUP_ERROR_BAND


def thin_gain_text() -> str:
    """The one sentence for a speed-up inside SPEEDUP_ERROR_BAND of 1 (the speed-up table and the plan say it)."""
    return (f"within {SPEEDUP_ERROR_BAND:.0%} of 1, inside the model's error on published speed-ups (median "
            f"{SPEEDUP_MEDIAN_ERROR:.1%}): whether speculation pays there is not established; measure it before "
            "counting on it")
