"""Builders shared by the tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specsize.catalog import load_gpu, load_model
from specsize.core.specs import Deployment, EngineSettings, LengthDistribution, SpeculativeConfig, Workload
from specsize.engines import resolve_profile

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
GiB = 1 << 30


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
