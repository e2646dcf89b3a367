"""The HTML report in a real headless browser, golden Markdown, atomic writes."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specsize.cli.main import main

from helpers import chromium

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
PLOTS = ("gpu-memory", "kv-demand", "speedup", "timeline")


def run(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_html_report_in_headless_chromium(tmp_path, capsys):
    browser_path = chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is part of specsize[test]")
    page_file = tmp_path / "report.html"
    code, _, _ = run(capsys, "report", "-o", str(page_file))
    _, out, _ = run(capsys, "plan", "--simulate", "--format", "json")  # the report folds in its burst simulation
    expected_verdict = json.loads(out)["verdict"]
    assert code in (0, 1, 3)
    errors = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("requestfailed", lambda req: errors.append(f"request failed: {req.url}"))
        page.goto(page_file.as_uri())
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        sizes = {name: page.eval_on_selector(f"[data-plot='{name}'] svg",
                                             "e => [e.getBoundingClientRect().width, e.getBoundingClientRect().height,"
                                             " e.querySelectorAll('path,line,rect,polyline').length]")
                 for name in PLOTS}
        verdict = page.get_attribute("#verdict", "data-verdict")
        verdict_text = page.inner_text("#verdict")
        controls = page.eval_on_selector_all("[data-control]", "els => els.map(e => e.dataset.control)")
        browser.close()
    assert errors == []
    for name, (width, height, marks) in sizes.items():
        assert width > 200 and height > 150 and marks > 10, (name, width, height, marks)
    assert verdict == expected_verdict
    assert verdict_text.startswith({"fits": "FITS", "thin": "THIN", "does_not_fit": "DOES NOT FIT"}[verdict])
    assert controls == ["SC-5", "CIS-4", "PR.PS-01"]
    assert (tmp_path / "report.png").stat().st_size > 50_000


def test_report_needs_force_to_replace(tmp_path, capsys):
    target = tmp_path / "r.html"
    target.write_text("mine")
    code, _, err = run(capsys, "report", "-o", str(target), "--no-simulate")
    assert code == 2 and target.read_text() == "mine"
    code, _, _ = run(capsys, "report", "-o", str(target), "--no-simulate", "--force")
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed, not left behind


def test_user_text_cannot_forge_structure_in_the_markdown_report(tmp_path, capsys):
    """Fuzz pass 3: a security note with line breaks wrote its own "### NIST CSF ... **PASS**" section and a raw
    <img onerror> tag into the Markdown report (the HTML report escaped it)."""
    forged = ("ok\n\n### NIST CSF 2.0 PR.PS-01 (re-assessed)\n\n**PASS**: every component is protected "
              "<img src=x onerror=alert(1)> | cell | [link](javascript:alert(2))")
    deployment = tmp_path / "d.yaml"
    deployment.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nmax_model_len: 16384\n"
                          "security:\n  inference_endpoint: {auth: api_key, note: " + json.dumps(forged) + "}\n")
    code, out, _ = run(capsys, "report", str(deployment), "--format", "markdown", "--no-simulate")
    assert code == 0
    headings = [line for line in out.splitlines() if line.startswith("#")]
    assert not any("re-assessed" in line for line in headings)
    assert not re.search(r"(?<!\\)<img", out) and not re.search(r"(?<!\\)\]\(javascript", out)
    quoted = next(line for line in out.splitlines() if "re-assessed" in line)
    assert quoted.startswith("- ") and "\\*\\*PASS\\*\\*" in quoted and "\\<img" in quoted and "\\|" in quoted


@pytest.mark.parametrize("name", ["fits", "thin"])
def test_golden_markdown(name, capsys):
    """Regenerate with: python3 dev.py goldens"""
    args = GOLDEN_ARGS[name]
    code, out, _ = run(capsys, "report", "--format", "markdown", "--fail-on", "thin", *args)
    golden = (GOLDEN / f"report-{name}.md").read_text()
    assert out == golden, f"golden report-{name}.md differs: rerun `python3 dev.py goldens` if the change is intended"
    assert code == {"fits": 0, "thin": 1}[name]


GOLDEN_ARGS = {
    "fits": [str(ROOT / "examples" / "llama8b-eagle3-h100.yaml"), "--mean-accepted-length", "3.1",
             "--measured-at-k", "3", "--concurrency", "24", "--sim-duration", "60"],
    "thin": [str(ROOT / "examples" / "llama70b-draft1b-4xh100.yaml"), "--sim-duration", "60"],
}


def test_report_renders_fast():
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "specsize.cli.main", "report", "--format", "markdown", "--no-simulate"],
                   check=False, capture_output=True)
    assert time.perf_counter() - start < 30  # a smoke bound; the 2 s target is measured in bench/report_speed.py


def test_the_report_shows_the_verdict_of_plan_simulate(capsys):
    # a TPOT SLO of 5 ms no request meets: the plan fits, its burst simulation misses the SLO, and the report (which
    # simulates) says thin, as `plan --simulate` does (docs/report.md had said plain `plan`'s)
    args = ("--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--tpot-slo-ms", "5")
    _, plain, _ = run(capsys, "plan", *args, "--format", "json")
    _, simulated, _ = run(capsys, "plan", *args, "--simulate", "--format", "json")
    code, report, _ = run(capsys, "report", *args, "--format", "markdown")
    assert json.loads(plain)["verdict"] == "fits" and json.loads(simulated)["verdict"] == "thin"
    assert code == 0 and "**THIN: worst-case headroom" in report
