"""Fuzz pass 13: simulate's traffic files, the service's JSON types, command-line paths and sweep studies - inputs that
had ended in a silently different run, a refusal that named the wrong thing, or a table of errors instead of one line.
Each expectation is worked out by hand (or read in vLLM's source, cited)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli as run

ROOT = Path(__file__).resolve().parent.parent
EAGLE3 = ROOT / "examples" / "llama8b-eagle3-h100.yaml"
LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"
# vLLM 0.32 vllm/sampling_params.py SamplingParams._verify_args refuses max_tokens < 1 (a 400 from its OpenAI server),
# and `vllm bench serve` sends each request's output length as max_tokens (benchmarks/lib/endpoint_request_func.py)
NO_OUTPUT = "a request for no output tokens cannot be served: vLLM refuses max_tokens below 1"


# --- 1. an output of 0 tokens is no request: one rule for traces, lengths files, samples and flags --------------------

def _sim(capsys, *args):
    return run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--duration", "5", *args, "--format", "json")


def test_a_samples_files_output_of_0_tokens_is_refused_as_a_traces_is(tmp_path, capsys):
    """A samples file's request of 0 output tokens had been read and simulated as 1 token ("outputs lognormal p50 1"),
    where the same request in a trace is refused. vLLM answers such a request 400, so it is no request to simulate or
    plan: refused in both, with the same reason, naming the file and the request (the 2nd of the samples file)."""
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"prompt_tokens": 100, "output_tokens": 50}\n{"prompt_tokens": 200, "output_tokens": 0}\n')
    code, out, err = _sim(capsys, "--samples-file", samples)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"specsize: error: samples_file: {samples} holds token counts outside 1 to 1,073,741,824 "
                          f"(0, request 2; {NO_OUTPUT})"), err
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_time,prompt_tokens,output_tokens\n0,100,50\n1,200,0\n")
    code, out, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--trace", trace)
    assert code == 2 and out == "" and f"{trace} line 3: output tokens must be from 1 to 1,073,741,824 ({NO_OUTPUT})" \
        in err, err


@pytest.mark.parametrize("outputs", ["0", "0,5,9", "p50=0,p99=10"])
def test_outputs_of_0_tokens_given_as_lengths_are_refused(capsys, outputs):
    """--output-tokens 0 had run "outputs fixed 1 token"; p50=0 had too (planner.simulate.simulated_outputs raised
    it to 1). plan and simulate refuse it alike, naming the field."""
    for command in (("plan", EAGLE3), ("simulate", EAGLE3, "--acceptance-rate", "0.7", "--duration", "5")):
        code, out, err = run(capsys, *command, "--output-tokens", outputs)
        assert code == 2 and out == "" and err.startswith("specsize: error: output_tokens: ") and NO_OUTPUT in err, err


def test_a_prompt_of_0_tokens_below_the_median_is_refused(tmp_path, capsys):
    """Prompts 100, 200 and 0: nearest-rank p50 is the 2nd of the 3 sorted (0, 100, 200), 100 tokens, so the 0 never
    reached the percentile check and the request was read without a word; a trace refuses it. Refused here too, naming
    the 3rd request."""
    samples = tmp_path / "s.csv"
    samples.write_text("prompt_tokens,output_tokens\n100,10\n200,20\n0,30\n")
    code, out, err = run(capsys, "plan", EAGLE3, "--samples-file", samples)
    assert code == 2 and out == ""
    assert err.startswith(f"specsize: error: samples_file: {samples} holds token counts outside 1 to 1,073,741,824 "
                          "(0, request 3)"), err


def test_an_output_of_1_token_is_still_simulated_as_1(tmp_path, capsys):
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"prompt_tokens": 100, "output_tokens": 1}\n' * 3)
    code, out, err = _sim(capsys, "--samples-file", samples)
    assert code in (0, 1), err
    assert "outputs fixed 1 token " in json.loads(out)["sim"]["scenario_detail"]["summary"]


# --- 2. the service names a field's JSON type as the field takes it ---------------------------------------------------

@pytest.fixture()
def client(tmp_path, monkeypatch):
    pytest.importorskip("fastapi", reason="the service tests need specsize[service]")
    from helpers import team_app

    client, tokens, _ = team_app(tmp_path, monkeypatch, "correct horse battery", EAGLE3)
    client.headers["authorization"] = f"Bearer {tokens['planner']}"
    return client


@pytest.mark.parametrize("body,field,problem,accepted", [
    # headroom takes a float, which the body model reads as int | float: pydantic's first branch had answered
    # "Input should be a valid integer" and accepted "an integer (a JSON number, ...)" for a field that takes 0.2
    ({"headroom": "0.3"}, "headroom", "must be a JSON number, got a string", "a JSON number: a number >= 0 and < 1"),
    ({"gpu_memory_utilization": [0.9]}, "gpu_memory_utilization", "must be a JSON number, got an array",
     "a JSON number: a number > 0 and <= 1"),
    # a lengths field had answered "Input should be a valid dictionary" with no accepted values at all
    ({"prompt_tokens": 800}, "prompt_tokens",
     "must be an object {p50, p95, p99, max}, a string p50=N,p99=N or an array of token counts, got a number",
     "an object {p50, p95, p99, max}, a string p50=N,p99=N or an array of token counts"),
    ({"output_tokens": [100, None]}, "output_tokens",
     "must be an object {p50, p95, p99, max}, a string p50=N,p99=N or an array of token counts; item 1 is null",
     "an object {p50, p95, p99, max}, a string p50=N,p99=N or an array of token counts"),
    ({"deployment_yaml": {"target": LLAMA8B}}, "deployment_yaml", "must be a JSON string, got an object",
     "a JSON string: the text of a deployment file (YAML)"),
    ({"tp": "2"}, "tp", "must be a JSON number, got a string", "a JSON number: an integer >= 1 and <= 1,024"),
])
def test_a_body_field_of_the_wrong_json_type_names_what_the_field_takes(client, body, field, problem, accepted):
    answer = client.post("/api/v1/plan", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == {"field": field, "problem": problem, "accepted": accepted}


# --- 3. a folder given where a file goes says what is accepted ---------------------------------------------------------

@pytest.mark.parametrize("argv,field,accepted", [
    (["simulate", EAGLE3, "--acceptance-rate", "0.7", "--series", "{dir}"], "series",
     "a file path for the time series: .csv, or .parquet (an existing file with --force)"),
    (["check-live", "--plan", "{dir}"], "plan", "a plan JSON file (specsize plan --format json -o plan.json)"),
    (["search", "{dir}"], "spec_file", "a search spec YAML file"),
])
def test_a_folder_given_as_a_file_names_what_is_accepted(tmp_path, capsys, argv, field, accepted):
    """click's own refusal of a folder had ended without the accepted values every other bad input names."""
    code, out, err = run(capsys, *[str(tmp_path) if a == "{dir}" else a for a in argv])
    assert code == 2 and out == ""
    assert err == f"specsize: error: {field}: File '{tmp_path}' is a directory. (accepted: {accepted})\n"


