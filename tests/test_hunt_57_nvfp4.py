"""Hunt 57: vLLM's NVFP4 KV cache, release by release and GPU by GPU, checked against every sdist from 0.19.0 to 0.32.0.

What the source says (v1/attention/backends/flashinfer.py unless named; FlashInfer is the one attention backend
whose supported_kv_cache_dtypes lists "nvfp4" in 0.20.0 - 0.32.0, no MLA backend does):
- 0.19.0: config/cache.py's CacheDType has no "nvfp4" (auto keeps the model dtype; an explicit one is refused).
- 0.20.0: FlashInferMetadataBuilder.__init__ raises NotImplementedError("nvfp4 KV cache is not yet supported").
- 0.21.0 - 0.31.0: trtllm-gen only, so datacenter Blackwell (compute capability 10) only. The wrappers are built with
  backend "trtllm-gen" ("fa2/fa3 do not support nvfp4", _get_prefill_wrapper / _get_decode_wrapper); off capability
  10, 0.21.0 / 0.22.0 keep model-dtype queries (can_use_trtllm_attention is false: utils/flashinfer.py
  supports_trtllm_attention wants is_device_capability_family(100)) and FlashInferImpl.forward asserts "NVFP4 KV cache
  requires FP8 quantized queries"; 0.23.0 / 0.24.0's builder raises "--kv-cache-dtype nvfp4 requires sm100f"; from
  0.25.0 FlashInferBackend.supports_kv_cache_dtype admits "nvfp4" on is_device_capability_family(100) alone.
  No _nvfp4_kv_on_fa2 exists before 0.32.0.
- 0.32.0: _nvfp4_kv_on_fa2 (capability families 80 / 90 / 120) adds FlashInfer's FA2 path there, refused at head_size
  64 and beside attention sinks (supports_combination, FlashInferMetadataBuilder).
- every release: FlashInferBackend.get_supported_head_sizes is 64 / 128 / 256 (0.20.0, 0.21.0), 64 / 128 / 256 / 512
  (0.22.0 on): at any other head size platforms/cuda.py finds no valid backend for an NVFP4 cache ("head_size not
  supported"). specsize served Phi-3-mini (head_dim 96) an NVFP4 KV cache on a B200: the bug fixed here.

Bytes a token (utils/torch_utils.py nvfp4_kv_cache_full_dim: head_size // 2 + head_size // 16 a head, for the key and
for the value): Llama-3.1-8B, 32 layers x 8 KV heads x 2 x (64 + 8) = 36,864 B; Llama-3.2-1B, 16 x 8 x 2 x (32 + 4)
= 9,216 B; gpt-oss-20b, 24 x 8 x 2 x (32 + 4) = 13,824 B.
"""

from __future__ import annotations

import json

import pytest

from helpers import SHARED, run_cli as run

