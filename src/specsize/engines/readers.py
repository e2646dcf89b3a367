"""Readers of what a running vLLM says about itself: its start-up log and its Prometheus /metrics.

Log wordings covered: V0 (0.4-0.10: "# GPU blocks: N", "# CUDA blocks", "model weights take X GiB; ...",
"Loading model weights took X GB") and V1 (0.8-0.32: "GPU KV cache size: N tokens", "CPU KV cache size",
"Maximum concurrency for L tokens per request: Cx", "Available KV cache memory: X GiB", "Memory profiling
takes ... weights memory: X GiB", the start-up refusal "To serve at least one request ...").
Metrics: V1 (vllm:kv_cache_usage_perc, vllm:num_preemptions, vllm:spec_decode_num_*) and V0
(vllm:gpu_cache_usage_perc, vllm:spec_decode_draft_acceptance_rate ...), parsed with prometheus_client.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..core.errors import SpecError, first_repeated


def _num(text: str) -> float:
    """A number a log or page prints ("1,234", "5.25"): one that does not read as a finite number ("1.2.3", ",,,",
    5,000 digits) is an error naming it, not an internal one."""
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or abs(value) > 1e18:
        raise SpecError("log", f"cannot read {text[:40]!r} as a number", "the figures of an engine's start-up log")
    return value


def _latest_startup(text: str) -> str:
    """The log from its last start-up on: restarts appended to one file describe the server by the latest (a refused
    start-up followed by one that ran must read as the one that ran): from the line of the last _STARTUP marker."""
    starts = [m.start() for m in _STARTUP.finditer(text)]
    if not starts:
        return text
    return text[text.rfind("\n", 0, starts[-1]) + 1:]


LOG_PATTERNS = {
    "kv_cache_tokens": re.compile(r"(?:GPU|CPU|XPU|TPU|HPU)(?: \+ host)? KV cache size: (?P<v>[\d,]+) tokens"),
    "max_concurrency": re.compile(r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<v>[\d.]+)x"),
    "available_kv_gib": re.compile(r"Available KV cache memory: (?P<v>[\d.]+) ?GiB"),
    "v0_blocks": re.compile(r"# (?:GPU|CUDA|cpu|CPU|npu|xpu) blocks: (?P<v>\d+)"),
    "v0_profile": re.compile(r"model weights take (?P<w>[\d.]+) ?GiB; non_torch_memory takes (?P<nt>[\d.]+) ?GiB; "
                             r"PyTorch activation peak memory takes (?P<act>[\d.]+) ?GiB; the rest of the memory "
                             r"reserved for KV Cache is (?P<kv>[\d.]+) ?GiB"),
    "v1_profile": re.compile(r"torch peak memory increase: (?P<act>[\d.]+) ?GiB; non-torch forward increase memory: "
                             r"(?P<nt>[\d.]+) ?GiB; weights memory: (?P<w>[\d.]+) ?GiB"),
    "weights": re.compile(r"(?:Loading model weights took|Model loading took) (?P<v>[\d.]+) ?(?:GB|GiB)"),
    "cpu_kv_space": re.compile(r"Explicitly set \((?P<v>[\d.]+)/[\d.]+\) GiB for KV cache"),
    "refusal_v1": re.compile(r"To serve at least one request with the model's max seq len \((?P<len>\d+)\)"),
    "refusal_v0": re.compile(r"max seq len \((?P<len>\d+)\) is larger than the maximum number of tokens that can be "
                             r"stored in KV cache \((?P<v>\d+)\)"),
    "version": re.compile(r"(?:vLLM API server version |V1 LLM engine \(v|█ +version )(?P<v>\d+\.\d+(?:\.\d+)?)"),
}


@dataclass
class StartupLog:
    version: str | None = None
    generation: str | None = None  # V0 / V1
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    num_blocks: int | None = None
    available_kv_gib: float | None = None
    weights_gib: float | None = None
    activation_peak_gib: float | None = None
    non_torch_gib: float | None = None
    refused_max_model_len: int | None = None
    model: str | None = None  # the model= of the engine's config line
    matched: list[str] = field(default_factory=list)
    engine: str = "vllm"
    refusal: str | None = None  # a start-up refusal other than vLLM's max_model_len one (SGLang: no KV memory)
    draft_kv_gib: float | None = None  # SGLang: the draft worker's own pool
    max_running_requests: int | None = None  # SGLang's printed limit
    free_before_loading_gib: float | None = None  # SGLang: what mem_fraction_static is a fraction of


MODEL_IN_LOG = re.compile(r"with config: model='(?P<m>[^']+)'")
# where a start-up begins: a version line (the API server's, the engine's "V1 LLM engine (vX)", the banner) or the
# engine's config line, whichever comes last
_STARTUP = re.compile(LOG_PATTERNS["version"].pattern + "|with config: model=")
KNOWN_VERSIONS = ((0, 4), (0, 32))  # the start-up wordings read here (module docstring)


def _check_version(version: str | None) -> None:
    if version is None:
        return
    from .registry import release  # noqa: PLC0415

    wanted = release(version)
    if wanted is None or not KNOWN_VERSIONS[0] <= wanted <= KNOWN_VERSIONS[1]:
        low, high = (".".join(map(str, v)) for v in KNOWN_VERSIONS)
        raise SpecError("log", f"a start-up log of vLLM {version}, whose wording specsize does not know",
                        f"a vLLM start-up log of release {low} to {high}")


def _check_log_counts(out: StartupLog) -> None:
    for name in ("kv_cache_tokens", "num_blocks"):
        value = getattr(out, name)
        if value is not None and not 0 <= value <= MAX_COUNT:
            raise SpecError("log", f"{name} {value:,} cannot come from a vLLM server", "a vLLM start-up log")


def read_startup_log(text: str) -> StartupLog:
    """The figures a start-up log prints (vLLM's or SGLang's); a clear error when it holds none of the known
    wordings."""
    from .sglang import readers as sglang_readers  # noqa: PLC0415

    if sglang_readers.looks_like_sglang(text) and not LOG_PATTERNS["kv_cache_tokens"].search(text):
        return sglang_readers.read_startup_log(text)
    return _read_vllm_startup_log(text)


def _read_vllm_startup_log(text: str) -> StartupLog:
    out = StartupLog()
    text = _latest_startup(text)
    for name, pattern in LOG_PATTERNS.items():
        match = pattern.search(text)
        if not match:
            continue
        out.matched.append(name)
        if name == "kv_cache_tokens":
            out.kv_cache_tokens = int(_num(match["v"]))
            out.generation = "V1"
        elif name == "max_concurrency":
            out.max_concurrency = _num(match["v"])
            out.max_concurrency_tokens = int(_num(match["len"]))
        elif name == "available_kv_gib":
            out.available_kv_gib = _num(match["v"])
        elif name == "v0_blocks":
            out.num_blocks = int(_num(match["v"]))
            out.generation = out.generation or "V0"
        elif name in ("v0_profile", "v1_profile"):
            out.weights_gib = _num(match["w"])
            out.non_torch_gib = _num(match["nt"])
            out.activation_peak_gib = _num(match["act"])
            if name == "v0_profile":
                out.available_kv_gib = _num(match["kv"])
        elif name == "weights" and out.weights_gib is None:
            out.weights_gib = _num(match["v"])
        elif name == "cpu_kv_space" and out.available_kv_gib is None:
            out.available_kv_gib = _num(match["v"])
        elif name in ("refusal_v1", "refusal_v0"):
            out.refused_max_model_len = int(_num(match["len"]))
        elif name == "version":
            out.version = match["v"]
    _check_log_counts(out)
    model = MODEL_IN_LOG.search(text)
    out.model = model["m"] if model else None
    _check_version(out.version)
    figures = {"kv_cache_tokens", "v0_blocks", "v0_profile", "v1_profile", "available_kv_gib", "refusal_v1",
               "refusal_v0", "weights"}
    if not figures & set(out.matched):
        raise SpecError("log", "none of the start-up lines specsize knows were found: a log from an unknown vLLM "
                        "version, or not a vLLM start-up log", "a vLLM start-up log (V0 0.4-0.10 or V1 0.8-0.32)")
    return out


@dataclass
class LiveMetrics:
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    kv_cache_tokens: int | None = None
    kv_cache_memory_bytes: int | None = None
    kv_usage_fraction: float | None = None
    preemptions: float | None = None
    running: float | None = None
    waiting: float | None = None
    num_drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    generation_tokens: float | None = None  # tokens generated (first tokens and accepted drafts included)
    finished: float | None = None  # requests finished, every finish reason
    accepted_per_position: list[float] = field(default_factory=list)
    v0_acceptance_rate: float | None = None
    ttft_s: dict = field(default_factory=dict)  # p50/p99 from the histogram
    tpot_s: dict = field(default_factory=dict)
    generation: str | None = None
    # vllm:cache_config_info was served (every vLLM does; V1 releases before vllm-project/vllm#15755, 0.8.0-0.8.4,
    # write num_gpu_blocks="None" in it, so it can be there without sizing the cache)
    cache_config_seen: bool = False
    model: str | None = None  # the model_name label
    sglang_accept_length: float | None = None  # SGLang's mean accepted length per verify step (bonus included)

    @property
    def k(self) -> float | None:
        if self.num_drafts and self.draft_tokens:
            return self.draft_tokens / self.num_drafts
        return None

    @property
    def mean_accepted_length(self) -> float | None:
        if self.num_drafts:
            return 1 + (self.accepted_tokens or 0) / self.num_drafts
        return self.sglang_accept_length

    @property
    def proposal_rate(self) -> float | None:
        """The share of decode steps that carried a proposal (SpeculativeConfig.proposal_rate): drafts over the
        steps that decoded, each of which emitted one token plus its accepted ones, a request's first token coming
        from its prefill: generation tokens - accepted tokens - requests started (finished + running)."""
        if not self.num_drafts or not self.generation_tokens:
            return None
        steps = self.generation_tokens - (self.accepted_tokens or 0) - (self.finished or 0) - (self.running or 0)
        return min(1.0, self.num_drafts / steps) if steps > 0 else None

    @property
    def draft_acceptance_fraction(self) -> float | None:
        """Accepted / drafted tokens (vLLM's 'draft acceptance rate')."""
        if self.draft_tokens:
            return (self.accepted_tokens or 0) / self.draft_tokens
        return self.v0_acceptance_rate


def _quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """A quantile from cumulative histogram buckets (upper bound, count), by linear interpolation."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    target = q * total
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= target:
            if bound == float("inf"):  # beyond the last finite bucket: its bound, or nothing known without one
                return previous_bound if previous_bound > 0 or previous_count > 0 else None
            if count == previous_count:
                return bound
            return previous_bound + (bound - previous_bound) * (target - previous_count) / (count - previous_count)
        previous_bound, previous_count = bound, count
    return previous_bound


SUMMED = {"vllm:num_preemptions_total": "preemptions", "vllm:num_requests_running": "running",
          "vllm:num_requests_waiting": "waiting", "vllm:spec_decode_num_drafts_total": "num_drafts",
          "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
          "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
          "vllm:generation_tokens_total": "generation_tokens", "vllm:request_success_total": "finished"}


_CACHE_CONFIG_LABELS = (("num_gpu_blocks", "num_gpu_blocks", int), ("block_size", "block_size", int),
                        ("kv_cache_size_tokens", "kv_cache_tokens", int),
                        ("kv_cache_memory_bytes", "kv_cache_memory_bytes", int))
_LATENCY_HISTOGRAMS = ("vllm:time_to_first_token_seconds", "vllm:time_per_output_token_seconds",
                       "vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds")


def _read_sample(out: LiveMetrics, metric: str, labels: dict, value: float, per_position: dict[int, float],
                 histograms: dict[str, list[tuple[float, float]]]) -> None:
    """Fold one vllm: sample into `out` (accepted tokens per position and histogram buckets on the side)."""
    _check_sample(metric, labels, value)
    if labels.get("model_name") and out.model is None:
        out.model = labels["model_name"]
    if metric == "vllm:cache_config_info":
        out.cache_config_seen = True
        for key, attr, cast in _CACHE_CONFIG_LABELS:
            raw = labels.get(key)
            if raw not in (None, "None", ""):
                count, before = _label_count(key, raw, cast), getattr(out, attr)
                if key == "block_size" and before is not None and before != count:  # one deployment's engines share it
                    raise SpecError("metrics", f"cache_config_info block_size is {before} for one engine and {count} "
                                    "for another", "the /metrics of one deployment (its engines share a block size)")
                # data-parallel engines each profile their own GPU, and their pools drift apart (vLLM has no all-reduce
                # across DP ranks, only across TP: vllm-project/vllm PR 46106 measured thousands of blocks on DP8):
                # the smallest pool is the one that fills first, and the one the plan's capacity is held to
                setattr(out, attr, count if before is None else min(before, count))
    elif metric in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"):
        # the busiest engine's (data parallel: one pool each); the last engine's had hidden one at 95% behind one at 10%
        out.kv_usage_fraction = max(value, out.kv_usage_fraction or 0.0)
        out.generation = "V1" if "kv_cache" in metric else "V0"
    elif metric in SUMMED:  # summed over engines (data parallel) and label sets
        attribute = SUMMED[metric]
        setattr(out, attribute, (getattr(out, attribute) or 0) + value)
    elif metric == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
        position = int(labels.get("position", 0))
        per_position[position] = per_position.get(position, 0) + value
    elif metric == "vllm:spec_decode_draft_acceptance_rate":
        out.v0_acceptance_rate = value
    elif metric.endswith("_bucket") and metric[:-7] in _LATENCY_HISTOGRAMS:
        histograms.setdefault(metric[:-7], []).append((bucket_bound(metric, labels), value))


def bucket_bound(metric: str, labels: dict, server: str = "vLLM") -> float:
    """A latency histogram bucket's upper bound, its `le` label: a number of seconds >= 0, or +Inf (prometheus_client
    writes every bucket with one); a bucket without it, or with another word, cannot come from a server."""
    raw = labels.get("le")
    try:
        bound = float(raw) if raw is not None else math.nan
    except ValueError:
        bound = math.nan
    accepted = "buckets whose le is seconds >= 0 or +Inf"
    if math.isnan(bound):
        raise SpecError("metrics", f"{metric} with le={raw!r} cannot come from a {server} server", accepted)
    if bound < 0:
        raise SpecError("metrics", f"{metric} has a bucket below 0 s (le={raw!r})", accepted)
    return bound


MAX_COUNT = 2**50  # no server counts more of anything (tokens, blocks, drafts): a larger figure is not a server's


def whole_count(value: float, least: int = 0) -> bool:
    """A count a server can write: a whole number from `least` to MAX_COUNT (prometheus_client writes them as
    floats)."""
    return math.isfinite(value) and float(value).is_integer() and least <= value <= MAX_COUNT


def _label_count(key: str, raw: str, cast) -> int:
    """A count a server writes in cache_config_info's labels: a whole number from 1 to 2^50."""
    try:
        number = float(raw)
    except ValueError:
        raise SpecError("metrics", f"cache_config_info {key}={raw!r} is not a number", "whole numbers") from None
    if not whole_count(number, least=1):
        raise SpecError("metrics", f"cache_config_info {key}={raw!r} cannot come from a vLLM server",
                        "whole numbers from 1 to 2^50")
    return cast(number)


