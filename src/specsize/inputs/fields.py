"""How a request field is declared: one `field(metadata=...)` per input, read by everything else.

A field's declaration (in `inputs.request.Request`) carries its type, range, default, unit, doc, where it
sits in a deployment file and its command-line flag. The YAML reader, the validation, the CLI's options and
docs/cli.md's field table are all derived from it; nothing else declares an input.
"""

from __future__ import annotations

from contextlib import suppress

import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import SpecError, first_repeated

# groups: which commands take a field (cli/commands.py maps commands to groups)
DEPLOYMENT = "deployment"
WORKLOAD = "workload"
ACCEPTANCE = "acceptance"
PERF = "perf"
ANALYSIS = "analysis"
SIMULATION = "simulation"
SPEEDUP = "speedup"
GROUPS = (DEPLOYMENT, WORKLOAD, ACCEPTANCE, PERF, ANALYSIS, SIMULATION, SPEEDUP)
SIZING = (DEPLOYMENT, WORKLOAD, ACCEPTANCE, PERF)  # every command that sizes a deployment takes these
# The fields each command reads: its groups, and single fields of other groups. The command line's options (cli.main)
# and the service's routes (service.requests.build) are both derived from it: a field the command does not read is no
# flag of it, and a body field of its route is refused (POST /api/v1/plan with "rate": 50 had planned without a word).
COMMAND_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "plan": ((*SIZING, ANALYSIS), ("duration", "seed")),
    "check": ((*SIZING, ANALYSIS), ("duration", "seed")),
    "report": ((*SIZING, ANALYSIS), ("duration", "seed")),
    "speedup": ((*SIZING, SPEEDUP), ("offline",)),
    "simulate": ((*SIZING, SIMULATION), ("ttft_slo_ms",)),
    "stops-paying": ((*SIZING, SIMULATION), ("ttft_slo_ms",)),
}


def command_reads(command: str, name: str, group: str) -> bool:
    """Whether `command` (a key of COMMAND_FIELDS) reads field `name` of `group`."""
    groups, include = COMMAND_FIELDS[command]
    return group in groups or name in include

KINDS = ("str", "int", "float", "bool", "choice", "lengths", "path", "int_list", "mapping", "str_list")


@dataclass(frozen=True)
class FieldInfo:
    doc: str
    kind: str
    group: str
    unit: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: tuple[str, ...] | None = None
    flag: str | None = ""  # "" = derived from the name; None = no flag (deployment file / API only)
    short: str | None = None
    aliases: tuple[str, ...] = ()
    yaml: str | None = "top"  # "top", "workload" (under `workload:`), or None (not in a deployment file)
    default_doc: str | None = None  # what an unset (None) value means

    @property
    def accepted(self) -> str:
        if self.choices:
            return ", ".join(self.choices)
        noun = {"int": "an integer", "float": "a number", "bool": "true or false (yes/no, on/off, 1/0)", "str": "a string",
                "path": "a file path", "int_list": "integers N[,N...]", "lengths":
                "p50=N,p95=N,p99=N,max=N | N,N,... samples | @FILE", "mapping": "a mapping",
                "str_list": "a list of strings"}.get(self.kind, self.kind)
        def number(x: float) -> str:
            return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"

        bounds = []
        if self.minimum is not None:
            bounds.append(f"{'>' if self.exclusive_minimum else '>='} {number(self.minimum)}")
        if self.maximum is not None:
            bounds.append(f"{'<' if self.exclusive_maximum else '<='} {number(self.maximum)}")
        return noun + (" " + " and ".join(bounds) if bounds else "") + (f" ({self.unit})" if self.unit else "")


def F(default: Any, doc: str, kind: str, group: str, **info: Any) -> Any:
    """Declare a request field: `name: type = F(default, doc, kind, group, unit=..., minimum=..., ...)`."""
    assert kind in KINDS and group in GROUPS
    return field(default=default, metadata={"specsize": FieldInfo(doc=doc, kind=kind, group=group, **info)})


