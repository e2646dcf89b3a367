#!/usr/bin/env python3
"""Distil measured kernel times into step times specsize's step model is fitted on (issue #11, part 1).

NVIDIA's aiconfigurator-core ships per-operation latency tables measured on real GPUs with vLLM's own kernels
(GEMM by M x N x K and dtype, FlashAttention decode by batch x context x heads, context attention, fused MoE,
vLLM's custom all-reduce by message size and TP). Its engine sums those operations into one forward pass. This
script asks it, for a grid of models x GPUs x TP x batch x context, for the GPU time of a decode step, a prefill
and a mixed (chunked-prefill) step, and writes one JSON line per point to bench/data/kernel_steps.jsonl.

The tables are data measured by NVIDIA (Apache-2.0); the rows written here carry their source (package, version,
system, backend, kernel version). No CPU, scheduler, sampler or API-server time is in them: specsize adds those
itself. Run in an environment with `pip install aiconfigurator==0.12.0` (590 MB with pandas, pyarrow, scipy; not a
dependency of specsize):

    python tools/distill_kernel_steps.py > bench/data/kernel_steps.jsonl
    python tools/distill_kernel_steps.py --models deepseek > bench/data/kernel_steps_deepseek.jsonl

Block-fp8 GEMMs (Qwen3-32B-FP8, Qwen3-235B-A22B-FP8: every attention projection, and the dense MLP of the 32B) are
priced as a CUDA-graphed engine runs them: aiconfigurator's collector times them outside a CUDA graph while it times
every other GEMM dtype and its fused-MoE kernels inside one, so their table rows carry the host's issue time of vLLM's
block-fp8 linear path (fp8_block_rule). Those rows' `ms` is the step without that launch time; `ms_aic` keeps
aiconfigurator's own sum and `fp8_block_launch_ms` the difference.

`--models deepseek` distils DeepSeek-R1 (fp8 block, as served; V3 has the same architecture and the same rows) on the
GPUs whose vLLM tables hold its MLA module (`systems/data/<gpu>/mla/vllm`: mla_context_module_perf and
mla_generation_module_perf, measured on DeepSeek-V3 itself) at TP 8 (and TP 4 on the B200, B300 and GB200, whose 4 GPUs
hold the fp8 weights), with the KV cache in bf16 (vLLM's kv_cache_dtype auto) and in fp8. aiconfigurator's own default for
this checkpoint is an fp8 cache: the rows name theirs in `kv_cache_dtype`. Each row also keeps aiconfigurator's
per-operation split (`ops`, ms; the shared/routed overlap's members as `overlap/<op>`, and the shared expert's GEMMs
again from the CUDA-graphed per-tensor fp8 table as `fp8_tensor/<op>`), so that bench/fit_kernels.py can say which
term an error comes from and price the step as vLLM serves it: the sum carries two things vLLM does not run, the MoE
pre/post-dispatch all-reduces aiconfigurator's vLLM DeepSeek graph adds to the two a layer it already counts, and the
host launch time of block-fp8 GEMM rows its collector times outside a CUDA graph (bench/fit_kernels.py
measured_parts). The A100 cannot be modelled (no fp8 tensor cores: aiconfigurator refuses
'fp8_block'; no vLLM MLA tables either), nor the L40S (8 x 48 GB do not hold the 642 GiB of fp8 weights, there is
no vLLM mla_bmm table, and its TP-8 custom all-reduce rows price a 2048-token prompt's 122 all-reduces at 3.2 s).
"""

from __future__ import annotations

import json
import logging
import sys

logging.disable(logging.CRITICAL)

