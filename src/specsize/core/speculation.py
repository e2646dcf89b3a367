"""The vocabulary of speculative decoding: which methods exist, what each kind of drafter is, and acceptance.

One table (`DRAFTER_KINDS`) says, per method, everything the rest of the code used to work out by comparing
strings: whether the method needs a draft config or derives one from the target, whether the drafter shares
the target's embedding and lm_head, runs at its own tensor-parallel size, keeps KV cache in the engine's
pool, how many drafter forwards one speculative step takes, whether drafting runs on the CPU, and what each
engine calls the method. A new method is one row here (plus its engine names).

Acceptance is one type: a per-token rate, or a mean accepted length measured at some k, with a spread and
its provenance. Everything that prices speculation takes an `Acceptance`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from .errors import SpecError


class SpecMethod(StrEnum):
    """Speculative methods. A `StrEnum`: compares equal to its value and prints as it."""

    NONE = "none"
    DRAFT_MODEL = "draft_model"
    EAGLE = "eagle"
    EAGLE3 = "eagle3"
    MTP = "mtp"
    MEDUSA = "medusa"
    NGRAM = "ngram"

    @classmethod
    def parse(cls, value: object, field: str = "method") -> SpecMethod:
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise SpecError(field, f"unknown method {value!r}", ", ".join(m.value for m in cls)) from None


@dataclass(frozen=True)
class DrafterKind:
    method: SpecMethod
    needs_draft_config: bool  # a draft model / head config must be given
    derives_from_target: bool  # MTP: the drafter is layers of the target's own checkpoint
    shares_embeddings: bool  # reuses the target's input embedding
    shares_lm_head: bool  # reuses the target's lm_head (EAGLE-3 heads may carry a reduced one of their own)
    own_tp: bool  # runs at its own tensor-parallel size (draft_tp); else at the target's
    keeps_kv: bool  # its attention layers hold KV cache in the engine's block pool
    draft_steps: str  # "k": one forward per drafted token; "one": one forward drafts all k; "none"
    cpu_drafted: bool  # drafting is a CPU lookup (n-gram), no GPU forward
    engine_names: tuple[tuple[str, str | None], ...]  # (engine, its name for the method or None: unsupported)
    label: str

    def steps(self, k: int) -> int:
        return {"k": k, "one": 1, "none": 0}[self.draft_steps]

    def engine_name(self, engine: str) -> str | None:
        return dict(self.engine_names).get(engine)

    @property
    def has_gpu_drafter(self) -> bool:
        return self.draft_steps != "none"


DRAFTER_KINDS: dict[SpecMethod, DrafterKind] = {
    kind.method: kind for kind in (
        DrafterKind(SpecMethod.NONE, False, False, False, False, False, False, "none", False,
                    (("vllm", None), ("sglang", None)), "no speculation"),
        DrafterKind(SpecMethod.DRAFT_MODEL, True, False, False, False, True, True, "k", False,
                    (("vllm", "draft_model"), ("sglang", "STANDALONE")), "separate draft model"),
        DrafterKind(SpecMethod.EAGLE, True, False, True, True, False, True, "k", False,
                    (("vllm", "eagle"), ("sglang", "EAGLE")), "EAGLE head"),
        DrafterKind(SpecMethod.EAGLE3, True, False, True, True, False, True, "k", False,
                    (("vllm", "eagle3"), ("sglang", "EAGLE3")), "EAGLE-3 head"),
        DrafterKind(SpecMethod.MTP, False, True, True, True, False, True, "k", False,
                    (("vllm", "mtp"), ("sglang", "NEXTN")), "MTP layers"),
        DrafterKind(SpecMethod.MEDUSA, True, False, False, False, False, False, "one", False,
                    (("vllm", "medusa"), ("sglang", None)), "Medusa heads"),
        DrafterKind(SpecMethod.NGRAM, False, False, False, False, False, False, "none", True,
                    (("vllm", "ngram"), ("sglang", "NGRAM")), "n-gram prompt lookup"),
    )
}

SPEC_METHODS: tuple[str, ...] = tuple(m.value for m in SpecMethod)
METHODS_WITH_DRAFT_CONFIG: tuple[str, ...] = tuple(m.value for m, k in DRAFTER_KINDS.items() if k.needs_draft_config)


def drafter_kind(method: str) -> DrafterKind:
    try:  # a SpecMethod or its exact value (a str enum hashes and compares as its value): no parse
        kind = DRAFTER_KINDS.get(method)  # type: ignore[call-overload]
    except TypeError:  # unhashable: parse says what is wrong with it
        kind = None
    return kind if kind is not None else DRAFTER_KINDS[SpecMethod.parse(method)]


# Which drafters a release runs on SGLang's spec v2 worker, inside its overlap scheduler (AccountingProfile.spec_v2),
# tier by tier, each holding the one before: "" none (spec v1, the overlap off with speculation: every release before
# 0.5.11); "chain" a model drafter's chain, top-k 1 (0.5.11 - 0.5.12: SGLANG_ENABLE_SPEC_V2 on by default, server_args.py
# "spec v2 currently only supports topk = 1"); "model" every model drafter, trees too (0.5.13: arg_groups/
# speculative_hook.py turns the overlap off only without SGLANG_ENABLE_SPEC_V2, spec_info.py create_worker: EAGLE /
# EAGLE3 / STANDALONE "always use the V2 worker"; _handle_ngram still turns it off); "all" the n-gram lookup too (0.5.14
# on: "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker", ngram_worker.py
# enable_overlap)
SPEC_V2_TIERS = ("", "chain", "model", "all")


def runs_spec_v2(kind: DrafterKind, tier: str, tree_topk: int) -> bool:
    """Whether this drafter runs on SGLang's spec v2 worker at a release's tier (SPEC_V2_TIERS): the one owner, read
    by the overlap (keeps_overlap) and by the decode check's reserve (engines/sglang/accounting.py)."""
    rank = SPEC_V2_TIERS.index(tier)
    if kind.cpu_drafted:
        return rank >= SPEC_V2_TIERS.index("all")
    return kind.has_gpu_drafter and (rank >= SPEC_V2_TIERS.index("model") or (rank >= 1 and tree_topk <= 1))


