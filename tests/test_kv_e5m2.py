"""--kv-cache-dtype fp8_e5m2 beside weights whose quantization config loads the attention layers' KV scales: vLLM
raises "fp8_e5m2 kv-cache is not supported with fp8 checkpoints" (model_executor/layers/attention/attention.py, the
Attention layer's KV-scale setup, read in 0.20.0 - 0.32.0). The configs that give attention a KV-cache method:
Fp8Config (an fp8 checkpoint, and --quantization fp8 over 16-bit weights), ModelOpt's, compressed-tensors' (every
checkpoint up to 0.23; from 0.24 only one that declares a kv_cache_scheme: "weight-only ones declare none and must
keep fp8_e5m2"). fbgemm_fp8, AWQ / GPTQ, MXFP4 return none for attention and keep fp8_e5m2. Such plans had been
FITS with a launch command that does not start."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_cli as run

SHARED = Path(__file__).resolve().parents[2] / "shared"
LLAMA_8B = json.loads((SHARED / "model-configs/meta-llama/Llama-3.1-8B-Instruct/config.json").read_text())
INT4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
KV_SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True, "dynamic": False}


def _config(tmp_path, qc: dict) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA_8B, "quantization_config": qc}))
    return tmp_path


def _plan(capsys, target, *args):
    return run(capsys, "plan", "--target", target, "--gpu", "H100-SXM-80GB", "--kv-cache-dtype", "fp8_e5m2", *args)


def test_fp8_weights_refuse_e5m2(capsys):
    code, _, err = _plan(capsys, "Qwen/Qwen3-8B-FP8")  # Qwen's own fp8 checkpoint: quant_method fp8
    assert code == 2 and "kv_cache_dtype" in err and "fp8_e4m3" in err
    code, _, err = _plan(capsys, "Qwen/Qwen3-8B", "--quantization", "fp8", "--engine-version", "0.30")
    assert code == 2 and "kv_cache_dtype" in err  # Fp8Config over bf16 weights (to 0.30: below)
    code, _, err = _plan(capsys, "Qwen/Qwen3-8B", "--quantization", "fp8", "--kv-cache-dtype", "fp8_e4m3")
    assert code == 0, err


def test_formats_without_kv_scales_keep_e5m2(capsys):
    for target, extra in (("Qwen/Qwen3-8B", ()), ("Qwen/Qwen3-14B", ("--quantization", "int4")),
                          ("meta-llama/Llama-3.1-405B-Instruct-FP8", ("--tp", "8"))):  # fbgemm_fp8
        code, _, err = _plan(capsys, target, *extra)
        assert code == 0, (target, err)


def test_compressed_tensors_by_release(capsys, tmp_path):
    weight_only = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
                   "config_groups": {"group_0": {"targets": ["Linear"], "weights": INT4}}}
    target = _config(tmp_path, weight_only)
    code, _, err = _plan(capsys, target, "--engine-version", "0.23")
    assert code == 2 and "compressed-tensors" in err
    code, _, err = _plan(capsys, target, "--engine-version", "0.24")
    assert code == 0, err
    code, _, err = _plan(capsys, _config(tmp_path, {**weight_only, "kv_cache_scheme": KV_SCHEME}),
                         "--engine-version", "0.20")
    # 0.15 - 0.21 force fp8 (e4m3) over an explicit dtype for a kv_cache_scheme: the layer never sees fp8_e5m2
    assert code == 0, err


def test_sglang_has_no_such_check(capsys):
    code, _, err = _plan(capsys, "Qwen/Qwen3-8B-FP8", "--engine", "sglang")
    assert code == 0, err


def test_online_fp8_override_from_0_31(capsys):
    # --quantization fp8 over bf16 weights: Fp8Config (KV scales for attention) up to 0.30; from 0.31 the online
    # fp8_per_tensor config (model_loader/weight_utils.py: "--quantization fp8 is deprecated for online quantization"),
    # which gives attention no KV-scale method, so fp8_e5m2 starts
    base = ("Qwen/Qwen3-8B", "--quantization", "fp8")
    assert _plan(capsys, *base[:1], *base[1:], "--engine-version", "0.30")[0] == 2
    assert _plan(capsys, *base[:1], *base[1:], "--engine-version", "0.31")[0] == 0
    assert _plan(capsys, *base)[0] == 0  # the newest profile (0.32)
    # Qwen's own fp8 checkpoint (quant_method fp8) is Fp8Config on every release
    assert _plan(capsys, "Qwen/Qwen3-8B-FP8")[0] == 2
