"""Invariants of the timing model over the whole catalog, checked with hypothesis.

tests/test_properties.py, tests/test_perf.py and tests/test_step_model.py check the step model's invariants on a few
models (Llama-3.1-8B on an H100 mostly). Here every draw is a deployment a user could ask for: any catalog target
(dense, MoE, MLA / DeepSeek, hybrid Mamba, sliding-window, multimodal, fp8 / mxfp4 checkpoints), any catalog GPU
(NVIDIA and AMD), TP 1/2/4/8, expert parallelism on or off for an MoE target, a weight quantization override (fp8,
nvfp4, mxfp4, awq, gptq), an fp8 KV cache or not, vLLM 0.6.4 / 0.8.5 / 0.11.0 / 0.14.0 / 0.24.0 / 0.32.0 or SGLang
0.4.6 / 0.5.12 / the newest, and a drafter (none, draft_model, eagle, eagle3, mtp, medusa, ngram). A deployment the
tool refuses (SpecError: exit 2) is rejected and counted (REFUSED, by the field named); any other exception fails the
test, since it would be exit 4 for the user.

Each invariant is justified from how the engines run a step; invariants real engines break were dropped:
- throughput (batch / TPOT) across a CUDA-graph boundary: the first batch past the largest capture runs eager and
  pays every kernel's host launch (SGLang cuda_graph_runner.py can_run: `bs <= max_bs`; vLLM's cudagraph_capture_
  sizes), so tokens/s really dip there. Checked within one graph regime only.
- TPOT non-decreasing in the request rate once the server saturates: the KV pool (or max_num_seqs) caps the running
  batch, arrivals wait in the queue, and the median TPOT plateaus and wanders with the prompt/decode mix of the steps
  (Qwen3-4B on 2 x A100-80GB, SGLang 0.5.12, 3,000-token prompts: 140.6 ms at 16 req/s with the pool 90% full, 123.0 ms
  at 32 req/s, TTFT 0.69 s -> 15.3 s). Checked where both runs sustain the load.
- more GPUs (TP) never slower: a small model at batch 1 is slower at TP 2 than at TP 1 on real servers (two all-reduces
  a layer for no bandwidth gained).
- speed-up non-increasing in batch: an MoE target's verification touches experts a plain decode also reads, so the
  speed-up can rise with the batch (tests/test_perf.py checks the compute-bound part).
- fp8 weights never slower than 16-bit ones on a card with fp8 matrix cores: the block-fp8 fused-MoE kernels vLLM
  0.24 runs on datacenter Blackwell were measured slower per byte than its bf16 ones (catalog efficiency.json
  blackwell moe_fp8_memory 0.374 against moe_memory 0.873, fitted on aiconfigurator's kernel tables), so an fp8 MoE
  decodes slower there (Mixtral-8x22B on one GB300 at batch 16: 45.8 ms against 40.7 ms). Not checked.
- speculative TPOT against the request rate: acceptance is drawn per sequence per step, and the same seed at another
  rate draws other requests (simulator/workload.py: the count is Poisson(rate x duration), then uniform times), so the
  two medians are not coupled; only the no-speculation run is compared.

The budget is small by default (the file runs in well under a minute on two cores); SPECSIZE_CATALOG_EXAMPLES=N runs N
examples per test.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import replace
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st

import specsize
from specsize import api
from specsize.catalog import load_gpu, load_model
from specsize.core.errors import SpecError
from specsize.core.kvcache import pool_blocks
from specsize.core.memory import account
from specsize.core.perf import decode_step, in_graph, prefill_time, spec_tpot
from specsize.core.specs import SpeculativeConfig
from specsize.core.speculation import Tree
from specsize.inputs.resolve import resolve
from specsize.planner.perf import costs_for

EXAMPLES = int(os.environ.get("SPECSIZE_CATALOG_EXAMPLES", "0"))


def budget(default: int):
    return settings(max_examples=EXAMPLES or default, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


CATALOG = api.models()
HEADS = tuple(m["id"] for m in CATALOG if m["id"].startswith(("SafeAILab/", "sgl-project/SpecForge")))
TARGETS = tuple(m["id"] for m in CATALOG if m["id"] not in HEADS)
MOE = frozenset(m["id"] for m in CATALOG if m["moe"])
MLA = tuple(m["id"] for m in CATALOG if m["attention"] == "mla")
PARAMS_B = {m["id"]: m["params_b"] for m in CATALOG}
GPUS = tuple(g.gpu_id for g in api.gpus())
RELEASES = (("vllm", "0.6.4"), ("vllm", "0.8.5"), ("vllm", "0.11.0"), ("vllm", "0.14.0"), ("vllm", "0.24.0"),
            ("vllm", "0.32.0"), ("sglang", "0.4.6"), ("sglang", "0.5.12"), ("sglang", None))
METHODS = ("none", "draft_model", "eagle", "eagle3", "mtp", "medusa", "ngram")
SPEC_METHODS = METHODS[1:]
QUANTS = (None, None, None, "fp8", "nvfp4", "mxfp4", "awq", "gptq")  # None: the checkpoint's own, drawn more often
MAX_MODEL_LEN = 4096  # every catalog target serves 4,096 tokens (Phi-3-mini-4k's limit); a longer one refuses some
MAX_NUM_SEQS = 256  # the same on every GPU (the engines' defaults grow with the card's memory)

# EAGLE-3 heads of the catalog by the target they were trained for; other targets derive the standard head (api docs)
EAGLE3_HEADS = {"meta-llama/Llama-3.1-8B-Instruct": "sgl-project/SpecForge-llama3-8B-eagle3",
                "meta-llama/Llama-3.1-70B-Instruct": "sgl-project/SpecForge-llama3-70B-eagle3",
                "Qwen/Qwen3-8B": "sgl-project/SpecForge-qwen3-8b-eagle3",
                "Qwen/Qwen3-32B": "sgl-project/SpecForge-qwen3-32b-eagle3",
                "Qwen/Qwen3-30B-A3B": "sgl-project/SpecForge-qwen3-30B-A3B-eagle3",
                "Qwen/Qwen3-235B-A22B": "sgl-project/SpecForge-qwen3-235B-A22B-eagle3",
                "deepseek-ai/DeepSeek-V3": "sgl-project/SpecForge-deepseek-v3-671b-eagle3",
                "openai/gpt-oss-20b": "sgl-project/SpecForge-gpt-oss-20B-eagle3",
                "openai/gpt-oss-120b": "sgl-project/SpecForge-gpt-oss-120B-eagle3"}

# draws the tool refused, by the field its SpecError names, and draws accepted, by test (printed at the end with -s)
REFUSED: Counter = Counter()
ACCEPTED: Counter = Counter()


@lru_cache(maxsize=None)
def small_draft(target: str) -> str | None:
    """The smallest catalog model (not a head) with the target's vocabulary: the draft model a user would pick."""
    vocab = load_model(target).vocab_size
    fits = [m for m in api.catalog_models(vocab) if m.model_id not in HEADS and m.model_id != target
            and m.vocab_size == vocab]
    return min(fits, key=lambda m: PARAMS_B[m.model_id]).model_id if fits else None