# the speculative methods vLLM V1 keeps async scheduling with from 0.14 (AccountingProfile.async_drafters says why)
ASYNC_DRAFTERS_V1: tuple[str, ...] = (SpecMethod.EAGLE.value, SpecMethod.EAGLE3.value, SpecMethod.MTP.value)


def keeps_overlap(kind: DrafterKind, async_drafters: tuple[str, ...], spec_v2: str, tree_topk: int) -> bool:
    """Whether a release's overlap of the host's work with the forward (vLLM's async scheduling, SGLang's overlap
    scheduler: AccountingProfile.async_scheduling / scheduled_ahead) survives speculation with this drafter: for the
    methods the release keeps it with (`async_drafters`, AccountingProfile.async_drafters: vLLM's EAGLE / MTP, and its
    draft models from 0.28), and where the release runs the drafter on SGLang's spec v2 worker (`spec_v2`: its tier,
    runs_spec_v2; AccountingProfile.spec_v2).
    Spec v2's host handovers stay priced (Efficiency.spec_step_tp_s, fitted on SGLang runs): SGLang's own
    v2-against-v1 figures (+10.8% at one request on one GPU, sgl-project/sglang PR 11398; +14.6% at 10 req/s on TP 4,
    PR 15591) are well below dropping them (+48% for DeepSeek-V3 MTP on 8 x H200 at one request), and at TP 1 there
    is none to drop."""
    if kind.method == SpecMethod.NONE:
        return True
    return kind.method.value in async_drafters or runs_spec_v2(kind, spec_v2, tree_topk)


# --- acceptance -------------------------------------------------------------------------------------------

def tokens_per_pass(acceptance: float, k: int) -> float:
    """Expected tokens a verification pass yields (accepted drafts + the bonus token): (1 - a^(k+1)) / (1 - a)."""
    if k < 0:
        raise SpecError("num_speculative_tokens", f"must be >= 0, got {k}", "an integer >= 0")
    if not 0 <= acceptance <= 1:
        raise SpecError("acceptance_rate", f"must be in [0, 1], got {acceptance}", "a per-token rate in [0, 1]")
    if acceptance == 1:
        return float(k + 1)
    return (1 - acceptance ** (k + 1)) / (1 - acceptance)


def acceptance_from_mean_length(mean_length: float, k: int) -> float:
    """The per-token rate a whose tokens_per_pass(a, k) equals the mean accepted length (incl. bonus)."""
    if k < 1:
        raise SpecError("num_speculative_tokens", f"must be >= 1, got {k}", "an integer >= 1")
    if not 1 <= mean_length <= k + 1:
        raise SpecError("mean_accepted_length", f"{mean_length} is outside [1, k+1] = [1, {k + 1}] for k={k}",
                        f"a number from 1 to {k + 1}")
    if mean_length in (1, k + 1):  # the ends exactly: nothing accepted, or everything (not 4e-19 from bisection)
        return 0.0 if mean_length == 1 else 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if tokens_per_pass(mid, k) < mean_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def mean_without_its_k(mean_length: float | None, measured_at_k: int | None, ks) -> bool:
    """A mean accepted length with no k named beside several k: one measurement that reads as a different acceptance
    at whichever k comes first (GLM-5 MTP, 1.9 tokens: a = 0.90 under -k 1,3, 0.51 under -k 3,1). The one rule
    api.speedup refuses a request's mean by and planner.speedup.compare_drafters a candidate's."""
    return mean_length is not None and not measured_at_k and len(set(ks)) > 1


