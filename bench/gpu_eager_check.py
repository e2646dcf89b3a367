#!/usr/bin/env python3
"""GPU check of the launch cost of a forward outside a CUDA graph (Efficiency.eager_layer_s: the extra time per layer
of a forward that runs eagerly, core/perf.py `ungraphed_s` / `--enforce-eager`).

Builds a dense decoder stack in plain PyTorch with a model's shapes (random bf16 weights; per layer: residual add,
RMSNorm, fused QKV GEMM, rotary embedding, attention over a KV cache, output GEMM, residual add, RMSNorm, fused
gate/up GEMM, SiLU x up, down GEMM) and times one forward at several token counts twice: launched op by op from
Python (eager) and replayed from a CUDA graph captured once. The difference per layer is what running outside a
graph adds; at one token the GPU waits on the host, so the eager time over the kernels launched gives the host's
cost per kernel. The kernels per layer are counted with torch.profiler. An engine's layer launches fewer kernels
(fused residual-add-RMSNorm, one rotary kernel, one SiLU-and-mul), so the per-kernel figure is the one to carry over.

Needs a CUDA GPU and torch. About a minute. Record the table in docs/validation.md.

Run: .venv/bin/python bench/gpu_eager_check.py [--model meta-llama/Llama-3.1-8B-Instruct] [--context 1024] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from specsize.catalog import load_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_common import cuda_torch, timed  # noqa: E402

TOKENS = (1, 8, 64, 256, 1024)  # one sequence's new tokens (1: a decode step; more: a prompt chunk)


def build(torch, m, device="cuda"):
    """Per-layer weights with the model's shapes, and the rotary tables."""
    h, d, nh, nkv = m.hidden_size, m.head_dim, m.num_attention_heads, m.num_kv_heads

    def w(*shape):
        return torch.randn(*shape, device=device, dtype=torch.bfloat16) * 0.02

    layers = [dict(n1=torch.ones(h, device=device, dtype=torch.bfloat16), qkv=w((nh + 2 * nkv) * d, h),
                   o=w(h, nh * d), n2=torch.ones(h, device=device, dtype=torch.bfloat16),
                   gu=w(2 * m.intermediate_size, h), down=w(h, m.intermediate_size)) for _ in range(m.num_layers)]
    return layers


def forward(torch, m, layers, x, residual, kcache, vcache, cos, sin, context, tokens):
    """One forward of `tokens` new tokens after `context` cached ones (batch 1)."""
    F = torch.nn.functional
    h, d, nh, nkv = m.hidden_size, m.head_dim, m.num_attention_heads, m.num_kv_heads
    for i, p in enumerate(layers):
        residual = x + residual
        xn = F.rms_norm(residual, (h,), p["n1"])
        q, k, v = (xn @ p["qkv"].t()).split([nh * d, nkv * d, nkv * d], dim=-1)
        q = q.view(tokens, nh, d)
        k = k.view(tokens, nkv, d)
        half = d // 2
        q = torch.cat((q[..., :half] * cos - q[..., half:] * sin, q[..., half:] * cos + q[..., :half] * sin), -1)
        k = torch.cat((k[..., :half] * cos - k[..., half:] * sin, k[..., half:] * cos + k[..., :half] * sin), -1)
        kcache[i][context:context + tokens].copy_(k)
        vcache[i][context:context + tokens].copy_(v.view(tokens, nkv, d))
        keys = kcache[i][:context + tokens].transpose(0, 1)
        values = vcache[i][:context + tokens].transpose(0, 1)
        attn = F.scaled_dot_product_attention(q.transpose(0, 1), keys, values, is_causal=tokens > 1 and context == 0,
                                              enable_gqa=True)
        x = attn.transpose(0, 1).reshape(tokens, nh * d) @ p["o"].t()
        residual = x + residual
        xn = F.rms_norm(residual, (h,), p["n2"])
        g, u = (xn @ p["gu"].t()).chunk(2, dim=-1)
        x = (F.silu(g) * u) @ p["down"].t()
    return x, residual


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="meta-llama/Llama-3.1-8B-Instruct")
    ap.add_argument("--context", type=int, default=1024, help="tokens already cached for a decode step")
    ap.add_argument("--json", help="also write the table as JSON")
    args = ap.parse_args()
    torch = cuda_torch("gpu_eager_check")
    if torch is None:
        return 2
    m = load_model(args.model)
    layers = build(torch, m)
    d, nkv, h = m.head_dim, m.num_kv_heads, m.hidden_size
    cap = args.context + max(TOKENS)
    kcache = [torch.zeros(cap, nkv, d, device="cuda", dtype=torch.bfloat16) for _ in layers]
    vcache = [torch.zeros(cap, nkv, d, device="cuda", dtype=torch.bfloat16) for _ in layers]
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}; {args.model}: "
          f"{len(layers)} layers, bf16, batch 1")
    print(f"{'tokens':>6} {'context':>7} {'kernels/layer':>13} {'eager ms':>9} {'graph ms':>9} {'extra us/layer':>15} "
          f"{'eager us/kernel':>16}")
    rows = []
    for tokens in TOKENS:
        context = args.context if tokens == 1 else 0  # a decode step over the cache, or a prompt chunk from scratch
        x = torch.randn(tokens, h, device="cuda", dtype=torch.bfloat16)
        residual = torch.zeros_like(x)
        pos = torch.arange(context, context + tokens, device="cuda", dtype=torch.float32)[:, None, None]
        freq = 1.0 / (500000.0 ** (torch.arange(0, d // 2, device="cuda", dtype=torch.float32) / (d // 2)))
        cos, sin = (pos * freq).cos().to(torch.bfloat16), (pos * freq).sin().to(torch.bfloat16)

        def run():
            return forward(torch, m, layers, x, residual, kcache, vcache, cos, sin, context, tokens)

        for _ in range(3):
            run()
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
        kernels = sum(1 for e in prof.events() if e.device_type.name == "CUDA") / len(layers)
        eager = timed(torch, run)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        graphed = timed(torch, graph.replay)
        del graph
        extra = (eager - graphed) / len(layers)
        per_kernel = eager / (kernels * len(layers))
        rows.append({"tokens": tokens, "context": context, "kernels_per_layer": kernels, "eager_s": eager,
                     "graph_s": graphed, "extra_per_layer_s": extra, "eager_per_kernel_s": per_kernel})
        print(f"{tokens:>6} {context:>7} {kernels:13.1f} {eager * 1e3:9.3f} {graphed * 1e3:9.3f} {extra * 1e6:15.1f} "
              f"{per_kernel * 1e6:16.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "model": args.model,
                       "date": time.strftime("%Y-%m-%d"), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
