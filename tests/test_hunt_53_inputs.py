"""Hunt 53: inputs and the CLI contract. Each test is a value a user could type or a file could hold that had been
taken and dropped (or misread, or waited on), with the behaviour worked out by hand."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specsize.inputs.fields import coerce
from specsize.inputs.request import FIELDS, info
from helpers import chain_rate, run_cli as run

LLAMA8B = ["--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB"]
EAGLE3 = [*LLAMA8B, "--method", "eagle3", "-k", "3", "--acceptance-rate", "0.7"]


def _cli(*argv: str, timeout: float = 60):
    """specsize in a process of its own: a command that waits forever fails the test by its timeout, not the run."""
    return subprocess.run([sys.executable, "-m", "specsize.cli.main", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout)


def _one_error_line(err: str, field: str) -> bool:
    lines = err.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith(f"specsize: error: {field}:") and "Traceback" not in err


# --- search specs: a drafter's method as parsed, and its settings that nothing reads --------------------------------

def _spec(tmp_path: Path, drafters: str) -> Path:
    path = tmp_path / "search.yaml"
    path.write_text(f"""target: meta-llama/Llama-3.1-8B-Instruct
drafters:
{drafters}
gpus:
  - {{gpu: H100-SXM-80GB, counts: [1, 2]}}
tp: [1]
max_num_seqs: [64]
workload:
  prompt_tokens: {{p50: 1500, p99: 8000}}
  output_tokens: {{p50: 300, p99: 1200}}
  concurrency: 8
slo:
  tpot_p99_ms: 40