@st.composite
def deployments(draw, methods=METHODS, targets=TARGETS, gpus=GPUS):
    """Request fields of one deployment (a dict, so that a failing example can be pinned with @example)."""
    target = draw(st.sampled_from(targets))
    engine, version = draw(st.sampled_from(RELEASES))
    method = draw(st.sampled_from(methods))
    fields = dict(target=target, gpu=draw(st.sampled_from(gpus)), tp=draw(st.sampled_from((1, 2, 4, 8))),
                  engine=engine, max_model_len=MAX_MODEL_LEN, max_num_seqs=MAX_NUM_SEQS)
    if version:
        fields["engine_version"] = version
    if target in MOE and draw(st.booleans()):
        fields["expert_parallel"] = True
    quant = draw(st.sampled_from(QUANTS))
    if quant:
        fields["quantization"] = quant
    if draw(st.booleans()):
        fields["kv_cache_dtype"] = "fp8"
    if draw(st.integers(0, 9)) == 0:
        fields["pp"] = 2
    if draw(st.integers(0, 9)) == 0:
        fields["enforce_eager"] = True
    if method != "none":
        fields["method"] = method
        if method != "mtp":  # MTP's k defaults to the checkpoint's MTP layers, as vLLM sets it
            fields["num_speculative_tokens"] = draw(st.integers(1, 5))
        draft = small_draft(target) if method == "draft_model" else EAGLE3_HEADS.get(target) \
            if method == "eagle3" else None
        if draft:
            fields["draft"] = draft
        fields["acceptance_rate"] = 0.7
        if engine == "sglang" and method in ("eagle", "eagle3", "mtp", "draft_model") and draw(st.booleans()):
            fields["tree_topk"] = draw(st.sampled_from((2, 4)))  # SGLang drafts a tree: --speculative-eagle-topk
            fields["num_draft_tokens"] = draw(st.sampled_from((4, 8, 16)))
    return fields


def accepted(test: str | None, call, *args, **kwargs):
    """call(*args, **kwargs), or reject the draw where the tool refuses the deployment (exit 2), counting why (the
    draw counts as accepted under `test`; None: a later call of the same draw)."""
    try:
        out = call(*args, **kwargs)
    except SpecError as e:
        REFUSED[str(e).split(":", 1)[0]] += 1
        reject()
    if test:
        ACCEPTED[test] += 1
    return out


def served(fields: dict):
    """(resolved request, memory account, plain-decode step costs) of the deployment, as `plan` prices its perf
    section (planner.perf.summarize: the target without speculation, in the deployment's own engine settings)."""
    r = resolve(specsize.load_request(**fields))
    mem = account(r.deployment, r.profile)
    plain = costs_for(replace(r.deployment, speculative=SpeculativeConfig()), mem, r.efficiency, 0, Tree())
    return r, mem, plain


