"""Which engine releases can load which architecture: the first vLLM / SGLang release whose model registry names
each model_type's class (data/model_support.json, read in each release's PyPI package, with its source). A plan for
a release that cannot load the model would size a server that never starts."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..core.errors import SpecError
from ..core.specs import ModelSpec
from .registry import is_series, release, release_key


@lru_cache(maxsize=1)
def model_support() -> dict:
    return json.loads((Path(__file__).resolve().parent / "data" / "model_support.json").read_text(encoding="utf-8"))


def support_problem(engine: str, version: str | None, model_type: str) -> str | None:
    """Why release `version` of `engine` cannot load an architecture of `model_type` (None: it can, the newest
    release always can, or the data does not say)."""
    entry = model_support().get(engine, {}).get(model_type)
    if entry is None or version in (None, "", "latest"):
        return None
    name = "vLLM" if engine == "vllm" else "SGLang"
    # the earliest release proven to load it in any format: a pre-release carrying the class, or another checkpoint
    # format the publisher serves it in (Mistral-Small-3.1 through Pixtral from 0.8.1); only what none loads is refused
    first = first_release(engine, model_type)
    if first is None:
        if entry.get("at_or_before") or entry.get("class") not in (None, ""):
            return None  # in every release specsize covers, or not pinned: nothing proven to refuse
        return f"no {name} release loads {model_type} ({entry.get('bound') or 'no model class for it'})"
    wanted, since = release_key(version), release_key(first)
    if wanted is None or since is None or wanted >= since:
        return None
    if release(version) == release(first) and is_series(str(version)):
        return None  # a series written X.Y holds the release that came within it (gpt-oss with vLLM "0.10": 0.10.1)
    return (f"{name} {version} cannot load a {model_type} model ({entry.get('class')}): the first release that does is "
            f"{first}")


def first_release(engine: str, model_type: str) -> str | None:
    """The earliest release proven to load `model_type` (support_problem's reading), None where none is pinned."""
    entry = model_support().get(engine, {}).get(model_type) or {}
    return min((f for f in (entry.get("first"), entry.get("first_prerelease"), entry.get("first_any_format")) if f),
               key=lambda f: release_key(f) or (0,), default=None)


def check_model_support(engine: str, version: str | None, model: ModelSpec, field: str = "engine_version") -> None:
    """Refuse a plan for a release that cannot load `model`, naming the first release that can. The engine loads the
    checkpoint's own architecture: a multimodal checkpoint's wrapper (ModelSpec.checkpoint_type), not the language
    model inside it, whose own entry holds for a top-level text-only checkpoint (qwen3_5_text from vLLM 0.27, while a
    qwen3_5 checkpoint wrapping it loads from 0.17)."""
    model_type = model.checkpoint_type or model.model_type
    problem = support_problem(engine, version, model_type)
    if problem is not None:
        first = first_release(engine, model_type)
        raise SpecError(field, problem, f"engine_version {first} or later" if first else "another engine for this model")
