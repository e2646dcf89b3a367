"""The team service's second review, over real HTTP (`specsize serve` as a subprocess, on SQLite and on a real
PostgreSQL server): exports that re-plan to the stored numbers, names matched whole, strict integers and bounded
text, concurrent saves that each land, text no column can keep, and errors that name the field."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from servers import REPO, Server, add_user, specsize

EXAMPLE = REPO / "examples" / "llama8b-eagle3-h100.yaml"
TARGET, DRAFT = "meta-llama/Llama-3.1-8B-Instruct", "sgl-project/SpecForge-llama3-8B-eagle3"


@pytest.fixture(scope="module")
def team(db_url, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    tokens = {role: add_user(db_url, role, role) for role in ("viewer", "planner", "admin")}
    server = Server(db_url, home)
    yield server, tokens, db_url, home
    server.stop()


def _store(db_url: str):
    """The calibration store the service keeps in its own database (the SQLite file, or the PostgreSQL URL)."""
    from specsize.adapters.store import Store

    return Store(db_url)


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    return response.json()["error"]


TREE = {"engine": "sglang", "tree_topk": 4, "num_draft_tokens": 8}


@pytest.mark.parametrize("observed", [{"acceptance_rate": 0.54},
                                      {"mean_accepted_length": 2.6, "k": 4},
                                      # an SGLang tree server's row (check-live --record): its length holds the tree's
                                      # gain; exported as the rate solved from it, the tree had widened it again
                                      {"acceptance_rate": 0.6913, "mean_accepted_length": 2.5, "k": 3,
                                       "payload": {"tree_topk": 4, "num_draft_tokens": 8}}],
                         ids=["rate", "mean_length", "tree_row"])
def test_an_export_replans_to_the_stored_acceptance(team, observed, tmp_path):
    """A version planned with `acceptance_from_store` had been exported without any acceptance (a deployment file
    has no store tag): `specsize plan` of the export planned without speculation's numbers. The export now carries the
    acceptance the plan used, in the form it used (a mean length measured at another k included), and says where from."""
    import specsize

    server, tokens, db_url, _ = team
    observed = dict(observed)
    payload = observed.pop("payload", {})
    tag = "export-" + "-".join(observed) + ("-tree" if payload else "")
    with _store(db_url) as store:
        store.add("acceptance", tag, payload, "test", target=TARGET, draft=DRAFT, method="eagle3", **observed)
    name = tag.replace("_", "-")
    with server.client(tokens["planner"]) as c:
        made = c.post("/api/v1/deployments", json={"deployment_name": name, "deployment_yaml": EXAMPLE.read_text(),
                                                   "acceptance_from_store": tag, **(TREE if payload else {})})
        assert made.status_code == 201, made.text
        stored = c.get(f"/api/v1/deployments/{name}/versions/1").json()["plan"]
        exported = c.get(f"/api/v1/deployments/{name}/versions/1/yaml")
    assert exported.status_code == 200, exported.text
    assert stored["inputs"]["acceptance_source"].startswith("store #") and stored["inputs"]["acceptance_rate"]
    path = tmp_path / "export.yaml"
    path.write_text(exported.text)
    again = specsize.plan(specsize.load_request(path)).to_dict()
    assert again["inputs"]["acceptance_rate"] == stored["inputs"]["acceptance_rate"]
    assert again["inputs"]["acceptance_source"] == stored["inputs"]["acceptance_source"]
    assert (again["verdict"], again["headroom_fraction"]) == (stored["verdict"], stored["headroom_fraction"])
    assert again["perf"] == stored["perf"]  # a mean length is read as measured, as the stored plan did
    if payload:  # the tree's row is priced at its measured 2.5 tokens a pass, in the service and from its export
        assert stored["perf"]["tokens_per_pass"] == pytest.approx(2.5)
    assert f"# acceptance: from the calibration store, tag '{tag}'" in exported.text


def test_names_with_a_trailing_newline_are_refused(team):
    """`$` matches before a final newline: "prod\\n" had been a deployment name and an endpoint name."""
    server, tokens, _, _ = team
    with server.client(tokens["planner"]) as c:
        body = {"deployment_name": "prod\n", "deployment_yaml": EXAMPLE.read_text()}
        assert _error(c.post("/api/v1/deployments", json=body), 400)["field"] == "deployment_name"
        assert _error(c.get("/api/v1/deployments/prod%0A"), 404)["field"] == "name"
        assert [row["name"] for row in c.get("/api/v1/deployments").json() if row["name"].startswith("prod")] == []
    with server.client(tokens["admin"]) as c:
        error = _error(c.post("/api/v1/endpoints", json={"name": "vllm\n", "url": "http://10.0.0.9/metrics"}), 400)
        assert error["field"] == "name"
        assert all(row["name"] != "vllm\n" for row in c.get("/api/v1/endpoints").json())


def test_integers_are_strict_and_text_is_bounded(team):
    """`base_version: true` had been version 1; `"record": ""` had answered 200 and recorded nothing; a 5,000-character
    job id or tag came back whole in the error."""
    server, tokens, db_url, _ = team
    with server.client(tokens["planner"]) as c:
        assert c.post("/api/v1/deployments", json={"deployment_name": "strict", "deployment_yaml": EXAMPLE.read_text(),
                                                   "acceptance_rate": 0.7}).status_code == 201
        for value in (True, "1", 1.5):
            error = _error(c.post("/api/v1/deployments/strict/versions", json={"base_version": value}), 422)
            assert error["field"] == "base_version", value
        live = {"endpoint": "nowhere", "deployment": "strict"}
        assert _error(c.post("/api/v1/check-live", json={**live, "version": True}), 422)["field"] == "version"
        for tag in ("", "x" * 5_000):
            response = c.post("/api/v1/check-live", json={**live, "record": tag})
            assert _error(response, 422)["field"] == "record" and len(response.text) < 400
        assert _error(c.post("/api/v1/check-live", json={**live, "record": "  "}), 400)["field"] == "record"
        for field, limit in (("note", 4096), ("description", 4096), ("acceptance_from_store", 200)):
            response = c.post("/api/v1/deployments/strict/versions", json={field: "n" * (limit + 1)})
            error = _error(response, 422)
            assert error["field"] == field and str(limit) in error["accepted"] and len(response.text) < 400
        response = c.get("/api/v1/jobs/" + "j" * 5_000)
        assert _error(response, 404)["field"] == "job" and len(response.text) < 400
        # an unknown tag lists some of the tags stored, never all of them
        with _store(db_url) as store:
            for number in range(40):
                store.add("acceptance", f"tag-{number:02d}-" + "t" * 100, {}, "test", acceptance_rate=0.5)
        response = c.post("/api/v1/plan", json={"deployment_yaml": EXAMPLE.read_text(),
                                                "acceptance_from_store": "missing"})
        error = _error(response, 400)
        assert error["field"] == "acceptance_from_store" and "more" in error["accepted"] and len(response.text) < 2_000


def test_concurrent_new_versions_each_land(team):
    """24 new versions of one deployment at once: 14 had been 500s (IntegrityError: two saves took the same number)
    and their changes lost, on PostgreSQL and SQLite alike."""
    server, tokens, _, _ = team
    with server.client(tokens["planner"]) as c:
        assert c.post("/api/v1/deployments", json={"deployment_name": "race", "target": TARGET,
                                                   "gpu": "H100-SXM-80GB", "concurrency": 16}).status_code == 201

    def save(index: int) -> tuple[int, str]:
        with server.client(tokens["planner"]) as c:
            response = c.post("/api/v1/deployments/race/versions", json={"concurrency": 10 + index,
                                                                         "note": f"n{index}"})
        return response.status_code, response.text

    with ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(save, range(24)))
    assert [status for status, _ in answers] == [201] * 24, answers
    with server.client(tokens["viewer"]) as c:
        versions = c.get("/api/v1/deployments/race/versions").json()
    assert [v["version"] for v in versions] == list(range(1, 26))
    assert sorted(v["note"] for v in versions[1:]) == sorted(f"n{index}" for index in range(24))
    assert sorted(json.loads(a[1])["version"] for a in answers) == list(range(2, 26))


def test_text_no_column_can_keep_is_refused_and_poisons_nothing(team):
    """A lone surrogate had been a 500 (note, record), or stored (description) so that every later read of the
    deployment was a 500; a NUL had been a 500 on PostgreSQL. Both are refused at the body, naming the field."""
    server, tokens, _, _ = team
    with server.client(tokens["planner"]) as c:
        assert c.post("/api/v1/deployments", json={"deployment_name": "texts", "deployment_yaml": EXAMPLE.read_text(),
                                                   "acceptance_rate": 0.7}).status_code == 201
        for bad in ("\\ud800", "\\u0000"):
            cases = (("/api/v1/deployments/texts/versions", f'{{"note": "a{bad}b"}}', "note"),
                     ("/api/v1/deployments/texts/versions", f'{{"description": "{bad}"}}', "description"),
                     ("/api/v1/deployments", f'{{"deployment_name": "poison", "description": "{bad}"}}', "description"),
                     ("/api/v1/check-live", f'{{"endpoint": "e", "deployment": "texts", "record": "{bad}"}}',
                      "record"),
                     ("/api/v1/plan", f'{{"prompt_tokens": {{"p50": 1, "p{bad}": 2}}}}', "prompt_tokens.(a key)"))
            for path, body, field in cases:
                response = c.post(path, content=body.encode(), headers={"content-type": "application/json"})
                error = _error(response, 422)
                assert error["field"] == field and "NUL" in error["problem"], (path, body, error)
        # nor through a deployment file's escape: YAML's "\x00" is a NUL too
        in_yaml = EXAMPLE.read_text() + 'description: "a\\x00b"\n'
        error = _error(c.post("/api/v1/deployments", json={"deployment_name": "poison", "deployment_yaml": in_yaml,
                                                           "acceptance_rate": 0.7}), 422)  # as docs/service.md
        assert error["field"] == "description" and "NUL" in error["problem"]
        assert c.get("/api/v1/deployments").status_code == 200
        got = c.get("/api/v1/deployments/texts")
        assert got.status_code == 200 and [v["version"] for v in got.json()["versions"]] == [1]
        assert _error(c.get("/api/v1/deployments/poison"), 404)["field"] == "name"
        # a NUL in a URL reaches no SQL either (PostgreSQL refuses it: a 500)
        assert _error(c.get("/api/v1/deployments/a%00b"), 404)["field"] == "name"
        assert _error(c.post("/api/v1/check-live", json={"endpoint": "a\x00b", "deployment": "texts"}), 422)["field"] == \
            "endpoint"
    with server.client() as c:
        assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200


def test_errors_name_the_field_and_the_status_the_docs_promise(team):
    server, tokens, _, _ = team
    with server.client(tokens["planner"]) as c:
        json_headers = {"content-type": "application/json"}
        # bytes that are not UTF-8 had been "a number of more than 4,300 digits"
        error = _error(c.post("/api/v1/plan", content=b'{"description": "\xe9"}', headers=json_headers), 422)
        assert error["field"] == "body" and "UTF-8" in error["problem"]
        # nesting too deep to read had been a 400 naming no field and accepting nothing
        deep = b'{"description": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        error = _error(c.post("/api/v1/plan", content=deep, headers=json_headers), 422)
        assert error["field"] == "body" and error["accepted"] == "a JSON object of fields"
        # JSON sent as text/plain, or with no content type, had been "Input should be a valid dictionary"
        body = json.dumps({"target": TARGET, "gpu": "H100-SXM-80GB"}).encode()
        for headers in ({"content-type": "text/plain"}, {}):
            error = _error(c.post("/api/v1/plan", content=body, headers=headers), 422)
            assert error["field"] == "body" and "content-type: application/json" in error["problem"], headers
        # a query parameter's error names the parameter, not "query"
        assert c.post("/api/v1/deployments", json={"deployment_name": "errs", "deployment_yaml": EXAMPLE.read_text(),
                                                   "acceptance_rate": 0.7}).status_code == 201
        assert _error(c.get("/api/v1/deployments/errs/diff", params={"a": "x", "b": 1}), 422)["field"] == "a"
        assert _error(c.get("/api/v1/audit", params={"limit": "many"}, headers={
            "authorization": f"Bearer {tokens['admin']}"}), 422)["field"] == "limit"
        # an unknown deployment or version is 404, as docs/service.md says (it had been 400)
        for path in ("/api/v1/deployments/nope", "/api/v1/deployments/nope/versions",
                     "/api/v1/deployments/nope/versions/1", "/api/v1/deployments/nope/versions/1/yaml",
                     "/api/v1/deployments/errs/versions/9", "/api/v1/deployments/errs/versions/9/yaml"):
            assert _error(c.get(path), 404)["field"] in ("name", "version"), path
        assert _error(c.post("/api/v1/deployments/nope/versions", json={"concurrency": 8}), 404)["field"] == "name"
        # a speedup candidate's error names the body's field, `candidates` (it had said `candidate`)
        error = _error(c.post("/api/v1/speedup", json={"target": TARGET, "gpu": "H100-SXM-80GB", "method": "ngram",
                                                        "num_speculative_tokens": 3, "acceptance_rate": 0.5,
                                                        "candidates": ["method=bogus,acceptance=0.5"]}), 400)
        assert error["field"] == "candidates"


def test_adding_a_revoked_name_again_says_what_works(team):
    """`users add` of a revoked name had advised `users revoke` first: it was revoked, and adding failed again. A name
    is never given to another user (the audit log names people by it): the advice is a new name."""
    _, _, db_url, _ = team
    add_user(db_url, "leaver", "viewer")
    assert specsize("users", "revoke", "leaver", "--db", db_url).returncode == 0
    done = specsize("users", "add", "leaver", "--role", "viewer", "--db", db_url)
    assert done.returncode == 2 and "was revoked" in done.stderr and "a new user name" in done.stderr
    assert "users revoke" not in done.stderr
    done = specsize("users", "add", "planner", "--role", "viewer", "--db", db_url)
    assert done.returncode == 2 and "exists" in done.stderr and "users revoke" not in done.stderr
