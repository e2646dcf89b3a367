#!/usr/bin/env python3
"""How well specsize's step model (GPU part) matches measured kernel times, and the per-family fit of its terms.

Reads bench/data/kernel_steps.jsonl (tools/distill_kernel_steps.py: decode steps, prefills and mixed steps of
Llama-3.1 8B/70B, Qwen3 8B/32B/30B-A3B/235B-A22B and gpt-oss on H100/H200/A100/B200/L40S, summed from per-operation
latencies measured with vLLM's kernels by NVIDIA's aiconfigurator-core) and prices every point with
specsize.core.perf (no CPU, scheduler, sampler or API-server terms: the tables have none). Prints the median
|error| per GPU and kind, split by model: the held-out models (Qwen3-32B, gpt-oss-120b) never enter the fit.

    .venv/bin/python bench/fit_kernels.py            # the catalog's efficiencies against the points
    .venv/bin/python bench/fit_kernels.py --fit      # coordinate search of the GPU terms per family
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = ROOT / "bench" / "data" / "kernel_steps.jsonl"
HELD_OUT = ("Qwen/Qwen3-32B", "openai/gpt-oss-120b")
TERMS = ("memory", "compute", "gemm_half_tokens", "gemm_fixed_s", "attn_memory", "attn_compute", "moe_memory",
         "moe_fp8_memory", "moe_layer_fixed_s", "low_bit_memory", "allreduce_latency_s",
         "allreduce_bus_fraction")
# terms a family's kernel points cannot pin, set by the serving fit instead (bench/fit_serving.py; the reason is in
# that family's source in efficiency.json): the kernel fit neither moves nor writes them
SET_BY_SERVING = {"blackwell": ("moe_layer_fixed_s",)}


def kernel_terms(family: str) -> tuple[str, ...]:
    """The terms the kernel fit sets for `family`."""
    return tuple(t for t in TERMS if t not in SET_BY_SERVING.get(family, ()))


def load_points() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


_COSTS: dict = {}


def model_costs(row: dict):
    from specsize.catalog.gpus import load_gpu
    from specsize.catalog.models import load_model
    from specsize.core.perf import model_cost
    from specsize.core.specs import Quantization

    key = (row["model"], row["quantization"], row["gpu"], row["tp"])
    if key not in _COSTS:
        m = load_model(row["model"])
        q = Quantization("fp8", block=(128, 128)) if row["quantization"] == "fp8" else None
        _COSTS[key] = (model_cost(m, row["tp"], "bfloat16", q), load_gpu(row["gpu"]))
    return _COSTS[key]


def predict(row: dict, eff) -> float:
    """Seconds of GPU time of the point's step, as specsize prices it without CPU or sampler terms."""
    from specsize.core.perf import coefficients, step_time, uniform_step

    cost, gpu = model_costs(row)
    co = coefficients(cost, gpu, dataclasses.replace(eff, sampler_passes=0.0), overhead=False)
    if row["kind"] == "decode":
        return uniform_step(co, row["batch"], 1, row["context"]).time_s
    if row["kind"] == "prefill":
        p = row["prompt"]
        return uniform_step(co, 1, p, p // 2, prompt=True).time_s
    # mixed: one prompt chunk (its own causal context) beside `batch` decoding sequences of `context` tokens
    chunk, b, ctx = row["chunk"], row["batch"], row["context"]
    windows = tuple(b * min(ctx, w) + min(chunk, w) for w, _ in co.kv_windows)
    return step_time(co, chunk + b, b * ctx + chunk, windows, b * ctx + chunk * chunk // 2, seqs=b + 1,
                     prompt_pairs=chunk * chunk // 2)[0]


def errors(points: list[dict], effs: dict) -> list[tuple[dict, float]]:
    from specsize.catalog.gpus import load_gpu

    out = []
    for row in points:
        if row["kind"] == "mixed" and row["chunk"] > row["context"]:
            continue  # a chunk longer than the prompt it belongs to (the tables cap its attention at the prompt)
        family = load_gpu(row["gpu"]).family
        out.append((row, math.log(predict(row, effs[family]) / (row["ms"] / 1e3))))
    return out


def table(errs: list[tuple[dict, float]]) -> None:
    groups: dict[tuple, list[float]] = {}
    for row, e in errs:
        part = "held out" if row["model"] in HELD_OUT else "fit"
        groups.setdefault((part, row["gpu"], row["kind"]), []).append(e)
        groups.setdefault((part, "all", "all"), []).append(e)
    print(f"{'slice':9} {'GPU':14} {'kind':8} {'n':>4} {'median |err|':>13} {'bias':>7}")
    for key in sorted(groups):
        es = [math.exp(e) - 1 for e in groups[key]]
        print(f"{key[0]:9} {key[1]:14} {key[2]:8} {len(es):4} {statistics.median(abs(e) for e in es):13.1%} "
              f"{statistics.median(es):+7.1%}")


def fit(points: list[dict], effs: dict) -> dict:
    from specsize.catalog.gpus import load_gpu

    fitted = dict(effs)
    by_family: dict[str, list[dict]] = {}
    for row in points:
        if row["model"] not in HELD_OUT:
            by_family.setdefault(load_gpu(row["gpu"]).family, []).append(row)
    for family, rows in by_family.items():
        eff = fitted[family]

        def score(e) -> float:
            return statistics.mean(abs(math.log(predict(r, e) / (r["ms"] / 1e3))) for r in rows)

        best = score(eff)
        for _ in range(4):
            for term in kernel_terms(family):
                current = getattr(eff, term)
                for factor in (0.5, 0.7, 0.85, 0.93, 1.07, 1.18, 1.4, 2.0):
                    value = current * factor if current else (1e-6 if term.endswith("_s") else 0.5) * factor
                    if not term.endswith("_s") and term != "gemm_half_tokens" and value > 0.98:
                        continue
                    trial = dataclasses.replace(eff, **{term: value})
                    s = score(trial)
                    if s < best - 1e-5:
                        best, eff = s, trial
        fitted[family] = eff
        print(f"{family}: mean |log err| {best:.4f} over {len(rows)} points; "
              + ", ".join(f"{t} {getattr(eff, t):.4g}" for t in kernel_terms(family)))
    return fitted


KERNEL_SOURCE = ("GPU terms ({terms}) fitted by bench/fit_kernels.py to bench/data/kernel_steps.jsonl: decode, prefill "
                 "and mixed steps summed from per-operation latencies measured with vLLM 0.24.0's kernels (0.14.0 on "
                 "the A100) in NVIDIA's aiconfigurator-core 0.12.0 tables (PyPI, systems/data/<gpu>/*/vllm; "
                 "tools/distill_kernel_steps.py); Llama-3.1 8B/70B, Qwen3 8B/30B-A3B/235B-A22B and gpt-oss-20b "
                 "fitted, Qwen3-32B and gpt-oss-120b held out; median |error| of the step times in the bench")


def write(fitted: dict) -> None:
    path = ROOT / "src" / "specsize" / "catalog" / "data" / "efficiency.json"
    doc = json.loads(path.read_text())
    for family, eff in fitted.items():
        row = doc["families"][family]
        terms = kernel_terms(family)
        for term in terms:
            value = getattr(eff, term)
            row[term] = float(f"{value:.3g}")
        # one kernel-fit sentence per row: an earlier fit's is replaced, not stacked
        older = [part for part in row["source"].split(" | ") if not part.startswith("GPU terms (")]
        row["source"] = " | ".join([KERNEL_SOURCE.format(terms=", ".join(terms)), *older])
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")


def main() -> int:
    from specsize.catalog.gpus import load_efficiency, load_gpu

    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--write", action="store_true", help="write the fitted terms into catalog/data/efficiency.json")
    args = ap.parse_args()
    points = load_points()
    effs = {}
    for row in points:
        gpu = load_gpu(row["gpu"])
        effs.setdefault(gpu.family, load_efficiency(gpu))
    print("the catalog's efficiencies against the measured kernel sums:")
    table(errors(points, effs))
    if args.fit:
        fitted = fit(points, effs)
        print("\nafter the fit (held-out models never entered it):")
        table(errors(points, fitted))
        if args.write:
            write(fitted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
