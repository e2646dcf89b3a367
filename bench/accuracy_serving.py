#!/usr/bin/env python3
"""Accuracy of `specsize simulate` against published whole-server benchmark runs (vLLM, SGLang).

Each row of bench/data/serving_runs.jsonl is one published run (`vllm bench serve`, SGLang `bench_serving`,
GPUStack's and llm-d's published sweeps) with its configuration and its measured output throughput, TTFT and
TPOT, and its source. A run becomes one simulation: the row's model, GPU, TP, quantization, prompt and output
lengths, and its load (a Poisson rate; `--request-rate inf`: every request at t = 0; a fixed concurrency: the
closed-loop client). Predicted vs measured: relative error (predicted / measured - 1) per metric; the table
ends with the median |error| and the signed median (bias) on the fit slice and on the held-out slice apart.

The split: a run is held out when a hash of its series (source + model + GPU) falls in the last third, so a
whole series (every load of one setup) is on one side. The efficiencies of catalog/data/efficiency.json were
set looking at the fit slice only; the held-out slice is the honest error.

Speculation: where a series measures the same server with and without a drafter at several loads but does not
give the acceptance, the acceptance is taken from the series' lowest load (fit) and the ratio at the other
loads is predicted (held out); the load where speculation stops paying is read from both.

Run: .venv/bin/python bench/accuracy_serving.py [--only fit|heldout] [--verbose]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench's own modules, however it is loaded
from gpu_names import GPUS  # noqa: E402  (bench/gpu_names.py: one map of published GPU names)
from specsize.api import published_variant  # a published id is read as the tool reads a user's
from specsize.core.accuracy import METRICS, MetricError  # the record the tool reads back (catalog/accuracy.py)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "serving_runs.jsonl"


def load_rows(path: str | Path | None = None) -> list[dict]:
    """The published runs: one file, or by default every bench/data/serving_runs*.jsonl (the first gathering and
    the later ones, each file with its own sources)."""
    files = [Path(path)] if path else sorted(DATA.parent.glob("serving_runs*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]

MODELS = {  # published id -> (catalog id, quantization override)
    "Qwen/Qwen3-8B": ("Qwen/Qwen3-8B", None), "Qwen/Qwen3-8B-FP8": ("Qwen/Qwen3-8B", "fp8"),
    "Qwen/Qwen3-14B": ("Qwen/Qwen3-14B", None), "Qwen/Qwen3-14B-FP8": ("Qwen/Qwen3-14B", "fp8"),
    "Qwen/Qwen3-32B": ("Qwen/Qwen3-32B", None), "Qwen/Qwen3-32B-FP8": ("Qwen/Qwen3-32B", "fp8"),
    "Qwen/Qwen3-235B-A22B-Instruct-2507": ("Qwen/Qwen3-235B-A22B", None),
    "Qwen/Qwen3-235B-A22B": ("Qwen/Qwen3-235B-A22B", None),
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": ("Qwen/Qwen3-235B-A22B", "fp8"),
    "openai/gpt-oss-20b": ("openai/gpt-oss-20b", None), "openai/gpt-oss-120b": ("openai/gpt-oss-120b", None),
    "meta-llama/Llama-3.3-70B-Instruct": ("meta-llama/Llama-3.3-70B-Instruct", None),
    "deepseek-ai/DeepSeek-R1": ("deepseek-ai/DeepSeek-R1", None),
    "deepseek-ai/DeepSeek-R1-0528": ("deepseek-ai/DeepSeek-R1", None),
    "deepseek-ai/DeepSeek-V3": ("deepseek-ai/DeepSeek-V3", None),
    "meta-llama/Llama-3.1-8B-Instruct": ("meta-llama/Llama-3.1-8B-Instruct", None),
    "meta-llama/Llama-3.1-70B-Instruct": ("meta-llama/Llama-3.1-70B-Instruct", None),
    "meta-llama/Llama-3.1-405B-Instruct": ("meta-llama/Meta-Llama-3.1-405B", None),
    "meta-llama/Llama-3.1-405B-Instruct-FP8": ("meta-llama/Llama-3.1-405B-Instruct-FP8", None),  # Meta's: attention bf16
    "amd/Llama-3.1-405B-Instruct-FP8-KV": ("meta-llama/Meta-Llama-3.1-405B", "fp8"),
    "Qwen/Qwen3-30B-A3B": ("Qwen/Qwen3-30B-A3B", None),
    "Qwen/Qwen2.5-0.5B-Instruct": ("Qwen/Qwen2.5-0.5B-Instruct", None),
    "Qwen/Qwen2.5-32B": ("Qwen/Qwen2.5-32B-Instruct", None),  # the base checkpoint: same architecture
    "Qwen/Qwen2.5-7B-Instruct": ("Qwen/Qwen2.5-7B-Instruct", None),
    "Qwen/Qwen2.5-14B-Instruct": ("Qwen/Qwen2.5-14B-Instruct", None),
    "Qwen/Qwen2.5-32B-Instruct": ("Qwen/Qwen2.5-32B-Instruct", None),
    "Qwen/Qwen2.5-72B-Instruct": ("Qwen/Qwen2.5-72B-Instruct", None),
    "meta-llama/Meta-Llama-3.1-8B-Instruct": ("meta-llama/Llama-3.1-8B-Instruct", None),
    "meta-llama/Llama-3.2-3B": ("meta-llama/Llama-3.2-3B-Instruct", None),  # the base checkpoint: same architecture
    "Qwen/Qwen3-14B-AWQ": ("Qwen/Qwen3-14B", "int4"),
    "mistralai/Mistral-7B-Instruct-v0.3": ("mistralai/Mistral-7B-Instruct-v0.3", None),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", None),
    "deepseek-ai/DeepSeek-V3.2": ("deepseek-ai/DeepSeek-V3.2", None),
    "zai-org/GLM-4.5-Air": ("zai-org/GLM-4.5-Air", None), "zai-org/GLM-4.6": ("zai-org/GLM-4.6", None),
    "MiniMaxAI/MiniMax-M2.5": ("MiniMaxAI/MiniMax-M2.5", None),
}
ENGINES = ("vLLM", "SGLang")


def number(text) -> float | None:
    if isinstance(text, (int, float)):
        return float(text)
    if not isinstance(text, str):
        return None
    m = re.search(r"\d+(\.\d+)?", text)
    return float(m.group()) if m else None


STOPS_PAYING = 0.95  # a TPOT ratio (spec / no spec) this close to 1 is no gain worth the drafter
SHAREGPT_SIGMA = 1.0  # lognormal spread of ShareGPT prompt and output lengths (a workload shape, not a timing term)
_LENGTH_FILES: dict[tuple, str] = {}


def sharegpt_lengths(prompt_mean: float, output_mean: float) -> str:
    """A lengths file of ShareGPT-like requests with the run's mean prompt and output: lognormal lengths, filtered as
    `vllm bench serve` samples ShareGPT (prompt and output >= 4 tokens, prompt <= 1024, prompt + output <= 2048:
    vllm-project/vllm benchmarks/datasets.py is_valid_sequence), rescaled to the published means."""
    import numpy as np

    key = (round(prompt_mean, 1), round(output_mean, 1))
    if key in _LENGTH_FILES:
        return _LENGTH_FILES[key]
    rng = np.random.default_rng(7)
    p = rng.lognormal(0.0, SHAREGPT_SIGMA, 20_000)
    o = rng.lognormal(0.0, SHAREGPT_SIGMA, 20_000)
    sp, so = prompt_mean, output_mean
    for _ in range(30):  # scale so that the filtered sample has the published means
        ps, os_ = np.rint(p * sp), np.rint(o * so)
        keep = (ps >= 4) & (os_ >= 4) & (ps <= 1024) & (ps + os_ <= 2048)
        sp *= prompt_mean / ps[keep].mean()
        so *= output_mean / os_[keep].mean()
    ps, os_ = np.rint(p * sp), np.rint(o * so)
    keep = (ps >= 4) & (os_ >= 4) & (ps <= 1024) & (ps + os_ <= 2048)
    _LENGTH_FILES[key] = lengths_file(ps[keep][:5000], os_[keep][:5000])
    return _LENGTH_FILES[key]


# CNN/DailyMail articles through Llama 3's tokenizer: coefficient of variation 0.46 over Spec-Bench's 80 articles
# (hemingkx/Spec-Bench@fd2c1cd data/spec_bench/question.jsonl; 713 +- 329 tokens), a lognormal of that spread; the
# generated summaries' spread is not published and is taken as the articles'
CNNDM_SIGMA = (math.log(1 + 0.46 ** 2)) ** 0.5


def cnndm_lengths(prompt_mean: float, output_mean: float) -> str:
    """A lengths file of CNN/DailyMail summarisation requests with the run's mean prompt and output: lognormal
    lengths of the articles' spread (CNNDM_SIGMA), no cap but the 8,192-token context the sweep serves (not
    ShareGPT's sampling filter, which keeps prompts of at most 1,024 tokens: at a 940-token mean it left 5)."""
    import numpy as np

    key = ("cnndm", round(prompt_mean, 1), round(output_mean, 1))
    if key in _LENGTH_FILES:
        return _LENGTH_FILES[key]
    rng = np.random.default_rng(7)
    p = rng.lognormal(0.0, CNNDM_SIGMA, 5000)
    o = rng.lognormal(0.0, CNNDM_SIGMA, 5000)
    ps, os_ = np.maximum(4, np.rint(p / p.mean() * prompt_mean)), np.maximum(4, np.rint(o / o.mean() * output_mean))
    keep = ps + os_ <= 8192
    _LENGTH_FILES[key] = lengths_file(ps[keep], os_[keep])
    return _LENGTH_FILES[key]


