"""Readers of what a running SGLang server says about itself: its start-up log and its Prometheus /metrics.

Start-up lines (sgl-project/sglang python/sglang/srt/model_executor/model_runner.py and
mem_cache/memory_pool.py; "GB" in them is GiB, the figures are divided by 2^30):
  "Load weight begin. avail mem=X GB", "Load weight end. type=..., avail mem=X GB, mem usage=Y GB.",
  "KV Cache is allocated. [dtype: ..., ]#tokens: N, K size: X GB, V size: Y GB" (MLA: "KV size: X GB"),
  "Memory pool end. avail mem=X GB", "max_total_num_tokens=N, chunked_prefill_size=..., max_prefill_tokens=...,
  max_running_requests=M, context_len=L", and the refusals "Not enough memory. Please try to increase
  --mem-fraction-static" and (newer) "Loaded weights leave no GPU memory for the KV cache under
  --mem-fraction-static=F". With speculation the draft worker prints its own "KV Cache is allocated" line with the
  same #tokens; the first one (the target's) is read, the sizes of all are summed per rank 0.
Metrics (python/sglang/srt/metrics/collector.py @ 93d04878): sglang:token_usage (fraction of the pool in use),
sglang:num_used_tokens, sglang:num_running_reqs, sglang:num_queue_reqs, sglang:num_retracted_reqs (requests
retracted when the pool ran out, SGLang's preemption), sglang:spec_accept_length, sglang:spec_accept_rate,
and the latency histograms sglang:time_to_first_token_seconds and sglang:inter_token_latency_seconds
(sglang:time_per_output_token_seconds in older releases).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from ...core.errors import SpecError

if TYPE_CHECKING:
    from ..readers import LiveMetrics, StartupLog

_NUM = r"[\d,]+(?:\.\d+)?"
LOG_PATTERNS = {
    "kv_allocated": re.compile(r"KV Cache is allocated\.(?: dtype: [^,]+,)? #tokens: (?P<tokens>[\d,]+), "
                               r"(?:K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB|KV size: (?P<kv>[\d.]+) GB)"),
    "max_total_num_tokens": re.compile(r"max_total_num_tokens=(?P<tokens>\d+)(?:, chunked_prefill_size=-?\d+)?"
                                       r"(?:, max_prefill_tokens=\d+)?(?:, max_running_requests=(?P<running>\d+))?"
                                       r"(?:, context_len=(?P<context>\d+))?"),
    "load_weight_end": re.compile(r"Load weight end\..*?avail mem=(?P<avail>[\d.]+) GB, mem usage=(?P<usage>[\d.]+) GB"),
    "load_weight_begin": re.compile(r"Load weight begin\. avail mem=(?P<avail>[\d.]+) GB"),
    "memory_pool_end": re.compile(r"Memory pool end\. avail mem=(?P<avail>[\d.]+) GB"),
    "refusal": re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static|Loaded weights leave "
                          r"no GPU memory for the KV cache under --mem-fraction-static"),
    "version": re.compile(r"sglang(?:==| version:? |: )v?(?P<v>\d+\.\d+\.\d+)"),
}
MODEL_IN_LOG = re.compile(r"model_path='(?P<m>[^']+)'")
SIGNATURE = re.compile(r"KV Cache is allocated\.|max_total_num_tokens=|Load weight (?:begin|end)\.|"
                       r"Not enough memory\. Please try to increase --mem-fraction-static|"
                       r"Loaded weights leave no GPU memory for the KV cache")


def looks_like_sglang(text: str) -> bool:
    return SIGNATURE.search(text) is not None


def _tp0_lines(text: str) -> str:
    """The lines of rank 0 (SGLang prefixes each with "[time TPn]") and the unranked ones."""
    return "\n".join(line for line in text.splitlines() if not re.search(r"\bTP\d+\]", line) or " TP0]" in line)


class _Finder:
    """Rank 0's line when rank 0 printed it, else any rank's (all ranks of one engine size alike)."""

    def __init__(self, text: str) -> None:
        self.texts = (_tp0_lines(text), text)

    def search(self, name: str) -> re.Match | None:
        for body in self.texts:
            match = LOG_PATTERNS[name].search(body)
            if match:
                return match
        return None

    def all(self, name: str) -> list[re.Match]:
        """Every one of rank 0's lines (the target's pool, then a draft's), else the first of another rank."""
        found = list(LOG_PATTERNS[name].finditer(self.texts[0]))
        if found:
            return found
        first = LOG_PATTERNS[name].search(self.texts[1])
        return [first] if first else []


