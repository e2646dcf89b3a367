"""The entry points of `specsize serve` and `specsize users`: open the database, check the bind, run uvicorn."""

from __future__ import annotations

import os

from ..core.errors import SpecError


def _engine(db_url: str | None, create: bool = True):
    """The service's database; `create=False` (listing, revoking): an SQLite file that is not there is an error, not
    a new empty database (a mistyped --db had been created, directories and all, and listed as no users)."""
    from . import db  # noqa: PLC0415

    url = db_url or os.environ.get("SPECSIZE_DB")
    path = db.sqlite_path(db.normalize_url(url))
    if not create and path is not None and not path.exists():
        raise SpecError("db", f"{path} does not exist", "the service's database, as `serve --db` takes it; `specsize users "
                        "add` creates one")
    return db.connect(url)


def add_user(db_url: str | None, name: str, role: str, password: str | None) -> str:
    from . import auth  # noqa: PLC0415

    return auth.add_user(_engine(db_url), name, role, password)


def list_users(db_url: str | None) -> list[dict]:
    from . import auth  # noqa: PLC0415

    return auth.list_users(_engine(db_url, create=False))


def revoke_user(db_url: str | None, name: str) -> None:
    from . import auth  # noqa: PLC0415

    auth.revoke_user(_engine(db_url, create=False), name)


def run(db_url: str | None, host: str, port: int, rate_limit: int, max_body: int, job_timeout: float,
        cookie_secure: bool = False) -> None:
    import sys  # noqa: PLC0415

    import uvicorn  # noqa: PLC0415

    from . import auth, db  # noqa: PLC0415
    from .app import Config, create_app, is_loopback  # noqa: PLC0415

    url = db_url or os.environ.get("SPECSIZE_DB")
    local = is_loopback(host)
    if not local and not auth.any_user(_engine(url)):
        raise SpecError("host", f"refusing to bind {host} with no user configured: anyone who reaches it could use "
                        "it", "127.0.0.1, or first `specsize users add NAME --role admin`")
    config = Config(db_url=url, rate_per_minute=rate_limit, max_body_bytes=max_body, job_timeout_s=job_timeout,
                    secure_cookies=cookie_secure or not local)
    _free(host, port)  # a port in use: one line and exit 2, not a "serving" line followed by uvicorn's error
    app = create_app(config)
    print(f"specsize: serving http://{host}:{port} (database {db.redacted(db.normalize_url(url))}); "
          "OpenAPI at /api/v1/openapi.json", file=sys.stderr)
    if local and not auth.any_user(_engine(url)):
        print("specsize: note: no user yet: `specsize users add NAME --role admin` (every request needs one)",
              file=sys.stderr)
    uvicorn.run(app, host=host, port=port, log_level="warning", proxy_headers=False, server_header=False,
                date_header=True, timeout_keep_alive=5, limit_concurrency=256)


def _free(host: str, port: int) -> None:
    """The address can be bound now (uvicorn binds it again a moment later, with SO_REUSEADDR as here)."""
    import socket  # noqa: PLC0415

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        raise SpecError("host", f"cannot resolve {host!r} ({err.strerror or err})", "an address of this machine") \
            from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as err:
            raise SpecError("port", f"cannot listen on {host}:{port}: {err.strerror or err}",
                            "a free port (--port), on an address of this machine (--host)") from None
