"""SGLang releases whose quantization registry lacks a 4-bit float format (engines/support.py FP4_FIRST).

specsize refused an NVFP4 / MXFP4 checkpoint on a vLLM release before the first whose registry holds the format, but
planned any SGLang release as if it could load one: `--engine sglang --engine-version 0.4.0 --quantization nvfp4`
sized a server that stops at load. The releases, read in the PyPI wheels of sglang (python/sglang/srt/layers/
quantization/__init__.py QUANTIZATION_METHODS / BASE_QUANTIZATION_METHODS, modelopt_quant.py, mxfp4.py, quark/,
compressed_tensors/):

- NVFP4 (ModelOpt's "modelopt_fp4", ModelOptFp4Config): in 0.4.5.post1, not in 0.4.5;
- its MoE experts (ModelOptNvFp4FusedMoEMethod, returned for a FusedMoE by ModelOptFp4Config.get_quant_method): in
  0.4.7, not in 0.4.6.post5, whose FusedMoE asserts "self.quant_method is not None" when the config returns None;
- NVFP4 through compressed-tensors (CompressedTensorsW4A4Fp4, CompressedTensorsW4A4Nvfp4MoEMethod): in 0.5.7, not in
  0.5.6.post2 ("No compressed-tensors compatible scheme was found.");
- MXFP4 ("mxfp4": mxfp4.py Mxfp4Config; "quark": quark/schemes/quark_w4a4_mxfp4.py): in the 0.5.0rc0 pre-release
  (0.5.0 was never released; 0.5.1 is the first final release), not in 0.4.10.post2.

vLLM's rule had the same gap for what a model needs beside the format, read in its wheels
(model_executor/layers/quantization): ModelOpt NVFP4 MoE experts from 0.9.0, compressed-tensors NVFP4 from 0.9.0 and
for MoE experts from 0.9.2, MXFP4 MoE experts from 0.10.0 (DeepSeek-R1-FP4 had been planned on 0.8.5).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli as run

SHARED = Path(__file__).resolve().parents[2] / "shared"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_8B_CONFIG = SHARED / "model-configs/meta-llama/Llama-3.1-8B-Instruct/config.json"
QWEN3_30B_CONFIG = SHARED / "model-configs/Qwen/Qwen3-30B-A3B/config.json"
REGISTRY = "the first release whose quantization registry holds the format"


def _plan(capsys, *args) -> tuple[int, str, str]:
    return run(capsys, "plan", "--gpu", "B200-180GB", "--engine", "sglang", "--format", "json", *args)


def _refused(code: int, out: str, err: str, first: str, what: str = "") -> None:
    assert code == 2 and out == "" and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specsize: error: engine_version: SGLang "), err
    assert f"{REGISTRY}{what} is {first}" in err and f"(accepted: engine_version {first} or later" in err, err


@pytest.mark.parametrize("quant,before,first", [
    ("nvfp4", "0.4.5", "0.4.5.post1"), ("modelopt_fp4", "0.4.5", "0.4.5.post1"), ("nvfp4", "0.4.0", "0.4.5.post1"),
    ("mxfp4", "0.4.10.post2", "0.5.0rc0"), ("mxfp4", "0.4", "0.5.0rc0")])
def test_a_4_bit_float_override_before_the_sglang_release_that_loads_it_is_refused(capsys, quant, before, first):
    """--quantization naming a 4-bit float format over Llama-3.1-8B's bf16 weights: a checkpoint stored so. The last
    release without the format refuses it naming the first (a series written 0.4 holds no release with MXFP4);
    that release plans (exit 0 fits or 1 thin, never 2)."""
    code, out, err = _plan(capsys, "--target", LLAMA_8B, "--quantization", quant, "--engine-version", before)
    _refused(code, out, err, first)
    code, out, err = _plan(capsys, "--target", LLAMA_8B, "--quantization", quant, "--engine-version", first)
    assert code in (0, 1), err
    assert json.loads(out)["per_gpu"]["weights_target_bytes"] > 0


def test_mxfp4_is_planned_on_the_first_final_release_too(capsys):
    code, out, err = _plan(capsys, "--target", LLAMA_8B, "--quantization", "mxfp4", "--engine-version", "0.5.1")
    assert code in (0, 1), err


def test_a_stored_nvfp4_checkpoint_is_checked_as_the_override_is(capsys):
    """nvidia/Llama-3.1-8B-Instruct-FP4, read from its name as Llama-3.1-8B in NVFP4 (catalog.variants): 0.4.5 cannot
    load it, 0.4.5.post1 can."""
    code, out, err = _plan(capsys, "--target", "nvidia/Llama-3.1-8B-Instruct-FP4", "--engine-version", "0.4.5")
    _refused(code, out, err, "0.4.5.post1")
    code, _, err = _plan(capsys, "--target", "nvidia/Llama-3.1-8B-Instruct-FP4", "--engine-version", "0.4.5.post1")
    assert code in (0, 1), err


def test_nvfp4_moe_experts_need_sglang_0_4_7(capsys):
    """nvidia/DeepSeek-R1-FP4 (DeepSeek-R1's MoE in NVFP4): 0.4.6.post5 has ModelOptFp4Config but no MoE method for
    it; 0.4.7 plans it. A dense NVFP4 model plans on 0.4.6.post5."""
    args = ("--target", "nvidia/DeepSeek-R1-FP4", "--tp", "8")
    code, out, err = _plan(capsys, *args, "--engine-version", "0.4.6.post5")
    _refused(code, out, err, "0.4.7", " for an MoE's experts")
    code, _, err = _plan(capsys, *args, "--engine-version", "0.4.7")
    assert code in (0, 1), err
    code, _, err = _plan(capsys, "--target", LLAMA_8B, "--quantization", "nvfp4", "--engine-version", "0.4.6.post5")
    assert code in (0, 1), err


def _ct_nvfp4(folder: Path, base: Path = LLAMA_8B_CONFIG) -> Path:
    """A model as llm-compressor stores NVFP4 (W4A4, 4-bit float weights and activations in groups of 16)."""
    config = json.loads(base.read_text())
    fp4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True}
    config["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head", "re:.*mlp.gate$"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": fp4,
                                      "input_activations": {**fp4, "dynamic": "local"}}}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_compressed_tensors_nvfp4_needs_sglang_0_5_7(capsys, tmp_path):
    """A compressed-tensors NVFP4 checkpoint: SGLang's compressed-tensors config has no NVFP4 scheme before 0.5.7,
    though ModelOpt's NVFP4 loads from 0.4.5.post1 (--quantization nvfp4 restating the checkpoint's own format is
    the same checkpoint)."""
    target = _ct_nvfp4(tmp_path)
    for extra in ((), ("--quantization", "nvfp4")):
        code, out, err = _plan(capsys, "--target", target, "--engine-version", "0.5.6.post2", *extra)
        _refused(code, out, err, "0.5.7", " through a compressed-tensors config")
    code, _, err = _plan(capsys, "--target", target, "--engine-version", "0.5.7")
    assert code in (0, 1), err


def test_the_vllm_rule_for_dense_models_is_unchanged(capsys):
    """vLLM's figures for a dense model stay: NVFP4 from 0.8.0, MXFP4 from 0.9.0."""
    code, out, err = run(capsys, "plan", "--target", LLAMA_8B, "--gpu", "H100-SXM-80GB", "--quantization", "nvfp4",
                         "--engine-version", "0.7.3")
    assert code == 2 and f"{REGISTRY} is 0.8.0" in err and "vLLM 0.7.3" in err
    code, _, err = run(capsys, "plan", "--target", LLAMA_8B, "--gpu", "H100-SXM-80GB", "--quantization", "mxfp4",
                       "--engine-version", "0.9.0", "--format", "json")
    assert code in (0, 1), err


