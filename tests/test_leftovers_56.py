"""Leftovers of hunt 56: the MTP-per-architecture release table beside the method table (and the launch header it
narrows), the Ray backend a vLLM replica across nodes needs in its command, PP in the search rows, check-live's blank
--record, a speed-up just below 1 in the planner's warnings, study values that are one value spelt twice, HEAD on the
service's GET routes, and a store path in a folder that does not exist. Expected values worked by hand or read in the
engines' sources (cited per test)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import specsize
from helpers import run_cli as run
from test_hunt_56_nodes import SEARCH_405B as NODES_SEARCH_405B
from test_hunt_56_nodes import _nemotron_with_mtp
from specsize.core.errors import SpecError
from specsize.core.speculation import SpecMethod

FOUR_O_FIVE_B = "meta-llama/Llama-3.1-405B-Instruct"
ENVELOPE = dict(prompt_tokens={"p50": 1500, "p95": 4000, "p99": 8000, "max": 24000},
                output_tokens={"p50": 300, "p95": 800, "p99": 1200, "max": 2000})
VLLM_RANGE = "0.11 - 0.33 (vllm serve / python -m vllm.entrypoints.openai.api_server)"


# --- 1. the MTP drafter of each architecture, beside the method's own releases ---------------------------------------


def test_the_mtp_architecture_table_has_one_owner_beside_the_method_table():
    from specsize.engines import methods
    from specsize.inputs import resolve

    assert resolve.check_mtp_release is methods.check_mtp_release  # inputs calls the engines' one rule
    assert not hasattr(resolve, "MTP_ARCH_RELEASES")
    assert methods.MTP_ARCH_RELEASES[("vllm", "nemotron_h")][0] == (0, 17, 0)


def test_the_launch_header_of_an_mtp_command_starts_at_the_architectures_first_release(tmp_path, capsys):
    """vLLM maps nemotron_h to nemotron_h_mtp in SpeculativeConfig.hf_config_override from 0.17.0 (absent in 0.16.0):
    the emitted command's header had said "0.11 - 0.32", the flags' checked range, of which 0.11 - 0.16 refuse it.
    MTP itself is vLLM's from 0.7.3, so the header starts at 0.17; SGLang's NemotronHForCausalLMMTP from 0.5.8."""
    from specsize.engines.methods import launch_versions

    assert launch_versions("vllm", SpecMethod.MTP, VLLM_RANGE, model_type="nemotron_h") == \
        "0.17 - 0.33 (vllm serve / python -m vllm.entrypoints.openai.api_server)"
    sglang = "0.4 - 0.5.x (python -m sglang.launch_server)"
    assert launch_versions("sglang", SpecMethod.MTP, sglang, model_type="nemotron_h") == \
        "0.5.8 - 0.5.x (python -m sglang.launch_server)"
    # an architecture whose MTP drafter predates the checked range (GLM-4.5: 0.10.0), or DeepSeek-V3 (the method's
    # own, no entry), keeps the range; a flag floor above the architecture's wins
    assert launch_versions("vllm", SpecMethod.MTP, VLLM_RANGE, model_type="glm4_moe") == VLLM_RANGE
    assert launch_versions("vllm", SpecMethod.MTP, VLLM_RANGE, model_type="deepseek_v3") == VLLM_RANGE
    assert launch_versions("sglang", SpecMethod.MTP, sglang, since="0.5.9", model_type="nemotron_h") == \
        "0.5.9 - 0.5.x (python -m sglang.launch_server)"
    assert launch_versions("vllm", SpecMethod.EAGLE3, VLLM_RANGE, model_type="nemotron_h") == VLLM_RANGE

    config = _nemotron_with_mtp(tmp_path)
    code, out, err = run(capsys, "plan", "--target", str(config), "--method", "mtp", "--gpu", "H100-SXM-80GB",
                         "--acceptance-rate", "0.6", "--emit", "vllm")
    assert "Traceback" not in err
    assert out.splitlines()[0] == "# vllm 0.17 - 0.33 (vllm serve / python -m vllm.entrypoints.openai.api_server)"


# --- 2. a vLLM replica across nodes: the Ray backend in its command --------------------------------------------------

def test_a_vllm_command_for_a_replica_across_nodes_carries_the_ray_backend():
    """TP 8 x PP 2 is 16 GPUs a replica, two 8-GPU nodes. vLLM's default backend is multiprocessing on one node; from
    0.11.1 a world size above the node's GPUs is refused without --distributed-executor-backend ray (vllm 0.32
    config/parallel.py ParallelConfig.__post_init__: "World size (16) is larger than the number of available GPUs (8)
    in this node ... set '--distributed-executor-backend ray'"). The note had told to add it; the command now has it,
    in its flags and its --config YAML, and a replica on one node (TP 8) does not."""
    from specsize.engines.emit import engine_flags

    r = specsize.plan(target=FOUR_O_FIVE_B, gpu="H100-SXM-80GB", tp=8, pp=2, concurrency=16, **ENVELOPE)
    assert r.placement.nodes_per_replica == 2
    vllm = next(c for c in r.commands if c.engine == "vllm")
    at = vllm.argv.index("--distributed-executor-backend")
    assert vllm.argv[at + 1] == "ray"
    assert "distributed-executor-backend: ray" in vllm.config_yaml.splitlines()
    assert "--distributed-executor-backend" in engine_flags()["vllm"]["flags"]
    note = next(w for w in r.warnings if w.startswith("a replica spans 2 nodes: the vllm command"))
    assert "carries --distributed-executor-backend ray" in note
    sglang = next((c for c in r.commands if c.engine == "sglang"), None)
    assert sglang is None or "--distributed-executor-backend" not in sglang.argv  # SGLang: --nnodes, the note's

    one_node = specsize.plan(target="meta-llama/Llama-3.1-70B-Instruct", gpu="H100-SXM-80GB", tp=8, concurrency=16,
                             **ENVELOPE)
    assert one_node.placement.nodes_per_replica == 1
    assert all("--distributed-executor-backend" not in c.argv for c in one_node.commands)


# --- 3. PP in the search rows -----------------------------------------------------------------------------------------

# the multi-node search spec of tests/test_hunt_56_nodes.py with its pipeline stages at 2 (8 GPUs cannot hold a
# 16-GPU replica: only the 16-GPU configurations are screened)
SEARCH_405B = NODES_SEARCH_405B % "pp: [2]"


def test_a_search_row_shows_its_pipeline_stages(tmp_path, capsys):
    """16 H100s at TP 8 x PP 2 are one replica: the row had read "16 x H100-SXM-80GB TP=8 x1", 8 GPUs unaccounted
    for. The JSON configuration carries pp (docs/json.md lists it), and `search --help` names PP in the space."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SEARCH_405B)
    code, out, err = run(capsys, "search", str(spec), "--no-simulate")
    assert "Traceback" not in err
    rows = [line for line in out.splitlines() if "16 x H100-SXM-80GB" in line]
    assert rows and all("TP=8 x PP=2 x1," in line for line in rows)
    code, out, err = run(capsys, "search", str(spec), "--no-simulate", "--format", "json")
    found = json.loads(out)
    assert found["pareto"] and all((c["tp"], c["pp"], c["replicas"], c["gpus"]) == (8, 2, 1, 16)
                                   for c in found["pareto"])
    documented = (Path(__file__).resolve().parents[1] / "docs" / "json.md").read_text()
    configuration = documented[documented.index("A configuration: `gpu`"):].split("\n\n")[0]
    from specsize.planner.search import Candidate

    assert all(f"`{field.name}`" in configuration for field in dataclasses.fields(Candidate))
    code, out, _ = run(capsys, "search", "--help")
    assert "TP x PP x replicas" in " ".join(out.split())


