"""Deployment files and overrides -> a validated `Request`. Precedence, lowest first:

    field defaults  <  the embedded default deployment (only when neither a file nor a target is given)
                    <  the deployment file  <  overrides (flags, API keywords)

One refinement, so that a value given alone never inherits hidden shape: a `samples_file` override replaces
the file's prompt and output lengths, and when nobody gave prompt lengths the workload comes from the
embedded default whole (and the result says so). Every value records where it came from (`Request.sources`).
"""

from __future__ import annotations

import copy
import csv
import errno
import json
import math
import os
import re
from dataclasses import replace as dc_replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..catalog import files
from ..catalog.files import csv_names, packaged_json, read_text, size_limit
from ..catalog.models import NAMES_ONLY_ENV, exists
from ..catalog.traces import FEWEST_TOKENS, MAX_TOKENS, NO_OUTPUT, servable, whole_count
from ..core.errors import SpecError, first_repeated, unique_keys
from ..core.specs import LengthDistribution, check_lengths
from .fields import FieldInfo, brief, coerce, decimal_int
from .request import FIELDS, YAML_TOP_KEYS, YAML_WORKLOAD_KEYS, Request, info

EMBEDDED = "embedded default"
SECURITY_COMPONENTS = ("inference_endpoint", "metrics_endpoint", "dashboard")
SECURITY_AUTH = ("none", "api_key", "mtls", "oidc", "network_policy", "reverse_proxy", "not_exposed")
PATH_FIELDS = ("samples_file", "trace", "lengths_file", "nvidia_smi")
MODEL_FIELDS = ("target", "draft")  # a catalog or hub id, or a config.json / model directory (model_near)


# --- YAML ---------------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _yaml_loader():
    import yaml  # noqa: PLC0415 - only needed when a deployment is read

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it: 10x faster

    class Strict(base):  # type: ignore[valid-type, misc]
        """Refuses a key written twice in one mapping (YAML would silently keep the last)."""

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: construct_mapping merges it below
                continue
            key = loader.construct_object(key_node, deep=deep)
            if isinstance(key, (list, dict)):
                raise SpecError("key", f"a {type(key).__name__} used as a key (line {key_node.start_mark.line + 1})",
                                "keys that are plain names")
            if key in seen:
                raise SpecError(str(key), f"written twice (line {key_node.start_mark.line + 1})",
                                "each key once per mapping")
            seen.add(key)
            refuse_yaml11_ints(loader, value_node, str(key))
        return base.construct_mapping(loader, node, deep=deep)

    def refuse_yaml11_ints(loader, node, field: str) -> None:
        """A value (or a list's item) written as a YAML 1.1 integer other than a decimal one, refused under its key:
        `tp: 0x10` is field tp, not `value`. Each node once, without recursion: an alias can make a list hold itself
        (`a: &a [*a]`), and aliases can repeat one node millions of times (_check_expansion refuses those)."""
        # one set for the whole document (the loader's): every mapping aliasing one long list had walked it again,
        # a 100 KB file taking minutes to be refused
        seen = loader.__dict__.setdefault("_specsize_yaml11_seen", set())
        stack = [node]
        while stack:
            item = stack.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, yaml.SequenceNode):
                stack.extend(item.value)
            elif isinstance(item, yaml.ScalarNode) and item.tag == "tag:yaml.org,2002:int":
                yaml11_int(loader, item, field)

    def yaml11_int(loader, node, field: str) -> None:
        text = loader.construct_scalar(node)
        digits = text.replace("_", "").lstrip("+-")
        if ":" in digits or digits[:2].lower() in ("0x", "0b", "0o") or (len(digits) > 1 and digits[0] == "0"):
            value = base.construct_yaml_int(loader, node)
            raise SpecError(field, f"{text!r} (line {node.start_mark.line + 1}) reads as {value} in YAML 1.1 "
                            "(base 60, hexadecimal, binary or octal)", "a decimal number, or the text in quotes")

    def integer(loader, node):
        """YAML 1.1 reads 1:30 as 90 (base 60), 0x1000 as 4096 and 010 as 8: a setting written so is refused (under
        its key where a mapping holds it: refuse_yaml11_ints)."""
        yaml11_int(loader, node, "value")
        return decimal_int(loader.construct_scalar(node))  # past 4,300 digits a stand-in of its size, refused by name

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    Strict.add_constructor("tag:yaml.org,2002:int", integer)
    return yaml, Strict