@pytest.mark.parametrize("target,quant,before,first,what", [
    # modelopt.py ModelOptNvFp4FusedMoE from 0.9.0; 0.8.5.post1's ModelOptNvFp4Config gives a FusedMoE no method
    ("nvidia/DeepSeek-R1-FP4", None, "0.8.5.post1", "0.9.0", " for an MoE's experts"),
    # quark_moe.py QuarkW4A4MXFp4MoEMethod from 0.10.0; 0.9.2's get_moe_method: "Unsupported FusedMoe scheme"
    ("Qwen/Qwen3-30B-A3B", "mxfp4", "0.9.2", "0.10.0", " for an MoE's experts")])
def test_vllm_4_bit_float_moe_experts_need_their_own_release(capsys, target, quant, before, first, what):
    args = ("plan", "--target", target, "--gpu", "B200-180GB", "--tp", "8", "--format", "json") + (
        ("--quantization", quant) if quant else ())
    code, out, err = run(capsys, *args, "--engine-version", before)
    assert code == 2 and out == "" and f"vLLM {before} cannot load" in err and f"{REGISTRY}{what} is {first}" in err
    code, _, err = run(capsys, *args, "--engine-version", first)
    assert code in (0, 1), err


def test_vllm_compressed_tensors_nvfp4(capsys, tmp_path):
    """vLLM's compressed-tensors NVFP4: schemes/compressed_tensors_w4a16_nvfp4.py from 0.9.0 (none in 0.8.5.post1),
    compressed_tensors_moe.py CompressedTensorsW4A4MoeMethod from 0.9.2 (none in 0.9.1)."""
    dense = _ct_nvfp4(tmp_path / "dense")
    code, out, err = run(capsys, "plan", "--target", dense, "--gpu", "B200-180GB", "--engine-version", "0.8.5.post1")
    assert code == 2 and f"{REGISTRY} through a compressed-tensors config is 0.9.0" in err, err
    code, _, err = run(capsys, "plan", "--target", dense, "--gpu", "B200-180GB", "--engine-version", "0.9.0")
    assert code in (0, 1), err
    moe = _ct_nvfp4(tmp_path / "moe", QWEN3_30B_CONFIG)
    code, out, err = run(capsys, "plan", "--target", moe, "--gpu", "B200-180GB", "--engine-version", "0.9.1")
    assert code == 2 and f"{REGISTRY} for an MoE's experts through a compressed-tensors config is 0.9.2" in err, err
    code, _, err = run(capsys, "plan", "--target", moe, "--gpu", "B200-180GB", "--engine-version", "0.9.2")
    assert code in (0, 1), err
    # SGLang: 0.5.7 for its MoE experts too (compressed_tensors_moe.py CompressedTensorsW4A4Nvfp4MoEMethod)
    code, out, err = _plan(capsys, "--target", moe, "--engine-version", "0.5.6.post2")
    _refused(code, out, err, "0.5.7", " through a compressed-tensors config")
    code, _, err = _plan(capsys, "--target", moe, "--engine-version", "0.5.7")
    assert code in (0, 1), err


