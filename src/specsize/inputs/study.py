"""A sweep study (YAML) -> a validated `Study` and its cells, each keyed by a hash of its inputs.

A study is a cross product of axes over the one field table (`inputs.request`): every key a study sets is a
`Request` field and is validated by that field's declaration, never redeclared here.

    name: fleet
    seed: 7                          # the base of every cell's seed
    base: {max_model_len: 16384, ttft_slo_ms: 2000}   # fields every cell shares (`workload:` may nest)
    axes:                            # the cross product, in this order
      gpu: [H100-SXM-80GB, H200-141GB]             # a field axis: a list of that field's values
      drafter:                                     # a group axis: mappings of fields that vary together
        - {label: none, method: none}
        - {method: eagle3, draft: ..., mean_accepted_length: 3.2, measured_at_k: 4}
    compute: {simulate: {duration: 30}}            # plan always; simulate spec and no-spec where it fits
    prices: {H100-SXM-80GB: 2.5}                   # $ per GPU-hour, for the cost per million tokens
    slo_attainment: 0.99                           # the share of requests within the SLO a fleet needs

A value that is wrong on its own (a negative TP, an unknown GPU dtype) is a study error: one line naming it,
exit 2. A combination that cannot be planned (a head for another target) is a cell error, recorded in the
results with its message while the rest of the study runs.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

from ..catalog.gpus import load_gpu
from ..core.errors import SpecError
from ..core.specs import DTYPE_ALIASES, LengthDistribution, quantization_format
from .fields import BOOL_ACCEPTED, SIMULATION, WORKLOAD, coerce, parse_bool
from ..engines.registry import is_series, release_key
from .load import MODEL_FIELDS, PATH_FIELDS, model_near, parse_on_off, read_yaml_file, resolved, validated
from .request import FIELDS, YAML_WORKLOAD_KEYS, info

STUDY_KEYS = ("name", "description", "seed", "base", "axes", "compute", "prices", "slo_attainment", "tenants")
COMPUTE_KEYS = ("speedup", "simulate")
SIMULATE_KEYS = ("duration", "when", "no_compare")
SIMULATE_ON = ("fits", "fits_or_thin")
# the fields a cell may not set: what a sweep computes per cell is the study's `compute:`, not a field
NOT_AXES = ("simulate", "duration", "seed", "store", "acceptance_from_store", "speedup_ks", "candidates",
            "name", "description", "security", "no_compare")
LABEL = "label"
TENANT_GROUPS = (WORKLOAD, SIMULATION)
LOAD_FIELDS = ("concurrency", "rate")
# the code whose change changes a cell's answer: part of every cell key, so new code never reuses old rows
MODEL_PACKAGES = ("core", "planner", "simulator", "engines", "catalog", "inputs")
# ... and the modules a cell's row goes through beside them (sweep.cell asks the api, reports.sweep makes its columns)
MODEL_MODULES = ("api.py", "sweep/cell.py", "reports/sweep.py")


@dataclass(frozen=True)
class Axis:
    name: str
    group: bool  # a group axis sets several fields per value; a field axis sets the one field `name`
    values: tuple[dict, ...]  # per value: {field: canonical value}
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Compute:
    speedup: bool = True
    simulate: bool = False
    duration_s: float = 30.0
    simulate_on: str = "fits_or_thin"  # which verdicts are simulated
    no_compare: bool = False


@dataclass(frozen=True)
class Cell:
    key: str  # sha256 hex of the inputs, the compute settings, the study seed and the model version
    index: int  # position in the cross product (for people; rows are ordered by key)
    seed: int  # the simulation seed of this cell: from its key, the same wherever it runs
    values: dict  # {field: canonical JSON value}: what `api.load_request(**values)` is called with
    labels: dict  # {group axis: label}


@dataclass(frozen=True)
class Study:
    name: str
    path: str
    seed: int
    base: dict
    axes: tuple[Axis, ...]
    compute: Compute
    prices: dict
    slo_attainment: float
    model_version: str
    digests: dict  # {path: sha256 of its content}: a cell key hashes what a file holds, not where it lies
    tenants: tuple[str, ...] | None = None  # the axes a tenant is a combination of (None: the traffic axes)

    @property
    def size(self) -> int:
        return math.prod(len(axis.values) for axis in self.axes)

    def input_fields(self) -> tuple[str, ...]:
        """Every field some cell sets, in the field table's order: the input columns of the results."""
        named = set(self.base)
        for axis in self.axes:
            for value in axis.values:
                named |= set(value)
        return tuple(name for name in FIELDS if name in named)

    def group_axes(self) -> tuple[str, ...]:
        return tuple(axis.name for axis in self.axes if axis.group)

    def tenant_columns(self) -> tuple[str, ...]:
        """The axes that describe traffic (every field they set is a workload or scenario field): a tenant is
        one combination of them, and the chosen fleet has one configuration per tenant. `tenants:` names them
        instead (e.g. the target too, when every model is served)."""
        if self.tenants is not None:
            return self.tenants
        return tuple(axis.name for axis in self.axes
                     if all(info(name).group in TENANT_GROUPS for value in axis.values for name in value))

    def load_column(self) -> str | None:
        """The column that says the load: a concurrency or rate axis, or a group axis that sets one."""
        for field in LOAD_FIELDS:
            for axis in self.axes:
                if any(field in value for value in axis.values):
                    return axis.name
        return None

    def labels_at(self, index: int) -> dict[str, str]:
        """The group axes' labels of the cell at `index` of the cross product, in cells()' order (the last axis
        varies fastest), without walking the cells before it."""
        picks = []
        for axis in reversed(self.axes):
            index, pick = divmod(index, len(axis.values))
            picks.append(pick)
        return {axis.name: axis.labels[pick] for axis, pick in zip(self.axes, reversed(picks)) if axis.group}

    def cells(self) -> Iterator[Cell]:
        """The cross product, lazily (a million-cell study never sits in memory)."""
        settings = _canonical_json({"compute": self.compute.__dict__, "seed": self.seed, "model": self.model_version})
        for index, choice in enumerate(itertools.product(*(range(len(axis.values)) for axis in self.axes))):
            values = dict(self.base)
            labels = {}
            for axis, pick in zip(self.axes, choice):
                values.update(axis.values[pick])
                if axis.group:
                    labels[axis.name] = axis.labels[pick]
            keyed = {k: self.digests.get(v, v) if k in KEYED_BY_CONTENT else v for k, v in values.items()}
            key = hashlib.sha256((_canonical_json(keyed) + settings).encode()).hexdigest()
            yield Cell(key=key, index=index, seed=int(key[:8], 16), values=values, labels=labels)

    def price_of(self, gpu: Any) -> float | None:
        """A cell's $ per GPU-hour: its gpu (as written) as the catalog spells it, in `prices` (an unknown GPU has
        none: the cell is invalid anyway)."""
        catalog_id = _catalog_gpu_id(gpu) if isinstance(gpu, str) else None
        return self.prices.get(catalog_id) if catalog_id is not None else None


