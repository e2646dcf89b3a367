"""Executors for sweeps: map a function over chunks of work, results streamed back as chunks finish.

Both executors take the same job (`fn(chunk) -> result`, `fn` importable by name in a fresh process) and
give the same answers; only where the work runs differs.

- `LocalPool(workers)`: a process pool on this machine (forkserver: workers start from a clean, preloaded
  server process, never a fork of a driver with threads). A worker that dies (OOM killer, SIGKILL) breaks
  the pool; the pool is rebuilt and the chunks that were in flight run again, up to `retries` times each.
- `RayPool(address)`: one Ray task per chunk on a running Ray cluster (`ray start --head ...`, or a real
  cluster). Ray retries a task whose worker process or node dies (`max_retries`).

Back-pressure: at most `in_flight` chunks are submitted at any time, and the chunk iterator is read only as
results come back, so the driver holds a bounded number of chunks and results whatever the study's size.
Ray is imported only when a `RayPool` is made.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..core.errors import SpecError

DEFAULT_RETRIES = 3
RAY_ADDRESSES = "the address of a running cluster: HOST:PORT of `ray start --head`, ray://HOST:10001, or auto"


def _worker_init(preload: tuple[str, ...], driver: int) -> None:
    """Worker initializer: Ctrl-C is the driver's to handle (it stops the pool); workers never print it. A worker
    ends when the driver process `driver` does (a driver killed with SIGKILL runs no clean-up, and the pool's queues
    never report it: its workers had waited forever)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import importlib  # noqa: PLC0415

    from .lifetime import exit_with  # noqa: PLC0415

    for module in preload:
        importlib.import_module(module)
    exit_with(driver)


def _top_up(source: Iterator[Any], room: int, submit: Callable[[Any], None]) -> bool:
    """Submit up to `room` more chunks from `source` (the back-pressure above); True once `source` is exhausted."""
    for _ in range(max(0, room)):
        chunk = next(source, None)
        if chunk is None:
            return True
        submit(chunk)
    return False


