"""Hunt 54: the step-time model of speculation - the drafter's first forward over the verified positions, and
DeepSeek-V3.2's sparse attention - each checked against a number worked out by hand from the engines' source."""

import pytest

from specsize.catalog import load_gpu, load_model
from specsize.core.perf import (DRAFT_EXTEND_ACCEPTED, DRAFT_EXTEND_LAST, DRAFT_EXTEND_VERIFIED,
                                DRAFT_EXTEND_VERIFIED_NEXT, Efficiency, build_costs, coefficients, draft_extend_tokens,
                                draft_time, model_cost, uniform_step)
from specsize.core.specs import Deployment, GpuSpec, SpeculativeConfig

# A GPU with no memory time at all and a 1 TFLOP/s peak, and an Efficiency with every fixed cost at 0 and the
# roofline's fractions at 1: a forward then takes exactly its flops / 1e12 seconds
PEAK = 1e12
COMPUTE_ONLY = GpuSpec("compute-only", "compute-only", 80 * 2**30, memory_bandwidth_bytes_s=1e30, bf16_flops=PEAK,
                       fp8_flops=None, interconnect_bytes_s=1e12)
PURE = Efficiency("x", memory=1.0, compute=1.0, step_overhead_s=0.0, spec_step_overhead_s=0.0,
                  draft_step_overhead_s=0.0, draft_setup_overhead_s=0.0, allreduce_latency_s=0.0)

# Llama-3.2-1B (its config.json): hidden 2,048, 16 layers, 32 query heads and 8 KV heads of 64, MLP 8,192, tied
# embeddings. The parameters that multiply every token, lm_head aside: per layer q/o 2,048 x 2,048 each, k/v
# 2,048 x 512 each, gate/up/down 3 x 2,048 x 8,192; two RMSNorms of 2,048 a layer and the final one
LAYER_PARAMS = 2048 * (2048 + 512 + 512 + 2048) + 3 * 2048 * 8192
DRAFT_1B_PARAMS = 16 * LAYER_PARAMS + (2 * 16 + 1) * 2048
FLOPS_PER_TOKEN_1B = 2 * DRAFT_1B_PARAMS


def _draft_model_costs(mode: str, k: int = 3):
    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=COMPUTE_ONLY,
                   speculative=SpeculativeConfig("draft_model", load_model("meta-llama/Llama-3.2-1B-Instruct"), k))
    return build_costs(d, PURE, "bfloat16", None, 2, draft_extend=mode)


# --- the drafter's first forward runs over the positions the target verified ---------------------------------------

def test_draft_models_first_forward_runs_over_every_verified_position():
    """vLLM 0.32 (v1/spec_decode/llm_base_proposer.py SpecDecodeBaseProposer.propose, after the model runner's
    prepare_inputs_padded) runs the drafter's first forward over every position of the step, the rejected ones as
    padding (B x (k + 1) tokens), then k - 1 forwards over B; SGLang's draft extend after verify replays a CUDA graph
    of speculative_num_steps + 1 tokens a request. specsize priced that first forward over B tokens like the others.
    At B = 8, k = 3 and no context, on a GPU where only flops count, the step's drafting is 8 x 4 + 2 x 8 = 48 tokens
    of the 1B model (its lm_head only at the 8 x 3 sampled positions, as before), 24 more than 3 x 8: 24 x 2 x
    973,146,112 flops / 1e12 FLOP/s = 46.7 ms more."""
    verified = _draft_model_costs(DRAFT_EXTEND_VERIFIED)
    last = _draft_model_costs(DRAFT_EXTEND_LAST)
    assert draft_extend_tokens(verified) == 4
    extra = draft_time(verified, 8, 0) - draft_time(last, 8, 0)
    assert extra == pytest.approx(24 * FLOPS_PER_TOKEN_1B / PEAK, rel=1e-3)


def test_vllms_draft_model_adds_a_slot_for_the_sampled_token():
    """vLLM's separate draft model takes no hidden states, so its first forward holds every verified position and one
    more slot a request for the token the target sampled (llm_base_proposer.py: net_num_new_slots_per_request =
    extra_slots_per_request - 0 = 1): k + 2 = 5 a sequence at k = 3, B = 8: 8 x 4 = 32 tokens more than one a
    sequence, 32 x 2 x 973,146,112 / 1e12 s."""
    nxt = _draft_model_costs(DRAFT_EXTEND_VERIFIED_NEXT)
    last = _draft_model_costs(DRAFT_EXTEND_LAST)
    assert draft_extend_tokens(nxt) == 5
    assert draft_time(nxt, 8, 0) - draft_time(last, 8, 0) == pytest.approx(32 * FLOPS_PER_TOKEN_1B / PEAK, rel=1e-3)