_SCRATCH: list = []  # the one temporary folder of this process's lengths files, removed when the process exits


def lengths_file(prompts, outputs) -> str:
    """A lengths file (`--lengths-file`: one JSON object per line) of the paired prompt and output lengths, in a
    temporary folder that goes with the process (tempfile.TemporaryDirectory's finalizer), not left in /tmp."""
    import tempfile

    if not _SCRATCH:
        _SCRATCH.append(tempfile.TemporaryDirectory(prefix="specsize-bench-"))
    handle = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, dir=_SCRATCH[0].name)
    for a, b in zip(prompts, outputs):
        handle.write(json.dumps({"prompt_tokens": int(a), "output_tokens": int(b)}) + "\n")
    handle.close()
    return handle.name


_NORMAL = re.compile(r"normal, sd (\d+(?:\.\d+)?), (\d+)-(\d+)")


def stated_lengths(input_len: str, output_len: str) -> str | None:
    """A lengths file of the run's published length distributions when both are stated as a truncated normal
    ("~2048 (normal, sd 1024, 10-4096)": inference-perf's normal distribution, clipped to its bounds), else None."""
    import numpy as np

    shapes = [_NORMAL.search(str(text)) for text in (input_len, output_len)]
    means = [number(text) for text in (input_len, output_len)]
    if not all(shapes) or not all(means):
        return None
    rng = np.random.default_rng(7)
    drawn = []
    for m, mean in zip(shapes, means):
        assert m is not None and mean is not None
        sd, low, high = float(m.group(1)), float(m.group(2)), float(m.group(3))
        drawn.append(np.clip(np.rint(rng.normal(mean, sd, 5000)), low, high))
    return lengths_file(*drawn)


def uniform_lengths(prompt: tuple[float, float], output: tuple[float, float]) -> str:
    """A lengths file of prompt and output lengths drawn uniformly in the given [low, high] ranges (benchmark clients'
    random datasets with a range ratio: SGLang's bench_serving and InferenceX's benchmark_serving.py draw
    randint(int(L x ratio), L); vLLM's own client is fixed at its default ratio 0)."""
    import numpy as np

    rng = np.random.default_rng(7)
    drawn = [rng.integers(max(1, int(lo)), max(1, int(lo)) + max(1, int(hi - lo)) + 1, 5000) for lo, hi in (prompt, output)]
    return lengths_file(*drawn)


