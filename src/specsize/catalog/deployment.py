"""Deployment files (YAML) and flag overrides -> core Deployment + Workload.

A deployment is a flat mapping (keys as the CLI flags, with underscores) plus a `workload` mapping.
Every key is checked: an unknown one is an error naming the accepted keys, never silently ignored.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from ..core.errors import SpecError
from ..core.specs import (KV_CACHE_DTYPES, SPEC_METHODS, Deployment, EngineSettings, LengthDistribution,
                          SpeculativeConfig, Workload, canonical_dtype)
from .configs import as_eagle_head
from .files import read_text
from .gpus import load_gpu
from .models import load_model

TOP_KEYS = {
    "target", "draft", "method", "num_speculative_tokens", "draft_tp", "gpu", "gpus", "tp", "pp", "gpu_memory_gib",
    "engine", "engine_version", "device", "gpu_memory_utilization", "max_model_len", "max_num_seqs",
    "max_num_batched_tokens", "kv_cache_dtype", "quantization", "dtype", "enforce_eager", "block_size",
    "kv_cache_memory_bytes", "workload", "headroom", "name", "description", "shared_reserved_gib",
    "acceptance_rate", "mean_accepted_length", "measured_at_k", "acceptance_source", "security",
}
SECURITY_COMPONENTS = ("inference_endpoint", "metrics_endpoint", "dashboard")
SECURITY_AUTH = ("none", "api_key", "mtls", "oidc", "network_policy", "reverse_proxy", "not_exposed")
WORKLOAD_KEYS = {"prompt_tokens", "output_tokens", "concurrency", "burst_factor", "percentile", "samples_file"}


@dataclass(frozen=True)
class PlanInputs:
    deployment: Deployment
    workload: Workload
    engine: str
    engine_version: str | None
    headroom: float
    workload_defaulted: bool
    raw: dict  # the merged settings, echoed in the output
    acceptance_rate: float | None = None  # from the file; flags override
    mean_accepted_length: float | None = None
    measured_at_k: int | None = None
    acceptance_source: str | None = None
    security: dict | None = None  # component -> {"auth": ..., "note": ...}


def default_deployment() -> dict:
    """The embedded default: Llama-3.1-70B-Instruct with a Llama-3.2-1B draft on four H100s."""
    import yaml  # noqa: PLC0415 - only needed when a deployment is read

    text = (resources.files("specsize.catalog") / "data" / "default_deployment.yaml").read_text()
    return yaml.safe_load(text)


def read_deployment_file(path: str | Path) -> dict:
    import yaml  # noqa: PLC0415

    p = Path(path)
    text = read_text(p, "deployment", "a readable YAML file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "malformed YAML"
        raise SpecError("deployment", f"{p} is not valid YAML{where}: {problem}", "a YAML mapping") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError("deployment", f"{p} must hold a mapping of settings, got {type(data).__name__}",
                        "a YAML mapping such as 'target: meta-llama/Llama-3.1-8B-Instruct'")
    base = Path(p).parent
    workload = data.get("workload")
    if isinstance(workload, dict) and workload.get("samples_file"):
        workload["samples_file"] = str((base / workload["samples_file"]).resolve())
    return data


def merge(base: dict, overrides: dict) -> dict:
    """Flags over file: a None override keeps the file's value; workload keys merge one level down."""
    merged = dict(base)
    for key, value in overrides.items():
        if value is None:
            continue
        if key == "workload":
            inner = dict(merged.get("workload") or {})
            inner.update({k: v for k, v in value.items() if v is not None})
            merged["workload"] = inner
        else:
            merged[key] = value
    return merged


def _int(data: dict, key: str, default: Any = None, minimum: int = 1) -> Any:
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            value = int(value)
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise SpecError(key, f"must be an integer, got {value!r}", f"an integer >= {minimum}")
    if value < minimum:
        raise SpecError(key, f"must be >= {minimum}, got {value}", f"an integer >= {minimum}")
    return value


def _float(data: dict, key: str, default: Any = None) -> Any:
    value = data.get(key, default)
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SpecError(key, f"must be a number, got {value!r}", "a number") from None


def _bool(data: dict, key: str, default: bool = False) -> bool:
    value = data.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    raise SpecError(key, f"must be true or false, got {value!r}", "true, false")


