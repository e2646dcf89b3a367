"""Light inline-SVG figures for the web UI: the same data as `reports.plots` (which draws with matplotlib for
the HTML report), drawn as plain SVG in about a millisecond so that a what-if re-plan redraws in well under
150 ms. No script, no external reference: the markup is safe to insert into a page under a strict CSP."""

from __future__ import annotations

import math
from html import escape

from .plots import OKABE_ITO, TERM_COLOURS
from .simulation import speculates

W, H = 520, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 44


def _nice(top: float) -> float:
    """The axis' top: the smallest 1, 2, 2.5 or 5 x a power of ten at or above `top` (1 when there is nothing)."""
    if not top > 0 or not math.isfinite(top):
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(top))
    return next(step * magnitude for step in (1, 2, 2.5, 5, 10) if step * magnitude >= top * (1 - 1e-12))


def _frame(title: str, xlabel: str, ylabel: str, ymax: float, body: list[str], name: str,
           xticks: list[tuple[float, str]] = ()) -> str:  # type: ignore[assignment]
    plot_h = H - TOP - BOTTOM
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" class="fig" data-figure="{name}" '
             f'role="img" aria-label="{escape(title)}">',
             f'<text x="{W / 2}" y="16" text-anchor="middle" class="t">{escape(title)}</text>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" class="ax"/>',
             f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" class="ax"/>']
    for i in range(5):
        value = ymax * i / 4
        y = H - BOTTOM - plot_h * i / 4
        parts.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" class="l">{value:.4g}</text>')
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" class="g"/>')
    for x, label in xticks:
        parts.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 14}" text-anchor="middle" class="l">{escape(label)}</text>')
    parts.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" text-anchor="middle" class="l">'
                 f'{escape(xlabel)}</text>')
    parts.append(f'<text x="12" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" class="l" '
                 f'transform="rotate(-90 12 {(TOP + H - BOTTOM) / 2})">{escape(ylabel)}</text>')
    return "".join(parts + body + ["</svg>"])


def _y(value: float, ymax: float) -> float:
    return H - BOTTOM - (H - TOP - BOTTOM) * min(max(value / ymax, 0.0), 1.05)


def _polyline(xs: list[float], ys: list[float], colour: str, label: str, dash: bool = False) -> str:
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
    style = ' stroke-dasharray="5 3"' if dash else ""
    return f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.6"{style}>' \
           f'<title>{escape(label)}</title></polyline>'


