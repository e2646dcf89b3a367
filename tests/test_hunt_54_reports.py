"""Hunt 54: what the user sees - the plan's tables, the standards mapping, the web UI's figures and the sweep's
summary - each bug with a value worked out by hand or against the engine's own source."""

import re
from pathlib import Path

import pytest

import specsize
from specsize.core.units import GiB
from helpers import run_cli as run

ROOT = Path(__file__).resolve().parent.parent
EIGHT_B = "meta-llama/Llama-3.1-8B-Instruct"
SECURED = {"inference_endpoint": {"auth": "api_key", "note": "vllm serve --api-key from a secret"},
           "dashboard": {"auth": "oidc", "note": ""}}


def _control(data, name: str):
    return next(c for c in data.controls if c.control == name)


# --- the performance table: the TPOT SLO's concurrency under the server it was worked out for ----------------------

def _slo_row(result):
    from specsize.reports import rows

    return next(row for row in rows.perf_rows(result) if row[0].startswith("concurrency meeting TPOT"))


def test_the_slo_concurrency_of_a_plain_server_is_shown_under_no_speculation(capsys):
    """Without speculation (or without an acceptance) planner.perf.summarize bisects the target's own TPOT, yet the
    table had put that count under "with speculation", a column whose other cells are all "-". The plain server's
    TPOT at the expected batch of 24 is 8.56 ms < 10 ms, so at least 24 sequences meet a 10 ms TPOT."""
    result = specsize.plan(target=EIGHT_B, gpu="H100-SXM-80GB", tpot_slo_ms=10)
    p = result.perf
    assert p.speedup is None and p.tpot_s_no_spec < 0.010 and p.batch_size == 24
    assert p.max_concurrency_for_tpot_slo >= 24
    assert _slo_row(result) == ("concurrency meeting TPOT <= 10 ms", f"{p.max_concurrency_for_tpot_slo:,}", "-")
    code, out, _ = run(capsys, "plan", "--target", EIGHT_B, "--gpu", "H100-SXM-80GB", "--tpot-slo-ms", "10",
                       "--format", "markdown")
    assert code == 0
    assert f"| concurrency meeting TPOT <= 10 ms | {p.max_concurrency_for_tpot_slo:,} | - |" in out
    # speculation without an acceptance is not priced: the count is the target's alone there too
    unpriced = specsize.plan(target=EIGHT_B, gpu="H100-SXM-80GB", draft="meta-llama/Llama-3.2-1B-Instruct",
                             num_speculative_tokens=3, tpot_slo_ms=10)
    assert unpriced.perf.speedup is None
    assert _slo_row(unpriced)[1:] == (f"{unpriced.perf.max_concurrency_for_tpot_slo:,}", "-")


def test_the_slo_concurrency_with_priced_speculation_stays_under_speculation():
    result = specsize.plan(tpot_slo_ms=20, acceptance_rate=0.7)
    p = result.perf
    assert p.speedup is not None
    assert _slo_row(result) == ("concurrency meeting TPOT <= 20 ms", "", f"{p.max_concurrency_for_tpot_slo:,}")


# --- the standards mapping -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_an_api_key_alone_does_not_pass_the_metrics_endpoint(engine):
    """Neither engine's --api-key guards /metrics: vLLM 0.32 (entrypoints/serve/middleware/authenticate.py) checks
    the bearer token only on paths under GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere"); SGLang 0.5.23
    (srt/utils/auth.py) lets /health and /metrics through even with api_key set. A metrics endpoint stated as
    `auth: api_key` had passed PR.PS-01 ("every serving component states how it is authenticated")."""
    security = {**SECURED, "metrics_endpoint": {"auth": "api_key", "note": ""}}
    data = specsize.report(target=EIGHT_B, gpu="H100-SXM-80GB", engine=engine, simulate=False, security=security)
    control = _control(data, "PR.PS-01")
    assert control.status == "attention"
    assert "does not guard /metrics" in control.summary
    line = next(x for x in control.evidence if x.startswith("metrics endpoint"))
    assert "does not guard /metrics" in line
    # the same plan with /metrics behind a network policy passes; the API key still protects the inference endpoint
    fenced = {**SECURED, "metrics_endpoint": {"auth": "network_policy", "note": "Prometheus namespace only"}}
    data = specsize.report(target=EIGHT_B, gpu="H100-SXM-80GB", engine=engine, simulate=False, security=fenced)
    assert _control(data, "PR.PS-01").status == "pass"


