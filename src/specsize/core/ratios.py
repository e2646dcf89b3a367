"""Ratios read against 1 (a speed-up, a latency ratio), printed on their side of 1: one owner for the reports and the
planner's warnings, which may not import the reports (tests/test_layers.py)."""

from __future__ import annotations


def beside_one(ratio: float, digits: int = 2) -> str:
    """A ratio read against 1 (a speed-up, stops-paying's latency ratio) with the decimals that keep it on its side of
    1: 0.996 and 1.003 had both read "1.00"."""
    for shown in range(digits, digits + 4):
        text = f"{ratio:.{shown}f}"
        if (float(text) < 1) == (ratio < 1) and (float(text) > 1) == (ratio > 1):
            return text
    return f"{ratio:.6f}"


def speedup_text(speedup: float) -> str:
    """A speed-up as "1.15x", on its side of 1 (beside_one; planner.perf and core.perf.crossover_batch read speculation
    as slowing decoding below 1): 0.9991 at the crossover batch had read "1.00x" on the row saying that speed-up < 1
    begins there, 0.99998 beside "best k: none" in the speed-up grid, and 0.998 in the plan's "a slowdown (1.00x)"."""
    return f"{beside_one(speedup)}x"