# (specsize catalog id, aiconfigurator model id, quantization, [TP degrees])
MODELS = [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B", None, [1, 2]),
    ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B", None, [2, 4, 8]),
    ("meta-llama/Llama-3.1-70B-Instruct", "nvidia/Llama-3.1-70B-Instruct-FP8", "fp8", [1, 2, 4, 8]),
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B", None, [1]),
    ("Qwen/Qwen3-32B", "Qwen/Qwen3-32B", None, [1, 2, 4]),
    ("Qwen/Qwen3-32B", "Qwen/Qwen3-32B-FP8", "fp8", [1, 2]),
    ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B", None, [1, 2]),
    ("Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B-FP8", "fp8", [4, 8]),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-v0.1", None, [2, 4]),
    ("openai/gpt-oss-20b", "openai/gpt-oss-20b", None, [1]),
    ("openai/gpt-oss-120b", "openai/gpt-oss-120b", None, [1, 2, 4, 8]),
]
SYSTEMS = {"h100_sxm": "H100-SXM-80GB", "h200_sxm": "H200-141GB", "a100_sxm": "A100-80GB", "b200_sxm": "B200-180GB",
           "l40s": "L40S-48GB"}
BATCHES = (1, 4, 16, 64, 128, 256, 512)
CONTEXTS = (256, 2048, 8192)
PROMPTS = (128, 512, 2048, 8192)
MIXED = ((2048, 16), (2048, 128), (512, 64), (1024, 256))  # (prompt-chunk tokens, decoding sequences)

# DeepSeek-V3 / R1 (--models deepseek): (specsize catalog id, aiconfigurator id, quantization, {system: [TP]})
DEEPSEEK = [("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1", "fp8",
             {"h100_sxm": [8], "h200_sxm": [8], "b200_sxm": [4, 8], "b300_sxm": [4, 8], "gb200": [4, 8]})]
DEEPSEEK_SYSTEMS = {**SYSTEMS, "b300_sxm": "B300-288GB", "gb200": "GB200-186GB"}
DEEPSEEK_KV = ("bfloat16", "fp8")  # vLLM's default (auto: the activations' dtype) and --kv-cache-dtype fp8
DEEPSEEK_BATCHES = (1, 4, 16, 64, 128, 256)
DEEPSEEK_CONTEXTS = (1024, 2048, 4096, 8192)
DEEPSEEK_PROMPTS = (1024, 2048, 4096, 8192)
# 8 x 80 GB hold 596 GiB, less than the checkpoint's 642 GiB of fp8 weights: a kernel-time check, not a deployment
DEEPSEEK_NOTES = {("h100_sxm", 8): "weights do not fit 8 x 80 GB (served on 16 H100s); kernel-time check only"}


def main() -> int:
    import argparse

    import aiconfigurator_core
    from aiconfigurator_core.sdk.engine import EngineHandle

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", choices=("default", "deepseek"), default="default",
                    help="default: the Llama / Qwen / Mixtral / gpt-oss grid; deepseek: DeepSeek-R1 (MLA, fp8 block)")
    args = ap.parse_args()
    version = getattr(aiconfigurator_core, "__version__", "0.12.0")
    if args.models == "deepseek":
        return deepseek(version)
    written = 0
    for ours, theirs, quant, tps in MODELS:
        for system, gpu in SYSTEMS.items():
            for tp in tps:
                try:
                    h = EngineHandle.compile(theirs, system, "vllm", tp_size=tp, moe_tp_size=tp)  # vLLM: experts sharded by TP
                except Exception as err:  # noqa: BLE001 - a model the tables do not cover on this system
                    print(f"skip {theirs} {system} tp{tp}: {str(err)[:80]}", file=sys.stderr)
                    continue
                base = {"model": ours, "aic_model": theirs, "quantization": quant, "gpu": gpu, "tp": tp,
                        "source": f"aiconfigurator-core {version} (PyPI, Apache-2.0) systems/data/{system}/*/vllm: "
                                  "per-operation latencies measured by NVIDIA with vLLM's kernels, summed by its "
                                  "EngineHandle"}
                points: list[dict] = []
                try:
                    _grid(h, points)
                    block = _block_gemms(theirs, tp)
                    if block:
                        rule = fp8_block_rule(system)
                        base["source"] += FP8_BLOCK_SOURCE.format(**rule.describe())
                        for point in points:
                            _reprice_fp8_block(h, point, block, rule)
                except Exception as err:  # noqa: BLE001 - e.g. fp8 weights on a GPU without fp8 tensor cores
                    print(f"skip {theirs} {system} tp{tp}: {str(err)[:80]}", file=sys.stderr)
                    continue
                for point in points:
                    if point["ms"] and point["ms"] > 0:
                        print(json.dumps({**base, **point}))
                        written += 1
    print(f"{written} points", file=sys.stderr)
    return 0


