"""Compare a saved plan (its JSON) with what a running vLLM server reports: which assumption reality broke.

Each broken assumption is one line. The plan's verdict is re-evaluated with the observed KV capacity and
the observed KV usage; the check fails (exit 1) when that verdict differs from the plan's, or when the
observed acceptance falls below the rate at which the plan found speculation stops paying.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..core.envelope import VERDICT_RANK as RANK
from ..core.envelope import verdict_for
from ..core.errors import SpecError
from ..core.perf import acceptance_from_mean_length
from ..core.speculation import Tree
from ..engines.readers import LiveMetrics, StartupLog
from .perf import pass_tokens

@dataclass(frozen=True)
class Observed:
    """What a running server reported (its /metrics and/or start-up log); None: not reported."""

    kv_cache_tokens: int | None = None
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    acceptance_rate: float | None = None  # per token, from the mean accepted length at the server's k
    mean_accepted_length: float | None = None
    draft_acceptance_fraction: float | None = None
    proposal_rate: float | None = None  # the share of decode steps that carried a proposal (LiveMetrics)
    preemptions: float | None = None
    kv_usage_fraction: float | None = None
    running: float | None = None
    waiting: float | None = None
    ttft_s: dict | None = None
    tpot_s: dict | None = None
    engine_version: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class LiveCheck:
    observed: Observed
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    planned_verdict: str = ""
    verdict_now: str = ""
    verdict_changes: bool = False
    plan_inputs: dict = field(default_factory=dict)  # the plan's `inputs` section (target, draft, method, k)

    def to_dict(self) -> dict:
        """The JSON of `specsize check-live --format json` (docs/json.md)."""
        return {"schema_version": "1.0", "observed": self.observed.to_dict(), "violations": self.violations,
                "notes": self.notes, "planned_verdict": self.planned_verdict, "verdict_now": self.verdict_now,
                "verdict_changes": self.verdict_changes}


PLAN_JSON = "the output of `specsize plan --format json`"


def _number(value: object, nullable: bool = False) -> bool:
    if value is None:
        return nullable
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _require_sections(plan: dict) -> None:
    """The plan's sections are objects, and the speculation figures the check compares are numbers."""
    for section in ("inputs", "perf", "robustness"):
        if plan.get(section) is not None and not isinstance(plan[section], dict):
            raise SpecError("plan", f"{section} is not an object", PLAN_JSON)
    for section, key in (("robustness", "acceptance_floor"), ("perf", "acceptance_rate"),
                         ("inputs", "acceptance_rate"), ("inputs", "num_speculative_tokens"),
                         ("inputs", "proposal_rate")):
        value = (plan.get(section) or {}).get(key)
        if not _number(value, True) or (value is not None and value < 0):
            raise SpecError("plan", f"{section}.{key} is {value!r}, not a number >= 0", PLAN_JSON)
    inputs = plan.get("inputs") or {}
    k = inputs.get("num_speculative_tokens")
    if k is not None and not isinstance(k, int):  # a whole number of tokens (--record keeps it as the row's k)
        raise SpecError("plan", f"inputs.num_speculative_tokens is {k!r}, not a whole number", PLAN_JSON)
    for key in ("draft", "method"):  # --record keeps them as the row's text columns
        if inputs.get(key) is not None and not isinstance(inputs[key], str):
            raise SpecError("plan", f"inputs.{key} is {inputs[key]!r:.40}, not a string", PLAN_JSON)


def _require(plan: dict, metrics: LiveMetrics | None, log: StartupLog | None) -> None:
    """The plan JSON has the fields the check reads, of the right types (a hand-edited or truncated plan is
    bad input, not a crash)."""
    for key in ("verdict", "kv_cache_tokens", "envelope", "headroom_policy"):
        if key not in plan:
            raise SpecError("plan", f"the plan JSON has no {key!r}", PLAN_JSON)
    if not isinstance(plan["verdict"], str) or plan["verdict"] not in RANK:
        raise SpecError("plan", f"verdict {plan['verdict']!r:.80} is not a verdict", PLAN_JSON)
    checks = {"kv_cache_tokens": (plan["kv_cache_tokens"], False), "headroom_policy": (plan["headroom_policy"], False),
              "headroom_fraction": (plan.get("headroom_fraction"), True), "kv_blocks": (plan.get("kv_blocks"), True)}
    env = plan["envelope"]
    if not isinstance(env, dict):
        raise SpecError("plan", "envelope is not an object", PLAN_JSON)
    checks |= {"envelope.demand_bytes": (env.get("demand_bytes"), False),
               "envelope.capacity_bytes": (env.get("capacity_bytes"), False)}
    for name, (value, nullable) in checks.items():
        if not _number(value, nullable):
            raise SpecError("plan", f"{name} is {value!r}, not a number", PLAN_JSON)
        if value is not None and value < 0 and name != "headroom_fraction":
            raise SpecError("plan", f"{name} is {value!r}, a negative count", PLAN_JSON)
    if plan.get("schema_version") not in (None, "1.0"):
        raise SpecError("plan", f"schema_version {plan.get('schema_version')!r} is not one this specsize reads", "1.0")
    if not isinstance(plan.get("inputs"), dict) or not isinstance(plan["inputs"].get("target"), str):
        raise SpecError("plan", "the plan names no target model (inputs.target)", PLAN_JSON)
    _require_sections(plan)
    if metrics is None and log is None:
        raise SpecError("metrics", "nothing to compare", "--metrics URL|FILE and/or --log FILE")
    _same_model(plan, metrics, log)


