"""Hunt 58, edges left by fuzz pass 10: a sweep cell and a speed-up table for an engine that does not start, booleans
spelled as a deployment file spells them, KV dtype aliases in a search spec, the fleet row of a simulation whose load
reaches fewer replicas than it has, and SGLang's expert-parallel flag in the release planned - each expected value
worked out by hand."""

from __future__ import annotations

import json

import pytest

import specsize
from helpers import run_cli as run
from specsize.core.errors import SpecError

LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA70B = "meta-llama/Llama-3.1-70B-Instruct"
GiB = 1 << 30


# --- 1. a sweep cell whose engine does not start carries no throughput and no cost ----------------------------------

def _rows(tmp_path, study: str) -> list[dict]:
    pq = pytest.importorskip("pyarrow.parquet")
    from specsize.sweep.driver import run as sweep

    path = tmp_path / "study.yaml"
    path.write_text(study)
    sweep(path, tmp_path / "out.parquet", workers=1)
    return pq.read_table(tmp_path / "out.parquet").to_pylist()


def test_a_sweep_cell_whose_engine_does_not_start_has_no_cost_or_throughput(tmp_path):
    """kv_cache_memory_bytes 200e9 = 186.3 GiB of KV cache on an H100 whose driver reports 79.19 GiB in all: the engine
    cannot start whatever the other terms, as `plan` says ("the engine does not start"). Its row had carried the model's
    throughput and $0.63 per million tokens. 8e9 B (7.45 GiB) beside 15 GiB of weights starts, and is priced at
    1 GPU x $2.50 / (tokens/s x 3600) x 10^6 of its own throughput. 70B in bf16 (2 B x 70.6e9 = 141 GB) on one L40S
    (48 GB) is the other way an engine does not start: weights past the card."""
    rows = _rows(tmp_path, f"""
name: nostart
base: {{target: {LLAMA8B}, gpu: H100-SXM-80GB, max_model_len: 16384, concurrency: 8}}
axes:
  kv_cache_memory_bytes: [8000000000, 200000000000]
compute: {{speedup: true}}
prices: {{H100-SXM-80GB: 2.5}}
""")
    by_kv = {r["kv_cache_memory_bytes"]: r for r in rows}
    dead, alive = by_kv[200_000_000_000], by_kv[8_000_000_000]
    assert dead["status"] == "ok" and dead["verdict"] == "does_not_fit"
    assert "start-up" in dead["breaks_first"]
    for name in ("cost_per_mtok", "cost_per_mtok_no_spec", "cost_basis", "model_throughput_tok_s_no_spec",
                 "tpot_s_no_spec", "speedup"):
        assert dead[name] is None, (name, dead[name])
    assert dead["price_per_gpu_hour"] == 2.5  # the price stays: it is the study's, not the cell's result
    throughput = alive["model_throughput_tok_s_no_spec"]
    assert throughput and throughput > 0 and alive["cost_basis"] == "model"
    assert alive["cost_per_mtok"] == pytest.approx(1 * 2.5 / (throughput * 3600) * 1e6)

    (tmp_path / "weights").mkdir()
    rows = _rows(tmp_path / "weights", f"""
name: weights
base: {{gpu: L40S-48GB, max_model_len: 8192, concurrency: 4}}
axes:
  target: [{LLAMA8B}, {LLAMA70B}]
compute: {{speedup: true}}
prices: {{L40S-48GB: 1.0}}
""")
    by_target = {r["target"]: r for r in rows}
    assert by_target[LLAMA70B]["verdict"] == "does_not_fit"
    assert by_target[LLAMA70B]["weights_target_bytes"] > 48e9
    assert by_target[LLAMA70B]["cost_per_mtok"] is None and by_target[LLAMA70B]["model_throughput_tok_s_no_spec"] is None
    assert by_target[LLAMA8B]["cost_per_mtok"] is not None


# --- 2. speedup refuses an engine that does not start, as simulate does -----------------------------------------------

