#!/usr/bin/env python3
"""Accuracy of the memory model against real vLLM start-up logs.

Plans every row of ../shared/calibration/vllm_startup_logs.jsonl that names a model specsize can build,
with the row's own settings, and prints per row and in summary the error of weights, activation peak,
KV cache bytes and KV cache tokens (predicted vs printed by vLLM).

Two token checks per row:
- end to end: tokens predicted from the GPU's total memory (rows that print it);
- per-token accounting alone: tokens predicted from the KV GiB vLLM printed (isolates bytes per token
  and block rounding from the budget terms).

Run: python3 dev.py bench   (or .venv/bin/python bench/accuracy_vllm.py [--rows PATH] [--json])
`--rows bench/data/blind_startups.jsonl` runs the public start-ups gathered after the model was fitted (issue #12:
the fully printed rows within 1% on KV tokens).
Targets (issue #2): weights within 1% on every row; KV tokens median |error| <= 3%, no row beyond 10%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from specsize.catalog import load_gpu, load_model
from specsize.core.memory import account
from specsize.core.specs import QUANT_METHODS, Deployment, EngineSettings, GpuSpec, Quantization
from specsize.core.units import GiB, from_gib
from specsize.engines import resolve_profile

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "calibration" / "vllm_startup_logs.jsonl"

# Published checkpoints that are a catalog architecture with other weights. Each mapping says why.
CHECKPOINTS = {
    "meta-llama/Llama-3.1-8B-Instruct": ("meta-llama/Llama-3.1-8B-Instruct", None, {}),
    "meta-llama/Meta-Llama-3-8B": ("meta-llama/Meta-Llama-3.1-8B", None,
                                   {"max_position_embeddings": 8192}),  # Llama 3 = 3.1 with 8K positions
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": (
        "meta-llama/Llama-3.1-8B-Instruct", Quantization("int4", group_size=128, has_zeros=False), {}),
    "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic": (
        "meta-llama/Llama-3.3-70B-Instruct", Quantization("fp8"), {}),
    "Qwen/Qwen2.5-7B-Instruct": ("Qwen/Qwen2.5-7B-Instruct", None, {}),
    "Qwen/Qwen2.5-Coder-32B-Instruct": ("Qwen/Qwen2.5-32B-Instruct", None,  # same widths; YaRN x4 context
                                        {"max_position_embeddings": 131072}),
    "Gensyn/Qwen2.5-0.5B-Instruct": ("Qwen/Qwen2.5-0.5B-Instruct", None, {}),
    "Qwen/Qwen3-1.7B": ("Qwen/Qwen3-1.7B", None, {}),
    "google/gemma-2-2b-it": ("google/gemma-2-2b-it", None, {}),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ("mistralai/Mixtral-8x7B-Instruct-v0.1", None, {}),
    # bench/data/blind_startups.jsonl. RedHatAI's compressed-tensors checkpoints: FP8-dynamic is per-channel fp8,
    # w8a8 is per-channel int8 (both with the base model's widths; their model cards name the base).
        "redhatai/Llama-3.3-70B-Instruct-quantized.w8a8": (
        "meta-llama/Llama-3.3-70B-Instruct", Quantization("int8"), {}),
    "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic": ("Qwen/Qwen2.5-7B-Instruct", Quantization("fp8"), {}),
    "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8": ("Qwen/Qwen2.5-7B-Instruct", Quantization("int8"), {}),
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8": (
        "meta-llama/Llama-3.1-8B-Instruct", Quantization("int8"), {}),
    "Qwen/Qwen2.5-72B-Instruct": ("Qwen/Qwen2.5-72B-Instruct", None, {}),
    "Qwen/Qwen2.5-7B-Instruct-AWQ": ("Qwen/Qwen2.5-7B-Instruct", Quantization("int4", group_size=128), {}),  # AWQ
    "Qwen/Qwen3-8B": ("Qwen/Qwen3-8B", None, {}),
    "Qwen/Qwen3-14B": ("Qwen/Qwen3-14B", None, {}),
    "Qwen/Qwen3-30B-A3B": ("Qwen/Qwen3-30B-A3B", None, {}),
    "openai/gpt-oss-20b": ("openai/gpt-oss-20b", None, {}),
    "openai/gpt-oss-120b": ("openai/gpt-oss-120b", None, {}),
    "google/gemma-2-9b-it": ("google/gemma-2-9b", None, {}),  # the -it checkpoint shares the base's config
    "google/gemma-2-27b-it": ("google/gemma-2-27b", None, {}),
    "microsoft/phi-4": ("microsoft/phi-4", None, {}),
    "deepseek-ai/DeepSeek-V2-Lite-Chat": ("deepseek-ai/DeepSeek-V2-Lite-Chat", None, {}),
}


def _version(row: dict) -> str:
    if "V0" in (row.get("engine_generation") or ""):
        return "0.6"
    raw = (row.get("engine_version") or "").split(" ")[0]
    return raw or "0.19"


def _weights_gib(row: dict) -> float | None:
    return row.get("model_weights_gib") if row.get("model_weights_gib") is not None else row.get("model_weights")


def _tokens(row: dict) -> int | None:
    if row.get("kv_cache_tokens"):
        return row["kv_cache_tokens"]
    if row.get("gpu_blocks"):
        return row["gpu_blocks"] * (row.get("block_size") or 16)
    return None


# The card a row's log names, as the catalog knows it: its family and segment select per-GPU rules (gpt-oss's MXFP4
# layout differs between Hopper and other cards); its memory stays the row's own. Cards the catalog lacks keep an
# unknown family.
CATALOG_GPUS = (("H100", "H100-SXM-80GB"), ("A800", "A800-80GB"), ("A100", "A100-80GB"), ("RTX 3090", "RTX-3090-24GB"),
                ("RTX 4090", "RTX-4090-24GB"), ("H200", "H200-141GB"), ("L40S", "L40S-48GB"))


def gpu_of(row: dict, total_gib: float) -> GpuSpec:
    name = row.get("gpu_model") or "gpu"
    card = next((load_gpu(gid) for key, gid in CATALOG_GPUS if key in name.upper()), None)
    if card is None:
        return GpuSpec("calibration", name, from_gib(total_gib), 0, 0, None, 0)
    return GpuSpec("calibration", name, from_gib(total_gib), 0, 0, None, 0, vendor=card.vendor, family=card.family,
                   segment=card.segment)


def predict(row: dict, kv_override_gib: float | None = None, checkpoints: dict | None = None):
    model_id, quant, changes = (checkpoints or CHECKPOINTS)[row["target_model"]]
    target = load_model(model_id)
    if changes:
        target = target.with_(**changes)
    if quant is not None:  # the checkpoint's own quantization (what account() reads from the target)
        target = target.with_(quantization=quant)
    dtype = row.get("dtype") if row.get("dtype") not in (None, "auto") else "auto"
    total = row.get("total_gpu_memory_gib") or 80.0
    gpu = gpu_of(row, total)
    online = row.get("quantization") if quant is None and row.get("quantization") in QUANT_METHODS else None
    settings = EngineSettings(
        gpu_memory_utilization=row.get("gpu_memory_utilization") or 0.9, max_model_len=row.get("max_model_len"),
        max_num_seqs=row.get("max_num_seqs"), max_num_batched_tokens=row.get("max_num_batched_tokens"),
        block_size=row.get("block_size"), kv_cache_dtype=row.get("kv_cache_dtype") or "auto", dtype=dtype,
        enforce_eager=bool(row.get("enforce_eager")), quantization=online,
        kv_cache_memory_bytes=None if kv_override_gib is None else from_gib(kv_override_gib))
    deployment = Deployment(target=target, gpu=gpu, tp=row.get("tensor_parallel_size") or 1,
                            pp=row.get("pipeline_parallel_size") or 1, engine=settings)
    return account(deployment, resolve_profile("vllm", _version(row)))


def err(predicted: float, observed: float | None) -> float | None:
    if observed in (None, 0):
        return None
    return (predicted - observed) / observed


SUMMARY = (("weights", "weights"), ("activation", "activation peak"), ("kv_gib", "KV cache GiB"),
           ("tokens", "KV tokens, end to end"), ("tokens_from_kv", "KV tokens, from KV GiB"))


def summarize(results: list[dict]) -> dict[str, list[float]]:
    """Print the median / max |error| of every figure over the evaluated rows; return the |errors| by figure."""
    errors = {key: [abs(err(*r[key])) for r in results if r.get(key) and r[key][1] is not None] for key, _ in SUMMARY}
    print("\nsummary (|error|)            rows  median     max")
    for key, label in SUMMARY:
        if errors[key]:
            e = errors[key]
            print(f"{label:28} {len(e):5}  {statistics.median(e):6.2%}  {max(e):6.2%}")
    return errors


def evaluate(row: dict) -> dict:
    """(predicted, observed) pairs of one row: end to end from the GPU's total memory, and tokens from its KV GiB."""
    out = {"id": row["id"], "version": _version(row)}
    if row.get("total_gpu_memory_gib"):
        m = predict(row)
        out.update(weights=(m.weights_target_bytes / GiB, _weights_gib(row)),
                   activation=(m.activation_peak_bytes / GiB, row.get("activation_peak_gib")),
                   non_torch=(m.non_torch_bytes / GiB, row.get("non_torch_memory_gib")),
                   kv_gib=(m.kv_cache_bytes / GiB, row.get("kv_cache_memory_gib")),
                   tokens=(m.kv_cache_tokens, _tokens(row)))
    # with PP the printed token count is the smallest stage's (vLLM takes the minimum over the workers' pools) while
    # "Available KV cache memory" is the first stage's: tokens from that GiB would not be the printed figure
    if row.get("kv_cache_memory_gib") and _tokens(row) and (row.get("pipeline_parallel_size") or 1) == 1:
        m = predict(row, kv_override_gib=row["kv_cache_memory_gib"])
        out["tokens_from_kv"] = (m.kv_cache_tokens, _tokens(row))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--rows", "--calibration", dest="rows", default=str(DEFAULT),
                    help="start-up rows (JSON lines in the schema of ../shared/calibration/vllm_startup_logs.jsonl)")
    ap.add_argument("--json", action="store_true", help="print the per-row results as JSON")
    args = ap.parse_args()
    path = Path(args.rows)
    if not path.exists():
        print(f"rows file not found: {path}", file=sys.stderr)
        return 2
    results, skipped = [], []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row["target_model"] not in CHECKPOINTS:
            skipped.append((row["id"], f"model {row['target_model']!r} not in the catalog"))
        elif row.get("speculative_method") not in (None, "ngram"):
            skipped.append((row["id"], f"method {row['speculative_method']} not modelled"))
        else:
            results.append(evaluate(row))

    def fmt(pair, digits=2):
        if not pair or pair[1] is None:
            return "-"
        e = err(*pair)
        return f"{pair[0]:.{digits}f}/{pair[1]:.{digits}f} ({e:+.1%})" if digits else \
            f"{pair[0]:,}/{pair[1]:,} ({e:+.1%})"

    header = f"{'row':38} {'ver':5} {'weights GiB':24} {'activation GiB':22} {'KV GiB':24} {'KV tokens (e2e)':32} {'KV tokens (from KV GiB)':32}"
    print("predicted/observed (error); e2e = from the GPU's total memory")
    print(header)
    for r in results:
        print(f"{r['id']:38} {r['version']:5} {fmt(r.get('weights')):24} {fmt(r.get('activation')):22} "
              f"{fmt(r.get('kv_gib')):24} {fmt(r.get('tokens'), 0):32} {fmt(r.get('tokens_from_kv'), 0):32}")
    for rid, why in skipped:
        print(f"skipped {rid}: {why}")

    errors = summarize(results)
    w, t = errors["weights"], errors["tokens"]
    ok = max(w) <= 0.01 and statistics.median(t) <= 0.03 and max(t) <= 0.10
    print(f"\ntargets: weights <= 1% every row: {max(w):.2%}; KV tokens median <= 3%: {statistics.median(t):.2%}, "
          f"max <= 10%: {max(t):.2%} -> {'MET' if ok else 'NOT MET'}")
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
