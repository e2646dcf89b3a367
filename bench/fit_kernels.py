#!/usr/bin/env python3
"""How well specsize's step model (GPU part) matches measured kernel times, and the per-family fit of its terms.

Reads bench/data/kernel_steps.jsonl (tools/distill_kernel_steps.py: decode steps, prefills and mixed steps of
Llama-3.1 8B/70B, Qwen3 8B/32B/30B-A3B/235B-A22B and gpt-oss on H100/H200/A100/B200/L40S, summed from per-operation
latencies measured with vLLM's kernels by NVIDIA's aiconfigurator-core) and prices every point with
specsize.core.perf (no CPU, scheduler, sampler or API-server terms: the tables have none). Prints the median
|error| per GPU and kind, split by model: the held-out models (Qwen3-32B, gpt-oss-120b) never enter the fit.

    .venv/bin/python bench/fit_kernels.py            # the catalog's efficiencies against the points
    .venv/bin/python bench/fit_kernels.py --fit      # coordinate search of the GPU terms per family
    .venv/bin/python bench/fit_kernels.py --data bench/data/kernel_steps_deepseek.jsonl   # DeepSeek-R1 (MLA, fp8)

The block-fp8 models' rows (Qwen3-32B-FP8, Qwen3-235B-A22B-FP8) hold their steps as a CUDA-graphed engine runs them:
aiconfigurator's collector times block-fp8 GEMMs outside a CUDA graph, so its sum carries the host's launch time of
every such GEMM; tools/distill_kernel_steps.py (Fp8BlockRule) takes it out into `ms` and keeps the sum in `ms_aic`
(`--aic-sums` scores and fits on those instead).

Rows that carry aiconfigurator's per-operation split (`ops`: the DeepSeek file) are also scored per GPU x phase x
batch band and taken apart by term (the MLA block, the routed experts, the shared experts, the all-reduce): the
measured side from the operations, specsize's from core.perf.step_time itself with one term switched off at a time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = ROOT / "bench" / "data" / "kernel_steps.jsonl"
# DeepSeek-R1 (bench/data/kernel_steps_deepseek.jsonl, --data) is scored, never fitted: its rows carry artefacts of the
# tables the step model must not learn (measured_parts)
HELD_OUT = ("Qwen/Qwen3-32B", "openai/gpt-oss-120b", "deepseek-ai/DeepSeek-R1")
TERMS = ("memory", "compute", "gemm_half_tokens", "gemm_fixed_s", "attn_memory", "attn_compute", "moe_memory",
         "moe_fp8_memory", "moe_layer_fixed_s", "low_bit_memory", "allreduce_latency_s",
         "allreduce_bus_fraction")
# terms a family's kernel points cannot pin, set by the serving fit instead (bench/fit_serving.py; the reason is in
# that family's source in efficiency.json): the kernel fit neither moves nor writes them
SET_BY_SERVING = {"blackwell": ("moe_layer_fixed_s",)}


def kernel_terms(family: str) -> tuple[str, ...]:
    """The terms the kernel fit sets for `family`."""
    return tuple(t for t in TERMS if t not in SET_BY_SERVING.get(family, ()))


def load_points(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


_COSTS: dict = {}


def model_costs(row: dict):
    from specsize.catalog.gpus import load_gpu
    from specsize.catalog.models import load_model
    from specsize.core.perf import model_cost
    from specsize.core.specs import Quantization

    kv_bytes = kv_dtype_bytes(row)
    key = (row["model"], row["quantization"], row["gpu"], row["tp"], kv_bytes)
    if key not in _COSTS:
        m = load_model(row["model"])
        q = Quantization("fp8", block=(128, 128)) if row["quantization"] == "fp8" else None
        _COSTS[key] = (model_cost(m, row["tp"], "bfloat16", q, kv_dtype_bytes=kv_bytes), load_gpu(row["gpu"]))
    return _COSTS[key]


def kv_dtype_bytes(row: dict) -> int:
    """The KV cache's bytes per element the row was measured with (rows without the field: the model's 16 bits)."""
    return 1 if row.get("kv_cache_dtype") == "fp8" else 2


def predict(row: dict, eff, co=None) -> float:
    """Seconds of GPU time of the point's step, as specsize prices it without CPU or sampler terms (`co`: these
    coefficients instead of the row's)."""
    from specsize.core.perf import coefficients, step_time, uniform_step

    if co is None:
        cost, gpu = model_costs(row)
        co = coefficients(cost, gpu, dataclasses.replace(eff, sampler_passes=0.0), overhead=False)
    if row["kind"] == "decode":
        return uniform_step(co, row["batch"], 1, row["context"]).time_s
    if row["kind"] == "prefill":
        p = row["prompt"]
        return uniform_step(co, 1, p, p // 2, prompt=True).time_s
    # mixed: one prompt chunk (its own causal context) beside `batch` decoding sequences of `context` tokens
    chunk, b, ctx = row["chunk"], row["batch"], row["context"]
    windows = tuple(b * min(ctx, w) + min(chunk, w) for w, _ in co.kv_windows)
    return step_time(co, chunk + b, b * ctx + chunk, windows, b * ctx + chunk * chunk // 2, seqs=b + 1,
                     prompt_pairs=chunk * chunk // 2)[0]


def errors(points: list[dict], effs: dict) -> list[tuple[dict, float]]:
    from specsize.catalog.gpus import load_gpu

    out = []
    for row in points:
        if row["kind"] == "mixed" and row["chunk"] > row["context"]:
            continue  # a chunk longer than the prompt it belongs to (the tables cap its attention at the prompt)
        family = load_gpu(row["gpu"]).family
        out.append((row, math.log(predict(row, effs[family]) / (row["ms"] / 1e3))))
    return out


def table(errs: list[tuple[dict, float]]) -> None:
    groups: dict[tuple, list[float]] = {}
    for row, e in errs:
        part = "held out" if row["model"] in HELD_OUT else "fit"
        groups.setdefault((part, row["gpu"], row["kind"]), []).append(e)
        groups.setdefault((part, "all", "all"), []).append(e)
    print(f"{'slice':9} {'GPU':14} {'kind':8} {'n':>4} {'median |err|':>13} {'bias':>7}")
    for key in sorted(groups):
        es = [math.exp(e) - 1 for e in groups[key]]
        print(f"{key[0]:9} {key[1]:14} {key[2]:8} {len(es):4} {statistics.median(abs(e) for e in es):13.1%} "
              f"{statistics.median(es):+7.1%}")


def fit(points: list[dict], effs: dict) -> dict:
    from specsize.catalog.gpus import load_gpu

    fitted = dict(effs)
    by_family: dict[str, list[dict]] = {}
    for row in points:
        if row["model"] not in HELD_OUT:
            by_family.setdefault(load_gpu(row["gpu"]).family, []).append(row)
    for family, rows in by_family.items():
        eff = fitted[family]

        def score(e) -> float:
            return statistics.mean(abs(math.log(predict(r, e) / (r["ms"] / 1e3))) for r in rows)

        best = score(eff)
        for _ in range(4):
            for term in kernel_terms(family):
                current = getattr(eff, term)
                for factor in (0.5, 0.7, 0.85, 0.93, 1.07, 1.18, 1.4, 2.0):
                    value = current * factor if current else (1e-6 if term.endswith("_s") else 0.5) * factor
                    if not term.endswith("_s") and term != "gemm_half_tokens" and value > 0.98:
                        continue
                    trial = dataclasses.replace(eff, **{term: value})
                    s = score(trial)
                    if s < best - 1e-5:
                        best, eff = s, trial
        fitted[family] = eff
        print(f"{family}: mean |log err| {best:.4f} over {len(rows)} points; "
              + ", ".join(f"{t} {getattr(eff, t):.4g}" for t in kernel_terms(family)))
    return fitted


KERNEL_SOURCE = ("GPU terms ({terms}) fitted by bench/fit_kernels.py to bench/data/kernel_steps.jsonl: decode, prefill "
                 "and mixed steps summed from per-operation latencies measured with vLLM 0.24.0's kernels (0.14.0 on "
                 "the A100) in NVIDIA's aiconfigurator-core 0.12.0 tables (PyPI, systems/data/<gpu>/*/vllm; "
                 "tools/distill_kernel_steps.py); Llama-3.1 8B/70B, Qwen3 8B/30B-A3B/235B-A22B and gpt-oss-20b "
                 "fitted, Qwen3-32B and gpt-oss-120b held out; the block-fp8 checkpoints' GEMMs (Qwen3-32B-FP8, "
                 "Qwen3-235B-A22B-FP8) priced as a CUDA-graphed engine runs them, without the host launch time "
                 "aiconfigurator's collector times them with (collector/vllm/collect_gemm.py: no CUDA graph for "
                 "fp8_block; 60-90 us a GEMM on Hopper, 170-230 us on B200, 340 us on L40S; tools/"
                 "distill_kernel_steps.py Fp8BlockRule); median |error| of the step times in the bench")


def write(fitted: dict) -> None:
    path = ROOT / "src" / "specsize" / "catalog" / "data" / "efficiency.json"
    doc = json.loads(path.read_text())
    for family, eff in fitted.items():
        row = doc["families"][family]
        terms = kernel_terms(family)
        for term in terms:
            value = getattr(eff, term)
            row[term] = float(f"{value:.3g}")
        # one kernel-fit sentence per row: an earlier fit's is replaced, not stacked
        older = [part for part in row["source"].split(" | ") if not part.startswith("GPU terms (")]
        row["source"] = " | ".join([KERNEL_SOURCE.format(terms=", ".join(terms)), *older])
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")


# --- rows with aiconfigurator's per-operation split (tools/distill_kernel_steps.py --models deepseek) ---------------

PARTS = ("mla", "routed", "shared", "allreduce")


def band(row: dict) -> str:
    """The row's batch band: decoding sequences for a decode or a mixed step, prompt tokens for a prefill."""
    if row["kind"] == "prefill":
        return "p1k-2k" if row["prompt"] <= 2048 else "p4k-8k"
    b = row["batch"]
    return "b1-4" if b <= 4 else "b16-64" if b <= 64 else "b128-256"


def measured_parts(row: dict, served: bool = False) -> dict[str, float]:
    """The row's step as aiconfigurator summed it, in seconds by term: mla (the MLA module: projections, latent
    attention, o_proj), routed (router + fused MoE), shared (the shared expert), allreduce, other (norms, embedding,
    logits) and, in a decode, overlap (minus the shorter of the routed and shared streams, which run side by side:
    its OverlapOp); the parts add up to the row's time.

    `served`: as vLLM runs the step, without two things the sum adds that it does not: the MoE pre/post-dispatch
    all-reduces aiconfigurator's vLLM DeepSeek graph puts beside the two per layer it already counts (sdk/models/
    deepseek.py: MoEDispatch on the vllm backend is a custom all-reduce, and CustomAllReduce('*_tp_allreduce', 2 x
    layers) follows; vLLM's DeepseekV2DecoderLayer all-reduces twice, after o_proj and after the MoE), and the host
    launch time in its block-fp8 GEMM rows, timed outside a CUDA graph (collector/vllm/collect_gemm.py:
    use_cuda_graph=gemm_type != "fp8_block"): the shared expert's GEMMs are priced from the graphed per-tensor fp8
    table instead (the row's fp8_tensor/ ops)."""
    ops = row["ops"]
    parts = dict.fromkeys((*PARTS, "other"), 0.0)
    for name, ms in ops.items():
        if name.startswith("fp8_tensor/") or (row["kind"] == "decode" and name.endswith("moe_overlap")):
            continue  # the graphed alternative; the overlap priced from its members (overlap/...)
        base = name.split("/")[-1]
        if "mla_block" in base or base.endswith("_attention"):
            part = "mla"
        elif base.endswith(("router_gemm", "_moe")):
            part = "routed"
        elif "dispatch" in base:
            part = "" if served else "allreduce"
        elif "shared" in base:
            part = "shared"
        elif "allreduce" in base:
            part = "allreduce"
        else:
            part = "other"
        if part == "shared" and served and "gemm" in base:
            ms = ops["fp8_tensor/" + base.replace("generation_", "").replace("context_", "")]
        if part:
            parts[part] += ms / 1e3
    if row["kind"] == "decode":
        dispatch = 0.0 if served else sum(v for k, v in ops.items() if k.startswith("overlap/") and "dispatch" in k)
        parts["overlap"] = -min(parts["routed"] + dispatch / 1e3, parts["shared"])
    return parts


def predicted_parts(row: dict, eff) -> dict[str, float]:
    """specsize's step split the same way, from core.perf.step_time itself with one term's coefficients switched off
    at a time (its GPU terms add up, so each difference is that term's share): mla = the attention plus the attention
    projections' share of the dense GEMMs (a ModelCost without those weights); routed = the routed experts; allreduce
    = the TP all-reduces; fixed = the per-kernel and per-MoE-layer fixed time (in aiconfigurator's every op); shared
    = the rest: the shared experts, the three dense layers' MLPs, the lm_head and the activations."""
    from specsize.catalog.models import load_model
    from specsize.core.perf import coefficients
    from specsize.core.weights import weight_breakdown

    cost, gpu = model_costs(row)
    eff = dataclasses.replace(eff, sampler_passes=0.0)
    co = coefficients(cost, gpu, eff, overhead=False)
    total = predict(row, eff, co)
    without = {
        "allreduce": dataclasses.replace(co, comm_fixed_s=0.0, comm_per_token_s=0.0),
        "routed": dataclasses.replace(co, num_experts=0),
        "attention": dataclasses.replace(co, kv_full_bytes_per_token=0.0, attn_flops_per_pair=0.0,
                                         attn_flops_per_prompt_pair=0.0),
        "fixed": dataclasses.replace(co, fixed_s=0.0),
    }
    m = load_model(row["model"])
    attn_bytes = weight_breakdown(m, row["tp"], 1, "bfloat16", m.quantization).attention
    attn_params = weight_breakdown(m, row["tp"], 1, "bfloat16", None).attention // 2
    no_proj = dataclasses.replace(cost, dense_bytes=cost.dense_bytes - attn_bytes,
                                  dense_params=cost.dense_params - attn_params)
    without["projections"] = coefficients(no_proj, gpu, eff, overhead=False)
    share = {k: total - predict(row, eff, c) for k, c in without.items()}
    parts = {"mla": share["attention"] + share["projections"], "routed": share["routed"],
             "allreduce": share["allreduce"], "fixed": share["fixed"]}
    parts["shared"] = total - sum(parts.values())
    return parts


def _implied(row: dict, eff, term: str, want_s: float, part: str) -> float:
    """The value of `term` at which specsize's `part` of the row takes `want_s` (bisection on a log scale)."""
    lo, hi = 1e-3, 1.0 if not term.endswith("_s") else 1e-3
    lo = 1e-9 if term.endswith("_s") else lo
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        got = predicted_parts(row, dataclasses.replace(eff, **{term: mid}))[part]
        slower = got > want_s
        # a fraction of a peak: more is faster; a fixed time: more is slower
        if slower != term.endswith("_s"):
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def breakdown(points: list[dict], effs: dict) -> None:
    """Median |error| and bias per GPU x phase x batch band, against the sums and against the steps as served, then
    each term's measured and predicted times, the fused-MoE per layer by tokens, and the terms the rows point to."""
    from specsize.catalog.gpus import load_gpu

    rows = [r for r in points if "ops" in r and not (r["kind"] == "mixed" and r["chunk"] > r["context"])]
    if not rows:
        return
    groups: dict[tuple, list[tuple[dict, dict, dict, dict]]] = {}
    for row in rows:
        eff = effs[load_gpu(row["gpu"]).family]
        key = (row["gpu"], f"tp{row['tp']}", row.get("kv_cache_dtype", ""), row["kind"], band(row))
        groups.setdefault(key, []).append((row, predicted_parts(row, eff), measured_parts(row),
                                           measured_parts(row, served=True)))
    print("\nper GPU x phase x batch band; error = specsize / measured - 1, against aiconfigurator's sum and against "
          "the step as vLLM serves it (measured_parts(served=True)):")
    print(f"{'GPU':14} {'tp':4} {'kv':8} {'kind':8} {'band':9} {'n':>3} {'sum ms':>7} {'|err|':>6} {'bias':>7} "
          f"{'served':>7} {'|err|':>6} {'bias':>7}")
    for key in sorted(groups):
        got = [sum(g.values()) for _, g, _, _ in groups[key]]
        raw = [sum(w.values()) for _, _, w, _ in groups[key]]
        srv = [sum(s.values()) for _, _, _, s in groups[key]]
        e_raw = [a / b - 1 for a, b in zip(got, raw)]
        e_srv = [a / b - 1 for a, b in zip(got, srv)]
        print(f"{key[0]:14} {key[1]:4} {key[2]:8} {key[3]:8} {key[4]:9} {len(got):3} "
              f"{statistics.median(raw) * 1e3:7.1f} {statistics.median(abs(e) for e in e_raw):6.1%} "
              f"{statistics.median(e_raw):+7.1%} {statistics.median(srv) * 1e3:7.1f} "
              f"{statistics.median(abs(e) for e in e_srv):6.1%} {statistics.median(e_srv):+7.1%}")
    print("\nby term, median ms over the band, served -> specsize (mla: the MLA block with its projections; routed: "
          "router + fused MoE; shared: the shared expert, specsize's also the 3 dense layers and the lm_head; "
          "allreduce: two a layer as served; fixed: specsize's per-kernel and per-MoE-layer time, in aiconfigurator's "
          "every op; overlap: the shorter of the routed and shared streams, hidden in a decode):")
    print(f"{'GPU':14} {'tp':4} {'kv':8} {'kind':8} {'band':9} " + " ".join(f"{c:>16}" for c in PARTS)
          + f" {'fixed':>6} {'overlap':>7}")
    for key in sorted(groups):
        cells = []
        for c in PARTS:
            want = statistics.median(s[c] for _, _, _, s in groups[key]) * 1e3
            got = statistics.median(g[c] for _, g, _, _ in groups[key]) * 1e3
            cells.append(f"{want:7.2f}->{got:7.2f}")
        fixed = statistics.median(g["fixed"] for _, g, _, _ in groups[key]) * 1e3
        hidden = statistics.median(s.get("overlap", 0.0) for _, _, _, s in groups[key]) * 1e3
        print(f"{key[0]:14} {key[1]:4} {key[2]:8} {key[3]:8} {key[4]:9} " + " ".join(cells)
              + f" {fixed:6.2f} {hidden:7.2f}")
    moe_layers(rows, effs)


def moe_layers(rows: list[dict], effs: dict) -> None:
    """The fp8 block fused MoE per layer by tokens in the step: aiconfigurator's (its 61 layers all MoE) against
    specsize's routed experts plus moe_layer_fixed_s (its 58), and the moe_fp8_memory at which specsize's match."""
    from specsize.catalog.gpus import load_gpu
    from specsize.catalog.models import load_model

    print("\nrouted experts per MoE layer (us) by tokens in the step: measured (router + fused MoE) -> specsize "
          "(routed + moe_layer_fixed_s); the moe_fp8_memory that matches (bf16-KV rows, one context):")
    seen = set()
    for row in sorted(rows, key=lambda r: (r["gpu"], r["tp"], r["kind"], r.get("batch", 1), r.get("prompt", 0))):
        tokens = {"decode": row.get("batch"), "prefill": row.get("prompt"),
                  "mixed": row.get("chunk", 0) + row.get("batch", 0)}[row["kind"]]
        key = (row["gpu"], row["tp"], row["kind"], tokens)
        if row.get("kv_cache_dtype") == "fp8" or key in seen or row.get("context", 2048) != 2048:
            continue
        seen.add(key)
        eff = effs[load_gpu(row["gpu"]).family]
        m = load_model(row["model"])
        theirs = sum(v for k, v in row["ops"].items() if k.split("/")[-1].endswith(("router_gemm", "_moe"))) / 1e3
        theirs_layer = theirs / m.num_layers  # aiconfigurator prices every one of the 61 layers as MoE
        mine = predicted_parts(row, eff)["routed"]
        layers = len(m.moe.moe_layers)
        mine_layer = mine / layers + eff.moe_layer_fixed_s
        implied = _implied(row, eff, "moe_fp8_memory", (theirs_layer - eff.moe_layer_fixed_s) * layers, "routed") \
            if theirs_layer > eff.moe_layer_fixed_s else float("nan")
        print(f"  {row['gpu']:14} tp{row['tp']} {row['kind']:8} {tokens:6} tokens  {theirs_layer * 1e6:8.1f} -> "
              f"{mine_layer * 1e6:8.1f} us   moe_fp8_memory {eff.moe_fp8_memory:.3f} -> {implied:.3f}")


def main() -> int:
    from specsize.catalog.gpus import load_efficiency, load_gpu

    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--write", action="store_true", help="write the fitted terms into catalog/data/efficiency.json")
    ap.add_argument("--data", type=Path, default=DATA,
                    help="the kernel-step rows to score (default bench/data/kernel_steps.jsonl); rows with an `ops` "
                         "split are also taken apart by term")
    ap.add_argument("--aic-sums", action="store_true",
                    help="score the block-fp8 rows on aiconfigurator's own sums (ms_aic: their GEMMs' host launch "
                         "time in) rather than the steps as a CUDA-graphed engine runs them (ms)")
    args = ap.parse_args()
    if args.write and (args.data != DATA or args.aic_sums):
        ap.error("--write fits the catalog on bench/data/kernel_steps.jsonl's served steps only: drop --data and "
                 "--aic-sums")
    points = load_points(args.data)
    if args.aic_sums:
        points = [{**row, "ms": row.get("ms_aic", row["ms"])} for row in points]
    effs = {}
    for row in points:
        gpu = load_gpu(row["gpu"])
        effs.setdefault(gpu.family, load_efficiency(gpu))
    print("the catalog's efficiencies against the measured kernel sums:")
    table(errors(points, effs))
    breakdown(points, effs)
    if args.fit:
        fitted = fit(points, effs)
        print("\nafter the fit (held-out models never entered it):")
        table(errors(points, fitted))
        if args.write:
            write(fitted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
