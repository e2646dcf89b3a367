"""Planner: a search whose optimum follows by hand, ranked fixes, failover and cold start, robustness
margins checked by re-planning at the reported limits, engine commands, the pipeline gate."""

import json
import shlex
from dataclasses import replace

import pytest

from specsize.catalog import load_gpu, load_model
from specsize.catalog.gpus import load_efficiency
from specsize.inputs.search_spec import DrafterOption, GpuOption, SearchSlo, SearchSpace
from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig
from specsize.engines import resolve_profile
from specsize.engines.emit import emitted_flags, engine_flags, sglang_command, vllm_command
from specsize.planner.perf import Acceptance
from specsize.planner.placement import StartupCosts, place
from specsize.planner.plan import plan
from specsize.planner.recommend import recommend
from specsize.planner.robustness import analyse, scaled_workload
from specsize.planner.search import run_search
from specsize.reports.rows import robustness_lines

from helpers import deployment, workload

PROFILE = resolve_profile()


def small_space(**overrides):
    base = dict(
        name="hand", target=load_model("meta-llama/Llama-3.1-70B-Instruct"),
        drafters=(DrafterOption("none", SpeculativeConfig(), None, (0,)),),
        gpus=(GpuOption(load_gpu("L4-24GB"), (1, 2, 4), 0.8), GpuOption(load_gpu("H200-141GB"), (1, 2), 3.5),
              GpuOption(load_gpu("B200-180GB"), (1,), 5.5)),
        tps=(1, 2, 4), kv_cache_dtypes=("auto",), max_num_seqs=(64,), engine=EngineSettings(max_model_len=8192),
        workload=workload(prompt=(1000, 2000, 4000, 4000), output=(200, 500, 1000, 1000), concurrency=4),
        slo=SearchSlo(), headroom=0.2, gpus_per_node=8, finalists=1, simulate_seconds=60.0, engine_version=None)
    base.update(overrides)
    return SearchSpace(**base)


def test_search_optimum_by_hand():
    # 70B in bf16 is 131.4 GiB of weights: no number of L4s up to 4 (4 x 22 GiB) and no single H200
    # (budget 0.9 x 139.8 = 125.8 GiB) can hold it; two H200s cost $7/h; one B200 (budget 160.5 GiB)
    # holds it with ~25 GiB of KV cache (~80k tokens) for 4 x 5,000-token requests, at $5.5/h.
    result = run_search(small_space(), PROFILE, load_efficiency)
    best = result.cheapest
    assert (best.gpu, best.gpus, best.tp, best.cost) == ("B200-180GB", 1, 1, 5.5)
    h200_single = next(c for c in result.candidates if c.gpu == "H200-141GB" and c.gpus == 1)
    assert h200_single.status == "does_not_fit"
    families = {(f["gpu"], f["status"]) for f in result.rejected_families}
    assert ("L4-24GB", "does_not_fit") in families
    assert all(c.cost >= 5.5 for c in result.pareto)


def test_top_recommendation_lowers_k_when_k_is_the_cause():
    # pool fixed at 100 usable blocks of 16 (+ the null block); p99 request 100 + 12 tokens + k lookahead slots:
    # with k=20 that is 132 tokens = 9 blocks x 10 concurrent = 90 blocks (10% headroom, thin); k <= 16 keeps
    # 8 blocks (20%)
    d = deployment(method="ngram", k=20, kv_cache_memory_bytes=101 * 16 * 131_072, max_model_len=1024)
    w = workload(prompt=(100, 100, 100, 100), output=(12, 12, 12, 12), concurrency=10)
    eff = load_efficiency(d.gpu)
    acceptance = Acceptance(rate=0.5)
    r = plan(d, w, PROFILE, 0.2, efficiency=eff, acceptance=acceptance)
    assert r.verdict.verdict == "thin" and r.verdict.worst_case.headroom_fraction == pytest.approx(0.1)
    recs = recommend(r, PROFILE, eff, acceptance)
    top = recs[0]
    assert top.action == "lower_k" and top.verdict_after == "fits"
    assert top.changes["num_speculative_tokens"] <= 16
    assert top.headroom_after == pytest.approx(0.2)


