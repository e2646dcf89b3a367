"""Qwen3-VL (model types qwen3_vl / qwen3_vl_moe, text_config qwen3_vl_text / qwen3_vl_moe_text): planned.

The configs are Qwen's published config.json files as ai-dynamo/aiconfigurator vendors them (a fork's copy,
tools/model-configs-extra/Qwen/Qwen3-VL-*/source.json). Every expected figure is worked out by hand below from those
configs and vLLM 0.32's source: model_executor/models/qwen3_vl.py (Qwen3VLForConditionalGeneration, whose language
model Qwen3LLMForCausalLM is qwen3.py's Qwen3ForCausalLM: q_proj / k_proj / v_proj / o_proj without biases, q_norm and
k_norm RMSNorms over head_dim, a gated SiLU MLP, two RMSNorms a layer, ParallelLMHead tied only if
text_config.tie_word_embeddings) and qwen3_vl_moe.py (Qwen3MoeLLMForCausalLM over qwen3_moe.py's layers: 128 routed
experts, a bias-free router, no shared expert); the rotary cache is get_rope's MRotaryEmbedding over
max_position_embeddings x head_dim (mrope_positions_factor 1 without video pruning); the deepstack buffers are
Qwen3VL(Moe)ForConditionalGeneration.__init__'s `deepstack_input_embeds`.
"""

from __future__ import annotations

import json

import pytest

from specsize.catalog import load_model
from specsize.core.memory import account
from specsize.core.multimodal import deepstack_buffer_bytes
from specsize.core.weights import total_params, weight_breakdown

from helpers import ROOT, deployment, profile, run_cli

VL_8B, VL_30B, VL_235B = "Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3-VL-235B-A22B-Instruct"

# The vision towers (Qwen3.5's tower, test_qwen35_vision.py, plus three deepstack mergers, deepstack_visual_indexes
# [8, 16, 24]): whole 4,613,760 + out + 3 x (LayerNorm 2 x 4608 + fc2 bias out); split 432,518,256 + 4608 x out
# + 3 x (4608^2 + 4608 + 4608 x out).
#   out 4096: 4,617,856 + 3 x 13,312 = 4,657,792;  451,392,624 + 3 x 40,112,640 = 571,730,544
#   out 2048: 4,615,808 + 3 x 11,264 = 4,649,600;  441,955,440 + 3 x 30,675,456 = 533,981,808
TOWER_4096 = 4_657_792 + 571_730_544
TOWER_2048 = 4_649_600 + 533_981_808

# Parameters of the whole checkpoint. vocab 151,936 is a multiple of 64 (2,374 x 64): no padding.
PARAMS = {
    # 8B, dense, hidden 4096, 36 layers, 32 heads / 8 KV of 128, intermediate 12,288, untied:
    #   embed_tokens + lm_head 2 x 151,936 x 4096                      = 1,244,659,712
    #   a layer: q 4096 x 4096 16,777,216 + k, v 2 x 4096 x 1024 8,388,608 + o 16,777,216 = 41,943,040
    #            + q_norm, k_norm 2 x 128 = 256; MLP 3 x 4096 x 12,288 = 150,994,944; 2 norms 8,192
    #            = 192,946,432; x 36                                   = 6,946,071,552
    #   final norm 4,096; the tower 576,388,336
    #   1,244,659,712 + 6,946,071,552 + 4,096 + 576,388,336            = 8,767,123,696 (the card: 8.77B)
    VL_8B: 1_244_659_712 + 36 * (41_943_040 + 256 + 150_994_944 + 8_192) + 4_096 + TOWER_4096,
    # 30B-A3B, hidden 2048, 48 layers, 32 heads / 4 KV of 128, 128 experts of 768 in every layer, untied:
    #   embed_tokens + lm_head 2 x 151,936 x 2048                      = 622,329,856
    #   a layer: q 2048 x 4096 8,388,608 + k, v 2 x 2048 x 512 2,097,152 + o 8,388,608 = 18,874,368 + q/k norm 256;
    #            experts 128 x 3 x 2048 x 768 = 603,979,776; router 2048 x 128 = 262,144; 2 norms 4,096
    #            = 623,120,640; x 48                                   = 29,909,790,720
    #   final norm 2,048; the tower 538,631,408
    #   622,329,856 + 29,909,790,720 + 2,048 + 538,631,408             = 31,070,754,032
    VL_30B: 622_329_856 + 48 * (18_874_368 + 256 + 603_979_776 + 262_144 + 4_096) + 2_048 + TOWER_2048,
    # 235B-A22B, hidden 4096, 94 layers, 64 heads / 4 KV of 128, 128 experts of 1536, untied:
    #   embed_tokens + lm_head 2 x 151,936 x 4096                      = 1,244,659,712
    #   a layer: q 4096 x 8192 33,554,432 + k, v 2 x 4096 x 512 4,194,304 + o 33,554,432 = 71,303,168 + 256;
    #            experts 128 x 3 x 4096 x 1536 = 2,415,919,104; router 4096 x 128 = 524,288; 2 norms 8,192
    #            = 2,487,755,008; x 94                                 = 233,848,970,752
    #   final norm 4,096; the tower 576,388,336
    #   1,244,659,712 + 233,848,970,752 + 4,096 + 576,388,336          = 235,670,022,896
    VL_235B: 1_244_659_712 + 94 * (71_303_168 + 256 + 2_415_919_104 + 524_288 + 8_192) + 4_096 + TOWER_4096,
}