def test_speedup_and_simulate_refuse_as_plan_does(capsys):
    for command in ("speedup", "simulate"):
        code, out, err = run(capsys, command, "--target", LLAMA_8B, "--gpu", "B200-180GB", "--engine", "sglang",
                             "--engine-version", "0.4.5", "--quantization", "nvfp4")
        _refused(code, out, err, "0.4.5.post1")


def test_a_search_on_an_sglang_release_without_mxfp4_is_refused(capsys, tmp_path):
    spec = {"target": LLAMA_8B, "engine": "sglang", "engine_version": "0.4.10.post2", "quantization": "mxfp4",
            "drafters": [{"method": "none"}], "ks": [1],
            "gpus": [{"gpu": "MI355X-288GB", "counts": [1], "price_per_hour": 4.0}], "tp": [1],
            "max_num_seqs": [64], "max_model_len": 8192,
            "workload": {"prompt_tokens": {"p50": 500, "p99": 2000}, "output_tokens": {"p50": 200, "p99": 500},
                         "concurrency": 8},
            "slo": {"ttft_p99_ms": 3000, "tpot_p99_ms": 50}}
    path = tmp_path / "search.yaml"
    path.write_text(json.dumps(spec))
    code, out, err = run(capsys, "search", path, "--no-simulate")
    _refused(code, out, err, "0.5.0rc0")
    spec["engine_version"] = "0.5.0rc0"
    path.write_text(json.dumps(spec))
    code, out, err = run(capsys, "search", path, "--no-simulate", "--format", "json")
    assert code in (0, 3) and "Traceback" not in err, err


def test_the_service_refuses_as_the_cli_does(tmp_path, monkeypatch):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from specsize.catalog.models import NAMES_ONLY_ENV
    from specsize.service import auth, db
    from specsize.service.app import Config, create_app

    monkeypatch.setenv(NAMES_ONLY_ENV, "1")
    url = str(tmp_path / "service.sqlite")
    engine = db.connect(url)
    token = auth.add_user(engine, "planner", "planner", "a long enough password 1")
    engine.dispose()
    client = TestClient(create_app(Config(db_url=url, secure_cookies=False)), raise_server_exceptions=False)
    body = {"target": "nvidia/DeepSeek-R1-FP4", "gpu": "B200-180GB", "tp": 8, "engine": "sglang",
            "engine_version": "0.4.6.post5", "concurrency": 8}
    headers = {"authorization": f"Bearer {token}"}
    refused = client.post("/api/v1/plan", headers=headers, json=body)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["field"] == "engine_version" and f"{REGISTRY} for an MoE's experts is 0.4.7" in error["problem"]
    planned = client.post("/api/v1/plan", headers=headers, json={**body, "engine_version": "0.4.7"})
    assert planned.status_code == 200, planned.text