@pytest.fixture(scope="module", autouse=True)
def _report_draws():
    yield
    total = sum(REFUSED.values()) + sum(ACCEPTED.values())
    print(f"\ncatalog timing draws: {sum(ACCEPTED.values())} accepted ({dict(ACCEPTED)}), "
          f"{sum(REFUSED.values())} refused of {total} ({dict(REFUSED.most_common())})")


# 1. Decode steps -------------------------------------------------------------------------------------------------
# A decode step of more sequences reads the same weights, more KV cache and more experts, and multiplies more tokens;
# a longer context reads more KV cache and adds attention pairs: no engine runs the larger step faster (the CUDA
# graph rule only adds host launches to the larger one). A longer prompt is prefilled in at least as many chunks,
# each over at least as much context.

@budget(80)
@given(deployments(), st.integers(1, MAX_NUM_SEQS), st.integers(1, MAX_NUM_SEQS), st.integers(0, 4000),
       st.integers(0, 4000), st.integers(1, 4000), st.integers(1, 4000))
def test_decode_step_and_prefill_never_shrink_with_more_work(fields, b1, b2, c1, c2, p1, p2):
    r, mem, plain = accepted("decode", served, fields)
    (lo_b, hi_b), (lo_c, hi_c), (lo_p, hi_p) = sorted((b1, b2)), sorted((c1, c2)), sorted((p1, p2))
    t = {(b, c): decode_step(plain, b, c).time_s for b in (lo_b, hi_b) for c in (lo_c, hi_c)}
    assert all(math.isfinite(v) and v > 0 for v in t.values()), t
    assert t[lo_b, lo_c] <= t[hi_b, lo_c] * (1 + 1e-12), (fields, lo_b, hi_b, lo_c, t)
    assert t[lo_b, lo_c] <= t[lo_b, hi_c] * (1 + 1e-12), (fields, lo_b, lo_c, hi_c, t)
    assert t[hi_b, hi_c] >= max(t.values()) * (1 - 1e-12)
    chunk = mem.settings.max_num_batched_tokens
    assert prefill_time(plain, lo_p, chunk) <= prefill_time(plain, hi_p, chunk) * (1 + 1e-12), (fields, lo_p, hi_p)


# Throughput (batch / TPOT) grows with the batch as long as the pool holds every sequence and the two batches run in
# the same CUDA-graph regime: a step of B sequences is at most B / B' times as long as one of B' < B (the weights are
# read once, the per-sequence terms grow linearly, the GEMM efficiency only rises with more tokens).