SPEC = ("--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--method", "draft_model", "--draft",
        "meta-llama/Llama-3.2-1B-Instruct", "--num-speculative-tokens", "3", "--acceptance-rate", "0.7")


def test_speedup_of_an_engine_that_does_not_start_exits_2_as_simulate_does(capsys):
    """186.3 GiB of KV cache asked of an 80 GB card: simulate exits 2 in one line ("the engine does not start"); speedup
    had printed "KV cache 1,220,688 tokens" (the pool it never builds) and a table of speed-ups."""
    too_big = ("--kv-cache-memory-bytes", "200000000000")
    code, out, err = run(capsys, "simulate", *SPEC, *too_big, "--duration", "5")
    assert code == 2 and "the engine does not start" in err
    for fmt in ("text", "json"):
        code, out, err = run(capsys, "speedup", *SPEC, *too_big, "--format", fmt)
        assert code == 2 and out == "" and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
        assert err.startswith("specsize: error: deployment: the engine does not start") and "186.26 GiB" in err
    # 8e9 B of KV cache starts: its table is there
    code, out, err = run(capsys, "speedup", *SPEC, "--kv-cache-memory-bytes", "8000000000")
    assert code == 0 and "KV cache" in out


def test_a_candidate_drafter_that_does_not_start_says_so_instead_of_its_pool(capsys):
    """Llama-3.1-8B with n-gram on an L40S, 22e9 B of KV cache: 22e9 / (16 x 131,072 B a token: 32 layers x 2 x 8 KV
    heads x 128 x 2 B) = 10,490 whole blocks = 167,840 tokens, and it starts (15 GiB of weights + 20.5 GiB of cache).
    A candidate drafting with a second 8B (15 GiB more) leaves 10.9 GiB for the 20.5 asked: it does not start, and its
    line had named a KV cache all the same."""
    code, out, err = run(capsys, "speedup", "--target", LLAMA8B, "--gpu", "L40S-48GB", "--kv-cache-memory-bytes",
                         "22000000000", "--method", "ngram", "--num-speculative-tokens", "3", "--acceptance-rate",
                         "0.4", "--candidate", f"method=draft_model,draft={LLAMA8B},acceptance=0.8", "--batch-size",
                         "1,8", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kv_cache_tokens"] == 167_840
    (candidate,) = doc["candidates"]
    assert candidate["kv_cache_tokens"] is None
    assert "kv_cache_memory_bytes" in candidate["startup_problem"]
    code, out, err = run(capsys, "speedup", "--target", LLAMA8B, "--gpu", "L40S-48GB", "--kv-cache-memory-bytes",
                         "22000000000", "--method", "ngram", "--num-speculative-tokens", "3", "--acceptance-rate",
                         "0.4", "--candidate", f"method=draft_model,draft={LLAMA8B},acceptance=0.8", "--batch-size",
                         "1,8")
    line = next(line for line in out.splitlines() if line.startswith("method=draft_model"))
    assert "with it the engine does not start" in line and "KV cache 1" not in line and " tokens" not in line


# --- 3. one boolean reader for every boolean input ----------------------------------------------------------------------

@pytest.mark.parametrize("written, value", [("true", True), ("'yes'", True), ("1", True), ("on", True), ("'On'", True),
                                            ("false", False), ("'no'", False), ("0", False), ("'off'", False)])
def test_a_deployment_files_boolean_takes_every_spelling(tmp_path, written, value):
    """YAML reads unquoted on / yes as true and 1 / 0 as integers; quoted, they are text. enforce_eager had taken 'yes'
    and refused 1, 0 and 'on'."""
    path = tmp_path / "d.yaml"
    path.write_text(f"target: {LLAMA8B}\ngpu: H100-SXM-80GB\nenforce_eager: {written}\n")
    assert specsize.load_request(path).enforce_eager is value


@pytest.mark.parametrize("written", ["2", "1.0", "'maybe'", "[true]"])
def test_a_boolean_spelled_otherwise_is_refused_in_one_line(tmp_path, capsys, written):
    path = tmp_path / "d.yaml"
    path.write_text(f"target: {LLAMA8B}\ngpu: H100-SXM-80GB\nenforce_eager: {written}\n")
    code, out, err = run(capsys, "plan", path)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("specsize: error: enforce_eager: must be true or false")
    assert "true, false, yes, no, on, off, 1, 0" in err


@pytest.mark.parametrize("speedup, simulate, wanted", [('"no"', "'yes'", (False, True)), ("0", "1", (False, True)),
                                                       ("'on'", "'off'", (True, False)), ("yes", "no", (True, False))])
def test_a_studys_compute_booleans_read_as_a_deployment_files(tmp_path, speedup, simulate, wanted):
    """compute.speedup: "no" had been refused ("must be true or false") where enforce_eager: 'no' is read."""
    from specsize.inputs.study import read_study

    path = tmp_path / "s.yaml"
    path.write_text(f"name: b\nbase: {{target: {LLAMA8B}, gpu: H100-SXM-80GB}}\naxes:\n  concurrency: [4]\n"
                    f"compute: {{speedup: {speedup}, simulate: {simulate}}}\n")
    compute = read_study(path).compute
    assert (compute.speedup, compute.simulate) == wanted
    path.write_text(f"name: b\nbase: {{target: {LLAMA8B}, gpu: H100-SXM-80GB}}\naxes:\n  concurrency: [4]\n"
                    "compute: {speedup: 'maybe'}\n")
    with pytest.raises(SpecError) as err:
        read_study(path)
    assert err.value.field == "compute.speedup" and "yes, no, on, off, 1, 0" in err.value.accepted
    path.write_text(f"name: b\nbase: {{target: {LLAMA8B}, gpu: H100-SXM-80GB}}\naxes:\n  concurrency: [4]\n"
                    "compute: {simulate: 2}\n")
    with pytest.raises(SpecError) as err:
        read_study(path)
    assert err.value.field == "compute.simulate" and "1, 0, or a mapping of" in err.value.accepted


def test_a_search_specs_expert_parallel_takes_one_and_zero(tmp_path):
    from specsize.inputs.search_spec import read_search_spec

    path = tmp_path / "s.yaml"
    path.write_text(_search("[auto]", target="Qwen/Qwen3-30B-A3B") + "expert_parallel: [0, 'yes']\n")
    assert read_search_spec(path).expert_parallel == (False, True)
    path.write_text(_search("[auto]", target="Qwen/Qwen3-30B-A3B") + "expert_parallel: [0, 'no']\n")
    with pytest.raises(SpecError, match="lists false twice"):
        read_search_spec(path)


# --- 4. a search spec's KV dtype aliases are screened once --------------------------------------------------------------

def _search(kv: str, target: str = LLAMA8B) -> str:
    return (f"target: {target}\ndrafters: [{{method: none}}]\ngpus: [{{gpu: H100-SXM-80GB, counts: [1]}}]\ntp: [1]\n"
            f"kv_cache_dtypes: {kv}\nmax_num_seqs: [64]\nworkload: {{prompt_tokens: {{p50: 800, p95: 3000, p99: 6000, "
            "max: 12000}, output_tokens: {p50: 250, p95: 700, p99: 1000, max: 2000}, concurrency: 8}\n"
            "slo: {tpot_p99_ms: 50}\n")


def test_fp8_and_fp8_e4m3_in_a_search_spec_are_one_kv_dtype(tmp_path):
    """vLLM's fp8 is E4M3 (fp8_e4m3), and SGLang's command writes fp8 as fp8_e4m3: [fp8, fp8_e4m3] had screened one
    GPU x one TP x one max_num_seqs twice, two rows with one set of numbers. The first spelling is kept, with a note."""
    from specsize.inputs.search_spec import read_search_spec

    path = tmp_path / "s.yaml"
    path.write_text(_search("[fp8, fp8_e4m3]"))
    space = read_search_spec(path)
    assert space.kv_cache_dtypes == ("fp8",)
    assert len(space.notes) == 1 and "fp8_e4m3 is fp8" in space.notes[0]
    result = specsize.search(path, simulate=False)
    assert len(result.candidates) == 1  # 1 GPU x TP 1 x 1 dtype x 1 max_num_seqs
    assert result.notes == space.notes  # the search says so, in its table and its JSON
    from specsize.reports.search import render, to_dict

    assert f"note: {space.notes[0]}" in render(result, "table") and to_dict(result)["notes"] == list(space.notes)
    path.write_text(_search("[fp8_e4m3, auto, fp8]"))
    assert read_search_spec(path).kv_cache_dtypes == ("fp8_e4m3", "auto")
    for written in ("[fp8, fp8_e4m3, fp8]", "[fp8_e4m3, fp8, auto, fp8]"):  # one spelling twice is a repeat, refused
        path.write_text(_search(written))  # in any order (the second had been screened, its note printed twice)
        with pytest.raises(SpecError, match="lists 'fp8' twice"):
            read_search_spec(path)


# --- 5. the fleet row names the replicas the load reaches ---------------------------------------------------------------

def _row(out: str, label: str) -> int:
    line = next(line for line in out.splitlines() if line.startswith(label))
    return int(line[len(label):].split()[-1].replace(",", ""))


def test_the_fleet_row_says_how_many_replicas_are_busy(capsys):
    """3 requests in flight over 8 replicas keep 3 busy, 1 each (the busiest's share, ceil(3 / 8) = 1): the row is 3 x
    one replica's throughput and had been labelled "all 8 replicas". 10 in flight keep all 8 busy at up to
    ceil(10 / 8) = 2 each: 10 / 2 = 5 x the busiest's throughput, "all 8 replicas"."""
    base = ("simulate", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--gpus", "8", "--duration", "10")
    code, out, _ = run(capsys, *base, "--concurrency", "3")
    assert code == 0
    assert "all 8 replicas, tok/s" not in out
    # each figure rounded to whole tok/s: the product of a rounded one is off by up to half the multiple
    assert abs(_row(out, "all 8 replicas (3 busy), tok/s") - 3 * _row(out, "throughput tok/s")) <= 2
    code, out, _ = run(capsys, *base, "--concurrency", "10")
    assert code == 0 and "busy" not in out
    assert abs(_row(out, "all 8 replicas, tok/s") - 5 * _row(out, "throughput tok/s")) <= 3


def test_a_closed_loop_and_a_trace_count_their_busy_replicas(tmp_path, capsys):
    """2 clients over 4 replicas reach 2; a trace of 2 requests round-robin over 4 replicas reaches 2."""
    base = ("simulate", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--gpus", "4", "--no-compare")
    code, out, _ = run(capsys, *base, "--client-concurrency", "2", "--num-requests", "8", "--prompt-tokens-median",
                       "500", "--output-tokens-median", "100")
    assert code == 0
    assert abs(_row(out, "all 4 replicas (2 busy), tok/s") - 2 * _row(out, "throughput tok/s")) <= 1
    trace = tmp_path / "two.csv"
    trace.write_text("arrival_time,prompt_tokens,output_tokens\n0,100,100\n0.1,200,100\n")
    code, out, _ = run(capsys, *base, "--trace", trace)
    assert code == 0
    assert abs(_row(out, "all 4 replicas (2 busy), tok/s") - 2 * _row(out, "throughput tok/s")) <= 1


# --- 6. SGLang's expert-parallel flag in the release planned ------------------------------------------------------------

def _sglang_command(capsys, version: str | None) -> tuple[str, str]:
    args = ["plan", "--target", "deepseek-ai/DeepSeek-V2-Lite-Chat", "--gpu", "H100-SXM-80GB", "--tp", "2", "--engine",
            "sglang", "--expert-parallel", "--emit", "sglang"] + (["--engine-version", version] if version else [])
    code, out, err = run(capsys, *args)
    assert code == 0, err
    return out, err


@pytest.mark.parametrize("version, flag", [("0.4.6", ["--enable-ep-moe"]), ("0.4.10", ["--enable-ep-moe"]),
                                           ("0.4.10.post2", ["--ep-size", "2"]), ("0.5.1", ["--ep-size", "2"]),
                                           (None, ["--ep-size", "2"])])
def test_sglang_expert_parallelism_is_written_as_the_release_takes_it(capsys, version, flag):
    """SGLang 0.4.1.post4 - 0.4.10 switch the MoE layers to expert parallelism with --enable-ep-moe (ServerArgs:
    "if self.enable_ep_moe: self.ep_size = self.tp_size"; --ep-size alone left them on TP); from 0.4.10.post2 --ep-size
    N does (server_args.py in the wheels; --enable-ep-moe deprecated there and refused from 0.5.3). The 0.4.6 command
    had carried --ep-size 2 and a note to rewrite it."""
    out, err = _sglang_command(capsys, version)
    header, command = out.splitlines()[:2]
    argv = command.split()
    at = argv.index(flag[0])
    assert argv[at:at + len(flag)] == flag
    assert ("--ep-size" in argv) == (flag[0] == "--ep-size") and ("--enable-ep-moe" in argv) == (len(flag) == 1)
    assert "in place of --ep-size" not in out + err
    if len(flag) == 1:  # a command with --enable-ep-moe is for the 0.4 series only (0.5.3 on refuse the flag)
        assert header.startswith("# sglang 0.4") and header.endswith("0.4.x (python -m sglang.launch_server)")


def test_the_emitter_takes_the_release():
    from dataclasses import replace

    from helpers import deployment
    from specsize.core.memory import account
    from specsize.engines import resolve_profile
    from specsize.engines.emit import sglang_command

    d = replace(deployment(target="Qwen/Qwen3-30B-A3B", tp=4), expert_parallel=True)
    mem = account(d, resolve_profile("sglang", "0.4.6.post2"))
    old = sglang_command(d, mem, version="0.4.6.post2")
    assert "--enable-ep-moe" in old.argv and "--ep-size" not in old.argv
    assert old.versions.startswith("0.4.6.post2 - 0.4.x")  # qwen3_moe's EPMoE from 0.4.6.post2 (engines.support)
    new = sglang_command(d, mem)
    assert new.argv[new.argv.index("--ep-size") + 1] == "4" and "--enable-ep-moe" not in new.argv


@pytest.mark.parametrize("written, value", [("'yes'", "on"), ("1", "on"), ("'1'", "on"), ("'On'", "on"), ("no", "off"),
                                            ("0", "off"), ("auto", "auto"), ("off", "off")])
def test_an_on_off_choice_takes_a_booleans_spellings(tmp_path, written, value):
    """chunked_prefill (auto / on / off) took an unquoted yes (YAML's true) but refused 'yes', 1, '1' and 'On', which
    enforce_eager takes: an on / off choice reads parse_bool's spellings; anything else keeps its one-line refusal."""
    import yaml

    from specsize.inputs.fields import coerce
    from specsize.inputs.request import info as field_info

    info = field_info("chunked_prefill")

    assert coerce("chunked_prefill", info, yaml.safe_load(written)) == value
    with pytest.raises(SpecError, match="chunked_prefill"):
        coerce("chunked_prefill", info, "maybe")



def test_plan_shows_no_performance_for_an_engine_that_does_not_start(capsys):
    """`plan` said "DOES NOT FIT: the engine does not start" above a decode table and, in JSON, 2,804 tok/s without
    speculation: an engine that serves no request (core.memory.unstarted) has no performance, as simulate and speedup
    refuse it. A pool that exists but refuses max_model_len keeps its figures (simulate runs it)."""
    args = ("plan", "--target", LLAMA8B, "--gpu", "H100-SXM-80GB", "--format", "json")
    code, out, _ = run(capsys, *args, "--kv-cache-memory-bytes", "200000000000")
    assert code == 0 and json.loads(out)["perf"] is None
    code, out, _ = run(capsys, *args, "--kv-cache-memory-bytes", "2000000000")  # 12,192 tokens < 131,072
    assert code == 0 and json.loads(out)["perf"] is not None
