"""Fuzz pass 9: inputs a demanding platform engineer gives that had ended in a silently wrong number or verdict, each
with the value worked out by hand."""

import json
from pathlib import Path

import pytest

from helpers import run_cli as run

ROOT = Path(__file__).resolve().parent.parent
EAGLE3 = ROOT / "examples" / "llama8b-eagle3-h100.yaml"


# --- simulate settings its scenario does not read ---------------------------------------------------------------------

def _trace(tmp_path: Path) -> Path:
    """Three requests, 0, 2 and 4 s: a trace 4 s long."""
    path = tmp_path / "t.csv"
    path.write_text("arrival_time,prompt_tokens,output_tokens\n0,100,20\n2,200,30\n4,300,40\n")
    return path


def _sim(capsys, *args):
    code, out, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", *args, "--format", "json")
    return code, (json.loads(out)["sim"] if out else None), err


@pytest.mark.parametrize("scenario,why", [
    (["--trace"], "a trace sets"),
    (["--client-concurrency", "4", "--num-requests", "8", "--lengths-file"], "a closed loop sends"),
])
def test_a_duration_the_scenario_does_not_run_is_refused(tmp_path, capsys, scenario, why):
    """`simulate --trace T --duration 60` replayed T's 3 requests over its own 4 s and echoed duration_s 60; a closed
    loop of --num-requests 8 ran its 8 requests to the end and echoed duration_s 5. Refused now, as `plan --duration`
    is (exit 2, one line, nothing on stdout)."""
    code, sim, err = _sim(capsys, *scenario, _trace(tmp_path), "--duration", "60")
    assert code == 2 and sim is None
    assert err.startswith(f"specsize: error: duration: is not read by simulate here: {why}") and err.count("\n") == 1


@pytest.mark.parametrize("flags,named", [
    (["--concurrency", "64"], "concurrency"),
    (["--burst-factor", "3", "--concurrency", "64"], "concurrency, burst_factor"),
    (["--prompt-tokens", "p50=100,p99=200", "--output-tokens", "5"], "prompt_tokens, output_tokens"),
])
def test_a_traces_run_names_the_workload_flags_it_does_not_read(tmp_path, capsys, flags, named):
    """A --concurrency, --burst-factor or lengths given beside a trace changed nothing (the same JSON, byte for byte,
    as without them). They stay (plan reads them, as it reads a deployment file's workload); a note names them, on
    stderr and in the JSON's notes, and the run is the trace's: its 3 requests over its 4 s."""
    code, sim, err = _sim(capsys, "--trace", _trace(tmp_path), *flags)
    assert code == 0, err
    note = f"{named} not used by simulate: a trace sets the arrivals, their number and lengths itself"
    assert note in sim["notes"] and f"specsize: note: {note}" in err
    assert sim["requests"] == sim["completed"] == 3 and sim["scenario_detail"]["duration_s"] == 4.0


def test_a_trace_alone_has_no_such_note_and_takes_a_seed(tmp_path, capsys):
    code, sim, err = _sim(capsys, "--trace", _trace(tmp_path), "--seed", "3")
    assert code == 0, err
    assert not any("not used" in note for note in sim["notes"]) and sim["requests"] == 3


def test_a_closed_loop_names_the_burst_it_does_not_run_and_reads_its_samples(tmp_path, capsys):
    """--burst-factor 3 left the 4 clients as they were: named. The lengths are the workload's: a samples file of one
    request of 100 + 10 tokens gives 8 requests of exactly 100 + 10."""
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"prompt_tokens": 100, "output_tokens": 10}\n')
    code, sim, err = _sim(capsys, "--client-concurrency", "4", "--num-requests", "8", "--samples-file", samples,
                          "--burst-factor", "3")
    assert code == 0, err
    assert sim["notes"] == ["burst_factor not used by simulate: a closed loop sends --num-requests requests, each "
                            "when an answer comes back"]
    assert sim["requests"] == sim["completed"] == 8
    detail = sim["scenario_detail"]
    assert (detail["prompt_tokens"]["kind"], detail["prompt_tokens"]["median"]) == ("fixed", 100)
    assert (detail["output_tokens"]["kind"], detail["output_tokens"]["median"]) == ("fixed", 10)