""")
    return path


@pytest.mark.parametrize("written", ["NONE", "None", "' none '"])
def test_a_search_drafter_of_method_none_in_any_spelling_is_method_none(tmp_path, capsys, written):
    """`method: NONE` (SpecMethod reads it as none) had been compared as text with "none": it passed the checks of a
    method, kept its acceptance and its ks [3, 4], and the one plain server was screened twice, as "NONE k=3" and
    "NONE k=4". A none drafter takes no acceptance and no ks, whatever its spelling."""
    spec = _spec(tmp_path, f"  - {{method: {written}, acceptance_rate: 0.7, ks: [3, 4]}}")
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 2 and out == "" and _one_error_line(err, "drafters") and "method none takes no" in err


def test_a_search_drafter_with_a_null_method_is_the_plain_server(tmp_path, capsys):
    """`method: null` is no method: the plain server, screened once per GPU count. By hand: 2 counts x 1 TP x 1 KV dtype
    x 1 max_num_seqs x 1 k (none has no k) = 2 configurations. It had been read as the text "None" and asked for an
    acceptance ("None: give exactly one of ...")."""
    spec = _spec(tmp_path, "  - {method: null}")
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    data = json.loads(out)
    assert code == 0, err
    assert data["screened"] == 2


def test_a_search_drafter_method_in_capitals_is_labelled_as_the_method(tmp_path, capsys):
    """`method: EAGLE3` is EAGLE-3 (as SpecMethod reads it): its label names the method as specsize spells it."""
    spec = _spec(tmp_path, "  - {method: EAGLE3, acceptance_rate: 0.7, ks: [2]}")
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["cheapest"]["drafter"].startswith("eagle3 ")


@pytest.mark.parametrize("drafter,field", [
    # EAGLE-3 heads, MTP and n-gram run at the target's TP: a draft_tp for them had been dropped without a word
    ("{method: eagle3, acceptance_rate: 0.7, draft_tp: 4}", "drafters.draft_tp"),
    ("{method: ngram, acceptance_rate: 0.7, draft_tp: 8}", "drafters.draft_tp"),
    ("{method: none, draft_tp: 8}", "drafters.draft_tp"),
    # an acceptance rate is per token at any k: a measured_at_k beside it (and not a mean length) was dropped
    ("{method: eagle3, acceptance_rate: 0.7, measured_at_k: 3}", "drafters.measured_at_k"),
    ("{method: none, measured_at_k: 3}", "drafters"),
    ("{method: eagle3, acceptance_rate: 0.7, label: [a]}", "drafters.label"),  # had been labelled "['a']"
])
def test_search_drafter_settings_that_nothing_reads_are_refused(tmp_path, capsys, drafter, field):
    code, out, err = run(capsys, "search", _spec(tmp_path, f"  - {drafter}"), "--no-simulate", "--format", "json")
    assert code == 2 and out == "" and _one_error_line(err, field), err


def test_a_mean_length_with_its_k_and_a_draft_model_sharded_are_still_read(tmp_path, capsys):
    """What the checks above leave alone: a mean accepted length with the k it was measured at, and draft_tp 1."""
    spec = _spec(tmp_path, "  - {method: eagle3, mean_accepted_length: 2.5, measured_at_k: 3, ks: [3]}\n"
                           "  - {method: draft_model, draft: meta-llama/Llama-3.2-1B-Instruct, acceptance_rate: 0.7, "
                           "draft_tp: 1, ks: [3]}")
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    # 2 counts x (1 k of each of 2 drafters) = 4 configurations
    assert code == 0 and json.loads(out)["screened"] == 4, err


# --- speedup candidates -------------------------------------------------------------------------------------------

SPEEDUP_70B = ["speedup", "--target", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM-80GB", "--tp", "4",
               "--method", "eagle3", "-k", "3", "--acceptance-rate", "0.7", "--batch-size", "1", "--format", "json"]


@pytest.mark.parametrize("candidate,field", [
    ("method=eagle3,acceptance=0.7,draft_tp=4", "candidate.draft_tp"),  # a head runs at the target's TP
    ("method=ngram,acceptance=0.7,draft_tp=4", "candidate.draft_tp"),  # n-gram drafts on the CPU
    ("method=eagle3,draft=,acceptance=0.7", "candidate.draft"),  # an unset $DRAFT: had priced the standard head
])
def test_candidate_settings_that_nothing_reads_are_refused(capsys, candidate, field):
    code, out, err = run(capsys, *SPEEDUP_70B, "--candidate", candidate)
    assert code == 2 and out == "" and _one_error_line(err, field), err


def test_a_draft_model_candidate_sharded_over_the_targets_group_is_priced(capsys):
    """draft_tp 4 is the draft model's own TP (vLLM runs it on one GPU or the target's TP group): still taken."""
    code, out, err = run(capsys, *SPEEDUP_70B, "--candidate",
                         "method=draft_model,draft=meta-llama/Llama-3.2-1B-Instruct,acceptance=0.7,k=3,draft_tp=4")
    assert code == 0, err
    data = json.loads(out)
    assert data["method"] == "eagle3" and [c["method"] for c in data["candidates"]] == ["draft_model"]


# --- -0 is 0 ------------------------------------------------------------------------------------------------------

def test_a_headroom_policy_of_minus_zero_is_a_policy_of_zero(capsys):
    """`--headroom -0` had been kept as IEEE -0.0: the verdict line read "policy -0%" and the JSON "headroom_policy":
    -0.0. Zero is zero."""
    code, out, _ = run(capsys, "plan", *LLAMA8B, "--headroom", "-0", "--format", "json")
    policy = json.loads(out)["headroom_policy"]
    assert code == 0 and policy == 0 and math.copysign(1.0, policy) == 1.0
    code, out, _ = run(capsys, "plan", *LLAMA8B, "--headroom", "-0.0")
    assert "policy 0%" in out and "-0%" not in out


def test_every_number_field_reads_minus_zero_as_zero():
    """Over the field table: each number field that takes 0 gives +0.0 for "-0", "-0.0" and -0.0."""
    zero_fields = [name for name in FIELDS if info(name).kind == "float" and info(name).minimum is not None
                   and info(name).minimum <= 0 and not (info(name).minimum == 0 and info(name).exclusive_minimum)
                   and (info(name).maximum is None or info(name).maximum >= 0)]
    assert "headroom" in zero_fields and "acceptance_rate" in zero_fields
    for name in zero_fields:
        for raw in ("-0", "-0.0", -0.0):
            value = coerce(name, info(name), raw)
            assert value == 0 and math.copysign(1.0, value) == 1.0, (name, raw)


# --- flags a command takes and would not read ---------------------------------------------------------------------

@pytest.mark.parametrize("flags,name", [(["--concurrency", "64"], "concurrency"),
                                        (["--burst-factor", "3"], "burst_factor"), (["--percentile", "max"], "percentile"),
                                        (["--prompt-tokens", "p50=100,p99=200", "--output-tokens", "p50=10,p99=20"],
                                         "prompt_tokens, output_tokens"),
                                        (["--headroom", "0.5"], "headroom"), (["--tpot-slo-ms", "10"], "tpot_slo_ms"),
                                        (["--acceptance-spread", "0.1"], "acceptance_spread")])
def test_speedup_says_which_given_flags_its_table_does_not_read(capsys, flags, name):
    """speedup prices --batch-size x -k at --context-len: a workload, a headroom policy, a TPOT target or an acceptance
    spread given to it had been accepted and changed nothing, without a word (the same JSON, byte for byte). The flags
    stay (one set of flags serves plan, simulate and speedup, as one deployment file does); a note names them, and the
    table is the one without them."""
    base = ["speedup", *EAGLE3, "--batch-size", "1,8", "--format", "json"]
    code, out, err = run(capsys, *base)
    plain = json.loads(out)
    code_with, out_with, err_with = run(capsys, *base, *flags)
    given = json.loads(out_with)
    assert code == code_with == 0, err_with
    assert given["rows"] == plain["rows"]
    added = [note for note in given["notes"] if note not in plain["notes"]]
    assert len(added) == 1 and added[0].startswith(f"{name} not used: speedup's table is --batch-size x -k")


def test_speedup_says_nothing_of_a_deployment_files_workload(tmp_path, capsys):
    """A deployment file is shared by the commands: its workload and headroom are the deployment's description, not
    a question put to speedup. By hand: one batch size x one k = 1 row, and no note."""
    path = tmp_path / "d.yaml"
    path.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nmethod: eagle3\n"
                    "num_speculative_tokens: 3\nacceptance_rate: 0.7\nheadroom: 0.3\n"
                    "workload: {prompt_tokens: {p50: 100, p99: 200}, output_tokens: {p50: 10, p99: 20}, concurrency: 4}\n")
    code, out, err = run(capsys, "speedup", path, "--batch-size", "1", "--format", "json")
    data = json.loads(out)
    assert code == 0, err
    assert len(data["rows"]) == 1 and not any("not used" in note for note in data["notes"])


@pytest.mark.parametrize("argv,field", [
    (["plan", *LLAMA8B, "--duration", "60"], "duration"),
    (["plan", *LLAMA8B, "--sim-duration", "60"], "duration"),
    (["plan", *LLAMA8B, "--seed", "7"], "seed"),
    (["report", *LLAMA8B, "--no-simulate", "--seed", "7", "--format", "markdown"], "seed"),
])
def test_a_simulation_setting_where_nothing_simulates_is_refused(capsys, argv, field):
    """plan runs no simulation without --simulate: its --duration and --seed had been taken and dropped."""
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and _one_error_line(err, field), err


def test_check_with_a_seed_and_no_simulation_is_refused(tmp_path, capsys):
    path = tmp_path / "d.yaml"
    path.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\n")
    code, out, err = run(capsys, "check", path, "--seed", "7", "--format", "json")
    assert code == 2 and out == "" and _one_error_line(err, "seed"), err


def test_plan_simulate_still_takes_its_duration_and_seed(capsys):
    """The burst run's 20 s of arrivals at seed 7: the JSON's simulation says so."""
    code, out, err = run(capsys, "plan", *EAGLE3, "--simulate", "--duration", "20", "--seed", "7", "--format", "json")
    assert code == 0, err
    simulation = json.loads(out)["simulation"]
    assert simulation["seed"] == 7 and " for 20 s" in simulation["scenario"]


# --- a pipe where a database goes; a NaN where a timeout goes ----------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
@pytest.mark.parametrize("argv,field", [
    (["calibrations", "--store", "{fifo}"], "store"),
    (["calibrations", "--store", "{fifo}", "add", "--tag", "t", "--acceptance-rate", "0.5", "--source", "s"], "store"),
    (["plan", *EAGLE3[:-2], "--acceptance-from-store", "t", "--store", "{fifo}"], "store"),
    (["users", "list", "--db", "{fifo}"], "db"),
])
def test_a_named_pipe_given_as_a_database_is_an_error_not_a_hang(tmp_path, argv, field):
    """SQLite opened the pipe and waited for a writer: each of these hung until killed."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = _cli(*(a.format(fifo=fifo) for a in argv))
    assert done.returncode == 2 and _one_error_line(done.stderr, field), done.stderr


