"""The calibration store: measured acceptance, measured footprints and live observations in SQLite.

- One row per observation, with its time and source; nothing is updated or deleted: a new measurement is a
  new row, and readers take the newest matching one with its provenance.
- Schema versioned in `meta.schema_version`, upgraded by ordered migrations inside one transaction.
- A file that is not a specsize store, is corrupt, or has a newer schema than this release knows gives a
  clear error and is never modified (it is first opened read-only).
- Concurrent writers: WAL journal, a busy timeout, and one `BEGIN IMMEDIATE` transaction per write.

Default location: $SPECSIZE_STORE, else $XDG_DATA_HOME/specsize/calibration.sqlite, else
~/.local/share/specsize/calibration.sqlite.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..core.errors import SpecError, control_character

SCHEMA_VERSION = 2
KINDS = ("acceptance", "footprint", "live")

MIGRATIONS = {
    1: [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE observations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            tag TEXT NOT NULL,
            target TEXT,
            draft TEXT,
            method TEXT,
            k INTEGER,
            acceptance_rate REAL,
            mean_accepted_length REAL,
            payload TEXT NOT NULL,
            source TEXT NOT NULL,
            created_at TEXT NOT NULL)""",
        "CREATE INDEX observations_kind_tag ON observations (kind, tag, id)",
    ],
    2: [
        # where the observation was made (hostname, GPU, engine version): provenance for later readers
        "ALTER TABLE observations ADD COLUMN environment TEXT",
    ],
}


def default_path() -> Path:
    if os.environ.get("SPECSIZE_STORE"):
        return Path(os.environ["SPECSIZE_STORE"])
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "specsize" / "calibration.sqlite"


@dataclass(frozen=True)
class Observation:
    id: int
    kind: str
    tag: str
    target: str | None
    draft: str | None
    method: str | None
    k: int | None
    acceptance_rate: float | None
    mean_accepted_length: float | None
    payload: dict
    source: str
    created_at: str
    environment: str | None

    @property
    def provenance(self) -> str:
        return f"store #{self.id} '{self.tag}' ({self.source}, {self.created_at})"

    def acceptance_fields(self) -> dict:
        """The acceptance this row holds, as the request fields a plan reads it from: its rate, or its mean accepted
        length (with `measured_at_k`, the row's k, where it has one). A length a tree server measured (check-live
        --record of an SGLang tree plan keeps `tree_topk` in the payload) holds the tree's gain: it is read as the
        length, not as the per-depth rate solved from it, which the tree would widen again (2.5 tokens a pass had
        been priced 3.6). Empty when the row holds neither."""
        treed = self.payload.get("tree_topk")
        measured = self.mean_accepted_length is not None and (self.acceptance_rate is None or (
            bool(self.k) and isinstance(treed, int) and not isinstance(treed, bool) and treed > 1))
        if measured:
            return {"mean_accepted_length": self.mean_accepted_length, **({"measured_at_k": self.k} if self.k else {})}
        return {"acceptance_rate": self.acceptance_rate} if self.acceptance_rate is not None else {}


def not_a_regular_file(path: Path) -> str | None:
    """Why a database path names something SQLite must not open, None where it may: a named pipe, socket or device
    there (SQLite opens a FIFO and waits for a writer that never comes; `--store`, $SPECSIZE_STORE or the service's
    --db on one had hung). A folder is the store's own "is a folder"; a name the system cannot look up, its open's."""
    try:
        odd = path.exists() and not path.is_file() and not path.is_dir()
    except OSError:
        return None
    return f"{path} is not a regular file (a pipe, socket or device)" if odd else None


def _inspect(path: Path) -> int:
    """The schema version of an existing store, read without modifying it."""
    try:
        with path.open("rb") as handle:
            header = handle.read(16)
    except OSError as err:
        raise SpecError("store", f"cannot read {path}: {err.strerror}", "a specsize calibration store") from None
    if header and header != b"SQLite format 3\x00":
        raise SpecError("store", f"{path} is not an SQLite database; it was left untouched",
                        "a specsize calibration store, or a new path")
    if not header:
        return 0
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                return 0
            if "meta" not in tables:
                raise SpecError("store", f"{path} is an SQLite database but not a specsize store; it was left "
                                "untouched", "a specsize calibration store, or a new path")
            row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        raise SpecError("store", f"{path} is corrupt ({err}); it was left untouched",
                        "a specsize calibration store, or a new path") from None
    # every store this code writes has its version row and its observations table (one transaction made both)
    try:
        version = int(row[0]) if row else 0
    except (TypeError, ValueError):
        version = 0
    if version < 1 or "observations" not in tables:
        why = (f"schema_version {row[0]!r:.40}" if row else "no schema_version") + (
            "" if "observations" in tables else ", no observations table")
        raise SpecError("store", f"{path} has a meta table but not a specsize store's schema ({why}); it was left "
                        "untouched", "a specsize calibration store, or a new path")
    if version > SCHEMA_VERSION:
        raise SpecError("store", f"{path} has schema version {version}, newer than this specsize understands "
                        f"({SCHEMA_VERSION}); it was left untouched", "upgrade specsize, or use another --store")
    return version


