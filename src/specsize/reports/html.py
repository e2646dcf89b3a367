"""A self-contained HTML report: no network needed to view it; figures are inline SVG."""

from __future__ import annotations

import html

from .. import __version__
from ..planner.report import ReportData
from . import plots, rows
from .simulation import render as render_simulation

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1040px;margin:24px auto;padding:0 16px;
color:#1a1a1a;line-height:1.45}
h1{font-size:1.35rem;margin-bottom:4px}h2{font-size:1.1rem;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
.verdict{font-size:1.25rem;font-weight:700;padding:10px 14px;border-radius:6px;margin:10px 0}
.fits{background:#e3f3ec;border-left:6px solid #009E73}.thin{background:#fdf1dc;border-left:6px solid #E69F00}
.does_not_fit{background:#fbe3d6;border-left:6px solid #D55E00}
table{border-collapse:collapse;margin:8px 0;font-size:.9rem}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.figure{margin:12px 0}.figure svg{max-width:100%;height:auto}
.pass{color:#006d4f;font-weight:700}.attention{color:#9a5b00;font-weight:700}.fail{color:#b23c00;font-weight:700}
code,pre{background:#f5f5f5;border-radius:4px}pre{padding:8px;white-space:pre-wrap;word-break:break-all;font-size:.82rem}
.note{color:#555;font-size:.9rem}
"""


def _table(header, body, numeric=()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    lines = []
    for row in body:
        cells = "".join(f"<td class='num'>{html.escape(str(c))}</td>" if i in numeric else
                        f"<td>{html.escape(str(c))}</td>" for i, c in enumerate(row))
        lines.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"


def _figure(name: str, svg: str) -> str:
    return f"<div class='figure' data-plot='{name}'>{svg}</div>"


def render(data: ReportData) -> str:
    r = data.result
    v = r.verdict
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>specsize report: {e(r.deployment.target.model_id)}</title><style>{CSS}</style></head><body>"]
    parts.append(f"<h1>{e(rows.title(r))}</h1>")
    parts.append(f"<p id='verdict' class='verdict {v.verdict}' data-verdict='{v.verdict}'>{e(rows.headline(r))}</p>")
    parts.append(f"<p id='breaks-first'><strong>What breaks first:</strong> {e(v.breaks_first)}</p>")
    for reason in v.reasons:
        parts.append(f"<p class='fail'>{e(reason)}</p>")

    parts.append("<h2>Memory per GPU</h2>")
    parts.append(_figure("gpu-memory", plots.gpu_memory(data.gpu_bars)))
    parts.append(_table(rows.BREAKDOWN_HEADER, rows.breakdown(r), numeric={1}))
    parts.append("".join(f"<p class='note'>{e(line)}</p>" for line in rows.summary_lines(r)))

    parts.append("<h2>KV demand vs capacity</h2>")
    parts.append(_figure("kv-demand", plots.kv_demand(data.kv_curve)))
    parts.append(_table(rows.ENVELOPE_HEADER, rows.envelope_rows(r), numeric={2, 3, 4, 5}))
    parts.append(_table(rows.SHAPES_HEADER, rows.shape_rows(r), numeric={1, 2, 3, 4, 5}))

    parts.append("<h2>What speculation is worth</h2>")
    if data.speedup is not None:
        parts.append(_figure("speedup", plots.speedup(data.speedup)))
        if data.acceptance is not None and data.acceptance.source != "user":
            parts.append(f"<p class='note'>Acceptance: {e(data.acceptance.source)}</p>")
    else:
        parts.append(f"<p class='note'>{e(data.speedup_note or '')}</p>")
    if r.perf is not None:
        parts.append(_table(rows.PERF_HEADER, rows.perf_rows(r), numeric={1, 2}))

    parts.append("<h2>Burst scenario, spec vs no-spec</h2>")
    if r.simulation is not None:
        parts.append(_figure("timeline", plots.timeline(r.simulation)))
        parts.append(f"<pre>{e(render_simulation(r.simulation, 'text'))}</pre>")
    else:
        parts.append("<p class='note'>Not simulated (no acceptance for the drafter, no KV cache, a GPU without a "
                     "bandwidth figure, or --no-simulate).</p>")  # api.report's conditions, all of them

    parts.append("<h2>Recommendations</h2>")
    recs = rows.recommendation_lines(r)
    parts.append("<ol>" + "".join(f"<li>{e(line.split('. ', 1)[1])}</li>" for line in recs) + "</ol>" if recs else
                 f"<p>{e(rows.no_recommendation(r))}</p>")
    parts.append("<h2>How far the inputs may move</h2><ul>"
                 + "".join(f"<li>{e(line)}</li>" for line in rows.robustness_lines(r)) + "</ul>")
    parts.append("<h2>Placement, storage and failover</h2><ul>"
                 + "".join(f"<li>{e(line)}</li>" for line in rows.placement_lines(r)) + "</ul>")
    parts.append("<h2>Deploy with</h2>")
    for command in r.commands:
        parts.append(f"<p>{e(command.engine)} ({e(command.versions)})</p><pre>{e(command.shell)}</pre>")

    parts.append("<h2 id='standards'>Standards &amp; framework alignment</h2>")
    for c in data.controls:
        parts.append(f"<h3>{e(c.framework)} {e(c.control)}: {e(c.title)}</h3>"
                     f"<p><span class='{c.status}' data-control='{e(c.control)}'>{c.status.upper()}</span> — "
                     f"{e(c.summary)}</p><ul>" + "".join(f"<li>{e(x)}</li>" for x in c.evidence) + "</ul>")
    if r.warnings or r.notes:  # the plan's notes too, which `plan` prints on stderr
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(w)}</li>" for w in (*r.warnings, *r.notes)) + "</ul>")
    parts.append(f"<p class='note'>specsize {__version__}; accounting profile {e(r.profile.label)}.</p>")
    parts.append("</body></html>\n")
    return "".join(parts)
