"""Rendering of `specsize speedup`: the contract in docs/json.md, a terminal table, Markdown."""

from __future__ import annotations

from dataclasses import asdict

from ..planner.speedup import DrafterResult, SpeedupReport
from . import markdown
from ..core.ratios import speedup_text
from .rows import best_k_text
from .jsonsafe import dumps

ROW_FIELDS = ("batch_size", "k", "tokens_per_pass", "tpot_s", "tpot_s_no_spec", "speedup", "throughput_tok_s",
              "throughput_tok_s_no_spec")


def _table_dict(r: DrafterResult) -> dict:
    t = r.table
    return {
        "rows": [{f: getattr(p, f) for f in ROW_FIELDS} | {"bound_no_spec": p.bound_no_spec} for p in t.rows],
        "crossover_batch": {str(k): b for k, b in t.crossover_batch.items()},
        "best_k": {str(b): k for b, k in t.best_k.items()},
        "acceptance_rate": t.acceptance_rate,
        "proposal_rate": r.proposal_rate,
        "kv_cache_at_k": r.kv_cache_at_k or None,
    }


def to_dict(report: SpeedupReport) -> dict:
    own, others = report.drafters[0], report.drafters[1:]
    out = {"schema_version": "1.0", **_table_dict(own), "context_len": report.context_len,
           "method": own.method, "draft": own.draft, "kv_cache_tokens": own.kv_cache_tokens,
           "efficiency": asdict(report.efficiency),
           "candidates": [{"label": c.label, "method": c.method, "draft": c.draft,
                           # a candidate whose engine does not start builds no pool: no KV cache, and why
                           "kv_cache_tokens": None if c.startup_problem else c.kv_cache_tokens,
                           "startup_problem": c.startup_problem,
                           "weights_draft_bytes": c.weights_draft_bytes, **_table_dict(c)} for c in others],
           "notes": list(report.notes)}
    return out


def _grid(r: DrafterResult) -> list[list[str]]:
    ks = sorted({p.k for p in r.table.rows})
    batches = sorted({p.batch_size for p in r.table.rows})
    lookup = {(p.batch_size, p.k): p for p in r.table.rows}
    rows = []
    for b in batches:
        plain = lookup[(b, ks[0])]
        cells = [str(b), f"{plain.tpot_s_no_spec * 1e3:.2f}"]
        for k in ks:
            p = lookup[(b, k)]
            cells.append(f"{speedup_text(p.speedup)} ({p.tpot_s * 1e3:.1f} ms)")
        cells.append(best_k_text(r.table.best_k[b], cell=True))
        rows.append(cells)
    header = ["batch", "TPOT no spec ms"] + [f"k={k}" for k in ks] + ["best k"]
    return [header] + rows


def _summary(r: DrafterResult) -> str:
    cross = ", ".join(f"k={k}: {'none' if b is None else f'B={b}'}" for k, b in r.table.crossover_batch.items())
    proposals = (f"; a per proposal, proposals in {r.proposal_rate:.0%} of decode steps"
                 if r.proposal_rate < 1 else "")
    pool = (f"with it {r.startup_problem}: the table prices a server that never runs" if r.startup_problem else
            f"KV cache {r.kv_cache_tokens:,} tokens{f' at k={r.kv_cache_at_k}' if r.kv_cache_at_k else ''}")
    return f"{r.label}: acceptance a={r.table.acceptance_rate:.3f}; {pool}; speed-up < 1 from {cross}{proposals}"


def render(report: SpeedupReport, fmt: str) -> str:
    if fmt == "json":
        return dumps(to_dict(report))
    md = fmt == "markdown"
    text = markdown.inline if md else str  # a label is what the user wrote (a candidate, a model path)
    lines = [text(f"speed-up = TPOT without speculation / TPOT with it, same batch; context {report.context_len:,} "
                  f"tokens; {report.deployment.target.model_id} on {report.deployment.gpus_per_instance} x "
                  f"{report.deployment.gpu.gpu_id}")]
    for r in report.drafters:
        grid = _grid(r)
        lines.append("")
        lines.append(("### " if md else "") + text(_summary(r)))
        if md:
            lines.append("")
            lines += markdown.table(tuple(grid[0]), grid[1:])
        else:
            widths = [max(len(row[i]) for row in grid) for i in range(len(grid[0]))]
            lines += ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in grid]
    if md and report.notes:  # a line right under a table would be read as one more of its rows
        lines += [""] + [f"- {text(note)}" for note in report.notes]
    else:
        lines += [f"! {note}" for note in report.notes]
    return "\n".join(lines) + "\n"