def flag_of(name: str, info: FieldInfo) -> str | None:
    if info.flag is None:
        return None
    return info.flag or "--" + name.replace("_", "-")


def _bounds(name: str, info: FieldInfo, value: float) -> None:
    if not math.isfinite(value):
        raise SpecError(name, f"must be a finite number, got {value}", info.accepted)
    low_bad = info.minimum is not None and (value <= info.minimum if info.exclusive_minimum else value < info.minimum)
    high_bad = info.maximum is not None and (value >= info.maximum if info.exclusive_maximum else value > info.maximum)
    if low_bad or high_bad:
        shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
        raise SpecError(name, f"out of range: {shown}", info.accepted)  # the accepted part names the bounds


class HugeInt(int):
    """A stand-in for a decimal integer past Python's limit on converting digit strings (4,300 digits): an integer of
    the same number of digits (+-10 ** (digits - 1)) that every field refuses as out of range by its size, and that
    an error line can show (int's repr raises ValueError past the limit)."""

    digits = 0

    def __repr__(self) -> str:
        return f"an integer of {self.digits:,} digits"

    __str__ = __repr__


def decimal_int(text: str) -> int:
    """int(text) for decimal digits with a sign and "_" anywhere among them (YAML 1.1 reads 256_ and 2__56 as 256),
    also past Python's limit on converting long digit strings (sys.get_int_max_str_digits(), 4,300 by default),
    where it is a HugeInt of the same size, so that the error names the field."""
    clean = text.strip().replace("_", "")
    digits = clean.lstrip("+-")
    if not digits.isascii() or not digits.isdigit() or len(clean) - len(digits) > 1:
        raise ValueError(f"not a decimal integer: {text[:40]!r}")
    limit = sys.get_int_max_str_digits()
    if not limit or len(digits) <= limit:
        return int(clean)
    huge = HugeInt((-1 if clean.startswith("-") else 1) * 10 ** (len(digits) - 1))
    huge.digits = len(digits)
    return huge


def _int(name: str, info: FieldInfo, value: Any) -> int:
    if isinstance(value, bool):
        raise SpecError(name, f"must be an integer, got {value!r}", info.accepted)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise SpecError(name, f"must be an integer, got {value!r}", info.accepted)
        value = int(value)
    if isinstance(value, str):  # ASCII digits only: int() would also read "١٢" and "1_000"
        if not re.fullmatch(r"\s*[-+]?\d+\s*", value, re.ASCII):
            raise SpecError(name, f"must be an integer, got {value!r}", info.accepted)
        value = decimal_int(value)
    if not isinstance(value, int):
        raise SpecError(name, f"must be an integer, got {value!r}", info.accepted)
    if abs(value) > 2**53:
        raise SpecError(name, f"out of range: {brief(value)}", info.accepted)
    _bounds(name, info, value)
    return value


# a number as text: ASCII digits, a point, an exponent (float() would also read "١٢" and "1_000"); inf / nan read
# so that the bounds say what is wrong with them
_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*|\s*[-+]?(inf|infinity|nan)\s*",
                     re.ASCII | re.IGNORECASE)


def _float(name: str, info: FieldInfo, value: Any) -> float:
    if isinstance(value, bool) or (isinstance(value, str) and not _NUMBER.fullmatch(value)):
        raise SpecError(name, f"must be a number, got {value!r}", info.accepted)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpecError(name, f"must be a number, got {value!r:.80}", info.accepted) from None
    except OverflowError:  # an integer past float's range (10**400)
        raise SpecError(name, f"out of range: {brief(value)}", info.accepted) from None
    _bounds(name, info, number)
    # -0.0 is 0 (IEEE 754 keeps the sign through "+ 0.0" only for -0.0 + -0.0): a policy of -0 had been shown as
    # "-0%" and written to the JSON as -0.0
    return number + 0.0


