"""Terminal output with rich tables."""

from __future__ import annotations

import io
from functools import partial
from collections.abc import Sequence

from ..planner.plan import PlanResult
from . import rows


def render(r: PlanResult, width: int = 110) -> str:
    from rich.console import Console  # noqa: PLC0415 - rich loads only when text is rendered
    from rich.table import Table  # noqa: PLC0415

    buffer = io.StringIO()
    # no markup or emoji codes: a model path, an acceptance source or a note is what the user wrote ("[/]" is text)
    console = Console(file=buffer, width=width, force_terminal=False, no_color=True, highlight=False, markup=False,
                      emoji=False)
    # a line as one line: rich wraps at `width` inside words otherwise, and had cut the deploy command's speculative
    # config ('"draft_tensor_p' / 'arallel_size":4}') so that a command copied from the terminal no longer parsed
    say = partial(console.print, soft_wrap=True)

    say(rows.title(r))
    say(rows.headline(r))
    say(f"What breaks first: {r.verdict.breaks_first}")

    def table(header: tuple[str, ...], body: Sequence[tuple[str, ...]], title: str, right: set[int]) -> Table:
        t = Table(title=title, title_justify="left")
        for i, name in enumerate(header):
            t.add_column(name, justify="right" if i in right else "left")
        for row in body:
            t.add_row(*row)
        return t

    console.print(table(rows.BREAKDOWN_HEADER, rows.breakdown(r), "Per-GPU memory (rank 0)", {1}))
    for line in rows.summary_lines(r):
        say(line)
    console.print(table(rows.ENVELOPE_HEADER, rows.envelope_rows(r), "Workload envelope", {2, 3, 4, 5}))
    console.print(table(rows.SHAPES_HEADER, rows.shape_rows(r), "Capacity per request shape", {1, 2, 3, 4, 5}))
    if r.perf is not None:
        console.print(table(rows.PERF_HEADER, rows.perf_rows(r), f"Performance ({r.perf.bound_no_spec}-bound decode)",
                            {1, 2}))
        if r.perf.note:
            say(f"note: {r.perf.note}")
    if r.simulation is not None:
        from . import simulation  # noqa: PLC0415

        say("Simulated burst scenario")
        say(simulation.render(r.simulation, "text"), end="")
    for title, lines in (("Recommendations (ranked)", rows.recommendation_section(r)),
                         ("How far the inputs may move", rows.robustness_lines(r)),
                         ("Placement, storage and failover", rows.placement_lines(r))):
        if lines:
            say(title)
            for line in lines:
                say(f"  {line}")
    if r.commands:
        say("Deploy with (specsize plan --emit vllm | sglang for the full command)")
        say(f"  {r.commands[0].shell}")
    for reason in r.verdict.reasons:
        say(f"! {reason}")
    for warning in r.warnings:
        say(f"note: {warning}")
    return buffer.getvalue()