def test_an_unprotected_component_still_fails_beside_an_api_key_on_metrics():
    security = {**SECURED, "metrics_endpoint": "api_key", "dashboard": "none"}
    data = specsize.report(target=EIGHT_B, gpu="H100-SXM-80GB", simulate=False, security=security)
    assert _control(data, "PR.PS-01").status == "fail"


def test_cis4_names_sglangs_flags_with_the_values_its_command_pins():
    """SGLang's launch_server has no --gpu-memory-utilization, --max-num-seqs, --block-size or speculative_config
    (python/sglang/srt/server_args.py: --mem-fraction-static, --max-running-requests, --page-size,
    --speculative-algorithm ...), and its --kv-cache-dtype takes fp8_e4m3, not fp8. The evidence had named vLLM's
    fields with the deployment's values and said "speculative_config pins method draft_model": a reviewer could
    find none of it in the emitted command."""
    data = specsize.report(engine="sglang", kv_cache_dtype="fp8", simulate=False)
    r = data.result
    command = next(c for c in r.commands if c.engine == "sglang")
    control = _control(data, "CIS-4")
    evidence = {line.split(" = ")[0]: line for line in control.evidence}
    expected = {"gpu_memory_utilization": "--mem-fraction-static 0.9", "max_model_len": "--context-length 32768",
                "max_num_seqs": "--max-running-requests 128", "max_num_batched_tokens": "--chunked-prefill-size 8192",
                "block_size": "--page-size 1", "kv_cache_dtype": "--kv-cache-dtype fp8_e4m3",
                "tensor_parallel_size": "--tp-size 4"}
    shell = " ".join(command.argv)
    for name, pinned in expected.items():
        assert pinned in evidence[name] and pinned in shell
    speculation = control.evidence[-1]
    assert "speculative_config" not in speculation
    for pinned in ("--speculative-algorithm STANDALONE", "--speculative-num-steps 4"):
        assert pinned in speculation and pinned in shell
    # vLLM's evidence is unchanged: its flags are the fields' names, its values the command's
    vllm = _control(specsize.report(simulate=False), "CIS-4")
    assert "gpu_memory_utilization = 0.9 (set in the deployment)" in vllm.evidence
    assert vllm.evidence[-1] == "enforce_eager = False; speculative_config pins method draft_model, k = 4"


def test_sc5_says_its_concurrency_is_one_replicas():
    """The embedded default (24 concurrent requests, burst 1.5) on 8 GPUs at TP 4 is 2 replicas: the envelope is one
    replica's, 24 / 2 = 12 expected and 24 x 1.5 / 2 = 18 at the burst. SC-5's evidence and the envelope table had
    said "12 concurrent" beside a workload of 24 without saying per what."""
    data = specsize.report(gpus=8, simulate=False)
    sc5 = _control(data, "SC-5")
    assert sc5.evidence[0].startswith("expected demand: 12 concurrent p50 requests per replica (of 2, 24 in all)")
    assert sc5.evidence[1].startswith("burst demand: 18 concurrent p99 requests per replica ")
    from specsize.reports import rows

    assert [row[2] for row in rows.envelope_rows(data.result)] == ["18 per replica", "12 per replica"]
    single = specsize.report(simulate=False)
    assert _control(single, "SC-5").evidence[0].startswith("expected demand: 24 concurrent p50 requests need")


# --- the web UI's memory figure ---------------------------------------------------------------------------------------

