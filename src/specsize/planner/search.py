"""Work back from the SLO: search GPU type x count x TP x PP x replicas x drafter x k x KV dtype x max_num_seqs.

Analytic screen of every configuration (memory account, worst-case envelope, TPOT and TTFT from the
performance model), then the Pareto front of cost vs headroom vs throughput, the cheapest configuration that
meets the SLO with headroom, why each rejected family (GPU x drafter) fails, and a simulation of the
finalists to confirm them.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from dataclasses import dataclass, replace

from ..core.envelope import DOES_NOT_FIT, FITS, evaluate, headroom_text, policy_text
from ..core.errors import SpecError
from ..core.memory import AccountingProfile, account
from ..core.perf import decode_step, prefill_share, prefill_time, spec_tpot
from ..core.specs import Deployment
from ..core.speculation import Acceptance, Tree
from ..core.traffic import decode_context, peak_concurrency, replica_share, shared_prefill_rate
from ..engines.block_fp8 import check_deployment
from ..engines.support import check_expert_parallel
from ..engines.methods import draft_tp_problem
from .perf import costs_for, pass_tokens
from .placement import layout_problem
from .plan import validate

STATUS_ORDER = ("ok", "thin", "misses_tpot", "misses_ttft", "misses_throughput", "does_not_fit")


@dataclass(frozen=True)
class Candidate:
    gpu: str
    gpus: int
    tp: int
    replicas: int
    drafter: str
    method: str
    k: int
    kv_cache_dtype: str
    max_num_seqs: int
    status: str
    reason: str
    headroom: float
    tpot_s: float | None
    ttft_s: float | None
    throughput_tok_s: float | None
    cost: float
    cost_unit: str
    kv_cache_tokens: int
    confirmed: bool | None = None
    simulation: dict | None = None
    kv_cache_bytes: int = 0  # what the engine hands the KV pool per GPU (<= 0: short of starting, by that much)
    pp: int = 1  # pipeline stages of a replica: tp x pp GPUs, on whole nodes where wider than one (placement)
    expert_parallel: bool = False  # the experts split by expert over the TP group (Deployment.ep > 1)


@dataclass(frozen=True)
class SearchResult:
    name: str
    screened: int
    skipped: int
    screen_seconds: float
    candidates: tuple[Candidate, ...]
    cheapest: Candidate | None
    pareto: tuple[Candidate, ...]
    rejected_families: tuple[dict, ...]
    finalists: tuple[Candidate, ...]  # confirmed by simulation (at most the spec's `finalists`), in rank order
    simulated_rejected: tuple[Candidate, ...] = ()  # simulated on the way and rejected, each with its reason
    baseline: Candidate | None = None  # the cheapest's configuration without speculation, simulated alike
    headroom_policy: float = 0.2  # the spec's headroom policy (a configuration's headroom reads as its verdict by it)
    # why configurations were skipped, by the field at fault: (field, count, the first such problem)
    skipped_reasons: tuple[tuple[str, int, str], ...] = ()
    notes: tuple[str, ...] = ()  # what reading the spec changed (SearchSpace.notes: spellings of one KV dtype kept once)


def _tp_problem(target, tp: int, gpus: int, per_node: int) -> str | None:
    """Why TP `tp` on `gpus` GPUs is no configuration of the space (None: it is one)."""
    if tp > per_node:
        return f"TP {tp} is wider than a node of {per_node} GPUs"
    if gpus % tp:
        return f"TP {tp} does not divide {gpus} GPUs"
    if target.num_attention_heads % tp:
        return f"TP {tp} does not divide the target's {target.num_attention_heads} attention heads"
    if target.mla is None and target.num_kv_heads % tp and tp % target.num_kv_heads:
        return f"TP {tp} neither divides nor is a multiple of the target's {target.num_kv_heads} KV heads"
    return None


def _pp_problem(target, tp: int, pp: int, gpus: int, per_node: int) -> str | None:
    """Why replicas of TP `tp` x PP `pp` on `gpus` GPUs are no configuration of the space (None: they are one); the
    stages the model's layers allow are plan.validate's to refuse (_checked_account)."""
    if gpus % (tp * pp):
        return f"TP {tp} x PP {pp} = {tp * pp} GPUs a replica does not divide {gpus} GPUs"
    placed = layout_problem(tp, pp, per_node)  # a replica wider than a node: whole nodes of whole TP groups
    return placed[1] if placed is not None else None


def screen(space, profile: AccountingProfile, efficiency_for,
           reasons: dict[str, list] | None = None) -> tuple[list[Candidate], int]:
    """Every configuration of the space, judged analytically. `efficiency_for(gpu)` gives efficiencies; `reasons`
    collects why configurations were skipped: field -> [count, the first problem]."""
    why = reasons if reasons is not None else {}

    def skip(field: str, problem: str) -> None:
        entry = why.setdefault(field, [0, problem])
        entry[0] += 1

    w = space.workload
    slo = space.slo
    policy = space.headroom
    out: list[Candidate] = []
    skipped = 0
    refused: SpecError | None = None  # the first configuration the engine would refuse, said if none is left
    costs_cache: dict = {}
    # a GPU's memory account is that of one engine instance: the same whatever the GPU count (replicas)
    accounts: dict = {}
    engines = [(kv, mns, replace(space.engine, kv_cache_dtype=kv, max_num_seqs=mns))
               for kv in space.kv_cache_dtypes for mns in space.max_num_seqs]
    peak_total = peak_concurrency(w.concurrency, w.burst_factor)
    ctx = decode_context(w.prompt_tokens.p99, w.output_tokens.p99)
    for option in space.gpus:
        gpu = option.gpu
        eff = efficiency_for(gpu)
        unit = "$/h" if option.price_per_hour is not None else "GPUs"
        for count in option.counts:
            # expert parallelism changes nothing at TP 1 (Deployment.ep): screened once there
            splits = [(tp, pp, ep) for tp in space.tps for pp in space.pps
                      for ep in sorted({ep and tp > 1 for ep in space.expert_parallel})]
            for tp, pp, ep in splits:
                problem = _tp_problem(space.target, tp, count if pp == 1 else tp, space.gpus_per_node)
                field = "tp"
                if problem is None and pp > 1:
                    problem, field = _pp_problem(space.target, tp, pp, count, space.gpus_per_node), "pp"
                if problem is not None:
                    skipped += 1
                    skip(field, problem)
                    continue
                replicas = count // (tp * pp)
                per_replica = replace(w, concurrency=replica_share(w.concurrency, replicas))
                for index, drafter in enumerate(space.drafters):
                    given = drafter.acceptance
                    if drafter.speculative.enabled and given is None:
                        raise SpecError("drafters", f"{drafter.label}: no acceptance given",
                                        "acceptance_rate or mean_accepted_length (measured, never assumed)")
                    for k in drafter.ks:
                        # a mean accepted length converts at the k it was measured at, else at this k (as plan)
                        acceptance = Acceptance(rate=given.per_token(k)) if given is not None else None
                        spec = drafter.at(k, tp)
                        for kv, mns, engine in engines:
                            d = Deployment(target=space.target, gpu=gpu, speculative=spec, tp=tp, pp=pp,
                                           num_gpus=count, engine=engine, expert_parallel=ep)
                            instance = (id(option), tp, index, k, kv, mns, pp, ep)
                            mem = accounts.get(instance)
                            if mem is None:  # kept by GPU option: some checks read the GPU (SGLang on AMD, cc 12)
                                mem = accounts[instance] = _checked_account(d, per_replica, policy,
                                                                            drafter.profile or profile,
                                                                            space.engine_version)
                            if isinstance(mem, SpecError):
                                skipped += 1
                                refused = refused or mem
                                skip(mem.field or "configuration", mem.problem)
                                continue
                            cost = count * option.price_per_hour if option.price_per_hour is not None else count
                            out.append(_judge(d, mem, per_replica, policy, slo, eff, acceptance, k, replicas, ctx,
                                              peak_total, costs_cache, (index, drafter.label), cost, unit))
    if not out:
        _nothing_to_screen(space, refused, why)
    return out, skipped


def _checked_account(d: Deployment, w, policy: float, profile: AccountingProfile, engine_version: str | None = None):
    """The engine's account of `d`, or the SpecError a plan of it gives: first what the plan's checks refuse (a
    draft_tp beside this TP, block-fp8 splits, expert parallelism), then what the engine refuses."""
    try:
        validate(d, w, policy)
        sp = d.speculative
        # a draft_tp the spec gives holds at every TP: where the release starts a draft model only at the
        # target's TP (vLLM 0.15 and later), the other TPs are configurations that cannot start
        problem = draft_tp_problem(profile.engine, profile.version, sp.method, d.tp, sp.draft_tp) \
            if sp.kind.own_tp else None
        if problem is not None:
            raise SpecError("drafters.draft_tp", problem, f"{d.tp} (the target's TP) with this release")
        # block-fp8 weights the release cannot split at this TP (engines.block_fp8): a server that cannot load
        check_deployment(profile.engine, profile.version, d)
        # expert parallelism the release cannot run (engines.support): the spec's release, not the profile's first
        check_expert_parallel(profile.engine, engine_version, d)
        return account(d, profile)
    except SpecError as err:
        return err


def _nothing_to_screen(space, refused: SpecError | None, why: dict | None = None) -> None:
    """A space with no configuration to judge is a bad spec, not a space where nothing meets the SLO."""
    if refused is not None:
        raise SpecError(refused.field, f"no configuration of the space can start: {refused.problem}", refused.accepted)
    t = space.target
    counts = sorted({c for option in space.gpus for c in option.counts})
    staged, sharded = (why or {}).get("pp"), (why or {}).get("tp")
    if staged:  # pipeline stages were asked for: say why they were left, not only what TP does
        raise SpecError("pp", f"no TP x PP of tp {list(space.tps)} x pp {list(space.pps)} lays {t.model_id} out on a "
                        f"GPU count of {counts} (nodes of {space.gpus_per_node} GPUs): {staged[1]}"
                        + (f"; {sharded[1]}" if sharded else ""),
                        "GPU counts that are multiples of tp x pp, and pp at most the model's layers")
    heads = f"{t.num_attention_heads} attention heads" + ("" if t.mla is not None else f", {t.num_kv_heads} KV heads")
    raise SpecError("tp", f"no value of {list(space.tps)} shards {t.model_id} ({heads}) over a GPU count of "
                    f"{counts} within gpus_per_node={space.gpus_per_node}",
                    "a TP degree that divides a GPU count and the attention heads, at most gpus_per_node")


def _step_times(d, mem, eff, acceptance, k, drafter, batch, ctx, prompt, cache):
    """(step costs, TPOT at `batch` sequences, time to prefill a `prompt`-token prompt), shared between
    configurations through `cache`: the costs depend on max_num_seqs only through the largest step the engine runs in
    a CUDA graph (with speculation and without: ResolvedSettings.plain_graph_max_tokens), and the times are pure in
    (costs, shape), so configurations that differ in GPU count or max_num_seqs alone share them."""
    s = mem.settings
    key = (d.gpu.gpu_id, d.tp, d.pp, d.ep, drafter, k, d.engine.kv_cache_dtype, s.graph_max_tokens,
           s.plain_graph_max_tokens)
    costs = cache.get(key)
    if costs is None:
        costs = cache[key] = costs_for(d, mem, eff, k, Tree())
    timed = (key, batch, s.max_num_batched_tokens)
    times = cache.get(timed)
    if times is None:
        if d.speculative.enabled and acceptance is not None:
            per_pass = pass_tokens(acceptance.per_token(k), k, Tree(), proposal_rate=d.speculative.proposal_rate)
            tpot = spec_tpot(costs, batch, ctx, per_pass)
        else:
            tpot = decode_step(costs, batch, ctx).time_s
        times = cache[timed] = (tpot, prefill_time(costs, prompt, s.max_num_batched_tokens))
    return (costs, *times)


def _judge(d, mem, w, policy, slo, eff, acceptance, k, replicas, ctx, peak_total, cache, drafter, cost, unit):
    """One configuration's candidate; `drafter`: (its index in the space, its label)."""
    s = mem.settings
    verdict = evaluate(mem, w, policy, detail=False)
    headroom = verdict.worst_case.headroom_fraction
    base = dict(gpu=d.gpu.gpu_id, gpus=d.num_gpus, tp=d.tp, pp=d.pp, expert_parallel=d.ep > 1, replicas=replicas,
                drafter=drafter[1],
                method=d.speculative.method, k=k, kv_cache_dtype=d.engine.kv_cache_dtype, max_num_seqs=s.max_num_seqs,
                headroom=headroom, cost=cost, cost_unit=unit, kv_cache_tokens=mem.kv_cache_tokens,
                kv_cache_bytes=mem.kv_cache_bytes)
    if verdict.verdict == DOES_NOT_FIT:
        reason = verdict.reasons[0] if verdict.reasons else (
            f"KV demand at {verdict.worst_case.concurrency} p99 requests exceeds the pool "
            f"({headroom_text(headroom, policy)} headroom)")
        return Candidate(status="does_not_fit", reason=reason, tpot_s=None, ttft_s=None, throughput_tok_s=None, **base)
    batch = max(1, min(verdict.worst_case.concurrency, s.max_num_seqs))
    costs, tpot, ttft = _step_times(d, mem, eff, acceptance, k, drafter, batch, ctx, w.prompt_tokens.p99, cache)
    # decode shares the GPU with prefilling the arrivals. Their rate is the one that keeps the workload's concurrency
    # in flight once that sharing stretches every request (the fixed point planner.simulate's rate_for_concurrency
    # iterates to, the confirming simulation's rate): with a latency E unshared and P seconds of prefill per arrival,
    # C = r E / (1 - r P), so r = C / (E + C P); at the peak, as the simulated burst, burst_factor times that. The
    # rate of the unstretched latency (C / E) counts arrivals the stretched requests never make room for, most of
    # all for a fast decode ("prefilling alone needs 342% of the GPU" where the burst needs 116%).
    per_prompt = prefill_share(costs, 1.0, w.prompt_tokens.p50, s.max_num_batched_tokens)  # seconds per arrival
    unshared = ttft + max(1, w.output_tokens.p50) * tpot
    rate = shared_prefill_rate(w.concurrency, unshared, per_prompt)
    u = w.burst_factor * rate * per_prompt
    if u >= 0.95:
        return Candidate(status="misses_throughput", reason=f"prefilling the prompts alone needs {u:.0%} of the GPU"
                         + (" at the burst" if w.burst_factor > 1 else ""),
                         tpot_s=None, ttft_s=ttft, throughput_tok_s=None, **base)
    tpot /= 1 - u
    ttft /= 1 - u
    # the sequences in flight over every replica: each replica's batch is its rounded-up share of the peak, so more
    # replicas than requests (16 in flight on 64 GPUs at TP 1: a batch of 1 on each) run no more than the peak itself
    in_flight = min(replicas * batch, max(1, peak_total))
    throughput = in_flight / tpot
    checks = []
    if slo.tpot_p99_s and tpot > slo.tpot_p99_s:
        checks.append(("misses_tpot", f"TPOT {tpot * 1e3:.1f} ms at {batch} sequences > {slo.tpot_p99_s * 1e3:g} ms"))
    if slo.ttft_p99_s:
        if ttft > slo.ttft_p99_s:
            checks.append(("misses_ttft", f"p99 prompt prefill {ttft * 1e3:.0f} ms > {slo.ttft_p99_s * 1e3:g} ms"))
        elif verdict.worst_case.queued:
            checks.append(("misses_ttft", f"max_num_seqs={s.max_num_seqs} queues {verdict.worst_case.queued} "
                                          "requests at peak"))
    if w.concurrency >= s.max_num_seqs and verdict.worst_case.queued:
        # with or without a TTFT target: the expected load's arrivals (Little's law at its concurrency) already need
        # every sequence slot, so the queue the burst builds never drains (the confirming simulation's queue growth)
        checks.append(("misses_throughput", f"max_num_seqs={s.max_num_seqs} runs no more than the {w.concurrency} "
                                            f"requests the expected load keeps in flight: the queue of the burst "
                                            f"({verdict.worst_case.queued} at its peak) never drains"))
    if slo.throughput_tok_s and throughput < slo.throughput_tok_s:
        checks.append(("misses_throughput", f"{throughput:,.0f} tok/s < {slo.throughput_tok_s:,.0f} tok/s"))
    if slo.request_rate:
        served = in_flight / (ttft + max(1, w.output_tokens.p50) * tpot)
        if served < slo.request_rate:
            checks.append(("misses_throughput", f"serves {served:.2f} req/s < {slo.request_rate:g} req/s"))
    if checks:
        status, reason = checks[0]
    elif verdict.verdict == FITS:
        status, reason = "ok", f"meets the SLO with {headroom_text(headroom, policy)} headroom"
    else:
        status, reason = "thin", (f"meets the SLO but headroom {headroom_text(headroom, policy)} < policy "
                                  f"{policy_text(policy)}")
    return Candidate(status=status, reason=reason, tpot_s=tpot, ttft_s=ttft, throughput_tok_s=throughput, **base)