class LocalPool:
    """`workers` processes on this machine."""

    kind = "local"

    def __init__(self, workers: int, preload: tuple[str, ...] = (), retries: int = DEFAULT_RETRIES):
        import multiprocessing  # noqa: PLC0415

        self.workers = workers
        self.retries = retries
        self.retried = 0  # chunks run again after a lost worker
        self._preload = preload
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(list(preload))
        self._pool = self._new_pool()

    def _new_pool(self):
        import os  # noqa: PLC0415
        from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

        return ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context, initializer=_worker_init,
                                   initargs=(self._preload, os.getpid()))

    def map_unordered(self, fn: Callable[[Any], Any], chunks: Iterable[Any], in_flight: int | None = None,
                      split: Callable[[Any], list] | None = None, lost: Callable[[Any, str], Any] | None = None
                      ) -> Iterator[Any]:
        """`fn(chunk)` for every chunk, results as they finish. A chunk in flight whenever a worker died `retries` + 1
        times is, with `lost`, a suspect: once nothing else is in flight it runs alone, cut by `split` into pieces
        that each run alone, so that a death is its own piece's; a piece that kills its worker `retries` + 1 times
        alone gives `lost(piece, why)` as its result. One cell that kills every worker (the OOM killer) had stopped
        the whole study for good, its rerun meeting the same cell (exit 2), with up to 63 sound cells of its chunk.
        Without `lost` such a chunk stops the run (SpecError)."""
        from concurrent.futures import FIRST_COMPLETED, wait  # noqa: PLC0415
        from concurrent.futures.process import BrokenProcessPool  # noqa: PLC0415

        limit = in_flight or 2 * self.workers
        source = iter(chunks)
        pending: dict = {}  # future -> (chunk, attempts)
        suspects: list = []  # chunks in flight at too many deaths: each runs alone once nothing else does
        exhausted = False

        def submit(chunk: Any) -> None:
            pending[self._submit(fn, chunk)] = (chunk, 0)

        while True:
            if not suspects:
                exhausted = exhausted or _top_up(source, limit - len(pending), submit)
            if not pending:
                if not suspects:
                    return
                assert lost is not None, "a suspect is kept only where `lost` can answer for it"
                for chunk in suspects:
                    yield from self._alone(fn, chunk, split, lost)
                suspects = []
                continue
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                chunk, attempts = pending.pop(future)
                try:
                    result = future.result()
                except BrokenProcessPool:
                    broken = True
                    pending[future] = (chunk, attempts)  # resubmitted below with the others in flight
                    continue
                yield result
            if broken:
                pending = self._restart(fn, pending, suspects if lost is not None else None)

    def _restart(self, fn: Callable[[Any], Any], pending: dict, suspects: list | None = None) -> dict:
        """A worker died: every chunk in flight is lost with the pool. Run them again on a new pool; a chunk that has
        been in flight at `retries` + 1 deaths goes to `suspects` (or, with none, stops the run)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()
        again = {}
        for chunk, attempts in pending.values():
            if attempts >= self.retries:
                if suspects is None:
                    raise SpecError("workers", f"a chunk of cells lost its worker {attempts + 1} times",
                                    "enough memory per worker (fewer --workers), or report the bug")
                suspects.append(chunk)
                continue
            self.retried += 1
            again[self._submit(fn, chunk)] = (chunk, attempts + 1)
        return again

    def _submit(self, fn: Callable[[Any], Any], chunk: Any):
        """`fn(chunk)` on the pool, as a future. A worker can die while no future waits on it (between two results,
        as the driver writes a part): the pool is broken by then and submit raises. That had ended the sweep as an
        internal error (exit 4) instead of rebuilding the pool; it is now a future that failed as the pool did, which
        the loop above restarts with the others."""
        from concurrent.futures import Future  # noqa: PLC0415
        from concurrent.futures.process import BrokenProcessPool  # noqa: PLC0415

        try:
            return self._pool.submit(fn, chunk)
        except BrokenProcessPool as err:
            failed: Future = Future()
            failed.set_exception(err)
            return failed

    def _alone(self, fn: Callable[[Any], Any], chunk: Any, split: Callable[[Any], list] | None,
               lost: Callable[[Any, str], Any]) -> Iterator[Any]:
        """The pieces of a suspect chunk, each run alone on the pool: a worker that dies now died of its piece."""
        from concurrent.futures.process import BrokenProcessPool  # noqa: PLC0415

        for piece in (split(chunk) if split else [chunk]):
            for _ in range(self.retries + 1):
                try:
                    result = self._submit(fn, piece).result()
                except BrokenProcessPool:
                    self._pool.shutdown(wait=False, cancel_futures=True)
                    self._pool = self._new_pool()
                    self.retried += 1
                    continue
                yield result
                break
            else:
                yield lost(piece, f"its worker process died each of the {self.retries + 1} times it ran alone "
                                  "(killed by the system: out of memory?)")

    def close(self) -> None:
        """Stop the workers now (on success they are idle; on Ctrl-C their chunks are abandoned)."""
        processes = list(getattr(self._pool, "_processes", {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:  # an abandoned chunk must not keep a worker busy after the driver exits
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=5)


class RayPool:
    """Ray tasks on the cluster at `address` (`host:port` of a head started with `ray start --head`,
    `ray://host:10001` for Ray Client, or `auto` for the cluster this machine belongs to)."""

    kind = "ray"

    def __init__(self, address: str, retries: int = DEFAULT_RETRIES):
        try:
            import ray  # noqa: PLC0415
        except ImportError:
            raise SpecError("ray", "Ray is not installed", "pip install 'specsize[sweep]'") from None
        self._ray = ray
        self.retries = retries
        self.retried = 0  # Ray counts its own retries; this pool sees only their results
        _reachable(address)  # ray.init retries an address nobody listens on for minutes, its logs on stderr
        try:
            # logs stay on the workers (the driver's stderr is the progress bar's); nothing is started here
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise SpecError("ray", f"cannot connect to the Ray cluster at {address} ({err})", RAY_ADDRESSES) from None
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def map_unordered(self, fn: Callable[[Any], Any], chunks: Iterable[Any], in_flight: int | None = None,
                      split: Callable[[Any], list] | None = None, lost: Callable[[Any, str], Any] | None = None
                      ) -> Iterator[Any]:
        """As LocalPool's. Ray knows which task's worker died and retries that task alone (`max_retries`); a task that
        still fails is, with `lost`, cut by `split` into pieces run as tasks of their own, and a piece that fails on
        its own gives `lost(piece, why)`. Ray's error had ended the study as an internal error (exit 4), for good."""
        ray = self._ray
        task = ray.remote(max_retries=self.retries, retry_exceptions=False, num_cpus=1)(fn)
        limit = in_flight or 2 * self.workers
        source = iter(chunks)
        pending: list = []
        chunk_of: dict = {}  # ref -> (chunk, whether it is a piece of a failed chunk)
        exhausted = False

        def submit(chunk: Any, piece: bool = False) -> None:
            ref = task.remote(chunk)
            chunk_of[ref] = (chunk, piece)
            pending.append(ref)

        while True:
            exhausted = exhausted or _top_up(source, limit - len(pending), submit)
            if not pending:
                return
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                chunk, piece = chunk_of.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as err:
                    if lost is None:
                        raise
                    why = f"{type(err).__name__} after {self.retries} retries ({_first_line(err)})"
                    pieces = split(chunk) if split and not piece else [chunk]
                    if len(pieces) > 1:
                        for one in pieces:
                            submit(one, True)
                        continue
                    result = lost(chunk, why)
                yield result

    def close(self) -> None:
        self._ray.shutdown()