def _grid(h, points: list[dict]) -> None:
    for b in BATCHES:
        for ctx in CONTEXTS:
            points.append({"kind": "decode", "batch": b, "context": ctx,
                           "ms": h.decode_step_latency(b, ctx, 2)})
    for p in PROMPTS:
        points.append({"kind": "prefill", "batch": 1, "prompt": p, "ms": h.predict_prefill_latency(1, p)})
    for chunk, gen in MIXED:
        points.append({"kind": "mixed", "chunk": chunk, "batch": gen, "context": 2048,
                       "ms": h.mixed_step_latency(chunk, gen, 2048, 256)})


# --- block-fp8 GEMMs as a CUDA-graphed engine runs them --------------------------------------------------------------

# aiconfigurator's collector (ai-dynamo/aiconfigurator collector/vllm/collect_gemm.py, run_gemm, __compat__
# vllm==0.24.0) times a GEMM through collector/helper.py benchmark_with_power(..., use_cuda_graph=gemm_type !=
# "fp8_block"): every dtype but block fp8 is captured in a CUDA graph and replayed; block fp8 runs eagerly, one
# RowParallelLinear.forward a run (outside_loop_count 1), between two CUDA events. Eagerly the GPU waits on the host
# whenever vLLM's Python block-fp8 linear path (activation quantisation + FlashInfer below 32 tokens / DeepGEMM
# above on Hopper and Blackwell, Triton on Ada) takes longer to issue than the kernels take to run, so a row holds
# max(GPU time, host time), not their sum: nothing can be subtracted from a row whose GPU time exceeds the host's.
# The fused-MoE rows (collect_moe.py, benchmark_with_power's default use_cuda_graph=True) and vLLM's served decode
# (CUDA graphs) pay no such time. The rule, per token band, from the same table (fp8_block_rule):
#   host   = the median block-fp8 row whose per-tensor fp8 twin (graphed, same m, n, k: the same weight bytes and
#            flops) runs under 15 us: there the GPU's work is negligible and the row is the host's issue time (H100:
#            60 us under FlashInfer, 90 us under DeepGEMM; B200 170-270 us; L40S 340 us);
#   ratio  = the median block / per-tensor latency over shapes whose per-tensor time is at least twice the table's
#            95th-percentile host time (GPU-bound both ways): the block-scale kernel's own speed against the
#            per-tensor one (0.85-1.05 on Hopper and Blackwell, 1.3-1.4 for Ada's Triton kernel above 256 tokens);
#   served = gpu = per-tensor x ratio, the graphed GPU time; a row whose gpu is under the band's host time was the
#            host's and takes min(row, gpu) (an eager row is never below the GPU's time); at or above it the row is
#            GPU-bound and kept (the two meet where gpu = host = row, so the rule is continuous).
FP8_BLOCK_BANDS = ((1, 31), (32, 256), (257, 2048), (2049, 1 << 30))  # FlashInfer below 32 tokens; memory / compute
FP8_BLOCK_TINY_S = 15e-6  # per-tensor GPU time below which a block row is host time
FP8_BLOCK_SOURCE = ("; block-fp8 GEMMs (timed outside a CUDA graph by aiconfigurator's collector/vllm/collect_gemm.py) "
                    "repriced without the host's launch time: a GEMM whose graphed per-tensor fp8 row x {ratios} "
                    "(block / per-tensor on GPU-bound shapes) is under the table's host time ({hosts}) takes that "
                    "time; ms_aic keeps aiconfigurator's sum (tools/distill_kernel_steps.py fp8_block_rule)")