def test_fixes_offer_only_drafters_the_engine_release_launches():
    # a 3B draft model beside an 8B target on a 32 GB card does not fit; EAGLE-3 heads are in the catalog for this
    # vocabulary, but vLLM launches EAGLE-3 only from 0.8.5 (engines/methods.py): on 0.7.1 no fix may switch to one,
    # on 0.8.5 one may; every fix offered must plan when applied as given
    import specsize

    fields = dict(engine="vllm", target="deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
                  draft="meta-llama/Llama-3.2-3B-Instruct", num_speculative_tokens=7, acceptance_rate=0.483,
                  gpu="RTX-5090-32GB", quantization="gptq", concurrency=32, prompt_tokens="p50=200,p99=1600",
                  output_tokens="p50=500,p99=4000")
    for version, heads in (("0.7.1", False), ("0.8.5", True)):
        fixes = specsize.plan(**fields, engine_version=version).to_dict()["recommendations"]
        assert any(fix["action"] == "eagle_head" for fix in fixes) is heads
        for fix in fixes:
            specsize.plan(**{**fields, "engine_version": version, **fix["changes"]})


def test_failover_on_three_replicas_with_cold_start():
    # 3 replicas of Llama-3.1-8B (TP1) share 30 concurrent requests (10 each); with one down the two
    # survivors take 15 each. Cold start: 16,060,522,496 B of checkpoint / 2 GB/s = 8.03 s + 30 s engine
    # start + 8 s of cached torch.compile = 46.03 s
    d = deployment(gpu="H100-SXM-80GB", max_model_len=8192)
    d = Deployment(target=d.target, gpu=d.gpu, tp=1, num_gpus=3, engine=d.engine)
    w = workload(concurrency=30)
    eff = load_efficiency(d.gpu)
    r = plan(d, w, PROFILE, 0.2, efficiency=eff)
    assert r.verdict.worst_case.requested_concurrency == 10
    p = place(r, PROFILE, gpus_per_node=8, spare=1, storage_bandwidth_bytes_s=2e9, costs=StartupCosts(),
              efficiency=eff, ttft_slo_s=5.0)
    f = p.failover
    assert (f.replicas, f.survivors, f.load_per_survivor) == (3, 2, 15)
    assert p.storage.read_bytes_per_node == 8_030_261_248 * 2
    assert f.cold_start_s == pytest.approx(8_030_261_248 * 2 / 2e9 + 30 + 8)
    assert p.nodes == 1 and p.replicas_per_node == (3,)
    assert f.verdict in ("fits", "thin") and f.headroom < r.verdict.worst_case.headroom_fraction


def test_robustness_limits_hold_inside_and_flip_outside():
    d = deployment("meta-llama/Llama-3.1-70B-Instruct", tp=4, draft="meta-llama/Llama-3.2-1B-Instruct",
                   method="draft_model", k=4, max_model_len=32768, max_num_seqs=128)
    w = workload(prompt=(1500, 4000, 8000, 24000), output=(300, 800, 1200, 2000), concurrency=12, burst=1.5)
    r = plan(d, w, PROFILE, 0.2)
    rob = analyse(r)
    from specsize.core.envelope import evaluate

    for m in rob.margins:
        assert m.factor is not None
        inside = evaluate(r.memory, scaled_workload(w, m.input, m.factor), 0.2).verdict
        # concurrency is an integer: one more request than the limit must flip it (the sentence says so)
        step = (m.limit_value + 1) / m.current_value if m.input == "concurrency" else m.factor * 1.02 + 0.01
        outside = evaluate(r.memory, scaled_workload(w, m.input, step), 0.2).verdict
        assert inside == r.verdict.verdict, m
        assert outside != r.verdict.verdict, m


