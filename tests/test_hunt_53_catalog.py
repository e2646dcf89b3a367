"""Hunt 53: catalog additions for the models and GPUs teams run in late 2026, each checked against numbers worked out
by hand from the published config.json / safetensors index and from vLLM's source (never the code's own output).

vLLM sources read for the expectations:
- vllm/model_executor/models/llama_eagle3.py (LlamaDecoderLayer: qkv_proj takes 2 x hidden; LlamaModel: fc a
  ReplicatedLinear 3 x hidden -> hidden, norm; Eagle3LlamaForCausalLM: ParallelLMHead over draft_vocab_size; the
  embedding is the target's, shared by the EAGLE proposer);
- vllm/model_executor/layers/rotary_embedding (get_rope: one cos/sin cache buffer of max_position x rotary_dim in the
  model dtype per distinct rope key);
- MLA (ModelConfig.is_deepseek_mla): one latent of kv_lora_rank + qk_rope_head_dim values per token and layer, not
  sharded by TP.
"""

import json

import pytest

from helpers import deployment, listed_with_sources, profile, run_cli as run
from specsize.catalog import load_gpu, load_model
from specsize.core.memory import account

GiB = 2**30
BF16 = 2

NEW_MODELS = ["Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3-Coder-480B-A35B-Instruct",
              "sgl-project/SpecForge-gpt-oss-120B-eagle3", "sgl-project/SpecForge-gpt-oss-20B-eagle3",
              "sgl-project/SpecForge-qwen3-235B-A22B-eagle3", "sgl-project/SpecForge-qwen3-30B-A3B-eagle3",
              "sgl-project/SpecForge-qwen3-8b-eagle3", "sgl-project/SpecForge-qwen3-32b-eagle3",
              "sgl-project/SpecForge-qwen3-coder-30B-A3B-instruct-eagle3",
              "sgl-project/SpecForge-qwen3-coder-480B-A35B-instruct-eagle3",
              "sgl-project/SpecForge-deepseek-v3-671b-eagle3"]
NEW_GPUS = ["H100-NVL-94GB", "H800-SXM-80GB", "A800-80GB", "L40-48GB"]


def test_the_new_entries_are_listed_offline_with_their_sources(capsys):
    for g in listed_with_sources(capsys, NEW_MODELS, NEW_GPUS):
        assert g.sources["memory"] and g.family in ("hopper", "ampere", "ada")


# --- Qwen3-Coder-30B-A3B-Instruct: the published safetensors index says 61,064,245,248 bytes of bf16 ---------------

def _qwen3_coder_30b_params() -> int:
    """By hand from config.json: 48 layers, hidden 2048, 32 Q / 4 KV heads of 128, 128 experts of 768, vocab 151,936,
    untied lm_head, q/k RMSNorms of head_dim."""
    hidden, vocab, layers = 2048, 151936, 48
    attention = hidden * 32 * 128 + 2 * hidden * 4 * 128 + 32 * 128 * hidden
    experts = 128 * 3 * hidden * 768
    router = hidden * 128
    norms = 2 * hidden + 2 * 128
    return layers * (attention + experts + router + norms) + 2 * vocab * hidden + hidden


def test_qwen3_coder_30b_parameters_match_the_published_checkpoint():
    # ztxz16/fastllm @ f8f04c33, Qwen3-Coder-30B-A3B-Instruct/model.safetensors.index.json: total_size 61064245248
    assert _qwen3_coder_30b_params() * BF16 == 61_064_245_248
    m = load_model("Qwen/Qwen3-Coder-30B-A3B-Instruct")
    assert (m.num_layers, m.num_kv_heads, m.head_dim, m.max_position_embeddings) == (48, 4, 128, 262144)
    assert m.moe.num_experts == 128 and m.moe.experts_per_token == 8 and m.moe.num_shared_experts == 0


def test_qwen3_coder_30b_weights_and_kv_per_token_on_one_h100():
    acc = account(deployment("Qwen/Qwen3-Coder-30B-A3B-Instruct", max_model_len=32768), profile())
    # the checkpoint's bytes plus vLLM's one rotary cos/sin cache: 262,144 positions x 128 dims in bf16
    assert acc.weights_target_bytes == 61_064_245_248 + 262144 * 128 * BF16
    # 48 layers x K and V x 4 KV heads x 128 x 2 bytes
    assert acc.kv_bytes_per_token == 48 * 2 * 4 * 128 * BF16 == 98_304


