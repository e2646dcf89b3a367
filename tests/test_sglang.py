"""SGLang's accounting, readers and launch command: expectations worked out by hand from SGLang's formulas
(src/specsize/engines/sglang/accounting.py cites them) and from published start-up logs
(tests/fixtures/sglang/startup_logs.jsonl)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import GiB, deployment

from specsize.catalog.gpus import used_memory_from_nvidia_smi
from specsize.core.errors import SpecError
from specsize.core.memory import account
from specsize.engines import resolve_profile
from specsize.engines.emit import engine_flags, sglang_command
from specsize.engines.readers import read_metrics, read_startup_log
from specsize.engines.registry import beyond_known

FIXTURES = Path(__file__).parent / "fixtures" / "sglang" / "startup_logs.jsonl"
LLAMA8B_CELL = 32 * 2 * 8 * 128 * 2  # layers x (K, V) x KV heads x head_dim x bf16 bytes = 131,072 B per token


def sglang(version=None):
    return resolve_profile("sglang", version)


def logs() -> list[dict]:
    return [json.loads(line) for line in FIXTURES.read_text().splitlines() if line.strip()]


# --- releases --------------------------------------------------------------------------------------------------

def test_release_ranges_follow_the_patch_number():
    # the defaults changed within 0.4.5 and 0.4.6 (read in the PyPI wheels): a profile may start at a post release
    assert sglang("0.4.3.post2").version == "0.4"
    assert sglang("0.4.3.post3").version == "0.4.3.post3"  # both pools take the draft's extra slots
    assert sglang("0.4.4.post3").version == "0.4.4"  # --page-size
    assert sglang("0.4.4.post4").version == "0.4.4.post4"  # 48 running requests with an EAGLE-family draft
    assert sglang("0.4.5").version == "0.4.4.post4"
    assert sglang("0.4.5.post2").version == "0.4.5.post1"  # fa3 for MLA on Hopper (test_mla_prompt_attention_...)
    assert sglang("0.4.5.post3").version == "0.4.5.post3"
    assert sglang("0.4.6").version == "0.4.6"  # MLA prompts without a prefix as multi-head attention on Hopper too
    assert sglang("0.4.6.post1").version == "0.4.6"
    assert sglang("0.4.6.post2").version == "0.4.6.post2"
    assert sglang("0.4.6.post5").version == "0.4.6.post2"
    assert sglang("0.4.7").version == "0.4.7"
    assert sglang("0.4.7.post1").version == "0.4.7.post1"
    assert sglang("0.4.10").version == "0.4.10"  # the hybrid sliding-window pool for Gemma 2 and 3
    assert sglang("0.5.2").version == "0.5.1"  # --scheduler-recv-interval
    assert sglang("0.5.3").version == "0.5.3"  # _handle_gpu_memory_settings is in the 0.5.3 wheel already
    assert sglang("0.5.3.post3").version == "0.5.3"
    assert sglang("0.5.4").version == "0.5.4"  # trtllm_mla for DeepSeek-V3 on compute capability 10
    assert sglang("0.5.6").version == "0.5.5"  # decode graphs to 24 on 20-35 GiB cards at TP below 4
    assert sglang("0.5.7").version == "0.5.7"  # no extra pool slots for a draft; trtllm_mha on compute capability 10
    assert sglang("0.5.9").version == "0.5.9"  # gpt-oss's hybrid pool split by bytes
    assert sglang("0.5.10").version == "0.5.10"  # piecewise CUDA graphs for prompt steps
    assert sglang("0.5.11").version == "0.5.11"  # piecewise graphs with speculation too
    assert sglang("0.5.12").version == "0.5.11"
    assert sglang("0.5.13").version == "0.5.13"  # piecewise graphs with the flashinfer_trtllm MoE runner too
    assert sglang("0.5.14").version == "0.5.14"
    assert sglang().version == "0.5.15"  # the draft's layers sized inside the hybrid split
    with pytest.raises(SpecError, match="older than any"):
        sglang("0.3.6")
    assert beyond_known("sglang", "0.5.20") is not None
    assert beyond_known("vllm", "0.32.1") is None  # a vLLM patch release is not newer than its profile


# --- the default mem_fraction_static ---------------------------------------------------------------------------

@pytest.mark.parametrize("gpu, tp, method, draft, version, expected", [
    # H100 (79.19 GiB = 81,090.56 MiB): reserved = 512 + 1.5 x 8192 + 2 x 256 + 1/8 x 1024 = 13,440 MiB
    ("H100-SXM-80GB", 1, "none", None, "0.5.6", 0.834),
    # RTX 4090 (23.55 GiB = 24,115.2 MiB): chunk 2048, graphs 24: 512 + 3072 + 48 + 128 = 3,760 MiB -> 0.844
    ("RTX-4090-24GB", 1, "none", None, "0.5.6", 0.844),
    # H200 TP 8 (143,165.44 MiB): 512 + 12,288 + 2 x 512 + 1024 = 14,848, + 2048 for a draft = 16,896 -> 0.882
    ("H200-141GB", 8, "eagle3", "sgl-project/SpecForge-llama3-70B-eagle3", "0.5.6", 0.882),
    # ... and without the flat draft reserve after #23862, with 8 MiB for each of the 58 piecewise prompt graphs
    # (server_args.py, 0.5.10 on: reserved_mem += len(piecewise_cuda_graph_tokens) * 8): 14,848 + 464 -> 0.893
    ("H200-141GB", 8, "eagle3", "sgl-project/SpecForge-llama3-70B-eagle3", "0.5.14", 0.893),
    # 0.4-0.4.5.post2: by TP size
    ("H100-SXM-80GB", 4, "none", None, "0.4.5", 0.85),
    ("H200-141GB", 8, "none", None, "0.4.5.post2", 0.81),
    # 0.4.5.post3-0.4.6.post1: above 81,920 MiB, (143,165.44 - 13,312) / 143,165.44 = 0.907019...; the table below
    ("H200-141GB", 8, "none", None, "0.4.5.post3", (143_165.44 - 13_312) / 143_165.44),
    ("H100-SXM-80GB", 4, "none", None, "0.4.6", 0.85),
    # 0.4.6.post2-0.4.6.post5: 0.88 above 81,920 MiB, then min(0.88 + 49,152 x 0.12 / 143,165.44 = 0.921199...,
    # (143,165.44 - 18,432) / 143,165.44 = 0.871254...)
    ("H200-141GB", 8, "none", None, "0.4.6.post2", (143_165.44 - 18_432) / 143_165.44),
    # 0.4.7: 0.79 on a CUDA card above 180,000 MiB (B200: 182,630.4 MiB)
    ("B200-180GB", 8, "none", None, "0.4.7", 0.79),
    # 0.4.7.post1-0.5.2: reserved 9.5 + 4 / 2 = 11.5 GiB below 90 GiB: (81,090.56 - 11,776) / 81,090.56 -> 0.855;
    # TP 1: 10 GiB -> 0.874; H200 TP 8: 12 + 4 = 16 GiB -> (143,165.44 - 16,384) / 143,165.44 -> 0.886
    ("H100-SXM-80GB", 4, "none", None, "0.4.9", 0.855),
    ("H100-SXM-80GB", 1, "none", None, "0.4.9", 0.874),
    ("H200-141GB", 8, "none", None, "0.5.2", 0.886),
])
def test_default_fraction(gpu, tp, method, draft, version, expected):
    target = "meta-llama/Llama-3.3-70B-Instruct" if draft and "70B" in draft else "meta-llama/Llama-3.1-8B-Instruct"
    d = deployment(target=target, gpu=gpu, tp=tp, method=method, draft=draft, k=3 if draft else 0)
    assert account(d, sglang(version)).settings.gpu_memory_utilization == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("gpu, tp, version, chunk, graphs", [
    ("H200-141GB", 8, "0.4.5.post2", 8192, 160),  # cuda_graph_max_bs = 160 set by server_args
    ("H200-141GB", 8, "0.4.5.post3", 8192, 256),  # unset; the capture list adds 160..256 above 81,920 MiB
    ("H100-SXM-80GB", 8, "0.4.5.post3", 8192, 160),  # 81,090.56 MiB: the base list, up to 160
    ("H20-96GB", 1, "0.4.6.post2", 8192, 160),  # 97,361.92 MiB, not above 96 x 1024
    ("B200-180GB", 8, "0.4.7", 16384, 512),  # above 180,000 MiB: chunks of 16,384, graphs to 512
    ("H20-96GB", 1, "0.4.9", 8192, 256),  # above 90 x 1024 MiB
    ("B200-180GB", 8, "0.5.2", 16384, 512),  # 182,630.4 MiB: at least 160 GiB, and above 160,000 MiB
    ("RTX-4090-24GB", 1, "0.4.9", 2048, 8),  # below 35 GiB: cuda_graph_max_bs 8 at TP < 4
    ("RTX-4090-24GB", 1, "0.4.6", 2048, 8),  # below 25,000 MiB
])
def test_default_chunk_and_decode_graph_limit_by_release(gpu, tp, version, chunk, graphs):
    mem = account(deployment(gpu=gpu, tp=tp), sglang(version))
    assert (mem.settings.max_num_batched_tokens, mem.engine_terms["cuda_graph_max_bs"]) == (chunk, graphs)
    assert mem.settings.graph_max_tokens == graphs  # decode batches above it run outside a graph


# --- the pool: f x (what was free before loading) - weights ----------------------------------------------------

def test_other_processes_shrink_the_pool_by_the_fraction_of_them():
    d = deployment(gpu_memory_utilization=0.85)
    alone = account(d, sglang())
    shared = account(replace(d, shared_reserved_bytes=2 * GiB), sglang())
    # 0.85 x 2 GiB / 131,072 B = 13,926.4 tokens fewer
    assert alone.kv_cache_tokens - shared.kv_cache_tokens in (13926, 13927)
    assert alone.kv_bytes_per_token == LLAMA8B_CELL


def test_the_fraction_is_of_the_memory_free_before_loading_not_of_the_card():
    low = account(deployment(gpu_memory_utilization=0.80), sglang())
    high = account(deployment(gpu_memory_utilization=0.81), sglang())
    free_before = (79.19 - 0.60) * GiB  # H100 as the driver reports it, less SGLang's context at TP 1
    assert high.kv_cache_tokens - low.kv_cache_tokens == pytest.approx(0.01 * free_before / LLAMA8B_CELL, abs=1)
    assert high.engine_terms["free_before_loading_bytes"] == pytest.approx(free_before, abs=2)


def test_a_co_resident_model_must_raise_the_fraction():
    d = replace(deployment(gpu_memory_utilization=0.834), shared_reserved_bytes=65 * GiB)
    mem = account(d, sglang())
    assert mem.kv_cache_tokens == 0
    assert "increase --mem-fraction-static" in mem.startup_problem and "raise mem_fraction_static" in mem.startup_problem
    # the same card under vLLM: the budget (0.9 x 79.19 GiB) exceeds what is free, vLLM refuses
    vllm = account(replace(d, engine=replace(d.engine, gpu_memory_utilization=0.9)), resolve_profile("vllm"))
    assert "refuses to start" in vllm.startup_problem


def test_page_size_aligns_the_pool():
    mem = account(deployment(gpu_memory_utilization=0.85, block_size=64), sglang())
    assert mem.kv_cache_tokens % 64 == 0 and mem.kv_blocks == mem.kv_cache_tokens // 64


# --- the draft's pool ------------------------------------------------------------------------------------------

EAGLE3 = dict(method="eagle3", draft="sgl-project/SpecForge-llama3-8B-eagle3", k=3, gpu_memory_utilization=0.85)
EAGLE3_CELL = 1 * 2 * 8 * 128 * 2  # one layer of the head: 4,096 B per token


def test_before_0_5_14_the_draft_pool_takes_the_targets_token_count_after_it():
    # 0.5.7 - 0.5.13 (0.4.3.post3 - 0.5.6 add R x (steps x topk + draft tokens) + 100 slots to both pools:
    # test_hunt_53_sglang.test_an_eagle_draft_adds_slots_to_both_pools_before_0_5_7)
    plain = account(deployment(gpu_memory_utilization=0.85), sglang("0.5.7"))
    spec = account(deployment(**EAGLE3), sglang("0.5.7"))
    assert spec.kv_cache_tokens == plain.kv_cache_tokens  # the target's pool is sized as if there were no draft
    assert spec.kv_bytes_per_token_draft == EAGLE3_CELL
    assert spec.kv_cache_bytes == spec.kv_cache_tokens * (LLAMA8B_CELL + EAGLE3_CELL)
    assert spec.settings.max_num_seqs == 48  # "Max running requests is reset to 48 for speculative decoding"


def test_an_eagle_draft_caps_the_running_requests_at_48_from_0_4_4_post4():
    # server_args.py sets max_running_requests = 48 for EAGLE / EAGLE3 when it is not given: in the 0.4.4.post4 wheel;
    # 32 in the 0.4.3.post3 - 0.4.4.post3 wheels (EAGLE3 a choice from 0.4.4.post2), none before
    assert account(deployment(**EAGLE3), sglang("0.4.4.post3")).settings.max_num_seqs == 32
    assert account(deployment(method="eagle", draft="sgl-project/SpecForge-llama3-8B-eagle3", k=3),
                   sglang("0.4.3.post3")).settings.max_num_seqs == 32
    assert account(deployment(method="eagle", draft="sgl-project/SpecForge-llama3-8B-eagle3", k=3),
                   sglang("0.4.3.post2")).settings.max_num_seqs > 48
    for version in ("0.4.4.post4", "0.4.5.post3", "0.4.9", "0.5.2"):
        assert account(deployment(**EAGLE3), sglang(version)).settings.max_num_seqs == 48


def test_from_0_5_14_the_draft_sits_inside_the_fraction():
    plain = account(deployment(gpu_memory_utilization=0.85), sglang("0.5.14"))
    spec = account(deployment(**EAGLE3), sglang("0.5.14"))
    terms = spec.engine_terms
    # the head builds its own 128,256 x 4,096 bf16 embedding before taking the target's (its lm_head is its own)
    assert terms["duplicate_embedding_bytes"] == 128256 * 4096 * 2
    assert terms["sizing_bytes_per_token"] == int(LLAMA8B_CELL * (1 + 1 / 32))  # 135,168
    freed = plain.kv_cache_tokens * LLAMA8B_CELL - spec.kv_cache_tokens * terms["sizing_bytes_per_token"]
    assert freed == pytest.approx(spec.weights_draft_bytes + terms["duplicate_embedding_bytes"], abs=135168)


def test_a_draft_that_no_longer_fits_outside_the_fraction_is_an_oom_before_0_5_14():
    d = deployment(method="draft_model", draft="meta-llama/Llama-3.2-1B-Instruct", k=4, gpu_memory_utilization=0.95)
    old = account(d, sglang("0.5.6"))
    assert "runs out of memory" in old.startup_problem and "draft's weights" in old.startup_problem
    new = account(d, sglang("0.5.14"))
    assert new.startup_problem is None and new.kv_cache_tokens < old.kv_cache_tokens


def test_unmodelled_layer_kinds_are_refused():
    from specsize.core.kvcache import KVLayer
    from specsize.engines.sglang.accounting import _as_pool_layers

    with pytest.raises(SpecError, match="not modelled"):
        _as_pool_layers((KVLayer("target", "mamba", None, 1),))


def test_vllms_own_kv_flag_is_refused_with_sglang():
    with pytest.raises(SpecError, match="kv_cache_memory_bytes"):
        account(deployment(kv_cache_memory_bytes=10 * GiB), sglang())


# --- published start-up logs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("row", logs(), ids=lambda row: row["id"])
def test_the_reader_reads_every_published_log(row):
    log = read_startup_log("\n".join(row["quote"]))
    assert log.engine == "sglang"
    assert log.kv_cache_tokens == row["kv_cache_tokens"]
    if row["kv_cache_tokens"] is None:
        assert log.refusal is not None
    elif row.get("kv_size_gib") is not None:  # MLA: one latent per token, printed as "KV size"
        assert log.available_kv_gib == row["kv_size_gib"]
    else:
        assert log.available_kv_gib == pytest.approx(row["k_size_gib"] + row["v_size_gib"])
    if row["weights_gib"] is not None:
        assert log.weights_gib == row["weights_gib"]
    if row["free_before_loading_gib"] is not None:
        assert log.free_before_loading_gib == pytest.approx(row["free_before_loading_gib"])


def test_gemma3_pool_from_the_printed_figures():
    """sgl-project/sglang#4826: 0.836 x 139.21 GiB - 8.13 GiB over 34 layers x 4 KV heads x 256 x 2 x 2 B."""
    row = next(r for r in logs() if r["id"].startswith("sglang-pull-4826"))
    cell = 34 * 2 * 4 * 256 * 2
    assert row["k_size_gib"] == pytest.approx(row["kv_cache_tokens"] * cell / 2 / GiB, abs=0.005)
    tokens = int((row["mem_fraction_static"] * row["free_before_loading_gib"] - row["weights_gib"]) * GiB) // cell
    assert abs(tokens - row["kv_cache_tokens"]) <= 2  # the GB figures are printed to 0.01


