"""Pipeline stages in the step model: both engines keep a batch in flight a stage and split the running requests
among them (vLLM V1: VllmConfig.max_concurrent_batches = pipeline_parallel_size, EngineCore.step_with_batch_queue;
SGLang: scheduler_pp_mixin.event_loop_pp's micro-batches), so a round in which every request advances one step is one
micro-batch's pass through all the layers. Each number below is worked out by hand from Llama-3.2-1B's config."""

import json

import pytest

from specsize.catalog import load_gpu, load_model
from specsize.catalog.gpus import load_efficiency
from specsize.core.perf import Efficiency, build_costs, coefficients, model_cost, prefill_time, uniform_step
from specsize.core.specs import Deployment, GpuSpec

from helpers import run_cli

PEAK = 1e12
BANDWIDTH = 1e12
# a GPU where only flops count, and one where only bytes do; an Efficiency with every fixed cost at 0 and the
# roofline's fractions at 1
COMPUTE_ONLY = GpuSpec("compute-only", "compute-only", 80 * 2**30, memory_bandwidth_bytes_s=1e30, bf16_flops=PEAK,
                       fp8_flops=None, interconnect_bytes_s=1e12)
MEMORY_ONLY = GpuSpec("memory-only", "memory-only", 80 * 2**30, memory_bandwidth_bytes_s=BANDWIDTH, bf16_flops=1e30,
                      fp8_flops=None, interconnect_bytes_s=1e12)
PURE = Efficiency("x", memory=1.0, compute=1.0, step_overhead_s=0.0, spec_step_overhead_s=0.0,
                  draft_step_overhead_s=0.0, draft_setup_overhead_s=0.0, allreduce_latency_s=0.0)

# Llama-3.2-1B: hidden 2,048, 16 layers, 32 query heads and 8 KV heads of 64, MLP 8,192, vocabulary 128,256 (tied)
LAYER_PARAMS = 2048 * (2048 + 512 + 512 + 2048) + 3 * 2048 * 8192
FLOPS_PER_TOKEN = 2 * (16 * LAYER_PARAMS + (2 * 16 + 1) * 2048)  # every GEMM but the lm_head, norms too
LM_HEAD_FLOPS = 2 * 2048 * 128_256  # per sampled position
KV_BYTES_PER_TOKEN = 16 * 2 * 8 * 64 * 2  # 16 layers, K and V, 8 heads of 64, bf16: 32,768 B
ATTN_FLOPS_PER_PAIR = 4 * 16 * 32 * 64  # QK and PV, 2 flops a multiply-add, 16 layers of 32 heads of 64


def _co(gpu: GpuSpec, stages: int):
    return coefficients(model_cost(load_model("meta-llama/Llama-3.2-1B-Instruct"), 1, "bfloat16", None), gpu, PURE,
                        stages=stages)


def test_a_decode_round_reads_one_micro_batchs_kv_cache():
    """8 decoding sequences on 2 stages run as two micro-batches of 4, each through every layer: a round reads the
    weights once and 4 sequences' caches. 1,000 more tokens of context each cost 4 x 1,000 x 32,768 B / 1e12 B/s =
    131.072 us a round on two stages, 262.144 us on one."""
    for stages, seqs in ((2, 4), (1, 8)):
        co = _co(MEMORY_ONLY, stages)
        extra = uniform_step(co, 8, 1, 2000).time_s - uniform_step(co, 8, 1, 1000).time_s
        assert extra == pytest.approx(seqs * 1000 * KV_BYTES_PER_TOKEN / BANDWIDTH, rel=1e-9)


def test_a_round_computes_one_micro_batch_and_reports_the_rounds_work():
    """On a GPU where only flops count, 8 sequences at no context on 2 stages take a micro-batch of 4's flops:
    4 x (1,946,292,224 + 525,336,576) / 1e12 s = 9.89 ms; the round's flops stay all 8 sequences'."""
    step = uniform_step(_co(COMPUTE_ONLY, 2), 8, 1, 0)
    assert step.time_s == pytest.approx(4 * (FLOPS_PER_TOKEN + LM_HEAD_FLOPS) / PEAK, rel=1e-3)
    assert step.flops == pytest.approx(8 * (FLOPS_PER_TOKEN + LM_HEAD_FLOPS), rel=1e-3)


