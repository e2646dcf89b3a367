"""Time vLLM V1's own n-gram proposer over batch and history length: host seconds per sequence and step.

Needs the engine environment (python3 dev.py engine-env: vLLM 0.32's CPU build) and a tiny target model
(tests/engine/tiny_models.py). Run:

    .venv-engine/bin/python tests/engine/tiny_models.py /tmp/tiny
    .venv-engine/bin/python bench/ngram_scan_cost.py /tmp/tiny/target

It starts an in-process engine with `--speculative-config '{"method": "ngram", ...}'`, takes the engine's own
proposer and times its `propose` on random histories (no suffix matches: the scan runs through the whole history, the
lookup's worst case) of 1k-64k tokens at batch 16 / 64 / 128, and prints one JSON row per point and the least-squares
line per sequence (fixed seconds + seconds per history token). The per-token slope is what
engines/vllm.py V1_NGRAM_SCAN_PER_TOKEN_S prices, on the serving host's CPU (vllm-project/vllm PR 56732).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(model: str) -> int:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process: its proposer is reachable
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"  # histories beyond the tiny model's 4,096 positions (no forward)
    import numpy as np
    from vllm import LLM

    llm = LLM(model=model, dtype="bfloat16", max_num_seqs=128, max_model_len=131072, max_num_batched_tokens=16384,
              enforce_eager=True, speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                                      "prompt_lookup_min": 2, "prompt_lookup_max": 4})
    proposer = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner.drafter
    rng = np.random.default_rng(0)
    points = []
    for context in (1000, 4000, 16000, 64000):
        for batch in (16, 64, 128):
            tokens = rng.integers(3, 512, size=(batch, context + 8), dtype=np.int32)
            lengths = np.full(batch, context, dtype=np.int32)
            sampled = [[int(tokens[i, context - 1])] for i in range(batch)]
            proposer.propose(3, sampled, lengths, tokens)  # warm
            repeats = max(3, int(2e6 / (batch * context)))
            start = time.perf_counter()
            for _ in range(repeats):
                proposer.propose(3, sampled, lengths, tokens)
            per_seq = (time.perf_counter() - start) / repeats / batch
            points.append((context, per_seq))
            print(json.dumps({"context": context, "batch": batch, "per_seq_s": per_seq}))
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points])
    slope, fixed = np.polyfit(x, y, 1)
    print(json.dumps({"fit": "per_seq_s = fixed + per_token x context", "fixed_s": fixed, "per_token_s": slope,
                      "cpus": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tiny/target"))
