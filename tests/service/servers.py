"""Real servers for the service tests: `specsize serve` as a uvicorn subprocess on a free port, and a real
PostgreSQL 15 cluster (initdb + pg_ctl in a temporary folder, on a free port)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def specsize(*args: str, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specsize.cli.main", *args], capture_output=True, text=True,
                          input=stdin, env=env, cwd=REPO, timeout=120)


def add_user(db: str, name: str, role: str, password: str | None = None, env: dict | None = None) -> str:
    args = ["users", "add", name, "--role", role, "--db", db] + (["--password-stdin"] if password else [])
    done = specsize(*args, env=env, stdin=(password + "\n") if password else None)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]  # the token: the last line of stdout


class Server:
    """`specsize serve` in a subprocess; `stop()` ends it (by its own pid)."""

    def __init__(self, db: str, data_home: Path, *extra: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(os.environ, XDG_DATA_HOME=str(data_home), PYTHONUNBUFFERED="1")
        self.log = data_home / f"serve-{self.port}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "specsize.cli.main", "serve", "--db", db, "--port", str(self.port), *extra],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, env=self.env, cwd=REPO)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"specsize serve exited: {self.log.read_text()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"specsize serve did not answer in 60 s: {self.log.read_text()}")

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class Postgres:
    """A throwaway PostgreSQL cluster. As root, initdb and the server run as the `postgres` user (they refuse
    root), through runuser."""

    def __init__(self):
        initdb = shutil.which("initdb") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))), None)
        if initdb is None:
            raise RuntimeError("no initdb on PATH nor in /usr/lib/postgresql/*/bin (apt-get install postgresql)")
        self.bin = Path(initdb).resolve().parent
        self.folder = Path(tempfile.mkdtemp(prefix="specsize-pg-"))
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            import pwd  # noqa: PLC0415

            try:
                entry = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and there is no `postgres` user to run the server as") from None
            if runuser is None:
                raise RuntimeError("running as root and there is no runuser to drop to the postgres user")
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            self.prefix = [runuser, "-u", "postgres", "--"]
        self.port = free_port()
        data = self.folder / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-instructions")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.folder / "server.log"), "-w", "-t", "60",
                  "-o", f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.folder} "
                  "-c fsync=off", "start")
        self.data = data
        self._run(str(self.bin / "createdb") if (self.bin / "createdb").exists() else "createdb",
                  "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "specsize")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/specsize"

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self.prefix, *args], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr.strip() or done.stdout.strip()}")

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