POSTGRESQL = ("postgresql://", "postgres://", "postgresql+psycopg://")



TAG_LIMIT = 200  # characters: the service's bound on a tag (service.requests.TEXT_LIMIT)
TAG_ACCEPTED = f"a tag of 1-{TAG_LIMIT} characters without control characters, such as 'chat-v2'"


def check_tag(tag: str, field: str = "tag") -> str:
    """A tag as every writer takes it (`check-live --record`, `measure --record`, `calibrations add --tag`, the
    service): not blank, at most TAG_LIMIT characters, no control character. A tag holding a line break had been
    recorded and split its row of `specsize calibrations` over two lines, and one of 5,000 characters stored, where
    the service refuses past 200."""
    if not tag.strip():
        raise SpecError(field, "an empty tag records nothing", TAG_ACCEPTED)
    if len(tag) > TAG_LIMIT:
        raise SpecError(field, f"is {len(tag):,} characters long", TAG_ACCEPTED)
    control = control_character(tag)
    if control is not None:
        raise SpecError(field, f"holds a control character ({control!r})", TAG_ACCEPTED)
    return tag


def _check_observation(kind: str, tag: str) -> None:
    """What every store (SQLite, PostgreSQL) refuses before writing an observation."""
    if kind not in KINDS:
        raise SpecError("kind", f"unknown kind {kind!r}", ", ".join(KINDS))
    check_tag(tag)


def named_store(path: str | Path | None) -> str | Path | None:
    """The store a command names: `path` (--store), else $SPECSIZE_STORE as written, a PostgreSQL URL included (read
    as a file path, `SPECSIZE_STORE=postgresql://u@h/db` had been "postgresql:/u@h/db does not exist"); None: the
    default store."""
    return path if path else os.environ.get("SPECSIZE_STORE") or None


