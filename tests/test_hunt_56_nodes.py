"""Hunt 56: a replica across nodes (TP inside a node, pipeline stages across nodes) in the fixes and the search, the
pipeline stages a model's layers allow, and the engine releases that draft with an architecture's own MTP layers -
each expected value worked out by hand or read in the engine's source."""

import json
from pathlib import Path

import pytest

import specsize
from specsize.catalog.models import load_config_dict
from specsize.core.errors import SpecError
from specsize.inputs.search_spec import read_search_spec
from specsize.planner.recommend import candidates
from helpers import run_cli as run

GiB = 1 << 30
FOUR_O_FIVE_B = "meta-llama/Llama-3.1-405B-Instruct"
ONE_B = "meta-llama/Llama-3.2-1B-Instruct"  # 16 decoder layers, 32 attention heads, 8 KV heads (its config.json)
ENVELOPE = dict(prompt_tokens={"p50": 1500, "p95": 4000, "p99": 8000, "max": 24000},
                output_tokens={"p50": 300, "p95": 800, "p99": 1200, "max": 2000})
# H100-SXM-80GB as the driver reports it (79.19 GiB, the catalog's observed figure) x gpu_memory_utilization 0.9
H100_BUDGET = 79.19 * GiB * 0.9
# Llama-3.1-405B by hand from its config (hidden 16,384, 126 layers, 128 heads, 8 KV heads of 128, MLP 53,248,
# vocabulary 128,256, untied). A layer: 2 x 16,384^2 (q, o) + 2 x 16,384 x 1,024 (k, v) + 3 x 16,384 x 53,248 (MLP),
# sharded by TP, and 2 x 16,384 norm weights, replicated: 3,187,671,040 / 8 + 32,768 = 398,491,648 parameters a GPU
# at TP 8. One of two stages (vLLM get_pp_indices: 126 // 2 = 63 layers each) adds one vocabulary table (the first
# stage's embedding, the last's lm_head): 128,256 x 16,384 / 8 = 262,668,288
LAYER_PER_GPU_TP8 = 3_187_671_040 // 8 + 2 * 16_384
TABLE_PER_GPU_TP8 = 128_256 * 16_384 // 8
STAGE_BYTES_TP8_PP2 = (63 * LAYER_PER_GPU_TP8 + TABLE_PER_GPU_TP8) * 2  # 50,735,284,224 B = 47.25 GiB in bf16
WHOLE_BYTES_TP8 = (126 * LAYER_PER_GPU_TP8 + TABLE_PER_GPU_TP8 * 2) * 2  # 101.0 GB = 94.5 GiB: over the budget


def spec_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


# --- more pipeline stages than layers --------------------------------------------------------------------------------

def test_more_pipeline_stages_than_layers_are_refused_naming_the_field(capsys):
    """Llama-3.2-1B has 16 layers. At PP 32 vLLM's get_pp_indices (distributed/utils.py) gives every stage 16 // 32 = 0
    layers and the 16 left one apiece to the stages before the last: 16 stages hold none; such a worker has no KV cache
    spec, get_kv_cache_config_from_groups gives it 1 block and get_kv_cache_configs cuts every worker to the smallest
    count. It had been planned as fitting, on 4 nodes. PP 16 (one layer a stage) still plans."""
    code, out, err = run(capsys, "plan", "--target", ONE_B, "--gpu", "H100-SXM-80GB", "--pp", "32")
    assert code == 2 and out == "" and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("specsize: error: pp: 32 pipeline stages for the 16 layers")
    assert "16 stage(s) would hold no layer" in line and "(accepted: at most 16)" in line
    assert specsize.plan(target=ONE_B, gpu="H100-SXM-80GB", pp=16).deployment.pp == 16


# --- the fix for a model too large for one node ----------------------------------------------------------------------

