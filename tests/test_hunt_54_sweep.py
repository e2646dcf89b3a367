"""Hunt 54: fleet sweeps (study files, executors, result stores, resume) and the live check, each bug with the
behaviour worked out by hand."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from specsize.core.errors import SpecError  # noqa: E402

LLAMA8B = "meta-llama/Llama-3.1-8B-Instruct"


def _sweep(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specsize.cli.main", "sweep", *args], capture_output=True, text=True,
                          timeout=timeout)


# --- two values of an axis that are one cell once base: is applied ---------------------------------------------------

BASE_BURST = f"""
name: burst
base: {{target: {LLAMA8B}, gpu: H100-SXM-80GB, max_model_len: 8192, burst_factor: 1.5}}
axes:
  load:
    - {{label: light, concurrency: 8}}
    - {{label: light-burst, concurrency: 8, burst_factor: 1.5}}
    - {{label: heavy, concurrency: 64}}
"""


def test_two_values_that_are_one_cell_with_base_applied_are_refused(tmp_path):
    """base sets burst_factor 1.5; the values {concurrency: 8} and {concurrency: 8, burst_factor: 1.5} are then the same
    cell (one key). The study had run 3 cells and written 2 rows, label `light` gone from the table, exit 0."""
    study = tmp_path / "burst.yaml"
    study.write_text(BASE_BURST)
    done = _sweep(str(study), "-o", str(tmp_path / "out.parquet"), "--workers", "1")
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("specsize: error: axes.load: values 'light' and 'light-burst' give the same cell")
    assert not (tmp_path / "out.parquet").exists()
    # without the repeat in base: three cells, three rows
    study.write_text(BASE_BURST.replace(", burst_factor: 1.5}\n", "}\n", 1))
    done = _sweep(str(study), "-o", str(tmp_path / "out.parquet"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    rows = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert sorted(r["load"] for r in rows) == ["heavy", "light", "light-burst"]
    assert {r["load"]: r["burst_factor"] for r in rows} == {"light": None, "light-burst": 1.5, "heavy": None}


# --- a cell that kills its worker -----------------------------------------------------------------------------------

def _die_on_poison(chunk: list) -> list:
    """A chunk's items squared; a chunk holding "poison" kills its worker process (as the OOM killer would)."""
    if "poison" in chunk:
        os.kill(os.getpid(), signal.SIGKILL)
    return [item * item for item in chunk]


def _split(chunk: list) -> list[list]:
    return [[item] for item in chunk]


def _lost(chunk: list, why: str) -> list:
    return [("lost", item, why) for item in chunk]


def test_a_cell_that_kills_every_worker_is_recorded_and_the_others_computed():
    """Three chunks on two workers, one of them holding an item that kills whichever worker runs it. Every worker death
    breaks the pool and every chunk in flight runs again; after 3 retries the run had stopped (SpecError, exit 2 from
    `specsize sweep`), the two sound items of the poisoned chunk and any chunk in flight with it lost, and a rerun met
    the same item. Now: the poisoned chunk runs alone, item by item; 1, 2, 4, 6, 7 come back squared, "poison" as
    lost, once each."""
    from specsize.adapters.executors import LocalPool

    pool = LocalPool(2, retries=1)
    try:
        results = list(pool.map_unordered(_die_on_poison, [[1, 2], [4, "poison", 6], [7]], split=_split, lost=_lost))
    finally:
        pool.close()
    flat = sorted((item for chunk in results for item in chunk), key=str)
    assert [x for x in flat if not isinstance(x, tuple)] == sorted([1, 4, 16, 36, 49], key=str)
    lost = [x for x in flat if isinstance(x, tuple)]
    assert len(lost) == 1 and lost[0][:2] == ("lost", "poison") and "died" in lost[0][2]
    # without `lost` the run stops, as before, naming the flag that can help
    pool = LocalPool(1, retries=1)
    try:
        with pytest.raises(SpecError) as err:
            list(pool.map_unordered(_die_on_poison, [["poison"]]))
    finally:
        pool.close()
    assert err.value.field == "workers"


def _die_after_returning(chunk: str) -> str:
    """Its chunk back; the worker that ran "first" is killed 0.3 s after it answered (the OOM killer at any moment)."""
    import threading

    if chunk == "first":
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGKILL)).start()
    return chunk


