"""Hunt 54, what joined the helpers' work: how a replica across nodes is launched, the sampler a pip install of
vLLM 0.8-0.11.0 profiles, what a drafter's first forward runs over per release (the plan and the simulator alike), and
vLLM 0.12-0.13's --stream-interval. Each value worked out by hand or read in the engine's source."""

import pytest

import specsize
from helpers import run_cli as run

GiB = 1 << 30
EIGHT_B = "meta-llama/Llama-3.1-8B-Instruct"
OSS_120B = "openai/gpt-oss-120b"


def _warnings(result) -> list[str]:
    return list(result.warnings)


# --- a replica across nodes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine, says", [
    ("vllm", ["a replica spans 2 nodes", "ray start --head", "ray start --address=<head>:6379", "head node"]),
    ("sglang", ["a replica spans 2 nodes", "--nnodes 2 --node-rank <0..1> --dist-init-addr <node 0>:<port>"]),
])
def test_a_replica_across_nodes_says_how_its_command_is_launched(capsys, engine, says):
    """TP 8 x PP 2 on nodes of 8: a replica on two nodes. The emitted command alone starts one node's ranks; vLLM's
    distributed-serving guide runs it from a Ray cluster over the nodes, SGLang runs it on every node with its node
    rank (server_args.py: nnodes, node_rank, dist_init_addr)."""
    code, out, err = run(capsys, "plan", "--target", "meta-llama/Meta-Llama-3.1-405B", "--gpu", "H100-SXM-80GB",
                         "--tp", "8", "--pp", "2", "--gpus", "32", "--engine", engine, "--emit", engine)
    assert code in (0, 1, 3), err
    line = next(line for line in err.splitlines() if "spans" in line)
    for text in says:
        assert text in line, line
    # one node per replica: nothing to say
    code, out, err = run(capsys, "plan", "--target", EIGHT_B, "--gpu", "H100-SXM-80GB", "--gpus", "16",
                         "--engine", engine, "--emit", engine)
    assert "spans" not in err


# --- the sampler a pip install profiles -------------------------------------------------------------------------------

def test_a_pip_install_of_vllm_0_10_is_warned_of_its_sort_sampler():
    """vLLM 0.8-0.11.0 profile the sampler with FlashInfer's kernel where FlashInfer is installed (the images), with
    PyTorch's sort where not (a pip install): 5.88 fp32 row-sets of gpt-oss's 201,088-word vocabulary over 1,024
    sequences more, 5.88 x 1,024 x 201,088 x 4 = 4,843,099,914 B = 4.51 GiB, more than the 2.2 GiB of cache the image's
    plan leaves on one H100 (vllm-project/vllm issue 23278, a pip 0.10.1: "Available KV cache memory: -2.14 GiB")."""
    r = specsize.plan(target=OSS_120B, gpu="H100-SXM-80GB", engine_version="0.10.1", method="none")
    line = next(w for w in _warnings(r) if "FlashInfer" in w)
    assert "4.51 GiB more" in line and "1024 sequences" in line and "the engine does not start" in line
    assert 0 < r.memory.kv_cache_bytes < 5.88 * 1024 * 201_088 * 4
    # 64 sequences: 5.88 x 64 x 804,352 B = 0.28 GiB, the rest of the cache left
    r64 = specsize.plan(target=OSS_120B, gpu="H100-SXM-80GB", engine_version="0.10.1", method="none", max_num_seqs=64)
    line = next(w for w in _warnings(r64) if "FlashInfer" in w)
    left = (r64.memory.kv_cache_bytes - int(5.88 * 64 * 201_088 * 4)) / GiB
    assert "0.28 GiB more" in line and f"leaves {left:.2f} GiB of KV cache" in line
    # 0.11.0 as 0.10; 0.11.1 on profile the sort whatever is installed (FlashInfer's kernel opt-in): planned so, nothing
    # to warn
    r = specsize.plan(target=OSS_120B, gpu="H100-SXM-80GB", engine_version="0.11.0", method="none")
    assert any("FlashInfer" in w and "4.51 GiB more" in w for w in _warnings(r))
    for version in ("0.11.1", "0.32"):
        r = specsize.plan(target=OSS_120B, gpu="H100-SXM-80GB", engine_version=version, method="none")
        assert not any("FlashInfer" in w for w in _warnings(r))


# --- what a drafter's first forward runs over ---------------------------------------------------------------------------

