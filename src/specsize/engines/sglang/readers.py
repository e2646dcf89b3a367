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
Metrics (python/sglang/srt/metrics/collector.py @ 93d04878): sglang:token_usage (fraction of the pool in use,
rounded to two decimals by most releases), sglang:num_used_tokens, sglang:max_total_num_tokens (the pool, from 0.5.9), sglang:num_running_reqs, sglang:num_queue_reqs, sglang:num_retracted_reqs (requests
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
    # a hybrid sliding-window model (gpt-oss, Llama 4) has two pools, each with its own "KV Cache is allocated" line
    # (the SWA pool's first up to 0.5.14, the full pool's first, labelled "Full" / "SWA", later); its token count is
    # the full pool's: model_runner.py "Use Sliding window memory pool. full_layer_tokens=F, swa_layer_tokens=S"
    # (0.5.3; "Use sliding window memory pool." from pool_configurator.py, 0.5.14) and mem_cache/swa_memory_pool.py
    # "SWAKVPool mem usage: X GB, swa size: S, full size: F" (0.5.14 on)
    "swa_pool": re.compile(r"Use [Ss]liding window memory pool\. full_layer_tokens=(?P<full>\d+), "
                           r"swa_layer_tokens=(?P<swa>\d+)"),
    "swa_summary": re.compile(r"SWAKVPool mem usage: (?P<gib>[\d.]+) GB, swa size: (?P<swa>\d+), "
                              r"full size: (?P<full>\d+)"),
    # 0.5.23 with SGLANG_ENABLE_POST_CAPTURE_KV_SIZING=1 (off by default: environ.py EnvBool(False)) sizes the pool
    # again after the CUDA graphs are captured: the first lines then say "KV Cache VA upper bound" (an address-space
    # bound, not read) and the pool is model_executor/model_runner_components/kv_pool_runtime.py's "Post-capture KV
    # sizing: ... KV cache allocated" lines (the target's, its #tokens a hybrid's full-attention pool, then each
    # draft's)
    "post_capture_allocated": re.compile(r"Post-capture KV sizing: (?P<draft>draft )?KV cache allocated\. dtype: "
                                         r"[^,]+, #tokens: (?P<tokens>\d+), KV size: (?P<kv>[\d.]+) GB"),
}
MODEL_IN_LOG = re.compile(r"model_path='(?P<m>[^']+)'")
SIGNATURE = re.compile(r"KV Cache is allocated\.|max_total_num_tokens=|Load weight (?:begin|end)\.|SWAKVPool mem usage|"
                       r"Post-capture KV sizing: |"
                       r"Not enough memory\. Please try to increase --mem-fraction-static|"
                       r"Loaded weights leave no GPU memory for the KV cache")


def looks_like_sglang(text: str) -> bool:
    return SIGNATURE.search(text) is not None


# a scheduler's line prefix: "[time DPd PPp ATTN_CPc MOE_DPm TPt EPe]" with each rank SGLang runs more than one of
# (managers/scheduler.py run_scheduler_process: " DP{dp_rank}", " TP{tp_rank}", " EP{moe_ep_rank}", " PP{pp_rank}" in
# 0.5.3's order; DP, PP, ATTN_CP, MOE_DP, TP, EP in 0.5.14's), none at TP 1
_RANKED_PREFIX = re.compile(r"\[[^\]]*\b(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+\]")
_RANK = re.compile(r"\b(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)\b")


def _rank0(line: str) -> bool:
    prefix = _RANKED_PREFIX.search(line)
    return prefix is None or all(rank == "0" for rank in _RANK.findall(prefix.group(0)))


def _tp0_lines(text: str) -> str:
    """The lines of the first rank of every kind (TP0 with its EP0, PP0 - the first stage - and DP0: one engine) and
    the unranked ones."""
    return "\n".join(line for line in text.splitlines() if _rank0(line))


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


def _read_post_capture(find: _Finder, out: StartupLog) -> None:
    """The pool as 0.5.23's post-capture sizing leaves it, where the log has it: it replaces the lines before."""
    resized = find.all("post_capture_allocated")
    target = [m for m in resized if not m["draft"]]
    if not target:
        return
    if "kv_allocated" not in out.matched:
        out.matched.append("kv_allocated")
    out.kv_cache_tokens = int(target[0]["tokens"])  # config.max_total_num_tokens: a hybrid's full-attention pool
    out.available_kv_gib = float(target[0]["kv"])
    drafts = [float(m["kv"]) for m in resized if m["draft"]]
    out.draft_kv_gib = sum(drafts) if drafts else out.draft_kv_gib


def read_startup_log(text: str) -> StartupLog:
    """The figures an SGLang start-up log prints (rank 0), as the engine-neutral StartupLog."""
    from ..readers import MAX_COUNT, StartupLog  # noqa: PLC0415, F811 - engines.readers dispatches here

    out = StartupLog(generation="SGLang", engine="sglang")
    find = _Finder(text)
    allocated = find.all("kv_allocated")
    hybrid = find.search("swa_summary") or find.search("swa_pool")
    if allocated:
        out.matched.append("kv_allocated")
        out.kv_cache_tokens = int(allocated[0]["tokens"].replace(",", ""))
        sizes = [float(m["kv"]) if m["kv"] else float(m["k"]) + float(m["v"]) for m in allocated]
        target_pools = 2 if hybrid else 1  # a hybrid target's SWA and full pools, then a draft's
        out.available_kv_gib = sum(sizes[:target_pools])
        if len(sizes) > target_pools:
            out.draft_kv_gib = sum(sizes[target_pools:])
    if hybrid:
        out.matched.append("swa_pool")
        out.kv_cache_tokens = int(hybrid["full"])  # what max_total_num_tokens is: the full-attention layers' pool
    _read_post_capture(find, out)
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
    if out.kv_cache_tokens is not None and not 0 <= out.kv_cache_tokens <= MAX_COUNT:
        raise SpecError("log", f"#tokens {out.kv_cache_tokens:,} cannot come from an SGLang server",
                        "an SGLang start-up log")
    if out.kv_cache_tokens and out.max_concurrency_tokens:
        out.max_concurrency = out.kv_cache_tokens / out.max_concurrency_tokens
    if not {"kv_allocated", "swa_pool", "max_total_num_tokens", "load_weight_end", "refusal"} & set(out.matched):
        raise SpecError("log", "none of the SGLang start-up lines specsize knows were found",
                        "an SGLang start-up log (\"KV Cache is allocated. #tokens: N ...\")")
    return out


