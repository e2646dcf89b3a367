"""`specsize serve`: the public API (`specsize.api`) over HTTP, and the web UI, behind access control.

Why FastAPI on Starlette + uvicorn: the request bodies are the library's field table, and FastAPI turns a pydantic
model derived from that table into validation *and* the served OpenAPI document in one step; Starlette gives the
plain ASGI middleware the limits need (body size, rate, headers); uvicorn is the reference ASGI server. A plan is
a few milliseconds of CPU, so the synchronous handlers run in Starlette's thread pool; simulate and search run as
killable background jobs (`jobs.py`).

This module is a thin shell: it parses, checks who is asking, calls `specsize.api`, stores, and renders with
`specsize.reports`. It computes nothing of a plan itself.
"""

import ipaddress
import json
import logging
import socket
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Iterator

from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__, api
from ..core.errors import SpecError, first_repeated
from ..inputs.load import kept_mean_measured_at
from . import auth, db, deployments
from .jobs import JobRunner
from .requests import EXTRA, build, request_model, search_spec_text, text

log = logging.getLogger("specsize.service")


@dataclass(frozen=True)
class Config:
    db_url: str | None = None
    rate_per_minute: int = 600  # per user (per client address before login)
    max_body_bytes: int = 1 << 20
    job_timeout_s: float = 300.0
    job_workers: int = 2
    secure_cookies: bool = True  # the Secure flag; `serve` drops it only on a loopback bind over plain HTTP
    live_poll_s: float = 5.0
    # /metrics fetches at once (check-live and the live view): each may take api.METRICS_DEADLINE_S, so a stalled
    # endpoint polled from several tabs would otherwise hold every worker; more are refused (429)
    live_fetches: int = 4


class ApiError(Exception):
    def __init__(self, status: int, field: str | None, problem: str, accepted: str | None = None,
                 headers: dict | None = None):
        self.status, self.field, self.problem, self.accepted, self.headers = status, field, problem, accepted, headers


def _printable(text: str | None) -> str | None:
    """`text` as a response can carry it: a lone surrogate an error quoted (which UTF-8 cannot encode, and had made
    the answer a 500) escaped."""
    return text if text is None else text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_body(field: str | None, problem: str, accepted: str | None) -> dict:
    return {"error": {"field": _printable(field), "problem": _printable(problem), "accepted": _printable(accepted)}}


# --- limits, headers, metrics (plain ASGI middleware) ------------------------------------------------------

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"),
                    (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                    (b"cross-origin-opener-policy", b"same-origin"), (b"cross-origin-resource-policy", b"same-origin"),
                    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()")]


class Guard:
    """Body-size limit (413, counted as the body arrives, so chunked uploads cannot slip past a header),
    security headers on every response, and the service's own request metrics."""

    def __init__(self, app, max_body: int, metrics: "Metrics"):
        self.app, self.max_body, self.metrics = app, max_body, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope.get("method") == "HEAD":
            # a load balancer's probe (HEAD /healthz) had been answered 405: the routes are declared for GET only.
            # HEAD is GET without the body (RFC 9110 9.3.2): the same status and headers, Content-Length included
            scope = {**scope, "method": "GET"}
            send = _without_body(send)
        started = time.perf_counter()
        status_seen = {"code": 500}
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            return await self._too_large(scope, send, started)
        writes = scope.get("method") in ("POST", "PUT", "PATCH")
        api_json = writes and scope["path"].startswith(("/api/", "/ui/")) \
            and b"json" in headers.get(b"content-type", b"").lower()
        if writes and (declared is None or api_json):
            # a chunked body, or an API call's JSON: read it up to the limit before the app sees any of it (a JSON
            # object naming a key twice is refused: the parser would keep the last silently), then replay it
            chunks, received, more = [], 0, True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    break
                chunks.append(message.get("body", b""))
                received += len(chunks[-1])
                if received > self.max_body:
                    return await self._too_large(scope, send, started)
                more = message.get("more_body", False)
            problem = body_problem(b"".join(chunks)) if api_json else None
            if problem is not None:
                return await self._refuse(scope, send, started, 422, error_body(*problem))
            replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

            async def replayed():
                return replay.pop() if replay else await receive()

            receive = replayed

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                status_seen["code"] = message["status"]
                if 300 <= message["status"] < 400:
                    message = {**message, "headers": _relative_location(message.get("headers", []), headers)}
                extra = list(SECURITY_HEADERS)
                if scope["path"].startswith("/api/") or scope["path"] == "/metrics":
                    extra.append((b"cache-control", b"no-store"))
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            self.metrics.observe(scope, status_seen["code"], time.perf_counter() - started)

    async def _too_large(self, scope, send, started):
        await self._refuse(scope, send, started, 413, error_body(
            "body", f"the request body is larger than {self.max_body:,} bytes", f"at most {self.max_body:,} bytes"))

    async def _refuse(self, scope, send, started, status: int, error: dict):
        body = json.dumps(error).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close"), *SECURITY_HEADERS]})
        await send({"type": "http.response.body", "body": body})
        self.metrics.observe(scope, status, time.perf_counter() - started)


def _without_body(send):
    """`send` with every body chunk emptied: a HEAD answer's start message as GET's, and no content."""
    async def head_send(message):
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)
    return head_send


def _relative_location(response_headers, request_headers: dict) -> list:
    """A redirect's Location on this service without its scheme and host: the router's trailing-slash redirect
    builds an absolute URL from the request's Host header, so a forged Host (`GET /login/` with `Host: evil.example`)
    had been sent back as `Location: http://evil.example/login`, a redirect a shared cache in front of the service
    would serve to everyone. A path on the same host reads the same to a browser (RFC 9110 allows a relative
    Location)."""
    from urllib.parse import urlsplit  # noqa: PLC0415

    host = request_headers.get(b"host", b"").decode("latin-1").lower()
    out = []
    for name, value in response_headers:
        if name.lower() == b"location":
            url = urlsplit(value.decode("latin-1"))
            if url.netloc and url.netloc.lower() == host and url.path.startswith("/") \
                    and not url.path.startswith("//"):
                value = (url.path + (f"?{url.query}" if url.query else "")).encode("latin-1")
        out.append((name, value))
    return out