@pytest.mark.parametrize("engine, version, method, mode", [
    ("vllm", "0.6.3", "draft_model", "last"),        # V0: proposers draft from the last token
    ("vllm", "0.10.1", "eagle3", "accepted"),        # 0.8-0.10: prepare_inputs over the accepted tokens
    ("vllm", "0.11", "eagle3", "verified"),          # 0.11 on: prepare_inputs_padded, k + 1 a sequence
    ("vllm", "0.32", "eagle3", "verified"),
    ("vllm", "0.32", "draft_model", "verified+next"),  # a separate draft model: one slot more
    ("sglang", "0.4.6", "eagle3", "accepted"),       # eager prepare_extend_after_decode: accept_length + 1
    ("sglang", "0.4.10", "eagle3", "verified"),      # the draft-extend CUDA graph of num_steps + 1 tokens
    ("sglang", "0.5.14", "draft_model", "verified"),  # STANDALONE extends as EAGLE
])
def test_the_drafters_first_forward_follows_the_release(engine, version, method, mode):
    from specsize.core.perf import draft_extend_tokens
    from specsize.planner.perf import costs_for
    from specsize.planner.simulate import engine_config
    from specsize.catalog.gpus import load_efficiency
    from specsize.core.speculation import Tree

    drafts = {"eagle3": "sgl-project/SpecForge-llama3-8B-eagle3", "draft_model": "meta-llama/Llama-3.2-1B-Instruct"}
    r = specsize.plan(engine=engine, engine_version=version, target=EIGHT_B, gpu="H100-SXM-80GB", method=method,
                      draft=drafts[method], num_speculative_tokens=4, acceptance_rate=0.7)
    assert r.memory.settings.draft_extend == mode
    eff = load_efficiency(r.deployment.gpu)
    costs = costs_for(r.deployment, r.memory, eff, 4, Tree())
    # k + 1 = 5 verified positions, 6 with the sampled token's slot, the accepted ones' bound 5 where not given, 0
    expected = {"last": 0.0, "accepted": 5.0, "verified": 5.0, "verified+next": 6.0}[mode]
    assert draft_extend_tokens(costs) == expected
    # the simulator prices the drafter with the same positions (core.perf.drafter_forwards_s, one owner)
    assert engine_config(r.deployment, r.memory, eff).draft_extend_tokens == expected


def test_the_simulated_drafter_is_the_plans():
    """One decode step of 16 sequences at 2,048 tokens of context, nothing prefilling: the simulator's drafter time is
    core.perf.draft_time's (what the speed-up table prices), both through drafter_forwards_s."""
    import numpy as np

    from specsize.catalog.gpus import load_efficiency
    from specsize.core.perf import draft_time
    from specsize.core.speculation import Tree
    from specsize.planner.perf import costs_for
    from specsize.planner.simulate import engine_config
    from specsize.simulator import engine as sim

    r = specsize.plan(target=EIGHT_B, gpu="H100-SXM-80GB", method="draft_model",
                      draft="meta-llama/Llama-3.2-1B-Instruct", num_speculative_tokens=4, acceptance_rate=0.7)
    eff = load_efficiency(r.deployment.gpu)
    cfg = engine_config(r.deployment, r.memory, eff)
    costs = costs_for(r.deployment, r.memory, eff, 4, Tree())
    without = sim.EngineConfig(**{**cfg.__dict__, "draft": None, "draft_steps": 0})
    context, sched = np.full(16, 2048.0), np.full(16, 5.0)  # each decoding sequence verifies k + 1 = 5 positions
    active, decoding = np.arange(16), np.ones(16, dtype=bool)
    draft_windows = tuple(w for w, _ in cfg.draft.kv_windows)
    with_draft = sim._step_seconds(cfg, (), draft_windows, context, sched, active, 16, decoding)[0]
    plain = sim._step_seconds(without, (), (), context, sched, active, 16, decoding)[0]
    assert with_draft - plain == pytest.approx(draft_time(costs, 16, 2048), rel=1e-9)


# --- vLLM 0.12-0.13's --stream-interval -----------------------------------------------------------------------------

def test_vllm_0_12_takes_a_stream_interval(capsys):
    """--stream-interval came with vLLM 0.12 (PR 27869): 0.12 and 0.13 take it, 0.11 refuses it."""
    base = ["simulate", "--target", EIGHT_B, "--gpu", "H100-SXM-80GB", "--rate", "1", "--duration", "5",
            "--stream-interval", "10", "--format", "json"]
    for version, code_expected in (("0.12", 0), ("0.13.0", 0), ("0.11", 2)):
        code, out, err = run(capsys, *base, "--engine-version", version)
        assert code == code_expected, (version, err)


# --- a sweep cell's key -----------------------------------------------------------------------------------------------