def test_serve_refuses_a_job_timeout_of_nan():
    """click's FloatRange(1, 86400) lets nan through (every comparison with it is false): the server had started."""
    done = _cli("serve", "--job-timeout", "nan", "--port", "1", timeout=30)
    assert done.returncode == 2 and _one_error_line(done.stderr, "job_timeout"), done.stderr


# --- a mean accepted length stays measured at the k it was given beside --------------------------------------------



@pytest.fixture
def measured_at_3(tmp_path) -> Path:
    """A deployment at k = 3 whose measured mean accepted length is 2.5 (no measured_at_k: the deployment's k, 3)."""
    path = tmp_path / "eagle3-k3.yaml"
    path.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nmethod: eagle3\n"
                    "num_speculative_tokens: 3\nmean_accepted_length: 2.5\n")
    return path


def test_a_flag_that_changes_k_leaves_the_files_mean_length_at_the_files_k(measured_at_3, capsys):
    """`plan FILE -k 2`: the file's 2.5 was measured at its k = 3, so a = 0.6914 and a pass at k = 2 gains
    1 + a + a^2 = 2.169 tokens. It had been read as measured at k = 2: a = 0.8229 and 2.5 tokens a pass."""
    a = chain_rate(2.5, 3)
    assert a == pytest.approx(0.6914, abs=1e-4)
    code, out, err = run(capsys, "plan", measured_at_3, "-k", "2", "--format", "json")
    data = json.loads(out)
    assert code == 0, err
    assert data["inputs"]["acceptance_rate"] == pytest.approx(a, rel=1e-6)
    assert data["perf"]["tokens_per_pass"] == pytest.approx(1 + a + a * a, rel=1e-6)


