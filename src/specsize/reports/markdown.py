"""Markdown output: the same rows as the terminal, as GitHub tables."""

from __future__ import annotations

from collections.abc import Sequence

from ..planner.plan import PlanResult
from . import rows


def _table(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
    return out


def render(r: PlanResult) -> str:
    lines = [f"# specsize plan: {rows.title(r)}", "", f"**{rows.headline(r)}**", "",
             f"What breaks first: {r.verdict.breaks_first}", "", "## Per-GPU memory (rank 0)", ""]
    lines += _table(rows.BREAKDOWN_HEADER, rows.breakdown(r))
    lines += [""] + [f"- {line}" for line in rows.summary_lines(r)]
    lines += ["", "## Workload envelope", ""] + _table(rows.ENVELOPE_HEADER, rows.envelope_rows(r))
    lines += ["", "## Capacity per request shape", ""] + _table(rows.SHAPES_HEADER, rows.shape_rows(r))
    if r.perf is not None:
        lines += ["", "## Performance", ""] + _table(rows.PERF_HEADER, rows.perf_rows(r))
        if r.perf.note:
            lines += ["", f"Note: {r.perf.note}"]
    if r.simulation is not None:
        from . import simulation  # noqa: PLC0415

        lines += ["", "## Simulated burst scenario", "", "```", simulation.render(r.simulation, "text").rstrip(), "```"]
    for title, section in (("Recommendations (ranked)", rows.recommendation_lines(r)),
                           ("How far the inputs may move", rows.robustness_lines(r)),
                           ("Placement, storage and failover", rows.placement_lines(r))):
        if section:
            lines += ["", f"## {title}", ""] + [line if line[:1].isdigit() else f"- {line}" for line in section]
    for command in r.commands:
        lines += ["", f"## {command.engine} command ({command.versions})", "", "```", command.shell, "```"]
    notes = [f"- **{reason}**" for reason in r.verdict.reasons] + [f"- {w}" for w in r.warnings]
    if notes:
        lines += ["", "## Notes", ""] + notes
    return "\n".join(lines) + "\n"
