"""Stop 56: fixes made outside the helpers' files."""
import json

import pytest

from specsize.core.errors import SpecError

from tests.helpers import run_cli


def test_the_one_draft_profiling_warning_is_vllms_alone(capsys):
    # vLLM builds whose profiling pass drafts one token per sequence leave the k-token rejection sampler out of their
    # pool; SGLang sizes its pool as f x free - weights whatever it profiles, so the warning has no SGLang meaning
    code, out, _ = run_cli(capsys, "plan", "--format", "json")
    assert code in (0, 1)
    assert any("drafts one token per sequence" in w for w in json.loads(out)["warnings"])
    code, out, _ = run_cli(capsys, "plan", "--engine", "sglang", "--format", "json")
    assert code in (0, 1)
    assert not any("drafts one token per sequence" in w for w in json.loads(out)["warnings"])


def test_sglangs_per_request_spec_host_work_by_hand():
    # Efficiency.spec_seq_host_s: per decoding sequence of a speculative step, in an engine that hands over between
    # drafter and target on the host (SGLang) where nothing overlaps the step: at batch 32 and 0.17 ms a sequence the
    # step grows by 32 x 0.17 ms = 5.44 ms, for a model drafter and for n-gram alike (SGLang's NGRAM worker verifies
    # through the same per-request loop); nothing in an engine without the handover (vLLM) or where the overlap
    # scheduler keeps running (SGLang's spec v2 chains: spec_v2 "chain")
    from dataclasses import replace

    from specsize.catalog.configs import standard_head
    from specsize.catalog.models import load_model
    from specsize.core.perf import build_costs, spec_host_per_seq_s, spec_step_time
    from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig
    from tests.test_step_model import IDEAL, ROUND_GPU

    target = load_model("meta-llama/Llama-3.1-8B-Instruct")
    host = replace(IDEAL, spec_seq_host_s=1.7e-4)
    cases = (("eagle3", True, False, 32 * 1.7e-4), ("ngram", True, False, 32 * 1.7e-4),
             ("eagle3", False, False, 0.0), ("eagle3", True, True, 0.0))
    for method, handover, overlapped, extra in cases:
        spec = SpeculativeConfig(method, standard_head(target, method, 3) if method != "ngram" else None, 3)
        d = Deployment(target=target, gpu=ROUND_GPU, speculative=spec, engine=EngineSettings(max_model_len=8192))
        # SGLang's profiles: no async scheduling kept with speculation; its spec v2 chains keep the overlap
        kw = dict(host_handover=handover, async_scheduling=overlapped, spec_v2="chain" if overlapped else "",
                  async_drafters=())
        with_host = build_costs(d, host, "bfloat16", None, 2, **kw)
        without = build_costs(d, IDEAL, "bfloat16", None, 2, **kw)
        assert spec_step_time(with_host, 32, 500) - spec_step_time(without, 32, 500) == pytest.approx(extra, abs=1e-12)
        lookup = IDEAL.ngram_per_seq_s if method == "ngram" else 0.0
        assert spec_host_per_seq_s(with_host) == pytest.approx(lookup + extra / 32, abs=1e-15)


def test_the_simulator_pays_the_per_request_spec_host_work_on_sglang_0_4_4():
    # the simulated speculative step pays what core.perf.spec_host_per_seq_s says per decoding sequence: SGLang 0.4.4
    # turns its overlap scheduler off with EAGLE (server_args.py), so 0.17 ms a sequence; vLLM 0.32 nothing
    from specsize.catalog.gpus import load_efficiency
    from specsize.core.memory import account
    from specsize.engines.registry import resolve_profile
    from specsize.planner.simulate import engine_config
    from tests.helpers import deployment

    d = deployment(method="eagle", draft="sgl-project/SpecForge-llama3-8B-eagle3", k=3)
    sglang = engine_config(d, account(d, resolve_profile("sglang", "0.4.4")), load_efficiency(d.gpu))
    vllm = engine_config(d, account(d, resolve_profile("vllm", "0.32")), load_efficiency(d.gpu))
    assert sglang.cpu_draft_per_seq_s == pytest.approx(load_efficiency(d.gpu).spec_seq_host_s) == pytest.approx(1.7e-4)
    assert vllm.cpu_draft_per_seq_s == 0.0