def test_mla_bytes_per_token_as_sglang_allocates_them():
    """ktransformers#2007: 260,000 tokens in 17.02 GiB = 70,288 B per token; DeepSeek-V3's 61 layers x (512 + 64)
    x 2 B = 70,272 B."""
    row = next(r for r in logs() if r["id"].startswith("ktransformers-issue-2007"))
    mem = account(deployment(target=row["architecture_like"], gpu="B200-180GB", tp=8), sglang())
    assert mem.kv_bytes_per_token_target == 61 * (512 + 64) * 2
    assert row["kv_cache_tokens"] * mem.kv_bytes_per_token_target / GiB == pytest.approx(row["kv_size_gib"], abs=0.005)


@pytest.mark.parametrize("row_id, tolerance", [("sglang-pull-4826-gemma3-4b-h200", 0.02),
                                               ("vllm-issue-21348-qwen3-235b-fp8-4xh100", 0.04)])
def test_predicted_pools_of_published_logs(row_id, tolerance):
    row = next(r for r in logs() if r["id"] == row_id)
    d = deployment(target=row["target_model"], gpu=row["gpu_model"], tp=row["tensor_parallel_size"],
                   gpu_memory_utilization=row["mem_fraction_static"], quantization=row.get("quantization"))
    mem = account(d, sglang(row["engine_version"]))
    assert mem.kv_cache_tokens == pytest.approx(row["kv_cache_tokens"], rel=tolerance)