def test_a_cells_key_covers_the_modules_its_row_goes_through(monkeypatch):
    """A sweep cell's row is made by sweep.cell through the api and reports.sweep's columns: a change to any of them
    changes the model version in every cell key, so a rerun after an upgrade computes the cells again rather than
    reusing rows the old code made."""
    from importlib import resources

    from specsize.inputs import study

    root = resources.files("specsize")
    assert set(study.MODEL_MODULES) == {"api.py", "sweep/cell.py", "reports/sweep.py"}
    assert all((root / m).is_file() for m in study.MODEL_MODULES)
    with_modules = study.model_version()
    study.model_version.cache_clear()
    monkeypatch.setattr(study, "MODEL_MODULES", ())
    try:
        assert study.model_version() != with_modules
    finally:
        study.model_version.cache_clear()


# --- best k where no k pays ---------------------------------------------------------------------------------------

def test_no_k_is_best_where_every_k_slows_decoding(capsys):
    """At a per-token acceptance of 0.05 a pass emits at most 1 / (1 - 0.05) = 1.053 tokens, and a speculative step is
    a target pass over k + 1 positions plus the head's forwards, more than the plain step: every k is a slowdown, and
    the table had still named k=1 the best. It names none (JSON null); at 0.8 a k is best."""
    import json

    base = ["speedup", "--target", EIGHT_B, "--gpu", "H100-SXM-80GB", "--method", "eagle3", "--draft",
            "sgl-project/SpecForge-llama3-8B-eagle3", "-k", "1,2,4", "--batch-size", "1,64", "--format", "json"]
    code, out, err = run(capsys, *base, "--acceptance-rate", "0.05")
    assert code == 0, err
    table = json.loads(out)
    assert all(row["speedup"] < 1 for row in table["rows"])
    assert table["best_k"] == {"1": None, "64": None}
    code, out, err = run(capsys, *base[:-2], "--acceptance-rate", "0.05")
    assert [line.split()[-1] for line in out.splitlines() if line.strip()[:2] in ("1 ", "64")] == ["none", "none"]
    code, out, err = run(capsys, *base, "--acceptance-rate", "0.8")
    assert json.loads(out)["best_k"]["1"] in (1, 2, 4)
    r = specsize.plan(target=EIGHT_B, gpu="H100-SXM-80GB", method="eagle3", draft="sgl-project/SpecForge-llama3-8B-eagle3",
                      num_speculative_tokens=3, acceptance_rate=0.05, concurrency=16)
    assert r.perf.speedup < 1 and r.perf.best_k is None


# --- what a step reads of gpt-oss's experts ---------------------------------------------------------------------------

def test_a_step_reads_the_swizzled_experts_not_the_scales_kept_beside_them():
    """vLLM 0.12-0.24 on Hopper keep gpt-oss's loaded scales beside the swizzled copy the Triton kernel reads: held,
    never read. One expert of gpt-oss-120b at TP 1 holds them for gate/up (5,760 rows of 2,880 / 32 = 90 groups) and
    down (2,880 x 90): 518,400 + 259,200 = 777,600 bytes; a decode step that touches it reads that much less than the
    weights hold, and the dense bytes do not take them either."""
    from specsize.catalog import load_model
    from specsize.core.perf import model_cost
    from specsize.core.weights import expert_bytes_per_rank, weight_breakdown
    from specsize.engines.vllm import MXFP4_TRITON_HOPPER_035, MXFP4_TRITON_HOPPER_FREED

    m = load_model(OSS_120B)
    held = expert_bytes_per_rank(m, 1, "bfloat16", None, MXFP4_TRITON_HOPPER_035)[0]
    cost = model_cost(m, 1, "bfloat16", None, mxfp4_pad=MXFP4_TRITON_HOPPER_035)
    assert held - cost.expert_bytes == 5760 * 90 + 2880 * 90 == 777_600
    total = weight_breakdown(m, 1, 1, "bfloat16", None, rotary_cache=False, mxfp4_pad=MXFP4_TRITON_HOPPER_035).total
    assert cost.dense_bytes == total - 36 * 128 * held - weight_breakdown(m, 1, 1, "bfloat16", None,
                                                                         rotary_cache=False).embedding
    # 0.25 frees them: what is held is what is read
    freed = model_cost(m, 1, "bfloat16", None, mxfp4_pad=MXFP4_TRITON_HOPPER_FREED)
    assert freed.expert_bytes == expert_bytes_per_rank(m, 1, "bfloat16", None, MXFP4_TRITON_HOPPER_FREED)[0]