# (GPU, TP, KV bytes per token per rank in bf16: layers x 2 (K and V) x KV heads per rank x 128 x 2 bytes)
PLANS = {
    VL_8B: ("H100-SXM-80GB", 1, 36 * 2 * 8 * 128 * 2),  # 147,456
    VL_30B: ("H200-141GB", 1, 48 * 2 * 4 * 128 * 2),  # 98,304
    VL_235B: ("H200-141GB", 8, 94 * 2 * 1 * 128 * 2),  # 48,128: 4 KV heads over 8 ranks, one (replicated) each
}
ROTARY = 262_144 * 128 * 2  # the MRoPE cos/sin cache: 262,144 positions x head_dim 128 (cos + sin) in bf16, 64 MiB


def test_the_values_by_hand():
    assert PARAMS == {VL_8B: 8_767_123_696, VL_30B: 31_070_754_032, VL_235B: 235_670_022_896}


@pytest.mark.parametrize("model_id", list(PARAMS))
def test_text_model_and_tower_are_read(model_id):
    m = load_model(model_id)
    assert m.model_type == ("qwen3_vl_text" if model_id == VL_8B else "qwen3_vl_moe_text")
    assert m.qk_norm and not m.tie_word_embeddings and not m.attention_bias
    assert m.vision is not None and m.vision.kind == "qwen3_vl" and m.vision.deepstack_mergers == 3
    assert (m.rotary_dim, m.max_position_embeddings, sum(m.rotary_cache_positions) or 262_144) == (128, 262_144,
                                                                                                   262_144)
    if model_id != VL_8B:
        assert m.moe is not None and (m.moe.num_experts, m.moe.experts_per_token, m.moe.num_shared_experts) == (128, 8,
                                                                                                               0)
        assert len(m.moe.moe_layers) == m.num_layers  # decoder_sparse_step 1, mlp_only_layers []


@pytest.mark.parametrize("model_id", list(PARAMS))
def test_parameters_by_hand(model_id):
    assert total_params(load_model(model_id)) == PARAMS[model_id]


@pytest.mark.parametrize("model_id", list(PLANS))
def test_kv_bytes_per_token_by_hand(model_id):
    gpu, tp, per_token = PLANS[model_id]
    assert account(deployment(model_id, gpu=gpu, tp=tp), profile()).kv_bytes_per_token_target == per_token


