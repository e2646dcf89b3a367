"""Writing what the user asked for, safely: never over their file without --force, never half a file.

A file is written to a temporary beside it (unique name, fsync'd), then moved into place: with --force by an
atomic rename, without it by an atomic hard link that fails if the name exists (two writers racing for one
new name: one wins, the other is told the file exists). Temporaries a killed writer left behind are removed
on the next write to the same name. An OS error (a read-only folder, a full disk) is a one-line error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

import click

from ..core.errors import SpecError, control_character


def _stale_temporaries(target: Path) -> None:
    for leftover in target.parent.glob(f".{target.name}.*.tmp"):
        pid = leftover.name[len(target.name) + 2:-4].split(".")[0]
        if pid.isdigit() and pid != str(os.getpid()) and not _alive(int(pid)):
            leftover.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_target(path: str, force: bool, field: str = "output") -> Path:
    """Where `path` would be written (a symlink's target), refused now if it cannot be: a folder, a missing folder,
    a pipe, socket or block device, or an existing file without `force`. Called before long work too, so that a
    run is not thrown away (or half written to stdout) at the end."""
    from ..inputs.load import files_read, resolved  # noqa: PLC0415 - what the command reads (inputs.load.will_read)

    if not str(path).strip():  # -o " " had written a file named by a space (and -o "" answered ". is a folder")
        raise SpecError(field, f"{str(path)!r} is a blank file name", "a file path")
    if control_character(str(path)):  # a line break: "wrote r<newline>x.html", two lines
        raise SpecError(field, f"{str(path)!r:.120} holds a control character (a line break, a tab)",
                        "a file path of printable characters")
    target = Path(path)
    if target.is_symlink():  # write where the link points, never replace the link itself (a loop: refused by name)
        target = resolved(target, field)
    if target.is_dir():
        raise SpecError(field, f"{target} is a folder", "a file path")
    read = files_read().get(target.resolve()) if target.exists() else None
    if read is not None:
        raise SpecError(field, f"{target} is this command's {read.replace('_', ' ')}, which it reads",
                        "a path of its own for the output")
    if not target.parent.is_dir():
        raise SpecError(field, f"folder {target.parent} does not exist", "a path in an existing folder")
    if target.is_char_device():
        return target
    if target.exists() and not target.is_file():  # a pipe, socket or block device: opening it may block or harm
        raise SpecError(field, f"{target} is not a regular file (a pipe, socket or block device)",
                        "a path to a regular file or a new one; stdout without -o")
    if target.exists() and not force:
        raise SpecError(field, f"{target} exists; pass --force to replace it", "a new file, or --force")
    return target


def check_targets(force: bool, **paths: str | None) -> None:
    """`check_target` for each named output given, and no two of them the same file."""
    seen: dict[Path, str] = {}
    for field, path in paths.items():
        if path == "-" and field != "output":  # -o - is stdout; stdout holds the command's own output
            raise SpecError(field, "'-' would be stdout, which holds the command's own output", "a file path")
        if path is None or path == "-":
            continue
        target = check_target(path, force, field).resolve()
        if target in seen and not target.is_char_device():
            raise SpecError(field, f"{path} is also the {seen[target]} file", "a path of its own")
        seen[target] = field


def write_file(path: str, fill: Callable[[Path], object], force: bool, field: str = "output") -> Path:
    """Create `path` from `fill(temporary)`; refuses an existing file unless `force`."""
    target = check_target(path, force, field)
    if target.is_char_device():  # /dev/null, a terminal: written to, never replaced by a file
        try:
            fill(target)
        except OSError as err:
            raise SpecError(field, f"cannot write {target}: {err.strerror or type(err).__name__}",
                            "a writable file or device") from None
        return target
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        _stale_temporaries(target)
        fill(temporary)
        with temporary.open("rb") as handle:
            os.fsync(handle.fileno())
        if force:
            os.replace(temporary, target)
        else:
            try:
                os.link(temporary, target)  # atomic, and fails when another writer got there first
            except FileExistsError:
                raise SpecError(field, f"{target} exists; pass --force to replace it", "a new file, or --force") \
                    from None
    except OSError as err:
        raise SpecError(field, f"cannot write {target}: {err.strerror or type(err).__name__}",
                        "a writable folder") from None
    finally:
        temporary.unlink(missing_ok=True)
    return target


def write_output(text: str, path: str | None, force: bool) -> None:
    """stdout, or a file written safely (see the module's doc)."""
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = write_file(path, lambda temporary: temporary.write_text(text), force)
    click.echo(f"specsize: wrote {target}", err=True)


def write_series(series: dict, path: str, force: bool) -> None:
    """The simulation's time series as CSV (or Parquet when pyarrow is installed)."""
    columns = list(series)
    if path.endswith(".parquet"):
        try:
            import pyarrow as pa  # noqa: PLC0415
            import pyarrow.parquet as pq  # noqa: PLC0415
        except ImportError:
            raise SpecError("series", "writing Parquet needs pyarrow (pip install pyarrow)", "a .csv path") from None
        write_file(path, lambda temporary: pq.write_table(pa.table({c: series[c] for c in columns}), temporary),
                   force, "series")
        return
    lines = [",".join(columns)]
    for row in zip(*(series[c] for c in columns)):
        lines.append(",".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in row))
    write_file(path, lambda temporary: temporary.write_text("\n".join(lines) + "\n"), force, "series")