def read_samples(path: str | Path, column: str | None = None) -> list[int]:
    """Token counts from a file: numbers (one per line or comma-separated), a JSON list, or a JSONL/CSV
    trace whose `column` field holds them."""
    p = Path(path)
    text = read_text(p, "samples_file", "a readable file")
    values: list[int] = []
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            values = [int(v) for v in json.loads(stripped)]
        elif stripped.startswith("{"):
            key = column or "prompt_tokens"
            values = [int(json.loads(line)[key]) for line in stripped.splitlines() if line.strip()]
        elif column and column in stripped.splitlines()[0]:
            values = [int(float(row[column])) for row in csv.DictReader(stripped.splitlines())]
        else:
            values = [int(v) for v in re.split(r"[\s,]+", stripped) if v]
    except (ValueError, KeyError, TypeError, json.JSONDecodeError) as err:
        raise SpecError("samples_file", f"{p}: cannot read token counts ({type(err).__name__}: {err})",
                        "integers one per line, a JSON list, or JSONL/CSV with prompt_tokens and output_tokens") from None
    if not values:
        raise SpecError("samples_file", f"{p} holds no token counts", "a non-empty list of integers")
    return values


def length_distribution(value: Any, field: str, samples_file: str | None = None) -> LengthDistribution:
    """p50/p95/p99/max from a mapping, a list of samples, "p50=1000,p99=4000", "1,2,3" or "@file"."""
    column = field
    if value is None and samples_file:
        return LengthDistribution.from_samples(read_samples(samples_file, column))
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("@"):
            return LengthDistribution.from_samples(read_samples(text[1:], column))
        if "=" in text:
            pairs = {}
            for part in text.split(","):
                if "=" not in part:
                    raise SpecError(field, f"cannot read {part!r} in {value!r}", "p50=N,p95=N,p99=N,max=N")
                key, _, number = part.partition("=")
                pairs[key.strip().lower()] = number.strip()
            value = pairs
        else:
            try:
                value = [int(v) for v in re.split(r"[\s,]+", text) if v]
            except ValueError:
                raise SpecError(field, f"cannot read {value!r}",
                                "p50=N,p95=N,p99=N,max=N; N,N,N (samples); @FILE") from None
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise SpecError(field, "samples must be integers", "a list of token counts")
        return LengthDistribution.from_samples(value)
    if isinstance(value, dict):
        unknown = set(value) - {"p50", "median", "p95", "p99", "max"}
        if unknown:
            raise SpecError(field, f"unknown key(s) {', '.join(sorted(unknown))}", "p50, p95, p99, max")
        pick = {k: _int(value, k, minimum=0) for k in value}
        p50 = pick.get("p50", pick.get("median"))
        if p50 is None or pick.get("p99") is None:
            raise SpecError(field, "needs at least p50 and p99", "p50, p95, p99, max")
        p99 = pick["p99"]
        # a missing p95 or max is taken at p99: the conservative reading of what was not said
        return LengthDistribution(p50=p50, p95=pick.get("p95") or p99, p99=p99, max=pick.get("max") or p99)
    raise SpecError(field, f"cannot read {value!r}", "a mapping p50/p95/p99/max, a list of samples, or @FILE")


def _workload(data: dict) -> Workload:
    unknown = set(data) - WORKLOAD_KEYS
    if unknown:
        raise SpecError("workload", f"unknown key(s) {', '.join(sorted(unknown))}", ", ".join(sorted(WORKLOAD_KEYS)))
    samples = data.get("samples_file")
    prompt = length_distribution(data.get("prompt_tokens"), "prompt_tokens", samples)
    output = length_distribution(data.get("output_tokens"), "output_tokens", samples)
    percentile = str(data.get("percentile", "p99"))
    if percentile not in LengthDistribution.PERCENTILES:
        raise SpecError("percentile", f"unknown percentile {percentile!r}", ", ".join(LengthDistribution.PERCENTILES))
    burst = _float(data, "burst_factor", 1.0)
    if not burst >= 1:
        raise SpecError("burst_factor", f"must be >= 1, got {burst}", "a number >= 1 (1 = no burst)")
    return Workload(prompt_tokens=prompt, output_tokens=output, concurrency=_int(data, "concurrency", 1),
                    burst_factor=burst, percentile=percentile)


