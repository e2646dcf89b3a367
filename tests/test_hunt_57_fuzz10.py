"""Hunt 57, fuzz pass 10: today's features driven as a platform engineer would (expert parallelism on every command,
an engine that does not start beside simulate / stops-paying / report) - each expected value worked out by hand."""

import json

from helpers import run_cli as run
from specsize import api

GiB = 1 << 30
LLAMA8 = ("--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB")
# 200,000,000,000 B of KV cache asked for = 186.26 GiB (200e9 / 2**30), more than the 79.19 GiB card holds at all
OVERCOMMIT = (*LLAMA8, "--kv-cache-memory-bytes", "200000000000")
# Llama-3.1-8B's KV per token: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B; one 131,072-token request
# needs 131,072 x 131,072 B = 16 GiB, but 0.25 x 79.19 GiB = 19.80 GiB less 8.03e9 x 2 B (14.96 GiB) of weights leaves
# under 4.9 GiB: vLLM refuses to start (its 'To serve at least one request ...' check), yet the pool is in memory
TOO_LONG = (*LLAMA8, "--gpu-memory-utilization", "0.25", "--max-model-len", "131072")
# another workload holding 40 GiB of the 79.19: 39.19 GiB free, under the 0.9 x 79.19 = 71.27 GiB budget vLLM asks for
SHARED = (*LLAMA8, "--shared-reserved-gib", "40")


def test_simulate_refuses_an_engine_that_does_not_start(capsys):
    """The plan says 'DOES NOT FIT: the engine does not start'; simulate had replayed 114 requests on the pool that is
    never built and printed 'sustains the load: yes' (exit 0). It is refused as an empty KV cache is, exit 2."""
    for args in (OVERCOMMIT, SHARED):
        code, out, err = run(capsys, "plan", *args)
        assert code == 0 and "the engine does not start" in out
        code, out, err = run(capsys, "simulate", *args, "--duration", "10")
        assert code == 2 and out == "", out
        assert "deployment: the engine does not start" in err and "Traceback" not in err
    code, _, err = run(capsys, "simulate", *OVERCOMMIT, "--duration", "10")
    assert "186.26 GiB" in err  # the refusal names what was asked for


def test_stops_paying_refuses_an_engine_that_does_not_start(capsys):
    """Every rung of the load sweep had simulated the server that never starts ('yes / yes' sustains)."""
    code, out, err = run(capsys, "stops-paying", *OVERCOMMIT, "--method", "ngram", "-k", "3", "--acceptance-rate",
                         "0.4", "--duration", "10", "--format", "json")
    assert code == 2 and out == "" and "the engine does not start" in err


def test_report_and_plan_simulate_attach_no_simulation_to_an_engine_that_does_not_start(capsys):
    """The report had listed 'simulated burst: sustained; p99 TTFT 0.36 s' (and, for the max_model_len refusal, three
    'simulated burst:' reasons of a thrashing cache) under a server that never starts, and its SC-5 summary said
    'capacity does not hold the burst' beside 40.4 GiB of demand against the 186.26 GiB asked for. Now no simulation
    is attached and the summary says why."""
    for args in (OVERCOMMIT, SHARED):
        code, out, _ = run(capsys, "report", *args, "--format", "markdown")
        assert code == 0
        assert "**DOES NOT FIT: the engine does not start" in out
        assert "simulated burst" not in out and "Simulated burst scenario" not in out
        assert "**FAIL**: the engine does not start, so no capacity holds the burst" in out
        code, out, _ = run(capsys, "plan", *args, "--simulate", "--duration", "10", "--format", "json")
        assert code == 0
        data = json.loads(out)
        assert data["verdict"] == "does_not_fit" and data["headroom_fraction"] is None
        assert data.get("simulation") is None


def test_a_max_model_len_refusal_keeps_its_pool_and_its_simulation(capsys):
    """vLLM's max_model_len refusal leaves the pool in memory (under 4.9 GiB: under 40,000 tokens of 131,072 B): its
    simulation still runs (requests longer than the pool named as never run: tests/test_simulator.py), and the
    report's SC-5 line says the engine does not start."""
    code, out, _ = run(capsys, "plan", *TOO_LONG)
    assert code == 0 and "the engine does not start" in out
    code, out, err = run(capsys, "simulate", *TOO_LONG, "--duration", "10")
    assert code in (0, 1) and "requests completed" in out, err
    code, out, _ = run(capsys, "report", *TOO_LONG, "--format", "markdown")
    assert code == 0 and "**FAIL**: the engine does not start, so no capacity holds the burst" in out


def test_an_engine_that_starts_is_still_simulated_in_its_report():
    """The guard is the start-up refusal alone: 10 GB of KV cache (9.31 GiB, 10e9 / 2**30: about 76,000 tokens of
    131,072 B, so a 16,384-token max_model_len fits) starts on the same card, and its plan keeps its burst
    simulation."""
    result = api.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", max_model_len=16384,
                      kv_cache_memory_bytes=10_000_000_000, simulate=True, duration=10)
    assert result.memory.startup_problem is None
    assert abs(result.memory.kv_cache_bytes / GiB - 9.31) < 0.01
    assert result.simulation is not None
