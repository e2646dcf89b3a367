"""`specsize speedup`: the speed-up table of a deployment and of candidate drafters side by side."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.errors import SpecError
from ..core.kvcache import pool_blocks
from ..core.memory import AccountingProfile, MemoryAccount, account, unstarted
from ..core.perf import Efficiency
from ..core.ratios import speedup_text
from ..core.specs import Deployment, SpeculativeConfig
from ..core.speculation import Acceptance, Tree, mean_without_its_k
from ..engines.methods import TREE_METHODS
from .perf import SpeedupTable, engine_efficiency, speedup_table, thin_gain, thin_gain_text


@dataclass(frozen=True)
class Candidate:
    """Another drafter to compare: its speculative config (k filled in), acceptance and the k values to try."""

    label: str
    speculative: SpeculativeConfig
    acceptance: Acceptance
    ks: tuple[int, ...] | None  # None: the deployment's list
    # the release's engine for this drafter where it is not the deployment's (vLLM 0.8 / 0.9 serve a draft model on
    # V0: engines.registry.resolve_profile's method); None: the deployment's
    profile: AccountingProfile | None = None


@dataclass(frozen=True)
class DrafterResult:
    label: str
    method: str
    draft: str | None
    kv_cache_tokens: int  # what the drafter leaves of the KV pool: its memory price
    weights_draft_bytes: int
    table: SpeedupTable
    proposal_rate: float = 1.0  # the share of decode steps that carry a proposal (SpeculativeConfig.proposal_rate)
    kv_cache_at_k: int = 0  # the k whose memory account kv_cache_tokens is (the drafter's own; the table spans its ks)
    # why the engine does not start with this drafter (a candidate's: the deployment's own is refused), None: it starts
    startup_problem: str | None = None


@dataclass(frozen=True)
class SpeedupReport:
    deployment: Deployment
    efficiency: Efficiency  # the terms the deployment's own table is priced with (planner.perf.engine_efficiency)
    batch_sizes: tuple[int, ...]
    ks: tuple[int, ...]
    context_len: int
    drafters: tuple[DrafterResult, ...]  # the deployment's own first
    notes: tuple[str, ...] = ()  # shapes of the table the deployment cannot run (KV pool, max_model_len, ...)


def shape_notes(mem: MemoryAccount, batches: list[int], ks: list[int], context: int) -> tuple[str, ...]:
    """What the table prices but the engine cannot run: rows past max_num_seqs, a context past max_model_len,
    batches whose KV cache exceeds the pool. The table still shows them (as the roofline would), marked here."""
    s = mem.settings
    notes = []
    k = max(ks)
    if context + k > s.max_model_len:
        notes.append(f"a context of {context:,} tokens (+ k = {k}) exceeds max_model_len = {s.max_model_len:,}: "
                     "the engine rejects such requests")
    beyond = [b for b in batches if b > s.max_num_seqs]
    if beyond:
        notes.append(f"batch sizes {', '.join(map(str, beyond))} exceed max_num_seqs = {s.max_num_seqs}: the engine "
                     "never runs them")
    per_sequence = pool_blocks(mem.pool_layers, context + k, s.block_size, k + 1)
    fits = mem.usable_blocks // per_sequence if per_sequence else 0
    over = [b for b in batches if b > fits]
    if over:
        notes.append(f"batch sizes {', '.join(map(str, over))} at {context:,} tokens of context need more KV cache "
                     f"than the pool holds ({fits:,} such sequences): the engine would preempt")
    return tuple(notes)


def thin_gain_notes(results: list[DrafterResult]) -> tuple[str, ...]:
    """The cells of each table whose speed-up lies within the model's error of 1 (perf.thin_gain): a gain or a loss
    there is not established until measured."""
    notes = []
    for r in results:
        thin = [p for p in r.table.rows if thin_gain(p.speedup)]
        if not thin:
            continue
        cells = ", ".join(f"B={p.batch_size} k={p.k} {speedup_text(p.speedup)}" for p in thin[:6])
        more = f" and {len(thin) - 6} more" if len(thin) > 6 else ""
        verb = "lies" if len(thin) == 1 else "lie"
        notes.append(f"{r.label}: {cells}{more} {verb} {thin_gain_text()}")
    return tuple(notes)


def _one(label: str, d: Deployment, mem: MemoryAccount, eff: Efficiency, acceptance: Acceptance,
         batches: list[int], ks: list[int], context: int, tree: Tree) -> DrafterResult:
    table = speedup_table(d, mem, eff, acceptance, batches, ks, context, tree)
    sp = d.speculative
    problem = unstarted(d, mem)
    return DrafterResult(label=label, method=sp.method, draft=sp.draft.model_id if sp.draft else None,
                         kv_cache_tokens=mem.kv_cache_tokens, weights_draft_bytes=mem.weights_draft_bytes, table=table,
                         proposal_rate=sp.proposal_rate, kv_cache_at_k=sp.num_speculative_tokens,
                         startup_problem=problem)


def refuse_unstarted(d: Deployment, mem: MemoryAccount) -> None:
    """Refuse a speed-up table for a deployment whose engine never builds its KV pool, as `simulate` refuses to run one
    (planner.scenario: "the KV cache is empty" / "the engine does not start", exit 2): the table had priced every batch
    as if the server ran, under "KV cache 1,220,688 tokens" for a pool of 186 GiB on an 80 GB card. A pool that exists
    but refuses max_model_len is still priced, as simulate still runs it (core.memory.pool_never_built)."""
    why = unstarted(d, mem)
    if why:
        raise SpecError("deployment", f"{why}: no speed-up to price (see `specsize plan`)", "a deployment that starts")


def _candidate_drafter(spec: SpeculativeConfig, tree: Tree) -> SpeculativeConfig:
    """A candidate drafts the deployment's tree where SGLang drafts one with its method (engines.methods.TREE_METHODS),
    in memory as in time; any other (n-gram: SGLang matches its candidates in a trie, check_tree refuses a top-k for
    it) drafts its own chain: priced with the deployment's top-4 tree, an n-gram candidate had gained a tree's tokens
    a pass."""
    if tree.topk > 1 and spec.method in TREE_METHODS and spec.tree_topk == 1 and spec.num_draft_tokens is None:
        return replace(spec, tree_topk=tree.topk, num_draft_tokens=tree.num_draft_tokens)
    return spec


def compare_drafters(d: Deployment, profile: AccountingProfile, eff: Efficiency, acceptance: Acceptance,
                     batches: list[int], ks: list[int], context: int, tree: Tree = Tree(),
                     candidates: tuple[Candidate, ...] = ()) -> SpeedupReport:
    own = f"{d.speculative.method}" + (f" {d.speculative.draft.model_id}" if d.speculative.draft else "")
    mem = account(d, profile)
    refuse_unstarted(d, mem)
    results = [_one(own, d, mem, eff, acceptance, batches, ks, context, tree)]
    for c in candidates:
        spec = _candidate_drafter(c.speculative, tree)
        cand_ks = list(c.ks) if c.ks else ks
        if not c.ks:  # priced at the deployment's k: its pool too (it had been sized at the k=1 the text left unset)
            spec = replace(spec, num_speculative_tokens=d.speculative.num_speculative_tokens or cand_ks[0])
        variant = replace(d, speculative=spec)
        if mean_without_its_k(c.acceptance.mean_accepted_length, c.acceptance.measured_at_k, cand_ks):
            # read at the list's first k it had priced one candidate two ways by the order of -k (an n-gram candidate
            # of 1.5 tokens: a = 0.50 under -k 1,3, 0.34 under -k 3,1)
            raise SpecError("candidate", f"{c.label!r}: a mean accepted length beside several k "
                            f"({', '.join(map(str, cand_ks))}) and no k it was measured at",
                            "k=K in the candidate (the k it was measured at), or acceptance=A (per token: no k)")
        acceptance_c = c.acceptance if c.acceptance.measured_at_k else replace(c.acceptance, measured_at_k=cand_ks[0])
        results.append(_one(c.label, variant, account(variant, c.profile or profile), eff, acceptance_c, batches,
                            cand_ks, context, variant.speculative.tree))
    notes = shape_notes(mem, batches, ks, context) + thin_gain_notes(results)
    return SpeedupReport(deployment=d, efficiency=engine_efficiency(eff, mem), batch_sizes=tuple(batches), ks=tuple(ks),
                         context_len=context, drafters=tuple(results), notes=notes)