def _model_name(ref: str) -> str:
    """A model reference compared by its last path component (a hub id, a served name or a local path)."""
    return ref.rstrip("/").rsplit("/", 1)[-1].lower()


def _same_model(plan: dict, metrics: LiveMetrics | None, log: StartupLog | None) -> None:
    """The server must serve the plan's target: comparing a 70B plan with an 8B server tells nothing."""
    target = (plan.get("inputs") or {}).get("target")
    from_metrics = metrics.model if metrics else None
    served = from_metrics or (log.model if log else None)
    if isinstance(target, str) and served and _model_name(target) != _model_name(served):
        raise SpecError("metrics" if from_metrics else "log",
                        f"the server serves {served!r}, the plan is for {target!r}",
                        "the metrics and log of a server running the plan's target")


def _server_k(metrics: LiveMetrics | None) -> float | None:
    """The k the server drafts up to: vLLM keeps one accepted-token counter per draft position, k of them; its drafted
    tokens per draft (LiveMetrics.k) fall below k where an n-gram match runs short of k tokens (the fixture
    ngram.metrics: 88 tokens in 40 drafts at k = 3), and a mean accepted length read at that smaller k overstates the
    per-token rate the plan prices at k."""
    if metrics is None:
        return None
    drafted = metrics.k
    positions = len(metrics.accepted_per_position)
    if drafted is not None and positions > drafted:
        return float(positions)
    return drafted


def _observed(metrics: LiveMetrics | None, log: StartupLog | None, planned_k: int | None = None) -> Observed:
    """What the server reports, from its metrics and/or its start-up log (the `observed` section). A server that
    reports its accepted length but not its drafts (SGLang) is read at the plan's k."""
    from_metrics = metrics.kv_cache_tokens if metrics else None
    from_log = log.kv_cache_tokens if log else None
    # SGLang's metrics size the pool from a usage rounded to two decimals (to within 1%) where the server serves no
    # max_total_num_tokens: its start-up log's exact count wins over that estimate (vLLM's metrics count blocks)
    sglang_estimate = metrics is not None and metrics.generation == "SGLang"
    observed_tokens = (from_log or from_metrics) if sglang_estimate else (from_metrics or from_log)
    blocks = metrics.num_gpu_blocks if metrics else None
    if blocks is None and log is not None:
        blocks = log.num_blocks
    block_size = metrics.block_size if metrics else None
    if observed_tokens is None and blocks is not None and block_size:
        observed_tokens = blocks * block_size
    k = _server_k(metrics)
    mean_length = metrics.mean_accepted_length if metrics else None
    if k is None and mean_length is not None and planned_k:
        k = planned_k
        if mean_length > planned_k + 1 + 1e-6:  # SGLang reports no drafts: its length is read at the plan's k
            raise SpecError("metrics", f"a mean accepted length of {mean_length:.2f} is more than the plan's k + 1 = "
                            f"{planned_k + 1}", "the metrics of a server running the plan's k")
    rate = None
    if mean_length is not None and k:
        k_int = max(1, round(k))
        rate = acceptance_from_mean_length(min(max(mean_length, 1.0), k_int + 1), k_int)
    return Observed(kv_cache_tokens=observed_tokens, num_gpu_blocks=blocks, block_size=block_size,
                    acceptance_rate=rate, mean_accepted_length=mean_length,
                    draft_acceptance_fraction=metrics.draft_acceptance_fraction if metrics else None,
                    proposal_rate=metrics.proposal_rate if metrics else None,
                    preemptions=metrics.preemptions if metrics else None,
                    kv_usage_fraction=metrics.kv_usage_fraction if metrics else None,
                    running=metrics.running if metrics else None, waiting=metrics.waiting if metrics else None,
                    ttft_s=metrics.ttft_s if metrics else None, tpot_s=metrics.tpot_s if metrics else None,
                    engine_version=log.version if log else None)