# --- 4. check-live --record with a blank tag ------------------------------------------------------------------------

@pytest.mark.parametrize("tag", ["", " ", "\t"])
def test_check_live_refuses_a_blank_record_tag(tmp_path, capsys, tag):
    """`--record ""` had recorded nothing without a word (`if record:`) and `--record " "` a row under a blank tag; the
    service's POST /api/v1/check-live refuses both ("an empty tag records nothing"). Refused before anything is read,
    and no store is made."""
    store = tmp_path / "store.sqlite"
    code, out, err = run(capsys, "check-live", "--plan", str(tmp_path / "plan.json"), "--metrics", "/dev/null",
                         "--record", tag, "--store", str(store))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("specsize: error: record: an empty tag records nothing")
    assert not store.exists()


# --- 5. a speed-up just below 1 in the planner's words --------------------------------------------------------------

def test_the_planners_speedup_warnings_keep_a_slowdown_below_one(monkeypatch):
    """0.998 is a slowdown: ":.2f" had printed "speculation is a slowdown (1.00x)". The rule is the core's
    (core.ratios.speedup_text, shared with the reports): the fewest decimals from 2 that keep the figure on its side
    of 1: 0.998 -> "0.998x" ("1.00" is not below 1, "0.998" is), 0.99996 -> "0.99996x" ("1.000", "1.0000" are not),
    1.15 -> "1.15x"."""
    from specsize.core.ratios import beside_one, speedup_text
    from specsize.planner import plan as plan_module

    assert (speedup_text(0.998), speedup_text(0.99996), speedup_text(1.15), beside_one(1.003)) == \
        ("0.998x", "0.99996x", "1.15x", "1.003")
    real = plan_module.summarize

    def just_below_one(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), speedup=0.998)

    monkeypatch.setattr(plan_module, "summarize", just_below_one)
    r = specsize.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", method="ngram",
                      acceptance_rate=0.4, num_speculative_tokens=3, concurrency=8, **ENVELOPE)
    slow = [w for w in r.warnings if "speculation is a slowdown" in w]
    assert slow and "(0.998x)" in slow[0] and "1.00x" not in " ".join(r.warnings)
    thin = [w for w in r.warnings if w.startswith("the speed-up at")]
    assert not thin or "0.998x" in thin[0]


