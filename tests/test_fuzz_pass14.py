"""Fuzz pass 14: speedup's lists, a deployment file's NUL escapes and over-long model names, trace cells that float()
reads as other numbers, measure's model refusal, speedup candidates, a search spec's name and blank or control-character
output paths. Each had ended in an internal error (exit 4), a silently different figure, or a refusal naming another
field; each expectation is worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli as run
from specsize import api
from specsize.catalog.traces import read_trace
from specsize.core.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
EAGLE3 = ROOT / "examples" / "llama8b-eagle3-h100.yaml"
LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"


def _one_line(err: str, field: str) -> bool:
    return err.startswith(f"specsize: error: {field}: ") and err.count("\n") == 1 and "internal error" not in err


# --- 1. a list of batch sizes or k: spaces around an item, never inside one ----------------------------------------

def test_a_batch_size_list_with_a_space_inside_an_item_is_refused(capsys):
    """`speedup --batch-size '1 2'` had dropped the space and tabulated batch size 12 (exit 0); `-k '1 2'` had been
    refused as a single k ("an integer >= 0") though the flag takes a list."""
    code, out, err = run(capsys, "speedup", EAGLE3, "--acceptance-rate", "0.7", "--batch-size", "1 2")
    assert code == 2 and out == "" and _one_line(err, "batch_sizes"), err
    assert "must be an integer, got '1 2' (accepted: integers N[,N...] >= 1 and <= 1,048,576)" in err
    code, out, err = run(capsys, "speedup", EAGLE3, "--acceptance-rate", "0.7", "-k", "1 2")
    assert code == 2 and out == "" and _one_line(err, "num_speculative_tokens"), err
    assert "got '1 2' (accepted: integers N[,N...] >= 1 and <= 64)" in err


def test_spaces_around_list_items_are_still_read(capsys):
    """' 4 , 8' is batch sizes 4 and 8, ' 1, 2 ' k 1 and 2: four rows, one per (B, k)."""
    code, out, err = run(capsys, "speedup", EAGLE3, "--acceptance-rate", "0.7", "-k", " 1, 2 ", "--batch-size",
                         " 4 , 8", "--format", "json")
    assert code == 0, err
    assert sorted((row["batch_size"], row["k"]) for row in json.loads(out)["rows"]) == [(4, 1), (4, 2), (8, 1), (8, 2)]


# --- 2. a deployment file's model name over 255 bytes and its NUL escapes ------------------------------------------

def test_a_files_model_name_longer_than_a_file_name_is_an_unknown_model(tmp_path, capsys):
    """A file's target of 100,000 characters had been looked up beside the file: Path.exists raised ENAMETOOLONG,
    which the CLI's net reported as `path: File name too long` and api.load_request raised as OSError. It is no
    file, so it is read as an id and refused as the flag's is."""
    deployment = tmp_path / "d.yaml"
    deployment.write_text(f"target: '{'x' * 100_000}'\ngpu: H100-SXM-80GB\nacceptance_rate: 0.7\n")
    code, out, err = run(capsys, "plan", deployment)
    assert code == 2 and out == "" and _one_line(err, "target"), err
    assert "unknown model 'xxx" in err and len(err) < 3_000
    with pytest.raises(SpecError) as caught:
        api.plan(api.load_request(deployment))
    assert caught.value.field == "target"


@pytest.mark.parametrize("line,field", [
    ('nvidia_smi: "a\\0b"', "nvidia_smi"),
    ('workload: {samples_file: "a\\0b"}', "samples_file"),
    (f'target: "{LLAMA8B}\\0"', "target"),
    ('engine_version: "0.10\\0"', "engine_version"),
])
def test_a_nul_escape_in_a_files_text_is_refused_naming_its_field(tmp_path, capsys, line, field):
    """YAML's "\\0" is a NUL: a path or model id holding one had ended in `internal error: ValueError: embedded null
    byte` (exit 4) where os.stat met it. No file, model id or release holds one."""
    deployment = tmp_path / "d.yaml"
    deployment.write_text(("" if field == "target" else f"target: {LLAMA8B}\n") + "gpu: H100-SXM-80GB\n"
                          "acceptance_rate: 0.7\n" + line + "\n")
    code, out, err = run(capsys, "plan", deployment)
    assert code == 2 and out == "" and _one_line(err, field), err
    assert "holds a NUL character" in err and "without NUL characters)" in err


