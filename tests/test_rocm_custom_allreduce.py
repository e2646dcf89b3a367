"""vLLM runs its own custom all-reduce kernel on ROCm from 0.8.3 (device_communicators/custom_all_reduce.py asserts
current_platform.is_cuda_alike(); 0.8.2 asserted is_cuda() and all-reduced through RCCL): AMD families take
Efficiency.allreduce_latency_custom_s on those releases. Numbers worked out by hand from the catalog's terms."""

import json

import pytest
from helpers import run_cli

# Llama-3.1-70B: 80 layers, two all-reduces a layer (attention output, MLP output) at TP 8
ALL_REDUCES = 2 * 80
RCCL_S, CUSTOM_S = 45e-6, 8.26e-6  # efficiency.json cdna3: allreduce_latency_s, allreduce_latency_custom_s


def _tpot(capsys, version: str, gpu: str = "MI300X-192GB") -> float:
    code, out, err = run_cli(capsys, "plan", "--target", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", gpu, "--tp", "8",
                             "--quantization", "fp8", "--kv-cache-dtype", "fp8", "--concurrency", "1",
                             "--engine-version", version, "--format", "json")
    assert code == 0, err
    return json.loads(out)["perf"]["tpot_s_no_spec"]


def test_vllm_0_8_3_all_reduces_through_its_own_kernel_on_rocm(capsys):
    """At one request the step differs only by its all-reduces' latency: 160 x (45 - 8.26) us = 5.878 ms less from
    0.8.3. AMD's rocm/vllm 0.9.1 - 0.10.2 images measured 7.4 - 8.4 ms a token for this deployment at batch 1
    (bench/data/serving_runs_s55.jsonl); 0.8.2's 13.0 ms had 8.2 ms of RCCL latency in it."""
    assert _tpot(capsys, "0.8.2") - _tpot(capsys, "0.8.3") == pytest.approx(ALL_REDUCES * (RCCL_S - CUSTOM_S), rel=1e-6)
    assert 0.0074 * 0.85 < _tpot(capsys, "0.10.2") < 0.0084


def test_nvidia_families_are_unchanged_by_the_release(capsys):
    """Hopper has no custom-kernel latency of its own: its fitted all-reduce latency is the custom kernel's already."""
    assert _tpot(capsys, "0.8.2", "H100-SXM-80GB") == _tpot(capsys, "0.8.3", "H100-SXM-80GB")
