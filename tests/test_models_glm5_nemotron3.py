"""GLM-5 (glm_moe_dsa) and NVIDIA Nemotron-3 (nemotron_h with MoE 'E' layers) had been refused by model type and by
pattern letter; they now plan, sized as vLLM 0.32 builds them.

Every expected number is worked by hand from the published config values (the catalog entries, copies of the Hugging
Face config.json files shipped in NVIDIA's aiconfigurator-core 0.12.0) and vLLM 0.32's model code:
- GLM-5: vllm/model_executor/models/registry.py maps GlmMoeDsaForCausalLM to vllm.models.deepseek_v32, whose CUDA
  module is DeepSeek-V3.2's (models/deepseek_v32/nvidia/model.py DeepseekV32DecoderLayer, attention.py
  DeepseekV32Attention / DeepseekV32Indexer; deepseek_v2.py DeepseekV2MoE, DeepseekV2MLP).
- Nemotron-3: vllm/model_executor/models/nemotron_h.py NemotronHMoE (GateLinear router, float32
  e_score_correction_bias, non-gated FusedMoE, NemotronHMLP shared expert, fc1/fc2_latent_proj), MambaMixer2,
  NemotronHAttention; one RMSNorm a layer.
"""

from __future__ import annotations

import json
from math import ceil

import pytest

from helpers import run_cli
from specsize.catalog import catalog_entry, load_model
from specsize.catalog.configs import spec_from_config
from specsize.core.errors import SpecError
from specsize.core.kvcache import bytes_per_token, model_kv_layers
from specsize.core.weights import expert_bytes_per_rank, total_params, weight_breakdown
from specsize.engines.methods import check_mtp_release
from specsize.engines.support import check_model_support

BF16 = 2
GLM5, GLM5_FP8 = "zai-org/GLM-5", "zai-org/GLM-5-FP8"
NANO, SUPER = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"

# ---- GLM-5 by hand: hidden 6144, 78 layers, vocab 154,880 (a multiple of 64: no padding), untied ----------------
H5 = 6144
# one layer's MLA (DeepseekV32Attention): q_a 2048 x 6144, q_b 64 heads x (192 + 64) x 2048, kv_a (512 + 64) x 6144,
# kv_b 64 x (192 + 256) x 512, o 6144 x 64 x 256, q_a / kv_a RMSNorms 2048 + 512
GLM5_MLA = 2048 * H5 + 64 * 256 * 2048 + 576 * H5 + 64 * 448 * 512 + H5 * 64 * 256 + 2560
# its indexer (DeepseekV32Indexer): wq_b 32 heads x 128 x 2048, wk_weights_proj (128 + 32) x 6144, k_norm weight + bias
GLM5_INDEXER = 32 * 128 * 2048 + 160 * H5 + 2 * 128
GLM5_DENSE = 3 * H5 * 12288  # DeepseekV2MLP gate + up + down (layers 0-2: first_k_dense_replace 3)
# DeepseekV2MoE: 256 experts x 3 x 6144 x 2048, 1 shared expert of 2048, GateLinear 256 x 6144, noaux_tc bias 256
GLM5_MOE = 256 * 3 * H5 * 2048 + 3 * H5 * 2048 + 256 * H5 + 256
GLM5_PARAMS = (2 * 154880 * H5 + 78 * (GLM5_MLA + GLM5_INDEXER + 2 * H5) + 3 * GLM5_DENSE + 75 * GLM5_MOE + H5)


def test_glm5_parameters_by_hand():
    # 2 x 154,880 x 6,144 = 1,903,165,440 embeddings; 78 x (199,624,192 MLA + 9,372,160 indexer + 12,288 norms);
    # 3 x 226,492,416 dense; 75 x 9,703,000,320 MoE; 6,144 final norm = 743,911,218,432 (Z.ai's "744B")
    assert GLM5_PARAMS == 743_911_218_432
    m = load_model(GLM5)
    assert (m.model_type, m.num_layers, m.mla.kv_lora_rank, m.mla.q_lora_rank) == ("glm_moe_dsa", 78, 512, 2048)
    assert m.moe.moe_layers == tuple(range(3, 78)) and m.moe.router_bias and not m.moe.router_fp32
    assert total_params(m) == GLM5_PARAMS