def pareto_front(cands: list[Candidate]) -> list[Candidate]:
    """Configurations meeting the SLO that no other beats on cost, headroom and throughput at once."""
    pool = sorted((c for c in cands if c.status in ("ok", "thin")),
                  key=lambda c: (c.cost, -c.headroom, -(c.throughput_tok_s or 0)))
    # every configuration kept so far costs no more than the next one, so it is dominated when one kept has at least
    # its headroom and throughput: a query against the staircase of the kept (headroom, throughput) pairs that no
    # other kept pair beats on both (headroom ascending, throughput descending), O(log n) a configuration, not a
    # scan of the front (which makes a large space's front quadratic: minutes for 500,000 configurations)
    front: list[Candidate] = []
    stair_h: list[float] = []
    stair_t: list[float] = []
    for c in pool:
        t = c.throughput_tok_s or 0
        i = bisect_left(stair_h, c.headroom)  # the first kept with at least this headroom has the most throughput
        if i < len(stair_h) and stair_t[i] >= t:
            continue
        front.append(c)
        j = i
        while j > 0 and stair_t[j - 1] <= t:  # the kept pairs it now beats on both leave the staircase
            j -= 1
        if i < len(stair_h) and stair_h[i] == c.headroom:  # the same headroom with less throughput: replaced
            i += 1
        stair_h[j:i] = [c.headroom]
        stair_t[j:i] = [t]
    return front


