"""The web UI: server-rendered pages (Jinja2, autoescaped), one small script and one stylesheet, all served by
the app: no CDN, no external font, no inline script (the CSP forbids it). Figures are inline SVG drawn by
`reports.svg` on the server, so a what-if re-plan is one request: new verdict, new figures."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from functools import partial
from importlib import resources
from types import SimpleNamespace
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool
from starlette.staticfiles import StaticFiles

from .. import api
from ..core.errors import SpecError
from . import auth, deployments
from .requests import BAD_TEXT, build, bad_text

COOKIE = "specsize_session"
LOGIN_COOKIE = "specsize_login"
# what the what-if controls move: request fields, each declared once in the field table
WHATIF = ("concurrency", "burst_factor", "prompt_tokens", "num_speculative_tokens", "acceptance_rate", "gpu", "tp",
          "quantization")
LIVE_POINTS = 120
WHATIF_UNSIMULATED = ("the envelope's verdict, without the burst simulation this deployment's plan runs (simulate): "
                      "Save re-plans with it, and the simulation may make the verdict worse")


def figures(request_obj) -> tuple[Any, dict]:
    """The analysed plan and its figures (no simulation: a few milliseconds)."""
    from ..reports import svg  # noqa: PLC0415

    data = api.report(request_obj.replace(simulate=False))
    figs = {"gpu": svg.gpu_memory(data.gpu_bars), "kv": svg.kv_demand(data.kv_curve),
            "speedup": svg.speedup(data.speedup) if data.speedup else
            f'<p class="note" data-figure="speedup">{data.speedup_note or ""}</p>'}
    return data.result, figs


def _headline(plan: dict) -> dict:
    headroom, policy = plan.get("headroom_fraction"), plan.get("headroom_policy")
    return {"verdict": plan["verdict"], "headroom_fraction": headroom, "headroom_policy": policy,
            # as the CLI prints it, reading as the verdict (0.19979 under THIN is "19.98%", not the "20.0%" of %.1f)
            "headroom_text": deployments.headroom_text_of(plan),
            "breaks_first": plan.get("breaks_first"),
            "reasons": plan.get("reasons", []), "max_concurrency": plan.get("max_concurrency"),
            "recommendations": [{"description": r["description"], "verdict_after": r["verdict_after"],
                                 "changes": r["changes"]} for r in plan.get("recommendations") or []],
            "commands": [{"engine": c["engine"], "shell": c["shell"]} for c in plan.get("engine_commands") or []]}


def _set_cookie(secure: bool, response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict", path="/", secure=secure)


WHATIF_BODY = '{"version": N or null, "changes": {control: value}}'


class BodyShapeError(SpecError):
    """A body of the wrong shape: 422, as the API's own bodies (docs/service.md); a value refused is 400."""

    http_status = 422


class Forbidden(SpecError):
    """A role that may not do this: 403, as the API answers it (a 400 had told a viewer their input was wrong)."""

    http_status = 403


class TooMany(SpecError):
    """Past the rate limit: 429, as the API answers it."""

    http_status = 429


# the refusals a page answers with their own status, as the API does: who may not (403), what is not there (404), too
# many (429); each had been a 200 page saying "error", so a viewer's refused save, a missing CSRF token or an unknown
# deployment read as a success to anything but a person; a save a newer version overtook (409, unchanged_since). A value the library refuses in a form re-renders the page
# (200), as before.
PAGE_STATUSES = (403, 404, 409, 429)


def page_status(err: SpecError) -> int:
    status = getattr(err, "http_status", 200)
    return status if status in PAGE_STATUSES else 200


def form_int(form, name: str, accepted: str) -> int:
    """A form field's integer (a version number, a fix's index), refused naming the field ("invalid literal for int()
    with base 10: 'x'" had been the whole message)."""
    value = form.get(name)
    text = value.strip() if isinstance(value, str) else ""
    # one sign at most: "--1" passed a check that stripped every "-", and int() answered "invalid literal for int()"
    if not (text.isascii() and text.removeprefix("-").isdigit()) or len(text) > 24:
        raise SpecError(name, f"must be an integer, got {deployments.shown(value if isinstance(value, str) else None, 40)}",
                        accepted)
    return int(text)