def verified_per_sequence(k: int, proposal_rate: float = 1.0) -> float:
    """Positions a chain's verification scores per sequence, on average over its decode steps: 1 + k where the
    drafter proposes, 1 where it does not (SpeculativeConfig.proposal_rate)."""
    return 1 + proposal_rate * k


def proposed_tokens_per_pass(per_proposal: float, proposal_rate: float) -> float:
    """Tokens per target pass over all decode steps when only `proposal_rate` of them carry a proposal (and gain
    `per_proposal` tokens, the bonus included: vLLM's mean acceptance length, 1 + accepted / drafts); the others
    emit their one token."""
    return 1.0 + proposal_rate * (per_proposal - 1.0)


def beta_concentration(mean: float, spread: float) -> float | None:
    """The concentration (alpha + beta) of the Beta distribution with this per-token `mean` and standard deviation
    `spread`; None where there is none to sample (a spread below a millionth). A spread no Beta distribution has
    (variance >= mean x (1 - mean), so any spread about a mean of 0 or 1) is refused."""
    var = spread ** 2
    if var < 1e-12:
        return None
    limit = mean * (1 - mean)
    if limit <= 0:
        raise SpecError("acceptance_spread", f"{spread} about a mean acceptance of {mean:g}, which every request then "
                        "has", "0 with an acceptance of 0 or 1 (a spread needs a mean inside (0, 1))")
    if var >= limit:
        raise SpecError("acceptance_spread", f"{spread} is too wide for a mean acceptance of {mean:.4g}",
                        f"a standard deviation below {math.sqrt(limit):.3f}")
    return limit / var - 1


@dataclass(frozen=True)
class Acceptance:
    """How often the target accepts the drafter's tokens: a per-token `rate`, or a `mean_accepted_length`
    (tokens per target pass including the bonus token) measured at `measured_at_k`. `spread` is the standard
    deviation of the per-request rate (the simulator draws it from a Beta distribution)."""

    rate: float | None = None
    mean_accepted_length: float | None = None
    measured_at_k: int | None = None
    source: str = "user"
    spread: float = 0.0

    def __post_init__(self) -> None:
        if self.rate is not None and self.mean_accepted_length is not None:
            raise SpecError("acceptance_rate", "give either an acceptance rate or a mean accepted length, not both",
                            "one of the two")
        if self.rate is not None and not (math.isfinite(self.rate) and 0 <= self.rate <= 1):
            raise SpecError("acceptance_rate", f"must be in [0, 1], got {self.rate}", "a per-token rate in [0, 1]")
        if self.mean_accepted_length is not None and not (math.isfinite(self.mean_accepted_length)
                                                          and self.mean_accepted_length >= 1):
            raise SpecError("mean_accepted_length", f"must be a number >= 1, got {self.mean_accepted_length}",
                            "tokens per target pass including the bonus token, >= 1")
        if self.measured_at_k is not None and self.measured_at_k < 1:
            raise SpecError("measured_at_k", f"must be >= 1, got {self.measured_at_k}", "an integer >= 1")
        if not (math.isfinite(self.spread) and 0 <= self.spread < 0.5):
            raise SpecError("acceptance_spread", f"must be in [0, 0.5), got {self.spread}",
                            "a standard deviation in [0, 0.5)")
        if self.rate is not None or (self.mean_accepted_length is not None and self.measured_at_k is not None):
            beta_concentration(self.per_token(1), self.spread)  # known now: refused by plan as by simulate

    @property
    def given(self) -> bool:
        return self.rate is not None or self.mean_accepted_length is not None

    def per_token(self, default_k: int) -> float:
        """The per-token rate; a mean accepted length converts at the k it was measured at."""
        if self.rate is not None:
            return self.rate
        if self.mean_accepted_length is None:
            raise SpecError("acceptance_rate", "no acceptance given",
                            "--acceptance-rate A or --mean-accepted-length T (measured, never assumed)")
        return acceptance_from_mean_length(self.mean_accepted_length, self.measured_at_k or default_k)

    def tokens_per_pass(self, k: int) -> float:
        return tokens_per_pass(self.per_token(k), k)


@dataclass(frozen=True)
class Tree:
    """Tree drafting (SGLang EAGLE): `topk` branches per depth, `num_draft_tokens` verified per sequence, the tree's
    root (the last verified token) included (None: a chain of k)."""

    topk: int = 1
    num_draft_tokens: int | None = None

    def at_k(self, k: int) -> Tree:
        """The tree SGLang verifies at depth k: N nodes, at most the k x top-k + 1 a tree of k depths holds; without
        N, k + 1 (what the emitted --speculative-num-draft-tokens says)."""
        if self.topk <= 1:
            return self
        return Tree(self.topk, min(self.num_draft_tokens or k + 1, k * self.topk + 1))

    def nodes(self, k: int) -> int:
        """The nodes a tree of depth k verifies per sequence, its root included (at_k): k + 1 for a chain."""
        return self.at_k(k).num_draft_tokens or k + 1
