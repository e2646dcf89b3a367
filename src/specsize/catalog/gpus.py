"""The GPU catalog: memory as the driver reports it, bandwidth, FLOP/s, interconnect, each with its source."""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from importlib import resources

from ..core.errors import SpecError
from ..core.perf import Efficiency
from ..core.specs import GpuSpec
from ..core.units import from_gib


@lru_cache(maxsize=1)
def _rows() -> dict[str, dict]:
    data = json.loads((resources.files("specsize.catalog") / "data" / "gpus.json").read_text())
    return {row["id"]: row for row in data["gpus"]}


def gpu_ids() -> list[str]:
    return list(_rows())


def _spec(row: dict, memory_bytes: int | None = None) -> GpuSpec:
    return GpuSpec(
        gpu_id=row["id"], name=row["name"], vendor=row["vendor"], family=row.get("family", "unknown"),
        memory_bytes=memory_bytes if memory_bytes is not None else from_gib(row["memory_gib"]),
        memory_bandwidth_bytes_s=row["memory_bandwidth_bytes_s"], bf16_flops=row["bf16_flops"],
        fp8_flops=row["fp8_flops"], interconnect_bytes_s=row["interconnect_bytes_s"],
        sources={"memory": row["memory_source"], "performance": row["source"]},
    )


def all_gpus() -> list[GpuSpec]:
    return [_spec(row) for row in _rows().values()]


def load_gpu(gpu_id: str | None, memory_gib: float | None = None) -> GpuSpec:
    """A catalog GPU (case-insensitive id), optionally with its memory overridden by `memory_gib`."""
    memory = None
    if memory_gib is not None:
        if not memory_gib > 0:
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


@lru_cache(maxsize=1)
def _efficiency_rows() -> dict:
    return json.loads((resources.files("specsize.catalog") / "data" / "efficiency.json").read_text())["families"]


def load_efficiency(gpu: GpuSpec, overrides: dict | None = None) -> Efficiency:
    """The calibrated efficiencies of the GPU's family, with any field overridden by the user."""
    rows = _efficiency_rows()
    row = dict(rows.get(gpu.family, rows["unknown"]))
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in row or key == "source":
            raise SpecError(key, "unknown efficiency field", ", ".join(k for k in row if k != "source"))
        if not value > 0:
            raise SpecError(key, f"must be positive, got {value}", "a number > 0")
        row[key] = float(value)
        row["source"] = row["source"] + f"; {key} overridden by the user"
    return Efficiency(family=gpu.family, **row)