def test_a_worker_dying_between_two_results_is_replaced():
    """One worker, one chunk in flight. The worker dies after it answered "first", while the driver is busy with that
    result (writing its part): no future waits on it, and the pool is broken when the next chunk is submitted. submit
    raised BrokenProcessPool out of the executor, which the sweep reported as an internal error (exit 4). Now the pool
    is rebuilt and every chunk is answered once."""
    import time

    from specsize.adapters.executors import LocalPool

    pool = LocalPool(1)
    results = []
    try:
        for result in pool.map_unordered(_die_after_returning, ["first", "second", "third"], in_flight=1):
            results.append(result)
            time.sleep(1.5)  # the driver writing the part of its result
    finally:
        pool.close()
    assert results == ["first", "second", "third"] and pool.retried == 1


class _FakeRayError(Exception):
    pass


class _FakeRay:
    """The part of Ray's API RayPool uses: a task fails (WorkerCrashedError after its retries) when its chunk holds
    "poison", as a task whose worker the OOM killer ends each time."""

    class exceptions:  # noqa: N801 - ray.exceptions
        RayError = _FakeRayError

    def __init__(self):
        self.submitted: list = []

    def remote(self, **_options):
        def wrap(fn):
            fake = self

            class Task:
                @staticmethod
                def remote(chunk):
                    fake.submitted.append(chunk)
                    return ("ref", len(fake.submitted), tuple(chunk))
            return Task
        return wrap

    def wait(self, pending, num_returns=1):
        return pending[:num_returns], pending[num_returns:]

    def get(self, ref):
        chunk = list(ref[2])
        if "poison" in chunk:
            raise _FakeRayError("Task was killed due to the node running low on memory.\nMemory on the node ...")
        return [item * item for item in chunk]


def test_a_ray_task_that_keeps_failing_is_split_and_its_cell_recorded():
    """Ray retries a task whose worker dies, then raises from ray.get: that error had ended the study as an internal
    error (exit 4), every later run meeting it again. Now the chunk is cut into one task per item; the failing item is
    recorded as lost with Ray's first line, the others computed."""
    from specsize.adapters.executors import RayPool

    pool = RayPool.__new__(RayPool)
    pool._ray, pool.retries, pool.retried, pool.workers = _FakeRay(), 3, 0, 2
    results = list(pool.map_unordered(_die_on_poison, [[1, 2], [4, "poison", 6]], split=_split, lost=_lost))
    flat = [item for chunk in results for item in chunk]
    assert sorted(x for x in flat if not isinstance(x, tuple)) == [1, 4, 16, 36]
    lost = [x for x in flat if isinstance(x, tuple)]
    assert len(lost) == 1 and lost[0][1] == "poison"
    assert "node running low on memory" in lost[0][2] and "\n" not in lost[0][2]
    assert pool._ray.submitted == [[1, 2], [4, "poison", 6], [4], ["poison"], [6]]


PLAN_ONLY = f"""
name: lost
base: {{target: {LLAMA8B}, gpu: H100-SXM-80GB, max_model_len: 8192}}
axes:
  concurrency: [4, 16, 64]
"""