def _overshoot(c: Candidate, slo) -> float:
    """How far past the SLO's latency targets a configuration lands (its worst ratio to them; 0 without one)."""
    if slo is None:
        return 0.0
    ratios = [value / target for value, target in ((c.tpot_s, slo.tpot_p99_s), (c.ttft_s, slo.ttft_p99_s))
              if value is not None and target]
    return max(ratios, default=0.0)


def rejected_families(cands: list[Candidate], slo=None) -> list[dict]:
    """Each family (GPU x drafter) with no `ok` configuration, with its closest: the best status, then (missing a
    latency target) the nearest to the SLO, then the most headroom, then the largest KV pool."""
    families: dict[tuple[str, str], list[Candidate]] = {}
    for c in cands:
        families.setdefault((c.gpu, c.drafter), []).append(c)
    out = []
    for (gpu, drafter), members in families.items():
        if any(c.status == "ok" for c in members):
            continue
        # ... and, where no configuration has a KV cache to have headroom in (every headroom -inf), the one least
        # short of one (the first listed had been named)
        best = min(members, key=lambda c: (STATUS_ORDER.index(c.status), _overshoot(c, slo) if c.status in
                                           ("misses_tpot", "misses_ttft") else 0.0, -c.headroom, -c.kv_cache_bytes))
        out.append({"gpu": gpu, "drafter": drafter, "status": best.status, "configurations": len(members),
                    "why": f"closest: {best.gpus} GPUs, TP={best.tp}{' (experts by expert)' if best.expert_parallel else ''}"
                           f"{f' PP={best.pp}' if best.pp > 1 else ''}, k={best.k}, kv={best.kv_cache_dtype}, "
                           f"max_num_seqs={best.max_num_seqs}: {best.reason}"})
    return out