def test_a_model_too_large_for_a_node_is_offered_pipeline_stages_on_a_second_node():
    """Llama-3.1-405B in bf16 at TP 8 on 8 x H100: 94.5 GiB of weights a GPU against a 71.27 GiB budget. TP 16 would
    put a TP group across nodes (refused), so the one capacity fix had been another replica, which does not fit either;
    the standard layout (vLLM's multi-node guide: TP = GPUs per node, PP = nodes) was never offered. PP 2 holds 63
    layers a stage, 47.25 GiB a GPU: it fits, on 2 nodes, 8 more GPUs."""
    fields = dict(target=FOUR_O_FIVE_B, gpu="H100-SXM-80GB", tp=8, concurrency=16, **ENVELOPE)
    r = specsize.plan(**fields)
    assert WHOLE_BYTES_TP8 > H100_BUDGET and r.verdict.verdict == "does_not_fit"
    fix = next(f for f in r.recommendations if f.action == "higher_pp")
    assert fix.changes == {"pp": 2, "gpus": 16} and fix.extra_gpus == 8
    assert "PP=2" in fix.description and "2 nodes of 8 GPUs" in fix.description
    after = specsize.plan(**{**fields, **fix.changes})
    assert after.memory.weights_target_bytes == pytest.approx(STAGE_BYTES_TP8_PP2, rel=2e-3)
    assert STAGE_BYTES_TP8_PP2 < H100_BUDGET
    assert (after.placement.nodes, after.placement.nodes_per_replica) == (2, 2)
    assert fix.verdict_after == after.verdict.verdict == "fits"
    assert fix.headroom_after == pytest.approx(after.verdict.worst_case.headroom_fraction, abs=1e-6)
    # a fix that leaves a stage without a layer is none: Llama-3.2-1B at TP 8 (TP 16 spans nodes) x PP 16 cannot double
    small = specsize.plan(target=ONE_B, gpu="H100-SXM-80GB", tp=8, pp=16)
    assert not [a for a, *_ in candidates(small.deployment, small.workload, small) if a == "higher_pp"]
    # ... nor where TP doubles inside the node (TP 4 -> 8), which keeps the all-reduce on NVLink
    four = specsize.plan(target=FOUR_O_FIVE_B, gpu="H100-SXM-80GB", tp=4, pp=4, concurrency=16, **ENVELOPE)
    assert [a for a, *_ in candidates(four.deployment, four.workload, four) if a in ("higher_tp", "higher_pp")] == \
        ["higher_tp"]


# --- the search ------------------------------------------------------------------------------------------------------

SEARCH_405B = """
name: llama-405b
target: meta-llama/Llama-3.1-405B-Instruct
drafters:
  - {method: none}
gpus:
  - {gpu: H100-SXM-80GB, counts: [8, 16]}
tp: [8]
%s
kv_cache_dtypes: [auto]
max_num_seqs: [64]
max_model_len: 16384
workload: {prompt_tokens: {p50: 1500, p99: 8000}, output_tokens: {p50: 300, p99: 1200}, concurrency: 16,
           burst_factor: 1.5}
slo: {ttft_p99_ms: 10000, tpot_p99_ms: 200}
finalists: 1
"""


def test_a_search_lays_a_replica_across_nodes_as_pipeline_stages(tmp_path, capsys):
    """The search had no pipeline stages: TP stops at a node (8), so a 405B search on H100 nodes screened only
    configurations whose 94.5 GiB a GPU cannot fit, and said nothing fits. With `pp: [1, 2]` the 16 GPUs hold one
    replica of TP 8 x PP 2 (47.25 GiB a GPU), which fits; 8 GPUs cannot hold a 16-GPU replica (skipped)."""
    space = read_search_spec(str(spec_file(tmp_path, SEARCH_405B % "pp: [1, 2]")))
    assert space.pps == (1, 2)
    code, out, err = run(capsys, "search", spec_file(tmp_path, SEARCH_405B % "pp: [1, 2]"), "--no-simulate",
                         "--format", "json")
    result = json.loads(out)
    rows = {(c["gpus"], c["tp"], c["pp"]): c for c in result["pareto"] + result["finalists"]}
    best = result["cheapest"]
    assert (best["gpus"], best["tp"], best["pp"], best["replicas"], best["status"]) == (16, 8, 2, 1, "ok")
    assert (16, 8, 2) in rows
    assert result["screened"] == 3  # (8, PP 1), (16, PP 1: two replicas), (16, PP 2); (8, PP 2) skipped
    assert result["skipped"] == 1 and any(r["field"] == "pp" for r in result["skipped_reasons"])
    # without stages (the default, pp: [1]) nothing fits: every GPU would hold the whole model at TP 8
    code, out, err = run(capsys, "search", spec_file(tmp_path, SEARCH_405B % ""), "--no-simulate", "--format", "json")
    result = json.loads(out)
    assert code == 3 and result["cheapest"] is None


