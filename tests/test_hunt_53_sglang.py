"""Hunt 53: SGLang as the serving engine (plan --engine sglang, its accounting and its log / metrics readers). Each
expectation is worked by hand from SGLang's own code, read in its PyPI wheels (sglang/srt/...), cited per test."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from helpers import SHARED, deployment
from helpers import run_cli as run

from specsize.core.memory import account
from specsize.engines import resolve_profile
from specsize.engines.readers import read_metrics, read_startup_log

LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE3_HEAD = "sgl-project/SpecForge-llama3-8B-eagle3"
LLAMA8B_CELL = 32 * 2 * 8 * 128 * 2  # layers x (K, V) x KV heads x head_dim x bf16 bytes = 131,072 B per token
HEAD_CELL = 1 * 2 * 8 * 128 * 2  # the EAGLE head's one layer: 4,096 B per token
H100_MIB = 79.19 * 1024  # the catalog's H100: 81,090.56 MiB
H200_MIB = 139.81 * 1024  # 143,165.44 MiB
B200_MIB = 178.35 * 1024  # 182,630.4 MiB
WORKLOAD = ("--prompt-tokens", "p50=1000,p95=2000,p99=4000,max=8000", "--output-tokens",
            "p50=200,p95=400,p99=800,max=1000", "--concurrency", "8")


def sglang(version=None):
    return resolve_profile("sglang", version)


def fraction(gpu_mib: float, reserved_mib: float) -> float:
    """server_args.py _handle_gpu_memory_settings: round((gpu_mem - reserved_mem) / gpu_mem, 3)."""
    return round((gpu_mib - reserved_mib) / gpu_mib, 3)


def piecewise_sizes(largest: int) -> int:
    """How many prompt sizes _generate_piecewise_cuda_graph_tokens captures up to `largest` (counted by hand: 4..32
    step 4 is 8 sizes, 48..256 step 16 is 14, 288..512 step 32 is 8, 576..1024 step 64 is 8, 1280..4096 step 256 is
    12, 4608..8192 step 512 is 8)."""
    counts = {8192: 8 + 14 + 8 + 8 + 12 + 8, 2048: 8 + 14 + 8 + 8 + 4}
    return counts[largest]


# --- NGRAM sets max_running_requests to 48 too ---------------------------------------------------------------------

def test_ngram_runs_at_most_48_requests_when_none_is_given(capsys):
    """server_args.py (0.5.3: 'if self.speculative_algorithm == "NGRAM": ... if self.max_running_requests is None:
    self.max_running_requests = 48'; 0.5.14: arg_groups/speculative_hook.py _handle_ngram). The plan had run 2,048
    requests (the request pool) and emitted --max-running-requests 2048."""
    code, out, _ = run(capsys, "plan", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--engine", "sglang",
                       "--method", "ngram", "--num-speculative-tokens", "4", *WORKLOAD, "--format", "json")
    data = json.loads(out)
    assert code == 0
    shell = next(c["shell"] for c in data["engine_commands"] if c["engine"] == "sglang")
    assert "--max-running-requests 48 " in shell
    # speculative capture sizes up to 48: 1..8 (8), 10..32 step 2 (12), 40, 44, 48 (3)
    assert data["per_gpu"]["engine_terms"]["cuda_graph_batch_sizes"] == 23
    d = deployment(method="ngram", k=4)
    for version in ("0.5.3", "0.5.9", "0.5.14"):
        assert account(d, sglang(version)).settings.max_num_seqs == 48


# --- the default mem_fraction_static -------------------------------------------------------------------------------

# H100, Llama 8B, TP 1: 512 + 1.5 x 8192 + 2 x 256 (cuda_graph_max_bs) + 1 / 8 x 1024 = 13,440 MiB before the
# piecewise graphs; H200 TP 8: 512 + 12,288 + 2 x 512 + 1024 = 14,848 MiB
@pytest.mark.parametrize("target, gpu, gpu_mib, tp, pp, version, max_model_len, reserved", [
    (LLAMA8B, "H100-SXM-80GB", H100_MIB, 1, 1, "0.5.9", None, 13_440),  # no prompt graphs by default before 0.5.10
    (LLAMA8B, "H100-SXM-80GB", H100_MIB, 1, 1, "0.5.10", None, 13_440 + 8 * piecewise_sizes(8192)),
    (LLAMA8B, "H100-SXM-80GB", H100_MIB, 1, 1, "0.5.14", None, 13_440 + 8 * piecewise_sizes(8192)),
    # pipeline parallelism turns them off ("pp_size > 1"): 512 + 12,288 + 512 + 2 / 8 x 1024
    (LLAMA8B, "H100-SXM-80GB", H100_MIB, 1, 2, "0.5.14", None, 512 + 12_288 + 512 + 256),
    # 0.5.13 clamps the largest captured prompt to --context-length (#21112); 0.5.12 does not
    (LLAMA8B, "H100-SXM-80GB", H100_MIB, 1, 1, "0.5.12", 2048, 13_440 + 8 * piecewise_sizes(8192)),
    (LLAMA8B, "H100-SXM-80GB", H100_MIB, 1, 1, "0.5.13", 2048, 13_440 + 8 * piecewise_sizes(2048)),
    # an MLA model reserves 1.5 GiB flat ("For MLA backend the memory overhead is much higher than expected with fa3")
    ("deepseek-ai/DeepSeek-V3", "H200-141GB", H200_MIB, 8, 1, "0.5.14", None, 14_848 + 1536),
    # on a B200 (chunks of 16,384, graphs to 512): 512 + 24,576 + 1024 + 1024 + 1536; 0.5.10 turns the prompt graphs
    # off for DeepSeek's flashinfer_trtllm MoE runner only after the fraction is set (_handle_moe_kernel_config)
    ("deepseek-ai/DeepSeek-V3", "B200-180GB", B200_MIB, 8, 1, "0.5.10", None, 512 + 24_576 + 1024 + 1024 + 1536),
])
def test_the_default_fraction_reserves_the_piecewise_prompt_graphs(target, gpu, gpu_mib, tp, pp, version,
                                                                    max_model_len, reserved):
    d = deployment(target=target, gpu=gpu, tp=tp, pp=pp, max_model_len=max_model_len)
    mem = account(d, sglang(version))
    assert mem.settings.gpu_memory_utilization == pytest.approx(fraction(gpu_mib, reserved), abs=1e-9)


def test_the_b200_deepseek_reserve_outlives_its_prompt_graphs():
    mem = account(deployment(target="deepseek-ai/DeepSeek-V3", gpu="B200-180GB", tp=8), sglang("0.5.10"))
    assert mem.settings.graph_prompt_tokens == 0  # off at run time, though reserved for


# EAGLE-family drafts: "eagle draft models and cuda graphs" reserved_mem += 2 * 1024 (0.5.3-0.5.9), 4 * 1024 (0.5.10,
# 0.5.11, 0.5.13 wheels), nothing from 0.5.14 (#23862). 0.5.10 keeps the prompt graphs off with speculation
# (_handle_piecewise_cuda_graph rule 2), 0.5.11 on.
@pytest.mark.parametrize("version, reserved", [
    ("0.5.9", 13_440 + 2048),
    ("0.5.10", 13_440 + 4096),
    ("0.5.11", 13_440 + 8 * piecewise_sizes(8192) + 4096),
    ("0.5.13", 13_440 + 8 * piecewise_sizes(8192) + 4096),
    ("0.5.14", 13_440 + 8 * piecewise_sizes(8192)),
])
def test_the_default_fraction_reserves_4_gib_for_an_eagle_draft_from_0_5_10(version, reserved):
    d = deployment(method="eagle3", draft=EAGLE3_HEAD, k=3)
    assert account(d, sglang(version)).settings.gpu_memory_utilization == pytest.approx(
        fraction(H100_MIB, reserved), abs=1e-9)


def test_ngram_reserves_nothing_for_a_draft():
    # NGRAM is excluded ('elif self.speculative_algorithm != "NGRAM"'); 0.5.10 has no prompt graphs with speculation
    d = deployment(method="ngram", k=4)
    assert account(d, sglang("0.5.10")).settings.gpu_memory_utilization == pytest.approx(
        fraction(H100_MIB, 13_440), abs=1e-9)


# --- the draft's extra pool slots (0.4.1.post4 - 0.5.6) ------------------------------------------------------------

@pytest.mark.parametrize("version, method, topk, draft_tokens, headroom", [
    # 0.4.3.post3-0.5.6: max_num_reqs x steps x topk + max_num_reqs x num_draft_tokens + 100 (model_runner.py
    # init_memory_pool), max_num_reqs = 48 from 0.4.4.post4
    ("0.5.6", "eagle3", 1, None, 48 * (3 * 1 + 4) + 100),
    ("0.5.6", "eagle3", 4, 8, 48 * (3 * 4 + 8) + 100),
    ("0.4.4.post4", "eagle3", 1, None, 48 * (3 + 4) + 100),
    # 0.4.3.post3 - 0.4.4.post3 run 32 requests with an EAGLE / EAGLE3 draft when not told (server_args.py "if
    # self.max_running_requests is None: self.max_running_requests = 32" in the 0.4.4.post2 and post3 wheels)
    ("0.4.4.post3", "eagle3", 1, None, 32 * (3 + 4) + 100),
    ("0.5.7", "eagle3", 1, None, 0),  # model_runner_kv_cache_mixin.py: draft_runner_cache_size = max_total_num_tokens
])
def test_an_eagle_draft_adds_slots_to_both_pools_before_0_5_7(version, method, topk, draft_tokens, headroom):
    plain = account(deployment(gpu_memory_utilization=0.85), sglang(version))
    d = deployment(method=method, draft=EAGLE3_HEAD, k=3, gpu_memory_utilization=0.85)
    d = replace(d, speculative=replace(d.speculative, tree_topk=topk, num_draft_tokens=draft_tokens))
    spec = account(d, sglang(version))
    assert spec.kv_cache_tokens - plain.kv_cache_tokens == headroom
    assert spec.kv_cache_bytes == spec.kv_cache_tokens * (LLAMA8B_CELL + HEAD_CELL)
    assert spec.engine_terms["draft_headroom_tokens"] == headroom


def test_before_0_4_3_post3_only_the_drafts_pool_is_larger():
    # 0.4.1.post4-0.4.3.post2: draft_runner_cache_size = max_total_num_tokens + max_num_reqs x steps + 100 for the
    # draft worker alone; the target's pool keeps its profiled size
    plain = account(deployment(gpu_memory_utilization=0.85), sglang("0.4.3"))
    spec = account(deployment(method="eagle", draft=EAGLE3_HEAD, k=3, gpu_memory_utilization=0.85), sglang("0.4.3"))
    assert spec.kv_cache_tokens == plain.kv_cache_tokens
    assert spec.kv_cache_bytes == spec.kv_cache_tokens * (LLAMA8B_CELL + HEAD_CELL) + (2048 * 3 + 100) * HEAD_CELL


# --- DeepSeek-V3 on datacenter Blackwell: trtllm_mla, pages of 64 -------------------------------------------------

def test_deepseek_on_a_b200_takes_pages_of_64_tokens(capsys):
    """server_args.py (0.5.4 on): trtllm_mla for DeepseekV3ForCausalLM on sm100, which changes any page size but 32
    and 64 to 64. The plan had priced pages of one token and emitted --page-size 1."""
    code, out, err = run(capsys, "plan", "--target", "deepseek-ai/DeepSeek-V3", "--gpu", "B200-180GB", "--tp", "8",
                         "--engine", "sglang", "--block-size", "16", *WORKLOAD, "--format", "json")
    data = json.loads(out)
    assert code in (0, 1) and data["block_size"] == 64 and data["kv_cache_tokens"] % 64 == 0
    assert "--page-size 64 " in next(c["shell"] for c in data["engine_commands"] if c["engine"] == "sglang")
    assert "page size 64, not 16" in err
    hopper = account(deployment(target="deepseek-ai/DeepSeek-V3", gpu="H200-141GB", tp=8), sglang())
    older = account(deployment(target="deepseek-ai/DeepSeek-V3", gpu="B200-180GB", tp=8), sglang("0.5.3"))
    assert hopper.settings.block_size == older.settings.block_size == 1


def test_a_deepseek_mtp_tree_on_a_b200_is_refused(capsys):
    """A top-k tree beside pages of 64 on trtllm_mla: 'speculative_eagle_topk > 1 with page_size > 1' raises at
    start-up (0.5.4's server_args.py: flashinfer only; 0.5.14's speculative_hook.py: flashinfer, fa3, triton)."""
    args = ("plan", "--target", "deepseek-ai/DeepSeek-V3", "--gpu", "B200-180GB", "--tp", "8", "--engine", "sglang",
            "--method", "mtp", "--num-speculative-tokens", "3", "--tree-topk", "4", "--num-draft-tokens", "8", *WORKLOAD)
    code, out, err = run(capsys, *args)
    assert code == 2 and "tree_topk" in err and "Traceback" not in err
    code, _, _ = run(capsys, *args, "--engine-version", "0.5.3")  # fa3 / flashinfer, pages of one token
    assert code in (0, 1)


# --- the start-up log reader -------------------------------------------------------------------------------------

SWA_LOG_0514 = """\
[2026-01-10 10:00:00] server_args=ServerArgs(model_path='openai/gpt-oss-120b', mem_fraction_static=0.829)
[2026-01-10 10:00:05] Load weight begin. avail mem=78.60 GB
[2026-01-10 10:00:40] Load weight end. elapsed=35.10 s, type=GptOssForCausalLM, quant=mxfp4, avail mem=13.55 GB, \
mem usage=65.05 GB.
[2026-01-10 10:00:40] Use sliding window memory pool. full_layer_tokens=200000, swa_layer_tokens=160000
[2026-01-10 10:00:40] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 160000, K size: 2.75 GB, V size: 2.75 GB
[2026-01-10 10:00:40] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 200000, K size: 3.43 GB, V size: 3.43 GB
[2026-01-10 10:00:40] SWAKVPool mem usage: 12.36 GB, swa size: 160000, full size: 200000
[2026-01-10 10:00:41] Memory pool end. avail mem=1.10 GB
[2026-01-10 10:01:00] max_total_num_tokens=200000, chunked_prefill_size=8192, max_prefill_tokens=16384, \
max_running_requests=2048, context_len=131072, available_gpu_mem=0.90 GB
"""


def test_a_hybrid_sliding_window_log_is_read_as_one_pool_of_full_tokens():
    """gpt-oss's two pools (mem_cache/swa_memory_pool.py builds the SWA pool, then the full one, each printing "KV
    Cache is allocated"): the log's size is the full pool's (max_total_num_tokens), not the SWA pool's 160,000, and
    the second line is not a draft's pool."""
    log = read_startup_log(SWA_LOG_0514)
    assert log.kv_cache_tokens == 200_000
    assert log.draft_kv_gib is None
    assert log.available_kv_gib == pytest.approx(2.75 * 2 + 3.43 * 2)


def test_a_hybrid_log_with_labelled_pools_and_a_draft():
    # 0.5.23: the full pool first, labelled ("Full KV Cache is allocated", "SWA KV Cache is allocated"), 0.5.3's
    # "Use Sliding window memory pool." wording; an EAGLE-3 head's pool after them
    text = """\
[2026-06-01 10:00:00] Use Sliding window memory pool. full_layer_tokens=300000, swa_layer_tokens=240000
[2026-06-01 10:00:00] Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 300000, K size: 5.15 GB, V size: 5.15 GB
[2026-06-01 10:00:00] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 240000, K size: 4.12 GB, V size: 4.12 GB
[2026-06-01 10:00:01] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 300000, K size: 0.29 GB, V size: 0.29 GB
"""
    log = read_startup_log(text)
    assert log.kv_cache_tokens == 300_000
    assert log.draft_kv_gib == pytest.approx(0.58)
    assert log.available_kv_gib == pytest.approx(10.30 + 8.24)


@pytest.mark.parametrize("first, other", [("TP0 EP0", "TP1 EP1"), ("TP0 PP0", "TP1 PP0"), ("PP0 TP0", "PP1 TP0"),
                                          ("DP0 TP0", "DP1 TP0")])
def test_only_the_first_rank_of_every_kind_is_read(first, other):
    """The scheduler's prefix names every rank SGLang runs more than one of (managers/scheduler.py
    run_scheduler_process: DP, TP, EP, PP in 0.5.3's order, DP, PP, ..., TP, EP in 0.5.14's). With --ep-size or
    PP, '[... TP1 EP1]' lines had passed as unranked: every other rank's pool was summed as a draft's."""
    line = "[2026-01-10 10:00:40 {}] KV Cache is allocated. #tokens: {}, K size: 10.00 GB, V size: 10.00 GB\n"
    log = read_startup_log(line.format(first, 500_000) + line.format(other, 480_000))
    assert log.kv_cache_tokens == 500_000 and log.draft_kv_gib is None and log.available_kv_gib == 20.0


# --- /metrics ----------------------------------------------------------------------------------------------------

def _metrics(usage: str, used: float, extra: str = "") -> str:
    return (f'# TYPE sglang:token_usage gauge\nsglang:token_usage{{model_name="{LLAMA8B}"}} {usage}\n'
            f'# TYPE sglang:num_used_tokens gauge\nsglang:num_used_tokens{{model_name="{LLAMA8B}"}} {used}\n' + extra)


def test_a_rounded_token_usage_does_not_size_the_pool():
    """SGLang rounds token_usage to two decimals (0.5.14 scheduler_components/pool_stats_observer.py 'stats.token_usage
    = round(self.get_max_pool_usage(), 2)'): 18,000 tokens in use in a pool of 400,000 (0.045) print as 0.04 (banker's
    or not, 0.04 or 0.05), and 18,000 / 0.04 = 450,000 had been read as the pool, 12.5% off."""
    assert read_metrics(_metrics("0.04", 18_000)).kv_cache_tokens is None
    # a usage with more decimals is not rounded: 18,000 / 0.045 = 400,000
    assert read_metrics(_metrics("0.045", 18_000)).kv_cache_tokens == 400_000
    # at 0.5 and above two decimals pin the pool within 1%: 300,000 / 0.75 = 400,000
    assert read_metrics(_metrics("0.75", 300_000)).kv_cache_tokens == 400_000


def test_the_pool_gauge_is_read_where_the_server_serves_it():
    # sglang:max_total_num_tokens (0.5.9 on: emitted at start-up), exact whatever the usage's rounding
    gauge = f'# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens{{model_name="{LLAMA8B}"}} 412345.0\n'
    assert read_metrics(_metrics("0.04", 18_000, gauge)).kv_cache_tokens == 412_345


def test_a_hybrid_pools_usage_sizes_neither_pool():
    # token_usage and num_used_tokens are each the larger of the full and SWA pools' (pool_stats_observer.py
    # "num_used = max(self.full_num_used, self.swa_num_used)"): their ratio is no pool's size
    swa = f'# TYPE sglang:swa_token_usage gauge\nsglang:swa_token_usage{{model_name="{LLAMA8B}"}} 0.6123\n'
    assert read_metrics(_metrics("0.6123", 120_000, swa)).kv_cache_tokens is None


def _check_live_beside_its_log(capsys, tmp_path, share: float, usage: str) -> tuple[int, dict]:
    """(the planned pool, check-live's JSON) for a server at `share` of that pool whose metrics print `usage`, beside
    the start-up log that prints the pool exactly."""
    code, out, _ = run(capsys, "plan", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--engine", "sglang",
                       *WORKLOAD, "--format", "json")
    pool = json.loads(out)["kv_cache_tokens"]
    (tmp_path / "plan.json").write_text(out)
    (tmp_path / "m.metrics").write_text(_metrics(usage, round(pool * share)))
    (tmp_path / "start.log").write_text(
        f"[2026-01-10 10:00:40] KV Cache is allocated. dtype: torch.bfloat16, #tokens: {pool}, K size: 20.00 GB, "
        f"V size: 20.00 GB\n")
    code, out, _ = run(capsys, "check-live", "--plan", tmp_path / "plan.json", "--metrics", tmp_path / "m.metrics",
                       "--log", tmp_path / "start.log", "--format", "json")
    return pool, json.loads(out)


def test_check_live_holds_the_exact_log_not_a_rounded_metric(capsys, tmp_path):
    """A server at 4.49% of its pool reports token_usage 0.04; its start-up log prints the exact pool. The metrics'
    used / usage (12% above the pool) had won over the log and turned a sound plan into a violation (exit 1)."""
    pool, data = _check_live_beside_its_log(capsys, tmp_path, 0.0449, "0.04")
    assert not any(v.startswith("KV cache:") for v in data["violations"])
    assert data["observed"]["kv_cache_tokens"] == pool


# --- flags a release does not have --------------------------------------------------------------------------------

@pytest.mark.parametrize("version, args, field", [
    # no scheduler_recv_interval in the 0.4.10.post2 wheel's server_args.py (0.5.1's has it)
    ("0.4.10", ("--scheduler-recv-interval", "4"), "scheduler_recv_interval"),
    # no page_size before 0.4.4 (the 0.4.3.post4 wheel has none)
    ("0.4.3.post4", ("--block-size", "16"), "block_size"),
    ("0.4.2", ("--block-size", "16"), "block_size"),
    # no --pp-size before 0.4.6.post2 (not in the 0.4.6.post1 wheel)
    ("0.4.6.post1", ("--pp", "2", "--gpus", "2"), "pp"),
    ("0.4.5", ("--pp", "2", "--gpus", "2"), "pp"),
])
def test_a_setting_the_release_has_no_flag_for_is_refused(capsys, version, args, field):
    """The plan had priced these and emitted --scheduler-recv-interval / --page-size / --pp-size, which that release's
    argument parser rejects: the launch command could not start."""
    code, _, err = run(capsys, "plan", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--engine", "sglang",
                       "--engine-version", version, *args, *WORKLOAD)
    assert code == 2 and f"error: {field}:" in err and "Traceback" not in err
    # the way out is a later SGLang release, not the engine the user is already on
    assert "or engine sglang" not in err and "SGLang's --page-size takes any" not in err


@pytest.mark.parametrize("version, args", [
    ("0.5.1", ("--scheduler-recv-interval", "4")),
    ("0.4.4", ("--block-size", "16")),
    ("0.4.6.post2", ("--pp", "2", "--gpus", "2")),
])
def test_from_the_release_with_the_flag_it_is_planned(capsys, version, args):
    code, out, _ = run(capsys, "plan", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--engine", "sglang",
                       "--engine-version", version, *args, *WORKLOAD, "--format", "json")
    assert code in (0, 1) and json.loads(out)["kv_cache_tokens"] > 0


# --- MHA models on datacenter Blackwell: trtllm_mha, pages of 64 (0.5.7 on) ---------------------------------------

@pytest.mark.parametrize("version, method, topk, page", [
    # server_args.py 0.5.7 on: "Use trtllm_mha for SM100/SM103 ... excluding spec with topk > 1", then "TensorRT-LLM
    # MHA only supports page_size of 16, 32 or 64, changing page_size from 1 to 64"
    ("0.5.14", "none", 1, 64),
    ("0.5.7", "eagle3", 1, 64),
    ("0.5.14", "eagle3", 4, 1),  # a tree: flashinfer, pages of one
    ("0.5.14", "ngram", 1, 1),  # no --speculative-eagle-topk given: flashinfer
    ("0.5.6", "none", 1, 1),  # before 0.5.7: flashinfer
])
def test_an_mha_model_on_a_b200_takes_the_pages_of_its_backend(version, method, topk, page):
    d = deployment(gpu="B200-180GB", method=method, draft=EAGLE3_HEAD if method == "eagle3" else None,
                   k=3 if method != "none" else 0)
    if topk != 1:
        d = replace(d, speculative=replace(d.speculative, tree_topk=topk, num_draft_tokens=8))
    mem = account(d, sglang(version))
    assert mem.settings.block_size == page and mem.kv_cache_tokens % page == 0
    assert account(replace(d, gpu=deployment(gpu="H100-SXM-80GB").gpu), sglang(version)).settings.block_size == 1


def test_a_gpt_oss_tree_on_a_b200_is_refused(capsys):
    # _handle_model_specific_adjustments sets trtllm_mha for GptOssForCausalLM on sm100 (0.5.3 on), which refuses a
    # top-k above 1 ("trtllm_mha backend only supports topk = 1 for speculative decoding")
    code, _, err = run(capsys, "plan", "--target", "openai/gpt-oss-120b", "--gpu", "B200-180GB", "--engine", "sglang",
                       "--method", "eagle3", "--draft", "sgl-project/SpecForge-gpt-oss-120B-eagle3",
                       "--num-speculative-tokens", "3", "--tree-topk", "4", "--num-draft-tokens", "8", *WORKLOAD)
    assert code == 2 and "error: tree_topk:" in err and "trtllm_mha" in err


def test_check_live_takes_the_logs_pool_over_a_metrics_estimate_within_tolerance(capsys, tmp_path):
    """At a usage of 0.60 the rounding leaves used / usage within 1% of the pool, so the metrics give an estimate;
    the start-up log's exact #tokens is what the server has, and it is the figure check-live shows."""
    # reported as 0.60: used / 0.60 is 0.5% above the pool
    pool, data = _check_live_beside_its_log(capsys, tmp_path, 0.6031, "0.60")
    assert round(round(pool * 0.6031) / 0.60) != pool
    assert data["observed"]["kv_cache_tokens"] == pool


def test_an_emitted_command_is_headed_by_the_releases_that_have_its_flags(capsys):
    """--page-size came with 0.4.4 and --pp-size with 0.4.6.post2 (engine_flags.json flags_from, read in the wheels):
    a command carrying them had been headed "# sglang 0.4 - 0.5.x"."""
    code, out, _ = run(capsys, "plan", "--engine", "sglang", "--method", "none", "--emit", "sglang")
    assert code in (0, 1) and out.startswith("# sglang 0.4.4 - 0.5.x")
    code, out, _ = run(capsys, "plan", "--engine", "sglang", "--method", "none", "--pp", "2", "--gpus", "8",
                       "--emit", "sglang")
    assert code in (0, 1) and out.startswith("# sglang 0.4.6.post2 - 0.5.x")
    code, out, _ = run(capsys, "plan", "--engine", "sglang", "--emit", "sglang")  # a draft model: STANDALONE
    assert code in (0, 1) and out.startswith("# sglang 0.5.2 - 0.5.x")


def test_sglang_takes_a_modelopt_checkpoints_fp8_kv_cache_under_auto_from_0_5_3(capsys, tmp_path):
    """model_runner.py from the 0.5.3 wheel: with kv_cache_dtype auto, quant_config.kv_cache_quant_algo FP8 makes the
    cache float8_e4m3fn (absent in 0.5.2's): Llama-3.1-8B 32 x 2 x 8 x 128 x 1 B = 65,536 B a token from 0.5.3, the
    bf16 131,072 before. The flag had been inherited from vLLM's profile for every SGLang release."""
    config = json.loads((SHARED / "model-configs/meta-llama/Llama-3.1-8B-Instruct/config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    per_token = {}
    for version in ("0.5.2", "0.5.3"):
        code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--method", "none",
                             "--engine", "sglang", "--engine-version", version, "--max-model-len", "8192",
                             "--format", "json")
        assert code in (0, 1, 3), err
        per_token[version] = json.loads(out)["kv_bytes_per_token"]["target"]
    assert per_token == {"0.5.2": 131_072, "0.5.3": 65_536}


def test_an_emitted_command_for_a_release_without_one_of_its_flags_says_so(capsys):
    """SGLang 0.4.3 has no --page-size (from 0.4.4), which the command carries to pin its pages of one: the header
    names 0.4.4 - 0.5.x, and a note on stderr says to leave the flag out (the emit path had printed no notes)."""
    code, out, err = run(capsys, "plan", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--method", "none",
                         "--engine", "sglang", "--engine-version", "0.4.3", "--emit", "sglang")
    assert code == 0 and out.startswith("# sglang 0.4.4 - 0.5.x") and "--page-size 1" in out
    assert "SGLang 0.4.3 has no --page-size (from 0.4.4): leave it out" in err
    code, _, err = run(capsys, "plan", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--method", "none",
                       "--engine", "sglang", "--engine-version", "0.4.4", "--emit", "sglang")
    assert code == 0 and "has no --page-size" not in err
