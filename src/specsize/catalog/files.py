"""Reading a user's file: one place that turns an OS error into a one-line error naming the field.

Also the packaged catalogs' reader and row checks (see the end of this file)."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from ..core.errors import SpecError


MiB = 1 << 20
# The largest file each kind of input may be: reading stops one byte past it (a /dev/zero or a mistaken
# multi-gigabyte path ends in a one-line error, not in the kernel's OOM killer). Documented in docs/cli.md.
LIMITS = {"deployment": 1 * MiB, "search": 1 * MiB, "plan": 16 * MiB, "metrics": 16 * MiB, "log": 64 * MiB,
          "config": 16 * MiB, "prompts": 64 * MiB, "samples_file": 256 * MiB, "trace": 256 * MiB,
          "lengths_file": 256 * MiB}
DEFAULT_LIMIT = 64 * MiB


# The files read_text has read in this process, by field, where a command keeps count (cli.main starts one; the
# service and library callers keep none): a command's output never replaces a file it read (cli.output.check_target)
READ: dict[Path, str] | None = None


def size_limit(field: str) -> int:
    return LIMITS.get(field, DEFAULT_LIMIT)


def decode_text(data: bytes, where: str, field: str, accepted: str, limit: int) -> str:
    """Bytes read with a limit of `limit` (one more byte read means the source was larger) -> text."""
    if len(data) > limit:
        raise SpecError(field, f"{where} is larger than {limit // MiB} MiB", f"{accepted} of at most {limit // MiB} MiB")
    if b"\x00" in data:
        raise SpecError(field, f"{where} is not a text file", accepted)
    return data.decode("utf-8-sig", errors="replace")  # -sig: a byte-order mark (Excel's CSV) is dropped


def read_text(path: str | Path, field: str, accepted: str, limit: int | None = None) -> str:
    """A user's text file, at most `limit` bytes (default: the field's, see LIMITS)."""
    p = Path(path)
    limit = size_limit(field) if limit is None else limit
    try:
        if stat.S_ISFIFO(p.stat().st_mode):
            data = _read_pipe(p, limit + 1)
        else:
            with p.open("rb") as handle:
                data = handle.read(limit + 1)
    except OSError as err:
        raise SpecError(field, f"cannot read {p}: {err.strerror or type(err).__name__}", accepted) from None
    remember_read(p, field, named=False)
    return decode_text(data, str(p), field, accepted, limit)


def remember_read(path: str | Path, field: str, named: bool = True) -> None:
    """Count `path` among the files read (READ), where they are counted; `named`: under `field` even if read before
    under another (the command's own name for it: deployment_file, not deployment); a model folder: its config.json
    too."""
    if READ is None:
        return
    try:
        resolved = Path(path).expanduser().resolve()
        for one in (resolved, resolved / "config.json") if resolved.is_dir() else (resolved,):
            if named:
                READ[one] = field
            else:
                READ.setdefault(one, field)
    except (OSError, RuntimeError):  # a name no file can have: nothing to protect
        pass


def _read_pipe(p: Path, size: int) -> bytes:
    """A named pipe (or /dev/stdin, <(...) from a shell) read without waiting for a writer to open it: opened
    non-blocking, then read blocking; with no writer at all it reads as empty (a one-line error), not a hang."""
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        os.set_blocking(fd, True)
        return handle.read(size)


def read_lines(path: str | Path, field: str, max_requests: int | None = None) -> tuple[list[str], list[int]]:
    """The non-empty lines of a CSV or JSONL file of requests, and each one's number in the file (1-based, blank lines
    counted: what an editor shows). With `max_requests`, a file with more non-empty lines than a header and that many
    requests is refused before its lines are split: a 250 MiB trace (44 million rows) had built every row first and
    ended in a MemoryError."""
    text = read_text(path, field, "a readable CSV or JSONL file")
    if max_requests is not None:
        _check_lines(text, path, field, max_requests)
    lines, numbers = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            lines.append(line)
            numbers.append(number)
    if not lines:
        raise SpecError(field, f"{path} is empty", "a CSV or JSONL file with one request per line")
    return lines, numbers


_CONTENT = re.compile(r"\S[^\r\n]*")  # from a line's first visible character to its end: one per non-empty line


def _check_lines(text: str, path: str | Path, field: str, max_requests: int) -> None:
    """Refuses a text of more than max_requests + 1 non-empty lines (a CSV header and `max_requests` requests),
    counting no further than one past that."""
    most = max_requests + 1
    if (text.count("\n") or text.count("\r")) + 1 <= most:  # line breaks bound the lines: nothing to count
        return
    for count, _ in enumerate(_CONTENT.finditer(text), 1):
        if count > most:
            raise too_many_requests(path, field, max_requests)


def too_many_requests(path: str | Path, field: str, max_requests: int) -> SpecError:
    """The one refusal of a file of more requests than are read (read_lines, and catalog.traces once parsed)."""
    return SpecError(field, f"{path} holds more than {max_requests:,} requests; at most {max_requests:,} are read",
                     f"a file of at most {max_requests:,} requests, one per line: split it, or sample its requests")


def csv_names(line: str) -> list[str]:
    """A CSV header's column names as a CSV reader reads them: quotes removed ("prompt_tokens", as pandas' QUOTE_ALL and
    spreadsheets write it), spaces around each name dropped ("prompt_tokens, output_tokens"); [] for a line no CSV
    reader reads. The one reader of the header of a user's CSV file: traces, lengths files (catalog.traces) and
    samples (inputs.load)."""
    try:
        return [name.strip() for name in next(csv.reader([line], skipinitialspace=True))]
    except (csv.Error, StopIteration):
        return []


def check_row_width(row: dict, names: list[str], where: str, field: str) -> None:
    """A CSV row of a user's file holds no more values than its header names columns: csv.DictReader files the extra
    ones under None and reads the rest by position, so "1,500,200" under "prompt_tokens,output_tokens" (a spreadsheet's
    thousands separator) had been read as a prompt of 1 token and 500 of output, the 200 dropped without a word. The one
    check of traces, lengths files (catalog.traces) and samples (inputs.load)."""
    extra = row.get(None)  # type: ignore[call-overload]
    if extra and any(str(value).strip() for value in extra):  # empty trailing cells ("0,100,10,") shift nothing
        raise SpecError(field, f"{where}: {len(names) + len(extra)} values under a header of {len(names)} columns "
                        f"({', '.join(names)})", "one value per column, numbers without thousands separators (1500, "
                        "not 1,500); a value holding a comma in double quotes")


# --- The packaged catalogs (src/specsize/catalog/data): files beside this module, in a checkout as in an installed
# wheel (pip unpacks it; importlib.resources would find the same folder and costs `specsize plan` about 30 ms of
# imports), and checked row by row, so that a bad row is one line naming the file and the row instead of a KeyError
# or TypeError in every command that lists the catalog.

DATA_DIR = Path(__file__).resolve().parent / "data"

CATALOG_FIELD = "catalog"


def packaged_json(name: str) -> Any:
    """A JSON file under specsize/catalog/data (`name` relative to it, e.g. "gpus.json" or "models/x.json")."""
    try:
        text = DATA_DIR.joinpath(*name.split("/")).read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(CATALOG_FIELD, f"cannot read the packaged {name}: {err.strerror or err}",
                        "an installed specsize with its data files (reinstall it)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecError(CATALOG_FIELD, f"{name} is not valid JSON ({err.msg} at line {err.lineno})",
                        "a JSON file") from None


def row_label(row: object, index: int | None = None, key: str = "id") -> str:
    """How an error names a row: its id when it has a usable one, else its position (1-based) in the file."""
    if isinstance(row, dict) and isinstance(row.get(key), str) and row[key].strip():
        return f"row {row[key]!r}"
    return f"row #{index + 1}" if index is not None else "row (no id)"


def catalog_error(file: str, row: str | None, problem: str, accepted: str) -> SpecError:
    """SpecError("catalog", "<file> <row>: <problem>", accepted): one line naming the file and the row."""
    where = f"{file} {row}" if row else file
    return SpecError(CATALOG_FIELD, f"{where}: {problem}", accepted)


class RowCheck:
    """Checks of the fields of one catalog row; every failure names the file, the row and the key."""

    def __init__(self, file: str, row: str, data: object, prefix: str = ""):
        self.file, self.row, self.prefix = file, row, prefix
        if not isinstance(data, dict):
            raise catalog_error(file, row, f"{prefix.rstrip('.') or 'the row'} must be a JSON object, "
                                f"got {_kind(data)}", "a JSON object of named fields")
        self.data: dict = data

    def fail(self, key: str, problem: str, accepted: str) -> SpecError:
        return catalog_error(self.file, self.row, f"{self.prefix}{key} {problem}", accepted)

    def _get(self, key: str, required: bool) -> tuple[bool, Any]:
        if key not in self.data:
            if required:
                raise catalog_error(self.file, self.row, f"missing required key {self.prefix}{key!r}",
                                    f"a row with {self.prefix}{key}")
            return False, None
        return True, self.data[key]

    def text(self, key: str, *, required: bool = True, nullable: bool = False) -> str | None:
        present, value = self._get(key, required)
        if not present or (value is None and nullable):
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"must be a non-empty string, got {value!r}", "a non-empty string")
        return value

    def number(self, key: str, *, required: bool = True, nullable: bool = False, integer: bool = False,
               minimum: float = 0.0, inclusive: bool = False, maximum: float | None = None) -> float | None:
        """A finite number (an int when `integer`) > minimum (>= with `inclusive`) and <= maximum."""
        present, value = self._get(key, required)
        if not present or (value is None and nullable):
            return None
        kind = "integer" if integer else "number"
        if minimum == 0 and not inclusive and maximum is None:
            wanted = f"a positive {kind}" if integer else "a positive finite number"
        else:
            wanted = f"a finite {kind} {'>=' if inclusive else '>'} {minimum:g}"
            wanted += f" and <= {maximum:g}" if maximum is not None else ""
        accepted = wanted + (" or null" if nullable else "")
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type:
            raise self.fail(key, f"must be {wanted}, got {_kind(value)} {value!r}", accepted)
        in_range = math.isfinite(value) and (value >= minimum if inclusive else value > minimum) \
            and (maximum is None or value <= maximum)
        if not in_range:
            raise self.fail(key, f"must be {wanted}, got {value!r}", accepted)
        return value

    def mapping(self, key: str, *, required: bool = True, nullable: bool = False) -> dict | None:
        present, value = self._get(key, required)
        if not present or (value is None and nullable):
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a JSON object, got {_kind(value)}", "a JSON object")
        return value

    def only(self, allowed: set[str] | frozenset[str]) -> None:
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            raise catalog_error(self.file, self.row, f"unknown key {self.prefix}{unknown[0]!r}",
                                ", ".join(sorted(allowed)))


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)
