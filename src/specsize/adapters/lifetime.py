"""A worker process's lifetime bound to the process that started its work.

A process killed with SIGKILL (or a server stopped without its shutdown) runs no clean-up, and the processes it
started are not told: a sweep's pool workers wait forever on queue pipes they hold both ends of, a service's job
runs on past a deadline no one enforces. `exit_with(pid)` ends the calling process as soon as process `pid` has.
"""

from __future__ import annotations

import os
import threading
import time


def exit_with(pid: int, poll_s: float = 1.0) -> None:
    """Exit this process (status 1, no clean-up: its work has no one to answer to) once process `pid` has ended;
    watched by a daemon thread, through a pidfd where Linux has one (5.3+), else by a poll every `poll_s`."""
    threading.Thread(target=_wait_then_exit, args=(pid, poll_s), name="specsize-exit-with", daemon=True).start()


def _wait_then_exit(pid: int, poll_s: float) -> None:
    import select  # noqa: PLC0415

    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or `pid` is already gone (the poll below sees it)
        handle = None
    if handle is not None:
        select.select([handle], [], [])  # readable once the process has exited
    else:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            except PermissionError:  # alive, and another user's
                pass
            time.sleep(poll_s)
    os._exit(1)