def test_speedup_tables_do_not_depend_on_the_order_of_the_k_list(measured_at_3, capsys):
    """`speedup FILE -k 2,3,4` had read the file's mean as measured at k = 2 (the list's first: a = 0.82, k = 3 at
    2.19x) and `-k 3,2,4` at k = 3 (a = 0.69, 1.79x): one measurement, two answers. Both are the file's k = 3 now."""
    tables = []
    for ks in ("2,3,4", "3,2,4"):
        code, out, err = run(capsys, "speedup", measured_at_3, "-k", ks, "--batch-size", "1", "--format", "json")
        data = json.loads(out)
        assert code == 0, err
        assert data["acceptance_rate"] == pytest.approx(chain_rate(2.5, 3), rel=1e-6)
        tables.append(sorted((row["k"], row["speedup"]) for row in data["rows"]))
    assert [k for k, _ in tables[0]] == [k for k, _ in tables[1]] == [2, 3, 4]
    assert [x for _, x in tables[0]] == pytest.approx([x for _, x in tables[1]])


def test_a_mean_length_given_with_the_new_k_is_measured_at_it(measured_at_3, capsys):
    """A mean given beside the flag's k is that k's: 2.5 at k = 2 is a = 0.8229 (1 + a + a^2 = 2.5)."""
    code, out, err = run(capsys, "plan", measured_at_3, "-k", "2", "--mean-accepted-length", "2.5", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["inputs"]["acceptance_rate"] == pytest.approx(chain_rate(2.5, 2), rel=1e-6)


def test_request_replace_and_a_study_axis_of_k_keep_the_mean_at_its_k(measured_at_3, tmp_path):
    from specsize import load_request
    from specsize.inputs.study import read_study

    request = load_request(measured_at_3)
    assert request.measured_at_k is None  # alone, the file's mean is at the deployment's k, 3
    assert request.replace(num_speculative_tokens=2).measured_at_k == 3
    assert request.replace(num_speculative_tokens=2, mean_accepted_length=2.2).measured_at_k is None
    study = tmp_path / "study.yaml"
    study.write_text("base: {target: meta-llama/Llama-3.1-8B-Instruct, gpu: H100-SXM-80GB, method: eagle3, "
                     "num_speculative_tokens: 3, mean_accepted_length: 2.5}\naxes:\n  num_speculative_tokens: [2, 4]\n")
    cells = list(read_study(study).cells())
    assert [(c.values["num_speculative_tokens"], c.values["measured_at_k"]) for c in cells] == [(2, 3), (4, 3)]


# --- spellings the other form already read ----------------------------------------------------------------------------

def test_length_percentiles_in_a_file_read_as_the_flag_reads_them(tmp_path, capsys):
    """`--prompt-tokens P50=100,P99=200` was read (names lower-cased) while a file's {P50: 100, P99: 200} was an unknown
    key; p95 and max missing are taken at p99, the conservative reading: 100 / 200 / 200 / 200."""
    path = tmp_path / "d.yaml"
    path.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nworkload:\n"
                    "  prompt_tokens: {P50: 100, P99: 200}\n  output_tokens: {p50: 10, p99: 20}\n")
    code, out, err = run(capsys, "plan", path, "--format", "json")
    assert code == 0, err
    prompt = json.loads(out)["inputs"]["workload"]["prompt_tokens"]
    assert (prompt["p50"], prompt["p95"], prompt["p99"], prompt["max"]) == (100, 200, 200, 200)
    path.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nworkload:\n"
                    "  prompt_tokens: {P99: 100, p99: 200, p50: 10}\n  output_tokens: {p50: 10, p99: 20}\n")
    code, out, err = run(capsys, "plan", path, "--format", "json")
    assert code == 2 and out == "" and _one_error_line(err, "prompt_tokens") and "p99 given twice" in err


