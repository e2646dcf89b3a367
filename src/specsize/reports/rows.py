"""The rows every human-readable renderer shows, built once from a PlanResult (formatting only)."""

from __future__ import annotations

import math

from ..core.envelope import headroom_text, policy_text
from ..core.kvcache import windowed_layers
from ..core.ratios import speedup_text
from ..core.units import GiB
from ..planner.compliance import simulation_worsened
from ..planner.plan import PlanResult

VERDICT_WORDS = {"fits": "FITS", "thin": "THIN", "does_not_fit": "DOES NOT FIT"}


# where every k slows decoding (planner.perf: best_k None)
BEST_K_NONE = "none (every k slows decoding)"


def best_k_text(k: int | None, cell: bool = False) -> str:
    """A best k as every report shows it: its number, or none where every k slows decoding (a table's `cell`: the
    bare word, its column header saying what it is)."""
    return str(k) if k is not None else ("none" if cell else BEST_K_NONE)


def gib(n: int) -> str:
    return f"{n / GiB:,.2f}"


def headroom_pct(x: float, policy: float) -> str:
    """A table's headroom: one decimal, more where rounding would cross the verdict (core.envelope.headroom_text);
    "-" when there is no KV cache to have headroom in."""
    return headroom_text(x, policy) if math.isfinite(x) else "-"


