"""Measure the live tensor bytes of vLLM's profiling-pass sampler, with and without speculation (issue #12).

Runs vLLM's own Sampler and RejectionSampler (the installed package; run it with the engine's python,
e.g. /work/main/.venv-engine/bin/python) on CPU tensors, with the inputs GPUModelRunner._dummy_sampler_run
builds (vllm/v1/worker/gpu_model_runner.py, vLLM 0.32.0): logits of max_num_seqs rows in the model dtype, the
dummy SamplingMetadata (temperature 0.5, top_p 0.9, top_k = vocab - 1, neither all greedy nor all random), the
sampler run twice (the second time with a per-request generator, which takes TopKTopPSampler.forward_native),
then, with speculation, SpecDecodeMetadata.make_dummy with ONE draft token per sequence and the rejection
sampler over 2 x max_num_seqs rows of randn logits, once with that metadata and once all-greedy.

Live bytes are counted from torch.profiler's allocator events (profile_memory=True), in order; the peak is
reported in units of R x V x 4 bytes (R rows, V vocabulary), relative to what was live when the pass began.

Paths (--path):
  native   TopKTopPSampler.forward_native with apply_top_k_top_p's PyTorch sort (what CUDA runs without
           FlashInfer and without Triton, e.g. releases before the Triton top-k/top-p kernel);
  triton   as native, but top-k/top-p masks logits in place as vLLM 0.32's Triton kernel does on CUDA
           (apply_top_k_top_p_triton: in place, plus a cached num_sm x V fp32 buffer, counted separately);
  cpu      what vLLM's CPU build itself runs (forward_cpu, fused Gumbel argmax).

Prints one JSON line per (V, R, path, drafts): peak_nospec / peak_spec in bytes and in R x V x 4 units.
`expected_units` below is the same count done by hand from the source (docs/accounting.md, "The sampler in the
profiling pass, measured"); tests/engine/test_sampler_peak.py checks that the two agree.

    /work/main/.venv-engine/bin/python tools/measure_sampler_peak.py --vocab 32000 151936 --rows 8 64 256 \
        --path native triton --drafts 1 2 4
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any


def expected_units(path: str, spec: bool, drafts: int = 1) -> float:
    """Peak live bytes of the dummy sampler pass over R x V x 4 bytes, counted by hand from vLLM 0.32's V1
    runner (bf16 logits: a row-set of R rows is 0.5, fp32 1, int64 2, bool 0.25).

    Without speculation the peak is inside the first sampler call: the bf16 logits (0.5) and their fp32 copy (1),
    then with the PyTorch sort the sorted values (1), their int64 indices (2), the top-k mask (0.25), the top-p
    softmax (1) and mask (0.25): 6.0; with top-k/top-p in place: softmax probs (1) and the exponential q (1): 3.5.
    With speculation (d draft tokens per sequence; the profiling pass uses d = 1) the peak is in the rejection
    sampler's target path: logits of (d+1) R rows (0.5 (d+1)), the bonus rows (0.5) and their raw fp32 logprobs
    (1), the target rows in fp32 (d) and their clone (d); then with the PyTorch sort its values (d), int64 indices
    (2d), two masks (0.5d) and top-p softmax (d): 7d + 2; in place, the target softmax (d) and the recovered-token
    q and its reciprocal, over R rows only (2): 3.5d + 4."""
    if not spec:
        return 6.0 if path in ("native", "cpu") else 3.5
    if path in ("native", "cpu"):
        return 7.0 * drafts + 2.0
    return 3.5 * drafts + 4.0


def _live_peak(fn) -> int:
    """Peak of live CPU tensor bytes while fn() runs, over what was live when it began: the running sum of
    torch.profiler's allocator events (profile_memory=True; '[memory]' events carry +bytes / -bytes)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    evs = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    evs.sort(key=lambda e: e.start_ns())
    live = peak = 0
    for e in evs:
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def measure(V: int, R: int, path: str, dtype: Any, spec: bool, drafts: int = 1) -> int:
    import vllm.v1.sample.ops.topk_topp_sampler as tts
    import vllm.v1.sample.rejection_sampler as rs

    saved = (tts.apply_top_k_top_p, rs.apply_top_k_top_p, rs._rejection_greedy_sample, rs._rejection_random_sample,
             rs._sample_recovered_tokens, rs._expand)
    try:
        return _measure(V, R, path, dtype, spec, tts, rs, drafts)
    finally:
        (tts.apply_top_k_top_p, rs.apply_top_k_top_p, rs._rejection_greedy_sample, rs._rejection_random_sample,
         rs._sample_recovered_tokens, rs._expand) = saved


