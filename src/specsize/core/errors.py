"""The one error type the library raises for bad input: it names the field and what is accepted."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

MAX_PROBLEM = 600  # characters: an error that echoes a 100 KB input stays one readable line
MAX_ACCEPTED = 2_000  # the longest accepted list (catalog ids) is well under this


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class SpecError(ValueError):
    """Bad input. `str(err)` is a single line a user can act on."""

    def __init__(self, field: str, problem: str, accepted: str | None = None):
        self.field = _clip(field, 200)
        self.problem = _clip(problem, MAX_PROBLEM)
        self.accepted = _clip(accepted, MAX_ACCEPTED) if accepted else accepted
        field, problem, accepted = self.field, self.problem, self.accepted
        text = f"{field}: {problem}"
        if accepted:
            text += f" (accepted: {accepted})"
        super().__init__(text)


def control_character(text: str) -> str | None:
    """The first character of `text` that breaks or hides a line where it is echoed or stored (C0 and C1 controls,
    DEL, the line and paragraph separators U+2028 / U+2029 that str.splitlines breaks at), None when there is none:
    the one rule for file names, passwords and tags."""
    return next((c for c in text if ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029"), None)


def require_positive_int(field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(field, f"must be a positive integer, got {value!r}", "an integer >= 1")
    return value


def require_positive_float(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise SpecError(field, f"must be a positive number, got {value!r}", "a number > 0")
    return float(value)


def first_repeated(items: Iterable[T]) -> T | None:
    """The first item seen a second time, None if none: a key written twice (a JSON object, a CSV header, a metrics
    series) that a parser would otherwise resolve by keeping one copy silently. Linear in the items."""
    seen: set[T] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


class KeyedObject(dict):
    """A JSON object as unique_keys' hook reads it: `repeated`, the first of the watched keys it names twice."""

    repeated: str | None = None


def unique_keys(keys: Collection[str]) -> Callable[[list], dict]:
    """A json.loads object_pairs_hook noting, on each object (KeyedObject.repeated), the first of `keys` it names
    twice: json.loads keeps the last of two same-named keys without a word. The reader refuses a request whose own
    object repeats one; a nested object (a request's metadata) may repeat what it likes. The readers of requests in
    files take it: samples (inputs.load) and traces (catalog.traces)."""
    def hook(pairs: list) -> dict:
        obj = KeyedObject(pairs)
        obj.repeated = first_repeated(name for name, _ in pairs if name in keys)
        return obj
    return hook
