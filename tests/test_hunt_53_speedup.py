"""Hunt 53: speculation's cost per drafter kind in `specsize speedup` and `plan`'s perf section, each bug with a value
worked out by hand or from the engine's own source."""

import json
from pathlib import Path

from helpers import run_cli as run

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "model-configs"
TARGET = "meta-llama/Llama-3.1-8B-Instruct"
H100_BANDWIDTH = 3.35e12  # B/s, catalog/data/gpus.json H100-SXM-80GB
HOPPER_MEMORY = 0.777  # catalog/data/efficiency.json hopper.memory
HOPPER_SAMPLER_PASSES = 6.0  # catalog/data/efficiency.json hopper.sampler_passes


def _rows(capsys, *args) -> list[dict]:
    code, out, err = run(capsys, "speedup", *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)["rows"]


# --- MTP: one of the checkpoint's MTP layers a forward -------------------------------------------------------------

def _deepseek_with_mtp(tmp_path: Path, layers: int) -> Path:
    cfg = json.loads((SHARED / "deepseek-ai" / "DeepSeek-V3" / "config.json").read_text())
    cfg["num_nextn_predict_layers"] = layers
    folder = tmp_path / f"dsv3-mtp{layers}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_mtp_forward_runs_one_layer_whatever_the_checkpoint_holds(capsys, tmp_path):
    """vLLM's MTP drafter runs layer spec_step_idx % num_mtp_layers in each of its k forwards
    (vllm/model_executor/models/deepseek_mtp.py DeepSeekMultiTokenPredictor.forward), so a DeepSeek-V3 checkpoint with
    3 MTP layers drafts at the cost of one with 1: the same TPOT at every batch. specsize had priced all 3 layers in
    every forward (1.94x -> 1.78x at batch 1, k = 3, a = 0.8 on 8 x H200)."""
    args = ("--method", "mtp", "--tp", "8", "--gpu", "H200-141GB", "--acceptance-rate", "0.8", "-k", "3",
            "--batch-size", "1,64,256")
    one = _rows(capsys, "--target", _deepseek_with_mtp(tmp_path, 1), *args)
    three = _rows(capsys, "--target", _deepseek_with_mtp(tmp_path, 3), *args)
    assert [r["tpot_s"] for r in three] == [r["tpot_s"] for r in one]
    assert [r["speedup"] for r in three] == [r["speedup"] for r in one]


# --- EAGLE-3 head without draft_vocab_size: a full-vocabulary lm_head ---------------------------------------------

def test_eagle3_head_without_draft_vocab_projects_through_a_full_vocabulary(capsys, tmp_path):
    """vLLM's Eagle3LlamaForCausalLM takes draft_vocab_size = vocab_size when the config has none
    (llama_eagle3.py: "default to the base vocab size when absent"; ParallelLMHead(draft_vocab_size, hidden)): each
    draft forward reads a 128,256 x 4,096 bf16 lm_head, not SpecForge's 32,000 rows, and picks its token over 128,256
    logits. At batch 1 (memory-bound) the k = 3 forwards read 3 x 96,256 x 4,096 x 2 B more and the sampler streams
    3 x 6 x 4 x 96,256 B more, at 3.35 TB/s x 0.777; per token that is divided by the 2.533 tokens a pass of
    a = 0.7, k = 3 yields. specsize had priced such a head with no lm_head at all (faster than the 32,000-row one)."""
    cfg = json.loads((ROOT / "src" / "specsize" / "catalog" / "data" / "models"
                      / "sgl-project__SpecForge-llama3-8B-eagle3.json").read_text())
    cfg = dict(cfg.get("config", cfg))
    assert cfg.pop("draft_vocab_size") == 32000
    head = tmp_path / "eagle3-full-vocab"
    head.mkdir()
    (head / "config.json").write_text(json.dumps(cfg))
    args = ("--target", TARGET, "--method", "eagle3", "--gpu", "H100-SXM-80GB", "-k", "3", "--acceptance-rate", "0.7",
            "--batch-size", "1")
    reduced = _rows(capsys, *args, "--draft", "sgl-project/SpecForge-llama3-8B-eagle3")[0]
    full = _rows(capsys, *args, "--draft", head)[0]
    extra_rows = 128_256 - 32_000
    per_forward = extra_rows * 4096 * 2 + HOPPER_SAMPLER_PASSES * 4 * extra_rows
    per_pass = 1 + 0.7 + 0.7 ** 2 + 0.7 ** 3
    expected = 3 * per_forward / (H100_BANDWIDTH * HOPPER_MEMORY) / per_pass
    assert abs((full["tpot_s"] - reduced["tpot_s"]) - expected) < 1e-3 * expected
    assert full["speedup"] < reduced["speedup"]


