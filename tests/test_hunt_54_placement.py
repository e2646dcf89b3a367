"""Hunt 54: placement, failover, disk and cold start across GPUs and nodes, the drift bounds and the ranked fixes -
each bug with a value worked out by hand or from the engine's own source."""

import pytest

import specsize
from helpers import run_cli as run

GiB = 1 << 30
EIGHT_B = "meta-llama/Llama-3.1-8B-Instruct"
FOUR_O_FIVE_B = "meta-llama/Llama-3.1-405B-Instruct"
ENVELOPE = dict(prompt_tokens={"p50": 1500, "p95": 4000, "p99": 8000, "max": 24000},
                output_tokens={"p50": 300, "p95": 800, "p99": 1200, "max": 2000})
# Llama-3.1-405B by hand from its config (hidden 16,384, 126 layers, 128 heads, 8 KV heads of 128, MLP 53,248,
# vocabulary 128,256, untied): a layer holds 2 x 16,384^2 (q, o) + 2 x 16,384 x 1,024 (k, v) + 3 x 16,384 x 53,248
# (MLP) + 2 x 16,384 (norms) = 3,187,703,808 parameters; 126 of them, two 128,256 x 16,384 tables and the final norm
# make 405,853,388,800 parameters, 811,706,777,600 bytes in bf16
CHECKPOINT_405B = 405_853_388_800 * 2


def _applied(fields: dict, changes: dict):
    """The plan a fix's settings give when applied as the deployment's settings (None removes a setting)."""
    values = {k: getattr(v, "value", v) for k, v in changes.items()}
    return specsize.plan(**{**fields, **values})


# --- ranked fixes ----------------------------------------------------------------------------------------------------

def test_doubling_tp_shards_the_draft_model_as_applying_it_does():
    """An 8B target with a 1B draft model at TP 1 on 2 GPUs: "double TP to 2" applied as `tp 2` runs the draft at the
    target's TP (vLLM's SpeculativeConfig: an unset draft_tensor_parallel_size is the target's), but the fix had
    priced it on one GPU, so the headroom it claimed (23%) was not the one its settings give (37%)."""
    fields = dict(target=EIGHT_B, gpu="H100-SXM-80GB", draft="meta-llama/Llama-3.2-1B-Instruct",
                  num_speculative_tokens=4, gpus=2, concurrency=60, burst_factor=1.5, **ENVELOPE)
    r = specsize.plan(**fields)
    fix = next(f for f in r.recommendations if f.action == "higher_tp")
    assert fix.changes["tp"] == 2 and fix.changes["gpus"] == 4 and fix.changes["draft_tp"] == 2
    after = _applied(fields, fix.changes)
    assert after.deployment.speculative.draft_tp == 2
    assert fix.headroom_after == pytest.approx(after.verdict.worst_case.headroom_fraction, abs=1e-6)
    assert fix.verdict_after == after.verdict.verdict


def test_doubling_tp_is_offered_beside_a_draft_model_at_the_targets_tp():
    """The embedded 70B with its 1B draft at TP 4 (the target's): TP 4 -> 8 had never been offered, the candidate kept
    the draft at TP 4 beside a target at 8, which vLLM refuses (1 or the target's TP), and the refusal dropped it."""
    fields = dict(concurrency=64, burst_factor=1.5)
    r = specsize.plan(**fields)
    assert r.deployment.tp == 4 and r.deployment.speculative.draft_tp == 4
    fix = next(f for f in r.recommendations if f.action == "higher_tp")
    assert fix.changes["tp"] == 8 and fix.changes["draft_tp"] == 8 and fix.extra_gpus == 4
    after = _applied(fields, fix.changes)
    assert fix.headroom_after == pytest.approx(after.verdict.worst_case.headroom_fraction, abs=1e-6)
    assert fix.verdict_after == after.verdict.verdict