def clip(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= width:
        return text
    return text[:width - 1].rsplit(" ", 1)[0].rstrip(" ,;:(") + "…"


def title(r: PlanResult) -> str:
    d = r.deployment
    sp = d.speculative
    spec = "no speculation" if not sp.enabled else (
        f"{sp.method} {sp.draft.model_id if sp.draft else ''} k={sp.num_speculative_tokens}".replace("  ", " "))
    return (f"{d.target.model_id} + {spec} on {d.gpus_per_instance} x {d.gpu.gpu_id} "
            f"(TP={d.tp}{', experts split by expert' if d.ep > 1 else ''}, PP={d.pp}), {r.profile.label}")


def headline(r: PlanResult) -> str:
    v = r.verdict
    headroom = v.worst_case.headroom_fraction
    shown = (f"worst-case headroom {headroom_pct(headroom, v.headroom_policy)}" if math.isfinite(headroom)
             else "the engine does not start, no headroom" if r.memory.startup_problem
             else "no KV cache, no headroom")
    # "THIN: worst-case headroom 74.8% (policy 20%)" contradicts itself unless it says what made it thin
    why = "; the simulated burst is not sustained" if simulation_worsened(r) else ""
    return f"{VERDICT_WORDS[v.verdict]}: {shown} (policy {policy_text(v.headroom_policy)}){why}"


def breakdown(r: PlanResult) -> list[tuple[str, str, str]]:
    """(term, GiB per GPU, note) for the per-GPU memory table."""
    m = r.memory
    s = m.settings
    d = r.deployment
    graphs_note = "subtracted from the budget" if m.cuda_graph_counted else "outside the budget (not subtracted)"
    if s.enforce_eager:
        graphs_note = "enforce_eager: none captured"
    draft_note = d.speculative.draft.model_id if d.speculative.draft else (
        d.speculative.kind.label if d.speculative.kind.derives_from_target else "none")
    free_before = m.engine_terms.get("free_before_loading_bytes")
    # SGLang's budget is its fraction of the memory free before loading (engines/sglang/accounting.py), not of the
    # card: "budget (x 0.9) 65.70" beside 79.19 GiB of GPU memory had read as a wrong product
    budget_note = ("gpu_memory_utilization" if free_before is None else
                   f"mem_fraction_static x {gib(int(free_before))} GiB free before loading")
    return [
        ("GPU memory (driver)", gib(m.total_bytes), clip(d.gpu.sources.get("memory", ""), 60)),
        (f"budget (x {s.gpu_memory_utilization:g})", gib(m.budget_bytes), budget_note),
        ("target weights", gib(m.weights_target_bytes),
         f"{s.dtype}" + (f", {s.quantization.method}" if s.quantization else "") + f", TP={d.tp}"
         + (" (experts by expert)" if d.ep > 1 else "")
         + (f", vision tower {gib(m.weights_target.vision)} GiB" if m.weights_target.vision else "")),
        ("draft weights", gib(m.weights_draft_bytes), draft_note),
        ("activation peak", gib(m.activation_peak_bytes),
         f"profiling pass: {s.max_num_batched_tokens} tokens, {m.activation_terms['sampler_rows']} sequences"
         + (f", {m.activation_terms['encoder_images']} images" if "encoder_images" in m.activation_terms else "")),
        ("non-torch", gib(m.non_torch_bytes), "CUDA context" + (", NCCL / all-reduce buffers" if d.tp > 1 else "")),
        ("CUDA graphs", gib(m.cuda_graph_bytes), graphs_note),
        ("KV cache", gib(max(0, m.kv_cache_bytes)),
         f"{m.kv_cache_tokens:,} tokens in {m.kv_blocks:,} blocks of {s.block_size}"),
        ("free after start-up", gib(m.free_bytes), "what the card has left" if m.free_bytes >= 0 else
         "negative: the terms above exceed the card's memory"),
    ]


def envelope_rows(r: PlanResult) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    # the envelope is one replica's (planner.plan.replica_workload): say so where the workload's concurrency is shared
    each = " per replica" if r.deployment.replicas > 1 else ""
    for case in (r.verdict.worst_case, r.verdict.expected):
        out.append((
            "worst case" if case.label == "worst_case" else "expected mix",
            f"{case.percentile}: {case.prompt_tokens:,} + {case.output_tokens:,}",
            f"{case.concurrency}{each}" + (f" (+{case.queued} queued)" if case.queued else ""),
            gib(case.demand_bytes), gib(case.capacity_bytes),
            headroom_pct(case.headroom_fraction, r.verdict.headroom_policy),
        ))
    return out


ENVELOPE_HEADER = ("case", "request shape (prompt + output tokens)", "concurrent", "KV demand GiB/GPU",
                   "KV capacity GiB/GPU", "headroom")
SHAPES_HEADER = ("shape", "prompt", "output", "tokens incl. lookahead", "KV per request GiB/GPU", "max concurrent")
BREAKDOWN_HEADER = ("term", "GiB per GPU", "note")


def shape_rows(r: PlanResult) -> list[tuple[str, ...]]:
    return [(sh.label, f"{sh.prompt_tokens:,}", f"{sh.output_tokens:,}", f"{sh.request_tokens:,}",
             f"{sh.request_kv_bytes / GiB:.3f}",
             f"{sh.max_concurrency:,}" + ("" if sh.within_max_model_len else " (over max_model_len)"))
            for sh in r.verdict.shapes]


def summary_lines(r: PlanResult) -> list[str]:
    m = r.memory
    lines = [
        f"KV cache per token (per GPU): target {m.kv_bytes_per_token_target:,} B + draft "
        f"{m.kv_bytes_per_token_draft:,} B = {m.kv_bytes_per_token:,} B",
        f"GPU KV cache size: {m.kv_cache_tokens:,} tokens; maximum concurrency for "
        f"{m.settings.max_model_len:,} tokens per request: {m.max_concurrency:.2f}x",
    ]
    if m.state_blocks_per_sequence:
        states = sum(1 for layer in m.kv_layers if layer.kind == "state")
        lines.append(f"hybrid model: {states} linear-attention / state-space layers keep "
                     f"{m.state_bytes_per_sequence / 2**20:,.2f} MiB of state per sequence on each GPU for its whole "
                     f"lifetime ({m.state_blocks_per_sequence} pool blocks of {m.bytes_per_block / 2**20:,.2f} MiB); "
                     f"only the {len(m.kv_layers) - states} attention layers hold KV per token; the pool holds at most "
                     f"{m.max_sequences:,} sequences")
    count, windowed = windowed_layers(m.kv_layers)
    if count:
        lines.append(f"(sliding-window accounting: {count} of {len(m.kv_layers)} layers hold at most "
                     f"{', '.join(f'{w:,}' for w in windowed)} tokens per request; vLLM's token figure counts every "
                     "layer's blocks as if full, and its concurrency charges each windowed layer its window plus one "
                     "prefill chunk, so the request shapes below can fit more requests than tokens / length suggests)")
    return lines


PERF_HEADER = ("", "no speculation", "with speculation")


def perf_rows(r: PlanResult) -> list[tuple[str, str, str]]:
    p = r.perf
    if p is None:
        return []

    def ms(x):
        return "-" if x is None else f"{x * 1e3:.2f} ms"

    def tps(x):
        return "-" if x is None else f"{x:,.0f} tok/s"

    priced = p.speedup is not None  # else ttft_s is the target's alone: speculation's own TTFT is not priced
    rows = [("TPOT at batch {} (context {:,})".format(p.batch_size, p.context_len), ms(p.tpot_s_no_spec), ms(p.tpot_s)),
            ("throughput per engine", tps(p.throughput_tok_s_no_spec), tps(p.throughput_tok_s)),
            ("TTFT (p50 prompt, no queue)", ms(p.ttft_s_no_spec if priced else p.ttft_s), ms(p.ttft_s if priced else None))]
    if p.speedup is not None:
        rows.append(("speed-up (TPOT)", "1.00x", speedup_text(p.speedup)))
        proposals = r.deployment.speculative.proposal_rate
        per = f", per proposal; proposals in {proposals:.0%} of steps" if proposals < 1 else ""
        rows.append(("tokens per target pass", "1", f"{p.tokens_per_pass:.2f} (a = {p.acceptance_rate:.3f}{per})"))
        if p.acceptance_source and p.acceptance_source != "user":
            rows.append(("acceptance from", "", p.acceptance_source))
        rows.append(("crossover batch (speed-up < 1)", "", str(p.crossover_batch or "none up to max_num_seqs")))
        rows.append((f"best k at batch {p.batch_size}", "", best_k_text(p.best_k)))
    if p.tpot_slo_s and p.max_concurrency_for_tpot_slo is not None:
        # planner.perf.summarize bisects the TPOT of the server it priced: with speculation where it is priced, else
        # the target's alone, whose figure belongs under "no speculation" (it had been shown as speculation's)
        slo = f"{p.max_concurrency_for_tpot_slo:,}"
        rows.append((f"concurrency meeting TPOT <= {p.tpot_slo_s * 1e3:g} ms", *(("", slo) if priced else (slo, "-"))))
    return rows


def recommendation_lines(r: PlanResult) -> list[str]:
    return [f"{i}. {x.description}" for i, x in enumerate(r.recommendations, start=1)]


def no_recommendation(r: PlanResult) -> str:
    """What an empty list of recommendations means for this verdict."""
    if r.verdict.verdict == "fits":
        return "None needed: the plan fits with the policy's headroom."
    return "None found: no single change specsize tries improves the headroom or the verdict; see what breaks first."


def recommendation_section(r: PlanResult) -> list[str]:
    """The recommendations section's lines: the ranked fixes, or, for a plan that does not fit with headroom and
    has none, that none was found (a fitting plan's section is left out)."""
    return recommendation_lines(r) or ([] if r.verdict.verdict == "fits" else [no_recommendation(r)])


def robustness_lines(r: PlanResult) -> list[str]:
    rob = r.robustness
    if rob is None:
        return []
    lines = [m.sentence for m in rob.margins]
    if rob.speculation_pays is False:
        lines.append(f"acceptance: speculation does not pay at a = {rob.acceptance_current:.2f}; "
                     + (f"it pays from a = {rob.acceptance_floor:.2f}" if rob.acceptance_floor is not None
                        else "no acceptance rate up to 1 makes it pay"))
    elif rob.acceptance_floor is not None:
        lines.append(f"acceptance: speculation pays down to a = {rob.acceptance_floor:.2f} "
                     f"(now {rob.acceptance_current:.2f})")
    lines.append("FRAGILE: " + "; ".join(rob.fragile_reasons) if rob.fragile else "not fragile")
    return lines


def placement_lines(r: PlanResult) -> list[str]:
    p = r.placement
    if p is None:
        return []
    st = p.storage
    if p.nodes_per_replica > 1:  # a replica's pipeline stages on whole nodes: the layout says which ranks sit where
        lines = [f"{p.nodes} node(s) of {p.gpus_per_node} GPUs; {p.layout}"]
    else:
        lines = [f"{p.nodes} node(s) of {p.gpus_per_node} GPUs; replicas per node: "
                 + ", ".join(str(n) for n in p.replicas_per_node)]
    lines += [f"disk per node {st.disk_bytes_per_node / GiB:,.1f} GiB: "
              + "; ".join(f"{a.name} {a.bytes / GiB:,.1f} GiB" for a in st.artefacts)]
    lines.append(f"host RAM while loading ~{st.host_ram_bytes_per_node / GiB:,.0f} GiB per node; cold start "
                 f"{st.cold_start_s:,.0f} s ({st.cold_start_cached_s:,.0f} s with a warm compile cache)")
    if p.failover is not None:
        lines.append(p.failover.sentence)
    return lines