@budget(60)
@given(deployments(), st.integers(1, 1024), st.integers(1, 1024), st.sampled_from((100, 1000, 4000)))
def test_throughput_never_falls_with_the_batch_within_the_pool_and_a_graph_regime(fields, b1, b2, context):
    r, mem, plain = accepted("throughput", served, fields)
    s = mem.settings
    per_sequence = pool_blocks(mem.pool_layers, context + 1, s.block_size, 1)
    largest = min(s.max_num_seqs, mem.usable_blocks // per_sequence if per_sequence else 0)
    lo, hi = sorted((b1, b2))
    if hi > largest or in_graph(lo, plain.graph_max_tokens) != in_graph(hi, plain.graph_max_tokens):
        return
    t_lo, t_hi = decode_step(plain, lo, context).time_s, decode_step(plain, hi, context).time_s
    assert hi / t_hi >= lo / t_lo * (1 - 1e-12), (fields, context, lo, t_lo, hi, t_hi)


# 2. Speculation ---------------------------------------------------------------------------------------------------
# At a fixed batch a higher acceptance emits more tokens per target pass for the same drafting and verification (a
# drafter that extends over the accepted positions only grows by that share: planner.perf's draft_extend), so the
# speed-up never falls; a pass emits at most tokens_per_pass tokens and costs at least one decode step, so the speed-up
# never exceeds it, nor k + 1 (a chain) / the tree's nodes. Speculative TPOT is non-decreasing in the batch and the
# context at a fixed acceptance, for the reasons of test 1.

@budget(60)
@given(deployments(methods=SPEC_METHODS), st.floats(0.0, 1.0), st.floats(0.0, 1.0),
       st.sampled_from((100, 1000, 4000)))
def test_speedup_rises_with_acceptance_and_stays_under_tokens_per_pass(fields, a1, a2, context):
    lo, hi = sorted((a1, a2))
    batches = (1, 4, 16, 64, 256)
    request = accepted(None, specsize.load_request, **fields, batch_sizes=batches, context_len=context)
    low = accepted("speedup", api.speedup, request.replace(acceptance_rate=lo)).drafters[0].table.rows
    high = api.speedup(request.replace(acceptance_rate=hi)).drafters[0].table.rows
    k = fields.get("num_speculative_tokens")
    for p, q in zip(low, high):
        assert (p.batch_size, p.k) == (q.batch_size, q.k)
        for row in (p, q):
            assert all(math.isfinite(v) and v > 0 for v in (row.tpot_s, row.tpot_s_no_spec, row.speedup)), row
            assert row.speedup <= row.tokens_per_pass * (1 + 1e-9), (fields, context, row)
            assert 1.0 - 1e-9 <= row.tokens_per_pass <= row.k + 1 + 1e-9, row
        assert q.speedup >= p.speedup * (1 - 1e-9), (fields, context, lo, p, hi, q)
        if k is not None and hi == 1.0 and fields["engine"] == "vllm" and fields["method"] != "ngram":
            assert q.tokens_per_pass == pytest.approx(k + 1)  # a chain that accepts everything
    r, mem, _ = served(fields)
    spec = costs_for(r.deployment, mem, r.efficiency, r.deployment.speculative.num_speculative_tokens,
                     r.deployment.speculative.tree)
    for per_pass in (1.0, 2.0):
        prev = 0.0
        for b in batches:
            t = spec_tpot(spec, b, context, per_pass)
            assert t >= prev * (1 - 1e-12), (fields, context, b, t, prev)
            assert spec_tpot(spec, b, context + 500, per_pass) >= t * (1 - 1e-12), (fields, context, b)
            prev = t


# 6. The plan's perf section and the speed-up table price the same step ---------------------------------------------

@budget(50)
@given(deployments(methods=SPEC_METHODS), st.sampled_from((1, 7, 32, 100)))
def test_plan_and_speedup_agree_on_tpot_at_the_same_batch_and_context(fields, concurrency):
    request = accepted(None, specsize.load_request, **fields, concurrency=concurrency,
                       prompt_tokens="p50=1000,p99=2000", output_tokens="p50=200,p99=400")
    perf = accepted(None, api.plan, request).perf
    if perf is None or perf.tpot_s is None:  # an engine that does not start has no perf section
        return
    at = request.replace(batch_sizes=(perf.batch_size,), context_len=perf.context_len)
    row = accepted("agree", api.speedup, at).drafters[0].table.rows[0]
    for name in ("tpot_s", "tpot_s_no_spec", "speedup", "tokens_per_pass"):
        assert getattr(row, name) == pytest.approx(getattr(perf, name), rel=1e-9), (name, fields, concurrency)


# 3. A card at least as fast in every rate ---------------------------------------------------------------------------
# Two catalog GPUs of one vendor and family where one has at least the other's memory, bandwidth, bf16 and fp8 FLOP/s
# and interconnect (H100 < H200, B200 < B300 / GB300, MI300X < MI325X, A100-40GB < A100-80GB, L40 < L40S, RTX 5090
# < B200, ...): the engine runs the same kernels or faster ones on it, so no step of the same deployment at the same
# settings (max_num_seqs, max_model_len fixed) takes longer.

def _at_least(fast, slow) -> bool:
    def rate(x):
        return x or 0.0
    return (fast.vendor == slow.vendor and fast.family == slow.family and fast.memory_bytes >= slow.memory_bytes
            and all(rate(getattr(fast, f)) >= rate(getattr(slow, f)) for f in
                    ("memory_bandwidth_bytes_s", "bf16_flops", "fp8_flops", "interconnect_bytes_s"))
            and (slow.fp8_flops is None or fast.fp8_flops is not None))


_CARDS = [load_gpu(g) for g in GPUS]
DOMINATED = tuple((slow.gpu_id, fast.gpu_id) for fast in _CARDS for slow in _CARDS
                  if fast is not slow and _at_least(fast, slow))
STEP_SHAPES = ((1, 100), (1, 4000), (8, 1000), (64, 1000), (256, 4000))


def _step_times(fields: dict) -> dict:
    r, mem, plain = served(fields)
    times = {(b, c): decode_step(plain, b, c).time_s for b, c in STEP_SHAPES}
    times["prefill", 3000] = prefill_time(plain, 3000, mem.settings.max_num_batched_tokens)  # the plan's TTFT
    sp = r.deployment.speculative
    if sp.enabled:
        spec = costs_for(r.deployment, mem, r.efficiency, sp.num_speculative_tokens, sp.tree)
        times.update({("spec", b, c): spec_tpot(spec, b, c, 2.0) for b, c in STEP_SHAPES})
    return times


def _never_slower(fields: dict, pair: tuple[str, str]) -> None:
    slow, fast = pair
    # the same token budget on both: vLLM's default grows to 8,192 on a card of 70 GiB or more that is not an A100 (an
    # A800 of the A100's 79.15 GiB gets it), and a prompt in one chunk does not pipeline over PP stages the way two do
    # (Qwen2.5-0.5B, 3,000 tokens at PP 2: 14.26 ms in one 8,192-token chunk, 11.37 ms in 2,048-token ones)
    fields = {**fields, "max_num_batched_tokens": MAX_MODEL_LEN}
    t_slow = accepted(None, _step_times, {**fields, "gpu": slow})
    t_fast = accepted("gpu", _step_times, {**fields, "gpu": fast})
    worse = {key: (t_slow[key], t_fast[key]) for key in t_slow if t_fast[key] > t_slow[key] * (1 + 1e-9)}
    assert not worse, (fields, slow, fast, worse)


def test_the_dominance_pairs_are_the_ones_a_buyer_compares():
    for pair in (("H100-SXM-80GB", "H200-141GB"), ("B200-180GB", "B300-288GB"), ("MI300X-192GB", "MI325X-256GB"),
                 ("A100-40GB", "A100-80GB"), ("L40-48GB", "L40S-48GB"), ("RTX-5090-32GB", "B200-180GB")):
        assert pair in DOMINATED
    assert ("H200-141GB", "H100-SXM-80GB") not in DOMINATED and ("A100-80GB", "H100-SXM-80GB") not in DOMINATED


@budget(80)
@given(deployments(targets=tuple(t for t in TARGETS if t not in MLA)), st.sampled_from(DOMINATED))
def test_a_card_at_least_as_fast_in_every_rate_is_never_slower_per_step(fields, pair):
    _never_slower(fields, pair)


# MLA targets: vLLM's MLA module costs a fixed time a layer the step model had priced only where it was measured
# (engines/vllm.py VLLM_MLA_LAYER_FIXED_S: 85 us on Hopper, 45 us on datacenter Blackwell "cc10"; core.memory.for_gpu
# gave 0 to every other card; now Hopper's, "*"). A consumer / workstation Blackwell (sm_120: vLLM runs TRITON_MLA there, no FlashMLA or
# CUTLASS MLA), an A100 (sm_80: TRITON_MLA / FlashAttention MLA) or an MI300X (AITER / Triton MLA) is then priced with
# no MLA module time at all and beats a card that is faster in every rate: DeepSeek-V2-Lite at TP 8 under vLLM 0.32
# had decoded one sequence in 3.64 ms on RTX 5090s and 3.85 ms on B200s (3.05 ms on RTX PRO 6000s), because 27 layers x
# 45 us = 1.22 ms was added on the B200 alone. A slower kernel family never has a smaller fixed cost than FlashMLA's.
@budget(40)
@example(fields={"target": "deepseek-ai/DeepSeek-V2-Lite-Chat", "gpu": "B200-180GB", "tp": 8, "engine": "vllm",
                 "max_model_len": MAX_MODEL_LEN, "max_num_seqs": MAX_NUM_SEQS},
         pair=("RTX-5090-32GB", "B200-180GB"))
@given(deployments(targets=MLA), st.sampled_from(DOMINATED))
def test_an_mla_target_on_a_card_at_least_as_fast_in_every_rate_is_never_slower_per_step(fields, pair):
    _never_slower(fields, pair)


def test_an_h100_decodes_deepseek_no_slower_than_an_a100():
    """Across families, the buyer's question: an A100-80GB is below an H100 SXM in every rate (2.04 vs 3.35 TB/s, 312
    vs 989 TFLOP/s bf16, 300 vs 450 GB/s NVLink), and vLLM runs MLA on it with Triton kernels instead of FlashMLA, so a
    DeepSeek-V2-Lite decode step of one sequence is no faster on it. The model said 5.21 ms on the A100 against 5.86 ms
    on the H100 (the H100's 27 x 85 us = 2.30 ms of MLA module time has no A100 counterpart); DeepSeek-V3 on 8 GPUs:
    9.95 ms on A100s, 6.55 ms on MI300Xs against 11.89 ms on H200s."""
    base = {"target": "deepseek-ai/DeepSeek-V2-Lite-Chat", "tp": 1, "engine": "vllm", "max_model_len": MAX_MODEL_LEN,
            "max_num_seqs": MAX_NUM_SEQS}
    a100 = _step_times({**base, "gpu": "A100-80GB"})[1, 100]
    h100 = _step_times({**base, "gpu": "H100-SXM-80GB"})[1, 100]
    assert h100 <= a100, (h100, a100)


# 4. An fp8 KV cache --------------------------------------------------------------------------------------------------
# An fp8 cache halves the KV bytes a step reads; its attention runs at the fp8 peak where the release's kernel
# multiplies in fp8, at the 16-bit peak where it accumulates in two levels (vLLM 0.11.1+ FlashAttention 3 on Hopper,
# AccountingProfile.fp8_attention_16bit_families) or where the GPU has no fp8 (the cache dequantised in the kernel):
# never at a lower rate than 16 bits, so no decode or speculative step is slower. (vLLM's blog "The State of FP8
# KV-Cache" does measure fp8 slower at head_dim 256 on Hopper, which the step model does not price: not checked here.)

@budget(80)
@given(deployments())
def test_an_fp8_kv_cache_never_slows_a_step(fields):
    sixteen = {key: value for key, value in fields.items() if key != "kv_cache_dtype"}
    t16 = accepted(None, _step_times, sixteen)
    t8 = accepted("fp8_kv", _step_times, {**sixteen, "kv_cache_dtype": "fp8"})
    worse = {key: (t16[key], t8[key]) for key in t16 if t8[key] > t16[key] * (1 + 1e-9)}
    assert not worse, (fields, worse)


@pytest.mark.parametrize("release", ["0.11.0", "0.32.0"])
def test_an_fp8_kv_cache_on_hopper_saves_the_halved_kv_read_by_hand(release):
    """vLLM 0.11.0 runs fp8 attention at the fp8 peak, 0.32 at the 16-bit one (two-level accumulation): a decode step
    is memory-bound on the KV read either way, so the saving is the bytes alone. Llama-3.1-8B: 32 layers x 8 KV heads x
    128 x 2 (K and V) = 65,536 values a token, one byte fewer each; 64 sequences x 4,000 tokens x 65,536 B =
    16.78 GB less read at 3.35 TB/s x 0.973 (Hopper's attn_memory, catalog efficiency.json) = 5.147 ms."""
    base = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine="vllm", engine_version=release,
                max_model_len=MAX_MODEL_LEN, max_num_seqs=MAX_NUM_SEQS)
    sixteen = decode_step(served(base)[2], 64, 4000).time_s
    eight = decode_step(served({**base, "kv_cache_dtype": "fp8"})[2], 64, 4000).time_s
    assert sixteen - eight == pytest.approx(64 * 4000 * 65_536 / (3.35e12 * 0.973), rel=1e-6)