def parse_yaml_mapping(text: str, where: str, field: str = "deployment") -> dict:
    yaml, loader = _yaml_loader()
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "malformed YAML"
        raise SpecError(field, f"{where} is not valid YAML{at}: {problem}", "a YAML mapping") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(field, f"{where} must hold a mapping of settings, got {type(data).__name__}",
                        "a YAML mapping such as 'target: meta-llama/Llama-3.1-8B-Instruct'")
    _check_expansion(data, where, field)
    return data


MAX_YAML_VALUES = 100_000  # a deployment or study holds hundreds; aliases can make a few bytes expand to billions


def _check_expansion(data: object, where: str, field: str) -> None:
    """Refuse a document whose aliases expand it past MAX_YAML_VALUES values ("billion laughs": 322 bytes of nested
    aliases are 43 million values, which any message or walk over them would spell out). Counted as a walk would
    visit them, stopping at the limit."""
    stack, seen = [data], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > MAX_YAML_VALUES:
            raise SpecError(field, f"{where} expands to more than {MAX_YAML_VALUES:,} values (YAML aliases)",
                            "a deployment without nested aliases")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def read_yaml_file(path: str | Path, field: str = "deployment") -> dict:
    return parse_yaml_mapping(read_text(path, field, "a readable YAML file"), str(path), field)


def default_deployment() -> dict:
    """The embedded default: Llama-3.1-70B-Instruct with a Llama-3.2-1B draft on four H100s (a fresh copy)."""
    return copy.deepcopy(_default_deployment())


DEFAULT_YAML = "default_deployment.yaml"  # the declaration, with its comments
DEFAULT_JSON = "default_deployment.json"  # its copy, generated by `python3 dev.py docs` (tests/test_docs.py)


def default_copy_text(yaml_text: str) -> str:
    """The JSON copy of the embedded default's YAML: what `specsize plan` reads without importing PyYAML."""
    import json  # noqa: PLC0415

    return json.dumps(parse_yaml_mapping(yaml_text, "the embedded default deployment"), indent=1) + "\n"


@lru_cache(maxsize=1)
def _default_deployment() -> dict:
    return packaged_json(DEFAULT_JSON)


def flatten(data: dict, where: str) -> dict:
    """A deployment file's mapping -> {field name: raw value}; unknown keys name the accepted ones."""
    out: dict = {}
    for key, value in data.items():
        if key == "workload":
            if value is None:
                continue
            if not isinstance(value, dict):
                raise SpecError("workload", "must be a mapping", ", ".join(YAML_WORKLOAD_KEYS))
            for inner, inner_value in value.items():
                if inner not in YAML_WORKLOAD_KEYS:
                    raise SpecError("workload", f"unknown key {inner!r} in {where}", ", ".join(YAML_WORKLOAD_KEYS))
                out[inner] = inner_value
        elif key in YAML_TOP_KEYS:
            out[key] = value
        elif key in YAML_WORKLOAD_KEYS:  # a workload setting written at the top
            raise SpecError(str(key), f"belongs under workload: in {where}",
                            f"workload: {{{key}: ...}} ({', '.join(YAML_WORKLOAD_KEYS)} go under workload:)")
        elif key in FIELDS and info(key).yaml is None:  # a command's own setting (--rate, --duration): not a file's
            from .fields import flag_of  # noqa: PLC0415

            flag = flag_of(key, info(key))
            raise SpecError(str(key), f"is not a deployment file's key in {where}: it is "
                            + (f"the command line's {flag}" if flag else "set by the command itself"),
                            f"{flag} on the command line" if flag else "the command's own flags")
        else:
            raise SpecError(str(key), f"unknown key in {where}", ", ".join(sorted((*YAML_TOP_KEYS, "workload"))))
    return out