def _check_sample(metric: str, labels: dict, value: float) -> None:
    """A sample a vLLM server cannot have reported (negative, not finite, a usage above 100%) is bad input."""
    if not math.isfinite(value) or value < 0:  # a +Inf bucket's bound is infinite, never its count
        raise SpecError("metrics", f"{metric} = {value} cannot come from a vLLM server", "non-negative finite samples")
    if metric in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc") and value > 1.0001:
        raise SpecError("metrics", f"{metric} = {value} is above 1 (it is a fraction)", "a fraction in [0, 1]")


def _merged(histograms: dict[str, list[tuple[float, float]]], name: str) -> list[tuple[float, float]]:
    sums: dict[float, float] = {}
    for bound, count in histograms.get(name, []):
        sums[bound] = sums.get(bound, 0) + count
    return sorted(sums.items())


def _check_counts(out: LiveMetrics, histograms: dict[str, list[tuple[float, float]]]) -> None:
    """Counters one vLLM server keeps agree with each other: none negative, no more tokens accepted than drafted,
    no latency bucket below 0 s (a hand-made or mixed-up /metrics text is bad input, not figures to report)."""
    def bad(why: str) -> SpecError:
        return SpecError("metrics", f"{why}: not the counters of one vLLM server", "a vLLM server's /metrics text")

    for attribute in SUMMED.values():
        value = getattr(out, attribute)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise bad(f"{attribute} is {value}")
        # counters and gauges of requests and tokens count whole things (prometheus_client writes them as floats):
        # 5e-324 drafts had divided the drafted tokens into an infinite mean, 0.5 into a silently wrong one
        if value is not None and not whole_count(value):
            raise bad(f"{attribute} is {value:g}, not a whole count")
    if any(not whole_count(count) for count in out.accepted_per_position):
        raise bad("an accepted-token count per position that is not a whole count")
    if out.num_drafts and out.draft_tokens and out.accepted_per_position and \
            out.draft_tokens > out.num_drafts * len(out.accepted_per_position):
        # a draft proposes at most k tokens, one per position counter
        raise bad(f"{out.draft_tokens:g} tokens drafted in {out.num_drafts:g} drafts of at most "
                  f"{len(out.accepted_per_position)} positions")
    if out.accepted_tokens and (out.draft_tokens or 0) < out.accepted_tokens:
        raise bad(f"{out.accepted_tokens:g} tokens accepted of {out.draft_tokens or 0:g} drafted")
    if any(count < 0 or not math.isfinite(count) for count in out.accepted_per_position):
        raise bad("a negative accepted-token count per position")
    for name, buckets in histograms.items():
        if any(bound < 0 or count < 0 for bound, count in buckets):
            raise bad(f"{name} has a bucket below 0 s or a negative count")
        cumulative(_merged(histograms, name), name)