def test_a_rate_names_the_concurrency_it_replaces(capsys):
    """--rate sets the arrivals; --concurrency only derives a rate by Little's law where none is given:
    `simulate --rate 5 --concurrency 400` ran 5 req/s, the same JSON as without it. The example file's own
    concurrency (44) is the deployment's description: no note for it."""
    code, sim, err = _sim(capsys, "--rate", "5", "--concurrency", "400", "--duration", "5")
    assert code in (0, 1), err
    assert sim["scenario_detail"]["rate_req_s"] == 5.0
    assert sim["notes"] == ["concurrency not used by simulate: --rate sets the arrival rate (concurrency derives one "
                            "only without it)"]
    code, sim, err = _sim(capsys, "--rate", "5", "--duration", "5")
    assert code in (0, 1) and not sim["notes"], err


# --- images beside a trace or a lengths file --------------------------------------------------------------------------

VL = ["--target", "Qwen/Qwen2.5-VL-7B-Instruct", "--gpu", "H100-SXM-80GB", "--max-model-len", "32768"]


def test_generated_prompts_take_the_images(capsys):
    """The reference: prompts p50 800 / p99 2000 with 2 images of 1,000 tokens are p50 2,800 / p99 4,000 tokens
    (800 + 2 x 1,000 and 2,000 + 2 x 1,000)."""
    code, out, err = run(capsys, "simulate", *VL, "--prompt-tokens", "p50=800,p99=2000", "--output-tokens",
                         "p50=10,p99=20", "--rate", "1", "--duration", "5", "--images-per-request", "2",
                         "--image-tokens", "1000", "--format", "json")
    assert code in (0, 1), err
    prompt = json.loads(out)["sim"]["scenario_detail"]["prompt_tokens"]
    assert (prompt["median"], prompt["p99"]) == (2800, 4000)


@pytest.mark.parametrize("scenario,note", [
    (["--trace"], "images_per_request, image_tokens not used by simulate: a trace sets"),
    # a lengths file's prompts now take the images (tests/test_hunt_57_edges.py): no such note beside it
])
def test_images_beside_lengths_written_in_a_file_are_named_as_not_added(tmp_path, capsys, scenario, note):
    """A trace's or a lengths file's prompts ran as the file wrote them: `--images-per-request 2 --image-tokens 1000`
    beside them gave the same JSON, byte for byte, where generated prompts grow by 2,000 tokens each. Said now."""
    code, out, err = run(capsys, "simulate", *VL, *scenario, _trace(tmp_path), "--images-per-request", "2",
                         "--image-tokens", "1000", "--format", "json")
    assert code in (0, 1), err
    assert any(n.startswith(note) for n in json.loads(out)["sim"]["notes"])


# --- a samples file's CSV header as spreadsheets and pandas write it -------------------------------------------------

@pytest.mark.parametrize("text", [
    '"prompt_tokens","output_tokens"\r\n"100","10"\r\n"300","30"\r\n"200","20"\r\n',  # pandas QUOTE_ALL, CRLF
    "prompt_tokens, output_tokens\n100, 10\n300, 30\n200, 20\n",  # a space after each comma
    '\ufeff"prompt_tokens", "output_tokens"\r\n100,10\r\n  \r\n300 ,30\r\n200, 20\r\n\r\n',  # BOM, blank rows
])
def test_a_samples_csv_header_quoted_or_spaced_is_read(tmp_path, capsys, text):
    """The quoted header had read as "holds bare token counts", the spaced one as requests with no output_tokens. By
    hand: prompts 100, 300, 200 and outputs 10, 30, 20: at p50 the envelope's request is 200 + 20 tokens."""
    path = tmp_path / "s.csv"
    path.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, "plan", EAGLE3, "--samples-file", path, "--percentile", "p50", "--format", "json")
    assert code == 0, err
    envelope = json.loads(out)["envelope"]
    assert (envelope["prompt_tokens"], envelope["output_tokens"]) == (200, 20)


def test_a_column_whose_name_starts_with_the_one_read_is_not_it(tmp_path, capsys):
    """`prompt_tokens_total` held `prompt_tokens` as a substring: the file was taken for a CSV naming the column and
    refused as a request without it. Now the header is said to have no such column."""
    path = tmp_path / "s.csv"
    path.write_text("prompt_tokens_total,output_tokens\n100,10\n")
    code, out, err = run(capsys, "plan", EAGLE3, "--samples-file", path)
    assert code == 2 and out == ""
    assert "its header has no 'prompt_tokens' column" in err