def test_glm5_bf16_bytes_per_rank_at_tp8():
    # TP 8: q_b, kv_b, o, the dense MLP and each expert split 8 ways (8 heads a rank; 1,536 and 256 a rank); q_a,
    # kv_a, the indexer (replicated: "no tensor parallel"), norms and the router whole; k_norm 2 x 128 x 2 B (the model
    # dtype, as vLLM 0.16-0.17 build it; 0.32's DeepseekV32Indexer makes it float32, 78 x 512 B more, which specsize's
    # release-free weights leave out, as tests/test_hunt_53_arch.py does for DeepSeek-V3.2)
    attention = BF16 * (2048 * H5 + 8 * 256 * 2048 + 576 * H5 + 8 * 448 * 512 + H5 * 8 * 256 + 2560
                        + 32 * 128 * 2048 + 160 * H5) + 2 * 128 * BF16
    moe = BF16 * (256 * 3 * H5 * 256 + 3 * H5 * 256 + 256 * H5) + 256 * 4  # the score-correction bias in float32
    # one rope cache: qk_rope_head_dim 64 x 202,752 positions (rope_type default); the indexer's rope shares it
    # (indexer_rope_interleave true -> is_neox_style False, the attention's own key in get_rope's cache)
    rope = 202752 * 64 * BF16
    by_hand = (2 * (154880 // 8) * H5 * BF16 + 78 * (attention + 2 * H5 * BF16) + 3 * BF16 * 3 * H5 * 1536
               + 75 * moe + H5 * BF16 + rope)
    assert by_hand == 189_692_203_008
    assert weight_breakdown(load_model(GLM5), 8).total == by_hand


def _fp8(out: int, inp: int) -> int:
    """A block-fp8 (128 x 128) linear: 1 byte a weight and one float32 scale a block."""
    return out * inp + ceil(out / 128) * ceil(inp / 128) * 4


GLM5_FP8_TP8 = (2 * (154880 // 8) * H5 * BF16
                + 78 * (_fp8(2048, H5) + _fp8(2048, 2048) + _fp8(576, H5) + _fp8(3584, 512) + _fp8(H5, 2048)
                        + 2560 * BF16  # the MLA's norms
                        # indexer: wq_b in fp8; wk_weights_proj built with quant_config=None (the checkpoint's fp8 wk
                        # is upcast at load; weights_proj is kept bf16: modules_to_not_convert "indexers_proj")
                        + _fp8(4096, 2048) + 160 * H5 * BF16 + 2 * 128 * BF16 + 2 * H5 * BF16)
                + 3 * (_fp8(2 * 1536, H5) + _fp8(H5, 1536))
                + 75 * (257 * (_fp8(2 * 256, H5) + _fp8(H5, 256)) + 256 * H5 * BF16 + 256 * 4)  # 256 + 1 shared
                + H5 * BF16 + 202752 * 64 * BF16)


def test_glm5_fp8_bytes_per_rank_at_tp8():
    m = load_model(GLM5_FP8)
    assert m.quantization.method == "fp8" and m.quantization.block == (128, 128)
    assert GLM5_FP8_TP8 == 95_315_892_096
    assert weight_breakdown(m, 8).total == GLM5_FP8_TP8


def test_glm5_kv_bytes_per_token():
    m = load_model(GLM5)
    # every layer: the MLA latent (512 + 64) x 2 B = 1,152 and the indexer's fp8 key 128 + 128 // 128 x 4 = 132
    assert bytes_per_token(model_kv_layers(m, 8, BF16, "target")) == 78 * (1152 + 132) == 100_152
    # an fp8 cache: fp8_ds_mla's 656 B latent + 132
    assert bytes_per_token(model_kv_layers(m, 8, 1, "target")) == 78 * (656 + 132) == 61_464


def test_glm5_plans_on_eight_h200(capsys):
    code, out, _ = run_cli(capsys, "plan", "--target", GLM5_FP8, "--gpu", "H200-141GB", "--tp", "8",
                           "--format", "json")
    assert code == 0
    plan = json.loads(out)
    assert plan["kv_bytes_per_token"]["target"] == 100_152
    # the weights plus the model's topk_indices_buffer (8,192 batched tokens x index_topk 2,048 int32, every rank)
    assert plan["per_gpu"]["weights_target_bytes"] == GLM5_FP8_TP8 + 8192 * 2048 * 4
    assert plan["kv_cache_tokens"] > 0
    # the bf16 checkpoint does not: 189.7 GB of weights a GPU against a 0.9 x 139.8 GiB budget
    code, out, _ = run_cli(capsys, "plan", "--target", GLM5, "--gpu", "H200-141GB", "--tp", "8", "--format", "json")
    plan = json.loads(out)
    assert code == 0 and plan["verdict"] == "does_not_fit" and plan["kv_cache_tokens"] == 0
    # with its MTP layer: one more MLA + indexer layer in the pool
    code, out, _ = run_cli(capsys, "plan", "--target", GLM5_FP8, "--gpu", "H200-141GB", "--tp", "8", "--method",
                           "mtp", "-k", "1", "--format", "json")
    assert code == 0 and json.loads(out)["kv_bytes_per_token"]["draft"] == 1152 + 132


def _first_release(engine: str, before: str, first: str | None, model, match: str) -> None:
    """`before` refuses `model` with a message matching `match`; `first` (None: not checked) loads it."""
    with pytest.raises(SpecError, match=match):
        check_model_support(engine, before, model)
    if first is not None:
        check_model_support(engine, first, model)


def test_glm5_releases():
    # vLLM registers GlmMoeDsaForCausalLM from 0.16.0 (absent in 0.15.1's wheel and 0.14.1's sdist) and maps its MTP
    # to deepseek_mtp in the same release; SGLang from 0.5.9 (absent in 0.5.8.post1)
    m = load_model(GLM5_FP8)
    _first_release("vllm", "0.14.1", "0.16.0", m, "first release that does is 0.16.0")
    _first_release("sglang", "0.5.8.post1", None, m, "0.5.9")
    with pytest.raises(SpecError, match="MTP drafter"):
        check_mtp_release("vllm", "0.15.1", m)
    check_mtp_release("vllm", "0.16.0", m)


def test_glm5_with_an_indexer_in_some_layers_is_refused():
    # GLM-5.2 / 5.3: index_topk_freq 4 - vLLM builds no indexer (no indexer cache) in the skipped layers
    cfg = {**catalog_entry(GLM5)["config"], "index_topk_freq": 4, "index_skip_topk_offset": 3}
    with pytest.raises(SpecError, match="index_topk_freq"):
        spec_from_config(cfg, "zai-org/GLM-5.2", "test")


# ---- Nemotron-3 Nano by hand: hidden 2688, 52 layers "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME" ---------
HN = 2688
# mamba2 (MambaMixer2, intermediate 64 heads x 64 = 4096, 8 groups of state 128): in_proj (2 x 4096 + 2 x 8 x 128 +
# 64) x 2688, conv1d (4096 + 2048) x 4 and its bias 6144, A / D / dt_bias 3 x 64, the gated norm 4096, out 2688 x 4096
NANO_MAMBA = (2 * 4096 + 2 * 8 * 128 + 64) * HN + 6144 * 4 + 6144 + 3 * 64 + 4096 + HN * 4096
NANO_ATTENTION = (32 + 2 * 2) * 128 * HN + HN * 32 * 128  # qkv (32 heads + 2 x 2 KV heads of 128), o; no rotary
# NemotronHMoE: 128 experts of up 1856 x 2688 + down 2688 x 1856 (not gated), one shared NemotronHMLP of 3712
# (up + down), GateLinear 128 x 2688, e_score_correction_bias 128
NANO_MOE = 128 * 2 * 1856 * HN + 2 * 3712 * HN + 128 * HN + 128
NANO_PARAMS = 2 * 131072 * HN + 23 * NANO_MAMBA + 6 * NANO_ATTENTION + 23 * NANO_MOE + 52 * HN + HN


def test_nemotron3_nano_parameters_and_bytes_by_hand():
    assert NANO_PARAMS == 31_577_940_288  # the "30B" of its name
    m = load_model(NANO)
    assert m.num_layers == 52 and len(m.layers) == 6 and len(m.state_layers) == 23
    assert m.moe.moe_layers == tuple(i for i, c in enumerate(catalog_entry(NANO)["config"]["hybrid_override_pattern"])
                                     if c == "E")
    assert total_params(m) == NANO_PARAMS
    # bf16 at TP 1, but A (64 per mamba layer) and the router's bias (128 per MoE layer) in float32: 2 B more each
    assert weight_breakdown(m, 1).total == NANO_PARAMS * BF16 + 23 * 64 * 2 + 23 * 128 * 2 == 63_155_889_408
    # one routed expert on one rank at TP 2: up 928 x 2688 + down 2688 x 928 (not 3 x: no gate)
    assert expert_bytes_per_rank(m, 2) == (2 * 928 * HN * BF16, 2 * 928 * HN)


def test_nemotron3_nano_kv_and_state():
    m = load_model(NANO)
    # 6 attention layers x 2 (K, V) x 2 KV heads x 128 x 2 B; at TP 8 the 2 KV heads replicate to 1 a rank
    assert bytes_per_token(model_kv_layers(m, 1, BF16, "target")) == 6 * 2 * 2 * 128 * 2 == 6_144
    assert bytes_per_token(model_kv_layers(m, 8, BF16, "target")) == 6 * 2 * 1 * 128 * 2 == 3_072


def test_nemotron3_nano_plans(capsys):
    code, out, _ = run_cli(capsys, "plan", "--target", NANO, "--gpu", "H200-141GB", "--format", "json")
    assert code == 0
    plan = json.loads(out)
    assert plan["verdict"] == "fits" and plan["per_gpu"]["weights_target_bytes"] == 63_155_889_408
    assert plan["kv_bytes_per_token"]["target"] == 6_144
    # each of the 23 mamba layers keeps a conv window of 3 rows x (4,096 + 2 x 8 x 128) channels x 2 B and a float32
    # recurrent state of 64 heads x 64 x 128 x 4 B (mamba_ssm_cache_dtype float32)
    assert plan["hybrid"]["state_bytes_per_sequence"] == 23 * (3 * 6144 * 2 + 64 * 64 * 128 * 4) == 49_082_368


# ---- Nemotron-3 Super: hidden 4096, 88 layers (40 M, 40 E, 8 *), experts in a 1,024-wide latent ------------------
HS = 4096
SUPER_MAMBA = (2 * 8192 + 2 * 8 * 128 + 128) * HS + 10240 * 4 + 10240 + 3 * 128 + 8192 + HS * 8192
SUPER_ATTENTION = (32 + 2 * 2) * 128 * HS + HS * 32 * 128
# 512 experts of up 2688 x 1024 + down 1024 x 2688 in the latent, the shared expert of 5376 over 4096, the router
# 512 x 4096 and its bias 512, fc1_latent_proj 1024 x 4096 and fc2_latent_proj 4096 x 1024 (mlp_bias false)
SUPER_MOE = 512 * 2 * 2688 * 1024 + 2 * 5376 * HS + 512 * HS + 512 + 2 * HS * 1024
SUPER_PARAMS = 2 * 131072 * HS + 40 * SUPER_MAMBA + 8 * SUPER_ATTENTION + 40 * SUPER_MOE + 88 * HS + HS


def test_nemotron3_super_latent_moe_by_hand():
    assert SUPER_PARAMS == 120_668_707_840  # the "120B" of its name
    m = load_model(SUPER)
    assert m.moe.latent_size == 1024 and m.moe.experts_per_token == 22
    assert total_params(m) == SUPER_PARAMS
    # ModelOpt FP8 (its hf_quant_config.json: quant_algo FP8, kv_cache_quant_algo FP8)
    assert m.quantization.method == "fp8" and m.quantization.kv_cache_dtype == "fp8"
    # one routed expert at TP 1 in bf16: up 2688 x 1024 + down 1024 x 2688, at the latent width
    assert expert_bytes_per_rank(m, 1, quant=None, dtype="bfloat16")[1] == 2 * 2688 * 1024


def test_nemotron3_super_plans(capsys):
    code, out, _ = run_cli(capsys, "plan", "--target", SUPER, "--gpu", "H200-141GB", "--tp", "2", "--format", "json")
    assert code == 0
    plan = json.loads(out)
    # the checkpoint's fp8 KV cache: 8 attention layers x 2 x 1 KV head a rank x 128 x 1 B
    assert plan["kv_bytes_per_token"]["target"] == 8 * 2 * 1 * 128 == 2_048
    assert plan["verdict"] == "fits"


def test_layers_block_type_gives_the_pattern_and_the_layer_count():
    # transformers 5's NemotronHConfig (Nemotron-3-Ultra, Nemotron-3.5): no hybrid_override_pattern, no
    # num_hidden_layers; the pattern is the list's letters and the layer count its length
    cfg = {k: v for k, v in catalog_entry(NANO)["config"].items() if k not in ("hybrid_override_pattern",
                                                                              "num_hidden_layers")}
    cfg["layers_block_type"] = ["mamba", "moe", "attention", "moe", "mamba", "mlp"]
    m = spec_from_config(cfg, "nemotron-3-like", "test")
    assert m.num_layers == 6 and m.mixers == ("state", "none", "attention", "none", "state", "none")
    assert m.moe.moe_layers == (1, 3) and m.mlp_layers == (1, 3, 5)
    with pytest.raises(SpecError, match="'xlstm'"):
        spec_from_config({**cfg, "layers_block_type": ["mamba", "xlstm"]}, "x", "test")


def test_moe_layers_without_experts_are_refused():
    cfg = {k: v for k, v in catalog_entry(NANO)["config"].items() if k != "n_routed_experts"}
    with pytest.raises(SpecError, match="n_routed_experts"):
        spec_from_config(cfg, "x", "test")


def test_nemotron3_releases():
    nano, super_ = load_model(NANO), load_model(SUPER)
    # vLLM: the E layer from 0.11.1 (0.11.0's nemotron_h.py has none), moe_latent_size from 0.13.0 (not in 0.12.0);
    # SGLang: NemotronHMoE from 0.5.6 (none in 0.5.5.post3), moe_latent_size from 0.5.8 (not in 0.5.7)
    _first_release("vllm", "0.11.0", "0.11.1", nano, "0.11.1")
    _first_release("vllm", "0.12.0", "0.13.0", super_, "latent.*0.13.0")
    _first_release("sglang", "0.5.5.post3", None, nano, "0.5.6")
    _first_release("sglang", "0.5.7", "0.5.8", super_, "0.5.8")


def test_nemotron3_super_mtp_step_by_hand():
    # vLLM 0.32 nemotron_h_mtp.py: one step of mtp_hybrid_override_pattern "*E" - an attention layer (its norm, enorm,
    # hnorm and eh_proj 2H -> H, a ColumnParallelLinear split by TP) and an MoE layer (its norm and final_layernorm);
    # embedding and lm_head the target's. In bf16 at TP 2: 16 query heads and 1 KV head a rank, experts of 1,344
    cfg = {k: v for k, v in catalog_entry(SUPER)["config"].items() if k != "quantization_config"}
    m = spec_from_config(cfg, "super-bf16", "test")
    attention = ((16 + 2 * 1) * 128 * HS + HS * 16 * 128) * BF16
    moe = (512 * 2 * 1344 * 1024 + 2 * 2688 * HS + 512 * HS + 2 * HS * 1024) * BF16 + 512 * 4
    step = attention + moe + 5 * HS * BF16 + 2048 * 2 * HS * BF16
    assert weight_breakdown(m, 2, include_mtp=True).total - weight_breakdown(m, 2).total == step