def test_the_tp8_context_is_the_mean_of_the_two_logged_ones():
    logged = [r["free_before_loading_gib"] for r in logs()
              if r["gpu_model"] == "H200-141GB" and r["tensor_parallel_size"] == 8]
    mem = account(deployment(target="meta-llama/Llama-3.3-70B-Instruct", gpu="H200-141GB", tp=8), sglang())
    assert len(logged) == 2
    assert mem.engine_terms["free_before_loading_bytes"] / GiB == pytest.approx(sum(logged) / 2, abs=0.01)


def test_the_least_fraction_sglang_printed_is_weights_over_free_memory():
    """SemiAnalysisAI/InferenceX#2128: 125.65 / 137.90 = 0.9112 (printed 0.9113); with the NextN draft's 3.07 GB
    counted inside the fraction (0.5.14 and later), 128.72 / 137.90 = 0.9334 (printed 0.9335)."""
    row = next(r for r in logs() if r["id"].startswith("inferencex-issue-2128"))
    assert row["weights_gib"] / row["free_before_loading_gib"] == pytest.approx(row["minimum_fraction"], abs=2e-4)
    with_draft = (row["weights_gib"] + row["draft_weights_gib"]) / row["free_before_loading_gib"]
    assert with_draft == pytest.approx(row["minimum_fraction_mtp"], abs=2e-4)


