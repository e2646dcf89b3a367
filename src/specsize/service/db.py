"""The service's database: users, tokens, sessions, deployments and their versions, registered /metrics
endpoints and the audit log, on SQLite (default) or PostgreSQL, with ordered migrations.

Why not Alembic: the schema is one linear history that must apply identically on SQLite and PostgreSQL at
start-up, inside one transaction, from inside an installed wheel. A numbered list of migrations, each a function
over a SQLAlchemy connection, with the version in `service_schema` (the same scheme as the calibration store,
`adapters/store.py`), does that without shipping alembic.ini, env.py and a script folder. PostgreSQL takes an
advisory lock and SQLite `BEGIN IMMEDIATE`, so two servers starting at once migrate once.

The calibration store lives in the same database: on SQLite its own module (`adapters.store.Store`) creates and
upgrades its tables in the same file first, so `specsize calibrations --store FILE` reads what the service
recorded; on PostgreSQL migration 1 creates the same `observations` table.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import (Column, Float, ForeignKey, Integer, MetaData, String, Table, Text, UniqueConstraint,
                        create_engine, event, func, select, text)
from sqlalchemy.engine import Connection, Engine

from ..core.errors import SpecError

metadata = MetaData()

users = Table(
    "service_users", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("role", String(16), nullable=False),
    Column("password_hash", Text),  # argon2id; NULL: token-only user
    Column("created_at", String(40), nullable=False),
    Column("revoked_at", String(40)),
)
tokens = Table(
    "service_tokens", metadata,
    Column("id", String(32), primary_key=True),  # the public half of the token (sst_<id>_<secret>)
    Column("user_id", Integer, ForeignKey("service_users.id"), nullable=False),
    Column("secret_hash", Text, nullable=False),  # argon2id of the secret half
    Column("created_at", String(40), nullable=False),
    Column("revoked_at", String(40)),
)
sessions = Table(
    "service_sessions", metadata,
    Column("id_hash", String(64), primary_key=True),  # sha256 of the cookie value, never the value
    Column("user_id", Integer, ForeignKey("service_users.id"), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("expires_at", Float, nullable=False),
)
deployments = Table(
    "service_deployments", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(128), nullable=False, unique=True),
    Column("created_at", String(40), nullable=False),
    Column("created_by", String(64), nullable=False),
)
versions = Table(
    "service_versions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("deployment_id", Integer, ForeignKey("service_deployments.id"), nullable=False),
    Column("version", Integer, nullable=False),
    Column("request", Text, nullable=False),  # JSON: Request.to_dict(), what load_request reads back
    Column("plan", Text, nullable=False),  # JSON: PlanResult.to_dict() (docs/json.md)
    Column("verdict", String(16), nullable=False),
    Column("headroom_fraction", Float),
    Column("note", Text),
    Column("author", String(64), nullable=False),
    Column("created_at", String(40), nullable=False),
    UniqueConstraint("deployment_id", "version"),
)
endpoints = Table(
    "service_endpoints", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(128), nullable=False, unique=True),
    Column("url", Text, nullable=False),
    Column("created_by", String(64), nullable=False),
    Column("created_at", String(40), nullable=False),
)
audit = Table(
    "service_audit", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", String(40), nullable=False),
    Column("actor", String(64), nullable=False),
    Column("action", String(64), nullable=False),
    Column("target", Text),
    Column("detail", Text),
)
schema = Table(
    "service_schema", metadata,
    Column("key", String(32), primary_key=True),
    Column("value", String(64), nullable=False),
)
SERVICE_TABLES = [users, tokens, sessions, deployments, versions, endpoints, audit]


def _v1(con: Connection) -> None:
    for table in SERVICE_TABLES:
        table.create(con, checkfirst=True)
    if con.dialect.name != "sqlite":  # the calibration store's table (adapters/store.py creates it on SQLite)
        from ..adapters.store import observations_table  # noqa: PLC0415

        observations_table().create(con, checkfirst=True)


MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1}
SCHEMA_VERSION = max(MIGRATIONS)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def default_url() -> str:
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'specsize' / 'service.sqlite'}"


def normalize_url(url: str | None) -> str:
    """A path, a sqlite:/// URL or a postgresql:// URL -> a SQLAlchemy URL (psycopg 3 for PostgreSQL)."""
    if not url:
        return default_url()
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if url.startswith(("postgresql+psycopg://", "sqlite:///")):
        return url
    if "://" in url:
        raise SpecError("db", f"unsupported database URL scheme in {url.split('://')[0]!r}",
                        "a SQLite file path, sqlite:///PATH or postgresql://USER@HOST:PORT/DB")
    return f"sqlite:///{Path(url).expanduser().resolve()}"