def whatif_body(raw: object) -> dict:
    """A what-if request's JSON body, checked: an object with an optional integer version and a mapping of the
    what-if controls (WHATIF) to values; anything else is a 4xx naming what is wrong, never an internal error."""
    if not isinstance(raw, dict):
        raise BodyShapeError("body", f"must be a JSON object, got {type(raw).__name__}", WHATIF_BODY)
    version = raw.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise BodyShapeError("version", f"must be an integer, got {version!r:.40}", "a version number of the deployment")
    changes = raw.get("changes")
    changes = {} if changes is None else changes  # a list, 0, "" or false is no mapping: `or {}` had saved them as none
    if not isinstance(changes, dict):
        raise BodyShapeError("changes", f"must be a mapping, got {type(changes).__name__}", WHATIF_BODY)
    unknown = sorted(str(k) for k in changes if k not in WHATIF)
    if unknown:
        raise BodyShapeError("changes", f"unknown control(s) {', '.join(unknown)[:120]}", ", ".join(WHATIF))
    return {"version": version, "changes": changes}


async def json_body(request: Request) -> object:
    """The request's body as JSON; a body that is not JSON is a body of the wrong shape (422), not an internal error.
    It must be sent as JSON (content-type: application/json, as every API body): the body guard checks only such
    bodies (a key named twice, nesting too deep, a NUL), and a text/plain body had slipped past it (a key named twice
    read as its last value, nesting too deep a 500)."""
    if "json" not in request.headers.get("content-type", "").lower():
        raise BodyShapeError("body", "must be JSON, sent with content-type: application/json",
                             f"{WHATIF_BODY}, with content-type: application/json")
    return parse_json(await request.body(), "body")


def parse_json(raw: bytes | str, field: str) -> object:
    """`raw` parsed as JSON, refused (422 naming `field`) where the body guard refuses a body: not JSON, a key named
    twice, nesting too deep to read, a number past 4,300 digits, a NUL or a lone surrogate."""
    from .app import body_problem  # noqa: PLC0415 - the guard's own checks

    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    problem = body_problem(data)
    if problem is not None:
        where, what, accepted = problem
        raise BodyShapeError(field if where == "body" else f"{field}.{where}", what, accepted)
    try:
        return json.loads(data)
    except ValueError:  # JSONDecodeError, and bytes that are not UTF-8
        raise BodyShapeError(field, "is not JSON", WHATIF_BODY) from None


NOTE_LIMIT = 4096  # characters, as the API's `note`


def form_text(form, name: str, limit: int | None = None) -> str:
    """A form field's text, refused (naming the field) where no column could store it or past `limit` characters."""
    value = form.get(name)
    value = "" if value is None or not isinstance(value, str) else value
    if bad_text(value):
        raise SpecError(name, BAD_TEXT, "text without NUL characters or lone surrogates")
    if limit is not None and len(value) > limit:
        raise SpecError(name, f"is {len(value):,} characters long", f"at most {limit:,} characters")
    return value