def test_doubling_tp_past_a_node_is_offered_as_pipeline_stages_across_nodes():
    """TP 4 x PP 2 fills a node of 8; TP 8 x PP 2 is two whole nodes, one stage each (vLLM's multi-node layout), so it
    is a fix, and applying it plans; TP 16 would put a TP group across nodes and is not offered."""
    from specsize.planner.recommend import candidates

    fields = dict(tp=4, pp=2, gpus=8, concurrency=80)
    r = specsize.plan(**fields)

    def doubled(per_node: int) -> list[tuple[int, int | None]]:
        return [(nd.tp, nd.num_gpus) for action, _, nd, _, _, _ in
                candidates(r.deployment, r.workload, r, gpus_per_node=per_node) if action == "higher_tp"]

    assert doubled(8) == [(8, 16)] and doubled(4) == []
    fix = next(f for f in r.recommendations if f.action == "higher_tp")
    assert _applied(fields, fix.changes).placement.nodes == 2


# --- replicas wider than a node --------------------------------------------------------------------------------------

def test_a_replica_spans_whole_nodes_with_its_pipeline_stages():
    """Llama-3.1-405B at TP 8 x PP 2, two replicas on nodes of 8 GPUs (32 GPUs): it had been refused ("a replica needs
    16 GPUs but a node has 8"). Each replica is two nodes, one stage of TP 8 on each: 4 nodes, every GPU used."""
    r = specsize.plan(target=FOUR_O_FIVE_B, gpu="H100-SXM-80GB", tp=8, pp=2, gpus=32, concurrency=32, **ENVELOPE)
    p = r.placement
    assert (p.nodes, p.nodes_per_replica, p.replicas_per_node, p.gpus_used_per_node) == (4, 2, (1,) * 4, (8,) * 4)
    assert "spans 2 nodes" in p.layout and "1 pipeline stage per node" in p.layout
    # every node reads the whole checkpoint (vLLM's safetensors_weights_iterator reads every tensor on every rank,
    # a stage's or not), from its own storage, in parallel with the other node of its replica
    st = p.storage
    target = next(a for a in st.artefacts if a.name == "target checkpoint")
    assert target.bytes == pytest.approx(CHECKPOINT_405B, rel=1e-6)
    assert st.read_bytes_per_node == target.bytes
    assert st.cold_start_s == pytest.approx(target.bytes / 2e9 + 30 + 40)
    # 8 ranks on a node (not 16), each loader 2 GiB, and one rank's share of the checkpoint (1/16) in flight
    assert st.host_ram_bytes_per_node == 8 * 2 * GiB + target.bytes // 16


def test_a_failed_node_takes_down_the_whole_replica_it_holds_part_of():
    """Three replicas of TP 8 x PP 2 on six nodes of 8: two failed nodes take down two replicas at worst (each node in
    another replica), not two nodes' worth of replicas counted as whole ones; one replica survives with all 48
    requests, and the node comes back without a compile cache (cold start)."""
    r = specsize.plan(target=FOUR_O_FIVE_B, gpu="H100-SXM-80GB", tp=8, pp=2, gpus=48, concurrency=48,
                      failure_unit="node", spare=2, **ENVELOPE)
    f = r.placement.failover
    assert r.placement.nodes == 6
    assert (f.replicas, f.lost, f.survivors, f.load_per_survivor) == (3, 2, 1, 48)
    assert f.cold_start_s == pytest.approx(r.placement.storage.cold_start_s)
    # six nodes may fail at most, not the three replicas
    assert specsize.plan(target=FOUR_O_FIVE_B, gpu="H100-SXM-80GB", tp=8, pp=2, gpus=48, concurrency=48,
                         failure_unit="node", spare=6, **ENVELOPE).placement.failover.survivors == 0


def test_layouts_the_engines_cannot_run_across_nodes_are_refused_naming_the_field(capsys):
    """A TP group wider than a node (its all-reduce over the network on every layer) and a replica that leaves a node
    half full of another's stages: exit 2, one line naming the field and the values accepted."""
    code, out, err = run(capsys, "plan", "--target", FOUR_O_FIVE_B, "--gpu", "H100-SXM-80GB", "--tp", "16")
    assert code == 2 and "tp:" in err and "Traceback" not in err and "at most gpus_per_node (8)" in err
    code, out, err = run(capsys, "plan", "--target", FOUR_O_FIVE_B, "--gpu", "H100-SXM-80GB", "--tp", "4", "--pp", "3")
    assert code == 2 and "pp:" in err and "pp 2, 4, 6" in err