def test_the_memory_figure_holds_a_stack_taller_than_the_card():
    """Llama-3.1-70B in bf16 on one H100 (79.19 GiB as the driver reports it): 131.45 GiB of weights alone. The light
    SVG had scaled its axis to the card (100 GiB) and clipped every term at 105 GiB, so the weights were drawn
    105 GiB high and the activation peak, non-torch memory and CUDA graphs above them 0 high."""
    from specsize.reports import svg

    data = specsize.report(target="meta-llama/Llama-3.1-70B-Instruct", gpu="H100-SXM-80GB", tp=1, simulate=False)
    m = data.result.memory
    stack = (m.weights_target_bytes + m.activation_peak_bytes + m.non_torch_bytes + m.cuda_graph_bytes) / GiB
    assert stack > m.total_bytes / GiB
    figure = svg.gpu_memory(data.gpu_bars)
    ticks = [float(t) for t in re.findall(r'class="l">([0-9.]+)</text>', figure)]
    top = max(ticks)
    assert top >= stack and top == 200  # the smallest 1 / 2 / 2.5 / 5 x 10^n at or above 135.8
    plot_h = svg.H - svg.TOP - svg.BOTTOM
    heights = {term: float(h) for h, term in
               re.findall(r'height="([0-9.]+)" fill="[^"]+" data-term="([^"]+)"', figure)}
    for term, value in (("target weights", m.weights_target_bytes), ("activation peak", m.activation_peak_bytes),
                        ("CUDA graphs", m.cuda_graph_bytes)):
        assert heights[term] == pytest.approx(value / GiB / top * plot_h, abs=0.06)
    # the table's last row: 79.19 - 135.75 = -56.56 GiB is no memory "the card has left"
    from specsize.reports import rows

    free = rows.breakdown(data.result)[-1]
    assert free[1] == f"{m.total_bytes / GiB - stack:,.2f}" == "-56.56"
    assert free[2] == "negative: the terms above exceed the card's memory"


# --- the sweep's summary ----------------------------------------------------------------------------------------------

STUDY = """name: summary
base:
  target: meta-llama/Llama-3.1-8B-Instruct
  headroom: 0.2
axes:
  gpu: [H100-SXM-80GB, L40S-48GB]
"""


def _row(key: str, gpu: str, headroom: float, verdict: str, **more) -> dict:
    return {"key": key, "index": 0, "seed": 0, "status": "ok", "error": None, "gpu": gpu, "headroom": 0.2,
            "verdict": verdict, "speculative": False, "headroom_worst_case": headroom, "gpus_per_instance": 1,
            **more}


def test_the_sweep_summary_writes_headroom_as_a_percentage_that_reads_as_its_verdict(tmp_path):
    """A thin cell 0.04% under a 20% policy (0.1996) had read "0.2" in "Headroom by GPU type", and a cell short by
    115% read "-1.15" with no unit: the rest of specsize writes headroom as a percentage that reads as its verdict
    (core.envelope.headroom_text: "19.96%", "-115.0%"); an SLO attainment 0.98996 under the 99% the fleet needs had
    read "0.99"."""
    from specsize.inputs.study import read_study
    from specsize.reports.sweep import render_html

    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    study = read_study(path)
    rows = [_row("a" * 16, "H100-SXM-80GB", 0.1996, "thin"), _row("b" * 16, "H100-SXM-80GB", -1.15, "does_not_fit"),
            _row("c" * 16, "L40S-48GB", 0.5, "fits", cost_per_mtok=1.0, simulated=True, nospec_slo_attainment=0.98996)]
    page = render_html(study, rows, ["gpu"], None)
    by_gpu = re.search(r"Headroom by GPU type.*?</table>", page, re.S).group(0)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", by_gpu)
    assert cells[:5] == ["H100-SXM-80GB", "2", "-115.0%", "-47.5%", "19.96%"]  # median (0.1996 - 1.15) / 2 = -0.4752
    assert ">0.2<" not in by_gpu and "-1.15" not in by_gpu
    front = re.search(r"Pareto front.*?</table>", page, re.S).group(0)
    assert "98.996%" in front and ">0.99<" not in front


