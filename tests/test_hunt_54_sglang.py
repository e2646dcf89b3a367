"""Hunt 54: SGLang's accounting across its releases: the running-request limit as each release resolves it, a version
written "0.5", the hybrid sliding-window (SWA) pools, the CUDA-graph limit of a verification tree, and the start-up
log of 0.5.23's post-capture pool sizing. Each expectation is worked by hand from SGLang's own code, read in its PyPI
wheels (sglang/srt/...), cited per test."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from helpers import deployment
from helpers import run_cli as run

from specsize.core.memory import account
from specsize.engines import resolve_profile
from specsize.engines.readers import read_startup_log

LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE3_HEAD = "sgl-project/SpecForge-llama3-8B-eagle3"
GPT_OSS = "openai/gpt-oss-120b"
CONTEXT = 131_072  # Llama 3.1's and gpt-oss's max_position_embeddings: SGLang's context_len
RATIO = 0.8  # --swa-full-tokens-ratio's default (server_args.py, every release from 0.4.10)
GPT_OSS_LAYER_CELL = 2 * 8 * 64 * 2  # (K, V) x 8 KV heads x head_dim 64 x bf16 bytes = 2,048 B per layer per token


def sglang(version=None):
    return resolve_profile("sglang", version)


# --- max_running_requests as each release resolves it ------------------------------------------------------------
# model_runner_kv_cache_mixin.py _resolve_max_num_reqs: estimated = max(min(int(tokens / context_len x 512), 4096),
# 2048); 0.5.10-0.5.13 "min(max_num_reqs // dp_size, estimated)" when --max-running-requests is given, 0.5.14
# "min(requested_per_worker, token_capacity // 2)"; before 0.5.10 the given value as it is (managers/tp_worker.py,
# model_runner.py). The request table (ReqToTokenPool) holds max_num_reqs rows of context_len + 4 int32 slots: the
# given or estimated value before 0.5.10, the resolved limit from 0.5.10 (_init_pools: size=max_num_reqs =
# self.max_running_requests).

@pytest.mark.parametrize("version,running", [("0.5.9", 8192), ("0.5.10", 4096), ("0.5.13", 4096), ("0.5.14", 8192)])
def test_a_given_running_limit_above_the_estimate_is_capped_in_0_5_10_to_0_5_13(version, running):
    """A short context and --max-running-requests 8192 on an H100: the pool holds far more than 16,384 tokens, so the
    estimate is its cap of 4,096 (int(tokens / 2,048 x 512) > 4,096); 0.5.10-0.5.13 run at most 4,096, the others the
    8,192 asked for (0.5.14: min(8,192, tokens // 2), tokens well above 16,384)."""
    mem = account(deployment(max_num_seqs=8192, max_model_len=2048), sglang(version))
    assert mem.kv_cache_tokens > 2 * 8192
    assert mem.settings.max_num_seqs == running
    # 0.5.10 on: the table holds the limit's rows; before, the given value's
    assert mem.engine_terms["request_table_bytes"] == running * (2048 + 4) * 4


def test_from_0_5_14_a_given_limit_is_at_most_half_the_pool():
    """A pool of a few thousand tokens (mem_fraction_static 0.2: 0.2 x 78.6 GiB free less 15 GiB of weights) and
    --max-running-requests 4096: 0.5.14 runs tokens // 2 (model_runner_kv_cache_mixin.py: 'max_running_requests was
    reduced from the requested %d to %d'); 0.5.13 the estimate, 2,048 (the pool is far below 131,072 / 512 x 2,048
    tokens); 0.5.9 the 4,096 asked for."""
    d = deployment(max_num_seqs=4096, gpu_memory_utilization=0.2)
    late, mid, early = account(d, sglang("0.5.14")), account(d, sglang("0.5.13")), account(d, sglang("0.5.9"))
    assert 2 * 1024 < late.kv_cache_tokens < 2 * 4096
    assert late.settings.max_num_seqs == late.kv_cache_tokens // 2
    assert late.engine_terms["request_table_bytes"] == late.kv_cache_tokens // 2 * (CONTEXT + 4) * 4
    assert any("lowers max_running_requests from 4096" in note for note in late.engine_terms["notes"])
    assert mid.settings.max_num_seqs == 2048 and mid.engine_terms["request_table_bytes"] == 2048 * (CONTEXT + 4) * 4
    assert early.settings.max_num_seqs == 4096 and early.engine_terms["request_table_bytes"] == 4096 * (CONTEXT + 4) * 4


def test_without_a_given_limit_the_table_follows_the_limit_from_0_5_10():
    """Not given: min(estimate, tokens // 2) everywhere; the table holds the estimate's rows before 0.5.10 (2,048 at a
    131,072-token context and a pool under 524,288 tokens) and the limit's from 0.5.10, the same 2,048 here."""
    for version in ("0.5.9", "0.5.14"):
        mem = account(deployment(), sglang(version))
        assert mem.settings.max_num_seqs == 2048
        assert mem.engine_terms["request_table_bytes"] == 2048 * (CONTEXT + 4) * 4


# --- "0.5": no 0.5.0 release ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["0.5", "0.5.0", "v0.5"])
def test_sglang_0_5_is_refused_naming_the_series_releases(capsys, version):
    """PyPI has 0.4.10.post2, the pre-releases 0.5.0rc0-rc2, then 0.5.1: "0.5" had been planned with 0.4.7.post1's
    accounting (X.Y read as X.Y.0, which falls before 0.5.1)."""
    code, _, err = run(capsys, "plan", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--engine", "sglang",
                       "--engine-version", version, "--concurrency", "8")
    assert code == 2 and "Traceback" not in err
    line = [ln for ln in err.splitlines() if "error" in ln]
    assert len(line) == 1 and "engine_version" in line[0]
    assert "0.5.1-0.5.2" in line[0] and "0.5.15 and later" in line[0] and "0.4.7.post1" not in line[0]


def test_other_series_and_the_0_5_pre_releases_are_read_as_before():
    assert sglang("0.5.0rc2").label.startswith("SGLang 0.4.10.post2")  # the last release before it
    assert sglang("0.4").version == "0.4"  # 0.4.0 was released
    assert resolve_profile("vllm", "0.10").version == resolve_profile("vllm", "0.10.0").version == "0.10"  # 0.10.1: its own


# --- the hybrid SWA pools ------------------------------------------------------------------------------------------
# Full-attention pool F and SWA pool S = int(F x 0.8) (server_args.py swa_full_tokens_ratio 0.8). From the pool T a
# unified layout would hold (every layer a token), with n_f full and n_s windowed layers of equal cells:
#   0.4.10 - 0.5.8 (set_num_token_hybrid / set_num_tokens_hybrid_swa): F = int(T x (n_f + n_s) / (0.8 x n_s + n_f))
#   0.5.9 - 0.5.13 (memory-based): the same with bytes, each aligned to the page (a page of 1 here)
#   0.5.14 (pool_configurator.py HybridSWAPoolConfigurator): F = int(bytes // (F_cell + 0.8 x S_cell))

def test_gpt_oss_takes_the_hybrid_pools_from_0_5_8():
    """gpt-oss-120b: 18 full and 18 sliding layers. 0.5.7 turns the hybrid pool off for it (server_args.py
    "self.disable_hybrid_swa_memory = True" in its GptOssForCausalLM branch); 0.5.8 gives it the pools
    (model_config.py is_hybrid_swa_model); both releases size the same budget the same way otherwise."""
    unified = account(deployment(target=GPT_OSS), sglang("0.5.7"))
    hybrid = account(deployment(target=GPT_OSS), sglang("0.5.8"))
    t = unified.kv_cache_tokens
    assert unified.engine_terms["swa_pool_tokens"] == 0
    full = int(t * 36 / (0.8 * 18 + 18))  # 1.111 x t: the "pool about 11% larger"
    assert hybrid.kv_cache_tokens == full
    assert hybrid.engine_terms["swa_pool_tokens"] == int(full * RATIO)
    layer_cell = GPT_OSS_LAYER_CELL
    assert hybrid.kv_cache_bytes == full * 18 * layer_cell + int(full * RATIO) * 18 * layer_cell
    assert unified.kv_cache_bytes == t * 36 * layer_cell
    # the same bytes, within the two pools' rounding (a token of each)
    assert abs(hybrid.kv_cache_bytes - unified.kv_cache_bytes) <= 2 * 36 * layer_cell
    # requests are counted against the full pool: a 4,800-token request holds 4,800 of its F slots
    assert hybrid.pool_bytes // (4800 * (18 * layer_cell + int(layer_cell * RATIO) * 18)) == full // 4800


def test_gpt_oss_on_0_5_14_splits_the_bytes_left_by_the_fraction():
    mem = account(deployment(target=GPT_OSS), sglang("0.5.14"))
    terms = mem.engine_terms
    rest = int(terms["mem_fraction_static"] * terms["free_before_loading_bytes"] - mem.weights_target.total)
    full = int(rest // (18 * GPT_OSS_LAYER_CELL + RATIO * 18 * GPT_OSS_LAYER_CELL))
    assert mem.kv_cache_tokens == full and terms["swa_pool_tokens"] == int(full * RATIO)


@pytest.mark.parametrize("version,method,gpu,hybrid", [
    ("0.5.8", "eagle3", "H100-SXM-80GB", False),  # "Disable hybrid SWA memory for GPT-OSS model with speculative decoding"
    ("0.5.9", "eagle3", "H100-SXM-80GB", True),  # that rule is gone in 0.5.9
    ("0.5.9", "none", "B200-180GB", False),  # "... with trtllm_mha attention backend", its default on compute cap. 10
    ("0.5.10", "none", "B200-180GB", True),  # gone in 0.5.10
])
def test_gpt_oss_loses_the_hybrid_pools_where_the_release_turns_them_off(version, method, gpu, hybrid):
    d = deployment(target=GPT_OSS, gpu=gpu)
    if method != "none":
        d = deployment(target=GPT_OSS, gpu=gpu, method=method, k=3, draft="sgl-project/SpecForge-gpt-oss-120B-eagle3")
    mem = account(d, sglang(version))
    assert (mem.engine_terms["swa_pool_tokens"] > 0) is hybrid


def test_gemma_3_has_the_hybrid_pools_only_in_0_4_10():
    """gemma-3-27b-it: 10 full and 52 sliding layers. Hybrid from 0.4.10 (model_runner.py "Check if the model is using
    hybrid SWA": a model with get_attention_sliding_window_size, Llama 4 excepted), never before (0.4.9 has no
    swa_full_tokens_ratio) nor from 0.5.1 ("Disable hybrid SWA memory for Gemma3ForConditionalGeneration as it is not
    yet supported"). 0.4.9, 0.4.10 and 0.5.1 share the default fraction ('reserved')."""
    d = deployment(target="google/gemma-3-27b-it", gpu="H200-141GB")
    before, during, after = (account(d, sglang(v)) for v in ("0.4.9", "0.4.10", "0.5.1"))
    t = before.kv_cache_tokens
    assert during.kv_cache_tokens == int(t * 62 / (0.8 * 52 + 10))  # 1.20 x t
    assert after.kv_cache_tokens == t and after.engine_terms["swa_pool_tokens"] == 0


def test_gemma_2_loses_the_hybrid_pools_in_0_4_10_post2():
    """server_args.py 0.4.10.post2: "Disable hybrid SWA memory for Gemma2ForCausalLM" (not in 0.4.10.post1)."""
    d = deployment(target="google/gemma-2-9b", gpu="H100-SXM-80GB")
    post1, post2 = account(d, sglang("0.4.10.post1")), account(d, sglang("0.4.10.post2"))
    assert post1.engine_terms["swa_pool_tokens"] > 0 and post2.engine_terms["swa_pool_tokens"] == 0
    assert post1.kv_cache_tokens == int(post2.kv_cache_tokens * 42 / (0.8 * 21 + 21))


def test_llama_4_takes_the_hybrid_pools_from_0_5_8():
    """Llama4ForConditionalGeneration is in 0.5.8's is_hybrid_swa_model; its chunked layers (three in four:
    get_hybrid_layer_ids "(i + 1) % 4 != 0") take the SWA pool. Before, only with --hybrid-kvcache-ratio."""
    d = deployment(target="meta-llama/Llama-4-Scout-17B-16E-Instruct", gpu="H200-141GB", tp=2)
    unified, hybrid = account(d, sglang("0.5.7")), account(d, sglang("0.5.8"))
    assert hybrid.kv_cache_tokens == int(unified.kv_cache_tokens * 48 / (0.8 * 36 + 12))


def test_the_plan_of_a_hybrid_model_counts_the_full_pool(capsys):
    """gpt-oss-120b on 0.5.14: the plan's KV cache tokens are the full-attention pool (what max_total_num_tokens and
    the start-up log say), and it says so."""
    code, out, _ = run(capsys, "plan", "--target", GPT_OSS, "--gpu", "H100-SXM-80GB", "--engine", "sglang",
                       "--engine-version", "0.5.14", "--concurrency", "8", "--format", "json")
    data = json.loads(out)
    assert code in (0, 1)
    assert any("hybrid SWA pools" in note for note in data["notes"])


# --- a verification tree's CUDA graphs -----------------------------------------------------------------------------

def test_a_trees_verify_graphs_hold_its_draft_tokens_per_sequence():
    """cuda_graph_runner.py: target-verify graphs are captured with num_tokens_per_bs =
    speculative_num_draft_tokens, up to cuda_graph_max_bs sequences (256 on an H100 at TP 1 from 0.5.3:
    _handle_gpu_memory_settings, below 90 GiB). A tree of 8 nodes at k = 5: 256 x 8 = 2,048 tokens in a graph, not
    256 x 6; a chain keeps k + 1."""
    d = deployment(method="eagle3", k=5, draft=EAGLE3_HEAD)
    tree = replace(d, speculative=replace(d.speculative, tree_topk=4, num_draft_tokens=8))
    assert account(tree, sglang("0.5.14")).settings.graph_max_tokens == 256 * 8
    assert account(d, sglang("0.5.14")).settings.graph_max_tokens == 256 * 6


# --- small cards: decode graphs to 16 in 0.5.3 - 0.5.4 -----------------------------------------------------------

@pytest.mark.parametrize("version,graphs", [("0.5.3", 16), ("0.5.4", 16), ("0.5.5", 24), ("0.5.14", 24)])
def test_a_card_of_20_to_35_gib_captures_decode_graphs_to_16_before_0_5_5(version, graphs):
    """server_args.py _handle_gpu_memory_settings, gpu_mem < 35 GiB at TP < 4: "self.cuda_graph_max_bs = 16" in the
    0.5.3 and 0.5.4 wheels, 24 from 0.5.5. An L4 (22.5 GiB of 24 GB) with Llama-3.2-1B; the default fraction reserves
    512 + 1.5 x 2,048 + 2 x graphs + 1/8 x 1,024 MiB (from 0.5.10 also the prompt graphs, 8 MiB a size up to 2,048)."""
    mem = account(deployment(target="meta-llama/Llama-3.2-1B-Instruct", gpu="L4-24GB"), sglang(version))
    assert mem.engine_terms["cuda_graph_max_bs"] == graphs
    gpu_mib = mem.total_bytes / 2**20
    piecewise = 8 * (8 + 14 + 8 + 8 + 4) if version == "0.5.14" else 0
    reserved = 512 + 1.5 * 2048 + 2 * graphs + 1 / 8 * 1024 + piecewise
    assert mem.engine_terms["mem_fraction_static"] == round((gpu_mib - reserved) / gpu_mib, 3)


# --- 0.5.23's post-capture pool sizing in the start-up log ---------------------------------------------------------

def test_the_post_capture_pool_replaces_the_address_space_bound():
    """SGLANG_ENABLE_POST_CAPTURE_KV_SIZING=1 (0.5.23): memory_pool.py prints "KV Cache VA upper bound. ... #tokens"
    first, then model_runner_components/kv_pool_runtime.py "Post-capture KV sizing: KV cache allocated. dtype: %s,
    #tokens: %d, KV size: %.2f GB, avail mem=%.2f GB" and one "draft KV cache allocated" line per draft."""
    log = "\n".join([
        "[2026-12-01 10:00:01 TP0] Full KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 900000, K size: 20.00 "
        "GB, V size: 20.00 GB",
        "[2026-12-01 10:00:09 TP0] Post-capture KV sizing: full_layer_tokens=880000, swa_layer_tokens=704000",
        "[2026-12-01 10:00:09 TP0] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 880000, "
        "KV size: 70.40 GB, avail mem=3.10 GB",
        "[2026-12-01 10:00:09 TP0] Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, #tokens: "
        "880000, KV size: 3.36 GB",
        "[2026-12-01 10:00:10 TP0] max_total_num_tokens=880000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=48, context_len=131072, available_gpu_mem=3.00 GB",
    ])
    out = read_startup_log(log)
    assert out.kv_cache_tokens == 880_000 and out.available_kv_gib == 70.40 and out.draft_kv_gib == 3.36
    assert out.max_running_requests == 48


@pytest.mark.parametrize("version,inside", [("0.5.14", False), ("0.5.15", True)])
def test_a_hybrid_targets_eagle_draft_is_sized_inside_the_fraction_from_0_5_15(version, inside):
    """pool_configurator.py HybridSWAPoolConfigurator: 0.5.14's cell is F x n_f + 0.8 x S x n_s, the draft worker's
    pool then allocated from what is left; 0.5.15's adds the draft's layers at a full layer's bytes ("budget into the
    full term"): one EAGLE-3 layer of 2,048 B a token here. The draft's weights are loaded before sizing in both."""
    d = deployment(target=GPT_OSS, gpu="H200-141GB", method="eagle3", k=3, draft="sgl-project/SpecForge-gpt-oss-120B-eagle3")
    mem = account(d, sglang(version))
    terms = mem.engine_terms
    loaded = mem.weights_target.total + mem.weights_draft_bytes + terms["duplicate_embedding_bytes"]
    rest = int(terms["mem_fraction_static"] * terms["free_before_loading_bytes"] - loaded)
    cell = 18 * GPT_OSS_LAYER_CELL + RATIO * 18 * GPT_OSS_LAYER_CELL + (GPT_OSS_LAYER_CELL if inside else 0)
    assert mem.kv_cache_tokens == int(rest // cell)
    assert terms["draft_sized_with_target"] is inside


def test_check_live_agrees_with_a_hybrid_servers_log(capsys, tmp_path):
    """gpt-oss-120b on an H100 with 0.5.14: the server's log prints the full-attention pool, int(rest // (18 x 2,048 +
    0.8 x 18 x 2,048)) (model_runner_kv_cache_mixin / pool_configurator.py "Use sliding window memory pool.
    full_layer_tokens=F, swa_layer_tokens=S" and "SWAKVPool mem usage: ..., swa size: S, full size: F"); the plan,
    which had charged every layer every token, said 10% fewer tokens and check-live called the server off-plan."""
    code, out, _ = run(capsys, "plan", "--target", GPT_OSS, "--gpu", "H100-SXM-80GB", "--engine", "sglang",
                       "--engine-version", "0.5.14", "--concurrency", "8", "--format", "json")
    plan = json.loads(out)
    terms = plan["per_gpu"]["engine_terms"]
    mem = account(deployment(target=GPT_OSS), sglang("0.5.14"))
    rest = int(terms["mem_fraction_static"] * terms["free_before_loading_bytes"] - mem.weights_target.total)
    full = int(rest // (18 * GPT_OSS_LAYER_CELL + RATIO * 18 * GPT_OSS_LAYER_CELL))
    swa = int(full * RATIO)
    (tmp_path / "plan.json").write_text(out)
    (tmp_path / "start.log").write_text("\n".join([
        f"[2026-12-01 10:00:01] Use sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={swa}",
        f"[2026-12-01 10:00:01] KV Cache is allocated. dtype: torch.bfloat16, #tokens: {swa}, K size: 1.00 GB, "
        "V size: 1.00 GB",
        f"[2026-12-01 10:00:01] KV Cache is allocated. dtype: torch.bfloat16, #tokens: {full}, K size: 1.20 GB, "
        "V size: 1.20 GB",
        f"[2026-12-01 10:00:01] SWAKVPool mem usage: 4.40 GB, swa size: {swa}, full size: {full}",
        f"[2026-12-01 10:00:09] max_total_num_tokens={full}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=2048, context_len=131072, available_gpu_mem=9.00 GB"]) + "\n")
    code, out, _ = run(capsys, "check-live", "--plan", tmp_path / "plan.json", "--log", tmp_path / "start.log",
                       "--format", "json")
    data = json.loads(out)
    assert plan["kv_cache_tokens"] == full
    assert data["observed"]["kv_cache_tokens"] == full
    assert not any(v.startswith("KV cache:") for v in data["violations"])