RANGE_RATIO_08 = re.compile(r"random-range-ratio 0\.8|range ratio 0\.8")
PLUS_MINUS = re.compile(r"(?:\+-|±)(\d+(?:\.\d+)?)% variance")  # "each ~20k input / ~2k output tokens (+-15% variance)"


def held_out(row: dict) -> bool:
    key = f"{row['source'].split('#')[0]}|{row['model']}|{row['gpu']}|{row.get('group') or ''}"
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 == 0


def _declared_quantization(target: str) -> str | None:
    """The quantization method the catalog's entry for `target` declares (gpt-oss: its own MXFP4 experts)."""
    from specsize.catalog import load_model

    q = load_model(target).quantization
    return q.method if q else None


def case(row: dict) -> tuple[dict | None, str]:
    """The simulate overrides for a run, or None and why it is skipped."""
    if not any(row["engine"].startswith(e) for e in ENGINES):
        return None, f"engine {row['engine']} not modelled"
    if row["model"] not in MODELS and published_variant(row["model"]) is None:
        return None, f"model {row['model']} not in the catalog"
    gpu = GPUS.get(row["gpu"])
    if gpu is None:
        return None, f"GPU {row['gpu']} not mapped"
    if (row.get("dp") or 1) > 1:
        return None, "data parallel"
    spec = row.get("speculative") or {}
    if spec and spec.get("acceptance_rate") is None and spec.get("mean_acceptance_length") is None:
        return None, "speculative without acceptance (see the ratio table)"
    prompt, output = number(row["input_len"]), number(row["output_len"])
    if not prompt or not output:
        return None, "lengths not stated"
    # a published variant of a catalog model (catalog.variants) is resolved by the tool itself, as a user's id is
    target, quant = MODELS.get(row["model"], (row["model"], None))
    q = str(row.get("quantization") or "").lower()
    if quant is None and q.startswith("fp8") and _declared_quantization(target) != "fp8":
        quant = "fp8"  # an fp8 checkpoint of a model the catalog holds in 16 bits (a checkpoint's own layout kept)
    if quant is None and q in ("mxfp4", "nvfp4") and _declared_quantization(target) != q:
        quant = q  # a 4-bit float checkpoint of a model the catalog holds in another dtype (AMD's, NVIDIA's)
    tp = int(row.get("tp") or 1)
    if tp > 8:  # 2 x 8 GPUs: the all-reduce crosses nodes (InfiniBand / Ethernet), which the model does not price
        return None, "tensor parallel across nodes (TP > 8): inter-node all-reduce not modelled"
    over = dict(target=target, gpu=gpu, tp=tp, pp=int(row.get("pp") or 1), no_compare=True, seed=0, **_engine(row))
    if row.get("expert_parallel"):  # the experts split by expert over the TP group (--enable-expert-parallel)
        over["expert_parallel"] = True
    over.update(_lengths(row, prompt, output))
    if quant:
        over["quantization"] = quant
    from specsize.core.specs import KV_CACHE_DTYPES

    kv = (str(row.get("kv_cache_dtype") or "").lower().split() or [""])[0]
    if kv.startswith("fp8"):  # the published server's --kv-cache-dtype (fp8_e4m3 / fp8_e5m2 / fp8)
        over["kv_cache_dtype"] = kv if kv in KV_CACHE_DTYPES else "fp8"
    load = _load(row)
    if load is None:
        return None, "no rate, no concurrency, no request count"
    return {**over, **load}, ""


def _engine(row: dict) -> dict:
    """The engine, its release (whose defaults - max_num_seqs, the token budget - the simulation takes) and whether
    it runs offline (LLM.generate / benchmark_throughput.py: no API server in front)."""
    over: dict = {}
    version = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(post\d+))?", str(row.get("engine_version") or ""))
    if row["engine"].startswith("vLLM") and version:  # with its patch release where given (V0's defaults moved in 0.6.5)
        over["engine_version"] = ".".join(g for g in version.groups()[:3] if g is not None)
    if row["engine"].startswith("SGLang"):  # SGLang's own pool, max_running_requests and chunked-prefill size
        over["engine"] = "sglang"
        if version:  # with its post release: SGLang changed its defaults within 0.4.4, 0.4.5 and 0.4.6
            over["engine_version"] = ".".join(g for g in version.groups() if g is not None)
    if "offline" in row["engine"].lower() or str(row.get("request_rate")).lower() == "offline":
        over["offline"] = True
    over.update(server_flags(row))
    chunked = CHUNKED.search(str(row.get("notes") or ""))
    if chunked and _generation(row) == "V0":  # V0's flag; V1 and SGLang always chunk
        over["chunked_prefill"] = "off" if (chunked.group(1) or "").lower() == "false" else "on"
    return over


CHUNKED = re.compile(r"enable-chunked-prefill(?:[ =](true|false))?\b", re.IGNORECASE)

# the published server command's limits, as a user passes them (vLLM's flag, SGLang's flag or its recipe variable)
# (both engines' argument parsers take a flag's words joined by "_" as by "-": vLLM's FlexibleArgumentParser,
# SGLang's argparse aliases; SGLang's own vLLM 0.6.0 comparison wrote --max_model_len 4096, augmxnt's
# --gpu_memory_utilization=0.98)
SERVER_FLAGS = (
    ("max_num_seqs", int, r"(?:--)?max[-_]num[-_]seqs[ =](\d+)|(?:--)?max[-_]running[-_]requests[ =](\d+)|"
                          r"MAX_RUNNING_REQUESTS=(\d+)"),
    ("max_num_batched_tokens", int,
     r"(?:--)?max[-_]num[-_]batched[-_]tokens[ =](\d+)|(?:--)?chunked[-_]prefill[-_]size[ =](\d+)|"
     r"CHUNKED_PREFILL_SIZE=(\d+)"),
    ("gpu_memory_utilization", float,
     r"(?:--)?gpu[-_]memory[-_]utilization[ =](0?\.\d+)|(?:--)?mem[-_]fraction[-_]static[ =](0?\.\d+)|"
     r"MEM_FRAC_STATIC=(0?\.\d+)"),
    ("max_model_len", int, r"(?:--)?max[-_]model[-_]len[ =](\d+)|(?:--)?context[-_]length[ =](\d+)"),
    # V0's multi-step scheduling ("-step": a prefix argparse takes)
    ("num_scheduler_steps", int, r"--num[-_]scheduler[-_]steps?[ =](\d+)"),
    ("scheduler_recv_interval", int, r"--scheduler[-_]recv[-_]interval[ =](\d+)"),  # SGLang's
    ("stream_interval", int, r"--stream[-_]interval[ =](\d+)"),  # SGLang's
)


