"""Hunt 55: catalog additions for the GPUs and models teams run now: NVIDIA GH200 (96 GB HBM3 and 144 GB HBM3e GPU
sides), NVIDIA L20, and GLM-4.5 / GLM-4.5-Air / GLM-4.6 (glm4_moe), each number worked out by hand from the datasheet
or the published config dimensions and vLLM's model files (never the code's own output):

- vllm/model_executor/models/glm4_moe.py: Glm4MoeAttention (qkv_proj with bias, o_proj, q/k norms when use_qk_norm,
  rotary over partial_rotary_factor of each head), Glm4MoE (routed experts, one shared expert, a float32 router
  nn.Linear(hidden, n_routed_experts) and its float32 e_score_correction_bias), first_k_dense_replace dense layers;
- vllm/model_executor/models/glm4_moe_mtp.py: the MTP layer is one more decoder layer (MoE) plus enorm, hnorm and
  eh_proj (2H -> H), embedding and head shared with the target;
- vllm/model_executor/layers/rotary_embedding get_rope: one cos/sin cache of max_position x rotary_dim in the model
  dtype.
"""

import json

import pytest

from helpers import glm_params as _glm_params, listed_with_sources, run_cli as run
from specsize.catalog import load_gpu, load_model
from specsize.core.weights import total_params

GiB = 2**30
MiB = 2**20
BF16 = 2
FP32 = 4

NEW_GPUS = ["GH200-96GB", "GH200-144GB", "L20-48GB"]
NEW_MODELS = ["zai-org/GLM-4.5", "zai-org/GLM-4.5-Air", "zai-org/GLM-4.6"]


def test_the_new_gpus_and_models_are_listed_with_their_sources(capsys):
    for g in listed_with_sources(capsys, NEW_MODELS, NEW_GPUS):
        assert g.sources["memory"] and g.sources["performance"]


@pytest.mark.parametrize("gpu_id, family, memory_gib, bandwidth, bf16, fp8, link", [
    # GH200 GPU side: the H100 SXM's Hopper tensor cores (BF16 1,979 / FP8 3,958 TFLOPS with sparsity, halved);
    # 96 GB HBM3 at 4 TB/s; the CUDA total observed on a GH200 480GB: 97280 MiB = 95.00 GiB; NVLink 4 between
    # GH200s at 900 GB/s both ways (not NVLink-C2C, the CPU link)
    ("GH200-96GB", "hopper", 97280 * MiB / GiB, 4.0e12, 1979e12 / 2, 3958e12 / 2, 900e9 / 2),
    # 144 GB HBM3e at 4.9 TB/s; 146831 MiB in nvidia-smi less 97871 - 97280 = 591 MiB of driver reservation
    ("GH200-144GB", "hopper", round((146831 - (97871 - 97280)) / 1024, 2), 4.9e12, 1979e12 / 2, 3958e12 / 2,
     900e9 / 2),
    # L20: Ada, 864 GB/s GDDR6, 119.5 TFLOPS dense FP16/BF16 and twice that in FP8, PCIe Gen4 x16 64 GB/s both ways;
    # PyTorch's 'total capacity of 44.53 GiB' on an NVIDIA L20 (the CUDA total vLLM budgets from)
    ("L20-48GB", "ada", 44.53, 864e9, 119.5e12, 2 * 119.5e12, 64e9 / 2),
])
def test_new_gpu_rows_hold_the_datasheet_figures(gpu_id, family, memory_gib, bandwidth, bf16, fp8, link):
    g = load_gpu(gpu_id)
    assert g.family == family  # picks the calibrated efficiency row of its architecture
    assert g.memory_bytes == round(memory_gib * GiB)
    assert g.memory_bandwidth_bytes_s == pytest.approx(bandwidth)
    assert g.bf16_flops == pytest.approx(bf16, rel=1e-3)
    assert g.fp8_flops == pytest.approx(fp8, rel=1e-3)
    assert g.interconnect_bytes_s == pytest.approx(link)


def test_gh200_memory_is_the_gpu_side_only():
    """The '480GB' of the nvidia-smi name is the Grace CPU's LPDDR5X: the row holds only the HBM the engine sees."""
    assert load_gpu("GH200-96GB").memory_bytes == 97280 * MiB
    # below nvidia-smi's 146831 MiB (the driver keeps some) and nowhere near the superchip's 480 / 624 GB
    assert 140 * GiB < load_gpu("GH200-144GB").memory_bytes < 146831 * MiB


@pytest.mark.parametrize("gpu_id", NEW_GPUS)
def test_a_plan_runs_end_to_end_on_each_new_gpu(capsys, gpu_id):
    code, out, err = run(capsys, "plan", "--target", "Qwen/Qwen3-8B", "--gpu", gpu_id, "--max-model-len", "32768",
                         "--format", "json")
    assert code == 0, err
    per_gpu = json.loads(out)["per_gpu"]
    assert per_gpu["total_bytes"] == load_gpu(gpu_id).memory_bytes
    assert per_gpu["budget_bytes"] == int(load_gpu(gpu_id).memory_bytes * 0.92)  # vLLM's default from 0.20


# --- GLM-4.5-Air by hand from its config.json --------------------------------------------------------------------

AIR = dict(h=4096, layers=46, dense=1, heads=96, kv_heads=8, d=128, inter=10944, experts=128, moe_inter=1408,
           vocab=151552, qk_norm=False)


