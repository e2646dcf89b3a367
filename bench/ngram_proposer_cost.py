#!/usr/bin/env python3
"""The host time of vLLM V0's n-gram proposer per sequence and step (AccountingProfile.ngram_proposer_per_seq_s).

vLLM V0's NGramWorker (vllm/spec_decode/ngram_worker.py) proposes for one sequence at a time from Python: it turns the
sequence's token list into a tensor, and for each n-gram size from prompt_lookup_max down compares the last n tokens
with every window of the history, reads the first match back to the host (`.item()`), and on a match gathers the k
tokens after it and builds their one-hot probabilities over the vocabulary and a zero logprob row-set. Before vLLM PR
9333 (merged for 0.6.4) all of it ran on the GPU: each of those small operations is a kernel launched from the host
and each `.item()` a device sync; from 0.6.4 histories under 3,072 tokens are matched on the CPU and only a match goes
to the GPU.

This script replays that sequence of tensor operations (written here from the description above, not vLLM's code)
with PyTorch on the CPU, where there is no GPU to launch on: it measures the host's share (list-to-tensor conversion,
the operator dispatch of every call) with a vocabulary of 128 tokens, so the one-hot and zero row-sets, GPU work in
the engine, cost nothing here. It then adds, per operation the GPU path launches, a kernel launch, and per `.item()`
and the host-to-device copy of the history, a synchronising round trip (--launch-us, --sync-us), and prints the
per-sequence cost of both releases' paths. Needs torch (`pip install torch`).

Run: .venv/bin/python bench/ngram_proposer_cost.py [--history 1090] [--k 4] [--max-n 4]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time


def propose(torch, ids_list: list[int], k: int, max_n: int, min_n: int, vocab: int):
    """One sequence's prompt lookup, operation by operation; returns (kernels, syncs) a GPU would have issued."""
    ids = torch.as_tensor(ids_list, dtype=torch.long)
    kernels, syncs = 0, 1  # the history's host-to-device copy waits for the copy
    for n in range(min(max_n, len(ids_list) - 1), min_n - 1, -1):
        tail = ids[-n:]
        if n == 1:
            hit = ids[:-1] == tail
            kernels += 1
        else:
            hit = (ids.unfold(0, n, 1)[:-1] == tail).all(dim=-1)
            kernels += 2
        first = hit.max(dim=-1)
        kernels += 1
        syncs += 1
        if first.values.item():
            start = first.indices + n
            index = start.repeat(k) + torch.arange(k)
            index.clamp_(max=len(ids_list) - 1)
            tokens = ids.gather(-1, index)
            probs = torch.nn.functional.one_hot(tokens, num_classes=vocab).to(torch.float32)
            kernels += 8  # add, repeat, arange, add, clamp, gather, one-hot (fill + scatter), cast
            del probs
            break
    torch.zeros((k, vocab), dtype=torch.float32)  # the proposal's logprob row-set
    kernels += 1
    return kernels, syncs


VOCAB = 128  # small, so the one-hot and zero row-sets (GPU work in the engine) cost the host nothing here


def history(length: int, repeat_from: int | None, rng: random.Random) -> list[int]:
    """A token history whose last 4 tokens occur earlier (repeat_from: where), or nowhere (None)."""
    ids = [rng.randrange(0, VOCAB - 1) for _ in range(length)]
    if repeat_from is not None:
        ids[-4:] = ids[repeat_from:repeat_from + 4]
    else:
        ids[-1] = VOCAB - 1  # a token seen nowhere before: no n-gram of any size matches
    return ids


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--history", type=int, default=1090, help="tokens of prompt + output so far (default: CNN/DM's)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-n", type=int, default=4)
    ap.add_argument("--min-n", type=int, default=1)
    ap.add_argument("--launch-us", type=float, default=5.0, help="host cost of one CUDA kernel launch")
    ap.add_argument("--sync-us", type=float, default=15.0, help="one device-to-host (or blocking copy) round trip")
    ap.add_argument("--repeats", type=int, default=2000)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:  # `python3 dev.py test` installs it; skipped, as the tests that need it are
        print("ngram_proposer_cost.py: skipped: needs PyTorch (pip install torch)", file=sys.stderr)
        return 0

    torch.set_num_threads(1)
    rng = random.Random(0)
    print(f"history {args.history} tokens, k = {args.k}, n-gram sizes {args.max_n}..{args.min_n}, torch "
          f"{torch.__version__} on the CPU; GPU path: +{args.launch_us:g} us per kernel, +{args.sync_us:g} us per sync")
    print(f"{'case':34} {'host us':>8} {'kernels':>8} {'syncs':>6} {'GPU path us':>12}")
    for label, where in (("match at the largest n-gram", args.history // 3), ("no match at any size", None)):
        ids = history(args.history, where, rng)
        samples = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            kernels, syncs = propose(torch, ids, args.k, args.max_n, args.min_n, VOCAB)
            samples.append(time.perf_counter() - start)
        host = statistics.median(samples) * 1e6
        gpu = host + kernels * args.launch_us + syncs * args.sync_us
        print(f"{label:34} {host:8.1f} {kernels:8d} {syncs:6d} {gpu:12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
