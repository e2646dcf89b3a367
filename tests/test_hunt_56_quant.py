"""Hunt 56: quantization formats specsize read only partly.

1. compressed-tensors with several config_groups: specsize read the first group's weight scheme and gave it to every
   linear layer of the model. vLLM gives each module the scheme of the first target (over every group, in order)
   that matches it (vllm 0.32 model_executor/layers/quantization/compressed_tensors/compressed_tensors.py
   CompressedTensorsConfig.get_scheme_dict, utils.py find_matched_target: its name exactly or by an "re:" regular
   expression, a fused module's shards all matching, else its class name containing the target, "Linear"), a module
   no target matches is unquantized (UnquantizedLinearMethod), a group whose one target is an attention module is
   dropped (from_config), and an MoE layer's experts take their first expert's gate / up / down scheme, which must
   agree (compressed_tensors_moe.py get_moe_method). catalog.configs.compressed_tensors_layers reads each layer's.
   Every figure below is worked by hand from the layer shapes and the schemes' storage (int8 / fp8 per channel: one
   byte a weight and an fp32 scale a row; int4 in groups of 128, symmetric: half a byte a weight and an fp16 scale a
   group).
2. bitsandbytes checkpoints (quant_method bitsandbytes) were refused for every release. vLLM 0.9.2 - 0.27 load them
   in-tree (0.28 moved bitsandbytes to the vllm-bnb-plugin package, PR 43529; 0.32 has neither
   quantization/bitsandbytes.py nor model_loader/bitsandbytes_loader.py): 4-bit weights packed two a byte with a
   float32 absmax per block of 64 (double quantization undone at load, bitsandbytes_loader.py dequantize_dq, from
   0.9.2), LLM.int8() weights a byte each with a float32 row scale; llm_int8_skip_modules stay in the model dtype,
   as do the embedding and lm_head (not LinearBase). Other releases, and SGLang, are refused by name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli as run

SHARED = Path(__file__).resolve().parents[2] / "shared"
LLAMA_8B = json.loads((SHARED / "model-configs/meta-llama/Llama-3.1-8B-Instruct/config.json").read_text())
QWEN3_30B = json.loads((SHARED / "model-configs/Qwen/Qwen3-30B-A3B/config.json").read_text())

INT8_CHANNEL = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}
FP8_CHANNEL = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}
INT4_G128 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}


def _ct(*groups: tuple[list[str], dict]) -> dict:
    return {"quant_method": "compressed-tensors", "format": "mixed", "ignore": ["lm_head"],
            "config_groups": {f"group_{i}": {"targets": targets, "weights": weights}
                              for i, (targets, weights) in enumerate(groups)}}


def _weights(capsys, tmp_path, config: dict, *args) -> int:
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)["per_gpu"]["weights_target_bytes"]


def _refused(capsys, tmp_path, config: dict) -> str:
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json")
    assert code == 2 and out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


# Llama-3.1-8B, one layer (out, in): qkv (6144, 4096), o (4096, 4096), gate_up (28672, 4096), down (4096, 14336)
LLAMA_LAYER_BF16 = (6144 * 4096 + 4096 * 4096 + 28672 * 4096 + 4096 * 14336) * 2  # 436,207,616
ATTN_8BIT = 6144 * 4096 + 6144 * 4 + 4096 * 4096 + 4096 * 4  # 41,984,000: a byte a weight, an fp32 scale a row
ATTN_INT4 = 6144 * 4096 // 2 + 32 * 6144 * 2 + 4096 * 4096 // 2 + 32 * 4096 * 2  # 21,626,880
MLP_INT4 = 28672 * 4096 // 2 + 32 * 28672 * 2 + 4096 * 14336 // 2 + 112 * 4096 * 2  # 90,832,896


def test_hand_figures():
    assert ATTN_8BIT == 41_984_000 and ATTN_INT4 == 21_626_880 and MLP_INT4 == 90_832_896


def test_w8a8_attention_beside_w4a16_mlp_takes_each_groups_scheme(capsys, tmp_path):
    # llm-compressor's mixed recipes: attention W8A8, MLP W4A16; specsize had sized every layer at the first group's
    # int8 (the MLP at 8 bits, 2.8 GB too much over the 32 layers)
    bf16 = _weights(capsys, tmp_path, LLAMA_8B)
    qc = _ct((["re:.*self_attn.*"], INT8_CHANNEL), (["re:.*mlp.*"], INT4_G128))
    mixed = _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": qc})
    assert bf16 - mixed == 32 * (LLAMA_LAYER_BF16 - ATTN_8BIT - MLP_INT4) == 9_708_503_040


def test_a_group_for_the_mlp_only_leaves_attention_in_bf16(capsys, tmp_path):
    # no target matches q/k/v or o_proj: vLLM gives them UnquantizedLinearMethod
    bf16 = _weights(capsys, tmp_path, LLAMA_8B)
    qc = _ct((["re:.*mlp.*"], FP8_CHANNEL))
    fp8_mlp = _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": qc})
    mlp = 28672 * 4096 + 4096 * 14336
    assert bf16 - fp8_mlp == 32 * (2 * mlp - (mlp + (28672 + 4096) * 4)) == 5_632_950_272


def test_layer_names_match_a_fused_module_through_its_shards(capsys, tmp_path):
    # layer 0's q, k, v and o named exactly in the first group: qkv_proj takes it as all three shards match
    # (find_matched_target's _match_fused_layer), o_proj by its own name; everything else "Linear" int4
    names = [f"model.layers.0.self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
    all_int4 = _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": _ct((["Linear"], INT4_G128))})
    qc = _ct((names, FP8_CHANNEL), (["Linear"], INT4_G128))
    first_attention_fp8 = _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": qc})
    assert first_attention_fp8 - all_int4 == ATTN_8BIT - ATTN_INT4 == 20_357_120


def test_an_attention_only_group_is_dropped_as_vllm_drops_it(capsys, tmp_path):
    # CompressedTensorsConfig.from_config skips a group whose one target is "...Attention" (attention quantization
    # rides on the KV cache); specsize had taken that first group's fp8 for every linear layer
    all_int4 = _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": _ct((["Linear"], INT4_G128))})
    qc = _ct((["LlamaAttention"], FP8_CHANNEL), (["Linear"], INT4_G128))
    assert _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": qc}) == all_int4


def test_moe_experts_and_attention_in_different_schemes(capsys, tmp_path):
    # Qwen3-30B-A3B, 48 layers: attention qkv (5120, 2048) and o (2048, 4096) in fp8 per channel; 128 experts of
    # gate_up (1536, 2048) and down (2048, 768) in int4, groups of 128; the router (mlp.gate) matched by neither
    bf16 = _weights(capsys, tmp_path, QWEN3_30B)
    qc = _ct((["re:.*self_attn.*"], FP8_CHANNEL), (["re:.*mlp.experts.*"], INT4_G128))
    mixed = _weights(capsys, tmp_path, {**QWEN3_30B, "quantization_config": qc})
    attention_saved = (5120 * 2048 + 2048 * 4096) - (5120 + 2048) * 4  # 18,845,696
    expert_bf16 = (1536 * 2048 + 2048 * 768) * 2
    expert_int4 = 1536 * 2048 // 2 + 16 * 1536 * 2 + 2048 * 768 // 2 + 6 * 2048 * 2  # 2,433,024
    assert expert_int4 == 2_433_024
    assert bf16 - mixed == 48 * (attention_saved + 128 * (expert_bf16 - expert_int4)) == 43_938_152_448


def test_experts_whose_projections_disagree_are_refused(capsys, tmp_path):
    # get_moe_method: "All MoE projections need to have same quantization scheme" - vLLM does not start
    qc = _ct((["re:.*experts.*down_proj"], FP8_CHANNEL), (["Linear"], INT4_G128))
    err = _refused(capsys, tmp_path, {**QWEN3_30B, "quantization_config": qc})
    assert "config_groups" in err and "routed experts" in err


def test_a_block_split_over_two_schemes_is_refused_by_name(capsys, tmp_path):
    # o_proj in fp8, q/k/v in int4: specsize sizes an attention block in one scheme, and says so
    qc = _ct((["re:.*o_proj"], FP8_CHANNEL), (["Linear"], INT4_G128))
    err = _refused(capsys, tmp_path, {**LLAMA_8B, "quantization_config": qc})
    assert "config_groups" in err and "o_proj" in err


@pytest.mark.parametrize("targets", [["re:.*(mlp"], "Linear"])
def test_malformed_targets_are_a_one_line_error(capsys, tmp_path, targets):
    qc = {"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": targets, "weights": INT4_G128}}}
    assert "targets" in _refused(capsys, tmp_path, {**LLAMA_8B, "quantization_config": qc})


def test_one_group_over_every_linear_layer_is_unchanged(capsys, tmp_path):
    # the common checkpoint (targets ["Linear"], lm_head ignored): every layer int4, as before
    bf16 = _weights(capsys, tmp_path, LLAMA_8B)
    int4 = _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": _ct((["Linear"], INT4_G128))})
    assert bf16 - int4 == 32 * (LLAMA_LAYER_BF16 - ATTN_INT4 - MLP_INT4)


# --- 2. bitsandbytes ------------------------------------------------------------------------------------------------

BNB4 = {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False, "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_storage": "uint8",
        "llm_int8_skip_modules": None}
BNB8 = {"quant_method": "bitsandbytes", "load_in_8bit": True, "load_in_4bit": False, "llm_int8_threshold": 6.0}
LLAMA_LINEAR = 6144 * 4096 + 4096 * 4096 + 28672 * 4096 + 4096 * 14336  # 218,103,808 a layer
LLAMA_ATTENTION = 6144 * 4096 + 4096 * 4096  # 41,943,040


def test_bnb_4bit_checkpoint_is_sized_as_vllm_holds_it(capsys, tmp_path):
    # a layer's 218,103,808 weights: half a byte each (109,051,904) and a 4-byte absmax per 64 (13,631,488)
    bf16 = _weights(capsys, tmp_path, LLAMA_8B, "--engine-version", "0.27")
    bnb = _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": BNB4}, "--engine-version", "0.27")
    assert LLAMA_LINEAR // 2 + LLAMA_LINEAR // 64 * 4 == 122_683_392
    assert bf16 - bnb == 32 * (2 * LLAMA_LINEAR - 122_683_392) == 10_032_775_168


def test_bnb_8bit_checkpoint_keeps_a_row_scale(capsys, tmp_path):
    # a byte a weight and a float32 SCB a row: rows 6144 + 4096 + 28672 + 4096 = 43,008 a layer
    bf16 = _weights(capsys, tmp_path, LLAMA_8B, "--engine-version", "0.20")
    bnb = _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": BNB8}, "--engine-version", "0.20")
    assert bf16 - bnb == 32 * (LLAMA_LINEAR - 43_008 * 4) == 6_973_816_832


def test_bnb_skip_modules_stay_in_the_model_dtype(capsys, tmp_path):
    # llm_int8_skip_modules ["mlp"]: every module with an "mlp" part unquantized (is_layer_skipped_bnb); attention
    # 4-bit: 41,943,040 x 2 bytes in bf16 against 20,971,520 + 2,621,440
    bf16 = _weights(capsys, tmp_path, LLAMA_8B, "--engine-version", "0.27")
    qc = {**BNB4, "llm_int8_skip_modules": ["lm_head", "mlp"]}
    bnb = _weights(capsys, tmp_path, {**LLAMA_8B, "quantization_config": qc}, "--engine-version", "0.27")
    assert bf16 - bnb == 32 * (2 * LLAMA_ATTENTION - (LLAMA_ATTENTION // 2 + LLAMA_ATTENTION // 64 * 4)) \
        == 1_929_379_840


@pytest.mark.parametrize(("args", "says"), [
    ((), "vllm-bnb-plugin"),  # the newest release (0.32): no bitsandbytes in vLLM
    (("--engine-version", "0.28"), "vllm-bnb-plugin"),
    (("--engine-version", "0.9.1"), "0.9.2"),
    (("--engine", "sglang"), "SGLang"),
])
def test_bnb_outside_the_releases_that_load_it_is_refused(capsys, tmp_path, args, says):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA_8B, "quantization_config": BNB4}))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json", *args)
    assert code == 2 and out == "" and "Traceback" not in err and says in err, err
    assert "0.27" in err and len(err.strip().splitlines()) == 1


def test_bnb_moe_needs_the_release_that_quantizes_experts(capsys, tmp_path):
    # 0.9.2's BitsAndBytesConfig gives FusedMoE no method; 0.10.0 adds BitsAndBytesMoEMethod
    # the router skipped by name, as published checkpoints list it (Qwen3-MoE's gate is a ReplicatedLinear given the
    # quant_config in vLLM 0.10: quantized unless skipped; "gate" is a whole part of mlp.gate only, not of gate_proj)
    config = {**QWEN3_30B, "quantization_config": {**BNB4, "llm_int8_skip_modules": ["lm_head", "gate"]}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, _out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--engine-version", "0.9.2")
    assert code == 2 and "0.10.0" in err
    bf16 = _weights(capsys, tmp_path, QWEN3_30B, "--engine-version", "0.10.1")
    bnb = _weights(capsys, tmp_path, config, "--engine-version", "0.10.1")
    # per layer: attention (5120, 2048) + (2048, 4096), 128 experts of 3 x 2048 x 768, all 4-bit; the router bf16
    linear = 5120 * 2048 + 2048 * 4096 + 128 * 3 * 2048 * 768
    assert bf16 - bnb == 48 * (2 * linear - (linear // 2 + linear // 64 * 4))


def test_bnb_8bit_moe_is_refused_as_vllm_refuses_it(capsys, tmp_path):
    err = _refused(capsys, tmp_path, {**QWEN3_30B, "quantization_config": BNB8})
    assert "load_in_8bit" in err


def test_bnb_4bit_storage_other_than_uint8_is_refused(capsys, tmp_path):
    err = _refused(capsys, tmp_path, {**LLAMA_8B, "quantization_config": {**BNB4, "bnb_4bit_quant_storage": "bfloat16"}})
    assert "bnb_4bit_quant_storage" in err