def run_search(space, profile: AccountingProfile, efficiency_for, confirm=None) -> SearchResult:
    """Screen the space; `confirm(candidate) -> (confirmed, summary dict)` simulates the finalists."""
    start = time.perf_counter()
    reasons: dict[str, list] = {}
    cands, skipped = screen(space, profile, efficiency_for, reasons)
    elapsed = time.perf_counter() - start
    def slack(c: Candidate) -> float:
        """How far inside the SLO the screen puts a configuration (the more, the likelier it confirms)."""
        margins = [1.0]
        if space.slo.tpot_p99_s and c.tpot_s:
            margins.append(1 - c.tpot_s / space.slo.tpot_p99_s)
        if space.slo.ttft_p99_s and c.ttft_s:
            margins.append(1 - c.ttft_s / space.slo.ttft_p99_s)
        return min(margins)

    # rank: cost, then headroom (the thin-margin rule), then how far inside the SLO the screen puts it
    ok = sorted((c for c in cands if c.status == "ok"), key=lambda c: (c.cost, -round(c.headroom, 4), -slack(c)))
    finalists: list[Candidate] = []
    simulated_rejected: list[Candidate] = []
    baseline = None
    if confirm is None:
        finalists = ok[: space.finalists]
    else:
        finalists, simulated_rejected = _confirm_in_order(ok, confirm, space.finalists)
        if finalists and finalists[0].method != "none":
            baseline = _baseline(cands, finalists[0], confirm)
    return SearchResult(name=space.name, screened=len(cands), skipped=skipped, screen_seconds=elapsed,
                        candidates=tuple(cands), cheapest=finalists[0] if finalists else None,
                        pareto=tuple(pareto_front(cands)), rejected_families=tuple(rejected_families(cands, space.slo)),
                        finalists=tuple(finalists), simulated_rejected=tuple(simulated_rejected), baseline=baseline,
                        headroom_policy=space.headroom, notes=tuple(space.notes),
                        skipped_reasons=tuple((field, n, first) for field, (n, first) in
                                              sorted(reasons.items(), key=lambda kv: -kv[1][0])))


