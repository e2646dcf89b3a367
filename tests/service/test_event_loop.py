"""The app in this process (a real SQLite database, Starlette's test client), where a test can hold a handler's
blocking part on an event: the event loop must keep answering meanwhile, and a refused token must cost no hash."""

from __future__ import annotations

import re
import threading
import time

import pytest

from servers import REPO

EXAMPLE = REPO / "examples" / "llama8b-eagle3-h100.yaml"
PASSWORD = "correct horse battery"


@pytest.fixture()
def app_client(tmp_path, monkeypatch):
    """(client, planner token, app state) of a fresh app on a SQLite file; the app's promise to read models by name
    only is undone after the test (it sets an environment variable of this process)."""
    from fastapi.testclient import TestClient

    from specsize.catalog.models import NAMES_ONLY_ENV
    from specsize.service import auth, db
    from specsize.service.app import Config, create_app

    monkeypatch.setenv(NAMES_ONLY_ENV, "1")
    url = str(tmp_path / "service.sqlite")
    engine = db.connect(url)
    token = auth.add_user(engine, "planner", "planner", PASSWORD)
    engine.dispose()

    def make(**config):
        app = create_app(Config(db_url=url, secure_cookies=False, **config))
        return TestClient(app, raise_server_exceptions=False)

    return make, token


class Held:
    """A stand-in for a blocking call: it waits until released (at most 30 s), after saying it was entered."""

    def __init__(self, result=None):
        self.entered, self.released, self.result = threading.Event(), threading.Event(), result

    def __call__(self, *args, **kwargs):
        self.entered.set()
        self.released.wait(30)
        return self.result(*args, **kwargs) if callable(self.result) else self.result


def answers_while_held(client, held: Held, request) -> bool:
    """Whether /healthz answers (within 5 s) while `request`, run in a thread, is inside `held`."""
    worker = threading.Thread(target=request)
    worker.start()
    try:
        assert held.entered.wait(30), "the request never reached the held call"
        health: list[int] = []
        probe = threading.Thread(target=lambda: health.append(client.get("/healthz").status_code))
        probe.start()
        probe.join(5)
        return health == [200]
    finally:
        held.released.set()
        worker.join(30)


def _login(client) -> str:
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    assert client.post("/login", data={"csrf": csrf, "username": "planner", "password": PASSWORD},
                       follow_redirects=False).status_code == 303
    return re.search(r'name="csrf" value="([^"]+)"', client.get("/new").text).group(1)


def test_a_login_being_checked_holds_no_other_request(app_client, monkeypatch):
    """POST /login hashed the password and slept 0.2 s on the event loop: six failed logins at once froze every
    request, /healthz included, for seconds."""
    from specsize.service import auth

    make, _ = app_client
    with make() as client:
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
        held = Held(None)
        monkeypatch.setattr(auth, "user_for_password", held)
        assert answers_while_held(client, held, lambda: client.post(
            "/login", data={"csrf": csrf, "username": "planner", "password": "wrong password!"}))
        # the 0.2 s pause after a failed login waits without the loop: ten at once take about 0.2 s, not 2 s
        monkeypatch.setattr(auth, "user_for_password", lambda *args: None)
        logins = [threading.Thread(target=lambda: client.post(
            "/login", data={"csrf": csrf, "username": "planner", "password": "wrong password!"}))
            for _ in range(10)]
        started = time.monotonic()
        for thread in logins:
            thread.start()
        for thread in logins:
            thread.join(30)
        assert time.monotonic() - started < 1.5


@pytest.mark.parametrize("route", ["/new", "/d/held/save", "/d/held/apply", "/ui/whatif/held"])
def test_planning_in_the_ui_holds_no_other_request(app_client, monkeypatch, route):
    """The UI's what-if, new-deployment, save and apply routes planned on the event loop (async handlers doing
    blocking work): one slow plan froze every other request."""
    from specsize.service import ui

    make, token = app_client
    with make() as client:
        bearer = {"authorization": f"Bearer {token}"}
        made = client.post("/api/v1/deployments", headers=bearer, json={
            "deployment_name": "held", "deployment_yaml": EXAMPLE.read_text(), "acceptance_rate": 0.7,
            "concurrency": 120})
        assert made.status_code == 201, made.text
        csrf = _login(client)
        if route.startswith("/ui/"):  # the what-if's plan and figures
            held = Held(ui.figures)
            monkeypatch.setattr(ui, "figures", held)
            send = lambda: client.post(route, json={"version": 1, "changes": {"concurrency": 8}},  # noqa: E731
                                       headers={"x-csrf-token": csrf})
        else:  # the request built from the form, before it is planned and saved
            held = Held(ui.build)
            monkeypatch.setattr(ui, "build", held)
            form = {"/new": {"csrf": csrf, "name": "fresh", "yaml": EXAMPLE.read_text()},
                    "/d/held/save": {"csrf": csrf, "version": "1", "changes": '{"concurrency": 8}'},
                    "/d/held/apply": {"csrf": csrf, "version": "1", "fix": "0"}}[route]
            send = lambda: client.post(route, data=form, follow_redirects=False)  # noqa: E731
        assert answers_while_held(client, held, send)


def test_a_refused_token_costs_no_hash(app_client, monkeypatch):
    """A wrong secret for a real token id was verified (argon2, ~0.25 s of CPU) before the rate limit was asked:
    a caller flooding it cost the server a hash per request even when answered 429. The address is now charged
    before any hash, and past its limit nothing is hashed."""
    from specsize.service import auth

    make, token = app_client
    calls: list[int] = []
    real = auth._hasher

    class Counting:
        def verify(self, *args):
            calls.append(1)
            return real.verify(*args)

        def __getattr__(self, name):
            return getattr(real, name)

    monkeypatch.setattr(auth, "_hasher", Counting())
    token_id = token.split("_")[1]
    with make(rate_per_minute=5) as client:
        statuses = [client.get("/api/v1/deployments", headers={
            "authorization": f"Bearer sst_{token_id}_wrong{index:040d}"}).status_code for index in range(20)]
    assert statuses[:5] == [401] * 5 and set(statuses[5:]) == {429}, statuses
    assert len(calls) <= 5  # one hash per request the limit let through, none after


def test_wrong_tokens_from_an_address_do_not_lock_out_a_real_user_there(app_client):
    # behind a proxy every client shares an address: a flood of wrong secrets for one token id had been charged to
    # that address before hashing, so a real user's next verification there was answered 429
    make, token = app_client
    token_id = token.split("_")[1]
    with make(rate_per_minute=5) as client:
        for index in range(20):
            client.get("/api/v1/deployments", headers={"authorization": f"Bearer sst_{token_id}x_wrong{index:040d}"})
        assert client.get("/api/v1/deployments", headers={"authorization": f"Bearer {token}"}).status_code == 200