def test_deepstack_buffers_by_hand():
    # three levels (deepstack_visual_indexes [8, 16, 24]) of torch.zeros(max_num_batched_tokens, text hidden) in the
    # model dtype (bf16, 2 bytes): 3 x 8192 x 4096 x 2 = 201,326,592 (192 MiB); 3 x 8192 x 2048 x 2 = 100,663,296
    assert deepstack_buffer_bytes(load_model(VL_8B), 8192, 2) == 201_326_592
    assert deepstack_buffer_bytes(load_model(VL_30B), 8192, 2) == 100_663_296
    assert deepstack_buffer_bytes(load_model(VL_235B), 16_384, 2) == 3 * 16_384 * 4096 * 2 == 402_653_184
    # Qwen3.5 reuses the tower with deepstack_visual_indexes []: no buffer; a text model has none either
    assert deepstack_buffer_bytes(load_model("Qwen/Qwen3.5-35B-A3B"), 8192, 2) == 0
    assert deepstack_buffer_bytes(load_model("Qwen/Qwen3-8B"), 8192, 2) == 0


@pytest.mark.parametrize("model_id", list(PLANS))
@pytest.mark.parametrize("tokens", [8192, 16_384])
def test_the_weights_figure_holds_the_rotary_cache_and_the_deepstack_buffers(model_id, tokens):
    gpu, tp, _ = PLANS[model_id]
    m = load_model(model_id)
    a = account(deployment(model_id, gpu=gpu, tp=tp, max_num_batched_tokens=tokens), profile())
    assert a.settings.max_num_batched_tokens == tokens
    deepstack = 3 * tokens * m.hidden_size * 2  # whole on every TP rank
    assert a.weights_target.buffers == ROTARY + deepstack
    assert a.weights_target_bytes == weight_breakdown(m, tp).total + deepstack


@pytest.mark.parametrize("model_id", list(PLANS))
def test_plan_from_the_catalog(capsys, model_id):
    gpu, tp, _ = PLANS[model_id]
    code, out, _ = run_cli(capsys, "plan", "--target", model_id, "--gpu", gpu, "--tp", tp, "--format", "json")
    assert code == 0
    assert json.loads(out)["per_gpu"]["weights_target_detail"]["vision"] > 0


@pytest.mark.parametrize("model_id", list(PLANS))
def test_plan_from_a_config_file(capsys, model_id):
    gpu, tp, _ = PLANS[model_id]
    org, name = model_id.split("/")
    path = ROOT / "tools" / "model-configs-extra" / org / name / "config.json"
    code, _, err = run_cli(capsys, "plan", "--target", path, "--gpu", gpu, "--tp", tp)
    assert code == 0, err


def test_vllm_loads_qwen3_vl_from_0_11_0(capsys):
    # vllm/model_executor/models/registry.py registers Qwen3VLForConditionalGeneration and
    # Qwen3VLMoeForConditionalGeneration from 0.11.0 (absent from 0.10.2's sdist): an older release is refused by name
    for model_id in ("Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct"):
        code, _, err = run_cli(capsys, "plan", "--target", model_id, "--gpu", "H200-141GB", "--engine-version", "0.10.2")
        assert code == 2 and "engine_version:" in err and "the first release that does is 0.11.0" in err, err
        code, _, err = run_cli(capsys, "plan", "--target", model_id, "--gpu", "H200-141GB", "--engine-version", "0.11.0")
        assert code == 0, err


def test_a_qwen3_vl_draft_model_keeps_its_deepstack_buffers_too():
    # vLLM 0.32 config/speculative.py builds the draft's ModelConfig with its multimodal config: a Qwen3-VL draft
    # model builds its tower and its three deepstack buffers (3 x max_num_batched_tokens x 4096 x 2 B, whole on each
    # rank), as the target does (the review of stop 62)
    from specsize.core.memory import draft_weight_bytes

    d = deployment(VL_235B, gpu="H200-141GB", tp=8, draft=VL_8B, method="draft_model", k=3)
    a = account(d, profile("0.32"))
    tokens = a.settings.max_num_batched_tokens
    assert a.weights_draft_bytes - draft_weight_bytes(d, a.settings) == 3 * tokens * 4096 * 2
    assert tokens == 8192 and 3 * tokens * 4096 * 2 == 201_326_592
