"""Expert parallelism against measured kernels: specsize's routed-expert term split by rows (TP) and by expert (EP).

Reads bench/data/moe_ep_kernels.jsonl (tools/distill_moe_ep.py: one fused-MoE layer timed by NVIDIA's
aiconfigurator-core with vLLM's kernels on H100/H200/B200/A100, for the shapes of Qwen3-30B-A3B, Qwen3-235B-A22B,
Mixtral-8x7B, gpt-oss-120b and DeepSeek-V3, at 1-4,096 tokens, split over 2/4/8 GPUs both ways, with the tables'
power-law token-to-expert distribution (alpha 1.01) and balanced routing) and prices each point with
specsize.core.perf.experts_time (one layer: the whole step's expert term / MoE layers, plus Efficiency.
moe_layer_fixed_s). Nothing here is fitted: the EP term (busiest_rank) has no constant of its own.

Prints, per weight format and split, the median |error| of the TP time, of the EP time and of the EP / TP ratio,
and the share of points where the prediction puts EP on the wrong side of TP (faster where measured slower, by more
than 5% either way).

    .venv/bin/python bench/accuracy_ep.py [--distribution power_law_1.01|balanced] [--verbose]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = ROOT / "bench" / "data" / "moe_ep_kernels.jsonl"
_CO: dict = {}


def quantization(name: str | None):
    from specsize.core.specs import Quantization

    if name in ("fp8", "fp8_block"):  # per-tensor fp8 (ModelOpt) / DeepSeek's 128 x 128 blocks
        return Quantization("fp8", block=(128, 128) if name == "fp8_block" else None)
    if name == "mxfp4":
        return Quantization("mxfp4", experts_only=True)
    return None


def layer_seconds(row: dict, ep: bool) -> float:
    """One MoE layer's routed experts over `row["tokens"]` tokens, split over row["split"] GPUs by rows or expert."""
    from specsize.catalog.gpus import load_efficiency, load_gpu
    from specsize.catalog.models import load_model
    from specsize.core.perf import coefficients, experts_time, model_cost

    key = (row["model"], row["quantization"], row["gpu"], row["split"], ep, row["distribution"])
    if key not in _CO:
        m = load_model(row["model"])
        gpu = load_gpu(row["gpu"])
        eff = load_efficiency(gpu)
        if row["distribution"] == "balanced":
            eff = dataclasses.replace(eff, moe_routing_skew=0.0)
        cost = model_cost(m, row["split"], "bfloat16", quantization(row["quantization"]),
                          ep=row["split"] if ep else 1)
        co = coefficients(cost, gpu, eff, overhead=False)
        _CO[key] = (co, cost.moe_layers, eff.moe_layer_fixed_s)
    co, layers, fixed = _CO[key]
    return experts_time(co, row["tokens"])[0] / layers + fixed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--distribution", default=None, help="only this distribution (default: both)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    if args.distribution:
        rows = [r for r in rows if r["distribution"] == args.distribution]
    groups: dict[tuple, list[tuple[float, float, float, bool]]] = {}
    for r in rows:
        tp, ep = layer_seconds(r, False), layer_seconds(r, True)
        m_tp, m_ep = r["tp_ms"] / 1e3, r["ep_ms"] / 1e3
        ratio_p, ratio_m = ep / tp, m_ep / m_tp
        wrong = (ratio_p > 1.05 and ratio_m < 0.95) or (ratio_p < 0.95 and ratio_m > 1.05)
        e = (tp / m_tp - 1, ep / m_ep - 1, ratio_p / ratio_m - 1, wrong)
        fmt = r["quantization"] or "bf16"
        for k in ((r["distribution"], fmt, r["split"]), (r["distribution"], "all", 0)):
            groups.setdefault(k, []).append(e)
        if args.verbose:
            print(f"{r['model']:38} {fmt:9} {r['gpu']:14} {r['distribution'][:9]:9} x{r['split']} T{r['tokens']:<5} "
                  f"TP {m_tp * 1e3:7.3f}/{tp * 1e3:7.3f} EP {m_ep * 1e3:7.3f}/{ep * 1e3:7.3f} ms  "
                  f"EP/TP {ratio_m:5.2f}/{ratio_p:5.2f}")
    print(f"{'distribution':15} {'format':9} {'split':>5} {'n':>4} {'TP |err|':>9} {'EP |err|':>9} "
          f"{'EP/TP |err|':>12} {'ratio bias':>11} {'wrong side':>11}")
    for key in sorted(groups, key=lambda k: (k[0], k[1] == "all", k[1], k[2])):
        es = groups[key]
        med = [statistics.median(abs(e[i]) for e in es) for i in range(3)]
        bias = statistics.median(e[2] for e in es)
        wrong = sum(e[3] for e in es)
        print(f"{key[0]:15} {key[1]:9} {key[2] or 'all':>5} {len(es):4} {med[0]:9.1%} {med[1]:9.1%} {med[2]:12.1%} "
              f"{bias:+11.1%} {wrong:6d} / {len(es)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