JSON_OBJECT = "a JSON object of fields"


def body_problem(body: bytes) -> tuple[str, str, str] | None:
    """(field, problem, accepted) of a JSON body the app's own parser would misread or the service cannot keep: bytes
    that are not UTF-8, nesting too deep to read, a key named twice in one object, a number Python's JSON reader
    refuses (past 4,300 digits, a ValueError that is no syntax error), or a string holding a NUL or a lone surrogate
    (PostgreSQL refuses the one, no response can carry the other: both had been 500s, and a stored one had made every
    later read of its deployment a 500); None otherwise (a syntax error the app's parser reports itself)."""
    twice: list = []

    def pairs(items: list) -> dict:
        repeated = None if twice else first_repeated(key for key, _ in items)
        if repeated is not None:
            twice.append(repeated)
        return dict(items)

    from .requests import BAD_TEXT, first_bad_text  # noqa: PLC0415

    try:
        parsed = json.loads(body, object_pairs_hook=pairs)
        bad = None if twice else first_bad_text(parsed)
    except json.JSONDecodeError:
        return None
    except UnicodeDecodeError:
        return "body", "is not valid UTF-8", f"{JSON_OBJECT}, in UTF-8"
    except RecursionError:
        return "body", "is nested too deeply to read", JSON_OBJECT
    except ValueError:
        return "body", "holds a number of more than 4,300 digits, which Python's JSON reader refuses", "a JSON object"
    if twice:
        return "body", f"the key {str(twice[0])[:80]!r} appears twice in one object", "each key once"
    if bad is not None:
        return bad, BAD_TEXT, "text without NUL characters or lone surrogates (\\ud800-\\udfff)"
    return None


class Metrics:
    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram  # noqa: PLC0415

        self.registry = CollectorRegistry()
        self.requests = Counter("specsize_http_requests", "HTTP requests", ["method", "route", "status"],
                                registry=self.registry)
        self.latency = Histogram("specsize_http_request_seconds", "HTTP request latency", ["route"],
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
                                 registry=self.registry)
        self.plans = Counter("specsize_plans_computed", "Plans computed", registry=self.registry)
        self.jobs = Gauge("specsize_jobs_running", "Background jobs running", registry=self.registry)
        self.refused = Counter("specsize_requests_refused", "Requests refused", ["reason"], registry=self.registry)

    def observe(self, scope, status: int, seconds: float) -> None:
        route = scope.get("route")
        path = getattr(route, "path", None) or ("static" if scope["path"].startswith("/static/") else "unmatched")
        self.requests.labels(scope.get("method", ""), path, str(status)).inc()
        self.latency.labels(path).observe(seconds)
        if status in (413, 429, 401, 403):
            self.refused.labels(str(status)).inc()


class RateLimiter:
    """A token bucket per key (user name, or client address before login): `per_minute` requests a minute,
    bursts of up to the same number."""

    def __init__(self, per_minute: int):
        self.rate, self.capacity = per_minute / 60.0, float(per_minute)
        self.buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> float | None:
        """None when allowed, else the seconds until the next request would be."""
        now = time.monotonic()
        with self._lock:
            tokens, stamp = self.buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - stamp) * self.rate)
            if tokens < 1.0:
                self.buckets[key] = (tokens, now)
                return (1.0 - tokens) / self.rate
            self.buckets[key] = (tokens - 1.0, now)
            if len(self.buckets) > 100_000:
                self.buckets.clear()
            return None


# --- the app ------------------------------------------------------------------------------------------------

LIVE_FETCHES_PER_ENDPOINT = 2


class State:
    def __init__(self, config: Config):
        self.config = config
        self.engine = db.connect(config.db_url)
        self.url = db.normalize_url(config.db_url)
        self.store_path = db.sqlite_path(self.url)
        # the calibration store lives in the same database: the SQLite file, or the PostgreSQL URL
        self.store = str(self.store_path) if self.store_path else self.url
        self.metrics = Metrics()
        self.limiter = RateLimiter(config.rate_per_minute)
        self.jobs = JobRunner(config.job_workers, config.job_timeout_s)
        self.catalog = frozenset(row["id"] for row in api.models())
        self.live: dict[tuple[str, str], list[dict]] = {}
        self.live_fetches = threading.BoundedSemaphore(config.live_fetches)
        self._per_endpoint: dict[str, threading.BoundedSemaphore] = {}
        self._per_endpoint_lock = threading.Lock()

    def check_live(self, plan: dict, url: str) -> Any:
        """api.check_live against a registered endpoint: at most config.live_fetches at once, and at most
        LIVE_FETCHES_PER_ENDPOINT of them at one endpoint, so a stalled one cannot take the others' turns."""
        with self._per_endpoint_lock:
            mine = self._per_endpoint.setdefault(url, threading.BoundedSemaphore(LIVE_FETCHES_PER_ENDPOINT))
        if not mine.acquire(blocking=False):
            raise ApiError(429, "endpoint", f"{LIVE_FETCHES_PER_ENDPOINT} fetches of this endpoint are already "
                           "running", "a retry in a few seconds", headers={"retry-after": "5"})
        try:
            if not self.live_fetches.acquire(blocking=False):
                raise ApiError(429, "endpoint", f"{self.config.live_fetches} /metrics fetches are already running",
                               "a retry in a few seconds", headers={"retry-after": "5"})
            try:
                return api.check_live(plan, metrics=url)
            finally:
                self.live_fetches.release()
        finally:
            mine.release()


