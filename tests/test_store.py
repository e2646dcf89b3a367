"""Calibration store: concurrent writers lose nothing; bad files are reported and never modified."""

import hashlib
import json
import multiprocessing
import sqlite3

import pytest

from specsize.core.errors import SpecError
from specsize.adapters.store import MIGRATIONS, SCHEMA_VERSION, Store


def _writer(path: str, worker: int, count: int) -> None:
    with Store(path) as store:
        for i in range(count):
            store.add("acceptance", "chat", {"worker": worker, "i": i}, f"worker-{worker}",
                      acceptance_rate=0.5 + worker / 100)


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "store.sqlite")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 150)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Store(path) as store:
        rows = store.list()
    assert len(rows) == 300
    assert {(r.payload["worker"], r.payload["i"]) for r in rows} == {(w, i) for w in range(2) for i in range(150)}


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_corrupt_file_is_reported_and_untouched(tmp_path):
    bad = tmp_path / "store.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    before = _digest(bad)
    with pytest.raises(SpecError, match="not an SQLite database"):
        Store(bad)
    assert _digest(bad) == before
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    before = _digest(broken)
    with pytest.raises(SpecError, match="corrupt|not a specsize store"):
        Store(broken)
    assert _digest(broken) == before


def test_newer_schema_is_reported_and_untouched(tmp_path):
    path = tmp_path / "future.sqlite"
    with Store(path) as store:
        store.add("acceptance", "t", {}, "test", acceptance_rate=0.6)
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    before = _digest(path)
    with pytest.raises(SpecError, match="newer than this specsize"):
        Store(path)
    assert _digest(path) == before


def test_foreign_sqlite_is_untouched(tmp_path):
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE people (name TEXT)")
    con.commit()
    con.close()
    before = _digest(path)
    with pytest.raises(SpecError, match="not a specsize store"):
        Store(path)
    assert _digest(path) == before


def test_migrates_an_older_store_and_keeps_its_rows(tmp_path):
    path = tmp_path / "v1.sqlite"
    con = sqlite3.connect(path)
    for statement in MIGRATIONS[1]:
        con.execute(statement)
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("INSERT INTO observations (kind, tag, payload, source, created_at, acceptance_rate) "
                "VALUES ('acceptance', 'old', '{}', 'v1', '2026-01-01T00:00:00+00:00', 0.61)")
    con.commit()
    con.close()
    with Store(path) as store:
        rows = store.list()
        assert rows[0].acceptance_rate == 0.61 and rows[0].environment is None
        store.add("acceptance", "old", {}, "v2", acceptance_rate=0.7, environment="ci")
        assert store.latest_acceptance("old").acceptance_rate == 0.7


def test_nothing_is_overwritten(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        first = store.add("acceptance", "chat", {"n": 1}, "a", acceptance_rate=0.6)
        second = store.add("acceptance", "chat", {"n": 2}, "b", acceptance_rate=0.7)
        assert first != second and len(store.list(tag="chat")) == 2
        assert store.latest_acceptance("chat").id == second


def test_plan_uses_acceptance_from_store(tmp_path, capsys):
    from specsize.cli.main import main

    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.add("acceptance", "chat", {}, "measured on staging", method="draft_model",
                  draft="meta-llama/Llama-3.2-1B-Instruct", k=4, acceptance_rate=0.55)
    with pytest.raises(SystemExit):
        main(["plan", "--format", "json", "--acceptance-from-store", "chat", "--store", str(path)])
    data = json.loads(capsys.readouterr().out)
    assert data["perf"]["acceptance_rate"] == pytest.approx(0.55)
    assert "store #1 'chat'" in data["perf"]["acceptance_source"]
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--acceptance-from-store", "nope", "--store", str(path)])
    assert exc.value.code == 2


def test_a_named_pipe_as_the_store_or_the_services_database_is_refused_not_a_hang(tmp_path, monkeypatch):
    """SQLite opening a FIFO waits for a writer for ever: $SPECSIZE_STORE and the service's --db, which no CLI flag
    check sees, had hung. The store refuses any path that exists and is no regular file."""
    import os

    from specsize.service import db

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="not a regular file"):
        Store(fifo)
    with pytest.raises(SpecError) as err:
        db.connect(str(fifo))
    assert err.value.field == "db" and "not a regular file" in err.value.problem