def _legend(items: list[tuple[str, str]]) -> list[str]:
    out = []
    for i, (label, colour) in enumerate(items):
        x, y = LEFT + 8 + (i % 3) * 150, TOP + 8 + (i // 3) * 13
        out.append(f'<rect x="{x}" y="{y - 7}" width="9" height="9" fill="{colour}"/>'
                   f'<text x="{x + 13}" y="{y + 1}" class="l">{escape(label)}</text>')
    return out


def gpu_memory(bars) -> str:
    """Per-GPU stacked bar (GiB): weights, activations, overheads, KV cache, free; the budget as a line."""
    # the axis holds the whole stack: a plan that does not fit stacks more than the card (70B bf16 weights on one
    # H100: 135.8 GiB on 79.2), which had been clipped at 105% of the card's axis, the terms above the clip drawn 0 high
    ymax = _nice(max(max(b.total_gib, sum(gib for _, gib in b.terms if gib > 0)) for b in bars))
    plot_w = W - LEFT - RIGHT
    width = min(90.0, plot_w / (2 * len(bars)))
    body, ticks = [], []
    for i, b in enumerate(bars):
        x = LEFT + plot_w * (i + 0.5) / len(bars) - width / 2
        below = 0.0
        for term, gib in b.terms:
            if gib <= 0:
                continue
            y0, y1 = _y(below, ymax), _y(below + gib, ymax)
            body.append(f'<rect x="{x:.1f}" y="{y1:.1f}" width="{width:.1f}" height="{max(0.0, y0 - y1):.1f}" '
                        f'fill="{TERM_COLOURS[term]}" data-term="{escape(term)}"><title>{escape(term)}: '
                        f'{gib:.2f} GiB</title></rect>')
            below += gib
        yb = _y(b.budget_gib, ymax)
        body.append(f'<line x1="{x - 6:.1f}" y1="{yb:.1f}" x2="{x + width + 6:.1f}" y2="{yb:.1f}" stroke="#000" '
                    f'stroke-dasharray="4 2"><title>budget {b.budget_gib:.2f} GiB</title></line>')
        ticks.append((x + width / 2, b.label))
    legend = [(term, colour) for term, colour in TERM_COLOURS.items()]
    return _frame("Memory per GPU (dashed: the engine's budget)", "", "GiB", ymax, body + _legend(legend),
                  "gpu-memory", ticks)


def _xscale(values: list[float], log: bool = False):
    lo, hi = min(values), max(values)
    f = (lambda v: math.log2(v)) if log else (lambda v: v)
    span = (f(hi) - f(lo)) or 1.0
    return lambda v: LEFT + (W - LEFT - RIGHT) * (f(v) - f(lo)) / span


def kv_demand(curve) -> str:
    """KV demand (GiB) of p50 / p99 / max requests against concurrency, the pool, the target and the peak."""
    xs = [float(c) for c in curve.concurrency]
    top = max([curve.capacity_gib] + [max(v) for _, v in curve.demand_gib])
    ymax = _nice(top)
    sx = _xscale(xs)
    body = []
    colours = {}
    for i, (label, values) in enumerate(curve.demand_gib):
        colours[label] = OKABE_ITO[i]
        body.append(_polyline([sx(x) for x in xs], [_y(v, ymax) for v in values], OKABE_ITO[i], f"{label} demand"))
    yc = _y(curve.capacity_gib, ymax)
    body.append(f'<line x1="{LEFT}" y1="{yc:.1f}" x2="{W - RIGHT}" y2="{yc:.1f}" stroke="#000" stroke-width="1.4">'
                f'<title>KV pool {curve.capacity_gib:.2f} GiB</title></line>')
    for value, label, colour in ((curve.target, "target", "#009E73"), (curve.peak, "peak", "#D55E00")):
        if xs[0] <= value <= xs[-1]:
            x = sx(value)
            body.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}" stroke="{colour}" '
                        f'stroke-dasharray="3 3"><title>{label} concurrency {value}</title></line>')
    ticks = [(sx(v), f"{v:g}") for v in (xs[0], xs[len(xs) // 2], xs[-1])]
    legend = [(f"{label} requests", colour) for label, colour in colours.items()] + [("KV pool", "#000")]
    return _frame("KV demand vs concurrency (dashed: target, peak)", "concurrent requests", "GiB", ymax,
                  body + _legend(legend), "kv-demand", ticks)


def speedup(table) -> str:
    """Speed-up (TPOT without / with speculation) against batch size, one line per k."""
    rows = list(table.rows)
    xs = sorted({float(r.batch_size) for r in rows})
    ymax = _nice(max([r.speedup for r in rows] + [1.2]))
    sx = _xscale(xs, log=True)
    body, legend = [], []
    for i, k in enumerate(sorted({r.k for r in rows})):
        mine = sorted((r for r in rows if r.k == k), key=lambda r: r.batch_size)
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        body.append(_polyline([sx(r.batch_size) for r in mine], [_y(r.speedup, ymax) for r in mine], colour,
                              f"k={k}"))
        legend.append((f"k={k}", colour))
    y1 = _y(1.0, ymax)
    body.append(f'<line x1="{LEFT}" y1="{y1:.1f}" x2="{W - RIGHT}" y2="{y1:.1f}" stroke="#000" '
                f'stroke-dasharray="5 3"><title>no speed-up</title></line>')
    ticks = [(sx(x), f"{x:g}") for x in xs]
    return _frame(f"Speed-up vs batch size (a = {table.acceptance_rate:.2f})", "batch size", "speed-up", ymax,
                  body + _legend(legend), "speedup", ticks)


def timeline(report) -> str:
    """The burst simulation: KV occupancy (%) over time, with and without speculation."""
    runs = [(report.spec, OKABE_ITO[0], "speculation" if speculates(report.spec) else "no speculation")]
    if report.no_spec is not None:
        runs.append((report.no_spec, OKABE_ITO[1], "no speculation"))
    end = max([float(r.series["t"][-1]) for r, _, _ in runs if len(r.series["t"])] + [1.0])
    sx = _xscale([0.0, float(end) or 1.0])
    body, legend = [], []
    for run, colour, label in runs:
        s = run.series
        step = max(1, len(s["t"]) // 400)
        body.append(_polyline([sx(float(t)) for t in s["t"][::step]],
                              [_y(100 * float(v), 100.0) for v in s["kv_used_fraction"][::step]], colour, label))
        legend.append((f"{label}: {run.preemptions} preemptions", colour))
    ticks = [(sx(end * i / 4), f"{end * i / 4:.0f}") for i in range(5)]
    return _frame("Burst timeline: KV occupancy", "time (s)", "KV occupancy (%)", 100.0, body + _legend(legend),
                  "timeline", ticks)


def live(points: list[dict], plan: dict) -> str:
    """Observed KV usage (%) over polls against the plan's worst-case demand (its envelope, as a share of the
    KV pool)."""
    envelope = plan.get("envelope") or {}
    planned_fraction = envelope["demand_bytes"] / envelope["capacity_bytes"] if envelope.get("capacity_bytes") \
        else None
    xs = [float(i) for i in range(max(2, len(points)))]
    sx = _xscale(xs)
    body = []
    usage = [p.get("kv_usage") for p in points]
    if any(u is not None for u in usage):
        body.append(_polyline([sx(i) for i, u in enumerate(usage) if u is not None],
                              [_y(100 * u, 100.0) for u in usage if u is not None], OKABE_ITO[0], "observed"))
    if planned_fraction is not None:
        y = _y(100 * planned_fraction, 100.0)
        body.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="{OKABE_ITO[3]}" '
                    f'stroke-dasharray="5 3"><title>plan: worst-case demand</title></line>')
    legend = [("observed KV usage", OKABE_ITO[0]), ("plan: worst-case demand", OKABE_ITO[3])]
    return _frame("Live: KV usage vs the plan", "poll", "KV usage (%)", 100.0, body + _legend(legend), "live")