def server_flags(row: dict) -> dict:
    """The engine limits the run's published server command sets (row notes), as simulate settings."""
    notes = str(row.get("notes") or "")
    out: dict = {}
    for field, kind, pattern in SERVER_FLAGS:
        m = re.search(pattern, notes)
        if m:
            out[field] = kind(next(g for g in m.groups() if g))
    if re.search(r"--enforce-eager\b", notes):  # no CUDA graphs
        out["enforce_eager"] = True
    return out


def _lengths(row: dict, prompt: float, output: float) -> dict:
    """The run's prompt and output lengths as simulate settings: ShareGPT-like, the published distributions, or
    the stated medians."""
    if "sharegpt" in str(row.get("dataset") or "").lower():
        return {"lengths_file": sharegpt_lengths(prompt, output)}
    stated = stated_lengths(row["input_len"], row["output_len"])
    if stated:  # the published distributions, not a lognormal around their means
        return {"lengths_file": stated}
    if "uniform" in f"{row.get('dataset')} {row['input_len']}":
        # stated as the means of lengths uniform in [1, L] (range ratio 0): the range is [1, 2 x mean]
        return {"lengths_file": uniform_lengths((1, 2 * prompt), (1, 2 * output))}
    spread = PLUS_MINUS.search(str(row.get("notes") or ""))
    if spread:  # vLLM's random dataset from 0.9 on: --random-range-ratio r draws uniformly in [(1 - r) L, (1 + r) L]
        r = float(spread.group(1)) / 100
        return {"lengths_file": uniform_lengths(((1 - r) * prompt, (1 + r) * prompt), ((1 - r) * output, (1 + r) * output))}
    if RANGE_RATIO_08.search(str(row.get("notes") or "")):
        # InferenceX's client (its README: --random-range-ratio 0.8) draws lengths in [0.8 L, L] of the nominal L
        return {"lengths_file": uniform_lengths((0.8 * prompt, prompt), (0.8 * output, output))}
    mean = measured_output_mean(row)
    if mean is not None and mean < EOS_SHORT * output:
        # the run's outputs ended at EOS before the cap (no --ignore-eos): its printed totals say how early
        return {"lengths_file": eos_lengths(prompt, output, mean)}
    return {"prompt_tokens_median": prompt, "output_tokens_median": output}


EOS_SHORT = 0.95  # a run whose outputs average under 95% of the requested length stopped at EOS


def measured_output_mean(row: dict) -> float | None:
    """The run's mean output length as its printed figures give it: output tok/s / requests/s, or None."""
    m = row["measured"]
    if m.get("output_throughput_tok_s") and m.get("request_throughput"):
        return m["output_throughput_tok_s"] / m["request_throughput"]
    return None


def eos_lengths(prompt: float, cap: float, mean: float) -> str:
    """A lengths file of the run's fixed prompts and outputs that stop at EOS: each token ends the answer with the
    same probability (a geometric length, the memoryless case), capped at the requested `cap` (max_tokens), the
    probability solved so that the outputs average the run's printed mean."""
    import numpy as np

    lo, hi = 1e-9, 1.0  # the per-token EOS probability; the capped mean falls as it rises
    for _ in range(60):
        p = (lo + hi) / 2
        capped = (1 - (1 - p) ** cap) / p  # E[min(Geometric(p), cap)]
        lo, hi = (p, hi) if capped > mean else (lo, p)
    rng = np.random.default_rng(7)
    outputs = np.minimum(rng.geometric((lo + hi) / 2, 5000), int(cap))
    return lengths_file(np.full(5000, int(round(prompt))), outputs)


def _load(row: dict) -> dict | None:
    """The run's load as simulate settings: a closed loop, everything at t = 0, or a Poisson rate."""
    rate, conc = row.get("request_rate"), row.get("max_concurrency")
    if isinstance(rate, str) and rate not in ("inf", "offline"):
        rate = "inf" if "burst" in rate else number(rate)
    if isinstance(conc, str):
        conc = number(conc)
    n = int(row.get("num_prompts") or 0)
    if conc:
        return {"client_concurrency": int(conc), "num_requests": n or max(100, 10 * int(conc))}
    if rate in ("inf", "offline", None) or (isinstance(rate, float) and math.isinf(rate)):
        return {"client_concurrency": n, "num_requests": n} if n else None  # every request sent at t = 0
    return {"rate": float(rate), "duration": 120.0 if not n else n / float(rate)}


def selected(row: dict, part: str, args) -> bool:
    return (not args.only or part == args.only) and (not args.match or bool(re.search(args.match, describe(row))))


REGIMES = ("offline", "concurrency", "poisson", "burst")
FAMILIES_OUT = re.compile(r"405B|DeepSeek", re.IGNORECASE)  # the series issue #11's own set does not name


def issue_families(row: dict) -> bool:
    """A run of the model families issue #11 measured on (Llama 8B/70B, Qwen, gpt-oss; Mistral too): not the 405B,
    not DeepSeek."""
    return not FAMILIES_OUT.search(row["model"])


ISSUE_GPUS = ("A100", "H100", "H200", "MI300X")  # the GPU models issue #11's own measurements ran on


def issue_shaped(row: dict) -> bool:
    """A run shaped like issue #11's own set: its load kinds (a Poisson rate, a fixed concurrency, offline; no API
    server bursts), its model families (issue_families) and its GPUs (A100, H100, H200, MI300X, as GPUS maps the
    row's GPU to the catalog)."""
    gpu = GPUS.get(str(row.get("gpu")), "")
    return issue_families(row) and regime(row) != "burst" and gpu.split("-")[0] in ISSUE_GPUS