def read_startup_log(text: str) -> StartupLog:
    """The figures an SGLang start-up log prints (rank 0), as the engine-neutral StartupLog."""
    from ..readers import StartupLog  # noqa: PLC0415, F811 - engines.readers dispatches here

    out = StartupLog(generation="SGLang", engine="sglang")
    find = _Finder(text)
    allocated = find.all("kv_allocated")
    if allocated:
        out.matched.append("kv_allocated")
        out.kv_cache_tokens = int(allocated[0]["tokens"].replace(",", ""))
        sizes = [float(m["kv"]) if m["kv"] else float(m["k"]) + float(m["v"]) for m in allocated]
        out.available_kv_gib = sizes[0]
        if len(sizes) > 1:
            out.draft_kv_gib = sum(sizes[1:])
    total = find.search("max_total_num_tokens")
    if total:
        out.matched.append("max_total_num_tokens")
        out.kv_cache_tokens = out.kv_cache_tokens or int(total["tokens"])
        if total["running"]:
            out.max_running_requests = int(total["running"])
        if total["context"]:
            out.max_concurrency_tokens = int(total["context"])
    end = find.search("load_weight_end")
    if end:
        out.matched.append("load_weight_end")
        out.weights_gib = float(end["usage"])
        out.free_before_loading_gib = float(end["avail"]) + float(end["usage"])
    begin = find.search("load_weight_begin")
    if begin:
        out.matched.append("load_weight_begin")
        out.free_before_loading_gib = float(begin["avail"])
    if LOG_PATTERNS["refusal"].search(text):
        out.matched.append("refusal")
        out.refusal = "not enough memory for the KV cache (SGLang asks to increase --mem-fraction-static)"
    version = LOG_PATTERNS["version"].search(text)
    out.version = version["v"] if version else None
    model = MODEL_IN_LOG.search(text)
    out.model = model["m"] if model else None
    if out.kv_cache_tokens is not None and not 0 <= out.kv_cache_tokens <= 2**50:
        raise SpecError("log", f"#tokens {out.kv_cache_tokens:,} cannot come from an SGLang server",
                        "an SGLang start-up log")
    if out.kv_cache_tokens and out.max_concurrency_tokens:
        out.max_concurrency = out.kv_cache_tokens / out.max_concurrency_tokens
    if not {"kv_allocated", "max_total_num_tokens", "load_weight_end", "refusal"} & set(out.matched):
        raise SpecError("log", "none of the SGLang start-up lines specsize knows were found",
                        "an SGLang start-up log (\"KV Cache is allocated. #tokens: N ...\")")
    return out


SUMMED = {"sglang:num_running_reqs": "running", "sglang:num_queue_reqs": "waiting",
          "sglang:num_retracted_reqs": "preemptions"}
_LATENCY = {"sglang:time_to_first_token_seconds": "ttft", "sglang:inter_token_latency_seconds": "tpot",
            "sglang:time_per_output_token_seconds": "tpot"}


def _check(name: str, labels: dict, value: float) -> None:
    if name.endswith("_bucket") and labels.get("le") in ("+Inf", "inf"):
        return
    if not math.isfinite(value) or value < 0:
        raise SpecError("metrics", f"{name} = {value} cannot come from an SGLang server", "non-negative finite samples")
    if name == "sglang:token_usage" and value > 1.0001:
        raise SpecError("metrics", f"{name} = {value} is above 1 (it is a fraction)", "a fraction in [0, 1]")


def read_metrics(families: list) -> LiveMetrics:
    """Fold the sglang: families of a parsed /metrics text into the engine-neutral LiveMetrics."""
    from ..readers import LiveMetrics, _merged, _quantile  # noqa: PLC0415, F811

    out = LiveMetrics(generation="SGLang")
    histograms: dict[str, list[tuple[float, float]]] = {}
    gauges: dict[str, float] = {}
    for family in families:
        if not family.name.startswith("sglang:"):
            continue
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, sample.value
            _check(name, labels, value)
            if labels.get("model_name") and out.model is None:
                out.model = labels["model_name"]
            if name in SUMMED:
                setattr(out, SUMMED[name], (getattr(out, SUMMED[name]) or 0) + value)
            elif name.endswith("_bucket") and name[:-7] in _LATENCY:
                histograms.setdefault(_LATENCY[name[:-7]], []).append((float(labels["le"]), value))
            else:
                gauges[name] = value
    usage, used = gauges.get("sglang:token_usage"), gauges.get("sglang:num_used_tokens")
    out.kv_usage_fraction = usage
    if used and usage:
        out.kv_cache_tokens = round(used / usage)  # the pool's size: tokens in use / the fraction in use
    # SGLang's mean accepted length per verify step (the bonus token included) and accepted / drafted tokens
    out.sglang_accept_length = gauges.get("sglang:spec_accept_length") or None
    if out.sglang_accept_length is not None and not 1 <= out.sglang_accept_length <= 65:
        raise SpecError("metrics", f"sglang:spec_accept_length = {out.sglang_accept_length:g} cannot come from an "
                        "SGLang server", "a mean accepted length from 1 to k + 1 (k at most 64)")
    out.v0_acceptance_rate = gauges.get("sglang:spec_accept_rate")
    ttft, tpot = _merged(histograms, "ttft"), _merged(histograms, "tpot")
    out.ttft_s = {"p50": _quantile(ttft, 0.5), "p99": _quantile(ttft, 0.99)}
    out.tpot_s = {"p50": _quantile(tpot, 0.5), "p99": _quantile(tpot, 0.99)}
    return out