def test_a_search_skips_more_stages_than_layers(tmp_path, capsys):
    """PP 32 for the 16 layers of Llama-3.2-1B is skipped as a plan refuses it, not screened."""
    body = SEARCH_405B.replace("meta-llama/Llama-3.1-405B-Instruct", ONE_B).replace("counts: [8, 16]",
                                                                                 "counts: [256]")
    code, out, err = run(capsys, "search", spec_file(tmp_path, body % "pp: [16, 32]"), "--no-simulate", "--format",
                         "json")
    result = json.loads(out)
    # 256 GPUs at TP 8 x PP 16: 2 replicas of one layer a stage; at PP 32 one replica with 16 stages empty
    assert result["screened"] == 1 and result["skipped"] == 1
    assert {(c["pp"], c["replicas"]) for c in result["pareto"]} <= {(16, 2)}
    reasons = " ".join(r["first"] for r in result["skipped_reasons"])
    assert "32 pipeline stages for the 16 layers" in reasons and "16 stage(s) would hold no layer" in reasons


# --- MTP: the releases that draft with an architecture's own layers --------------------------------------------------

def _nemotron_with_mtp(tmp_path: Path) -> Path:
    """Nemotron-H-8B's config with one MTP layer (as Nemotron-3-Super checkpoints declare num_nextn_predict_layers)."""
    config, _ = load_config_dict("nvidia/Nemotron-H-8B-Base-8K")
    path = tmp_path / "nemotron-mtp" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**config, "num_nextn_predict_layers": 1}))
    return path


def test_mtp_is_refused_on_releases_without_the_architectures_mtp_drafter(tmp_path, capsys):
    """vLLM maps a target's model_type to its MTP drafter in SpeculativeConfig.hf_config_override: nemotron_h ->
    nemotron_h_mtp from 0.17.0 (config/speculative.py of the 0.17.0 sdist; absent in 0.16.0), years after vLLM 0.9.1
    first loaded Nemotron-H; SGLang maps NemotronHForCausalLM -> NemotronHForCausalLMMTP from 0.5.8
    (configs/model_config.py; absent in 0.5.7). A plan on the earlier releases had sized an MTP drafter the server
    never builds."""
    config = _nemotron_with_mtp(tmp_path)
    base = ["plan", "--target", config, "--method", "mtp", "--gpu", "H100-SXM-80GB", "--acceptance-rate", "0.6"]
    for version in ("0.16", "0.16.0"):
        code, out, err = run(capsys, *base, "--engine-version", version)
        line = err.strip().splitlines()[-1]
        assert code == 2 and out == "" and "Traceback" not in err
        assert line.startswith(f"specsize: error: engine_version: vLLM {version} has no MTP drafter for")
        assert "(nemotron_h)" in line and "from 0.17.0" in line
    code, out, err = run(capsys, *base, "--engine-version", "0.17")
    assert code == 0 and "mtp" in out
    code, out, err = run(capsys, *base[:-2], "--engine", "sglang", "--engine-version", "0.5.7")
    assert code == 2 and "SGLang 0.5.7 has no MTP drafter" in err and "from 0.5.8" in err
    # where the MTP drafter came with the model (GLM-4.5: glm4_moe_mtp and Glm4MoeForCausalLM both in vLLM 0.10.0) the
    # first release that loads the model plans it
    code, out, err = run(capsys, "plan", "--target", "zai-org/GLM-4.5-Air", "--method", "mtp", "--gpu",
                         "H100-SXM-80GB", "--tp", "4", "--engine-version", "0.10.0")
    assert "no MTP drafter" not in err


def test_a_search_refuses_an_mtp_drafter_its_release_cannot_launch(tmp_path, capsys):
    config = _nemotron_with_mtp(tmp_path)
    body = f"""
target: {config}
engine_version: "0.16"
drafters:
  - {{method: mtp, acceptance_rate: 0.6}}
gpus:
  - {{gpu: H100-SXM-80GB, counts: [1]}}
tp: [1]
workload: {{prompt_tokens: {{p50: 500, p99: 2000}}, output_tokens: {{p50: 200, p99: 500}}, concurrency: 4}}
"""
    code, out, err = run(capsys, "search", spec_file(tmp_path, body), "--no-simulate")
    assert code == 2 and "engine_version: vLLM 0.16 has no MTP drafter" in err and "Traceback" not in err


