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

    def map_unordered(self, fn: Callable[[Any], Any], chunks: Iterable[Any], in_flight: int | None = None
                      ) -> Iterator[Any]:
        from concurrent.futures import FIRST_COMPLETED, wait  # noqa: PLC0415
        from concurrent.futures.process import BrokenProcessPool  # noqa: PLC0415

        limit = in_flight or 2 * self.workers
        source = iter(chunks)
        pending: dict = {}  # future -> (chunk, attempts)
        exhausted = False

        def submit(chunk: Any) -> None:
            pending[self._pool.submit(fn, chunk)] = (chunk, 0)

        while True:
            exhausted = exhausted or _top_up(source, limit - len(pending), submit)
            if not pending:
                return
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
                pending = self._restart(fn, pending)

    def _restart(self, fn: Callable[[Any], Any], pending: dict) -> dict:
        """A worker died: every chunk in flight is lost with the pool. Run them again on a new pool."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()
        again = {}
        for chunk, attempts in pending.values():
            if attempts >= self.retries:
                raise SpecError("workers", f"a chunk of cells lost its worker {attempts + 1} times",
                                "enough memory per worker (fewer --workers), or report the bug")
            self.retried += 1
            again[self._pool.submit(fn, chunk)] = (chunk, attempts + 1)
        return again

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

    def map_unordered(self, fn: Callable[[Any], Any], chunks: Iterable[Any], in_flight: int | None = None
                      ) -> Iterator[Any]:
        ray = self._ray
        task = ray.remote(max_retries=self.retries, retry_exceptions=False, num_cpus=1)(fn)
        limit = in_flight or 2 * self.workers
        source = iter(chunks)
        pending: list = []
        exhausted = False
        while True:
            exhausted = exhausted or _top_up(source, limit - len(pending), lambda chunk: pending.append(task.remote(chunk)))
            if not pending:
                return
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                yield ray.get(ref)

    def close(self) -> None:
        self._ray.shutdown()


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
        import os  # noqa: PLC0415

        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return LocalPool(workers, preload)
