"""Hunt 57, edges: large and hand-written request files (traces, lengths files), images beside a lengths file, and a
verdict and warnings that read as their numbers - each expected value worked out by hand."""

import json
import math
import tracemalloc
from pathlib import Path

import pytest

import specsize
from helpers import run_cli as run
from specsize import api
from specsize.catalog import traces
from specsize.catalog.traces import read_trace, read_trace_lengths
from specsize.core.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llama8b-eagle3-h100.yaml"
GiB, MiB = 1 << 30, 1 << 20


# --- bug C: a trace of more requests than are simulated is refused before its rows are built ------------------------

def test_a_trace_past_two_million_requests_is_refused_before_its_rows_are_built(tmp_path):
    """2,000,001 requests of "0,1,1" (6 bytes a line, 12 MB): past MAX_REQUESTS (2,000,000) by one. Building their
    rows (a dict of three strings each, about 400 B) takes some 800 MB - at 250 MiB, 44 million rows, a MemoryError
    (exit 4). Counting the lines first refuses it holding the file's text alone: the read's buffer of the field's
    256 MiB limit (catalog.files.read_text reads limit + 1 bytes; pages past the file's 12 MB are never touched) and
    12 MB of text, under 256 + 64 MiB at the peak where the rows alone would add 800 MB."""
    path = tmp_path / "big.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "0,1,1\n" * 2_000_001)
    tracemalloc.start()
    try:
        with pytest.raises(SpecError) as err:
            read_trace(path, max_requests=2_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.value.field == "trace" and "2,000,000" in str(err.value)
    assert peak < 320 * MiB, peak


def test_the_cli_refuses_a_large_trace_and_lengths_file_in_one_line(tmp_path, capsys):
    big = tmp_path / "big.jsonl"
    big.write_text('{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n' * 2_000_002)
    base = ("simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--no-compare")
    code, out, err = run(capsys, *base, "--trace", big)
    assert code == 2 and out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "trace" in err and "at most 2,000,000 requests" in err
    code, out, err = run(capsys, *base, "--lengths-file", big, "--rate", 1, "--duration", 10)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "lengths_file" in err and "at most 2,000,000 requests" in err


def test_the_line_count_is_of_requests_not_of_line_breaks(tmp_path, monkeypatch):
    """The limit counts requests: 3 requests (and a header) among blank lines pass a limit of 3; a fourth request is
    refused, by the line count for a CSV (5 non-empty lines > 3 + a header) before a row is built, and once parsed
    for a JSONL of 4 lines (4 lines may be a header and 3 requests)."""
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("arrival_s,prompt_tokens,output_tokens\n\n\n0,1,1\n\n1,2,2\n\n\n\n2,3,3\n\n")
    assert read_trace(csv_path, max_requests=3).prompt_tokens == [1, 2, 3]
    csv_path.write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n1,2,2\n2,3,3\n3,4,4\n")

    def no_rows(*_args, **_kwargs):
        raise AssertionError("rows built for a file past the limit")

    with monkeypatch.context() as patch:
        patch.setattr(traces, "_rows", no_rows)
        with pytest.raises(SpecError, match="more than 3 requests"):
            read_trace(csv_path, max_requests=3)
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text("".join(f'{{"prompt_tokens": {i}, "output_tokens": 1}}\n' for i in range(1, 5)))
    with pytest.raises(SpecError, match="more than 3 requests") as err:
        read_trace_lengths(jsonl, max_requests=3)
    assert err.value.field == "lengths_file"
    assert read_trace_lengths(jsonl, max_requests=4).prompt_tokens == [1, 2, 3, 4]


def test_a_csv_header_with_spaces_after_the_commas_is_read(tmp_path):
    """`arrival_s, prompt_tokens, output_tokens` (as a hand or pandas' `sep=", "` writes it) had read " prompt_tokens"
    and ended in "no prompt tokens column"; read as CSV with the spaces after each comma skipped, as a samples file's
    header is, in its rows too (`1.5, "200", 20`)."""
    path = tmp_path / "spaced.csv"
    path.write_text('arrival_s, prompt_tokens, output_tokens\n2.5, 100, 10\n4, "200", 20\n')
    trace = read_trace(path)
    assert trace.arrival_s == [0.0, 1.5] and trace.prompt_tokens == [100, 200] and trace.output_tokens == [10, 20]
    lengths = read_trace_lengths(path)
    assert lengths.prompt_tokens == [100, 200] and lengths.output_tokens == [10, 20]
    path.write_text("arrival_s, prompt_tokens, prompt_tokens\n0, 1, 1\n")  # a name twice, spaces or not
    with pytest.raises(SpecError, match="names column 'prompt_tokens' twice"):
        read_trace(path)


def test_an_error_names_the_line_of_the_file_blank_lines_counted(tmp_path):
    """The bad request is on line 6 of the file (lines 2, 4 and 5 are blank): it had been reported as line 3, the
    third non-blank line; a JSONL's on line 4, where the invalid JSON line had named no line at all."""
    path = tmp_path / "gaps.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n\n0,100,10\n\n\n1,abc,10\n")
    with pytest.raises(SpecError, match=r"gaps.csv line 6: prompt tokens 'abc'"):
        read_trace(path)
    path = tmp_path / "gaps.jsonl"
    path.write_text('\n{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 10}\n\n'
                    '{"arrival_s": 1, "prompt_tokens": 0, "output_tokens": 10}\n')
    with pytest.raises(SpecError, match=r"gaps.jsonl line 4: prompt tokens must be"):
        read_trace_lengths(path)
    path.write_text('{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 10}\n\n\n{"arrival_s": 1,\n')
    with pytest.raises(SpecError, match=r"gaps.jsonl line 4: invalid JSON"):
        read_trace(path)
    # a quoted cell spanning two lines: the next request starts on the line after it
    path = tmp_path / "quoted.csv"
    path.write_text('arrival_s,prompt_tokens,output_tokens,note\n0,100,10,"a\nb"\n1,xyz,10,c\n')
    with pytest.raises(SpecError, match=r"quoted.csv line 4: prompt tokens 'xyz'"):
        read_trace(path)


