"""Hunt 53 (architectures): the MoE families teams run that specsize refused by model_type: GLM-4.5 / 4.6 (glm4_moe)
and DeepSeek-V3.2 (deepseek_v32, MLA plus the sparse-attention indexer's key cache) and MiniMax-M2 (minimax_m2), sized as vLLM builds them.

Every expected number below is worked by hand from the published config values and vLLM's model files
(vllm/model_executor/models/glm4_moe.py, glm4_moe_mtp.py, deepseek_v2.py Indexer / DeepseekV32IndexerCache,
minimax_m2.py).
"""

from __future__ import annotations

import json

from helpers import deployment, glm_params as _glm_params, profile, run_cli as run
from specsize.catalog import catalog_entry, load_model
from specsize.core.memory import account
from specsize.core.weights import total_params, weight_breakdown

BF16 = 2

# GLM-4.5 (zai-org/GLM-4.5, Glm4MoeForCausalLM): 92 layers, hidden 5120, 96 heads of 128, 8 KV heads, qkv bias,
# q/k norms, half-width rotary, 3 dense layers of 12,288 then 89 MoE layers of 160 routed experts (top-8) of 1,536 plus
# 1 shared, vocab 151,552 untied, one MTP layer. The values of its config.json, as the GLM-4.5 model card and the
# training recipes that mirror it (THUDM/slime scripts/models/glm4.5-355B-A32B.sh: 3 dense + 89 MoE layers, hidden
# 5120, ffn 12288, moe-ffn 1536, 160 experts top-8, 96 heads / 8 groups of 128, qkv bias, qk layernorm, rotary 0.5,
# vocab 151552 untied) give them.
GLM45 = {
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "attention_bias": True,
    "first_k_dense_replace": 3, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
    "intermediate_size": 12288, "max_position_embeddings": 131072, "moe_intermediate_size": 1536, "n_group": 1,
    "n_routed_experts": 160, "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 96,
    "num_experts_per_tok": 8, "num_hidden_layers": 92, "num_key_value_heads": 8, "num_nextn_predict_layers": 1,
    "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 1000000,
    "routed_scaling_factor": 2.5, "tie_word_embeddings": False, "topk_group": 1, "torch_dtype": "bfloat16",
    "use_qk_norm": True, "vocab_size": 151552,
}
# GLM-4.5-Air: 46 layers (1 dense of 10,944), hidden 4096, 128 experts of 1,408 + 1 shared, no q/k norms
GLM45_AIR = {**GLM45, "first_k_dense_replace": 1, "hidden_size": 4096, "intermediate_size": 10944,
             "moe_intermediate_size": 1408, "n_routed_experts": 128, "num_hidden_layers": 46,
             "routed_scaling_factor": 1.0, "use_qk_norm": False}


def _write(tmp_path, cfg: dict, name: str = "glm") -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return str(folder)


def test_glm45_is_planned_with_the_parameters_it_publishes(tmp_path):
    """It had been refused (model type 'glm4_moe' is not modelled). By hand: a layer's attention 14,336 x 5,120 qkv
    + 14,336 bias + 5,120 x 12,288 o + 256 q/k norm = 136,329,472, + 2 norms of 5,120; a dense MLP 188,743,680; an MoE
    layer 3,799,285,920; 1,551,892,480 of embeddings and head; 5,120 of final norm: 352,797,829,024 before the MTP
    layer, within 0.7% of the model card's round "355 billion total parameters"."""
    by_hand = _glm_params(5120, 92, 3, 96, 8, 128, 12288, 160, 1536, 151552, True)
    assert by_hand == 92 * (136_329_472 + 2 * 5120) + 3 * 188_743_680 + 89 * 3_799_285_920 + 1_551_892_480 + 5120
    assert by_hand == 352_797_829_024
    assert abs(by_hand - 355e9) / 355e9 < 0.007
    m = load_model(_write(tmp_path, GLM45))
    assert m.moe is not None and len(m.moe.moe_layers) == 89 and m.moe.moe_layers[0] == 3
    assert m.rotary_dim == 64 and m.qk_norm and m.attention_bias and m.num_mtp_layers == 1
    assert total_params(m) == by_hand
    # with its MTP layer (one more MoE decoder layer, enorm + hnorm, eh_proj 2H -> H; embedding and head shared)
    h = 5120
    mtp = (136_329_472 + 2 * h + 3_799_285_920) + 2 * h + 2 * h * h
    assert weight_breakdown(m, 1, include_mtp=True).params == by_hand + mtp


