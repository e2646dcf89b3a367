"""SGLang's printed KV pool (#tokens) against specsize's SGLang accounting, on the published start-up logs in
tests/fixtures/sglang/startup_logs.jsonl. Two columns of error:

- mechanism: SGLang's own figures (free memory before loading and the weights' "mem usage", where the log
  prints them) through the pool formula -- checks the formula;
- prediction: specsize from the model, GPU and flags alone -- what a plan would say before the server runs.

    python bench/accuracy_sglang.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from specsize.api import plan  # noqa: E402
from specsize.core.kvcache import bytes_per_token  # noqa: E402

GiB = 1 << 30
WORKLOAD = dict(prompt_tokens="p50=1000,p95=2000,p99=4000,max=8000",
                output_tokens="p50=200,p95=400,p99=800,max=1000", concurrency=8)


def rows() -> list[dict]:
    path = ROOT / "tests" / "fixtures" / "sglang" / "startup_logs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def predict(row: dict):
    overrides = dict(target=row["target_model"], gpu=row["gpu_model"], tp=row["tensor_parallel_size"], engine="sglang",
                     engine_version=row["engine_version"], gpu_memory_utilization=row["mem_fraction_static"], **WORKLOAD)
    if row.get("quantization"):
        overrides["quantization"] = row["quantization"]
    return plan(**overrides).memory


def mechanism_tokens(row: dict, cell: int) -> int | None:
    """SGLang's pool from its own printed figures: f x free_before - weights, in whole tokens."""
    if row.get("free_before_loading_gib") is None or row.get("weights_gib") is None:
        return None
    rest = row["mem_fraction_static"] * row["free_before_loading_gib"] - row["weights_gib"]
    return int(rest * GiB) // cell


def main() -> None:
    print(f"{'row':44} {'printed':>10} {'mechanism':>10} {'err':>8} {'predicted':>10} {'err':>8}")
    for row in rows():
        if not row.get("target_model") or row.get("mem_fraction_static") is None or not row.get("kv_cache_tokens"):
            continue  # rows kept for the reader and the formula only (a refusal, an unnamed model)
        mem = predict(row)
        cell = bytes_per_token(mem.kv_layers, "target")
        printed = row["kv_cache_tokens"]
        mech = mechanism_tokens(row, cell)
        mech_text = f"{mech:>10,} {mech / printed - 1:>+8.3%}" if mech else f"{'-':>10} {'-':>8}"
        print(f"{row['id']:44} {printed:>10,} {mech_text} {mem.kv_cache_tokens:>10,} "
              f"{mem.kv_cache_tokens / printed - 1:>+8.2%}")


if __name__ == "__main__":
    main()