# --- bug D: a lengths file's prompts carry the images a deployment file sets ---------------------------------------

DEPLOYMENT = """target: google/gemma-3-4b-it
gpu: H100-SXM-80GB
max_model_len: 8192
workload:
  prompt_tokens: {p50: 800, p95: 1000, p99: 1200, max: 1500}
  output_tokens: {p50: 100, p95: 200, p99: 300, max: 400}
  concurrency: 4
  images_per_request: 2
"""


def test_a_lengths_files_prompts_carry_the_deployments_images(tmp_path, capsys):
    """Gemma-3 takes 256 tokens per image (its mm_tokens_per_image): 2 images add 512 tokens to every prompt, as they
    do to the envelope's and to generated prompts. The file's prompts 100 and 300 are simulated as 612 and 812, a mean
    of (612 + 812) / 2 = 712 (they had been 100 and 300, a mean of 200)."""
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOYMENT)
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("prompt_tokens,output_tokens\n100,50\n300,50\n")
    report = api.simulate(specsize.load_request(str(deploy), lengths_file=str(lengths), rate=1, duration=10,
                                                no_compare=True, seed=1))
    values = report.scenario.prompt.values
    assert sorted(values) == [612, 812] and sum(values) / len(values) == 712
    assert sorted(report.scenario.output.values) == [50, 50]
    # the simulated requests are the longer ones: 7,600 + 512 + 100 = 8,212 tokens pass max_model_len 8,192 no more
    lengths.write_text("prompt_tokens,output_tokens\n7600,100\n")
    with pytest.raises(SpecError) as err:
        api.simulate(specsize.load_request(str(deploy), lengths_file=str(lengths), rate=1, duration=10,
                                           no_compare=True))
    assert err.value.field == "lengths_file"
    # and no note says the images go unread any more (the other notes stay: --prompt-tokens beside the file)
    lengths.write_text("prompt_tokens,output_tokens\n100,50\n300,50\n")
    code, out, err_text = run(capsys, "simulate", deploy, "--lengths-file", lengths, "--rate", 1, "--duration", 10,
                              "--no-compare", "--images-per-request", 2, "--prompt-tokens", "500", "--format", "json")
    assert code == 0, err_text
    assert "images_per_request" not in err_text and "image" not in out.split('"notes"')[-1]
    assert "prompt_tokens not used by simulate" in err_text + out


# --- bug 4: a KV pool larger than the card, and an amount too small for two decimals of GiB ------------------------

