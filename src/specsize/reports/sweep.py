"""A sweep's results: the columns of one row per cell (a versioned contract, docs/sweep.md) and the HTML
summary (self-contained: inline SVG and CSS, nothing fetched).

Units: bytes are integer bytes, times seconds, throughput output tokens/s of one engine instance, cost $ per
million output tokens.
"""

from __future__ import annotations

import html
import math
from typing import Any, Callable, Mapping, Sequence

from .. import __version__
from ..core.envelope import headroom_text, policy_text
from ..inputs.request import FIELDS
from ..inputs.study import Cell, Study
from ..planner import fleet
from ..planner.result import PlanResult
from ..planner.simulate import SimSummary, SimulationReport
from ..core.ratios import speedup_text

RESULTS_VERSION = 1
STATUS = ("ok", "invalid", "error")  # invalid: the cell's inputs cannot be planned; error: a bug, reported

HEAD = (("key", "str"), ("index", "int"), ("seed", "int"), ("status", "str"), ("error", "str"))
PLAN = (("verdict", "str"), ("speculative", "bool"), ("headroom_worst_case", "float"), ("headroom_expected", "float"), ("breaks_first", "str"),
        ("gpus_per_instance", "int"), ("replicas", "int"), ("gpus_total", "int"),
        ("budget_bytes", "int"), ("weights_target_bytes", "int"), ("weights_draft_bytes", "int"),
        ("activation_peak_bytes", "int"), ("non_torch_bytes", "int"), ("cuda_graph_bytes", "int"),
        ("kv_cache_bytes", "int"), ("kv_blocks", "int"), ("kv_cache_tokens", "int"),
        ("demand_bytes", "int"), ("capacity_bytes", "int"))
PERF = (("speedup", "float"), ("tpot_s", "float"), ("tpot_s_no_spec", "float"), ("model_throughput_tok_s", "float"),
        ("model_throughput_tok_s_no_spec", "float"), ("crossover_batch", "int"), ("best_k", "int"))
SIM_TERMS = (("requests", "int"), ("completed", "int"), ("ttft_p50_s", "float"), ("ttft_p90_s", "float"),
             ("ttft_p99_s", "float"), ("tpot_p50_s", "float"), ("tpot_p90_s", "float"), ("tpot_p99_s", "float"),
             ("throughput_tok_s", "float"), ("preemptions", "int"), ("kv_peak_fraction", "float"),
             ("sustains", "bool"), ("slo_attainment", "float"))
SIM = (("simulated", "bool"),) + tuple((f"{run}_{name}", kind) for run in ("spec", "nospec")
                                         for name, kind in SIM_TERMS)
COST = (("price_per_gpu_hour", "float"), ("cost_per_mtok", "float"), ("cost_per_mtok_no_spec", "float"),
        ("cost_basis", "str"))
OUTPUTS = PLAN + PERF + SIM + COST
_KIND_OF_FIELD = {"int": "int", "float": "float", "bool": "bool"}


def columns(study: Study) -> tuple[tuple[str, str], ...]:
    """(name, kind) of every column, kind in int/float/bool/str: the head, one label column per group axis,
    one column per field the study sets (lengths as `p50=..,p95=..,p99=..,max=..`), then the outputs."""
    inputs = tuple((name, _KIND_OF_FIELD.get(FIELDS[name].metadata["specsize"].kind, "str"))
                   for name in study.input_fields())
    labels = tuple((name, "str") for name in study.group_axes() if name not in FIELDS)
    return HEAD + labels + inputs + OUTPUTS


def _input(value: Any) -> Any:
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return value


def cell_row(cell: Cell, status: str = "ok", error: str | None = None) -> dict:
    row: dict = {"key": cell.key, "index": cell.index, "seed": cell.seed, "status": status, "error": error}
    row.update(cell.labels)
    row.update({name: _input(value) for name, value in cell.values.items()})
    return row


