"""bench/data/kernel_steps_deepseek.jsonl (tools/distill_kernel_steps.py --models deepseek) and bench/fit_kernels.py
--data: DeepSeek-R1's decode, prefill and mixed steps summed by aiconfigurator-core 0.12.0 from vLLM kernel tables,
each with its per-operation split, and specsize's step model scored and taken apart against them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "kernel_steps_deepseek.jsonl"
sys.path.insert(0, str(ROOT / "bench"))

import fit_kernels  # noqa: E402 - bench/ is not a package

LAYERS = 61  # DeepSeek-V3 / R1: aiconfigurator prices every layer's MoE (its DEEPSEEK model has no dense layers)


def rows() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def test_rows_load_and_carry_their_source():
    points = rows()
    # 5 GPUs at TP 8 and the three Blackwells at TP 4, two KV dtypes, 6 batches x 4 contexts + 4 prompts + 4 mixed
    # steps each
    assert len(points) == 8 * 2 * (6 * 4 + 4 + 4)
    assert {(r["gpu"], r["tp"]) for r in points} == {("H100-SXM-80GB", 8), ("H200-141GB", 8), ("B200-180GB", 8),
                                                     ("B200-180GB", 4), ("B300-288GB", 8), ("B300-288GB", 4),
                                                     ("GB200-186GB", 8), ("GB200-186GB", 4)}
    for r in points:
        assert r["model"] == "deepseek-ai/DeepSeek-R1" and r["quantization"] == "fp8"
        assert r["kv_cache_dtype"] in ("bfloat16", "fp8")
        assert "aiconfigurator-core 0.12.0" in r["source"] and "/vllm" in r["source"]
        assert r["provenance"] == "silicon" and r["ms"] > 0
    # 8 x 80 GB (596 GiB) cannot hold the 642 GiB of fp8 weights: those rows say so
    assert all("do not fit" in r["note"] for r in points if r["gpu"] == "H100-SXM-80GB")


def test_operations_add_up_to_the_step():
    for r in rows():
        ops = r["ops"]
        top = sum(v for k, v in ops.items() if not k.startswith(("overlap/", "fp8_tensor/")))
        assert top == pytest.approx(r["ms"], rel=1e-9)
        if r["kind"] == "decode":
            # the routed and shared experts on two streams: the step pays the longer
            routed = sum(ops[f"overlap/generation_{n}"] for n in ("router_gemm", "moe_pre_dispatch", "moe",
                                                                   "moe_post_dispatch"))
            shared = sum(ops[f"overlap/generation_{n}"] for n in ("shared_gate_up_gemm", "shared_act_gate",
                                                                   "shared_ffn2_gemm"))
            assert ops["generation_moe_overlap"] == pytest.approx(max(routed, shared), rel=1e-9)
        assert sum(fit_kernels.measured_parts(r).values()) == pytest.approx(r["ms"] / 1e3, rel=1e-9)


def test_the_dispatch_all_reduces_double_the_layer_all_reduces():
    # aiconfigurator's vLLM DeepSeek graph: CustomAllReduce over 2 x 61 layers, and a MoE pre- and post-dispatch that
    # each are one more custom all-reduce of the same hidden states a layer: each is half the layer all-reduces
    for r in rows():
        ops = r["ops"]
        prefix = "overlap/generation" if r["kind"] == "decode" else "context"
        layer_ar = ops["generation_tp_allreduce" if r["kind"] == "decode" else "context_tp_allreduce"]
        assert ops[f"{prefix}_moe_pre_dispatch"] == pytest.approx(layer_ar / 2, rel=1e-6)
        assert ops[f"{prefix}_moe_post_dispatch"] == pytest.approx(layer_ar / 2, rel=1e-6)


def test_served_step_drops_the_extra_all_reduces_and_the_eager_gemm_time():
    row = next(r for r in rows() if (r["gpu"], r["tp"], r["kv_cache_dtype"], r["kind"], r["batch"],
                                     r.get("context")) == ("H200-141GB", 8, "bfloat16", "decode", 64, 2048))
    ops = row["ops"]
    # by hand: everything outside the MoE overlap as summed, then the longer of the routed stream without its two
    # dispatch all-reduces and the shared stream with its GEMMs at the graphed per-tensor fp8 rows
    outside = sum(v for k, v in ops.items() if not k.startswith(("overlap/", "fp8_tensor/"))
                  and k != "generation_moe_overlap")
    routed = ops["overlap/generation_router_gemm"] + ops["overlap/generation_moe"]
    shared = (ops["fp8_tensor/shared_gate_up_gemm"] + ops["overlap/generation_shared_act_gate"]
              + ops["fp8_tensor/shared_ffn2_gemm"])
    want = (outside + max(routed, shared)) / 1e3
    assert sum(fit_kernels.measured_parts(row, served=True).values()) == pytest.approx(want, rel=1e-9)
    # about 32.0 ms summed, 30.4 ms as served: the two dispatch all-reduces are 2 x 0.81 ms of it
    assert row["ms"] == pytest.approx(31.96, abs=0.05)
    assert want * 1e3 == pytest.approx(row["ms"] - 2 * ops["overlap/generation_moe_pre_dispatch"], rel=1e-9)


def test_predicted_all_reduce_share_is_two_a_layer():
    # specsize's all-reduce part of an H200 TP-8 decode of one sequence, by hand from the family's terms: 2 x 61
    # all-reduces of latency + 1 us per GPU beyond 2, and 7168 x 2 bytes moved 2 (tp - 1) / tp times over the link
    from specsize.catalog.gpus import load_efficiency, load_gpu

    row = next(r for r in rows() if (r["gpu"], r["kv_cache_dtype"], r["kind"], r["batch"], r.get("context"))
               == ("H200-141GB", "bfloat16", "decode", 1, 2048))
    gpu = load_gpu("H200-141GB")
    eff = load_efficiency(gpu)
    per_call = (eff.allreduce_latency_s + 6 * eff.allreduce_latency_per_gpu_s
                + 7168 * 2 * 2 * 7 / 8 / (gpu.interconnect_bytes_s * eff.allreduce_bus_fraction))
    got = fit_kernels.predicted_parts(row, eff)
    assert got["allreduce"] == pytest.approx(2 * LAYERS * per_call, rel=1e-6)
    # the parts add up to the step specsize prices
    assert sum(got.values()) == pytest.approx(fit_kernels.predict(row, eff), rel=1e-9)
    # an fp8 KV cache halves the latent bytes a decode reads: the MLA part falls, nothing else moves
    fp8 = {**row, "kv_cache_dtype": "fp8"}
    got8 = fit_kernels.predicted_parts(fp8, eff)
    assert got8["mla"] < got["mla"] and got8["routed"] == pytest.approx(got["routed"])


def test_kv_dtype_and_default_data_unchanged():
    assert fit_kernels.kv_dtype_bytes({"kv_cache_dtype": "fp8"}) == 1
    assert fit_kernels.kv_dtype_bytes({}) == 2  # the Llama / Qwen / gpt-oss rows carry no field: 16-bit caches
    default = fit_kernels.load_points()
    assert default and all("ops" not in r for r in default)


def test_cli_scores_the_deepseek_file():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "fit_kernels.py"), "--data", str(DATA)],
                         capture_output=True, text=True, check=True).stdout
    assert "per GPU x phase x batch band" in out
    assert "H200-141GB     tp8  bfloat16 decode   b16-64" in out
    assert "routed experts per MoE layer" in out
    bad = subprocess.run([sys.executable, str(ROOT / "bench" / "fit_kernels.py"), "--data", str(DATA), "--write"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--write" in bad.stderr