def test_the_spec_host_work_follows_sglangs_overlap_release_by_release():
    # SGLang 0.5.11 - 0.5.12 run spec v2 (the overlap scheduler kept) for chains only ("spec v2 currently only supports
    # topk = 1", server_args.py), 0.5.13 for trees too, 0.5.14 on for n-gram too; before 0.5.11 spec v1 for every
    # drafter: the per-request host work stays on the step where spec v1 runs (0.17 ms a sequence), none on spec v2
    from specsize.catalog.gpus import load_efficiency
    from specsize.core.memory import account
    from specsize.engines.registry import resolve_profile
    from specsize.planner.simulate import engine_config
    from tests.helpers import deployment

    from dataclasses import replace

    from specsize.core.speculation import Tree

    chain = deployment(method="eagle3", draft="sgl-project/SpecForge-llama3-8B-eagle3", k=3)
    tree = replace(chain, speculative=replace(chain.speculative, tree_topk=4, num_draft_tokens=8))
    eff = load_efficiency(chain.gpu)
    # 0.5.14 on: "speculative decoding always runs the V2 worker" (arg_groups/speculative_hook.py), trees too
    for d, shape, version, expected in ((chain, Tree(), "0.5.10", 1.7e-4), (chain, Tree(), "0.5.11", 0.0),
                                        (chain, Tree(), "0.5.13", 0.0), (tree, Tree(4, 8), "0.5.12", 1.7e-4),
                                        (tree, Tree(4, 8), "0.5.13", 0.0),
                                        (tree, Tree(4, 8), "0.5.14", 0.0), (tree, Tree(4, 8), "0.5.23", 0.0)):
        cfg = engine_config(d, account(d, resolve_profile("sglang", version)), eff, shape)
        assert cfg.cpu_draft_per_seq_s == pytest.approx(expected, abs=1e-12), (version, shape)


def test_the_envelope_holds_sglangs_decode_reserve_per_request():
    # SGLang 0.4.4's decode check keeps N + topk x steps free per running request (8 + 4 x 5 = 28 for a top-4 tree of
    # 8 nodes at 5 steps): the p99 request of 8,000 + 1,200 tokens holds 8,000 + 1,200 - 1 + 28 slots at its last
    # step, where vLLM's k lookahead gives 8,000 + 1,200 + 5
    from specsize.core.envelope import evaluate
    from specsize.core.memory import account
    from dataclasses import replace

    from specsize.core.specs import LengthDistribution, Workload
    from specsize.engines.registry import resolve_profile
    from tests.helpers import deployment

    chain = deployment(method="eagle", draft="sgl-project/SpecForge-llama3-8B-eagle3", k=5, max_model_len=16384)
    d = replace(chain, speculative=replace(chain.speculative, tree_topk=4, num_draft_tokens=8))
    w = Workload(prompt_tokens=LengthDistribution(p50=1000, p95=6000, p99=8000, max=8000),
                 output_tokens=LengthDistribution(p50=300, p95=1000, p99=1200, max=1200), concurrency=8)
    sglang = account(d, resolve_profile("sglang", "0.4.4"))
    assert sglang.settings.decode_reserve == 28
    shape = {sh.label: sh for sh in evaluate(sglang, w).shapes}["p99"]
    assert shape.request_tokens == 8000 + 1200 - 1 + 28
    vllm = account(d, resolve_profile("vllm", "0.32"))
    assert {sh.label: sh for sh in evaluate(vllm, w).shapes}["p99"].request_tokens == 8000 + 1200 + 5


def test_qwens_own_fp8_names_read_their_128_blocks():
    # Qwen/<model>-FP8 checkpoints keep one scale per 128 x 128 block (their model cards); other publishers' -FP8 names
    # (NVIDIA ModelOpt per-tensor, Red Hat -FP8-dynamic per-channel) keep none
    from specsize.catalog.models import load_model

    assert load_model("Qwen/Qwen3-30B-A3B-FP8").quantization.block == (128, 128)
    assert load_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8").quantization.block == (128, 128)
    assert load_model("nvidia/Llama-3.1-70B-Instruct-FP8").quantization.block is None
    assert load_model("RedHatAI/Qwen3-8B-FP8-dynamic").quantization.block is None


