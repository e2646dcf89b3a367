"""Hunt 56: SGLang's accounting gaps - the hybrid sliding-window (SWA) pools of 0.5.11 - 0.5.13, and the free KV slots
its decode check wants for each running request with speculation, per release, which the simulator holds. Each
expectation is worked by hand from SGLang's own code, read in its PyPI wheels (sglang/srt/...), cited per test."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace

import pytest
from helpers import deployment
from helpers import run_cli as run
from test_simulator import config

from specsize.core.memory import account
from specsize.engines import resolve_profile
from specsize.simulator.engine import simulate
from specsize.simulator.workload import closed_batch

LLAMA_EAGLE3 = "sgl-project/SpecForge-llama3-8B-eagle3"
GPT_OSS_20B = "openai/gpt-oss-20b"
RATIO = 0.8  # --swa-full-tokens-ratio's default (server_args.py, every release from 0.4.10)
# gpt-oss-20b: 24 layers, alternately sliding (window 128) and full, 8 KV heads of 64 dims, bf16: (K, V) x 8 x 64 x 2 B
LAYER_CELL = 2 * 8 * 64 * 2
FULL = SWA = 12 * LAYER_CELL  # bytes per token of its 12 full and of its 12 sliding layers


def sglang(version):
    return resolve_profile("sglang", version)


# --- the hybrid SWA pools: 0.5.11 - 0.5.13 size them with the pool configurator, as 0.5.14 does -----------------

@pytest.mark.parametrize("version", ["0.5.11", "0.5.12", "0.5.13"])
def test_gpt_oss_pools_are_the_configurators_from_0_5_11(version):
    """model_runner_kv_cache_mixin.py _resolve_memory_pool_config (0.5.11, 0.5.12 and 0.5.13 wheels):
    create_memory_pool_configurator gives an is_hybrid_swa model HybridSWAPoolConfigurator (pool_configurator.py), and
    calculate_pool_sizes takes full = int(available_bytes // (F + r x S)), swa = int(full x r), each aligned down to the
    page - the bytes the fraction leaves, not 0.5.10's pool of every layer's tokens re-split (which lost a token on
    gpt-oss-20b on an H100: 1,269,924 for SGLang's 1,269,925)."""
    mem = account(deployment(target=GPT_OSS_20B, gpu="H100-SXM-80GB"), sglang(version))
    terms = mem.engine_terms
    rest = int(terms["mem_fraction_static"] * terms["free_before_loading_bytes"] - mem.weights_target.total)
    full = int(rest // (FULL + RATIO * SWA))
    assert mem.kv_cache_tokens == full and terms["swa_pool_tokens"] == int(full * RATIO)
    # 0.5.10 (_resolve_hybrid_swa_tokens) splits the pool profiled over every layer: tokens x (F + S) / (F + r x S)
    old = account(deployment(target=GPT_OSS_20B, gpu="H100-SXM-80GB"), sglang("0.5.10"))
    tokens = int(old.engine_terms["mem_fraction_static"] * old.engine_terms["free_before_loading_bytes"]
                 - old.weights_target.total) // (FULL + SWA)
    assert old.kv_cache_tokens == int(tokens * (FULL + SWA) / (FULL + RATIO * SWA))


def test_gpt_oss_20b_on_an_h100_by_hand():
    """gpt-oss-20b on one H100 (81,090.56 MiB as the driver reports it) with SGLang 0.5.14's default fraction:
    server_args.py _handle_gpu_memory_settings below 90 GiB: chunked prefill 8,192, decode graphs to 256 at TP 1;
    reserved = 512 + 1.5 x 8,192 + 2 x 256 + 1 x 1 / 8 x 1,024 + 8 MiB x 58 piecewise prompt sizes up to 8,192
    (_generate_piecewise_cuda_graph_tokens: 8 + 14 + 8 + 8 + 12 + 8) = 13,904 MiB, f = round((81,090.56 - 13,904) /
    81,090.56, 3) = 0.829. The full pool is the bytes left over F + 0.8 S = 44,236.8 B a token; the running limit
    min(max(min(int(full / 131,072 x 512), 4096), 2048), full // 2) = 4,096 (_resolve_max_num_reqs)."""
    d = deployment(target=GPT_OSS_20B, gpu="H100-SXM-80GB")
    gpu_mib = d.gpu.memory_bytes / 2**20
    reserved = 512 + 1.5 * 8192 + 2 * 256 + 1024 / 8 + 8 * (8 + 14 + 8 + 8 + 12 + 8)
    fraction = round((gpu_mib - reserved) / gpu_mib, 3)
    assert fraction == 0.829
    mem = account(d, sglang("0.5.14"))
    assert mem.engine_terms["mem_fraction_static"] == fraction
    free_before = d.gpu.memory_bytes - int(0.60 * 2**30)  # 0.60 GiB of CUDA context at TP 1 (engines/sglang)
    full = int(int(fraction * free_before - mem.weights_target.total) // (FULL + RATIO * SWA))
    assert mem.kv_cache_tokens == full
    assert mem.settings.max_num_seqs == min(max(min(int(full / 131_072 * 512), 4096), 2048), full // 2) == 4096


# --- the decode check's free slots per running request, per release -------------------------------------------------
# managers/scheduler.py update_running_batch retracts requests while not batch.check_decode_mem(...) (schedule_batch.py).
# steps = --speculative-num-steps, topk = --speculative-eagle-topk, N = --speculative-num-draft-tokens; pages of one.

def _eagle3(k, topk=1, draft_tokens=None, target="meta-llama/Llama-3.1-8B-Instruct", draft=LLAMA_EAGLE3, gpu=None,
            method="eagle3"):
    d = deployment(target=target, method=method, k=k, draft=draft, **({"gpu": gpu} if gpu else {}))
    return replace(d, speculative=replace(d.speculative, tree_topk=topk, num_draft_tokens=draft_tokens))


@pytest.mark.parametrize("version,tree,chain", [
    # decode_mem_cache_buf_multiplier = speculative_num_draft_tokens: N (8; a chain of 3: 4)
    ("0.4.3.post2", 8, 4),
    # = N + speculative_eagle_topk x speculative_num_draft_tokens: 8 + 4 x 8 = 40; a chain 4 + 1 x 4 = 8
    ("0.4.3.post3", 40, 8),
    # = N + topk x steps: 8 + 4 x 5 = 28; a chain 4 + 1 x 3 = 7 (the 1 + 2k the simulator held for every engine)
    ("0.4.3.post4", 28, 7), ("0.5.8", 28, 7),
    # new_tokens_required_next_decode: max(steps x topk, N) = max(20, 8) = 20; a chain max(3, 4) = 4 (spec v2 opt-in:
    # environ.py SGLANG_ENABLE_SPEC_V2 False)
    ("0.5.9", 20, 4), ("0.5.10", 20, 4),
    # spec v2 by default for a chain ("spec v2 currently only supports topk = 1"): kv_committed_len +
    # get_alloc_reserve_per_decode = 2 x max(3, 4) = 8 kept allocated; a tree stays on v1: 20
    ("0.5.11", 20, 8), ("0.5.12", 20, 8),
    # 0.5.13: a tree on spec v2 too (no top-k check; arg_groups/speculative_hook.py): 2 x max(20, 8) = 40
    ("0.5.13", 40, 8),
    # spec v2 for every algorithm (mem_cache/common.py get_alloc_reserve_per_decode): 2 x max(20, 8) = 40; 2 x 4 = 8
    ("0.5.14", 40, 8), ("0.5.23", 40, 8),
])
def test_the_decode_check_wants_each_releases_slots_a_request(version, tree, chain):
    profile = sglang(version)
    method = "eagle" if version.startswith("0.4.3") else "eagle3"  # EAGLE-3 from 0.4.4 (engines/methods.py)
    assert account(_eagle3(5, 4, 8, method=method), profile).settings.decode_reserve == tree
    assert account(_eagle3(3, method=method), profile).settings.decode_reserve == chain


@pytest.mark.parametrize("version,slots", [
    ("0.5.3", 12 + 10 * 1),  # N + topk x (steps or 1): NGRAM's topk is --speculative-ngram-max-bfs-breadth, 10
    ("0.5.8", 12 + 10 * 1),
    ("0.5.9", max(10 * 1, 12)),  # max(steps x topk, N)
    ("0.5.11", max(10 * 1, 12)),  # NGRAM turns the overlap off: spec v1
    ("0.5.14", 2 * max(10 * (12 // 10), 12)),  # spec v2; _handle_ngram: speculative_num_steps = N // topk
])
def test_ngram_is_checked_with_its_bfs_breadth_as_top_k(version, slots):
    d = deployment(method="ngram", k=11)  # 12 draft tokens verified (engines/sglang NGRAM_SHAPE)
    assert account(d, sglang(version)).settings.decode_reserve == slots


def test_without_speculation_nothing_is_reserved():
    assert account(deployment(), sglang("0.5.14")).settings.decode_reserve == 0


@pytest.mark.parametrize("version,slots", [
    # pages of 64 (trtllm_mha on a B200): 0.5.10 aligns each term up to the page: max(ceil64(3), ceil64(4)) = 64
    ("0.5.10", 64),
    # 0.5.14's spec v2 keeps ceil64(committed + 2 x max(3, 4)): 8 slots, its pages whole (the simulator's blocks)
    ("0.5.14", 8),
])
def test_the_check_on_pages_of_64(version, slots):
    d = _eagle3(3, target=GPT_OSS_20B, draft="sgl-project/SpecForge-gpt-oss-20B-eagle3", gpu="B200-180GB")
    mem = account(d, sglang(version))
    assert mem.settings.block_size == 64 and mem.settings.decode_reserve == slots


# --- the simulator holds what the check wants ---------------------------------------------------------------------

@pytest.mark.parametrize("reserve", [0, 20, 28, 40])
def test_the_simulator_holds_the_decode_reserve(reserve):
    """Two requests of 100 + 10 tokens, k = 5, no draft accepted, pages of one: each decode step adds one token, the
    last one starts from 100 + 10 - 2 = 108 computed tokens and needs 108 + R slots (R = the reserve; 0 takes
    1 + 2k = 11). A pool of 2 x (108 + R) runs both to the end; one slot less and the newest is retracted once -
    SGLang's check: free = pool - 2 x 108 < 2 x R."""
    slots = reserve or 1 + 2 * 5
    fits = 2 * (108 + slots)
    for blocks, preempted in ((fits, 0), (fits - 1, 1)):
        cfg = dataclasses.replace(config(num_blocks=blocks, k=5), block_size=1, decode_reserve=reserve)
        r = simulate(cfg, closed_batch(2, 100, 10, acceptance=0.0), seed=0)
        assert r.preemptions == preempted and r.finished.all()


def test_a_tree_on_sglang_0_5_8_is_retracted_where_the_old_reserve_kept_it():
    """The same two requests under SGLang 0.5.8's check for a 5 / 4 / 8 tree (28 slots each): a pool of 238 slots
    held both with the 1 + 2k = 11 the simulator had reserved; SGLang retracts one (238 - 2 x 101 = 36 < 56 free at
    the second decode step)."""
    base = dataclasses.replace(config(num_blocks=238, k=5), block_size=1)
    assert simulate(base, closed_batch(2, 100, 10), seed=0).preemptions == 0
    tree = account(_eagle3(5, 4, 8), sglang("0.5.8")).settings.decode_reserve
    r = simulate(dataclasses.replace(base, decode_reserve=tree), closed_batch(2, 100, 10), seed=0)
    assert r.preemptions >= 1 and r.finished.all()


# --- a request shorter than the window / 0.8 fills the SWA pool first ------------------------------------------------
# SGLang frees a request's SWA slots behind the window as it decodes (managers/schedule_batch.py maybe_evict_swa ->
# free_swa_out_of_window_slots), so a request of n tokens holds n slots of the full pool and min(n, window) of the SWA
# pool, which holds 0.8 x as many tokens (HybridSWAPoolConfigurator._solve_pool_sizes): below window / 0.8 tokens the
# SWA pool binds. Llama 4 Scout's chunked layers (attention_chunk_size 8,192, three in four) take the SWA pool from 0.5.8.

SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


def _scout_plan(capsys, concurrency, prompt, output):
    code, out, _ = run(capsys, "plan", "--target", SCOUT, "--gpu", "H200-141GB", "--tp", "2", "--engine", "sglang",
                       "--engine-version", "0.5.14", "--max-model-len", "32768",
                       "--prompt-tokens", f"p50={prompt // 2},p99={prompt},max={prompt}",
                       "--output-tokens", f"p50={output // 2},p99={output},max={output}",
                       "--concurrency", str(concurrency), "--format", "json")
    assert code in (0, 1)
    return json.loads(out)


def test_short_requests_on_llama_4_are_counted_against_the_swa_pool(capsys):
    """55 requests of 3,000 + 500 tokens: 192,500 tokens in each pool. The full pool holds 262,740 (headroom 26.7%,
    what the plan had said: fits); the SWA pool 0.8 x that, 210,192: headroom 1 - 192,500 / 210,192 = 8.4%, thin."""
    data = _scout_plan(capsys, 55, 3000, 500)
    full = data["kv_cache_tokens"]
    swa = data["per_gpu"]["engine_terms"]["swa_pool_tokens"]
    assert swa == int(full * RATIO)
    assert data["envelope"]["headroom_fraction"] == pytest.approx(1 - 55 * 3500 / (full * RATIO), abs=1e-6)
    assert data["verdict"] == "thin"


def test_long_requests_on_llama_4_are_counted_against_the_full_pool(capsys):
    """Above 8,192 / 0.8 = 10,240 tokens the full pool binds: 12 requests of 12,000 + 1,000 tokens hold 156,000 full
    slots and only 8,193 SWA slots each (the chunk and a block: core.kvcache.window_cap)."""
    data = _scout_plan(capsys, 12, 12000, 1000)
    full = data["kv_cache_tokens"]
    assert data["envelope"]["headroom_fraction"] == pytest.approx(1 - 12 * 13000 / full, abs=1e-6)


@pytest.mark.parametrize("tokens,slots", [
    (100, 125),  # below the window: all 100 in the SWA pool, 100 / 0.8 = 125 full-pool slots
    (128, 160),  # the window itself
    (150, 162),  # the window (128 - 1 + the one in flight) and a block: 129 SWA slots / 0.8 = 161.25, so 162
    (1000, 1000),  # the full pool binds
])
def test_gpt_oss_requests_hold_the_larger_of_their_two_pools(tokens, slots):
    """gpt-oss-20b on 0.5.14 (sliding window 128, pages of one): a request of n tokens holds max(n, ceil(min(n, cap)
    / 0.8)) slots of the full pool, cap = window - 1 + 1 in flight + one block = 129 (core.kvcache.window_cap)."""
    from specsize.core.kvcache import pool_blocks

    mem = account(deployment(target=GPT_OSS_20B, gpu="H100-SXM-80GB"), sglang("0.5.14"))
    cap = 128 - 1 + 1 + 1
    expected = max(tokens, -(-min(tokens, cap) * 5 // 4))
    assert pool_blocks(mem.pool_layers, tokens, 1) == expected


# --- a start-up failure no fraction mends ----------------------------------------------------------------------------

def test_a_request_table_no_fraction_mends_names_what_does(capsys):
    """Llama 4 Scout's context of 10,485,760 tokens: SGLang's request table (ReqToTokenPool, model_runner_kv_cache_
    mixin.py _init_pools) holds max_num_reqs = min(max(min(int(tokens / 10,485,760 x 512), 4096), 2048), tokens // 2)
    = 2,048 rows of 10,485,764 int32 slots = 80.00 GiB, outside the pool, whatever the fraction: the plan had said
    'lower mem_fraction_static to at most 0.00'."""
    code, out, _ = run(capsys, "plan", "--target", SCOUT, "--gpu", "H200-141GB", "--tp", "2", "--engine", "sglang",
                       "--engine-version", "0.5.14", "--concurrency", "8", "--format", "json")
    data = json.loads(out)
    table = data["per_gpu"]["engine_terms"]["request_table_bytes"]
    assert table == 2048 * (10_485_760 + 4) * 4
    problem = " ".join(data["reasons"])
    assert "at most 0.00" not in problem
    assert "--context-length" in problem and "--max-running-requests" in problem


def test_the_start_up_failure_names_the_drafts_extra_slots(capsys):
    """SGLang 0.4.3.post3 - 0.5.6 give the target's pool max_num_reqs x (steps x topk + draft tokens) + 100 slots for an
    EAGLE draft (model_runner.py init_memory_pool, draft_runner_cache_size), out of the (1 - f) share: 2,048 requests x
    (5 x 4 + 8) + 100 = 57,444 slots of Llama-3.1-8B's 131,072 B (32 layers x 2 x 8 heads x 128 x 2 B) = 7.01 GiB, the
    largest of the needs the start-up failure listed without it (2,048 running requests asked for: without
    --max-running-requests 0.4.3.post3 - 0.4.4.post3 run 32 with an EAGLE draft, server_args.py)."""
    code, out, _ = run(capsys, "plan", "--engine", "sglang", "--engine-version", "0.4.3.post3", "--target",
                       "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--method", "eagle", "--draft",
                       LLAMA_EAGLE3, "-k", "5", "--tree-topk", "4", "--num-draft-tokens", "8", "--concurrency", "4",
                       "--max-num-seqs", "2048", "--format", "json")
    data = json.loads(out)
    slots = 2048 * (5 * 4 + 8) + 100
    assert data["per_gpu"]["engine_terms"]["draft_headroom_tokens"] == slots
    assert f"the {slots:,} slots the draft adds to the target's pool ({slots * 131_072 / 2**30:.2f} GiB)" in \
        " ".join(data["reasons"])


def test_max_concurrency_of_short_contexts_on_llama_4_is_the_swa_pools(capsys):
    """--context-length 8,192 on Llama 4 Scout (its chunk is 8,192): a request of 8,192 tokens holds 8,192 slots of each
    pool, and the SWA pool holds 0.8 x the full pool's tokens: full / (8,192 / 0.8) = 262,740 / 10,240 = 25.66 at once,
    not full / 8,192 = 32.07."""
    code, out, _ = run(capsys, "plan", "--target", SCOUT, "--gpu", "H200-141GB", "--tp", "2", "--engine", "sglang",
                       "--engine-version", "0.5.14", "--max-model-len", "8192", "--concurrency", "8", "--format", "json")
    data = json.loads(out)
    assert data["max_concurrency"] == pytest.approx(data["kv_cache_tokens"] / (8192 / RATIO), abs=1e-4)