def test_the_service_refuses_a_nul_in_a_deployment_files_model_as_it_refuses_one_in_the_body(tmp_path, monkeypatch):
    """The service answers 422 naming the field for a NUL anywhere in a deployment file (docs/service.md), now checked
    before any reader sees the file: the field table refusing a NUL itself (section 2) must not turn it into a 400."""
    pytest.importorskip("fastapi", reason="the service tests need specsize[service]")
    from helpers import team_app

    client, tokens, _ = team_app(tmp_path, monkeypatch, "correct horse battery", EAGLE3)
    client.headers["authorization"] = f"Bearer {tokens['planner']}"
    for line, field in ((f'target: "{LLAMA8B}\\0"', "target"), ('gpu: "H100-SXM-80GB\\0"', "gpu")):
        text = EAGLE3.read_text().replace(f"{field}: ", f"# {field}: ", 1) + line + "\n"
        answer = client.post("/api/v1/plan", json={"deployment_yaml": text, "acceptance_rate": 0.7})
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["field"] == field and "NUL" in error["problem"], error


# --- 3. a trace's cells: what float() reads as another number ------------------------------------------------------

HEADER = "arrival_time,prompt_tokens,output_tokens\n"


@pytest.mark.parametrize("name,text,needle", [
    ("under.csv", HEADER + "0,100,20\n1_0,200,30\n", "line 3: the arrival time '1_0' holds non-ASCII digits or '_'"),
    ("arabic.csv", HEADER + "0,100,20\n١٠,200,30\n", "line 3: the arrival time '١٠' holds non-ASCII digits or '_'"),
    ("true.jsonl", '{"arrival_time": 0, "prompt_tokens": 100, "output_tokens": 20}\n'
                   '{"arrival_time": true, "prompt_tokens": 100, "output_tokens": 20}\n', "line 2: the arrival time is true"),
    ("acc_true.jsonl", '{"arrival_time": 0, "prompt_tokens": 100, "output_tokens": 20, "acceptance_rate": true}\n',
     "line 1: acceptance_rate is true"),
    ("acc_arabic.csv", "arrival_time,prompt_tokens,output_tokens,acceptance_rate\n0,100,20,٠.٥\n",
     "line 2: acceptance_rate '٠.٥' holds non-ASCII digits or '_'"),
])
def test_a_trace_cell_float_would_read_as_another_number_is_refused(tmp_path, capsys, name, text, needle):
    """float() reads "1_0" and "١٠" as 10.0 and a JSON true as 1.0: the arrivals had been replayed at 10 s and 1 s,
    and a request's acceptance of true simulated at 1.0 (exit 0), where the token counts refuse all three."""
    trace = tmp_path / name
    trace.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--trace", trace, "--format", "json")
    assert code == 2 and out == "" and _one_line(err, "trace"), err
    assert f"{trace} {needle}" in err


def test_a_traces_plain_seconds_and_rates_are_still_read(tmp_path):
    """"10", "1e1" and "0.5" are read as written: arrivals 0 and 10 s (shifted to the first), acceptances 0.5."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_time,prompt_tokens,output_tokens,acceptance_rate\n10,200,30,0.5\n1e1,100,20,.5\n"
                     "0,100,20,0.5\n")
    read = read_trace(trace)
    assert read.arrival_s == [0.0, 10.0, 10.0] and read.acceptance == [0.5, 0.5, 0.5]


# --- 4. measure names the flag of a model it cannot build ----------------------------------------------------------

def test_measure_names_the_target_it_has_no_config_for(capsys):
    """`plan` reads meta-llama/Llama-3.1-405B-Instruct as its published base sibling; measure builds a model from its
    own config.json, of which the catalog has none: refused as `model: ...` (no such flag), now as `target`. The
    refusal comes before PyTorch is needed or any model is built."""
    code, out, err = run(capsys, "measure", "--target", "meta-llama/Llama-3.1-405B-Instruct", "--gpu",
                         "H100-SXM-80GB", "--tp", "8")
    assert code == 2 and out == "" and _one_line(err, "target"), err
    assert "needs a config" in err and "measure builds the model from its own config.json" in err


# --- 5. speedup candidates --------------------------------------------------------------------------------------------

def test_a_candidate_without_a_method_says_so(capsys):
    """"method None in 'k=3,acceptance=0.5'" named Python's None."""
    code, out, err = run(capsys, "speedup", EAGLE3, "--acceptance-rate", "0.7", "--candidate", "k=3,acceptance=0.5")
    assert code == 2 and out == ""
    assert err == ("specsize: error: candidate: no method= in 'k=3,acceptance=0.5' (accepted: draft_model, eagle, "
                   "eagle3, mtp, medusa, ngram)\n")


