"""Fuzz pass 7 over the command line: inputs a platform engineer gives (a symbolic link loop where a file goes, a
samples CSV naming a column twice, ...) that had ended in an internal error (exit 4) or a silently wrong number. Each
test states the behaviour worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli as run

LLAMA8B = ["--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB"]


def _one_error_line(err: str, field: str) -> bool:
    lines = [line for line in err.strip().splitlines() if line.startswith("specsize: error:")]
    return len(lines) == 1 and lines[0].startswith(f"specsize: error: {field}:") and "internal error" not in err \
        and "Traceback" not in err


# --- a symbolic link loop where a file goes ----------------------------------------------------------------------

@pytest.fixture
def loop(tmp_path, monkeypatch) -> str:
    """`loop -> loop` in the current directory (Python 3.11's Path.resolve raises RuntimeError on it)."""
    (tmp_path / "loop").symlink_to("loop")
    monkeypatch.chdir(tmp_path)
    return "loop"


@pytest.mark.parametrize("argv, field", [
    (["plan", "--samples-file", "{loop}"], "samples_file"),
    (["plan", "--nvidia-smi", "{loop}", "--acceptance-rate", "0.7"], "nvidia_smi"),
    (["simulate", "--trace", "{loop}", "--acceptance-rate", "0.7"], "trace"),
    (["simulate", "--lengths-file", "{loop}", "--acceptance-rate", "0.7"], "lengths_file"),
    (["plan", "--acceptance-rate", "0.7", "--format", "json", "-o", "{loop}"], "output"),
    (["plan", "--acceptance-rate", "0.7", "--format", "json", "-o", "{loop}", "--force"], "output"),
    (["report", "--no-simulate", "--format", "html", "-o", "{loop}", "--acceptance-rate", "0.7"], "output"),
    (["simulate", *LLAMA8B, "--duration", "5", "--series", "{loop}"], "series"),
])
def test_a_symlink_loop_is_bad_input_naming_its_field(loop, capsys, argv, field):
    """Each of these had ended in `internal error: RuntimeError: Symlink loop from ...` (exit 4): a path resolved before
    it was read or written. A loop is the user's path, refused in one line naming the flag (exit 2), before any work."""
    code, out, err = run(capsys, *[part.replace("{loop}", loop) for part in argv])
    assert code == 2, err
    assert _one_error_line(err, field), err
    assert "symbolic link loop" in err
    assert out == ""



@pytest.mark.parametrize("argv, field", [
    (["calibrations", "--store", "{loop}"], "store"),
    (["plan", "--store", "{loop}", "--acceptance-from-store", "chat"], "store"),
    (["users", "list", "--db", "{loop}"], "db"),
])
def test_a_database_path_that_is_a_symlink_loop_names_its_flag(loop, capsys, argv, field):
    """--store / --db on a loop: `serve --db loop` and `users list --db loop` had been exit 4 (RuntimeError from the
    store's check of what is at the path), `calibrations --store loop` "loop does not exist". One line naming the flag."""
    code, out, err = run(capsys, *[part.replace("{loop}", loop) for part in argv])
    assert code == 2, err
    assert _one_error_line(err, field) and "symbolic link loop" in err, err
    assert out == ""

def _study(folder: Path, base: str = "") -> Path:
    study = folder / "study.yaml"
    study.write_text("name: s\nbase: {target: meta-llama/Llama-3.1-8B-Instruct, gpu: H100-SXM-80GB, method: none, "
                     + (base or "prompt_tokens: {p50: 100, p99: 200}, output_tokens: {p50: 10, p99: 20}")
                     + "}\naxes:\n  tp: [1]\n")
    return study


@pytest.mark.parametrize("case", ["study", "html", "study_samples_file"])
def test_a_sweep_given_a_symlink_loop_is_bad_input(loop, tmp_path, capsys, case):
    """`sweep loop -o t.parquet`, `sweep study.yaml -o t.parquet --html loop` and a study whose samples_file is a loop:
    exit 4 (RuntimeError) before; now one line naming the study, --html or the study's base.samples_file, and no table
    written."""
    if case == "study":
        argv, field = [loop, "-o", "t.parquet"], "study"
    elif case == "html":
        argv, field = [str(_study(tmp_path)), "-o", "t.parquet", "--html", loop], "html"
    else:
        argv, field = [str(_study(tmp_path, f"samples_file: {loop}")), "-o", "t.parquet"], "base.samples_file"
    code, _, err = run(capsys, "sweep", *argv)
    assert code == 2, err
    assert _one_error_line(err, field), err
    assert not (tmp_path / "t.parquet").exists()


def test_the_interpreters_symlink_loop_error_is_bad_input_wherever_it_comes_from(monkeypatch, capsys):
    """The net under the readers: a RuntimeError("Symlink loop from ...") from a path no reader of ours resolved first
    is the user's path (exit 2, one line), as OSError ELOOP already was, not an internal error."""
    from specsize import api

    def resolve_a_loop(*_args, **_kwargs):
        raise RuntimeError("Symlink loop from '/tmp/x'")

    monkeypatch.setattr(api, "plan", resolve_a_loop)
    code, _, err = run(capsys, "plan", "--acceptance-rate", "0.7")
    assert code == 2, err
    assert _one_error_line(err, "path") and "Symlink loop from '/tmp/x'" in err


# --- samples files --------------------------------------------------------------------------------------------

def test_a_samples_csv_naming_a_column_twice_is_refused(tmp_path, capsys):
    """`prompt_tokens,output_tokens,prompt_tokens` / `100,10,5`: csv.DictReader keeps the last of two same-named columns,
    so the envelope's prompt had been 5 tokens where the first column says 100, without a word. A trace's reader refuses
    the same header (catalog.traces._rows); the samples reader now does too, naming the column."""
    path = tmp_path / "samples.csv"
    path.write_text("prompt_tokens,output_tokens,prompt_tokens\n100,10,5\n200,20,5\n")
    code, out, err = run(capsys, "plan", "--samples-file", path, "--format", "json")
    assert code == 2 and out == ""
    assert _one_error_line(err, "samples_file") and "'prompt_tokens' twice" in err
    code, _, err = run(capsys, "plan", "--prompt-tokens", f"@{path}", "--output-tokens", "10")
    assert code == 2 and _one_error_line(err, "prompt_tokens"), err


def test_a_samples_csv_with_each_column_once_still_reads_its_columns(tmp_path, capsys):
    """The refusal above takes nothing else: columns in either order are read by name. By hand: prompts 100 and 200,
    outputs 10 and 20, so the p99 prompt is 200 tokens and the p99 output 20 (the larger sample of two)."""
    assert _envelope_of(tmp_path, capsys, "samples.csv", "output_tokens,prompt_tokens\n10,100\n20,200\n") == (200, 20)


def _envelope_of(tmp_path, capsys, name: str, text: str) -> tuple[int, int]:
    """The (prompt, output) tokens of the envelope a plan builds from a samples file `name` holding `text`."""
    path = tmp_path / name
    path.write_text(text)
    code, out, err = run(capsys, "plan", "--samples-file", path, "--format", "json", "--acceptance-rate", "0.7")
    assert code == 0, err
    envelope = json.loads(out)["envelope"]
    return envelope["prompt_tokens"], envelope["output_tokens"]


@pytest.mark.parametrize("line, column", [
    ('{"prompt_tokens": 100, "output_tokens": 10, "prompt_tokens": 5}', "prompt_tokens"),
    ('{"prompt_tokens": 100, "output_tokens": 10, "output_tokens": 7}', "output_tokens"),
])
def test_a_samples_jsonl_request_naming_a_count_twice_is_refused(tmp_path, capsys, line, column):
    """json.loads keeps the last of two same-named keys: the request above had been read as 5 prompt tokens (or 7 output
    tokens) without a word. Refused, naming the key."""
    path = tmp_path / "samples.jsonl"
    path.write_text(line + "\n")
    code, out, err = run(capsys, "plan", "--samples-file", path, "--format", "json")
    assert code == 2 and out == ""
    assert _one_error_line(err, "samples_file") and f"{column!r} twice" in err, err


def test_a_samples_jsonl_request_with_a_repeated_key_it_does_not_read_is_read(tmp_path, capsys):
    """Only the counts read are checked: a request's own metadata with a repeated key of its own is left alone. By hand:
    one request of 100 prompt and 10 output tokens is every percentile of the envelope."""
    assert _envelope_of(tmp_path, capsys, "samples.jsonl",
                        '{"prompt_tokens": 100, "output_tokens": 10, "meta": {"a": 1, "a": 2}}\n') == (100, 10)

# --- -o names the format --------------------------------------------------------------------------------------

@pytest.mark.parametrize("command, name, starts", [
    (["plan", "--acceptance-rate", "0.7"], "plan.json", "{"),
    (["plan", "--acceptance-rate", "0.7"], "plan.md", "# "),
    (["speedup", "--acceptance-rate", "0.7"], "speedup.json", "{"),
    (["report", "--no-simulate", "--acceptance-rate", "0.7"], "report.md", "# "),
    (["report", "--no-simulate", "--acceptance-rate", "0.7"], "report.html", "<!DOCTYPE html>"),
])
def test_an_output_file_named_for_a_format_holds_that_format(tmp_path, capsys, command, name, starts):
    """`specsize plan -o plan.json` (no --format) had written the text report into plan.json, which `check-live --plan
    plan.json` then refused as not JSON; `report -o report.md` had written HTML into report.md. Without --format, -o's
    suffix names the format where the command writes it."""
    target = tmp_path / name
    code, out, err = run(capsys, *command, "-o", target)
    assert code == 0, err
    assert out == "" and target.read_text().startswith(starts)
    if name.endswith(".json"):
        json.loads(target.read_text())


def test_a_format_given_wins_over_the_output_files_name(tmp_path, capsys):
    """--format given is what is written, whatever -o is called; a suffix the command does not write (.csv) keeps the
    default (text); `check -o` keeps the JSON for the pipeline and prints its one line, as before."""
    code, _, err = run(capsys, "plan", "--acceptance-rate", "0.7", "--format", "text", "-o", tmp_path / "p.json")
    assert code == 0 and not (tmp_path / "p.json").read_text().startswith("{"), err
    code, _, err = run(capsys, "plan", "--acceptance-rate", "0.7", "-o", tmp_path / "p.csv")
    assert code == 0 and not (tmp_path / "p.csv").read_text().startswith("{"), err
    example = Path(__file__).resolve().parents[1] / "examples" / "llama8b-eagle3-h100.yaml"
    code, out, err = run(capsys, "check", example, "-o", tmp_path / "gate.json")
    assert code == 0 and out.startswith("fits: worst-case headroom"), err
    assert json.loads((tmp_path / "gate.json").read_text())["verdict"] == "fits"


def test_emit_into_a_json_named_file_still_prints_the_command(tmp_path, capsys):
    """`plan --emit vllm -o launch.json`: --emit prints a shell command; the file's name does not turn it into
    `--format json` (which --emit refuses)."""
    code, _, err = run(capsys, "plan", "--acceptance-rate", "0.7", "--emit", "vllm", "-o", tmp_path / "launch.json")
    assert code == 0, err
    assert (tmp_path / "launch.json").read_text().startswith("# vllm")


# --- a study's workload field given twice ------------------------------------------------------------------------

STUDY_BASE = """name: twice
base:
  target: meta-llama/Llama-3.1-8B-Instruct
  gpu: H100-SXM-80GB
  method: none
  output_tokens: {{p50: 10, p99: 20}}
{base}
axes:
{axes}
compute: {{speedup: false}}
"""


@pytest.mark.parametrize("base, axes, field", [
    ("  prompt_tokens: {p50: 100, p99: 200}\n  workload: {prompt_tokens: {p50: 5000, p99: 9000}}", "  tp: [1]",
     "base.workload.prompt_tokens"),
    ("  prompt_tokens: {p50: 100, p99: 200}", "  tenant:\n    - {label: a, concurrency: 2, workload: {concurrency: 8}}",
     "axes.tenant[0].workload.concurrency"),
])
def test_a_study_field_at_the_top_and_under_workload_is_refused(tmp_path, capsys, base, axes, field):
    """A study's mapping may give a workload field at its top or under `workload:` (docs/sweep.md). Given at both, the
    later had replaced the other without a word: base prompt_tokens 100/200 beside workload.prompt_tokens 5000/9000 ran
    every cell at 5000/9000. Now one line naming the second place, and no table."""
    study = tmp_path / "study.yaml"
    study.write_text(STUDY_BASE.format(base=base, axes=axes))
    code, _, err = run(capsys, "sweep", study, "-o", tmp_path / "t.parquet", "--workers", "1")
    assert code == 2, err
    assert _one_error_line(err, field) and "given twice" in err, err
    assert not (tmp_path / "t.parquet").exists()


def test_a_study_field_unset_at_the_top_and_given_under_workload_is_read(tmp_path):
    """A null is unset, as everywhere: `prompt_tokens:` (null) at the top beside workload.prompt_tokens is the latter,
    and the study reads its p50 100 and p99 200 (p95 and max taken at the p99, as a deployment file takes them)."""
    from specsize.inputs.study import read_study

    study = tmp_path / "study.yaml"
    study.write_text(STUDY_BASE.format(base="  prompt_tokens:\n  workload: {prompt_tokens: {p50: 100, p99: 200}}",
                                       axes="  tp: [1]"))
    assert read_study(study).base["prompt_tokens"] == {"p50": 100, "p95": 200, "p99": 200, "max": 200}


# --- the calibration store is a file the command reads ----------------------------------------------------------

@pytest.mark.parametrize("by_env", [False, True])
def test_an_output_onto_the_calibration_store_it_reads_is_refused(tmp_path, capsys, monkeypatch, by_env):
    """`plan --store s.sqlite --acceptance-from-store chat -o s.sqlite --force` had replaced the SQLite store with the
    plan's text (the next `calibrations --store s.sqlite`: "not an SQLite database"). A command's output never replaces
    a file it reads, --force or not; the store named by $SPECSIZE_STORE alike. The store is left as it was, byte for
    byte."""
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "s.sqlite"
    code, _, err = run(capsys, "calibrations", "--store", store, "add", "--tag", "chat", "--source", "bench",
                       "--acceptance-rate", "0.6", "--method", "draft_model", "--target",
                       "meta-llama/Llama-3.1-70B-Instruct", "--draft", "meta-llama/Llama-3.2-1B-Instruct", "-k", "4")
    assert code == 0, err
    before = store.read_bytes()
    if by_env:
        monkeypatch.setenv("SPECSIZE_STORE", str(store))
        argv = ["plan", "--acceptance-from-store", "chat", "-o", "s.sqlite", "--force"]
    else:
        argv = ["plan", "--store", store, "--acceptance-from-store", "chat", "-o", store, "--force"]
    code, _, err = run(capsys, *argv)
    assert code == 2, err
    assert _one_error_line(err, "output") and "store, which it reads" in err, err
    assert store.read_bytes() == before


SEARCH_SPEC = """target: meta-llama/Llama-3.1-8B-Instruct
drafters:
  - {method: none}
gpus:
  - {gpu: H100-SXM-80GB, counts: [1]}
tp: [1]
max_num_seqs: [64]
workload:
  samples_file: samples.csv
  concurrency: 8
slo:
  tpot_p99_ms: 40
"""


@pytest.mark.parametrize("output", ["search.yaml", "samples.csv"])
def test_a_search_never_writes_over_its_spec_or_what_the_spec_reads(tmp_path, capsys, monkeypatch, output):
    """`search spec.yaml -o spec.yaml --force` had written the results over the spec (and -o over the spec's samples
    file over that): `search` counted no file it read, as `plan` does. Refused by name; both files as they were."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "search.yaml").write_text(SEARCH_SPEC)
    (tmp_path / "samples.csv").write_text("prompt_tokens,output_tokens\n100,10\n200,20\n")
    before = {name: (tmp_path / name).read_text() for name in ("search.yaml", "samples.csv")}
    code, out, err = run(capsys, "search", "search.yaml", "--no-simulate", "-o", output, "--force")
    assert code == 2 and out == "", err
    assert _one_error_line(err, "output") and "which it reads" in err, err
    assert {name: (tmp_path / name).read_text() for name in before} == before
    code, _, err = run(capsys, "search", "search.yaml", "--no-simulate", "-o", "found.json")
    assert code == 0, err
    assert json.loads((tmp_path / "found.json").read_text())["screened"] == 1  # 1 GPU count x 1 TP x 1 x 1 x none


def test_a_medusa_head_narrower_than_the_target_is_refused(capsys):
    """Medusa's heads run on the target's last hidden states (vLLM medusa.py ResidualBlock(config.hidden_size)): a
    4,096-wide head on DeepSeek-V3's 7,168 cannot start; it had planned."""
    code, _, err = run(capsys, "plan", "--target", "deepseek-ai/DeepSeek-V3", "--method", "medusa", "--draft",
                           "sgl-project/SpecForge-llama3-8B-eagle3", "-k", "3", "--gpu", "H200-141GB", "--tp", "8",
                           "--acceptance-rate", "0.5", "--engine-version", "0.32")  # Medusa's last vLLM release
    assert code == 2 and "hidden 4096" in err and "hidden 7168" in err


def test_check_live_names_a_missing_plan_file(capsys):
    code, _, err = run(capsys, "check-live", "--plan", "/nonexistent/plan.json", "--metrics", "x")
    assert code == 2 and "cannot read /nonexistent/plan.json" in err and "4,300 digits" not in err


def test_a_trace_request_naming_a_column_twice_is_refused(tmp_path, capsys):
    """A trace line giving prompt_tokens twice had been read as its later value (json.loads keeps the last); refused
    as the samples reader refuses it. A repeated key of a request's own metadata is left alone."""
    path = tmp_path / "trace.jsonl"
    path.write_text('{"arrival_time": 0, "prompt_tokens": 100, "output_tokens": 10, "prompt_tokens": 5}\n')
    code, out, err = run(capsys, "simulate", "--trace", path, "--format", "json")
    assert code == 2 and out == "" and "'prompt_tokens' twice" in err
    path.write_text('{"arrival_time": 0, "prompt_tokens": 100, "output_tokens": 10, "meta": {"a": 1, "a": 2}}\n')
    code, out, err = run(capsys, "simulate", "--trace", path, "--format", "json")
    assert code in (0, 1), err


def test_a_config_without_its_mlp_width_is_refused(tmp_path, capsys):
    """intermediate_size null had been planned as 4 x hidden (8,192 for Llama-3.2-1B, whose MLP is 8,192 wide by luck
    of its config; LlamaConfig's own default is 11,008): the width has no default to take, so it is asked for."""
    import json as _json

    from specsize.catalog import catalog_entry

    config = dict(catalog_entry("meta-llama/Llama-3.2-1B-Instruct")["config"], intermediate_size=None)
    (tmp_path / "config.json").write_text(_json.dumps(config))
    code, _, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB")
    assert code == 2 and "config.json:intermediate_size" in err and "missing or null" in err


@pytest.mark.parametrize("engine, says", [("vllm", "VLLM_API_KEY"), ("sglang", "--api-key KEY")])
def test_pr_ps01_says_where_the_api_key_the_command_leaves_out_goes(tmp_path, capsys, engine, says):
    """The embedded default protects its inference endpoint with an API key, which the emitted command cannot carry
    (a secret): PR.PS-01 says where it goes - vLLM's environment variable VLLM_API_KEY (vllm/envs.py, read where
    --api-key is not given), SGLang's --api-key flag (no environment variable)."""
    code, out, err = run(capsys, "report", "--format", "markdown", "--no-simulate", "--engine", engine)
    assert code == 0, err
    assert "the emitted command carries no API key" in out and says in out


def test_a_trace_requests_metadata_may_repeat_a_column_name_and_two_names_of_one_column_must_agree(tmp_path, capsys):
    """Only the request's own object is checked: metadata nesting prompt_tokens twice is read. Two names of one
    column (prompt_tokens and input_tokens) that disagree had read the first silently: refused, naming both."""
    path = tmp_path / "trace.jsonl"
    path.write_text('{"arrival_time": 0, "prompt_tokens": 100, "output_tokens": 10, '
                    '"meta": {"prompt_tokens": 1, "prompt_tokens": 2}}\n')
    code, _, err = run(capsys, "simulate", "--trace", path, "--format", "json")
    assert code in (0, 1), err
    path.write_text('{"arrival_time": 0, "prompt_tokens": 100, "input_tokens": 5, "output_tokens": 10}\n')
    code, out, err = run(capsys, "simulate", "--trace", path, "--format", "json")
    assert code == 2 and out == "" and "prompt_tokens and input_tokens give two prompt tokens" in err