SUMMED = {"sglang:num_running_reqs": "running", "sglang:num_queue_reqs": "waiting",
          "sglang:num_retracted_reqs": "preemptions"}
_LATENCY = {"sglang:time_to_first_token_seconds": "ttft", "sglang:inter_token_latency_seconds": "tpot",
            "sglang:time_per_output_token_seconds": "tpot"}


def _check(name: str, labels: dict, value: float) -> None:
    # every sample, the +Inf bucket's count included (only its bound is infinite: it had let a NaN count through)
    if not math.isfinite(value) or value < 0:
        raise SpecError("metrics", f"{name} = {value} cannot come from an SGLang server", "non-negative finite samples")
    if name == "sglang:token_usage" and value > 1.0001:
        raise SpecError("metrics", f"{name} = {value} is above 1 (it is a fraction)", "a fraction in [0, 1]")


# the live check holds an observed pool to the plan's within 1% (planner.live): a pool read from a rounded usage is
# given only where the rounding moves it less than that
POOL_TOLERANCE = 0.01


def _pool_tokens(printed: float | None, used: float | None, usage: float | None) -> int | None:
    """The pool's size in tokens: the constant sglang:max_total_num_tokens where the server serves it (0.5.9 on:
    metrics/collector.py, emitted at start-up), else tokens in use / the fraction in use. SGLang rounds that fraction
    to two decimals (managers/scheduler_metrics_mixin.py "self.stats.token_usage = round(token_usage, 2)" in 0.4.10;
    scheduler_components/pool_stats_observer.py in 0.5.14 and later): a figure of two decimals sizes the pool only to
    within used / (usage +- 0.005), and none is given where that is wider than POOL_TOLERANCE (below a usage of about
    0.5). A hybrid sliding-window pool's usage and tokens in use are each the larger of its two pools', so they size
    neither."""
    from ..readers import MAX_COUNT, whole_count  # noqa: PLC0415 - engines.readers imports this module

    if printed:
        if not whole_count(printed, least=1):
            raise SpecError("metrics", f"sglang:max_total_num_tokens = {printed:g} cannot come from an SGLang server",
                            "a whole number of tokens from 1 to 2^50")
        return round(printed)
    if not used or not usage:
        return None
    if abs(usage * 100 - round(usage * 100)) < 1e-6 and usage > 0.005 and 0.005 / (usage - 0.005) > POOL_TOLERANCE:
        return None
    pool = used / usage
    if not (math.isfinite(pool) and 1 <= pool <= MAX_COUNT):  # 1e308 tokens at a usage of 0.001, or 5e-324 of usage
        raise SpecError("metrics", f"sglang:num_used_tokens = {used:g} at sglang:token_usage = {usage:g} sizes no pool",
                        "the tokens in use and the fraction of the pool they fill of one SGLang server")
    return round(pool)


def read_metrics(families: list) -> LiveMetrics:
    """Fold the sglang: families of a parsed /metrics text into the engine-neutral LiveMetrics."""
    from ..readers import LiveMetrics, _merged, _quantile, bucket_bound, cumulative  # noqa: PLC0415, F811

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
                histograms.setdefault(_LATENCY[name[:-7]], []).append((bucket_bound(name, labels, "SGLang"), value))
            else:
                gauges[name] = value
    usage, used = gauges.get("sglang:token_usage"), gauges.get("sglang:num_used_tokens")
    out.kv_usage_fraction = usage
    hybrid = bool(gauges.get("sglang:swa_token_usage"))
    out.kv_cache_tokens = _pool_tokens(gauges.get("sglang:max_total_num_tokens"), None if hybrid else used, usage)
    # SGLang's mean accepted length per verify step (the bonus token included) and accepted / drafted tokens
    out.sglang_accept_length = gauges.get("sglang:spec_accept_length") or None
    if out.sglang_accept_length is not None and not 1 <= out.sglang_accept_length <= 65:
        raise SpecError("metrics", f"sglang:spec_accept_length = {out.sglang_accept_length:g} cannot come from an "
                        "SGLang server", "a mean accepted length from 1 to k + 1 (k at most 64)")
    out.v0_acceptance_rate = gauges.get("sglang:spec_accept_rate")
    ttft, tpot = _merged(histograms, "ttft"), _merged(histograms, "tpot")
    for merged, name in ((ttft, "time to first token"), (tpot, "time per output token")):
        cumulative(merged, f"SGLang's {name} histogram")
    out.ttft_s = {"p50": _quantile(ttft, 0.5), "p99": _quantile(ttft, 0.99)}
    out.tpot_s = {"p50": _quantile(tpot, 0.5), "p99": _quantile(tpot, 0.99)}
    return out
