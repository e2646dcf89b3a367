"""Builders shared by the tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specsize.catalog import load_gpu, load_model
from specsize.catalog.configs import spec_from_config
from specsize.catalog.models import catalog_entry
from specsize.core.specs import Deployment, EngineSettings, LengthDistribution, SpeculativeConfig, Workload
from specsize.engines import resolve_profile

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
GiB = 1 << 30


def run_cli(capsys, *args) -> tuple[int, str, str]:
    """`specsize ARGS` in this process: its exit code, stdout and stderr (paths and numbers passed as text)."""
    from specsize.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def deployment(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", tp=1, pp=1, draft=None,
               method="none", k=0, draft_tp=1, **engine) -> Deployment:
    spec = SpeculativeConfig(method=method, draft=load_model(draft) if draft else None, num_speculative_tokens=k,
                             draft_tp=draft_tp)
    return Deployment(target=load_model(target), gpu=load_gpu(gpu), speculative=spec, tp=tp, pp=pp,
                      engine=EngineSettings(**engine))


def workload(prompt=(1000, 2000, 4000, 8000), output=(200, 400, 800, 1000), concurrency=8, burst=1.0,
             percentile="p99") -> Workload:
    return Workload(prompt_tokens=LengthDistribution(*prompt), output_tokens=LengthDistribution(*output),
                    concurrency=concurrency, burst_factor=burst, percentile=percentile)


def profile(version=None):
    return resolve_profile("vllm", version)


def calibration_rows() -> dict:
    path = SHARED / "calibration" / "vllm_startup_logs.jsonl"
    if not path.exists():
        return {}
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}


def chromium() -> str:
    """Debian's Chromium for the browser tests (the report page and the service's UI), or skip saying why."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium on this machine: .ci/run installs Debian's chromium package; install it with "
                "`apt-get install chromium` to run this test")


def bench_module(name: str):
    """bench/<name>.py loaded as a module (the bench scripts are not a package): the tests read the rows and the
    figures the way the bench itself does."""
    import importlib.util
    import sys

    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


def llama_405b_meta_fp8():
    """Llama-3.1-405B with Meta's FP8 quantization_config: fbgemm_fp8, every attention block and the first and last
    layers' MLP listed in modules_to_not_convert (The Llama 3 Herd of Models, arXiv 2407.21783, sec. 6.2), as full
    module paths like the published config's."""
    cfg = dict(catalog_entry("meta-llama/Meta-Llama-3.1-405B")["config"])
    keep = [f"model.layers.{i}.self_attn.{p}_proj" for i in range(126) for p in "qkvo"]
    keep += [f"model.layers.{i}.mlp.{p}_proj" for i in (0, 125) for p in ("gate", "up", "down")]
    cfg.update(quantization_config={"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                    "modules_to_not_convert": keep + ["lm_head"]})
    return spec_from_config(cfg, "llama-405b-meta-fp8", "test")



def chain_rate(length: float, k: int) -> float:
    """The a with 1 + a + ... + a^k = length, by bisection (independent of core.speculation)."""
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if sum(mid ** i for i in range(k + 1)) < length:
            lo = mid
        else:
            hi = mid
    return lo


SAFETENSORS_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "U8": 1, "I8": 1, "F8_E4M3": 1}


def write_safetensors_header(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A safetensors file holding only its header: each tensor's dtype, shape and byte range (what specsize reads)."""
    import struct  # noqa: PLC0415

    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = SAFETENSORS_BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def team_app(tmp_path, monkeypatch, password: str, example: Path):
    """(client, {role: token}, url) of a fresh service app on a SQLite file with a viewer, a planner and an admin and
    `example` saved as deployment `d1` (v1) by the planner; the app's promise to read models by name only is undone
    after the test (monkeypatch)."""
    from fastapi.testclient import TestClient

    from specsize.catalog.models import NAMES_ONLY_ENV
    from specsize.service import auth, db
    from specsize.service.app import Config, create_app

    monkeypatch.setenv(NAMES_ONLY_ENV, "1")
    url = str(tmp_path / "service.sqlite")
    engine = db.connect(url)
    tokens = {role: auth.add_user(engine, role, role, password) for role in ("viewer", "planner", "admin")}
    engine.dispose()
    client = TestClient(create_app(Config(db_url=url, secure_cookies=False)), raise_server_exceptions=False)
    made = client.post("/api/v1/deployments", headers={"authorization": f"Bearer {tokens['planner']}"}, json={
        "deployment_name": "d1", "deployment_yaml": example.read_text(), "acceptance_rate": 0.7})
    assert made.status_code == 201, made.text
    return client, tokens, url


def listed_with_sources(capsys, models: list[str], gpus: list[str]) -> list:
    """`specsize models` and `specsize gpus` (JSON, offline) list each of `models` and `gpus`, every model's source
    pinned at a commit; the GpuSpecs of `gpus`, for their own checks."""
    from specsize.catalog import catalog_ids, gpu_ids

    code, out, _ = run_cli(capsys, "models", "--format", "json")
    assert code == 0
    listed = json.dumps(json.loads(out))
    for model_id in models:
        assert model_id in catalog_ids() and model_id in listed
        assert catalog_entry(model_id)["source"].split(" @ ")[1][:40].isalnum()  # a pinned commit
    code, out, _ = run_cli(capsys, "gpus", "--format", "json")
    assert code == 0
    assert all(gpu_id in gpu_ids() and gpu_id in out for gpu_id in gpus)
    return [load_gpu(gpu_id) for gpu_id in gpus]


def glm_params(h, layers, dense, heads, kv_heads, d, inter, experts, moe_inter, vocab, qk_norm) -> int:
    """GLM-4.5's parameters (glm4_moe) by hand: q/k/v with their bias, o, the q/k norms where use_qk_norm, 2 RMSNorms a
    layer; dense SwiGLU MLPs; MoE layers of routed experts + the shared one + the router and its score-correction
    bias; untied embedding and head; the final norm."""
    qkv = (heads + 2 * kv_heads) * d
    attention = qkv * h + qkv + h * heads * d + (2 * d if qk_norm else 0)
    moe = experts * 3 * h * moe_inter + 3 * h * moe_inter + experts * h + experts
    return layers * (attention + 2 * h) + dense * 3 * h * inter + (layers - dense) * moe + 2 * vocab * h + h
