"""Request traces for the simulator: CSV or JSONL with an arrival time, prompt tokens and output tokens.

Accepted columns (first match wins):
- arrival: `arrival_time` / `arrival_s` / `timestamp` (seconds, or an ISO date-time) / `TIMESTAMP` (Azure)
- prompt:  `prompt_tokens` / `input_tokens` / `ContextTokens` (Azure)
- output:  `output_tokens` / `generated_tokens` / `GeneratedTokens` (Azure)
- optional per-request acceptance: `acceptance_rate`

Arrival times are shifted so that the first request arrives at 0 s. The public Azure LLM inference traces
(AzureLLMInferenceTrace_code.csv / _conv.csv: TIMESTAMP, ContextTokens, GeneratedTokens) load as they are.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..core.errors import SpecError
from .files import read_lines

ARRIVAL = ("arrival_time", "arrival_s", "timestamp", "TIMESTAMP", "arrival")
PROMPT = ("prompt_tokens", "input_tokens", "ContextTokens", "prompt_len")
OUTPUT = ("output_tokens", "generated_tokens", "GeneratedTokens", "output_len")


@dataclass(frozen=True)
class Trace:
    arrival_s: list[float]
    prompt_tokens: list[int]
    output_tokens: list[int]
    acceptance: list[float] | None


def _pick(row: dict, names: tuple[str, ...], field: str, path: Path, line: int):
    for name in names:
        if name in row and row[name] not in (None, ""):
            return row[name]
    raise SpecError("trace", f"{path} line {line}: no {field} column", " / ".join(names))


def _seconds(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        text = str(value).strip().replace("Z", "+00:00")
        if "." in text:  # Azure writes 7 fractional digits; datetime takes 6
            head, _, tail = text.partition(".")
            digits = "".join(ch for ch in tail if ch.isdigit())
            rest = tail[len(digits):]
            text = f"{head}.{digits[:6]}{rest}"
        return datetime.fromisoformat(text).timestamp()


def read_trace(path: str | Path) -> Trace:
    return _parse(read_lines(path, "trace"), Path(path))


def _parse(lines: list[str], p: Path) -> Trace:
    try:
        rows = [json.loads(line) for line in lines] if lines[0].lstrip().startswith("{") else \
            list(csv.DictReader(lines))
    except json.JSONDecodeError as err:
        raise SpecError("trace", f"{p}: invalid JSON line ({err.msg})", "JSONL, one object per line") from None
    arrivals, prompts, outputs, acceptance = [], [], [], []
    for i, row in enumerate(rows, start=1):
        try:
            arrivals.append(_seconds(_pick(row, ARRIVAL, "arrival time", p, i)))
            prompts.append(int(float(_pick(row, PROMPT, "prompt tokens", p, i))))
            outputs.append(int(float(_pick(row, OUTPUT, "output tokens", p, i))))
        except ValueError as err:
            raise SpecError("trace", f"{p} line {i}: {err}", "numbers for tokens, seconds or ISO times") from None
        if "acceptance_rate" in row and row["acceptance_rate"] not in (None, ""):
            acceptance.append(float(row["acceptance_rate"]))
    if any(v < 1 for v in prompts) or any(v < 1 for v in outputs):
        raise SpecError("trace", f"{p}: token counts must be >= 1", "positive prompt and output tokens")
    order = sorted(range(len(arrivals)), key=arrivals.__getitem__)
    start = arrivals[order[0]]
    return Trace(arrival_s=[arrivals[i] - start for i in order], prompt_tokens=[prompts[i] for i in order],
                 output_tokens=[outputs[i] for i in order],
                 acceptance=[acceptance[i] for i in order] if len(acceptance) == len(arrivals) else None)


def read_trace_lengths(path: str | Path) -> Trace:
    """Prompt and output lengths of a file of requests (arrival times optional), to resample from."""
    lines = read_lines(path, "lengths_file")
    if not any(name in lines[0] for name in ARRIVAL):
        # no arrival column: number the requests so the trace parser can be reused
        if lines[0].lstrip().startswith("{"):
            lines = [json.dumps({**json.loads(line), "arrival_time": i}) for i, line in enumerate(lines)]
        else:
            lines = [lines[0] + ",arrival_time"] + [f"{line},{i}" for i, line in enumerate(lines[1:])]
    return _parse(lines, Path(path))
