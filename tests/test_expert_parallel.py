"""Expert parallelism (`expert_parallel`: vLLM's --enable-expert-parallel, SGLang's --ep-size = --tp-size): the routed
experts split by expert over the TP group. Every expected number below is worked by hand from the engines' rules
(vLLM fused_moe/expert_map_manager.py determine_expert_map; SGLang's FusedMoE assertion) or from the documented
normal approximation, not read from specsize's output."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from helpers import run_cli
from specsize.catalog.models import catalog_entry
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
    # 0.4.1.post4 - 0.4.10 take --enable-ep-moe (server_args.py: "if self.enable_ep_moe: self.ep_size = self.tp_size");
    # --ep-size alone from 0.4.10.post2
    code, out, err = _plan(capsys, "--expert-parallel", "--engine", "sglang", "--engine-version", "0.4.6.post2")
    assert code == 0
    assert "--enable-ep-moe" in out and "--ep-size" not in out


def test_refused_where_the_release_has_none(capsys):
    code, _, err = run_cli(capsys, "plan", "--target", "mistralai/Mixtral-8x7B-Instruct-v0.1", "--gpu",
                           "H100-SXM-80GB", "--tp", "2", "--expert-parallel", "--engine-version", "0.7")
    assert code == 2
    assert "expert_parallel" in err and "0.8.0" in err and "Traceback" not in err


def _uneven(tmp_path):
    # every catalog MoE has a power-of-two expert count: DeepSeek-V2-Lite's config with 60 routed experts
    cfg = dict(catalog_entry("deepseek-ai/DeepSeek-V2-Lite-Chat")["config"], n_routed_experts=60)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_uneven_splits_by_engine_and_release(capsys, tmp_path):
    target = _uneven(tmp_path)
    base = ("plan", "--target", target, "--gpu", "H100-SXM-80GB", "--tp", "8", "--expert-parallel")
    code, _, err = run_cli(capsys, *base, "--engine", "sglang")
    assert code == 2 and "expert_parallel" in err and "evenly" in err  # SGLang's FusedMoE asserts a whole split
    code, _, err = run_cli(capsys, *base, "--engine-version", "0.10")  # the last rank took all 4 leftovers
    assert code == 2 and "last rank" in err and "0.10.1" in err
    code, _, err = run_cli(capsys, *base, "--engine-version", "0.10.1")  # ranks 0-3 hold 8, ranks 4-7 hold 7
    assert code == 0, err


def test_sglang_releases_by_architecture_and_format(capsys):
    def plan(target, version, *extra):
        return run_cli(capsys, "plan", "--target", target, "--gpu", "H200-141GB", "--tp", "8", "--expert-parallel",
                       "--engine", "sglang", "--engine-version", version, *extra)[:3:2]

    # Qwen3 MoE's model file built EPMoE from 0.4.6.post2; Llama 4's none before FusedMoE took moe_ep_size (0.4.10.post2)
    code, err = plan("Qwen/Qwen3-30B-A3B", "0.4.6")
    assert code == 2 and "0.4.6.post2" in err
    assert plan("Qwen/Qwen3-30B-A3B", "0.4.6.post2")[0] == 0
    code, err = plan("meta-llama/Llama-4-Scout-17B-16E-Instruct", "0.4.10")
    assert code == 2 and "0.4.10.post2" in err
    # DeepSeek-V3's block-fp8 experts: EPMoE's block scales from 0.4.3.post3 (sgl-project/sglang PR 3602)
    code, err = plan("deepseek-ai/DeepSeek-V3", "0.4.3")
    assert code == 2 and "0.4.3.post3" in err


def test_sglang_holds_mxfp4_experts_in_bf16_off_blackwell(capsys):
    # SGLang picks its MXFP4 MoE runner only at ep_size 1; otherwise Mxfp4MoEMethod upcasts the experts to bf16:
    # gpt-oss-120b at TP 2 holds 64 experts x 36 layers x (3 x 2,880 x 2,880 + 3 x 2,880 bias) x 2 B =
    # 114,701,598,720 B = 106.82 GiB of experts a GPU, more than an H100 holds
    args = ("plan", "--target", "openai/gpt-oss-120b", "--gpu", "H100-SXM-80GB", "--tp", "2", "--format", "json")
    code, out, err = run_cli(capsys, *args, "--expert-parallel", "--engine", "sglang")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["per_gpu"]["weights_target_bytes"] > 114_701_598_720
    assert doc["verdict"] == "does_not_fit"
    first = doc["recommendations"][0]  # the way out: the experts split by rows, MXFP4 again
    assert first["action"] == "expert_parallel_off" and first["verdict_after"] == "fits"
    assert first["changes"] == {"expert_parallel": False}
    code, out, _ = run_cli(capsys, *args, "--expert-parallel")  # vLLM keeps them MXFP4 (15.48 GiB of experts)
    assert json.loads(out)["per_gpu"]["weights_target_bytes"] < 40 * 2**30
    code, out, _ = run_cli(capsys, "plan", "--target", "openai/gpt-oss-120b", "--gpu", "B200-180GB", "--tp", "2",
                           "--expert-parallel", "--engine", "sglang", "--format", "json")
    assert json.loads(out)["per_gpu"]["weights_target_bytes"] < 40 * 2**30  # FlashInfer's MXFP4 MoE on sm100
    # compute capability 12, 0.5.10 - 0.5.14: the triton_kernel runner asserts ep_size == 1
    code, _, err = run_cli(capsys, "plan", "--target", "openai/gpt-oss-20b", "--gpu", "RTX-PRO-6000-96GB", "--tp", "2",
                           "--expert-parallel", "--engine", "sglang", "--engine-version", "0.5.12")
    assert code == 2 and "ep_size == 1" in err


def test_quantization_none_is_priced_unquantized(capsys):
    # --quantization none over gpt-oss's MXFP4 checkpoint: the memory held bf16 experts but the steps still read MXFP4
    def tpot(*extra):
        code, out, err = run_cli(capsys, "plan", "--target", "openai/gpt-oss-20b", "--gpu", "H100-SXM-80GB",
                                 "--concurrency", "8", "--format", "json", *extra)
        assert code == 0, err
        return json.loads(out)["perf"]["tpot_s_no_spec"]

    # the experts' bytes a step reads grow ~3.8x (16 bits against 4.25): a memory-bound decode slows markedly
    assert tpot("--quantization", "none") > 1.5 * tpot()


def test_busiest_rank_floor_of_the_most_popular_expert():
    # Mixtral's 8 experts on 8 GPUs, top-2, Zipf 0.95: the busiest GPU holds the most popular expert, whose share of
    # tokens is 2 / sum(k^-0.95, k = 1..8) = 0.7061 of them: 256 tokens give it 180.8 assignments (the normal
    # approximation alone gave 134; a Monte Carlo of the placement 181)
    share = 2 / sum(k ** -0.95 for k in range(1, 9))
    assert busiest_rank(8, 2, 0.95, 8, 256, 256)[1] == pytest.approx(256 * share, rel=1e-6)
    assert busiest_rank(8, 2, 0.95, 8, 1, 1) == (1.0, 1.0)  # one token: one expert, one assignment


def test_moe_draft_model_follows_expert_parallelism():
    from specsize.catalog.gpus import load_gpu
    from specsize.core.specs import Deployment, SpeculativeConfig
    from specsize.core.speculation import SpecMethod

    target, draft = load_model("Qwen/Qwen3-235B-A22B"), load_model("Qwen/Qwen3-30B-A3B")
    sp = SpeculativeConfig(method=SpecMethod.DRAFT_MODEL, draft=draft, num_speculative_tokens=3, draft_tp=8)
    d = Deployment(target=target, gpu=load_gpu("H200-141GB"), speculative=sp, tp=8, expert_parallel=True)
    assert d.ep == 8 and d.draft_ep == 8  # vLLM's create_draft_parallel_config: the target's EP for an MoE draft
    assert replace(d, expert_parallel=False).draft_ep == 1


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
    for extra in ((), ("--engine-version", "0.7")):  # a release without the flag: it is left out, nothing refused
        code, out, err = run_cli(capsys, "plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu",
                                 "H100-SXM-80GB", "--tp", "2", "--expert-parallel", *extra)
        assert code == 0, err
        assert "has no routed experts" in out + err
        assert "--enable-expert-parallel" not in out


def test_search_screens_both_splits(tmp_path, capsys):
    # Qwen3-30B-A3B-FP8 at TP 4 on vLLM 0.11: split by rows its experts cannot load (768 / 4 = 192 rows, not whole
    # 128-row blocks), split by expert they can: of the two configurations, the second is screened
    spec = tmp_path / "spec.yaml"
    spec.write_text("""