# --- Medusa: k heads at every k of the table ------------------------------------------------------------------------

def test_medusa_rows_price_k_heads_whatever_the_order_of_k(capsys):
    """vLLM builds Medusa with num_heads = num_speculative_tokens (vllm/transformers_utils/configs/medusa.py: the
    num_lookahead_tokens setter, "self.num_heads = num_lookahead_tokens") and runs every head once a step: the k = 8
    row drafts with 8 heads whether the table was asked for -k 1,8 or -k 8. specsize had priced every row with the
    heads derived at the first k (at B = 1, k = 8: 2.03x from -k 1,4,8 against 1.51x from -k 8,4,1)."""
    args = ("--target", TARGET, "--method", "medusa", "--gpu", "H100-SXM-80GB", "--acceptance-rate", "0.6",
            "--batch-size", "1,64", "--engine-version", "0.32")  # Medusa's last vLLM release (0.33 removed it)
    first_one = {(r["batch_size"], r["k"]): r["tpot_s"] for r in _rows(capsys, *args, "-k", "1,8")}
    only_eight = {(r["batch_size"], r["k"]): r["tpot_s"] for r in _rows(capsys, *args, "-k", "8")}
    only_one = {(r["batch_size"], r["k"]): r["tpot_s"] for r in _rows(capsys, *args, "-k", "1")}
    for batch in (1, 64):
        assert first_one[(batch, 8)] == only_eight[(batch, 8)]
        assert first_one[(batch, 1)] == only_one[(batch, 1)]


def test_medusa_step_has_no_drafter_pass_over_the_accepted_tokens(capsys):
    """Medusa's heads read the hidden states of the sampled positions and nothing else (vllm/v1/worker/
    gpu_model_runner.py propose_draft_token_ids, the medusa branch: "hidden_states = sample_hidden_states[indices]"):
    no pass over the accepted tokens, whose 0.65 ms (efficiency.json draft_setup_overhead_s, EAGLE's k-sweep
    intercept) specsize had charged every Medusa step. Against an n-gram drafter proposing every step (the same
    4-position verification, the same synchronous step), Medusa's step at batch 1 costs its one forward of 3
    derived heads (3 x 4,096 x 4,096 fc + a 3 x 128,256-row lm_head, bf16, memory-bound), the greedy pick over their
    3 x 128,256 fp32 logits (6 passes), the 0.3 ms of a drafter forward, less the n-gram lookup (20 us + 1.06 ns x
    2,048 context tokens)."""
    args = ("--target", TARGET, "--gpu", "H100-SXM-80GB", "-k", "3", "--acceptance-rate", "0.6", "--batch-size", "1",
            "--offline", "--engine-version", "0.32")  # Medusa's last vLLM release (0.33 removed it)
    medusa = _rows(capsys, *args, "--method", "medusa")[0]
    ngram = _rows(capsys, *args, "--method", "ngram", "--proposal-rate", "1")[0]
    assert medusa["tokens_per_pass"] == ngram["tokens_per_pass"]
    step = {name: r["tpot_s"] * r["tokens_per_pass"] for name, r in (("medusa", medusa), ("ngram", ngram))}
    heads_bytes = 3 * 4096 * 4096 * 2 + 3 * 128_256 * 4096 * 2
    pick_bytes = HOPPER_SAMPLER_PASSES * 4 * 3 * 128_256
    expected = (heads_bytes + pick_bytes) / (H100_BANDWIDTH * HOPPER_MEMORY) + 0.3e-3 - (20e-6 + 1.06e-9 * 2048)
    assert abs((step["medusa"] - step["ngram"]) - expected) < 0.01 * expected


def test_the_simulated_engine_charges_the_drafter_pass_only_where_speedup_does():
    """simulate had charged Medusa the 0.65 ms pass over the accepted tokens that a drafter keeping KV cache runs (and
    that speedup and plan no longer charge it): the engine's config takes the step costs' own figure."""
    import specsize
    from specsize.catalog.gpus import load_efficiency
    from specsize.planner.simulate import engine_config

    for method, draft, runs_pass in (("medusa", None, False), ("eagle3", "sgl-project/SpecForge-llama3-8B-eagle3", True),
                                     ("ngram", None, False)):
        r = specsize.plan(target=TARGET, gpu="H100-SXM-80GB", method=method, draft=draft, num_speculative_tokens=3,
                          acceptance_rate=0.6, max_model_len=8192, engine_version="0.32")  # Medusa's last release
        cfg = engine_config(r.deployment, r.memory, load_efficiency(r.deployment.gpu))
        assert (cfg.draft_setup_overhead_s > 0) == runs_pass, method


