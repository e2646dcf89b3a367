"""The HTML report in a real headless browser, golden Markdown, atomic writes."""

import json
import re
import subprocess
import sys
import time
from dataclasses import replace
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest

import specsize
from specsize.cli.main import main
from specsize.reports import html as html_report
from specsize.reports import markdown, plots, report_markdown, rows, svg
from specsize.reports import text as text_report

from helpers import chromium, run_cli as run

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
PLOTS = ("gpu-memory", "kv-demand", "speedup", "timeline")




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


# --- renderers on odd but valid plans (bug hunt of the reports) ---

NO_KV = {"target": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "H100-SXM-80GB", "tp": 1}  # 70B on one H100


class _Tags(HTMLParser):
    """Open tags left unclosed or closed out of order (void elements aside)."""
    VOID = {"meta", "br", "img", "input", "link", "hr"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def test_a_plan_with_no_kv_cache_reads_without_inf_or_none_needed():
    """Bug hunt: a plan with no memory for the KV cache printed "worst-case headroom -inf" in its headline and
    tables, and the HTML report said "None needed: the plan fits with the policy's headroom" under a DOES NOT FIT
    verdict when no change helped."""
    data = specsize.report(specsize.load_request(**NO_KV, simulate=False))
    assert data.result.verdict.verdict == "does_not_fit" and not data.result.recommendations
    page = html_report.render(data)
    text = report_markdown.render(data)
    for rendered in (page, text, text_report.render(data.result)):  # the standards section is planner/compliance's
        assert "-inf" not in rendered.split("Standards &")[0] and "None needed" not in rendered
    assert "DOES NOT FIT: the engine does not start, no headroom (policy 20%)" in text and "None found" in page
    worst = next(line for line in text.splitlines() if line.startswith("| worst case"))
    assert worst.endswith("| - |")
    tags = _Tags()
    tags.feed(page)
    assert tags.errors == [] and tags.stack == []


@pytest.mark.parametrize("headroom, shown", [(0.19979418574736296, "19.98%"), (0.19999999999999996, "20.0%"),
                                              (-0.0002572678157961583, "-0.03%"), (0.124916, "12.5%"),
                                              (-145.717, "-14571.7%"), (float("-inf"), "-")])
def test_a_headroom_never_rounds_across_its_verdict(headroom, shown):
    """Bug hunt: 0.1998 against a 20% policy printed "THIN: worst-case headroom 20.0% (policy 20%)", and a plan that
    does not fit by 0.03% printed "-0.0%"."""
    assert rows.headroom_pct(headroom, 0.2) == shown


def test_ttft_with_speculation_is_a_dash_when_speculation_is_not_priced():
    """Bug hunt: without a drafter's acceptance (or without speculation) the perf table put the target's own TTFT
    in the "with speculation" column too, where TPOT and throughput said "-"."""
    for fields in ({"method": "none"}, {"target": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM-80GB",
                                         "draft": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 3}):
        result = specsize.plan(specsize.load_request(**fields))
        ttft = next(row for row in rows.perf_rows(result) if row[0].startswith("TTFT"))
        assert ttft[1] == f"{result.perf.ttft_s * 1e3:.2f} ms" and ttft[2] == "-"
    priced = specsize.plan(specsize.load_request(acceptance_rate=0.7))
    ttft = next(row for row in rows.perf_rows(priced) if row[0].startswith("TTFT"))
    assert ttft[1:] == (f"{priced.perf.ttft_s_no_spec * 1e3:.2f} ms", f"{priced.perf.ttft_s * 1e3:.2f} ms")


def test_text_output_prints_user_text_as_written(tmp_path, capsys):
    """Bug hunt: `specsize plan` rendered user text as rich markup: an acceptance_source with "[/]" was an internal
    error (exit 4), and "[red]" or ":100:" in a model path or note vanished or became an emoji."""
    deployment = tmp_path / "d.yaml"
    source = "bench [/] run [bold]3[/bold] :100:"
    deployment.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nmethod: ngram\n"
                          f"num_speculative_tokens: 3\nacceptance_rate: 0.5\nacceptance_source: {json.dumps(source)}\n")
    code, out, _ = run(capsys, "plan", str(deployment))
    assert code == 0 and source in out


