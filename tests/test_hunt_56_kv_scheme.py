"""Hunt 56 (follow-ups): KV cache dtypes and bitsandbytes as vLLM's releases serve them.

1. A compressed-tensors checkpoint that declares a kv_cache_scheme (llm-compressor's calibrated fp8 KV cache) was
   priced in the model dtype on every release. vLLM's Attention layer (model_executor/layers/attention/attention.py
   Attention.__init__) sets the layer's kv_cache_dtype and cache_config.cache_dtype to "fp8" when the quant config has
   a kv_cache_scheme: in 0.16.0 - 0.21.0 whatever --kv-cache-dtype says ("llm-compressor mdls need to set cache_dtype
   to fp8 manually"), from 0.22.0 only where it is "auto" (read in 0.22.0 and 0.32.0); 0.14.1's attention/layer.py
   reads no kv_cache_scheme (the scheme brings scales only, the cache keeps the model dtype under auto). 0.15 has no
   sdist on PyPI and goes with 0.16 (the override's PR 30141 was adapted downstream in February 2026). SGLang keeps
   the model dtype. Llama-3.1-8B, 32 layers of 8 KV heads of 128: 32 x 2 x 8 x 128 = 65,536 values a token, 131,072 B
   in bf16, 65,536 B in fp8.
2. bitsandbytes (vLLM 0.9.2 - 0.27): (a) a pre-quantized checkpoint at TP > 1 is refused by vLLM's loader
   (model_loader/bitsandbytes_loader.py: "Prequant BitsAndBytes models with tensor parallelism is not supported.
   Please try with pipeline parallelism.", read in 0.10.1.1, 0.14.1, 0.20.0, 0.27.0): refused on the field tp; (b) a
   pre-quantized 8-bit one runs eager (ModelConfig._verify_bnb_config, read in 0.10.1.1, 0.12.0, 0.17.0, 0.25.0): no
   CUDA-graph memory; (c) --quantization bitsandbytes on bf16 weights quantizes them at load as nf4 in blocks of 64
   (bitsandbytes_loader.py _unquantized_generator: quantize_4bit(compress_statistics=True, quant_type="nf4"), the
   nested absmax dequantized to float32 at load): sized as a 4-bit checkpoint, and sharded by TP as usual; (d) its
   kernel is a dequantising one (matmul_4bit / gemv_4bit), priced as the other 4-bit weights.
3. vLLM's NVFP4 KV cache could not be expressed (a value is half a byte plus a share of an fp8 scale per 16): a
   ModelOpt checkpoint calibrated for it was priced in the model dtype everywhere. Per head a token the key, and the
   value, take head_size // 2 + head_size // 16 bytes (utils/torch_utils.py nvfp4_kv_cache_full_dim;
   v1/kv_cache_interface.py AttentionSpec.real_page_size_bytes): 72 + 72 B at head_dim 128. 0.20 resolves auto to
   "nvfp4" (get_kv_cache_quant_algo_string) but FlashInfer's metadata builder, the one backend taking it, raises "nvfp4
   KV cache is not yet supported" (0.20.0); 0.21.0 on serve it, through FlashInfer's trtllm-gen kernels (datacenter
   Blackwell only; no MLA backend lists nvfp4); up to 0.19 auto keeps the model dtype (the ModelOpt map has fp8 only).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli as run

SHARED = Path(__file__).resolve().parents[2] / "shared"
LLAMA_8B = json.loads((SHARED / "model-configs/meta-llama/Llama-3.1-8B-Instruct/config.json").read_text())

KV_VALUES = 32 * 2 * 8 * 128  # values a token holds over Llama-3.1-8B's layers
BF16_KV, FP8_KV = 2 * KV_VALUES, KV_VALUES  # 131,072 B and 65,536 B a token

FP8_CHANNEL = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}
KV_SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True, "dynamic": False}


def _ct(kv_scheme: dict | None = KV_SCHEME) -> dict:
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": FP8_CHANNEL}}}
    if kv_scheme is not None:
        qc["kv_cache_scheme"] = kv_scheme
    return {**LLAMA_8B, "quantization_config": qc}


def _plan(capsys, tmp_path, config: dict, *args) -> dict:
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def _refused(capsys, tmp_path, config: dict, *args) -> str:
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json", *args)
    assert code == 2 and out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_hand_figures():
    assert (BF16_KV, FP8_KV) == (131_072, 65_536)


@pytest.mark.parametrize(("version", "kv_dtype", "expected"), [
    ("0.13", "auto", BF16_KV), ("0.14", "auto", BF16_KV),  # the scheme brings scales only
    ("0.15", "auto", FP8_KV), ("0.16", "auto", FP8_KV), ("0.20", "auto", FP8_KV), ("0.21", "auto", FP8_KV),
    ("0.16", "bfloat16", FP8_KV), ("0.21", "bfloat16", FP8_KV),  # forced over the explicit dtype
    ("0.14", "bfloat16", BF16_KV),
    ("0.22", "auto", FP8_KV), ("0.32", "auto", FP8_KV),
    ("0.22", "bfloat16", BF16_KV), ("0.32", "bfloat16", BF16_KV),  # an explicit dtype honoured from 0.22
])
def test_compressed_tensors_kv_cache_scheme_per_release(capsys, tmp_path, version, kv_dtype, expected):
    plan = _plan(capsys, tmp_path, _ct(), "--engine-version", version, "--kv-cache-dtype", kv_dtype)
    assert plan["kv_bytes_per_token"]["total"] == expected


def test_without_a_kv_cache_scheme_the_model_dtype_stays(capsys, tmp_path):
    for version in ("0.16", "0.32"):
        assert _plan(capsys, tmp_path, _ct(None), "--engine-version", version)["kv_bytes_per_token"]["total"] == BF16_KV


def test_a_kv_only_checkpoint_without_weight_schemes(capsys, tmp_path):
    # llm-compressor's KV-cache-only recipe: no config group for the weights (unquantized, bf16) and a kv_cache_scheme;
    # vLLM still builds a CompressedTensorsConfig carrying it, so the cache is fp8 by the same rule
    config = {**LLAMA_8B, "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {},
                                                  "kv_cache_scheme": KV_SCHEME}}
    bf16 = _plan(capsys, tmp_path, LLAMA_8B, "--engine-version", "0.32")["per_gpu"]["weights_target_bytes"]
    plan = _plan(capsys, tmp_path, config, "--engine-version", "0.32")
    assert plan["kv_bytes_per_token"]["total"] == FP8_KV and plan["per_gpu"]["weights_target_bytes"] == bf16
    assert _plan(capsys, tmp_path, config, "--engine-version", "0.14")["kv_bytes_per_token"]["total"] == BF16_KV


def test_the_fp8_cache_holds_twice_the_tokens(capsys, tmp_path):
    # same weights, same budget: the pool's bytes over 65,536 B a token rather than 131,072 (blocks of 16)
    with_scheme = _plan(capsys, tmp_path, _ct(), "--engine-version", "0.32")
    without = _plan(capsys, tmp_path, _ct(None), "--engine-version", "0.32")
    assert with_scheme["per_gpu"]["kv_cache_bytes"] == without["per_gpu"]["kv_cache_bytes"]
    pool = with_scheme["per_gpu"]["kv_cache_bytes"]
    assert with_scheme["kv_cache_tokens"] == pool // (16 * FP8_KV) * 16
    assert without["kv_cache_tokens"] == pool // (16 * BF16_KV) * 16


def test_sglang_keeps_the_model_dtype(capsys, tmp_path):
    # SGLang's ModelRunner picks the KV dtype from --kv-cache-dtype and a ModelOpt kv_cache_quant_algo only
    plan = _plan(capsys, tmp_path, _ct(), "--engine", "sglang")
    assert plan["kv_bytes_per_token"]["total"] == BF16_KV


def test_a_kv_cache_scheme_that_is_not_a_mapping_is_refused(capsys, tmp_path):
    assert "kv_cache_scheme" in _refused(capsys, tmp_path, _ct("fp8"))  # type: ignore[arg-type]


# --- 2. bitsandbytes ------------------------------------------------------------------------------------------------

BNB4 = {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False, "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True, "bnb_4bit_quant_storage": "uint8"}
BNB8 = {"quant_method": "bitsandbytes", "load_in_8bit": True, "load_in_4bit": False}
LLAMA_LINEAR = 6144 * 4096 + 4096 * 4096 + 28672 * 4096 + 4096 * 14336  # 218,103,808 weights a layer
BNB4_LAYER = LLAMA_LINEAR // 2 + LLAMA_LINEAR // 64 * 4  # packed two a byte, a float32 absmax per 64: 122,683,392


def test_bnb_hand_figures():
    assert BNB4_LAYER == 122_683_392 and 32 * (2 * LLAMA_LINEAR - BNB4_LAYER) == 10_032_775_168


@pytest.mark.parametrize("config", [BNB4, BNB8])
def test_prequantized_bnb_at_tensor_parallel_is_refused_on_tp(capsys, tmp_path, config):
    err = _refused(capsys, tmp_path, {**LLAMA_8B, "quantization_config": config}, "--engine-version", "0.27",
                   "--tp", "2")
    assert "tp:" in err and "pp" in err


def test_prequantized_bnb_at_one_gpu_still_plans(capsys, tmp_path):
    plan = _plan(capsys, tmp_path, {**LLAMA_8B, "quantization_config": BNB4}, "--engine-version", "0.27")
    assert plan["per_gpu"]["cuda_graph_bytes"] > 0  # 4-bit keeps its CUDA graphs


def test_bnb_8bit_runs_eager_with_no_graph_memory(capsys, tmp_path):
    plan = _plan(capsys, tmp_path, {**LLAMA_8B, "quantization_config": BNB8}, "--engine-version", "0.20")
    assert plan["per_gpu"]["cuda_graph_bytes"] == 0


def test_in_flight_bitsandbytes_is_sized_as_nf4(capsys, tmp_path):
    bf16 = _plan(capsys, tmp_path, LLAMA_8B, "--engine-version", "0.27")["per_gpu"]["weights_target_bytes"]
    inflight = _plan(capsys, tmp_path, LLAMA_8B, "--engine-version", "0.27", "--quantization", "bitsandbytes")
    assert bf16 - inflight["per_gpu"]["weights_target_bytes"] == 10_032_775_168
    # in-flight quantization shards as usual (the loader's refusal is for pre-quantized checkpoints only)
    _plan(capsys, tmp_path, LLAMA_8B, "--engine-version", "0.27", "--quantization", "bitsandbytes", "--tp", "2")


def test_bitsandbytes_on_an_8bit_checkpoint_loads_it_as_stored(capsys, tmp_path):
    config = {**LLAMA_8B, "quantization_config": BNB8}
    stored = _plan(capsys, tmp_path, config, "--engine-version", "0.20")["per_gpu"]["weights_target_bytes"]
    flagged = _plan(capsys, tmp_path, config, "--engine-version", "0.20", "--quantization", "bitsandbytes")
    assert flagged["per_gpu"]["weights_target_bytes"] == stored


def test_bnb4_priced_with_the_dequantising_kernels():
    # the step reads the packed bytes (core.weights) through the dequantising kernels' efficiency (low_bit), as AWQ /
    # GPTQ int4 are; it had been priced at the bf16 GEMMs' efficiency
    from specsize.catalog.configs import spec_from_config
    from specsize.core.perf import model_cost

    m = spec_from_config({**LLAMA_8B, "quantization_config": BNB4}, "bnb4-llama", "test")
    cost = model_cost(m, 1, "bfloat16", m.quantization)
    assert m.quantization is not None and m.quantization.method == "bnb4" and cost.low_bit
    # a step reads 32 packed layers, the bf16 lm_head (128,256 x 4,096) and 65 norms of 4,096, not the embedding
    assert cost.dense_bytes == 32 * BNB4_LAYER + 128_256 * 4096 * 2 + 65 * 4096 * 2 == 4_977_074_176


# --- 3. NVFP4 KV cache ---------------------------------------------------------------------------------------------

NVFP4_CKPT = {**LLAMA_8B, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                                                   "kv_cache_quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}}
NVFP4_KV = 32 * 8 * 2 * (128 // 2 + 128 // 16)  # 36,864 B a token


def _on_b200(capsys, tmp_path, config: dict, *args) -> dict:
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "B200-180GB", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def test_nvfp4_hand_figure():
    assert NVFP4_KV == 36_864


@pytest.mark.parametrize(("version", "expected"), [("0.19", BF16_KV), ("0.21", NVFP4_KV), ("0.32", NVFP4_KV)])
def test_nvfp4_checkpoint_kv_under_auto(capsys, tmp_path, version, expected):
    plan = _on_b200(capsys, tmp_path, NVFP4_CKPT, "--engine-version", version)
    assert plan["kv_bytes_per_token"]["total"] == expected


def test_explicit_nvfp4_kv_on_a_bf16_checkpoint(capsys, tmp_path):
    plan = _on_b200(capsys, tmp_path, LLAMA_8B, "--engine-version", "0.24", "--kv-cache-dtype", "nvfp4")
    assert plan["kv_bytes_per_token"]["total"] == NVFP4_KV


def test_an_explicit_dtype_wins_over_the_checkpoints_nvfp4(capsys, tmp_path):
    plan = _on_b200(capsys, tmp_path, NVFP4_CKPT, "--engine-version", "0.32", "--kv-cache-dtype", "fp8")
    assert plan["kv_bytes_per_token"]["total"] == FP8_KV


def test_a_draft_models_layers_take_nvfp4_too(capsys, tmp_path):
    # Llama-3.2-1B: 16 layers of 8 KV heads of 64: 2 x (32 + 4) B a head
    plan = _on_b200(capsys, tmp_path, NVFP4_CKPT, "--engine-version", "0.32", "--method", "draft_model",
                    "--draft", "meta-llama/Llama-3.2-1B-Instruct", "-k", "3")
    assert plan["kv_bytes_per_token"]["draft"] == 16 * 8 * 2 * (32 + 4) == 9_216


@pytest.mark.parametrize(("gpu", "version", "kv", "words"), [
    ("B200-180GB", "0.20", "auto", "not yet supported"),  # 0.20 resolves it and fails to start
    ("B200-180GB", "0.19", "nvfp4", "no NVFP4 KV cache"),
    ("H100-SXM-80GB", "0.31", "auto", "Blackwell"),
    ("H100-SXM-80GB", "0.31", "nvfp4", "Blackwell"),
    # 0.32 serves it on Hopper too, through FlashInfer's FA2 path (flashinfer.py _nvfp4_kv_on_fa2), not at head_size 64
    ("MI300X-192GB", "0.32", "nvfp4", "Blackwell"),
])
def test_nvfp4_kv_refused_where_vllm_cannot_serve_it(capsys, tmp_path, gpu, version, kv, words):
    (tmp_path / "config.json").write_text(json.dumps(NVFP4_CKPT))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", gpu, "--engine-version", version,
                         "--kv-cache-dtype", kv, "--format", "json")
    assert code == 2 and out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "kv_cache_dtype" in err and words in err


def test_sglang_takes_no_nvfp4_kv(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    code, _out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "B200-180GB", "--engine", "sglang",
                          "--kv-cache-dtype", "nvfp4")
    assert code == 2 and "kv_cache_dtype" in err and "Traceback" not in err
    # and its auto keeps the model dtype for a ModelOpt NVFP4-KV checkpoint (ModelRunner reads "FP8" only)
    plan = _on_b200(capsys, tmp_path, NVFP4_CKPT, "--engine", "sglang")
    assert plan["kv_bytes_per_token"]["total"] == BF16_KV


def test_in_flight_bitsandbytes_release_rule():
    # the loader's releases (0.9.2 - 0.27; MoE experts from 0.10) hold for in-flight quantization too; the CLI reaches
    # this once inputs/resolve.py passes the request's quantization to check_model_support
    from specsize.catalog.configs import spec_from_config
    from specsize.engines.support import quantization_problem

    m = spec_from_config(LLAMA_8B, "llama-8b", "test")
    assert quantization_problem("vllm", "0.27", m, "bitsandbytes") is None
    assert quantization_problem("vllm", "0.9.2", m, "bitsandbytes") is None
    for engine, version, words in (("vllm", "0.28", "vllm-bnb-plugin"), ("vllm", None, "newest vLLM"),
                                   ("vllm", "0.9.1", "0.9.2"), ("sglang", None, "SGLang")):
        problem = quantization_problem(engine, version, m, "bitsandbytes")
        assert problem is not None and words in problem[0] and "at load" in problem[0]
    assert quantization_problem("vllm", "0.32", m, "fp8") is None  # other formats: the profiles' checks


def test_nvfp4_kv_refused_for_an_mla_model(capsys):
    # no MLA attention backend lists nvfp4 among its KV cache dtypes (FlashInfer's non-MLA backend alone does)
    config = SHARED / "model-configs/deepseek-ai/DeepSeek-V3"
    code, out, err = run(capsys, "plan", "--target", config, "--gpu", "B200-180GB", "--tp", "8", "--engine-version",
                         "0.32", "--kv-cache-dtype", "nvfp4", "--format", "json")
    assert code == 2 and out == "" and "MLA" in err and "kv_cache_dtype" in err and "Traceback" not in err


def test_nvfp4_kv_on_hopper_from_0_32_but_not_at_head_size_64(capsys, tmp_path):
    # vLLM 0.32's FlashInfer serves an NVFP4 KV cache on compute capability 8.x / 9.x / 12.x through FA2
    # (flashinfer.py _nvfp4_kv_on_fa2, supports_kv_cache_dtype), refusing head_size 64 ("fa2 prefill misreads an NVFP4
    # KV cache at head_size 64", supports_combination): Llama-3.1-8B (head_dim 128) plans at 36,864 B a token, a
    # Llama-3.2-1B (head_dim 64) is refused
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--kv-cache-dtype", "nvfp4",
                         "--format", "json")
    assert code in (0, 1), err
    assert json.loads(out)["kv_bytes_per_token"]["target"] == 32 * 8 * 2 * (64 + 8)
    code, out, err = run(capsys, "plan", "--target", "meta-llama/Llama-3.2-1B-Instruct", "--gpu", "H100-SXM-80GB",
                         "--kv-cache-dtype", "nvfp4")
    assert code == 2 and "head_size 64" in err


def test_a_forced_kv_cache_scheme_wins_over_an_explicit_nvfp4(capsys, tmp_path):
    # vLLM 0.21's attention.py sets a compressed-tensors kv_cache_scheme layer to "fp8" whatever --kv-cache-dtype asked
    # (review): 65,536 B a token on a B200, not NVFP4's 36,864
    (tmp_path / "config.json").write_text(json.dumps(_ct()))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "B200-180GB", "--engine-version", "0.21",
                         "--kv-cache-dtype", "nvfp4", "--format", "json")
    assert code in (0, 1), err
    assert json.loads(out)["kv_bytes_per_token"]["target"] == FP8_KV
