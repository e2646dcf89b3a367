#!/usr/bin/env python3
"""GPU check of the step model's dense GEMM term: the weight GEMMs of a forward (every layer's QKV, output, gate/up
and down projections) timed on this GPU at several token counts, against what specsize.core.perf prices for them.

The model prices a forward's dense GEMMs as one roofline over all of them with a compute efficiency that falls at
few tokens, plus a fixed cost per GEMM kernel (core/perf.py: gemm_time over ModelCost.dense_bytes,
`memory`, `compute`, `gemm_half_tokens`, `gemm_fixed_s` of the GPU's family in catalog/data/efficiency.json). Here
each layer has its own weights (so nothing stays in L2 between layers), the layers' GEMMs are captured in one CUDA
graph (no launch cost from the host) and replayed; the time is the median of the replays (CUDA events). Attention,
norms, the LM head and the all-reduce are not in it: the term checked is the GEMMs' alone.

Needs a CUDA GPU with ~20 GiB free and torch. About a minute on an H100/H200. Record the table in docs/validation.md.

Run: .venv/bin/python bench/gpu_gemm_check.py [--model meta-llama/Llama-3.1-8B-Instruct] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from specsize.catalog import load_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_common import cuda_gpu, timed  # noqa: E402

TOKENS = (1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
TOKENS_FP8 = TOKENS[2:]  # torch._scaled_mm takes row counts in multiples of 16


def layer_shapes(m, tp: int = 1) -> list[tuple[int, int]]:
    """(in, out) of one decoder layer's weight GEMMs on one of `tp` GPUs: fused QKV and gate/up split by their
    outputs (column parallel), the output and down projections by their inputs (row parallel)."""
    h, d = m.hidden_size, m.head_dim
    return [(h, (m.num_attention_heads + 2 * m.num_kv_heads) * d // tp), (m.num_attention_heads * d // tp, h),
            (h, 2 * m.intermediate_size // tp), (m.intermediate_size // tp, h)]


def predicted_s(m, shapes, tp: int, tokens: int, gpu, eff, fp8: bool = False) -> float:
    """The step model's price for these GEMMs, asked of core/perf: gemm_time over their weight bytes and flops with
    the coefficients core/perf.coefficients gives this model, TP and dtype on this GPU (memory fraction, the bf16 or
    FP8 peak times `compute`, gemm_half_tokens), plus the fixed cost it charges per GEMM kernel (fixed_s: a dense
    model's four GEMMs per layer times gemm_fixed_s)."""
    from specsize.core.perf import coefficients, gemm_time, model_cost
    from specsize.core.specs import quantization_override

    co = coefficients(model_cost(m, tp, "bfloat16", quantization_override("fp8" if fp8 else None, m)), gpu, eff)
    params = m.num_layers * sum(i * o for i, o in shapes)
    weight_bytes = (1.0 if fp8 else 2.0) * params
    return gemm_time(weight_bytes, 2.0 * tokens * params, tokens, co, co.inv_bandwidth, co.half_tokens) + co.fixed_s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="meta-llama/Llama-3.1-8B-Instruct")
    ap.add_argument("--json", help="also write the table as JSON")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--tp", type=int, default=1, help="time one GPU's shard of a tensor-parallel forward")
    ap.add_argument("--fp8", action="store_true",
                    help="FP8 (e4m3) weights and activations through torch._scaled_mm, per-tensor scales, bf16 out")
    ap.add_argument("--interleave", action="store_true",
                    help="an element-wise kernel (the activation scaled in place) between the GEMMs, as the norms, "
                         "rotary and activation kernels sit between them in a real forward")
    args = ap.parse_args()
    if args.fp8 and args.interleave:
        ap.error("--interleave scales bf16 activations in place: not with --fp8")
    found = cuda_gpu("gpu_gemm_check")
    if found is None:
        return 2
    torch, gpu, eff = found
    name = torch.cuda.get_device_name(0)
    m = load_model(args.model)
    shapes, layers = layer_shapes(m, args.tp), m.num_layers
    dtype = torch.float8_e4m3fn if args.fp8 else torch.bfloat16
    weights = [[(torch.randn(o, i, device="cuda", dtype=torch.bfloat16) * 0.02).to(dtype) for i, o in shapes]
               for _ in range(layers)]
    one = torch.ones((), device="cuda", dtype=torch.float32)

    def gemm(a, w):
        if args.fp8:
            return torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return torch.matmul(a, w.t())

    print(f"{name} ({gpu.gpu_id}, family {gpu.family}), torch {torch.__version__}, {time.strftime('%Y-%m-%d')}; "
          f"{args.model} TP {args.tp}: {layers} layers x {len(shapes)} GEMMs, {'fp8 (e4m3)' if args.fp8 else 'bf16'}"
          + (", an element-wise kernel after each" if args.interleave else ""))
    print(f"{'tokens':>6} {'measured ms':>12} {'predicted ms':>13} {'error':>8} {'TFLOP/s':>8} {'TB/s':>6}")
    rows = []
    for tokens in TOKENS_FP8 if args.fp8 else TOKENS:
        x = {i: torch.randn(tokens, i, device="cuda", dtype=torch.bfloat16).to(dtype) for i, _ in shapes}

        def forward(x=x):
            for layer in weights:
                for (i, _), w in zip(shapes, layer):
                    gemm(x[i], w)
                    if args.interleave:
                        x[i].mul_(1.0)

        forward()  # warm-up: cuBLAS picks its kernels
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            forward()
        graph.replay()
        torch.cuda.synchronize()
        measured = timed(torch, graph.replay, args.replays)
        predicted = predicted_s(m, shapes, args.tp, tokens, gpu, eff, args.fp8)
        flops = 2.0 * tokens * layers * sum(i * o for i, o in shapes)
        weight_bytes = (1.0 if args.fp8 else 2.0) * layers * sum(i * o for i, o in shapes)
        row = {"tokens": tokens, "measured_s": measured, "predicted_s": predicted, "error": predicted / measured - 1,
               "tflops": flops / measured / 1e12, "weight_tb_s": weight_bytes / measured / 1e12}
        rows.append(row)
        print(f"{tokens:>6} {measured * 1e3:12.3f} {predicted * 1e3:13.3f} {row['error']:+8.1%} {row['tflops']:8.0f} "
              f"{row['weight_tb_s']:6.2f}")
        del graph
    errors = [abs(r["error"]) for r in rows]
    print(f"median |error| {statistics.median(errors):.1%}, max {max(errors):.1%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": name, "catalog_gpu": gpu.gpu_id, "torch": torch.__version__, "model": args.model,
                       "tp": args.tp, "interleave": args.interleave, "fp8": args.fp8,
                       "date": time.strftime("%Y-%m-%d"), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
