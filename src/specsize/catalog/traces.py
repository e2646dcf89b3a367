"""Request traces for the simulator: CSV or JSONL with an arrival time, prompt tokens and output tokens.

Accepted columns (first match wins):
- arrival: `arrival_time` / `arrival_s` / `timestamp` (seconds, or an ISO date-time: one form per file, UTC
  where it names no zone) / `TIMESTAMP` (Azure)
- prompt:  `prompt_tokens` / `input_tokens` / `ContextTokens` (Azure)
- output:  `output_tokens` / `generated_tokens` / `GeneratedTokens` (Azure)
- optional per-request acceptance: `acceptance_rate`

Arrival times are shifted so that the first request arrives at 0 s. The public Azure LLM inference traces
(AzureLLMInferenceTrace_code.csv / _conv.csv: TIMESTAMP, ContextTokens, GeneratedTokens) load as they are.
"""

from __future__ import annotations

import csv
import math
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.errors import SpecError, first_repeated, unique_keys
from ..core.specs import RequestTrace
from .files import check_row_width, csv_names, read_lines, too_many_requests

ARRIVAL = ("arrival_time", "arrival_s", "timestamp", "TIMESTAMP", "arrival")
PROMPT = ("prompt_tokens", "input_tokens", "ContextTokens", "prompt_len")
OUTPUT = ("output_tokens", "generated_tokens", "GeneratedTokens", "output_len")


def _pick(row: dict, names: tuple[str, ...], what: str, path: Path, line: int, field: str = "trace"):
    given = [name for name in names if name in row and row[name] not in (None, "")]
    if len({str(row[name]) for name in given}) > 1:  # two names of one column that disagree: neither is read
        raise SpecError(field, f"{path} line {line}: {' and '.join(given)} give two {what}",
                        f"one of {' / '.join(names)}")
    if given:
        return row[given[0]]
    present = any(name in row for name in names)  # a column the line leaves empty, or a CSV line short of cells
    raise SpecError(field, f"{path} line {line}: no {what}{' (an empty cell)' if present else ' column'}",
                    " / ".join(names))


def _plain(value: Any, what: str, accepted: str, field: str, p: Path, line: int) -> None:
    """Refuse what float() and datetime.fromisoformat would read as another number without a word: a JSON true or
    false (1.0, 0.0), non-ASCII digits ("١٠" is 10.0) and digits grouped by underscores ("1_0" is 10.0); the token
    counts refuse them alike (whole_count)."""
    if isinstance(value, bool):
        raise SpecError(field, f"{p} line {line}: {what} is {str(value).lower()}", accepted)
    if isinstance(value, str) and (not value.isascii() or "_" in value):
        raise SpecError(field, f"{p} line {line}: {what} {value!r:.40} holds non-ASCII digits or '_'", accepted)


def _seconds(value) -> tuple[float, bool]:
    """(seconds, whether the value is an ISO date-time). An ISO time without a zone is read as UTC: a trace's
    arrivals never move with the reader's time zone or its daylight-saving changes."""
    try:
        return float(value), False
    except (TypeError, ValueError):
        text = str(value).strip().replace("Z", "+00:00")
        if "." in text:  # Azure writes 7 fractional digits; datetime takes 6
            head, _, tail = text.partition(".")
            digits = "".join(ch for ch in tail if ch.isdigit())
            rest = tail[len(digits):]
            text = f"{head}.{digits[:6]}{rest}"
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp(), True


def read_trace(path: str | Path, max_requests: int | None = None) -> RequestTrace:
    """The requests of a trace file; with `max_requests`, a file of more is refused before its rows are built."""
    lines, numbers = read_lines(path, "trace", max_requests)
    return _parse(lines, numbers, Path(path), max_requests=max_requests)


MAX_TOKENS = 1 << 30  # per request; far beyond any context window, low enough that nothing overflows
# The fewest tokens of a request's prompt, and of its output: a request for no output cannot be served. vLLM's OpenAI
# server refuses it (vllm/sampling_params.py, SamplingParams._verify_args: "max_tokens must be at least 1", a 400), and
# `vllm bench serve` sends each request's output length as its max_tokens (vllm/benchmarks/lib/endpoint_request_func.py,
# async_request_openai_completions). The one rule of every request length read: traces, lengths files, samples files,
# lists and @FILEs of lengths, and a deployment file's or a flag's percentiles (inputs.load); a samples file's output
# of 0 had been read (and simulated as 1 token) where a trace's was refused.
FEWEST_TOKENS = 1
TOKEN_RANGE = f"from {FEWEST_TOKENS} to {MAX_TOKENS:,}"
NO_OUTPUT = "a request for no output tokens cannot be served: vLLM refuses max_tokens below 1"