def test_speedup_markdown_notes_are_not_table_rows(capsys):
    """Bug hunt: `speedup --format markdown` put its "! ..." notes on the lines right under the last table, which
    GitHub renders as more rows of that table."""
    code, out, _ = run(capsys, "speedup", "--acceptance-rate", "0.7", "--batch-size", "1,512", "--format", "markdown")
    lines = out.splitlines()
    last_row = max(i for i, line in enumerate(lines) if line.startswith("|"))
    assert code == 0 and lines[last_row + 1] == "" and lines[last_row + 2].startswith("- batch sizes 512")
    assert not any(line.startswith("!") for line in lines)


@pytest.mark.parametrize("top, axis", [(4e-6, 5e-6), (1e-4, 1e-4), (0.00099, 0.001), (0.123, 0.2), (0.05, 0.05),
                                       (7.5, 10), (79.19, 100), (12345.6, 20000), (0.0, 1.0)])
def test_web_figures_scale_their_axis_to_the_data(top, axis):
    """Bug hunt: the web UI's axis top was 1000 x a value of 1e-4 GiB, and an IndexError below 1e-4 (str() of such a
    float is "1e-05")."""
    assert svg._nice(top) == pytest.approx(axis)


def test_burst_timeline_of_a_plan_without_speculation_and_of_a_run_that_never_steps():
    """Bug hunt: the burst figure labelled the one run of a plan without speculation "none (speculation)"; a run in
    which no request was admitted drew empty axes over -0.04 to 0.04 s, and the queue and preemption axes reached
    below zero."""
    plain = specsize.simulate(specsize.load_request(method="none", duration=5))
    assert "none (speculation)" not in plots.timeline(plain) and "none (no speculation)" in plots.timeline(plain)
    assert ">no speculation: " in svg.timeline(plain)
    # what a run whose requests all outsize the KV pool reports (prompts of 40,000 tokens on an L4): no step, no series
    empty = replace(plain.spec, steps=0, series={name: [] for name in plain.spec.series})
    figure = plots.timeline(replace(plain, spec=empty))
    assert "no engine step ran" in figure and not re.search(r">−[0-9.]+<", figure)  # no tick below zero (U+2212)


def test_markdown_lists_and_entities():
    """Bug hunt: a placement line starting with a digit ("2 node(s) of 8 GPUs") lost its bullet (only "1. ..." lines
    are numbered items), an entity a user wrote (&lt;) rendered as the character it names, and a GPU's source note
    was cut mid-word."""
    assert markdown._items(["1. first fix", "2 node(s) of 8 GPUs"]) == ["1. first fix", "- 2 node(s) of 8 GPUs"]
    assert markdown.inline("a &lt;b&gt; & c") == "a \\&lt;b\\&gt; & c"
    assert rows.clip("derived: 46068 MiB in nvidia-smi minus the driver reservation (a 48 GB", 60) \
        == "derived: 46068 MiB in nvidia-smi minus the driver…"
    assert rows.clip("--gpu-memory-gib", 60) == "--gpu-memory-gib"


def test_the_report_carries_the_plans_notes():
    """Bug hunt: `report` dropped the plan's notes (`plan` prints them on stderr; the report printed them nowhere),
    among them that an n-gram plan assumes a lookup match in 38% of steps and that the workload is the default's."""
    data = specsize.report(specsize.load_request(method="ngram", num_speculative_tokens=3, acceptance_rate=0.5,
                                                 simulate=False))
    assert any(note.startswith("n-gram priced with a lookup match") for note in data.result.notes)
    text, page = report_markdown.render(data), html_report.render(data)
    for note in data.result.notes:
        assert f"- {markdown.inline(note)}" in text.split("## Notes")[1] and f"<li>{escape(note)}</li>" in page