def test_qwen3_coder_480b_at_tp8_by_hand():
    """62 layers, hidden 6144, 96 Q / 8 KV heads of 128, 160 experts of 2560, vocab 151,936: 480.15B parameters (the
    name's 480B); per rank at TP 8 the attention, experts, embedding and lm_head shard 8 ways, the router and the
    norms replicate, and one KV head is left a rank."""
    hidden, vocab, layers, tp = 6144, 151936, 62, 8
    attention = hidden * 96 * 128 * 2 + 2 * hidden * 8 * 128
    experts = 160 * 3 * hidden * 2560
    router, norms = hidden * 160, 2 * hidden + 2 * 128
    total = layers * (attention + experts + router + norms) + 2 * vocab * hidden + hidden
    assert 480.0e9 < total < 480.3e9
    per_rank = layers * ((attention + experts) // tp + router + norms) + 2 * vocab * hidden // tp + hidden
    acc = account(deployment("Qwen/Qwen3-Coder-480B-A35B-Instruct", gpu="H200-141GB", tp=tp, max_model_len=32768),
                  profile())
    assert acc.weights_target_bytes == per_rank * BF16 + 262144 * 128 * BF16
    assert acc.kv_bytes_per_token == layers * 2 * 1 * 128 * BF16 == 31_744


# --- EAGLE-3 heads (SpecForge draft configs) ------------------------------------------------------------------------

def _eagle3_head_bytes(hidden, q_heads, kv_heads, head_dim, inter, draft_vocab, tp, rope_positions) -> int:
    """Per rank, bf16, from llama_eagle3.py: qkv 2H -> (q + 2 kv) heads, o, gate/up/down, all TP-sharded; fc 3H -> H
    replicated; lm_head over the draft vocabulary sharded; 4 RMSNorms of H; the embedding is the target's. Plus the
    head's own rotary cache (its max_position_embeddings x head_dim)."""
    qkv = 2 * hidden * (q_heads + 2 * kv_heads) * head_dim
    o = q_heads * head_dim * hidden
    mlp = 3 * hidden * inter
    params = (qkv + o + mlp) // tp + 3 * hidden * hidden + draft_vocab * hidden // tp + 4 * hidden
    return params * BF16 + rope_positions * head_dim * BF16


def test_gpt_oss_120b_eagle3_head_at_tp2():
    d = deployment("openai/gpt-oss-120b", tp=2, draft="sgl-project/SpecForge-gpt-oss-120B-eagle3", method="eagle3",
                   k=3, max_model_len=32768)
    acc = account(d, profile())
    assert acc.weights_draft_bytes == _eagle3_head_bytes(2880, 64, 8, 64, 17280, 32000, 2, 4096)
    # target: 36 layers x 2 x (8 / 2) KV heads x 64 x 2 bytes; head: its one layer alike
    assert acc.kv_bytes_per_token == 36 * 2 * 4 * 64 * BF16 + 1 * 2 * 4 * 64 * BF16 == 37_888


def test_qwen3_coder_480b_eagle3_head_at_tp8():
    d = deployment("Qwen/Qwen3-Coder-480B-A35B-Instruct", gpu="H200-141GB", tp=8,
                   draft="sgl-project/SpecForge-qwen3-coder-480B-A35B-instruct-eagle3", method="eagle3", k=3,
                   max_model_len=32768)
    acc = account(d, profile())
    # its rope theta (1e6) differs from the target's (1e7): its own 262,144 x 128 cache, not the target's shared one
    assert acc.weights_draft_bytes == _eagle3_head_bytes(6144, 96, 8, 128, 16384, 32000, 8, 262144)
    assert acc.kv_bytes_per_token == 62 * 2 * 1 * 128 * BF16 + 2 * 1 * 128 * BF16


def test_deepseek_v3_with_a_gqa_eagle3_head_keeps_the_mla_latent_and_adds_the_heads_kv():
    d = deployment("deepseek-ai/DeepSeek-V3", gpu="H200-141GB", tp=8,
                   draft="sgl-project/SpecForge-deepseek-v3-671b-eagle3", method="eagle3", k=3, max_model_len=32768)
    acc = account(d, profile())
    # 61 layers of (512 + 64) latent values x 2 bytes, whole on every rank (the MTP layer is not served with EAGLE-3);
    # the head: 2 x (8 / 8) KV heads x head_dim 7168 / 56 = 128
    assert acc.kv_bytes_per_token == 61 * (512 + 64) * BF16 + 2 * 1 * 128 * BF16 == 70_784


@pytest.mark.parametrize("model_id", [m for m in NEW_MODELS if "SpecForge" in m])
def test_every_new_head_is_an_eagle3_head_with_a_32k_draft_vocabulary(model_id):
    head = load_model(model_id)
    assert head.num_layers == 1 and head.eagle_fc_inputs == 3 and head.draft_vocab_size == 32000


# --- GPUs -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gpu_id,memory_gib,bandwidth,bf16,fp8,link", [
    # H100 NVL: observed 93.00 GiB; 3.9 TB/s; 1,671 / 3,341 TFLOPS with sparsity halved; NVLink bridge 600 GB/s both ways
    ("H100-NVL-94GB", 93.00, 3.9e12, 1671e12 / 2, 3341e12 / 2, 600e9 / 2),
    # H800 SXM: the H100 SXM's 80 GB and FLOPS, NVLink 400 GB/s both ways
    ("H800-SXM-80GB", 79.19, 3.35e12, 1979e12 / 2, 3958e12 / 2, 400e9 / 2),
    # A800 80GB SXM: the A100 80GB's memory and 312 TFLOPS dense, no FP8, NVLink 400 GB/s both ways
    ("A800-80GB", 79.15, 2.039e12, 312e12, None, 400e9 / 2),
    # L40: 864 GB/s, 362.1 / 724 TFLOPS with sparsity halved, PCIe Gen4 x16 64 GB/s both ways
    ("L40-48GB", 44.39, 864e9, 362.1e12 / 2, 724e12 / 2, 64e9 / 2),
])
def test_new_gpu_rows_hold_the_datasheet_figures(gpu_id, memory_gib, bandwidth, bf16, fp8, link):
    g = load_gpu(gpu_id)
    assert g.memory_bytes == round(memory_gib * GiB)
    assert g.memory_bandwidth_bytes_s == pytest.approx(bandwidth)
    # NVIDIA prints the sparse figure rounded to a TFLOPS: its half is the dense one to 0.1%
    assert g.bf16_flops == pytest.approx(bf16, rel=1e-3)
    assert g.fp8_flops == (None if fp8 is None else pytest.approx(fp8, rel=1e-3))
    assert g.interconnect_bytes_s == pytest.approx(link)


