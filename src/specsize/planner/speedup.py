"""`specsize speedup`: the speed-up table of a deployment and of candidate drafters side by side."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..catalog.deployment import parse_candidate
from ..core.memory import AccountingProfile, account
from ..core.perf import Efficiency
from ..core.specs import Deployment, quantization_override
from .perf import Acceptance, SpeedupTable, Tree, speedup_table


@dataclass(frozen=True)
class DrafterResult:
    label: str
    method: str
    draft: str | None
    kv_cache_tokens: int  # what the drafter leaves of the KV pool: its memory price
    weights_draft_bytes: int
    table: SpeedupTable


@dataclass(frozen=True)
class SpeedupReport:
    deployment: Deployment
    efficiency: Efficiency
    batch_sizes: tuple[int, ...]
    ks: tuple[int, ...]
    context_len: int
    drafters: tuple[DrafterResult, ...]  # the deployment's own first


def _one(label: str, d: Deployment, profile: AccountingProfile, eff: Efficiency, acceptance: Acceptance,
         batches: list[int], ks: list[int], context: int, tree: Tree) -> DrafterResult:
    mem = account(d, profile, quantization_override(d.engine.quantization, d.target))
    table = speedup_table(d, mem, eff, acceptance, batches, ks, context, tree)
    sp = d.speculative
    return DrafterResult(label=label, method=sp.method, draft=sp.draft.model_id if sp.draft else None,
                         kv_cache_tokens=mem.kv_cache_tokens, weights_draft_bytes=mem.weights_draft_bytes, table=table)


def compare_drafters(d: Deployment, profile: AccountingProfile, eff: Efficiency, acceptance: Acceptance,
                     batches: list[int], ks: list[int], context: int, tree: Tree = Tree(),
                     candidates: tuple[str, ...] = ()) -> SpeedupReport:
    own = f"{d.speculative.method}" + (f" {d.speculative.draft.model_id}" if d.speculative.draft else "")
    results = [_one(own, d, profile, eff, acceptance, batches, ks, context, tree)]
    for text in candidates:
        c = parse_candidate(text)
        variant = replace(d, speculative=c["speculative"])
        cand_ks = [c["k"]] if c["k"] else ks
        cand_acceptance = Acceptance(rate=c["rate"], mean_accepted_length=c["mean"],
                                     measured_at_k=c["k"] or cand_ks[0])
        results.append(_one(text, variant, profile, eff, cand_acceptance, batches, cand_ks, context, tree))
    return SpeedupReport(deployment=d, efficiency=eff, batch_sizes=tuple(batches), ks=tuple(ks),
                         context_len=context, drafters=tuple(results))
