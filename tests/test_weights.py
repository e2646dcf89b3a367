"""Weight bytes per rank, against figures derived by hand from the architecture (comments show the sums)."""

from specsize.catalog import load_model
from specsize.catalog.models import catalog_entry
from specsize.catalog.configs import spec_from_config
from specsize.core.specs import Quantization
from specsize.core.weights import linear_bytes, total_params, weight_breakdown

from helpers import llama_405b_meta_fp8


def test_llama_3_2_1b_gqa_tied_embeddings():
    # vocab 128256 (a multiple of 64: no padding) x hidden 2048, tied: counted once = 262,668,288
    # per layer: q 2048x2048 + k,v 2 x 2048x512 + o 2048x2048 = 10,485,760; MLP 3 x 2048 x 8192 = 50,331,648;
    # 2 norms 4,096 -> 60,821,504 x 16 layers = 973,144,064; final norm 2,048
    m = load_model("meta-llama/Llama-3.2-1B-Instruct")
    w = weight_breakdown(m)
    assert w.params == 262_668_288 + 973_144_064 + 2_048 == 1_235_814_400
    assert w.lm_head == 0
    # bf16 x 2 bytes + rotary cos/sin cache 131072 positions x 64 dims x 2 bytes
    assert w.total == 1_235_814_400 * 2 + 131_072 * 64 * 2 == 2_488_406_016


def test_mixtral_moe_tp2_matches_vllm_log():
    # per rank: embedding and lm_head 16000 x 4096 each; per layer attention (q 2048, kv 4 heads x 128 per rank)
    # 4096x2048 + 2 x 4096x512 + 2048x4096 = 20,971,520; experts 8 x 3 x 4096 x 7168 = 704,643,072;
    # router 8 x 4096; norms 8,192 -> 725,655,552 x 32; final norm 4,096
    m = load_model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    w = weight_breakdown(m, tp=2)
    params = 2 * 16_000 * 4_096 + 32 * (20_971_520 + 704_643_072 + 32_768 + 8_192) + 4_096
    assert w.params == params == 23_352_053_760
    assert w.total == params * 2 + 32_768 * 128 * 2  # + rotary cache
    # vLLM 0.19 printed "weights memory: 43.51GiB" for this checkpoint at TP2 (calibration row)
    assert abs(w.total / 2**30 - 43.51) < 0.01


def test_llama_70b_tp8_per_rank():
    # vocab rows per rank 128256/8 = 16032; 1 KV head per rank; MLP 28672/8 = 3584 per rank
    m = load_model("meta-llama/Llama-3.1-70B-Instruct")
    w = weight_breakdown(m, tp=8)
    layer = 8192 * 1024 + 2 * 8192 * 128 + 1024 * 8192 + 3 * 8192 * 3584 + 2 * 8192
    params = 2 * 16_032 * 8_192 + 80 * layer + 8_192
    assert w.params == params == 8_820_367_360
    assert w.total == params * 2 + 131_072 * 128 * 2 == 17_674_289_152


def test_int4_awq_group128_with_zeros():
    cfg = dict(catalog_entry("meta-llama/Llama-3.1-8B-Instruct")["config"])
    cfg.update(torch_dtype="float16",
               quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True})
    m = spec_from_config(cfg, "llama-8b-awq", "test")
    assert m.quantization == Quantization("int4", group_size=128, has_zeros=True, config_method="awq")
    # fused qkv 6144x4096: 12,582,912 packed + 32 groups x 6144 x 2 B scales + 196,608 / 2 B zeros = 13,074,432
    assert linear_bytes(6144, 4096, 2, m.quantization) == 13_074_432
    layer = 13_074_432 + 8_716_288 + 61_014_016 + 30_507_008 + 2 * 4096 * 2  # qkv, o, gate_up, down, norms
    expected = 32 * layer + 2 * 128_256 * 4_096 * 2 + 4_096 * 2 + 131_072 * 128 * 2
    assert weight_breakdown(m).total == expected == 5_761_409_024


def test_fp8_block_scales_and_params_of_deepseek_v3():
    m = load_model("deepseek-ai/DeepSeek-V3")
    assert m.quantization.block == (128, 128)
    # 128x128 blocks of a 7168x1536 q_a_proj: 56 x 12 fp32 scales
    assert linear_bytes(1536, 7168, 2, m.quantization) == 1536 * 7168 + 12 * 56 * 4
    # published: 671B total parameters without the MTP module
    assert abs(total_params(m) / 671e9 - 1) < 0.005


def test_eagle3_head_shares_embedding_and_keeps_reduced_lm_head():
    # lm_head 32000 x 4096; q/k/v take 2 x hidden: (4096 + 2 x 1024) x 8192; o 4096x4096; MLP 3 x 4096 x 14336;
    # fc 3 x 4096 -> 4096; 3 norms + final norm
    m = load_model("sgl-project/SpecForge-llama3-8B-eagle3")
    w = weight_breakdown(m, share_embeddings=True)
    params = 32_000 * 4_096 + 6_144 * 8_192 + 4_096 * 4_096 + 3 * 4_096 * 14_336 + 3 * 4_096 * 4_096 + 4 * 4_096
    assert w.embedding == 0
    assert w.params == params == 424_689_664


def test_published_parameter_counts():
    for model_id, published in [("Qwen/Qwen2.5-7B-Instruct", 7.61e9), ("Qwen/Qwen2.5-0.5B-Instruct", 0.49e9),
                                ("meta-llama/Meta-Llama-3.1-405B", 405e9), ("meta-llama/Llama-3.1-8B-Instruct", 8.03e9)]:
        assert abs(total_params(load_model(model_id)) / published - 1) < 0.01, model_id