def sqlite_path(url: str) -> Path | None:
    return Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else None


def redacted(url: str) -> str:
    """The URL with any password hidden, for logs and messages."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    credentials, host = rest.rsplit("@", 1)
    return f"{scheme}://{credentials.split(':')[0]}:***@{host}" if ":" in credentials else url


def connect(url: str | None) -> Engine:
    """Open (creating and migrating as needed) the service database at `url`."""
    given = bool(url)
    url = normalize_url(url)
    path = sqlite_path(url)
    if path is not None:
        if given and not path.parent.is_dir():  # a written --db is taken in its folder, as the calibration store's
            raise SpecError("db", f"folder {path.parent} does not exist",
                            "a SQLite file path in an existing folder, or postgresql://USER@HOST:PORT/DB")
        path.parent.mkdir(parents=True, exist_ok=True)  # the default database's folder
        if not path.exists():  # it will hold password and token hashes: the owner's alone (docs/service.md: 0600)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        from ..adapters.store import Store  # noqa: PLC0415 - the calibration store's tables, in the same file

        try:
            Store(path).close()
        except SpecError as err:  # the calibration store's check of the file, said of the service's --db
            raise SpecError("db", err.problem, "the service's database, or a new path") from None
        # a connection per checkout: opening SQLite costs microseconds, and no pooled connection can keep an old
        # read snapshot (a user added by `specsize users add` while the server runs is seen at once)
        from sqlalchemy.pool import NullPool  # noqa: PLC0415

        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, poolclass=NullPool)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection, _record) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA busy_timeout = 30000")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.close()
    else:
        engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)
    try:
        migrate(engine)
    except SpecError:
        raise
    except Exception as err:  # an unreachable server, bad credentials: one line, the password hidden
        raise SpecError("db", f"cannot open {redacted(url)} ({type(err).__name__}: "
                        f"{str(err).splitlines()[0] if str(err) else ''})",
                        "a reachable database URL you may write to") from None
    return engine


def migrate(engine: Engine) -> int:
    with engine.begin() as con:
        if con.dialect.name == "postgresql":
            con.execute(text("SELECT pg_advisory_xact_lock(7145032101)"))
        else:
            con.exec_driver_sql("SELECT 1")  # opens the transaction; the first write below takes the lock
        schema.create(con, checkfirst=True)
        row = con.execute(select(schema.c.value).where(schema.c.key == "version")).first()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise SpecError("db", f"the database has service schema version {current}, newer than this specsize "
                            f"({SCHEMA_VERSION}); it was left untouched", "upgrade specsize")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[version](con)
        if current < SCHEMA_VERSION:
            con.execute(schema.delete().where(schema.c.key == "version"))
            con.execute(schema.insert().values(key="version", value=str(SCHEMA_VERSION)))
    return SCHEMA_VERSION


def write_audit(con: Connection, actor: str, action: str, target: str | None, detail: Any = None) -> None:
    con.execute(audit.insert().values(at=now(), actor=actor, action=action, target=target,
                                      detail=json.dumps(detail, sort_keys=True) if detail is not None else None))


def count(con: Connection, table: Table) -> int:
    return int(con.execute(select(func.count()).select_from(table)).scalar_one())