def _confirm_in_order(ok: list[Candidate], confirm, wanted: int) -> tuple[list[Candidate], list[Candidate]]:
    """Simulate in rank order until `wanted` are confirmed (at most 10x as many runs). Neighbours of a rejected
    configuration are not all simulated: one differing only in max_num_seqs shares its verdict, and after two
    values of k of one group (GPU, count, TP, drafter, KV dtype) are rejected the rest of the group is left, so
    that the budget reaches other groups."""
    confirmed_list: list[Candidate] = []
    rejected_list: list[Candidate] = []
    rejected: set[tuple] = set()
    seen_confirmed: set[tuple] = set()
    rejected_per_group: dict[tuple, int] = {}
    runs = 0
    for c in ok:
        if len(confirmed_list) >= wanted or runs >= 10 * max(1, wanted):
            break
        group = (c.gpu, c.gpus, c.tp, c.pp, c.expert_parallel, c.drafter, c.kv_cache_dtype)
        if (*group, c.k) in rejected or (*group, c.k) in seen_confirmed or rejected_per_group.get(group, 0) >= 2:
            continue  # a neighbour (another max_num_seqs) of one already judged: the same verdict, not a new finalist
        confirmed, summary = confirm(c)
        runs += 1
        if confirmed:
            seen_confirmed.add((*group, c.k))
            confirmed_list.append(replace(c, confirmed=True, simulation=summary))
        else:
            rejected.add((*group, c.k))
            rejected_per_group[group] = rejected_per_group.get(group, 0) + 1
            rejected_list.append(replace(c, confirmed=False, simulation=summary))
    return confirmed_list, rejected_list


def _baseline(cands: list[Candidate], best: Candidate, confirm) -> Candidate | None:
    """The cheapest configuration's hardware without speculation, simulated too: what speculation buys."""
    same = [c for c in cands if c.method == "none" and (c.gpu, c.gpus, c.tp, c.pp, c.expert_parallel,
                                                         c.kv_cache_dtype, c.max_num_seqs)
            == (best.gpu, best.gpus, best.tp, best.pp, best.expert_parallel, best.kv_cache_dtype, best.max_num_seqs)]
    if not same:
        return None
    base = same[0]
    if base.status == "does_not_fit":
        return base
    confirmed, summary = confirm(base)
    return replace(base, confirmed=confirmed, simulation=summary)