# --- 4. a study that names no GPU for its cells is one study error, not a table of failed cells -----------------------

def test_a_study_without_a_gpu_for_its_cells_is_refused_before_it_runs(tmp_path, capsys):
    """Neither base: nor an axis set gpu: each of the 2 cells had been computed and recorded invalid ("gpu: no GPU
    given") and the sweep exited 0 - as a study without a target is refused (exit 2, one line, no table)."""
    study = tmp_path / "s.yaml"
    study.write_text(f"name: s\nbase:\n  target: {LLAMA8B}\naxes:\n  concurrency: [4, 8]\n")
    code, out, err = run(capsys, "sweep", study, "-o", tmp_path / "s.parquet", "--workers", "1")
    assert code == 2 and not (tmp_path / "s.parquet").exists()
    assert err == ("specsize: error: gpu: the study does not name every cell's GPU (in base:, or on an axis whose every "
                   "value sets it) (accepted: gpu: a GPU id (specsize gpus), or gpu_memory_gib for a card of that "
                   "memory)\n"), err
    # a GPU on an axis every value of which sets it, or a card given by its memory, runs
    study.write_text(f"name: s\nbase:\n  target: {LLAMA8B}\n  gpu_memory_gib: 40\naxes:\n  concurrency: [4, 8]\n")
    code, _, err = run(capsys, "sweep", study, "-o", tmp_path / "m.parquet", "--workers", "1")
    assert code == 0 and "0 invalid or failed" in err, err