# 6b. The speed-up's baseline is the server without speculation ------------------------------------------------------
# speed-up = TPOT without speculation / TPOT with it (`specsize speedup --help`): the baseline is the deployment a user
# runs without the drafter, i.e. what `plan --method none` prices. SGLang replays a decode batch in a CUDA graph while
# batch_size <= cuda_graph_max_bs (sequences: cuda_graph_runner.py CudaGraphRunner.can_run, `cuda_graph_bs <=
# self.max_bs`, cuda_graph_bs = forward_batch.batch_size), and its default cuda_graph_max_bs does not depend on the
# speculative algorithm (server_args.py _handle_gpu_memory_settings, 0.5.12). The speculative deployment's settings hold
# graph_max_tokens = cuda_graph_max_bs x (k + 1) tokens (engines/sglang/accounting.py graph_tokens_per_sequence), and
# core.perf.decode_step had checked the plain decode's B tokens against that: B between cuda_graph_max_bs and
# cuda_graph_max_bs x (k + 1) was priced graphed in the speed-up table (and the speculative plan's tpot_s_no_spec) and
# eager in the plain server's plan. Qwen3-30B-A3B on an H100 under SGLang (cuda_graph_max_bs 256), EAGLE-3 at k = 3, 257
# sequences over 2,001 tokens: baseline 45.69 ms in the table, 59.61 ms in `plan --method none`: 1.72x shown, 2.25x
# against the server without speculation. Now the plain step has its own limit (ResolvedSettings.
# plain_graph_max_tokens: the release's capture rule at k = 0, and SGLang's cuda_graph_max_bs sequences). vLLM 0.8 / 0.9 serve a draft model (and Medusa before 0.9) on the V0 engine
# (engines/vllm.py V1_FALLBACK_METHODS): their baseline is V0's, not the V1 server the release runs without speculation;
# those draws are left out here (reported separately).