def brief(value: Any) -> str:
    """A number for an error line: an integer of hundreds of digits by its size, not all of them."""
    if isinstance(value, HugeInt):
        return repr(value)
    if isinstance(value, int) and abs(value) >= 10**30:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    return repr(value)


# the spellings every boolean input takes, in a file (YAML 1.1 reads unquoted yes / no / on / off as booleans, 1 / 0 as
# integers), in quotes, as a flag's or an API's text: parse_bool is the one reader. Boolean fields had each read their
# own: a deployment file took enforce_eager: 'yes' but refused 1, and a study refused compute.speedup: "no".
BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
BOOL_ACCEPTED = "true, false, yes, no, on, off, 1, 0"


def parse_bool(name: str, value: Any) -> bool:
    """A boolean input as a bool: True / False, the integers 1 / 0, or BOOL_WORDS' spellings in any case; anything else
    is refused naming the field `name` and the accepted spellings."""
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):  # not 1.0, not a HugeInt stand-in
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in BOOL_WORDS:
        return BOOL_WORDS[value.strip().lower()]
    shown = brief(value) if isinstance(value, int) else repr(value)
    raise SpecError(name, f"must be true or false, got {shown:.80}", BOOL_ACCEPTED)


def coerce(name: str, info: FieldInfo, value: Any) -> Any:
    """A raw value (YAML, a flag, an API keyword) as the field's type, range-checked; None stays None.
    Length distributions, mappings and candidate lists are parsed by their own readers (inputs.load)."""
    if value is None:
        return None
    kind = info.kind
    if kind == "int":
        return _int(name, info, value)
    if kind == "float":
        return _float(name, info, value)
    if kind == "bool":
        return parse_bool(name, value)
    if kind == "choice":
        assert info.choices
        if {"on", "off"} <= set(info.choices) and str(value).strip() not in info.choices:
            # an on / off choice takes a boolean's spellings (parse_bool's: YAML 1.1 reads an unquoted on / off or
            # yes / no as true / false; 1, 'yes', 'On' as the boolean fields take them)
            with suppress(SpecError):
                value = "on" if parse_bool(name, value) else "off"
        text = str(value).strip()
        if isinstance(value, (bool, dict, list)) or text not in info.choices:
            raise SpecError(name, f"unknown value {value!r}", info.accepted)
        return text
    if kind in ("str", "path"):
        if isinstance(value, (dict, list, bool, HugeInt)):  # a HugeInt's text is a description, not the value
            raise SpecError(name, f"must be a string, got {value!r}", info.accepted)
        text = str(value).strip()
        if not text:
            raise SpecError(name, "must not be empty", info.accepted)
        if "\x00" in text:  # no file, model id, release or name holds one (os.stat raises ValueError on it): YAML's "\0"
            raise SpecError(name, f"holds a NUL character: {text!r:.80}", f"{info.accepted}, without NUL characters")
        return text
    if kind in ("int_list", "str_list"):
        return _list(name, info, value)
    return value  # lengths / mapping: parsed by inputs.load


def _list(name: str, info: FieldInfo, value: Any) -> tuple:
    """An int_list (distinct integers, a list or "N,N,...") or a str_list (strings only)."""
    if info.kind == "str_list":
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
            raise SpecError(name, f"must be a string or a list of strings, got {value!r}", info.accepted)
        twice = first_repeated(item.strip() for item in items)
        if twice is not None:  # a --candidate given twice had been priced and tabulated twice
            raise SpecError(name, f"repeats a value: {twice!r:.120}", f"each value once ({info.accepted})")
        return tuple(items)
    # spaces around an item are dropped, never inside one: "1 2" had been read as 12
    items = value if isinstance(value, (list, tuple)) else [item.strip() for item in str(value).split(",")]
    if not items or any(item == "" for item in items):
        raise SpecError(name, f"an empty item in {value!r}", info.accepted)
    numbers = tuple(_int(name, info, v) for v in items)
    if len(set(numbers)) != len(numbers):
        raise SpecError(name, f"repeats a value: {value!r}", "distinct " + info.accepted)
    return numbers
