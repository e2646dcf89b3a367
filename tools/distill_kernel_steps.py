#!/usr/bin/env python3
"""Distil measured kernel times into step times specsize's step model is fitted on (issue #11, part 1).

NVIDIA's aiconfigurator-core ships per-operation latency tables measured on real GPUs with vLLM's own kernels
(GEMM by M x N x K and dtype, FlashAttention decode by batch x context x heads, context attention, fused MoE,
vLLM's custom all-reduce by message size and TP). Its engine sums those operations into one forward pass. This
script asks it, for a grid of models x GPUs x TP x batch x context, for the GPU time of a decode step, a prefill
and a mixed (chunked-prefill) step, and writes one JSON line per point to bench/data/kernel_steps.jsonl.

The tables are data measured by NVIDIA (Apache-2.0); the rows written here carry their source (package, version,
system, backend, kernel version). No CPU, scheduler, sampler or API-server time is in them: specsize adds those
itself. Run in an environment with `pip install aiconfigurator==0.12.0` (590 MB with pandas, pyarrow, scipy; not a
dependency of specsize):

    python tools/distill_kernel_steps.py > bench/data/kernel_steps.jsonl
"""

from __future__ import annotations

import json
import logging
import sys

logging.disable(logging.CRITICAL)

# (specsize catalog id, aiconfigurator model id, quantization, [TP degrees])
MODELS = [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B", None, [1, 2]),
    ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B", None, [2, 4, 8]),
    ("meta-llama/Llama-3.1-70B-Instruct", "nvidia/Llama-3.1-70B-Instruct-FP8", "fp8", [1, 2, 4, 8]),
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B", None, [1]),
    ("Qwen/Qwen3-32B", "Qwen/Qwen3-32B", None, [1, 2, 4]),
    ("Qwen/Qwen3-32B", "Qwen/Qwen3-32B-FP8", "fp8", [1, 2]),
    ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B", None, [1, 2]),
    ("Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B-FP8", "fp8", [4, 8]),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-v0.1", None, [2, 4]),
    ("openai/gpt-oss-20b", "openai/gpt-oss-20b", None, [1]),
    ("openai/gpt-oss-120b", "openai/gpt-oss-120b", None, [1, 2, 4, 8]),
]
SYSTEMS = {"h100_sxm": "H100-SXM-80GB", "h200_sxm": "H200-141GB", "a100_sxm": "A100-80GB", "b200_sxm": "B200-180GB",
           "l40s": "L40S-48GB"}
BATCHES = (1, 4, 16, 64, 128, 256, 512)
CONTEXTS = (256, 2048, 8192)
PROMPTS = (128, 512, 2048, 8192)
MIXED = ((2048, 16), (2048, 128), (512, 64), (1024, 256))  # (prompt-chunk tokens, decoding sequences)


def main() -> int:
    import aiconfigurator_core
    from aiconfigurator_core.sdk.engine import EngineHandle

    version = getattr(aiconfigurator_core, "__version__", "0.12.0")
    written = 0
    for ours, theirs, quant, tps in MODELS:
        for system, gpu in SYSTEMS.items():
            for tp in tps:
                try:
                    h = EngineHandle.compile(theirs, system, "vllm", tp_size=tp, moe_tp_size=tp)  # vLLM: experts sharded by TP
                except Exception as err:  # noqa: BLE001 - a model the tables do not cover on this system
                    print(f"skip {theirs} {system} tp{tp}: {str(err)[:80]}", file=sys.stderr)
                    continue
                base = {"model": ours, "aic_model": theirs, "quantization": quant, "gpu": gpu, "tp": tp,
                        "source": f"aiconfigurator-core {version} (PyPI, Apache-2.0) systems/data/{system}/*/vllm: "
                                  "per-operation latencies measured by NVIDIA with vLLM's kernels, summed by its "
                                  "EngineHandle"}
                points: list[dict] = []
                try:
                    _grid(h, points)
                except Exception as err:  # noqa: BLE001 - e.g. fp8 weights on a GPU without fp8 tensor cores
                    print(f"skip {theirs} {system} tp{tp}: {str(err)[:80]}", file=sys.stderr)
                    continue
                for point in points:
                    if point["ms"] and point["ms"] > 0:
                        print(json.dumps({**base, **point}))
                        written += 1
    print(f"{written} points", file=sys.stderr)
    return 0


def _grid(h, points: list[dict]) -> None:
    for b in BATCHES:
        for ctx in CONTEXTS:
            points.append({"kind": "decode", "batch": b, "context": ctx,
                           "ms": h.decode_step_latency(b, ctx, 2)})
    for p in PROMPTS:
        points.append({"kind": "prefill", "batch": 1, "prompt": p, "ms": h.predict_prefill_latency(1, p)})
    for chunk, gen in MIXED:
        points.append({"kind": "mixed", "chunk": chunk, "batch": gen, "context": 2048,
                       "ms": h.mixed_step_latency(chunk, gen, 2048, 256)})


if __name__ == "__main__":
    sys.exit(main())
