"""JSON as the contract promises it: valid JSON only. A non-finite number (an infinite headroom, a NaN from a
degenerate input) is written as null; `json.dumps` would print `Infinity`/`NaN`, which no JSON parser accepts."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every non-finite float replaced by None, recursively (dicts, lists, tuples)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """The document on one JSON value, indented, ending in a newline; never Infinity or NaN."""
    return json.dumps(finite(value), indent=2, allow_nan=False, **kwargs) + "\n"