def current_user(request: Request) -> auth.User:
    """The caller: a bearer token (API) or a session cookie (UI, with its CSRF token on every write)."""
    state: State = request.app.state.service
    header = request.headers.get("authorization", "")
    client = request.client.host if request.client else "?"
    user = None

    def refuse(wait: float | None) -> None:
        if wait is not None:
            raise ApiError(429, "rate", "too many requests", f"at most {state.config.rate_per_minute} a minute",
                           {"retry-after": str(max(1, int(wait + 0.999)))})

    def limit(key: str) -> None:
        refuse(state.limiter.allow(key))

    def before_verifying(token_id: str) -> None:
        # a token not verified lately costs an argon2 check (~0.25 s of CPU): its token id, as sent from this address,
        # pays first, so a flood of wrong secrets for one id is refused (429) unhashed, the other users behind a
        # shared address (a proxy) are not charged for it (an unknown id is never hashed), and the flood spends no
        # turn of the token's owner elsewhere: the id alone (public: it is not the secret) had let anyone who knew it
        # empty its bucket and keep its owner answered 429 (auth.user_for_token also spares a token it verified before)
        limit(f"token:{token_id}@{client}")

    if header.lower().startswith("bearer "):
        user = auth.user_for_token(state.engine, header[7:].strip(), before_verifying)
    else:
        cookie = request.cookies.get("specsize_session")
        found = auth.session(state.engine, cookie) if cookie else None
        if found:
            user, csrf = found
            if request.method not in ("GET", "HEAD", "OPTIONS"):
                sent = request.headers.get("x-csrf-token") or request.scope.get("specsize_form_csrf") or ""
                if not auth.same(sent, csrf):
                    raise ApiError(403, "csrf", "missing or wrong CSRF token", "the page's csrf token")
            request.state.csrf = csrf
    if user is not None:
        limit(f"user:{user.name}")
    else:  # every failed authentication costs its address
        limit(f"addr:{client}")
    if user is None:
        raise ApiError(401, "authorization", "authentication required",
                       "Authorization: Bearer TOKEN (specsize users add), or log in at /login",
                       {"www-authenticate": "Bearer"})
    request.state.user = user
    return user


def role(needed: str) -> Callable:
    def check(request: Request, user: auth.User = Depends(current_user)) -> auth.User:
        if not user.can(needed):
            raise ApiError(403, "role", f"{user.role} may not do this", f"{'an' if needed[0] in 'aeiou' else 'a'} {needed} or higher")
        return user
    return check


def _http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
    """Starlette's own refusals (no such route, a method the route does not take) in the service's error shape, with
    their headers: a 405 carries `Allow` (RFC 9110), and names the methods it takes (it had had no `Allow` and
    `accepted: null`)."""
    headers = dict(err.headers or {})
    field, accepted = None, None
    if err.status_code == 405:
        field, accepted = "method", headers.get("allow") or headers.get("Allow")
        problem = f"{request.method} is not a method of {request.url.path[:80]}"
    elif err.status_code == 404:
        field, problem, accepted = "path", f"no route {request.url.path[:80]}", "a path of GET /api/v1/openapi.json"
    else:
        problem = str(err.detail)
    return JSONResponse(error_body(field, problem, accepted), status_code=err.status_code, headers=headers or None)


def _spec_error(err: SpecError) -> JSONResponse:
    return JSONResponse(error_body(err.field, err.problem, err.accepted), status_code=getattr(err, "http_status", 400))


PARAMETERS = ("query", "path")


def _validation_error(_request: Request, err: RequestValidationError) -> JSONResponse:
    from ..inputs.request import FIELDS, info  # noqa: PLC0415

    first = err.errors()[0] if err.errors() else {}
    where = list(first.get("loc", ()))
    where_in = where[0] if where else None
    if where and where[0] in ("body", "query", "path", "header", "cookie"):  # the parameter, not where it was sent
        where = where[1:]
    loc = [str(p) for p in where]
    field = loc[0] if loc and first.get("type") != "json_invalid" else "body"
    accepted = info(loc[0]).accepted if loc and loc[0] in FIELDS and len(loc) == 1 else None
    problem = str(first.get("msg", "invalid value"))
    context = first.get("ctx") or {}
    if first.get("type") == "string_too_long":
        accepted = f"at most {context.get('max_length')} characters"
    elif first.get("type") == "string_too_short":
        accepted = f"at least {context.get('min_length')} character(s)"
    elif first.get("type") == "int_type":
        accepted = "an integer (a JSON number, not a boolean or a string)"
    elif first.get("type") in ("int_parsing", "int_parsing_size", "int_from_float") and where_in in PARAMETERS:
        accepted = "an integer"  # a path or query parameter: its text ("1.5", "x") is no integer
    if loc and (loc[0] in FIELDS or loc[0] == "deployment_yaml") and where_in == "body" \
            and first.get("type") in JSON_TYPE_ERRORS:
        # a request field of the wrong JSON type, named with what the field takes: a float field's union (int | float)
        # had answered "Input should be a valid integer" / "an integer" to "headroom": "nan", and a lengths field
        # "a valid dictionary" with no accepted values to "prompt_tokens": 5
        inside = [part for error in err.errors() if error.get("loc", ())[1:2] == (loc[0],)
                  for part in error["loc"][2:]]  # a union's branches: the item a list branch found wrong
        problem, accepted = wrong_json_type(loc[0], inside, getattr(err, "body", None))
    if first.get("type") == "missing" and where_in in PARAMETERS:
        problem, accepted = f"the {where_in} parameter {field} is missing", f"{field}=VALUE in the {where_in}"
    elif where_in in PARAMETERS:  # which parameter, in the problem pydantic words
        problem = f"{problem} (the {where_in} parameter {field})"
    if field == "body" and first.get("type") in ("model_attributes_type", "dict_type") \
            and "json" not in _request.headers.get("content-type", "").lower():
        problem = "must be JSON, sent with content-type: application/json"
        accepted = f"{JSON_OBJECT}, with content-type: application/json"
    elif field == "body" and first.get("type") in ("model_attributes_type", "dict_type"):
        accepted = JSON_OBJECT
    if first.get("type") == "extra_forbidden":
        from .requests import SERVER_SIDE  # noqa: PLC0415

        problem, accepted = "unknown field", "the fields of GET /api/v1/openapi.json (PlanRequest)"
        if field in SERVER_SIDE:
            problem = "names a file on the server, which the service does not read for callers"
            accepted = "lengths given inline (prompt_tokens, output_tokens)"
    return JSONResponse(error_body(field, problem, accepted), status_code=422)