def test_acceptance_floor_is_where_speculation_stops_paying():
    d = deployment("meta-llama/Llama-3.1-8B-Instruct", draft="meta-llama/Llama-3.2-1B-Instruct",
                   method="draft_model", k=4, max_model_len=8192)
    w = workload(concurrency=8)
    eff = load_efficiency(d.gpu)
    r = plan(d, w, PROFILE, 0.2, efficiency=eff, acceptance=Acceptance(rate=0.8))
    rob = analyse(r, eff, Acceptance(rate=0.8))
    floor = rob.acceptance_floor
    above = plan(d, w, PROFILE, 0.2, efficiency=eff, acceptance=Acceptance(rate=floor + 0.01)).perf.speedup
    below = plan(d, w, PROFILE, 0.2, efficiency=eff, acceptance=Acceptance(rate=floor - 0.01)).perf.speedup
    assert above >= 1 > below
    assert rob.speculation_pays is True


def test_acceptance_floor_where_speculation_does_not_pay_yet_is_the_rate_it_must_rise_to():
    # at 256 concurrent sequences a 1B draft ahead of an 8B target at a = 0.7 is slower than no speculation; the floor
    # is then the rate it must rise to (above the current one), and the plan says so rather than "pays down to 0.70"
    d = deployment("meta-llama/Llama-3.1-8B-Instruct", draft="meta-llama/Llama-3.2-1B-Instruct",
                   method="draft_model", k=4, max_model_len=8192)
    w = workload(concurrency=256)
    eff = load_efficiency(d.gpu)

    def speedup(rate: float) -> float:
        return plan(d, w, PROFILE, 0.2, efficiency=eff, acceptance=Acceptance(rate=rate)).perf.speedup

    r = plan(d, w, PROFILE, 0.2, efficiency=eff, acceptance=Acceptance(rate=0.7))
    assert r.perf.speedup < 1
    rob = analyse(r, eff, Acceptance(rate=0.7))
    assert rob.speculation_pays is False and rob.acceptance_floor > 0.7
    assert speedup(rob.acceptance_floor + 0.01) >= 1 > speedup(rob.acceptance_floor - 0.01)
    assert rob.fragile and "does not pay" in rob.fragile_reasons[-1]
    lines = robustness_lines(replace(r, robustness=rob))
    assert f"does not pay at a = 0.70; it pays from a = {rob.acceptance_floor:.2f}" in "\n".join(lines)
    # a drafter as large as the target pays at no acceptance: no floor, and the plan says that too
    big = deployment("meta-llama/Llama-3.1-8B-Instruct", draft="meta-llama/Llama-3.1-8B-Instruct",
                     method="draft_model", k=4, max_model_len=8192)
    rb = plan(big, w, PROFILE, 0.2, efficiency=eff, acceptance=Acceptance(rate=0.7))
    assert plan(big, w, PROFILE, 0.2, efficiency=eff, acceptance=Acceptance(rate=1.0)).perf.speedup < 1
    rob = analyse(rb, eff, Acceptance(rate=0.7))
    assert rob.speculation_pays is False and rob.acceptance_floor is None
    assert "no acceptance rate up to 1 makes it pay" in "\n".join(robustness_lines(replace(rb, robustness=rob)))