def test_glm45_air_count_matches_its_published_106b(tmp_path):
    by_hand = _glm_params(4096, 46, 1, 96, 8, 128, 10944, 128, 1408, 151552, False)
    m = load_model(_write(tmp_path, GLM45_AIR, "air"))
    assert total_params(m) == by_hand
    assert by_hand == 106_852_251_264
    assert abs(by_hand - 106e9) / 106e9 < 0.01  # the model card's round "106 billion total parameters"
    assert not m.qk_norm


def test_glm45_kv_and_weights_per_rank_at_tp8(tmp_path):
    """KV: 92 layers x K and V x 8 KV heads / 8 ranks x 128 x 2 bytes = 47,104 bytes a token on each GPU.
    Weights on one of 8 ranks (bf16): vocab 151,552 / 8 embedding and lm_head rows; qkv (12 + 2 heads) x 128 rows
    with bias, o 5120 x 1536, q/k norms; 3 dense MLPs of 12,288 / 8; 89 MoE layers of 160 experts of 1,536 / 8 plus
    the shared one, the router kept in float32 (glm4_moe.py Glm4MoE: nn.Linear(..., dtype=torch.float32)) with its
    float32 bias; two norms a layer and the final one. The rotary cache is left out (a buffer, not a weight)."""
    path = _write(tmp_path, GLM45)
    h, vocab_rank = 5120, 151552 // 8
    qkv = (12 + 2) * 128
    attention = (qkv * h + qkv + h * 1536 + 2 * 128) * BF16
    dense = (2 * 1536 * h + h * 1536) * BF16
    expert = (2 * 192 * h + h * 192) * BF16
    moe = 160 * expert + expert + 160 * h * 4 + 160 * 4
    by_hand = (2 * vocab_rank * h * BF16 + 92 * (attention + 2 * h * BF16) + 3 * dense + 89 * moe + h * BF16)
    w = weight_breakdown(load_model(path), 8)
    assert w.total - w.buffers == by_hand
    acc = account(deployment(path, gpu="H200-141GB", tp=8, max_model_len=32768), profile())
    assert acc.kv_bytes_per_token == 92 * 2 * 1 * 128 * BF16 == 47_104


def test_glm45_mtp_drafts_with_its_own_layer(tmp_path, capsys):
    """--method mtp as vLLM serves it (glm4_moe_mtp.py Glm4MoeMTP: one Glm4MoeDecoderLayer past the model, an MoE
    layer since its index is past first_k_dense_replace, + enorm, hnorm and eh_proj 2H -> H): its weights on one of
    8 ranks and its KV layer in the pool (93 layers x 512 bytes)."""
    path = _write(tmp_path, GLM45)
    h = 5120
    qkv = (12 + 2) * 128
    attention = (qkv * h + qkv + h * 1536 + 2 * 128) * BF16
    expert = (2 * 192 * h + h * 192) * BF16
    moe = 161 * expert + 160 * h * 4 + 160 * 4
    by_hand = attention + moe + 2 * h * BF16 + 2 * h * BF16 + 2 * h * h * BF16
    acc = account(deployment(path, gpu="H200-141GB", tp=8, max_model_len=32768, method="mtp", k=1), profile())
    assert acc.weights_draft_bytes == by_hand
    assert acc.kv_bytes_per_token == 93 * 512
    code, out, err = run(capsys, "plan", "--target", path, "--gpu", "H200-141GB", "--tp", "8", "--method", "mtp",
                         "-k", "1", "--format", "json")
    assert code in (0, 1), err  # a verdict, not a refusal (2) or an internal error (4)
    json.loads(out)


# --- DeepSeek-V3.2: MLA + the lightning indexer ----------------------------------------------------------------------

V32 = "deepseek-ai/DeepSeek-V3.2"
H32, VOCAB32 = 7168, 129280
# one MLA block: q_a 7168 -> 1536 (+ its norm), q_b 1536 -> 128 x 192, kv_a 7168 -> 576 (+ the 512 latent's norm),
# kv_b 512 -> 128 x 256, o 128 x 128 -> 7168
MLA32 = H32 * 1536 + 1536 + 1536 * 128 * 192 + H32 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * H32
# the indexer (deepseek_v2.py Indexer): wq_b 1536 -> 64 x 128, wk + weights_proj 7168 -> 128 + 64, k_norm LayerNorm
# (weight + bias) over 128
INDEXER32 = 1536 * 64 * 128 + H32 * (128 + 64) + 2 * 128
MOE32 = 256 * 3 * H32 * 2048 + 3 * H32 * 2048 + 256 * H32 + 256


