"""Ranked fixes for a thin or failing plan, each re-planned with its numbers.

Every candidate change is applied to the deployment and planned again. Its price is what it costs:
extra GPUs (as a fraction of the instance), the TPOT it gives up (when acceptance and efficiencies are
known), and a fixed quality or safety price for lossy changes. Ranking: changes that bring the plan to
`fits` first, then headroom regained per unit of price.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..core.envelope import FITS, evaluate, headroom_text
from ..core.envelope import VERDICT_RANK as RANK
from ..core.errors import SpecError
from ..core.memory import AccountingProfile, multi_step_refuses_chunked, v0_chunked_prefill, v0_whole_prompts
from ..core.specs import Deployment, ModelSpec, SpeculativeConfig, Workload
from ..core.speculation import Acceptance, SpecMethod
from ..core.traffic import peak_concurrency
from ..core.units import GiB
from ..engines.methods import check_method
from ..engines.support import check_expert_parallel
from .placement import layout_problem
from .plan import PlanResult, plan, replica_workload

QUALITY_PRICE = {"kv_fp8": 0.05, "weights_fp8": 0.10, "weights_int4": 0.20}


@dataclass(frozen=True)
class Recommendation:
    action: str  # machine-readable kind
    description: str  # one line with the numbers
    verdict_after: str
    headroom_after: float
    headroom_gained: float
    extra_gpus: int
    tpot_change: float | None  # relative change of TPOT at the expected load (+ = slower); None if unknown
    price: float
    score: float
    changes: dict  # the settings to change (names as in deployment files)


def _catalog_alternatives(d: Deployment, models: tuple[ModelSpec, ...]):
    """Smaller draft models and EAGLE heads among `models` (the catalog's, read by the API layer) that fit
    the target's vocabulary and width."""
    from ..core.weights import total_params  # noqa: PLC0415

    target = d.target
    current = d.speculative.draft
    current_params = total_params(current) if current is not None else math.inf
    drafts, heads = [], []
    for m in models:
        if m.vocab_size != target.vocab_size or m.model_id == target.model_id:
            continue
        if m.num_layers == 1 and m.hidden_size == target.hidden_size:
            # a head is trained on one target's hidden states, its decoder layer at that target's attention shape
            # (catalog.configs.standard_head): Vicuna-7B's MHA head (32 KV heads) had been offered to Mixtral (8), on
            # whose features it drafts nothing, and priced at the draft model's acceptance
            if (m.num_attention_heads, m.num_kv_heads, m.head_dim) == (
                    target.num_attention_heads, target.num_kv_heads, target.head_dim) and target.mla is None:
                heads.append(m)
        elif m.num_layers > 1 and total_params(m) < current_params and total_params(m) < total_params(target) / 4:
            drafts.append(m)
    drafts.sort(key=total_params, reverse=True)
    return drafts[:2], heads[:1]


# (action, description, deployment, workload, extra GPUs, price key)
_Candidate = tuple[str, str, Deployment, Workload, int, str]


def candidates(d: Deployment, w: Workload, result: PlanResult, catalog: Callable[[], tuple[ModelSpec, ...]] = tuple,
               gpus_per_node: int = 8) -> list[tuple[str, str, Deployment, Workload, int, str]]:
    """(action, description, deployment, workload, extra GPUs, price key) for every change worth trying; `catalog`
    gives the models to look for other drafters among, read only where the drafter is a model of its own;
    `gpus_per_node`: a replica's TP x PP group stays inside a node (planner.placement)."""
    return (_speculation_changes(d, w, catalog) + _engine_changes(d, w, result) + _capacity_changes(d, w, gpus_per_node)
            + _utilization_changes(d, w, result))


def _speculation_changes(d: Deployment, w: Workload, catalog: Callable[[], tuple[ModelSpec, ...]]) -> list[_Candidate]:
    out: list[_Candidate] = []
    sp = d.speculative
    if sp.enabled and sp.num_speculative_tokens > 1:
        for k in range(sp.num_speculative_tokens - 1, 0, -1):
            # a tree of fewer depths holds fewer nodes: its draft tokens as many as it can verify (Tree.at_k)
            lowered = replace(sp, num_speculative_tokens=k, num_draft_tokens=(
                sp.tree.at_k(k).num_draft_tokens if sp.num_draft_tokens is not None else None))
            out.append(("lower_k", f"lower num_speculative_tokens from {sp.num_speculative_tokens} to {k}",
                        replace(d, speculative=lowered), w, 0, ""))
    if sp.kind.own_tp:
        drafts, heads = _catalog_alternatives(d, catalog())
        for head in heads:
            method = SpecMethod.EAGLE3 if head.eagle_fc_inputs == 3 else SpecMethod.EAGLE
            if method == SpecMethod.EAGLE:
                # served as method eagle, a one-layer config is an EAGLE-1 head with its fc 2H -> H, as a request naming
                # it is planned: priced without the fc, the fix had claimed more headroom than applying it gives
                head = head.as_eagle_head()
            # the head drafts the tree the deployment drafts (SGLang's --speculative-eagle-topk and draft tokens): a
            # fresh chain had priced another tree than the one applying the fix's settings keeps
            swapped = replace(sp, method=method, draft=head, draft_tp=1, proposal_rate=1.0)
            out.append(("eagle_head", f"replace the draft model by the {method.upper()} head {head.model_id}",
                        replace(d, speculative=swapped), w, 0, ""))
        for draft in drafts:
            out.append(("smaller_draft", f"use the smaller draft {draft.model_id}",
                        replace(d, speculative=replace(sp, draft=draft)), w, 0, ""))
        if d.tp > 1 and sp.draft_tp == 1:
            out.append(("draft_tp", f"shard the draft over the instance (draft_tp={d.tp})",
                        replace(d, speculative=replace(sp, draft_tp=d.tp)), w, 0, ""))
    if sp.enabled:
        out.append(("no_speculation", "serve without speculation",
                    replace(d, speculative=SpeculativeConfig()), w, 0, ""))
    return out


def _engine_changes(d: Deployment, w: Workload, result: PlanResult) -> list[_Candidate]:
    out: list[_Candidate] = []
    s = result.memory.settings
    e = d.engine
    if e.kv_cache_dtype == "auto" and s.kv_dtype_bytes > 1:
        out.append(("kv_fp8", "store the KV cache in fp8 (kv_cache_dtype=fp8)",
                    replace(d, engine=replace(e, kv_cache_dtype="fp8")), w, 0, "kv_fp8"))
    # one engine's peak: the replicas share the workload's concurrency (planner.plan.replica_workload), as the
    # envelope counts it; the total had left each of 4 replicas 4 x the sequences its peak needs
    peak = peak_concurrency(replica_workload(d, w).concurrency, w.burst_factor)
    if s.max_num_seqs > peak:
        out.append(("max_num_seqs", f"lower max_num_seqs from {s.max_num_seqs} to the peak concurrency {peak}"
                    + (" of each replica" if d.replicas > 1 else ""),
                    replace(d, engine=replace(e, max_num_seqs=peak)), w, 0, ""))
    longest = w.prompt_tokens.max + w.output_tokens.max + s.num_speculative_tokens
    fitted_len = -(-longest // s.block_size) * s.block_size
    shape = result.verdict.worst_case.request_len  # the envelope's request
    limit = d.target.context_limit(result.profile.engine)
    if s.max_model_len_before_draft:  # a shorter draft model holds the engine to its own length (vLLM 0.33 on)
        limit = min(limit, s.max_model_len)
    if s.max_model_len < shape <= limit:  # the engine rejects it: a context that takes it
        raised = min(limit, -(-shape // s.block_size) * s.block_size)
        raised_e, also = _raised_length(d, result.profile, raised)
        out.append(("raise_max_model_len", f"raise max_model_len from {s.max_model_len} to {raised} (the "
                    f"{w.percentile} request, {shape} tokens{also})", replace(d, engine=raised_e), w, 0, ""))
    if s.max_model_len > fitted_len and result.memory.startup_problem:
        out.append(("max_model_len", f"lower max_model_len from {s.max_model_len} to {fitted_len} (the longest request)",
                    replace(d, engine=replace(e, max_model_len=fitted_len)), w, 0, ""))
    if d.ep > 1:  # the experts split by rows again: no busiest GPU to wait on, and SGLang's MXFP4 experts stay MXFP4
        out.append(("expert_parallel_off", "split the experts by rows over TP (expert_parallel=false)",
                    replace(d, expert_parallel=False), w, 0, ""))
    if s.quantization is None and d.gpu.fp8_flops:
        out.append(("weights_fp8", "quantize the weights to fp8",
                    replace(d, engine=replace(e, quantization="fp8")), w, 0, "weights_fp8"))
    elif s.quantization is None:
        out.append(("weights_int4", "quantize the weights to int4 (AWQ/GPTQ, group 128)",
                    replace(d, engine=replace(e, quantization="int4")), w, 0, "weights_int4"))
    return out


def _raised_length(d: Deployment, p: AccountingProfile, raised: int):
    """The engine settings a longer max_model_len starts with, and what the fix says of them: vLLM V0 turns chunked
    prefill on above 32K by itself, which multi-step scheduling refuses before 0.6.3 and over pipeline stages (kept
    off: core.memory.scheduler_steps), and a V0 prompt that is not chunked, or any under multi-step, must fit an
    explicit step budget (raised with it: core.memory resolve_settings)."""
    e = replace(d.engine, max_model_len=raised)
    also = []
    if p.generation != "V0":
        return e, ""
    if e.num_scheduler_steps > 1 and e.chunked_prefill == "auto" and multi_step_refuses_chunked(d, p) and \
            v0_chunked_prefill(replace(d, engine=e), p, raised):
        e = replace(e, chunked_prefill="off")
        also.append("chunked_prefill off, as multi-step scheduling needs")
    budget = e.max_num_batched_tokens
    if budget and budget < raised and v0_whole_prompts(replace(d, engine=e), p, raised):
        e = replace(e, max_num_batched_tokens=raised)
        also.append(f"max_num_batched_tokens {budget} -> {raised}, as a whole prompt needs")
    return e, "; with " + " and ".join(also) if also else ""


def _capacity_changes(d: Deployment, w: Workload, gpus_per_node: int = 8) -> list[_Candidate]:
    out: list[_Candidate] = []
    heads = d.target.num_attention_heads
    # the doubled TP group must still be placeable as placement.place lays replicas out (TP inside a node, a replica
    # wider than a node on whole nodes of pipeline stages: placement.layout_problem)
    if heads % (d.tp * 2) == 0 and layout_problem(d.tp * 2, d.pp, gpus_per_node) is None:
        extra = d.tp * d.pp * d.replicas
        sp = d.speculative
        # a draft model that ran on the target's TP group runs on the doubled one: vLLM's SpeculativeConfig takes a
        # draft_tensor_parallel_size of 1 or the target's (and from 0.15 only the target's), so the old TP beside the
        # new was refused and TP 4 -> 8 never offered for the embedded 70B + 1B draft; and at TP 1 applying "tp 2"
        # shards the draft by default, which the fix had priced unsharded (headroom 23% claimed, 37% applied)
        doubled = replace(sp, draft_tp=d.tp * 2) if sp.kind.own_tp and sp.draft_tp == d.tp else sp
        out.append(("higher_tp", f"double tensor parallelism to TP={d.tp * 2} ({extra} more GPUs)",
                    replace(d, tp=d.tp * 2, num_gpus=(d.num_gpus or d.gpus_per_instance) * 2, speculative=doubled),
                    w, extra, ""))
    elif d.pp * 2 <= d.target.num_layers and layout_problem(d.tp, d.pp * 2, gpus_per_node) is None:
        # TP cannot double inside a node (a TP group wider than a node is refused): twice the pipeline stages, on whole
        # nodes where they no longer fit one, each holding half the layers - vLLM's multi-node layout (TP = GPUs per
        # node, PP = nodes) for a model too large for one node
        extra = d.tp * d.pp * d.replicas
        stages = replace(d, pp=d.pp * 2, num_gpus=(d.num_gpus or d.gpus_per_instance) * 2)
        per_instance = stages.gpus_per_instance
        where = (f", each replica on {-(-per_instance // gpus_per_node)} nodes of {gpus_per_node} GPUs"
                 if per_instance > gpus_per_node else "")
        out.append(("higher_pp", f"double pipeline parallelism to PP={d.pp * 2} ({extra} more GPUs{where})", stages,
                    w, extra, ""))
    replicas = d.replicas
    more = replace(d, num_gpus=(replicas + 1) * d.gpus_per_instance)
    out.append(("add_replica", f"add a replica ({d.gpus_per_instance} more GPUs): {replicas + 1} replicas share the "
                f"{w.concurrency} concurrent requests", more, w, d.gpus_per_instance, ""))
    return out


def _utilization_changes(d: Deployment, w: Workload, result: PlanResult) -> list[_Candidate]:
    out: list[_Candidate] = []
    s = result.memory.settings
    e = d.engine
    if d.shared_reserved_bytes and result.profile.accountant is None:  # SGLang: other processes shrink the pool
        most = int((result.memory.total_bytes - d.shared_reserved_bytes) / result.memory.total_bytes * 100) / 100
        if most < s.gpu_memory_utilization and most > 0.3:
            out.append(("lower_utilization", f"lower gpu_memory_utilization to {most:.2f}: another workload holds "
                        f"{d.shared_reserved_bytes / GiB:.2f} GiB of each GPU",
                        replace(d, engine=replace(e, gpu_memory_utilization=most)), w, 0, ""))
    fit = result.memory.engine_terms.get("fraction_to_fit")
    if fit:  # an engine whose fraction is not a share of the card says which value starts it (SGLang)
        action, verb = ("raise_fraction", "raise") if fit > s.gpu_memory_utilization else ("lower_utilization", "lower")
        out.append((action, f"{verb} mem_fraction_static to {fit:.2f} (the engine cannot start at "
                    f"{s.gpu_memory_utilization:g})", replace(d, engine=replace(e, gpu_memory_utilization=fit)), w, 0, ""))
    reserve = result.memory.outside_budget_bytes
    at_risk = result.memory.unprofiled_runtime_bytes + (0 if result.memory.cuda_graph_counted
                                                        else result.memory.cuda_graph_bytes)
    if at_risk > reserve and result.memory.total_bytes > 0:
        need = (at_risk - reserve) / result.memory.total_bytes
        lower = math.floor((s.gpu_memory_utilization - need) * 100) / 100
        if lower > 0.5:
            out.append(("lower_utilization", f"lower gpu_memory_utilization to {lower:.2f}: CUDA graphs and "
                        f"verification logits need {at_risk / GiB:.2f} GiB outside the budget",
                        replace(d, engine=replace(e, gpu_memory_utilization=lower)), w, 0, ""))
    return out


def recommend(result: PlanResult, profile: AccountingProfile, efficiency=None, acceptance: Acceptance | None = None,
              limit: int = 8, catalog: Callable[[], tuple[ModelSpec, ...]] = tuple, engine_version: str | None = None,
              gpus_per_node: int = 8) -> list[Recommendation]:
    """Ranked changes for `result` (empty when it already fits); a drafter the engine release `engine_version`
    cannot launch (engines.methods.check_method) is no fix."""
    d, w = result.deployment, result.workload
    m = result.memory
    outside = m.unprofiled_runtime_bytes + (0 if m.cuda_graph_counted else m.cuda_graph_bytes)
    if result.verdict.verdict == FITS and outside <= m.outside_budget_bytes:
        return []
    base_headroom = result.verdict.worst_case.headroom_fraction
    policy = result.verdict.headroom_policy
    # with `plan --simulate` the burst simulation may have worsened the envelope's verdict (queue growth, thrashing);
    # a change is re-planned without simulating, so it cannot show it mends that: its verdict is held at the simulated
    # one (fp8 KV had read "fits" on a plan thin from a queue that max_num_seqs, not memory, makes)
    simulated = (result.simulation is not None and RANK[result.verdict.verdict]
                 < RANK[evaluate(m, replica_workload(d, w), policy, detail=False).verdict])
    recs: list[tuple[Recommendation, bool]] = []  # with whether the engine starts after the change
    for action, text, nd, nw, extra, price_key in candidates(d, w, result, catalog, gpus_per_node):
        try:
            if nd.speculative.enabled and nd.speculative.method != d.speculative.method:
                check_method(profile.engine, engine_version, nd.speculative.method)
            check_expert_parallel(profile.engine, engine_version, nd)  # a TP or GPU the release's EP refuses
            after = plan(nd, nw, _profile_after(profile, engine_version, d, nd), policy, efficiency=efficiency,
                         acceptance=acceptance if nd.speculative.enabled else None,
                         perf_detail=False)  # its TPOT alone is read here
        except Exception:  # a change the engine cannot take (TP beyond the heads, a method of later releases): not a fix
            continue
        verdict_after = after.verdict.verdict
        held = simulated and RANK[verdict_after] > RANK[result.verdict.verdict]
        if held:
            verdict_after = result.verdict.verdict
        gained = after.verdict.worst_case.headroom_fraction - base_headroom
        if not math.isfinite(gained):
            gained = 1.0 if math.isfinite(after.verdict.worst_case.headroom_fraction) else 0.0
        tpot_change = _tpot_change(result, after)
        price = extra / d.gpus_total + QUALITY_PRICE.get(price_key, 0.0)
        price += max(0.0, tpot_change or 0.0)
        if action == "lower_utilization":
            gained = max(gained, 0.0)
            price += 0.02
        if gained <= 0 and action != "lower_utilization" and RANK[verdict_after] <= RANK[result.verdict.verdict]:
            continue  # neither more headroom nor a better verdict (a context that takes the requests may be both)
        score = gained / (0.01 + price)
        headroom_after = after.verdict.worst_case.headroom_fraction
        speed = "" if tpot_change is None else f", TPOT {tpot_change:+.0%}"
        if tpot_change is not None and action in ("eagle_head", "smaller_draft"):
            speed += " at the current acceptance (measure this drafter's)"
        description = (f"{text}: headroom {headroom_text(base_headroom, policy)} -> "
                       f"{headroom_text(headroom_after, policy)} ({verdict_after}"
                       + ("; the simulated burst was not re-run for this change)" if held else ")")
                       + speed + (f", +{extra} GPUs" if extra else ""))
        recs.append((Recommendation(action=action, description=description, verdict_after=verdict_after,
                                    headroom_after=headroom_after, headroom_gained=gained, extra_gpus=extra,
                                    tpot_change=tpot_change, price=price, score=score,
                                    changes=_changes(d, nd, w, nw)), after.memory.startup_problem is None))
    # the verdict a fix reaches first (fits, then thin, then does_not_fit), then whether the engine starts at all, then
    # headroom per price: the one change that starts an engine that cannot start (another process holds memory) had
    # ranked last, below changes whose worst-case headroom grows on an engine that still refuses to start
    recs.sort(key=lambda pair: (RANK[pair[0].verdict_after], pair[1], pair[0].score), reverse=True)
    return [rec for rec, _ in recs[:limit]]


def _profile_after(profile: AccountingProfile, engine_version: str | None, d: Deployment,
                   nd: Deployment) -> AccountingProfile:
    """The accounting a fix's deployment is planned with: the release's engine for its drafter, as a request naming
    that drafter resolves it (engines.registry.resolve_profile). vLLM 0.8 / 0.9 serve a draft model on their V0 engine
    and every other drafter on V1, so "serve without speculation" or "an EAGLE-3 head" off a draft model runs on
    V1, with V1's pool and defaults: priced on V0's, both fixes had claimed headroom that applying them did not give
    (TP 2 on 2 x A100-40GB, vLLM 0.8.5: -6.44 claimed for the head, -3.50 applied). A profile the registry does not
    give for the deployment (a caller's own) is kept."""
    if nd.speculative.method == d.speculative.method or engine_version is None:
        return profile
    from ..engines.registry import resolve_profile  # noqa: PLC0415

    try:
        if resolve_profile(profile.engine, engine_version, d.speculative.method.value) != profile:
            return profile
        return resolve_profile(profile.engine, engine_version, nd.speculative.method.value)
    except SpecError:
        return profile


def _tpot(r: PlanResult) -> float | None:
    """The TPOT a plan serves at: with speculation, its speculative TPOT (None where acceptance was not given)."""
    if r.perf is None:
        return None
    return r.perf.tpot_s if r.deployment.speculative.enabled else r.perf.tpot_s_no_spec


def _tpot_change(before: PlanResult, after: PlanResult) -> float | None:
    """The relative TPOT change of a fix; None where it is not known. Without an acceptance a speculative plan's TPOT
    is unknown: a fix that leaves the drafter as it is compares the target's own decode step (the part it changes),
    one that changes the drafter (k, the drafter, no speculation) cannot be priced (it had read as "TPOT +0%",
    the no-speculation TPOT compared with itself)."""
    if before.perf is None or after.perf is None:
        return None
    old, new = _tpot(before), _tpot(after)
    if old is None or new is None:
        if before.deployment.speculative != after.deployment.speculative:
            return None
        old, new = before.perf.tpot_s_no_spec, after.perf.tpot_s_no_spec
    return new / old - 1 if old else None


def _changes(d: Deployment, nd: Deployment, w: Workload, nw: Workload) -> dict:
    out: dict = {}
    if nd.speculative != d.speculative:
        out["method"] = nd.speculative.method
        out["num_speculative_tokens"] = nd.speculative.num_speculative_tokens
        if nd.speculative.draft is not None:
            out["draft"] = nd.speculative.draft.model_id
        elif d.speculative.draft is not None:
            out["draft"] = None  # applied as settings, the old draft must go too (None: remove the setting)
        out["draft_tp"] = nd.speculative.draft_tp
        if nd.speculative.num_draft_tokens != d.speculative.num_draft_tokens:
            out["num_draft_tokens"] = nd.speculative.num_draft_tokens
    for name in ("kv_cache_dtype", "max_num_seqs", "max_model_len", "quantization", "gpu_memory_utilization",
                 "max_num_batched_tokens", "chunked_prefill"):
        if getattr(nd.engine, name) != getattr(d.engine, name):
            out[name] = getattr(nd.engine, name)
    if nd.expert_parallel != d.expert_parallel:
        out["expert_parallel"] = nd.expert_parallel
    if nd.tp != d.tp:
        out["tp"] = nd.tp
        out["gpus"] = nd.num_gpus
    if nd.pp != d.pp:
        out["pp"] = nd.pp
        out["gpus"] = nd.num_gpus
    if nd.num_gpus != d.num_gpus and nd.tp == d.tp and nd.pp == d.pp:
        out["gpus"] = nd.num_gpus
    return out