EXAMPLES = ["llama70b-draft1b-4xh100.yaml", "llama8b-eagle3-h100.yaml", "deepseek-v3-mtp-8xh200.yaml",
            "gpt-oss-120b-ngram-h100.yaml"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_emitted_flags_are_the_engines_own(name):
    from pathlib import Path

    from specsize.inputs.load import load_request
    from specsize.inputs.resolve import resolve

    inputs = resolve(load_request(Path(__file__).resolve().parents[1] / "examples" / name))
    r = plan(inputs.deployment, inputs.workload, PROFILE, inputs.request.headroom)
    flags = engine_flags()
    v = vllm_command(r.deployment, r.memory)
    assert set(emitted_flags(v)) <= set(flags["vllm"]["flags"])
    argv = shlex.split(v.shell)
    if "--speculative-config" in argv:
        spec = json.loads(argv[argv.index("--speculative-config") + 1])
        assert set(spec) <= set(flags["vllm"]["speculative_config_keys"])
        assert spec["num_speculative_tokens"] == inputs.deployment.speculative.num_speculative_tokens
    assert argv[argv.index("--max-num-seqs") + 1] == str(r.memory.settings.max_num_seqs)
    sg = sglang_command(r.deployment, r.memory)
    assert set(emitted_flags(sg)) <= set(flags["sglang"]["flags"])
    if "--speculative-algorithm" in sg.argv:
        algorithm = sg.argv[sg.argv.index("--speculative-algorithm") + 1]
        assert algorithm in flags["sglang"]["speculative_algorithms"]


def test_emitted_vllm_command_parses_with_vllms_parser():
    vllm_args = pytest.importorskip("vllm.engine.arg_utils",
                                    reason="vLLM lives in the engine environment, not this one: "
                                           "tests/engine/test_engine_parser.py parses the emitted commands there")
    from vllm.utils import FlexibleArgumentParser

    parser = vllm_args.EngineArgs.add_cli_args(FlexibleArgumentParser())
    d = deployment(draft="sgl-project/SpecForge-llama3-8B-eagle3", method="eagle3", k=3, max_model_len=8192)
    r = plan(d, workload(), PROFILE, 0.2)
    argv = list(vllm_command(r.deployment, r.memory).argv)
    args = parser.parse_args(["--model", argv[2], *argv[3:]])
    assert args.max_num_seqs == r.memory.settings.max_num_seqs


def test_emitted_sglang_command_parses_with_sglangs_parser():
    server_args = pytest.importorskip("sglang.srt.server_args",
                                      reason="SGLang is not installed in this environment; flags are checked against "
                                             "the recorded list instead")
    import argparse

    parser = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(parser)
    d = deployment(draft="sgl-project/SpecForge-llama3-8B-eagle3", method="eagle3", k=3, max_model_len=8192)
    r = plan(d, workload(), PROFILE, 0.2)
    parser.parse_args(list(sglang_command(r.deployment, r.memory).argv[3:]))


def test_shared_pool_refuses_start_and_recommends_lower_utilization():
    d = deployment(max_model_len=8192, gpu_memory_utilization=0.9)
    d = Deployment(target=d.target, gpu=d.gpu, engine=d.engine, shared_reserved_bytes=20 * 2**30)
    r = plan(d, workload(), PROFILE, 0.2)
    assert r.verdict.verdict == "does_not_fit" and "another workload holds 20.00 GiB" in r.verdict.breaks_first
    recs = recommend(r, PROFILE)
    lower = next(x for x in recs if x.action == "lower_utilization")
    assert lower.changes["gpu_memory_utilization"] == pytest.approx(0.74)  # (79.19 - 20) / 79.19 = 0.747


def test_multi_step_scheduling_is_emitted_for_vllm_v0():
    from specsize.engines import vllm as vllm_profiles

    d = deployment()
    d = replace(d, engine=replace(d.engine, num_scheduler_steps=8))
    r = plan(d, workload(), vllm_profiles.V0, 0.2)
    argv = list(vllm_command(r.deployment, r.memory).argv)
    assert argv[argv.index("--num-scheduler-steps") + 1] == "8"
    assert set(engine_flags()["vllm"]["v0_only_flags"]) <= set(engine_flags()["vllm"]["flags"])


def test_engine_quantization_names_are_accepted_and_emitted_as_the_engines_own():
    # awq and gptq are 4-bit integer weights in groups of 128; AWQ stores a 4-bit zero point per group, GPTQ (symmetric
    # by default) none. Llama-3.1-8B's linear layers hold 218,103,808 weights per layer (q, o 4096 x 4096; k, v
    # 4096 x 1024; gate, up, down 4096 x 14336): 218,103,808 / 128 groups x 0.5 bytes x 32 layers = 27,262,976 bytes
    from dataclasses import replace

    base = deployment(max_model_len=8192)
    plans = {name: plan(replace(base, engine=replace(base.engine, quantization=name)), workload(), PROFILE, 0.2)
             for name in ("int4", "awq", "gptq", "nvfp4", "modelopt_fp4", "fp8", "mxfp4", "int8", "modelopt")}
    awq, gptq = plans["awq"].memory, plans["gptq"].memory
    assert awq.weights_target_bytes - gptq.weights_target_bytes == 27_262_976
    assert awq.weights_target_bytes == plans["int4"].memory.weights_target_bytes
    assert plans["nvfp4"].memory.weights_target_bytes == plans["modelopt_fp4"].memory.weights_target_bytes
    expected = {"int4": ("awq_marlin", "awq_marlin"), "awq": ("awq_marlin", "awq_marlin"),
                "gptq": ("gptq_marlin", "gptq_marlin"), "nvfp4": ("modelopt_fp4", "modelopt_fp4"),
                "modelopt_fp4": ("modelopt_fp4", "modelopt_fp4"), "fp8": ("fp8", "fp8"),
                # an MXFP4 checkpoint names its own quant_method (mxfp4 or Quark's quark), which a flag would contradict
                "mxfp4": (None, None),
                "int8": ("compressed-tensors", "w8a8_int8"), "modelopt": ("modelopt", "modelopt")}

    def flag(argv):
        return argv[argv.index("--quantization") + 1] if "--quantization" in argv else None

    for name, (on_vllm, on_sglang) in expected.items():
        r = plans[name]
        v, sg = vllm_command(r.deployment, r.memory).argv, sglang_command(r.deployment, r.memory).argv
        assert (flag(v), flag(sg)) == (on_vllm, on_sglang), name
        # only fp8 is made from the bf16 checkpoint at load; any other name (ModelOpt's fp8 too) serves a checkpoint
        # stored in its format, whose path the command leaves to fill in and the plan's note names
        stored = name != "fp8"
        assert (v[2] != "meta-llama/Llama-3.1-8B-Instruct") == stored, name
        assert (sg[sg.index("--model-path") + 1] != "meta-llama/Llama-3.1-8B-Instruct") == stored, name
        assert any(w.startswith(f"quantization {name}: ") for w in r.warnings) == stored, name
    assert vllm_command(plans["gptq"].deployment, plans["gptq"].memory).argv[2] == "PATH_TO_YOUR_INT4_CHECKPOINT"


def test_disk_plan_of_a_quantization_override_holds_the_checkpoint_the_engine_serves():
    from dataclasses import replace

    from specsize.core.weights import weight_breakdown

    base = deployment(max_model_len=8192)
    costs = StartupCosts()
    for name in ("gptq", "fp8"):
        d = replace(base, engine=replace(base.engine, quantization=name))
        storage = place(plan(d, workload(), PROFILE, 0.2), PROFILE, costs=costs).storage
        names = [a.name for a in storage.artefacts]
        bf16 = weight_breakdown(d.target, 1, 1, "bfloat16", None, rotary_cache=False).total
        if name == "fp8":  # quantized at load from the bf16 checkpoint, which is what is read
            assert names[0] == "target checkpoint" and storage.read_bytes_per_node == bf16
        else:  # the int4 checkpoint is read in its place: a quarter of the bf16 bytes plus scales and the bf16 rest
            assert names[0] == "target checkpoint (int4, pre-quantized)"
            assert storage.read_bytes_per_node < 0.4 * bf16


def test_an_override_over_a_checkpoint_stored_quantized_serves_a_checkpoint_of_its_own():
    # vLLM refuses a --quantization other than the one a quantized checkpoint's config declares, and loads a quantized
    # checkpoint as stored whatever the plan assumes: fp8 over an AWQ checkpoint needs an fp8 checkpoint (it had been
    # "quantized at load" from the AWQ one), and none over an FP8 checkpoint an unquantized one (the command had
    # served the FP8 checkpoint while the plan priced bf16 weights). fp8 over an unquantized checkpoint is still made
    # at load.
    import specsize

    from specsize.core.weights import weight_breakdown

    awq = specsize.plan(target="Qwen/Qwen3-8B-AWQ", gpu="H100-SXM-80GB", quantization="fp8").to_dict()
    (command,) = [c for c in awq["engine_commands"] if c["engine"] == "vllm"]
    assert command["argv"][2] == "PATH_TO_YOUR_FP8_CHECKPOINT"
    assert awq["placement"]["storage"]["artefacts"][0]["name"] == "target checkpoint (fp8, pre-quantized)"
    assert any("stored as int4, which the engines load only as stored" in w for w in awq["warnings"])
    fp8 = specsize.plan(target="nvidia/Llama-3.1-8B-Instruct-FP8", gpu="H100-SXM-80GB", quantization="none")
    (command,) = [c for c in fp8.commands if c.engine == "vllm"]
    assert command.argv[2] == "PATH_TO_YOUR_UNQUANTIZED_CHECKPOINT" and "--quantization" not in command.argv
    first = fp8.placement.storage.artefacts[0]
    bf16 = weight_breakdown(fp8.deployment.target.with_(quantization=None, weight_bytes_exact=None), 1, 1,
                            "bfloat16", None, rotary_cache=False).total
    assert first.name == "target checkpoint (unquantized)" and first.bytes == bf16
    plain = specsize.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", quantization="fp8")
    (command,) = [c for c in plain.commands if c.engine == "vllm"]
    assert command.argv[2] == "meta-llama/Llama-3.1-8B-Instruct"


def test_failover_re_plans_the_survivors_with_the_plans_own_tree():
    # SGLang EAGLE-3 with a top-4 tree of 8 draft tokens: the survivors' TPOT is that of the same deployment planned on
    # their GPUs, tree and all (it had been priced as a chain: 5.71 against 5.02 ms)
    import specsize

    fields = dict(engine="sglang", target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", concurrency=200,
                  method="eagle3", draft="sgl-project/SpecForge-llama3-8B-eagle3", num_speculative_tokens=3,
                  tree_topk=4, num_draft_tokens=8, acceptance_rate=0.7)
    four = specsize.plan(**fields, gpus=4)
    three = specsize.plan(**fields, gpus=3)
    assert four.placement.failover.tpot_s == pytest.approx(three.perf.tpot_s, rel=1e-12)
    assert four.placement.failover.verdict == three.verdict.verdict


def test_loading_holds_a_ranks_share_of_tp_x_pp():
    # a 70B checkpoint loads in shards of tp x pp: TP 2 x PP 2 and TP 4 hold the same host RAM per node (4 ranks, a
    # quarter of the checkpoint each); it had divided by TP alone
    import specsize

    common = dict(target="meta-llama/Llama-3.3-70B-Instruct", gpu="H100-SXM-80GB", max_model_len=8192)
    pp = specsize.plan(**common, tp=2, pp=2).placement.storage
    tp = specsize.plan(**common, tp=4).placement.storage
    assert pp.host_ram_bytes_per_node == tp.host_ram_bytes_per_node


def test_a_command_for_a_release_older_than_its_flag_table_says_so():
    # the vLLM command's flags are checked against vLLM 0.11 - 0.33 (engines/data/engine_flags.json); vLLM 0.6 named
    # its drafter flags otherwise (--speculative-model), so a plan of 0.6 says the command needs checking there
    import specsize

    old = specsize.plan(engine_version="0.6", method="none")
    assert any(note.startswith("the vLLM command uses the flags of vLLM 0.11 - 0.33; vLLM 0.6 names some otherwise")
               for note in old.notes)
    assert not any("uses the flags of" in note for note in specsize.plan(engine_version="0.11", method="none").notes)
    assert not any("uses the flags of" in note for note in specsize.plan(method="none").notes)


def test_a_failed_node_restarts_cold_a_failed_replica_warm():
    # the compile cache is per node: a replica restarting on its node reuses it (8 s), a replacement node has none
    # (40 s): the two restarts differ by exactly that
    import specsize

    common = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", gpus=16, gpus_per_node=8,
                  method="none")
    replica = specsize.plan(**common, failure_unit="replica").placement
    node = specsize.plan(**common, failure_unit="node").placement
    assert replica.failover.cold_start_s == pytest.approx(replica.storage.cold_start_cached_s)
    assert node.failover.cold_start_s == pytest.approx(node.storage.cold_start_s)
    assert node.failover.cold_start_s - replica.failover.cold_start_s == pytest.approx(40 - 8)


