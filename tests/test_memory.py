"""The engine's budget equation, KV bytes per token and block rounding, against hand-derived figures and
against what real vLLM start-ups printed (../shared/calibration)."""

import pytest

from specsize.core.kvcache import layer_blocks, request_kv_bytes
from specsize.core.memory import account, max_concurrency_at
from specsize.core.units import GiB

from helpers import calibration_rows, deployment, profile


def test_gqa_kv_bytes_per_token_and_tp2():
    # Llama-3.1-8B: 32 layers x 2 (K,V) x 8 KV heads x 128 x 2 bytes = 131,072; TP2 halves the heads per rank
    assert account(deployment(), profile()).kv_bytes_per_token == 131_072
    assert account(deployment(tp=2), profile()).kv_bytes_per_token == 65_536


def test_tp8_replicates_nothing_and_tp16_would_replicate():
    # 70B at TP8: 1 KV head per rank: 80 x 2 x 1 x 128 x 2 = 40,960 B per token per GPU
    assert account(deployment("meta-llama/Llama-3.1-70B-Instruct", tp=8), profile()).kv_bytes_per_token == 40_960


def test_mla_latent_is_not_sharded_and_fp8_halves_it():
    # DeepSeek-V3: 61 layers x (kv_lora_rank 512 + rope 64) x 2 bytes = 70,272 B per token on every rank
    d = deployment("deepseek-ai/DeepSeek-V3", gpu="H200-141GB", tp=8)
    m = account(d, profile())
    assert m.kv_bytes_per_token == 61 * 576 * 2 == 70_272
    assert m.settings.block_size == 64  # FlashMLA pages
    m8 = account(deployment("deepseek-ai/DeepSeek-V3", gpu="H200-141GB", tp=8, kv_cache_dtype="fp8"), profile())
    assert m8.kv_bytes_per_token == 35_136


def test_vllm_before_0_7_1_caches_deepseeks_decompressed_keys_and_values():
    # before MLA (0.7.1) vLLM cached every head's keys and values, values zero-padded to qk_nope + qk_rope = 192:
    # at TP 8, 16 heads per GPU: 61 x 2 x 16 x 192 x 2 B = 749,568 B per token, 10.7x the latent's 70,272 (Neural
    # Magic's blog on 0.7.1, 8 x H200: token capacity 54,560 -> 512,000, "approximately 9.6x")
    from specsize.core.perf import model_cost

    d = deployment("deepseek-ai/DeepSeek-V3", gpu="H200-141GB", tp=8)
    assert account(d, profile("0.7.0")).kv_bytes_per_token == 61 * 2 * 16 * 192 * 2 == 749_568
    assert account(d, profile("0.6.6")).kv_bytes_per_token == 749_568
    assert account(d, profile("0.7.1")).kv_bytes_per_token == 70_272
    assert account(d, profile("0.7.0")).settings.block_size == 16
    # the step model reads and attends over the same: 16 heads x 192 per layer, no latent prompt path
    expanded = model_cost(d.target, 8, "bfloat16", None, mla_latent=False)
    assert {width for _, _, width in expanded.kv_layers} == {16 * 192}
    assert sum(b for b, _, _ in expanded.kv_layers) == 749_568 and expanded.prompt_attn_width == 0


def test_sliding_window_request_demand_and_vllm_concurrency():
    m = account(deployment("google/gemma-2-2b-it"), profile())
    # 26 layers x 2 x 4 KV heads x 256 x 2 bytes = 106,496 per token; half are sliding (window 4096)
    assert m.kv_bytes_per_token == 106_496
    # 10,000 tokens: full layers ceil(10000/16) = 625 blocks; sliding min(625, ceil(4096/16) + 1 = 257)
    assert request_kv_bytes(m.kv_layers, 10_000, 16) == 13 * 16 * 4096 * (625 + 257)
    # vLLM 0.19 printed 670,160 tokens (41,885 blocks) and "Maximum concurrency for 8,192 tokens: 81.73x":
    # 41,885 x 26 layer-blocks / (13 x 512 full + 13 x 513 sliding, charged window-1 + 8192 batched + 1)
    assert round(max_concurrency_at(m.kv_layers, 41_885, 16, 8192, 8192), 2) == 81.73