def load_kind(row: dict) -> str:
    """How the run's requests arrive: concurrency (a closed loop), burst (every request at t = 0) or poisson."""
    rate = row.get("request_rate")
    if row.get("max_concurrency"):
        return "concurrency"
    return "burst" if rate in ("inf", "offline", None) or str(rate).startswith("inf") else "poisson"


def regime(row: dict) -> str:
    """offline (LLM.generate), or the load kind of a served run."""
    return "offline" if _engine(row).get("offline") else load_kind(row)


# bands of a run's mean context per sequence (prompt + half the output, tokens): the decode step's KV reads grow with it
CONTEXT_BANDS = ((1000, "<1k"), (3000, "1k-3k"), (8000, "3k-8k"), (float("inf"), ">=8k"))


def context_band(row: dict) -> str | None:
    """The band of the run's mean context (prompt + output / 2), None where a length is not stated."""
    prompt, output = number(row.get("input_len")), number(row.get("output_len"))
    if prompt is None or output is None:
        return None
    return next(name for top, name in CONTEXT_BANDS if prompt + output / 2 < top)


def _generation(row: dict) -> str:
    """V0 / V1 (V? without a release) for a vLLM run, '' for another engine."""
    version = re.search(r"(\d+)\.(\d+)", str(row.get("engine_version") or ""))
    if not row["engine"].startswith("vLLM"):
        return ""
    return "V?" if not version else ("V0" if (int(version.group(1)), int(version.group(2))) < (0, 8) else "V1")


def describe(row: dict) -> str:
    """engine, release (V0 / V1 for vLLM), GPU, TP, load kind and model of a run, for --match and the fits' subsets."""
    generation = _generation(row)
    return (f"{row['engine']} {row.get('engine_version')} {generation} {row['gpu']} tp{row.get('tp') or 1} "
            f"{load_kind(row)} {row['model']}")


def measured(row: dict) -> dict:
    """The run's measured figures the simulation is compared with: metric -> (statistic, value); a metric the row
    lists under `not_compared` (with the reason) is left out."""
    m = row["measured"]
    out = {}
    if m.get("output_throughput_tok_s"):
        out["throughput"] = ("mean", m["output_throughput_tok_s"])
    elif m.get("request_throughput") and "fixed" in str(row.get("dataset") or "") and number(row["output_len"]):
        # every request generates exactly output_len tokens: output tok/s = requests/s x output_len
        out["throughput"] = ("mean", m["request_throughput"] * number(row["output_len"]))
    for name in ("ttft", "tpot"):
        if m.get(f"{name}_median_ms") is not None:
            out[name] = ("p50", m[f"{name}_median_ms"] / 1e3)
        elif m.get(f"{name}_mean_ms") is not None:
            out[name] = ("mean", m[f"{name}_mean_ms"] / 1e3)
    return {k: v for k, v in out.items() if k not in (row.get("not_compared") or {})}


def predict(over: dict) -> dict | None:
    from specsize import api

    rep = api.simulate(**over)
    s = rep.spec
    if not s.completed:
        return None
    return {"throughput": {"mean": s.throughput_tok_s},
            "ttft": {"p50": s.ttft_s.p50, "mean": s.ttft_s.mean},
            "tpot": {"p50": s.tpot_s.p50, "mean": s.tpot_s.mean}}


def _predict_or_why(over: dict):
    try:
        return predict(over)
    except Exception as err:  # noqa: BLE001 - the refusal's text, reported by the caller
        return str(err)


def _predictions(overs: list[dict], jobs: int) -> list:
    """predict() of every case, in order, over `jobs` processes (each simulation is independent and seeded)."""
    if jobs <= 1 or len(overs) < 2:
        return [_predict_or_why(o) for o in overs]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(_predict_or_why, overs, chunksize=4))


def summary(errors: list[float]) -> str:
    if not errors:
        return "-"
    r = _metric_error(errors)
    return f"median |err| {r.median_abs_error:5.1%}, bias {r.bias:+6.1%} (n={r.runs})"


def ratio_series(rows: list[dict]) -> None:
    """Speculation on/off at several loads of one setup without a published acceptance (llm-d's Qwen3-32B EAGLE-3
    ladder): the acceptance is solved from the lowest load's TPOT ratio (fit), the other loads are predicted."""
    from specsize import api

    groups: dict[str, dict[float, dict]] = {}
    for row in rows:
        if row.get("group") != "llmd-qwen3-32b-eagle3-qps-ladder":
            continue
        arm = "spec" if row.get("speculative") else "off"
        groups.setdefault(arm, {})[float(row["request_rate"])] = row
    if not groups.get("spec") or not groups.get("off"):
        return
    loads = sorted(set(groups["spec"]) & set(groups["off"]))
    base = groups["off"][loads[0]]
    k = int(groups["spec"][loads[0]]["speculative"].get("k") or 3)
    lengths = stated_lengths(base["input_len"], base["output_len"])  # inference-perf's truncated normals

    def sim(rate: float, a: float):
        rep = api.simulate(target="Qwen/Qwen3-32B", gpu="H200-141GB", tp=2, method="eagle3", num_speculative_tokens=k,
                           acceptance_rate=a, rate=rate, duration=120.0, lengths_file=lengths, seed=0)
        return rep.spec, rep.no_spec

    def measured_ratio(rate: float, metric: str) -> float:
        on, off = groups["spec"][rate]["measured"], groups["off"][rate]["measured"]
        key = {"tpot": "tpot_median_ms", "throughput": "output_throughput_tok_s"}[metric]
        return on[key] / off[key]

    target = measured_ratio(loads[0], "tpot")
    lo, hi = 0.05, 0.95
    for _ in range(10):  # TPOT ratio falls as acceptance rises
        mid = (lo + hi) / 2
        spec, off = sim(loads[0], mid)
        if spec.tpot_s.p50 / off.tpot_s.p50 > target:
            lo = mid
        else:
            hi = mid
    a = (lo + hi) / 2
    print(f"\nspec/no-spec ratio across load: llm-d Qwen3-32B + EAGLE-3 (k={k}, head derived), 2 x H200 TP 2; "
          f"acceptance {a:.3f} solved from the {loads[0]:g} QPS TPOT ratio (fit); the other loads held out")
    print(f"{'QPS':>5} {'TPOT ratio meas.':>17} {'pred.':>7} {'tok/s ratio meas.':>18} {'pred.':>7}")
    stop_measured = stop_predicted = None
    for rate in loads:
        spec, off = sim(rate, a)
        pt, mt = spec.tpot_s.p50 / off.tpot_s.p50, measured_ratio(rate, "tpot")
        pr, mr = spec.throughput_tok_s / off.throughput_tok_s, measured_ratio(rate, "throughput")
        print(f"{rate:5g} {mt:17.2f} {pt:7.2f} {mr:18.2f} {pr:7.2f}")
        if stop_measured is None and mt >= STOPS_PAYING:
            stop_measured = rate
        if stop_predicted is None and pt >= STOPS_PAYING:
            stop_predicted = rate
    print(f"speculation stops paying (TPOT gain under {1 - STOPS_PAYING:.0%}, ratio >= {STOPS_PAYING}): measured at "
          f"{stop_measured} QPS, predicted at {stop_predicted} QPS")


