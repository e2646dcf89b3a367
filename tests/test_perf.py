"""Performance model: step times worked out by hand on a GPU of round numbers, speculation economics,
and invariants."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsize.catalog import load_gpu, load_model
from specsize.catalog.gpus import load_efficiency
from specsize.core.memory import account
from specsize.core.perf import (Efficiency, acceptance_from_mean_length, build_costs, forward_time, model_cost,
                                spec_step_time, speedup_point, tokens_per_pass, uniform_step)
from specsize.core.specs import Deployment, EngineSettings, GpuSpec, SpeculativeConfig
from specsize.engines import resolve_profile
from specsize.planner.perf import Acceptance, speedup_table

ROUND_GPU = GpuSpec("round", "round", 80 * 2**30, memory_bandwidth_bytes_s=1e12, bf16_flops=1e15, fp8_flops=None,
                    interconnect_bytes_s=1e11)
IDEAL = Efficiency("ideal", memory=1.0, compute=1.0, step_overhead_s=0.0, spec_step_overhead_s=0.0,
                   draft_step_overhead_s=0.0, draft_setup_overhead_s=0.0, allreduce_latency_s=0.0)
PARAMS_1B = 1_235_814_400  # Llama-3.2-1B (tied embeddings): see test_weights


def cost_1b():
    return model_cost(load_model("meta-llama/Llama-3.2-1B-Instruct"), 1, "bfloat16", None)


def test_memory_bound_decode_by_hand():
    # batch 1, one token, 1,000 tokens of context: weights 1,235,814,400 x 2 B (the tied table is read as the
    # lm_head) + KV 1,000 x 32,768 B + activations 2 x 2048 x 2 B x 16 layers = 2,504,527,872 B at 1e12 B/s
    t = forward_time(cost_1b(), ROUND_GPU, IDEAL, batch=1, q=1, context=1000)
    assert t.bound == "memory"
    assert t.bytes == PARAMS_1B * 2 + 1000 * 32_768 + 2 * 2048 * 2 * 16
    assert t.time_s == pytest.approx(2_504_527_872 / 1e12, rel=1e-12)


def test_compute_bound_prefill_by_hand():
    # 4,096 tokens at once, no context. The lm_head (the tied 128,256 x 2,048 table: 262,668,288 params) scores
    # only the one sampled position: GEMM flops 2 x 4,096 x (1,235,814,400 - 262,668,288) + 2 x 262,668,288
    # = 7.9725e12 at 1e15 -> 7.9725 ms (the weights' 2.47e9 bytes take 2.47 ms); the activations
    # (4,096 x 2 x 2,048 x 2 B x 16 layers = 536,870,912 B) are their own memory-bound pass: 0.537 ms
    t = forward_time(cost_1b(), ROUND_GPU, IDEAL, batch=1, q=4096, context=0)
    assert t.bound == "compute"
    lm_head = 128_256 * 2048
    gemm = (2 * 4096 * (PARAMS_1B - lm_head) + 2 * lm_head) / 1e15
    assert t.time_s == pytest.approx(gemm + 4096 * 2 * 2048 * 2 * 16 / 1e12, rel=1e-12)


def test_overheads_add():
    eff = Efficiency("x", 1.0, 1.0, step_overhead_s=1e-3, spec_step_overhead_s=2e-4, draft_step_overhead_s=0,
                     draft_setup_overhead_s=0, allreduce_latency_s=0)
    base = forward_time(cost_1b(), ROUND_GPU, IDEAL, 1, 1, 0).time_s
    assert forward_time(cost_1b(), ROUND_GPU, eff, 1, 1, 0).time_s == pytest.approx(base + 1e-3)


def test_tokens_per_pass_formula():
    assert tokens_per_pass(0.0, 5) == 1.0
    assert tokens_per_pass(1.0, 5) == 6.0
    assert tokens_per_pass(0.6, 1) == pytest.approx(1.6)
    assert tokens_per_pass(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)


@given(st.floats(0.01, 0.99), st.integers(1, 12))
def test_mean_accepted_length_round_trip(a, k):
    assert acceptance_from_mean_length(tokens_per_pass(a, k), k) == pytest.approx(a, abs=1e-6)


def _deployment(method="draft_model", draft="meta-llama/Llama-3.2-1B-Instruct", k=4, gpu="H100-SXM-80GB"):
    spec = SpeculativeConfig(method, load_model(draft) if draft else None, k)
    return Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu(gpu), speculative=spec,
                      engine=EngineSettings(max_model_len=8192))


def test_acceptance_zero_never_speeds_up():
    d = _deployment()
    mem = account(d, resolve_profile())
    table = speedup_table(d, mem, load_efficiency(d.gpu), Acceptance(rate=0.0), [1, 8, 64, 256], [1, 4, 8], 2048)
    assert all(row.speedup <= 1 for row in table.rows)
    assert table.crossover_batch == {1: 1, 4: 1, 8: 1}


@settings(max_examples=30, deadline=None)
@given(st.floats(0.3, 0.95), st.integers(1, 8), st.sampled_from(["draft_model", "ngram", "eagle3"]))
def test_speedup_never_grows_with_batch_once_compute_bound(a, k, method):
    draft = {"draft_model": "meta-llama/Llama-3.2-1B-Instruct", "ngram": None,
             "eagle3": "sgl-project/SpecForge-llama3-8B-eagle3"}[method]
    d = _deployment(method, draft, k)
    mem = account(d, resolve_profile())
    costs = build_costs(d, load_efficiency(d.gpu), "bfloat16", None, 2)
    per_pass = tokens_per_pass(a, k)
    previous = None
    for b in [2 ** i for i in range(13)]:
        verify = forward_time(costs.target, costs.gpu, costs.eff, b, k + 1, 1024)
        decode = forward_time(costs.target, costs.gpu, costs.eff, b, 1, 1024)
        point = speedup_point(costs, b, 1024, per_pass, k)
        if verify.bound == "compute" and decode.bound == "compute":
            if previous is not None:
                assert point.speedup <= previous + 1e-9
            previous = point.speedup
    assert mem.kv_cache_tokens > 0


@settings(max_examples=30, deadline=None)
@given(st.floats(1e11, 1e13), st.floats(1.01, 4), st.integers(1, 512), st.integers(1, 32_000))
def test_more_bandwidth_never_slows_decode(bandwidth, factor, batch, context):
    slow = GpuSpec("a", "a", 1, bandwidth, 1e15, None, 1e11)
    fast = GpuSpec("b", "b", 1, bandwidth * factor, 1e15, None, 1e11)
    eff = Efficiency("x", 0.8, 0.6, 1e-3, 1e-4, 1e-4, 5e-4, 1e-5)
    c = cost_1b()
    assert forward_time(c, fast, eff, batch, 1, context).time_s <= forward_time(c, slow, eff, batch, 1, context).time_s


def test_moe_verification_touches_more_experts():
    # Mixtral: 8 experts top-2; one token touches 2, six tokens 8 x (1 - (6/8)^6) = 6.58 on average. Each extra token
    # also moves its activations, bf16, over 32 layers: the residual stream (2 x 4096) and the fused MoE's elementwise
    # kernels at TP 2 (2 experts x 3 x 7168 of the gated activation, 3 x 4096 of the weighted sum)
    c = model_cost(load_model("mistralai/Mixtral-8x7B-v0.1"), 2, "bfloat16", None)
    one = forward_time(c, ROUND_GPU, IDEAL, 1, 1, 0)
    six = forward_time(c, ROUND_GPU, IDEAL, 1, 6, 0)
    expert_share = c.moe_layers * c.expert_bytes
    activations = 2 * 5 * (2 * 4096 + 2 * 3 * 7168 + 3 * 4096) * 32
    assert six.bytes - one.bytes == pytest.approx(expert_share * (8 * (1 - 0.75 ** 6) - 2) + activations)


def test_ngram_step_has_no_drafter_forward():
    d = _deployment("ngram", None, 3)
    costs = build_costs(d, load_efficiency(d.gpu), "bfloat16", None, 2)
    # verification scores (and samples) k + 1 = 4 positions per sequence
    verify = uniform_step(costs.target_co, 8, 4, 1000, sampled=4).time_s
    assert spec_step_time(costs, 8, 1000) == pytest.approx(verify + costs.eff.spec_step_overhead_s
                                                           + 8 * costs.eff.ngram_per_seq_s)


def test_sglang_streams_fp8_experts_through_its_own_moe_kernels():
    # The Hopper terms were measured with vLLM's kernels: fp8 block-quantised experts at 0.538 of HBM
    # (efficiency.json, fitted on the kernel rows since stop 59). SGLang's profile puts them at 0.6 (AccountingProfile.moe_fp8_memory); bf16 experts and the
    # dense weights are untouched. By hand on an H100 (3.35e12 B/s): 1 / (3.35e12 x 0.538) and 1 / (3.35e12 x 0.6)
    # seconds per expert byte.
    from specsize.core.perf import coefficients, engine_kernels
    from specsize.core.specs import Quantization

    gpu = load_gpu("H100-SXM-80GB")
    eff = load_efficiency(gpu)
    assert eff.moe_fp8_memory == 0.538
    moe = load_model("Qwen/Qwen3-30B-A3B")
    fp8 = model_cost(moe, 1, "bfloat16", Quantization("fp8"))
    sglang = engine_kernels(eff, resolve_profile("sglang").moe_fp8_memory)
    assert coefficients(fp8, gpu, eff).inv_bandwidth_experts == pytest.approx(1 / (3.35e12 * 0.538))
    assert coefficients(fp8, gpu, sglang).inv_bandwidth_experts == pytest.approx(1 / (3.35e12 * 0.6))
    bf16 = model_cost(moe, 1, "bfloat16", None)
    assert coefficients(bf16, gpu, sglang) == coefficients(bf16, gpu, eff)
    assert coefficients(fp8, gpu, sglang).inv_bandwidth == coefficients(fp8, gpu, eff).inv_bandwidth
    assert resolve_profile("vllm").moe_fp8_memory == 0.0  # vLLM keeps the family's (measured) terms


def test_layers_a_checkpoint_keeps_in_bf16_multiply_at_the_bf16_peak():
    """Meta's Llama-3.1-405B FP8 keeps attention and the first and last layers' MLP in bf16: per TP-8 rank
    126 x (2304 x 16384 + 16384 x 2048) + 2 x (13312 x 16384 + 16384 x 6656) = 9,638,510,592 of the
    50,472,632,320 dense parameters (all but the embedding table), so 80.9% of the GEMM flops run at the fp8 peak."""
    from specsize.core.perf import coefficients
    from specsize.core.specs import Quantization
    from helpers import llama_405b_meta_fp8

    m = llama_405b_meta_fp8()
    meta = model_cost(m, 8, "bfloat16", m.quantization)
    assert meta.fp8_share == pytest.approx(1 - 9_638_510_592 / 50_472_632_320)
    whole = model_cost(m, 8, "bfloat16", Quantization("fp8"))
    assert whole.fp8_share == 1.0
    gpu = load_gpu("H100-SXM-80GB")
    eff = load_efficiency(gpu)
    per_flop = coefficients(meta, gpu, eff).inv_flops * eff.compute
    assert per_flop == pytest.approx(meta.fp8_share / gpu.fp8_flops + (1 - meta.fp8_share) / gpu.bf16_flops)
    assert coefficients(whole, gpu, eff).inv_flops * eff.compute == pytest.approx(1 / gpu.fp8_flops)


def test_acceptance_at_the_ends_of_the_mean_length_is_exact():
    """A mean accepted length of 1 is nothing accepted (check-live had shown 4.3e-19), k + 1 everything."""
    from specsize.core.speculation import acceptance_from_mean_length

    assert acceptance_from_mean_length(1.0, 3) == 0.0 and acceptance_from_mean_length(4.0, 3) == 1.0


def test_an_ngram_lookup_without_a_match_verifies_one_token():
    """vLLM's n-gram proposer proposes only where the prompt lookup finds a match (vllm/v1/spec_decode/ngram_proposer:
    no match, no draft tokens); that step verifies and emits one token. With proposals in half the steps, k = 3 and
    a = 0.6 per proposed token: tokens per pass 1 + 0.5 x (0.6 + 0.36 + 0.216) = 1.588 (vLLM's mean acceptance
    length, per proposal, stays 2.176), and a step verifies 1 + 0.5 x 3 = 2.5 positions per sequence on average."""
    half = replace(_deployment("ngram", None, 3), speculative=SpeculativeConfig("ngram", None, 3, proposal_rate=0.5))
    assert half.speculative.verified_per_sequence == 2.5
    costs = build_costs(half, load_efficiency(half.gpu), "bfloat16", None, 2)
    verify = uniform_step(costs.target_co, 8, 2.5, 1000, sampled=2.5).time_s
    assert spec_step_time(costs, 8, 1000) == pytest.approx(verify + costs.eff.spec_step_overhead_s
                                                           + 8 * costs.eff.ngram_per_seq_s)
    mem = account(half, resolve_profile())
    table = speedup_table(half, mem, load_efficiency(half.gpu), Acceptance(rate=0.6), [1, 64], [3], 1000)
    assert [row.tokens_per_pass for row in table.rows] == pytest.approx([1.588, 1.588])


@settings(max_examples=25, deadline=None)
@given(st.floats(0.05, 1.0), st.floats(0.05, 1.0), st.sampled_from([1, 16, 64, 256]), st.integers(1, 6))
def test_more_proposals_never_make_a_step_cheaper(low, high, batch, k):
    """More of the steps carrying a proposal means more positions verified: the step never gets cheaper."""
    low, high = sorted((low, high))
    steps = []
    for rate in (low, high):
        d = replace(_deployment("ngram", None, k), speculative=SpeculativeConfig("ngram", None, k, proposal_rate=rate))
        steps.append(spec_step_time(build_costs(d, load_efficiency(d.gpu), "bfloat16", None, 2), batch, 2048))
    assert steps[0] <= steps[1] + 1e-12


def test_a_prefill_of_thousands_of_chunks_is_priced_in_runs_close_to_chunk_by_chunk(monkeypatch):
    # a prompt of 500,000 tokens in chunks of 256 is 1,954 engine steps; priced in runs of chunks at their middle
    # chunk's context (64 priced steps here), the time stays within 0.5% of pricing every chunk: a step's time is
    # close to linear in its context (attention reads it, the GEMMs do not depend on it)
    import specsize.core.perf as perf_module
    from specsize.planner.perf import costs_for

    target = load_model("meta-llama/Llama-3.1-8B-Instruct")
    d = Deployment(target=target, gpu=load_gpu("H100-SXM-80GB"), tp=1,
                   speculative=SpeculativeConfig("draft_model", load_model("meta-llama/Llama-3.2-1B-Instruct"), 3),
                   engine=EngineSettings(max_model_len=524288))
    mem = account(d, resolve_profile())
    costs = costs_for(d, mem, load_efficiency(d.gpu), 3, d.speculative.tree)
    monkeypatch.setattr(perf_module, "PREFILL_STEPS_PRICED", 10**9)
    every = perf_module.prefill_time(costs, 500_000, 256)
    monkeypatch.setattr(perf_module, "PREFILL_STEPS_PRICED", 64)
    runs = perf_module.prefill_time(costs, 500_000, 256)
    assert runs == pytest.approx(every, rel=0.005)
    assert perf_module.prefill_time(costs, 300, 256) == pytest.approx(
        sum(perf_module.uniform_step(c, 1, size, start + size // 2).time_s
            for c in (costs.target_co, costs.draft_co) for start, size in ((0, 256), (256, 44))), rel=1e-12)


def test_a_plan_with_thousands_of_images_per_request_answers():
    # 10,000 images of 1,048,576 tokens in every prompt (each field within its range): the TTFT of each ranked fix
    # priced its prefill chunk by chunk, 1.2 million steps each, and the plan had not answered after 100 s
    import subprocess
    import sys

    code = ("import specsize; r = specsize.plan(target='meta-llama/Llama-3.1-8B-Instruct', "
            "draft='meta-llama/Llama-3.2-1B-Instruct', method='draft_model', num_speculative_tokens=3, "
            "acceptance_rate=0.7, gpu='H100-SXM-80GB', concurrency=16, images_per_request=10000, "
            "image_tokens=1048576); print(r.verdict.verdict)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "does_not_fit", done.stderr


def test_an_sglang_tree_verifies_its_num_draft_tokens_root_included():
    # SGLang's --speculative-num-draft-tokens N counts the tree's nodes with the last verified token as its root
    # (steps 3 at top-k 1 is N = 4), so a pass gains at most N tokens and verification scores N positions; the plan
    # had priced N + 1 of each (3 tokens a pass beside the emitted N = 2, which verifies the root and one draft)
    import specsize

    def planned(n: int):
        return specsize.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine="sglang",
                             method="eagle3", num_speculative_tokens=3, acceptance_rate=0.7, tree_topk=4,
                             num_draft_tokens=n)

    # N = 13 = 3 x 4 + 1 holds the full top-4 tree: each depth accepts with 1 - 0.3^4 = 0.99190, three depths give
    # 1 + 0.99190 + 0.99190^2 + 0.99190^3 = 3.95166. N = 8 holds 7 draft nodes, 7/3 a depth: 1 - 0.3^(7/3) = 0.93975,
    # 1 + 0.93975 + 0.93975^2 + 0.93975^3 = 3.65281. N = 2: the root and one draft, 1 + 0.7 = 1.7 tokens a pass.
    assert planned(2).perf.tokens_per_pass == pytest.approx(1.7)
    assert planned(8).perf.tokens_per_pass == pytest.approx(3.65281, abs=1e-5)
    assert planned(13).perf.tokens_per_pass == pytest.approx(3.95166, abs=1e-5)
    from specsize.planner.perf import costs_for

    r = planned(2)
    costs = costs_for(r.deployment, r.memory, load_efficiency(r.deployment.gpu), 3, r.deployment.speculative.tree)
    assert costs.verify_width == 2


def test_the_crossover_is_the_smallest_batch_that_does_not_pay_where_the_speed_up_dips_and_recovers():
    # n-gram with k = 7 at a = 0.5 on an L4 (AWQ gpt-oss-20b, no step floor): the speed-up is below 1 at a few
    # sequences, above it around 32 and below again later; the bisection over [1, max_num_seqs] had reported 79 beside
    # a speed-up of 0.9996 at 8. The crossover is the smallest batch below 1, the speed-up table's rows' own reading.
    import specsize

    common = dict(target="openai/gpt-oss-20b", method="ngram", num_speculative_tokens=7, acceptance_rate=0.5,
                  gpu="L4-24GB", quantization="awq", step_overhead_ms=0)
    perf = specsize.plan(concurrency=8, **common).perf
    table = specsize.speedup(batch_sizes=tuple(range(1, 81)), **common)
    rows = table.drafters[0].table.rows
    first = next(r.batch_size for r in rows if r.speedup < 1)
    assert perf.speedup < 1 and perf.crossover_batch == first
    assert all(r.speedup >= 1 for r in rows if r.batch_size < first)
