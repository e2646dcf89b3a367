#!/usr/bin/env python3
"""GPU check of the sampler term: how many fp32 passes over the logits a sampling step costs (Efficiency.sampler_passes,
priced in core/perf.py as sampler_passes x 4 bytes x vocab per sampled position at the family's memory fraction).

Times, on the GPU, the sampling paths of a serving engine over N positions x a 128,256-token vocabulary in fp32
(Llama 3's): greedy (argmax), random sampling as vLLM V1's sampler draws it without FlashInfer (temperature, softmax,
then the exponential race: probs / Exp(1) noise, argmax), and the same with top-p / top-k through a full sort (the
PyTorch fallback). Each path runs eagerly, as engines run their samplers outside the CUDA graph; the time is the
median of 20 runs (CUDA events). Passes = time x bandwidth x memory fraction / (4 bytes x N x vocab): what the term
would need to price that path.

Needs a CUDA GPU and torch. Under a minute. Record the table in docs/validation.md.

Run: .venv/bin/python bench/gpu_sampler_check.py [--vocab 128256] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_common import cuda_gpu, timed  # noqa: E402
from specsize.core.perf import sampler_s  # noqa: E402

ROWS = (1, 8, 32, 128, 512, 2048)


def paths(torch):
    """name -> function(logits) of each sampling path (logits: N x vocab fp32; returns the sampled ids)."""

    def greedy(logits):
        return logits.argmax(dim=-1)

    def random(logits):
        probs = torch.softmax(logits.div_(0.7), dim=-1)
        q = torch.empty_like(probs).exponential_()
        return probs.div_(q).argmax(dim=-1)

    def top_p_k(logits):
        logits = logits.div_(0.7)
        sorted_logits, order = logits.sort(dim=-1, descending=False)
        top_k = sorted_logits.size(1) - 50
        cutoff = sorted_logits[:, top_k:top_k + 1]
        sorted_logits.masked_fill_(sorted_logits < cutoff, float("-inf"))
        probs = sorted_logits.softmax(dim=-1)
        cumulative = probs.cumsum(dim=-1)
        sorted_logits.masked_fill_(cumulative <= 1 - 0.9, float("-inf"))
        logits = torch.empty_like(logits).scatter_(-1, order, sorted_logits)
        probs = logits.softmax(dim=-1)
        q = torch.empty_like(probs).exponential_()
        return probs.div_(q).argmax(dim=-1)

    return {"greedy": greedy, "random": random, "top_p_k": top_p_k}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--json", help="also write the table as JSON")
    args = ap.parse_args()
    found = cuda_gpu("gpu_sampler_check")
    if found is None:
        return 2
    torch, gpu, eff = found
    name = torch.cuda.get_device_name(0)
    bandwidth = gpu.memory_bandwidth_bytes_s * eff.memory
    print(f"{name} ({gpu.gpu_id}), torch {torch.__version__}, {time.strftime('%Y-%m-%d')}; vocab {args.vocab}, fp32; "
          f"the catalog prices {eff.sampler_passes:g} passes at {bandwidth / 1e12:.2f} TB/s")
    print(f"{'rows':>5} {'path':>8} {'ms':>9} {'passes':>7} {'catalog ms':>11}")
    rows = []
    for n in ROWS:
        base = torch.randn(n, args.vocab, device="cuda", dtype=torch.float32)
        for path, fn in paths(torch).items():
            for _ in range(3):
                fn(base.clone())
            torch.cuda.synchronize()
            seconds = timed(torch, fn, prepare=base.clone)
            one_pass = n * sampler_s(1.0, args.vocab, gpu, eff)  # core/perf's price of one pass over n rows
            catalog = n * sampler_s(eff.sampler_passes, args.vocab, gpu, eff)
            rows.append({"rows": n, "path": path, "seconds": seconds, "passes": seconds / one_pass,
                         "catalog_seconds": catalog})
            print(f"{n:>5} {path:>8} {seconds * 1e3:9.3f} {seconds / one_pass:7.1f} {catalog * 1e3:11.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": name, "catalog_gpu": gpu.gpu_id, "torch": torch.__version__, "vocab": args.vocab,
                       "date": time.strftime("%Y-%m-%d"), "catalog_passes": eff.sampler_passes, "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
