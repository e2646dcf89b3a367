#!/usr/bin/env python3
"""Speed of planning. Targets: one plan through the library < 5 ms and `specsize plan --help` / `specsize plan --format json`
< 0.5 s wall time from a warm virtual environment (issue #2); the speed-up table for 16 batch sizes x 8
values of k < 50 ms (issue #3).

Run: python3 dev.py bench   (or .venv/bin/python bench/speed.py)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from specsize.inputs.load import load_request
from specsize.inputs.resolve import resolve
from specsize.catalog.gpus import load_efficiency
from specsize.core.memory import account
from specsize.engines import resolve_profile
from specsize.planner.perf import Acceptance, speedup_table
from specsize.planner.plan import plan


def _timed(run, repeats: int, before=None) -> list[float]:
    samples = []
    for _ in range(repeats):
        if before is not None:
            before()
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return samples


def _default():
    inputs = resolve(load_request())  # loading models is done once, as in a planning loop
    return inputs, resolve_profile()


def time_library(repeats: int = 500) -> list[float]:
    inputs, profile = _default()
    return _timed(lambda: plan(inputs.deployment, inputs.workload, profile, inputs.request.headroom), repeats)


def time_library_cold(repeats: int = 50) -> list[float]:
    """Every cache emptied before each plan: the cost of the first plan of a new deployment."""
    from specsize.core import kvcache, weights

    def clear() -> None:
        for cached in (weights.weight_breakdown, kvcache.model_kv_layers, kvcache.bytes_per_token,
                       kvcache.layer_groups):
            cached.cache_clear()

    inputs, profile = _default()
    return _timed(lambda: plan(inputs.deployment, inputs.workload, profile, inputs.request.headroom), repeats, clear)


def time_plan_with_perf(repeats: int = 200) -> list[float]:
    inputs, profile = _default()
    eff = load_efficiency(inputs.deployment.gpu)
    return _timed(lambda: plan(inputs.deployment, inputs.workload, profile, inputs.request.headroom, efficiency=eff,
                               acceptance=Acceptance(rate=0.7)), repeats)


def time_speedup_table(repeats: int = 20) -> list[float]:
    inputs, profile = _default()
    d = inputs.deployment
    mem = account(d, profile)
    eff = load_efficiency(d.gpu)
    batches = [2 ** i for i in range(16)]
    return _timed(lambda: speedup_table(d, mem, eff, Acceptance(rate=0.7), batches, list(range(1, 9)), 2048), repeats)


def time_cli(args: list[str], repeats: int = 7) -> list[float]:
    exe = Path(sys.executable).with_name("specsize")
    samples = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        subprocess.run([str(exe), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - start)
    return samples[1:]  # the first run warms the file cache


def main() -> int:
    lib = time_library()
    rows = [("plan() through the library", statistics.median(lib), max(lib), 0.005)]
    cold = time_library_cold()
    rows.append(("plan() with cold caches", statistics.median(cold), max(cold), 0.005))
    with_perf = time_plan_with_perf()
    rows.append(("plan() with the perf section", statistics.median(with_perf), max(with_perf), 0.005))
    table = time_speedup_table()
    rows.append(("speed-up table 16 B x 8 k", statistics.median(table), max(table), 0.050))
    for label, args in (("specsize plan --help", ["plan", "--help"]),
                        ("specsize plan --format json", ["plan", "--format", "json"])):
        samples = time_cli(args)
        rows.append((label, statistics.median(samples), max(samples), 0.5))
    print(f"{'what':32} {'median':>10} {'max':>10} {'target':>8}  met")
    for label, median, worst, target in rows:
        print(f"{label:32} {median * 1e3:8.2f}ms {worst * 1e3:8.2f}ms {target * 1e3:6.0f}ms  "
              f"{'yes' if median < target else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
