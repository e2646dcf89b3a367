"""Catalog additions for the families teams deploy at the end of 2026, each number worked out by hand from the
published config.json values and vLLM's model files (never the code's own output):

- zai-org/GLM-5.1 (glm_moe_dsa): aiconfigurator's copy of its config.json, the same fields and values as GLM-5's;
  vLLM 0.32 serves it with DeepSeek-V3.2's model code (models/deepseek_v32, deepseek_v2.py DeepseekV2MoE / MLP);
- MiniMaxAI/MiniMax-M2.7 (minimax_m2): MiniMax-M2.5's layers over 204,800 positions (vllm/model_executor/models/
  minimax_m2.py);
- SpecForge's EAGLE-3 draft configs for Qwen3-Next-80B-A3B and Qwen3.5-35B-A3B (vllm/model_executor/models/
  llama_eagle3.py: LlamaDecoderLayer whose qkv_proj takes 2 x hidden, fc a ReplicatedLinear 3 x hidden -> hidden, an
  lm_head over draft_vocab_size, the target's embedding shared; rotary_embedding get_rope: one cos/sin cache of
  max_position x rotary_dim in the model dtype per distinct rope key).
"""

from __future__ import annotations

import json
from math import ceil

import pytest

from helpers import listed_with_sources, profile, run_cli as run
from specsize.catalog import catalog_entry, load_gpu, load_model
from specsize.catalog.configs import spec_from_config
from specsize.core.memory import account
from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig
from specsize.core.weights import total_params

BF16 = 2
FP32 = 4

GLM51 = "zai-org/GLM-5.1"
M27 = "MiniMaxAI/MiniMax-M2.7"
NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
NEXT_HEAD = "sgl-project/SpecForge-qwen3-next-80b-a3b-eagle3"
Q35_HEAD = "sgl-project/SpecForge-qwen3.5-35b-a3b-eagle3"
NEW_MODELS = [GLM51, M27, NEXT_HEAD, Q35_HEAD]


def test_the_new_entries_are_listed_offline_with_their_pinned_sources(capsys):
    listed_with_sources(capsys, NEW_MODELS, [])


def _fp8(out: int, inp: int) -> int:
    """A block-fp8 (128 x 128) linear: 1 byte a weight and one float32 scale a block."""
    return out * inp + ceil(out / 128) * ceil(inp / 128) * FP32