def test_one_sequence_is_never_split_across_stages():
    """A single decoding sequence is one micro-batch: its round is the whole model's forward, as on one stage."""
    one, two = _co(MEMORY_ONLY, 1), _co(MEMORY_ONLY, 2)
    assert uniform_step(two, 1, 1, 4000).time_s == uniform_step(one, 1, 1, 4000).time_s
    # three sequences on four stages: three micro-batches of one
    assert uniform_step(_co(MEMORY_ONLY, 4), 3, 1, 4000).time_s == uniform_step(one, 1, 1, 4000).time_s


def test_a_long_prompts_chunks_follow_each_other_through_the_stages():
    """A 4,096-token prompt in 1,024-token chunks on 2 stages: chunk i (its context 1,024 i + 512 on average) takes
    t_i = (1,024 x 1,946,292,224 + 525,336,576 + 131,072 x 1,024 x (1,024 i + 512)) / 1e12 s through the whole model;
    the first stage runs the chunks back to back (half of each), the last chunk then crosses the second stage: the
    first token after (t0 + t1 + t2 + t3 + t3) / 2."""
    one_stage = build_costs(Deployment(target=load_model("meta-llama/Llama-3.2-1B-Instruct"), gpu=COMPUTE_ONLY),
                            PURE, "bfloat16", None, 2)
    two_stages = build_costs(Deployment(target=load_model("meta-llama/Llama-3.2-1B-Instruct"), gpu=COMPUTE_ONLY,
                                        pp=2), PURE, "bfloat16", None, 2)
    t = [(1024 * FLOPS_PER_TOKEN + LM_HEAD_FLOPS + ATTN_FLOPS_PER_PAIR * 1024 * (1024 * i + 512)) / PEAK
         for i in range(4)]
    assert prefill_time(one_stage, 4096, 1024) == pytest.approx(sum(t), rel=1e-3)
    assert prefill_time(two_stages, 4096, 1024) == pytest.approx((sum(t) + t[3]) / 2, rel=1e-3)
    # a prompt of one chunk crosses both stages alone
    assert prefill_time(two_stages, 1024, 1024) == pytest.approx(t[0], rel=1e-3)


def test_the_plan_prices_a_pipeline_of_two_stages_as_two_micro_batches(capsys):
    """Llama-3.1-8B on 2 x H100 as TP 1 x PP 2 against TP 1 on one GPU, at the same 64 concurrent requests: the round
    is a forward of 32 sequences (the plan's own decode step at concurrency 32 on one GPU), so its TPOT is lower."""
    def perf(*extra):  # vLLM 0.24: the V1 model runner, no async scheduling with PP
        code, out, _ = run_cli(capsys, "plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu",
                               "H100-SXM-80GB", "--engine-version", "0.24", "--format", "json", *extra)
        assert code == 0
        return json.loads(out)["perf"]

    two = perf("--pp", "2", "--concurrency", "64")
    one = perf("--concurrency", "64")
    half = perf("--concurrency", "32")
    assert two["batch_size"] == one["batch_size"] == 64
    assert two["tpot_s_no_spec"] < one["tpot_s_no_spec"]
    # one GPU at 32 overlaps its host work with the forward (async scheduling); a pipeline on the V1 model runner does
    # not (vLLM config/vllm.py disables async scheduling with PP there), so the round is at least that step
    assert two["tpot_s_no_spec"] >= half["tpot_s_no_spec"]