# --- lengths ------------------------------------------------------------------------------------------------

def _numbers(line: str) -> bool:
    """Whether a line holds token counts only (1e+03 included, as numpy.savetxt writes them): not a header."""
    try:
        return all(whole_count(v, text=True) >= 0 for v in re.split(r"[\s,]+", line.strip()) if v)
    except (ValueError, TypeError, OverflowError):
        return False


def _header(line: str) -> bool:
    """Whether a file's first line is a CSV header: a name among its cells (a bad count, -3 or 100.5, is a count
    to refuse as one, not a header without the column)."""
    return not _numbers(line) and any(re.match(r"[A-Za-z_]", name) for name in csv_names(line))


def read_samples(path: str | Path, column: str | None = None, field: str = "samples_file") -> list[int]:
    """Token counts from a file: numbers (one per line or comma-separated), a JSON list, or a JSONL/CSV
    trace whose `column` field holds them."""
    return parse_samples(_samples_text(path, field), path, column, field)


def _samples_text(path: str | Path, field: str = "samples_file") -> str:
    return read_text(Path(path), field, "a readable file", size_limit("samples_file"))


def _jsonl_counts(text: str, key: str, p: Path, field: str) -> list[int]:
    """The `key` count of each JSONL request; a request naming it twice is refused (json.loads keeps the later)."""
    once = unique_keys((key,))
    values = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        request = json.loads(line, object_pairs_hook=once)
        if getattr(request, "repeated", None):
            raise SpecError(field, f"{p} line {number}: a request names {request.repeated!r} twice",
                            "each key once per request")
        values.append(whole_count(request[key]))
    return values


# The most token counts a samples file (or an @FILE of lengths) gives, as many as a simulation holds requests: their
# percentiles are all it is read for. A 250 MiB file of 65 million requests (under the 256 MiB limit) had taken `plan`
# 4 minutes and 6 GiB of memory (a dict a CSV row, read once a side), an out-of-memory kill on a smaller host; two
# million take seconds. Counted before anything is parsed: by lines, and by commas in a list or a line of counts.
MAX_SAMPLES = 2_000_000


def _check_count(count: int, p: Path, field: str, what: str) -> None:
    if count > MAX_SAMPLES:
        raise SpecError(field, f"{p} holds more than {MAX_SAMPLES:,} {what}",
                        f"at most {MAX_SAMPLES:,} requests or token counts (a random sample of them, e.g. `shuf -n "
                        "1000000`, keeps their percentiles)")