# --- launching a replica across nodes --------------------------------------------------------------------------------

def test_the_vllm_launch_note_names_the_ray_backend_the_command_needs():
    """vLLM 0.11.0 picked Ray by itself where TP x PP exceeds the node's GPUs (config/parallel.py: device count <
    world_size -> backend = "ray"); from 0.11.1 ParallelConfig.__post_init__ raises instead ("Tensor parallel size
    (16) cannot be larger than the number of available GPUs (8)"; 0.13 and later: "World size (16) is larger than the
    number of available GPUs (8) in this node ... set '--distributed-executor-backend ray'"). The note had told to run
    the command as emitted on the Ray head node, which 0.11.1 - 0.32 refuse."""
    r = specsize.plan(target=FOUR_O_FIVE_B, gpu="H100-SXM-80GB", tp=8, pp=2, concurrency=16, **ENVELOPE)
    note = next(w for w in r.warnings if w.startswith("a replica spans 2 nodes: the vllm command"))
    assert "--distributed-executor-backend ray" in note and "0.11.1" in note


def test_a_search_whose_stages_fit_no_gpu_count_says_so(tmp_path, capsys):
    """TP 8 x PP 2 is 16 GPUs a replica; a GPU count of 8 holds none. The search had blamed TP ("no value of [8]
    shards Llama-3.1-405B ... a TP degree that divides a GPU count"), which does divide 8 and the 128 heads."""
    body = (SEARCH_405B % "pp: [2]").replace("counts: [8, 16]", "counts: [8]")
    code, out, err = run(capsys, "search", spec_file(tmp_path, body), "--no-simulate")
    line = err.strip().splitlines()[-1]
    assert code == 2 and line.startswith("specsize: error: pp: no TP x PP of tp [8] x pp [2]")
    assert "TP 8 x PP 2 = 16 GPUs a replica does not divide 8 GPUs" in line


def test_a_failed_node_says_it_takes_its_whole_replica_down():
    """Three replicas of TP 8 x PP 2 on 6 nodes (48 GPUs / 8 a node; 16 GPUs a replica): one failed node takes down
    the replica it holds a stage of, 1 of 3, and 48 concurrent requests fall on 2 survivors, 24 each. The sentence had
    read as if a replica, not a node, had failed."""
    r = specsize.plan(target=FOUR_O_FIVE_B, gpu="H100-SXM-80GB", tp=8, pp=2, gpus=48, concurrency=48,
                      failure_unit="node", spare=1, **ENVELOPE)
    f = r.placement.failover
    assert (r.placement.nodes, f.lost, f.survivors, f.load_per_survivor) == (6, 1, 2, 24)
    assert f.sentence.startswith("a failed node takes down the whole replica it holds stages of (2 nodes a replica): "
                                 "with 1 of 3 replicas down, each of 2 survivors takes 24 concurrent requests")


def test_a_stage_of_only_mlp_layers_is_refused():
    """Nemotron-H-8B's 52 layers are Mamba-2 (M), attention (*) and MLP-only (-) layers, M and - alternating
    (hybrid_override_pattern M-M-M-M*-M-...). At PP 52 each stage holds one layer and 24 stages hold only an MLP
    layer: no attention or state, so no KV cache spec, and vLLM's get_kv_cache_configs cuts every worker to the one
    block such a worker gets. At PP 26 (two layers a stage) every pair holds an M or a *."""
    with pytest.raises(SpecError) as info:
        specsize.plan(target="nvidia/Nemotron-H-8B-Base-8K", gpu="H100-SXM-80GB", pp=52, gpus_per_node=52)
    assert "stage 1 holds only MLP layers" in str(info.value) and "(e.g. 26)" in str(info.value)
    assert specsize.plan(target="nvidia/Nemotron-H-8B-Base-8K", gpu="H100-SXM-80GB", pp=26,
                         gpus_per_node=26).deployment.pp == 26
