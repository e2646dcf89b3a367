#!/usr/bin/env python3
"""Speculation on vs off at max_num_seqs 256 (issue #12, part 1): the KV pool vLLM keeps, as specsize predicts it.

The two public cases of issue #12 (n-gram, same flags on and off): Qwen3-8B-FP8 on a 24 GB card, where vLLM's
pool shrank by 25%, and gpt-oss-20b with fp8 KV, by 31%; about 2.0 and 2.6 GiB more than specsize predicts.
The off-pool depends on the start-up's card and flags, which the issue does not give in full, so the
last column, what a term shrinks the pool by beyond one row-set, is the figure to hold against 2.0 / 2.6 GiB.
Each case is planned with three speculation terms: one fp32 row-set (what specsize counted before), the
profiled rejection sampler measured on vLLM's own code (tools/measure_sampler_peak.py, top-k/top-p in place as
on CUDA; docs/accounting.md) with d = 1 dummy draft token, as 0.32's V1 runner drafts, and with d = k, what the
shipped V1 profiles reserve (3.5 d + 0.5 row-sets per sequence; engines/vllm.py says why).

Run: .venv/bin/python bench/spec_profile_cases.py [--k 4] [--gpus L4-24GB RTX-4090-24GB]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from specsize.catalog import load_model
from specsize.catalog.gpus import load_gpu
from specsize.core.memory import account
from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig
from specsize.core.units import GiB
from specsize.engines import resolve_profile

# (model, quantization override, kv cache dtype, printed change in KV when speculation is switched on)
CASES = (("Qwen/Qwen3-8B", "fp8", "auto", -0.25), ("openai/gpt-oss-20b", None, "fp8", -0.31))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-num-seqs", type=int, default=256)
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--gpus", nargs="+", default=["RTX-4090-24GB", "L4-24GB"])
    a = ap.parse_args()
    shipped = resolve_profile("vllm", "0.32")
    profiles = (("one row-set (specsize before)", replace(shipped, spec_profile_k_aware=False,
                                                          spec_profile_base_coef=0.0, spec_profile_vocab_coef=1.0)),
                ("one draft token (4.0)", replace(shipped, spec_profile_k_aware=False)),
                ("k drafts (3.5k+0.5), shipped", shipped))
    print(f"n-gram k={a.k}, max_num_seqs {a.max_num_seqs}, max_model_len {a.max_model_len}; vLLM 0.32 profile")
    print(f"{'case':34s} {'gpu':14s} {'speculation term':30s} {'KV off GiB':>10s} {'KV on GiB':>10s} "
          f"{'change':>8s} {'printed':>8s} {'GiB beyond 1 set':>19s}")
    for model, quant, kv, printed in CASES:
        target = load_model(model)
        for gpu in a.gpus:
            es = EngineSettings(max_num_seqs=a.max_num_seqs, kv_cache_dtype=kv, quantization=quant,
                                max_model_len=a.max_model_len)
            g = load_gpu(gpu)
            shrink_shipped = None
            for label, p in profiles:
                off = account(Deployment(target=target, gpu=g, engine=es), p).kv_cache_bytes
                on = account(Deployment(target=target, gpu=g, engine=es,
                                        speculative=SpeculativeConfig("ngram", None, a.k)), p).kv_cache_bytes
                shrink_shipped = off - on if shrink_shipped is None else shrink_shipped
                name = f"{model}{' (' + quant + ')' if quant else ''}{', kv ' + kv if kv != 'auto' else ''}"
                print(f"{name:34s} {gpu:14s} {label:30s} {off / GiB:10.2f} {on / GiB:10.2f} "
                      f"{100 * (on / off - 1):+7.1f}% {100 * printed:+7.0f}% {(off - on - shrink_shipped) / GiB:19.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