def parse_samples(text: str, path: str | Path, column: str | None = None, field: str = "samples_file",
                  records: bool = False) -> list[int]:
    """read_samples on a file's text already read (a pipe reads once: both columns come from one read). With
    `records` (samples_file: one file for both sides) only JSONL or CSV records naming `column` are read: bare
    numbers say nothing of which side they are."""
    p = Path(path)
    values: list[int] = []
    stripped = text.strip()
    # one request or count a line at most, a header line besides: more lines than that are refused unread
    _check_count(stripped.count("\n"), p, field, "requests (one a line)")
    if records and stripped and not stripped.startswith("{") and not _header(stripped.splitlines()[0]):
        raise SpecError(field, f"{p}: holds bare token counts, not requests with prompt_tokens and output_tokens",
                        "JSONL or CSV records with prompt_tokens and output_tokens; bare counts of one side go in "
                        "prompt_tokens: @FILE or output_tokens: @FILE")
    try:
        if stripped.startswith("["):
            _check_count(stripped.count(",") + 1, p, field, "token counts")
            values = [whole_count(v) for v in json.loads(stripped)]
        elif stripped.startswith("{"):
            values = _jsonl_counts(stripped, column or "prompt_tokens", p, field)
        elif column and stripped and column in csv_names(stripped.splitlines()[0]):
            lines = stripped.splitlines()
            names = csv_names(lines[0])
            twice = first_repeated(names)
            if twice is not None:  # DictReader keeps the last of the two columns without a word, as a trace's reader
                raise SpecError(field, f"{p}: the header names column {twice!r} twice", "each column once")
            # by its exact name (a column "prompt_tokens_total" is not "prompt_tokens"); blank lines (a spreadsheet's
            # trailing rows, spaces only) hold no request
            reader = csv.DictReader([line for line in lines[1:] if line.strip()], fieldnames=names,
                                    skipinitialspace=True)
            values = []
            for number, row in enumerate(reader, 1):
                files.check_row_width(row, names, f"{p} request {number:,}", field)
                values.append(whole_count(row[column], text=True))
        elif column and stripped and _header(stripped.splitlines()[0]):  # a header, not naming the column
            raise SpecError(field, f"{p}: its header has no {column!r} column",  # (its content is never echoed)
                            f"a CSV whose header names {column} (the samples file reads no other column)")
        else:
            _check_count(stripped.count(",") + stripped.count("\n") + 1, p, field, "token counts")
            values = [whole_count(v, text=True) for v in re.split(r"[\s,]+", stripped) if v]
    except SpecError:  # already names the file and what is wrong (a SpecError is a ValueError: not reworded)
        raise
    except KeyError as err:  # names the column, never the file's content
        raise SpecError(field, f"{p}: a request has no {err.args[0]!r}",
                        "integers one per line, a JSON list, or JSONL/CSV with prompt_tokens and output_tokens") from None
    except (ValueError, TypeError, OverflowError, json.JSONDecodeError, RecursionError, csv.Error):
        raise SpecError(field, f"{p}: cannot read token counts (each a whole number)",
                        "integers one per line, a JSON list, or JSONL/CSV with prompt_tokens and output_tokens") from None
    if not values:
        raise SpecError(field, f"{p} holds no token counts", "a non-empty list of integers")
    _check_servable(values, column if records else field, field, f"{p} holds", "request" if records else "count")
    return values


def _check_servable(values: list[int], side: str | None, field: str, holder: str, each: str = "count") -> None:
    """Every count a request length (catalog.traces.servable: an output of 0 tokens is no request vLLM serves), or a
    one-line error naming the first that is not and where it is."""
    at = next((i for i, v in enumerate(values) if not servable(v)), None)
    if at is None:
        return
    why = f"; {NO_OUTPUT}" if values[at] == 0 and side == "output_tokens" else ""
    raise SpecError(field, f"{holder} token counts outside {FEWEST_TOKENS} to {MAX_TOKENS:,} ({brief(values[at])}, "
                    f"{each} {at + 1:,}{why})", f"token counts >= {FEWEST_TOKENS}")  # (a count past 4,300 digits by size)


def _from_mapping(value: dict, field: str) -> LengthDistribution:
    # the names as the text form reads them (p50=..,P99=.. is lower-cased there): {P99: 8000} had been an unknown key
    named: dict = {}
    for key, number in value.items():
        name = str(key).strip().lower()
        if name in named:
            raise SpecError(field, f"{name} given twice ({key!r})", "each percentile once")
        named[name] = number
    value = named
    unknown = set(value) - {"p50", "median", "p95", "p99", "max"}
    if unknown:
        raise SpecError(field, f"unknown key(s) {', '.join(sorted(map(str, unknown)))}", "p50, p95, p99, max")
    # a 0 is read, then refused as a length below (check_lengths: a prompt; the output's own rule: servable)
    as_int = FieldInfo(doc="", kind="int", group="workload", minimum=0, maximum=MAX_TOKENS)
    if "p50" in value and "median" in value:
        raise SpecError(field, "gives p50 and median, two names for one percentile", "one of p50 or median")
    pick = {k: coerce(f"{field}.{k}", as_int, v) for k, v in value.items()}
    p50 = pick.get("p50", pick.get("median"))
    if p50 is None or pick.get("p99") is None:
        raise SpecError(field, "needs at least p50 and p99", "p50, p95, p99, max")
    p99 = pick["p99"]
    # a missing p95 or max is taken at p99: the conservative reading of what was not said (a 0 given is checked)
    p95, longest = pick.get("p95"), pick.get("max")
    if field == "output_tokens" and not servable(p50):  # p50 is the least of the four (check_lengths: in order)
        raise SpecError(field, f"p50 is {p50} tokens: {NO_OUTPUT}", f"output lengths >= {FEWEST_TOKENS}")
    return LengthDistribution(p50=p50, p95=p99 if p95 is None else p95, p99=p99, max=p99 if longest is None else longest)