def test_a_refusal_names_the_least_fraction():
    d = deployment(target="meta-llama/Llama-3.3-70B-Instruct", gpu="H100-SXM-80GB", tp=2, gpu_memory_utilization=0.8)
    mem = account(d, sglang())
    least = mem.weights_target_bytes / mem.engine_terms["free_before_loading_bytes"]
    assert mem.kv_cache_tokens == 0 and f"above {least:.4f}" in mem.startup_problem


def test_a_refusal_and_the_summary_line():
    log = read_startup_log("[2025-01-01 TP0] Not enough memory. Please try to increase --mem-fraction-static.")
    assert log.refusal is not None
    log = read_startup_log("max_total_num_tokens=409600, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                           "max_running_requests=2048, context_len=131072")
    assert (log.kv_cache_tokens, log.max_running_requests, log.max_concurrency_tokens) == (409600, 2048, 131072)


# --- /metrics ----------------------------------------------------------------------------------------------------

METRICS = """# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.25
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{model_name="meta-llama/Llama-3.1-8B-Instruct"} 102400.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 40.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# TYPE sglang:num_retracted_reqs gauge
sglang:num_retracted_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.2
"""


def test_sglang_metrics():
    m = read_metrics(METRICS)
    # SGLang rounds token_usage to two decimals: 0.25 says the pool is 102,400 / 0.245..0.255 = 401,569..417,959
    # tokens, not which; the pool is the served max_total_num_tokens gauge (0.5.9 on), else unknown
    assert m.kv_cache_tokens is None
    m = read_metrics(METRICS + "# TYPE sglang:max_total_num_tokens gauge\n"
                     'sglang:max_total_num_tokens{model_name="meta-llama/Llama-3.1-8B-Instruct"} 409600.0\n')
    assert m.kv_cache_tokens == 409600
    assert (m.kv_usage_fraction, m.running, m.waiting, m.preemptions) == (0.25, 40, 3, 2)
    assert m.mean_accepted_length == 3.2
    assert m.model == "meta-llama/Llama-3.1-8B-Instruct"
    with pytest.raises(SpecError, match="above 1"):
        read_metrics(METRICS.replace("} 0.25", "} 25"))


# --- the launch command ----------------------------------------------------------------------------------------

def test_launch_command_carries_sglangs_own_settings_and_the_tree():
    d = deployment(**EAGLE3)
    d = replace(d, speculative=replace(d.speculative, tree_topk=4, num_draft_tokens=8))
    command = sglang_command(d, account(d, sglang()))
    argv = list(command.argv)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    value = {flag: argv[i + 1] for i, flag in enumerate(argv) if flag.startswith("--") and i + 1 < len(argv)}
    assert value["--mem-fraction-static"] == "0.85" and value["--speculative-algorithm"] == "EAGLE3"
    assert value["--speculative-eagle-topk"] == "4" and value["--speculative-num-draft-tokens"] == "8"
    assert value["--max-running-requests"] == "48" and value["--page-size"] == "1"
    assert value["--cuda-graph-max-bs"] == "256"
    assert set(a for a in argv if a.startswith("--")) <= set(engine_flags()["sglang"]["flags"])


def test_a_vllm_plan_emits_sglang_with_sglangs_default_fraction():
    from specsize.api import plan

    result = plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB")
    commands = {c.engine: c for c in result.commands}
    assert "--gpu-memory-utilization 0.9" in commands["vllm"].shell
    # (81,090.56 - 13,440 - 58 x 8 MiB of piecewise prompt graphs) / 81,090.56 = 0.82854 (test_default_fraction)
    assert "--mem-fraction-static 0.829" in commands["sglang"].shell  # not vLLM's 0.9


def test_plan_with_engine_sglang():
    from specsize.api import plan

    result = plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine="sglang")
    assert result.profile.engine == "sglang" and result.to_dict()["engine"]["name"] == "sglang"
    assert result.to_dict()["per_gpu"]["engine_terms"]["mem_fraction_static"] == 0.829


