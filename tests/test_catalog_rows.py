"""The packaged catalogs are checked row by row: a bad row is one SpecError naming the file and the row."""

import copy
import json
from importlib import resources

import pytest

from specsize.catalog import all_gpus, catalog_entry, catalog_ids, gpu_ids
from specsize.catalog.gpus import validate_efficiency_rows, validate_gpu_rows
from specsize.catalog.models import validate_model_entry
from specsize.core.errors import SpecError

DATA = resources.files("specsize.catalog") / "data"


def _gpu_rows() -> list[dict]:
    return json.loads((DATA / "gpus.json").read_text())["gpus"]


def _families() -> dict:
    return json.loads((DATA / "efficiency.json").read_text())["families"]


def _model_files() -> list[str]:
    return sorted(entry.name for entry in (DATA / "models").iterdir() if entry.name.endswith(".json"))


def _model(name: str = "Qwen__Qwen3-8B.json") -> dict:
    return json.loads((DATA / "models" / name).read_text())


def _error(validate, *args) -> str:
    with pytest.raises(SpecError) as info:
        validate(*args)
    assert info.value.field == "catalog"
    text = str(info.value)
    assert "\n" not in text  # the project's one-line error
    return text


# --- every shipped row passes


def test_every_shipped_gpu_row_is_valid():
    rows = _gpu_rows()
    by_id = validate_gpu_rows("gpus.json", rows)
    assert list(by_id) == [row["id"] for row in rows] == gpu_ids()
    assert all(g.memory_bytes > 0 for g in all_gpus())


def test_every_shipped_efficiency_row_is_valid():
    families = _families()
    assert validate_efficiency_rows("efficiency.json", families) == families
    assert "unknown" in families


@pytest.mark.parametrize("name", _model_files())
def test_every_shipped_model_row_is_valid(name):
    entry = _model(name)
    assert validate_model_entry(f"models/{name}", entry) is entry
    if entry.get("alias_of"):
        assert entry["alias_of"].lower() in {i.lower() for i in catalog_ids()}


def test_the_loaders_validate_every_row():
    assert len(catalog_ids()) == len(_model_files())
    assert catalog_entry("qwen/qwen3-8b")["id"] == "Qwen/Qwen3-8B"


# --- malformed GPU rows


def _gpus_with(index: int, change) -> list[dict]:
    rows = copy.deepcopy(_gpu_rows())
    change(rows[index])
    return rows


def test_gpu_row_missing_key_names_file_row_and_key():
    rows = _gpus_with(0, lambda row: row.pop("bf16_flops"))
    text = _error(validate_gpu_rows, "gpus.json", rows)
    assert "gpus.json row 'H100-SXM-80GB'" in text and "bf16_flops" in text and "missing" in text


def test_gpu_row_negative_memory():
    rows = _gpus_with(0, lambda row: row.update(memory_gib=-1))
    text = _error(validate_gpu_rows, "gpus.json", rows)
    assert text.startswith("catalog: gpus.json row 'H100-SXM-80GB': memory_gib must be a positive")
    assert "got -1" in text


@pytest.mark.parametrize("value", ["80", "lots", True, None, [80], {"gib": 80}])
def test_gpu_row_wrong_type_where_a_number_belongs(value):
    rows = _gpus_with(1, lambda row: row.update(memory_bandwidth_bytes_s=value))
    text = _error(validate_gpu_rows, "gpus.json", rows)
    assert "gpus.json row 'H100-PCIe-80GB'" in text and "memory_bandwidth_bytes_s" in text


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 0, 0.0])
def test_gpu_row_nan_infinite_or_zero(value):
    rows = _gpus_with(2, lambda row: row.update(bf16_flops=value))
    text = _error(validate_gpu_rows, "gpus.json", rows)
    assert "gpus.json row 'H200-141GB'" in text and "bf16_flops" in text and f"got {value!r}" in text


def test_gpu_row_nan_from_json_text():
    # json.loads accepts the NaN literal, so a hand-edited file can carry one
    rows = json.loads(json.dumps(_gpu_rows()).replace('"memory_gib": 79.19', '"memory_gib": NaN', 1))
    text = _error(validate_gpu_rows, "gpus.json", rows)
    assert "gpus.json row 'H100-SXM-80GB': memory_gib" in text and "nan" in text


def test_gpu_row_fp8_may_be_null_but_not_negative():
    rows = _gpus_with(0, lambda row: row.update(fp8_flops=None))
    validate_gpu_rows("gpus.json", rows)
    rows = _gpus_with(0, lambda row: row.update(fp8_flops=-5.0))
    assert "fp8_flops" in _error(validate_gpu_rows, "gpus.json", rows)


def test_gpu_row_without_id_is_named_by_position():
    rows = _gpus_with(3, lambda row: row.pop("id"))
    text = _error(validate_gpu_rows, "gpus.json", rows)
    assert "gpus.json row #4" in text and "'id'" in text