def _plain_server_fields(fields: dict) -> dict:
    return {key: value for key, value in fields.items()
            if key not in ("method", "num_speculative_tokens", "draft", "acceptance_rate", "tree_topk",
                           "num_draft_tokens")}


@budget(60)
@example(fields={"target": "Qwen/Qwen3-30B-A3B", "gpu": "H100-SXM-80GB", "tp": 1, "engine": "sglang",
                 "max_model_len": MAX_MODEL_LEN, "max_num_seqs": 1024, "method": "eagle3",
                 "draft": "sgl-project/SpecForge-qwen3-30B-A3B-eagle3", "num_speculative_tokens": 3,
                 "acceptance_rate": 0.7}, batch=257, context=2001)
@given(deployments(methods=SPEC_METHODS), st.integers(1, MAX_NUM_SEQS), st.sampled_from((100, 1000, 4000)))
def test_the_speedup_baseline_is_the_plain_servers_decode_step(fields, batch, context):
    request = accepted(None, specsize.load_request, **fields, batch_sizes=(batch,), context_len=context)
    table = accepted(None, api.speedup, request)
    r_spec = resolve(request)
    r_plain, _, plain = accepted("baseline", served, _plain_server_fields(fields))
    if r_spec.profile.generation != r_plain.profile.generation:  # vLLM's V0 fallback for this drafter: see above
        return
    row = table.drafters[0].table.rows[0]
    assert row.tpot_s_no_spec == pytest.approx(decode_step(plain, batch, context).time_s, rel=1e-9), \
        (fields, batch, context)


SGLANG_QWEN3_30B = dict(target="Qwen/Qwen3-30B-A3B", gpu="H100-SXM-80GB", engine="sglang", max_model_len=MAX_MODEL_LEN,
                       max_num_seqs=1024)


