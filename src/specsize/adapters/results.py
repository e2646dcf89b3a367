"""A sweep's results on disk: append-only part files while it runs, one sorted Parquet file at the end.

    RESULTS.parquet.parts/part-<first key>-<rows>.parquet   one per finished chunk, each written to a temporary
                                                            name and renamed (a kill never leaves half a part)
    RESULTS.parquet                                         written at the end (temporary + rename), rows
                                                            sorted by cell key, then the parts are removed

Resuming reads the keys of the parts and of an existing RESULTS.parquet and skips those cells. A cell written
twice (a chunk retried after its part was already saved) keeps one row: rows of a key are identical.
pyarrow is imported only here, when a sweep runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

ARROW_TYPES = {"int": "int64", "float": "float64", "bool": "bool_", "str": "string"}


def _pa():
    try:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError:
        from ..core.errors import SpecError  # noqa: PLC0415

        raise SpecError("output", "writing Parquet needs pyarrow", "pip install 'specsize[sweep]'") from None
    return pa, pq


def schema(columns: Sequence[tuple[str, str]]):
    pa, _ = _pa()
    return pa.schema([(name, getattr(pa, ARROW_TYPES[kind])()) for name, kind in columns])


def _not_redone(table, redo: str | tuple[str, ...]):
    """A mask of `table`'s rows that stand (False: status `error` with an error beginning with one of `redo`)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    prefixes = (redo,) if isinstance(redo, str) else redo
    begins = pc.starts_with(table["error"], prefixes[0])
    for prefix in prefixes[1:]:
        begins = pc.or_(begins, pc.starts_with(table["error"], prefix))
    redone = pc.and_(pc.equal(table["status"], "error"), begins)
    return pc.invert(pc.fill_null(redone, False))


def _one_row_per_key(table, redo: str | tuple[str, ...] | None):
    """`table` sorted by key, one row per key: the first (rows of a key are identical), but with `redo` a row that
    stands before one to be redone (a lost worker's, a timed-out cell's; sort_by is stable)."""
    pa, _ = _pa()
    import pyarrow.compute as pc  # noqa: PLC0415

    if redo and len(table) > 1:
        table = table.append_column("__redone", pc.invert(_not_redone(table, redo)))
        table = table.sort_by([("key", "ascending"), ("__redone", "ascending")]).drop_columns(["__redone"])
    else:
        table = table.sort_by("key")
    if len(table) > 1:
        keys = table["key"].to_pylist()
        unique = [0] + [i for i in range(1, len(keys)) if keys[i] != keys[i - 1]]
        if len(unique) < len(keys):
            table = table.take(pa.array(unique))
    return table


RESTATE_BATCH = 65_536  # rows worked out again at once (ResultsFile.finish's restate)