# --- other processes ---------------------------------------------------------------------------------------------

SMI_TABLE = """
|   0  NVIDIA H100 80GB HBM3          Off |   00000000:18:00.0 Off |                    0 |
| N/A   28C    P0            165W /  700W |   75637MiB /  81559MiB |    100%      Default |
|   1  NVIDIA H100 80GB HBM3          Off |   00000000:2A:00.0 Off |                    0 |
| N/A   32C    P0            159W /  700W |   74285MiB /  81559MiB |    100%      Default |
"""


def test_nvidia_smi_printouts():
    # the table of sgl-project/sglang#10216: the busiest GPU counts
    assert used_memory_from_nvidia_smi(SMI_TABLE) == 75637 * 2**20
    assert used_memory_from_nvidia_smi("memory.used [MiB]\n1536 MiB\n812 MiB\n") == 1536 * 2**20
    assert used_memory_from_nvidia_smi("1024\n") == 1024 * 2**20
    with pytest.raises(SpecError, match="nvidia_smi"):
        used_memory_from_nvidia_smi("no figures here")


def test_other_processes_on_a_consumer_card_under_vllm(tmp_path):
    from specsize.api import plan

    common = dict(target="Qwen/Qwen2.5-7B-Instruct", gpu="RTX-4090-24GB", max_model_len=8192)
    plain = plan(**common)
    assert any("consumer card" in note for note in plain.notes)
    smi = tmp_path / "smi.csv"
    smi.write_text("memory.used [MiB]\n1536 MiB\n")
    busy = plan(**common, nvidia_smi=str(smi))
    # vLLM V1 budgets total x utilization whatever else is on the card: same pool, and 0.9 still starts
    assert busy.memory.kv_cache_tokens == plain.memory.kv_cache_tokens
    assert busy.memory.startup_problem is None and not any("consumer card" in n for n in busy.notes)
    # 0.95 x 23.55 GiB = 22.37 GiB > 23.55 - 1.5 GiB free: vLLM refuses
    assert "refuses to start" in plan(**common, nvidia_smi=str(smi), gpu_memory_utilization=0.95).memory.startup_problem
    with pytest.raises(SpecError, match="nvidia_smi"):
        plan(**common, nvidia_smi=str(smi), other_processes_gib=1.0)


# --- what the plan tells the user to change ----------------------------------------------------------------------

WORKLOAD = dict(prompt_tokens="p50=1000,p95=2000,p99=4000,max=8000", output_tokens="p50=200,p95=400,p99=800,max=1000",
                concurrency=8, max_model_len=16384, engine="sglang")


def test_an_oom_outside_the_fraction_recommends_the_largest_fraction_that_starts():
    from specsize.api import plan

    d = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine_version="0.5.6",
             method="draft_model", draft="meta-llama/Llama-3.2-1B-Instruct", num_speculative_tokens=4, **WORKLOAD)
    result = plan(gpu_memory_utilization=0.95, **d)
    fix = next(r for r in result.recommendations if "mem_fraction_static" in r.description)
    fit = fix.changes["gpu_memory_utilization"]
    assert fix.action == "lower_utilization" and fix.verdict_after == "fits"
    assert plan(gpu_memory_utilization=fit, **d).memory.startup_problem is None
    assert "runs out of memory" in plan(gpu_memory_utilization=round(fit + 0.01, 2), **d).memory.startup_problem