SWEEPS = ROOT / "bench" / "data" / "spec_load_sweeps.jsonl"
# the published sweeps' setups as simulate settings: the blog's Llama 3 70B has Llama 3.1 70B's layers (its 8K context
# as max_model_len); ShareGPT's lengths as the vLLM team's own benchmark a month earlier sampled them (vLLM blog
# 2024-09-05: "Average input tokens: 202, average output tokens: 179"); CNN/DailyMail articles average 781 tokens and
# their reference summaries 56 (See et al. 2017, "Get To The Point", sec. 4; Penn Treebank tokens). Llama 3's
# tokenizer (meta-llama/llama-models@a9c89c4 models/llama3/tokenizer.model) gives 1.119 of its tokens per Treebank
# token over the 80 CNN/DailyMail articles of Spec-Bench (hemingkx/Spec-Bench@fd2c1cd data/spec_bench/question.jsonl,
# 713 against 638 tokens on average): 874 tokens of article, about 905-940 with an instruction (the vLLM team's later
# CNN/DailyMail harness adds a 20-token one, LiuXiaoxuanPKU/vllm dsd branch) and the chat template; 940 taken. The
# generated summaries' length is not published: 150 tokens taken (the no-spec arm's 2.75 s at 1 QPS over a 70B step
# time of 17-19 ms). Neither length is published, so the report also gives the crossing with the prompts 5% shorter
# and longer (SWEEP_PROMPT_SPREAD)
# V0's n-gram lookup matched suffixes down to 1 token unless told otherwise (vllm/config.py SpeculativeConfig:
# ngram_prompt_lookup_min None -> 1): with a maximum of 4 at k = 4, the share of steps that propose on CNN/DailyMail
# (bench/ngram_replay.py on the token data of arXiv 2601.11580: bench/data/ngram_proposal_rates.json, lookup 1-4)
NGRAM_V0_CNNDM_RATE = next(r["proposal_rate"] for r in json.loads(
    (ROOT / "bench" / "data" / "ngram_proposal_rates.json").read_text())["rates"]
    if (r["dataset"], r["lookup"], r["k"]) == ("cnn_dailymail", "1-4", 4))
SWEEP_SETUPS = {
    "vllm-blog-2024-draft": dict(target="meta-llama/Llama-3.1-70B-Instruct", gpu="H100-SXM-80GB", tp=4,
                                 engine_version="0.6", max_model_len=8192, method="draft_model",
                                 draft="turboderp/Qwama-0.5B-Instruct", num_speculative_tokens=4, lengths=(202, 179),
                                 dataset="sharegpt", draft_tp=1),  # the blog's --speculative-draft-tensor-parallel-size 1
    "vllm-blog-2024-ngram": dict(target="meta-llama/Llama-3.1-70B-Instruct", gpu="H100-SXM-80GB", tp=4,
                                 engine_version="0.6", max_model_len=8192, method="ngram", num_speculative_tokens=4,
                                 proposal_rate=NGRAM_V0_CNNDM_RATE, lengths=(940, 150), dataset="cnn_dailymail"),
}
SWEEP_PROMPT_SPREAD = (0.95, 1.05)  # the prompts' mean scaled by these for the crossing's sensitivity


def e2e_sweeps() -> list[dict]:
    """Speculation on/off across load where only end-to-end latency is published (bench/data/spec_load_sweeps.jsonl,
    the vLLM blog's QPS sweeps): the acceptance is solved from the lowest load's latency ratio (fit), the ratio at the
    other loads is predicted (held out), and the load where speculation stops paying (the ratio reaches 1) is read
    from both by linear interpolation between the swept loads; again with the prompts' mean scaled by each of
    SWEEP_PROMPT_SPREAD (`stop_spread`). Returns one summary per series."""
    from specsize.planner.load_sweep import crossing_rate  # the tool's own reading of where a sweep crosses 1

    if not SWEEPS.exists():
        return []
    series: dict[str, dict[float, dict]] = {}
    for line in SWEEPS.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            series.setdefault(row["series"], {})[float(row["request_rate"])] = row
    out = []
    for name, by_load in series.items():
        setup = dict(SWEEP_SETUPS[name])
        prompt, output = setup.pop("lengths")
        loads = sorted(by_load)
        measured = [by_load[q]["measured"]["e2e_mean_s_spec"] / by_load[q]["measured"]["e2e_mean_s_off"] for q in loads]
        shape = cnndm_lengths if setup.pop("dataset") == "cnn_dailymail" else sharegpt_lengths
        a, predicted = _solve_and_predict(setup, shape(prompt, output), loads, measured[0])
        spread = [crossing_rate(loads, _solve_and_predict(setup, shape(prompt * f, output), loads,
                                                          measured[0])[1]) for f in SWEEP_PROMPT_SPREAD]
        out.append({"series": name, "acceptance": a, "loads": loads, "measured": measured, "predicted": predicted,
                    "stop_measured": crossing_rate(loads, measured), "stop_predicted": crossing_rate(loads, predicted),
                    "stop_spread": spread})
    return out


