"""Which engine releases can load which architecture: the first vLLM / SGLang release whose model registry names
each model_type's class (data/model_support.json, read in each release's PyPI package, with its source). A plan for
a release that cannot load the model would size a server that never starts."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from ..core.errors import SpecError
from ..core.specs import ModelSpec
from .registry import release, release_key


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
    first = entry.get("first")
    if first is None:
        if entry.get("at_or_before") or entry.get("class") not in (None, ""):
            return None  # in every release specsize covers, or not pinned: nothing proven to refuse
        return f"no {name} release loads {model_type} ({entry.get('bound') or 'no model class for it'})"
    wanted, since = release_key(version), release_key(first)
    if wanted is None or since is None or wanted >= since:
        return None
    if release(version) == release(first) and not re.fullmatch(r"v?\d+\.\d+\.\d+\S*", str(version).strip()):
        return None  # a series written X.Y holds the release that came within it (gpt-oss with vLLM "0.10": 0.10.1)
    return (f"{name} {version} cannot load a {model_type} model ({entry.get('class')}): its model registry names the "
            f"class from {first} on")


def check_model_support(engine: str, version: str | None, model: ModelSpec, field: str = "engine_version") -> None:
    """Refuse a plan for a release that cannot load `model` (its checkpoint's own model_type, and the language model's
    where a multimodal checkpoint wraps one), naming the first release that can."""
    for model_type in dict.fromkeys((model.checkpoint_type or model.model_type, model.model_type)):
        problem = support_problem(engine, version, model_type)
        if problem is not None:
            first = model_support()[engine][model_type].get("first")
            raise SpecError(field, problem, f"engine_version {first} or later" if first else
                            "another engine for this model")