def test_block_fp8_splits_the_engines_refuse_by_hand():
    # an expert of Qwen3-30B-A3B is 768 rows wide: TP 2 gives 384 = 3 x 128 rows a GPU, TP 4 192 and TP 8 96, no whole
    # 128-row blocks: vLLM before 0.29 and SGLang refuse to load it (vllm-project/vllm issue 25292); from 0.29 vLLM
    # refines the scales to gcd(128, 128, 192, 2048) = 64 and gcd(128, 128, 96, 2048) = 32, both >= 32, and loads it.
    # Qwen3-235B-A22B's 1,536-row experts: 192 a GPU at TP 8. DeepSeek-V3 at TP 32: experts 2,048 / 32 = 64 (refined
    # from 0.29), its dense MLP 18,432 / 32 = 576 rows, not whole blocks in any release
    from specsize.catalog.models import load_model
    from specsize.engines.block_fp8 import check_fp8_block_tp, fp8_block_tp_problem

    small = load_model("Qwen/Qwen3-30B-A3B-FP8")
    assert fp8_block_tp_problem("vllm", "0.11", small, 2) is None
    for tp in (4, 8):
        assert f"768 / {tp} = {768 // tp}" in fp8_block_tp_problem("vllm", "0.28", small, tp)
        assert fp8_block_tp_problem("sglang", "0.5.23", small, tp) is not None
        assert fp8_block_tp_problem("vllm", "0.29", small, tp) is None
        assert fp8_block_tp_problem("vllm", None, small, tp) is None
    big = load_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
    assert "1,536 / 8 = 192" in fp8_block_tp_problem("vllm", "0.11", big, 8)
    with pytest.raises(SpecError) as err:
        check_fp8_block_tp("vllm", "0.11", big, 8)
    assert err.value.field == "tp" and "a TP of 1, 2, 4" in err.value.accepted and "0.29" in err.value.accepted
    ds = load_model("deepseek-ai/DeepSeek-V3")
    assert fp8_block_tp_problem("vllm", None, ds, 16) is None
    assert "18,432 / 32 = 576" in fp8_block_tp_problem("vllm", None, ds, 32)
    # a checkpoint without block scales splits anywhere
    assert fp8_block_tp_problem("vllm", "0.11", load_model("Qwen/Qwen3-30B-A3B"), 8) is None


def test_compressed_tensors_targets_match_mixtrals_own_module_names(capsys, tmp_path):
    # vLLM matches a layer's scheme on the prefix its modules are built with: Mixtral's experts live under
    # model.layers.N.block_sparse_moe.experts (mixtral.py), not mlp.experts. A recipe naming them so gives the experts
    # int4 and the attention int8: against every Linear at int4 the model grows by its attention alone, 32 layers x
    # (qkv 6,144 x 4,096 + o 4,096 x 4,096 at a byte and an fp32 scale a row, less the same at 4 bits with a bf16 scale
    # per 128) = 32 x (41,984,000 - 21,626,880) = 651,427,840 B (Mixtral's attention is Llama-3.1-8B's shape)
    from pathlib import Path

    mixtral = json.loads((Path(__file__).resolve().parents[2] / "shared" / "model-configs" / "mistralai" /
                          "Mixtral-8x7B-v0.1" / "config.json").read_text())
    int8 = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}
    int4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}

    def weights(*groups):
        qc = {"quant_method": "compressed-tensors", "format": "mixed", "ignore": ["lm_head"],
              "config_groups": {f"g{i}": {"targets": t, "weights": w} for i, (t, w) in enumerate(groups)}}
        (tmp_path / "config.json").write_text(json.dumps({**mixtral, "quantization_config": qc}))
        code, out, err = run_cli(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json")
        assert code in (0, 1), err
        return json.loads(out)["per_gpu"]["weights_target_bytes"]

    all_int4 = weights((["Linear"], int4))
    named = weights((["re:.*block_sparse_moe.experts.*"], int4), (["re:.*self_attn.*"], int8))
    later_wins = weights((["Linear"], int8), (["re:.*block_sparse_moe.experts.*"], int4))
    assert named - all_int4 == 32 * (41_984_000 - 21_626_880)
    assert later_wins == named


def test_a_release_that_runs_eager_prices_its_steps_eager(capsys, tmp_path):
    # a bitsandbytes 8-bit checkpoint runs eager whatever is asked (vLLM's ModelConfig._verify_bnb_config): its steps
    # are priced as --enforce-eager prices them, host launches included, not as CUDA-graph replays
    from pathlib import Path

    llama = json.loads((Path(__file__).resolve().parents[2] / "shared" / "model-configs" / "meta-llama" /
                        "Llama-3.1-8B-Instruct" / "config.json").read_text())
    config = {**llama, "quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": True,
                                               "load_in_4bit": False}}
    (tmp_path / "config.json").write_text(json.dumps(config))

    def tpot(*args):
        code, out, err = run_cli(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--engine-version",
                                 "0.20", "--format", "json", *args)
        assert code in (0, 1), err
        perf = json.loads(out)["perf"]
        return perf["tpot_s"] if perf["tpot_s"] is not None else perf["tpot_s_no_spec"]

    assert tpot() == pytest.approx(tpot("--enforce-eager"), rel=1e-12)


