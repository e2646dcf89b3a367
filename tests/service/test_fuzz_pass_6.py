"""Fuzz pass 6 of the team service, each test a bug it found: the app in this process (a real SQLite database,
Starlette's test client), and job processes that must not outlive the service."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from helpers import team_app
from servers import REPO

EXAMPLE = REPO / "examples" / "llama8b-eagle3-h100.yaml"
PASSWORD = "correct horse battery"
LONG_JOB = {"body": {"acceptance_rate": 0.7, "rate": 5, "duration": 300_000}}  # minutes of CPU


@pytest.fixture()
def team(tmp_path, monkeypatch):
    """(client, {role: token}, url) of a fresh app on a SQLite file, with one saved deployment `d1` (v1, v2)."""
    client, tokens, url = team_app(tmp_path, monkeypatch, PASSWORD, EXAMPLE)
    planner = {"authorization": f"Bearer {tokens['planner']}"}
    assert client.post("/api/v1/deployments/d1/versions", headers=planner, json={"concurrency": 64}).status_code == 201
    return client, tokens, url


def _as(tokens: dict, role: str) -> dict:
    return {"authorization": f"Bearer {tokens[role]}"}


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"field", "problem", "accepted"}
    return error


def _signed_in(client, name: str = "planner") -> str:
    """Log `client` in as `name` (its session cookie kept by the client); returns the page's CSRF token."""
    form = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    done = client.post("/login", data={"csrf": csrf, "username": name, "password": PASSWORD}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/", done.text
    return re.search(r'name="csrf-token" content="([^"]+)"', client.get("/").text).group(1)


def test_ui_json_bodies_get_the_guards_checks_whatever_their_content_type(team):
    """A what-if body sent as text/plain had slipped past the body guard (it checks JSON bodies): nesting too deep was
    a 500 (RecursionError), a key named twice was read as its last value."""
    client, tokens, _ = team
    viewer, planner = _as(tokens, "viewer"), _as(tokens, "planner")
    deep = "[" * 50_000 + "]" * 50_000
    for route, who in (("/ui/whatif/d1", viewer), ("/ui/simulate/d1", planner)):
        error = _error(client.post(route, headers={**who, "content-type": "text/plain"}, content=deep), 422)
        assert error["field"] == "body" and "content-type: application/json" in error["accepted"]
    twice = '{"changes": {"concurrency": 1}, "changes": {"concurrency": 2}}'
    error = _error(client.post("/ui/whatif/d1", headers={**viewer, "content-type": "text/plain"}, content=twice), 422)
    assert error["field"] == "body"
    error = _error(client.post("/ui/whatif/d1", headers={**viewer, "content-type": "application/json"},
                               content=deep), 422)
    assert error["field"] == "body" and "nested too deeply" in error["problem"]
    moved = client.post("/ui/whatif/d1", headers=viewer, json={"changes": {"concurrency": 8}})
    assert moved.status_code == 200 and moved.json()["verdict"] in ("fits", "thin", "does_not_fit")
    # the page's headroom is the CLI's text, read as its verdict (the page's %.1f had shown 0.19979 under THIN as 20.0%)
    head = moved.json()
    shown = float(head["headroom_text"].rstrip("%")) / 100
    assert abs(shown - head["headroom_fraction"]) < 0.0005
    assert (shown < head["headroom_policy"]) == (head["verdict"] == "thin") or head["verdict"] == "does_not_fit"
    # a viewer who may not simulate is refused as the API refuses a role (403), not told the input was wrong (400)
    error = _error(client.post("/ui/simulate/d1", headers=viewer, json={"changes": {}}), 403)
    assert error["field"] == "role" and "planner" in error["accepted"]


def test_a_saved_what_if_with_changes_nested_too_deep_is_an_error_page(team):
    """The save form's `changes` (JSON in a form field) nested too deep had been a 500."""
    client, _, _ = team
    csrf = _signed_in(client)
    for changes in ("[" * 50_000 + "]" * 50_000, '{"concurrency": 4, "concurrency": 400}'):
        saved = client.post("/d/d1/save", data={"csrf": csrf, "version": "2", "changes": changes},
                            follow_redirects=False)
        assert saved.status_code == 200 and 'class="error"' in saved.text, saved.text[:300]
        assert "changes" in saved.text
    saved = client.post("/d/d1/save", data={"csrf": csrf, "version": "2", "changes": '{"concurrency": 4}'},
                        follow_redirects=False)
    assert saved.status_code == 303 and saved.headers["location"] == "/d/d1?v=3"


def test_pages_compute_nothing_before_the_caller_is_signed_in(team, monkeypatch):
    """A page's plan, figures and database reads had run before the session was checked: anyone could make the
    server plan a deployment, unmetered, and tell by the time taken which deployments exist."""
    from specsize.service import deployments, ui

    client, _, _ = team
    calls: list[str] = []
    real_figures, real_list = ui.figures, deployments.list_deployments
    monkeypatch.setattr(ui, "figures", lambda *a: calls.append("figures") or real_figures(*a))
    monkeypatch.setattr(deployments, "list_deployments", lambda *a: calls.append("list") or real_list(*a))
    monkeypatch.setattr(deployments, "version", lambda *a, _real=deployments.version: calls.append("version")
                        or _real(*a))
    for path in ("/", "/d/d1", "/d/nothing", "/d/d1?v=1", "/d/d1/compare?a=1&b=2"):
        answer = client.get(path, follow_redirects=False)
        assert (answer.status_code, answer.headers.get("location")) == (303, "/login"), path
    assert calls == []
    _signed_in(client, "viewer")
    assert client.get("/d/d1").status_code == 200 and calls.count("figures") == 1
    assert "no deployment" in client.get("/d/nothing").text  # signed in: the error page, as before
    assert "v1" in client.get("/d/d1/compare?a=1&b=2").text


def test_a_non_utf8_upload_is_refused_not_replaced(team):
    """An uploaded deployment file that is not UTF-8 had been planned with its bytes replaced by U+FFFD."""
    client, _, _ = team
    csrf = _signed_in(client)
    latin1 = EXAMPLE.read_text().replace("\n", "\ndescription: caf\xe9\n", 1).encode("latin-1")
    answer = client.post("/new", data={"csrf": csrf, "name": "d2"}, files={"file": ("d.yaml", latin1)},
                         follow_redirects=False)
    assert answer.status_code == 200 and "file: is not UTF-8 text" in answer.text, answer.text[:400]
    assert client.get("/api/v1/deployments/d2").status_code == 404
    good = client.post("/new", data={"csrf": csrf, "name": "d2"},
                       files={"file": ("d.yaml", latin1.decode("latin-1").encode())}, follow_redirects=False)
    assert good.status_code == 303 and good.headers["location"] == "/d/d2"


def test_method_and_route_errors_name_what_is_accepted(team):
    """A 405 had had no Allow header (RFC 9110 requires one) and `accepted: null`; a 404 named nothing."""
    client, tokens, _ = team
    answer = client.put("/api/v1/plan", headers=_as(tokens, "planner"), json={})
    error = _error(answer, 405)
    assert answer.headers["allow"] == "POST" and (error["field"], error["accepted"]) == ("method", "POST")
    answer = client.delete("/api/v1/deployments/d1", headers=_as(tokens, "planner"))
    assert _error(answer, 405)["accepted"] == "GET" and answer.headers["allow"] == "GET"
    assert _error(client.get("/api/v1/nothing", headers=_as(tokens, "viewer")), 404)["field"] == "path"


def test_parameters_and_version_fields_are_named_as_the_caller_sent_them(team):
    client, tokens, _ = team
    viewer, planner, admin = _as(tokens, "viewer"), _as(tokens, "planner"), _as(tokens, "admin")
    # a query parameter that is no integer, or missing, says what is accepted (it had said null)
    error = _error(client.get("/api/v1/deployments/d1/diff?a=1&b=x", headers=viewer), 422)
    assert (error["field"], error["accepted"]) == ("b", "an integer")
    error = _error(client.get("/api/v1/deployments/d1/diff?a=1", headers=viewer), 422)
    assert error["field"] == "b" and "missing" in error["problem"] and error["accepted"]
    # an unknown version is named by the field that gave it: base_version, a diff's a or b (all had said `version`)
    assert _error(client.post("/api/v1/deployments/d1/versions", headers=planner, json={"base_version": 9}),
                  404)["field"] == "base_version"
    assert _error(client.get("/api/v1/deployments/d1/diff?a=9&b=1", headers=viewer), 404)["field"] == "a"
    assert _error(client.get("/api/v1/deployments/d1/diff?a=1&b=9", headers=viewer), 404)["field"] == "b"
    assert _error(client.get("/api/v1/deployments/d1/versions/9", headers=viewer), 404)["field"] == "version"
    assert client.get("/api/v1/deployments/d1/diff?a=1&b=2", headers=viewer).json()["inputs"]
    # the audit log's limit is 1 to 1,000 (limit=0 had answered one entry, limit=5000 a thousand, silently)
    for limit in (0, -5, 1001, 5000):
        error = _error(client.get(f"/api/v1/audit?limit={limit}", headers=admin), 400)
        assert error["field"] == "limit" and error["accepted"] == "an integer from 1 to 1,000"
    assert len(client.get("/api/v1/audit?limit=2", headers=admin).json()) == 2
    # check-live takes a saved deployment (with its version) or a plan: a field the other one makes meaningless had
    # been dropped without a word
    plan = client.get("/api/v1/deployments/d1", headers=viewer).json()["plan"]
    client.post("/api/v1/endpoints", headers=admin, json={"name": "m", "url": "http://127.0.0.1:9/metrics"})
    for body, field in (({"deployment": "d1", "plan": plan}, "plan"), ({"plan": plan, "version": 1}, "version")):
        assert _error(client.post("/api/v1/check-live", headers=planner, json={"endpoint": "m", **body}),
                      400)["field"] == field


def test_the_openapi_document_says_what_the_service_answers(team):
    """The document had promised FastAPI's `{"detail": [...]}` for every 422 (the service sends `{"error": ...}`),
    named no security scheme though every route but the health checks needs a token, documented /metrics as JSON and
    the report and the YAML export as nothing or plain text."""
    client, tokens, _ = team
    document = client.get("/api/v1/openapi.json").json()
    assert "HTTPValidationError" not in str(document) and "Error" in document["components"]["schemas"]
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    paths = document["paths"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            public = path in ("/healthz", "/readyz")
            assert (operation.get("security") is None) == public, (method, path)
            for code, response in operation["responses"].items():
                if not code.startswith("2"):
                    assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
            if not public:
                assert {"401", "403", "429"} <= set(operation["responses"]), (method, path)
    assert set(paths["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}
    assert set(paths["/api/v1/report"]["post"]["responses"]["200"]["content"]) == {"text/html", "text/markdown"}
    assert set(paths["/api/v1/deployments/{name}/versions/{number}/yaml"]["get"]["responses"]["200"]["content"]) \
        == {"application/yaml"}
    # what it says matches what comes back
    answer = client.get("/api/v1/deployments/d1/versions/1/yaml", headers=_as(tokens, "viewer"))
    assert answer.headers["content-type"].startswith("application/yaml")
    error = client.post("/api/v1/plan", headers=_as(tokens, "planner"), json={"bogus": 1})
    assert error.status_code == 422 and set(error.json()) == {"error"}
    assert "422" in paths["/api/v1/plan"]["post"]["responses"] and "413" in paths["/api/v1/plan"]["post"]["responses"]


def test_user_names_cannot_pass_for_another(tmp_path):
    """'Admin', 'аdmin' (a Cyrillic а) and 'ａｄｍｉｎ' (fullwidth) had all been added beside 'admin': the audit log and the
    UI name people by their name, so one could pass for the other."""
    from specsize.core.errors import SpecError
    from specsize.service import auth, db

    engine = db.connect(str(tmp_path / "service.sqlite"))
    auth.add_user(engine, "admin", "admin")
    for name in ("Admin", "ADMIN"):
        with pytest.raises(SpecError) as caught:
            auth.add_user(engine, name, "viewer")
        assert caught.value.field == "name" and "'admin'" in caught.value.problem and "other case" in caught.value.problem
    for name in ("\u0430dmin", "\uff41\uff44\uff4d\uff49\uff4e", "admin\u0663", "al\u00efce"):
        with pytest.raises(SpecError) as caught:
            auth.add_user(engine, name, "viewer")
        assert caught.value.field == "name" and "ASCII" in caught.value.accepted
    auth.add_user(engine, "alice.smith@example", "viewer")
    assert [u["name"] for u in auth.list_users(engine)] == ["admin", "alice.smith@example"]
    engine.dispose()


def test_stopping_the_service_stops_its_jobs(team):
    """uvicorn ends the process by re-raising SIGTERM after its shutdown, so no atexit handler ran: a job in flight
    when the service stopped had run on, unwatched, past its deadline."""
    from fastapi.testclient import TestClient

    from specsize.service.app import Config, create_app

    _, _, url = team
    app = create_app(Config(db_url=url, secure_cookies=False))
    with TestClient(app, raise_server_exceptions=False):  # runs the app's lifespan: startup, then shutdown
        runner = app.app.state.service.jobs  # create_app returns the app inside its body-size guard
        job = runner.submit("simulate", LONG_JOB, "planner")
        assert not isinstance(job, str)
        deadline = time.monotonic() + 30
        while job.id not in runner._processes and time.monotonic() < deadline:
            time.sleep(0.05)
        process = runner._processes[job.id]
        while process.pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
    process.join(10)
    assert not process.is_alive()
    assert job.status == "failed" and job.finished is not None
    deadline = time.monotonic() + 10
    while job.id in runner._processes and time.monotonic() < deadline:  # its watcher thread has woken and finished
        time.sleep(0.05)
    # the watcher, woken by the closed pipe, had overwritten why with "the job's process ended"
    assert job.outcome["error"]["problem"] == "the service stopped while the job ran"
    assert runner.submit("simulate", LONG_JOB, "other") == "stopping"


def test_a_job_ends_when_the_service_is_killed(tmp_path):
    """A service killed outright (SIGKILL, the OOM killer) runs no shutdown: its job processes end themselves once
    it is gone, instead of running on unbounded."""
    script = tmp_path / "service.py"
    script.write_text(textwrap.dedent(f"""
        import multiprocessing, os, signal, time
        from specsize.service.jobs import JobRunner
        if __name__ == "__main__":  # a spawned process imports this module again
            runner = JobRunner(workers=1, timeout_s=600)
            job = runner.submit("simulate", {LONG_JOB!r}, "planner")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and job.status != "running":
                time.sleep(0.05)
            time.sleep(1)
            print(*[child.pid for child in multiprocessing.active_children()], flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    """))
    out, err = tmp_path / "out", tmp_path / "err"  # files, not pipes: an orphaned job holding a pipe blocks a reader
    with out.open("w") as stdout, err.open("w") as stderr:
        code = subprocess.run([sys.executable, str(script)], stdout=stdout, stderr=stderr, timeout=120,
                              cwd=REPO).returncode
    assert code == -signal.SIGKILL, err.read_text()
    child = int(out.read_text().split()[0])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(child, signal.SIGKILL)  # our own test's orphan, by its pid
    raise AssertionError("the job's process outlived the killed service by 15 s")


def test_a_new_version_can_remove_a_setting_and_switch_its_acceptance(team):
    """`"quantization": null` had stored a version unchanged (nulls were dropped with the fields not sent), and a store
    tag over a stored acceptance rate was refused as two acceptances, with no way to remove the rate."""
    client, tokens, _ = team
    planner = _as(tokens, "planner")
    made = client.post("/api/v1/deployments", headers=planner, json={
        "deployment_name": "q", "target": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM-80GB",
        "quantization": "fp8", "concurrency": 8, "method": "ngram", "num_speculative_tokens": 3,
        "acceptance_rate": 0.6})
    assert made.status_code == 201, made.text
    assert client.post("/api/v1/deployments/q/versions", headers=planner, json={"quantization": None}).status_code == 201
    diff = client.get("/api/v1/deployments/q/diff?a=1&b=2", headers=planner).json()
    assert diff["inputs"] == [{"field": "quantization", "a": "fp8", "b": None}]
    assert "quantization" not in client.get("/api/v1/deployments/q/versions/2", headers=planner).json()["request"]
    # a mean accepted length replaces the rate, and a rate replaces the length with the k it was measured at
    assert client.post("/api/v1/deployments/q/versions", headers=planner,
                       json={"mean_accepted_length": 2.2, "measured_at_k": 3}).status_code == 201
    assert client.post("/api/v1/deployments/q/versions", headers=planner, json={"acceptance_rate": 0.5}).status_code \
        == 201
    request = client.get("/api/v1/deployments/q/versions/4", headers=planner).json()["request"]
    assert request["acceptance_rate"] == 0.5 and "mean_accepted_length" not in request and "measured_at_k" not in request
    # a store tag replaces the rate: refused now only because no acceptance is recorded under the tag
    error = _error(client.post("/api/v1/deployments/q/versions", headers=planner,
                               json={"acceptance_from_store": "chat-v2"}), 400)
    assert error["field"] == "acceptance_from_store" and "no acceptance recorded" in error["problem"]
    # the target stays (without one the library would plan its embedded default under this deployment's name)
    assert _error(client.post("/api/v1/deployments/q/versions", headers=planner, json={"target": None}),
                  400)["field"] == "target"
    assert [v["version"] for v in client.get("/api/v1/deployments/q/versions", headers=planner).json()] == [1, 2, 3, 4]


def test_a_simulation_while_the_service_stops_is_503_from_the_ui_as_from_the_api(team):
    """A job refused because the service is stopping is 503 from the API; the UI's simulate had answered 429 (too many
    jobs, retry) for the same refusal, with 'wait for one to finish' as what to do."""
    client, tokens, _ = team
    client.app.app.state.service.jobs.shutdown()  # the lifespan's shutdown: no job runs, none starts
    for route, body in (("/ui/simulate/d1", {"changes": {}}), ("/api/v1/simulate", LONG_JOB["body"] | {
            "deployment_yaml": EXAMPLE.read_text()})):
        error = _error(client.post(route, headers=_as(tokens, "planner"), json=body), 503)
        assert error == {"field": "jobs", "problem": "the service is stopping",
                         "accepted": "the same request once the service is back"}, route


def test_lists_and_compare_print_a_headroom_as_its_verdict(team):
    """The deployment list, its version history and the compare page printed a headroom with %.1f: with a policy
    between the headroom and its one-decimal rounding, the list read (say) "26.2%" beside THIN under a 26.15%
    policy. They print the CLI's headroom text now, with the decimals that read as the verdict."""
    client, tokens, _ = team
    planner = _as(tokens, "planner")
    h = client.get("/api/v1/deployments/d1/versions/1", headers=planner).json()["plan"]["headroom_fraction"]
    one_decimal = round(100 * h, 1) / 100
    assert one_decimal != h
    policy = (h + one_decimal) / 2  # %.1f reads the headroom on the wrong side of this policy
    verdict = "thin" if h < policy else "fits"
    made = client.post("/api/v1/deployments/d1/versions", headers=planner, json={"concurrency": 44, "headroom": policy})
    assert made.status_code == 201 and made.json()["verdict"] == verdict, made.text

    def reads_as_verdict(text: str) -> bool:
        return (float(text.rstrip("%")) / 100 >= policy) == (verdict == "fits")

    assert not reads_as_verdict(f"{100 * h:.1f}%")  # what the pages had printed
    listed = client.get("/api/v1/deployments", headers=planner).json()
    assert reads_as_verdict(next(r for r in listed if r["name"] == "d1")["headroom_text"])
    history = client.get("/api/v1/deployments/d1/versions", headers=planner).json()
    assert reads_as_verdict(history[-1]["headroom_text"]) and history[0]["headroom_text"].endswith("%")
    diff = client.get("/api/v1/deployments/d1/diff", headers=planner, params={"a": 1, "b": 3}).json()
    outcome = {row["field"]: (row["a"], row["b"]) for row in diff["outcome"]}
    assert outcome["verdict"] == ("fits", verdict) and reads_as_verdict(outcome["headroom_text"][1])
    _signed_in(client)
    for page in ("/", "/d/d1", "/d/d1/compare?a=1&b=3"):
        assert outcome["headroom_text"][1] in client.get(page).text, page
    assert f"{100 * h:.1f}%" not in client.get("/").text  # the list shows v3 alone


def test_a_trailing_slash_redirect_names_no_host_the_caller_sent(team):
    """The router's trailing-slash redirect built its Location from the request's Host header: `GET /login/` with
    `Host: evil.example` was answered `Location: http://evil.example/login`, which a cache in front of the service
    would hand to everyone. The Location is a path on this service now."""
    client, tokens, _ = team
    for path, where in (("/login/", "/login"), ("/api/v1/deployments/?x=1", "/api/v1/deployments?x=1"),
                        ("/d/d1/", "/d/d1")):
        moved = client.get(path, headers={"host": "evil.example"}, follow_redirects=False)
        assert moved.status_code == 307 and moved.headers["location"] == where, (path, moved.headers)
    assert client.get("//evil.example/", follow_redirects=False).headers.get("location", "/").startswith("/")
    assert not client.get("//evil.example/", follow_redirects=False).headers.get("location", "/").startswith("//")
    followed = client.get("/api/v1/deployments/", headers=_as(tokens, "viewer"))
    assert followed.status_code == 200 and [d["name"] for d in followed.json()] == ["d1"]