# --- the terminal table: lines a user copies ----------------------------------------------------------------------------

def test_the_terminal_plan_prints_the_deploy_command_whole(capsys):
    """rich wrapped every line at 110 columns, inside words: the embedded default's command broke in its speculative
    config as '"draft_tensor_p' / 'arallel_size":4}', so the command copied from the terminal did not parse. The line
    printed is the one `plan --emit vllm` writes, whole."""
    code, emitted, _ = run(capsys, "plan", "--emit", "vllm")
    assert code == 0
    shell = emitted.splitlines()[1]
    assert shell.startswith("vllm serve ") and '"draft_tensor_parallel_size":4}' in shell
    code, out, _ = run(capsys, "plan")
    assert code == 0
    assert f"  {shell}" in out.splitlines()
    breaks_first = specsize.plan().verdict.breaks_first
    assert f"What breaks first: {breaks_first}" in out.splitlines()


def test_sglangs_budget_row_names_the_memory_its_fraction_is_of():
    """SGLang sizes with --mem-fraction-static of the memory free before loading (python/sglang/srt/model_executor/
    model_runner.py: total memory less what is in use once the CUDA context is up), not of the card. With 4 GiB held
    by another process the embedded default on 4 x H100: 79.19 - 4 - 2.19 (the CUDA context, specsize's non-torch
    term) = 73.00 GiB free, x 0.9 = 65.70 GiB. The row had read "budget (x 0.9) 65.70 ... gpu_memory_utilization"
    under 79.19 GiB of GPU memory, a product that does not hold."""
    from specsize.reports import rows

    r = specsize.plan(engine="sglang", other_processes_gib=4)
    m = r.memory
    free_before = m.total_bytes - 4 * GiB - m.non_torch_bytes
    assert m.budget_bytes == pytest.approx(0.9 * free_before, abs=1)
    budget = rows.breakdown(r)[1]
    assert budget == ("budget (x 0.9)", f"{0.9 * free_before / GiB:,.2f}",
                      f"mem_fraction_static x {free_before / GiB:,.2f} GiB free before loading")
    assert budget[1:] == ("65.70", "mem_fraction_static x 73.00 GiB free before loading")
    # vLLM's budget is the card's: 0.9 x 79.19
    assert rows.breakdown(specsize.plan())[1] == ("budget (x 0.9)", "71.27", "gpu_memory_utilization")


