"""The GPU catalog: memory as the driver reports it, bandwidth, FLOP/s, interconnect, each with its source."""

from __future__ import annotations

import dataclasses
import re
import difflib
import math
import numbers
from functools import lru_cache

from ..core.errors import SpecError
from ..core.perf import Efficiency
from ..core.specs import GpuSpec
from ..core.units import from_gib
from .files import RowCheck, catalog_error, packaged_json, row_label

GPUS_FILE = "gpus.json"
SEGMENTS = ("datacenter", "workstation", "consumer")
EFFICIENCY_FILE = "efficiency.json"


def validate_gpu_rows(file_name: str, rows: object) -> dict[str, dict]:
    """id -> row of the GPU catalog's rows, each checked: a bad row raises SpecError naming the file and the row.

    Required: id, name, vendor, memory_source, source (non-empty strings); memory_gib,
    memory_bandwidth_bytes_s, bf16_flops, interconnect_bytes_s (finite numbers > 0); fp8_flops (> 0 or null,
    for GPUs without FP8 tensor cores). Optional strings: family, interconnect_note, segment (datacenter,
    workstation or consumer; default datacenter). Ids are unique, ignoring case.
    """
    if not isinstance(rows, list):
        raise catalog_error(file_name, None, f"'gpus' must be a list of rows, got {type(rows).__name__}",
                            "a JSON list of GPU rows")
    by_id: dict[str, dict] = {}
    seen: dict[str, str] = {}
    for index, row in enumerate(rows):
        check = RowCheck(file_name, row_label(row, index), row)
        gpu_id = check.text("id")
        for key in ("name", "vendor", "memory_source", "source"):
            check.text(key)
        for key in ("family", "interconnect_note", "segment"):
            check.text(key, required=False)
        if check.data.get("segment", "datacenter") not in SEGMENTS:
            raise catalog_error(file_name, check.row, f"segment {check.data['segment']!r} is not one of ours",
                                ", ".join(SEGMENTS))
        for key in ("memory_gib", "memory_bandwidth_bytes_s", "bf16_flops", "interconnect_bytes_s"):
            check.number(key)
        check.number("fp8_flops", nullable=True)
        assert gpu_id is not None  # required above
        if gpu_id.lower() in seen:
            raise catalog_error(file_name, check.row, f"duplicate id (same as row {seen[gpu_id.lower()]!r}, "
                                "ignoring case)", "one row per GPU id")
        seen[gpu_id.lower()] = gpu_id
        by_id[gpu_id] = check.data
    if not by_id:
        raise catalog_error(file_name, None, "holds no GPU rows", "at least one GPU row")
    return by_id


@lru_cache(maxsize=1)
def _rows() -> dict[str, dict]:
    data = packaged_json(GPUS_FILE)
    if not isinstance(data, dict) or "gpus" not in data:
        raise catalog_error(GPUS_FILE, None, "must be a JSON object with a 'gpus' list", '{"gpus": [...]}')
    return validate_gpu_rows(GPUS_FILE, data["gpus"])


def gpu_ids() -> list[str]:
    return list(_rows())


def _spec(row: dict, memory_bytes: int | None = None) -> GpuSpec:
    return GpuSpec(
        gpu_id=row["id"], name=row["name"], vendor=row["vendor"], family=row.get("family", "unknown"),
        memory_bytes=memory_bytes if memory_bytes is not None else from_gib(row["memory_gib"]),
        memory_bandwidth_bytes_s=row["memory_bandwidth_bytes_s"], bf16_flops=row["bf16_flops"],
        fp8_flops=row["fp8_flops"], interconnect_bytes_s=row["interconnect_bytes_s"],
        sources={"memory": row["memory_source"], "performance": row["source"]},
        segment=row.get("segment", "datacenter"),
    )


def all_gpus() -> list[GpuSpec]:
    return [_spec(row) for row in _rows().values()]


def load_gpu(gpu_id: str | None, memory_gib: float | None = None) -> GpuSpec:
    """A catalog GPU (case-insensitive id), optionally with its memory overridden by `memory_gib`."""
    memory = None
    if memory_gib is not None:
        if not _positive_number(memory_gib):
            raise SpecError("gpu_memory_gib", f"must be positive, got {memory_gib}", "a number of GiB > 0")
        memory = from_gib(memory_gib)
    rows = _rows()
    if gpu_id is None:
        if memory is None:
            raise SpecError("gpu", "no GPU given", ", ".join(rows))
        return GpuSpec(gpu_id="custom", name=f"custom {memory_gib:g} GiB GPU", memory_bytes=memory,
                       memory_bandwidth_bytes_s=0.0, bf16_flops=0.0, fp8_flops=None, interconnect_bytes_s=0.0,
                       sources={"memory": "--gpu-memory-gib"})
    by_lower = {key.lower(): key for key in rows}
    key = by_lower.get(str(gpu_id).lower())
    if key is None:
        close = difflib.get_close_matches(str(gpu_id).lower(), list(by_lower), n=3, cutoff=0.3)
        hint = "; did you mean " + ", ".join(by_lower[c] for c in close) + "?" if close else ""
        raise SpecError("gpu", f"unknown GPU {gpu_id!r}{hint}", ", ".join(rows))
    spec = _spec(rows[key], memory)
    if memory is not None:
        spec.sources["memory"] = f"--gpu-memory-gib {memory_gib:g}"
    return spec


_EFFICIENCY_FIELDS = {f.name for f in dataclasses.fields(Efficiency)} - {"family"}
_EFFICIENCY_OPTIONAL = {f.name for f in dataclasses.fields(Efficiency)
                        if f.default is not dataclasses.MISSING} - {"source"}