def test_a_cell_recorded_lost_is_computed_again_on_resume(tmp_path):
    """A run whose worker kept dying on one cell wrote it as `error: worker lost: ...`. The rerun computes that cell
    again (resuming the other two), and the table keeps its computed row, the same as a fresh run's, not the lost one."""
    from specsize.sweep import driver
    from specsize.sweep.cell import run_chunk

    study_path = tmp_path / "lost.yaml"
    study_path.write_text(PLAN_ONLY)
    fresh = tmp_path / "fresh.parquet"
    assert _sweep(str(study_path), "-o", str(fresh), "--workers", "1").returncode == 0
    study, results = driver.open_study(study_path, tmp_path / "out.parquet")
    cells = list(study.cells())
    results.write_part(driver._lost((study.compute, cells[:1]), "its worker process died"))
    results.write_part(run_chunk((study.compute, cells[1:])))
    assert results.done_keys(redo=driver.LOST) == {c.key for c in cells[1:]}
    done = _sweep(str(study_path), "-o", str(tmp_path / "out.parquet"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "resuming: 2 of 3 cells already done" in done.stderr
    assert "(1 computed" in done.stderr
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.equals(pq.read_table(fresh))
    assert table.column("status").to_pylist() == ["ok"] * 3


def test_finish_prefers_a_computed_row_to_a_lost_one(tmp_path):
    """The lost row (in the earlier table) and the computed one (a part) for one key: the computed one is kept whatever
    the order of the sources (the earlier table is read first)."""
    from specsize.adapters.results import ResultsFile

    columns = (("key", "str"), ("status", "str"), ("error", "str"), ("x", "int"))
    out = ResultsFile(tmp_path / "t.parquet", columns)
    out.write_part([{"key": "a", "status": "error", "error": "worker lost: died", "x": None},
                    {"key": "b", "status": "error", "error": "ZeroDivisionError: a bug", "x": None}])
    out.finish(["a", "b"], redo="worker lost: ")
    assert out.done_keys(redo="worker lost: ") == {"b"}  # a bug's row stands; a lost one is tried again
    out.write_part([{"key": "a", "status": "ok", "error": None, "x": 7}])
    assert out.finish(["a", "b"], redo="worker lost: ") == 2
    assert out.read_rows() == [{"key": "a", "status": "ok", "error": None, "x": 7},
                               {"key": "b", "status": "error", "error": "ZeroDivisionError: a bug", "x": None}]


def test_an_interrupted_final_write_leaves_no_half_table(tmp_path, monkeypatch):
    """Ctrl-C while the final table is written: the parts stay (a rerun resumes from them) and the half-written
    temporary table goes; it had stayed beside the results as `.t.parquet.tmp-PID`, as big as the table."""
    from specsize.adapters.results import ResultsFile

    out = ResultsFile(tmp_path / "t.parquet", (("key", "str"), ("x", "int")))
    out.write_part([{"key": "a", "x": 1}])

    def interrupted(table, where, **_kw):
        Path(where).write_bytes(b"PAR1 half")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", interrupted)
    with pytest.raises(KeyboardInterrupt):
        out.finish(["a"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet.parts"]
    assert out.done_keys() == {"a"}


# --- measure: a sliding-window model's cache ------------------------------------------------------------------------

SLIDING = {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 256,
           "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
           "head_dim": 32, "vocab_size": 1024, "max_position_embeddings": 4096, "sliding_window": 64,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
GEMMA2 = {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
          "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
          "vocab_size": 1024, "max_position_embeddings": 4096, "sliding_window": 64, "query_pre_attn_scalar": 32,
          "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("config, sliding_layers", [(SLIDING, 4), (GEMMA2, 2)])
def test_measure_predicts_a_sliding_window_cache_as_hugging_face_keeps_it(config, sliding_layers):
    """2 sequences of a 200-token prompt and a verification pass of k + 1 = 4: 204 tokens went through each layer.
    A layer holds 2 KV heads x 32 x 2 (K and V) x 2 bytes = 256 bytes a token. Hugging Face keeps a sliding layer's
    last window - 1 = 63 tokens (transformers cache_utils.DynamicSlidingWindowLayer.update), a full layer all 204:
    Mistral (4 sliding layers) 2 x 4 x 63 x 256 = 129,024 bytes; Gemma 2 (sliding, full alternating)
    2 x (2 x 63 + 2 x 204) x 256 = 273,408. The prediction had counted 204 tokens in every layer, 417,792 bytes:
    +224% and +53% on a cache the memory model sizes right."""
    pytest.importorskip("torch", reason="measure needs PyTorch: pip install 'specsize[measure]'")
    pytest.importorskip("transformers", reason="measure needs transformers: pip install 'specsize[measure]'")
    from specsize.catalog.configs import spec_from_config
    from specsize.measure.run import measure

    expected = 2 * (sliding_layers * 63 + (4 - sliding_layers) * 204) * 256
    assert expected == {4: 129_024, 2: 273_408}[sliding_layers]
    result = measure(spec_from_config(config, "sliding", "test"), config, None, None, None, None, batch_size=2,
                     prompt_tokens=200, k=3, dtype="bfloat16", device="cpu")
    kv = next(t for t in result.terms if t.name == "target KV cache")
    assert kv.measured == expected
    assert kv.predicted == expected and kv.error == 0


# --- check-live: KV usage held against the plan's worst case in the engine's terms -----------------------------------

def _plan(kv_tokens: int = 10_000) -> dict:
    """A plan whose worst case needs half its pool: demand 50 of 100 units, headroom 0.5 against a policy of 0.2."""
    return {"schema_version": "1.0", "verdict": "fits", "kv_cache_tokens": kv_tokens, "headroom_policy": 0.2,
            "headroom_fraction": 0.5, "envelope": {"demand_bytes": 50, "capacity_bytes": 100},
            "inputs": {"target": "meta-llama/Llama-3.1-8B-Instruct"}}


def _metrics(pool_tokens: int, usage: float):
    from specsize.engines.readers import LiveMetrics

    return LiveMetrics(num_gpu_blocks=pool_tokens // 16, block_size=16, kv_cache_tokens=pool_tokens,
                       kv_usage_fraction=usage, generation="V1", cache_config_seen=True)


def test_kv_usage_is_compared_with_the_worst_case_in_the_engines_pool():
    """The plan: 10,000 tokens of pool, a worst case of 5,000 (50%).
    - An engine pool of 5,000 tokens at 80% holds 4,000: within the worst case. Only the pool is off (-50%); the usage
      had been called a load outside the envelope (80% > 50% of a pool half the size). Headroom now
      1 - 50 / (100 x 0.5) = 0: thin.
    - An engine pool of 20,000 tokens at 30% holds 6,000: above the worst case of 5,000, 25% of this pool. It had
      passed (30% < 50%). Headroom now min(1 - 50 / 200, 1 - 0.3) = 0.7: still fits."""
    from specsize.planner.live import check

    small = check(_plan(), _metrics(5_000, 0.8), None)
    assert [v.split(":")[0] for v in small.violations] == ["KV cache"]
    assert "-50.0%" in small.violations[0]
    assert small.verdict_now == "thin"
    large = check(_plan(), _metrics(20_000, 0.3), None)
    usage = [v for v in large.violations if v.startswith("KV usage")]
    assert len(usage) == 1 and "30% of the cache is in use, above the plan's worst case of 25%" in usage[0]
    assert large.verdict_now == "fits"
    same = check(_plan(), _metrics(10_000, 0.5), None)  # at the worst case exactly: nothing to say
    assert same.violations == [] and same.verdict_now == "fits"


# --- the parts of another study's interrupted run ------------------------------------------------------------------

def test_another_studys_interrupted_cells_are_not_dropped_without_force(tmp_path):
    """Study `lost` is interrupted with one of its three cells saved in out.parquet.parts/ (no table yet). A run of
    another study into the same -o had passed the check (there was no table to read a name from), resumed none of
    those cells and removed the parts when it wrote its own table. Now it is refused, naming the study; `lost` itself
    resumes them (1 of 3 done), and --force lets the other study through."""
    from specsize.sweep import driver
    from specsize.sweep.cell import run_chunk

    first = tmp_path / "lost.yaml"
    first.write_text(PLAN_ONLY)
    other = tmp_path / "other.yaml"
    other.write_text(PLAN_ONLY.replace("name: lost", "name: other").replace("[4, 16, 64]", "[8]"))
    out = tmp_path / "out.parquet"
    study, results = driver.open_study(first, out)
    results.write_part(run_chunk((study.compute, list(study.cells())[:1])))
    refused = _sweep(str(other), "-o", str(out), "--workers", "1")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("specsize: error: output: ") and len(refused.stderr.splitlines()) == 1
    assert "interrupted run of study 'lost', not of 'other'" in refused.stderr
    assert len(list(results.parts.glob("part-*.parquet"))) == 1
    resumed = _sweep(str(first), "-o", str(out), "--workers", "1")
    assert resumed.returncode == 0 and "resuming: 1 of 3 cells already done" in resumed.stderr, resumed.stderr
    out.unlink()
    results.write_part(run_chunk((study.compute, list(study.cells())[:1])))
    forced = _sweep(str(other), "-o", str(out), "--workers", "1", "--force")
    assert forced.returncode == 0, forced.stderr
    assert [r["concurrency"] for r in pq.read_table(out).to_pylist()] == [8]


# --- the default number of workers in a container --------------------------------------------------------------------

@pytest.mark.parametrize("files, quota", [
    ({"cpu.max": "200000 100000\n"}, 2),  # cgroup v2, `docker run --cpus 2` / a Kubernetes limit of 2
    ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs: 2 workers, never 0
    ({"cpu.max": "50000 100000\n"}, 1),
    ({"cpu.max": "max 100000\n"}, None),  # no limit
    ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4),  # cgroup v1
    ({"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, None),  # v1, no limit
    ({}, None),
])
def test_the_default_workers_follow_the_containers_cpu_limit(tmp_path, monkeypatch, files, quota):
    """`--workers` unset meant every CPU of the host: 128 workers in a pod limited to 2 CPUs. The quota over the period,
    rounded up, caps it."""
    from specsize.adapters import executors

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert executors._cgroup_cpu_quota(str(tmp_path)) == quota
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(128)), raising=False)
    assert executors.usable_cpus(str(tmp_path)) == (128 if quota is None else quota)


def test_an_engine_running_with_a_cache_the_plan_had_no_room_for_is_said():
    """A plan with no room for a KV cache (Llama-3.1-70B on one L40S: kv_cache_tokens 0, does_not_fit) held against a
    server that started with 32,000 tokens of cache: the check had found nothing to say (0 planned tokens skipped the
    comparison). Now a violation says the plan's memory is off; the verdict stays the plan's (no headroom can be
    worked out against a pool of 0)."""
    from specsize.planner.live import check

    plan = _plan(kv_tokens=0) | {"verdict": "does_not_fit", "headroom_fraction": None,
                                 "envelope": {"demand_bytes": 100, "capacity_bytes": 0}}
    result = check(plan, _metrics(32_000, 0.0), None)
    assert result.violations == ["KV cache: the engine holds 32,000 tokens, the plan found room for none (it expected "
                                 "the engine not to start): plan again with the server's settings"]
    assert result.verdict_now == "does_not_fit"


# --- a time limit per cell -------------------------------------------------------------------------------------------

SLOW = f"""
name: slow
base: {{target: {LLAMA8B}, gpu: H100-SXM-80GB, max_model_len: 8192,
        workload: {{prompt_tokens: {{p50: 500, p99: 2000}}, output_tokens: {{p50: 200, p99: 800}}}}}}
axes:
  concurrency: [64, 100000]
compute: {{simulate: {{duration: 6000, when: fits}}}}
"""


def test_a_cell_past_its_time_limit_is_recorded_and_tried_again_on_rerun(tmp_path):
    """64 clients fit one H100 and are simulated for 6,000 s of arrivals (about 120,000 requests: tens of seconds);
    100,000 clients do not fit and are only planned. There was no limit: one slow cell held the whole study. With
    --cell-timeout 2 the slow cell is stopped and recorded as timed out, the other planned; a rerun resumes the planned
    cell and tries the timed-out one again. The flag is refused with Ray (its tasks may run off the main thread)."""
    study = tmp_path / "slow.yaml"
    study.write_text(SLOW)
    out = tmp_path / "out.parquet"
    done = _sweep(str(study), "-o", str(out), "--workers", "1", "--cell-timeout", "2")
    assert done.returncode == 0, done.stderr
    rows = {r["concurrency"]: r for r in pq.read_table(out).to_pylist()}
    assert rows[100000]["status"] == "ok" and rows[100000]["verdict"] == "does_not_fit"
    assert rows[64]["status"] == "error" and rows[64]["error"].startswith("timed out: the cell ran past --cell-timeout 2 s")
    again = _sweep(str(study), "-o", str(out), "--workers", "1", "--cell-timeout", "2")
    assert again.returncode == 0 and "resuming: 1 of 2 cells already done" in again.stderr, again.stderr
    assert "(1 computed" in again.stderr
    refused = _sweep(str(study), "-o", str(tmp_path / "ray.parquet"), "--ray", "auto", "--cell-timeout", "2")
    assert refused.returncode == 2 and refused.stderr.startswith("specsize: error: cell_timeout: "), refused.stderr


def test_sigterm_stops_the_run_as_ctrl_c_does(tmp_path):
    """SIGTERM (Kubernetes deleting the pod, systemd, `timeout`) had ended the driver at once: exit -15, no message,
    the lock file left and Python's warning about the pool's leaked semaphores on stderr. Now it stops as Ctrl-C does:
    one line saying the finished cells are saved, exit 143 (128 + 15), the lock gone, no worker left, and the rerun
    resumes the saved cell."""
    import time

    study = tmp_path / "slow.yaml"
    study.write_text(SLOW)
    out = tmp_path / "out.parquet"
    process = subprocess.Popen([sys.executable, "-m", "specsize.cli.main", "sweep", str(study), "-o", str(out),
                                "--workers", "2", "--chunk-size", "1"], stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        parts = tmp_path / "out.parquet.parts"
        deadline = time.monotonic() + 120
        while not list(parts.glob("part-*.parquet")):  # the 100,000-client cell is planned in a second; the other runs
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        os.kill(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 143, err
        assert err.strip().splitlines()[-1] == ("specsize: terminated after 1 new cells; they are saved: run the same "
                                                "command to resume")
        assert "leaked" not in err and not (tmp_path / "out.parquet.lock").exists()
        left = subprocess.run(["ps", "-o", "pid=", "-g", str(process.pid)], capture_output=True, text=True).stdout
        deadline = time.monotonic() + 10
        while left.strip() and time.monotonic() < deadline:
            time.sleep(0.2)
            left = subprocess.run(["ps", "-o", "pid=", "-g", str(process.pid)], capture_output=True, text=True).stdout
        assert not left.strip(), "workers of the terminated driver are still running"
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    again = _sweep(str(study), "-o", str(out), "--workers", "1", "--cell-timeout", "2")
    assert again.returncode == 0 and "resuming: 1 of 2 cells already done" in again.stderr, again.stderr


# --- measure: the host check counts what the PyTorch run builds ------------------------------------------------------

def test_measure_refuses_a_target_the_host_cannot_hold_whatever_the_tp_planned(capsys, monkeypatch):
    """The run builds every model whole on one device, whatever --tp the deployment plans. Llama-3.1-70B: 80 layers of
    2 x 8192^2 (q, o) + 2 x 8192 x 1024 (k, v) + 3 x 8192 x 28672 (MLP) + 2 x 8192 (norms) = 855,654,400 parameters,
    with 2 x 128,256 x 8192 (embedding, lm_head) and 8192 (final norm): 70,553,706,496 parameters, 141,107,412,992
    bytes in bf16; 1 sequence x 17 tokens x 327,680 bytes (80 x 2 x 8 x 128 x 2) of cache: 131.4 GiB. The host check had
    taken the engine's per-GPU account at --tp 8 (about 16.4 GiB) and let it through on a host with 50 GiB free, to
    build all of it."""
    from helpers import run_cli
    from specsize.measure import run as torch_run

    def built(*_args, **_kw):
        raise AssertionError("the model was about to be built")

    from specsize.measure import api as measure_api

    monkeypatch.setattr(torch_run, "measure", built)
    # the host's MemAvailable (measure.api._available_bytes: free memory and the page cache it gives back)
    monkeypatch.setattr(measure_api, "_available_bytes", lambda: 50 * 2**30)
    code, out, err = run_cli(capsys, "measure", "--target", "meta-llama/Llama-3.1-70B-Instruct", "--tp", "8",
                             "--gpu", "H100-SXM-80GB", "--device", "cpu", "--batch-size", "1", "--prompt-len", "16")
    assert code == 2 and out == ""
    assert err.strip() == ("specsize: error: measure: the run needs about 131.4 GiB; this machine has 50.0 GiB "
                           "available (accepted: a smaller model, batch or prompt (or a bigger host))")


def test_a_recorded_measurement_is_json_without_nan(tmp_path):
    """`specsize measure --record` stores the terms; the activation peak is measured, not predicted (NaN in memory),
    and json.dumps wrote it as a bare `NaN`: no JSON (PostgreSQL's payload::jsonb, jq and browsers refuse it). It is
    null now; the figures that were predicted are kept as they are."""
    import json
    import sqlite3

    from specsize import api
    from specsize.inputs.resolve import resolve
    from specsize.measure.api import _record
    from specsize.measure.run import MeasureResult, Term

    d = resolve(api.load_request(target=LLAMA8B, gpu="H100-SXM-80GB")).deployment
    result = MeasureResult(device="cpu", dtype="bfloat16", batch_size=2, prompt_tokens=64, k=0,
                           terms=[Term("target weights", 100.0, 100.0), Term("target activation peak", float("nan"),
                                                                              5.0, "reported, not compared")])
    _record("tiny", str(tmp_path / "s.sqlite"), result, d, 2, 64, 0)
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        (text,) = con.execute("SELECT payload FROM observations").fetchone()

    def no_constant(name):
        raise AssertionError(f"{name} in the stored payload")

    terms = json.loads(text, parse_constant=no_constant)["terms"]
    assert [(t["name"], t["predicted"], t["measured"]) for t in terms] == [("target weights", 100.0, 100.0),
                                                                           ("target activation peak", None, 5.0)]