@pytest.mark.parametrize("target, version, method, on_v2", [
    ("meta-llama/Llama-3.1-8B-Instruct", "0.24", None, False),  # before Model Runner V2
    ("meta-llama/Llama-3.1-8B-Instruct", "0.25", None, True),  # V2 for dense models, 0.25 - 0.28
    ("meta-llama/Llama-3.1-8B-Instruct", "0.32", None, True),
    ("Qwen/Qwen3-30B-A3B", "0.28", None, False),  # an MoE target on V1 up to 0.28
    ("Qwen/Qwen3-30B-A3B", "0.29", None, True),  # every model from 0.29
    ("meta-llama/Llama-3.1-8B-Instruct", "0.25", "draft_model", False),  # a method V2 lacks keeps V1 (to 0.30)
    ("meta-llama/Llama-3.1-8B-Instruct", "0.32", "draft_model", True),
])
def test_model_runner_v2_keeps_async_scheduling_with_pipeline_stages(target, version, method, on_v2):
    """vLLM keeps async scheduling with PP on Model Runner V2 only (max_concurrent_batches = pp + 1 there; 0.31 on
    says "Async scheduling is disabled because the V1 model runner does not support it with pipeline parallelism").
    Which runner: config/vllm.py use_v2_model_runner, read in the 0.25 - 0.32 sources."""
    from specsize import api

    drafter = dict(method=method, draft="meta-llama/Llama-3.2-1B-Instruct", num_speculative_tokens=4) if method else {}
    plan = api.plan(target=target, gpu="H100-SXM-80GB", pp=2, engine_version=version, **drafter)
    assert plan.memory.settings.async_scheduling is on_v2


def test_the_last_stage_drafts_for_each_micro_batch_in_turn():
    """vLLM builds the drafter on the last pipeline stage only (v1/worker/gpu_model_runner.py: where
    get_pp_group().is_last_rank), so a round of two micro-batches drafts twice. On a GPU where only bytes count, at no
    context, Llama-3.1-8B with a Llama-3.2-1B draft at k = 3 and 8 sequences: two stages read the draft's weights
    (1,235,814,400 parameters, bf16, tied embeddings read as its lm_head) in 3 more forwards, 3 x 2,471,628,800 B, and
    the target's verification moves half the activations (16 fewer tokens x 2 x 4,096 x 2 B x 32 layers): 7.4149 ms -
    8.39 us more a step than on one stage."""
    from specsize.core.perf import spec_step_time
    from specsize.core.specs import SpeculativeConfig

    def step(pp: int) -> float:
        d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=MEMORY_ONLY, pp=pp,
                       speculative=SpeculativeConfig("draft_model", load_model("meta-llama/Llama-3.2-1B-Instruct"), 3))
        return spec_step_time(build_costs(d, PURE, "bfloat16", None, 2), 8, 0)

    assert step(2) - step(1) == pytest.approx((3 * 2 * 1_235_814_400 - 16 * 2 * 4096 * 2 * 32) / BANDWIDTH, rel=1e-6)


def test_a_prompt_chunk_is_not_split_among_micro_batches(capsys):
    """One 4,000-token prompt beside a few decodes sits in one batch of the round: the simulated first token on two
    stages comes no sooner than that prompt's own forward through every layer (the plan's TTFT at one request holds
    the same forward plus the front end)."""
    code, out, _ = run_cli(capsys, "simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu",
                           "H100-SXM-80GB", "--duration", "120", "--rate", "3", "--prompt-tokens-median", "4000",
                           "--output-tokens-median", "400", "--pp", "2", "--seed", "1", "--format", "json")
    assert code in (0, 1)
    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("H100-SXM-80GB"))
    forward = prefill_time(build_costs(d, load_efficiency(d.gpu), "bfloat16", None, 2), 4000, 8192)
    assert json.loads(out)["sim"]["ttft_s"]["p50"] >= forward


def test_0_25s_v1_runner_subtracts_its_graphs_where_v2_estimated_none():
    """vLLM 0.25 - 0.27's Model Runner V2 estimated no CUDA graph memory (issue 49224), but a draft-model run stays on
    the V1 runner (config/vllm.py use_v2_model_runner: spec methods other than eagle, eagle3, mtp), which subtracts it."""
    from specsize import api

    plain = api.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine_version="0.25")
    drafted = api.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine_version="0.25",
                       method="draft_model", draft="meta-llama/Llama-3.2-1B-Instruct", num_speculative_tokens=4)
    assert not plain.memory.cuda_graph_counted and drafted.memory.cuda_graph_counted