def test_the_speedup_grids_thin_gain_note_keeps_a_slowdown_below_one():
    """planner.speedup.thin_gain_notes names the cells within the model's error of 1: a 0.998 cell had read 1.00x."""
    from specsize.planner.speedup import thin_gain_notes

    @dataclasses.dataclass
    class Row:
        batch_size: int
        k: int
        speedup: float

    @dataclasses.dataclass
    class Table:
        rows: list

    @dataclasses.dataclass
    class Result:
        label: str
        table: Table

    notes = thin_gain_notes([Result("ngram", Table([Row(64, 3, 0.998)]))])  # type: ignore[list-item]
    assert notes and "B=64 k=3 0.998x" in notes[0]


# --- 6. a study value spelt two ways --------------------------------------------------------------------------------

def _study(tmp_path: Path, axis: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(f"name: s\nbase: {{target: meta-llama/Llama-3.1-8B-Instruct, gpu: H100-SXM-80GB}}\naxes:\n"
                    f"  {axis}\n")
    return path


@pytest.mark.parametrize("axis, first, second", [
    ("dtype: [bf16, bfloat16]", "bf16", "bfloat16"),  # core.specs.DTYPE_ALIASES
    ("kv_cache_dtype: [fp8, fp8_e4m3]", "fp8", "fp8_e4m3"),  # vLLM's fp8 is E4M3; SGLang is given fp8_e4m3 for both
    ("quantization: [awq, int4]", "awq", "int4"),  # 4-bit with zero points, --quantization awq_marlin on both engines
    ("engine_version: [0.10.1, v0.10.1]", "0.10.1", "v0.10.1"),  # one release written twice
])
def test_a_study_axis_refuses_one_value_spelt_twice(tmp_path, capsys, axis, first, second):
    """Each pair had made two cells of one set of numbers under two labels (only a repeat of the same text was
    refused)."""
    from specsize.inputs.study import read_study

    path = _study(tmp_path, axis)
    with pytest.raises(SpecError) as info:
        read_study(path)
    name = axis.split(":")[0]
    assert info.value.field == f"axes.{name}" and f"{first!r} and {second!r} are one {name}" in info.value.problem
    code, out, err = run(capsys, "sweep", str(path), "-o", str(tmp_path / "out.parquet"))
    assert code == 2 and "Traceback" not in err and f"axes.{name}: repeats a value" in err


@pytest.mark.parametrize("axis", ["quantization: [awq, gptq]",  # GPTQ: no zero points, gptq_marlin
                                  "quantization: [fp8, fbgemm_fp8]",  # vLLM is given fbgemm_fp8, another format
                                  "engine_version: ['0.10', '0.10.1']", "dtype: [bf16, fp16]",
                                  # a series is checked as its newest release, 0.10.0 as itself (review: Qwen3-Next
                                  # MTP plans on 0.10 and is refused on 0.10.0)
                                  "engine_version: ['0.10', 0.10.0]"])
def test_a_study_axis_keeps_values_that_plan_differently(tmp_path, axis):
    from specsize.inputs.study import read_study

    assert read_study(_study(tmp_path, axis)).size == 2


def test_a_group_axis_refuses_two_mappings_that_differ_only_in_spelling(tmp_path):
    from specsize.inputs.study import read_study

    path = _study(tmp_path, "shape:\n    - {dtype: bf16, concurrency: 4}\n    - {dtype: bfloat16, concurrency: 4}")
    with pytest.raises(SpecError) as info:
        read_study(path)
    assert info.value.field == "axes.shape" and "set the same fields to the same values" in info.value.problem


# --- 7. HEAD on the service's GET routes; a store in a folder that does not exist -----------------------------------

def test_head_is_answered_as_get_without_a_body(tmp_path, monkeypatch):
    """A load balancer probes with HEAD /healthz; the routes are declared for GET, and HEAD had been 405. RFC 9110
    9.3.2: HEAD is GET's status and headers without the content."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from specsize.catalog.models import NAMES_ONLY_ENV
    from specsize.service.app import Config, create_app

    monkeypatch.setenv(NAMES_ONLY_ENV, "1")
    client = TestClient(create_app(Config(db_url=str(tmp_path / "s.sqlite"), secure_cookies=False)),
                        raise_server_exceptions=False)
    get, head = client.get("/healthz"), client.head("/healthz")
    assert (get.status_code, head.status_code) == (200, 200)
    assert head.content == b"" and get.content
    assert head.headers["content-length"] == get.headers["content-length"] == str(len(get.content))
    assert head.headers["x-frame-options"] == "DENY"  # the guard's headers still on it
    assert client.head("/api/v1/models").status_code == 401  # a GET route that needs a token still needs one
    assert client.request("HEAD", "/api/v1/plan").status_code == 405  # a POST-only route stays POST-only


def test_a_store_path_in_a_missing_folder_is_refused_not_made(tmp_path, capsys, monkeypatch):
    """`--store /nonexistent/dir/x.sqlite` had made /nonexistent/dir to hold a new store (Store.__init__:
    parent.mkdir(parents=True)): a mistyped folder became a second store no one reads. The default store's folder
    ($XDG_DATA_HOME/specsize) is still made."""
    from specsize.adapters.store import Store

    missing = tmp_path / "no" / "such" / "x.sqlite"
    with pytest.raises(SpecError) as info:
        Store(missing)
    assert info.value.field == "store" and f"folder {missing.parent} does not exist" in info.value.problem
    assert not (tmp_path / "no").exists()
    code, out, err = run(capsys, "calibrations", "--store", str(missing), "add", "--tag", "chat", "--target",
                         "meta-llama/Llama-3.1-8B-Instruct", "--method", "ngram", "-k", "3", "--acceptance-rate",
                         "0.4", "--source", "bench")
    assert code == 2 and "Traceback" not in err and "store: folder" in err and not (tmp_path / "no").exists()
    monkeypatch.setenv("SPECSIZE_STORE", str(missing))  # a path someone wrote, as --store
    with pytest.raises(SpecError):
        Store()
    monkeypatch.delenv("SPECSIZE_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    Store().close()
    assert (tmp_path / "xdg" / "specsize" / "calibration.sqlite").is_file()


def test_the_services_database_in_a_missing_folder_is_refused_not_made(tmp_path, monkeypatch):
    pytest.importorskip("sqlalchemy")
    from specsize.service import db

    missing = tmp_path / "no" / "s.sqlite"
    with pytest.raises(SpecError) as info:
        db.connect(str(missing))
    assert info.value.field == "db" and "does not exist" in info.value.problem and not (tmp_path / "no").exists()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    db.connect(None).dispose()  # the default database's folder is made
    assert (tmp_path / "xdg" / "specsize" / "service.sqlite").is_file()
