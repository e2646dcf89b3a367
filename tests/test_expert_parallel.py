"""Expert parallelism (`expert_parallel`: vLLM's --enable-expert-parallel, SGLang's --ep-size = --tp-size): the routed
experts split by expert over the TP group. Every expected number below is worked by hand from the engines' rules
(vLLM fused_moe/expert_map_manager.py determine_expert_map; SGLang's FusedMoE assertion) or from the documented
normal approximation, not read from specsize's output."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from helpers import run_cli
from specsize.catalog.models import load_model
from specsize.core.perf import busiest_rank, expected_max_normal
from specsize.core.weights import experts_on_rank, weight_breakdown


def test_experts_on_rank_gives_the_first_ranks_the_remainder():
    # determine_expert_map: base = 60 // 8 = 7, remainder 4: ranks 0-3 hold 8, ranks 4-7 hold 7
    assert experts_on_rank(60, 8) == 8
    assert experts_on_rank(64, 8) == 8
    assert experts_on_rank(8, 8) == 1
    assert experts_on_rank(128, 1) == 128


def test_weights_of_the_busiest_rank_hold_whole_experts():
    # DeepSeek-V2-Lite's shape with 60 routed experts (as Qwen1.5-MoE has) at TP 8: split by rows every GPU holds
    # 60 slices of 1,408 / 8 = 176 rows (7.5 experts' worth); split by expert rank 0 holds 8 whole experts. One
    # expert in bf16: 3 x 2,048 x 1,408 x 2 B = 17,301,504 B; 26 MoE layers: 0.5 x 17,301,504 x 26 = 224,919,552 B
    m = load_model("deepseek-ai/DeepSeek-V2-Lite-Chat")
    m = m.with_(moe=replace(m.moe, num_experts=60))
    rows = weight_breakdown(m, 8, 1, "bfloat16", None, rotary_cache=False)
    whole = weight_breakdown(m, 8, 1, "bfloat16", None, rotary_cache=False, ep=8)
    assert whole.mlp - rows.mlp == 224_919_552
    assert whole.attention == rows.attention and whole.embedding == rows.embedding
    # 64 experts split evenly: the same bytes either way (1,408 / 8 x 64 = 8 x 1,408)
    even = load_model("deepseek-ai/DeepSeek-V2-Lite-Chat")
    assert weight_breakdown(even, 8, 1, "bfloat16", None, ep=8).mlp == weight_breakdown(even, 8, 1, "bfloat16").mlp


def test_expected_max_of_normals():
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-4)  # 0.5642
    assert expected_max_normal(4) == pytest.approx(1.0294, abs=1e-4)  # tabulated (Tippett 1925)
    assert expected_max_normal(8) == pytest.approx(1.4236, abs=1e-4)


def test_busiest_rank_one_token_two_ranks():
    # 8 experts, top-2, uniform routing, 2 ranks of 4, one token. Normal approximation: a rank touches
    # 4 x 0.25 = 1 expert on average with variance 4 x 0.25 x 0.75 = 0.75, so the busiest takes
    # 1 + 0.5642 x sqrt(0.75) = 1.4886. Exactly: both picks land on one rank with probability 2 x C(4,2) / C(8,2)
    # = 12/28, else one each: E[max] = 2 x 12/28 + 1 x 16/28 = 40/28 = 1.4286 (the approximation is 4% above)
    distinct, load = busiest_rank(8, 2, 0.0, 2, 1, 1)
    assert distinct == pytest.approx(1 + expected_max_normal(2) * math.sqrt(0.75), rel=1e-6)
    assert distinct == pytest.approx(40 / 28, rel=0.05)
    assert load == pytest.approx(distinct, rel=1e-6)  # one token: each touched expert is one assignment


def test_busiest_rank_is_the_mean_with_one_rank_and_bounded_by_its_experts():
    distinct, load = busiest_rank(128, 8, 0.95, 1, 64, 64)
    assert load == pytest.approx(64 * 8)
    many, _ = busiest_rank(128, 8, 0.0, 4, 100_000, 100_000)
    assert many == pytest.approx(32.0)  # every one of its 32 experts touched, no more


def _plan(capsys, *extra):
    code, out, err = run_cli(capsys, "plan", "--target", "Qwen/Qwen3-30B-A3B", "--gpu", "H100-SXM-80GB", "--tp", "4",
                             "--concurrency", "32", *extra)
    return code, out, err


def test_plan_emits_the_flag_and_prices_the_busiest_gpu(capsys):
    code, out, err = _plan(capsys, "--expert-parallel")
    assert code == 0
    assert "--enable-expert-parallel" in out
    assert "each GPU holds 32 of the 128 experts whole" in out + err
    code, out, err = _plan(capsys)
    assert code == 0 and "--enable-expert-parallel" not in out


def test_plan_json_config_and_step(capsys):
    import json

    code, out, _ = _plan(capsys, "--expert-parallel", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    vllm = [c for c in doc["engine_commands"] if c["engine"] == "vllm"][0]
    assert "enable-expert-parallel: true" in vllm["config_yaml"]
    note = [w for w in doc["warnings"] + doc.get("notes", []) if "expert parallelism" in w][0]
    # 128 experts, top-8, 32 sequences: the busiest of 4 GPUs reads more experts than the mean of 4 x fewer
    assert "+" in note.split("(")[-1]


def test_sglang_command_and_older_releases(capsys):
    code, out, err = _plan(capsys, "--expert-parallel", "--engine", "sglang")
    assert code == 0 and "--ep-size 4" in out
    code, out, err = _plan(capsys, "--expert-parallel", "--engine", "sglang", "--engine-version", "0.4.6")
    assert code == 0
    assert "takes --enable-ep-moe in place of --ep-size" in out + err


def test_refused_where_the_release_has_none(capsys):
    code, _, err = run_cli(capsys, "plan", "--target", "mistralai/Mixtral-8x7B-Instruct-v0.1", "--gpu",
                           "H100-SXM-80GB", "--tp", "2", "--expert-parallel", "--engine-version", "0.7")
    assert code == 2
    assert "expert_parallel" in err and "0.8.0" in err and "Traceback" not in err


def test_sglang_refuses_an_uneven_split(capsys):
    # every catalog MoE has a power-of-two expert count, so the uneven case (60 experts over TP 8) is built here
    from specsize.core.errors import SpecError
    from specsize.engines.support import check_expert_parallel

    m = load_model("deepseek-ai/DeepSeek-V2-Lite-Chat")
    with pytest.raises(SpecError) as exc:
        check_expert_parallel("sglang", None, m.with_(moe=replace(m.moe, num_experts=60)), 8)
    assert exc.value.field == "expert_parallel"
    check_expert_parallel("vllm", None, m.with_(moe=replace(m.moe, num_experts=60)), 8)  # vLLM: ranks 0-3 hold 8


def test_block_fp8_experts_load_whole_under_expert_parallelism(capsys):
    # Qwen3-30B-A3B-FP8 at TP 4: 768 / 4 = 192 rows of each expert, not whole 128-row blocks: vLLM 0.11 refuses it;
    # with the experts whole on each GPU nothing splits them, and the refusal names that way out
    args = ("plan", "--target", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "H100-SXM-80GB", "--tp", "4",
            "--engine-version", "0.11")
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "expert_parallel: true" in err
    code, out, _ = run_cli(capsys, *args, "--expert-parallel")
    assert code == 0 and "--enable-expert-parallel" in out


def test_dense_target_is_told(capsys):
    code, out, err = run_cli(capsys, "plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                             "--tp", "2", "--expert-parallel")
    assert code == 0
    assert "has no routed experts" in out + err
    assert "--enable-expert-parallel" not in out
