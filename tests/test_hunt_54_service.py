"""Hunt 54: the team service (`specsize serve`). Each test is something a planner or a viewer could do in the web UI or
the API that had shown a figure other than the stored plan's, or answered a refusal as a success; the app runs in
this process on a real SQLite file (Starlette's test client)."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the service tests need specsize[service] (part of specsize[test])")

from helpers import run_cli, team_app  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "llama8b-eagle3-h100.yaml"  # one H100, EAGLE-3 k=3, concurrency 44 x burst 2
PASSWORD = "correct horse battery"
# the example with max_num_seqs 32: the envelope fits (the cache holds far more than 32 sequences), but the burst of
# 88 requests queues behind 32 slots, which `plan --simulate` reports (its time to first token grows through the run):
# THIN (planner.scenario.fold_simulation)
SIMULATED = {"acceptance_rate": 0.7, "max_num_seqs": 32, "simulate": True, "duration": 60.0, "seed": 2}


@pytest.fixture()
def team(tmp_path, monkeypatch):
    """(client, {role: token}) of a fresh app on a SQLite file, with `d1` (the example) saved."""
    client, tokens, _ = team_app(tmp_path, monkeypatch, PASSWORD, EXAMPLE)
    return client, tokens


def _as(tokens: dict, role: str) -> dict:
    return {"authorization": f"Bearer {tokens[role]}"}


def _signed_in(team, name: str):
    """A new client of the same app, logged in as `name` through the login form; (client, the page's CSRF token)."""
    from fastapi.testclient import TestClient

    client = TestClient(team[0].app, raise_server_exceptions=False)
    form = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    done = client.post("/login", data={"csrf": csrf, "username": name, "password": PASSWORD}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/", done.text
    return client, re.search(r'name="csrf-token" content="([^"]+)"', client.get("/").text).group(1)


def _save_simulated(team) -> dict:
    client, tokens = team
    made = client.post("/api/v1/deployments", headers=_as(tokens, "planner"), json={
        "deployment_name": "sim", "deployment_yaml": EXAMPLE.read_text(), **SIMULATED})
    assert made.status_code == 201, made.text
    stored = client.get("/api/v1/deployments/sim/versions/1", headers=_as(tokens, "viewer")).json()["plan"]
    # THIN with a headroom above the policy: the verdict is the simulation's, not the envelope's
    assert stored["verdict"] == "thin" and stored["headroom_fraction"] >= stored["headroom_policy"] == 0.2
    assert stored["simulation"] is not None and stored["breaks_first"].startswith("Under the simulated burst")
    return stored


def test_an_export_of_a_simulated_version_says_how_to_plan_it_to_the_stored_verdict(team, tmp_path, capsys):
    """A version planned with `simulate` (a burst simulation folded into the verdict) had been exported as a
    deployment file that cannot say so: `specsize plan FILE` printed FITS for a version the service lists as THIN.
    The export now opens with the flags that plan it to the stored plan (`--simulate --duration 60.0 --seed 2`)."""
    client, tokens = team
    stored = _save_simulated(team)
    exported = client.get("/api/v1/deployments/sim/versions/1/yaml", headers=_as(tokens, "viewer"))
    assert exported.status_code == 200, exported.text
    path = tmp_path / "sim.yaml"
    path.write_text(exported.text)
    said = re.search(r"`specsize plan FILE ([^`]*)`", exported.text)
    assert said is not None, exported.text
    assert said.group(1).split() == ["--simulate", "--duration", "60.0", "--seed", "2"]
    code, out, err = run_cli(capsys, "plan", path, "--format", "json", *said.group(1).split())
    again = json.loads(out)
    assert code == 0 and err == ""  # plan exits 0 once its output is written (docs/cli.md)
    assert (again["verdict"], again["headroom_fraction"], again["breaks_first"]) == \
        (stored["verdict"], stored["headroom_fraction"], stored["breaks_first"])
    assert again["simulation"] == stored["simulation"]
    # the file alone is the envelope's plan: the same headroom, FITS (which is why the comment is needed)
    code, out, _ = run_cli(capsys, "plan", path, "--format", "json")
    alone = json.loads(out)
    assert (code, alone["verdict"], alone["headroom_fraction"]) == (0, "fits", stored["headroom_fraction"])
    # a version that did not simulate has no such line
    plain = client.get("/api/v1/deployments/d1/versions/1/yaml", headers=_as(tokens, "viewer")).text
    assert "--simulate" not in plain


def test_a_what_if_of_a_simulated_version_says_its_verdict_is_the_envelopes(team):
    """The what-if re-plans without the simulation a version's plan ran: moving any control of a THIN (simulated)
    version had shown FITS without a word, and Save then stored THIN. The answer now says so (`note`), and the page's
    script shows it beside the timing."""
    _save_simulated(team)
    viewer, csrf = _signed_in(team, "viewer")
    moved = viewer.post("/ui/whatif/sim", json={"changes": {"concurrency": 44}}, headers={"x-csrf-token": csrf})
    assert moved.status_code == 200, moved.text
    head = moved.json()
    assert head["verdict"] == "fits" and head["simulated"] is False
    assert head["note"] and "simulat" in head["note"] and "Save" in head["note"]
    assert "with the burst simulated" in viewer.get("/d/sim").text  # the page's own verdict says it was simulated
    assert "with the burst simulated" not in viewer.get("/d/d1").text
    plain = viewer.post("/ui/whatif/d1", json={"changes": {"concurrency": 44}}, headers={"x-csrf-token": csrf}).json()
    assert plain["note"] is None  # a version that does not simulate: the what-if's verdict is its plan's
    script = (REPO / "src" / "specsize" / "service" / "static" / "app.js").read_text()
    assert "data.note" in script
    # what the note promises: Save re-plans with the simulation
    planner, pcsrf = _signed_in(team, "planner")
    saved = planner.post("/d/sim/save", data={"csrf": pcsrf, "version": "1", "changes": '{"concurrency": 44}'},
                         follow_redirects=False)
    assert saved.status_code == 303 and saved.headers["location"] == "/d/sim?v=2", saved.text
    client, tokens = team
    assert client.get("/api/v1/deployments/sim/versions/2", headers=_as(tokens, "viewer")).json()["plan"]["verdict"] \
        == "thin"


def test_ui_refusals_carry_the_status_the_api_gives(team):
    """A viewer's save, a fix applied without the CSRF token, an unknown deployment or version: each had been a 200
    page saying "error" (a script, a proxy or a monitor read them as successes); a form's version or fix that is no
    integer had said only "invalid literal for int() with base 10: 'abc'"; a fix on a version without any had offered
    "0 to -1"."""
    viewer, vcsrf = _signed_in(team, "viewer")
    planner, pcsrf = _signed_in(team, "planner")

    def said(response) -> str:
        return html.unescape(" ".join(re.findall(r'<p class="error"[^>]*>([^<]*)', response.text)))

    refused = viewer.post("/d/d1/save", data={"csrf": vcsrf, "version": "1", "changes": "{}"}, follow_redirects=False)
    assert refused.status_code == 403 and "viewer may not do this" in said(refused)
    refused = viewer.post("/d/d1/apply", data={"csrf": vcsrf, "version": "1", "fix": "0"}, follow_redirects=False)
    assert refused.status_code == 403
    refused = viewer.post("/new", data={"csrf": vcsrf, "name": "n1", "yaml": EXAMPLE.read_text()},
                          follow_redirects=False)
    assert refused.status_code == 403 and "viewer may not do this" in said(refused)
    refused = planner.post("/d/d1/save", data={"version": "1", "changes": "{}"}, follow_redirects=False)
    assert refused.status_code == 403 and "CSRF" in said(refused)
    assert planner.get("/d/nope").status_code == 404
    assert planner.get("/d/d1?v=9").status_code == 404
    assert planner.get("/d/d1/compare?a=1&b=9").status_code == 404
    assert planner.get("/d/nope/live?endpoint=x").status_code == 404
    unregistered = planner.get("/d/d1/live?endpoint=x")
    assert unregistered.status_code == 403 and "not a registered" in said(unregistered)
    # a value in a form is refused naming the field, the page drawn again (200) as before
    bad = planner.post("/d/d1/save", data={"csrf": pcsrf, "version": "abc", "changes": "{}"}, follow_redirects=False)
    assert bad.status_code == 200 and said(bad).startswith("version: must be an integer, got 'abc'")
    bad = planner.post("/d/d1/apply", data={"csrf": pcsrf, "version": "1", "fix": "x"}, follow_redirects=False)
    assert said(bad).startswith("fix: must be an integer")
    client, tokens = team
    assert client.get("/api/v1/deployments/d1", headers=_as(tokens, "viewer")).json()["plan"]["recommendations"] == []
    none = planner.post("/d/d1/apply", data={"csrf": pcsrf, "version": "1", "fix": "0"}, follow_redirects=False)
    assert "has no fix to apply" in said(none) and "-1" not in said(none)
    # nothing refused was stored
    assert [v["version"] for v in client.get("/api/v1/deployments/d1/versions", headers=_as(tokens, "viewer")).json()] \
        == [1]


def test_a_save_from_a_page_a_newer_version_overtook_is_refused_not_lost(team):
    """Alice's page shows v1; Bob saves v2 (fp8 weights); Alice saves her what-if (or applies a fix). Her save was v1
    with her change, so v3 silently dropped Bob's fp8. The page's forms now say which version was the newest when it
    was drawn, and a save another version overtook is refused (409, naming who saved what), storing nothing."""
    client, tokens = team
    alice, csrf = _signed_in(team, "planner")
    page = alice.get("/d/d1")
    assert page.status_code == 200
    newest = re.search(r'name="newest" value="(\d+)"', page.text)
    assert newest is not None and newest.group(1) == "1"
    bob = client.post("/api/v1/deployments/d1/versions", headers=_as(tokens, "admin"), json={"quantization": "fp8"})
    assert bob.status_code == 201 and bob.json()["version"] == 2
    form = {"csrf": csrf, "version": "1", "newest": newest.group(1), "changes": '{"concurrency": 40}'}
    refused = alice.post("/d/d1/save", data=form, follow_redirects=False)
    assert refused.status_code == 409, refused.text[:300]
    assert "v2 of d1 was saved by admin" in refused.text
    fix = alice.post("/d/d1/apply", data={"csrf": csrf, "version": "1", "newest": "1", "fix": "0"},
                     follow_redirects=False)
    assert fix.status_code == 409
    versions = client.get("/api/v1/deployments/d1/versions", headers=_as(tokens, "viewer")).json()
    assert [v["version"] for v in versions] == [1, 2]
    # drawn again, the page knows v2: the save lands as v3 and keeps Bob's fp8
    again = re.search(r'name="newest" value="(\d+)"', alice.get("/d/d1").text).group(1)
    saved = alice.post("/d/d1/save", data={"csrf": csrf, "version": "2", "newest": again,
                                           "changes": '{"concurrency": 40}'}, follow_redirects=False)
    assert saved.status_code == 303 and saved.headers["location"] == "/d/d1?v=3", saved.text[:300]
    request = client.get("/api/v1/deployments/d1/versions/3", headers=_as(tokens, "viewer")).json()["request"]
    assert (request["quantization"], request["concurrency"]) == ("fp8", 40)
    # an old version looked at on purpose (?v=1, drawn with v3 the newest) still saves from it
    old = re.search(r'name="newest" value="(\d+)"', alice.get("/d/d1?v=1").text).group(1)
    assert old == "3"
    assert alice.post("/d/d1/save", data={"csrf": csrf, "version": "1", "newest": old, "changes": "{}"},
                      follow_redirects=False).status_code == 303


def test_a_password_no_one_can_type_is_refused_when_the_user_is_added(tmp_path):
    """`printf 'a long password\\r\\n' | specsize users add NAME --password-stdin` (a Windows line end; the CLI takes
    off the newline) had stored "a long password\\r": the user could never sign in at the login form. The CLI now ends
    the line at either; a password with a control character is refused (exit 2, naming the field), no user added."""
    from specsize.core.errors import SpecError
    from specsize.service import auth, db

    engine = db.connect(str(tmp_path / "service.sqlite"))
    for password in (PASSWORD + "\r", PASSWORD[:6] + "\t" + PASSWORD[6:], PASSWORD + "\x00"):
        with pytest.raises(SpecError) as refused:
            auth.add_user(engine, "alice", "planner", password)
        assert refused.value.field == "password" and "control character" in refused.value.problem
    assert auth.list_users(engine) == []
    auth.add_user(engine, "alice", "planner", PASSWORD + " ")  # a space is typed like any letter
    assert auth.user_for_password(engine, "alice", PASSWORD + " ") is not None
    engine.dispose()
    # the CLI reads one line: a Windows line end ends it as a newline does; a tab inside it is refused
    add = [sys.executable, "-m", "specsize.cli.main", "users", "add", "--role", "viewer", "--db",
           str(tmp_path / "service.sqlite"), "--password-stdin"]
    done = subprocess.run(add[:5] + ["bob"] + add[5:], input=PASSWORD + "\r\n", capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done
    engine = db.connect(str(tmp_path / "service.sqlite"))
    assert auth.user_for_password(engine, "bob", PASSWORD) is not None
    engine.dispose()
    done = subprocess.run(add[:5] + ["carol"] + add[5:], input=PASSWORD[:6] + "\t" + PASSWORD[6:] + "\n",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.strip().startswith("specsize: error: password: holds a control character ('\\t' at character 7)")


def test_a_versions_page_draws_the_acceptance_its_plan_used_not_the_newest_under_its_tag(team):
    """A version planned with `acceptance_from_store: chat` read observation #1 (rate 0.4). Once check-live recorded
    #2 (rate 0.9) under the same tag, the version's page re-planned its figures at 0.9: a speed-up curve of 0.9 under
    a stored plan of 0.4. The page now draws the version as its plan read it: the same figure as the acceptance 0.4
    given outright, before and after #2."""
    from specsize.adapters.store import Store

    client, tokens = team
    url = client.app.app.state.service.store  # the service database (Guard wraps the FastAPI app)
    target, draft = "meta-llama/Llama-3.1-8B-Instruct", "sgl-project/SpecForge-llama3-8B-eagle3"
    with Store(url) as store:
        store.add("acceptance", "chat", {}, "test", target=target, draft=draft, method="eagle3", acceptance_rate=0.4)
    for name, acceptance in (("tagged", {"acceptance_from_store": "chat"}), ("direct", {"acceptance_rate": 0.4})):
        made = client.post("/api/v1/deployments", headers=_as(tokens, "planner"), json={
            "deployment_name": name, "deployment_yaml": EXAMPLE.read_text(), **acceptance})
        assert made.status_code == 201, made.text
    viewer, _ = _signed_in(team, "viewer")

    def speedup_figure(name: str) -> str:
        page = viewer.get(f"/d/{name}")
        assert page.status_code == 200, page.text[:300]
        return re.search(r'<figure id="fig-speedup">(.*?)</figure>', page.text, re.S).group(1)

    direct = speedup_figure("direct")
    assert "<polyline" in direct
    assert speedup_figure("tagged") == direct
    with Store(url) as store:
        store.add("acceptance", "chat", {}, "test", target=target, draft=draft, method="eagle3", acceptance_rate=0.9)
    assert speedup_figure("tagged") == direct
    # the acceptance control shows the rate the version's plan used (it had shown "-" for a tag)
    page = viewer.get("/d/tagged").text
    assert re.search(r'<output id="o-acceptance_rate">0.4</output>', page)


def test_signing_in_again_ends_the_browsers_previous_session(team):
    """Signing in as another user in the same browser had left the first session valid for its 8 hours, held by a
    cookie the browser no longer shows: the login now ends the session whose cookie it is sent."""
    from specsize.service.ui import COOKIE

    client, csrf = _signed_in(team, "viewer")
    first = client.cookies.get(COOKIE)
    form = client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    done = client.post("/login", data={"csrf": token, "username": "planner", "password": PASSWORD},
                       follow_redirects=False)
    assert done.status_code == 303
    second = client.cookies.get(COOKIE)
    assert second and second != first
    from fastapi.testclient import TestClient

    stale = TestClient(team[0].app, raise_server_exceptions=False, cookies={COOKIE: first})
    assert stale.get("/", follow_redirects=False).headers.get("location") == "/login"
    assert stale.post("/ui/whatif/d1", json={"changes": {}}, headers={"x-csrf-token": csrf}).status_code == 401
    assert "planner (planner)" in client.get("/").text


def test_a_running_job_can_be_cancelled_and_frees_its_owners_turn(team):
    """A planner runs one job at a time (of 2 workers); one started by mistake (a 300,000 s scenario) had held their
    turn for the whole deadline, with no way to stop it. DELETE /api/v1/jobs/ID now kills it at once: the job reads
    `cancelled`, its process is gone, and the owner's next job is taken."""
    import time

    client, tokens = team
    runner = client.app.app.state.service.jobs
    planner = _as(tokens, "planner")
    long_job = {"deployment_yaml": EXAMPLE.read_text(), "acceptance_rate": 0.7, "rate": 5, "duration": 300_000}
    first = client.post("/api/v1/simulate", headers=planner, json=long_job)
    assert first.status_code == 202, first.text
    job_id = first.json()["id"]
    assert client.post("/api/v1/simulate", headers=planner, json=long_job).status_code == 429  # one job a user
    deadline = time.monotonic() + 60
    while job_id not in runner._processes and time.monotonic() < deadline:
        time.sleep(0.05)
    process = runner._processes[job_id]
    assert client.delete(f"/api/v1/jobs/{job_id}", headers=_as(tokens, "viewer")).status_code == 403
    assert client.delete("/api/v1/jobs/nope", headers=planner).status_code == 404
    cancelled = client.delete(f"/api/v1/jobs/{job_id}", headers=planner)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["error"] == {"field": "job", "problem": "cancelled by planner",
                                         "accepted": "the same request again"}
    process.join(10)
    assert not process.is_alive()
    time.sleep(0.5)  # its watcher, woken by the closed pipe, says nothing over the cancellation
    assert client.get(f"/api/v1/jobs/{job_id}", headers=planner).json()["status"] == "cancelled"
    again = client.delete(f"/api/v1/jobs/{job_id}", headers=planner)
    assert again.status_code == 409 and again.json()["error"]["problem"] == "the job already ended (cancelled)"
    second = client.post("/api/v1/simulate", headers=planner, json=long_job)
    assert second.status_code == 202, second.text  # the owner's turn is free
    # an admin may cancel anyone's job; the audit log names who did
    assert client.delete(f"/api/v1/jobs/{second.json()['id']}", headers=_as(tokens, "admin")).json()["status"] \
        == "cancelled"
    audit = client.get("/api/v1/audit?limit=5", headers=_as(tokens, "admin")).json()
    assert [(a["actor"], a["action"]) for a in audit[:2]] == [("admin", "job.cancel"), ("planner", "job.cancel")]


def test_the_what_if_controls_start_at_the_versions_settings(team):
    """A version on `gpu: a100-80gb` (the catalog reads GPU ids in any case) had drawn a GPU list with nothing selected,
    which a browser shows as its first entry, H100-SXM-80GB; k = 10, acceptance 0.97 and burst factor 12 had drawn
    sliders whose ends (8, 0.95, 8) a browser clamps them to. Each control now starts at the version's value."""
    client, tokens = team
    made = client.post("/api/v1/deployments", headers=_as(tokens, "planner"), json={
        "deployment_name": "odd", "deployment_yaml": EXAMPLE.read_text(), "gpu": "a100-80gb", "acceptance_rate": 0.97,
        "num_speculative_tokens": 10, "burst_factor": 12})
    assert made.status_code == 201, made.text
    viewer, _ = _signed_in(team, "viewer")
    page = viewer.get("/d/odd").text
    gpu = re.search(r'<select name="gpu">(.*?)</select>', page, re.S).group(1)
    assert re.findall(r'<option value="([^"]*)" selected>', gpu) == ["A100-80GB"]

    def slider(name: str) -> dict:
        tag = re.search(rf'<input type="range" name="{name}"([^>]*)>', page).group(1)
        return {k: float(v) for k, v in re.findall(r'(min|max|value)="([^"]*)"', tag)}

    for name, value in (("num_speculative_tokens", 10), ("acceptance_rate", 0.97), ("burst_factor", 12)):
        ends = slider(name)
        assert ends["min"] <= ends["value"] == value <= ends["max"], (name, ends)


def test_a_job_cancelled_before_its_process_starts_never_starts():
    """Cancelled between its submission and its watcher's start, a job must not start its process afterwards (the
    watcher had set "running" unconditionally, which would have read as running while nothing ran for it)."""
    from specsize.service.jobs import Job, JobRunner

    runner = JobRunner(workers=2, timeout_s=5)
    job = Job("j1", "simulate", "planner", 0.0, 5)
    runner.jobs[job.id] = job
    assert runner.cancel(job, "planner") is True and runner.running() == 0
    runner._supervise(job, {"body": {}})
    assert job.status == "cancelled" and job.id not in runner._processes
    assert runner.cancel(job, "planner") is False


def _rate_of_mean_length(length: float, k: int) -> float:
    """The per-token acceptance a whose chain 1 + a + ... + a^k is `length` tokens a pass (bisection)."""
    low, high = 0.0, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if sum(mid ** i for i in range(k + 1)) < length else (low, mid)
    return (low + high) / 2


def test_a_mean_accepted_length_stays_measured_at_its_k_when_a_version_changes_k(team):
    """A version with `mean_accepted_length: 2.6` (measured at its k = 3, so a = 0.71708: 1 + a + a^2 + a^3 = 2.6).
    A new version, what-if or ranked fix that changes k had kept 2.6 but re-read it at the new k: at k=5 a = 0.642 and
    2.6 tokens a pass (no gain from drafting more), at k=2 a = 0.860 and 2.6 tokens a pass (more than k=2 can give at
    a = 0.717), at k=1 a refusal, so the fix "lower num_speculative_tokens from 3 to 1" could not be applied. The
    figure now stays measured at k = 3 (measured_at_k), and each k is priced at a = 0.71708."""
    client, tokens = team
    planner = _as(tokens, "planner")
    made = client.post("/api/v1/deployments", headers=planner, json={
        "deployment_name": "m", "deployment_yaml": EXAMPLE.read_text(), "mean_accepted_length": 2.6, "concurrency": 60})
    assert made.status_code == 201, made.text
    a = _rate_of_mean_length(2.6, 3)
    assert a == pytest.approx(0.71708, abs=1e-5)

    def chain(k: int) -> float:
        return sum(a ** i for i in range(k + 1))

    def priced(version: int) -> tuple:
        got = client.get(f"/api/v1/deployments/m/versions/{version}", headers=_as(tokens, "viewer")).json()
        return got["plan"]["inputs"]["acceptance_rate"], got["plan"]["perf"]["tokens_per_pass"], got["request"]

    rate, per_pass, _ = priced(1)
    assert (rate, per_pass) == (pytest.approx(a, abs=1e-9), pytest.approx(2.6, abs=1e-9))
    for k in (5, 1):
        saved = client.post("/api/v1/deployments/m/versions", headers=planner, json={"num_speculative_tokens": k})
        assert saved.status_code == 201, saved.text
        rate, per_pass, request = priced(saved.json()["version"])
        assert rate == pytest.approx(a, abs=1e-9) and per_pass == pytest.approx(chain(k), abs=1e-9)
        assert (request["mean_accepted_length"], request["measured_at_k"]) == (2.6, 3)
    # the ranked fixes of v1 that lower k apply, each priced at a
    fixes = client.get("/api/v1/deployments/m/versions/1", headers=_as(tokens, "viewer")).json()["plan"]["recommendations"]
    lower = {i: f["changes"]["num_speculative_tokens"] for i, f in enumerate(fixes)
             if f["changes"].get("method") == "eagle3" and f["changes"].get("num_speculative_tokens") in (1, 2)}
    assert sorted(lower.values()) == [1, 2]
    browser, csrf = _signed_in(team, "planner")
    for index, k in lower.items():
        applied = browser.post("/d/m/apply", data={"csrf": csrf, "version": "1", "fix": str(index)},
                               follow_redirects=False)
        assert applied.status_code == 303, applied.text[:300]
        rate, per_pass, _ = priced(int(applied.headers["location"].split("v=")[1]))
        assert rate == pytest.approx(a, abs=1e-9) and per_pass == pytest.approx(chain(k), abs=1e-9)
    # a what-if that moves k: the same
    moved = browser.post("/ui/whatif/m", json={"version": 1, "changes": {"num_speculative_tokens": 5}},
                         headers={"x-csrf-token": csrf})
    assert moved.status_code == 200, moved.text
    v2 = client.get("/api/v1/deployments/m/versions/2", headers=_as(tokens, "viewer")).json()["plan"]  # k=5 above
    assert moved.json()["headroom_fraction"] == v2["headroom_fraction"]
    # a new figure given with the new k is read at that k, as sent
    fresh = client.post("/api/v1/deployments/m/versions", headers=planner, json={
        "base_version": 1, "num_speculative_tokens": 5, "mean_accepted_length": 3.5})
    rate, per_pass, request = priced(fresh.json()["version"])
    assert "measured_at_k" not in request and per_pass == pytest.approx(3.5, abs=1e-9)
    assert rate == pytest.approx(_rate_of_mean_length(3.5, 5), abs=1e-6)