def _solve_and_predict(setup: dict, lengths: str, loads: list[float], first_ratio: float) -> tuple[float, list[float]]:
    """The acceptance whose spec / no-spec latency ratio at the lowest load is the measured one (bisection: the ratio
    falls as the acceptance rises), and the ratio it gives at every load."""
    from specsize import api

    def ratio(rate: float, a: float) -> float:
        rep = api.simulate(acceptance_rate=a, rate=rate, duration=max(120.0, 240.0 / rate), lengths_file=lengths,
                           seed=0, **setup)
        return rep.spec.e2e_s.mean / rep.no_spec.e2e_s.mean

    lo, hi = 0.05, 0.95
    for _ in range(10):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ratio(loads[0], mid) > first_ratio else (lo, mid)
    a = (lo + hi) / 2
    return a, [ratio(q, a) for q in loads]


def report_sweeps(results: list[dict]) -> None:
    for r in results:
        s = SWEEP_SETUPS[r["series"]]
        print(f"\nspec/no-spec end-to-end latency across load: {r['series']} ({s['method']}, k={s['num_speculative_tokens']},"
              f" vLLM {s['engine_version']}, {s['target']} TP {s['tp']} on {s['gpu']}); acceptance {r['acceptance']:.3f} "
              f"solved from the {r['loads'][0]:g} QPS ratio (fit); the other loads held out")
        print(f"{'QPS':>5} {'ratio meas.':>12} {'pred.':>7}")
        for q, m, p in zip(r["loads"], r["measured"], r["predicted"]):
            print(f"{q:5g} {m:12.2f} {p:7.2f}")
        sm, sp = r["stop_measured"], r["stop_predicted"]
        err = f"{sp / sm - 1:+.0%} (target within 25%)" if sm and sp else "-"

        def at(q):
            return f"{q:.1f} QPS" if q else f"still paying at {r['loads'][-1]:g} QPS"
        print(f"speculation stops paying (latency ratio reaches 1): measured at {at(sm)}, predicted at {at(sp)}: {err}")
        spread = " / ".join(at(q) for q in r["stop_spread"])
        scales = " / ".join(f"{f - 1:+.0%}" for f in SWEEP_PROMPT_SPREAD)
        print(f"  with the prompts' mean {scales} (not published; acceptance solved again): predicted at {spread}")


def _metric_error(errors: list[float], digits: int | None = None) -> MetricError:
    """runs, median |error| and median error (the bias) of one slice and metric, as the tool reads them
    (core.accuracy.MetricError); rounded to `digits` for the file."""
    med_abs, bias = statistics.median(abs(e) for e in errors), statistics.median(errors)
    if digits is not None:
        med_abs, bias = round(med_abs, digits), round(bias, digits)
    return MetricError(runs=len(errors), median_abs_error=med_abs, bias=bias)


def _served(errs: dict, part: str, metric: str) -> list[float]:
    """A slice's errors without the bursts: the runs at a rate, a concurrency, or offline."""
    return [e for kind in REGIMES if kind != "burst" for e in errs.get((f"{part} {kind}", metric), [])]


# the summaries: (key in the accuracy file after the part, heading printed, the slice's errors of a part and metric)
SLICES = (
    ("", "", lambda errs, part, m: errs.get((part, m), [])),
    ("no_bursts", "without the bursts (the runs at a rate, a concurrency, or offline):", _served),
    ("families", "the model families issue #11 names (Llama 8B-70B, Qwen, gpt-oss, Mistral: no 405B, no DeepSeek):",
     lambda errs, part, m: errs.get((f"{part} families", m), [])),
    ("issue_shaped", "shaped like issue #11's own set (a rate, a concurrency or offline; those families; A100, H100, "
     "H200, MI300X):", lambda errs, part, m: errs.get((f"{part} issue", m), [])),
)


def accuracy_record(errs: dict, measured_on: str, source: str) -> dict:
    """catalog/data/timing_accuracy.json from the run's errors (predicted / measured - 1 by slice and metric): every
    held-out slice (`held_out` the tool shows beside every simulation), and the fit runs for the record."""
    out: dict = {"schema": "the simulator's error on published serving runs: per slice and metric, the runs, the median "
                           "|predicted / measured - 1| and its median (bias); written by bench/accuracy_serving.py "
                           "--write-accuracy", "measured_on": measured_on, "source": source}
    chosen = [("_".join(filter(None, ("held_out", key))), "heldout", errors_of) for key, _, errors_of in SLICES]
    for name, part, errors_of in chosen + [("fit", "fit", SLICES[0][2])]:
        out[name] = {m: _metric_error(errors_of(errs, part, m), digits=4).to_dict() for m in METRICS
                     if errors_of(errs, part, m)}
    return out


def report(errs: dict) -> None:
    """The summary lines: per slice and metric, then per slice, regime and metric."""
    for _, heading, errors_of in SLICES:
        print(f"\n{heading}" if heading else "")
        for part in ("fit", "heldout"):
            for metric in METRICS:
                print(f"{part:8} {metric:10} {summary(errors_of(errs, part, metric))}")
    _breakdown(errs, "by regime (the API server's bursts apart from the server runs at a rate, a concurrency, or "
               "offline):", REGIMES, "")
    _breakdown(errs, "by mean context per sequence (prompt + output / 2; no bursts):",
               [band for _, band in CONTEXT_BANDS], "ctx ")