def test_an_at_file_with_a_space_after_the_at_names_the_file(tmp_path, capsys, monkeypatch):
    """`--prompt-tokens "@ lengths.txt"` had looked for " lengths.txt". Samples 100, 200, 300: p50 200 (nearest rank)
    and p99 300."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lengths.txt").write_text("100\n200\n300\n")
    code, out, err = run(capsys, "plan", *LLAMA8B, "--prompt-tokens", "@ lengths.txt", "--output-tokens", "10",
                         "--format", "json")
    assert code == 0, err
    prompt = json.loads(out)["inputs"]["workload"]["prompt_tokens"]
    assert (prompt["p50"], prompt["p99"]) == (200, 300)


@pytest.mark.parametrize("key,flag", [("rate", "--rate"), ("duration", "--duration"), ("seed", "--seed")])
def test_a_command_line_setting_written_in_a_deployment_file_says_so(tmp_path, capsys, key, flag):
    path = tmp_path / "d.yaml"
    path.write_text(f"target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\n{key}: 5\n")
    code, out, err = run(capsys, "simulate", path, "--format", "json")
    assert code == 2 and out == "" and _one_error_line(err, key) and f"the command line's {flag}" in err


@pytest.mark.parametrize("argv,field", [
    (["--tag", "t", "--method", "none", "--acceptance-rate", "0.7", "--source", "s"], "method"),
    (["--tag", " ", "--acceptance-rate", "0.7", "--source", "s"], "tag"),
    (["--tag", "t", "--acceptance-rate", "0.7", "--source", " "], "source"),
])
def test_calibrations_add_refuses_a_row_nothing_can_read(tmp_path, capsys, argv, field):
    """An acceptance of method none (no plan without a drafter reads one), or under a blank tag or source, had been
    recorded as observation #1; now refused, and no store is made for it."""
    store = tmp_path / "cal.sqlite"
    code, out, err = run(capsys, "calibrations", "--store", store, "add", *argv)
    assert code == 2 and out == "" and _one_error_line(err, field), err
    assert not store.exists()


# --- null is unset: search specs and studies ------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["headroom: null", "gpus_per_node: null", "finalists: null", "simulate_seconds: null",
                                  "engine: null", "ks: null"])
def test_a_null_in_a_search_spec_is_the_default(tmp_path, capsys, line):
    """`headroom:` with nothing after it (YAML's null) had reached the arithmetic: exit 4 (internal error). Null is
    unset, as in a deployment file: the search runs with the default. By hand: 2 GPU counts x the drafter's one k = 2
    configurations (its ks: [2] is its own, so the spec's ks do not enter)."""
    spec = _spec(tmp_path, "  - {method: eagle3, acceptance_rate: 0.7, ks: [2]}")
    spec.write_text(spec.read_text() + line + "\n")
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["screened"] == 2


def test_null_gpu_counts_are_the_default_counts(tmp_path, capsys):
    """`counts: null` is the default counts 1, 2, 4, 8 (it had been [1], the fallback of a missing list): by hand,
    4 counts x 1 k = 4 configurations."""
    spec = _spec(tmp_path, "  - {method: eagle3, acceptance_rate: 0.7, ks: [2]}")
    spec.write_text(spec.read_text().replace("counts: [1, 2]", "counts: null"))
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["screened"] == 4


@pytest.mark.parametrize("line", ["tp: [1, null]", "max_num_seqs: [null]"])
def test_a_null_in_a_search_list_is_refused_by_name(tmp_path, capsys, line):
    spec = _spec(tmp_path, "  - {method: eagle3, acceptance_rate: 0.7, ks: [2]}")
    key = line.split(":")[0]
    text = "\n".join(x for x in spec.read_text().splitlines() if not x.startswith(key + ":"))
    spec.write_text(text + "\n" + line + "\n")
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 2 and out == "" and _one_error_line(err, key), err


def test_a_null_simulate_duration_in_a_study_is_the_studys_30_s(tmp_path):
    """`compute: {simulate: {duration: null}}` had run every cell for the field's 300 s (api.simulate(duration=None)
    keeps the default), not the study's documented 30 s; `seed: null` had been a seed of None."""
    from specsize.inputs.study import read_study

    path = tmp_path / "study.yaml"
    path.write_text("base: {target: meta-llama/Llama-3.1-8B-Instruct, gpu: H100-SXM-80GB}\naxes:\n  tp: [1]\n"
                    "compute: {speedup: null, simulate: {duration: null, no_compare: null, when: null}}\nseed: null\n")
    study = read_study(path)
    assert (study.compute.duration_s, study.compute.no_compare, study.compute.simulate_on) == (30.0, False,
                                                                                                "fits_or_thin")
    assert study.compute.speedup is True and study.seed == 0