def _capacity_seen(metrics: LiveMetrics | None, log: StartupLog | None, observed: Observed,
                   result: LiveCheck) -> None:
    """A vLLM server always serves vllm:cache_config_info: metrics without it, and no log that gives the cache's size,
    are a truncated or partial /metrics text, and a check of them would pass the plan's capacity unchecked (fuzz pass
    6: `head -120` of a real /metrics passed the gate). Where it is there but does not size the cache (vLLM 0.8.0-0.8.4
    write num_gpu_blocks="None"), the check says the capacity went unchecked. SGLang's metrics give the size only under
    load (token_usage > 0), so they are not held to it."""
    if metrics is None or metrics.generation == "SGLang" or observed.kv_cache_tokens is not None:
        return
    if log is not None and (log.refusal is not None or log.refused_max_model_len is not None):
        return  # the engine did not start: there is no cache to size
    if metrics.cache_config_seen:
        result.notes.append("KV capacity not checked: the metrics' cache_config_info does not size the cache (vLLM "
                            "0.8.0-0.8.4 write num_gpu_blocks=None); give --log with the start-up log to check it")
        return
    raise SpecError("metrics", "no vllm:cache_config_info (the KV cache's size) in the metrics, and no start-up log "
                    "that gives it: truncated, or not the whole /metrics text of a vLLM server",
                    "the whole text of a vLLM server's /metrics, or --log with its start-up log")


def _capacity_checks(plan: dict, metrics: LiveMetrics | None, observed: Observed, result: LiveCheck) -> tuple[float, bool]:
    """Record the KV capacity, usage and preemption findings; (headroom now, did reality move it?)."""
    planned_tokens = plan["kv_cache_tokens"]
    observed_tokens = observed.kv_cache_tokens
    blocks = observed.num_gpu_blocks
    env = plan["envelope"]
    demand, capacity = env["demand_bytes"], env["capacity_bytes"]
    planned_headroom = plan.get("headroom_fraction")
    headroom_now = planned_headroom if planned_headroom is not None else -math.inf
    changed = False  # did reality move the headroom?
    pool_ratio = 1.0  # the engine's pool over the plan's (usage is a share of the engine's)

    if observed_tokens == 0:
        result.violations.append("KV cache: the engine reports 0 tokens of KV cache: it cannot serve a request")
        return -math.inf, True
    if observed_tokens and not planned_tokens:
        # the plan found no room for a KV cache (the engine would refuse to start), and the engine runs with one: the
        # plan's memory is off; the check had said nothing, reality "agreeing" with a plan that cannot start
        result.violations.append(f"KV cache: the engine holds {observed_tokens:,} tokens, the plan found room for none "
                                 "(it expected the engine not to start): plan again with the server's settings")
    if observed_tokens is not None and planned_tokens:
        ratio = pool_ratio = observed_tokens / planned_tokens
        if abs(ratio - 1) > 0.01:
            result.violations.append(
                f"KV cache: the engine holds {observed_tokens:,} tokens, the plan assumed {planned_tokens:,} "
                f"({ratio - 1:+.1%})")
            if capacity > 0:
                headroom_now = 1 - demand / (capacity * ratio)
                changed = True
    if plan.get("kv_blocks") is not None and blocks is not None and blocks != plan["kv_blocks"]:
        result.notes.append(f"blocks: the engine has {blocks:,}, the plan {plan['kv_blocks']:,}")
    if metrics is not None and metrics.kv_usage_fraction is not None and capacity > 0:
        # the usage is a share of the engine's pool, the plan's worst case one of its own: the worst case is held in
        # the engine's terms (a pool half the plan's, 80% used, holds 40% of the plan's pool, within a worst case of
        # 50%; it had been called a load outside the envelope, and a pool twice the plan's 30% used, 60% of the plan's
        # pool, passed)
        planned_fraction = demand / (capacity * pool_ratio)
        if metrics.kv_usage_fraction > planned_fraction + 1e-9:
            of_pool = "" if pool_ratio == 1.0 else f" of the engine's {observed_tokens:,} tokens"
            result.violations.append(
                f"KV usage: {metrics.kv_usage_fraction:.0%} of the cache is in use, above the plan's worst case of "
                f"{planned_fraction:.0%}{of_pool}: the load is outside the planned envelope")
            headroom_now = min(headroom_now, 1 - metrics.kv_usage_fraction)
            changed = True
    if metrics is not None and metrics.preemptions:
        result.violations.append(f"preemptions: {metrics.preemptions:.0f} requests were preempted (KV cache ran out); "
                                 "the plan's envelope did not expect any")
        headroom_now = min(headroom_now, -1e-9)
        changed = True
    return headroom_now, changed