def plan_terms(result: PlanResult) -> dict:
    m, v, d = result.memory, result.verdict, result.deployment
    out = {"verdict": v.verdict, "speculative": d.speculative.enabled, "headroom_worst_case": _finite(v.worst_case.headroom_fraction),
           "headroom_expected": _finite(v.expected.headroom_fraction), "breaks_first": v.breaks_first,
           "gpus_per_instance": d.gpus_per_instance, "replicas": d.replicas,
           "gpus_total": d.gpus_total, "budget_bytes": m.budget_bytes,
           "weights_target_bytes": m.weights_target.total, "weights_draft_bytes": m.weights_draft_bytes,
           "activation_peak_bytes": m.activation_peak_bytes, "non_torch_bytes": m.non_torch_bytes,
           "cuda_graph_bytes": m.cuda_graph_bytes, "kv_cache_bytes": m.kv_cache_bytes, "kv_blocks": m.kv_blocks,
           "kv_cache_tokens": m.kv_cache_tokens, "demand_bytes": v.worst_case.demand_bytes,
           "capacity_bytes": v.worst_case.capacity_bytes}
    p = result.perf
    # an engine that serves no request has no performance (planner.plan leaves perf None: core.memory.unstarted), so
    # no TPOT, throughput, speed-up or cost per token either (cost_terms prices the model's throughput where the cell
    # was not simulated). Its row had carried the performance model's figures at the batch, and $0.63 per million
    # tokens for an H100 asked for 186 GiB of KV cache.
    if p is not None:
        out.update({"speedup": p.speedup, "tpot_s": p.tpot_s, "tpot_s_no_spec": p.tpot_s_no_spec,
                    "model_throughput_tok_s": p.throughput_tok_s,
                    "model_throughput_tok_s_no_spec": p.throughput_tok_s_no_spec,
                    "crossover_batch": p.crossover_batch, "best_k": p.best_k})
    return out


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def _sim_terms(run: str, s: SimSummary) -> dict:
    return {f"{run}_requests": s.requests, f"{run}_completed": s.completed,
            f"{run}_ttft_p50_s": s.ttft_s.p50, f"{run}_ttft_p90_s": s.ttft_s.p90, f"{run}_ttft_p99_s": s.ttft_s.p99,
            f"{run}_tpot_p50_s": s.tpot_s.p50, f"{run}_tpot_p90_s": s.tpot_s.p90, f"{run}_tpot_p99_s": s.tpot_s.p99,
            f"{run}_throughput_tok_s": s.throughput_tok_s, f"{run}_preemptions": s.preemptions,
            f"{run}_kv_peak_fraction": s.kv_peak_fraction, f"{run}_sustains": s.sustains,
            f"{run}_slo_attainment": fleet.slo_attainment(s.goodput_req_s, s.end_time_s, s.requests)}


def simulation_terms(report: SimulationReport, speculative: bool) -> dict:
    """spec_* from the run with speculation, nospec_* from the run without (a deployment without a drafter
    has only the latter)."""
    out: dict = {"simulated": True}
    if speculative:
        out.update(_sim_terms("spec", report.spec))
        if report.no_spec is not None:
            out.update(_sim_terms("nospec", report.no_spec))
    else:
        out.update(_sim_terms("nospec", report.spec))
    return out


def cost_terms(row: dict) -> dict:
    """Cost per million tokens from the simulated throughput where the cell was simulated, else the model's."""
    gpus, price = row.get("gpus_per_instance"), row.get("price_per_gpu_hour")
    if gpus is None:
        return {}
    speculative = bool(row.get("speculative"))
    if row.get("simulated"):
        spec = row.get("spec_throughput_tok_s") if speculative else row.get("nospec_throughput_tok_s")
        nospec = row.get("nospec_throughput_tok_s")
        basis: str | None = "simulated"
    else:
        spec = row.get("model_throughput_tok_s") if speculative else row.get("model_throughput_tok_s_no_spec")
        nospec = row.get("model_throughput_tok_s_no_spec")
        basis = "model"
    if spec is None and nospec is None:  # no throughput to price (an engine that does not start): no basis either
        basis = None
    return {"cost_per_mtok": fleet.cost_per_million_tokens(gpus, price, spec),
            "cost_per_mtok_no_spec": fleet.cost_per_million_tokens(gpus, price, nospec), "cost_basis": basis}