def servable(number: int) -> bool:
    """Whether a request's prompt or output may be `number` tokens long (FEWEST_TOKENS to MAX_TOKENS)."""
    return FEWEST_TOKENS <= number <= MAX_TOKENS


def whole_count(value: Any, text: bool = False) -> int:
    """A token count as a file holds it: a whole number (100 or 100.0; with `text`, also "100", "1e3"); never a
    fraction, a JSON true, a JSON string (without `text`), non-ASCII digits or "1_000", which int() and float() would
    read as another number without a word. ValueError or TypeError otherwise. The one reader of counts in files:
    traces, lengths files and samples (inputs.load)."""
    if text and isinstance(value, str):
        if not value.isascii() or "_" in value:
            raise ValueError(value)
        value = float(value) if any(c in value for c in ".eE") else int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(value)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(value)
    return int(value)


def _tokens(value, what: str, field: str, p: Path, line: int) -> int:
    """A request's token count: a whole number (whole_count) that is servable."""
    if isinstance(value, bool):
        raise SpecError(field, f"{p} line {line}: {what} is {str(value).lower()}", "whole token counts")
    try:
        number = whole_count(value, text=True)
    except (ValueError, TypeError):
        raise SpecError(field, f"{p} line {line}: {what} {value!r} is not a whole number", "whole token counts") \
            from None
    if not servable(number):
        raise SpecError(field, f"{p} line {line}: {what} must be {TOKEN_RANGE}" + (f" ({NO_OUTPUT})" if number == 0
                        and what == "output tokens" else ""), "positive token counts")
    return number


def _row(row: object, p: Path, i: int, field: str) -> tuple[float, bool, int, int, float | None]:
    """(arrival s, whether it is an ISO time, prompt tokens, output tokens, acceptance rate or None)."""
    if not isinstance(row, dict):
        raise SpecError(field, f"{p} line {i}: not an object", "JSONL, one object per line, or CSV with a header")
    try:
        when = _pick(row, ARRIVAL, "arrival time", p, i, field)
        _plain(when, "the arrival time", "seconds or ISO times", field, p, i)
        arrival, iso = _seconds(when)
        prompt = _tokens(_pick(row, PROMPT, "prompt tokens", p, i, field), "prompt tokens", field, p, i)
        output = _tokens(_pick(row, OUTPUT, "output tokens", p, i, field), "output tokens", field, p, i)
        rate = row.get("acceptance_rate")
        _plain(rate, "acceptance_rate", "a per-token rate in [0, 1]", field, p, i)
        acceptance = None if rate in (None, "") else float(rate)
    except SpecError:  # already names its line and what is wrong (a SpecError is a ValueError: not reworded)
        raise
    except (ValueError, TypeError, OverflowError):
        raise SpecError(field, f"{p} line {i}: cannot read a number or time", "numbers for tokens, seconds or ISO "
                        "times") from None
    if not math.isfinite(arrival):
        raise SpecError(field, f"{p} line {i}: the arrival time is not a finite time", "seconds or ISO times")
    if abs(arrival) > 1e12:  # past 31,700 years of seconds: an epoch in ms (1.7e12 today) had read "not a finite time"
        raise SpecError(field, f"{p} line {i}: an arrival time of {arrival:.4g} s is more than 10^12 s (31,700 years): "
                        "milliseconds or microseconds?", "seconds (the first request's at any offset) or ISO times")
    if acceptance is not None and not (math.isfinite(acceptance) and 0 <= acceptance <= 1):
        raise SpecError(field, f"{p} line {i}: acceptance_rate must be in [0, 1]", "a per-token rate in [0, 1]")
    return arrival, iso, prompt, output, acceptance


def _json_lines(lines: list[str], numbers: list[int], p: Path | str, field: str) -> list:
    """One JSON value per line, or a one-line error naming the file and the line; a request naming a column it is read
    by twice is refused (json.loads would keep the later one)."""
    once = unique_keys((*ARRIVAL, *PROMPT, *OUTPUT, "acceptance_rate"))
    rows = []
    for line, number in zip(lines, numbers):
        try:
            row = json.loads(line, object_pairs_hook=once)
        except json.JSONDecodeError as err:
            raise SpecError(field, f"{p} line {number}: invalid JSON ({err.msg})", "JSONL, one object per line") \
                from None
        except RecursionError:
            raise SpecError(field, f"{p} line {number}: the JSON nests too deeply", "JSONL, one flat object per line") \
                from None
        except ValueError:  # Python's limit on the digits of an integer (JSONDecodeError, a ValueError, is above)
            raise SpecError(field, f"{p} line {number}: a number is too long to read", "JSONL of token counts, "
                            "seconds and rates") from None
        if getattr(row, "repeated", None):
            raise SpecError(field, f"{p} line {number}: a request names {row.repeated!r} twice",
                            "each key once per request")
        rows.append(row)
    return rows