def length_distribution(value: Any, field: str, base: Path | None = None) -> LengthDistribution:
    """p50/p95/p99/max from a mapping, a list of samples, "p50=1000,p99=4000", "1,2,3" or "@file"."""
    if isinstance(value, LengthDistribution):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("@"):
            if not text[1:].strip():
                raise SpecError(field, "@ names no file", "@FILE, a file of token counts")
            path = Path(text[1:].strip())  # "@ lengths.txt" names lengths.txt, as "@" alone names no file
            return LengthDistribution.from_samples(read_samples(path if base is None else base / path, field, field))
        if "=" in text:
            pairs = {}
            for part in text.split(","):
                if "=" not in part:
                    raise SpecError(field, f"cannot read {part!r:.80} in {value!r:.120}", "p50=N,p95=N,p99=N,max=N")
                key, _, number = part.partition("=")
                if key.strip().lower() in pairs:
                    raise SpecError(field, f"{key.strip():.40} given twice in {value!r:.120}", "each percentile once")
                pairs[key.strip().lower()] = number.strip()
            return _from_mapping(pairs, field)
        try:
            value = [whole_count(v, text=True) for v in re.split(r"[\s,]+", text) if v]  # as the files' samples
        except (ValueError, TypeError, OverflowError):
            raise SpecError(field, f"cannot read {value!r:.120}", "p50=N,p95=N,p99=N,max=N; N,N,N (samples); @FILE") from None
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, list):
        if not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise SpecError(field, f"samples must be token counts from {FEWEST_TOKENS} to {MAX_TOKENS:,}",
                            "a non-empty list of token counts")
        _check_servable(value, field, field, "the samples hold")
        return LengthDistribution.from_samples(value)
    if isinstance(value, dict):
        return _from_mapping(value, field)
    raise SpecError(field, f"cannot read {value!r:.120}", "a mapping p50/p95/p99/max, a list of samples, or @FILE")


