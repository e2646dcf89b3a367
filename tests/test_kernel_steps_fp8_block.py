"""bench/data/kernel_steps.jsonl's block-fp8 rows (tools/distill_kernel_steps.py, Fp8BlockRule): aiconfigurator's
collector times block-fp8 GEMMs outside a CUDA graph (ai-dynamo/aiconfigurator collector/vllm/collect_gemm.py
run_gemm: benchmark_with_power(..., use_cuda_graph=gemm_type != "fp8_block")), so at a few tokens its rows are the
host's issue time of vLLM's block-fp8 linear path, not the kernel's. The distiller prices those GEMMs as a
CUDA-graphed engine runs them; these tests pin the rule on hand-worked numbers read from aiconfigurator-core 0.12.0's
H100 vLLM 0.24.0 GEMM table (systems/data/h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "kernel_steps.jsonl"


def _distiller():
    spec = importlib.util.spec_from_file_location("distill_kernel_steps", ROOT / "tools" / "distill_kernel_steps.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # top level imports json, logging and sys only: no aiconfigurator here
    return module


# The H100 table's rule (fp8_block_rule("h100_sxm")), per token band 1-31 / 32-256 / 257-2048 / 2049+: the host time is
# the median block-fp8 row among GEMMs whose graphed per-tensor twin runs under 15 us (FlashInfer below 32 tokens,
# DeepGEMM above); the ratio the median block / per-tensor latency on shapes both GPU-bound
H100_HOSTS = (60.208e-6, 91.883e-6, 100.544e-6, 100.544e-6)
H100_RATIOS = (0.99525, 0.95970, 0.85413, 0.89268)


def test_a_host_bound_row_takes_the_graphed_per_tensor_time_times_the_block_ratio():
    rule = _distiller().Fp8BlockRule(H100_HOSTS, H100_RATIOS)
    # Qwen3-235B-A22B-FP8's qkv_proj at TP 4 (n 2304, k 4096), 16 tokens: 59.66 us eager, 9.8954 us graphed per-tensor;
    # 9.8954 x 0.99525 = 9.8484 us of GPU time, under the 60.2 us the host takes to issue it
    assert rule.served_s(59.660e-6, 9.8954e-6, 16) == pytest.approx(9.8484e-6, rel=1e-4)


def test_a_gpu_bound_row_is_kept():
    rule = _distiller().Fp8BlockRule(H100_HOSTS, H100_RATIOS)
    # m 4096, n k 5120 (the table's rows): 216.6 us eager block, 236.5 us graphed per-tensor; the GPU's 236.5 x 0.89268
    # = 211.1 us exceed the 100.5 us host time, so the eager row is the kernel's own time and stays
    assert rule.served_s(216.608e-6, 236.537e-6, 4096) == 216.608e-6
    # ... even where the ratio's estimate is below the row (the per-shape kernel difference is not launch time)
    assert rule.served_s(300e-6, 236.537e-6, 4096) == 300e-6


def test_the_rule_never_raises_a_row_and_meets_itself_at_the_host_time():
    rule = _distiller().Fp8BlockRule(H100_HOSTS, H100_RATIOS)
    # an eager row is max(GPU, host) >= the GPU's time: a row under the estimate is kept
    assert rule.served_s(8e-6, 9.8954e-6, 16) == 8e-6
    # where the estimated GPU time reaches the band's host time, the eager row is that time too: no jump
    at_host = H100_HOSTS[1] / H100_RATIOS[1]
    just_below = rule.served_s(H100_HOSTS[1], at_host * (1 - 1e-9), 64)
    just_above = rule.served_s(H100_HOSTS[1], at_host * (1 + 1e-9), 64)
    assert just_below == pytest.approx(just_above, rel=1e-6)


def test_the_hand_worked_qwen3_235b_decode_row():
    # Qwen3-235B-A22B-FP8 on 4 x H100, decode of 16 sequences at 2,048 tokens. aiconfigurator's sum: 27.8328 ms, of
    # which the block-fp8 qkv_proj 5.6080 ms and o_proj 5.5447 ms over 94 layers (decode_step_per_op); the same ops as
    # per-tensor fp8 (graphed): 0.93017 and 0.76545 ms. Per call: qkv 59.66 us eager, 9.8954 x 0.99525 = 9.8484 us;
    # o_proj 58.986 us eager, 8.1431 x 0.99525 = 8.1044 us, both under the 60.2 us host time. Served:
    # 27.8328 - (5.6080 - 94 x 9.8484e-3) - (5.5447 - 94 x 8.1044e-3) = 27.8328 - 4.6822 - 4.7829 = 18.3676 ms
    row = next(r for r in map(json.loads, DATA.read_text().splitlines())
               if r["aic_model"] == "Qwen/Qwen3-235B-A22B-FP8" and r["gpu"] == "H100-SXM-80GB" and r["tp"] == 4
               and r["kind"] == "decode" and r["batch"] == 16 and r["context"] == 2048)
    assert row["ms_aic"] == pytest.approx(27.8328, abs=1e-3)
    assert row["fp8_block_launch_ms"] == pytest.approx(4.6822 + 4.7829, abs=2e-3)
    assert row["ms"] == pytest.approx(18.3676, abs=2e-3)
    assert "collect_gemm.py" in row["source"] and "fp8_block_rule" in row["source"]


def test_only_block_fp8_rows_are_repriced():
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    block = {"Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-235B-A22B-FP8"}  # their GEMMs are fp8_block; nvidia's Llama FP8 is static
    for r in rows:
        if r["aic_model"] in block:
            # a launch time taken out, never more than the sum held
            assert 0.0 <= r["fp8_block_launch_ms"] < r["ms_aic"]
            assert r["ms"] == pytest.approx(r["ms_aic"] - r["fp8_block_launch_ms"], rel=1e-12)
        else:
            assert "ms_aic" not in r and "fp8_block_launch_ms" not in r
    # a one-sequence decode on every GPU the FP8 models run on loses at least a quarter of its sum (H100, 32B at TP 1:
    # 29%; B200: 83-87%)
    small = [r for r in rows if r["aic_model"] in block and r["kind"] == "decode" and r["batch"] == 1]
    assert {r["gpu"] for r in small} == {"H100-SXM-80GB", "H200-141GB", "B200-180GB", "L40S-48GB"}
    assert all(r["ms"] < 0.75 * r["ms_aic"] for r in small)