def test_sliding_layer_blocks_bounded_by_window():
    m = account(deployment("openai/gpt-oss-20b"), profile())
    sliding = next(layer for layer in m.kv_layers if layer.kind == "sliding")
    assert layer_blocks(sliding, 100_000, 16) == -(-128 // 16) + 1  # window 128 -> 8 blocks + 1
    assert layer_blocks(sliding, 100, 16) == 7


def test_budget_equation_and_block_rounding_with_fixed_pool():
    # 70B TP4 + 1B draft unsharded on rank 0: 81,920 + 32,768 = 114,688 B per token; 16-token blocks of
    # 1,835,008 B; a 10 GiB pool holds floor(10,737,418,240 / 1,835,008) = 5,851 blocks = 93,616 tokens
    d = deployment("meta-llama/Llama-3.1-70B-Instruct", tp=4, draft="meta-llama/Llama-3.2-1B-Instruct",
                   method="draft_model", k=4, kv_cache_memory_bytes=10 * GiB)
    m = account(d, profile())
    assert (m.kv_bytes_per_token_target, m.kv_bytes_per_token_draft) == (81_920, 32_768)
    assert m.kv_blocks == 5_851 and m.kv_cache_tokens == 93_616
    assert m.weights_draft_bytes == 2_488_406_016  # the whole 1B draft (draft_tp=1)


def test_budget_terms_add_up():
    m = account(deployment(gpu_memory_utilization=0.95, max_model_len=8192), profile("0.19"))
    expected = m.budget_bytes - m.weights_target_bytes - m.activation_peak_bytes - m.non_torch_bytes
    assert m.kv_cache_bytes == expected  # 0.19 does not subtract CUDA graphs
    latest = account(deployment(gpu_memory_utilization=0.95, max_model_len=8192), profile())
    assert latest.kv_cache_bytes == expected - latest.cuda_graph_bytes


def test_eagle_head_kv_shares_pool():
    d = deployment(draft="sgl-project/SpecForge-llama3-8B-eagle3", method="eagle3", k=3)
    m = account(d, profile())
    assert m.kv_bytes_per_token_draft == 2 * 8 * 128 * 2  # one layer at the target's KV width
    assert m.weights_draft_bytes < 1 * GiB  # embedding shared with the target


def test_mtp_adds_one_mla_layer():
    d = deployment("deepseek-ai/DeepSeek-V3", gpu="H200-141GB", tp=8, method="mtp", k=1)
    m = account(d, profile())
    assert m.kv_bytes_per_token_draft == 576 * 2
    assert 1.0 * GiB < m.weights_draft_bytes < 3 * GiB  # ~14B-parameter MTP module / 8 ranks, fp8


def test_ngram_adds_no_weights_or_kv():
    m = account(deployment(method="ngram", k=4), profile())
    assert m.weights_draft_bytes == 0 and m.kv_bytes_per_token_draft == 0


def test_gpt_oss_graph_memory_follows_its_own_capture_sizes():
    # vLLM's GptOssForCausalLMConfig captures up to 1024 tokens whatever max_num_seqs: the estimate is the per-layer
    # figure (0.023 GiB at the default list, 1, 2, 4 and 8..512 by 8: 67 sizes) x 24 layers x (3 + 1024 / 8) / 67 =
    # 1.08 GiB, where vLLM 0.19.0 printed "Estimated CUDA graph memory: 1.09 GiB total" for gpt-oss-20b at TP 2
    # (bench/data/blind_startups.jsonl, llmdplanner-gpt-oss-20b-tp2); the default rule (512) would give 0.55 GiB
    d = deployment("openai/gpt-oss-20b", tp=2, max_model_len=8192)
    per_layer = int(0.023 * GiB)
    assert account(d, profile("0.19")).cuda_graph_bytes == int(per_layer * 24 * 131 / 67)
    assert account(d, profile("0.19")).cuda_graph_bytes / GiB == pytest.approx(1.09, rel=0.01)
    # a dense model keeps the default rule
    assert account(deployment(max_model_len=8192), profile("0.19")).cuda_graph_bytes == int(per_layer * 32 * 67 / 67)


def test_enforce_eager_drops_cuda_graphs():
    assert account(deployment(enforce_eager=True), profile()).cuda_graph_bytes == 0


@pytest.mark.parametrize("row_id", ["r2-llmdplanner-llama31-8b-tp1", "r2-llmdplanner-llama31-8b-kvfp8",
                                    "r2-llmdplanner-llama31-8b-tp2", "r2-llmdplanner-qwen25-7b-tp1"])
def test_real_vllm_startups_within_one_percent(row_id):
    row = calibration_rows().get(row_id)
    if row is None:
        pytest.skip("calibration data not beside this checkout")
    from specsize.catalog import load_gpu

    d = deployment(row["target_model"], tp=row["tensor_parallel_size"], kv_cache_dtype=row["kv_cache_dtype"],
                   gpu_memory_utilization=row["gpu_memory_utilization"], max_model_len=row["max_model_len"])
    assert load_gpu("H100-SXM-80GB").memory_bytes == round(row["total_gpu_memory_gib"] * GiB)
    m = account(d, profile(row["engine_version"]))
    assert abs(m.weights_target_bytes / GiB / row["model_weights_gib"] - 1) < 0.01
    assert abs(m.kv_cache_tokens / row["kv_cache_tokens"] - 1) < 0.01


def test_sort_based_top_k_top_p_in_the_sampler_profile_before_0_17():
    # llm-d-planner's version sweep (Qwen3-14B, one H100 of 79.19 GiB, util 0.95, 8192 tokens / 1024 sequences):
    # torch peak 5.64 GiB at vLLM 0.15.0 and 0.16.0, 2.23 GiB at 0.17.0 with everything else equal. 0.11-0.16 hold
    # 5.88 more fp32 vocabulary row-sets for the sampler's sort: 5.88 x 1024 x 151,936 x 4 B = 3.41 GiB.
    d = deployment("Qwen/Qwen3-14B", gpu_memory_utilization=0.95, max_model_len=8192)
    old, new = account(d, profile("0.15")), account(d, profile("0.17"))
    assert abs((old.activation_peak_bytes - new.activation_peak_bytes) - 5.88 * 1024 * 151_936 * 4) < 1024
    assert abs(old.activation_peak_bytes / GiB - 5.64) < 0.03 and abs(new.activation_peak_bytes / GiB - 2.23) < 0.03
    # "kv_cache_tokens": 274,848 at 0.15.0 and 297,152 at 0.17.0 (bench/data/blind_startups.jsonl)
    assert abs(old.kv_cache_tokens / 274_848 - 1) < 0.01 and abs(new.kv_cache_tokens / 297_152 - 1) < 0.01


def test_v1_peak_is_the_sampler_step_plus_kept_moe_workspaces():
    # vLLM 0.19.0, 8192 batched tokens, 1024 sequences (H100 defaults). Llama-3.1-8B is sampler-bound: 3.68 fp32
    # row-sets of 1024 x 128,256 x 4 B and 1.29 hidden sets of 8192 x 4096 x 2 B, whatever the TP (the start-ups
    # print "torch peak memory increase: 1.89GiB" at TP1, TP2 and TP4)
    sampler = 3.68 * 1024 * 128_256 * 4 + 1.29 * 8192 * 4096 * 2
    for tp in (1, 2, 4):
        m = account(deployment(tp=tp, gpu_memory_utilization=0.95, max_model_len=8192), profile("0.19"))
        assert m.activation_terms["moe_workspace"] == 0
        assert abs(m.activation_peak_bytes - sampler) <= 1
        assert abs(m.activation_peak_bytes / GiB - 1.89) < 0.02
    # Qwen3-30B-A3B keeps the fused-MoE kernel's two workspaces, (M, top_k, max(N/2, K)) and (M, top_k, max(N, K)),
    # N = 2 x 768, K = 2048: 8192 x 8 x (2048 + 2048) x 2 B = 0.5 GiB on top of its sampler step; printed: 2.68 GiB
    m = account(deployment("Qwen/Qwen3-30B-A3B", gpu_memory_utilization=0.95, max_model_len=8192), profile("0.19"))
    assert m.activation_terms["moe_workspace"] == 8192 * 8 * 4096 * 2 == 536_870_912
    assert abs(m.activation_peak_bytes / GiB - 2.68) < 0.02
    # gpt-oss's mxfp4 experts run a monolithic kernel whose buffers live inside the call: no kept workspace
    # (gpt-oss-20b TP2 printed 2.87 GiB, its sampler step: 3.68 x 1024 x 201,088 x 4 + 1.29 x 8192 x 2880 x 2)
    m = account(deployment("openai/gpt-oss-20b", tp=2, max_model_len=8192), profile("0.19"))
    assert m.activation_terms["moe_workspace"] == 0
    assert abs(m.activation_peak_bytes - (3.68 * 1024 * 201_088 * 4 + 1.29 * 8192 * 2880 * 2)) <= 1
    assert abs(m.activation_peak_bytes / GiB / 2.87 - 1) < 0.01


def test_model_runner_v2_reserves_no_graphs_for_dense_models_in_0_25_to_0_27():
    # A public vLLM 0.26.0 start-up (RTX 4080, Qwen2.5-7B-Instruct-AWQ, util 0.9 of 15.99 GiB) gave the KV cache
    # 14.39 - 5.29 weights - 1.04 activation - 0.06 non-torch = 8.00 GiB, its 0.48 GiB of CUDA graphs not taken:
    # Model Runner V2 (the dense default from 0.25) returned 0 from profile_cudagraph_memory (vllm issue 49224)
    assert round(0.9 * 15.99 - 5.29 - 1.04 - 0.06, 2) == 8.00
    dense = deployment("Qwen/Qwen2.5-7B-Instruct", max_model_len=8192)
    for version, reserved in (("0.24", True), ("0.25", False), ("0.27", False), ("0.28", True)):
        m = account(dense, profile(version))
        assert m.cuda_graph_counted is reserved
        # the budget equation: everything but the KV pool, graphs only where reserved
        assert m.kv_cache_bytes == (m.budget_bytes - m.weights_target_bytes - m.activation_peak_bytes
                                    - m.non_torch_bytes - (m.cuda_graph_bytes if reserved else 0))
    # MoE and hybrid models and n-gram speculation stay on the V1 runner, which subtracts its estimate
    assert account(deployment("Qwen/Qwen3-30B-A3B", max_model_len=8192), profile("0.26")).cuda_graph_counted
    ngram = deployment("Qwen/Qwen2.5-7B-Instruct", method="ngram", k=4, max_model_len=8192)
    assert account(ngram, profile("0.26")).cuda_graph_counted


@pytest.mark.parametrize(("gpu", "version", "seqs", "tokens"), [
    # vllm/engine/arg_utils.py: "if device_memory >= 70 * GiB_bytes and "a100" not in device_name": 8192 tokens /
    # 1024 sequences for the OpenAI server, else 2048 / 256 (vLLM PR #17885 keeps the A100 80 GB on the latter)
    ("H100-SXM-80GB", "0.11", 1024, 8192),
    ("A100-80GB", "0.11", 256, 2048),
    ("A100-80GB", "0.32", 256, 2048),
    # 0.8: H100 and H200 by name (PR #12369: 8192 tokens; PR #16158: 256 sequences "for hardware other than H100/200");
    # 0.9-0.10: the >= 70 GiB rule without the A100 (PR #17885)
    ("H100-SXM-80GB", "0.8", 1024, 8192),
    ("H200-141GB", "0.8", 1024, 8192),
    ("MI300X-192GB", "0.8", 256, 2048),
    ("A100-80GB", "0.8", 256, 2048),
    ("H100-SXM-80GB", "0.10", 1024, 8192),
    ("MI300X-192GB", "0.10", 1024, 8192),
    ("A100-80GB", "0.10", 256, 2048),
])
def test_serving_defaults_by_gpu(gpu, version, seqs, tokens):
    from specsize.core.memory import resolve_settings

    s = resolve_settings(deployment(gpu=gpu), profile(version), None)
    assert (s.max_num_seqs, s.max_num_batched_tokens) == (seqs, tokens)


def test_a_v0_multi_step_group_streams_where_async_output_processing_runs():
    # vLLM 0.6 config.py verify_async_output_proc: on by default, off with pipeline parallel, with --enforce-eager on
    # a GPU, and on a device other than cuda / tpu / xpu / hpu; a multi-step group hands its steps' outputs over as it
    # runs only with it (worker/multi_step_model_runner.py _async_process_outputs, else _final_process_outputs)
    v0 = profile("0.6.4")
    assert account(deployment(gpu="A100-80GB", num_scheduler_steps=8), v0).settings.group_streams
    assert not account(deployment(gpu="A100-80GB"), v0).settings.group_streams  # one step: no group
    assert not account(deployment(gpu="A100-80GB", num_scheduler_steps=8, enforce_eager=True),
                       v0).settings.group_streams
    assert not account(deployment("meta-llama/Llama-3.1-70B-Instruct", gpu="A100-80GB", tp=2, pp=2,
                                  num_scheduler_steps=8, max_model_len=8192), v0).settings.group_streams


def test_vllm_v0_chunks_prompts_by_default_above_32k():
    # vLLM 0.6's arg_utils: "Chunked prefill is enabled by default for models with max_model_len > 32K", then its
    # SchedulerConfig: "Chunked prefill is enabled with max_num_batched_tokens=512" (the whole model length with
    # multi-step); below 32K a step budget of at least the model length and prompt-only steps (prefill first)
    from specsize.core.errors import SpecError

    v0 = profile("0.6.4")
    long = account(deployment(gpu="A100-80GB"), v0).settings  # Llama-3.1-8B: max_model_len 131,072
    assert (long.max_num_batched_tokens, long.prefill_first) == (512, False)
    short = account(deployment(gpu="A100-80GB", max_model_len=4096), v0).settings
    assert (short.max_num_batched_tokens, short.prefill_first) == (4096, True)
    off = account(deployment(gpu="A100-80GB", chunked_prefill="off"), v0).settings
    assert (off.max_num_batched_tokens, off.prefill_first) == (131_072, True)
    on = account(deployment(gpu="A100-80GB", max_model_len=4096, chunked_prefill="on"), v0).settings
    assert (on.max_num_batched_tokens, on.prefill_first) == (512, False)
    steps = account(deployment(gpu="A100-80GB", num_scheduler_steps=8), v0).settings
    assert (steps.max_num_batched_tokens, steps.prefill_first) == (131_072, False)
    # speculation keeps V0's default off (arg_utils: "not use_spec_decode")
    spec = account(deployment(gpu="A100-80GB", method="ngram", k=3), v0).settings
    assert spec.prefill_first and spec.max_num_batched_tokens == 131_072
    with pytest.raises(SpecError, match="chunked_prefill"):
        account(deployment(chunked_prefill="off"), profile("0.32"))