def test_gpu_row_that_is_not_an_object():
    rows = copy.deepcopy(_gpu_rows()) + ["H100"]
    assert f"gpus.json row #{len(rows)}" in _error(validate_gpu_rows, "gpus.json", rows)


def test_gpu_rows_duplicate_id_ignoring_case():
    rows = _gpus_with(1, lambda row: row.update(id="h100-sxm-80gb"))
    text = _error(validate_gpu_rows, "gpus.json", rows)
    assert "row 'h100-sxm-80gb'" in text and "duplicate" in text


def test_gpu_rows_must_be_a_list():
    assert "gpus.json" in _error(validate_gpu_rows, "gpus.json", {"H100": {}})


def test_gpu_row_names_the_file_it_was_given():
    rows = _gpus_with(0, lambda row: row.update(name=""))
    assert _error(validate_gpu_rows, "my-gpus.json", rows).startswith("catalog: my-gpus.json row 'H100-SXM-80GB'")


# --- malformed efficiency rows


def _families_with(family: str, change) -> dict:
    families = copy.deepcopy(_families())
    change(families[family])
    return families


def test_efficiency_row_missing_key():
    text = _error(validate_efficiency_rows, "efficiency.json", _families_with("ampere", lambda r: r.pop("compute")))
    assert "efficiency.json row 'ampere'" in text and "'compute'" in text


def test_efficiency_row_fraction_above_one_or_nan():
    for value in (1.5, float("nan"), "0.8"):
        families = _families_with("hopper", lambda r, v=value: r.update(memory=v))
        text = _error(validate_efficiency_rows, "efficiency.json", families)
        assert "efficiency.json row 'hopper': memory must be" in text


def test_efficiency_row_unknown_key_would_break_the_dataclass():
    text = _error(validate_efficiency_rows, "efficiency.json", _families_with("ada", lambda r: r.update(speed=2)))
    assert "efficiency.json row 'ada'" in text and "'speed'" in text


def test_efficiency_needs_the_unknown_fallback():
    families = copy.deepcopy(_families())
    del families["unknown"]
    assert "'unknown'" in _error(validate_efficiency_rows, "efficiency.json", families)


# --- malformed model rows

NAME = "models/Qwen__Qwen3-8B.json"
ROW = "models/Qwen__Qwen3-8B.json row 'Qwen/Qwen3-8B'"


def _model_with(change) -> dict:
    entry = copy.deepcopy(_model())
    change(entry)
    return entry


def test_model_row_missing_config_key():
    text = _error(validate_model_entry, NAME, _model_with(lambda e: e["config"].pop("num_hidden_layers")))
    assert ROW in text and "config.num_hidden_layers" in text


@pytest.mark.parametrize("value", [-1, 0, "36", 36.5, float("nan"), None, True])
def test_model_row_bad_layer_count(value):
    text = _error(validate_model_entry, NAME, _model_with(lambda e: e["config"].update(num_hidden_layers=value)))
    assert ROW in text and "config.num_hidden_layers must be a positive integer" in text


def test_model_row_optional_size_checked_when_set():
    text = _error(validate_model_entry, NAME, _model_with(lambda e: e["config"].update(head_dim=-128)))
    assert ROW in text and "config.head_dim" in text
    validate_model_entry(NAME, _model_with(lambda e: e["config"].update(head_dim=None)))


def test_model_row_text_config_is_checked():
    name = "models/google__gemma-3-27b-it.json"
    entry = _model(name.split("/")[1])
    assert isinstance(entry["config"].get("text_config"), dict)
    entry["config"]["text_config"]["vocab_size"] = float("nan")
    text = _error(validate_model_entry, name, entry)
    assert "row 'google/gemma-3-27b-it'" in text and "config.text_config.vocab_size" in text


def test_model_row_missing_id_or_source():
    assert f"{NAME} row (no id)" in _error(validate_model_entry, NAME, _model_with(lambda e: e.pop("id")))
    assert "'source'" in _error(validate_model_entry, NAME, _model_with(lambda e: e.pop("source")))


def test_model_row_id_must_match_its_file_name():
    text = _error(validate_model_entry, NAME, _model_with(lambda e: e.update(id="Qwen/Qwen3-9B")))
    assert "row 'Qwen/Qwen3-9B'" in text and "file name" in text


def test_model_row_config_must_be_an_object():
    text = _error(validate_model_entry, NAME, _model_with(lambda e: e.update(config=["LlamaForCausalLM"])))
    assert ROW in text and "config must be a JSON object" in text


def test_model_row_params_published_shape():
    text = _error(validate_model_entry, NAME, _model_with(lambda e: e.update(params_published={"value": "8B"})))
    assert ROW in text and "params_published.source" in text
    text = _error(validate_model_entry, NAME, _model_with(lambda e: e.update(params_published="8B")))
    assert "params_published must be a JSON object" in text