def cumulative(merged: list[tuple[float, float]], what: str) -> None:
    """A Prometheus histogram's buckets count every observation at or below their bound: their counts never fall as
    the bound grows (a hand-made or mixed-up text had been read into quantiles that no server's latencies give)."""
    for (_, before), (bound, count) in zip(merged, merged[1:]):
        if count < before:
            raise SpecError("metrics", f"{what}: the bucket le={bound:g} counts {count:g}, fewer than the {before:g} "
                            "below it", "cumulative histogram buckets, as a server writes them")


def _no_series_twice(families: list) -> None:
    """A series (name and labels) written twice cannot come from one server (the parser keeps both; summing or
    keeping the last would report a figure the server never had)."""
    twice = first_repeated((sample.name, tuple(sorted(sample.labels.items())))
                           for family in families for sample in family.samples)
    if twice is not None:
        name, labels = twice
        raise SpecError("metrics", f"{name}{dict(labels) or ''} appears twice",
                        "the /metrics text of one server, each series once")


def read_metrics(text: str) -> LiveMetrics:
    """Parse Prometheus text exposition from a vLLM server (prometheus_client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    out = LiveMetrics()
    seen = False
    histograms: dict[str, list[tuple[float, float]]] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as err:  # the parser raises ValueError/IndexError/... on truncated or malformed text
        raise SpecError("metrics", f"cannot parse the Prometheus text ({type(err).__name__}: {err})",
                        "the text of a vLLM server's /metrics endpoint") from None
    _no_series_twice(families)
    if any(family.name.startswith("sglang:") for family in families):
        from .sglang.readers import read_metrics as read_sglang  # noqa: PLC0415

        return read_sglang(families)
    per_position: dict[int, float] = {}
    for family in families:
        name = family.name
        if not name.startswith("vllm:"):
            continue
        seen = True
        for sample in family.samples:
            try:
                _read_sample(out, sample.name, sample.labels, sample.value, per_position, histograms)
            except SpecError:  # already one line naming its field (a SpecError is a ValueError: not wrapped again)
                raise
            except (ValueError, KeyError, TypeError, OverflowError) as err:  # a label a server never writes
                raise SpecError("metrics", f"sample {sample.name}{sample.labels or ''} cannot come from a vLLM server "
                                f"({type(err).__name__}: {err})", "the text of a vLLM server's /metrics") from None
    if not seen:
        raise SpecError("metrics", "no vllm: or sglang: metrics found (truncated, or not a vLLM or SGLang "
                        "server's /metrics)", "the text of a vLLM or SGLang server's /metrics endpoint")
    out.accepted_per_position = [per_position[i] for i in sorted(per_position)]
    _check_counts(out, histograms)
    ttft = _merged(histograms, "vllm:time_to_first_token_seconds")
    tpot = (_merged(histograms, "vllm:time_per_output_token_seconds")
            or _merged(histograms, "vllm:inter_token_latency_seconds"))
    out.ttft_s = {"p50": _quantile(ttft, 0.5), "p99": _quantile(ttft, 0.99)}
    out.tpot_s = {"p50": _quantile(tpot, 0.5), "p99": _quantile(tpot, 0.99)}
    return out