def test_a_pool_left_empty_by_other_processes_recommends_raising_the_fraction():
    from specsize.api import plan

    # 61 GiB held (62 leave no fraction that both holds the weights and leaves SGLang's 1 - f share room: that engine
    # never starts, and a fix that does not start it is not offered: core.envelope)
    result = plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", other_processes_gib=61, **WORKLOAD)
    assert result.memory.kv_cache_tokens == 0
    least = result.memory.weights_target_bytes / result.memory.engine_terms["free_before_loading_bytes"]
    fix = next(r for r in result.recommendations if r.action == "raise_fraction")
    fit = fix.changes["gpu_memory_utilization"]
    # above the weights' share of the free memory, and the largest fraction that starts (0.9 here: 0.91 leaves 1.58
    # GiB outside the pool, too little for the run-time buffers)
    assert fit > least
    kw = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", other_processes_gib=61, **WORKLOAD)
    assert plan(gpu_memory_utilization=fit, **kw).memory.startup_problem is None
    assert "runs out of memory" in plan(gpu_memory_utilization=round(fit + 0.01, 2), **kw).memory.startup_problem


def test_a_negative_default_fraction_recommends_the_largest_fraction_that_starts():
    # SGLang's default reserves 1.5 MiB per token of --chunked-prefill-size outside the pool: at 65,536 on an
    # 80 GB card the default fraction is below 0, and SGLang refuses to start. The fix had been one point above
    # the weights' share (0.23): a pool of 0.6 GiB, still does_not_fit; it is the largest fraction whose outside
    # share holds the run-time buffers (one point more runs out of memory), and it fits
    # (without speculation the requests it runs, and so its CUDA graphs, grow with the pool: the run-time buffers
    # are sized at each fraction tried, not at the refused one's single request)
    from specsize.api import plan

    for drafter in (dict(method="eagle3", num_speculative_tokens=3, acceptance_rate=0.7), dict(method="none")):
        d = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", max_num_batched_tokens=65536,
                 **drafter, **WORKLOAD)
        result = plan(**d)
        assert result.memory.engine_terms["mem_fraction_static"] < 0
        assert "refuses to start" in result.memory.startup_problem
        fix = result.recommendations[0]
        fit = fix.changes["gpu_memory_utilization"]
        assert fix.action == "raise_fraction" and fix.verdict_after == "fits" and "headroom none ->" in fix.description
        assert plan(gpu_memory_utilization=fit, **d).memory.startup_problem is None
        assert "runs out of memory" in plan(gpu_memory_utilization=round(fit + 0.01, 2), **d).memory.startup_problem


def test_a_tree_of_one_node_is_refused():
    # N counts the root: --speculative-num-draft-tokens 1 drafts nothing (it had been priced and simulated as the
    # run without speculation, labelled eagle3)
    from specsize.api import plan

    with pytest.raises(SpecError, match="num_draft_tokens"):
        plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine="sglang", method="eagle3",
             num_speculative_tokens=3, tree_topk=4, num_draft_tokens=1, acceptance_rate=0.7)


def test_check_live_reads_an_sglang_server_at_the_plans_k():
    from specsize.api import plan
    from specsize.planner.live import check

    planned = plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", method="eagle3",
                   draft="sgl-project/SpecForge-llama3-8B-eagle3", num_speculative_tokens=3, acceptance_rate=0.8,
                   **WORKLOAD).to_dict()
    # 1.5 tokens per pass at k = 3: 1 + a + a^2 + a^3 = 1.5 -> a = 0.3425 (0.3425 + 0.1173 + 0.0402), below 0.8
    metrics = read_metrics(METRICS.replace("3.2", "1.5"))
    result = check(planned, metrics, None)
    assert result.observed.mean_accepted_length == 1.5
    assert result.observed.acceptance_rate == pytest.approx(0.3425, abs=0.001)
    assert any("acceptance" in v for v in result.violations)
    log = read_startup_log("[x TP0] KV Cache is allocated. #tokens: 1000, K size: 0.06 GB, V size: 0.06 GB")
    assert any("KV cache" in v for v in check(planned, None, log).violations)


def test_vllm_up_to_0_6_3_counted_other_processes_as_its_own_non_torch_memory():
    d = deployment(target="Qwen/Qwen2.5-7B-Instruct", gpu="RTX-4090-24GB", max_model_len=8192)
    busy = replace(d, shared_reserved_bytes=int(1.5 * GiB))
    early, later = resolve_profile("vllm", "0.6.3"), resolve_profile("vllm", "0.6.4")
    assert account(d, early).kv_cache_bytes - account(busy, early).kv_cache_bytes == int(1.5 * GiB)
    assert account(busy, early).startup_problem is None
    assert account(busy, later).kv_cache_bytes == account(d, later).kv_cache_bytes


def test_every_resource_limit_is_pinned_in_sglangs_command():
    from specsize.api import plan
    from specsize.planner.compliance import cis4

    result = plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", tp=2, **WORKLOAD)
    control = cis4(result, {})
    assert control.status == "pass"
    assert not [line for line in control.evidence if "NOT in the emitted command" in line]


def test_a_hybrid_target_is_refused_not_planned_without_its_state():
    """Qwen3-Next keeps a per-sequence state in 36 of its 48 layers; SGLang carves a state cache out before the KV
    pool, which specsize does not model for SGLang: refused (exit 2 through the CLI), not planned as if only its
    12 attention layers held memory."""
    from specsize.cli.main import main

    d = deployment(target="Qwen/Qwen3-Next-80B-A3B-Instruct", gpu="H200-141GB", tp=2)
    with pytest.raises(SpecError, match="state cache for .*gated_delta_net"):
        account(d, sglang("0.5.14"))
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--engine", "sglang", "--target", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--gpu", "H200-141GB",
              "--tp", "2"])
    assert exc.value.code == 2