def test_fixes_and_acceptance_floor_of_a_tree_are_priced_with_the_tree():
    # SGLang EAGLE-3 with a top-4 tree of 8 draft tokens: the ranked fixes and the acceptance floor re-plan the
    # deployment, and each must price the same tree the plan does. Priced as a chain, fp8 KV read as a 46% slower TPOT
    # and the floor sat at 0.27 where the tree pays down to about 0.16. Both are checked against whole plans of the
    # changed request through the public API.
    import specsize

    q = specsize.load_request(engine="sglang", target="meta-llama/Llama-3.1-8B-Instruct", method="eagle3",
                              tree_topk=4, num_draft_tokens=8, num_speculative_tokens=3, acceptance_rate=0.3,
                              gpu="H100-SXM-80GB", concurrency=64)
    r = specsize.plan(q)
    fix = next(f for f in r.recommendations if f.action == "kv_fp8")
    after = specsize.plan(q.replace(kv_cache_dtype="fp8"))
    assert fix.tpot_change == pytest.approx(after.perf.tpot_s / r.perf.tpot_s - 1, rel=1e-9)
    assert fix.tpot_change < 0  # fp8 reads half the KV bytes: never slower
    floor = r.robustness.acceptance_floor
    assert 0 < floor < 0.3

    def speedup(rate: float) -> float:
        return specsize.plan(q.replace(acceptance_rate=rate)).perf.speedup

    assert speedup(floor + 0.01) >= 1 > speedup(floor - 0.01)