# pydantic's refusals of a value's JSON type (not of its range or length, which keep their own words)
JSON_TYPE_ERRORS = frozenset(("int_type", "float_type", "bool_type", "string_type", "dict_type", "list_type",
                              "int_from_float", "float_parsing", "int_parsing"))
_JSON_NAMES = ((type(None), "null"), (bool, "a boolean"), ((int, float), "a number"), (str, "a string"),
               (list, "an array"), (dict, "an object"))


def _json_name(value: Any) -> str:
    return next((name for kind, name in _JSON_NAMES if isinstance(value, kind)), type(value).__name__)


# the JSON a request field takes, by the field table's kind (inputs.fields.KINDS); "path" fields are refused anyway
_TAKES = {"int": "a JSON number", "float": "a JSON number", "bool": "true or false", "str": "a JSON string",
          "choice": "a JSON string", "mapping": "a JSON object", "str_list": "an array of JSON strings",
          "int_list": "an array of JSON numbers or a string N,N,...",
          "lengths": "an object {p50, p95, p99, max}, a string p50=N,p99=N or an array of token counts"}


def wrong_json_type(name: str, inside: list, body: Any) -> tuple[str, str]:
    """(problem, accepted) for body field `name` sent as the wrong JSON type: what was sent (the value, or its item at
    the first list index in `inside`, pydantic's paths below the field) and the JSON the field takes, with the range of
    a number (the field table's own words)."""
    from ..inputs.request import info  # noqa: PLC0415

    if name == "deployment_yaml":
        takes, accepted = "a JSON string", "a JSON string: the text of a deployment file (YAML)"
    else:
        kind = info(name).kind
        takes = _TAKES[kind]
        accepted = f"{takes}: {info(name).accepted}" if kind in ("int", "float", "int_list") else takes
    value = body.get(name) if isinstance(body, dict) else None
    index = next((part for part in inside if isinstance(part, int)), None)
    if index is not None and isinstance(value, list) and index < len(value):
        return f"must be {takes}; item {index} is {_json_name(value[index])}", accepted
    return f"must be {takes}, got {_json_name(value)}", accepted


class Job(BaseModel):
    id: str
    kind: str
    status: str


NOTE_LIMIT = 4096  # characters of a version's note
AUDIT_LIMIT = 1000  # entries one GET /api/v1/audit returns at most


class LiveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: text() = Field(description="The name of a registered /metrics endpoint (POST /api/v1/endpoints).")  # type: ignore[valid-type]
    deployment: text() | None = Field(None, description="A saved deployment whose plan to hold the server against.")  # type: ignore[valid-type]
    version: StrictInt | None = Field(None, description="Its version (default: the newest).")
    plan: dict | None = Field(None, description="Or a plan JSON (specsize plan --format json).")
    record: text() | None = Field(None, min_length=1, description="Also record the observation in the "  # type: ignore[valid-type]
                                  "calibration store under this tag (1-200 characters).")


class EndpointBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: text()  # type: ignore[valid-type]
    url: StrictStr = Field(description="http(s)://HOST:PORT/metrics of a vLLM server")


class SearchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spec: StrictStr = Field(description="The search spec (YAML text), as `specsize search SPEC_FILE` reads it.")
    simulate: StrictBool = True


def _check_endpoint_url(url: str) -> str:
    """A /metrics URL an admin may register: http(s), a host, no credentials, no control characters or spaces, at
    most 2,048 characters, and not a link-local, multicast or unspecified address (169.254.169.254 is the cloud
    metadata service, not a vLLM server)."""
    from urllib.parse import urlsplit  # noqa: PLC0415

    accepted = "http(s)://HOST:PORT/metrics without credentials, at most 2,048 characters"
    if len(url) > 2048 or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise SpecError("url", f"cannot register {url[:80]!r}: too long, or a space or control character", accepted)
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise SpecError("url", f"cannot register {url[:80]!r}", accepted) from None
    if parts.scheme not in ("http", "https") or not host or len(host) > 253 or parts.username or parts.password:
        raise SpecError("url", f"cannot register {url[:80]!r}", accepted)
    from ..adapters.http_fetch import blocked_address  # noqa: PLC0415

    try:  # what the host resolves to now (2852039166 and 0xa9.0xfe.0xa9.0xfe are 169.254.169.254); the fetch checks
        # the address it reaches again, so a name resolving elsewhere later is caught there
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, parts.port or 80, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError):
        addresses = set()
    blocked = sorted(a for a in addresses | {host} if blocked_address(a))
    if blocked:
        raise SpecError("url", f"{host} is {blocked[0]}, a link-local, multicast or unspecified address, not a "
                        "server's", "the address of a vLLM or SGLang server")
    return url


@contextmanager
def candidates_named() -> Iterator[None]:
    """A speedup candidate's error named as the body names them: `candidates` (the library says `candidate`, the
    command line's flag)."""
    try:
        yield
    except SpecError as err:
        if err.field != "candidate":
            raise
        raise SpecError("candidates", err.problem, err.accepted) from None


def request_of(state: State, body: Any, command: str | None = None) -> Any:
    """The request of a body; `command`, the one the route runs: a field it does not read is refused."""
    with candidates_named():
        return build(body.model_dump(exclude_none=True), state.catalog, state.store, command)


# The simulated time a route that answers in the request (plan and check with `simulate`, report, saving a
# deployment) may run: the command line's default duration. Longer scenarios are jobs with a deadline
# (POST /api/v1/simulate), so that one request cannot hold a worker, and every other user, for many minutes.
SYNC_SIMULATION_S = 300.0


def in_request(body_request, simulates: bool = False):
    """`body_request`, refused when the simulation it asks for (`simulates`: the route's own default) is longer
    than a request may run."""
    if body_request.simulates(simulates) and body_request.duration > SYNC_SIMULATION_S:
        raise SpecError("duration", f"{body_request.duration:g} s of simulation in a request",
                        f"at most {SYNC_SIMULATION_S:g} s here; POST /api/v1/simulate runs a longer scenario as a job")
    return body_request


def planned(state: State, body_request) -> Any:
    result = api.plan(in_request(body_request))
    state.metrics.plans.inc()
    return result


