#!/usr/bin/env python3
"""Speed of the analytic screen of `specsize search`. Target (issue #5): at least 20,000 configurations in
under 2 s on one core. The space: examples/search/llama70b.yaml widened to 8 values of max_num_seqs.

Run: python3 dev.py bench   (or .venv/bin/python bench/search_speed.py)
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from specsize.catalog.gpus import load_efficiency  # noqa: E402
from specsize.inputs.search_spec import read_search_spec  # noqa: E402
from specsize.engines import resolve_profile  # noqa: E402
from specsize.planner.search import screen  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "examples" / "search" / "llama70b.yaml"


def main() -> int:
    space = read_search_spec(str(SPEC))
    space = replace(space, max_num_seqs=(16, 32, 64, 96, 128, 192, 256, 512))
    profile = resolve_profile()
    best = None
    for _ in range(3):
        start = time.perf_counter()
        candidates, skipped = screen(space, profile, load_efficiency)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    n = len(candidates)
    print(f"configurations screened   {n:,} ({skipped} invalid skipped)")
    print(f"screen time (best of 3)   {best:.2f} s (target: >= 20,000 in < 2 s) -> "
          f"{'MET' if n >= 20_000 and best < 2 else 'NOT MET'}")
    print(f"per configuration         {best / n * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