target: Qwen/Qwen3-30B-A3B-FP8
tp: [4]
expert_parallel: [false, true]
engine_version: "0.11"
drafters: [{method: none}]
gpus: [{gpu: H100-SXM-80GB, counts: [4]}]
max_num_seqs: [256]
workload: {prompt_tokens: {p50: 800, p99: 2000}, output_tokens: {p50: 200, p99: 400}, concurrency: 32}
slo: {tpot_p99_ms: 100}
""")
    code, out, err = run_cli(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["screened"] == 1 and doc["skipped"] == 1
    assert doc["cheapest"]["expert_parallel"] is True and doc["cheapest"]["tp"] == 4
    spec.write_text(spec.read_text().replace("[false, true]", "[true, true]"))
    code, _, err = run_cli(capsys, "search", spec, "--no-simulate")
    assert code == 2 and "expert_parallel" in err


# --- invariants (hypothesis) ----------------------------------------------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from specsize.core.perf import distinct_experts  # noqa: E402

MOE_SHAPES = [(8, 2), (16, 1), (32, 4), (60, 4), (64, 6), (128, 8), (256, 8), (384, 8)]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(MOE_SHAPES), st.sampled_from([2, 4, 8, 16]), st.sampled_from([0.0, 0.5, 0.95, 1.2]),
       st.integers(1, 20_000))
def test_the_busiest_gpu_is_bounded_by_the_mean_and_its_own_experts(shape, ep, skew, tokens):
    experts, top_k = shape
    n = experts_on_rank(experts, ep)
    distinct, load = busiest_rank(experts, top_k, skew, ep, tokens, tokens)
    assert distinct <= n + 1e-9
    assert distinct >= min(n, distinct_experts(experts, top_k, tokens, skew) / ep) - 1e-6  # no less than the mean GPU
    assert load >= tokens * top_k / ep - 1e-6
    assert load <= tokens * min(top_k, n) + 1e-6  # a token takes each expert once, top_k of them at most
    more = busiest_rank(experts, top_k, skew, ep, tokens + 64, tokens + 64)
    assert more[0] >= distinct - 1e-9 and more[1] >= load - 1e-9  # more tokens never lighten the busiest GPU


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["Qwen/Qwen3-30B-A3B", "mistralai/Mixtral-8x7B-Instruct-v0.1", "openai/gpt-oss-20b",
                        "deepseek-ai/DeepSeek-V2-Lite-Chat"]), st.sampled_from([2, 4, 8]))
def test_even_splits_hold_the_same_expert_bytes_either_way(model_id, tp):
    # E experts of I rows split evenly: E x I / TP rows a GPU by rows, E / TP whole experts by expert. Scales (fp8,
    # mxfp4) and padding may differ; for bf16 weights the bytes agree exactly
    m = load_model(model_id)
    if m.moe.num_experts % tp or m.moe.expert_intermediate_size % tp:
        return
    rows = weight_breakdown(m, tp, 1, "bfloat16", None, rotary_cache=False)
    whole = weight_breakdown(m, tp, 1, "bfloat16", None, rotary_cache=False, ep=tp)
    if m.quantization is None:
        assert whole.mlp == rows.mlp
    assert whole.attention == rows.attention


def test_the_notes_rows_step_keeps_sglangs_mxfp4_experts(capsys):
    # SGLang upcasts MXFP4 experts under expert parallelism only: the note's "split by rows" step is the plan without it
    args = ("plan", "--target", "openai/gpt-oss-20b", "--gpu", "H100-SXM-80GB", "--tp", "2", "--engine", "sglang",
            "--concurrency", "24", "--format", "json")
    code, out, err = run_cli(capsys, *args, "--expert-parallel")
    assert code == 0, err
    note = next(w for w in json.loads(out)["warnings"] if w.startswith("expert parallelism"))
    rows_ms = float(note.split("against ")[1].split(" ms")[0])
    code, out, err = run_cli(capsys, *args, "--no-expert-parallel")
    assert code == 0, err
    assert rows_ms == pytest.approx(json.loads(out)["perf"]["tpot_s_no_spec"] * 1e3, abs=0.01)


def _search(tmp_path, capsys, text):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    return run_cli(capsys, "search", spec, "--no-simulate", "--format", "json")


SPEC_TAIL = """
drafters: [{method: none}]
max_num_seqs: [128]
workload: {prompt_tokens: {p50: 800, p99: 2000}, output_tokens: {p50: 200, p99: 400}, concurrency: 8}
slo: {tpot_p99_ms: 200}
"""


def test_search_keeps_each_gpus_refusal_apart(tmp_path, capsys):
    # SGLang 0.5.12 refuses MXFP4 experts under EP on compute capability 12 only: an H100 is screened whichever GPU the
    # spec lists first (the checks had been kept without the GPU: the first GPU's answer held for both)
    head = 'target: openai/gpt-oss-20b\nengine: sglang\nengine_version: "0.5.12"\ntp: [2]\nexpert_parallel: [true]\n'
    for gpus in ("[H100-SXM-80GB, RTX-PRO-6000-96GB]", "[RTX-PRO-6000-96GB, H100-SXM-80GB]"):
        listed = ", ".join(f"{{gpu: {g.strip()}, counts: [2]}}" for g in gpus.strip("[]").split(","))
        code, out, err = _search(tmp_path, capsys, head + f"gpus: [{listed}]" + SPEC_TAIL)
        assert code == 0, err
        doc = json.loads(out)
        assert doc["screened"] == 1 and doc["skipped"] == 1, gpus
        assert doc["cheapest"]["gpu"] == "H100-SXM-80GB"


def test_search_screens_tp_1_once(tmp_path, capsys):
    # at TP 1 there is no TP group to split the experts over: [false, true] is one configuration there, two at TP 2
    code, out, err = _search(tmp_path, capsys, "target: Qwen/Qwen3-30B-A3B\ntp: [1, 2]\nexpert_parallel: [false, true]\n"
                             "gpus: [{gpu: H100-SXM-80GB, counts: [2]}]" + SPEC_TAIL)
    assert code == 0, err
    assert json.loads(out)["screened"] == 3


def test_a_fix_the_releases_expert_parallelism_refuses_is_not_offered(capsys, tmp_path):
    # 60 experts split evenly over TP 4 on SGLang, not over TP 8: "double tensor parallelism to TP=8" cannot start
    code, out, err = run_cli(capsys, "plan", "--target", _uneven(tmp_path), "--gpu", "RTX-4090-24GB", "--tp", "4",
                             "--expert-parallel", "--engine", "sglang", "--prompt-tokens", "6000", "--output-tokens",
                             "2000", "--max-model-len", "8192", "--concurrency", "128", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"] != "fits"
    assert not any(r["changes"].get("tp") == 8 for r in doc["recommendations"])