def _plan(capsys, *args: str) -> dict:
    code, out, err = run(capsys, "plan", *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


# --- GLM-5.1: GLM-5's config under a new checkpoint ---------------------------------------------------------------

def test_glm51_config_is_glm5s_but_for_the_transformers_version():
    glm5 = dict(catalog_entry("zai-org/GLM-5")["config"])
    glm51 = dict(catalog_entry(GLM51)["config"])
    assert (glm5.pop("transformers_version"), glm51.pop("transformers_version")) == ("5.0.2.dev0", "5.4.0")
    assert glm5 == glm51


def test_glm51_parameters_and_bf16_weights_at_tp8_by_hand(capsys):
    h = 6144
    # a layer's MLA: q_a 2048 x 6144, q_b 64 heads x (192 + 64) x 2048, kv_a (512 + 64) x 6144, kv_b 64 x (192 + 256)
    # x 512, o 6144 x 64 x 256, the q_a / kv_a RMSNorms 2048 + 512: 165,022,208
    mla = 2048 * h + 64 * 256 * 2048 + 576 * h + 64 * 448 * 512 + h * 64 * 256 + 2560
    # the DSA indexer: wq_b 32 x 128 x 2048, wk + weights_proj (128 + 32) x 6144, k_norm weight and bias 2 x 128
    indexer = 32 * 128 * 2048 + 160 * h + 2 * 128
    dense = 3 * h * 12288  # gate, up, down of the 3 first_k_dense_replace layers
    moe = 256 * 3 * h * 2048 + 3 * h * 2048 + 256 * h + 256  # 256 experts + 1 shared, router, score-correction bias
    params = 2 * 154880 * h + 78 * (mla + indexer + 2 * h) + 3 * dense + 75 * moe + h
    assert (mla, indexer, dense, moe) == (165_022_208, 9_371_904, 226_492_416, 9_702_998_272)
    assert params == 743_911_218_432  # Z.ai's round 744B
    m = load_model(GLM51)
    assert (m.model_type, m.num_layers, m.mla.kv_lora_rank, m.num_mtp_layers) == ("glm_moe_dsa", 78, 512, 1)
    assert total_params(m) == params
    # TP 8: q_b, kv_b, o (8 heads a rank), the dense MLP (1,536 a rank) and each expert (256 a rank) split; q_a, kv_a,
    # the indexer, norms and router whole; the score-correction bias float32; one rope cache of 202,752 x 64 in bf16
    attention = BF16 * (2048 * h + 8 * 256 * 2048 + 576 * h + 8 * 448 * 512 + h * 8 * 256 + 2560
                        + 32 * 128 * 2048 + 160 * h) + 2 * 128 * BF16
    moe_rank = BF16 * (256 * 3 * h * 256 + 3 * h * 256 + 256 * h) + 256 * FP32
    per_rank = (2 * (154880 // 8) * h * BF16 + 78 * (attention + 2 * h * BF16) + 3 * BF16 * 3 * h * 1536
                + 75 * moe_rank + h * BF16 + 202752 * 64 * BF16)
    assert per_rank == 189_692_203_008
    plan = _plan(capsys, "--target", GLM51, "--gpu", "H200-141GB", "--tp", "8")
    # plus the topk_indices_buffer vLLM allocates with the model: 8,192 batched tokens x index_topk 2,048 x int32
    assert plan["per_gpu"]["weights_target_bytes"] == per_rank + 8192 * 2048 * 4 == 189_759_311_872
    # 176.7 GiB of bf16 weights a GPU against 141 GB: the FP8 checkpoint or more GPUs
    assert plan["verdict"] == "does_not_fit"
    # MLA: the latent (512 + 64) x 2 B whole on every rank, plus the indexer's fp8 key (128 + one float32 scale per
    # 128) = 132 B, in each of the 78 layers
    assert plan["kv_bytes_per_token"]["target"] == 78 * ((512 + 64) * BF16 + 128 + 4) == 100_152


# --- MiniMax-M2.7: MiniMax-M2.5's layers, 204,800 positions -------------------------------------------------------

def test_minimax_m27_parameters_by_hand():
    """62 layers: q/k/v (48 + 2 x 8 heads of 128) and o over hidden 3072, q/k norms over all heads (48 x 128 + 8 x 128),
    256 experts of 1,536 with a 3072 x 256 router and 256 routing biases, 2 norms; untied 200,064-token embeddings."""
    h, layers, vocab = 3072, 62, 200064
    attention = 64 * 128 * h + h * 48 * 128 + 48 * 128 + 8 * 128
    moe = 256 * 3 * h * 1536 + 256 * h + 256
    by_hand = layers * (attention + 2 * h + moe) + 2 * vocab * h + h
    assert by_hand == 228_689_764_864  # the M2 family's "229B"
    m = load_model(M27)
    assert (m.model_type, m.rotary_dim, m.num_mtp_layers, m.max_position_embeddings) == ("minimax_m2", 64, 0, 204800)
    assert m.quantization.method == "fp8" and m.quantization.block == (128, 128)
    assert total_params(m) == by_hand


def test_minimax_m27_fp8_weights_and_kv_at_tp4_by_hand(capsys):
    h = 3072
    # a rank of 4: 12 Q and 2 KV heads of 128 -> qkv (12 + 2 x 2) x 128 = 2,048 rows, o 3072 x 1,536, both block-fp8;
    # the q/k norms' shards (1,536 + 256 values) in bf16
    attention = _fp8(16 * 128, h) + _fp8(h, 12 * 128) + (1536 + 256) * BF16
    # 256 experts of 1,536 / 4 = 384 in fp8 (gate+up 768 x 3072, down 3072 x 384); float32 router and routing bias
    moe = 256 * (_fp8(2 * 384, h) + _fp8(h, 384)) + 256 * h * FP32 + 256 * FP32
    # bf16 embedding and lm_head (200,064 / 4 rows each), 2 norms a layer, the final norm; one rope cache of
    # 204,800 positions x 64 rotary dims in bf16
    per_rank = (2 * (200064 // 4) * h * BF16 + 62 * (attention + moe + 2 * h * BF16) + h * BF16
                + 204800 * 64 * BF16)
    assert per_rank == 57_703_522_048
    plan = _plan(capsys, "--target", M27, "--gpu", "H200-141GB", "--tp", "4")
    assert plan["per_gpu"]["weights_target_bytes"] == per_rank
    # 62 layers x K and V x 2 KV heads a rank x 128 x 2 bytes
    assert plan["kv_bytes_per_token"]["target"] == 62 * 2 * 2 * 128 * BF16 == 63_488
    assert plan["verdict"] == "fits"


def test_minimax_m27_differs_from_m25_only_by_its_longer_rope_cache(capsys):
    m25 = _plan(capsys, "--target", "MiniMaxAI/MiniMax-M2.5", "--gpu", "H200-141GB", "--tp", "4")
    m27 = _plan(capsys, "--target", M27, "--gpu", "H200-141GB", "--tp", "4")
    gap = m27["per_gpu"]["weights_target_bytes"] - m25["per_gpu"]["weights_target_bytes"]
    assert gap == (204800 - 196608) * 64 * BF16 == 1_048_576


# --- SpecForge EAGLE-3 heads ---------------------------------------------------------------------------------------

def _eagle3_head_bytes(hidden, q_heads, kv_heads, head_dim, inter, draft_vocab, tp, rope_positions) -> int:
    """Per rank, bf16: qkv 2H -> (q + 2 kv) heads, o, gate/up/down split by TP; fc 3H -> H replicated; the lm_head over
    the draft vocabulary split; 4 RMSNorms of H (input, hidden, post-attention, final); the embedding is the target's.
    Plus the head's own rotary cache (max_position_embeddings x head_dim: it rotates whole heads)."""
    qkv = 2 * hidden * (q_heads + 2 * kv_heads) * head_dim
    o = q_heads * head_dim * hidden
    mlp = 3 * hidden * inter
    params = (qkv + o + mlp) // tp + 3 * hidden * hidden + draft_vocab * hidden // tp + 4 * hidden
    return params * BF16 + rope_positions * head_dim * BF16


@pytest.mark.parametrize("model_id, vocab", [(NEXT_HEAD, 151936), (Q35_HEAD, 248320)])
def test_each_new_head_is_an_eagle3_head_with_a_32k_draft_vocabulary(model_id, vocab):
    head = load_model(model_id)
    assert head.num_layers == 1 and head.eagle_fc_inputs == 3 and head.draft_vocab_size == 32000
    assert (head.hidden_size, head.num_kv_heads, head.head_dim, head.vocab_size) == (2048, 2, 256, vocab)


def test_qwen3_next_eagle3_head_at_tp2_by_hand(capsys):
    plan = _plan(capsys, "--target", NEXT, "--method", "eagle3", "--draft", NEXT_HEAD, "--num-speculative-tokens",
                 "3", "--gpu", "H200-141GB", "--tp", "2")
    # qkv 2 x 2048 x 20 heads x 256 = 20,971,520; o 8,388,608; MLP 3 x 2048 x 16384 = 100,663,296 -> 65,011,712 a
    # rank; fc 3 x 2048 x 2048 = 12,582,912; lm_head 32,000 x 2048 / 2 = 32,768,000; norms 8,192: 110,370,816 bf16
    # parameters = 220,741,632 B; its rope (theta 1e7 over 256 dims, the target's over 64): 262,144 x 256 x 2 B
    by_hand = _eagle3_head_bytes(2048, 16, 2, 256, 16384, 32000, 2, 262144)
    assert by_hand == 220_741_632 + 134_217_728 == 354_959_360
    assert plan["per_gpu"]["weights_draft_bytes"] == by_hand
    # 12 full-attention layers of the 48 (full_attention_interval 4) x K and V x 1 KV head a rank x 256 x 2 B; the
    # head's one layer alike
    assert plan["kv_bytes_per_token"]["target"] == 12 * 2 * 1 * 256 * BF16 == 12_288
    assert plan["kv_bytes_per_token"]["draft"] == 1 * 2 * 1 * 256 * BF16 == 1_024


def test_qwen35_eagle3_head_drafts_for_a_text_only_qwen35_35b():
    """The head drafts for Qwen3.5's language model alone (the qwen3_5_moe_text of Qwen3.5 / 3.6-35B-A3B,
    tests/test_hybrid.py; the whole checkpoint with its vision tower: tests/test_qwen35_vision.py), one GPU."""
    from test_hybrid import QWEN36_35B

    target = spec_from_config(QWEN36_35B, "qwen3.5-35b-a3b-text", "test")
    d = Deployment(target=target, gpu=load_gpu("H200-141GB"), tp=1, engine=EngineSettings(max_model_len=32768),
                   speculative=SpeculativeConfig(method="eagle3", draft=load_model(Q35_HEAD), num_speculative_tokens=3))
    acc = account(d, profile())
    # fc 12,582,912 + qkv 20,971,520 + o 8,388,608 + MLP 100,663,296 + lm_head 65,536,000 + norms 8,192 = 208,150,528
    # parameters x 2 B, and its 262,144 x 256 rope cache in bf16
    assert acc.weights_draft_bytes == _eagle3_head_bytes(2048, 16, 2, 256, 16384, 32000, 1, 262144)
    assert acc.weights_draft_bytes == 208_150_528 * BF16 + 134_217_728 == 550_518_784
    # 10 full-attention layers of 40 x K and V x 2 KV heads x 256 x 2 B, the head's layer 2,048 more
    assert acc.kv_bytes_per_token == 10 * 2 * 2 * 256 * BF16 + 1 * 2 * 2 * 256 * BF16 == 22_528


def test_qwen35_head_refuses_a_target_of_another_tokenizer(capsys):
    code, _, err = run(capsys, "plan", "--target", NEXT, "--method", "eagle3", "--draft", Q35_HEAD,
                       "--num-speculative-tokens", "3", "--gpu", "H200-141GB", "--tp", "2")
    assert code == 2 and "248320" in err and "151936" in err and "Traceback" not in err