def test_a_fix_that_leaves_a_draft_model_is_priced_on_the_engine_the_release_then_runs():
    """vLLM 0.8.5 serves a draft model on its V0 engine and every other drafter on V1 (engines.registry.resolve_profile:
    V1_FALLBACK_METHODS). "serve without speculation" and "an EAGLE-3 head" leave the draft model, so applied they are
    planned on V1, with V1's pool and defaults; they had been priced on V0 and claimed other headroom (the head -6.44
    where applying it gives -3.50)."""
    from specsize.engines.registry import resolve_profile

    fields = dict(target=EIGHT_B, gpu="A100-40GB", engine_version="0.8.5", tp=2, draft_tp=1,
                  draft="meta-llama/Llama-3.2-1B-Instruct", num_speculative_tokens=4, concurrency=120, burst_factor=1.5,
                  **ENVELOPE)
    r = specsize.plan(**fields)
    assert r.profile == resolve_profile("vllm", "0.8.5", "draft_model") != resolve_profile("vllm", "0.8.5", "none")
    fixes = {f.action: f for f in r.recommendations}
    for action in ("no_speculation", "eagle_head"):
        fix = fixes[action]
        after = _applied(fields, fix.changes)
        assert after.profile == resolve_profile("vllm", "0.8.5", after.deployment.speculative.method.value)
        assert after.profile != r.profile
        assert fix.headroom_after == pytest.approx(after.verdict.worst_case.headroom_fraction, abs=1e-6)
        assert fix.verdict_after == after.verdict.verdict


# --- how far the inputs may move -------------------------------------------------------------------------------------