def _plan_tree(plan: dict) -> Tree:
    """The drafting tree the plan priced (its inputs' tree_topk and num_draft_tokens; a chain where they are absent or
    not whole numbers, as in plans written before they were recorded)."""
    inputs = plan.get("inputs") or {}
    topk, nodes = inputs.get("tree_topk"), inputs.get("num_draft_tokens")
    if not isinstance(topk, int) or isinstance(topk, bool) or topk <= 1:
        return Tree()
    return Tree(topk, nodes if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 1 else None)


def _as_chain(rate: float | None, k: int | None, tree: Tree) -> float | None:
    """A per-branch rate of the plan's tree as the per-token rate of a chain of k with the same tokens per pass: what
    SGLang's mean accepted length (its tree's gain included) reads as at k (_observed). A chain's rate is itself."""
    if rate is None or tree.topk <= 1 or not k:
        return rate
    return acceptance_from_mean_length(min(max(pass_tokens(rate, k, tree), 1.0), k + 1), k)


def _acceptance_checks(plan: dict, metrics: LiveMetrics | None, observed: Observed, result: LiveCheck) -> bool:
    """Record the acceptance findings; True when speculation no longer pays."""
    rate = observed.acceptance_rate
    mean_length = observed.mean_accepted_length
    planned_k = (plan.get("inputs") or {}).get("num_speculative_tokens")
    k = _server_k(metrics) or planned_k or 0
    perf = plan.get("perf") or {}
    planned_rate = perf.get("acceptance_rate")
    if planned_rate is None:
        planned_rate = (plan.get("inputs") or {}).get("acceptance_rate")
    # a tree's rate is per branch; the server's mean accepted length holds the tree's gain, read at the plan's k as a
    # chain's: the plan's figures are compared in the same terms (the tokens a pass gains)
    tree = _plan_tree(plan) if isinstance(planned_k, int) and planned_k > 0 else Tree()
    tree_terms = ""
    if tree.topk > 1 and isinstance(planned_k, int):
        planned_tokens = perf.get("tokens_per_pass")
        proposals = (plan.get("inputs") or {}).get("proposal_rate") or 1.0
        as_chain: float | None
        if isinstance(planned_tokens, (int, float)) and _number(planned_tokens) and planned_tokens >= 1:
            # the plan's own pass (a measured length is not widened again)
            as_chain = acceptance_from_mean_length(min(1 + (planned_tokens - 1) / proposals, planned_k + 1),
                                                   planned_k)
        else:
            as_chain = _as_chain(planned_rate, planned_k, tree)
        if planned_rate is not None and as_chain is not None and abs(as_chain - planned_rate) > 5e-3:
            # the rate the plan was given, per branch (perf's, else the inputs' where the plan has no perf section)
            tree_terms = (f"{planned_rate:.2f} per branch of its top-{tree.topk} tree ({as_chain:.2f} as a chain of "
                          f"{planned_k}, the terms the server's accepted length reads in)")
        planned_rate = as_chain
    if rate is not None and planned_rate is not None and rate < planned_rate - 0.02:
        assumed = tree_terms or f"{planned_rate:.2f}"
        result.violations.append(f"acceptance: observed a = {rate:.2f} (mean accepted length {mean_length:.2f} at "
                                 f"k = {k:.0f}), the plan assumed {assumed}")
    inputs = plan.get("inputs") or {}
    planned_proposals = inputs.get("proposal_rate") or 1.0
    proposals = observed.proposal_rate
    # either way moves the speed-up: fewer proposals gain less at small batches, more cost more verification at large
    if proposals is not None and inputs.get("method") == "ngram" and abs(proposals - planned_proposals) > 0.05:
        result.violations.append(f"proposals: the n-gram lookup proposed in {proposals:.0%} of decode steps, the plan "
                                 f"assumed {planned_proposals:.0%} (the acceptance is per proposal): plan again with "
                                 f"--proposal-rate {proposals:.2f}")
    robustness = plan.get("robustness") or {}
    floor = robustness.get("acceptance_floor")
    # the floor is in the terms of the plan's rate (planner.robustness): per branch of the tree where the plan's rate is
    # (tree_terms), else already a chain's (a measured length's rate); in the server's terms here
    floor_now = _as_chain(floor, planned_k if isinstance(planned_k, int) else None, tree) if tree_terms else floor
    never = robustness.get("speculation_pays") is False and floor is None  # no acceptance up to 1 made it pay
    speculation_stops = rate is not None and (never or (floor_now is not None and rate < floor_now))
    if speculation_stops and never:
        result.violations.append(f"speculation does not pay: the plan found no acceptance rate up to 1 at which it "
                                 f"does (observed a = {rate:.2f}): serve without it")
    elif speculation_stops:
        # a plan whose speculation did not pay already gives as its floor the rate it needs
        how = "does not pay" if robustness.get("speculation_pays") is False else "no longer pays"
        terms = f" as a chain of {planned_k} ({floor:.2f} per branch of its top-{tree.topk} tree)" \
            if floor_now != floor else ""
        result.violations.append(f"speculation {how}: acceptance {rate:.2f} is below the plan's floor "
                                 f"{floor_now:.2f}{terms}")
    return speculation_stops