@lru_cache(maxsize=256)
def _catalog_gpu_id(gpu: str) -> str | None:
    """A GPU as the catalog spells it (ids are case-insensitive, as everywhere): prices and cells meet on it; None
    for no catalog GPU."""
    try:
        return load_gpu(gpu).gpu_id
    except SpecError:
        return None


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


@lru_cache(maxsize=1)
def model_version() -> str:
    """A hash of the modelling code and data (the packages in MODEL_PACKAGES, sources and data files, and the modules
    in MODEL_MODULES)."""
    digest = hashlib.sha256()
    root = resources.files("specsize")
    paths = [path for package in MODEL_PACKAGES for path in sorted(_files(root / package))] + list(MODEL_MODULES)
    for path in paths:
        digest.update(path.encode())
        digest.update((root / path).read_bytes())
    return digest.hexdigest()[:16]


def _files(folder, prefix: str = "") -> Iterator[str]:
    name = prefix + folder.name
    for item in folder.iterdir():
        if item.is_dir() and item.name != "__pycache__":
            yield from _files(item, name + "/")
        elif item.is_file() and item.name.endswith((".py", ".json", ".yaml", ".yml", ".csv")):
            yield f"{name}/{item.name}"


def _file_digest(path: str, where: str = "study") -> str:
    """The file's digest, or a one-line error naming `where`, the study key that names the file (base.samples_file,
    axes.trace[1]: a missing file had been named only as "study")."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError as err:
        raise SpecError(where, f"cannot read {path} ({err.strerror})", "a readable file") from None


def _field_value(name: str, raw: Any, where: str, base: Path, digests: dict) -> Any:
    """`raw` as field `name` declares it, in a JSON form that `load_request` reads back (the canonical form
    the cell key hashes)."""
    if name not in FIELDS or name in NOT_AXES:
        allowed = sorted(set(FIELDS) - set(NOT_AXES))
        raise SpecError(where, f"{name!r} is not a field a study cell can set", ", ".join(allowed))
    if raw is None:
        return None
    try:
        value = _alone(name, validated(name, raw))
    except SpecError as err:
        raise SpecError(f"{where}", err.problem, err.accepted) from None
    if isinstance(value, LengthDistribution):
        return {"p50": value.p50, "p95": value.p95, "p99": value.p99, "max": value.max}
    if isinstance(value, tuple):
        return list(value)
    if name in MODEL_FIELDS:
        try:
            near = model_near(value, base, name)
        except SpecError as err:
            raise SpecError(where, err.problem, err.accepted) from None
        if near != value:  # a model beside the study: its cell key hashes its config.json, not where it lies
            config = Path(near) / "config.json" if Path(near).is_dir() else Path(near)
            digests[near] = "sha256:" + _file_digest(str(config), where)
        return near
    if name in PATH_FIELDS or info(name).kind == "path":
        path = Path(value) if Path(value).is_absolute() else resolved(base / value, where)
        digests[str(path)] = "sha256:" + _file_digest(str(path), where)  # unreadable now: a study error
        return str(path)
    return value


def _alone(name: str, value: Any) -> Any:
    """A value wrong whatever the rest of its cell stops the study before it starts, as `plan` refuses it (docs/sweep.md):
    a GPU the catalog lacks (a GPU is kept as the catalog spells it, so that two spellings are one value), an engine
    release no one can read, an on_off that does not parse; values the engine cannot take together are their cell's
    own (status invalid)."""
    if name == "gpu":
        return load_gpu(value).gpu_id
    if name == "engine_version" and value not in ("", "latest") and release_key(value) is None:
        raise SpecError(name, f"cannot read version {value!r}", "X.Y, X.Y.Z or X.Y.Z.postN, or latest")
    if name == "on_off":
        parse_on_off(value)
    return value


def sized_as(name: str, value: Any) -> Any:
    """What a cell is planned from for a value written one of several ways: the spellings of one dtype (bf16,
    bfloat16), vLLM's and SGLang's name of one fp8 KV cache (fp8, fp8_e4m3: E4M3 on both), the names of one override
    that every engine is given alike and that is sized alike (int4, awq, awq_marlin: 4-bit weights with zero points,
    --quantization awq_marlin), and a release written twice alike (0.10.1 and v0.10.1; a series X.Y and its X.Y.0
    stay two cells: the release checks read a series as its newest release, engines.methods). Two values of an axis with one such form had made two cells with one set of
    numbers under two labels."""
    if not isinstance(value, str):
        return value
    if name == "dtype":
        return DTYPE_ALIASES.get(value.lower(), value)
    if name in ("kv_cache_dtype", "draft_kv_cache_dtype"):
        return "fp8" if value.lower() in ("fp8", "fp8_e4m3") else value.lower()
    if name == "quantization":
        from ..engines.emit import engine_quantization  # noqa: PLC0415

        return (quantization_format(value), engine_quantization("vllm", value), engine_quantization("sglang", value))
    if name == "engine_version":  # a series (X.Y) is checked as its newest release, X.Y.0 as itself: two cells
        key = release_key(value)
        return (key, is_series(value)) if key else value
    return value


def _repeats(name: str, values: list[Any], labels: tuple[str, ...]) -> str | None:
    """The first two labels whose values are one value as a cell is sized (sized_as), for the refusal."""
    seen: dict[str, str] = {}
    for value, label in zip(values, labels):
        key = _canonical_json(value)
        if key in seen:
            return f"{seen[key]!r} and {label!r}"
        seen[key] = label
    return None


def _text(value: Any, where: str, what: str) -> str:
    """A name or a label as written: a string (a number reads as its digits); a list or null is refused, not shown as
    its Python form."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or not str(value).strip():
        raise SpecError(where, f"must be a non-empty string, got {value!r}", what)
    return str(value)