def validate_efficiency_rows(file_name: str, rows: object) -> dict[str, dict]:
    """family -> row of the efficiency catalog, each checked: a bad row raises SpecError naming the file and row.

    Every row holds the Efficiency fields: memory and compute are fractions of peak (0 < x <= 1), the
    *_s costs are finite seconds >= 0, source is a non-empty string; no other key. A row 'unknown' is the
    fallback of GPUs whose family has none, so it must be there.
    """
    if not isinstance(rows, dict):
        raise catalog_error(file_name, None, f"'families' must be an object of rows, got {type(rows).__name__}",
                            "a JSON object: family -> row")
    for family, row in rows.items():
        check = RowCheck(file_name, f"row {family!r}", row)
        check.only(_EFFICIENCY_FIELDS)
        check.text("source")
        for key in sorted(_EFFICIENCY_FIELDS - {"source"}):
            required = key not in _EFFICIENCY_OPTIONAL
            if key in ("memory", "compute"):
                check.number(key, maximum=1.0)
            else:
                check.number(key, required=required, inclusive=True)
    if "unknown" not in rows:
        raise catalog_error(file_name, None, "has no 'unknown' family (the fallback of unlisted families)",
                            "a row 'unknown'")
    return rows


@lru_cache(maxsize=1)
def _efficiency_rows() -> dict:
    data = packaged_json(EFFICIENCY_FILE)
    if not isinstance(data, dict) or "families" not in data:
        raise catalog_error(EFFICIENCY_FILE, None, "must be a JSON object with a 'families' object",
                            '{"families": {...}}')
    return validate_efficiency_rows(EFFICIENCY_FILE, data["families"])


def _positive_number(value: object) -> bool:
    """A finite number > 0 (numpy scalars included; booleans, strings and NaN are not)."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value) and float(value) > 0


def load_efficiency(gpu: GpuSpec, overrides: dict | None = None) -> Efficiency:
    """The calibrated efficiencies of the GPU's family, with any field overridden by the user."""
    rows = _efficiency_rows()
    row = dict(rows.get(gpu.family, rows["unknown"]))
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in row or key == "source":
            raise SpecError(key, "unknown efficiency field", ", ".join(k for k in row if k != "source"))
        if key.endswith("_s"):  # a time (a fixed cost): 0 is none, as the request's bounds accept
            if not (_positive_number(value) or value == 0):
                raise SpecError(key, f"must be a time >= 0, got {value}", "seconds >= 0")
        elif not _positive_number(value):
            raise SpecError(key, f"must be positive, got {value}", "a number > 0")
        row[key] = float(value)
        row["source"] = row["source"] + f"; {key} overridden by the user"
    return Efficiency(family=gpu.family, **row)


_SMI_TABLE = re.compile(r"\|\s*(?P<used>\d+)\s*MiB\s*/\s*(?P<total>\d+)\s*MiB\s*\|")
_SMI_CSV_VALUE = re.compile(r"^\s*(?P<used>\d+(?:\.\d+)?)\s*(?P<unit>MiB|GiB|MB|GB)?\s*$", re.IGNORECASE)
SMI_MAX_DIGITS = 12  # a figure in MiB or GiB: 12 digits is a million times any GPU's memory


def _smi_figure(digits: str) -> float:
    """One memory figure of the printout; a figure of more digits than SMI_MAX_DIGITS is no GPU's (and past 308 or
    4,300 digits not even a number Python converts)."""
    if len(digits.split(".")[0]) > SMI_MAX_DIGITS:
        raise SpecError("nvidia_smi", f"a memory figure of {len(digits.split('.')[0]):,} digits",
                        f"nvidia-smi's own figures (at most {SMI_MAX_DIGITS} digits)")
    return float(digits)


def used_memory_from_nvidia_smi(text: str) -> int:
    """Bytes in use on the busiest GPU of an `nvidia-smi` printout taken before the engine starts: the table
    ("| 1234MiB / 24564MiB |") or `nvidia-smi --query-gpu=memory.used --format=csv[,noheader][,nounits]`
    (its memory.used column, named by the header; without a header the query must ask for memory.used alone)."""
    used = [int(_smi_figure(m["used"])) for m in _SMI_TABLE.finditer(text)]
    if not used:
        lines = [line for line in text.splitlines() if line.strip()]
        unit = "MiB"
        column = 0
        if lines and "memory.used" in lines[0]:
            names = [name.strip() for name in lines.pop(0).split(",")]
            found = next((i for i, name in enumerate(names) if name.startswith("memory.used")), None)
            if found is None:
                raise SpecError("nvidia_smi", "its header names no memory.used column", "nvidia-smi "
                                "--query-gpu=memory.used --format=csv (its header as nvidia-smi writes it)")
            column = found
            unit = "GiB" if "[GiB]" in names[column] else "MiB"
        elif any("," in line for line in lines):
            raise SpecError("nvidia_smi", "a CSV of several columns without a header: which one is memory.used is "
                            "not said", "nvidia-smi --query-gpu=memory.used --format=csv (a header, or memory.used "
                            "alone with noheader)")
        for line in lines:
            cells = line.split(",")
            match = _SMI_CSV_VALUE.match(cells[column]) if column < len(cells) else None
            if not match:
                used = []
                break
            scale = (match["unit"] or unit).lower()
            used.append(int(_smi_figure(match["used"]) * (1024 if scale in ("gib", "gb") else 1)))
    if not used:
        raise SpecError("nvidia_smi", "no memory figures found", "nvidia-smi's table or the output of nvidia-smi "
                        "--query-gpu=memory.used --format=csv")
    return max(used) * 2**20