# --- 5. a burst is what runs: a burst at x1 is no burst, and none runs past the arrivals --------------------------------

GENERATED = ("simulate", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--prompt-tokens", "p50=100,p99=200",
             "--output-tokens", "p50=10,p99=20", "--format", "json")


@pytest.mark.parametrize("flags,field", [(["--burst-start", "10", "--burst-duration", "5"], "burst_start"),
                                         (["--on-off", "10,2"], "on_off")])
def test_a_burst_asked_for_at_a_burst_factor_of_1_is_refused(capsys, flags, field):
    """Without a burst_factor (1, the default) the burst asked for had run as "x1 from 10 s for 5 s" / "x1 for 2 s every
    10 s": the same rate throughout, reported as a burst the deployment sustained."""
    code, out, err = run(capsys, *GENERATED, "--duration", "30", *flags)
    assert code == 2 and out == ""
    assert err == (f"specsize: error: {field}: asks for a burst, and burst_factor is 1 (default): the rate would not "
                   "change (accepted: --burst-factor F above 1 with it)\n")


def test_a_burst_running_past_the_arrivals_is_refused(capsys):
    """A 30 s run with a burst from 10 s for 25 s had described "x2 from 10 s for 25 s"; 20 s of it ran."""
    code, out, err = run(capsys, *GENERATED, "--duration", "30", "--burst-factor", "2", "--burst-start", "10",
                         "--burst-duration", "25")
    assert code == 2 and out == ""
    assert err == ("specsize: error: burst_duration: the burst from 10 s for 25 s ends after the 30 s of arrivals "
                   "(accepted: at most 20 s from 10 s, or a longer --duration)\n")


def test_a_bursts_default_length_stops_at_the_end_of_the_arrivals(capsys):
    """--burst-start alone lasts a sixth of the run: 10 s of 60, from 5 s. From 55 s only 60 - 55 = 5 s remain, which is
    the burst that runs and the one described (it had said "for 10 s")."""
    code, out, err = run(capsys, *GENERATED, "--duration", "60", "--burst-factor", "2", "--burst-start", "55")
    assert code in (0, 1), err
    detail = json.loads(out)["sim"]["scenario_detail"]
    assert detail["bursts"] == [{"start_s": 55.0, "duration_s": 5.0, "factor": 2.0}]
    assert ", x2 from 55 s for 5 s " in detail["summary"]
    code, out, err = run(capsys, *GENERATED, "--duration", "60", "--burst-factor", "2", "--burst-start", "5")
    assert json.loads(out)["sim"]["scenario_detail"]["bursts"] == [{"start_s": 5.0, "duration_s": 10.0, "factor": 2.0}]


# --- 6. a trace in epoch milliseconds is named as such, not as "not a finite time" ------------------------------------

def test_an_arrival_time_in_epoch_milliseconds_is_named_as_too_large(tmp_path, capsys):
    """1,765,000,000,000 is 2025-12-06 in epoch milliseconds, 1.765e12 s (55,900 years) read as seconds: past the
    10^12 s the reader takes, it had been refused as "not a finite time", which it is."""
    trace = tmp_path / "ms.csv"
    trace.write_text("timestamp,prompt_tokens,output_tokens\n1765000000000,100,10\n1765000000500,200,20\n")
    code, out, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--trace", trace)
    assert code == 2 and out == ""
    assert err == (f"specsize: error: trace: {trace} line 2: an arrival time of 1.765e+12 s is more than 10^12 s (31,700 "
                   "years): milliseconds or microseconds? (accepted: seconds (the first request's at any offset) or "
                   "ISO times)\n")