COST_INPUTS = ("gpu", "gpus_per_instance", "speculative", "simulated", "spec_throughput_tok_s",
               "nospec_throughput_tok_s", "model_throughput_tok_s", "model_throughput_tok_s_no_spec")


def repriced(columns: dict[str, list], price_of: Callable[[Any], float | None]) -> dict[str, list]:
    """The COST columns of rows of a results table (`columns`: those of COST_INPUTS it has) at the study's prices now
    (`price_of(gpu)`: Study.price_of). A price is no part of a cell's key (it changes no plan or simulation), so a
    rerun after editing `prices:` resumes every cell and re-prices them all here; a cell that failed keeps no cost."""
    out: dict[str, list] = {name: [] for name, _ in COST}
    rows = len(columns["gpus_per_instance"])
    for i in range(rows):
        price = price_of(columns["gpu"][i]) if "gpu" in columns else None
        terms = cost_terms({name: columns[name][i] for name in COST_INPUTS if name in columns}
                           | {"price_per_gpu_hour": price})
        out["price_per_gpu_hour"].append(price)
        for name in ("cost_per_mtok", "cost_per_mtok_no_spec", "cost_basis"):
            out[name].append(terms.get(name))
    return out


RESTATE_INPUTS = ("key", *COST_INPUTS)


def restated(columns: dict[str, list], study: Study, index_of: Mapping[str, int]) -> dict[str, list]:
    """The columns of rows of a results table (`columns`: those of RESTATE_INPUTS it has) that depend on the study as
    it is now rather than on the cell key: the costs at today's prices (`repriced`), and each cell's position in the
    cross product and its group axes' labels (`index_of`: key -> index now). A rerun after reordering an axis or
    renaming a label resumes every cell, and its rows say where each cell lies in the study now."""
    out = repriced(columns, study.price_of)
    indexes = [index_of[key] for key in columns["key"]]
    out["index"] = indexes
    labels = [study.labels_at(index) for index in indexes]
    for name in study.group_axes():
        out[name] = [cell[name] for cell in labels]
    return out


