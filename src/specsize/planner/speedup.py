"""`specsize speedup`: the speed-up table of a deployment and of candidate drafters side by side."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.memory import AccountingProfile, account
from ..core.perf import Efficiency
from ..core.specs import Deployment, SpeculativeConfig
from ..core.speculation import Acceptance, Tree
from .perf import SpeedupTable, speedup_table


@dataclass(frozen=True)
class Candidate:
    """Another drafter to compare: its speculative config (k filled in), acceptance and the k values to try."""

    label: str
    speculative: SpeculativeConfig
    acceptance: Acceptance
    ks: tuple[int, ...] | None  # None: the deployment's list


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
    mem = account(d, profile)
    table = speedup_table(d, mem, eff, acceptance, batches, ks, context, tree)
    sp = d.speculative
    return DrafterResult(label=label, method=sp.method, draft=sp.draft.model_id if sp.draft else None,
                         kv_cache_tokens=mem.kv_cache_tokens, weights_draft_bytes=mem.weights_draft_bytes, table=table)


def compare_drafters(d: Deployment, profile: AccountingProfile, eff: Efficiency, acceptance: Acceptance,
                     batches: list[int], ks: list[int], context: int, tree: Tree = Tree(),
                     candidates: tuple[Candidate, ...] = ()) -> SpeedupReport:
    own = f"{d.speculative.method}" + (f" {d.speculative.draft.model_id}" if d.speculative.draft else "")
    results = [_one(own, d, profile, eff, acceptance, batches, ks, context, tree)]
    for c in candidates:
        variant = replace(d, speculative=c.speculative)
        cand_ks = list(c.ks) if c.ks else ks
        acceptance_c = c.acceptance if c.acceptance.measured_at_k else replace(c.acceptance, measured_at_k=cand_ks[0])
        results.append(_one(c.label, variant, profile, eff, acceptance_c, batches, cand_ks, context, tree))
    return SpeedupReport(deployment=d, efficiency=eff, batch_sizes=tuple(batches), ks=tuple(ks),
                         context_len=context, drafters=tuple(results))
