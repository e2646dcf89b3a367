from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
pytest.importorskip("fastapi", reason="the service tests need specsize[service] (part of specsize[test])")

from servers import Postgres  # noqa: E402


@pytest.fixture(scope="session")
def postgres():
    try:
        cluster = Postgres()
    except Exception as err:  # noqa: BLE001 - the reason is printed with the skip
        print(f"PostgreSQL could not start: {err}", file=sys.stderr)
        pytest.skip(f"PostgreSQL could not start: {err}")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_url(request, tmp_path_factory):
    """A fresh service database: a SQLite file, or a fresh database on the real PostgreSQL cluster."""
    if request.param == "sqlite":
        return str(tmp_path_factory.mktemp("db") / "service.sqlite")
    cluster = request.getfixturevalue("postgres")
    import subprocess  # noqa: PLC0415

    import secrets  # noqa: PLC0415

    name = f"t_{secrets.token_hex(6)}"
    done = subprocess.run([*cluster.prefix, str(cluster.bin / "createdb"), "-h", "127.0.0.1", "-p",
                           str(cluster.port), "-U", "postgres", name], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return f"postgresql://postgres@127.0.0.1:{cluster.port}/{name}"
