"""Rendering of `specsize stops-paying`: JSON (docs/json.md) or a table of the rates simulated."""

from __future__ import annotations

from ..planner.load_sweep import LoadSweep
from .jsonsafe import dumps
from ..core.ratios import beside_one


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _ratio(x: float | None) -> str:
    """A latency ratio with the decimals that keep it on its side of 1, where speculation stops paying (0.996 and
    1.003 had both read "1.00" on the two rungs around the crossing)."""
    return "-" if x is None else beside_one(x)


def render(sweep: LoadSweep, fmt: str) -> str:
    if fmt == "json":
        return dumps({"schema_version": "1.0", "stops_paying": sweep.to_dict()})
    centre = "given" if sweep.centre_source == "rate" else "Little's law at the workload's concurrency"
    lines = [f"scenario (at the lowest rate): {sweep.scenario}"] if sweep.scenario else []
    lines += [f"centre {sweep.centre_req_s:.3g} req/s ({centre}); ratio = mean end-to-end latency with speculation "
              "/ without (below 1: speculation pays)", ""]
    header = ("req/s", "E2E spec s", "E2E none s", "ratio", "TPOT spec ms", "TPOT none ms", "sustains spec / none")
    rows = [(f"{p.rate_req_s:.3g}", _f(p.e2e_spec_s, ".2f"), _f(p.e2e_plain_s, ".2f"), _ratio(p.ratio),
             _f(None if p.tpot_spec_s is None else p.tpot_spec_s * 1e3, ".1f"),
             _f(None if p.tpot_plain_s is None else p.tpot_plain_s * 1e3, ".1f"),
             f"{'yes' if p.sustains_spec else 'NO'} / {'yes' if p.sustains_plain else 'NO'}") for p in sweep.points]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        lines.append("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    lines += ["", sweep.verdict]
    return "\n".join(lines) + "\n"