def test_an_acceptance_flag_beside_a_traces_acceptance_column_is_named(tmp_path, capsys):
    """The trace's acceptance_rate column (0.5) gives each request its own: `--acceptance-rate 0.9` beside it ran at
    0.5, the same run as without it, without a word. Named now, on stderr and in the notes."""
    path = tmp_path / "a.csv"
    path.write_text("arrival_time,prompt_tokens,output_tokens,acceptance_rate\n0,100,50,0.5\n1,200,60,0.5\n")
    code, plain, err = run(capsys, "simulate", EAGLE3, "--trace", path, "--format", "json")
    assert code == 0, err
    code, given, err = run(capsys, "simulate", EAGLE3, "--trace", path, "--acceptance-rate", "0.9",
                           "--acceptance-spread", "0.1", "--format", "json")
    plain, given = json.loads(plain)["sim"], json.loads(given)["sim"]
    assert code == 0, err
    assert given["tpot_s"] == plain["tpot_s"] and plain["notes"] == []
    assert given["notes"] == ["acceptance_rate, acceptance_spread not used by simulate: the trace's acceptance_rate "
                              "column gives each request its own"]


# --- a samples file of tens of millions of requests ------------------------------------------------------------------

def test_a_samples_file_past_two_million_requests_is_refused_before_it_is_read(tmp_path, capsys):
    """A 250 MiB samples file of 65,536,000 requests (under the 256 MiB file limit) had taken `plan` 4 min 11 s and
    6.2 GiB of memory on the 2-core workplace machine: an out-of-memory kill on a smaller host. Its percentiles are all
    that is read: at most 2,000,000 requests, refused by a count of lines before anything is parsed (the extra line
    here is no request at all: it is never read)."""
    path = tmp_path / "s.csv"
    path.write_text("prompt_tokens,output_tokens\n" + "100,10\n" * 2_000_000 + "not a request\n")
    code, out, err = run(capsys, "plan", EAGLE3, "--samples-file", path, "--format", "json")
    assert code == 2 and out == ""
    assert err.startswith("specsize: error: samples_file: ") and "holds more than 2,000,000 requests" in err


def test_a_line_of_more_than_two_million_counts_is_refused(tmp_path, capsys):
    path = tmp_path / "p.txt"
    path.write_text(",".join(["5"] * 2_000_001))
    code, out, err = run(capsys, "plan", EAGLE3, "--prompt-tokens", f"@{path}", "--format", "json")
    assert code == 2 and out == ""
    assert err.startswith("specsize: error: prompt_tokens: ") and "holds more than 2,000,000 token counts" in err


def test_a_samples_file_within_the_limit_reads_every_request(tmp_path, capsys):
    """1,000 requests of 100 + 10 and one of 5,000 + 900: at max the envelope's request is 5,000 + 900 tokens."""
    path = tmp_path / "s.csv"
    path.write_text("prompt_tokens,output_tokens\n" + "100,10\n" * 1000 + "5000,900\n")
    code, out, err = run(capsys, "plan", EAGLE3, "--samples-file", path, "--percentile", "max", "--format", "json")
    assert code == 0, err
    envelope = json.loads(out)["envelope"]
    assert (envelope["prompt_tokens"], envelope["output_tokens"]) == (5000, 900)


# --- $SPECSIZE_STORE naming the service's PostgreSQL database ---------------------------------------------------------

@pytest.mark.parametrize("argv", [["calibrations"], ["plan", EAGLE3, "--acceptance-from-store", "chat"]])
def test_specsize_store_takes_the_postgresql_url_store_takes(monkeypatch, capsys, argv):
    """`--store postgresql://...` opens the service's PostgreSQL store; the same URL in $SPECSIZE_STORE had been read
    as a file path: "store: postgresql:/nobody@127.0.0.1:1/x does not exist". Now it is the PostgreSQL store, here one
    that nothing answers for (port 1): the same one-line error as --store gives."""
    monkeypatch.setenv("SPECSIZE_STORE", "postgresql://nobody@127.0.0.1:1/x")
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("specsize: error: store: cannot open the PostgreSQL store"), err
    monkeypatch.delenv("SPECSIZE_STORE")
    code, _, flag_err = run(capsys, *argv, "--store", "postgresql://nobody@127.0.0.1:1/x")
    assert code == 2 and flag_err == err