def test_a_candidates_own_proposal_rate_is_named_as_the_candidates(capsys):
    """An n-gram candidate's proposal_rate=0.5 on SGLang (whose n-gram worker verifies every step) had been refused as
    `proposal_rate`, the deployment's flag, which was not given."""
    code, out, err = run(capsys, "speedup", EAGLE3, "--engine", "sglang", "--acceptance-rate", "0.7", "--candidate",
                         "method=ngram,k=3,acceptance=0.5,proposal_rate=0.5")
    assert code == 2 and out == "" and _one_line(err, "candidate.proposal_rate"), err


def test_a_candidate_given_twice_is_refused(capsys):
    """The same --candidate twice had been priced and tabulated twice (exit 0), as `-k 3,3` is refused."""
    candidate = "method=ngram,k=3,acceptance=0.5"
    code, out, err = run(capsys, "speedup", EAGLE3, "--acceptance-rate", "0.7", "--candidate", candidate,
                         "--candidate", candidate)
    assert code == 2 and out == "" and _one_line(err, "candidates"), err
    assert f"repeats a value: '{candidate}'" in err


# --- 6. a search spec's name ------------------------------------------------------------------------------------------

SEARCH = """name: {name}
target: meta-llama/Llama-3.1-8B-Instruct
drafters:
  - {{method: ngram, acceptance_rate: 0.35}}
ks: [1]
gpus:
  - {{gpu: H100-SXM-80GB, counts: [1], price_per_hour: 2.5}}
tp: [1]
max_num_seqs: [64]
max_model_len: 8192
workload:
  prompt_tokens: {{p50: 500, p95: 1000, p99: 2000, max: 4000}}
  output_tokens: {{p50: 100, p95: 200, p99: 300, max: 400}}
  concurrency: 8
finalists: 1
simulate_seconds: 10
"""


@pytest.mark.parametrize("name,problem", [('"a\\0b"', "holds a NUL character"), ("''", "must not be empty")])
def test_a_search_specs_name_is_read_as_a_deployments_name(tmp_path, capsys, name, problem):
    """A NUL had been printed into the text report (exit 0) and a blank name silently replaced by the spec's path;
    the field table's rule for `name` applies, as a deployment file's."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SEARCH.format(name=name))
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 2 and out == "" and _one_line(err, "name") and problem in err, err


# --- 7. output paths: blank, or holding a line break -----------------------------------------------------------------

@pytest.mark.parametrize("argv,field", [
    (["report", EAGLE3, "--acceptance-rate", "0.7", "--no-simulate", "-o", " "], "output"),
    (["plan", EAGLE3, "--acceptance-rate", "0.7", "-o", ""], "output"),
    (["simulate", EAGLE3, "--acceptance-rate", "0.7", "--duration", "5", "--series", " "], "series"),
])
def test_a_blank_output_path_is_refused(tmp_path, monkeypatch, capsys, argv, field):
    """`report -o ' '` had written its HTML to a file named by one space (exit 0); `-o ''` answered '. is a folder'."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and _one_line(err, field) and "is a blank file name" in err, err
    assert list(tmp_path.iterdir()) == []


def test_an_output_path_with_a_line_break_is_refused(tmp_path, monkeypatch, capsys):
    """-o $'r\\nx.html' had written the file and printed `specsize: wrote r` and `x.html` on two lines."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "report", EAGLE3, "--acceptance-rate", "0.7", "--no-simulate", "-o", "r\nx.html")
    assert code == 2 and out == "" and _one_line(err, "output") and "holds a control character" in err, err
    assert list(tmp_path.iterdir()) == []


# --- 8. a /metrics URL urlsplit cannot read ---------------------------------------------------------------------------

@pytest.mark.parametrize("url,why", [("http://[::1", "Invalid IPv6 URL"),
                                     ("http://[zz]/metrics", "'zz' does not appear to be an IPv4 or IPv6 address"),
                                     ("http://[::1]:8000x/metrics", "Port could not be cast to integer value")])
def test_a_metrics_url_that_cannot_be_read_is_bad_input(tmp_path, capsys, url, why):
    """`check-live --metrics 'http://[::1'` (an unclosed bracket) had ended in `internal error: ValueError: Invalid
    IPv6 URL` (exit 4): urlsplit raised before the fetch's own error handling. Nothing is fetched."""
    plan = tmp_path / "plan.json"
    code, out, err = run(capsys, "plan", EAGLE3, "--acceptance-rate", "0.7", "--format", "json", "-o", plan)
    assert code == 0, err
    code, out, err = run(capsys, "check-live", "--plan", plan, "--metrics", url)
    assert code == 2 and out == "" and _one_line(err, "metrics"), err
    assert f"cannot read the URL {url!r} ({why}" in err