def _parse(lines: list[str], numbers: list[int], p: Path, field: str = "trace",
           max_requests: int | None = None) -> RequestTrace:
    return _from_rows(*_rows(lines, numbers, p, field, max_requests), p, field)


def _rows(lines: list[str], numbers: list[int], p: Path, field: str,
          max_requests: int | None = None) -> tuple[list, list[int]]:
    """The requests of a file's non-empty lines (`numbers`: each one's line in the file), JSON values (JSONL) or the
    mappings of a CSV with a header, and the line in the file where each request starts. A CSV is read as its
    header is (files.csv_names): spaces after the commas skipped, in the header as in the rows."""
    if lines[0].lstrip().startswith("["):
        raise SpecError(field, f"{p} is a JSON array", "JSONL (one JSON object per line) or CSV with a header")
    if lines[0].lstrip().startswith("{"):
        rows, at = _json_lines(lines, numbers, p, field), numbers
    else:
        names = csv_names(lines[0])
        if not names:
            raise SpecError(field, f"{p} line {numbers[0]}: an unreadable CSV header", "CSV with a header of column "
                            "names, then one request per line")
        twice = first_repeated(names)
        if twice is not None:  # DictReader would keep the last column of the two silently
            raise SpecError(field, f"{p}: the header names column {twice!r} twice", "each column once")
        reader = csv.DictReader(lines[1:], fieldnames=names, skipinitialspace=True)
        rows, at = [], []
        consumed = 0  # lines after the header read so far: a quoted cell may span lines
        try:
            for row in reader:
                check_row_width(row, names, f"{p} line {numbers[1 + consumed]}", field)
                rows.append(row)
                at.append(numbers[1 + consumed])  # the row starts where the one before it ended
                consumed = reader.line_num
        except csv.Error as err:
            raise SpecError(field, f"{p}: unreadable CSV ({err})", "CSV with one request per line") from None
    if not rows:
        raise SpecError(field, f"{p} holds no requests (a header alone?)", "a CSV or JSONL file with one request per line")
    if max_requests is not None and len(rows) > max_requests:
        raise too_many_requests(p, field, max_requests)
    return rows, at


def _from_rows(rows: list, lines: list[int], p: Path, field: str) -> RequestTrace:
    """`lines`: the line in the file where each request starts."""
    arrivals, prompts, outputs, acceptance = [], [], [], []
    without = None  # the first line of a request without an acceptance rate
    kinds: dict[bool, int] = {}  # ISO or seconds: the first line of each
    for i, row in zip(lines, rows):
        arrival, iso, prompt, output, rate = _row(row, p, i, field)
        kinds.setdefault(iso, i)
        if len(kinds) > 1:
            raise SpecError(field, f"{p} line {i}: an arrival in {'ISO time' if iso else 'seconds'} where line "
                            f"{kinds[not iso]} gives {'seconds' if iso else 'an ISO time'}",
                            "one form of arrival time per file: seconds, or ISO date-times")
        arrivals.append(arrival)
        prompts.append(prompt)
        outputs.append(output)
        if rate is not None:
            acceptance.append(rate)
        elif without is None:
            without = i
    if field == "trace" and acceptance and without is not None:  # on some requests only: it would be dropped
        raise SpecError(field, f"{p} line {without}: no acceptance rate, where {len(acceptance):,} of the "
                        f"{len(arrivals):,} requests give one", "an acceptance rate on every request, or on none")
    order = sorted(range(len(arrivals)), key=arrivals.__getitem__)
    start = arrivals[order[0]]
    return RequestTrace(arrival_s=[arrivals[i] - start for i in order], prompt_tokens=[prompts[i] for i in order],
                        output_tokens=[outputs[i] for i in order],
                        acceptance=[acceptance[i] for i in order] if len(acceptance) == len(arrivals) else None,
                        path=str(p))


def read_trace_lengths(path: str | Path, max_requests: int | None = None) -> RequestTrace:
    """Prompt and output lengths of a file of requests (arrival times optional), to resample from; with
    `max_requests`, a file of more is refused before its rows are built."""
    lines, numbers = read_lines(path, "lengths_file", max_requests)
    p = Path(path)
    rows, at = _rows(lines, numbers, p, "lengths_file", max_requests)
    if not all(isinstance(row, dict) for row in rows):
        raise SpecError("lengths_file", f"{path}: a line is not an object", "JSONL, one object per line")
    # a lengths file's arrivals are never read (the scenario's rate sets them): the requests are numbered, whatever
    # arrival column some or all of them carry (dropped: an arrival_s of 2.5 beside the number had read as "two
    # arrival times")
    rows = [{**{key: value for key, value in row.items() if key not in ARRIVAL}, "arrival_time": i}
            for i, row in enumerate(rows)]
    return _from_rows(rows, at, p, "lengths_file")