class Store:
    def __new__(cls, path: str | Path | None = None, create: bool = True):
        path = named_store(path)
        if cls is Store and isinstance(path, str) and path.startswith(POSTGRESQL):
            return super().__new__(PostgresStore)  # the same store in the service's PostgreSQL database
        return super().__new__(cls)

    def __init__(self, path: str | Path | None = None, create: bool = True):
        """The SQLite store at `path` (default_path() when none). `create=False` for a reader: a path that does not
        exist is refused, not made (with its folders) only to hold nothing."""
        self.path = Path(path) if path else default_path()
        if self.path.is_dir():
            raise SpecError("store", f"{self.path} is a folder", "a file path for the calibration store")
        odd = not_a_regular_file(self.path)
        if odd:
            raise SpecError("store", odd, "an SQLite file, or a path for a new one")
        if not create and not self.path.exists():
            named = "" if path else " (SPECSIZE_STORE)" if os.environ.get("SPECSIZE_STORE") else " (the default store)"
            raise SpecError("store", f"{self.path} does not exist{named}",
                            "an existing calibration store (--store or $SPECSIZE_STORE); `specsize calibrations add` "
                            "or `specsize check-live --record` makes one")
        # the default store's folder is made; a path someone wrote (--store, $SPECSIZE_STORE, the service's --db) is
        # taken in the folder it names: `--store /nonexistent/dir/x.sqlite` had made /nonexistent/dir to hold it,
        # a mistyped folder turned into a second store no one reads
        made_here = not path and not os.environ.get("SPECSIZE_STORE")
        if not made_here and not self.path.parent.is_dir():
            raise SpecError("store", f"folder {self.path.parent} does not exist",
                            "a path in an existing folder for the calibration store (--store or $SPECSIZE_STORE)")
        version = _inspect(self.path) if self.path.exists() else 0
        try:
            if made_here:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._con.execute("PRAGMA busy_timeout = 30000")
            if version < SCHEMA_VERSION:
                self._migrate(version)
            self._con.execute("PRAGMA journal_mode = WAL")
        except (OSError, sqlite3.OperationalError) as err:  # a read-only folder, a full disk, no such device
            reason = getattr(err, "strerror", None) or str(err)
            raise SpecError("store", f"cannot open or create {self.path}: {reason}",
                            "a writable path for the calibration store (--store or $SPECSIZE_STORE)") from None

    def _migrate(self, current: int) -> None:
        self._con.execute("BEGIN IMMEDIATE")
        try:
            # another process may have migrated while we waited for the lock
            tables = {r[0] for r in self._con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "meta" in tables:
                row = self._con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                current = int(row[0]) if row else current
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    self._con.execute(statement)
                self._con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                                  (str(version),))
            self._con.execute("COMMIT")
        except BaseException:
            self._con.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, kind: str, tag: str, payload: dict, source: str, *, target: str | None = None,
            draft: str | None = None, method: str | None = None, k: int | None = None,
            acceptance_rate: float | None = None, mean_accepted_length: float | None = None,
            environment: str | None = None) -> int:
        _check_observation(kind, tag)
        now = datetime.now(timezone.utc).isoformat(timespec="microseconds")
        self._con.execute("BEGIN IMMEDIATE")
        try:
            cursor = self._con.execute(
                "INSERT INTO observations (kind, tag, target, draft, method, k, acceptance_rate, mean_accepted_length,"
                " payload, source, created_at, environment) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (kind, tag, target, draft, method, k, acceptance_rate, mean_accepted_length,
                 json.dumps(payload, sort_keys=True), source, now, environment))
            self._con.execute("COMMIT")
        except BaseException:
            self._con.execute("ROLLBACK")
            raise
        assert cursor.lastrowid is not None  # set by every successful INSERT
        return int(cursor.lastrowid)

    def list(self, kind: str | None = None, tag: str | None = None) -> list[Observation]:
        query = ("SELECT id, kind, tag, target, draft, method, k, acceptance_rate, mean_accepted_length, payload, "
                 "source, created_at, environment FROM observations")
        clauses, args = [], []
        if kind:
            clauses.append("kind = ?")
            args.append(kind)
        if tag:
            clauses.append("tag = ?")
            args.append(tag)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        query += " ORDER BY id"
        try:
            rows = self._con.execute(query, args).fetchall()
        except sqlite3.DatabaseError as err:  # a page of the table damaged past the header _inspect read
            raise SpecError("store", f"{self.path} cannot be read ({err})",
                            "an intact specsize calibration store") from None
        return [_observation(row, str(self.path)) for row in rows]

    def latest_acceptance(self, tag: str, target: str | None = None, draft: str | None = None,
                          method: str | None = None) -> Observation:
        """The newest acceptance observation for `tag` (matching target/draft/method where recorded)."""
        rows = [o for o in self.list(tag=tag) if o.kind in ("acceptance", "live")
                and (o.acceptance_rate is not None or o.mean_accepted_length is not None)]
        matching = [o for o in rows if (target is None or o.target in (None, target))
                    and (draft is None or o.draft in (None, draft)) and (method is None or o.method in (None, method))]
        if not matching:
            tags = sorted({o.tag for o in self.list() if o.kind in ("acceptance", "live")})
            raise SpecError("acceptance_from_store", f"no acceptance recorded for tag {_quoted(tag)}"
                            + (f" and {method} {draft or ''}".rstrip() if method else ""),
                            _some(tags) if tags else "record one with `specsize calibrations add` or measure")
        return matching[-1]


# the type each column of a row must hold (SQLite keeps whatever a writer put in a column, whatever its declared type)
_ROW_TYPES = (("id", int, False), ("kind", str, False), ("tag", str, False), ("target", str, True),
              ("draft", str, True), ("method", str, True), ("k", int, True), ("acceptance_rate", float, True),
              ("mean_accepted_length", float, True), ("payload", str, False), ("source", str, False),
              ("created_at", str, False), ("environment", str, True))


def _observation(row: tuple, where: str) -> Observation:
    """One row of all 13 columns as an Observation, the JSON payload (column 9) decoded; a row another program wrote
    with a value of the wrong type, or a payload that is not a JSON object, is named rather than crashing a reader."""
    values = list(row)
    for i, (name, kind, nullable) in enumerate(_ROW_TYPES):
        value = values[i]
        if value is None and nullable:
            continue
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            values[i] = value = float(value)
        elif kind is int and isinstance(value, float) and value.is_integer():  # a REAL column another writer chose
            values[i] = value = int(value)
        if not isinstance(value, kind) or isinstance(value, bool) or (isinstance(value, float)
                                                                      and not math.isfinite(value)):
            raise SpecError("store", f"{where}: row #{values[0]!r:.20} has {name} = {value!r:.40}, not a "
                            f"{'number' if kind is not str else 'text'}", "rows written by specsize")
    try:
        payload = json.loads(values[9])
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise SpecError("store", f"{where}: row #{values[0]} has a payload that is not a JSON object",
                        "rows written by specsize")
    values[9] = payload
    return Observation(*values)


