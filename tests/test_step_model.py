"""The per-operation step-time model (issue #11): each term worked out by hand on a GPU of round numbers, and the
invariants the simulator and the speed-up tables rely on."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsize.catalog import load_gpu, load_model
from specsize.catalog.gpus import load_efficiency
from specsize.core.perf import (Efficiency, build_costs, coefficients, forward_time, model_cost, speedup_point,
                               step_time, uniform_step)
from specsize.core.specs import Deployment, EngineSettings, GpuSpec, Quantization, SpeculativeConfig
from specsize.simulator.engine import EngineConfig, simulate
from specsize.simulator.workload import Requests

ROUND_GPU = GpuSpec("round", "round", 80 * 2**30, memory_bandwidth_bytes_s=1e12, bf16_flops=1e15, fp8_flops=None,
                    interconnect_bytes_s=1e11)
IDEAL = Efficiency("ideal", memory=1.0, compute=1.0, step_overhead_s=0.0, spec_step_overhead_s=0.0,
                   draft_step_overhead_s=0.0, draft_setup_overhead_s=0.0, allreduce_latency_s=0.0)
LM_HEAD_1B = 128_256 * 2048  # Llama-3.2-1B's tied table, read as its lm_head
PARAMS_1B = 1_235_814_400


def cost_1b(tp=1):
    return model_cost(load_model("meta-llama/Llama-3.2-1B-Instruct"), tp, "bfloat16", None)


def test_all_reduce_by_hand():
    # TP 4, 16 layers, 2 all-reduces each. Latency 10 us + 1 us per GPU beyond 2 = 12 us; the ring moves
    # 2 (TP-1)/TP = 1.5 x the message (hidden 2048 x 2 B per token) at half the 1e11 B/s link:
    # 32 x 12 us = 384 us, and per token 32 x 2048 x 2 x 1.5 / 5e10 = 3.93216 us; the ideal baseline has no
    # latency and the whole link (per token 32 x 2048 x 2 x 1.5 / 1e11 = 1.96608 us)
    eff = replace(IDEAL, allreduce_latency_s=1e-5, allreduce_latency_per_gpu_s=1e-6, allreduce_bus_fraction=0.5)
    for tokens in (1, 64):
        with_comm = forward_time(cost_1b(4), ROUND_GPU, eff, tokens, 1, 0).time_s
        ideal = forward_time(cost_1b(4), ROUND_GPU, IDEAL, tokens, 1, 0).time_s
        assert with_comm - ideal == pytest.approx(32 * 12e-6 + tokens * (3.93216e-6 - 1.96608e-6), rel=1e-9)


def test_gemm_efficiency_by_tokens_by_hand():
    # eff_compute(T) = T / (T + 100): at 4,096 tokens the GEMM flops (2 x 4,096 x the 973,146,112 params that
    # multiply every token + 2 x the lm_head once) run at 4,096 / 4,196 of peak
    eff = replace(IDEAL, gemm_half_tokens=100.0)
    gemm = 2 * 4096 * (PARAMS_1B - LM_HEAD_1B) + 2 * LM_HEAD_1B
    act = 4096 * 2 * 2048 * 2 * 16 / 1e12
    t = forward_time(cost_1b(), ROUND_GPU, eff, 1, 4096, 0).time_s
    assert t == pytest.approx(gemm / 1e15 * 4196 / 4096 + act, rel=1e-12)
    # at one token the weights' bytes dominate, whatever the efficiency curve: 2.47 GB at 1e12 B/s
    one = forward_time(cost_1b(), ROUND_GPU, eff, 1, 1, 0).time_s
    assert one == pytest.approx((PARAMS_1B * 2 + 2 * 2048 * 2 * 16) / 1e12, rel=1e-12)
    # at 400 tokens: compute 2 x 400 x 973,146,112 (+ the lm_head) x 500 / 400 at 1e15 = 0.973 ms > 2.47 ms? no:
    # the weights still dominate (2.47 ms), so the step is memory-bound
    mid = forward_time(cost_1b(), ROUND_GPU, eff, 1, 400, 0).time_s
    assert mid == pytest.approx((PARAMS_1B * 2 + 400 * 2 * 2048 * 2 * 16) / 1e12, rel=1e-12)


def test_sampler_and_cpu_per_sequence_by_hand():
    # 8 sequences decode: 6 fp32 passes over 8 x 128,256 logits at 1e12 B/s, and 10 us of CPU per sequence
    eff = replace(IDEAL, sampler_passes=6.0, cpu_per_seq_s=1e-5)
    base = forward_time(cost_1b(), ROUND_GPU, IDEAL, 8, 1, 0).time_s
    t = forward_time(cost_1b(), ROUND_GPU, eff, 8, 1, 0).time_s
    assert t - base == pytest.approx(8 * 6 * 4 * 128_256 / 1e12 + 8 * 1e-5, rel=1e-9)


def test_api_server_floors_the_step():
    # 1 ms of API-server work per sequence per step: 64 sequences cannot step faster than 64 ms
    eff = replace(IDEAL, api_per_seq_s=1e-3)
    assert forward_time(cost_1b(), ROUND_GPU, eff, 64, 1, 0).time_s == pytest.approx(0.064)
    assert forward_time(cost_1b(), ROUND_GPU, eff, 1, 1, 0).time_s == pytest.approx(
        forward_time(cost_1b(), ROUND_GPU, IDEAL, 1, 1, 0).time_s)


def test_fixed_cost_per_gemm_and_eager_launches():
    # 16 layers x 4 GEMMs x 3 us, and without CUDA graphs 40 us more per layer
    eff = replace(IDEAL, gemm_fixed_s=3e-6, eager_layer_s=4e-5)
    base = forward_time(cost_1b(), ROUND_GPU, IDEAL, 1, 1, 0).time_s
    graphs = coefficients(cost_1b(), ROUND_GPU, eff)
    eager = coefficients(cost_1b(), ROUND_GPU, eff, eager=True)
    assert graphs.fixed_s == pytest.approx(16 * 4 * 3e-6)
    assert eager.fixed_s == pytest.approx(16 * (4 * 3e-6 + 4e-5))
    assert forward_time(cost_1b(), ROUND_GPU, eff, 1, 1, 0).time_s == pytest.approx(base + 16 * 4 * 3e-6)


def test_mxfp4_on_hopper_computes_at_bf16():
    # gpt-oss's MXFP4 experts are dequantised to bf16 in the GEMM before Blackwell: the bf16 peak, not fp8's
    m = load_model("openai/gpt-oss-20b")
    c = model_cost(m, 1, "bfloat16", None)
    assert c.low_bit and not c.fp8_compute
    hopper, blackwell = load_gpu("H100-SXM-80GB"), load_gpu("B200-180GB")
    assert coefficients(c, hopper, IDEAL).inv_flops == pytest.approx(1 / hopper.bf16_flops)
    assert coefficients(c, blackwell, IDEAL).inv_flops == pytest.approx(1 / blackwell.fp8_flops)


def test_fp4_formats_run_native_on_blackwell_int4_stays_dequantised():
    # NVFP4 and MXFP4 are FP4 formats: Blackwell's FP4 tensor cores run them at (at least) the fp8 peak and stream
    # the experts as dense ones (moe_memory); before Blackwell they are dequantised like int4 (w4a16: bf16 peak,
    # low_bit_memory). The fp8 block-quantised experts' own efficiency (moe_fp8_memory) never applies to them.
    from specsize.core.specs import Quantization

    m = load_model("Qwen/Qwen3-30B-A3B")
    hopper, blackwell = load_gpu("H100-SXM-80GB"), load_gpu("B200-180GB")
    eff = replace(IDEAL, moe_memory=0.8, moe_fp8_memory=0.2, low_bit_memory=0.5)
    nvfp4 = model_cost(m, 1, "bfloat16", Quantization("nvfp4"))
    assert nvfp4.low_bit and nvfp4.fp4 and not nvfp4.fp8_compute
    on_b200 = coefficients(nvfp4, blackwell, eff)
    assert on_b200.inv_flops == pytest.approx(1 / blackwell.fp8_flops)
    assert on_b200.inv_bandwidth_experts == pytest.approx(1 / (blackwell.memory_bandwidth_bytes_s * 0.8))
    on_h100 = coefficients(nvfp4, hopper, eff)
    assert on_h100.inv_flops == pytest.approx(1 / hopper.bf16_flops)
    assert on_h100.inv_bandwidth_experts == pytest.approx(1 / (hopper.memory_bandwidth_bytes_s * 0.5))
    int4 = model_cost(m, 1, "bfloat16", Quantization("int4", group_size=128))
    assert int4.low_bit and not int4.fp4
    assert coefficients(int4, blackwell, eff).inv_flops == pytest.approx(1 / blackwell.bf16_flops)
    fp8 = model_cost(m, 1, "bfloat16", Quantization("fp8", block=(128, 128)))
    assert coefficients(fp8, hopper, eff).inv_bandwidth_experts == pytest.approx(
        1 / (hopper.memory_bandwidth_bytes_s * 0.2))


def test_dequantising_kernels_have_their_own_small_batch_curve():
    # int4 dense weights, 512 tokens, compute-bound on the round GPU (1 PFLOP/s): the dense GEMMs' time is
    # 2 x params x 512 / 1e15 x (512 + half) / 512, so moving the half point from 100 (the dense curve) to 10
    # (low_bit_half_tokens: Marlin-like kernels) saves 2 x params x 90 / 1e15 seconds
    from specsize.core.specs import Quantization

    c = model_cost(load_model("meta-llama/Llama-3.2-1B-Instruct"), 1, "bfloat16", Quantization("int4", group_size=128))
    assert c.low_bit and not c.low_bit_experts_only
    dense_curve = replace(IDEAL, gemm_half_tokens=100.0)
    own_curve = replace(IDEAL, gemm_half_tokens=100.0, low_bit_half_tokens=10.0)
    slow = forward_time(c, ROUND_GPU, dense_curve, 512, 1, 0)
    fast = forward_time(c, ROUND_GPU, own_curve, 512, 1, 0)
    assert slow.bound == fast.bound == "compute"
    assert slow.time_s - fast.time_s == pytest.approx(2 * c.dense_params * 90 / 1e15, rel=1e-9)


def _hopper(method="none", draft=None, k=0, tp=1):
    spec = SpeculativeConfig(method, load_model(draft) if draft else None, k)
    return Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("H100-SXM-80GB"),
                      speculative=spec, tp=tp, engine=EngineSettings(max_model_len=8192))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 512), st.integers(1, 512), st.integers(0, 8000), st.integers(0, 8000), st.sampled_from([1, 2, 8]))
def test_step_time_non_decreasing_in_batch_and_context(b1, b2, l1, l2, tp):
    d = _hopper(tp=tp)
    costs = build_costs(d, load_efficiency(d.gpu), "bfloat16", None, 2)
    co = costs.target_co
    from specsize.core.perf import uniform_step

    lo_b, hi_b = sorted((b1, b2))
    lo_l, hi_l = sorted((l1, l2))
    assert uniform_step(co, lo_b, 1, lo_l).time_s <= uniform_step(co, hi_b, 1, lo_l).time_s + 1e-15
    assert uniform_step(co, lo_b, 1, lo_l).time_s <= uniform_step(co, lo_b, 1, hi_l).time_s + 1e-15


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 512), st.integers(1, 8), st.floats(0.0, 0.99))
def test_speedup_never_above_tokens_per_pass(batch, k, a):
    from specsize.core.speculation import tokens_per_pass

    d = _hopper("draft_model", "meta-llama/Llama-3.2-1B-Instruct", k)
    costs = build_costs(d, load_efficiency(d.gpu), "bfloat16", None, 2)
    point = speedup_point(costs, batch, 1024, tokens_per_pass(a, k), k)
    assert point.speedup <= tokens_per_pass(a, k) + 1e-12


def _closed_loop_tpot(clients: int) -> float:
    d = _hopper()
    costs = build_costs(d, load_efficiency(d.gpu), "bfloat16", None, 2)
    cfg = EngineConfig(num_blocks=20_000, block_size=16, max_num_seqs=256, max_num_batched_tokens=8192, k=0,
                       target=costs.target_co)
    n = 4 * clients
    req = Requests(arrival_s=np.zeros(n), prompt_tokens=np.full(n, 500), output_tokens=np.full(n, 100),
                   acceptance=np.zeros(n), duration_s=0.0, clients=clients)
    r = simulate(cfg, req)
    assert r.finished.all()
    return float(np.median(r.tpot_s))


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 128), st.integers(1, 128))
def test_more_load_never_lowers_tpot_in_the_simulation(c1, c2):
    lo, hi = sorted((c1, c2))
    assert _closed_loop_tpot(lo) <= _closed_loop_tpot(hi) * (1 + 1e-9)


def test_closed_loop_keeps_the_clients_in_flight():
    # 2 clients, 6 identical requests: three waves of two; each next request is sent when an answer arrives
    d = _hopper()
    costs = build_costs(d, load_efficiency(d.gpu), "bfloat16", None, 2)
    # no API-server streaming work: the front-end latency stays 10 ms (it stretches with that work's busy share)
    cfg = EngineConfig(num_blocks=20_000, block_size=16, max_num_seqs=256, max_num_batched_tokens=8192, k=0,
                       target=replace(costs.target_co, api_per_seq_s=0.0), frontend_latency_s=0.01)
    req = Requests(arrival_s=np.zeros(6), prompt_tokens=np.full(6, 100), output_tokens=np.full(6, 10),
                   acceptance=np.zeros(6), duration_s=0.0, clients=2)
    r = simulate(cfg, req)
    assert r.finished.all()
    waves = np.unique(np.round(r.arrival_s, 9))
    assert len(waves) == 3 and waves[0] == 0
    # each wave is sent 10 ms (the front-end latency) after the previous one finishes
    finish = r.arrival_s + r.e2e_s - 0.01
    assert waves[1] == pytest.approx(finish[0] + 0.01)
    # the client sees the front-end latency in its TTFT
    assert (r.ttft_s >= 0.01).all()


def test_a_sequences_own_tokens_and_tree_siblings_route_alike_by_hand():
    # Mixtral: 8 experts top-2, each routed expert of a layer 3 x 4096 x 14336 x 2 B / TP 2. With a reuse of 0.5,
    # one sequence verifying 6 tokens draws 1 + 5 x 0.5 = 3.5 independent routings: 8 x (1 - 0.75^3.5) experts;
    # 6 sequences of one token each (decode) still draw 6: 8 x (1 - 0.75^6); a tree of 6 tokens over 3 positions
    # (siblings share a position) draws 1 + 2 x 0.5 = 2: 8 x (1 - 0.75^2) = 3.5
    from specsize.core.perf import uniform_step

    c = model_cost(load_model("mistralai/Mixtral-8x7B-v0.1"), 2, "bfloat16", None)
    co = coefficients(c, ROUND_GPU, replace(IDEAL, moe_seq_reuse=0.5), overhead=False)
    expert = c.moe_layers * c.expert_bytes
    dense = uniform_step(co, 1, 6, 0).bytes - 8 * (1 - 0.75 ** 3.5) * expert
    assert uniform_step(co, 6, 1, 0).bytes == pytest.approx(dense + 8 * (1 - 0.75 ** 6) * expert)
    assert uniform_step(co, 1, 6, 0, positions=3).bytes == pytest.approx(dense + 3.5 * expert)
    # without reuse (the pure roofline) the 6 tokens are 6 independent draws, as 6 sequences
    plain = coefficients(c, ROUND_GPU, IDEAL, overhead=False)
    assert uniform_step(plain, 1, 6, 0).bytes == pytest.approx(uniform_step(plain, 6, 1, 0).bytes)


def test_tp_handover_and_draft_step_costs_by_hand():
    # EAGLE-3 (k = 3) at TP 2 in an engine that hands over through the host (SGLang): the step pays the 3.5 ms
    # handover once and 0.5 ms on each of the 3 drafter forwards: 3.5 + 3 x 0.5 = 5 ms more than without them; at
    # TP 1 neither; an n-gram step (no drafter model) neither at any TP; nor an engine without the handover (vLLM)
    from specsize.catalog.configs import standard_head
    from specsize.core.perf import spec_step_time

    target = load_model("meta-llama/Llama-3.1-8B-Instruct")
    costly = replace(IDEAL, spec_step_tp_s=3.5e-3, draft_step_tp_s=5e-4)
    for method, tp, handover, extra in (("eagle3", 2, True, 5e-3), ("eagle3", 1, True, 0.0),
                                        ("ngram", 2, True, 0.0), ("eagle3", 2, False, 0.0)):
        spec = SpeculativeConfig(method, standard_head(target, method, 3) if method != "ngram" else None, 3)
        d = Deployment(target=target, gpu=ROUND_GPU, speculative=spec, tp=tp, engine=EngineSettings(max_model_len=8192))
        with_costs = spec_step_time(build_costs(d, costly, "bfloat16", None, 2, host_handover=handover), 4, 500)
        without = spec_step_time(build_costs(d, IDEAL, "bfloat16", None, 2, host_handover=handover), 4, 500)
        assert with_costs - without == pytest.approx(extra, abs=1e-12)


def test_mxfp4_expert_padding_is_read_with_the_expert_not_every_step_by_hand():
    # gpt-oss-120b at TP 1: 36 MoE layers of 128 experts, hidden 2880, expert intermediate 2880, mxfp4 experts
    # padded by vLLM to hidden 3072 (a multiple of 256) and intermediate 2944 (a multiple of 128). One expert:
    # gate/up 2 x 2944 x 3072 and down 3072 x 2944 values at 4.25 bits (4-bit values + one e8m0 scale per 32),
    # plus bf16 biases 2 x 2944 + 3072: (3 x 2944 x 3072) x 17 / 32 + (5888 + 3072) x 2 = 14,431,488 + 17,920
    expert = 3 * 2944 * 3072 * 17 // 32 + (2 * 2944 + 3072) * 2
    c = model_cost(load_model("openai/gpt-oss-120b"), 1, "bfloat16", None)
    assert c.expert_bytes == expert
    # what every step reads whatever the routing: the bf16 attention (q 2880->4096, k and v 2880->512, o
    # 4096->2880, with biases, and 64 sinks), the lm_head (201,088 x 2880), norms and routers - about 3.1 GB, not
    # the 5.5 GB of padding on top (36 x 128 x padded-minus-unpadded experts) it used to carry
    attention = 36 * ((2880 * 4096 + 4096) + 2 * (2880 * 512 + 512) + (4096 * 2880 + 2880) + 64) * 2
    lm_head = 201_088 * 2880 * 2
    assert c.dense_bytes == pytest.approx(attention + lm_head, rel=0.02)


def test_catalog_step_times_reproduce_the_measured_kernel_sums():
    # bench/data/kernel_steps.jsonl: decode steps summed from per-operation times measured with vLLM's kernels
    # (aiconfigurator-core 0.12.0's tables, tools/distill_kernel_steps.py). The catalog's Hopper terms were fitted
    # on them (bench/fit_kernels.py); a point of a held-out model, Qwen3-32B at TP 1 on an H100, batch 64 over
    # 2,048 tokens, measured 38.6 ms of kernels, lands within 15% and the whole held-out H100 decode grid within
    # 20% at its median
    import json
    import math
    import statistics
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "data" / "kernel_steps.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    gpu = load_gpu("H100-SXM-80GB")
    eff = replace(load_efficiency(gpu), sampler_passes=0.0)
    cost = model_cost(load_model("Qwen/Qwen3-32B"), 1, "bfloat16", None)
    co = coefficients(cost, gpu, eff, overhead=False)
    points = [r for r in rows if r["model"] == "Qwen/Qwen3-32B" and r["quantization"] is None and r["tp"] == 1
              and r["gpu"] == "H100-SXM-80GB" and r["kind"] == "decode"]
    assert points
    errors = []
    from specsize.core.perf import uniform_step
    for r in points:
        predicted = uniform_step(co, r["batch"], 1, r["context"]).time_s
        errors.append(abs(math.log(predicted / (r["ms"] / 1e3))))
        if (r["batch"], r["context"]) == (64, 2048):
            assert r["ms"] == pytest.approx(38.6, abs=0.5)
            assert predicted == pytest.approx(r["ms"] / 1e3, rel=0.15)
    assert statistics.median(errors) < math.log(1.2)


def test_engine_release_scales_its_own_host_and_api_server_costs():
    # the catalog's host and API-server terms are vLLM 0.10-0.11's; a release profile scales them: 0.22 (InferenceX's
    # gpt-oss-120b server streams 512 requests at a 22.5 ms TPOT) takes api_cost_scale of the API server's
    # per-token floor and front-end terms, 0.11 takes the catalog's own. The GPU terms are the same.
    from specsize.core.memory import account
    from specsize.engines.registry import resolve_profile
    from specsize.planner.perf import costs_for
    from specsize.core.speculation import Tree

    gpu = load_gpu("H100-SXM-80GB")
    eff = load_efficiency(gpu)
    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=gpu, speculative=SpeculativeConfig(),
                   tp=1, engine=EngineSettings(max_model_len=8192))
    old, new = resolve_profile("vllm", "0.11"), resolve_profile("vllm", "0.22")
    assert old.api_cost_scale == 1.0 and 0 < new.api_cost_scale < 1
    c_old = costs_for(d, account(d, old), eff, 0, Tree())
    c_new = costs_for(d, account(d, new), eff, 0, Tree())
    assert c_old.target_co.api_per_seq_s == eff.api_per_seq_s
    assert c_new.target_co.api_per_seq_s == pytest.approx(eff.api_per_seq_s * new.api_cost_scale)
    assert c_new.eff.frontend_latency_s == pytest.approx(eff.frontend_latency_s * new.api_cost_scale)
    assert c_new.target_co.inv_bandwidth == c_old.target_co.inv_bandwidth
    # at 512 sequences the floor binds on 0.11 (512 x the per-token cost) and not on 0.22's lighter front end
    from specsize.core.perf import uniform_step
    assert uniform_step(c_old.target_co, 512, 1, 500).time_s == pytest.approx(512 * eff.api_per_seq_s)
    assert uniform_step(c_new.target_co, 512, 1, 500).time_s < 512 * eff.api_per_seq_s


def test_async_scheduling_hides_the_host_step_by_hand():
    # Llama-3.2-1B decoding one sequence over 1,000 tokens of context on the round GPU: the forward reads the weights,
    # one token's activations and 1,000 tokens of KV (32,768 B each) at 1e12 B/s = 2.5045 ms. Per step the engine
    # core works 10 us per sequence (scheduling, inputs, outputs) and the forward has 1 ms of fixed cost. Synchronous
    # (vLLM before 0.14) all three add; with async scheduling (0.14 on) the engine core prepares the next step while
    # the GPU runs this one: the step is the longer of forward and per-sequence work, plus the fixed cost.
    from specsize.core.perf import step_time

    eff = replace(IDEAL, step_overhead_s=1e-3, cpu_per_seq_s=1e-5)
    gpu = (2_471_628_800 + 2 * 2048 * 2 * 16 + 32_768 * 1000) / 1e12
    sync = coefficients(cost_1b(), ROUND_GPU, eff)
    overlapped = coefficients(cost_1b(), ROUND_GPU, eff, host_overlapped=True)
    assert step_time(sync, 1, 1000, (), 1000)[0] == pytest.approx(gpu + 1.01e-3, rel=1e-9)
    assert step_time(overlapped, 1, 1000, (), 1000)[0] == pytest.approx(gpu + 1e-3, rel=1e-9)
    # per-sequence work longer than the forward sets the step: 2,000 sequences (20 ms) over a 2,000-token decode
    # whose forward is about 4.9 ms (2 x 1.24e9 parameters x 2,000 tokens at 1e15 FLOP/s)
    many = step_time(overlapped, 2000, 0, (), 0, seqs=2000)[0]
    assert many == pytest.approx(2000 * 1e-5 + 1e-3, rel=1e-9)


def test_async_scheduling_by_release_and_drafter():
    # vLLM 0.14 turned async scheduling on by default (PR 27614), with speculation only for EAGLE / MTP drafters
    # (PR 31998): an n-gram server steps synchronously while its no-speculation baseline does not
    from specsize.core.memory import account
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree, costs_for

    def costs(version, method):
        d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("H100-SXM-80GB"),
                       speculative=SpeculativeConfig(method, None, 3) if method != "none" else SpeculativeConfig())
        mem = account(d, resolve_profile("vllm", version))
        return costs_for(d, mem, load_efficiency(d.gpu), 3 if method != "none" else 0, Tree())

    for version, method, target, plain in (("0.13", "none", False, False), ("0.14", "none", True, True),
                                           ("0.14", "ngram", False, True), ("0.32", "ngram", False, True)):
        c = costs(version, method)
        assert (c.target_co.host_overlapped, c.plain_co.host_overlapped) == (target, plain), (version, method)
    assert resolve_profile("sglang").async_scheduling is False  # its overlap scheduler is inside its fitted terms


def test_scheduled_ahead_by_release_and_drafter():
    # steps formed while the last runs: vLLM V1's async scheduling (0.14 on; with speculation only for EAGLE / MTP)
    # and SGLang's overlap scheduler (not with its spec v1 worker; its spec v2 worker, 0.5.11 on, keeps it for
    # a chain, 0.5.14 on for every drafter); not V0's asynchronous
    # output processing, which schedules after the step it overlaps
    from specsize.core.memory import account
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree
    from specsize.planner.simulate import engine_config

    target = load_model("meta-llama/Llama-3.1-8B-Instruct")
    head = load_model("sgl-project/SpecForge-llama3-8B-eagle3")
    cases = (("vllm", "0.6.4", "none", None, False), ("vllm", "0.13", "none", None, False),
             ("vllm", "0.14", "none", None, True), ("vllm", "0.32", "ngram", None, False),
             ("vllm", "0.32", "eagle3", head, True), ("sglang", None, "none", None, True),
             ("sglang", "0.5.10", "EAGLE3", head, False), ("sglang", "0.5.11", "EAGLE3", head, True),
             ("sglang", None, "EAGLE3", head, True), ("sglang", "0.5.12", "EAGLE3 tree", head, False),
             ("sglang", "0.5.13", "EAGLE3 tree", head, True), ("sglang", "0.5.13", "NGRAM", None, False),
             ("sglang", None, "EAGLE3 tree", head, True), ("sglang", None, "NGRAM", None, True))
    for engine, version, method, draft, ahead in cases:
        # SGLang 0.5.11 - 0.5.12 run a chain (top-k 1) on the spec v2 worker, inside the overlap scheduler, a tree
        # (top-k 4) on spec v1 without it; 0.5.13 a tree on spec v2 too, while n-gram turns it off (arg_groups/
        # speculative_hook.py _handle_ngram: disable_overlap_schedule = True); 0.5.14 on n-gram keeps it too
        # ("speculative decoding always runs the V2 worker"; _handle_ngram no longer turns it off)
        tree = Tree(topk=4, num_draft_tokens=8) if method.endswith("tree") else Tree()
        method = method.split()[0]
        d = Deployment(target=target, gpu=load_gpu("H100-SXM-80GB"), engine=EngineSettings(max_model_len=8192),
                       speculative=SpeculativeConfig(method, draft, 3) if method != "none" else SpeculativeConfig())
        cfg = engine_config(d, account(d, resolve_profile(engine, version)), load_efficiency(d.gpu), tree)
        assert cfg.scheduled_ahead is ahead, (engine, version, method, tree)


def test_v0_async_output_processing_never_with_speculation():
    # vLLM V0 (0.6.0 on) processes step N's outputs while step N + 1 runs (async output processing, PR 7049), but
    # not with speculative decoding ("Async output processing is not supported with speculative decoding
    # currently"): the baseline overlaps its host work, every drafter's server, EAGLE's included, does not
    from specsize.core.memory import account
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree, costs_for

    target = load_model("meta-llama/Llama-3.1-8B-Instruct")
    for method, draft in (("ngram", None), ("eagle3", load_model("sgl-project/SpecForge-llama3-8B-eagle3")),
                          ("draft_model", load_model("meta-llama/Llama-3.2-1B-Instruct"))):
        d = Deployment(target=target, gpu=load_gpu("H100-SXM-80GB"), speculative=SpeculativeConfig(method, draft, 3),
                       engine=EngineSettings(max_model_len=8192))
        c = costs_for(d, account(d, resolve_profile("vllm", "0.6.4")), load_efficiency(d.gpu), 3, Tree())
        assert (c.target_co.host_overlapped, c.plain_co.host_overlapped) == (False, True), method


def _v0_costs(version="0.6.4", eager=False, k=5):
    from specsize.core.memory import account
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree, costs_for

    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("A100-80GB"),
                   speculative=SpeculativeConfig("ngram", None, k), engine=EngineSettings(max_model_len=4096,
                                                                                          enforce_eager=eager))
    return costs_for(d, account(d, resolve_profile("vllm", version)), load_efficiency(d.gpu), k, Tree())


def test_v0_batch_expansion_prices_each_extra_query_by_hand():
    # V0 scores k drafts per sequence by batch expansion: k + 1 queries per sequence, each prepared as a sequence
    # (Efficiency.cpu_per_seq_s) and each extra one costing spec_expansion_query_s more; V1 (and V0 with
    # --enforce-eager, whose multi-query scorer avoids it) one query per sequence. At batch 32 and k = 5 the
    # verification pass grows by 32 x 5 x (58 + 10) us = 10.88 ms - vllm-project/vllm PR 5691 measured 10.9 ms
    # (36.4 - 25.5 ms, Llama-7B on an A100, CUDA graphs) between the two scorers
    from specsize.core.perf import uniform_step

    c = _v0_costs()
    assert c.expansion_query_s == pytest.approx(58e-6)
    assert _v0_costs("0.11").expansion_query_s == 0.0 and _v0_costs(eager=True).expansion_query_s == 0.0
    co = c.target_co
    assert co.cpu_per_seq_s == pytest.approx(1e-5) and not co.host_overlapped
    one = uniform_step(co, 32, 6, 300, sampled=6).time_s
    expanded = uniform_step(co, 32, 6, 300, sampled=6, expansion_query_s=c.expansion_query_s).time_s
    assert expanded - one == pytest.approx(32 * 5 * (58e-6 + 1e-5), rel=1e-9)
    assert expanded - one == pytest.approx(36.4e-3 - 25.5e-3, rel=0.01)


def test_v0_ngram_proposer_prices_its_per_sequence_host_time_by_hand():
    # vLLM V0's n-gram proposer looks up one sequence at a time: through small GPU kernels and device syncs before
    # vllm-project/vllm PR 9333 (0.6.0-0.6.3: 0.3 ms per sequence, bench/ngram_proposer_cost.py), on the CPU from
    # 0.6.4 (0.15 ms: the PR's own timings halve it); V1 keeps the family's 20 us. A speculative step at batch 32
    # grows by 32 x (0.3 ms - 20 us) = 8.96 ms from V1's lookup to 0.6.0's, everything else held equal
    from specsize.core.perf import spec_step_time

    early, late, v1 = _v0_costs("0.6"), _v0_costs("0.6.4"), _v0_costs("0.11")
    assert (early.eff.ngram_per_seq_s, late.eff.ngram_per_seq_s, v1.eff.ngram_per_seq_s) == pytest.approx(
        (3e-4, 1.5e-4, 2e-5))
    same_v1 = replace(early, eff=replace(early.eff, ngram_per_seq_s=2e-5))
    assert spec_step_time(early, 32, 1000) - spec_step_time(same_v1, 32, 1000) == pytest.approx(32 * 2.8e-4, rel=1e-9)
    # a drafter that is a model never pays it
    c = _draft_model_costs("0.6", 4096)
    assert spec_step_time(c, 32, 1000) == pytest.approx(
        spec_step_time(replace(c, eff=replace(c.eff, ngram_per_seq_s=0.0)), 32, 1000), rel=1e-12)


def _draft_model_costs(version: str, max_model_len: int):
    """SpecCosts of Llama-3.1-8B with a Llama-3.2-1B draft model (k = 4) on an A100 under a vLLM release."""
    from specsize.core.memory import account
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree, costs_for

    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("A100-80GB"),
                   speculative=SpeculativeConfig("draft_model", load_model("meta-llama/Llama-3.2-1B-Instruct"), 4),
                   engine=EngineSettings(max_model_len=max_model_len))
    return costs_for(d, account(d, resolve_profile("vllm", version)), load_efficiency(d.gpu), 4, Tree())


def test_v1_ngram_lookup_scans_each_history_by_hand():
    # vLLM V1's lookup scans every running sequence's history each speculative step: 1.06 ns per token (vllm-project/
    # vllm PR 56732: 70.28 ms over 512 x 129,536 tokens, one thread). At batch 64 and 33,000 tokens of context a step
    # grows by 64 x 33,000 x 1.06 ns = 2.23872 ms; V0's proposer (priced per sequence) and a model drafter pay none
    from specsize.core.perf import spec_step_time

    v1, v0 = _v0_costs("0.11"), _v0_costs("0.6.4")
    assert v1.eff.ngram_scan_per_token_s == pytest.approx(1.06e-9) and v0.eff.ngram_scan_per_token_s == 0.0
    assert 70.28e-3 / (512 * 129_536) == pytest.approx(1.06e-9, rel=0.01)
    none = replace(v1, eff=replace(v1.eff, ngram_scan_per_token_s=0.0))
    assert spec_step_time(v1, 64, 33_000) - spec_step_time(none, 64, 33_000) == pytest.approx(2.23872e-3, rel=1e-9)
    c = _draft_model_costs("0.11", 40_000)
    assert spec_step_time(c, 64, 33_000) == pytest.approx(
        spec_step_time(replace(c, eff=replace(c.eff, ngram_scan_per_token_s=0.0)), 64, 33_000), rel=1e-12)


def test_v0_processes_a_speculative_steps_tokens_after_it_by_hand():
    # vLLM V0 processes each emitted token in its engine process (append, detokenise, stop checks, the request's
    # output): 50 us a token (issue 6913 timed 106 us in 0.5.3). Without speculation the asynchronous output
    # processing overlaps it with the next step; with speculation (not supported there) it follows the step: at
    # batch 32 a sequence's TPOT grows by 32 x 50 us = 1.6 ms whatever the tokens per pass (32 x T tokens, T each).
    # V1 (detokenised in another process) and V0 without speculation pay nothing after the step
    from specsize.core.perf import spec_tpot, speedup_point

    c, v1 = _v0_costs("0.6.4"), _v0_costs("0.11")
    assert (c.serial_output_s, v1.serial_output_s) == (pytest.approx(5e-5), 0.0)
    none = replace(c, serial_output_s=0.0)
    for per_pass in (1.0, 2.5, 4.0):
        assert spec_tpot(c, 32, 1000, per_pass) - spec_tpot(none, 32, 1000, per_pass) == pytest.approx(1.6e-3)
    point, without = speedup_point(c, 32, 1000, 2.5, 5), speedup_point(none, 32, 1000, 2.5, 5)
    assert point.tpot_s - without.tpot_s == pytest.approx(1.6e-3) and point.tpot_s_no_spec == without.tpot_s_no_spec
    from specsize.core.memory import account
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree, costs_for

    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("A100-80GB"),
                   engine=EngineSettings(max_model_len=4096))
    assert costs_for(d, account(d, resolve_profile("vllm", "0.6.4")), load_efficiency(d.gpu), 0,
                     Tree()).serial_output_s == 0.0


def test_simulator_prices_batch_expansion_on_decoding_sequences_only():
    # the simulator's step: with expansion, each decoding sequence's k extra queries add (expansion_query_s +
    # cpu_per_seq_s) each; a prefill-only step is untouched. Two runs alike but for the expansion cost: one request
    # of a 100-token prompt and 21 output tokens at acceptance ~0 (a = 1e-9: one token per step) takes 20 decode
    # steps, so the run is longer by exactly 20 x 1 x k x (X + cpu_per_seq_s)
    co = coefficients(cost_1b(), ROUND_GPU, replace(IDEAL, cpu_per_seq_s=1e-5))
    req = Requests(arrival_s=np.array([0.0]), prompt_tokens=np.array([100]), output_tokens=np.array([21]),
                   acceptance=np.array([1e-9]), duration_s=1.0)
    base = dict(num_blocks=1000, block_size=16, max_num_seqs=8, max_num_batched_tokens=2048, k=3, target=co)
    plain = simulate(EngineConfig(**base), req)
    expanded = simulate(EngineConfig(**base, expansion_query_s=1e-3), req)
    assert expanded.end_time_s - plain.end_time_s == pytest.approx(20 * 3 * (1e-3 + 1e-5), rel=1e-9)
    assert expanded.ttft_s[0] == pytest.approx(plain.ttft_s[0], rel=1e-12)


# --- steps outside a CUDA graph (Efficiency.eager_layer_s / eager_moe_layer_s; AccountingProfile.graph_*) ---

def test_a_forward_outside_a_graph_pays_every_layers_launches_by_hand():
    # Qwen3-30B-A3B: 48 layers, every one MoE. Outside a graph a forward pays 48 x 40 us + 48 x 1 ms = 49.92 ms of
    # host launches more; with --enforce-eager every forward already carries them (fixed_s), never twice
    from specsize.core.perf import step_time

    c = model_cost(load_model("Qwen/Qwen3-30B-A3B"), 1, "bfloat16", None)
    assert (c.n_layers, c.moe_layers) == (48, 48)
    eff = replace(IDEAL, eager_layer_s=4e-5, eager_moe_layer_s=1e-3)
    co = coefficients(c, ROUND_GPU, eff)
    assert co.ungraphed_s == pytest.approx(48 * 4e-5 + 48 * 1e-3)
    graphed = step_time(co, 1024, 0, (), 1024 * 1025 / 2)[0]
    assert step_time(co, 1024, 0, (), 1024 * 1025 / 2, graphed=False)[0] - graphed == pytest.approx(0.04992)
    eager = coefficients(c, ROUND_GPU, eff, eager=True)
    assert eager.ungraphed_s == 0.0 and eager.fixed_s - co.fixed_s == pytest.approx(0.04992)
    assert step_time(eager, 1024, 0, (), 0, graphed=False)[0] == step_time(eager, 1024, 0, (), 0)[0]
    # a dense model: 16 layers x 40 us only
    assert coefficients(cost_1b(), ROUND_GPU, eff).ungraphed_s == pytest.approx(16 * 4e-5)


def _graph_limits(engine, version, model="Qwen/Qwen3-30B-A3B", gpu="H100-SXM-80GB", quant=None, speculative=None,
                  **engine_settings):
    from specsize.core.memory import resolve_settings
    from specsize.engines import resolve_profile

    target = load_model(model)
    d = Deployment(target=target, gpu=load_gpu(gpu), engine=EngineSettings(max_model_len=8192, **engine_settings),
                   speculative=speculative or SpeculativeConfig())
    s = resolve_settings(d, resolve_profile(engine, version), Quantization(quant) if quant else target.quantization)
    return s.graph_max_tokens, s.graph_prompt_tokens


def test_which_steps_each_release_runs_in_a_cuda_graph():
    from specsize.core.memory import GRAPH_ALL

    # vLLM V1: piecewise graphs, prompt chunks included, up to min(max_num_seqs x 2, 512) tokens
    assert _graph_limits("vllm", "0.11") == (512, 512)
    assert _graph_limits("vllm", "0.11", max_num_seqs=128) == (256, 256)
    # vLLM V0: decode batches of up to 256 sequences; prompt steps never
    assert _graph_limits("vllm", "0.6.4") == (256, 0)
    # SGLang: decode batches; prompt steps eager before its piecewise graphs, then up to the chunked-prefill size
    # (2048 tokens for an MLA model)
    assert _graph_limits("sglang", "0.5.9") == (GRAPH_ALL, 0)
    assert _graph_limits("sglang", "0.5.12", max_num_batched_tokens=8192) == (GRAPH_ALL, 8192)
    assert _graph_limits("sglang", "0.5.12", model="deepseek-ai/DeepSeek-V3")[1] == 2048
    # ... but never on AMD's GPUs (SGLang keeps them off on non-CUDA hardware) nor for the architectures it excludes
    # (Qwen3-Next among them): their prompt steps stay eager
    assert _graph_limits("sglang", "0.5.12", gpu="MI300X-192GB", max_num_batched_tokens=8192) == (GRAPH_ALL, 0)
    assert _graph_limits("sglang", "0.5.19", model="deepseek-ai/DeepSeek-V3", gpu="MI325X-256GB") == (GRAPH_ALL, 0)
    assert _graph_limits("sglang", "0.5.12", model="Qwen/Qwen3-Next-80B-A3B-Instruct",
                         max_num_batched_tokens=8192) == (GRAPH_ALL, 0)
    # SGLang 0.5.10-0.5.12 on datacenter Blackwell: the flashinfer_trtllm MoE runner it picks for DeepSeek-V3 (fp8)
    # and the Qwen3 MoE family (bf16, fp8, nvfp4) turns the piecewise graphs off; 0.5.13 keeps them on
    deepseek = dict(model="deepseek-ai/DeepSeek-V3", max_num_batched_tokens=8192)
    assert _graph_limits("sglang", "0.5.12", gpu="B200-180GB", **deepseek) == (GRAPH_ALL, 0)
    assert _graph_limits("sglang", "0.5.12", gpu="H200-141GB", **deepseek) == (GRAPH_ALL, 2048)
    assert _graph_limits("sglang", "0.5.13", gpu="B200-180GB", **deepseek) == (GRAPH_ALL, 2048)
    assert _graph_limits("sglang", "0.5.10", gpu="GB300-288GB", max_num_batched_tokens=8192) == (GRAPH_ALL, 0)
    # ... not on the workstation Blackwell cards (compute capability 12), not for int4 weights or a dense target,
    # and Llama 4 only with fp8 weights
    assert _graph_limits("sglang", "0.5.12", gpu="RTX-PRO-6000-96GB", max_num_batched_tokens=8192) == (GRAPH_ALL, 8192)
    assert _graph_limits("sglang", "0.5.12", gpu="B200-180GB", quant="int4",
                         max_num_batched_tokens=8192) == (GRAPH_ALL, 8192)
    assert _graph_limits("sglang", "0.5.12", gpu="B200-180GB", model="meta-llama/Llama-3.1-8B-Instruct",
                         max_num_batched_tokens=8192) == (GRAPH_ALL, 8192)
    scout = dict(model="meta-llama/Llama-4-Scout-17B-16E-Instruct", gpu="B200-180GB", max_num_batched_tokens=8192)
    assert _graph_limits("sglang", "0.5.12", **scout) == (GRAPH_ALL, 8192)
    assert _graph_limits("sglang", "0.5.12", quant="fp8", **scout) == (GRAPH_ALL, 0)
    # SGLang serves a multimodal target's prompts outside the piecewise graphs (Qwen2.5-VL, Mistral-Small-3.1), save
    # the ones it runs as text models by default (Gemma 3, Llama 4)
    assert _graph_limits("sglang", "0.5.12", model="Qwen/Qwen2.5-VL-7B-Instruct",
                         max_num_batched_tokens=8192) == (GRAPH_ALL, 0)
    assert _graph_limits("sglang", "0.5.14", model="mistralai/Mistral-Small-3.1-24B-Instruct-2503",
                         max_num_batched_tokens=8192) == (GRAPH_ALL, 0)
    assert _graph_limits("sglang", "0.5.12", model="google/gemma-3-4b-it",
                         max_num_batched_tokens=8192) == (GRAPH_ALL, 8192)
    # 0.5.10 keeps them off with any speculative method; 0.5.11 on runs the two together
    ngram = SpeculativeConfig("ngram", None, 3)
    assert _graph_limits("sglang", "0.5.10", speculative=ngram, max_num_batched_tokens=8192) == (GRAPH_ALL, 0)
    assert _graph_limits("sglang", "0.5.11", speculative=ngram, max_num_batched_tokens=8192) == (GRAPH_ALL, 8192)
    assert _graph_limits("sglang", "0.5.10", max_num_batched_tokens=8192) == (GRAPH_ALL, 8192)
    # vLLM V1's piecewise graphs are its own: an AMD GPU keeps them
    assert _graph_limits("vllm", "0.11", gpu="MI300X-192GB") == (512, 512)
    # gpt-oss sets its own capture sizes (vLLM's GptOssForCausalLMConfig): up to 1024 tokens whatever max_num_seqs,
    # no more than the token budget; a prompt chunk of 1000 tokens then runs in a graph where Qwen3-30B-A3B's does not
    assert _graph_limits("vllm", "0.22", model="openai/gpt-oss-120b", max_num_batched_tokens=8192) == (1024, 1024)
    assert _graph_limits("vllm", "0.22", model="openai/gpt-oss-120b", max_num_seqs=128,
                         max_num_batched_tokens=8192) == (1024, 1024)
    assert _graph_limits("vllm", "0.22", model="openai/gpt-oss-20b", max_num_batched_tokens=768,
                         max_num_seqs=256) == (768, 768)  # vLLM refuses a budget below max_num_seqs
    assert _graph_limits("vllm", "0.22", max_num_batched_tokens=8192) == (512, 512)
    # the rule is vLLM V1's: SGLang and V0 keep theirs for gpt-oss too
    assert _graph_limits("sglang", "0.5.9", model="openai/gpt-oss-120b") == (GRAPH_ALL, 0)
    assert _graph_limits("vllm", "0.6.4", model="openai/gpt-oss-20b") == (256, 0)


def test_sglang_graphs_decode_batches_up_to_its_cuda_graph_max_bs():
    # its accountant knows the default --cuda-graph-max-bs (256 on an 80 GB card at TP 1) and passes the limit on:
    # a decode step of more sequences runs eager; with k = 3 drafts each sequence scores 4 tokens
    from specsize.core.memory import account
    from specsize.engines import resolve_profile

    def limit(k=0, **engine):
        spec = SpeculativeConfig("ngram", None, k) if k else SpeculativeConfig()
        d = Deployment(target=load_model("Qwen/Qwen3-8B"), gpu=load_gpu("H100-SXM-80GB"), speculative=spec,
                       engine=EngineSettings(max_model_len=8192, **engine))
        return account(d, resolve_profile("sglang", "0.5.9")).settings.graph_max_tokens

    assert limit() == 256 and limit(k=3) == 256 * 4 and limit(cuda_graph_max_bs=64) == 64


def test_simulator_prices_the_host_launches_of_ungraphed_steps_only():
    # one request of a 100-token prompt and 11 output tokens: 1 prompt step and 10 decode steps. An engine that
    # graphs decodes only (prompt limit 0) pays the launches once, in the first token; a 64-token graph limit on
    # every step (the prompt step is larger) the same; a limit above every step never
    co = coefficients(model_cost(load_model("Qwen/Qwen3-30B-A3B"), 1, "bfloat16", None), ROUND_GPU,
                      replace(IDEAL, eager_layer_s=4e-5, eager_moe_layer_s=1e-3))
    req = Requests(arrival_s=np.array([0.0]), prompt_tokens=np.array([100]), output_tokens=np.array([11]),
                   acceptance=np.array([1e-9]), duration_s=1.0)
    base = dict(num_blocks=1000, block_size=16, max_num_seqs=8, max_num_batched_tokens=2048, k=0, target=co)
    graphed = simulate(EngineConfig(**base), req)
    for limits in ({"graph_prompt_tokens": 0}, {"graph_max_tokens": 64, "graph_prompt_tokens": 64}):
        r = simulate(EngineConfig(**base, **limits), req)
        assert r.ttft_s[0] - graphed.ttft_s[0] == pytest.approx(co.ungraphed_s, rel=1e-9)
        assert r.end_time_s - graphed.end_time_s == pytest.approx(co.ungraphed_s, rel=1e-9)
    # decode steps above the limit pay it too: 10 more
    r = simulate(EngineConfig(**base, graph_max_tokens=0, graph_prompt_tokens=0), req)
    assert r.end_time_s - graphed.end_time_s == pytest.approx(11 * co.ungraphed_s, rel=1e-9)


# --- skewed expert routing (Efficiency.moe_routing_skew; core.perf.distinct_experts / expert_popularity) ---

def test_uniform_routing_touches_the_textbook_count():
    from specsize.core.perf import distinct_experts

    # 128 experts, top-4, 16 tokens: 128 x (1 - (124/128)^16) = 128 x (1 - 0.6015) = 50.98
    assert distinct_experts(128, 4, 16) == pytest.approx(128 * (1 - (124 / 128) ** 16))
    assert distinct_experts(128, 4, 16, skew=0.0) == pytest.approx(50.98, abs=0.01)


def test_zipf_routing_by_hand():
    from specsize.core.perf import distinct_experts, expert_popularity

    # 4 experts, top-1, popularity 1 : 1/2 : 1/3 : 1/4 (sum 25/12): p = 12/25, 6/25, 4/25, 3/25
    p = expert_popularity(4, 1, 1.0)
    assert p == pytest.approx((0.48, 0.24, 0.16, 0.12))
    # one token touches exactly one expert; two touch sum(2p - p^2) = 2 - 0.328 = 1.672 (uniform: 4 x 7/16 = 1.75)
    assert distinct_experts(4, 1, 1, skew=1.0) == pytest.approx(1.0)
    assert distinct_experts(4, 1, 2, skew=1.0) == pytest.approx(1.672)
    assert distinct_experts(4, 1, 2) == pytest.approx(1.75)


def test_zipf_popularity_is_capped_at_one_expert_per_token():
    from specsize.core.perf import distinct_experts, expert_popularity

    # top-2 of 4 at exponent 2: the head expert's share 2 x 1 / 1.4236 = 1.405 exceeds 1; it takes every token and
    # the excess 0.405 goes to the other three in proportion, so the shares still sum to 2
    p = expert_popularity(4, 2, 2.0)
    assert p[0] == pytest.approx(1.0)
    assert sum(p) == pytest.approx(2.0)
    assert max(p) <= 1.0
    assert distinct_experts(4, 2, 1, skew=2.0) == pytest.approx(2.0)


@settings(max_examples=60, deadline=None)
@given(experts=st.sampled_from([8, 32, 64, 128, 256]), top_k=st.integers(1, 8), tokens=st.integers(1, 2048),
       skew=st.floats(0.05, 2.0))
def test_skewed_routing_never_touches_more_experts_than_uniform(experts, top_k, tokens, skew):
    from specsize.core.perf import distinct_experts

    # 1 - (1 - p)^T is concave in p: for shares summing to top_k, the uniform split touches the most experts
    skewed = distinct_experts(experts, top_k, tokens, skew=skew)
    assert skewed <= distinct_experts(experts, top_k, tokens) + 1e-9
    assert min(top_k, experts) - 1e-9 <= skewed <= experts + 1e-9
    assert distinct_experts(experts, top_k, tokens + 1, skew=skew) >= skewed - 1e-12


def test_fp4_weights_run_natively_only_where_the_matrix_cores_take_their_format():
    # Blackwell takes MXFP4 and NVFP4, CDNA 4 (MI355X) the OCP MX formats only: there the GEMMs run at the fp8 peak
    # and the experts stream at moe_memory; elsewhere (MI300X, H100; NVFP4 on MI355X) 4-bit weights are dequantised in
    # the GEMM, at the bf16 peak and low_bit_memory
    from specsize.core.specs import Quantization

    gpt_oss = model_cost(load_model("openai/gpt-oss-120b"), 1, "bfloat16", None)
    assert gpt_oss.fp4 == "mxfp4"
    nvfp4 = model_cost(load_model("meta-llama/Llama-3.1-8B-Instruct"), 1, "bfloat16", Quantization("nvfp4"))
    assert nvfp4.fp4 == "nvfp4"
    eff = replace(IDEAL, compute=0.5, memory=0.8, moe_memory=0.6, low_bit_memory=0.3)

    def peak_and_experts(cost, gpu_id):
        gpu = load_gpu(gpu_id)
        co = coefficients(cost, gpu, eff)
        return 1 / (co.inv_flops * eff.compute), 1 / (co.inv_bandwidth_experts * gpu.memory_bandwidth_bytes_s)

    mi355, mi300 = load_gpu("MI355X-288GB"), load_gpu("MI300X-192GB")
    assert peak_and_experts(gpt_oss, "MI355X-288GB") == pytest.approx((mi355.fp8_flops, 0.6))
    assert peak_and_experts(gpt_oss, "MI300X-192GB") == pytest.approx((mi300.bf16_flops, 0.3))
    assert peak_and_experts(nvfp4, "MI355X-288GB")[0] == pytest.approx(mi355.bf16_flops)
    assert peak_and_experts(nvfp4, "B200-180GB")[0] == pytest.approx(load_gpu("B200-180GB").fp8_flops)


def test_a100_pcie_card_all_reduces_over_pcie_by_hand():
    # NVIDIA's A100 datasheet: the 80 GB PCIe card streams 1,935 GB/s (the SXM4 card 2,039) and links over PCIe Gen4
    # at 64 GB/s both ways, 32 GB/s one way (SXM4: NVLink 600 GB/s, 300 one way). At TP 4 a token's all-reduces move
    # 2 x 16 layers x 2,048 x 2 B x 2 x 3/4 = 196,608 B for Llama-3.2-1B: 196,608 / 32e9 = 6.144 us on PCIe against
    # 196,608 / 300e9 = 0.65536 us on NVLink, at the whole link (IDEAL's bus fraction 1.0)
    pcie, sxm = load_gpu("A100-80GB-PCIe"), load_gpu("A100-80GB")
    assert (pcie.memory_bandwidth_bytes_s, pcie.bf16_flops, pcie.interconnect_bytes_s) == (1.935e12, 312e12, 32e9)
    assert pcie.family == sxm.family == "ampere" and pcie.memory_bytes == sxm.memory_bytes
    eff = replace(IDEAL, allreduce_bus_fraction=1.0)
    per_token = {g.gpu_id: coefficients(cost_1b(4), g, eff).comm_per_token_s for g in (pcie, sxm)}
    assert per_token == pytest.approx({"A100-80GB-PCIe": 6.144e-6, "A100-80GB": 196_608 / 300e9}, rel=1e-9)


# --- MLA prompts as multi-head attention (ModelCost.prompt_attn_width) and the attention's own peak (kv_fp8) ---

def test_mla_prompt_pairs_cost_multi_head_attention_by_hand():
    # DeepSeek-V3 at TP 8: 128 / 8 = 16 heads per GPU, 61 layers. A decode runs absorbed over the latent: 4 x 16 x
    # (512 + 64) = 36,864 flops per pair and layer (query-key and value-output, both 576 wide as priced). A prompt runs
    # as multi-head attention over decompressed keys and values: 2 x 16 x ((128 + 64) + 128) = 10,240
    m = load_model("deepseek-ai/DeepSeek-V3")
    c = model_cost(m, 8, "bfloat16", None)
    co = coefficients(c, ROUND_GPU, IDEAL)
    assert co.attn_flops_per_pair == 61 * 36_864
    assert co.attn_flops_per_prompt_pair == 61 * 10_240
    # a 4,096-token prompt's own triangle: 4,096 x 4,097 / 2 pairs, at the 1e15 peak (compute-bound attention)
    pairs = 4096 * 4097 / 2
    as_decode = step_time(co, 4096, 4096, (), pairs, seqs=1)
    as_prompt = step_time(co, 4096, 4096, (), pairs, seqs=1, prompt_pairs=pairs)
    assert as_decode[1] - as_prompt[1] == pytest.approx(61 * (36_864 - 10_240) * pairs)
    # ordinary attention has one width either way: a prompt costs what it did
    llama = coefficients(cost_1b(), ROUND_GPU, IDEAL)
    assert llama.attn_flops_per_prompt_pair == 0
    assert step_time(llama, 512, 512, (), 512 * 513 / 2, seqs=1, prompt_pairs=512 * 513 / 2)[0] == pytest.approx(
        step_time(llama, 512, 512, (), 512 * 513 / 2, seqs=1)[0], rel=1e-15)


def test_prefill_time_runs_each_chunk_as_the_engines_rule_says():
    # a 20,000-token prompt in 8,192-token chunks (prefixes 0 / 8,192 / 16,384): under SGLang 0.4.5.post1-post3's fa3
    # rule (absorbed without a prefix, multi-head from 8,192 tokens of prefix) the first chunk is priced absorbed and
    # the next two as multi-head attention; vLLM's rule runs all three as multi-head attention
    from specsize.core.perf import SpecCosts, prefill_time, prompt_as_mha, uniform_step

    m = load_model("deepseek-ai/DeepSeek-V3")
    co = coefficients(model_cost(m, 8, "bfloat16", None), ROUND_GPU, IDEAL)
    chunks = ((8192, 0), (8192, 8192), (3616, 16384))

    def costs(rule):
        return SpecCosts(target=model_cost(m, 8, "bfloat16", None), draft=None, draft_gpu_tp=8, method="none",
                         gpu=ROUND_GPU, eff=IDEAL, verify_width=1, draft_steps=0, draft_width=1, target_co=co,
                         mla_prompt_mha=rule)
    fa3 = sum(uniform_step(co, 1, n, done + n // 2, prompt=done >= 8192).time_s for n, done in chunks)
    every = sum(uniform_step(co, 1, n, done + n // 2, prompt=True).time_s for n, done in chunks)
    assert prefill_time(costs((False, 8192)), 20_000, 8192) == pytest.approx(fa3, rel=1e-12)
    assert prefill_time(costs((True, 0)), 20_000, 8192) == pytest.approx(every, rel=1e-12)
    assert every < fa3
    # the rule's truth table: (with no prefix, from this prefix on)
    assert prompt_as_mha((True, 8192), 0) and prompt_as_mha((True, 8192), 8192)
    assert not prompt_as_mha((True, 8192), 4096) and not prompt_as_mha((False, 8192), 0)
    assert prompt_as_mha((True, 0), 100) and not prompt_as_mha((True, 1 << 62), 100)


def test_attention_runs_at_the_kv_caches_precision_not_the_weights():
    # an fp8 checkpoint with a 16-bit KV cache: the GEMMs at the fp8 peak, attention at the bf16 peak; an fp8 KV
    # cache runs attention's products in fp8 (FlashAttention 3) at the fp8 peak. H100: 989 / 1,979 TFLOPS
    h100 = load_gpu("H100-SXM-80GB")
    m = load_model("meta-llama/Llama-3.1-8B-Instruct")
    fp8 = Quantization("fp8", block=(128, 128))
    eff = replace(IDEAL, attn_compute=0.5)
    bf16_kv = coefficients(model_cost(m, 1, "bfloat16", fp8), h100, eff)
    fp8_kv = coefficients(model_cost(m, 1, "bfloat16", fp8, kv_dtype_bytes=1), h100, eff)
    assert bf16_kv.inv_flops == pytest.approx(1 / h100.fp8_flops)
    assert bf16_kv.inv_flops_attn == pytest.approx(1 / (0.5 * h100.bf16_flops))
    assert fp8_kv.inv_flops_attn == pytest.approx(1 / (0.5 * h100.fp8_flops))
    # an MLA prompt runs multi-head attention over keys and values decompressed to 16 bits (kv_b_proj's output),
    # whatever the cache holds: its pairs at the bf16 peak, the absorbed decode's at the cache's
    ds = coefficients(model_cost(load_model("deepseek-ai/DeepSeek-V3"), 8, "bfloat16", fp8, kv_dtype_bytes=1), h100, eff)
    assert ds.inv_flops_attn == pytest.approx(1 / (0.5 * h100.fp8_flops))
    assert ds.inv_flops_attn_prompt == pytest.approx(1 / (0.5 * h100.bf16_flops))
    pairs = 4096 * 4097 / 2
    # (no context read: the KV bytes would floor the attention's time)
    t = step_time(ds, 4096, 0, (), pairs, seqs=1, prompt_pairs=pairs)[0]
    t_no_attn = step_time(replace(ds, attn_flops_per_pair=0.0, attn_flops_per_prompt_pair=1e-30), 4096, 0, (),
                          pairs, seqs=1, prompt_pairs=pairs)[0]
    assert t - t_no_attn == pytest.approx(61 * 10_240 * pairs / (0.5 * h100.bf16_flops), rel=1e-6)



def _fp8_kv_attention(engine: str, version: str, gpu: str, model: str = "meta-llama/Llama-3.1-8B-Instruct",
                      tp: int = 1):
    """The attention's time per flop a release runs an fp8 KV cache's products at, on `gpu`."""
    from specsize.core.memory import account
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree, costs_for

    d = Deployment(target=load_model(model), gpu=load_gpu(gpu), tp=tp,
                   speculative=SpeculativeConfig("none", None, 0), engine=EngineSettings(kv_cache_dtype="fp8"))
    mem = account(d, resolve_profile(engine, version))
    return mem.settings.fp8_attention_16bit, costs_for(d, mem, load_efficiency(d.gpu), 0, Tree()).target_co


def test_two_level_fp8_attention_runs_at_the_16_bit_peak_by_hand():
    # vLLM's FlashAttention 3 accumulates fp8 attention in two levels on Hopper from 0.11.1 (vllm-project/
    # flash-attention PR 104, pinned by 0.11.1's cmake, not by 0.11.0's): an fp8 cache's products no faster than
    # bf16's (vLLM blog 2026-04-22: median TTFT 742.8 ms fp8 against 763.6 ms bf16). H100: 989 / 1,979 TFLOPS
    h100 = load_gpu("H100-SXM-80GB")
    attn = load_efficiency(h100).attn_compute
    for version in ("0.11.1", "0.19.1", "0.32"):
        two_level, co = _fp8_kv_attention("vllm", version, "H100-SXM-80GB")
        assert two_level and 1 / co.inv_flops_attn == pytest.approx(attn * 989e12, rel=1e-3)
    # 0.11.0's FlashAttention 3 and SGLang's run fp8 products at the fp8 peak, as does vLLM off Hopper
    for engine, version, gpu in (("vllm", "0.11.0", "H100-SXM-80GB"), ("sglang", "0.5.12", "H100-SXM-80GB")):
        two_level, co = _fp8_kv_attention(engine, version, gpu)
        assert not two_level and 1 / co.inv_flops_attn == pytest.approx(attn * 1979e12, rel=1e-3)
    b200 = load_gpu("B200-180GB")
    two_level, co = _fp8_kv_attention("vllm", "0.19.1", "B200-180GB")
    assert not two_level and 1 / co.inv_flops_attn == pytest.approx(load_efficiency(b200).attn_compute * b200.fp8_flops)
    # an MLA model's fp8 cache runs through FlashMLA's fp8 kernel, not FlashAttention (vLLM 0.32 platforms/cuda.py:
    # FLASH_ATTN_MLA takes no fp8 cache): DeepSeek-V3's absorbed attention keeps the fp8 peak on Hopper, H200 1,979
    two_level, co = _fp8_kv_attention("vllm", "0.32", "H200-141GB", "deepseek-ai/DeepSeek-V3", tp=8)
    assert two_level and 1 / co.inv_flops_attn == pytest.approx(
        load_efficiency(load_gpu("H200-141GB")).attn_compute * 1979e12, rel=1e-3)


def _v0_long(gpu: str, version: str = "0.6.4", **engine):
    from specsize.core.memory import account
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree, costs_for

    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu(gpu),
                   speculative=SpeculativeConfig("none", None, 0), engine=EngineSettings(**engine))
    mem = account(d, resolve_profile("vllm", version))
    return mem.settings, costs_for(d, mem, load_efficiency(d.gpu), 0, Tree())


def test_v0_decodes_past_max_seq_len_to_capture_run_eager_by_hand():
    # vLLM V0 replays a decode batch's CUDA graph only while its longest sequence is within max_seq_len_to_capture,
    # 8192 by default (worker/model_runner.py _use_captured_graph, read in the 0.6.3 sdist): at 8,191 tokens of context
    # the next token's sequence is 8,192 long (graphed), at 8,192 it is 8,193 (eager). Llama-3.1-8B's 32 layers pay
    # eager_layer_s (40 us) each: 1.28 ms, and one more token of KV (32 x 8 x 128 x 2 x 2 B = 131,072 B) at
    # attn_memory x 3.35 TB/s
    from specsize.core.perf import decode_step

    s, c = _v0_long("H100-SXM-80GB")  # max_model_len 131,072
    assert s.graph_max_context == 8192
    eff = load_efficiency(load_gpu("H100-SXM-80GB"))
    kv_token = 131_072 / (3.35e12 * eff.attn_memory)
    step = decode_step(c, 1, 8192).time_s - decode_step(c, 1, 8191).time_s
    assert step == pytest.approx(32 * 40e-6 + kv_token, rel=1e-3)
    assert decode_step(c, 1, 8191).time_s - decode_step(c, 1, 8190).time_s == pytest.approx(kv_token, rel=1e-3)
    # a model no longer than the limit never reaches it; V1's piecewise graphs have none
    assert _v0_long("H100-SXM-80GB", max_model_len=8192)[0].graph_max_context == 0
    assert _v0_long("H100-SXM-80GB", version="0.32")[0].graph_max_context == 0


def test_v0_chunked_prefill_on_rocm_prices_prompts_at_the_prefix_kernel_by_hand():
    # vLLM V0 on ROCm sends a prompt with a block table - every prompt once chunked prefill is on (its default above
    # 32K) - to PagedAttention.forward_prefix, the Triton prefix-prefill kernel: its pairs at CDNA3's
    # attn_prefix_compute (1% of 1,307.4 TFLOP/s). Llama-3.1-8B: 4 x 32 layers x 32 heads x 128 = 524,288 flops a pair
    s, c = _v0_long("MI300X-192GB")
    assert s.prefix_prompt_kernel
    co = c.target_co
    assert co.attn_flops_per_prompt_pair == co.attn_flops_per_pair == 4 * 32 * 32 * 128
    assert co.inv_flops_attn_prompt == pytest.approx(1 / (1307.4e12 * 0.01))
    # a 4,096-token prompt's 4096 x 4097 / 2 pairs then take 524,288 x 8,390,656 / 13.074e12 s = 336 ms of attention
    from specsize.core.perf import step_time

    pairs = 4096 * 4097 / 2
    t_prompt = step_time(co, 4096, 0, (), pairs, seqs=1, prompt_pairs=pairs, graphed=False)[0]
    t_as_decode = step_time(co, 4096, 0, (), pairs, seqs=1, prompt_pairs=0.0, graphed=False)[0]
    assert t_prompt - t_as_decode == pytest.approx(524_288 * pairs * (1 / 13.074e12 - co.inv_flops_attn), rel=1e-3)
    assert 524_288 * pairs / 13.074e12 == pytest.approx(0.3365, rel=1e-3)
    # not with chunked prefill off (a model within 32K), not on NVIDIA (flash-attn reads the block table), not on V1
    # an fp8 cache's keys and values are turned back to bf16 in the kernel: the 16-bit peak all the same
    assert _v0_long("MI300X-192GB", kv_cache_dtype="fp8")[1].target_co.inv_flops_attn_prompt == pytest.approx(
        1 / (1307.4e12 * 0.01))
    for gpu, engine, version in (("MI300X-192GB", {"max_model_len": 32768}, "0.6.4"), ("H100-SXM-80GB", {}, "0.6.4"),
                                 ("MI300X-192GB", {}, "0.32")):
        s2, c2 = _v0_long(gpu, version=version, **engine)
        assert not s2.prefix_prompt_kernel and c2.target_co.attn_flops_per_prompt_pair == 0, (gpu, version)


def test_plan_notes_the_rocm_prefix_kernel_where_v0_chunks_prompts(capsys):
    # Llama-3.1-70B's 131,072-token context turns V0's chunked prefill on by itself on ROCm up to 0.6.4 only
    # (vllm-project/vllm PR 11146, in 0.6.5); with it every prompt runs through the Triton prefix-prefill kernel
    from helpers import run_cli

    args = ("plan", "--target", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "MI300X-192GB", "--tp", "4")
    code, out, err = run_cli(capsys, *args, "--engine-version", "0.6.4")
    assert code == 0 and "prefix-prefill kernel" in out + err
    for version in ("0.6.5", "0.32"):
        code, out, err = run_cli(capsys, *args, "--engine-version", version)
        assert code == 0 and "prefix-prefill kernel" not in out + err, version
    code, out, err = run_cli(capsys, *args, "--engine-version", "0.6.4", "--chunked-prefill", "off")
    assert code == 0 and "prefix-prefill kernel" not in out + err


def test_vllm_prices_its_mla_modules_fixed_time_by_hand():
    # vLLM's MLA module per layer beyond the four GEMMs the model prices: 85 us on Hopper, 45 us on datacenter
    # Blackwell, Hopper's elsewhere, an estimate (engines/vllm.py VLLM_MLA_LAYER_FIXED_S: it had been none, and an A100
    # decoded faster than an H100); SGLang's MLA path takes none. DeepSeek-V2-Lite
    # has 27 layers, all MLA: 27 x 85 us = 2.295 ms on a decode step on an H100
    from specsize.core.memory import account
    from specsize.core.perf import decode_step
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree, costs_for

    def step(gpu: str, engine: str, version: str | None = None) -> tuple[float, float]:
        d = Deployment(target=load_model("deepseek-ai/DeepSeek-V2-Lite-Chat"), gpu=load_gpu(gpu),
                       speculative=SpeculativeConfig("none", None, 0), engine=EngineSettings(max_model_len=4096))
        mem = account(d, resolve_profile(engine, version))
        eff = load_efficiency(d.gpu)
        with_term = decode_step(costs_for(d, mem, eff, 0, Tree()), 1, 1000).time_s
        without = decode_step(costs_for(d, replace(mem, settings=replace(mem.settings, mla_layer_fixed_s=0.0)),
                                        eff, 0, Tree()), 1, 1000).time_s
        return mem.settings.mla_layer_fixed_s, with_term - without

    assert step("H100-SXM-80GB", "vllm") == pytest.approx((85e-6, 27 * 85e-6), rel=1e-9)
    assert step("B200-180GB", "vllm") == pytest.approx((45e-6, 27 * 45e-6), rel=1e-9)
    assert step("A100-80GB", "vllm") == pytest.approx((85e-6, 27 * 85e-6), rel=1e-9)
    assert step("H100-SXM-80GB", "sglang") == (0.0, 0.0)
    # vLLM before 0.7.1 runs DeepSeek as ordinary attention over decompressed keys and values, not its MLA module
    assert step("H100-SXM-80GB", "vllm", "0.6.4") == (0.0, 0.0)
    assert step("H100-SXM-80GB", "vllm", "0.7.3") == pytest.approx((85e-6, 27 * 85e-6), rel=1e-9)


def test_a_sparse_attention_mtp_layer_holds_its_own_topk_index_buffer_by_hand():
    # vLLM's DeepSeekMultiTokenPredictorLayer allocates max_num_batched_tokens x index_topk int32 where the config has
    # index_topk (DeepSeek-V3.2, GLM-5): 8,192 x 2,048 x 4 B = 67,108,864 B beside its weights; DeepSeek-V3 has none
    from specsize.core.memory import account, draft_weight_bytes
    from specsize.engines import resolve_profile

    for target, extra in (("deepseek-ai/DeepSeek-V3.2", 67_108_864), ("zai-org/GLM-5-FP8", 67_108_864),
                          ("deepseek-ai/DeepSeek-V3", 0)):
        d = Deployment(target=load_model(target), gpu=load_gpu("H200-141GB"), tp=8,
                       speculative=SpeculativeConfig("mtp", None, 1), engine=EngineSettings(max_model_len=8192))
        mem = account(d, resolve_profile("vllm", None))
        assert mem.settings.max_num_batched_tokens == 8192
        assert mem.weights_draft_bytes - draft_weight_bytes(d, mem.settings) == extra, target


def test_moe_elementwise_traffic_by_hand():
    # Qwen3-30B-A3B (hidden 2048, 128 experts of intermediate 768, top 8, 48 MoE layers), bf16, TP 1 then TP 2.
    # Beside its grouped GEMMs, vLLM's fused_experts runs silu_and_mul over each of a token's 8 experts (reads gate
    # and up, 2 x 768, writes 768) and moe_sum over the 8 outputs (reads 8 x 2048, writes 2048):
    # 8 x 3 x 768 + 9 x 2048 = 36,864 elements a layer, x 48 layers x 2 B = 3,538,944 B a token on top of the
    # residual stream's 2 x 2048 x 48 layers x 2 B = 393,216 B. TP 2 halves each expert's intermediate width:
    # 8 x 3 x 384 + 9 x 2048 = 27,648 elements a layer.
    m = load_model("Qwen/Qwen3-30B-A3B")
    for tp, per_layer in ((1, 36_864), (2, 27_648)):
        co = coefficients(model_cost(m, tp, "bfloat16", None), ROUND_GPU, IDEAL, overhead=False)
        assert co.act_bytes_per_token == 393_216 + 48 * per_layer * 2
    # at 4,096 prompt tokens on the 1e12 B/s GPU that traffic alone is 4,096 x 3,538,944 / 1e12 = 14.5 ms, added to
    # the step (separate kernels)
    c1 = model_cost(m, 1, "bfloat16", None)
    with_act = forward_time(c1, ROUND_GPU, IDEAL, 1, 4096, 0, overhead=False)
    co = coefficients(c1, ROUND_GPU, IDEAL, overhead=False)
    without = uniform_step(replace(co, act_bytes_per_token=393_216), 1, 4096, 0)
    assert with_act.time_s - without.time_s == pytest.approx(4096 * 3_538_944 / 1e12, rel=1e-9)


def test_moe_elementwise_traffic_under_expert_parallelism_latent_width_and_fused_kernels():
    # Expert parallelism (TP 4 = EP 4): every rank holds every token and runs the activation over all 8 of its expert
    # rows at the whole expert's width (8 x 3 x 768), moe_sum only its own experts' slots (8 / 4 + 1 rows of 2048):
    # 18,432 + 6,144 = 24,576 a layer, against TP 4's 8 x 3 x 192 + 9 x 2048 = 23,040
    qwen = load_model("Qwen/Qwen3-30B-A3B")
    assert model_cost(qwen, 4, "bfloat16", None).moe_act_elements == 48 * 23_040
    assert model_cost(qwen, 4, "bfloat16", None, ep=4).moe_act_elements == 48 * 24_576
    # Nemotron-3-Super's latent MoE: experts 1,024 wide (moe_latent_size), intermediate 2,688, top 22, ungated relu2
    # (reads and writes the intermediate: 2 x 2,688 / TP), 40 MoE layers: TP 1 22 x 2 x 2,688 + 23 x 1,024 = 141,824,
    # TP 8 22 x 2 x 336 + 23 x 1,024 = 38,336 elements a layer
    super_ = load_model("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    assert model_cost(super_, 1, "bfloat16", None).moe_act_elements == 40 * 141_824
    assert model_cost(super_, 8, "bfloat16", None).moe_act_elements == 40 * 38_336
    # gpt-oss-20b's MXFP4 experts (hidden = intermediate = 2,880, top 4, gated, 24 layers): Marlin's MoE runs them as
    # separate kernels, 4 x 3 x 2,880 + 5 x 2,880 = 48,960 a layer; OpenAI's triton_kernels (Hopper from vLLM 0.12)
    # and FlashInfer's TRT-LLM runner (datacenter Blackwell) fuse them into their GEMMs: none
    oss = load_model("openai/gpt-oss-20b")
    assert model_cost(oss, 1, "bfloat16", None, mxfp4_pad=(64, 64)).moe_act_elements == 24 * 48_960
    from specsize.engines.vllm import MXFP4_TRITON_HOPPER_PAD4, MXFP4_TRTLLM_128
    for layout in (MXFP4_TRITON_HOPPER_PAD4, MXFP4_TRTLLM_128):
        assert model_cost(oss, 1, "bfloat16", None, mxfp4_pad=layout).moe_act_elements == 0
    # a dense model has none
    assert model_cost(load_model("meta-llama/Llama-3.2-1B-Instruct"), 1, "bfloat16", None).moe_act_elements == 0