@pytest.mark.parametrize("command", ["simulate", "stops-paying"])
def test_a_percentile_given_to_a_simulation_is_named_as_not_used(capsys, command):
    """--percentile picks the envelope's request shape (plan); a simulation draws from the whole distribution:
    `simulate --percentile max` gave the same JSON as p50, byte for byte, without a word."""
    code, out, err = run(capsys, command, EAGLE3, "--acceptance-rate", "0.7", "--rate", "4", "--duration", "10",
                         "--percentile", "max", "--format", "json")
    assert code in (0, 1), err
    assert f"specsize: note: percentile not used by {command}: it picks the envelope's request shape" in err


@pytest.mark.parametrize("scenario,flags,note", [
    (["--rate", "3", "--duration", "10"], ["--samples-file", "SAMPLES"],
     "samples_file not used by simulate: the lengths file gives each request's lengths, and --rate the arrivals"),
    (["--client-concurrency", "3", "--num-requests", "10"], ["--output-tokens", "5"],
     "output_tokens not used by simulate: the lengths file gives each request's lengths, and the closed loop's "
     "clients their pace"),
])
def test_lengths_beside_a_lengths_file_and_a_given_pace_are_named(tmp_path, capsys, scenario, flags, note):
    """With a lengths file and a --rate (or a closed loop), the workload's lengths set nothing: not the requests
    (the file's pairs), not the rate (given, or none needed). Same JSON, byte for byte, as without them: named now.
    Without --rate they set the rate of Little's law, and are not named."""
    lengths = tmp_path / "l.jsonl"
    lengths.write_text('{"prompt_tokens": 300, "output_tokens": 30}\n{"prompt_tokens": 500, "output_tokens": 50}\n')
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"prompt_tokens": 100, "output_tokens": 10}\n')
    flags = [str(samples) if f == "SAMPLES" else f for f in flags]
    code, plain, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--lengths-file", lengths, *scenario,
                           "--format", "json")
    assert code in (0, 1), err
    code, given, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--lengths-file", lengths,
                           *scenario, *flags, "--format", "json")
    plain, given = json.loads(plain)["sim"], json.loads(given)["sim"]
    assert code in (0, 1), err
    assert given["notes"] == [note] and plain["notes"] == []
    assert given["e2e_s"] == plain["e2e_s"] and given["requests"] == plain["requests"]
    code, out, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--lengths-file", lengths,
                         "--duration", "10", *flags, "--format", "json")
    assert code in (0, 1) and json.loads(out)["sim"]["notes"] == [], err


# --- a mean accepted length recorded without its k ---------------------------------------------------------------------

def _rate_for_mean(mean: float, k: int) -> float:
    """The per-token rate a whose chain of k drafts gives `mean` tokens a pass: 1 + a + ... + a^k = mean (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(mid ** i for i in range(k + 1)) < mean else (lo, mid)
    return lo


def test_a_mean_accepted_length_is_recorded_only_with_its_k(tmp_path, capsys):
    """`calibrations add --mean-accepted-length 3 --method eagle3` (no -k) had been recorded, and every plan read it at
    its own k: measured at k=3 (a = 0.8105), a k=5 plan took a = 0.709 and 3.0 tokens a pass. Refused now, and no
    store is made. Recorded with -k 3, a k=5 plan drafts with a = 0.8105: 1 + a + ... + a^5 = 3.78 tokens a pass."""
    store = tmp_path / "cal.sqlite"
    code, out, err = run(capsys, "calibrations", "--store", store, "add", "--tag", "t", "--source", "bench",
                         "--method", "eagle3", "--mean-accepted-length", "3")
    assert code == 2 and out == "" and err.startswith("specsize: error: k: a mean accepted length is measured at a k")
    assert not store.exists()
    code, out, err = run(capsys, "calibrations", "--store", store, "add", "--tag", "t", "--source", "bench",
                         "--method", "eagle3", "--mean-accepted-length", "3", "-k", "3")
    assert code == 0, err
    code, out, err = run(capsys, "plan", EAGLE3, "--store", store, "--acceptance-from-store", "t", "-k", "5",
                         "--format", "json")
    perf = json.loads(out)["perf"]
    a = _rate_for_mean(3.0, 3)
    assert code == 0, err
    assert perf["acceptance_rate"] == pytest.approx(a, rel=1e-6)
    assert perf["tokens_per_pass"] == pytest.approx(sum(a ** i for i in range(6)), rel=1e-6)