def test_a_kv_pool_larger_than_the_card_does_not_fit_with_no_headroom(capsys):
    """vLLM 0.32 takes --kv-cache-memory-bytes as it is (v1/worker/gpu_worker.py determine_available_memory returns it
    after the profile run, without checking it against the card) and runs out of memory allocating the pool
    (v1/worker/utils.py allocate_kv_cache): the engine never serves, so the verdict is DOES NOT FIT with no headroom -
    it had read "DOES NOT FIT: worst-case headroom 100.0%" (JSON 1.0), 1 - 38.82 GiB of demand / 93,132 GiB asked."""
    r = specsize.plan(specsize.load_request(str(EXAMPLE), kv_cache_memory_bytes=10**14))
    assert r.verdict.verdict == "does_not_fit"
    assert r.verdict.worst_case.headroom_fraction == -math.inf == r.verdict.expected.headroom_fraction
    assert f"{10**14 / GiB:.2f} GiB of KV cache" in r.verdict.breaks_first  # 93132.26 GiB
    code, out, err = run(capsys, "plan", EXAMPLE, "--kv-cache-memory-bytes", 10**14, "--format", "json")
    data = json.loads(out)
    assert data["verdict"] == "does_not_fit" and data["headroom_fraction"] is None
    code, out, err = run(capsys, "plan", EXAMPLE, "--kv-cache-memory-bytes", 10**14)
    verdict_line = next(line for line in out.splitlines() if line.startswith("DOES NOT FIT"))
    assert "100.0%" not in verdict_line and "%" not in verdict_line.split("(")[0]


def test_a_kv_pool_the_card_holds_keeps_its_headroom():
    """50 GiB of the 60.52 GiB left: the engine starts. Per GPU a token holds 32 target layers x 8 KV heads x 128 x 2
    (K and V) x 1 B (fp8) = 65,536 B and the EAGLE-3 head's one layer 2,048 B: 67,584 B, 1,081,344 B a 16-token
    block. 50 GiB = 53,687,091,200 B hold 49,648 blocks. The worst case, 44 x 2 = 88 p99 requests of 6,000 + 1,000 +
    3 lookahead = 7,003 tokens, ceil(7,003 / 16) = 438 blocks each, needs 88 x 438 = 38,544 blocks:
    headroom 1 - 38,544 / 49,648 = 22.37%, above the 20% policy."""
    r = specsize.plan(specsize.load_request(str(EXAMPLE), kv_cache_memory_bytes=50 * GiB))
    assert 50 * GiB // 1_081_344 == 49_648
    assert r.verdict.worst_case.headroom_fraction == pytest.approx(1 - 38_544 / 49_648, abs=1e-4)
    assert r.verdict.verdict == "fits"


def test_the_unprofiled_logits_warning_shows_its_amount_in_mib():
    """vLLM 0.32's profile, Llama-3.1-8B (vocabulary 128,256: a logits row of 513,024 fp32 bytes), k = 3, 256
    sequences: a verification step scores min(256 x 4, 8,192) = 1,024 rows; the profiling pass covered 256 x (1 + 11 /
    3.68) (11 row-sets: 0.5 + 3.5 x 3 drafted), 3.68 row-sets each: (1,024 x 3.68 - 256 x 3.68 - 256 x 11) x 513,024
    = 10.24 x 513,024 = 5,253,365 B = 5.0 MiB. Two decimals of GiB had shown "0.00 GiB"; the 8% of 79.19 GiB
    outside the budget (vLLM's default utilization 0.92 from 0.20) stays "6.34 GiB"."""
    r = specsize.plan(specsize.load_request(str(EXAMPLE)))
    assert r.memory.unprofiled_runtime_bytes == int(10.24 * 513_024)
    warning = next(w for w in r.warnings if "of logits" in w)
    assert "needs 5.0 MiB of logits" in warning and "the 6.34 GiB outside the budget" in warning
    assert "0.00 GiB" not in " ".join(r.warnings)


def test_a_lengths_files_arrival_column_is_dropped_not_read_twice(tmp_path):
    """A lengths file's arrivals are never read (the rate sets them); its requests are numbered 0, 1, ... in an
    arrival_time of their own. An arrival_s column of 2.5 and 4 beside that number had been refused as "arrival_time and
    arrival_s give two arrival time" (only arrivals of 0, 1, 2, ... had passed)."""
    path = tmp_path / "lengths.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n2.5,100,10\n4,200,20\n")
    lengths = read_trace_lengths(path)
    assert lengths.prompt_tokens == [100, 200] and lengths.output_tokens == [10, 20]