def test_an_eagle3_head_without_a_draft_vocabulary_holds_its_own_whole_lm_head(tmp_path):
    """llama_eagle3.py builds the head's ParallelLMHead over draft_vocab_size, vocab_size when the config names none:
    SpecForge's Llama-3-8B head without it holds 128,256 x 4,096 x 2 B = 1,050,673,152 B more than with its 32,000
    rows (32,000 x 4,096 x 2 = 262,144,000). The memory account had counted no lm_head at all for it."""
    from specsize.catalog import load_model
    from specsize.core.weights import weight_breakdown

    head = load_model("sgl-project/SpecForge-llama3-8B-eagle3")
    assert head.draft_vocab_size == 32000
    reduced = weight_breakdown(head, 1, share_embeddings=True).lm_head
    whole = weight_breakdown(head.with_(draft_vocab_size=None), 1, share_embeddings=True).lm_head
    assert (reduced, whole) == (32000 * 4096 * 2, 128256 * 4096 * 2)


def test_a_candidate_without_its_own_k_is_sized_at_the_deployments_k(capsys):
    """A `--candidate` with no k= is priced at the deployment's k, and so is its KV pool: it had been sized at k=1
    (the text's unset k), 402,048 tokens beside a table at k=3 that holds 374,848."""
    code, out, _ = run(capsys, "speedup", "--target", TARGET, "--gpu", "H100-SXM-80GB", "--method", "eagle3", "-k", "3",
                       "--acceptance-rate", "0.7", "--candidate", "method=eagle3,acceptance=0.6",
                       "--candidate", "method=eagle3,acceptance=0.6,k=1", "--batch-size", "1", "--format", "json")
    assert code == 0
    at_k, at_1 = json.loads(out)["candidates"]
    assert at_k["kv_cache_at_k"] == 3 and at_1["kv_cache_at_k"] == 1
    # what the engine sets aside for k + 1 positions a sequence grows with k: the pool at k=3 is the smaller
    assert at_k["kv_cache_tokens"] < at_1["kv_cache_tokens"]


def test_an_ngram_candidate_takes_the_requests_proposal_rate(capsys):
    """The share of steps whose lookup matches is the workload's: an n-gram candidate identical to the deployment's
    own drafter now prices the same table (it had taken the engine's 0.38 beside --proposal-rate 0.9); a share
    written on the candidate still wins."""
    args = ("speedup", "--target", TARGET, "--gpu", "H100-SXM-80GB", "--method", "ngram", "-k", "3",
            "--acceptance-rate", "0.5", "--proposal-rate", "0.9", "--batch-size", "1,64", "--format", "json")
    code, out, _ = run(capsys, *args, "--candidate", "method=ngram,acceptance=0.5,k=3",
                       "--candidate", "method=ngram,acceptance=0.5,k=3,proposal_rate=0.5")
    assert code == 0
    data = json.loads(out)
    same, own_rate = data["candidates"]
    assert same["proposal_rate"] == 0.9 and own_rate["proposal_rate"] == 0.5
    assert [r["speedup"] for r in same["rows"]] == [r["speedup"] for r in data["rows"]]


def test_medusa_memory_holds_the_k_heads_vllm_builds(tmp_path, capsys):
    """vLLM builds k Medusa heads whatever the checkpoint declares (MedusaConfig: num_heads = num_lookahead_tokens;
    heads past the checkpoint's load no weights, heads it declares past k are skipped): the memory account holds k,
    as the step costs price them. A head by hand: (4,096 x 4,096 block + 4,096 x 128,256 lm_head) x 2 B =
    1,084,227,584 B; a checkpoint declaring 5 had been held at 5 whatever k."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"medusa_num_heads": 5, "medusa_num_layers": 1, "hidden_size": 4096,
                                "vocab_size": 128256}))
    draft = {}
    for k in (3, 5, 8):
        code, out, err = run(capsys, "plan", "--target", TARGET, "--gpu", "H100-SXM-80GB", "--method", "medusa",
                             "--draft", str(path), "-k", str(k), "--format", "json", "--engine-version", "0.32")
        assert code in (0, 1, 3), err
        draft[k] = json.loads(out)["per_gpu"]["weights_draft_bytes"]
    per_head = (4096 * 4096 + 4096 * 128256) * 2
    assert draft[5] - draft[3] == 2 * per_head and draft[8] - draft[5] == 3 * per_head
