#!/usr/bin/env python3
"""Speed and scale of `specsize sweep` (issue #15). Prints:

- cells/s of a simulation study (plan + spec and no-spec simulation where the cell fits) on 1 and 2 local
  workers and on a local Ray cluster with 2 CPUs (started here: 127.0.0.1, dashboard off, token auth);
  the 2-worker speed-up (target >= 1.8x) and Ray's overhead per cell against the local pool at the same
  worker count (target < 5%);
- the driver's memory (RSS, sampled after every chunk) over a 20,000-cell screening study (plan only): flat
  means the last samples are no higher than the first ones plus a few MiB;
- an estimate of a 1,000,000-cell study on a 100-node cluster from the measured CPU-seconds per cell.

Run: .venv/bin/python bench/sweep_speed.py [--quick] [--cores-per-node 32] [--no-ray]
Timings are wall-clock on this machine: on a machine shared with other jobs, the 2-worker figure is bounded
by the cores actually free (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from specsize.sweep import driver  # noqa: E402

SIM_STUDY = """
name: bench-sim
seed: 1
base:
  max_model_len: 8192
  ttft_slo_ms: 3000
  tpot_slo_ms: 80
  workload:
    prompt_tokens: {{p50: 500, p95: 1500, p99: 3000, max: 6000}}
    output_tokens: {{p50: 150, p95: 400, p99: 600, max: 1000}}
axes:
  target: [meta-llama/Llama-3.1-8B-Instruct, Qwen/Qwen3-8B, Qwen/Qwen3-14B, meta-llama/Llama-3.1-70B-Instruct]
  drafter:
    - {{label: none, method: none}}
    - {{label: ngram, method: ngram, acceptance_rate: 0.4, num_speculative_tokens: 3}}
  gpu: [H100-SXM-80GB, H200-141GB]
  tp: [1, 4]
  kv_cache_dtype: [auto, fp8]
  concurrency: {concurrency}
compute:
  simulate: {{duration: {duration}, when: fits}}
prices: {{H100-SXM-80GB: 2.5, H200-141GB: 3.5}}
"""

SCREEN_STUDY = """
name: bench-screen
seed: 1
base:
  max_model_len: 16384
axes:
  target: [meta-llama/Llama-3.1-8B-Instruct, meta-llama/Llama-3.1-70B-Instruct, Qwen/Qwen3-8B, Qwen/Qwen3-32B,
           mistralai/Mistral-7B-Instruct-v0.3]
  gpu: [H100-SXM-80GB, H200-141GB, A100-80GB, L40S-48GB, MI300X-192GB]
  tp: [1, 2, 4, 8]
  kv_cache_dtype: [auto, fp8]
  drafter:
    - {label: none, method: none}
    - {label: ngram-k2, method: ngram, acceptance_rate: 0.4, num_speculative_tokens: 2}
    - {label: ngram-k4, method: ngram, acceptance_rate: 0.4, num_speculative_tokens: 4}
    - {label: ngram-k6, method: ngram, acceptance_rate: 0.4, num_speculative_tokens: 6}
  concurrency: [4, 16, 64, 256, 1024]
  workload:
    - {label: short, prompt_tokens: {p50: 200, p99: 1000}, output_tokens: {p50: 100, p99: 400}}
    - {label: chat, prompt_tokens: {p50: 800, p99: 6000}, output_tokens: {p50: 250, p99: 1000}}
    - {label: rag, prompt_tokens: {p50: 4000, p99: 12000}, output_tokens: {p50: 200, p99: 600}}
    - {label: code, prompt_tokens: {p50: 2000, p99: 8000}, output_tokens: {p50: 500, p99: 2000}}
    - {label: long, prompt_tokens: {p50: 8000, p99: 14000}, output_tokens: {p50: 300, p99: 1000}}