def test_sglang_0_5_12_pays_the_launches_of_an_eager_prompt_step_on_b200_where_0_5_13_graphs_it():
    # Qwen3-30B-A3B (bf16) on a B200: 0.5.12 picks the flashinfer_trtllm MoE runner and turns the piecewise graphs off,
    # so one client's 1,000-token prompt step pays 48 layers x 40 us + 48 MoE layers x 0.25 ms = 13.9 ms of launches
    # (the catalog's eager_layer_s, SGLang's eager_gqa_moe_layer_s) that 0.5.13's graphed step does not
    from specsize import api

    def ttft(version: str) -> float:
        report = api.simulate(target="Qwen/Qwen3-30B-A3B", gpu="B200-180GB", tp=1, engine="sglang",
                              engine_version=version, no_compare=True, seed=0, client_concurrency=1, num_requests=4,
                              prompt_tokens=1000, output_tokens=20)
        return report.spec.ttft_s.p50

    assert ttft("0.5.12") - ttft("0.5.13") == pytest.approx(48 * 40e-6 + 48 * 2.5e-4, abs=1e-3)


def test_sglang_pads_mxfp4_experts_its_own_way():
    # gpt-oss-120b: 36 layers of 128 experts, hidden 2,880, intermediate 2,880. vLLM pads the experts to a hidden size
    # of 3,072 (multiple of 256) and an intermediate of 2,944 (multiple of 128): 65.91 GiB at TP 1, against the 65.97
    # its log prints (vllm-project/vllm issue 23278). SGLang's triton_kernels path on Hopper pads the intermediate to a
    # multiple of 32 (2,880 already is) and leaves the hidden size: the checkpoint's 60.78 GiB. (vLLM runs Marlin on
    # Hopper up to 0.11, the release this compares; OpenAI's Triton kernels from 0.12: tests/test_hunt_54_mxfp4.py)
    vllm_w = account(deployment(target="openai/gpt-oss-120b", gpu="H100-SXM-80GB"), resolve_profile("vllm", "0.11"))
    sgl_w = account(deployment(target="openai/gpt-oss-120b", gpu="H100-SXM-80GB"), sglang("0.5.6"))
    assert vllm_w.weights_target.total / GiB == pytest.approx(65.91, abs=0.01)
    assert sgl_w.weights_target.total / GiB == pytest.approx(60.78, abs=0.01)
    # the experts alone: 36 x 128 x (2 x 2,880 + 2,880) x 2,880 x 4.25 bits, padded by vLLM to 3,072 x (2 x 2,944 + 2,944)
    experts = 36 * 128 * 3 * 2880 * 2880 * 4.25 / 8
    padded = 36 * 128 * 3 * 3072 * 2944 * 4.25 / 8
    assert (vllm_w.weights_target.total - sgl_w.weights_target.total) / (padded - experts) == pytest.approx(1.0, abs=0.02)


def test_a_step_reads_the_experts_the_engine_holds():
    # the engine's padding (AccountingProfile.mxfp4_pad) sets both the weights and what a decode step reads: SGLang's
    # gpt-oss-120b experts on an H100 are 2,880 x 2,880 per projection where vLLM 0.11's (Marlin) are 3,072 x 2,944
    # (x 1.0904)
    from specsize.catalog.gpus import load_efficiency
    from specsize.core.speculation import Tree
    from specsize.planner.perf import costs_for

    d = deployment(target="openai/gpt-oss-120b", gpu="H100-SXM-80GB")
    eff = load_efficiency(d.gpu)
    read = {}
    for name, profile in (("vllm", resolve_profile("vllm", "0.11")), ("sglang", sglang("0.5.6"))):
        mem = account(d, profile)
        read[name] = costs_for(d, mem, eff, 0, Tree()).target.expert_bytes
    assert account(d, sglang("0.5.6")).settings.mxfp4_pad == (1, 32)
    assert read["vllm"] / read["sglang"] == pytest.approx(3072 * 2944 / (2880 * 2880), rel=0.01)
    b200 = deployment(target="openai/gpt-oss-120b", gpu="B200-180GB")
    assert account(b200, sglang("0.5.6")).settings.mxfp4_pad == (256, 256)  # FlashInfer's tiles on compute capability 10


def test_mla_prompt_attention_by_release_and_gpu():
    # how a DeepSeek prompt step runs its attention (AccountingProfile.mla_prompt_mha: (with no prefix, from this
    # prefix on)), read in the PyPI wheels' models/deepseek_v2.py and model_runner.py: triton up to 0.4.5 (multi-head
    # only without a prefix); fa3 on Hopper from 0.4.5.post1 (post1-post3: only from 8,192 tokens of prefix; 0.4.6 on:
    # without one too); trtllm_mla on datacenter Blackwell from 0.5.4 and aiter on AMD (every prompt step); vLLM
    # always multi-head (MLACommonImpl's prefill)
    from specsize.core.memory import MLA_ABSORBED

    def rule(engine, version, gpu):
        return account(deployment(target="deepseek-ai/DeepSeek-V3", gpu=gpu, tp=8),
                       resolve_profile(engine, version)).settings.mla_prompt_mha

    assert rule("vllm", None, "H200-141GB") == (True, 0)
    assert rule("sglang", "0.4.5", "H200-141GB") == (True, MLA_ABSORBED)
    assert rule("sglang", "0.4.5.post2", "H200-141GB") == (False, 8192)
    assert rule("sglang", "0.4.5.post3", "H200-141GB") == (False, 8192)
    assert rule("sglang", "0.4.6", "H200-141GB") == (True, 8192)
    assert rule("sglang", "0.4.5.post2", "A100-80GB") == (True, MLA_ABSORBED)
    assert rule("sglang", "0.5.3", "B200-180GB") == (True, 8192)
    assert rule("sglang", "0.5.4", "B200-180GB") == (True, 0)
    assert rule("sglang", "0.5.12", "MI300X-192GB") == (True, 0)


