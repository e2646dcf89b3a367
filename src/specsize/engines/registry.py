"""Which accounting profile an engine name and version select."""

from __future__ import annotations

import re

from ..core.errors import SpecError
from ..core.memory import AccountingProfile
from . import vllm

ENGINES = {"vllm": vllm.PROFILES}  # engine name -> ((first release covered, profile), ...), oldest first
DEFAULT_ENGINE = "vllm"


def release(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a release written X.Y, X.Y.Z or vX.Y...; None when it cannot be read."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:\S*)", str(version).strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def resolve_profile(engine: str = "vllm", version: str | None = None) -> AccountingProfile:
    """The profile of the newest range that starts at or before `version` (default: the newest)."""
    if engine not in ENGINES:
        raise SpecError("engine", f"unknown engine {engine!r}", ", ".join(sorted(ENGINES)))
    table = ENGINES[engine]
    if version in (None, "", "latest"):
        return table[-1][1]
    wanted = release(version)
    covered = f"{table[0][0][0]}.{table[0][0][1]} or later, as X.Y"
    if wanted is None:
        raise SpecError("engine_version", f"cannot read version {version!r}", covered)
    chosen = None
    for start, profile in table:
        if wanted >= start:
            chosen = profile
    if chosen is None:
        raise SpecError("engine_version", f"{engine} {version} is older than any accounting profile", covered)
    return chosen


def beyond_known(engine: str, version: str | None) -> str | None:
    """A note when `version` is newer than the newest release an accounting profile was checked against."""
    if version in (None, "", "latest"):
        return None
    wanted, newest = release(version), ENGINES[engine][-1][0]
    if wanted is not None and wanted > newest:
        return (f"{engine} {version} is newer than the newest release whose accounting specsize follows "
                f"({newest[0]}.{newest[1]}): planned with that release's accounting")
    return None