compute: {speedup: true}
"""


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed_run(study: Path, out: Path, **kw) -> tuple[float, int, float]:
    """(wall s, cells computed, steady-state cells/s: from the first chunk back to the last, which leaves out
    the pool's or Ray's start-up and the final write)."""
    for stale in (out, out.with_name(out.name + ".parts")):
        if stale.is_dir():
            for p in stale.iterdir():
                p.unlink()
            stale.rmdir()
        elif stale.exists():
            stale.unlink()
    marks: list[tuple[float, int]] = []

    def on_chunk(cells: int, failed: int) -> None:
        marks.append((time.perf_counter(), cells))

    start = time.perf_counter()
    run = driver.run(study, out, on_chunk=on_chunk, **kw)
    wall = time.perf_counter() - start
    steady = sum(c for _, c in marks[1:]) / (marks[-1][0] - marks[0][0]) if len(marks) > 2 else float("nan")
    return wall, run.computed, steady


def start_ray(cpus: int) -> tuple[subprocess.Popen, str, dict, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "RAY_USAGE_STATS_ENABLED": "0"}
    log = Path(temp) / "head.log"
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--node-ip-address",
                             "127.0.0.1", "--port", str(port), "--include-dashboard=false", "--num-cpus", str(cpus),
                             "--temp-dir", temp, "--disable-usage-stats", "--block"], stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 90
    while "--block" not in log.read_text():
        if head.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(log.read_text()[-2000:])
        time.sleep(0.2)
    return head, f"127.0.0.1:{port}", env, temp


def stop_ray(head: subprocess.Popen, temp: str) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            break
        try:
            head.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(head.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    shutil.rmtree(temp, ignore_errors=True)


def screening_memory(folder: Path, workers: int) -> dict:
    study = folder / "screen.yaml"
    study.write_text(SCREEN_STUDY)
    samples: list[tuple[int, float]] = []
    done = [0]

    def on_chunk(cells: int, failed: int) -> None:
        done[0] += cells
        samples.append((done[0], _rss_mib()))

    before = _rss_mib()
    start = time.perf_counter()
    run = driver.run(study, folder / "screen.parquet", workers=workers, on_chunk=on_chunk)
    elapsed = time.perf_counter() - start
    after = _rss_mib()
    n = len(samples)
    first = max(rss for _, rss in samples[: max(1, n // 10)])
    last = max(rss for _, rss in samples[-max(1, n // 10):])
    peak = max(rss for _, rss in samples)
    return {"cells": run.total, "rows": run.rows, "elapsed": elapsed, "before": before, "first": first,
            "last": last, "peak": peak, "after": after, "invalid": run.failed}


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    try:
        return bench(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bench(folder: Path) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a smaller simulation study")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--cores-per-node", type=int, default=32)
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    concurrency = "[2, 16]" if args.quick else "[2, 16, 64]"
    study = folder / "sim.yaml"
    study.write_text(SIM_STUDY.format(concurrency=concurrency, duration=5 if args.quick else 8))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")

    results = {}
    wall, cells, steady = timed_run(study, folder / "w1.parquet", workers=1)
    cpu_per_cell = 1 / steady  # one worker busy all along: its time per cell is the cost of a cell
    results["local, 1 worker"] = (wall, cells, steady)
    wall, cells, steady = timed_run(study, folder / "w2.parquet", workers=2)
    results["local, 2 workers"] = (wall, cells, steady)
    if not args.no_ray:
        head, address, env, temp = start_ray(2)
        try:
            saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
            os.environ.update({k: env[k] for k in saved})
            wall, cells, steady = timed_run(study, folder / "ray.parquet", ray_address=address)
            results["ray, 2 CPUs"] = (wall, cells, steady)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        finally:
            stop_ray(head, temp)

    import pyarrow.parquet as pq  # noqa: PLC0415

    tables = [pq.read_table(folder / f"{name}.parquet") for name in ("w1", "w2", "ray") if
              (folder / f"{name}.parquet").exists()]
    identical = all(t.equals(tables[0]) for t in tables)
    print(f"\nsimulation study: {results['local, 1 worker'][1]} cells "
          f"(plan + spec and no-spec simulation where the cell fits); tables identical: {identical}")
    print(f"{'executor':<20}{'wall s':>9}{'cells/s':>10}{'steady cells/s':>16}")
    for name, (wall, cells, steady) in results.items():
        print(f"{name:<20}{wall:>9.1f}{cells / wall:>10.2f}{steady:>16.2f}")
    (w1, n1, s1), (w2, n2, s2) = (results[k] for k in ("local, 1 worker", "local, 2 workers"))
    print(f"2 workers vs 1        {w1 / w2:.2f}x wall, {s2 / s1:.2f}x steady (target >= 1.8x)")
    if "ray, 2 CPUs" in results:
        wr, n, sr = results["ray, 2 CPUs"]
        print(f"Ray overhead per cell {(wr - w2) / n * 1e3:+.1f} ms = {(wr - w2) / w2:+.1%} of the local pool's wall "
              f"time at 2 workers (with Ray's connect and worker start-up); steady state {(1 / sr - 1 / s2) * 1e3:+.1f}"
              f" ms = {(s2 - sr) / s2:+.1%} per cell (target < 5%)")
    print(f"cost per cell         {cpu_per_cell * 1e3:.0f} ms (1 worker, steady state)")

    mem = screening_memory(folder, 2)
    print(f"\nscreening study (plan only): {mem['cells']:,} cells in {mem['elapsed']:.1f} s "
          f"({mem['cells'] / mem['elapsed']:.0f} cells/s on 2 workers; {mem['invalid']:,} invalid cells recorded)")
    print(f"driver RSS            before {mem['before']:.0f} MiB; first 10% of chunks {mem['first']:.0f} MiB; "
          f"last 10% {mem['last']:.0f} MiB; peak while running {mem['peak']:.0f} MiB; after the final write "
          f"{mem['after']:.0f} MiB -> {'flat' if mem['last'] - mem['first'] < 16 else 'GROWS'}")
    screen_cpu = 2 * mem["elapsed"] / mem["cells"]  # core-seconds per cell: an upper bound (2 busy workers)
    driver_per_cell = driver_cost(folder)
    print(f"driver, serial        {driver_per_cell * 1e6:.0f} us per cell (generate and hash the cell, write its "
          "row in a 64-row part file, and its share of the final sort and write)")
    cores = args.nodes * args.cores_per_node
    for label, per_cell in (("plan only", screen_cpu), ("plan + simulation", cpu_per_cell)):
        compute = 1_000_000 * per_cell / cores
        serial = 1_000_000 * driver_per_cell
        print(f"1,000,000 cells, {label:<18} on {args.nodes} nodes x {args.cores_per_node} cores: compute "
              f"{compute / 60:.1f} min ({per_cell * 1e3:.1f} CPU-ms per cell over {cores:,} cores), driver "
              f"{serial / 60:.1f} min -> ~{max(compute, serial) / 60:.0f} min (the larger: they overlap), "
              "plus Ray start-up")
    return 0


def driver_cost(folder: Path) -> float:
    """Seconds of driver work per cell: cell generation and keys, part writes of 64 rows, the final file."""
    from specsize.adapters.results import ResultsFile  # noqa: PLC0415
    from specsize.inputs.study import read_study  # noqa: PLC0415
    from specsize.reports.sweep import columns  # noqa: PLC0415

    study = read_study(folder / "screen.yaml")
    start = time.perf_counter()
    keys = [cell.key for cell in study.cells()]
    generate = (time.perf_counter() - start) / len(keys)
    import pyarrow.parquet as pq  # noqa: PLC0415

    rows = pq.read_table(folder / "screen.parquet").to_pylist()
    out = ResultsFile(folder / "driver.parquet", columns(study))
    start = time.perf_counter()
    for i in range(0, len(rows), 64):
        out.write_part(rows[i:i + 64])
    out.finish(keys)
    write = (time.perf_counter() - start) / len(rows)
    return generate + write


if __name__ == "__main__":
    sys.exit(main())