def test_a_plan_the_simulation_made_thin_does_not_claim_too_little_headroom():
    """Llama-3.1-8B on one H100 at 8 concurrent requests (burst 1.5: 12 at the p99 shape, 8,000 + 1,200 tokens):
    12 x ceil(9,200 / 16) x 16 tokens x 131,072 B (32 layers x 8 KV heads x 128 x K and V x 2 bytes) = 13.48 GiB of a
    53.41 GiB pool, headroom 74.8% against a 20% policy. A 30 ms TTFT SLO that no request meets makes `plan --simulate`
    thin, and SC-5 had summarised "capacity holds the burst, but with less headroom than the policy requires", the
    headline "THIN: worst-case headroom 74.8% (policy 20%)" without saying why."""
    from specsize.reports import rows

    data = specsize.report(target=EIGHT_B, gpu="H100-SXM-80GB", max_model_len=16384, concurrency=8, ttft_slo_ms=30,
                           duration=20, gpu_memory_utilization=0.9)
    r = data.result
    demand = 12 * -(-9200 // 16) * 16 * 131072
    assert r.verdict.worst_case.demand_bytes == demand
    assert demand / GiB == pytest.approx(13.48, abs=0.005)
    assert r.verdict.worst_case.headroom_fraction >= 0.2 and r.verdict.verdict == "thin"
    sc5 = _control(data, "SC-5")
    assert sc5.status == "attention"
    assert "less headroom than the policy" not in sc5.summary and "simulated burst is not sustained" in sc5.summary
    assert rows.headline(r) == "THIN: worst-case headroom 74.8% (policy 20%); the simulated burst is not sustained"
    # a plan the envelope itself makes thin keeps its sentence
    thin = specsize.report(duration=20)
    assert thin.result.verdict.worst_case.headroom_fraction < 0.2
    assert _control(thin, "SC-5").summary == "capacity holds the burst, but with less headroom than the policy requires"
    assert rows.headline(thin.result) == "THIN: worst-case headroom 13.3% (policy 20%)"


def test_the_sweep_summary_writes_the_attainment_asked_as_it_was_set(tmp_path):
    """`slo_attainment: 0.995` had read "at least 100% of requests" (format '.0%'), and a cell at 99.49% beside it
    "99.5%", as if it met the 99.5% asked."""
    from specsize.inputs.study import read_study
    from specsize.reports.sweep import render_html

    path = tmp_path / "study.yaml"
    path.write_text(STUDY + "slo_attainment: 0.995\n")
    study = read_study(path)
    rows = [_row("c" * 16, "L40S-48GB", 0.5, "fits", cost_per_mtok=1.0, simulated=True, nospec_slo_attainment=0.9949)]
    page = render_html(study, rows, ["gpu"], None)
    assert "at least 99.5% of requests within the SLO" in page
    front = re.search(r"Pareto front.*?</table>", page, re.S).group(0)
    assert ">99.49%<" in front


def test_stops_payings_ratios_read_on_their_side_of_1():
    """The two rungs around the crossing: 26.25 / 26.35 s = 0.9962 (speculation still pays) and 27.44 / 27.36 s =
    1.0029 (it no longer does) had both printed "1.00"; 18 / 20 s = 0.90 keeps two decimals."""
    from specsize.planner.load_sweep import LoadPoint, LoadSweep
    from specsize.reports import load_sweep

    def point(rate, spec, plain):
        return LoadPoint(rate, spec, plain, 0.02, 0.03, True, True)

    sweep = LoadSweep(points=(point(5.0, 18.0, 20.0), point(10.5, 26.25, 26.35), point(11.4, 27.44, 27.36)),
                      stops_paying_req_s=11.0, centre_req_s=5.0, centre_source="rate")
    table = load_sweep.render(sweep, "text").splitlines()
    ratios = {line.split()[0]: line.split()[3] for line in table if re.match(r"\s*[0-9.]+\s", line)}
    assert ratios == {"5": "0.90", "10.5": "0.996", "11.4": "1.003"}


@pytest.mark.parametrize("text", ["/models/__foo__/config.json", "latency ~2 s, at most ~5 s", "x__y__z",
                                  "~~struck~~", "max_num_seqs and kv_cache_dtype=fp8", "~41 GiB per node"])
def test_markdown_user_text_renders_as_itself(text):
    """A model path "/models/__foo__/" had rendered "/models/_<em>foo</em>_/" (the escaped outer underscores left the
    inner pair a delimiter run), and two tildes in a note struck through what lay between them (GFM strikethrough).
    Rendered by markdown-it (CommonMark with GFM's tables and strikethrough), the text is itself again."""
    from html import escape

    from markdown_it import MarkdownIt

    from specsize.reports import markdown

    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    assert md.render(markdown.inline(text)).strip() == f"<p>{escape(text, quote=False)}</p>"
    assert markdown.inline("max_num_seqs") == "max_num_seqs" and markdown.inline("~41 GiB") == "~41 GiB"


def test_check_lives_text_shows_a_nearly_full_pool_as_not_full():
    """vllm:kv_cache_usage_perc 0.996 (1 means 100 percent) had printed "usage 100%" beside the JSON's 0.996, a pool
    that reads full (where the engine preempts) while 0.4% of it is free."""
    from specsize.planner.live import LiveCheck, Observed
    from specsize.reports import live

    check = LiveCheck(observed=Observed(kv_cache_tokens=32_000, kv_usage_fraction=0.996, preemptions=0),
                      planned_verdict="fits", verdict_now="fits")
    assert "usage 99.6%," in live.render(check, "text")
