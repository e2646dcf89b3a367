#!/usr/bin/env python3
"""Speed of the service (issue #14). Targets: a plan over HTTP < 50 ms at the median; a what-if re-plan of the web
UI (new verdict and figures) < 150 ms. Starts `specsize serve` on a free port with a throwaway SQLite database,
adds a user, and times requests over one keep-alive connection, as a browser or a client library sends them.

Run: .venv/bin/python bench/service_speed.py [N]   (N requests per row, default 200)
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "service"))

from servers import REPO, Server, add_user  # noqa: E402

EXAMPLE = (REPO / "examples" / "llama8b-eagle3-h100.yaml").read_text()


def _timed(call, n: int) -> list[float]:
    call()  # warm
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        response = call()
        samples.append(time.perf_counter() - started)
        assert response.status_code < 300, response.text
    return samples


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        db = str(home / "bench.sqlite")
        token = add_user(db, "bench", "planner", password="bench-password-123")
        server = Server(db, home, "--rate-limit", "1000000")
        try:
            with server.client(token) as c:
                body = {"deployment_yaml": EXAMPLE, "acceptance_rate": 0.7}
                rows = [("POST /api/v1/plan (deployment file + override)", _timed(lambda: c.post("/api/v1/plan",
                                                                                                 json=body), n), 50)]
                rows.append(("POST /api/v1/plan (fields only)", _timed(lambda: c.post("/api/v1/plan", json={
                    "target": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM-80GB", "concurrency": 32}), n), 50))
                c.post("/api/v1/deployments", json={"deployment_name": "bench", **body})
            with server.client() as browser:
                login = browser.get("/login")
                csrf = re.search(r'name="csrf" value="([^"]+)"', login.text).group(1)
                browser.post("/login", data={"csrf": csrf, "username": "bench", "password": "bench-password-123"})
                page = browser.get("/d/bench")
                csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.text).group(1)
                moves = iter(range(10**9))
                rows.append(("POST /ui/whatif (verdict + 3 SVG figures)", _timed(lambda: browser.post(
                    "/ui/whatif/bench", json={"version": 1, "changes": {"concurrency": 20 + next(moves) % 60}},
                    headers={"x-csrf-token": csrf}), n), 150))
                rows.append(("GET /d/NAME (the whole deployment page)", _timed(lambda: browser.get("/d/bench"), n // 4),
                             None))
        finally:
            server.stop()
    print(f"{'request':<48} {'median ms':>10} {'p90 ms':>8} {'target ms':>10}")
    for label, samples, target in rows:
        samples.sort()
        median, p90 = statistics.median(samples) * 1e3, samples[int(0.9 * (len(samples) - 1))] * 1e3
        verdict = "" if target is None else ("  ok" if median < target else "  MISSED")
        print(f"{label:<48} {median:>10.1f} {p90:>8.1f} {target if target else '-':>10}{verdict}")


if __name__ == "__main__":
    main()
