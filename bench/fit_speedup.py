#!/usr/bin/env python3
"""Fit the speculation terms of catalog/data/efficiency.json on the speed-ups at a batch that are not held out:
the calibration rows of ../shared (bench/accuracy_speedup.py main) and the fit part of bench/data/spec_speedups.jsonl
(sources whose URL's SHA-1 is even). The held-out part is printed, never scored.

Objective: the median |log(predicted / observed)| over the scored rows, plus 0.1 per row on the wrong side of 1.
Each term is set for every GPU family at once; a coordinate search over the grid given, in order.

Run: .venv/bin/python bench/fit_speedup.py moe_seq_reuse=0.3,0,0.15 spec_step_overhead_s=0.00015,0.0005 ...
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy_speedup as S  # noqa: E402

from specsize.catalog import gpus  # noqa: E402


def evaluate(settings: dict[str, float]) -> tuple[float, dict]:
    base = gpus._efficiency_rows()
    patched = {fam: {**row, **settings} for fam, row in base.items()}
    original = gpus._efficiency_rows
    gpus._efficiency_rows = lambda: patched  # type: ignore[assignment]
    try:
        results, _ = S.calibration(S.DEFAULT)
        parts = {"calibration": [(r["predicted"], r["observed"]) for r in results], **S.published(print_rows=False)}
    finally:
        gpus._efficiency_rows = original  # type: ignore[assignment]
    stats = {}
    for name, pairs in parts.items():
        logs = [abs(math.log(p / o)) for p, o in pairs]
        wrong = sum((p >= 1) != (o >= 1) for p, o in pairs)
        stats[name] = (statistics.median(logs) if logs else 0.0, wrong, len(pairs))
    scored = [abs(math.log(p / o)) for name in ("calibration", "fit") for p, o in parts[name]]
    wrong = stats["calibration"][1] + stats["fit"][1]
    return statistics.median(scored) + 0.1 * wrong, stats


def show(stats: dict) -> str:
    return "  ".join(f"{name} |{med:.1%}| wrong {w}/{n}" for name, (med, w, n) in stats.items())


def main() -> int:
    grid = {}
    for arg in sys.argv[1:]:
        key, values = arg.split("=")
        grid[key] = [float(v) for v in values.split(",")]
    best = {k: v[0] for k, v in grid.items()}
    best_score, stats = evaluate(best)
    print(f"start {best} objective {best_score:.4f} {show(stats)}")
    for _ in range(2):
        for key, values in grid.items():
            for value in values:
                trial = {**best, key: value}
                score, st = evaluate(trial)
                if score < best_score - 1e-6:
                    best, best_score, stats = trial, score, st
                    print(f"  {key}={value:g}: objective {score:.4f} {show(st)}")
    print(f"best {best} objective {best_score:.4f} {show(stats)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
