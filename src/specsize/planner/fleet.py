"""What a fleet study concludes from its cells: cost per token, SLO attainment, the Pareto front of cost vs
attainment, headroom by GPU type, where speculation pays by load, and the chosen fleet (the cheapest cell
per tenant that fits with headroom and meets the SLO). Pure: rows in (mappings of the results' columns),
figures out. The one owner of these formulas; the sweep's rows and its HTML summary both call them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MILLION = 1e6


def cost_per_million_tokens(gpus: int, price_per_gpu_hour: float | None, throughput_tok_s: float | None
                            ) -> float | None:
    """$ per million output tokens of one engine instance: its GPUs' hourly price over the tokens it makes
    in an hour. None without a price or a throughput."""
    if price_per_gpu_hour is None or not throughput_tok_s or throughput_tok_s <= 0:
        return None
    return gpus * price_per_gpu_hour / (throughput_tok_s * SECONDS_PER_HOUR) * TOKENS_PER_MILLION


def slo_attainment(goodput_req_s: float | None, end_time_s: float, requests: int) -> float | None:
    """Share of the simulated requests that finished within the TTFT and TPOT SLO (goodput x span /
    requests). None when the study set no SLO (the simulation then counts no goodput)."""
    if goodput_req_s is None or requests <= 0:
        return None
    return min(1.0, goodput_req_s * end_time_s / requests)


@dataclass(frozen=True)
class Point:
    key: str
    cost: float
    attainment: float


def pareto_front(points: Iterable[Point]) -> list[Point]:
    """Points no other point beats on both cost (lower) and attainment (higher), cheapest first."""
    front: list[Point] = []
    best = -1.0
    for p in sorted(points, key=lambda p: (p.cost, -p.attainment, p.key)):
        if p.attainment > best:
            front.append(p)
            best = p.attainment
    return front


def headroom_by(rows: Sequence[Mapping], column: str) -> dict[str, dict]:
    """Worst-case headroom of the planned cells per value of `column` (min, median, max; cells counted)."""
    groups: dict[str, list[float]] = {}
    for row in rows:
        if row.get("status") == "ok" and row.get("headroom_worst_case") is not None:
            groups.setdefault(str(row.get(column)), []).append(float(row["headroom_worst_case"]))
    return {name: {"cells": len(v), "min": min(v), "median": statistics.median(v), "max": max(v)}
            for name, v in sorted(groups.items())}


def speculation_by_load(rows: Sequence[Mapping], load_column: str) -> list[dict]:
    """Per load level: speculative cells, how many of them speculation speeds up, and the median speed-up: the
    median TPOT without over with speculation where both runs were simulated, else the model's speed-up at the cell's
    batch (a TPOT ratio too). Not the runs' throughputs: both serve the same arrivals, so their ratio measures only
    how long the last requests take to drain."""
    levels: dict = {}
    for row in rows:
        if row.get("status") != "ok" or not row.get("speculative"):
            continue
        spec, nospec = row.get("spec_tpot_p50_s"), row.get("nospec_tpot_p50_s")
        ratio = nospec / spec if spec and nospec else row.get("speedup")
        if ratio is None:
            continue
        levels.setdefault(row.get(load_column), []).append(float(ratio))
    out = []
    for level in sorted(levels, key=lambda v: (v is None, v)):
        ratios = levels[level]
        out.append({"load": level, "cells": len(ratios), "pays": sum(r > 1.0 for r in ratios),
                    "median_speedup": statistics.median(ratios)})
    return out


def meets(row: Mapping, attainment_needed: float) -> bool:
    """A cell a fleet may use: planned, fits with headroom, and (when simulated) sustains its load with the
    needed share of requests within the SLO."""
    if row.get("status") != "ok" or row.get("verdict") != "fits":
        return False
    if row.get("simulated"):
        sim = "spec" if row.get("speculative") else "nospec"
        if not row.get(f"{sim}_sustains"):
            return False
        attained = row.get(f"{sim}_slo_attainment")
        if attained is not None and attained < attainment_needed:
            return False
    return True


def chosen_fleet(rows: Sequence[Mapping], tenant_columns: Sequence[str], attainment_needed: float) -> list[dict]:
    """Per tenant (a combination of the tenant columns' values): the cheapest cell that `meets`, by cost per
    million tokens (cells without a price rank by GPUs per instance), ties broken by key. A tenant no cell
    serves is listed with `row: None`."""
    tenants: dict[tuple, list[Mapping]] = {}
    for row in rows:
        tenants.setdefault(tuple(row.get(c) for c in tenant_columns), []).append(row)
    fleet = []
    for tenant in sorted(tenants, key=lambda t: tuple(str(v) for v in t)):
        usable = [r for r in tenants[tenant] if meets(r, attainment_needed)]
        best = min(usable, key=lambda r: (r.get("cost_per_mtok") is None, r.get("cost_per_mtok") or 0.0,
                                          r.get("gpus_per_instance") or 0, r["key"]), default=None)
        fleet.append({"tenant": dict(zip(tenant_columns, tenant)), "row": best})
    return fleet
