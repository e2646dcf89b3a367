"""Which accounting profile an engine name and version select."""

from __future__ import annotations

import re
from dataclasses import replace

from ..core.errors import SpecError
from ..core.memory import AccountingProfile
from . import sglang, vllm

# engine name -> ((first release covered, profile), ...), oldest first; a release is (major, minor[, patch])
ENGINES = {"vllm": vllm.PROFILES, "sglang": sglang.PROFILES}
DEFAULT_ENGINE = "vllm"
# engine name -> the series (major, minor) whose X.Y.0 was never released (SGLang 0.5: sglang.UNRELEASED_FIRST)
UNRELEASED_FIRST = {"sglang": sglang.UNRELEASED_FIRST}


def release(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a release written X.Y, X.Y.Z or vX.Y... (V as a git tag may be written too); None when it
    cannot be read."""
    match = re.fullmatch(r"[vV]?(\d+)\.(\d+)(?:\.\d+)?(?:\S*)", str(version).strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang"}  # the engines as their projects write them


def engine_label(engine: str) -> str:
    """How an engine is written in a message: vLLM, SGLang."""
    return ENGINE_LABELS.get(engine, engine)


def is_series(version: str) -> bool:
    """A version written X.Y stands for its whole series (X.Y.0 up to X.Y+1), X.Y.Z for that release."""
    return str(version).strip().lstrip("vV").count(".") < 2


def release_with_patch(version: str | None) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a release (patch 0 when not written): SGLang's accounting changes within 0.5."""
    key = release_key(version)
    return (key[0], key[1], key[2]) if key else None


def release_key(version: str | None) -> tuple[int, int, int, int] | None:
    """(major, minor, patch, post) of a release, post the N of a `.postN` suffix (0 without one): SGLang changed its
    defaults between 0.4.5.post2 and 0.4.5.post3, so a profile may start at a post release."""
    # ASCII digits; after X.Y[.Z] only what releases carry: more numbers (0.10.1.1), .postN, dev/rc/a/b builds
    # and a +local tag (0.6.3.dev116+g151ef4ef); "0.6.-1" or "0.6.0.post" are not releases
    match = re.fullmatch(r"[vV]?(\d+)\.(\d+)(?:\.(\d+))?(?:\.\d+)*(?:\.?post(\d+))?(?:\.?(?:dev|rc|a|b)\d*)*"
                         r"(?:\+[0-9A-Za-z._-]+)?", str(version).strip(), re.ASCII)
    if not match:
        return None
    return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0), int(match.group(4) or 0))


def released_by(version: str | None, first: str) -> bool:
    """Whether the release `version` (None or "latest": the newest) is `first` or later; an unreadable version is
    resolve_profile's to refuse."""
    if version in (None, "", "latest"):
        return True
    wanted, start = release_key(version), release_key(first)
    return wanted is None or start is None or wanted >= start


def predates(version: str | None, first: str) -> bool:
    """Whether the release `version` comes before `first`, the release that first has something: the newest (None,
    "latest") and an unreadable version never do, and a series written X.Y holds the release that came within it
    (gpt-oss with vLLM "0.10": 0.10.1). The one rule the engines' support checks refuse by."""
    if version in (None, "", "latest"):
        return False
    wanted, since = release_key(version), release_key(first)
    if wanted is None or since is None or wanted >= since:
        return False
    return not (release(version) == release(first) and is_series(str(version)))


def _label(start: tuple[int, ...]) -> str:
    head = ".".join(map(str, start[:3]))
    return head + (f".post{start[3]}" if len(start) > 3 and start[3] else "")


def newest_release(engine: str) -> str:
    """The newest release an accounting profile follows ("0.33"): the one a plan without --engine-version takes."""
    return _label(ENGINES[engine][-1][0])