def _first_line(err: BaseException) -> str:
    """An exception as one short line (Ray's carry the remote traceback)."""
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__


RAY_CONNECT_TIMEOUT_S = 5.0
# HTTP/2's client preface and an empty SETTINGS frame (RFC 9113 sections 3.4 and 6.5): a gRPC server (Ray's GCS,
# Ray Client's server) answers with a SETTINGS frame of its own, frame type 4 in the 4th byte of the 9-byte header
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes((0, 0, 0, 4, 0, 0, 0, 0, 0))
_HTTP2_SETTINGS = 4


def _reachable(address: str) -> None:
    """A HOST:PORT (or ray://HOST:PORT) address accepts a TCP connection and answers as a gRPC server (HTTP/2)
    within RAY_CONNECT_TIMEOUT_S; `auto` and addresses of other shapes are left to ray.init, which says what is
    wrong with them. ray.init retries for minutes an address where nothing listens, and as long where something
    else does (a web server, ssh), its logs on stderr. With RAY_USE_TLS set the cluster speaks TLS first: only
    the connection is checked."""
    import os  # noqa: PLC0415
    import socket  # noqa: PLC0415

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_TIMEOUT_S)
    except OSError as err:
        raise SpecError("ray", f"cannot connect to the Ray cluster at {address}: nothing answers there within "
                        f"{RAY_CONNECT_TIMEOUT_S:.0f} s ({err.strerror or err})", RAY_ADDRESSES) from None
    with conn:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return
        answer = b""
        try:
            conn.sendall(_HTTP2_HELLO)
            while len(answer) < 9 and (more := conn.recv(9 - len(answer))):
                answer += more
        except OSError:  # a timeout, or the other end closed on the preface
            pass
    if len(answer) < 9 or answer[3] != _HTTP2_SETTINGS:
        heard = f"it answered {answer!r}" if answer else f"no answer within {RAY_CONNECT_TIMEOUT_S:.0f} s"
        raise SpecError("ray", f"cannot connect to the Ray cluster at {address}: something listens there but it is "
                        f"not a Ray head (not a gRPC server: {heard})", RAY_ADDRESSES)


def make_executor(workers: int | None = None, ray_address: str | None = None,
                  preload: tuple[str, ...] = ()) -> LocalPool | RayPool:
    if ray_address is not None:
        return RayPool(ray_address)
    if workers is None:
        workers = usable_cpus()
    return LocalPool(workers, preload)


def usable_cpus(cgroup_root: str = "/sys/fs/cgroup") -> int:
    """The CPUs this process may use: those it may run on (sched_getaffinity), at most its cgroup's CPU quota rounded
    up (a container's `--cpus 2`, a Kubernetes CPU limit: cgroup v2 cpu.max "QUOTA PERIOD", v1 cpu.cfs_quota_us over
    cpu.cfs_period_us). A pod limited to 2 CPUs on a 128-core node had started 128 workers, each importing specsize
    and numpy: the pod's memory limit (the OOM killer) before its first chunk, or 64 workers sharing 2 CPUs."""
    import os  # noqa: PLC0415

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _cgroup_cpu_quota(cgroup_root)
    return max(1, min(cpus, quota)) if quota is not None else max(1, cpus)


def _cgroup_cpu_quota(root: str) -> int | None:
    """The cgroup's CPU quota in whole CPUs (rounded up), None where there is none or none can be read."""
    import math  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    def read(path: Path) -> list[str] | None:
        try:
            return path.read_text().split()
        except (OSError, UnicodeDecodeError):
            return None

    base = Path(root)
    v2 = read(base / "cpu.max")
    if v2 is not None:
        quota, period = (v2 + ["100000"])[:2]
    else:
        for folder in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
            quota_file, period_file = read(base / folder / "cpu.cfs_quota_us"), read(base / folder / "cpu.cfs_period_us")
            if quota_file and period_file:
                quota, period = quota_file[0], period_file[0]
                break
        else:
            return None
    try:
        share = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):  # "max": no quota
        return None
    return max(1, math.ceil(share)) if share > 0 else None