def test_sglang_plain_decode_past_cuda_graph_max_bs_pays_the_eager_launches_by_hand():
    """257 sequences are one more than the H100's cuda_graph_max_bs of 256 (SGLang 0.5.12 server_args.py: 80 GB at TP < 4
    -> 256), so the plain server's decode at 257 runs eager and pays every layer's launches on top of the 256-sequence
    step: 48 layers x (40 us a layer + SGLang's 0.25 ms an MoE layer behind GQA attention) = 13.92 ms (Efficiency.
    eager_layer_s, engines/sglang eager_gqa_moe_layer_s); the rest of the step grows by one sequence's share only."""
    _, _, plain = served(SGLANG_QWEN3_30B)
    step_256, step_257 = decode_step(plain, 256, 2001).time_s, decode_step(plain, 257, 2001).time_s
    assert 13.92e-3 <= step_257 - step_256 <= 13.92e-3 + 1e-3


def test_sglang_speedup_baseline_past_cuda_graph_max_bs_pays_the_eager_launches_by_hand():
    """The same 13.92 ms step up in the speed-up table's no-speculation column (EAGLE-3, k = 3): the baseline is the
    server without the drafter, whose cuda_graph_max_bs is the same 256."""
    table = api.speedup(**SGLANG_QWEN3_30B, method="eagle3", draft="sgl-project/SpecForge-qwen3-30B-A3B-eagle3",
                        num_speculative_tokens=3, acceptance_rate=0.7, batch_sizes=(256, 257), context_len=2001)
    rows = {row.batch_size: row for row in table.drafters[0].table.rows}
    assert rows[257].tpot_s_no_spec - rows[256].tpot_s_no_spec >= 13.92e-3, rows


# 5. Simulation -------------------------------------------------------------------------------------------------------

SIM = dict(duration=20, seed=3, burst_factor=1.0, output_tokens="p50=100,p99=100")


def _simulate(fields: dict, rate: float, prompt: int):
    return api.simulate(**fields, **SIM, rate=rate, prompt_tokens=f"p50={prompt},p99={prompt}")


def _non_finite(value, path="sim") -> list[str]:
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _non_finite(item, f"{path}.{key}")]
    if isinstance(value, (list, tuple)):
        return [p for i, item in enumerate(value) for p in _non_finite(item, f"{path}[{i}]")]
    return []


