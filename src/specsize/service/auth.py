"""Who may do what: users with a role, API tokens, passwords and UI sessions.

- Roles, each including the one before: viewer (read plans, deployments, the live view), planner (compute and
  save plans, new versions, check-live), admin (register /metrics endpoints, read the audit log).
- An API token is `sst_<id>_<secret>` with 256 random bits of secret; the database keeps only argon2id of the
  secret (argon2-cffi), so a stolen database yields no usable token. Verifying argon2 costs tens of
  milliseconds, so a verified (id, sha256(token)) pair is remembered in this process only, for a minute; the
  token's row is still read on every request, so a revocation holds at once.
- Passwords: argon2id too. Sessions: a random cookie whose sha256 is stored, with a CSRF token of its own.
- Nothing here logs a secret; `users add` prints the new token once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Callable

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from ..core.errors import SpecError, control_character
from . import db

ROLES = ("viewer", "planner", "admin")
SESSION_SECONDS = 8 * 3600
_hasher = PasswordHasher()
_VERIFIED: dict[str, tuple[float, "User"]] = {}
_FAILED: dict[str, float] = {}  # (id, sha256(token)) of a wrong token -> until when it is answered without hashing
VERIFIED_SECONDS = 60.0


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str

    def can(self, role: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)


def _valid_name(name: str) -> bool:
    return bool(name) and len(name) <= 64 and all(c.isalnum() or c in "._-@" for c in name)


NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@")


def _check_name(name: str) -> str:
    """A new user's name: ASCII letters, digits, '.', '_', '-', '@'. The audit log and the UI name people by it, so a
    name must not pass for another: Unicode letters had let 'аdmin' (a Cyrillic а) and 'ａｄｍｉｎ' (fullwidth) be
    added beside 'admin', and the same name in other case is refused where it is checked (add_user)."""
    if not _valid_name(name) or not set(name) <= NAME_CHARS:
        raise SpecError("name", f"invalid user name {name[:80]!r}",
                        "1-64 ASCII letters, digits, '.', '_', '-', '@'")
    return name


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise SpecError("role", f"unknown role {role!r}", ", ".join(ROLES))
    return role


def _new_token(con, user_id: int) -> str:
    token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    con.execute(db.tokens.insert().values(id=token_id, user_id=user_id, secret_hash=_hasher.hash(secret),
                                          created_at=db.now()))
    return f"sst_{token_id}_{secret}"


def add_user(engine: Engine, name: str, role: str, password: str | None = None, actor: str = "cli") -> str:
    """Create a user and one API token; returns the token (shown once, stored only as a hash)."""
    _check_name(name)
    _check_role(role)
    if password is not None and len(password) < 12:
        raise SpecError("password", "too short", "at least 12 characters")
    control = control_character(password) if password is not None else None
    if password is not None and control is not None:
        # no one can type it at the login form: `printf 'secret\r\n' | specsize users add ... --password-stdin` (a
        # Windows line end; the CLI takes off the "\n") had stored "secret\r", a password that never signed in
        where = password.index(control)
        raise SpecError("password", f"holds a control character ({control!r} at character {where + 1}), "
                        "which no one can type at the login form (a Windows line end?)",
                        "at least 12 characters without control characters")
    with engine.begin() as con:
        existing = con.execute(select(db.users.c.name, db.users.c.revoked_at)
                               .where(func.lower(db.users.c.name) == name.lower())).first()
        if existing:
            # a name is never given to a second person, nor the same name in other case ('Alice' beside 'alice'): the
            # audit log names its actors by name, and a revoked user's row stays for it (docs/service.md)
            state = f"was revoked at {existing[1][:19]}" if existing[1] else "exists"
            taken = f"user {existing[0]!r}" + (f" (the name {name!r} in other case)" if existing[0] != name else "")
            raise SpecError("name", f"{taken} {state}; a name is never given to another user (the audit log "
                            "names people by it)", "a new user name (`specsize users list` shows the names taken)")
        inserted = con.execute(db.users.insert().values(
            name=name, role=role, password_hash=_hasher.hash(password) if password else None, created_at=db.now()))
        user_id = inserted.inserted_primary_key[0]  # type: ignore[index]
        token = _new_token(con, user_id)
        db.write_audit(con, actor, "user.add", name, {"role": role, "password": password is not None})
    return token


def list_users(engine: Engine) -> list[dict]:
    with engine.connect() as con:
        rows = con.execute(select(db.users.c.name, db.users.c.role, db.users.c.created_at, db.users.c.revoked_at,
                                  db.users.c.password_hash.is_not(None)).order_by(db.users.c.id)).all()
    return [{"name": r[0], "role": r[1], "created_at": r[2], "revoked_at": r[3], "password": bool(r[4])}
            for r in rows]


def revoke_user(engine: Engine, name: str, actor: str = "cli") -> None:
    """Revoke a user with all their tokens and sessions (the row stays, for the audit trail)."""
    with engine.begin() as con:
        row = con.execute(select(db.users.c.id, db.users.c.revoked_at).where(db.users.c.name == name)).first()
        if row is None:
            raise SpecError("name", f"no user {name!r}", "a name from `specsize users list`")
        stamp = db.now()
        con.execute(db.users.update().where(db.users.c.id == row[0]).values(revoked_at=row[1] or stamp))
        con.execute(db.tokens.update().where(db.tokens.c.user_id == row[0], db.tokens.c.revoked_at.is_(None))
                    .values(revoked_at=stamp))
        con.execute(db.sessions.delete().where(db.sessions.c.user_id == row[0]))
        db.write_audit(con, actor, "user.revoke", name)


def any_user(engine: Engine) -> bool:
    with engine.connect() as con:
        return con.execute(select(db.users.c.id).where(db.users.c.revoked_at.is_(None)).limit(1)).first() is not None


def user_for_token(engine: Engine, token: str, before_verifying: Callable[[str], None] | None = None) -> User | None:
    """The user a bearer token is, None when it is none. `before_verifying(token id)` runs before an argon2 check (a
    token not verified in the last minute), and may raise to refuse the caller first (the service's rate limits), so
    that a flood of wrong secrets costs no hashing once refused. A wrong token is remembered for a minute too."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != "sst":
        return None
    with engine.connect() as con:
        row = con.execute(select(db.tokens.c.secret_hash, db.users.c.id, db.users.c.name, db.users.c.role)
                          .join(db.users, db.users.c.id == db.tokens.c.user_id)
                          .where(db.tokens.c.id == parts[1], db.tokens.c.revoked_at.is_(None),
                                 db.users.c.revoked_at.is_(None))).first()
    if row is None:
        return None
    key = parts[1] + ":" + hashlib.sha256(token.encode()).hexdigest()
    user = User(row[1], row[2], row[3])
    cached = _VERIFIED.get(key)
    if cached and cached[0] > time.monotonic() and cached[1] == user:
        return user
    if _FAILED.get(key, 0.0) > time.monotonic():  # this very token failed lately: it fails again, unhashed
        return None
    # a token this process verified before (its sha256 matched, which only the whole token can) is hashed again
    # without being charged first: a flood of wrong secrets for its id, which charges the id, had also refused the
    # token's owner (429) once their minute ran out, so anyone who knew a token's id could lock its owner out
    known = cached is not None and cached[1] == user
    if before_verifying is not None and not known:
        before_verifying(parts[1])
    try:
        _hasher.verify(row[0], parts[2])
    except (VerificationError, InvalidHashError):
        if len(_FAILED) > 10_000:
            _FAILED.clear()
        _FAILED[key] = time.monotonic() + VERIFIED_SECONDS
        return None
    if len(_VERIFIED) > 10_000:
        _VERIFIED.clear()
    _VERIFIED[key] = (time.monotonic() + VERIFIED_SECONDS, user)
    return user


def user_for_password(engine: Engine, name: str, password: str) -> User | None:
    from .requests import bad_text  # noqa: PLC0415

    row = None
    # a name no user can have (a NUL, which PostgreSQL refuses) or a password UTF-8 cannot encode is a wrong one
    if _valid_name(name) and not bad_text(password):
        with engine.connect() as con:
            row = con.execute(select(db.users.c.id, db.users.c.role, db.users.c.password_hash)
                              .where(db.users.c.name == name, db.users.c.revoked_at.is_(None))).first()
    if row is None or row[2] is None:
        _hasher.hash(password.encode("utf-8", "replace"))  # the same work either way: no user enumeration by timing
        return None
    try:
        _hasher.verify(row[2], password)
    except (VerificationError, InvalidHashError):
        return None
    return User(row[0], name, row[1])


def _sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def new_session(engine: Engine, user: User) -> tuple[str, str]:
    """(cookie value, CSRF token) of a new session."""
    cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    with engine.begin() as con:
        con.execute(db.sessions.delete().where(db.sessions.c.expires_at < time.time()))
        con.execute(db.sessions.insert().values(id_hash=_sha(cookie), user_id=user.id, csrf=csrf,
                                                expires_at=time.time() + SESSION_SECONDS))
        db.write_audit(con, user.name, "session.login", user.name)
    return cookie, csrf


def session(engine: Engine, cookie: str) -> tuple[User, str] | None:
    with engine.connect() as con:
        row = con.execute(select(db.users.c.id, db.users.c.name, db.users.c.role, db.sessions.c.csrf)
                          .join(db.users, db.users.c.id == db.sessions.c.user_id)
                          .where(db.sessions.c.id_hash == _sha(cookie), db.sessions.c.expires_at > time.time(),
                                 db.users.c.revoked_at.is_(None))).first()
    return (User(row[0], row[1], row[2]), row[3]) if row else None


def end_session(engine: Engine, cookie: str) -> None:
    with engine.begin() as con:
        con.execute(db.sessions.delete().where(db.sessions.c.id_hash == _sha(cookie)))


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