def _job(state: State, kind: str, payload: dict, user: auth.User) -> JSONResponse:
    job = state.jobs.submit(kind, payload, user.name)
    if isinstance(job, str):
        error = state.jobs.refusal(job)
        raise ApiError(state.jobs.refusal_status(job), error["field"], error["problem"], error["accepted"],
                       {"retry-after": "5"})
    return JSONResponse(job.to_dict(with_result=False) | {"href": f"/api/v1/jobs/{job.id}"}, status_code=202)


def _plan_for_live(state: State, body: LiveBody) -> dict:
    """The plan check-live holds the server against: a saved deployment's (at `version`), or `plan`; one of them (a
    `version` beside a `plan`, or a `plan` beside a `deployment`, had been dropped without a word)."""
    if body.deployment is not None and body.plan is not None:
        raise SpecError("plan", "both a deployment and a plan given", "deployment (a saved one) or plan, not both")
    if body.version is not None and body.deployment is None:
        raise SpecError("version", "a version without a deployment", "deployment with its version, or a plan alone")
    if body.deployment:
        return deployments.version(state.engine, body.deployment, body.version)["plan"]
    if body.plan is None:
        raise SpecError("plan", "no plan to hold the server against", "deployment (a saved one) or plan")
    return body.plan


def _endpoint_url(state: State, name: str) -> str:
    from sqlalchemy import select  # noqa: PLC0415

    row = None
    if deployments.NAME.fullmatch(name):  # a name no endpoint can have (a NUL, which PostgreSQL refuses) reads nothing
        with state.engine.connect() as con:
            row = con.execute(select(db.endpoints.c.url).where(db.endpoints.c.name == name)).first()
    if row is None:
        raise ApiError(403, "endpoint", f"{deployments.shown(name)} is not a registered /metrics endpoint; the service fetches "
                       "only registered ones", "a name from GET /api/v1/endpoints (an admin registers them)")
    return row[0]


def _record(state: State, result, tag: str, source: str, user: auth.User) -> None:
    api.record_live(result, tag, state.store, source)  # the calibration store: the service's own database
    with state.engine.begin() as con:
        db.write_audit(con, user.name, "calibration.record", tag, {"source": source})


def _save(state: State, name: str, request, user: auth.User, note: str | None, create: bool,
          newest: int | None = None) -> dict:
    """Plan `request` and store it as a version of `name`; `newest`: the newest version the saving page showed (a
    version saved since refuses the save, deployments.save_version)."""
    result = planned(state, request)
    from .requests import SERVER_SIDE  # noqa: PLC0415

    settings = {k: v for k, v in request.settings().items() if k not in SERVER_SIDE}  # the store path is ours
    number = deployments.save_version(state.engine, name, settings, result.to_dict(), user.name,
                                      note, create, newest)
    return {"name": name, "version": number, "verdict": result.verdict.verdict,
            "headroom_fraction": result.to_dict()["headroom_fraction"]}


def _service_routes(app: FastAPI, state: State, PlanRequest: Any) -> None:  # noqa: N803
    """Health, metrics."""
    @app.get("/healthz", tags=["service"])
    def healthz() -> dict:
        return {"status": "ok", "version": __version__}

    @app.get("/readyz", tags=["service"])
    def readyz() -> JSONResponse:
        try:
            with state.engine.connect() as con:
                con.exec_driver_sql("SELECT 1")
        except Exception as err:  # noqa: BLE001
            return JSONResponse({"status": "unavailable", "database": type(err).__name__}, status_code=503)
        return JSONResponse({"status": "ready", "database": state.engine.dialect.name})

    @app.get("/metrics", tags=["service"])
    def metrics(_user: auth.User = Depends(current_user)) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # noqa: PLC0415

        state.metrics.jobs.set(state.jobs.running())
        return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)



def _library_routes(app: FastAPI, state: State, PlanRequest: Any) -> None:  # noqa: N803
    """The library over HTTP."""
    @app.post("/api/v1/plan", tags=["plan"], summary="specsize plan --format json")
    def plan(body: PlanRequest = Body(...), _u: auth.User = Depends(role("planner"))) -> dict:  # type: ignore[valid-type]
        return planned(state, request_of(state, body, "plan")).to_dict()

    @app.post("/api/v1/check", tags=["plan"], summary="specsize check --format json: the plan, and the gate's "
              "exit code as `exit_code`")
    def check(body: PlanRequest = Body(...), _u: auth.User = Depends(role("planner"))) -> dict:  # type: ignore[valid-type]
        result = planned(state, request_of(state, body, "check"))
        return result.to_dict() | {"exit_code": {"fits": 0, "thin": 1, "does_not_fit": 3}[result.verdict.verdict]}

    @app.post("/api/v1/speedup", tags=["plan"], summary="specsize speedup --format json")
    def speedup(body: PlanRequest = Body(...), _u: auth.User = Depends(role("planner"))) -> dict:  # type: ignore[valid-type]
        from ..reports.speedup import to_dict  # noqa: PLC0415

        request = request_of(state, body, "speedup")
        with candidates_named():
            return to_dict(api.speedup(request))

    @app.post("/api/v1/report", tags=["plan"], summary="specsize report --format html (or markdown with "
              "?format=markdown)", response_class=Response)
    def report(body: PlanRequest = Body(...), format: str = "html",  # type: ignore[valid-type]
               _u: auth.User = Depends(role("planner"))) -> Response:
        if format not in ("html", "markdown"):
            raise SpecError("format", f"unknown format {format!r}", "html, markdown")
        data = api.report(in_request(request_of(state, body, "report"), simulates=True))
        state.metrics.plans.inc()
        if format == "markdown":
            from ..reports import report_markdown  # noqa: PLC0415

            return PlainTextResponse(report_markdown.render(data), media_type="text/markdown")
        from ..reports import html  # noqa: PLC0415

        # a document to save: its own inline styles and SVG, nothing else; sandboxed when opened in place
        return Response(html.render(data), media_type="text/html", headers={
            "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox",
            "content-disposition": 'attachment; filename="specsize-report.html"'})

    @app.post("/api/v1/simulate", tags=["jobs"], status_code=202,
              summary="specsize simulate --format json, as a background job")
    def simulate(body: PlanRequest = Body(...), user: auth.User = Depends(role("planner"))) -> JSONResponse:  # type: ignore[valid-type]
        return _scenario_job("simulate", body, user)

    @app.post("/api/v1/stops-paying", tags=["jobs"], status_code=202,
              summary="specsize stops-paying --format json, as a background job")
    def stops_paying(body: PlanRequest = Body(...), user: auth.User = Depends(role("planner"))) -> JSONResponse:  # type: ignore[valid-type]
        return _scenario_job("stops_paying", body, user)

    def _scenario_job(kind: str, body: Any, user: auth.User) -> JSONResponse:
        """A simulation job of `kind` on the request `body` describes; bad input is answered now, not by the job."""
        from ..inputs.resolve import check_scenario  # noqa: PLC0415

        check_scenario(request_of(state, body, kind.replace("_", "-")))
        return _job(state, kind, {"body": body.model_dump(exclude_none=True), "store": state.store}, user)

    @app.post("/api/v1/search", tags=["jobs"], status_code=202,
              summary="specsize search --format json, as a background job")
    def search(body: SearchBody, user: auth.User = Depends(role("planner"))) -> JSONResponse:
        return _job(state, "search", {"spec": search_spec_text(body.spec), "simulate": body.simulate}, user)