# --- the HTML summary ------------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:24px auto;padding:0 16px;
color:#1a1a1a;line-height:1.45}
h1{font-size:1.35rem}h2{font-size:1.1rem;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:.88rem}td,th{border:1px solid #ccc;padding:3px 7px;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}.note{color:#555;font-size:.9rem}
svg text{font-size:11px;font-family:inherit}
"""


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


class _Shown(str):
    """A figure already written with its unit (a percentage): right-aligned like a number."""


def _headroom(value: float | None, policy: float | None) -> str:
    """A headroom as the rest of specsize writes it: a percentage that reads as its verdict under the cell's policy
    (core.envelope.headroom_text); one decimal where cells of different policies are summarised together. The
    summary had written the fraction at three significant digits: 0.1996 under a 20% policy (thin) read "0.2", and
    -1.15 stood for -115%."""
    if value is None:
        return _Shown("-")
    return _Shown(headroom_text(value, policy) if policy is not None else f"{value:.1%}")


def _share(value: float | None, needed: float) -> str:
    """A share of requests (SLO attainment) as a percentage, with the decimals it takes to stay on its side of the
    share the fleet needs (0.98996 against 99% is "98.996%", not "0.99")."""
    if value is None:
        return _Shown("-")
    for digits in range(1, 6):
        text = f"{value:.{digits}%}"
        if (float(text[:-1]) / 100 >= needed) == (value >= needed):
            return _Shown(text)
    return _Shown(f"{value:.6%}")


def _policy(rows: Sequence[Mapping]) -> float | None:
    """The headroom policy the rows were planned under, where they share one (the `headroom` field, else its
    default); None where they differ."""
    default = FIELDS["headroom"].default
    policies = {row.get("headroom", default) for row in rows}
    policies = {default if p is None else float(p) for p in policies}
    return policies.pop() if len(policies) == 1 else None


def _table(header: Sequence[str], body: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    lines = []
    for row in body:
        cells = "".join(f"<td class='num'>{html.escape(_fmt(c))}</td>" if isinstance(c, (int, float, _Shown)) else
                        f"<td>{html.escape(_fmt(c))}</td>" for c in row)
        lines.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"


def _scatter(points: Sequence[fleet.Point], front: Sequence[fleet.Point], x_label: str, y_label: str) -> str:
    """An inline SVG scatter of cost (x) vs attainment (y), the Pareto front joined by a line."""
    width, height, pad = 640, 320, 48
    if not points:
        return "<p class='note'>No cell has both a cost and an SLO attainment (give prices, an SLO and "\
               "`compute: simulate`).</p>"
    xs = [p.cost for p in points]
    x0, x1 = min(xs), max(xs)
    x1 = x1 if x1 > x0 else x0 + 1.0

    def sx(x: float) -> float:
        return pad + (x - x0) / (x1 - x0) * (width - 2 * pad)

    def sy(y: float) -> float:
        return height - pad - y * (height - 2 * pad)

    dots = "".join(f"<circle cx='{sx(p.cost):.1f}' cy='{sy(p.attainment):.1f}' r='3' fill='#56B4E9' "
                   f"fill-opacity='0.6'><title>{html.escape(p.key[:12])}</title></circle>" for p in points)
    line = " ".join(f"{sx(p.cost):.1f},{sy(p.attainment):.1f}" for p in front)
    axes = (f"<line x1='{pad}' y1='{height - pad}' x2='{width - pad}' y2='{height - pad}' stroke='#333'/>"
            f"<line x1='{pad}' y1='{pad}' x2='{pad}' y2='{height - pad}' stroke='#333'/>"
            f"<text x='{width / 2}' y='{height - 12}' text-anchor='middle'>{html.escape(x_label)}</text>"
            f"<text x='14' y='{height / 2}' transform='rotate(-90 14 {height / 2})' text-anchor='middle'>"
            f"{html.escape(y_label)}</text>"
            f"<text x='{pad}' y='{height - pad + 16}' text-anchor='middle'>{x0:,.3g}</text>"
            f"<text x='{width - pad}' y='{height - pad + 16}' text-anchor='middle'>{x1:,.3g}</text>"
            f"<text x='{pad - 6}' y='{sy(0) + 4}' text-anchor='end'>0</text>"
            f"<text x='{pad - 6}' y='{sy(1) + 4}' text-anchor='end'>1</text>")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' width='{width}' "
            f"height='{height}' role='img'>{axes}{dots}<polyline points='{line}' fill='none' stroke='#D55E00' "
            f"stroke-width='2'/></svg>")


def _inputs_of(row: Mapping, names: Sequence[str]) -> str:
    return ", ".join(f"{n}={_fmt(row.get(n))}" for n in names if row.get(n) is not None)


TITLE_MARK = "<title>specsize sweep:"  # how a summary this renderer wrote begins its title (cli.sweep may rewrite one)


def render_html(study: Study, rows: Sequence[Mapping], tenant_columns: Sequence[str], load_column: str | None,
                elapsed_s: float | None = None) -> str:
    e = html.escape
    varying = [axis.name for axis in study.axes]  # a field axis's column is the field; a group's its label
    counts = {s: sum(1 for r in rows if r.get("status") == s) for s in STATUS}
    verdicts = {v: sum(1 for r in rows if r.get("verdict") == v) for v in ("fits", "thin", "does_not_fit")}
    out = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
           f"{TITLE_MARK} {e(study.name)}</title><style>{CSS}</style></head><body>",
           f"<h1>Sweep: {e(study.name)}</h1>",
           f"<p>{len(rows):,} cells: {counts['ok']:,} planned ({verdicts['fits']:,} fit, {verdicts['thin']:,} thin, "
           f"{verdicts['does_not_fit']:,} do not fit), {counts['invalid']:,} invalid, {counts['error']:,} errors; "
           f"{sum(1 for r in rows if r.get('simulated')):,} simulated spec and no-spec."
           + (f" {elapsed_s:,.1f} s." if elapsed_s is not None else "") + "</p>",
           f"<p class='note'>specsize {e(__version__)}, model version {e(study.model_version)}, study seed "
           f"{study.seed}. Cost: $ per million output tokens of one engine instance (price per GPU-hour x GPUs / "
           "tokens per hour); SLO attainment: the share of simulated requests within the TTFT and TPOT SLO.</p>"]

    out.append("<h2>The chosen fleet</h2>")
    chosen = fleet.chosen_fleet(rows, tenant_columns, study.slo_attainment)
    body = []
    for item in chosen:
        r = item["row"]
        tenant = ", ".join(f"{k}={_fmt(v)}" for k, v in item["tenant"].items()) or "(all cells)"
        if r is None:
            body.append([tenant, "no cell fits with headroom and meets the SLO", None, None, None])
        else:
            body.append([tenant, _inputs_of(r, [n for n in varying if n not in tenant_columns]),
                         _headroom(r.get("headroom_worst_case"), _policy([r])), r.get("cost_per_mtok"),
                         r["key"][:12]])
    out.append(f"<p class='note'>Per tenant ({e(', '.join(tenant_columns) or 'no tenant axes')}): the cheapest "
               f"cell that fits with headroom and, where simulated, sustains its load with at least "
               f"{policy_text(study.slo_attainment)} of requests within the SLO.</p>")  # 99.5% had read "100%"
    out.append(_table(["tenant", "configuration", "headroom", "$ / M tokens", "cell"], body))
    unpriced = sorted({str(r.get("gpu")) for r in rows if r.get("price_per_gpu_hour") is None
                       and fleet.meets(r, study.slo_attainment)})
    if unpriced and any(item["row"] is not None and item["row"].get("cost_per_mtok") is not None for item in chosen):
        # fleet.chosen_fleet ranks a cell without a cost after every priced one: a study pricing the H100 alone had
        # named it "the cheapest" beside an L40S cell that fits as well, whose cost no one knows
        out.append(f"<p class='note'>Cells that qualify on GPUs without a price ({e(', '.join(unpriced))}) rank after "
                   "every priced cell, whatever they would cost: give them a price under <code>prices:</code> to "
                   "compare.</p>")

    out.append("<h2>Cost vs SLO attainment (Pareto front)</h2>")
    points = []
    for r in rows:
        run = "spec" if r.get("speculative") else "nospec"
        cost, attained = r.get("cost_per_mtok"), r.get(f"{run}_slo_attainment")
        if r.get("status") == "ok" and cost is not None and attained is not None:
            points.append(fleet.Point(r["key"], float(cost), float(attained)))
    front = fleet.pareto_front(points)
    out.append(_scatter(points, front, "$ per million output tokens", "SLO attainment"))
    by_key = {r["key"]: r for r in rows}
    out.append(_table(["$ / M tokens", "SLO attainment", "configuration"],
                      [[p.cost, _share(p.attainment, study.slo_attainment), _inputs_of(by_key[p.key], varying)]
                       for p in front]))

    out.append("<h2>Headroom by GPU type</h2>")
    gpu_column = "gpu" if any("gpu" in r for r in rows) else None
    if gpu_column:
        stats = fleet.headroom_by(rows, gpu_column)
        policies = {g: _policy([r for r in rows if r.get("status") == "ok" and str(r.get(gpu_column)) == g])
                    for g in stats}
        out.append(_table(["GPU", "planned cells", "min headroom", "median", "max"],
                          [[g, s["cells"], *(_headroom(s[k], policies[g]) for k in ("min", "median", "max"))]
                           for g, s in stats.items()]))
    out.append("<h2>Where speculation pays, by load</h2>")
    if load_column:
        levels = fleet.speculation_by_load(rows, load_column)
        out.append(_table([load_column, "speculative cells", "faster with speculation", "median speed-up"],
                          [[lv["load"], lv["cells"], lv["pays"], _Shown(speedup_text(lv["median_speedup"]))]
                           for lv in levels]))
        out.append("<p class='note'>Speed-up: the simulated median TPOT without / with speculation where both ran, "
                   "else the performance model's speed-up (TPOT) at the cell's batch.</p>")
    failed = [r for r in rows if r.get("status") != "ok"][:50]
    if failed:
        out.append("<h2>Cells that could not be planned</h2>")
        out.append(_table(["cell", "inputs", "error"],
                          [[r["key"][:12], _inputs_of(r, varying), r.get("error")] for r in failed]))
    out.append("</body></html>\n")
    return "".join(out)