@budget(25)
@given(deployments(), st.sampled_from((0.5, 2.0, 8.0)), st.sampled_from((200, 1000, 3000)))
def test_simulate_json_is_finite_numbers(fields, rate, prompt):
    from specsize.reports.simulation import render

    rep = accepted("sim_json", _simulate, fields, rate, prompt)
    document = rep.to_dict()
    # a run that completes nothing (every request longer than the pool: an engine that refuses max_model_len still
    # builds its pool and is simulated, tests/test_hunt_57_fuzz10.py) has no mean E2E: its Little's-law product is None
    # (it had been NaN, which json.dumps writes as invalid JSON); every figure is a finite number or None
    bad = _non_finite(document)
    assert not bad, (fields, rate, prompt, bad)
    parsed = json.loads(render(rep, "json"), parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    for run in (rep.spec, rep.no_spec):
        if run is not None and run.completed:
            for stat in (run.ttft_s, run.tpot_s, run.e2e_s):
                assert math.isfinite(stat.p50) and stat.p50 > 0, (fields, rate, prompt, run.label)
    assert parsed["sim"]


# A longer prompt never lowers TTFT: at the same rate and seed the arrivals and output lengths are the same draws
# (simulator/workload.py generate: the prompt lengths are constant here), and every request's prompt is longer, so its
# prefill is no shorter and nothing ahead of it is shorter either. On an idle server (0.2 req/s) the front-end latency
# had better not fall with it: the simulator stretches it by the API server's busy share of the step that produced the
# first token (simulator/engine.py simulate, step 6), which had counted the request's own prefill as streaming load
# (api_busy_share over n_active), larger the shorter that step is; now the decoding requests' streams alone. Qwen3-0.6B on an H100 under SGLang
# 0.5.12, each request alone: median TTFT 34.23 ms at 16 prompt tokens, 34.08 ms at 800; offline (no API server) 1.54
# -> 2.43 ms. Worked by hand: the 16-token step takes ~1.5 ms, so 150 us / 1.54 ms = 9.7% "busy", and the 25 ms
# front-end latency is stretched to 25 / (1 - 0.097) = 27.7 ms (2.7 ms for a stream that does not exist); at 800 tokens
# 150 us / 2.43 ms = 6.2% -> 26.6 ms. Without the self-count TTFT = prefill + 25 ms + 5 ms: 31.5 -> 32.4 ms.
@budget(30)
@example(fields={"target": "Qwen/Qwen3-0.6B", "gpu": "H100-SXM-80GB", "tp": 1, "engine": "sglang",
                 "engine_version": "0.5.12", "max_model_len": MAX_MODEL_LEN, "max_num_seqs": MAX_NUM_SEQS},
         short=16, longer=800)
@given(deployments(methods=("none",)), st.integers(16, 1500), st.integers(16, 1500))
def test_a_longer_prompt_never_lowers_ttft_on_an_idle_server(fields, short, longer):
    short, longer = sorted((short, longer))
    a = accepted(None, _simulate, fields, 0.2, short).spec
    b = accepted("sim_prompt", _simulate, fields, 0.2, longer).spec
    assert b.ttft_s.p50 >= a.ttft_s.p50 * (1 - 1e-9), (fields, short, a.ttft_s.p50, longer, b.ttft_s.p50)
    assert b.ttft_s.p99 >= a.ttft_s.p99 * (1 - 1e-9), (fields, short, a.ttft_s.p99, longer, b.ttft_s.p99)


def test_an_idle_servers_ttft_is_prefill_plus_the_front_end_by_hand():
    """The pinned case of the test above with its expected numbers: each of the requests arrives alone (0.2 req/s, 100
    output tokens of well under a second), so TTFT = the offline TTFT (the engine's prefill; no API server) + SGLang's
    front-end latency 25 ms + its serial intake 5 ms (Efficiency.frontend_latency_s / frontend_serial_s, nothing to
    queue behind or stream beside)."""
    fields = {"target": "Qwen/Qwen3-0.6B", "gpu": "H100-SXM-80GB", "tp": 1, "engine": "sglang",
              "engine_version": "0.5.12", "max_model_len": MAX_MODEL_LEN, "max_num_seqs": MAX_NUM_SEQS}
    for prompt in (16, 800):
        online = _simulate(fields, 0.2, prompt).spec.ttft_s.p50
        offline = _simulate({**fields, "offline": True}, 0.2, prompt).spec.ttft_s.p50
        assert online == pytest.approx(offline + 0.030, abs=2e-4), (prompt, online, offline)


# More load never lowers the median TTFT, and below saturation never the median TPOT: a larger arrival rate puts more
# requests in each step and in front of each arrival (and the API server is busier). The rates 4x apart draw other
# arrival times (same seed, another Poisson count), so the two medians are of different samples, a handful of requests
# at the lightest rates. At light load a request's TTFT is its prefill, the front end and the wait for the step it
# arrived in to end (vLLM V0, SGLang: a request received during a step joins the step after next: simulator/engine.py
# EngineConfig), so its median moves with the arrivals' phase by up to two decode steps: allowed, with 2% for the rest
# (DeepSeek-R1-Distill-Llama-8B on an L40S, vLLM 0.6.4, 200-token prompts: 12 requests at 1 req/s, median TTFT
# 69.3 ms; 65 at 4 req/s, 64.5 ms, with 22.5 ms steps; seed 4: 64.9 / 67.0 ms). TPOT is compared only where both
# runs sustain the load (see the module docstring); speculation's per-step acceptance draws are not coupled across
# rates, so method none only.
@budget(25)
@given(deployments(methods=("none",)), st.sampled_from((0.25, 1.0, 4.0)), st.sampled_from((200, 1000, 3000)))
def test_more_load_never_lowers_median_ttft_nor_tpot_below_saturation(fields, rate, prompt):
    light = accepted(None, _simulate, fields, rate, prompt).spec
    heavy = accepted("sim_rate", _simulate, fields, 4 * rate, prompt).spec
    if not light.completed or not heavy.completed:
        return
    phase = 2 * light.tpot_s.p50
    assert heavy.ttft_s.p50 >= light.ttft_s.p50 * 0.98 - phase, (fields, rate, prompt, light.ttft_s.p50,
                                                                  heavy.ttft_s.p50, phase)
    if light.sustains and heavy.sustains and not heavy.max_queue:
        assert heavy.tpot_s.p50 >= light.tpot_s.p50 * 0.98, (fields, rate, prompt, light.tpot_s.p50,
                                                              heavy.tpot_s.p50)



# One request at a time (a closed loop of one client: `vllm bench serve --max-concurrency 1`), the simulator steps
# exactly the decode steps the perf model prices: its median TPOT is the plain decode step at batch 1 over the
# request's mean context (prompt + output / 2: core.traffic.decode_context, what the plan's perf section prices), up to
# the context's growth over the request (linear in it: the mean is exact). (Poisson arrivals at a low rate are not one
# at a time: Llama-3.1-405B-FP8 on 2 MI300X takes 30 s for 200 tokens, so 0.05 req/s overlaps them, and under vLLM 0.6.4
# the second prompt stalls the first's decode: 148.2 ms against the 146.6 ms step, rightly.)
@budget(25)
@given(deployments(methods=("none",)), st.sampled_from((200, 1000, 3000)))
def test_the_simulator_at_one_request_steps_at_the_perf_models_batch_1_tpot(fields, prompt):
    run = accepted("sim_single", api.simulate, **fields, client_concurrency=1, num_requests=3, seed=1,
                   prompt_tokens=f"p50={prompt},p99={prompt}", output_tokens="p50=200,p99=200").spec
    if not run.completed:
        return
    _, _, plain = served(fields)
    expected = decode_step(plain, 1, prompt + 100).time_s
    assert run.tpot_s.p50 == pytest.approx(expected, rel=1e-3), (fields, prompt, run.tpot_s.p50, expected)