class Fp8BlockRule:
    """The repricing of one system's block-fp8 GEMM rows (the comment above FP8_BLOCK_BANDS), per FP8_BLOCK_BANDS."""

    def __init__(self, hosts_s: tuple[float, ...], ratios: tuple[float, ...]):
        self.hosts_s = hosts_s
        self.ratios = ratios

    def _band(self, tokens: int) -> int:
        return next(i for i, (lo, hi) in enumerate(FP8_BLOCK_BANDS) if lo <= tokens <= hi)

    def served_s(self, block_s: float, tensor_s: float, tokens: int) -> float:
        """One GEMM call as a graphed engine runs it: `block_s` the eager block-fp8 row, `tensor_s` the graphed
        per-tensor fp8 row of the same shape, `tokens` its M."""
        band = self._band(tokens)
        gpu = tensor_s * self.ratios[band]
        return block_s if gpu >= self.hosts_s[band] else min(block_s, gpu)

    def describe(self) -> dict:
        def label(lo: int, hi: int) -> str:
            return f"{lo}-{hi}" if hi < 1 << 30 else f"{lo}+"

        return {"ratios": ", ".join(f"{r:.2f} ({label(*b)})" for b, r in zip(FP8_BLOCK_BANDS, self.ratios))
                + " tokens",
                "hosts": ", ".join(f"{h * 1e6:.0f} us ({label(*b)})" for b, h in zip(FP8_BLOCK_BANDS, self.hosts_s))}


def fp8_block_rule(system: str) -> Fp8BlockRule:
    """`system`'s rule, measured on its vLLM GEMM table (systems/data/<system>/gemm/vllm/<newest>/gemm_perf.parquet:
    gemm_dtype, m, n, k, latency in ms)."""
    from pathlib import Path

    import aiconfigurator_core
    import pandas as pd

    root = Path(aiconfigurator_core.__file__).parent / "systems" / "data" / system / "gemm" / "vllm"
    newest = max(root.iterdir(), key=lambda d: tuple(int(x) for x in d.name.split(".") if x.isdigit()))
    table = pd.read_parquet(newest / "gemm_perf.parquet")
    both = table.pivot_table(index=["m", "n", "k"], columns="gemm_dtype", values="latency", aggfunc="median")
    both = both.dropna(subset=["fp8", "fp8_block"]).reset_index()
    tiny = both[both.fp8 < FP8_BLOCK_TINY_S * 1e3]
    bound_ms = 2.0 * float(tiny.fp8_block.quantile(0.95))
    hosts, ratios = [], []
    for lo, hi in FP8_BLOCK_BANDS:
        band = both[(both.m >= lo) & (both.m <= hi)]
        tiny_band = band[band.fp8 < FP8_BLOCK_TINY_S * 1e3]
        # no GEMM this large runs under 15 us (H100 and H200 above 2,048 tokens): the band below's host time, the same
        # kernel path (DeepGEMM from 32 tokens)
        hosts.append(float(tiny_band.fp8_block.median()) / 1e3 if len(tiny_band) else hosts[-1])
        bound = band[band.fp8 >= bound_ms]
        ratios.append(float((bound.fp8_block / bound.fp8).median()) if len(bound) else 1.0)
    return Fp8BlockRule(tuple(hosts), tuple(ratios))


def _block_gemms(theirs: str, tp: int) -> dict[str, list[dict]]:
    """The model's block-fp8 GEMM ops (aiconfigurator's op JSON), for the decode and the context graph."""
    import aiconfigurator_core
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.models import get_model

    config = build_model_config(tp_size=tp, pp_size=1, attention_dp_size=1, moe_tp_size=tp, moe_ep_size=1,
                                gemm_quant_mode=None, kvcache_quant_mode=None, fmha_quant_mode=None,
                                moe_quant_mode=None, comm_quant_mode=None, forward_model=None, attention_backend=None)
    model = get_model(theirs, config, "vllm")
    out = {}
    for phase, ops in (("generation", model.generation_ops), ("context", model.context_ops)):
        spec = json.loads(aiconfigurator_core.ops_json_from_ops(list(ops)))
        gemms = [op for op in spec if "Gemm" in op and op["Gemm"]["quant_mode"] == "fp8_block"]
        if gemms:
            out[phase] = gemms
    return out


