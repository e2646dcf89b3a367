"""Rendering of the listings: `specsize models`, `specsize gpus`, `specsize calibrations`."""

from __future__ import annotations


from ..core.specs import GpuSpec
from ..core.units import GiB
from .jsonsafe import dumps


def models(rows: list[dict], fmt: str) -> str:
    if fmt == "json":
        return dumps(rows)
    width = max(len(r["id"]) for r in rows)
    lines = [f"{'id':{width}}  {'type':12} {'layers':>6} {'params':>9}  attention     quant"]
    for r in rows:
        lines.append(f"{r['id']:{width}}  {r['model_type']:12} {r['layers']:>6} {r['params_b']:>8.2f}B  "
                     f"{r['attention']:13} {r['quantization'] or '-'}")
    return "\n".join(lines) + "\n"


def gpus(specs: list[GpuSpec], fmt: str) -> str:
    if fmt == "json":
        return dumps([{"id": g.gpu_id, "name": g.name, "vendor": g.vendor, "memory_bytes": g.memory_bytes,
                            "memory_bandwidth_bytes_s": g.memory_bandwidth_bytes_s, "bf16_flops": g.bf16_flops,
                            "fp8_flops": g.fp8_flops, "interconnect_bytes_s": g.interconnect_bytes_s,
                       "segment": g.segment, "sources": g.sources} for g in specs])
    lines = [f"{'id':20} {'memory GiB':>10} {'HBM TB/s':>9} {'bf16 TFLOP/s':>13} {'fp8 TFLOP/s':>12} {'link GB/s':>10}"]
    for g in specs:
        fp8 = f"{g.fp8_flops / 1e12:,.0f}" if g.fp8_flops else "-"
        lines.append(f"{g.gpu_id:20} {g.memory_bytes / GiB:>10.2f} {g.memory_bandwidth_bytes_s / 1e12:>9.2f} "
                     f"{g.bf16_flops / 1e12:>13,.0f} {fp8:>12} {g.interconnect_bytes_s / 1e9:>10.0f}")
    return "\n".join(lines) + "\n"


def calibrations(rows: list, path: object, fmt: str) -> str:
    if fmt == "json":
        return dumps([{**r.__dict__} for r in rows], default=str)
    lines = [f"{path}: {len(rows)} observation(s)"]
    for r in rows:
        figure = (f"a={r.acceptance_rate:.3f}" if r.acceptance_rate is not None else
                  f"mean accepted length {r.mean_accepted_length:.2f}" if r.mean_accepted_length is not None else "")
        lines.append(f"#{r.id} {r.created_at} {r.kind} '{r.tag}' {r.method or ''} {r.draft or ''} "
                     f"{'k=' + str(r.k) if r.k else ''} {figure} ({r.source})")
    return "\n".join(lines) + "\n"