def upload_text(data: bytes) -> str:
    """An uploaded deployment file's text: UTF-8, refused (naming the field) otherwise; replacing the bytes it cannot
    read had planned a file other than the one uploaded (a Latin-1 'é' in a description became U+FFFD)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError("file", f"is not UTF-8 text (byte {err.start:,})", "a deployment file (YAML text) in UTF-8") \
            from None


def whatif_changes(base: dict, moved: dict) -> dict:
    """The what-if controls' values as request changes. The prompt control moves the p99; the median and p95 stay
    where they were unless that would put them above it, and the max is at least the new p99."""
    changes = {k: v for k, v in moved.items() if k in WHATIF}
    prompt = changes.pop("prompt_tokens", None)
    if prompt is not None:
        current = dict(base.get("prompt_tokens") or {})
        if isinstance(prompt, bool) or not isinstance(prompt, int):  # its range: the field's own, when built
            raise SpecError("prompt_tokens", f"must be a whole number of tokens, got {prompt!r:.40}",
                            "an integer (the what-if control moves the p99)")
        p99 = int(prompt)
        current.update({"p99": p99, "max": max(int(current.get("max") or p99), p99)})
        for low in ("p50", "p95"):
            if current.get(low) is not None:
                current[low] = min(int(current[low]), p99)
        changes["prompt_tokens"] = current
    return changes


def unchanged_since(engine, name: str, form) -> int | None:
    """Refuse a save from a deployment page (a what-if's settings, a ranked fix) when another version was saved since
    the page was drawn: the page's form says which version was the newest then (`newest`). The save is the page's
    version with its changes, so it had silently dropped the other person's newer version (bob saves v2 with fp8 while
    alice looks at v1; alice's what-if on v1 became v3, without fp8). A form without `newest` is not checked. Returns
    the newest version the page showed, for the save to check again where it stores (a save overtaken while it
    planned), None without one."""
    if form.get("newest") is None:
        return None
    seen = form_int(form, "newest", "the newest version number when the page was drawn")
    latest = deployments.version(engine, name)
    if latest["version"] > seen:
        raise deployments.overtaken(name, latest["version"], latest["author"], seen)
    return seen


def _page_renderer(state, templates: Jinja2Templates, session_user: Callable) -> Callable[..., Response]:
    """The function that renders a UI page for the signed-in caller (`page`)."""
    def page(request: Request, template: str, build: Callable[[], dict] | None = None, status: int = 200,
             **context) -> Response:
        """`template` for the signed-in caller, with `context` and what `build()` returns; `build` runs only once the
        caller is signed in and within the rate limit (computing the page first had let anyone, signed in or not,
        make the server plan a deployment and read the database, unmetered, and tell by the time taken whether a
        deployment exists). A SpecError from `build` is the error page, with page_status(error); `status`: the
        page's own status (a form's refusal)."""
        found = session_user(request)
        if found is None:
            return RedirectResponse("/login", status_code=303)
        wait = state.limiter.allow(f"user:{found[0].name}")
        if wait is not None:
            return HTMLResponse("too many requests", status_code=429, headers={"retry-after": str(int(wait) + 1)})
        if build is not None:
            try:
                context |= build()
            except SpecError as err:
                template, context, status = "error.html", {"error": str(err)}, page_status(err)
        return templates.TemplateResponse(request, template, {"user": found[0], "csrf": found[1], **context},
                                          status_code=status)

    return page


def mount_ui(app: FastAPI, state, current_user: Callable, role: Callable, merged: Callable, save: Callable,
             endpoint_url: Callable) -> None:
    """The UI's routes. An async handler awaits its form or body and runs the rest (argon2, planning, the database)
    in the thread pool, never on the event loop: a login's hash and pause, or a what-if's plan, had frozen every other
    request, /healthz included."""
    folder = resources.files("specsize.service")
    templates = Jinja2Templates(directory=str(folder / "templates"))
    app.mount("/static", StaticFiles(directory=str(folder / "static")), name="static")

    def session_user(request: Request) -> tuple[auth.User, str] | None:
        cookie = request.cookies.get(COOKIE)
        return auth.session(state.engine, cookie) if cookie else None

    page = _page_renderer(state, templates, session_user)

    def form_user(request: Request, form, needed: str) -> auth.User:
        found = session_user(request)
        if found is None:
            raise SpecError("session", "not logged in", "log in at /login")
        user, csrf = found
        if not auth.same(str(form.get("csrf", "")), csrf):
            raise Forbidden("csrf", "missing or wrong CSRF token", "reload the page")
        if not user.can(needed):
            raise Forbidden("role", f"{user.role} may not do this", f"{'an' if needed[0] in 'aeiou' else 'a'} {needed} or higher")
        if state.limiter.allow(f"user:{user.name}") is not None:
            raise TooMany("rate", "too many requests", f"at most {state.config.rate_per_minute} a minute")
        return user

    set_cookie = partial(_set_cookie, state.config.secure_cookies)

    def version_of(name: str, number: int | None) -> dict:
        return deployments.version(state.engine, name, number)

    def endpoints_of() -> list[str]:
        from sqlalchemy import select  # noqa: PLC0415

        from . import db  # noqa: PLC0415

        with state.engine.connect() as con:
            return [r[0] for r in con.execute(select(db.endpoints.c.name).order_by(db.endpoints.c.name))]

    def whatif_request(name: str, raw: object) -> Any:
        body = whatif_body(raw)
        from .app import planned_k  # noqa: PLC0415

        version = version_of(name, body["version"])
        base = version["request"]
        settings = merged(base, whatif_changes(base, body["changes"]), planned_k(version))
        return build(settings, state.catalog, state.store), settings

    ui = SimpleNamespace(state=state, templates=templates, session_user=session_user, page=page, form_user=form_user,
                         set_cookie=set_cookie, version_of=version_of, endpoints_of=endpoints_of,
                         whatif_request=whatif_request, current_user=current_user, merged=merged, save=save,
                         endpoint_url=endpoint_url)
    for register in (_login_routes, _page_routes, _action_routes, _live_routes):
        register(app, ui)


def _login_routes(app: FastAPI, ui: SimpleNamespace) -> None:
    state, templates, session_user, set_cookie = ui.state, ui.templates, ui.session_user, ui.set_cookie
    @app.get("/login", include_in_schema=False)
    def login_form(request: Request, error: str | None = None) -> Response:
        token = secrets.token_urlsafe(24)
        response = templates.TemplateResponse(request, "login.html", {"csrf": token, "error": error, "user": None})
        set_cookie(response, LOGIN_COOKIE, token, 600)
        return response

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        form = await request.form()
        client = request.client.host if request.client else "?"
        if state.limiter.allow(f"addr:{client}") is not None:
            return HTMLResponse("too many requests", status_code=429)
        if not auth.same(str(form.get("csrf", "")), request.cookies.get(LOGIN_COOKIE, "") or "-"):
            return RedirectResponse("/login?error=expired", status_code=303)
        user = await run_in_threadpool(auth.user_for_password, state.engine, str(form.get("username", "")),
                                       str(form.get("password", "")))
        if user is None:
            await asyncio.sleep(0.2)  # slows a guesser down without holding the event loop
            return RedirectResponse("/login?error=denied", status_code=303)
        previous = request.cookies.get(COOKIE)
        if previous:  # the browser's session before this login ends (signing in as another user had left it valid)
            await run_in_threadpool(auth.end_session, state.engine, previous)
        cookie, _csrf = await run_in_threadpool(auth.new_session, state.engine, user)
        response = RedirectResponse("/", status_code=303)
        set_cookie(response, COOKIE, cookie, auth.SESSION_SECONDS)
        response.delete_cookie(LOGIN_COOKIE, path="/")
        return response

    @app.post("/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        form = await request.form()
        found = await run_in_threadpool(session_user, request)
        if found and auth.same(str(form.get("csrf", "")), found[1]):
            await run_in_threadpool(auth.end_session, state.engine, request.cookies[COOKIE])
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response


def _page_routes(app: FastAPI, ui: SimpleNamespace) -> None:
    (state, page, form_user, version_of, endpoints_of, save) = (
        ui.state, ui.page, ui.form_user, ui.version_of, ui.endpoints_of, ui.save)
    @app.get("/", include_in_schema=False)
    def home(request: Request) -> Response:
        return page(request, "list.html", lambda: {"rows": deployments.list_deployments(state.engine)})

    @app.get("/new", include_in_schema=False)
    def new_form(request: Request) -> Response:
        return page(request, "new.html", error=None, name="", text="")

    @app.post("/new", include_in_schema=False)
    async def new(request: Request) -> Response:
        form = await request.form()
        upload = form.get("file")
        data = await upload.read() if upload is not None and hasattr(upload, "read") else b""
        return await run_in_threadpool(_new, request, form, data)

    def _new(request: Request, form, data: bytes) -> Response:
        name = text = ""
        try:
            name = form_text(form, "name").strip()
            text = upload_text(data) if data else form_text(form, "yaml")
            if "\x00" in text:
                raise SpecError("yaml", BAD_TEXT, "a deployment file (YAML text)")
            user = form_user(request, form, "planner")
            deployments.check_name(name)
            request_obj = build({"deployment_yaml": text}, state.catalog, state.store)
            save(name, request_obj, user, form_text(form, "note", NOTE_LIMIT) or None, True)
        except SpecError as err:
            return page(request, "new.html", error=str(err), name=name, text=text, status=page_status(err))
        return RedirectResponse(f"/d/{name}", status_code=303)

    @app.get("/d/{name}", include_in_schema=False)
    def deployment(request: Request, name: str, v: int | None = None) -> Response:
        def context() -> dict:
            current = version_of(name, v)
            # the version's figures: its acceptance as its plan read it (a store tag reads the newest observation, so
            # a speed-up figure had been drawn at an acceptance recorded after the version, under its stored verdict)
            planned_as = deployments.as_planned(current["request"], current["plan"], state.store)
            result, figs = figures(build(planned_as, state.catalog, state.store))
            from ..core.specs import QUANT_METHODS  # noqa: PLC0415

            controls = {key: planned_as.get(key) for key in WHATIF}
            prompt = current["request"].get("prompt_tokens")
            controls["prompt_tokens"] = prompt.get("p99") if isinstance(prompt, dict) else None
            return {"name": name, "current": current, "head": _headline(current["plan"]), "figs": figs,
                    "versions": deployments.versions(state.engine, name), "controls": controls,
                    "gpus": [g.gpu_id for g in api.gpus()], "quantizations": QUANT_METHODS,
                    "endpoints": endpoints_of()}

        return page(request, "deployment.html", context)

def _action_routes(app: FastAPI, ui: SimpleNamespace) -> None:
    (state, page, form_user, version_of, whatif_request, current_user, merged, save) = (
        ui.state, ui.page, ui.form_user, ui.version_of, ui.whatif_request, ui.current_user, ui.merged, ui.save)
    @app.post("/ui/whatif/{name}", include_in_schema=False)
    async def whatif(request: Request, name: str) -> Response:
        # session + CSRF header (or a token), rate limit; a viewer explores, saving is a planner's
        await run_in_threadpool(current_user, request)
        body = await json_body(request)
        return await run_in_threadpool(_whatif, name, body)

    def _whatif(name: str, body: object) -> Response:
        started = time.perf_counter()
        request_obj, _ = whatif_request(name, body)
        result, figs = figures(request_obj)
        state.metrics.plans.inc()
        head = _headline(result.to_dict())
        # the what-if plans the envelope alone (figures: a few milliseconds); a version whose plan simulated the burst
        # (`simulate`) had its verdict worsened by the simulation (planner.scenario.fold_simulation), and moving any
        # control had silently shown the envelope's better one (THIN read as FITS), which Save then stored as THIN
        note = WHATIF_UNSIMULATED if request_obj.simulates(False) else None
        return JSONResponse(head | {"figures": figs, "simulated": False, "note": note,
                                    "elapsed_ms": round(1000 * (time.perf_counter() - started), 1)})

    @app.post("/d/{name}/save", include_in_schema=False)
    async def save_whatif(request: Request, name: str) -> Response:
        return await run_in_threadpool(_save_whatif, request, name, await request.form())

    def _save_whatif(request: Request, name: str, form) -> Response:
        try:
            user = form_user(request, form, "planner")
            newest = unchanged_since(state.engine, name, form)
            body = {"version": form_int(form, "version", "the version number the page shows"),
                    "changes": parse_json(form_text(form, "changes") or "{}", "changes")}
            request_obj, _ = whatif_request(name, body)  # whatif_body checks the changes' shape
            out = save(name, request_obj, user, form_text(form, "note", NOTE_LIMIT) or "what-if", False, newest)
        except (SpecError, ValueError) as err:
            return page(request, "error.html", error=str(err),
                        status=page_status(err) if isinstance(err, SpecError) else 200)
        return RedirectResponse(f"/d/{name}?v={out['version']}", status_code=303)

    @app.post("/d/{name}/apply", include_in_schema=False)
    async def apply_fix(request: Request, name: str) -> Response:
        return await run_in_threadpool(_apply_fix, request, name, await request.form())

    def _apply_fix(request: Request, name: str, form) -> Response:
        try:
            user = form_user(request, form, "planner")
            newest = unchanged_since(state.engine, name, form)
            current = version_of(name, form_int(form, "version", "the version number the page shows"))
            recommendations = current["plan"].get("recommendations") or []
            index = form_int(form, "fix", "the index of one of the version's ranked fixes")
            if not recommendations:  # "0 to -1" had been the accepted values
                raise SpecError("fix", f"version {current['version']} has no fix to apply (its plan needs none)",
                                "a version whose plan lists ranked fixes")
            if not 0 <= index < len(recommendations):
                raise SpecError("fix", f"no fix {index}", f"0 to {len(recommendations) - 1}")
            fix = recommendations[index]
            from .app import planned_k  # noqa: PLC0415

            request_obj = build(merged(current["request"], fix["changes"], planned_k(current)), state.catalog,
                                state.store)
            out = save(name, request_obj, user, f"fix: {fix['description']}", False, newest)
        except (SpecError, ValueError) as err:
            return page(request, "error.html", error=str(err),
                        status=page_status(err) if isinstance(err, SpecError) else 200)
        return RedirectResponse(f"/d/{name}?v={out['version']}", status_code=303)


def _live_routes(app: FastAPI, ui: SimpleNamespace) -> None:
    (state, page, version_of, whatif_request, current_user, endpoint_url) = (
        ui.state, ui.page, ui.version_of, ui.whatif_request, ui.current_user, ui.endpoint_url)
    @app.get("/d/{name}/compare", include_in_schema=False)
    def compare(request: Request, name: str, a: int, b: int) -> Response:
        return page(request, "compare.html", lambda: {"diff": deployments.diff(version_of(name, a), version_of(name, b))},
                    name=name)

    @app.get("/d/{name}/live", include_in_schema=False)
    def live_page(request: Request, name: str, endpoint: str) -> Response:
        def known() -> dict:
            """An unknown deployment (404) or an endpoint no admin registered (403) is the error page: the page had
            been drawn for either, to poll an error every 5 s."""
            from .app import ApiError  # noqa: PLC0415

            version_of(name, None)
            try:
                endpoint_url(endpoint)
            except ApiError as err:
                raise Forbidden(err.field or "endpoint", err.problem, err.accepted) from None
            return {}

        return page(request, "live.html", known, name=name, endpoint=endpoint)

    @app.get("/ui/live/{name}", include_in_schema=False)
    def live_poll(request: Request, name: str, endpoint: str) -> Response:
        current_user(request)
        from ..reports import svg  # noqa: PLC0415

        url = endpoint_url(endpoint)  # 403 unless registered: the live view fetches nothing else
        plan = version_of(name, None)["plan"]
        result = state.check_live(plan, url)
        points = state.live.setdefault((name, endpoint), [])
        observed = result.observed
        points.append({"t": time.time(), "kv_usage": observed.kv_usage_fraction, "preemptions": observed.preemptions,
                       "acceptance_rate": observed.acceptance_rate})
        del points[:-LIVE_POINTS]
        return JSONResponse({"check": result.to_dict(), "figure": svg.live(points, plan),
                             "diverges": bool(result.violations) or result.verdict_changes, "points": points[-5:]})

    @app.post("/ui/simulate/{name}", include_in_schema=False)
    async def simulate_whatif(request: Request, name: str) -> Response:
        user = await run_in_threadpool(current_user, request)
        if not user.can("planner"):
            raise Forbidden("role", f"{user.role} may not run simulations", "a planner or higher")
        return await run_in_threadpool(_simulate_whatif, name, user, await json_body(request))

    def _simulate_whatif(name: str, user, raw: object) -> Response:
        _, body = whatif_request(name, raw)
        job = state.jobs.submit("simulate", {"body": body, "store": state.store}, user.name)
        if isinstance(job, str):
            return JSONResponse({"error": state.jobs.refusal(job)}, status_code=state.jobs.refusal_status(job),
                                headers={"retry-after": "5"})
        return JSONResponse(job.to_dict(with_result=False) | {"href": f"/api/v1/jobs/{job.id}"}, status_code=202)