def _fields(mapping: Any, where: str, base: Path, digests: dict, allow_label: bool = False) -> tuple[dict, str | None]:
    if not isinstance(mapping, dict):
        raise SpecError(where, f"must be a mapping of fields, got {type(mapping).__name__}", "field: value")
    out: dict = {}
    label = None

    def put(key: str, raw: Any, at: str) -> None:
        # a workload field may sit at the top of the mapping or under its `workload:`, not at both: the later one had
        # replaced the other without a word (base's prompt_tokens 100/200 beside workload.prompt_tokens 5000/9000 ran
        # every cell at 5000/9000)
        if out.get(key) is not None and raw is not None:  # a null is unset, as everywhere
            raise SpecError(at, f"{key} is given twice in {where}: at its top and under its workload:",
                            f"{key} once, at the top or under workload:")
        if raw is not None or key not in out:
            out[key] = _field_value(key, raw, at, base, digests)

    for key, raw in mapping.items():
        key = str(key)
        if allow_label and key == LABEL:
            label = _text(raw, f"{where}.{LABEL}", "a label for this value")
        elif key == "workload" and isinstance(raw, dict):
            for inner, inner_raw in raw.items():
                if inner not in YAML_WORKLOAD_KEYS:
                    raise SpecError(f"{where}.workload", f"unknown key {inner!r}", ", ".join(YAML_WORKLOAD_KEYS))
                put(inner, inner_raw, f"{where}.workload.{inner}")
        else:
            put(key, raw, f"{where}.{key}")
    return {k: v for k, v in out.items() if v is not None}, label