def _measure(V: int, R: int, path: str, dtype: Any, spec: bool, tts, rs, drafts: int) -> int:
    import torch

    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata
    from vllm.v1.sample.sampler import Sampler
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    device = torch.device("cpu")
    sampler = Sampler()
    if path in ("native", "triton"):
        sampler.topk_topp_sampler.forward = sampler.topk_topp_sampler.forward_native
    if path == "triton":
        # vLLM 0.32 on CUDA: apply_top_k_top_p -> apply_top_k_top_p_triton, which masks in place
        # (topk_topp_triton.py; its per-device buffer is cached outside the pass and counted separately).
        def _in_place(logits, k, p):
            return logits

        tts.apply_top_k_top_p = _in_place
        rs.apply_top_k_top_p = _in_place
    rejection = rs.RejectionSampler(sampler) if spec else None
    _stub_triton_kernels(rs)

    def run() -> None:
        # compute_logits: [R, V] in the model dtype
        logits = torch.randn(R, V, dtype=dtype, device=device)
        num_reqs = logits.size(0)

        def dummy_tensors(v):
            return torch.full((num_reqs,), v, device=device)

        md = SamplingMetadata(
            temperature=dummy_tensors(0.5), all_greedy=False, all_random=False, top_p=dummy_tensors(0.9),
            top_k=dummy_tensors(logits.size(1) - 1), generators={}, max_num_logprobs=None, logprob_token_ids=None,
            no_penalties=True, prompt_token_ids=None, frequency_penalties=dummy_tensors(0.1),
            presence_penalties=dummy_tensors(0.1), repetition_penalties=dummy_tensors(0.1),
            output_token_ids=[[] for _ in range(num_reqs)], spec_token_ids=[[] for _ in range(num_reqs)],
            allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=LogitsProcessors())
        sampler_output = sampler(logits=logits, sampling_metadata=md)
        sampler(logits=logits, sampling_metadata=replace(md, generators={0: torch.Generator(device=device)
                                                                            .manual_seed(0)}))
        if spec:
            draft_token_ids = [[0] * drafts for _ in range(num_reqs)]
            meta = SpecDecodeMetadata.make_dummy(draft_token_ids, device)
            num_tokens = sum(len(ids) for ids in draft_token_ids)
            logits = torch.randn(num_tokens + num_reqs, logits.shape[-1], device=device, dtype=logits.dtype)
            rejection(meta, None, logits, md)
            rejection(meta, None, logits, replace(md, temperature=None, all_greedy=True, all_random=False))
        del sampler_output

    return _live_peak(run)


def _stub_triton_kernels(rs) -> None:
    """The rejection sampler's Triton kernels write small int outputs in place; on a CPU without Triton they
    are replaced by no-ops (they allocate nothing vocab-wide; their outputs are allocated by the caller)."""
    class _Noop:
        def __call__(self, *a, **k):
            return None

        def register_warmup(self, *a, **k):
            return None

    import torch

    class _Expand(_Noop):
        # expand_kernel: out[t] = x[request of token t], replace_from -> replace_to
        def __call__(self, out, x, cu, replace_from, replace_to):
            counts = torch.diff(cu.long(), prepend=cu.new_zeros(1).long())
            v = torch.repeat_interleave(x, counts)
            out.copy_(torch.where(v == replace_from, torch.full_like(v, replace_to), v))

    _noop = _Noop()
    for name in ("_rejection_greedy_sample", "_rejection_random_sample", "_sample_recovered_tokens"):
        setattr(rs, name, _noop)
    rs._expand = _Expand()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, nargs="+", default=[32000])
    ap.add_argument("--rows", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--path", nargs="+", default=["native"], choices=["native", "triton", "cpu"])
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--drafts", type=int, nargs="+", default=[1],
                    help="dummy draft tokens per sequence (vLLM's profiling pass: 1, whatever k is)")
    a = ap.parse_args(argv)
    import torch

    dtype = getattr(torch, a.dtype)
    for V in a.vocab:
        for R in a.rows:
            for path in a.path:
                off = measure(V, R, path, dtype, False)
                unit = R * V * 4
                for k in a.drafts:
                    on = measure(V, R, path, dtype, True, k)
                    print(json.dumps({"vocab": V, "rows": R, "path": path, "dtype": a.dtype, "drafts": k,
                                      "peak_nospec": off, "peak_spec": on, "c_nospec": round(off / unit, 4),
                                      "c_spec": round(on / unit, 4), "c_delta": round((on - off) / unit, 4),
                                      "expected_nospec": expected_units(path, False),
                                      "expected_spec": expected_units(path, True, k)}),
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