def test_a_release_that_drops_the_rejected_positions_extends_over_the_emitted_tokens():
    """vLLM V1 0.8-0.10 (EagleProposer.prepare_inputs drops the rejected tokens) and SGLang's eager draft extend
    (extend_lens = accept_length + 1) run that first forward over the tokens a pass emits: with 2.5 a pass at B = 8
    it is 8 x 2.5 = 20 tokens, 12 more than one position a sequence: 12 x 2 x 973,146,112 / 1e12 s."""
    accepted = _draft_model_costs(DRAFT_EXTEND_ACCEPTED)
    last = _draft_model_costs(DRAFT_EXTEND_LAST)
    assert draft_extend_tokens(accepted, 2.5) == 2.5
    extra = draft_time(accepted, 8, 0, per_pass=2.5) - draft_time(last, 8, 0)
    assert extra == pytest.approx(12 * FLOPS_PER_TOKEN_1B / PEAK, rel=1e-3)


def test_an_eagle_head_extends_over_k_plus_one_positions_and_an_ngram_lookup_over_none():
    """The EAGLE proposer shifts the target's tokens by one and reruns every verified position (k + 1 a sequence,
    "E.g., [a1, b1, b2, c1, c2, c3] -> [b1, b2, c1, c2, c3, c3]" in set_inputs_first_pass); an n-gram lookup runs no
    forward at all."""
    gpu = load_gpu("H100-SXM-80GB")
    target = load_model("meta-llama/Llama-3.1-8B-Instruct")
    eagle = Deployment(target=target, gpu=gpu, speculative=SpeculativeConfig(
        "eagle3", load_model("sgl-project/SpecForge-llama3-8B-eagle3"), 5))
    assert draft_extend_tokens(build_costs(eagle, PURE, "bfloat16", None, 2)) == 6
    ngram = Deployment(target=target, gpu=gpu, speculative=SpeculativeConfig("ngram", None, 5))
    costs = build_costs(ngram, PURE, "bfloat16", None, 2)
    assert draft_extend_tokens(costs) == 0 and draft_time(costs, 8, 1024) == 0


# --- DeepSeek-V3.2: sparse attention reads index_topk latents ------------------------------------------------------

V32_LAYERS = 61  # num_hidden_layers (the MTP layer apart)
V32_TOPK = 2048  # index_topk
V32_INDEXER_KEY = 128 + 128 // 128 * 4  # index_head_dim fp8 values and one fp32 scale per 128: 132 B a token a layer
V32_LATENT = (512 + 64) * 2  # kv_lora_rank + qk_rope_head_dim in bf16 (kv_cache_dtype auto)


def _v32_decode(context: int):
    m = load_model("deepseek-ai/DeepSeek-V3.2")
    gpu = load_gpu("H200-141GB")
    co = coefficients(model_cost(m, 8, "bfloat16", None, kv_dtype_bytes=2), gpu, PURE)
    return uniform_step(co, 1, 1, context)


def test_v32_decode_reads_only_the_indexers_keys_beyond_its_top_k():
    """vLLM's DeepSeek-V3.2 (model_executor/layers/sparse_attn_indexer.py: fp8 paged MQA logits over each sequence's
    whole context, then top_k_per_row; v1/attention/backends/mla/flashmla_sparse.py: the MLA kernel reads the
    index_topk = 2,048 latents those indices name) reads, per layer and sequence, every cached token's 132-byte
    indexer key but at most 2,048 1,152-byte latents. Between a 65,536- and a 131,072-token context one decode
    step reads 61 x 132 x 65,536 B more, not the 61 x 1,284 x 65,536 B (10x more) that full attention reads."""
    extra = _v32_decode(131072).bytes - _v32_decode(65536).bytes
    assert extra == pytest.approx(V32_LAYERS * V32_INDEXER_KEY * 65536, rel=1e-9)


def test_v32_decode_below_its_top_k_reads_every_latent():
    """Below index_topk the sparse kernel reads every latent: 1,024 more tokens of context read 61 x (1,152 + 132)
    x 1,024 B more."""
    extra = _v32_decode(2048).bytes - _v32_decode(1024).bytes
    assert extra == pytest.approx(V32_LAYERS * (V32_LATENT + V32_INDEXER_KEY) * 1024, rel=1e-9)


def test_v32_decode_attention_flops_grow_with_the_indexer_alone_beyond_top_k():
    """Beyond index_topk a decode token's attention flops grow only by the indexer's scoring of each new context
    token: 2 x index_n_heads (64, replicated on every rank) x index_head_dim (128) a layer, 61 x 16,384 x 65,536
    flops between 65,536 and 131,072 tokens; full attention over the latent would add 61 x 4 x 16 heads x 576 x
    65,536 (2.25x more)."""
    extra = _v32_decode(131072).flops - _v32_decode(65536).flops
    assert extra == pytest.approx(V32_LAYERS * 2 * 64 * 128 * 65536, rel=1e-9)


