"""The report as Markdown: the plan's tables plus the speed-up grid and the standards section (no figures)."""

from __future__ import annotations

from ..planner.report import ReportData
from . import markdown
from ..core.ratios import speedup_text
from .rows import best_k_text


def render(data: ReportData) -> str:
    r = data.result
    lines = [markdown.render(r, r.notes).rstrip(), ""]  # the plan's notes, which `plan` prints on stderr
    if data.speedup is not None:
        t = data.speedup
        ks = sorted({row.k for row in t.rows})
        batches = sorted({row.batch_size for row in t.rows})
        lookup = {(row.batch_size, row.k): row for row in t.rows}
        lines += [f"## Speed-up vs batch size (a = {t.acceptance_rate:.2f}, context {t.context_len:,} tokens)", "",
                  "| batch | " + " | ".join(f"k={k}" for k in ks) + " | best k |",
                  "|---|" + "---|" * (len(ks) + 1)]
        for b in batches:
            lines.append(f"| {b} | " + " | ".join(speedup_text(lookup[(b, k)].speedup) for k in ks)
                         + f" | {best_k_text(t.best_k[b], cell=True)} |")
        cross = ", ".join(f"k={k}: {'none' if b is None else b}" for k, b in t.crossover_batch.items())
        lines += ["", f"First batch in this table with speed-up < 1 (the crossover lies at or below it): {cross}", ""]
    elif data.speedup_note:
        lines += ["## Speed-up vs batch size", "", markdown.inline(data.speedup_note), ""]
    lines += ["## Standards & framework alignment", ""]
    for c in data.controls:  # a control's summary and evidence quote the deployment's security notes: inline text
        lines += [f"### {c.framework} {c.control}: {c.title}", "",
                  f"**{c.status.upper()}**: {markdown.inline(c.summary)}", ""]
        lines += [f"- {markdown.inline(x)}" for x in c.evidence] + [""]
    return "\n".join(lines).rstrip() + "\n"