def test_deepseek_v32_parameters_match_the_published_685b():
    """61 layers of MLA + indexer, 3 dense layers of 18,432, 58 MoE layers of 256 + 1 experts of 2,048, untied 129,280
    embeddings: 671,877,944,064 (DeepSeek-V3's 671,026,419,200 + 61 indexers of 13,959,424); with the MTP layer and
    the embedding and head the checkpoint stores for it, 685.4B: the model card's 685B."""
    assert INDEXER32 == 13_959_424
    main = 61 * (MLA32 + INDEXER32 + 2 * H32) + 3 * 3 * H32 * 18432 + 58 * MOE32 + 2 * VOCAB32 * H32 + H32
    assert main == 671_877_944_064
    m = load_model(V32)
    assert m.model_type == "deepseek_v32" and m.mla is not None and m.num_mtp_layers == 1
    assert total_params(m) == main
    mtp = MLA32 + INDEXER32 + 2 * H32 + MOE32 + 2 * H32 + 2 * H32 * H32
    assert weight_breakdown(m, 1, include_mtp=True).params == main + mtp
    assert round((main + mtp + 2 * VOCAB32 * H32 + H32) / 1e9) == 685


def test_deepseek_v32_kv_holds_the_latent_and_the_indexer_key():
    """Per token per layer, on every rank: the 576-wide latent in bf16 (1,152 bytes) and the indexer's key as vLLM
    caches it (DeepseekV32IndexerCache: head_dim 128 + 128 // 128 x 4 = 132, dtype uint8); blocks of 64 (FlashMLA).
    With --kv-cache-dtype fp8 the latent becomes fp8_ds_mla's 656 bytes (512 fp8 + 4 fp32 scales + 64 bf16 rope
    values), the indexer stays 132. The MTP layer adds one more such layer to the pool."""
    acc = account(deployment(V32, gpu="H200-141GB", tp=8, max_model_len=32768), profile())
    assert acc.kv_bytes_per_token == 61 * (576 * 2 + 132) == 78_324
    assert acc.settings.block_size == 64
    # one KV-cache group whose page is every layer's page summed (kv_cache_interface.py UniformTypeKVCacheSpecs:
    # page_size_bytes = sum over the layers' specs): blocks of 64 x 78,324 bytes
    assert acc.kv_blocks == acc.kv_cache_bytes // (64 * 78_324)
    fp8 = account(deployment(V32, gpu="H200-141GB", tp=8, max_model_len=32768, kv_cache_dtype="fp8"), profile())
    assert fp8.kv_bytes_per_token == 61 * (656 + 132) == 48_068
    mtp = account(deployment(V32, gpu="H200-141GB", tp=8, max_model_len=32768, method="mtp", k=1), profile())
    assert mtp.kv_bytes_per_token == 62 * 1284


