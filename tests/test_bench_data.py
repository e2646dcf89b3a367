"""The published serving runs the timing accuracy is measured on (bench/data/serving_runs*.jsonl): every row parses,
has a unique id, its source and the quote of the printout, and a measured figure to compare with."""

from __future__ import annotations

import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "bench" / "data").glob("serving_runs*.jsonl"))
REQUIRED = ("id", "engine", "model", "gpu", "tp", "input_len", "output_len", "measured", "source", "quote")


def _rows() -> list[tuple[str, int, dict]]:
    return [(f.name, n, json.loads(line)) for f in FILES
            for n, line in enumerate(f.read_text().splitlines(), 1) if line.strip()]


def test_every_serving_run_has_its_source_and_a_measurement():
    rows = _rows()
    assert len(FILES) >= 10 and len(rows) >= 500
    for name, n, row in rows:
        where = f"{name} line {n}"
        assert all(key in row for key in REQUIRED), f"{where}: missing {[k for k in REQUIRED if k not in row]}"
        assert isinstance(row["source"], str) and row["source"].strip(), where
        assert isinstance(row["quote"], str) and row["quote"].strip(), where
        figures = [v for v in row["measured"].values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        assert figures and all(math.isfinite(v) and v >= 0 for v in figures), where


def test_serving_run_ids_are_unique_across_files():
    ids = [row["id"] for _, _, row in _rows()]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_a_figure_marked_not_compared_is_left_out_with_its_reason():
    import importlib.util

    spec = importlib.util.spec_from_file_location("accuracy_serving", ROOT / "bench" / "accuracy_serving.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = {"measured": {"output_throughput_tok_s": 100.0, "ttft_mean_ms": 75.0, "tpot_median_ms": 10.0},
           "dataset": "random", "output_len": 128}
    assert bench.measured(row) == {"throughput": ("mean", 100.0), "ttft": ("mean", 0.075), "tpot": ("p50", 0.01)}
    assert set(bench.measured({**row, "not_compared": {"ttft": "cache hits"}})) == {"throughput", "tpot"}
    for name, n, data in _rows():
        for metric, reason in (data.get("not_compared") or {}).items():
            assert metric in ("throughput", "ttft", "tpot") and len(reason) > 40, f"{name} line {n}"