def resolve_profile(engine: str = "vllm", version: str | None = None, method: str | None = None) -> AccountingProfile:
    """The profile of the newest range that starts at or before `version` (default: the newest); with the speculative
    `method` (a SpecMethod value), the V0 engine's where vLLM 0.8 / 0.9 fall back to it for that method
    (vllm.V1_FALLBACK_METHODS): a draft model on 0.9 had been planned with V1's accounting and defaults (1,024
    sequences and 8,192 batched tokens on an H100, where V0 runs 256 and 2,048)."""
    chosen = _resolve(engine, version)
    if engine == "vllm" and method is not None and version not in (None, "", "latest"):
        wanted = release(version)
        for (first, after), methods in vllm.V1_FALLBACK_METHODS:
            if wanted is not None and first <= wanted < after and str(method) in methods:
                # the distributed layer (its custom all-reduce on ROCm from 0.8.3) is the release's, whichever engine
                return replace(vllm.V0_FALLBACK, custom_allreduce=chosen.custom_allreduce)
    return chosen


def _resolve(engine: str, version: str | None) -> AccountingProfile:
    """The profile of the newest range that starts at or before `version`, whatever the method."""
    if engine not in ENGINES:
        raise SpecError("engine", f"unknown engine {engine!r}", ", ".join(sorted(ENGINES)))
    table = ENGINES[engine]
    if version in (None, "", "latest"):
        return table[-1][1]
    wanted = release_key(version)
    covered = f"{_label(table[0][0])} or later, as X.Y, X.Y.Z or X.Y.Z.postN"
    if wanted is None:
        raise SpecError("engine_version", f"cannot read version {version!r}", covered)
    _refuse_unreleased_first(engine, str(version), wanted)
    chosen = None
    for start, profile in table:
        if wanted >= start:
            chosen = profile
    if chosen is None:
        raise SpecError("engine_version", f"{engine} {version} is older than any accounting profile", covered)
    return chosen


def _refuse_unreleased_first(engine: str, version: str, wanted: tuple[int, int, int, int]) -> None:
    """A series written X.Y (or X.Y.0) whose X.Y.0 was never released stands for no one release: X.Y.0 would fall in the
    last profile of the series before (SGLang "0.5" had been planned as 0.4.7.post1 - 0.4.10), and the series' own
    releases are accounted differently from one another. Refused, naming them; a pre-release (0.5.0rc2) is taken as
    written."""
    if (wanted[0], wanted[1]) not in UNRELEASED_FIRST.get(engine, ()) or \
            not re.fullmatch(r"[vV]?\d+\.\d+(?:\.0)?", version.strip()):
        return
    ranges = [profile.label.split(" (")[0].removeprefix("SGLang ").removeprefix("vLLM ")
              for start, profile in ENGINES[engine] if tuple(start[:2]) == wanted[:2]]
    series = f"{wanted[0]}.{wanted[1]}"
    raise SpecError("engine_version", f"{engine} {version}: no {series}.0 was released, and the {series} series' "
                    f"releases are accounted differently ({', '.join(ranges)})",
                    f"a release of the {series} series written X.Y.Z ({ranges[0].split('-')[0]} or later)")


# What the releases after the newest profile are known to change (read in their PyPI sdists, not yet modelled), said
# with the note of a plan for one of them
BEYOND_NEWEST = {"vllm": (
    ((0, 34), "0.34 sizes the KV cache after warm-up by default (the extensible KV cache, config/cache.py: utilization "
              "1.0 less the measured non-KV memory and a margin of max(1 GiB, 0.75 x the activation peak), CUDA graphs "
              "measured, no refusal above free memory; v1/worker/extensible_kv_cache.py) and uses blocks of 64 tokens "
              "(CacheConfig.DEFAULT_BLOCK_SIZE): its pool can differ from this plan by several GiB (about +6 GiB for "
              "Llama-3.1-8B on an H100 at its defaults); the emitted command pins --gpu-memory-utilization and "
              "--block-size, which 0.34 honours"),
)}


def beyond_known(engine: str, version: str | None) -> str | None:
    """A note when `version` is newer than the newest release an accounting profile was checked against, with what
    the releases after it up to `version` are known to change (BEYOND_NEWEST)."""
    if version in (None, "", "latest"):
        return None
    wanted, newest = release_with_patch(version), ENGINES[engine][-1][0]
    if wanted is not None and wanted[:len(newest)] > newest:
        known = [what for start, what in BEYOND_NEWEST.get(engine, ()) if wanted[:len(start)] >= start]
        return (f"{engine} {version} is newer than the newest release whose accounting specsize follows "
                f"({_label(newest)}): planned with that release's accounting"
                + (f"; known since: {'; '.join(known)}" if known else ""))
    return None