def test_sc5_counts_failover_and_its_headroom_reads_as_its_verdict(capsys):
    # 8 GPUs of the embedded 4-GPU deployment: 2 replicas; with one down, the survivor takes all 30 requests and
    # does not fit. SC-5 had said PASS with that failover in its own evidence (docs/report.md: failover counts)
    code, out, _ = run(capsys, "report", "--gpus", "8", "--concurrency", "30", "--no-simulate", "--format", "markdown")
    sc5 = out.split("SC-5")[1].split("###")[0]
    assert "failover:" in sc5 and "does_not_fit" in sc5
    assert "**ATTENTION**: capacity holds the burst, but not with a replica down (failover: does_not_fit)" in sc5
    assert re.search(r"\(\d{1,3},\d{3} tokens each\)", out)  # what breaks first: thousands separated


def test_a_headroom_is_printed_as_the_verdict_it_gives():
    from specsize.core.envelope import headroom_text, policy_text

    assert headroom_text(0.19979, 0.2) == "19.98%"  # thin: not the "20.0%" that reads as fitting
    assert headroom_text(0.2, 0.2) == "20.0%" and headroom_text(0.6, 0.2) == "60.0%"
    assert headroom_text(-0.0003, 0.2) == "-0.03%"  # does not fit: not "-0.0%"
    assert headroom_text(0.00004, 0.0) == "0.0%" and headroom_text(float("-inf"), 0.2) == "none"
    assert headroom_text(0.19979, 0.2, 0) == "19.98%" and headroom_text(0.6, 0.2, 0) == "60%"
    # a few bytes short of a line: no decimals read as the verdict (had printed "-0.00000%", i.e. fits)
    assert headroom_text(-3e-11, 0.2) == "just under 0%" and headroom_text(0.2 - 2e-9, 0.2) == "just under 20%"
    # the line a policy of 12.5% draws is 12.5%, not the "12%" a whole percent rounds it to
    assert headroom_text(0.125 - 2e-9, 0.125) == "just under 12.5%"
    # one precision everywhere: the headline said 12.5% where what breaks first and the fixes said 12%
    assert headroom_text(0.1249, 0.2) == "12.5%"
    # a policy as it was set: 12.5% had read "12%" beside a headroom of 12.49% under it
    assert policy_text(0.125) == "12.5%" and policy_text(0.2) == "20%" and policy_text(0.0) == "0%"


def test_a_policy_between_whole_percents_is_printed_as_set(capsys):

    with pytest.raises(SystemExit):
        main(["plan", "--headroom", "0.1326"])
    out = capsys.readouterr().out
    # the default plan's worst case: 36 p99 requests of 9,204 tokens (576 blocks of 16) in a pool of 23,906 blocks
    # less vLLM's null block, 1 - 20,736 / 23,905 = 13.2566%: under a 13.26% policy "13.3%" and "13.26%" would read
    # as fits
    assert "THIN: worst-case headroom 13.257% (policy 13.26%)" in out
    assert "13.257% headroom (thinner than the policy of 13.26%)" in " ".join(out.split())


def test_an_output_file_is_checked_before_the_work(capsys, tmp_path):
    # a search (minutes), a report with its simulation: a taken -o had been found only after them. Checked first,
    # the error names the output even though the spec file does not exist
    taken = tmp_path / "taken.json"
    taken.write_text("mine")
    code, _, err = run(capsys, "search", str(tmp_path / "missing.yaml"), "-o", str(taken))
    assert code == 2 and "output" in err and "exists" in err and taken.read_text() == "mine"
    code, out, err = run(capsys, "report", "--format", "html", "-o", "-")
    assert code == 2 and "an HTML report needs a file" in err and not out


def test_check_says_no_headroom_without_a_kv_cache(capsys, tmp_path):
    deployment = tmp_path / "d.yaml"
    deployment.write_text("target: meta-llama/Llama-3.1-70B-Instruct\ngpu: H100-SXM-80GB\ntp: 1\n")
    code, out, _ = run(capsys, "check", str(deployment))
    assert code == 3 and out.startswith("does_not_fit: worst-case headroom none (policy 20%)") and "inf" not in out