def _verdict_now(plan: dict, headroom_now: float, changed: bool) -> str:
    if not changed:
        return plan["verdict"]
    now = verdict_for(headroom_now, plan["headroom_policy"]) if math.isfinite(headroom_now) else "does_not_fit"
    # a plan that failed for another reason (start-up, max_model_len) cannot get better from the headroom
    if plan.get("reasons") and RANK[now] > RANK[plan["verdict"]]:
        now = plan["verdict"]
    return now


def _engine_note(plan: dict, metrics: LiveMetrics | None, log: StartupLog | None, result: LiveCheck) -> None:
    """A plan of one engine held against a server of the other is said: its KV cache and memory follow the engine
    it was planned for (SGLang sizes its pool by mem_fraction_static, vLLM by gpu_memory_utilization)."""
    engine = plan.get("engine")
    planned = engine.get("name") if isinstance(engine, dict) else None
    serving = "sglang" if ((metrics is not None and metrics.generation == "SGLang")
                           or (log is not None and log.engine == "sglang")) else ("vllm" if metrics or log else None)
    if isinstance(planned, str) and serving and planned != serving:
        result.notes.append(f"the plan is for {planned[:40]}, the server runs {serving}: its KV cache and memory "
                            f"figures follow {serving}'s accounting, not the plan's (plan it with --engine {serving})")


def check(plan: dict, metrics: LiveMetrics | None, log: StartupLog | None) -> LiveCheck:
    _require(plan, metrics, log)
    planned_k = (plan.get("inputs") or {}).get("num_speculative_tokens")
    observed = _observed(metrics, log, planned_k if isinstance(planned_k, int) and planned_k > 0 else None)
    inputs = plan.get("inputs")
    result = LiveCheck(observed=observed, planned_verdict=plan["verdict"],
                       plan_inputs=inputs if isinstance(inputs, dict) else {})
    _capacity_seen(metrics, log, observed, result)
    headroom_now, changed = _capacity_checks(plan, metrics, observed, result)
    if log is not None and log.refusal is not None:
        result.violations.append(f"start-up: the engine refused to start ({log.refusal})")
        headroom_now, changed = -math.inf, True
    if log is not None and log.refused_max_model_len is not None:
        result.violations.append(f"start-up: the engine refused to start (one request of max_model_len="
                                 f"{log.refused_max_model_len} does not fit its KV cache)")
        headroom_now, changed = -math.inf, True
    if metrics is not None and log is not None and metrics.kv_cache_tokens and log.kv_cache_tokens and \
            abs(metrics.kv_cache_tokens / log.kv_cache_tokens - 1) > 0.01:
        result.notes.append(f"the log ({log.kv_cache_tokens:,} tokens) and the metrics ({metrics.kv_cache_tokens:,}) "
                            "disagree: are they of the same server and start?")
    _engine_note(plan, metrics, log, result)
    speculation_stops = _acceptance_checks(plan, metrics, observed, result)
    if metrics is not None and metrics.waiting and metrics.waiting > 0:
        result.notes.append(f"{metrics.waiting:.0f} requests waiting now")
    result.verdict_now = _verdict_now(plan, headroom_now, changed)
    result.verdict_changes = result.verdict_now != plan["verdict"] or speculation_stops
    return result