def _job_routes(app: FastAPI, state: State) -> None:
    """A job's status and result (GET), and its cancellation (DELETE): the owner's, or an admin's of anyone's."""
    def owned_job(job_id: str, user: auth.User) -> Any:
        found = state.jobs.get(job_id)
        if found is None or (found.owner != user.name and not user.can("admin")):  # another's job is no job (404)
            raise ApiError(404, "job", f"no job {deployments.shown(job_id, 40)}",
                           "an id from POST simulate, stops-paying or search (a restart of the service forgets its jobs)")
        return found

    @app.get("/api/v1/jobs/{job_id}", tags=["jobs"])
    def job(job_id: str, user: auth.User = Depends(role("viewer"))) -> dict:
        return owned_job(job_id, user).to_dict()

    @app.delete("/api/v1/jobs/{job_id}", tags=["jobs"],
                summary="Cancel a queued or running job (yours; an admin's, any): its process is stopped at once")
    def cancel_job(job_id: str, user: auth.User = Depends(role("planner"))) -> dict:
        found = owned_job(job_id, user)
        if not state.jobs.cancel(found, user.name):
            raise ApiError(409, "job", f"the job already ended ({found.status})", "a queued or running job")
        with state.engine.begin() as con:
            db.write_audit(con, user.name, "job.cancel", found.id, {"kind": found.kind, "owner": found.owner})
        return found.to_dict()


def _live_and_catalog_routes(app: FastAPI, state: State, PlanRequest: Any) -> None:  # noqa: N803
    """check-live against registered endpoints; the catalogs."""
    @app.post("/api/v1/check-live", tags=["live"], summary="specsize check-live --format json, against a "
              "registered /metrics endpoint")
    def check_live(body: LiveBody, user: auth.User = Depends(role("planner"))) -> dict:
        if body.record is not None:  # as the CLI's --record: 1-200 characters, no control character
            from ..adapters.store import check_tag  # noqa: PLC0415

            check_tag(body.record, "record")
        url = _endpoint_url(state, body.endpoint)
        result = state.check_live(_plan_for_live(state, body), url)
        if body.record:
            _record(state, result, body.record, f"service check-live {body.endpoint}", user)
        return result.to_dict()

    @app.get("/api/v1/models", tags=["catalog"])
    def models(_u: auth.User = Depends(role("viewer"))) -> list[dict]:
        return api.models()

    @app.get("/api/v1/gpus", tags=["catalog"])
    def gpus(_u: auth.User = Depends(role("viewer"))) -> list[dict]:
        from ..reports.listings import gpus as listing  # noqa: PLC0415

        return json.loads(listing(api.gpus(), "json"))



def _endpoint_routes(app: FastAPI, state: State, PlanRequest: Any) -> None:  # noqa: N803
    """Registered /metrics endpoints."""
    @app.get("/api/v1/endpoints", tags=["live"])
    def list_endpoints(_u: auth.User = Depends(role("viewer"))) -> list[dict]:
        from sqlalchemy import select  # noqa: PLC0415

        with state.engine.connect() as con:
            rows = con.execute(select(db.endpoints.c.name, db.endpoints.c.url, db.endpoints.c.created_by,
                                      db.endpoints.c.created_at).order_by(db.endpoints.c.name)).all()
        return [{"name": r[0], "url": r[1], "created_by": r[2], "created_at": r[3]} for r in rows]

    @app.post("/api/v1/endpoints", tags=["live"], status_code=201)
    def add_endpoint(body: EndpointBody, user: auth.User = Depends(role("admin"))) -> dict:
        deployments.check_name(body.name, "name", "endpoint")
        url = _check_endpoint_url(body.url)
        from sqlalchemy.exc import IntegrityError  # noqa: PLC0415

        try:
            with state.engine.begin() as con:
                con.execute(db.endpoints.insert().values(name=body.name, url=url, created_by=user.name,
                                                         created_at=db.now()))
                db.write_audit(con, user.name, "endpoint.add", body.name, {"url": url})
        except IntegrityError:
            raise SpecError("name", f"endpoint {body.name!r} exists", "a new name") from None
        return {"name": body.name, "url": url}



def _version_named(state: State, name: str, number: int | None, field: str) -> dict:
    """deployments.version, an unknown version refused under `field`, the name the caller gave it (base_version,
    a diff's a or b), not `version`."""
    try:
        return deployments.version(state.engine, name, number)
    except deployments.NotFound as err:
        if err.field != "version":
            raise
        raise deployments.NotFound(field, err.problem, err.accepted) from None


def _base_version(state: State, name: str, base: int | None) -> dict:
    """The stored version a new version starts from: `base` (base_version), or the newest."""
    return _version_named(state, name, base, "base_version")