class ResultsFile:
    def __init__(self, output: str | Path, columns: Sequence[tuple[str, str]], metadata: dict | None = None):
        self.output = Path(output)
        self.parts = self.output.with_name(self.output.name + ".parts")
        self.schema = schema(columns)
        self.metadata = {k.encode(): str(v).encode() for k, v in (metadata or {}).items()}

    def lock(self):
        """Hold RESULTS.parquet.lock for the run: a second sweep into the same file is refused, not interleaved."""
        import contextlib  # noqa: PLC0415
        import fcntl  # noqa: PLC0415

        from ..core.errors import SpecError  # noqa: PLC0415

        @contextlib.contextmanager
        def held():
            path = self.output.with_name(self.output.name + ".lock")
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise SpecError("output", f"another sweep is writing {self.output}",
                                    "one sweep per results file at a time") from None
                try:
                    yield
                finally:
                    path.unlink(missing_ok=True)
                    fcntl.flock(handle, fcntl.LOCK_UN)

        return held()

    def _metadata(self) -> dict | None:
        """The Parquet metadata of `output` ({} with none; None where it is no Parquet file, or absent)."""
        if not self.output.exists():
            return None
        _, pq = _pa()
        try:
            return pq.read_schema(self.output).metadata or {}
        except Exception:  # noqa: BLE001 - not Parquet at all
            return None

    def foreign(self) -> bool:
        """Whether `output` is a file that is not a sweep's results table (which a rerun resumes): one the user wrote
        for something else, not to be replaced without being asked."""
        if not self.output.exists():
            return False
        metadata = self._metadata()
        return metadata is None or b"specsize.results_version" not in metadata

    def study_name(self) -> str | None:
        """The name of the study whose results table `output` is (None: no table, or one that does not say)."""
        name = (self._metadata() or {}).get(b"specsize.study")
        return name.decode(errors="replace") if name is not None else None

    def parts_study_name(self) -> str | None:
        """The name of the study whose interrupted run left the parts beside `output` (None: no parts, or parts that do
        not say, as those of specsize releases before parts carried the table's metadata)."""
        _, pq = _pa()
        for path in sorted(self.parts.glob("part-*.parquet")) if self.parts.is_dir() else []:
            try:
                name = (pq.read_schema(path).metadata or {}).get(b"specsize.study")
            except Exception:  # noqa: BLE001 - a damaged part says nothing
                continue
            if name is not None:
                return name.decode(errors="replace")
        return None

    def _sources(self) -> list[Path]:
        found = sorted(self.parts.glob("part-*.parquet")) if self.parts.is_dir() else []
        return ([self.output] if self.output.is_file() else []) + found

    def done_keys(self, redo: str | tuple[str, ...] | None = None) -> set[str]:
        """Keys of the cells already written (an unreadable part, from a crash mid-rename, is ignored), but for rows
        of status `error` whose error begins with `redo` (or one of them: a cell whose worker was lost, one stopped at its
        time limit; a rerun tries it again)."""
        _, pq = _pa()
        keys: set[str] = set()
        for path in self._sources():
            try:
                table = pq.read_table(path, columns=["key", "status", "error"] if redo else ["key"])
            except Exception:  # noqa: BLE001 - a damaged file only means those cells run again
                continue
            if redo:
                table = table.filter(_not_redone(table, redo))
            keys.update(table.column("key").to_pylist())
        return keys

    def write_part(self, rows: Sequence[dict]) -> None:
        if not rows:
            return
        pa, pq = _pa()
        self.parts.mkdir(parents=True, exist_ok=True)
        # the parts carry the table's metadata (its study's name): the cells of an interrupted run are that study's,
        # and another study's run into the same -o is refused before it drops them (cli.sweep._check_ours)
        table = pa.Table.from_pylist(list(rows), schema=self.schema.with_metadata(self.metadata))
        first = min(row["key"] for row in rows)
        final = self.parts / f"part-{first[:16]}-{len(rows)}.parquet"
        temporary = self.parts / f".tmp-{os.getpid()}-{first[:16]}.parquet"
        pq.write_table(table, temporary)
        os.replace(temporary, final)

    def finish(self, keep: Iterable[str], restate: Callable[[dict[str, list]], dict[str, list]] | None = None,
               restate_inputs: Sequence[str] = (), redo: str | tuple[str, ...] | None = None) -> int:
        """Write the one sorted file from every part (and an earlier result), keeping only the keys in
        `keep` (the study's cells now); return its row count. The parts are removed once it is in place.
        `restate(columns)`: columns worked out again for every row from the `restate_inputs` columns (the sweep's
        costs at the study's prices now). A key with several rows keeps one; with `redo` (done_keys'), a row that
        stands before one to be redone (a cell lost or timed out in one run and computed in the next)."""
        pa, pq = _pa()
        import pyarrow.compute as pc  # noqa: PLC0415

        tables = []
        for path in self._sources():
            try:
                table = pq.read_table(path)
            except Exception:  # noqa: BLE001 - damaged: its cells were (or will be) computed again
                continue
            tables.append(table.select([n for n in self.schema.names if n in table.column_names]))
        if tables:
            table = pa.concat_tables(tables, promote_options="permissive")
            missing = [n for n in self.schema.names if n not in table.column_names]
            for name in missing:
                table = table.append_column(name, pa.nulls(len(table), self.schema.field(name).type))
            table = table.select(self.schema.names).cast(self.schema)
        else:
            table = self.schema.empty_table()
        table = table.filter(pc.is_in(table["key"], value_set=pa.array(sorted(set(keep)), pa.string())))
        table = _one_row_per_key(table, redo)
        if restate is not None:  # batch by batch: a million rows never sit in Python lists at once
            parts: dict[str, list] = {}
            inputs = [name for name in restate_inputs if name in table.column_names]
            for batch in table.select(inputs).to_batches(max_chunksize=RESTATE_BATCH):
                for name, values in restate(batch.to_pydict()).items():
                    parts.setdefault(name, []).append(pa.array(values, self.schema.field(name).type))
            for name, chunks in parts.items():
                column = pa.chunked_array(chunks, self.schema.field(name).type)
                table = table.set_column(table.schema.get_field_index(name), name, column)
        self._replace_output(table.replace_schema_metadata(self.metadata))
        if self.parts.is_dir():
            for path in self.parts.iterdir():
                path.unlink()
            self.parts.rmdir()
        return len(table)

    def _replace_output(self, table) -> None:
        """`table` at `output`, written aside, synced and renamed: a kill leaves the earlier table or this one."""
        _, pq = _pa()
        temporary = self.output.with_name(f".{self.output.name}.tmp-{os.getpid()}")
        try:
            pq.write_table(table, temporary)
            with open(temporary, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(temporary, self.output)
        except BaseException:  # Ctrl-C or a full disk mid-write: the half-written table (as big as the table) goes
            temporary.unlink(missing_ok=True)  # with it; it had stayed beside the results, hidden by its dot
            raise

    def read_rows(self, columns: Sequence[str] | None = None) -> list[dict]:
        _, pq = _pa()
        table = pq.read_table(self.output, columns=list(columns) if columns else None)
        return table.to_pylist()