def test_every_command_refuses_a_block_fp8_split_the_release_cannot_load(capsys):
    # Qwen3-30B-A3B-FP8's 768-row experts over TP 4 are 192 rows a GPU, not whole 128-row blocks: SGLang refuses to load
    # it (QwenLM/Qwen3 issue 1485), so plan and speedup refuse it naming tp (exit 2); vLLM 0.32 refines the scales
    # to 64-wide blocks and plans it
    for command in ("plan", "speedup"):
        extra = ("--method", "ngram", "-k", "3", "--acceptance-rate", "0.5") if command == "speedup" else ()
        code, out, err = run_cli(capsys, command, "--target", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "H100-SXM-80GB",
                                 "--tp", "4", "--engine", "sglang", *extra)
        assert code == 2 and out == "" and "tp: " in err and "768 / 4 = 192" in err and "the newest SGLang" in err
    code, _, err = run_cli(capsys, "plan", "--target", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "H100-SXM-80GB", "--tp", "4")
    assert code in (0, 1), err
    code, _, err = run_cli(capsys, "plan", "--target", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "H100-SXM-80GB", "--tp", "4",
                           "--engine-version", "0.28")
    assert code == 2 and "vLLM 0.28 refuses" in err and "a TP of 1, 2" in err


def test_block_fp8_checks_what_is_served(capsys, tmp_path):
    # (review) a --quantization override serves a checkpoint without the fp8 blocks: no refusal; a draft model with its
    # own block-fp8 weights is checked at its own TP (Qwen3-4B-FP8's 9,728-row MLP over 8 GPUs: 1,216 rows); SGLang on
    # AMD pads the split under AITER (its ROCm images) and is not refused; a compressed-tensors block-fp8 MoE is never
    # refined by vLLM (compressed_tensors_moe_w8a8_fp8.py), so 0.32 refuses it where a native fp8 one plans
    from pathlib import Path

    base = ("plan", "--target", "Qwen/Qwen3-30B-A3B-FP8", "--tp", "4", "--engine", "sglang")
    for extra in (("--gpu", "H100-SXM-80GB", "--quantization", "int4"), ("--gpu", "MI300X-192GB")):
        code, _, err = run_cli(capsys, *base, *extra)
        assert code in (0, 1), err
    code, _, err = run_cli(capsys, "plan", "--target", "Qwen/Qwen3-32B-FP8", "--method", "draft_model", "--draft",
                           "Qwen/Qwen3-4B-FP8", "-k", "4", "--gpu", "H100-SXM-80GB", "--tp", "8", "--draft-tp", "8")
    assert code == 2 and "draft_tp: " in err and "9,728 / 8 = 1,216" in err
    qwen = json.loads((Path(__file__).resolve().parents[2] / "shared" / "model-configs" / "Qwen" / "Qwen3-30B-A3B" /
                       "config.json").read_text())
    block = {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128], "symmetric": True}
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
          "config_groups": {"g": {"targets": ["Linear"], "weights": block}}}
    (tmp_path / "config.json").write_text(json.dumps({**qwen, "quantization_config": qc}))
    code, _, err = run_cli(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--tp", "4")
    assert code == 2 and "768 / 4 = 192" in err and "0.29 or later" not in err


def test_bitsandbytes_over_a_stored_format_is_a_prequantized_checkpoint(capsys):
    # (review) --quantization bitsandbytes over fp8 weights plans a pre-quantized bitsandbytes checkpoint: the
    # releases that load one are vLLM 0.10 - 0.27 (an MoE), at TP 1
    base = ("plan", "--target", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "H100-SXM-80GB", "--quantization", "bitsandbytes")
    for extra, field in ((("--engine-version", "0.32"), "engine_version"), (("--engine", "sglang"), "engine_version"),
                         (("--engine-version", "0.20", "--tp", "2"), "tp")):
        code, out, err = run_cli(capsys, *base, *extra)
        assert code == 2 and out == "" and err.startswith(f"specsize: error: {field}: "), err
    code, _, err = run_cli(capsys, *base, "--engine-version", "0.20")
    assert code in (0, 1), err


def test_the_reports_demand_curve_holds_what_the_verdict_holds():
    # one owner (core.envelope.request_tokens): on SGLang 0.4.4 a top-4 tree of 8 nodes at 5 steps holds its decode
    # reserve less one beyond prompt + output (27 slots), in the report's curve as in the verdict
    import specsize
    from specsize.core.units import GiB
    from specsize.planner.report import kv_curve

    r = specsize.plan(engine="sglang", engine_version="0.4.4", target="meta-llama/Llama-3.1-8B-Instruct",
                      method="eagle", draft="sgl-project/SpecForge-llama3-8B-eagle3", num_speculative_tokens=5,
                      tree_topk=4, num_draft_tokens=8, gpu="H100-SXM-80GB", concurrency=8)
    p99 = {sh.label: sh for sh in r.verdict.shapes}["p99"]
    curve = kv_curve(r)
    first = dict(curve.demand_gib)["p99"][0] / min(curve.concurrency[0], r.memory.settings.max_num_seqs)
    assert p99.request_tokens == p99.prompt_tokens + p99.output_tokens + 27
    assert first == pytest.approx(p99.request_kv_bytes / GiB, rel=1e-12)