def _choice(data: dict, key: str, accepted: tuple[str, ...], default: str) -> str:
    value = str(data.get(key) if data.get(key) is not None else default)
    if value not in accepted:
        raise SpecError(key, f"unknown value {value!r}", ", ".join(accepted))
    return value


def check_keys_and_load_target(data: dict, allowed: set[str], what: str):
    """Refuse unknown keys (naming the accepted ones) and load the target model a file names."""
    unknown = set(data) - allowed
    if unknown:
        raise SpecError(sorted(unknown)[0], f"unknown key in {what}", ", ".join(sorted(allowed)))
    if not data.get("target"):
        raise SpecError("target", "no target model given", "a catalog id (specsize models) or a config.json path")
    return load_model(str(data["target"]))


def build_inputs(data: dict) -> PlanInputs:
    """Validate the merged settings and load the models and GPU they name."""
    target = check_keys_and_load_target(data, TOP_KEYS, "a deployment")
    method = _choice(data, "method", SPEC_METHODS, "draft_model" if data.get("draft") else "none")
    draft = None
    if data.get("draft") and method not in ("none", "ngram", "mtp"):
        draft = load_model(str(data["draft"]))
        if method == "eagle":
            draft = as_eagle_head(draft)
    k = _int(data, "num_speculative_tokens", 0 if method == "none" else None, minimum=0)
    if method != "none" and (k is None or k < 1):
        raise SpecError("num_speculative_tokens", f"must be >= 1 with method {method}, got {k}", "an integer >= 1")
    tp = _int(data, "tp", 1)
    pp = _int(data, "pp", 1)
    gpus = _int(data, "gpus", None)
    utilization = _float(data, "gpu_memory_utilization", None)
    engine = _choice(data, "engine", ("vllm",), "vllm")
    version = data.get("engine_version")
    kv_dtype = _choice(data, "kv_cache_dtype", KV_CACHE_DTYPES, "auto")
    dtype = str(data.get("dtype") or "auto")
    if dtype != "auto":
        dtype = canonical_dtype(dtype)
    device = _choice(data, "device", ("cuda", "cpu"), "cuda")
    kv_mem = data.get("kv_cache_memory_bytes")
    settings = EngineSettings(
        gpu_memory_utilization=0.9 if utilization is None else utilization,
        max_model_len=_int(data, "max_model_len"), max_num_seqs=_int(data, "max_num_seqs"),
        max_num_batched_tokens=_int(data, "max_num_batched_tokens"), block_size=_int(data, "block_size"),
        kv_cache_dtype=kv_dtype, dtype=dtype, quantization=data.get("quantization"),
        enforce_eager=_bool(data, "enforce_eager"), device=device,
        kv_cache_memory_bytes=None if kv_mem is None else _int(data, "kv_cache_memory_bytes", minimum=0),
    )
    if not 0 < settings.gpu_memory_utilization <= 1:
        raise SpecError("gpu_memory_utilization", f"must be in (0, 1], got {settings.gpu_memory_utilization}",
                        "a fraction such as 0.9")
    if device == "cpu" and not data.get("gpu"):
        # vLLM's CPU backend: the pool comes from VLLM_CPU_KVCACHE_SPACE or --kv-cache-memory-bytes
        memory = _float(data, "gpu_memory_gib") or 64.0
        gpu = load_gpu(None, memory)
        gpu = replace(gpu, gpu_id="CPU", name=f"host CPU ({memory:g} GiB)", sources={"memory": "host memory (nominal)"})
    else:
        gpu = load_gpu(data.get("gpu") if data.get("gpu") or data.get("gpu_memory_gib") is None else data.get("gpu"),
                       _float(data, "gpu_memory_gib"))
    speculative = SpeculativeConfig(method=method, draft=draft, num_speculative_tokens=k or 0,
                                    draft_tp=_int(data, "draft_tp", 1))
    reserved = _float(data, "shared_reserved_gib", 0.0)
    if reserved < 0:
        raise SpecError("shared_reserved_gib", f"must not be negative, got {reserved}", "GiB >= 0")
    deployment = Deployment(target=target, gpu=gpu, speculative=speculative, tp=tp, pp=pp, num_gpus=gpus,
                            engine=settings, shared_reserved_bytes=int(reserved * 2**30))
    workload_data = data.get("workload")
    defaulted = not workload_data
    if defaulted:
        workload_data = default_deployment()["workload"]
    if not isinstance(workload_data, dict):
        raise SpecError("workload", "must be a mapping", ", ".join(sorted(WORKLOAD_KEYS)))
    headroom = _float(data, "headroom", 0.20)
    rate, mean = _float(data, "acceptance_rate"), _float(data, "mean_accepted_length")
    if rate is not None and mean is not None:
        raise SpecError("acceptance_rate", "give either acceptance_rate or mean_accepted_length, not both",
                        "one of the two")
    return PlanInputs(deployment=deployment, workload=_workload(workload_data), engine=engine,
                      engine_version=None if version is None else str(version), headroom=headroom,
                      workload_defaulted=defaulted, raw=data, acceptance_rate=rate, mean_accepted_length=mean,
                      measured_at_k=_int(data, "measured_at_k"),
                      acceptance_source=None if data.get("acceptance_source") is None else str(data["acceptance_source"]),
                      security=_security(data.get("security")))


