"""Markdown output: the same rows as the terminal, as GitHub tables."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..planner.plan import PlanResult
from . import rows

_NUMBERED = re.compile(r"\d+\. ")  # a recommendation line, already numbered
# escaped: what could start a structure (a heading, a table cell, an HTML tag, a link or image, a code span,
# emphasis) or stand for another character (an entity such as &lt;); an underscore between two letters or digits
# (max_num_seqs) is no emphasis in CommonMark and stays as it is, one beside another underscore is escaped ("__foo__"
# in a model path had rendered "_<em>foo</em>_": the run's inner pair is still a delimiter)
_SPECIAL = re.compile(r"([\\`*\[\]|#]|<(?=[A-Za-z/!?])|&(?=#?\w+;)|(?<![^\W_])_|_(?![^\W_]))")


def inline(text: object) -> str:
    """Text as one line of Markdown that renders as itself: line breaks collapsed (no heading, list or table row can
    start inside it) and Markdown / HTML characters escaped (no emphasis, link, image or tag). Every string a
    report prints may carry what a user wrote (a security note, a model path, a name)."""
    escaped = _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))
    # GFM strikes through between two tildes ("~2 s ... ~5 s"); a lone one ("~41 GiB") strikes nothing
    return escaped.replace("~", "\\~") if escaped.count("~") > 1 else escaped


def fence(text: str) -> list[str]:
    """A fenced code block whose fence is longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    mark = "`" * max(3, longest + 1)
    return [mark, text, mark]


def table(header: tuple[str, ...], body: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(inline(cell) for cell in row) + " |" for row in body]
    return out


def _items(section: Sequence[str]) -> list[str]:
    """List items: a numbered line ("1. ...") as it is, any other line as a bullet."""
    return [inline(line) if _NUMBERED.match(line) else f"- {inline(line)}" for line in section]


def render(r: PlanResult, notes: Sequence[str] = ()) -> str:
    """The plan as Markdown; `notes`: more lines for its Notes section (the report's own, which has no stderr)."""
    lines = [f"# specsize plan: {inline(rows.title(r))}", "", f"**{inline(rows.headline(r))}**", "",
             f"What breaks first: {inline(r.verdict.breaks_first)}", "", "## Per-GPU memory (rank 0)", ""]
    lines += table(rows.BREAKDOWN_HEADER, rows.breakdown(r))
    lines += [""] + [f"- {inline(line)}" for line in rows.summary_lines(r)]
    lines += ["", "## Workload envelope", ""] + table(rows.ENVELOPE_HEADER, rows.envelope_rows(r))
    lines += ["", "## Capacity per request shape", ""] + table(rows.SHAPES_HEADER, rows.shape_rows(r))
    if r.perf is not None:
        lines += ["", "## Performance", ""] + table(rows.PERF_HEADER, rows.perf_rows(r))
        if r.perf.note:
            lines += ["", f"Note: {inline(r.perf.note)}"]
    if r.simulation is not None:
        from . import simulation  # noqa: PLC0415

        lines += ["", "## Simulated burst scenario", ""] + fence(simulation.render(r.simulation, "text").rstrip())
    for title, section in (("Recommendations (ranked)", rows.recommendation_section(r)),
                           ("How far the inputs may move", rows.robustness_lines(r)),
                           ("Placement, storage and failover", rows.placement_lines(r))):
        if section:
            lines += ["", f"## {title}", ""] + _items(section)
    for command in r.commands:
        lines += ["", f"## {command.engine} command ({command.versions})", ""] + fence(command.shell)
    items = [f"- **{inline(reason)}**" for reason in r.verdict.reasons] + [f"- {inline(w)}" for w in (*r.warnings, *notes)]
    if items:
        lines += ["", "## Notes", ""] + items
    return "\n".join(lines) + "\n"