def _deployment_routes(app: FastAPI, state: State, PlanRequest: Any) -> None:  # noqa: N803
    """Saved deployments."""
    class NewDeployment(PlanRequest):  # type: ignore[valid-type, misc]
        deployment_name: StrictStr = Field(description="The deployment's name (letters, digits, . _ -).")
        note: text(NOTE_LIMIT) | None = Field(None, description="Why this version.")  # type: ignore[valid-type]

    class NewVersion(PlanRequest):  # type: ignore[valid-type, misc]
        note: text(NOTE_LIMIT) | None = Field(None, description="Why this version.")  # type: ignore[valid-type]
        base_version: StrictInt | None = Field(None, description="Apply the fields over this version (default: the "
                                               "newest); without any field, the version is re-planned as it is.")

    @app.get("/api/v1/deployments", tags=["deployments"])
    def list_deployments(_u: auth.User = Depends(role("viewer"))) -> list[dict]:
        return deployments.list_deployments(state.engine)

    @app.post("/api/v1/deployments", tags=["deployments"], status_code=201)
    def create_deployment(body: NewDeployment, user: auth.User = Depends(role("planner"))) -> dict:
        fields = body.model_dump(exclude_none=True)
        name, note = fields.pop("deployment_name"), fields.pop("note", None)
        deployments.check_name(name)
        return _save(state, name, build(fields, state.catalog, state.store), user, note, create=True)

    @app.post("/api/v1/deployments/{name}/versions", tags=["deployments"], status_code=201,
              description="The fields given over the stored version's; a field sent as null removes the setting "
                          "(its default applies), and one acceptance (acceptance_rate, mean_accepted_length, "
                          "acceptance_from_store) replaces the other.")
    def new_version(name: str, body: NewVersion, user: auth.User = Depends(role("planner"))) -> dict:
        # the fields sent, a null among them (it removes the setting: dropped with the unsent ones, `"quantization":
        # null` had stored a version unchanged)
        fields = body.model_dump(exclude_unset=True)
        note, base = fields.pop("note", None), fields.pop("base_version", None)
        if "target" in fields and fields["target"] is None:  # without one the library plans its embedded default
            raise SpecError("target", "a version cannot remove its target model", "a model id from GET /api/v1/models")
        if fields.pop(EXTRA, None) is not None:  # under the stored fields it would change nothing (they override a file's settings)
            raise SpecError(EXTRA, "a new version is field changes over a stored version, not a deployment file",
                            "the fields to change; a deployment file starts a deployment (POST /api/v1/deployments)")
        start = _base_version(state, name, base)
        request = build(merged(start["request"], fields, planned_k(start)), state.catalog, state.store)
        return _save(state, name, request, user, note, create=False)

    @app.get("/api/v1/deployments/{name}", tags=["deployments"])
    def get_deployment(name: str, _u: auth.User = Depends(role("viewer"))) -> dict:
        return deployments.version(state.engine, name) | {"versions": deployments.versions(state.engine, name)}

    @app.get("/api/v1/deployments/{name}/versions", tags=["deployments"])
    def list_versions(name: str, _u: auth.User = Depends(role("viewer"))) -> list[dict]:
        return deployments.versions(state.engine, name)

    @app.get("/api/v1/deployments/{name}/versions/{number}", tags=["deployments"])
    def get_version(name: str, number: int, _u: auth.User = Depends(role("viewer"))) -> dict:
        return deployments.version(state.engine, name, number)

    @app.get("/api/v1/deployments/{name}/diff", tags=["deployments"])
    def diff(name: str, a: int, b: int, _u: auth.User = Depends(role("viewer"))) -> dict:
        return deployments.diff(_version_named(state, name, a, "a"), _version_named(state, name, b, "b"))

    @app.get("/api/v1/deployments/{name}/versions/{number}/yaml", tags=["deployments"], response_class=PlainTextResponse)
    def export_yaml(name: str, number: int, _u: auth.User = Depends(role("viewer"))) -> PlainTextResponse:
        v = deployments.version(state.engine, name, number)
        return PlainTextResponse(f"# {name} v{number} by {v['author']} at {v['created_at']}\n"
                                 + deployments.to_yaml(v["request"], v["plan"], state.store),
                                 media_type="application/yaml")

    @app.get("/api/v1/deployments/{name}/versions/{number}/command", tags=["deployments"])
    def export_command(name: str, number: int, _u: auth.User = Depends(role("viewer"))) -> list[dict]:
        return deployments.version(state.engine, name, number)["plan"].get("engine_commands", [])

    @app.get("/api/v1/audit", tags=["service"], summary="The newest `limit` entries of the audit log, newest first")
    def audit_log(limit: int = Query(100, description=f"Entries to return, 1 to {AUDIT_LIMIT:,}."),
                  _u: auth.User = Depends(role("admin"))) -> list[dict]:
        from sqlalchemy import select  # noqa: PLC0415

        if not 1 <= limit <= AUDIT_LIMIT:  # clamped, limit=0 had answered one entry and limit=5000 a thousand
            raise SpecError("limit", f"{str(limit)[:24]} entries", f"an integer from 1 to {AUDIT_LIMIT:,}")
        with state.engine.connect() as con:
            rows = con.execute(select(db.audit).order_by(db.audit.c.id.desc()).limit(limit)).all()
        return [dict(r._mapping) for r in rows]