def _security(value) -> dict | None:
    """How each serving component is protected: {component: {"auth": ..., "note": ...}}."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SpecError("security", "must be a mapping of components", ", ".join(SECURITY_COMPONENTS))
    out = {}
    for component, spec in value.items():
        if component not in SECURITY_COMPONENTS:
            raise SpecError("security", f"unknown component {component!r}", ", ".join(SECURITY_COMPONENTS))
        if isinstance(spec, str):
            spec = {"auth": spec}
        if not isinstance(spec, dict) or str(spec.get("auth")) not in SECURITY_AUTH:
            raise SpecError(f"security.{component}.auth", f"unknown value {spec!r}", ", ".join(SECURITY_AUTH))
        out[component] = {"auth": str(spec["auth"]), "note": str(spec.get("note") or "")}
    return out


CANDIDATE_KEYS = {"method", "draft", "acceptance", "acceptance_rate", "mean_accepted_length", "k", "draft_tp"}


def parse_candidate(text: str) -> dict:
    """`method=eagle3,draft=ID,acceptance=0.8,k=3` -> {"speculative": SpeculativeConfig, "rate", "mean", "k"}."""
    fields = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in CANDIDATE_KEYS:
            raise SpecError("candidate", f"cannot read {part.strip()!r} in {text!r}",
                            "method=M,draft=MODEL,acceptance=A or mean_accepted_length=T,k=K")
        fields[key] = value.strip()
    method = fields.get("method")
    if method not in SPEC_METHODS or method == "none":
        raise SpecError("candidate", f"method {method!r} in {text!r}", ", ".join(m for m in SPEC_METHODS if m != "none"))
    rate = fields.get("acceptance") or fields.get("acceptance_rate")
    mean = fields.get("mean_accepted_length")
    if (rate is None) == (mean is None):
        raise SpecError("candidate", f"{text!r} needs exactly one of acceptance=A or mean_accepted_length=T",
                        "acceptance=A or mean_accepted_length=T")
    draft = None
    if fields.get("draft"):
        draft = load_model(fields["draft"])
        if method == "eagle":
            draft = as_eagle_head(draft)
    elif method in ("draft_model", "eagle", "eagle3", "medusa"):
        raise SpecError("candidate", f"method {method} in {text!r} needs draft=MODEL", "draft=MODEL")
    try:
        k = int(fields["k"]) if "k" in fields else None
        rate_value = float(rate) if rate is not None else None
        mean_value = float(mean) if mean is not None else None
        draft_tp = int(fields.get("draft_tp", 1))
    except ValueError as err:
        raise SpecError("candidate", f"{text!r}: {err}", "numbers for acceptance, mean_accepted_length, k") from None
    spec = SpeculativeConfig(method=method, draft=draft, num_speculative_tokens=k or 1, draft_tp=draft_tp)
    return {"label": text, "speculative": spec, "rate": rate_value, "mean": mean_value, "k": k}
