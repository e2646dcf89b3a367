"""Reading a user's file: one place that turns an OS error into a one-line error naming the field."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import SpecError


def read_text(path: str | Path, field: str, accepted: str) -> str:
    p = Path(path)
    try:
        return p.read_text(errors="replace")
    except OSError as err:
        raise SpecError(field, f"cannot read {p}: {err.strerror}", accepted) from None


def read_lines(path: str | Path, field: str) -> list[str]:
    """The non-empty lines of a CSV or JSONL file of requests."""
    lines = [line for line in read_text(path, field, "a readable CSV or JSONL file").splitlines() if line.strip()]
    if not lines:
        raise SpecError(field, f"{path} is empty", "a CSV or JSONL file with one request per line")
    return lines
