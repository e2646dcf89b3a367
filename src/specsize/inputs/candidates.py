"""`--candidate method=eagle3,draft=ID,acceptance=0.8,k=3` -> a typed drafter candidate for `speedup`."""

from __future__ import annotations

from dataclasses import replace

from ..core.errors import SpecError
from ..core.memory import AccountingProfile
from ..core.specs import ModelSpec
from ..core.speculation import SPEC_METHODS, Acceptance, SpecMethod
from ..engines import resolve_profile
from ..planner.speedup import Candidate
from .fields import FieldInfo, coerce
from .resolve import draft_tp_for, proposal_rate_of, refuse_unsharded_draft_tp, speculative_config

CANDIDATE_KEYS = ("method", "draft", "acceptance", "acceptance_rate", "mean_accepted_length", "k", "draft_tp",
                  "proposal_rate")
_INT = FieldInfo(doc="", kind="int", group="speedup", minimum=1, maximum=64)
_RATE = FieldInfo(doc="", kind="float", group="speedup", minimum=0, maximum=1)
_MEAN = FieldInfo(doc="", kind="float", group="speedup", minimum=1, maximum=65)
_PROPOSALS = FieldInfo(doc="", kind="float", group="speedup", minimum=0, exclusive_minimum=True, maximum=1)


def candidate_fields(text: str) -> dict[str, str]:
    """The key=value pairs of a candidate, read and checked for their keys only (nothing loaded)."""
    fields: dict[str, str] = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if key in fields:
            raise SpecError("candidate", f"{key} given twice in {text!r}", "each key once")
        if not sep or key not in CANDIDATE_KEYS:
            raise SpecError("candidate", f"cannot read {part.strip()!r} in {text!r}",
                            "method=M,draft=MODEL,acceptance=A or mean_accepted_length=T,k=K")
        if not value.strip():  # `draft=` (an unset $DRAFT) had priced the standard head, as if no draft were named
            raise SpecError(f"candidate.{key}", f"{key}= has no value in {text!r}",
                            f"{key}=VALUE, or leave {key} out")
        fields[key] = value.strip()
    return fields


def parse_candidate(text: str, profile: AccountingProfile, target: ModelSpec | None = None, tp: int = 1,
                    version: str | None = None, proposal_rate: float | None = None) -> Candidate:
    """A candidate drafter on the request's engine: its proposal rate the one given, else the engine's own
    (inputs.resolve.proposal_rate_of), as the request's drafter gets it; an EAGLE / EAGLE-3 / Medusa candidate
    without a draft gets `target`'s standard head, as the request's drafter does; a draft model runs at the
    deployment's `tp` unless its draft_tp says otherwise and release `version` starts that (inputs.resolve.draft_tp_for)."""
    fields = candidate_fields(text)
    method = fields.get("method")
    if method not in SPEC_METHODS or method == "none":
        problem = f"no method= in {text!r}" if method is None else f"method {method!r} in {text!r}"
        raise SpecError("candidate", problem, ", ".join(m for m in SPEC_METHODS if m != "none"))
    if "acceptance" in fields and "acceptance_rate" in fields:
        raise SpecError("candidate", f"{text!r:.120} gives acceptance and acceptance_rate, two names for one rate",
                        "one of acceptance=A or acceptance_rate=A")
    rate = fields.get("acceptance", fields.get("acceptance_rate"))
    mean = fields.get("mean_accepted_length")
    if (rate is None) == (mean is None):
        raise SpecError("candidate", f"{text!r} needs exactly one of acceptance=A or mean_accepted_length=T",
                        "acceptance=A or mean_accepted_length=T")
    k = coerce("candidate.k", _INT, fields.get("k"))
    given_tp = coerce("candidate.draft_tp", _INT, fields["draft_tp"]) if "draft_tp" in fields else None
    spec = speculative_config(method, fields.get("draft"), k or 1, given_tp or 1, "candidate", target=target,
                              draft_field="candidate.draft")  # the candidate's own draft, not the request's
    refuse_unsharded_draft_tp(spec, "candidate.draft_tp")
    spec = replace(spec, draft_tp=draft_tp_for(spec.method, given_tp, tp, profile.engine, version, "candidate.draft_tp"))
    # n-gram: the share of steps that propose (a given one is checked against the method and engine with the rest)
    # ... else the request's own --proposal-rate (the share of steps whose lookup matches is the workload's), else
    # the engine's; an n-gram candidate had taken the engine's beside a deployment given another
    given = coerce("candidate.proposal_rate", _PROPOSALS, fields["proposal_rate"]) if "proposal_rate" in fields else \
        (proposal_rate if SpecMethod.parse(method) == SpecMethod.NGRAM else None)
    try:
        spec = replace(spec, proposal_rate=proposal_rate_of(profile, spec.method, given))
    except SpecError as err:  # the candidate's own proposal_rate= (an eagle3 candidate's had been named --proposal-rate)
        if err.field != "proposal_rate" or "proposal_rate" not in fields:
            raise
        raise SpecError("candidate.proposal_rate", err.problem, err.accepted) from None
    acceptance = Acceptance(rate=coerce("candidate.acceptance", _RATE, rate),
                            mean_accepted_length=coerce("candidate.mean_accepted_length", _MEAN, mean),
                            measured_at_k=k)
    own = resolve_profile(profile.engine, version, spec.method.value)  # vLLM 0.8 / 0.9: V0 for a draft model
    return Candidate(label=text, speculative=spec, acceptance=acceptance, ks=(k,) if k else None,
                     profile=own if own is not profile else None)
