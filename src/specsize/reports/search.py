"""Rendering of `specsize search`: JSON (docs/json.md) or text tables."""

from __future__ import annotations

from dataclasses import asdict

from ..core.envelope import headroom_text
from ..planner.search import Candidate, SearchResult
from .jsonout import headroom_json
from .jsonsafe import dumps


def _cand(c: Candidate | None, policy: float) -> dict | None:
    if c is None:
        return None
    out = asdict(c)
    out["headroom"] = headroom_json(c.headroom, policy)  # six decimals, more where they would cross the policy
    return out


def to_dict(r: SearchResult) -> dict:
    policy = r.headroom_policy
    return {"schema_version": "1.0", "name": r.name, "screened": r.screened, "skipped": r.skipped,
            "skipped_reasons": [{"field": field, "configurations": n, "first": first}
                                for field, n, first in r.skipped_reasons], "notes": list(r.notes),
            "screen_seconds": r.screen_seconds, "meets_slo_with_headroom": sum(c.status == "ok" for c in r.candidates),
            "cheapest": _cand(r.cheapest, policy), "pareto": [_cand(c, policy) for c in r.pareto],
            "rejected_families": list(r.rejected_families), "finalists": [_cand(c, policy) for c in r.finalists],
            "simulated_rejected": [_cand(c, policy) for c in r.simulated_rejected],
            "baseline": _cand(r.baseline, policy),
            "status_counts": {s: sum(c.status == s for c in r.candidates)
                              for s in sorted({c.status for c in r.candidates})}}


def _line(c: Candidate, policy: float) -> str:
    tpot = "-" if c.tpot_s is None else f"{c.tpot_s * 1e3:.1f} ms"
    thr = "-" if c.throughput_tok_s is None else f"{c.throughput_tok_s:,.0f} tok/s"
    confirmed = "" if c.confirmed is None else ("; simulation confirms" if c.confirmed else "; simulation REJECTS")
    # TP x PP x replicas, as the help names the space: a 405B row of 16 GPUs had read "TP=8 x2", PP 2 unsaid
    ep = " (experts by expert)" if c.expert_parallel else ""
    return (f"{c.gpus} x {c.gpu} TP={c.tp}{ep} x PP={c.pp} x{c.replicas}, {c.drafter} k={c.k}, kv={c.kv_cache_dtype}, "
            f"max_num_seqs={c.max_num_seqs}: {c.cost:g} {c.cost_unit}, headroom {headroom_text(c.headroom, policy)}, "
            f"TPOT {tpot}, "
            f"{thr}{confirmed}")


def _why(c: Candidate) -> list[str]:
    s = c.simulation
    if not s or c.confirmed:
        return []
    if s.get("problems"):
        return [f"    why: {'; '.join(s['problems'])}"]
    ttft = "-" if s.get("ttft_p99_s") is None else f"{s['ttft_p99_s']:.2f} s"
    tpot = "-" if s.get("tpot_p99_s") is None else f"{s['tpot_p99_s'] * 1e3:.1f} ms"
    return [f"    why: simulated p99 TTFT {ttft}, p99 TPOT {tpot} against the SLO"]


def render(r: SearchResult, fmt: str) -> str:
    if fmt == "json":
        return dumps(to_dict(r))
    lines = [f"search {r.name}: {r.screened:,} configurations screened in {r.screen_seconds:.2f} s "
             f"({r.skipped} invalid skipped)"]
    # why: a family with no result had said only its closest configuration's verdict
    lines += [f"  skipped {n:,} for {field}: {first}" for field, n, first in r.skipped_reasons]
    lines += [f"  note: {note}" for note in r.notes]
    lines.append("")
    lines.append("Cheapest that meets the SLO with headroom:")
    lines.append("  " + (_line(r.cheapest, r.headroom_policy) if r.cheapest else
                         "none" + (" confirmed by simulation" if r.simulated_rejected else "")))
    if r.finalists:
        lines += ["", f"Finalists ({len(r.finalists)}), by cost, then headroom:"]
        lines += [f"  {_line(c, r.headroom_policy)}" for c in r.finalists]
    if r.baseline is not None:
        lines += ["", "The cheapest's hardware without speculation:", f"  {_line(r.baseline, r.headroom_policy)}"]
        lines += _why(r.baseline)
    if r.simulated_rejected:
        lines += ["", f"Simulated and rejected on the way ({len(r.simulated_rejected)}; configurations differing "
                  "only in max_num_seqs share the verdict):"]
        for c in r.simulated_rejected:
            lines.append(f"  {_line(c, r.headroom_policy)}")
            lines += _why(c)
    lines += ["", f"Pareto front (cost vs headroom vs throughput), {len(r.pareto)} configurations:"]
    lines += [f"  {_line(c, r.headroom_policy)}" for c in r.pareto[:15]]
    if len(r.pareto) > 15:
        lines.append(f"  ... {len(r.pareto) - 15} more in --format json")
    if r.rejected_families:
        lines += ["", "Rejected families (GPU x drafter) and why:"]
        lines += [f"  {f['gpu']} / {f['drafter']}: {f['status']} ({f['why']})" for f in r.rejected_families]
    return "\n".join(lines) + "\n"