def _reprice_fp8_block(h, point: dict, block: dict[str, list[dict]], rule: Fp8BlockRule) -> None:
    """Take the launch time out of `point`'s block-fp8 GEMMs: each op priced from the table both ways at the step's
    tokens (the block op as the step summed it, and the same op as per-tensor fp8)."""
    if point["kind"] == "decode":
        ops, context, tokens = block.get("generation", []), False, point["batch"]
    else:
        ops, context = block.get("context", []), True
        tokens = point["prompt"] if point["kind"] == "prefill" else point["chunk"] + point["batch"]
    if not ops or not point["ms"]:
        return
    tensor = [{"Gemm": {**op["Gemm"], "quant_mode": "fp8"}} for op in ops]

    def price(spec: list[dict]) -> list[float]:
        rows = h.evaluate_ops_json(json.dumps(spec), is_context=context, batch_size=1 if context else tokens,
                                   s=tokens if context else 1, x=tokens)
        return [ms for _, ms, *_ in rows]

    launch_ms = 0.0
    for op, block_ms, tensor_ms in zip(ops, price(ops), price(tensor)):
        calls = op["Gemm"]["scale_factor"]
        served = rule.served_s(block_ms / calls / 1e3, tensor_ms / calls / 1e3, tokens) * calls * 1e3
        launch_ms += max(0.0, block_ms - served)  # a kept row: nothing (not a rounding's -1e-15)
    point["ms_aic"] = point["ms"]
    point["ms"] = point["ms"] - launch_ms
    point["fp8_block_launch_ms"] = launch_ms


def deepseek(version: str) -> int:
    """DeepSeek-R1's rows, each with aiconfigurator's per-operation split."""
    import aiconfigurator_core
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.engine import EngineHandle
    from aiconfigurator_core.sdk.models import get_model

    written = 0
    for ours, theirs, quant, systems in DEEPSEEK:
        for system, tps in systems.items():
            for tp in tps:
                for kv in DEEPSEEK_KV:
                    try:
                        h = EngineHandle.compile(theirs, system, "vllm", tp_size=tp, moe_tp_size=tp,
                                                 kvcache_quant_mode=kv)
                        config = build_model_config(tp_size=tp, pp_size=1, attention_dp_size=1, moe_tp_size=tp,
                                                    moe_ep_size=1, gemm_quant_mode=None, kvcache_quant_mode=kv,
                                                    fmha_quant_mode=None, moe_quant_mode=None, comm_quant_mode=None,
                                                    forward_model=None, attention_backend=None)
                        model = get_model(theirs, config, "vllm")
                    except Exception as err:  # noqa: BLE001 - a system the tables do not cover
                        print(f"skip {theirs} {system} tp{tp} kv {kv}: {str(err)[:80]}", file=sys.stderr)
                        continue
                    # the decode's shared/routed overlap, priced member by member (its total is the longer group)
                    overlap = next(op for op in model.generation_ops if op._name == "generation_moe_overlap")
                    members = aiconfigurator_core.ops_json_from_ops(list(overlap._group_a) + list(overlap._group_b))
                    shared = _shared_per_tensor(model)
                    base = {"model": ours, "aic_model": theirs, "quantization": quant, "gpu": DEEPSEEK_SYSTEMS[system],
                            "tp": tp, "kv_cache_dtype": kv,
                            "source": f"aiconfigurator-core {version} (PyPI, Apache-2.0) systems/data/{system}/*/vllm "
                                      "(mla: vLLM's MLA attention module measured on DeepSeek-V3; moe: fused-MoE "
                                      "fp8_block; gemm; comm: custom all-reduce): per-operation latencies measured by "
                                      "NVIDIA with vLLM's kernels, summed by its EngineHandle (its DEEPSEEK model, "
                                      "vLLM backend)"}
                    if (system, tp) in DEEPSEEK_NOTES:
                        base["note"] = DEEPSEEK_NOTES[(system, tp)]
                    for point in _deepseek_grid(h, members, shared):
                        if point["ms"] and point["ms"] > 0:
                            print(json.dumps({**base, **point}))
                            written += 1
    print(f"{written} points", file=sys.stderr)
    return 0