# --- 7. a lengths file's acceptance column, which nothing reads, is named ---------------------------------------------

def test_a_lengths_files_acceptance_column_is_named_as_not_read(tmp_path, capsys):
    """A lengths file resamples (prompt, output) pairs; its acceptance_rate column (0.9 on every request) had been dropped
    without a word while --acceptance-rate 0.3 ran. The scenario line says so (a trace replays the column)."""
    lengths = tmp_path / "l.csv"
    lengths.write_text("prompt_tokens,output_tokens,acceptance_rate\n100,50,0.9\n200,60,0.9\n")
    code, out, err = _sim(capsys, "--lengths-file", lengths)
    assert code in (0, 1), err
    summary = json.loads(out)["sim"]["scenario_detail"]["summary"]
    assert (f"(lengths from lengths file {lengths}; its acceptance_rate column not read: a lengths file gives lengths, "
            "--trace replays each request's acceptance)") in summary
    lengths.write_text("prompt_tokens,output_tokens\n100,50\n200,60\n")
    code, out, err = _sim(capsys, "--lengths-file", lengths)
    assert f"(lengths from lengths file {lengths})" in json.loads(out)["sim"]["scenario_detail"]["summary"]


# --- 8. a study's missing file is named by the key that names it --------------------------------------------------------

def test_a_studys_missing_file_is_named_by_its_key(tmp_path, capsys):
    """base.samples_file: nope.jsonl and axes.trace's second value had both been refused as "study: cannot read"."""
    (tmp_path / "t.csv").write_text("arrival_time,prompt_tokens,output_tokens\n0,100,10\n")
    study = tmp_path / "s.yaml"
    for extra, axis, field in (("  samples_file: nope.jsonl\n", "[t.csv]", "base.samples_file"),
                               ("", "[t.csv, missing.csv]", "axes.trace[1]")):
        study.write_text(f"name: s\nbase:\n  target: {LLAMA8B}\n  gpu: H100-SXM-80GB\n{extra}axes:\n  trace: {axis}\n")
        code, _, err = run(capsys, "sweep", study, "-o", tmp_path / "s.parquet")
        missing = tmp_path / ("nope.jsonl" if extra else "missing.csv")
        assert code == 2 and err == (f"specsize: error: {field}: cannot read {missing} (No such file or directory) "
                                     "(accepted: a readable file)\n"), err


# --- 9. a flag outside the field table: NaN is no number, and a range refusal names its range --------------------------

def test_a_sweeps_cell_timeout_of_nan_is_bad_input(tmp_path, capsys):
    """click's FloatRange(0, 1e6) lets NaN through (every comparison with it is false): `sweep --cell-timeout nan` had
    reached the workers' timer and ended in an internal error (exit 4) with no table."""
    study = tmp_path / "s.yaml"
    study.write_text(f"name: s\nbase:\n  target: {LLAMA8B}\n  gpu: H100-SXM-80GB\naxes:\n  concurrency: [4, 8]\n")
    code, _, err = run(capsys, "sweep", study, "-o", tmp_path / "s.parquet", "--cell-timeout", "nan")
    assert code == 2 and not (tmp_path / "s.parquet").exists()
    assert err == ("specsize: error: cell_timeout: must be a finite number, got nan (accepted: a finite number in the "
                   "flag's range)\n")


@pytest.mark.parametrize("flag,value,accepted", [("--cell-timeout", "0", "a number > 0 and <= 1,000,000"),
                                                 ("--workers", "0", "an integer >= 1 and <= 4,096"),
                                                 ("--chunk-size", "0", "an integer >= 1 and <= 100,000")])