def create_app(config: Config | None = None) -> FastAPI:
    config = config or Config()
    # the service reads no file and no hub for its callers: a model is a catalog id or a published variant of one,
    # read from its name (catalog.variants), never a path that happens to exist here; its job processes inherit this
    api.read_models_by_name_only()
    state = State(config)
    PlanRequest = request_model()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        # the service stops: its jobs' processes with it (uvicorn re-raises SIGTERM after its shutdown, so no atexit
        # handler runs; a job left running had gone on past its deadline, for no one)
        from starlette.concurrency import run_in_threadpool  # noqa: PLC0415

        await run_in_threadpool(state.jobs.shutdown)

    app = FastAPI(title="specsize", version=__version__, docs_url=None, redoc_url=None,  # their pages load scripts from a CDN
                  lifespan=lifespan,
                  openapi_url="/api/v1/openapi.json",
                  description="Will a speculative-decoding deployment fit, with headroom, at the load you expect? "
                              "Every request needs `Authorization: Bearer TOKEN` (`specsize users add`).")
    app.state.service = state

    @app.exception_handler(SpecError)
    async def _spec(_request: Request, err: SpecError):
        return _spec_error(err)

    @app.exception_handler(ApiError)
    async def _api(_request: Request, err: ApiError):
        return JSONResponse(error_body(err.field, err.problem, err.accepted), status_code=err.status,
                            headers=err.headers)

    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, err: StarletteHTTPException):
        return _http_error(request, err)

    @app.exception_handler(Exception)
    async def _internal(_request: Request, err: Exception):
        log.error("internal error: %s", type(err).__name__)
        return JSONResponse(error_body(None, f"internal error ({type(err).__name__})", None), status_code=500)

    def openapi() -> dict:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi  # noqa: PLC0415

            app.openapi_schema = described(get_openapi(title=app.title, version=app.version,
                                                       description=app.description, routes=app.routes))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    _service_routes(app, state, PlanRequest)
    _library_routes(app, state, PlanRequest)
    _job_routes(app, state)
    _live_and_catalog_routes(app, state, PlanRequest)
    _endpoint_routes(app, state, PlanRequest)
    _deployment_routes(app, state, PlanRequest)
    from .ui import mount_ui  # noqa: PLC0415

    mount_ui(app, state, current_user, role, merged, lambda *a: _save(state, *a),
             lambda name: _endpoint_url(state, name))
    return Guard(app, config.max_body_bytes, state.metrics)  # type: ignore[return-value]


ERROR_SCHEMA = {
    "type": "object", "title": "Error", "required": ["error"],
    "description": "Every refusal: the field it names, the problem, and the values accepted (docs/service.md).",
    "properties": {"error": {"type": "object", "required": ["field", "problem", "accepted"], "properties": {
        "field": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "problem": {"type": "string"},
        "accepted": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}}
ERRORS = {"400": "a value the library refuses", "401": "no valid bearer token or session",
          "403": "the caller's role may not do this (or a session write without its CSRF token)",
          "404": "no such deployment, version or job", "409": "a save that kept losing the race for a version number, or a job that had already ended",
          "413": "a request body past --max-body", "422": "a body or parameter of the wrong shape",
          "429": "past the rate limit, or too many jobs or /metrics fetches at once (Retry-After)",
          "503": "the service is stopping"}
PUBLIC_PATHS = ("/healthz", "/readyz")
# what a route answers other than JSON, as its handler sends it
MEDIA_TYPES = {"/metrics": {"text/plain": {"schema": {"type": "string"}}},
               "/api/v1/report": {"text/html": {"schema": {"type": "string"}},
                                  "text/markdown": {"schema": {"type": "string"}}},
               "/api/v1/deployments/{name}/versions/{number}/yaml": {"application/yaml": {"schema": {"type": "string"}}}}


def described(schema: dict) -> dict:
    """FastAPI's OpenAPI document, made to say what the service does: errors are `Error` bodies (FastAPI documents
    its own `{"detail": [...]}`, which the service never sends) with the statuses each route can answer, every route
    but the health checks needs a bearer token, and the routes that answer text say which text."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas["Error"] = ERROR_SCHEMA
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer", "description":
                                                "An API token, sst_<id>_<secret> (`specsize users add`)."}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            codes = set()
            if path not in PUBLIC_PATHS:
                operation["security"] = [{"bearer": []}]
                codes |= {"401", "403", "429"}
            if operation.get("parameters") or operation.get("requestBody"):
                codes |= {"400", "422"}
            if operation.get("requestBody"):
                codes.add("413")
            if "{" in path or path == "/api/v1/check-live":
                codes.add("404")
            if (path == "/api/v1/deployments/{name}/versions" and method == "post") or method == "delete":
                codes.add("409")
            if path in ("/api/v1/simulate", "/api/v1/stops-paying", "/api/v1/search"):
                codes.add("503")
            responses = operation.setdefault("responses", {})
            for code in sorted(codes):
                responses[code] = {"description": ERRORS[code], "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            if path in MEDIA_TYPES:
                ok = next(code for code in responses if code.startswith("2"))
                responses[ok]["content"] = MEDIA_TYPES[path]
    return schema


def merged(current: dict, changes: dict, planned_k: int | None = None) -> dict:
    """A stored request with `changes` over it; a change to None removes the setting. `planned_k`: the k the stored
    version's plan ran (its inputs.num_speculative_tokens), where the request leaves k to its default."""
    out = dict(current)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    # one acceptance at a time: a new one replaces the other forms (a store tag over a stored rate had been refused as
    # two acceptances, with no way to remove the rate)
    forms = {"acceptance_rate": ("mean_accepted_length", "measured_at_k", "acceptance_from_store"),
             "mean_accepted_length": ("acceptance_rate", "acceptance_from_store"),
             "acceptance_from_store": ("acceptance_rate", "mean_accepted_length", "measured_at_k")}
    for given, others in forms.items():
        if changes.get(given) is not None:
            for other in others:
                if other not in changes:
                    out.pop(other, None)
    # a mean accepted length kept while k changes stays the figure measured at the old k (inputs.resolve reads one
    # without measured_at_k as measured at the deployment's k): 2.6 tokens a pass measured at k=3 had been re-read at
    # k=5 as a lower per-token rate (0.642, not 0.717), planning no gain from the longer k, at k=2 as a rate of 0.86,
    # and at k=1 refused, so the ranked fix "lower num_speculative_tokens from 3 to 1" could not be applied
    if "num_speculative_tokens" in changes and "mean_accepted_length" in out and "mean_accepted_length" not in changes \
            and out.get("measured_at_k") is None:
        at = kept_mean_measured_at(current.get("num_speculative_tokens") or planned_k, changes["num_speculative_tokens"])
        if at is not None:
            out["measured_at_k"] = at
    return out


def planned_k(version: dict) -> int | None:
    """The k a stored version's plan ran (`merged`'s planned_k)."""
    k = ((version.get("plan") or {}).get("inputs") or {}).get("num_speculative_tokens")
    return k if isinstance(k, int) and not isinstance(k, bool) else None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