def test_v32_mtp_drafter_layer_is_sparse_too():
    """The MTP layer of DeepSeek-V3.2 is a decoder layer of the same config, indexer included (vLLM's proposer
    lets its first forward compute its own top-k: "let the MTP layer compute its own indices"): its decode bytes
    grow by 132 B a token of context beyond 2,048, one layer."""
    m = load_model("deepseek-ai/DeepSeek-V3.2")
    gpu = load_gpu("H200-141GB")
    co = coefficients(model_cost(m, 8, "bfloat16", None, kv_dtype_bytes=2, include_mtp_only=True), gpu, PURE)
    extra = uniform_step(co, 1, 1, 131072).bytes - uniform_step(co, 1, 1, 65536).bytes
    assert extra == pytest.approx(V32_INDEXER_KEY * 65536, rel=1e-9)


def test_a_dense_mla_model_keeps_reading_every_latent():
    """DeepSeek-V3 (no index_topk) is untouched: 61 x 1,152 x 65,536 B more between the two contexts."""
    m = load_model("deepseek-ai/DeepSeek-V3")
    co = coefficients(model_cost(m, 8, "bfloat16", None, kv_dtype_bytes=2), load_gpu("H200-141GB"), PURE)
    extra = uniform_step(co, 1, 1, 131072).bytes - uniform_step(co, 1, 1, 65536).bytes
    assert extra == pytest.approx(V32_LAYERS * V32_LATENT * 65536, rel=1e-9)


def _v32_co(gpu=None):
    m = load_model("deepseek-ai/DeepSeek-V3.2")
    return coefficients(model_cost(m, 8, "bfloat16", None, kv_dtype_bytes=2), gpu or load_gpu("H200-141GB"), PURE)


def test_v32_long_prompt_runs_sparse_and_pays_the_indexer_over_its_whole_context():
    """A prompt longer than index_topk runs through the sparse kernel (vLLM's sparse_mla_attention.py
    _use_dense_mha_prefill: dense MHA only while prefill_max_seq_len <= topk_tokens), each token over its 2,048
    top-k latents, while the indexer scores each token against the whole context (it runs in every layer's forward,
    whatever path the attention takes): a 1,024-token chunk over 65,536 more tokens of context costs only the
    indexer's 1,024 x 65,536 x 61 x 2 x 64 x 128 flops more. specsize had priced it as multi-head attention over the
    whole context (61 x 4 x 16 x 160 a pair) and no indexer."""
    co = _v32_co()
    extra = (uniform_step(co, 1, 1024, 131072, prompt=True, prompt_seq_max=131072 + 512).flops
             - uniform_step(co, 1, 1024, 65536, prompt=True, prompt_seq_max=65536 + 512).flops)
    assert extra == pytest.approx(1024 * 65536 * V32_LAYERS * 2 * 64 * 128, rel=1e-9)


def test_v32_prompt_within_top_k_runs_dense_multi_head_attention():
    """A prompt of at most index_topk tokens runs as dense multi-head attention over decompressed keys (4 x 16 heads
    x (128 + 64 + 128) / 2 flops a pair a layer at TP 8), beside the indexer (2 x 64 x 128): a 1,024-token chunk over
    256 more tokens of context (a 2,048-token prompt) costs 1,024 x 256 x 61 x (16,384 + 10,240) flops more; the same
    chunk of a 4,096-token prompt runs sparse, absorbed over the latent (4 x 16 x 576 a pair, every latent read
    below 2,048): 1,024 x 256 x 61 x (16,384 + 36,864)."""
    co = _v32_co()

    def extra(longest):
        return (uniform_step(co, 1, 1024, 512, prompt=True, prompt_seq_max=longest).flops
                - uniform_step(co, 1, 1024, 256, prompt=True, prompt_seq_max=longest).flops)

    assert extra(2048) == pytest.approx(1024 * 256 * V32_LAYERS * (2 * 64 * 128 + 4 * 16 * 160), rel=1e-9)
    assert extra(4096) == pytest.approx(1024 * 256 * V32_LAYERS * (2 * 64 * 128 + 4 * 16 * 576), rel=1e-9)


def test_v32_indexer_scores_at_the_fp8_peak():
    """The indexer's logits are an fp8 MQA (fp8 queries against its fp8 key cache: DeepGEMM fp8_paged_mqa_logits in
    vLLM's sparse_attn_indexer.py) whatever the KV cache's dtype: on a GPU where only flops count, with a bf16 peak of
    1e12 and an fp8 peak of 2e12 FLOP/s, 65,536 more tokens of context add 61 x 16,384 x 65,536 / 2e12 s to a decode
    step beyond index_topk, not the bf16 peak's twice that."""
    gpu = GpuSpec("fp8", "fp8", 141 * 2**30, memory_bandwidth_bytes_s=1e30, bf16_flops=PEAK, fp8_flops=2 * PEAK,
                  interconnect_bytes_s=1e30)
    co = coefficients(model_cost(load_model("deepseek-ai/DeepSeek-V3.2"), 8, "bfloat16", None, kv_dtype_bytes=2),
                      gpu, PURE)
    extra = uniform_step(co, 1, 1, 131072).time_s - uniform_step(co, 1, 1, 65536).time_s
    assert extra == pytest.approx(V32_LAYERS * 2 * 64 * 128 * 65536 / (2 * PEAK), rel=1e-9)
