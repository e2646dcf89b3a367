"""Qwen3.5's vision tower (Qwen3-VL's, vision kind qwen3_vl): weights, tokens per image and the encoder's profiling.

The configs are Qwen's published config.json files (tools/model-configs-extra/Qwen/Qwen3.5-*/, whole copies kept by
ai-dynamo/aiconfigurator). Every expected figure is worked out by hand below from those configs and vLLM 0.32's
source: model_executor/models/qwen3_5.py (Qwen3_5MoeForConditionalGeneration builds qwen3_vl.py's
Qwen3_VisionTransformer), qwen3_vl.py (Qwen3_VisionPatchEmbed, Qwen3_VisionBlock, Qwen3_VisionMLP,
Qwen3_VisionPatchMerger, Qwen3VLProcessingInfo._get_vision_info), qwen2_5_vl.py (Qwen2_5_VisionAttention) and
qwen2_vl.py (Qwen2VLProcessingInfo.get_image_size_with_most_features / get_max_image_tokens).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from specsize.catalog import load_model
from specsize.catalog.configs import spec_from_config
from specsize.core.errors import SpecError
from specsize.core.memory import account
from specsize.core.multimodal import encoder_profile, tower_forward_peak, with_images
from specsize.core.weights import vision_params, weight_breakdown

from helpers import ROOT, deployment, profile, run_cli, workload

# Qwen3.5's tower (every Qwen3.5 config): hidden h = 1152, intermediate i = 4304, 27 blocks, 16 heads, patch 16 over
# 2 frames of 3 channels, 2304 learned positions, 2 x 2 merge; out_hidden_size is the language model's width.
#
# Whole on every rank:
#   patch embed Conv3d(3 -> 1152, kernel 2 x 16 x 16, bias): 3 x 2 x 16 x 16 x 1152 + 1152 = 1,769,472 + 1,152
#                                                                                          = 1,770,624
#   pos_embed nn.Embedding(2304, 1152): 2,654,208
#   per block: norm1 + norm2 LayerNorms (weight + bias) 4 x 1152 = 4,608, proj's bias 1152 (row-parallel),
#   fc2's bias 1152 (row-parallel): 6,912; x 27 = 186,624
#   merger: LayerNorm(1152) 2,304 + linear_fc2's bias (out_hidden_size, row-parallel)
#   -> 1,770,624 + 2,654,208 + 186,624 + 2,304 = 4,613,760 + out_hidden_size
# Split across TP:
#   per block: qkv 3 x 1152^2 = 3,981,312 + its bias 3,456; proj 1152^2 = 1,327,104; fc1 4304 x 1152 = 4,958,208
#   + its bias 4,304; fc2 1152 x 4304 = 4,958,208: 15,232,592; x 27 = 411,279,984
#   merger: linear_fc1 4608 x 4608 = 21,233,664 + its bias 4,608; linear_fc2 4608 x out_hidden_size
#   -> 411,279,984 + 21,238,272 + 4,608 x out_hidden_size
TOWER = {
    # out_hidden_size 2048: 4,613,760 + 2,048; 432,518,256 + 9,437,184
    "Qwen/Qwen3.5-35B-A3B": (4_615_808, 441_955_440),
    # out_hidden_size 4096: 4,613,760 + 4,096; 432,518,256 + 18,874,368
    "Qwen/Qwen3.5-397B-A17B": (4_617_856, 451_392_624),
    # out_hidden_size 3072: 4,613,760 + 3,072; 432,518,256 + 14,155,776
    "Qwen/Qwen3.5-122B-A10B": (4_616_832, 446_674_032),
    # out_hidden_size 5120: 4,613,760 + 5,120; 432,518,256 + 23,592,960
    "Qwen/Qwen3.5-27B": (4_618_880, 456_111_216),
}


@pytest.mark.parametrize("model_id", list(TOWER))
def test_tower_parameters_by_hand(model_id):
    m = load_model(model_id)
    assert m.vision is not None and m.vision.kind == "qwen3_vl"
    assert vision_params(m.vision, m.hidden_size) == TOWER[model_id]


def test_deepstack_mergers_by_hand():
    # Qwen3-VL-235B-A22B-Instruct's vision_config (published, as aiconfigurator keeps it): Qwen3.5's tower with
    # out_hidden_size 4096 and three deepstack mergers (deepstack_visual_indexes [8, 16, 24]). Each is
    # Qwen3_VisionPatchMerger(use_postshuffle_norm=True): a LayerNorm over 4 x 1152 = 4608 (9,216 whole), linear_fc1
    # 4608^2 + 4608 and linear_fc2 4608 x 4096 split (40,112,640), linear_fc2's bias 4096 whole.
    # The tower is read on its own here (the whole model: tests/test_qwen3_vl.py).
    from specsize.catalog.configs import _vision  # noqa: PLC0415

    vc = {"deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1152,
          "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304, "model_type": "qwen3_vl_moe",
          "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 4096, "patch_size": 16,
          "spatial_merge_size": 2, "temporal_patch_size": 2}
    v = _vision({"model_type": "qwen3_vl_moe", "vision_config": vc}, "Qwen/Qwen3-VL-235B-A22B-Instruct")
    assert v is not None and v.deepstack_mergers == 3
    assert vision_params(v, 4096) == (4_617_856 + 3 * (9_216 + 4_096), 451_392_624 + 3 * 40_112_640)


def test_tokens_per_image_by_hand():
    # preprocessor_config.json size.longest_edge 16,777,216 px (4096 x 4096); one token per 2 x 2 patches of 16 px:
    # 16,777,216 // 32^2 = 16,384 = 128 x 128 tokens, an aspect ratio of 1 (vLLM's closest factor pair), which
    # smart_resize keeps (its area is max_pixels); grid_t = 2 frames / temporal_patch_size 2 = 1, so the tower runs
    # over 256 x 256 = 65,536 patches
    v = load_model("Qwen/Qwen3.5-35B-A3B").vision
    assert (v.tokens_per_image, v.patches_per_image, v.image_size) == (16_384, 65_536, 4096)
    w = with_images(workload(), load_model("Qwen/Qwen3.5-35B-A3B"), 2)
    assert (w.prompt_tokens.p50, w.image_tokens_per_request) == (1000 + 2 * 16_384, 32_768)


def test_tower_peak_by_hand():
    v = load_model("Qwen/Qwen3.5-397B-A17B").vision
    # per patch, bf16: residual + normed input 2 x 1152, fc1 + GELU 2 x 4304 / TP (no gate), and held through every
    # block the interpolated position embeddings (1152) and the rotary cos + sin (2 x 36 = head_dim 72)
    assert tower_forward_peak(v, 65_536, 1, 2) == 65_536 * (2304 + 8608 + 1152 + 72) * 2 == 1_590_689_792
    # TP8: fc1 + GELU 2 x 538 = 1076 (above the attention's 4 x 1152 / 8 = 576)
    assert tower_forward_peak(v, 65_536, 8, 2) == 65_536 * (2304 + 1076 + 1152 + 72) * 2


def _with_and_without_tower(model_id: str, tp: int):
    d = deployment(model_id, gpu="H200-141GB", tp=tp)
    p = profile()
    with_tower = account(d, p)
    text_only = account(replace(d, target=d.target.with_(vision=None)), p)
    return with_tower, text_only


@pytest.mark.parametrize(("model_id", "tp"), [("Qwen/Qwen3.5-35B-A3B", 1), ("Qwen/Qwen3.5-397B-A17B", 8)])
def test_plan_on_h200_weights_are_text_plus_tower_and_the_encoder_is_profiled(model_id, tp):
    with_tower, text_only = _with_and_without_tower(model_id, tp)
    replicated, sharded = TOWER[model_id]
    # bf16 on each rank: the whole part plus 1/TP of the split part (451,392,624 / 8 = 56,424,078 for the 397B)
    tower_bytes = (replicated + sharded // tp) * 2
    assert sharded % tp == 0
    assert with_tower.weights_target.vision == tower_bytes
    assert with_tower.weights_target_bytes == text_only.weights_target_bytes + tower_bytes
    s = with_tower.settings
    assert (s.max_num_batched_tokens, s.max_num_seqs, s.max_model_len) == (8192, 1024, 262_144)
    # encoder budget max(8192, 16,384) = 16,384: one 16,384-token image of 65,536 patches (262,144 // 16,384 = 16
    # images per prompt, far above 1)
    e = encoder_profile(load_model(model_id).vision, 8192, 262_144, 1024)
    assert (e.budget_tokens, e.images, e.patches, e.cached_tokens) == (16_384, 1, 65_536, 16_384)
    terms = with_tower.activation_terms
    hidden = load_model(model_id).hidden_size
    pixels = 65_536 * 3 * 2 * 16 * 16 * 2  # 201,326,592 B: the dummy image's pixel values in bf16
    mlp = 2 * 4304 // tp
    tower = 65_536 * (2 * 1152 + mlp + 1152 + 72) * 2
    cached = 16_384 * hidden * 2  # the encoder cache: 16,384 embeddings of the language model's width
    assert (terms["encoder_pixels"], terms["encoder_forward"], terms["encoder_cache"]) == (pixels, tower + pixels,
                                                                                         cached)
    assert (terms["encoder_budget_tokens"], terms["encoder_images"]) == (16_384, 1)
    # two phases: the tower's forward, then the language model's with the cache and the pixels still held
    expected = max(tower + pixels, text_only.activation_peak_bytes + cached + pixels)
    assert abs(with_tower.activation_peak_bytes - expected) <= 2


@pytest.mark.parametrize(("model_id", "tp"), [("Qwen/Qwen3.5-35B-A3B", 1), ("Qwen/Qwen3.5-397B-A17B", 8)])
def test_plan_runs_from_the_cli(capsys, model_id, tp):
    code, out, _ = run_cli(capsys, "plan", "--target", model_id, "--gpu", "H200-141GB", "--tp", tp,
                           "--format", "json")
    assert code == 0
    per_gpu = json.loads(out)["per_gpu"]
    replicated, sharded = TOWER[model_id]
    assert per_gpu["weights_target_detail"]["vision"] == (replicated + sharded // tp) * 2


def _config(model_id: str) -> dict:
    org, name = model_id.split("/")
    return json.loads((ROOT / "tools" / "model-configs-extra" / org / name / "config.json").read_text())


@pytest.mark.parametrize(("field", "value", "needle"), [
    ("deepstack_visual_indexes", [8, 27], "deepstack_visual_indexes"),
    ("num_heads", 7, "num_heads"),
    ("out_hidden_size", None, "out_hidden_size"),
    ("patch_size", 4096, "patch_size"),
])
def test_a_malformed_tower_is_a_one_line_error(field, value, needle):
    raw = _config("Qwen/Qwen3.5-35B-A3B")
    raw["vision_config"][field] = value
    with pytest.raises(SpecError) as err:
        spec_from_config(raw, "Qwen/Qwen3.5-35B-A3B", "test")
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_weights_breakdown_counts_the_tower_once_per_rank():
    m = load_model("Qwen/Qwen3.5-35B-A3B")
    # TP2: 4,615,808 whole + 441,955,440 / 2 = 220,977,720 split, bf16
    assert weight_breakdown(m, tp=2).vision == (4_615_808 + 220_977_720) * 2