def _security(value: Any) -> dict | None:
    """How each serving component is protected: {component: {"auth": ..., "note": ...}}."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SpecError("security", "must be a mapping of components", ", ".join(SECURITY_COMPONENTS))
    out = {}
    for component, spec in value.items():
        if component not in SECURITY_COMPONENTS:
            raise SpecError("security", f"unknown component {component!r}", ", ".join(SECURITY_COMPONENTS))
        if isinstance(spec, str):
            spec = {"auth": spec}
        if not isinstance(spec, dict):
            raise SpecError(f"security.{component}", f"must be a mapping or an auth name, got {spec!r}",
                            "{auth: " + "|".join(SECURITY_AUTH) + ", note: TEXT}")
        unknown = sorted(str(key) for key in spec if key not in ("auth", "note"))
        if unknown:  # a misspelt "note" had been dropped without a word
            raise SpecError(f"security.{component}", f"unknown key(s) {', '.join(unknown)[:120]}", "auth, note")
        if str(spec.get("auth")) not in SECURITY_AUTH:
            raise SpecError(f"security.{component}.auth", f"unknown value {spec.get('auth')!r}", ", ".join(SECURITY_AUTH))
        out[component] = {"auth": str(spec["auth"]), "note": str(spec.get("note") or "")}
    return out


# --- building the request -----------------------------------------------------------------------------------

DATABASE_URLS = ("postgresql://", "postgres://", "postgresql+psycopg://", "sqlite:///")


def database_path(value: str | None, field: str) -> str | None:
    """A database named by a path (the calibration store, the service's database): refused when something that is not
    a regular file is there. SQLite opens a named pipe and waits for a writer that never comes (`--store` on a FIFO
    hung `plan`, `calibrations` and `users list`); a URL is its server's to check."""
    if value is None or str(value).startswith(DATABASE_URLS):
        return value
    from ..adapters.store import not_a_regular_file  # noqa: PLC0415 - the store's own rule, said of this field

    path = Path(str(value).strip()).expanduser()
    resolved(path, field)  # a symbolic link loop: named as this field's (it had been an internal error, exit 4)
    odd = not_a_regular_file(path)
    if odd:
        raise SpecError(field, odd, "an SQLite file, or a path for a new one")
    return value


LOOP_ACCEPTED = "a path without a symbolic link loop"


def resolved(path: str | Path, field: str) -> Path:
    """`path` made absolute with its symbolic links followed (Path.resolve), or a one-line error naming `field` where
    the links go round in a loop: Python 3.11's Path.resolve raises RuntimeError there (later ones OSError ELOOP), which
    had ended `--samples-file`, `--trace`, `--lengths-file`, `--nvidia-smi`, `-o`, `--series`, `--html` and a study's
    paths on a loop in an internal error (exit 4)."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError) as err:
        if isinstance(err, OSError) and err.errno != errno.ELOOP:
            raise
        raise SpecError(field, f"{path} is a symbolic link loop", LOOP_ACCEPTED) from None


def field_value(name: str, raw: Any, base: Path | None) -> Any:
    """A field's value as a deployment file or an override gives it, checked (relative paths resolved from `base`)."""
    field_info = info(name)
    if field_info.kind == "lengths":
        return None if raw is None else check_lengths(name, length_distribution(raw, name, base))
    if name == "security":
        return _security(raw)
    if name == "engine_version" and isinstance(raw, float):
        # YAML reads an unquoted 0.10 as the number 0.1: a different release
        raise SpecError(name, f"{raw!r} is a number; YAML reads 0.10 as 0.1", f"a quoted release: '{raw}' or '0.10'")
    value = coerce(name, field_info, raw)
    if name == "store":
        database_path(value, name)
    if field_info.kind == "path" and value is not None and base is not None and name in PATH_FIELDS:
        value = str(resolved(base / value, name)) if not Path(value).is_absolute() else value
    return value


def count_reads(on: bool) -> None:
    """From now on, keep (on) or not the files this process reads (catalog.files.READ): a command's, so that its
    output never replaces one of them; never a server's."""
    files.READ = {} if on else None


def files_read() -> dict[Path, str]:
    """The files read since count_reads(True), by the field that read them (empty when none are counted)."""
    return files.READ or {}


def will_read(paths: dict[str, object]) -> None:
    """Count as read the files a command is about to read (field -> path; None and "-" skipped), under the command's
    names for them: its output must not replace them either."""
    for field, path in paths.items():
        if isinstance(path, (str, Path)) and str(path) not in ("", "-"):
            files.remember_read(path, field)


def model_near(value: str, base: Path | None, field: str) -> str:
    """A model a file names (`base`: the file's folder): a relative path is read relative to the file, as every path
    a file gives; a catalog or hub id as it is. A path that is not beside the file but is in the current directory
    is refused, not read from there: the same file gives the same plan wherever it is run from. A value shaped as an
    id (org/name) that is not beside the file is read as an id is on the command line (a local copy in the current
    directory first, as `--local-dir` downloads lay them out)."""
    if base is None or not isinstance(value, str) or value.startswith("~") or Path(value).is_absolute() \
            or os.environ.get(NAMES_ONLY_ENV):  # a server reads models by name only (api.read_models_by_name_only)
        return value
    local = base / value
    if exists(local):  # a name over 255 bytes is no file: an id, refused by name as the flag's is
        return str(local.resolve())
    id_shaped = value.count("/") == 1 and not value.startswith(".") and not value.endswith(".json")
    if not id_shaped and base.resolve() != Path.cwd().resolve() and exists(Path(value)):
        raise SpecError(field, f"{value} is not beside the file (in {base}) but in the current directory; a file's "
                        "relative paths are read relative to the file", "a path relative to the file, an absolute "
                        "path, or a model id")
    return value


def validated(name: str, value: Any) -> Any:
    """`value` checked as field `name` (a Request built directly; relative paths are left as given)."""
    return value if value is None or isinstance(value, LengthDistribution) else field_value(name, value, None)


def _layer(values: dict, sources: dict, raw: dict, source: str, base: Path | None) -> None:
    for name, item in raw.items():
        if item is None:
            continue
        if name not in FIELDS:
            raise SpecError(name, "unknown setting", ", ".join(FIELDS))
        values[name] = field_value(name, item, base)
        if name in MODEL_FIELDS and source != "override":  # a flag's path is the current directory's, as given
            values[name] = model_near(values[name], base, name)
        sources[name] = source


def _samples(values: dict, sources: dict) -> None:
    """Lengths from `samples_file` where no layer above it gave them."""
    path = values.get("samples_file")
    if not path:
        return
    text = None
    for side in ("prompt_tokens", "output_tokens"):
        if values.get(side) is None:
            if text is None:
                text = _samples_text(path)
            values[side] = check_lengths(side, LengthDistribution.from_samples(parse_samples(text, path, side,
                                                                                             records=True)))
            sources[side] = sources["samples_file"]


def _measured_k(values: dict, sources: dict) -> tuple[int, str] | None:
    """(k, source) where a mean accepted length stands beside the k it was measured at (one layer gives both, no
    measured_at_k): measured_at_k's default, "the deployment's k", is that layer's k."""
    k, mean_source = values.get("num_speculative_tokens"), sources.get("mean_accepted_length")
    if values.get("measured_at_k") is not None or values.get("mean_accepted_length") is None or not k \
            or mean_source is None or mean_source != sources.get("num_speculative_tokens"):
        return None
    return int(k), str(mean_source)


def kept_mean_measured_at(k_given_at: int | None, k_now: int | None) -> int | None:
    """The measured_at_k of a mean accepted length kept while k moves from `k_given_at`, the k it was given beside, to
    `k_now`: that k where it changed (the mean is not re-read as measured at the new k), None where it did not or no k
    was known. The one rule of a request's layers (_keep_measured_k) and the service's stored versions (merged)."""
    return k_given_at if k_given_at and k_now != k_given_at else None


def _keep_measured_k(values: dict, sources: dict, measured: tuple[int, str] | None) -> None:
    """A higher layer (a flag, `speedup -k 2,3,4`, `Request.replace`) that changes k and leaves the mean accepted length
    as it was: the mean stays measured at the k it was given beside. `plan FILE -k 2` of a file at k = 3 with a mean of
    2.5 had read 2.5 as measured at k = 2 (a = 0.82 instead of 0.69: 2.5 tokens a pass at k = 2 instead of 2.17), and
    `speedup FILE -k 2,3,4` had priced k = 3 at 2.19x instead of 1.79x; `speedup FILE -k 3,2,4` had given 1.79x."""
    if measured is None or values.get("measured_at_k") is not None:
        return
    k, source = measured
    at = kept_mean_measured_at(k, values.get("num_speculative_tokens"))
    if at is None and len(set(values.get("speedup_ks") or ())) > 1:
        # `speedup FILE -k 3,2,4` of a file at k = 3: the list's first is the file's k, but the mean is still the
        # file's measurement at 3, named so (api.speedup refuses a mean beside several k that names none)
        at = k
    if sources.get("mean_accepted_length") == source and at is not None:
        values["measured_at_k"] = field_value("measured_at_k", at, None)
        sources["measured_at_k"] = source


def build_request(file_data: dict | None, overrides: dict, file_source: str = "file",
                  base: Path | None = None, where: str = "the deployment") -> Request:
    values: dict = {}
    sources: dict = {}
    file_values = flatten(file_data, where) if file_data else {}
    if overrides.get("samples_file") is not None:
        for side in ("prompt_tokens", "output_tokens"):  # a trace given as an override replaces the file's lengths
            file_values.pop(side, None)
    for layer in (file_values, overrides):
        if layer.get("samples_file") is not None and any(layer.get(side) is not None
                                                         for side in ("prompt_tokens", "output_tokens")):
            raise SpecError("samples_file", "given together with prompt_tokens/output_tokens: which describes the "
                            "traffic?", "either samples_file or the length distributions")
    _layer(values, sources, file_values, file_source, base)
    measured_beside = _measured_k(values, sources)
    _layer(values, sources, overrides, "override", Path.cwd())
    _keep_measured_k(values, sources, measured_beside)
    _samples(values, sources)
    if values.get("prompt_tokens") is None and values.get("output_tokens") is None:
        # nobody described the traffic: the embedded default's workload, whole, and the result says so
        default = flatten({"workload": default_deployment()["workload"]}, "the embedded default")
        for name, item in default.items():
            if name not in values:
                values[name] = field_value(name, item, None)
                sources[name] = EMBEDDED
    for side in ("prompt_tokens", "output_tokens"):
        if values.get(side) is None:
            raise SpecError(side, "the workload gives the other length distribution but not this one",
                            info(side).accepted)
    parse_on_off(values.get("on_off"))  # read when given, whether or not a simulation reads it
    return Request(**values, sources=sources)


def parse_on_off(text: str | None) -> tuple[float, float] | None:
    """(PERIOD, ON) seconds of `on_off`: repeating bursts, ON seconds of every PERIOD."""
    if text is None:
        return None
    try:
        period, on = (float(v) for v in text.split(","))
    except ValueError:
        raise SpecError("on_off", f"cannot read {text!r:.80}", "PERIOD,ON in seconds, 0 < ON <= PERIOD") from None
    if not (math.isfinite(period) and 0 < on <= period):
        raise SpecError("on_off", f"PERIOD {period:g}, ON {on:g}: ON must be in (0, PERIOD]", "PERIOD,ON seconds")
    return period, on


def load_request(path: str | Path | None = None, **overrides: Any) -> Request:
    """A request from a deployment file (or, with neither a file nor a target, the embedded default) and
    field overrides, which take precedence. Every value is validated; bad input raises `SpecError`."""
    if path is not None:
        if not isinstance(path, (str, Path)):
            raise SpecError("path", f"must be a deployment file's path, got {type(path).__name__}", "a str or a Path")
        p = Path(path)
        return build_request(read_yaml_file(p), overrides, "file", p.resolve().parent, str(p))
    if overrides.get("target") is None:
        return build_request(default_deployment(), overrides, EMBEDDED, None, "the embedded default")
    return build_request(None, overrides)


def apply_overrides(request: Request, changes: dict) -> Request:
    """`request` with `changes` applied as overrides, re-validated."""
    values: dict = {}
    sources = dict(request.sources)
    before = {name: getattr(request, name) for name in ("num_speculative_tokens", "mean_accepted_length",
                                                        "measured_at_k")}
    measured = _measured_k(before, sources)
    _layer(values, sources, changes, "override", Path.cwd())
    after = {**before, **values}
    _keep_measured_k(after, sources, measured)
    if after["measured_at_k"] != before["measured_at_k"] and "measured_at_k" not in values:
        values["measured_at_k"] = after["measured_at_k"]
    parse_on_off(values.get("on_off"))
    return dc_replace(request, **values, sources=sources)