def _ops(rows, prefix: str = "") -> dict:
    return {prefix + name: ms for name, ms, *_ in rows}


def _shared_per_tensor(model) -> str:
    """The shared expert's two GEMMs again, priced from the per-tensor fp8 table: aiconfigurator's collector times
    the block-fp8 GEMMs outside a CUDA graph (collector/vllm/collect_gemm.py: use_cuda_graph=gemm_type !=
    "fp8_block"), so their rows carry 55 us (Hopper) to 150-270 us (B200) of host launch time at a few tokens that a
    graphed decode does not pay; the per-tensor fp8 kernel is timed in a graph and has the same bytes and flops."""
    import aiconfigurator_core
    import aiconfigurator_core.sdk.operations as ops
    from aiconfigurator_core.sdk import common

    gemms = [op for op in model.context_ops if op._name in ("context_shared_gate_up_gemm", "context_shared_ffn2_gemm")]
    spec = json.loads(aiconfigurator_core.ops_json_from_ops(gemms))
    rebuilt = []
    for op in spec:
        g = op["Gemm"]
        rebuilt.append(ops.GEMM(g["name"], g["scale_factor"], g["n"], g["k"], common.GEMMQuantMode.fp8))
    return aiconfigurator_core.ops_json_from_ops(rebuilt)


def _deepseek_grid(h, members: str, shared: str) -> list[dict]:
    def graphed(context: bool, tokens: int) -> dict:
        rows = h.evaluate_ops_json(shared, is_context=context, batch_size=1 if context else tokens,
                                   s=tokens if context else 1, x=tokens)
        return {f"fp8_tensor/{name.replace('context_', '')}": ms for name, ms, *_ in rows}

    points: list[dict] = []
    for b in DEEPSEEK_BATCHES:
        for ctx in DEEPSEEK_CONTEXTS:
            ms = h.decode_step_latency(b, ctx, 2)
            ops = {**_ops(h.decode_step_per_op(b, ctx, 2)),
                   **_ops(h.evaluate_ops_json(members, is_context=False, batch_size=b, s=ctx), "overlap/"),
                   **graphed(False, b)}
            points.append({"kind": "decode", "batch": b, "context": ctx, "ms": ms,
                           "provenance": h.last_provenance() or "silicon", "ops": ops})
    for p in DEEPSEEK_PROMPTS:
        ms = h.predict_prefill_latency(1, p)
        context_ops, _ = h.run_static_per_op(batch_size=1, isl=p, osl=2)
        points.append({"kind": "prefill", "batch": 1, "prompt": p, "ms": ms,
                       "provenance": h.last_provenance() or "silicon", "ops": {**_ops(context_ops),
                                                                                **graphed(True, p)}})
    for chunk, gen in MIXED:
        ms = h.mixed_step_latency(chunk, gen, 2048, 256)
        common_ops, ctx_attn, gen_attn = h.mixed_step_breakdown_per_op(chunk, gen, 2048, 256)
        points.append({"kind": "mixed", "chunk": chunk, "batch": gen, "context": 2048, "ms": ms,
                       "provenance": h.last_provenance() or "silicon",
                       "ops": {**_ops(common_ops), **_ops(ctx_attn, "prompt/"), **_ops(gen_attn, "decode/"),
                               **graphed(True, chunk + gen)}})
    return points


if __name__ == "__main__":
    sys.exit(main())