def test_a_flag_out_of_its_click_range_names_the_range(tmp_path, capsys, flag, value, accepted):
    study = tmp_path / "s.yaml"
    study.write_text(f"name: s\nbase:\n  target: {LLAMA8B}\n  gpu: H100-SXM-80GB\naxes:\n  concurrency: [4, 8]\n")
    code, _, err = run(capsys, "sweep", study, "-o", tmp_path / "s.parquet", flag, value)
    assert code == 2 and err.endswith(f" (accepted: {accepted})\n") and err.count("\n") == 1, err


# --- 10. a route refuses the fields its command does not read, as the command line does -------------------------------

@pytest.mark.parametrize("route,body,reader", [
    # `specsize plan --rate 50` is no option; {"rate": 50} to /plan had answered the envelope's plan without a word
    ("plan", {"rate": 50}, "simulate"),
    ("check", {"candidates": ["method=ngram,acceptance=0.5,k=3"]}, "speedup"),
    ("report", {"client_concurrency": 4}, "simulate"),
    ("speedup", {"ramp_to": 5}, "simulate"),
    ("simulate", {"spare": 1}, "plan"),
])
def test_a_field_the_routes_command_does_not_read_is_refused(client, route, body, reader):
    answer = client.post(f"/api/v1/{route}", json={"deployment_yaml": EAGLE3.read_text(), "acceptance_rate": 0.7,
                                                   **body})
    assert answer.status_code == 400, answer.text
    (field,) = body
    assert answer.json()["error"] == {
        "field": field, "problem": f"is not read by POST /api/v1/{route} (`specsize {route}` has no such setting)",
        "accepted": f"the fields `specsize {route}` reads; POST /api/v1/{reader} reads this one"}


def test_the_fields_a_route_reads_are_the_flags_of_its_command(client):
    """One table (inputs.fields.COMMAND_FIELDS) makes both: every flag of `specsize plan` is a field /plan takes, and a
    plan with its own burst simulation (simulate, duration, seed) still answers."""
    answer = client.post("/api/v1/plan", json={"deployment_yaml": EAGLE3.read_text(), "acceptance_rate": 0.7,
                                               "simulate": True, "duration": 10.0, "seed": 3, "spare": 1})
    assert answer.status_code == 200, answer.text
    answer = client.post("/api/v1/speedup", json={"deployment_yaml": EAGLE3.read_text(), "acceptance_rate": 0.7,
                                                  "offline": True, "batch_sizes": [1, 8], "context_len": 1024})
    assert answer.status_code == 200, answer.text


# --- 11. a search spec's drafter refused as a plan refuses it is named by the spec's key ------------------------------

SPEC = f"""target: {LLAMA8B}
gpus: [{{gpu: H100-SXM-80GB, counts: [1]}}]
tp: [1]
workload: {{prompt_tokens: {{p50: 1500, p99: 8000}}, output_tokens: {{p50: 300, p99: 1200}}, concurrency: 8}}
slo: {{tpot_p99_ms: 60}}
"""


@pytest.mark.parametrize("drafter,field,says", [
    ("{method: mtp, acceptance_rate: 0.6}", "drafters.method", "mtp needs a target with MTP layers"),
    ("{method: eagle3, draft: meta-llama/Llama-3.2-1B-Instruct, acceptance_rate: 0.6}", "drafters.draft",
     "meta-llama/Llama-3.2-1B-Instruct (16 layers, hidden 2048) is not an eagle3 head"),
])
def test_a_search_drafter_a_plan_refuses_is_named_by_its_spec_key(tmp_path, capsys, drafter, field, says):
    """The spec has no top-level `method` or `draft`: the refusal had named them as if it did ("method: mtp needs ...",
    "draft: ... is not an eagle3 head"); it is the drafter's, drafters.method / drafters.draft."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC + f"drafters: [{drafter}]\n")
    code, out, err = run(capsys, "search", spec, "--no-simulate")
    assert code == 2 and out == "" and err.startswith(f"specsize: error: {field}: {says}"), err
