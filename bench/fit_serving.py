#!/usr/bin/env python3
"""Fit a handful of global timing terms of catalog/data/efficiency.json on the FIT slice of
bench/data/serving_runs.jsonl (the held-out slice is never read here; bench/accuracy_serving.py reports it).

Objective: the sum over throughput, TTFT and TPOT of the median |log(predicted / measured)| over the fit rows.
Each term is set for every GPU family at once (a global parameter, not a per-run knob). A coordinate search over
a small grid per term, in the order given.

Run: .venv/bin/python bench/fit_serving.py frontend_serial_s=0,0.002,0.005,0.01 [compute*=1,0.8 ...]
     (`key=v`: v for every family; `key*=f`: each family's own value times f; `frontend_split=v`: v of the
     30 ms low-load front-end latency is serial API-server work (frontend_serial_s), the rest fixed latency;
     `family.term=v`: one family only, e.g. cdna3.compute*=0.5; `V0.field=v`: a field of the vLLM V0 profiles,
     `V1.field=v` of the V1 profiles before 0.17, `V17.field=v` of the profiles from 0.17 on, `SGL.field=v` of
     every SGLang profile;
     `match=REGEX`: only the fit runs whose engine, release (V0 / V1), GPU and load kind match)
     (the first value of each term is its starting point; prints the objective of every point tried)
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import replace
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy_serving as A  # noqa: E402

from specsize.catalog import gpus  # noqa: E402
from specsize.engines import registry  # noqa: E402


# `V0.field=v` / `V1.field=v` / `V17.field=v` / `SGL.field=v`: a field of the vLLM profiles of V0 (0.6-0.7) / of V1
# before 0.17 / of 0.17 on / of every SGLang profile, not an efficiency term: prefix -> (engine, which of its profiles)
PROFILE_PATCHES = {"V0.": ("vllm", lambda start, p: p.generation == "V0"),
                   "V1.": ("vllm", lambda start, p: p.generation == "V1" and start < (0, 17)),
                   "V17.": ("vllm", lambda start, p: start >= (0, 17)),
                   "SGL.": ("sglang", lambda start, p: True)}

MATCH = ""  # `match=REGEX` on the command line: fit on the runs whose engine / release / GPU / load match
FRONTEND_TOTAL_S = 0.03  # TTFT beyond prefill at 1-8 concurrent requests (efficiency.json: frontend_latency_s)


def patched_rows(settings: dict[str, float]) -> dict:
    """The efficiency catalog with the settings applied: `key` the same value for every family, `key*` each
    family's value scaled, `family.key` one family only (PROFILE_PATCHES keys are profile fields, not applied here)."""
    base = gpus._efficiency_rows()
    gpus._efficiency_rows.cache_clear()
    patched = {}
    for fam, row in base.items():
        row = dict(row)
        for key, value in settings.items():
            if key.startswith(tuple(PROFILE_PATCHES)):
                continue
            if "." in key:  # `family.term=v` / `family.term*=f`: one family's term only
                only, key = key.split(".", 1)
                if fam != only:
                    continue
            if key == "frontend_split":  # v of the 30 ms low-load front-end latency is serial work, the rest not
                row["frontend_serial_s"], row["frontend_latency_s"] = value, max(0.0, FRONTEND_TOTAL_S - value)
            elif key.endswith("*"):
                row[key[:-1]] = row[key[:-1]] * value
            else:
                row[key] = value
        patched[fam] = row
    return patched


def evaluate(settings: dict[str, float], rows: list[dict]) -> tuple[float, dict[str, tuple[float, float]]]:
    patched = patched_rows(settings)
    original = gpus._efficiency_rows
    gpus._efficiency_rows = lambda: patched  # type: ignore[assignment]
    originals = {engine: registry.ENGINES[engine] for engine in ("vllm", "sglang")}
    for engine, profiles in originals.items():
        patched_profiles = []
        for start, p in profiles:
            for prefix, (owner, applies) in PROFILE_PATCHES.items():
                fields = {k[len(prefix):]: v for k, v in settings.items() if k.startswith(prefix)}
                if fields and owner == engine and applies(start, p):
                    p = replace(p, **fields)
            patched_profiles.append((start, p))
        registry.ENGINES[engine] = tuple(patched_profiles)
    try:
        logs: dict[str, list[float]] = {"throughput": [], "ttft": [], "tpot": []}
        for row in rows:
            over, _ = A.case(row)
            if over is None or A.held_out(row) or (MATCH and not re.search(MATCH, A.describe(row))):
                continue
            try:
                pred = A.predict(over)
            except Exception:  # noqa: BLE001 - rows the tool refuses are skipped as in accuracy_serving
                continue
            if pred is None:
                continue
            for metric, (stat, value) in A.measured(row).items():
                p = pred[metric][stat]
                if p and value:
                    logs[metric].append(math.log(p / value))
    finally:
        gpus._efficiency_rows = original  # type: ignore[assignment]
        registry.ENGINES.update(originals)
    stats = {m: (statistics.median(abs(x) for x in v), math.exp(statistics.median(v)) - 1) for m, v in logs.items() if v}
    return sum(s[0] for s in stats.values()), stats


def main() -> int:
    grid = {}
    global MATCH
    for arg in sys.argv[1:]:
        key, values = arg.split("=", 1)
        if key == "match":
            MATCH = values
            continue
        grid[key] = [float(v) for v in values.split(",")]
    rows = A.load_rows()
    best = {k: v[0] for k, v in grid.items()}
    best_score, stats = evaluate(best, rows)
    print(f"start {best} objective {best_score:.4f} {stats}", flush=True)
    for key, values in grid.items():
        for value in values[1:]:
            trial = {**best, key: value}
            score, st = evaluate(trial, rows)
            print(f"  {key}={value:g}: objective {score:.4f} " + "  ".join(
                f"{m} |{s[0]:.1%}| bias {s[1]:+.1%}" for m, s in st.items()), flush=True)
            if score < best_score:
                best, best_score, stats = trial, score, st
    print(f"best {best} objective {best_score:.4f} " + "  ".join(
        f"{m} |{s[0]:.1%}| bias {s[1]:+.1%}" for m, s in stats.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