def test_a_plan_on_the_h100_nvl_budgets_its_93_gib(capsys):
    code, out, _ = run(capsys, "plan", "--target", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "--gpu", "H100-NVL-94GB",
                       "--max-model-len", "32768", "--format", "json")
    assert code == 0
    per_gpu = json.loads(out)["per_gpu"]
    assert per_gpu["total_bytes"] == 93 * GiB
    assert per_gpu["budget_bytes"] == int(93 * GiB * 0.92)  # vLLM's default utilization from 0.20


# --- a head offered as a fix must be one trained for the target ----------------------------------------------------

def test_the_eagle3_head_a_fix_offers_for_qwen3_8b_is_the_qwen3_8b_head(capsys):
    """A head had been matched to the target by vocabulary and hidden size alone, the first in file order: Qwen3-8B
    (hidden 4096) was offered the Qwen3-235B-A22B head (64 Q / 4 KV heads), not its own (32 / 8)."""
    code, out, _ = run(capsys, "plan", "--target", "Qwen/Qwen3-8B", "--draft", "Qwen/Qwen3-0.6B", "-k", "3",
                       "--gpu", "L4-24GB", "--max-model-len", "32768", "--format", "json")
    assert code == 0
    offered = {r["changes"]["draft"] for r in json.loads(out)["recommendations"] if r["action"] == "eagle_head"}
    # the head whose attention is the target's own (32 Q / 8 KV heads of 128): SpecForge's qwen3-8b config
    assert offered <= {"sgl-project/SpecForge-qwen3-8b-eagle3"}


# --- Kimi K2: model_type kimi_k2 on DeepseekV3ForCausalLM (vLLM's ModelConfig.is_deepseek_mla lists it) ----------

def test_kimi_k2_is_planned_as_the_deepseek_v3_architecture_it_is():
    """It had been refused as an unknown model_type. By hand from its config.json: 61 layers of MLA (q_a 7168x1536,
    q_b 1536 x 64 x 192, kv_a 7168 x 576, kv_b 512 x 64 x 256, o 8192 x 7168, the two latent norms), one dense
    layer of 18,432, 60 MoE layers of 384 + 1 shared experts of 2,048 with a 384-wide router and its 384 score-
    correction biases, 163,840-token untied embeddings: 1,026,408,232,448 parameters (the published 1.03T)."""
    from specsize.core.weights import total_params

    h, layers, vocab, heads = 7168, 61, 163840, 64
    attention = h * 1536 + 1536 + 1536 * heads * 192 + h * 576 + 512 + 512 * heads * 256 + heads * 128 * h
    moe_layer = 384 * 3 * h * 2048 + 3 * h * 2048 + 384 * h + 384
    by_hand = layers * (attention + 2 * h) + 3 * h * 18432 + 60 * moe_layer + 2 * vocab * h + h
    assert by_hand == 1_026_408_232_448
    m = load_model("moonshotai/Kimi-K2-Instruct")
    assert m.mla is not None and m.moe.num_experts == 384 and len(m.moe.moe_layers) == 60
    assert total_params(m) == by_hand
    acc = account(deployment("moonshotai/Kimi-K2-Instruct", gpu="H200-141GB", tp=8, max_model_len=32768), profile())
    assert acc.kv_bytes_per_token == 61 * 576 * 2  # the MLA latent, every rank whole