def test_a_prompt_margin_is_exact_to_the_token_at_long_prompts():
    """Llama-3.1-8B on one H100, 3 requests of p99 100,000 + 1,000 tokens (no drafter): a KV block of 16 tokens holds
    16 x 32 layers x 2 x 8 KV heads x 128 x 2 B; the plan holds its 20% headroom while 3 x blocks x that <= 0.8 x the
    pool, so the longest p99 prompt is floor(0.8 x pool / (3 x 16 x 131,072)) x 16 - 1,000 tokens. Bisected to 1e-4 of
    a factor (10 tokens at 100,000) the margin had read 115,670, two tokens short, and "beyond it the plan turns thin"
    was false for the next two."""
    fields = dict(target=EIGHT_B, gpu="H100-SXM-80GB", concurrency=3,
                  prompt_tokens={"p50": 20000, "p95": 60000, "p99": 100000, "max": 120000},
                  output_tokens={"p50": 300, "p95": 800, "p99": 1000, "max": 2000})
    r = specsize.plan(**fields)
    block_bytes = 16 * 32 * 2 * 8 * 128 * 2
    longest = int(0.8 * r.memory.pool_bytes // (3 * block_bytes)) * 16 - 1000
    margin = r.robustness.margins[0]
    assert margin.input == "prompt_tokens" and margin.limit_value == longest
    assert f"holds up to {longest:,}" in margin.sentence

    def verdict(p99: int) -> str:
        return specsize.plan(**{**fields, "prompt_tokens": {**fields["prompt_tokens"], "p99": p99}}).verdict.verdict

    assert (verdict(longest), verdict(longest + 1)) == ("fits", "thin")


# --- disk and cold start ---------------------------------------------------------------------------------------------

def test_deepseek_mtp_layers_files_hold_their_own_embedding_and_head():
    """DeepSeek-V3's checkpoint stores, in its MTP layer 61, an embedding table and a head of its own
    (model.layers.61.embed_tokens, .shared_head.head: vLLM's deepseek_mtp.py _rewrite_spec_layer_name maps them on
    load), each 129,280 x 7,168 in bf16. The disk and the cold start had left both out: 3.7 GB the node must hold and
    read. Without its MTP layer planned (no --method mtp) the files are the same: the download holds every shard."""
    from specsize.catalog import load_model
    from specsize.planner.placement import checkpoint_bytes

    v3 = load_model("deepseek-ai/DeepSeek-V3")
    copies = 2 * 129_280 * 7_168 * 2
    assert checkpoint_bytes(v3) - checkpoint_bytes(v3, include_mtp=False) > copies
    # the published index's total_size (model.safetensors.index.json): 688,586,727,753 bytes; 684.9 GB before
    assert checkpoint_bytes(v3) == pytest.approx(688_586_727_753, rel=1e-4)
    for method in ("mtp", "none"):
        fields = dict(target="deepseek-ai/DeepSeek-V3", gpu="H200-141GB", tp=8, method=method, concurrency=16,
                      **ENVELOPE)
        if method == "mtp":
            fields["num_speculative_tokens"] = 1
        st = specsize.plan(**fields).placement.storage
        target = next(a for a in st.artefacts if a.name == "target checkpoint")
        assert target.bytes == checkpoint_bytes(v3)
        assert st.cold_start_s == pytest.approx(target.bytes / 2e9 + 30 + 40)
    # a MTP layer that reads the target's embedding stores none: Qwen3-Next's files hold one MoE layer more
    nxt = load_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert checkpoint_bytes(nxt) - checkpoint_bytes(nxt, include_mtp=False) < copies


# --- failover ----------------------------------------------------------------------------------------------------------

def test_requests_arrive_during_a_restart_at_the_rate_the_replicas_held_before():
    """4 replicas share 600 requests, max_num_seqs 160; one restarts (46 s, a warm compile cache). Before the failure
    each replica held 150 in flight, each staying L(150) = TTFT + 200 x TPOT(150): the clients send 600 / L(150)
    requests a second (Little's law, an open loop as the simulator runs it), a third of them to each survivor. A
    survivor serves 160 at a time, each staying L(160). The queue had been counted with the arrivals at L(160), the
    survivors' slower latency: 200 / L(160) against 200 / L(150), 11.5 s of extra wait where 15.3 s builds up."""
    fields = dict(target=EIGHT_B, gpu="H100-SXM-80GB", max_num_seqs=160, max_model_len=16384, ttft_slo_ms=2000,
                  prompt_tokens={"p50": 500, "p95": 800, "p99": 1000, "max": 2000},
                  output_tokens={"p50": 200, "p95": 250, "p99": 300, "max": 400})
    r = specsize.plan(**fields, gpus=4, concurrency=600)
    survivors = specsize.plan(**fields, gpus=3, concurrency=600)  # the three left, as the failover re-plans them
    f = r.placement.failover
    assert (f.survivors, f.load_per_survivor) == (3, 200)
    assert r.perf.batch_size == 150 and survivors.perf.batch_size == 160
    before = r.perf.ttft_s + 200 * r.perf.tpot_s_no_spec
    after = survivors.perf.ttft_s + 200 * survivors.perf.tpot_s_no_spec
    assert after > before
    batch = min(160, next(sh.max_concurrency for sh in survivors.verdict.shapes if sh.label == "p50"))
    arriving, served = 600 / before / 3, batch / after
    backlog = (arriving - served) * f.cold_start_s
    assert f.backlog_requests == pytest.approx(backlog, rel=1e-9)
    assert f.added_wait_s == pytest.approx(backlog / served, rel=1e-9)
    assert f.added_wait_s > (200 - 160) / 160 * f.cold_start_s  # the count at the survivors' latency
    assert f.within_ttft_slo is False


def test_three_medusa_heads_store_their_lm_heads(tmp_path):
    """Medusa-1 heads derived for a Vicuna-7B-shaped target at k 3: three residual blocks of 4,096 x 4,096 and three
    lm_heads of 32,000 x 4,096, fp16: 3 x 33,554,432 + 3 x 262,144,000 = 887,095,296 bytes, with the final norm's
    8,192 bytes 887,103,488. The EAGLE-3 rule (its files hold no embedding) had caught them, three heads counting in
    the same field as an EAGLE-3 head's three fc inputs, and left the lm_heads off the disk: 100,671,488 bytes."""
    import json

    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
        "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 32, "vocab_size": 32000,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "torch_dtype": "float16", "tie_word_embeddings": False}))
    drafter = {}
    for k in (2, 3, 4):
        st = specsize.plan(target=str(tmp_path / "config.json"), gpu="H100-SXM-80GB", method="medusa",
                           engine_version="0.32",  # Medusa's last vLLM release (0.33 removed it)
                           num_speculative_tokens=k, max_model_len=4096, prompt_tokens={"p50": 500, "p99": 2000},
                           output_tokens={"p50": 200, "p99": 500}).placement.storage
        drafter[k] = next(a.bytes for a in st.artefacts if a.name == "drafter checkpoint")
    assert drafter[3] == 3 * 4096 * 4096 * 2 + 3 * 32000 * 4096 * 2 + 4096 * 2
    assert drafter[2] < drafter[3] < drafter[4]