def test_gpt_oss_attention_stays_bf16_and_mxfp4_experts_are_padded():
    # gpt-oss quantizes only the experts (quantization_config.modules_to_not_convert: self_attn, router,
    # embed_tokens, lm_head). One attention block at TP1, bf16: qkv 2880 -> (64 + 2 x 8) x 64 = 5120 with bias,
    # o 4096 -> 2880 with bias, 64 fp32 sink logits:
    # 5120 x 2880 x 2 + 5120 x 2 + 2880 x 4096 x 2 + 2880 x 2 + 64 x 4 = 53,100,416 bytes, x 24 layers
    m = load_model("openai/gpt-oss-20b")
    w = weight_breakdown(m, tp=1)
    assert w.attention == 24 * 53_100_416 == 1_274_409_984
    # experts, padded as vLLM's mxfp4 MoE allocates them (hidden 2880 -> 3072, intermediate 2880 -> 2944):
    # per expert gate_up 5888 x 3072 + down 3072 x 2944 fp4 values (0.5 byte) + one e8m0 scale per 32 values,
    # bf16 biases 5888 + 3072: 3 x 3072 x 2944 x 17 / 32 + 8960 x 2 = 14,413,824 + 17,920; x 32 experts x 24 layers
    assert w.mlp == 24 * 32 * (3 * 3072 * 2944 * 17 // 32 + 8_960 * 2) == 11_083_579_392
    # what vLLM prints, within 1%: "Model loading took 13.72 GiB" (gpt-oss-20b, TP1, many public logs),
    # "65.9651 GiB" (gpt-oss-120b, TP1, H100; vllm-project/vllm issue 23278), "weights memory: 7.01GiB"
    # (gpt-oss-20b, TP2, H100, TRITON backend; llm-d-planner v0.19.0 accuracy log)
    assert abs(w.total / 2**30 / 13.72 - 1) < 0.01
    assert abs(weight_breakdown(load_model("openai/gpt-oss-120b"), tp=1).total / 2**30 / 65.9651 - 1) < 0.01
    assert abs(weight_breakdown(m, tp=2).total / 2**30 / 7.01 - 1) < 0.011


def test_meta_fp8_keeps_listed_modules_in_bf16():
    m = llama_405b_meta_fp8()
    assert m.quantization.method == "fp8" and len(m.quantization.unquantized) == 126 * 4 + 6 + 1
    w = weight_breakdown(m, tp=8)
    # per rank at TP 8: qkv (16 + 2 x 1 heads) x 128 = 2304 x 16384 and o 16384 x 2048, bf16, in all 126 layers
    assert w.attention == 126 * (2304 * 16384 + 16384 * 2048) * 2 == 17_968_398_336
    # MLP 53248 / 8 = 6656: gate_up 13312 x 16384 + down 16384 x 6656; fp8 with an fp32 scale per output row in
    # layers 1-124, bf16 in layers 0 and 125
    fp8_layer = 13312 * 16384 + 13312 * 4 + 16384 * 6656 + 16384 * 4
    bf16_layer = (13312 * 16384 + 16384 * 6656) * 2
    assert w.mlp == 124 * fp8_layer + 2 * bf16_layer == 41_890_660_352
    # the same checkpoint quantized whole (vLLM --quantization fp8 on the bf16 weights) holds 8.3 GiB less per GPU
    whole = weight_breakdown(m, tp=8, quant=Quantization("fp8"))
    assert w.total - whole.total == 126 * (2304 * 16384 + 16384 * 2048) - 126 * (2304 + 16384) * 4 + 2 * (
        bf16_layer - fp8_layer)


def test_meta_405b_fp8_catalog_entry_matches_the_published_vllm_load():
    """vLLM issue 6746: 0.5.3.post1 at TP 8 logged "Loading model weights took 57.7520 GB" (GiB) per worker for
    meta-llama/Meta-Llama-3.1-405B-Instruct-FP8, whose config then had 16 KV heads (later corrected to 8)."""
    entry = catalog_entry("meta-llama/Llama-3.1-405B-Instruct-FP8")
    assert len(entry["config"]["quantization_config"]["modules_to_not_convert"]) == 511
    then = dict(entry["config"], num_key_value_heads=16)
    w = weight_breakdown(spec_from_config(then, "405b-fp8-16kv", "test"), tp=8)
    assert abs(w.total / 2**30 - 57.7520) < 0.005
    assert load_model("meta-llama/Meta-Llama-3.1-405B-Instruct-FP8").quantization.unquantized == tuple(
        entry["config"]["quantization_config"]["modules_to_not_convert"])


def test_kept_modules_by_name_glob_regex_and_parent():
    from specsize.core.weights import unquantized_layers

    attention, mlp = unquantized_layers((
        "language_model.model.layers.1.self_attn.q_proj",  # a model's own prefix before "layers."
        "model.layers.*.self_attn.o_proj",  # every layer's attention, as gpt-oss's globs
        "re:.*layers\\.3\\.mlp\\.down_proj$",  # compressed-tensors' regular expressions
        "model.layers.4",  # a whole layer
        "model.layers.5.mlp.shared_expert.gate_proj",  # a shared expert is not the layer's MLP
        "re:.*mlp.gate$", "lm_head"), 6)
    assert attention == frozenset(range(6))
    assert mlp == frozenset({3, 4})
    assert unquantized_layers(("model.layers.1.self_attn.q_proj",), 3) == (frozenset({1}), frozenset())