def _breakdown(errs: dict, heading: str, labels, prefix: str) -> None:
    """Per part, label and metric, the errors kept under (f"{part} {prefix}{label}", metric) where there are any."""
    print(f"\n{heading}")
    for part in ("fit", "heldout"):
        for label in labels:
            for metric in METRICS:
                if errs.get((f"{part} {prefix}{label}", metric)):
                    print(f"{part:8} {label:12} {metric:10} {summary(errs[(f'{part} {prefix}{label}', metric)])}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None, help="one runs file (default: every bench/data/serving_runs*.jsonl)")
    ap.add_argument("--only", choices=("fit", "heldout"))
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--match", default="", help="only runs whose engine, release, GPU and load match this regex")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                    help="simulations run in this many processes (default: the cores, at most 4)")
    ap.add_argument("--write-accuracy", metavar="PATH", default=None,
                    help="write the slices' errors as the tool's timing-accuracy catalog file (every run only: "
                         "src/specsize/catalog/data/timing_accuracy.json)")
    args = ap.parse_args()
    if args.write_accuracy and (args.data or args.only or args.limit or args.match):
        ap.error("--write-accuracy needs every run: drop --data, --only, --limit and --match")
    return run(args)


def write_accuracy(path: str, errs: dict, done: int) -> None:
    """The tool's timing-accuracy catalog file (catalog/data/timing_accuracy.json) from this run's errors."""
    source = (f"bench/accuracy_serving.py over bench/data/serving_runs*.jsonl: {done} runs simulated; split by "
              "held_out() (SHA-256 of source, model, GPU and group: one run in three held out, never fitted on)")
    Path(path).write_text(json.dumps(accuracy_record(errs, time.strftime("%Y-%m-%d"), source), indent=1) + "\n")
    print(f"\nwrote {path}")


def _cases(rows: list[dict], args, skipped: dict[str, int]) -> list[tuple[dict, str, dict]]:
    """(row, slice, simulate overrides) of the runs selected; the others counted in `skipped` by reason."""
    cases = []
    for row in rows:
        over, why = case(row)
        if over is None:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        part = "heldout" if held_out(row) else "fit"
        if selected(row, part, args):
            cases.append((row, part, over))
    return cases[:args.limit] if args.limit else cases


def _slices_of(row: dict, part: str) -> list[str]:
    """The keys (with a metric) a run's errors are kept under: its part, its regime, its context band (no bursts),
    issue #11's families and its shape."""
    kind = regime(row)
    band = context_band(row)
    return [part, f"{part} {kind}"] + ([f"{part} ctx {band}"] if band and kind != "burst" else []) + \
        ([f"{part} families"] if issue_families(row) else []) + ([f"{part} issue"] if issue_shaped(row) else [])


def expert_parallel_pairs(simulated: list[tuple[dict, dict, dict]]) -> None:
    """Runs published with and without expert parallelism at one load (bench/data/ep_runs_s57.jsonl: the same `group`
    and data-parallel size, `expert_parallel` true and false): the measured EP / TP ratio of each metric against the
    predicted one, and how often the prediction puts EP on the other side of TP (by more than 2% either way)."""
    plain = {(r["group"], r.get("dp") or 1): (m, p) for r, m, p in simulated if r.get("expert_parallel") is False}
    pairs = [(r, m, p, plain[(r["group"], r.get("dp") or 1)]) for r, m, p in simulated
             if r.get("expert_parallel") and (r["group"], r.get("dp") or 1) in plain]
    if not pairs:
        return
    print("\nexpert parallelism against the rows split, same server and load (EP / TP: measured, predicted):")
    errors: list[float] = []
    opposite = 0
    for row, meas, pred, (meas_tp, pred_tp) in pairs:
        cells = []
        for metric, (stat, value) in meas.items():
            if metric not in meas_tp or not value or not meas_tp[metric][1]:
                continue
            p, p_tp = pred[metric][stat], pred_tp[metric][meas_tp[metric][0]]
            if not p or not p_tp:
                continue
            m_ratio, p_ratio = value / meas_tp[metric][1], p / p_tp
            errors.append(p_ratio / m_ratio - 1)
            opposite += (m_ratio > 1.02 and p_ratio < 0.98) or (m_ratio < 0.98 and p_ratio > 1.02)
            cells.append(f"{metric} {m_ratio:5.3f} / {p_ratio:5.3f}")
        print(f"  {row['id'][:52]:52} " + " | ".join(cells))
    if errors:
        print(f"  ratio median |error| {statistics.median(abs(e) for e in errors):.1%}, bias "
              f"{statistics.median(errors):+.1%}, opposite sides {opposite} of {len(errors)} (n={len(pairs)} pairs)")


def run(args) -> int:
    rows = load_rows(args.data)
    errs: dict[tuple[str, str], list[float]] = {}
    skipped: dict[str, int] = {}
    print(f"{'run':46} {'slice':7} {'metric':10} {'measured':>10} {'predicted':>10} {'error':>7}")
    started = time.perf_counter()
    done = 0
    cases = _cases(rows, args, skipped)
    simulated: list[tuple[dict, dict, dict]] = []  # (row, measured, predicted) of every run simulated
    for (row, part, _), pred in zip(cases, _predictions([over for _, _, over in cases], args.jobs)):
        meas = measured(row)
        if isinstance(pred, str):  # a row the tool refuses is reported, not fatal
            skipped[f"refused: {pred[:60]}"] = skipped.get(f"refused: {pred[:60]}", 0) + 1
            continue
        if pred is None:
            skipped["no request fits the simulated KV pool"] = skipped.get("no request fits the simulated KV pool", 0) + 1
            continue
        done += 1
        simulated.append((row, meas, pred))
        slices = _slices_of(row, part)
        for metric, (stat, value) in meas.items():
            p = pred[metric][stat]
            if p is None or not value:
                continue
            e = p / value - 1
            for key in slices:
                errs.setdefault((key, metric), []).append(e)
            unit, scale = ("tok/s", 1) if metric == "throughput" else ("ms", 1e3)
            print(f"{row['id'][:46]:46} {part:7} {metric + ' ' + stat:10} {value * scale:10.1f} {p * scale:10.1f} "
                  f"{e:+7.1%}")
    report(errs)
    expert_parallel_pairs(simulated)
    if args.write_accuracy:
        write_accuracy(args.write_accuracy, errs, done)
    if args.verbose:
        print("\nskipped:")
        for why, count in sorted(skipped.items(), key=lambda kv: -kv[1]):
            print(f"  {count:4} {why}")
    print(f"\n{done} runs simulated in {time.perf_counter() - started:.1f} s")
    if not args.only and not args.limit:
        ratio_series(rows)
        report_sweeps(e2e_sweeps())
    return 0


if __name__ == "__main__":
    sys.exit(main())