def _fp8(out_features: int, in_features: int) -> int:
    """A block-fp8 (128 x 128) linear: one byte a weight and a float32 scale per block."""
    return out_features * in_features + -(-out_features // 128) * -(-in_features // 128) * 4


def test_deepseek_v32_weights_per_rank_at_tp8():
    """One of 8 ranks: column/row-parallel q_b, kv_b, o, experts and dense MLPs split 8 ways; q_a, kv_a and the whole
    indexer replicated (its wk + weights_proj in bf16, upcast at load); router in bf16 with its float32 bias."""
    h = H32
    heads = 128 // 8
    attention = (_fp8(1536, h) + _fp8(heads * 192, 1536) + _fp8(576, h) + _fp8(heads * 256, 512)
                 + _fp8(h, heads * 128) + (1536 + 512) * BF16)
    indexer = _fp8(64 * 128, 1536) + (128 + 64) * h * BF16 + 2 * 128 * BF16
    dense = _fp8(2 * 2304, h) + _fp8(h, 2304)
    expert = _fp8(2 * 256, h) + _fp8(h, 256)
    moe = 256 * expert + expert + 256 * h * BF16 + 256 * 4
    embeddings = 2 * (VOCAB32 // 8) * h * BF16
    by_hand = embeddings + 61 * (attention + indexer + 2 * h * BF16) + 3 * dense + 58 * moe + h * BF16
    w = weight_breakdown(load_model(V32), 8)
    assert w.total - w.buffers == by_hand


def test_deepseek_v32_plans_from_the_command_line(capsys):
    code, out, err = run(capsys, "plan", "--target", V32, "--gpu", "H200-141GB", "--tp", "8", "--format", "json")
    assert code in (0, 1), err
    json.loads(out)


# --- MiniMax-M2 (minimax_m2): the catalog's MiniMax-M2.5, the same architecture ----------------------------------------

MM = "MiniMaxAI/MiniMax-M2.5"


def test_minimax_m2_parameters_match_its_published_229b():
    """62 layers: q/k/v (48 + 2 x 8 heads of 128) and o over hidden 3072, the q/k norms over all heads' width
    (48 x 128 + 8 x 128), 256 experts of 1,536 with a 3072 x 256 router and 256 routing biases, 2 norms; untied
    200,064-token embeddings: 228,689,764,864 parameters, the model card's "229B"."""
    h, layers, vocab = 3072, 62, 200064
    attention = 64 * 128 * h + h * 48 * 128 + 48 * 128 + 8 * 128
    moe = 256 * 3 * h * 1536 + 256 * h + 256
    by_hand = layers * (attention + 2 * h + moe) + 2 * vocab * h + h
    assert by_hand == 228_689_764_864
    m = load_model(MM)
    assert m.model_type == "minimax_m2" and m.rotary_dim == 64 and m.num_mtp_layers == 0
    assert m.moe is not None and m.moe.num_shared_experts == 0 and len(m.moe.moe_layers) == 62
    assert total_params(m) == by_hand
    assert round(by_hand / 1e9) == 229


def test_minimax_m2_kv_and_weights_per_rank_at_tp8():
    """KV: 62 layers x K and V x 1 KV head a rank x 128 x 2 bytes = 31,744 a token. Weights on one of 8 ranks:
    block-fp8 qkv (6 + 2 heads) x 128 rows and o 3072 x 768, the q/k norms' shards (768 + 128 values in bf16), 256
    experts of 1,536 / 8 in fp8, the float32 router and bias, bf16 embeddings and lm_head (kept unquantized)."""
    h = 3072
    attention = _fp8(8 * 128, h) + _fp8(h, 768) + (768 + 128) * BF16
    expert = _fp8(2 * 192, h) + _fp8(h, 192)
    moe = 256 * expert + 256 * h * 4 + 256 * 4
    by_hand = 2 * (200064 // 8) * h * BF16 + 62 * (attention + moe + 2 * h * BF16) + h * BF16
    w = weight_breakdown(load_model(MM), 8)
    assert w.total - w.buffers == by_hand
    acc = account(deployment(MM, gpu="H200-141GB", tp=8, max_model_len=32768), profile())
    assert acc.kv_bytes_per_token == 62 * 2 * 1 * 128 * BF16 == 31_744


def test_minimax_m2_plans_and_refuses_mtp_vllm_does_not_serve(capsys):
    """vLLM's MiniMaxM2Model skips the checkpoint's MTP modules (get_spec_layer_idx_from_weight_name) and has no
    MiniMax MTP drafter: --method mtp is refused in one line rather than planned."""
    code, out, err = run(capsys, "plan", "--target", MM, "--gpu", "H200-141GB", "--tp", "8", "--format", "json")
    assert code in (0, 1), err
    json.loads(out)
    code, _, err = run(capsys, "plan", "--target", MM, "--gpu", "H200-141GB", "--tp", "8", "--method", "mtp", "-k", "1")
    assert code == 2 and "Traceback" not in err


def test_a_malformed_indexer_field_is_named_in_one_line(tmp_path, capsys):
    """A string index_head_dim had reached the KV arithmetic; it is refused by name (exit 2)."""
    cfg = _v32_config()
    cfg["index_head_dim"] = "128"
    code, _, err = run(capsys, "plan", "--target", _write(tmp_path, cfg, "v32"), "--gpu", "H200-141GB", "--tp", "8")
    assert code == 2 and "index_head_dim" in err and "Traceback" not in err


def _v32_config() -> dict:
    return json.loads(json.dumps(catalog_entry(V32)["config"]))


def test_deepseek_v32_holds_its_topk_indices_buffer_beside_the_weights():
    """vLLM's DeepseekV2Model allocates topk_indices_buffer = torch.empty(max_num_batched_tokens, index_topk, int32)
    with the model when the config has index_topk (deepseek_v2.py, is_v32): 8,192 x 2,048 x 4 B = 64 MiB on every
    rank at the default token budget, twice that at 16,384."""
    from helpers import deployment, profile
    from specsize.core.memory import account

    small = account(deployment("deepseek-ai/DeepSeek-V3.2", gpu="H200-141GB", tp=8, max_model_len=32768,
                               max_num_batched_tokens=8192), profile())
    large = account(deployment("deepseek-ai/DeepSeek-V3.2", gpu="H200-141GB", tp=8, max_model_len=32768,
                               max_num_batched_tokens=16384), profile())
    assert large.weights_target_bytes - small.weights_target_bytes == 8192 * 2048 * 4 == 64 * 2**20
    v3 = [account(deployment("deepseek-ai/DeepSeek-V3", gpu="H200-141GB", tp=8, max_model_len=32768,
                             max_num_batched_tokens=n), profile()).weights_target_bytes for n in (8192, 16384)]
    assert v3[0] == v3[1]  # no indexer, no buffer