LLAMA_8B = json.loads((SHARED / "model-configs/meta-llama/Llama-3.1-8B-Instruct/config.json").read_text())
NVFP4_CKPT = {**LLAMA_8B, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                                                   "kv_cache_quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}}
LLAMA_8B_NVFP4 = 32 * 8 * 2 * (64 + 8)
LLAMA_1B_NVFP4 = 16 * 8 * 2 * (32 + 4)
GPT_OSS_20B_NVFP4 = 24 * 8 * 2 * (32 + 4)

CC10 = ("B200-180GB", "GB200-186GB", "B300-288GB")
# compute capability 8.0 / 8.6 / 8.9 / 9.0 / 12.0 (developer.nvidia.com/cuda-gpus)
FA2_FAMILIES = ("A100-80GB", "RTX-3090-24GB", "L40S-48GB", "H100-SXM-80GB", "RTX-5090-32GB", "RTX-PRO-6000-96GB")
TRTLLM_RELEASES = ("0.21", "0.24", "0.28", "0.31")


def _plan(capsys, tmp_path, config: dict | None, gpu: str, version: str, *args, target: str | None = None):
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = run(capsys, "plan", "--target", target or tmp_path, "--gpu", gpu, "--engine-version", version,
                         "--format", "json", *args)
    return code, out, err


def _served(capsys, tmp_path, config, gpu, version, *args, target=None) -> dict:
    code, out, err = _plan(capsys, tmp_path, config, gpu, version, *args, target=target)
    assert code in (0, 1), err  # 1: planned, a workload target missed
    return json.loads(out)["kv_bytes_per_token"]


def _refused(capsys, tmp_path, config, gpu, version, *args, target=None) -> str:
    code, out, err = _plan(capsys, tmp_path, config, gpu, version, *args, target=target)
    assert code == 2 and out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "kv_cache_dtype" in err
    return err


def test_hand_figures():
    assert LLAMA_8B_NVFP4 == 36_864 and LLAMA_1B_NVFP4 == 9_216 and GPT_OSS_20B_NVFP4 == 13_824


@pytest.mark.parametrize("version", TRTLLM_RELEASES + ("0.32",))
@pytest.mark.parametrize("gpu", CC10)
def test_served_on_datacenter_blackwell_from_0_21(capsys, tmp_path, gpu, version):
    kv = _served(capsys, tmp_path, LLAMA_8B, gpu, version, "--kv-cache-dtype", "nvfp4")
    assert kv["target"] == LLAMA_8B_NVFP4


@pytest.mark.parametrize("version", TRTLLM_RELEASES)
@pytest.mark.parametrize("gpu", FA2_FAMILIES)
def test_refused_off_capability_10_before_0_32(capsys, tmp_path, gpu, version):
    # 0.21 - 0.31 have no FA2 path for an NVFP4 cache (no _nvfp4_kv_on_fa2; trtllm-gen wrappers only)
    err = _refused(capsys, tmp_path, LLAMA_8B, gpu, version, "--kv-cache-dtype", "nvfp4")
    assert "datacenter Blackwell" in err and gpu in err


@pytest.mark.parametrize("gpu", FA2_FAMILIES)
def test_served_on_the_fa2_families_in_0_32(capsys, tmp_path, gpu):
    kv = _served(capsys, tmp_path, LLAMA_8B, gpu, "0.32", "--kv-cache-dtype", "nvfp4")
    assert kv["target"] == LLAMA_8B_NVFP4


@pytest.mark.parametrize(("version", "gpu", "expected"), [
    ("0.28", "B200-180GB", LLAMA_8B_NVFP4), ("0.31", "RTX-PRO-6000-96GB", None), ("0.32", "RTX-PRO-6000-96GB",
                                                                                LLAMA_8B_NVFP4)])
def test_a_modelopt_nvfp4_kv_checkpoint_under_auto(capsys, tmp_path, version, gpu, expected):
    # the same rule reached through the checkpoint's kv_cache_quant_algo "NVFP4" under --kv-cache-dtype auto
    if expected is None:
        assert "datacenter Blackwell" in _refused(capsys, tmp_path, NVFP4_CKPT, gpu, version)
    else:
        assert _served(capsys, tmp_path, NVFP4_CKPT, gpu, version)["target"] == expected


@pytest.mark.parametrize(("version", "words"), [("0.19", "no NVFP4 KV cache"), ("0.20", "not yet supported")])
def test_refused_before_0_21_even_on_a_b200(capsys, tmp_path, version, words):
    assert words in _refused(capsys, tmp_path, LLAMA_8B, "B200-180GB", version, "--kv-cache-dtype", "nvfp4")


@pytest.mark.parametrize(("gpu", "version"), [("B200-180GB", "0.24"), ("B200-180GB", "0.32"),
                                              ("H100-SXM-80GB", "0.32")])
def test_a_head_size_flashinfer_lacks_is_refused(capsys, tmp_path, gpu, version):
    # Phi-3-mini: head_dim 3072 / 32 = 96, not among FlashInfer's 64 / 128 / 256 / 512; vLLM's selector finds no
    # backend for the NVFP4 cache (it had been planned at 32 x 32 x 2 x (48 + 6) B a token)
    err = _refused(capsys, tmp_path, None, gpu, version, "--kv-cache-dtype", "nvfp4",
                   target="microsoft/Phi-3-mini-4k-instruct")
    assert "head sizes" in err and "96" in err


def test_head_size_64_on_capability_10_but_not_on_fa2(capsys, tmp_path):
    # trtllm-gen takes head_size 64 (0.31 and 0.32 on a B200); 0.32's FA2 path refuses it ("fa2 prefill misreads an
    # NVFP4 KV cache at head_size 64", supports_combination)
    for version in ("0.31", "0.32"):
        kv = _served(capsys, tmp_path, None, "B200-180GB", version, "--kv-cache-dtype", "nvfp4",
                     target="meta-llama/Llama-3.2-1B-Instruct")
        assert kv["target"] == LLAMA_1B_NVFP4
    err = _refused(capsys, tmp_path, None, "RTX-5090-32GB", "0.32", "--kv-cache-dtype", "nvfp4",
                   target="meta-llama/Llama-3.2-1B-Instruct")
    assert "head_size 64" in err


def test_gpt_oss_sinks_on_trtllm_gen(capsys, tmp_path):
    # attention sinks are trtllm-gen's to serve (utils/flashinfer.py use_trtllm_attention: "required for attention
    # sinks"): gpt-oss-20b with an NVFP4 cache plans on a B200 in 0.28
    kv = _served(capsys, tmp_path, None, "B200-180GB", "0.28", "--kv-cache-dtype", "nvfp4", target="openai/gpt-oss-20b")
    assert kv["target"] == GPT_OSS_20B_NVFP4


def test_a_draft_with_an_unsupported_head_size_is_refused_too(capsys, tmp_path):
    # the drafter's attention layers take the same backend: a Llama-style draft at head_dim 80 (hidden 2560 / 32 heads)
    # leaves vLLM no backend for its NVFP4 layers
    draft_dir = tmp_path / "draft"
    draft_dir.mkdir()
    draft = {**LLAMA_8B, "hidden_size": 2560, "intermediate_size": 6912, "num_hidden_layers": 4,
             "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 80}
    (draft_dir / "config.json").write_text(json.dumps(draft))
    err = _refused(capsys, tmp_path, LLAMA_8B, "B200-180GB", "0.32", "--kv-cache-dtype", "nvfp4", "--method",
                   "draft_model", "--draft", str(draft_dir), "-k", "3")
    assert "head sizes" in err and "80" in err
