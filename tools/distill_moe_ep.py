#!/usr/bin/env python3
"""Distil measured fused-MoE kernel times with the experts split by rows (TP) and by expert (EP) into
bench/data/moe_ep_kernels.jsonl, which bench/accuracy_ep.py checks specsize's expert-parallel step term against.

NVIDIA's aiconfigurator-core ships per-operation latency tables measured on real GPUs with vLLM's own kernels; its
fused-MoE table (systems/data/<gpu>/moe/vllm/<version>/moe_perf.parquet) times one MoE layer for a number of tokens,
a shape (hidden, expert intermediate, top-k, experts), a weight format and a token-to-expert distribution
("balanced", or power laws "power_law_1.01" / "power_law_1.2"), at moe_tp_size x moe_ep_size splits. This script
keeps, for the shapes of catalog models, the pairs (moe_tp_size = N, moe_ep_size = 1) and (1, N): the same layer
split by rows and by expert over N GPUs. The tables are data measured by NVIDIA (Apache-2.0); each row carries its
source. Run where pandas and pyarrow are installed (not dependencies of specsize), from the unpacked wheel:

    pip download aiconfigurator-core==0.12.0 --no-deps -d /tmp/aic && unzip -q /tmp/aic/*.whl -d /tmp/aic/x
    python tools/distill_moe_ep.py /tmp/aic/x/aiconfigurator_core > bench/data/moe_ep_kernels.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# (catalog id, quantization as specsize names it, aiconfigurator moe_dtype, hidden, expert intermediate, top-k, experts)
SHAPES = [
    ("Qwen/Qwen3-30B-A3B", None, "bfloat16", 2048, 768, 8, 128),
    ("Qwen/Qwen3-30B-A3B", "fp8", "fp8", 2048, 768, 8, 128),
    ("Qwen/Qwen3-235B-A22B", None, "bfloat16", 4096, 1536, 8, 128),
    ("Qwen/Qwen3-235B-A22B", "fp8", "fp8", 4096, 1536, 8, 128),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", None, "bfloat16", 4096, 14336, 2, 8),
    ("openai/gpt-oss-120b", "mxfp4", "w4a16_mxfp4", 2880, 2880, 4, 128),
    ("deepseek-ai/DeepSeek-V3", "fp8_block", "fp8_block", 7168, 2048, 8, 256),
]
SYSTEMS = {"h100_sxm": ("H100-SXM-80GB", "0.24.0"), "h200_sxm": ("H200-141GB", "0.24.0"),
           "b200_sxm": ("B200-180GB", "0.24.0"), "a100_sxm": ("A100-80GB", "0.14.0")}
TOKENS = (1, 4, 16, 64, 256, 1024, 4096)
SPLITS = (2, 4, 8)
DISTRIBUTIONS = ("power_law_1.01", "balanced")


def main() -> int:
    import pandas as pd

    root = Path(sys.argv[1])
    version = "0.12.0"
    written = 0
    for system, (gpu, vllm) in SYSTEMS.items():
        path = root / "systems" / "data" / system / "moe" / "vllm" / vllm / "moe_perf.parquet"
        if not path.exists():
            print(f"skip {system}: no {path}", file=sys.stderr)
            continue
        df = pd.read_parquet(path)
        for model, quant, dtype, hidden, inter, topk, experts in SHAPES:
            shape = df[(df.moe_dtype == dtype) & (df.hidden_size == hidden) & (df.inter_size == inter)
                       & (df.topk == topk) & (df.num_experts == experts)]
            for dist in DISTRIBUTIONS:
                rows = shape[shape.distribution == dist]
                for n in SPLITS:
                    # the fastest kernel the table has for each split (vLLM picks its kernel by format and GPU)
                    tp = rows[(rows.moe_tp_size == n) & (rows.moe_ep_size == 1)].groupby("num_tokens").latency.min()
                    ep = rows[(rows.moe_tp_size == 1) & (rows.moe_ep_size == n)].groupby("num_tokens").latency.min()
                    for tokens in TOKENS:
                        if tokens not in tp.index or tokens not in ep.index:
                            continue
                        print(json.dumps({
                            "model": model, "quantization": quant, "gpu": gpu, "split": n, "tokens": tokens,
                            "distribution": dist, "tp_ms": round(float(tp[tokens]), 5),
                            "ep_ms": round(float(ep[tokens]), 5),
                            "source": f"aiconfigurator-core {version} (PyPI, Apache-2.0) systems/data/{system}/moe/"
                                      f"vllm/{vllm}/moe_perf.parquet: moe_dtype {dtype}, hidden {hidden}, inter "
                                      f"{inter}, topk {topk}, experts {experts}; the fastest kernel_source per split"}))
                        written += 1
    print(f"{written} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