def test_sglang_launches_a_gqa_moe_layer_for_a_quarter_of_an_mla_one_by_hand():
    # outside a CUDA graph a forward pays eager_layer_s per layer and eager_moe_layer_s per MoE layer; SGLang's MoE
    # layers behind ordinary attention 0.25 ms (AccountingProfile.eager_gqa_moe_layer_s), DeepSeek's (MLA) and vLLM's
    # the family's 1 ms. Qwen3-30B-A3B on an H100: 48 layers, all MoE: 48 x (40 us + 0.25 ms) = 13.92 ms under SGLang,
    # 48 x 1.04 ms = 49.92 ms under vLLM; DeepSeek-V3 at TP 8: 61 x 40 us + 58 x 1 ms = 60.44 ms under both
    from specsize.catalog.gpus import load_efficiency
    from specsize.core.speculation import Tree
    from specsize.planner.perf import costs_for

    def launches(target, engine, tp=1, gpu="H100-SXM-80GB"):
        d = deployment(target=target, gpu=gpu, tp=tp)
        profile = sglang("0.5.6") if engine == "sglang" else resolve_profile("vllm")
        co = costs_for(d, account(d, profile), load_efficiency(d.gpu), 0, Tree()).target_co
        assert co is not None
        return co.ungraphed_s

    assert sglang("0.5.6").eager_gqa_moe_layer_s == 2.5e-4
    assert launches("Qwen/Qwen3-30B-A3B", "sglang") == pytest.approx(48 * (40e-6 + 2.5e-4))
    assert launches("Qwen/Qwen3-30B-A3B", "vllm") == pytest.approx(48 * (40e-6 + 1e-3))
    for engine in ("sglang", "vllm"):
        assert launches("deepseek-ai/DeepSeek-V3", engine, tp=8, gpu="H200-141GB") == pytest.approx(
            61 * 40e-6 + 58 * 1e-3)


def test_sglang_fused_moe_fixed_time_on_blackwell_by_hand():
    # a step's fixed time holds moe_layer_fixed_s per MoE layer: the family's 16 us (Hopper and Blackwell, from the
    # kernel tables of vLLM's kernels), SGLang's own 35 us on Blackwell for bf16 / fp8 experts
    # (AccountingProfile.moe_layer_fixed_s_by_gpu).
    # Qwen3-235B-A22B has 94 layers, every one MoE: at TP 8 on a B200 SGLang's step holds 94 x (35 - 16) us =
    # 1.786 ms more fixed time than vLLM's; on an H200 the two are the same
    from specsize.catalog.gpus import load_efficiency
    from specsize.core.speculation import Tree
    from specsize.planner.perf import costs_for

    def fixed(engine, gpu, target="Qwen/Qwen3-235B-A22B"):
        d = deployment(target=target, gpu=gpu, tp=8)
        profile = sglang("0.5.6") if engine == "sglang" else resolve_profile("vllm")
        co = costs_for(d, account(d, profile), load_efficiency(d.gpu), 0, Tree()).target_co
        assert co is not None
        return co.fixed_s

    assert account(deployment(target="Qwen/Qwen3-235B-A22B", gpu="B200-180GB", tp=8),
                   sglang("0.5.6")).settings.moe_layer_fixed_s == 3.5e-5
    assert account(deployment(target="Qwen/Qwen3-235B-A22B", gpu="H200-141GB", tp=8),
                   sglang("0.5.6")).settings.moe_layer_fixed_s == 0.0
    assert fixed("sglang", "B200-180GB") - fixed("vllm", "B200-180GB") == pytest.approx(94 * 19e-6)
    assert fixed("sglang", "H200-141GB") == pytest.approx(fixed("vllm", "H200-141GB"))
    # MXFP4 experts run FlashInfer's own fused runner and keep the family's 16 us: gpt-oss-120b (36 MoE layers)
    assert fixed("sglang", "B200-180GB", "openai/gpt-oss-120b") == pytest.approx(
        fixed("vllm", "B200-180GB", "openai/gpt-oss-120b"))


def test_the_plan_says_what_sglang_picks_or_leaves_out():
    # SGLang caps its running requests at 48 with an EAGLE-family drafter when --max-running-requests is not given
    # (server_args.py, 0.4.4.post4 on): the plan says so beside the queue it causes, and not once max_num_seqs is
    # given; the accountant's other notes (Gemma-3's windowed layers charged every token) reach the plan's notes too
    import specsize

    fields = dict(engine="sglang", target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", method="eagle3",
                  num_speculative_tokens=3, acceptance_rate=0.7, concurrency=256, prompt_tokens="p50=500,p99=1000",
                  output_tokens="p50=100,p99=300")
    capped = specsize.plan(**fields)
    assert capped.verdict.worst_case.concurrency == 48 and capped.verdict.worst_case.queued == 256 - 48
    assert any(note.startswith("SGLang runs at most 48 requests at once with EAGLE3 drafting") for note in capped.notes)
    given = specsize.plan(**fields, max_num_seqs=256)
    assert given.verdict.worst_case.concurrency == 256
    assert not any("requests at once" in note for note in given.notes)
    gemma = specsize.plan(engine="sglang", target="google/gemma-3-27b-it", gpu="H200-141GB")
    assert any("windowed layers charged every token" in note for note in gemma.notes)
