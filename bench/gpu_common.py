"""Shared by the GPU checks (bench/gpu_*.py): PyTorch with a CUDA device, and the catalog GPU it is.

Not a check itself (`dev.py bench` leaves every bench/gpu_*.py out: they need a CUDA machine).
"""

from __future__ import annotations

import statistics
import sys


def cuda_torch(script: str):
    """torch when it is installed and sees a CUDA device; else None, with the reason printed on stderr."""
    try:
        import torch
    except ImportError:
        print(f"{script}: PyTorch is not installed (pip install 'specsize[measure]')", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{script}: no CUDA device: this check runs on a GPU machine", file=sys.stderr)
        return None
    return torch


def gpu_of(name: str):
    """The catalog GPU whose name matches the device's (NVIDIA H200 -> H200-141GB), or None."""
    from specsize.catalog.gpus import all_gpus

    key = name.replace("NVIDIA", "").strip().split()[0].upper()
    for g in all_gpus():
        if g.gpu_id.upper().startswith(key) and g.vendor == "nvidia":
            return g
    return None


def cuda_gpu(script: str):
    """(torch, the catalog GPU of CUDA device 0, that GPU's efficiencies), or None with the reason printed."""
    torch = cuda_torch(script)
    if torch is None:
        return None
    name = torch.cuda.get_device_name(0)
    gpu = gpu_of(name)
    if gpu is None:
        print(f"{script}: {name} is not in the GPU catalog", file=sys.stderr)
        return None
    from specsize.catalog.gpus import load_efficiency

    return torch, gpu, load_efficiency(gpu)


def timed(torch, fn, runs: int = 20, prepare=None) -> float:
    """Median seconds of `runs` calls of `fn`, timed with CUDA events; with `prepare`, each call is fn(prepare()),
    the argument made before the timing starts."""
    times = []
    for _ in range(runs):
        arg = prepare() if prepare is not None else None
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(arg) if prepare is not None else fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)