def test_a_context_too_short_for_the_requests_is_fixed_by_raising_it_and_said_where_the_model_cannot():
    # max_model_len 4096 rejects the default envelope's p99 request (8,000 + 1,200 tokens): the ranked fixes had
    # offered only memory changes, each leaving the plan does_not_fit; raising the context to 9,200 (575 blocks of
    # 16) makes it fit, and applying the fix's changes gives that verdict
    import specsize
    from specsize.inputs.load import apply_overrides

    q = specsize.load_request(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", max_model_len=4096)
    r = specsize.plan(q)
    assert r.verdict.verdict == "does_not_fit"
    top = r.recommendations[0]
    assert top.action == "raise_max_model_len" and top.changes == {"max_model_len": 9200}
    assert top.verdict_after == "fits" == specsize.plan(apply_overrides(q, top.changes)).verdict.verdict
    # Phi-3-mini-4k's context is 4,096 tokens: no setting serves a 9,200-token request, and the plan says so
    phi = specsize.plan(target="microsoft/Phi-3-mini-4k-instruct", gpu="L4-24GB")
    assert all(f.action != "raise_max_model_len" for f in phi.recommendations)
    assert any("longest context (4096 tokens): no engine setting serves them" in w for w in phi.warnings)


def test_lowering_k_of_an_sglang_tree_lowers_its_draft_tokens_to_what_the_tree_holds():
    # k = 3 at top-k 2 with 7 draft tokens: k = 1 holds at most 1 x 2 + 1 = 3 nodes, and the fix says so (it had kept
    # 7, verified 7 positions a sequence in its pricing and left the engine a tree it cannot build)
    import specsize

    r = specsize.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine="sglang", method="eagle3",
                      num_speculative_tokens=3, tree_topk=2, num_draft_tokens=7, acceptance_rate=0.7,
                      concurrency=400, max_model_len=16384)
    lowered = {f.changes["num_speculative_tokens"]: f.changes for f in r.recommendations if f.action == "lower_k"}
    assert lowered, [f.action for f in r.recommendations]
    for k, changes in lowered.items():
        assert changes["num_draft_tokens"] == min(7, k * 2 + 1)