def _quoted(tag: str, limit: int = 80) -> str:
    """A tag as a message quotes it: cut at `limit` characters, so a 5,000-character tag is not echoed whole."""
    return repr(tag) if len(tag) <= limit else f"{tag[:limit]!r}... ({len(tag):,} characters)"


def _some(tags: list[str], shown: int = 20) -> str:
    """The first `shown` tags, each cut short, and how many more there are: never a listing of every stored tag."""
    listed = ", ".join(tag if len(tag) <= 60 else tag[:60] + "..." for tag in tags[:shown])
    return listed + (f", and {len(tags) - shown:,} more (`specsize calibrations`)" if len(tags) > shown else "")


class PostgresStore(Store):
    """The calibration store in a PostgreSQL database (`--store postgresql://...`, and the service's database
    when it runs on PostgreSQL): the same `observations` table and rows, through SQLAlchemy (specsize[service]).
    Every write is one transaction; rows are never updated."""

    def __init__(self, path: str | Path | None = None, create: bool = True):  # its table is made on connect
        from sqlalchemy import create_engine  # noqa: PLC0415 - only for a PostgreSQL store

        url = str(named_store(path))
        self.path = Path("postgresql")
        self.url = "postgresql+psycopg://" + url.split("://", 1)[1]
        try:
            self._engine = create_engine(self.url, pool_pre_ping=True)
            with self._engine.begin() as con:
                observations_table().create(con, checkfirst=True)
        except Exception as err:  # unreachable, refused: one line, no password
            raise SpecError("store", f"cannot open the PostgreSQL store ({type(err).__name__})",
                            "a reachable postgresql://USER@HOST:PORT/DB you may write to") from None

    def close(self) -> None:
        self._engine.dispose()

    def add(self, kind: str, tag: str, payload: dict, source: str, *, target: str | None = None,
            draft: str | None = None, method: str | None = None, k: int | None = None,
            acceptance_rate: float | None = None, mean_accepted_length: float | None = None,
            environment: str | None = None) -> int:
        _check_observation(kind, tag)
        table = observations_table()
        with self._engine.begin() as con:
            inserted = con.execute(table.insert().values(
                kind=kind, tag=tag, target=target, draft=draft, method=method, k=k, acceptance_rate=acceptance_rate,
                mean_accepted_length=mean_accepted_length, payload=json.dumps(payload, sort_keys=True),
                source=source, created_at=datetime.now(timezone.utc).isoformat(timespec="microseconds"),
                environment=environment))
        return int(inserted.inserted_primary_key[0])  # type: ignore[index]

    def list(self, kind: str | None = None, tag: str | None = None) -> list[Observation]:
        from sqlalchemy import select  # noqa: PLC0415

        table = observations_table()
        query = select(*(table.c[name] for name in COLUMNS))
        if kind:
            query = query.where(table.c.kind == kind)
        if tag:
            query = query.where(table.c.tag == tag)
        with self._engine.connect() as con:
            rows = con.execute(query.order_by(table.c.id)).all()
        return [_observation(tuple(row), "the PostgreSQL store") for row in rows]


COLUMNS = ("id", "kind", "tag", "target", "draft", "method", "k", "acceptance_rate", "mean_accepted_length",
           "payload", "source", "created_at", "environment")


def observations_table():
    """The `observations` table as SQLAlchemy sees it (the columns of MIGRATIONS 1 and 2)."""
    from sqlalchemy import Column, Float, Integer, MetaData, Table, Text  # noqa: PLC0415

    return Table("observations", MetaData(),
                 Column("id", Integer, primary_key=True, autoincrement=True), Column("kind", Text, nullable=False),
                 Column("tag", Text, nullable=False), Column("target", Text), Column("draft", Text),
                 Column("method", Text), Column("k", Integer), Column("acceptance_rate", Float),
                 Column("mean_accepted_length", Float), Column("payload", Text, nullable=False),
                 Column("source", Text, nullable=False), Column("created_at", Text, nullable=False),
                 Column("environment", Text))