def _label(value: dict) -> str:
    return ",".join(f"{k}={json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in value.items()) or "-"


def _axis(name: str, raw: Any, base: Path, digests: dict) -> Axis:
    where = f"axes.{name}"
    if not isinstance(raw, list) or not raw:
        raise SpecError(where, "must be a non-empty list of values", "[value, ...] or [{field: value, ...}, ...]")
    if name in FIELDS:
        values = tuple({name: _field_value(name, item, f"{where}[{i}]", base, digests)} for i, item in enumerate(raw))
        labels = tuple(str(v[name]) for v in values)
        if len(set(labels)) != len(labels):  # one cell key per value: a repeat would be computed, then merged away
            raise SpecError(where, f"repeats a value: {list(labels)}", "distinct values")
        alike = _repeats(name, [sized_as(name, v[name]) for v in values], labels)
        if alike:
            raise SpecError(where, f"repeats a value: {alike} are one {name} as a cell is planned, two cells of one "
                            "set of numbers", "distinct values (one spelling of each)")
        return Axis(name=name, group=False, values=values, labels=labels)
    if not any(isinstance(item, dict) for item in raw):  # plain values: a field axis under a name no field has
        close = difflib.get_close_matches(name, list(FIELDS), n=1)
        raise SpecError(where, f"{name!r} is no field" + (f"; did you mean {close[0]}?" if close else "")
                        + " (an axis of plain values is named after the field it sets)",
                        "a field name (docs/cli.md), or a group axis of mappings: [{label: ..., field: value}, ...]")
    parsed = [_fields(item, f"{where}[{i}]", base, digests, allow_label=True) for i, item in enumerate(raw)]
    values = tuple(v for v, _ in parsed)
    labels = tuple(label or _label(v) for v, label in parsed)
    if len(set(labels)) != len(labels):
        raise SpecError(where, "two values have the same label", f"distinct `{LABEL}:` per value")
    settings = [_canonical_json({k: sized_as(k, x) for k, x in v.items()}) for v in values]  # bf16 is bfloat16
    if len(set(settings)) != len(settings):  # one cell computed twice, then merged: a label would vanish
        twice = [labels[i] for i, v in enumerate(settings) if settings.count(v) > 1]
        raise SpecError(where, f"values {twice} set the same fields to the same values", "distinct settings per value")
    return Axis(name=name, group=True, values=values, labels=labels)


def _every_cell_sets(base: dict, axes: tuple, names: tuple[str, ...]) -> bool:
    """Whether every cell sets one of `names`: base does, or an axis every value of which does."""
    return any(name in base for name in names) or any(all(any(name in value for name in names)
                                                          for value in axis.values) for axis in axes)


def _keep_measured_k(base: dict, axes: tuple[Axis, ...]) -> None:
    """A mean accepted length under `base:` beside its k, and an axis of k: every cell's k is an axis value, and the
    mean stays measured at the k it was given beside (as a flag's k leaves a deployment file's mean at the file's k,
    inputs.load._keep_measured_k). Each cell had read base's mean 2.5 as measured at its own k: at k = 2, a = 0.82
    where base's k = 3 gives 0.69. Pinned only where no axis gives a mean of its own (measured at its own cell's k)."""
    k = base.get("num_speculative_tokens")
    if base.get("mean_accepted_length") is None or base.get("measured_at_k") is not None or not k:
        return
    sets = {name for axis in axes for value in axis.values for name in value}
    if "num_speculative_tokens" in sets and not sets & {"mean_accepted_length", "acceptance_rate", "measured_at_k"}:
        base["measured_at_k"] = k


def _compute(raw: Any) -> Compute:
    if raw is None:
        return Compute()
    if not isinstance(raw, dict):
        raise SpecError("compute", "must be a mapping", ", ".join(COMPUTE_KEYS))
    for key in raw:
        if key not in COMPUTE_KEYS:
            raise SpecError(f"compute.{key}", "unknown key", ", ".join(COMPUTE_KEYS))
    # null: unset, as everywhere; a boolean in any spelling a deployment file takes (fields.parse_bool)
    speedup = True if raw.get("speedup") is None else parse_bool("compute.speedup", raw["speedup"])
    sim = raw.get("simulate", False)
    if not isinstance(sim, dict) and sim is not None:  # true / false as any boolean is written; else a mapping
        try:
            sim = {} if parse_bool("compute.simulate", sim) else None
        except SpecError:
            raise SpecError("compute.simulate", f"must be true, false or a mapping, got {sim!r:.80}",
                            f"{BOOL_ACCEPTED}, or a mapping of {', '.join(SIMULATE_KEYS)}") from None
    if sim is None:
        return Compute(speedup=speedup)
    for key in sim:
        if key not in SIMULATE_KEYS:
            raise SpecError(f"compute.simulate.{key}", "unknown key", ", ".join(SIMULATE_KEYS))
    def given(key: str, default: Any) -> Any:  # null is unset, as in a deployment file: `duration:` with nothing
        value = sim.get(key)                      # after it had run each cell for the field's 300 s, not 30 s
        return default if value is None else value

    try:
        duration = validated("duration", given("duration", 30.0))
        no_compare = validated("no_compare", given("no_compare", False))
    except SpecError as err:
        raise SpecError(f"compute.simulate.{err.field}", err.problem, err.accepted) from None
    when = str(given("when", "fits_or_thin"))
    if when not in SIMULATE_ON:
        raise SpecError("compute.simulate.when", f"unknown value {when!r}", ", ".join(SIMULATE_ON))
    return Compute(speedup=speedup, simulate=True, duration_s=duration, simulate_on=when, no_compare=no_compare)


def _prices(raw: Any) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecError("prices", "must map GPU ids to $ per GPU-hour", "{GPU_ID: 2.5, ...}")
    out: dict[str, float] = {}
    for gpu, price in raw.items():
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 <= price < 1e6 \
                or not math.isfinite(price):
            raise SpecError(f"prices.{gpu}", f"must be a price in $ per GPU-hour, got {price!r}", "a number >= 0")
        try:  # the catalog's spelling, as the cells' (_catalog_gpu_id); an unknown id with the closest ones
            gpu_id = load_gpu(str(gpu)).gpu_id
        except SpecError as err:
            raise SpecError(f"prices.{gpu}", err.problem, err.accepted) from None
        if gpu_id in out:
            raise SpecError(f"prices.{gpu}", f"prices {gpu_id} twice", "one price per GPU")
        out[gpu_id] = float(price)
    return out


KEYED_BY_CONTENT = (*PATH_FIELDS, *MODEL_FIELDS)  # a file a cell reads enters its key by its content (Study.digests)
MAX_CELLS = 1_000_000  # a plan takes ~5-10 ms a cell on one core: a million is hours on a small cluster, not days


def read_study(path: str | Path) -> Study:
    """The study at `path`, every value validated by its field's declaration."""
    p = Path(path)
    data = read_yaml_file(p, "study")
    for key in data:
        if key not in STUDY_KEYS:
            raise SpecError(str(key), "unknown key in the study", ", ".join(STUDY_KEYS))
    base_dir = p.resolve().parent
    digests: dict = {}
    base, _ = _fields(data.get("base") or {}, "base", base_dir, digests)
    axes_raw = data.get("axes")
    if not isinstance(axes_raw, dict) or not axes_raw:
        raise SpecError("axes", "a study needs at least one axis", "a mapping of axis name: [values]")
    axes = tuple(_axis(str(name), raw, base_dir, digests) for name, raw in axes_raw.items())
    cells = math.prod(len(axis.values) for axis in axes)
    if cells > MAX_CELLS:
        raise SpecError("axes", f"the study holds {cells:,} cells; at most {MAX_CELLS:,} are run",
                        "fewer values per axis (the cells are the product of the axes' lengths)")
    seen: dict[str, str] = {}
    for axis in axes:
        for name in {field for value in axis.values for field in value}:
            if name in seen:
                raise SpecError(f"axes.{axis.name}", f"sets {name!r}, which axis {seen[name]!r} also sets",
                                "each field on one axis")
            seen[name] = axis.name
    _keep_measured_k(base, axes)
    if not _every_cell_sets(base, axes, ("target",)):
        # plan's embedded default (its 70B and 1B draft) would be those cells' model, in no column of the table
        raise SpecError("target", "the study does not name every cell's target model (in base:, or on an axis "
                        "whose every value sets it)", "target: a model id (specsize models), a config.json or a "
                        "model folder")
    if not _every_cell_sets(base, axes, ("gpu", "gpu_memory_gib")):
        # every cell had been run and recorded invalid ("gpu: no GPU given"), the sweep exiting 0 with a table of errors
        raise SpecError("gpu", "the study does not name every cell's GPU (in base:, or on an axis whose every value "
                        "sets it)", "gpu: a GPU id (specsize gpus), or gpu_memory_gib for a card of that memory")
    seed = coerce("seed", info("seed"), 0 if data.get("seed") is None else data["seed"])  # the command line's bounds
    attainment = data.get("slo_attainment", 0.99)
    if isinstance(attainment, bool) or not isinstance(attainment, (int, float)) or not 0 < attainment <= 1:
        raise SpecError("slo_attainment", f"must be a share, got {attainment!r}", "a number > 0 and <= 1")
    tenants = data.get("tenants")
    if tenants is not None:
        names = [axis.name for axis in axes]
        if not isinstance(tenants, list) or any(t not in names for t in tenants) or len(set(tenants)) != len(tenants):
            raise SpecError("tenants", f"must list distinct axis names, got {tenants!r}", ", ".join(names))
        tenants = tuple(tenants)
    name = p.stem if data.get("name") is None else _text(data["name"], "name", "a name for the study")
    study = Study(name=name, path=str(p), seed=seed, base=base, axes=axes,
                  compute=_compute(data.get("compute")), prices=_prices(data.get("prices")),
                  slo_attainment=float(attainment), model_version=model_version(), digests=digests, tenants=tenants)
    if study.size > 100_000_000:
        raise SpecError("axes", f"{study.size:,} cells", "at most 100,000,000 cells per study")
    return study