def test_glm45_air_is_read_as_its_config_says():
    m = load_model("zai-org/GLM-4.5-Air")
    assert (m.num_layers, m.num_kv_heads, m.head_dim, m.max_position_embeddings) == (46, 8, 128, 131072)
    assert m.moe is not None and len(m.moe.moe_layers) == 45 and m.moe.moe_layers[0] == 1
    assert m.rotary_dim == 64 and not m.qk_norm and m.attention_bias and m.num_mtp_layers == 1


def test_glm45_air_weights_at_tp1_bf16_by_hand(capsys):
    params = _glm_params(**AIR)
    # attention 14,336 x 4,096 + 14,336 bias + 12,288 x 4,096 = 109,066,240; + 8,192 of norms; dense MLP
    # 134,479,872; MoE layer 128 x 17,301,504 + 17,301,504 + 524,288 router + 128 bias = 2,232,418,432;
    # 2 x 151,552 x 4,096 = 1,241,513,984 of embedding and head; 4,096 of final norm: 106.85B, the model card's
    # "106 billion total parameters"
    assert params == 46 * (109_066_240 + 8192) + 134_479_872 + 45 * 2_232_418_432 + 1_241_513_984 + 4096
    assert params == 106_852_251_264
    code, out, err = run(capsys, "plan", "--target", "zai-org/GLM-4.5-Air", "--gpu", "GH200-144GB",
                         "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    # bf16 weights, the 45 float32 routers and score-correction biases twice as wide, and the rotary cache of
    # 131,072 positions x 64 rotary dims in bf16
    router_extra = 45 * (128 * 4096 + 128) * (FP32 - BF16)
    assert plan["per_gpu"]["weights_target_bytes"] == params * BF16 + router_extra + 131072 * 64 * BF16
    assert plan["per_gpu"]["weights_target_bytes"] == 213_768_477_184  # 199.09 GiB: one GH200 cannot hold it
    assert plan["verdict"] != "fits"
    # KV per token: 46 layers x K and V x 8 KV heads x 128 x 2 bytes
    assert plan["kv_bytes_per_token"]["target"] == 46 * 2 * 8 * 128 * BF16 == 188_416


def test_glm45_air_plans_its_mtp_layer_as_the_drafter(capsys):
    code, out, err = run(capsys, "plan", "--target", "zai-org/GLM-4.5-Air", "--method", "mtp", "--gpu",
                         "GH200-144GB", "--tp", "2", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    h = 4096
    qkv = (96 + 16) * 128
    attention = qkv * h + qkv + 96 * 128 * h
    moe = 128 * 3 * h * 1408 + 3 * h * 1408 + 128 * h + 128
    mtp = attention + 2 * h + moe + 2 * h + 2 * h * h  # decoder layer + enorm/hnorm + eh_proj; embedding/head shared
    assert mtp == 2_375_055_488
    # at TP 2 the MTP layer's linear weights split in two (the router, norms and biases are replicated); compare the
    # whole at TP 1 below and only the KV here: one more attention layer, 4 of the 8 KV heads per GPU
    assert plan["kv_bytes_per_token"]["target"] == 46 * 2 * 4 * 128 * BF16
    assert plan["kv_bytes_per_token"]["draft"] == 1 * 2 * 4 * 128 * BF16
    code, out, _ = run(capsys, "plan", "--target", "zai-org/GLM-4.5-Air", "--method", "mtp", "--gpu", "GH200-144GB",
                       "--format", "json")
    assert code == 0
    draft = json.loads(out)["per_gpu"]["weights_draft_bytes"]
    assert draft == mtp * BF16 + (128 * h + 128) * (FP32 - BF16)


# --- GLM-4.5 and GLM-4.6: the same layers, 131,072 against 202,752 tokens of context ------------------------------

def test_glm45_and_glm46_count_the_parameters_of_their_dimensions():
    by_hand = _glm_params(5120, 92, 3, 96, 8, 128, 12288, 160, 1536, 151552, True)
    assert by_hand == 352_797_829_024  # within 0.7% of the model cards' round 355B
    for model_id, context in (("zai-org/GLM-4.5", 131072), ("zai-org/GLM-4.6", 202752)):
        m = load_model(model_id)
        assert m.max_position_embeddings == context
        assert m.moe is not None and len(m.moe.moe_layers) == 89 and m.moe.moe_layers[0] == 3
        assert m.rotary_dim == 64 and m.qk_norm and m.attention_bias and m.num_mtp_layers == 1
        assert total_params(m) == by_hand


@pytest.mark.parametrize("model_id", ["zai-org/GLM-4.5", "zai-org/GLM-4.6"])
def test_glm45_and_46_plan_with_mtp_on_eight_h200(capsys, model_id):
    code, out, err = run(capsys, "plan", "--target", model_id, "--method", "mtp", "--gpu", "H200-141GB", "--tp", "8",
                         "--max-model-len", "131072", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    # 92 layers + the MTP layer, each K and V of 1 of the 8 KV heads per GPU at TP 8
    assert plan["kv_bytes_per_token"]["target"] == 92 * 2 * 1 * 128 * BF16 == 47_104
    assert plan["kv_bytes_per_token"]["draft"] == 1 * 2 * 1 * 128 * BF16
    assert plan["verdict"] == "fits"
