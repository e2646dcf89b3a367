"""Hunt 53: simulate, plan --simulate and stops-paying, each bug with a value worked out by hand.

The engine-level cases run on test_simulator's GPU of round numbers (1e12 B/s, 1e15 FLOP/s, ideal efficiency, no
overheads) with Llama-3.2-1B, where a step's time is a closed form: W bytes of weights, ACT bytes of activations per
token and KV bytes per context token read at 1e12 B/s, plus a prompt's causal attention at 1e15 FLOP/s."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from specsize.simulator.engine import simulate
from specsize.simulator.workload import Requests, closed_batch
from helpers import run_cli as run
from test_simulator import ACT, KV, W, config

ROOT = Path(__file__).resolve().parent.parent
EAGLE3 = ROOT / "examples" / "llama8b-eagle3-h100.yaml"
ATTN_FLOPS_PER_PAIR = 4 * 2048 * 16  # Llama-3.2-1B: 32 heads x 64, 16 layers


def _prefill_s(prompt: int) -> float:
    """A lone prompt of `prompt` tokens with no context: memory-bound weights and activations, its own causal
    attention (prompt x (prompt + 1) / 2 pairs) at the FLOP/s."""
    return (W + ACT * prompt) / 1e12 + prompt * (prompt + 1) / 2 * ATTN_FLOPS_PER_PAIR / 1e15


def _decode_s(context: int) -> float:
    """One decode step of a lone sequence over `context` tokens: weights, one token's activations, the context's KV."""
    return (W + ACT + KV * context) / 1e12


# --- a request whose output grows past the whole pool ---------------------------------------------------------------

def test_a_request_growing_past_the_pool_with_drafts_is_refused_not_preempted_for_ever():
    """A pool of 10 blocks of 16 (160 tokens), k = 3: a decode at context c holds c + 1 + k tokens and k lookahead
    slots, so it fits while c + 7 <= 160. The request (100 + 100 tokens) is preempted at c = 154; its recompute (154
    tokens + k = 157) fits the pool, its next decode (161) cannot. It had been readmitted, recomputed and preempted
    again for ever: 1,443,794 preemptions and 51 s of CPU for one request, reported as queue growth."""
    r = simulate(config(num_blocks=10, k=3), closed_batch(1, 100, 100, acceptance=0.5), seed=0, max_steps=100_000)
    assert r.preemptions == 1 and r.too_long == 1 and not r.finished.any()
    assert r.steps < 100  # the prefill and at most 54 decodes (a decode gains >= 1 token) before the refusal


def test_a_request_growing_past_the_pool_is_named_as_one_the_engine_cannot_run(tmp_path, capsys):
    """Llama-3.1-8B + EAGLE-3 with an fp8 KV cache of 2,000,000,000 bytes: (32 + 1) layers x 8 KV heads x 128 x 2 x 1
    byte = 67,584 bytes a token, 1,849 blocks of 16 = 29,584 tokens. A 29,000-token prompt with 1,000 tokens to write
    fits as a prompt and outgrows the pool as it decodes: the run had said 'queue growth: 1 requests unfinished'
    after 3,716 preemptions recomputing 110 million tokens."""
    trace = tmp_path / "one.csv"
    trace.write_text("arrival_time,prompt_tokens,output_tokens\n0,29000,1000\n")
    code, out, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--trace", trace,
                         "--kv-cache-memory-bytes", "2000000000", "--max-model-len", "32768", "--format", "json")
    import json

    sim = json.loads(out)["sim"]
    assert code == 1, err
    assert sim["too_long"] == 1 and sim["preemptions"] == 1
    assert sim["problems"] == ["1 request needs more KV blocks than the whole pool holds: the engine can never run it"]


def test_an_engine_that_prefills_or_decodes_refuses_the_request_at_once_and_runs_the_queue():
    """Prefill-first (SGLang, vLLM V0), max_num_seqs 1, a 160-token pool, k = 0: A (100 + 100 tokens) decodes while
    c + 1 <= 160, i.e. at contexts 100..159, and is preempted at c = 160 with nothing else running. B (10 + 5 tokens,
    sent at 1 ms) waits for the one sequence slot. The engine had then waited, idle, for the next arrival (C at 100 s)
    before refusing A and admitting B: B's first token came 100 s late. B is admitted in the next step."""
    req = Requests(arrival_s=np.array([0.0, 0.001, 100.0]), prompt_tokens=np.array([100, 10, 10]),
                   output_tokens=np.array([100, 5, 5]), acceptance=np.zeros(3), duration_s=100.0)
    cfg = dataclasses.replace(config(num_blocks=10, max_num_seqs=1), prefill_first=True)
    r = simulate(cfg, req, seed=0)
    a_steps = _prefill_s(100) + sum(_decode_s(c) for c in range(100, 160))
    assert r.too_long == 1 and r.preemptions == 1 and r.finished.tolist() == [False, True, True]
    assert r.ttft_s[1] == pytest.approx(a_steps + _prefill_s(10) - 0.001, rel=1e-9)
    # with no later arrival the run had ended there, B unfinished
    r = simulate(cfg, dataclasses.replace(req, arrival_s=req.arrival_s[:2], prompt_tokens=req.prompt_tokens[:2],
                                          output_tokens=req.output_tokens[:2], acceptance=req.acceptance[:2]), seed=0)
    assert r.finished.tolist() == [False, True] and r.too_long == 1


# --- a trace's own acceptance --------------------------------------------------------------------------------------

def _tokens_per_pass(level: float, depth: int) -> float:
    return sum(level ** j for j in range(depth + 1))


@pytest.mark.parametrize("tree", [False, True])
def test_a_traces_acceptance_column_is_drawn_as_the_flags_rate_and_needs_no_flag(tmp_path, capsys, tree):
    """One request of 100 + 4,000 tokens whose trace row says acceptance_rate 0.6, k = 3. On a chain a pass gains
    1 + 0.6 + 0.36 + 0.216 = 2.18 tokens; on SGLang's top-4 tree of 8 nodes each depth has 7/3 candidates, accepted at
    1 - 0.4^(7/3) = 0.882, and a pass gains 3.35 tokens, as --acceptance-rate 0.6 gives. The column had been drawn as
    a chain's rate on the tree (1,838 passes instead of 1,195), and the run had been refused without an
    --acceptance-rate that it then ignored."""
    trace = tmp_path / "acc.csv"
    trace.write_text("arrival_time,prompt_tokens,output_tokens,acceptance_rate\n0,100,4000,0.6\n")
    tree_flags = ["--engine", "sglang", "--tree-topk", "4", "--num-draft-tokens", "8"] if tree else []
    code, out, err = run(capsys, "simulate", EAGLE3, "--trace", trace, "--no-compare", *tree_flags, "--format", "json")
    import json

    sim = json.loads(out)["sim"]
    assert code == 0, err
    level = 1 - 0.4 ** (7 / 3) if tree else 0.6
    passes = 3999 / _tokens_per_pass(level, 3)  # the prompt's step gives the first token
    assert sim["steps"] - 1 == pytest.approx(passes, rel=0.05)
    assert sim["scenario_detail"]["acceptance_source"] == "trace"
    assert "acceptance per request from its acceptance_rate column" in sim["scenario_detail"]["summary"]
    # a flag beside the column does not change the run (the column is each request's own)
    code, out, _ = run(capsys, "simulate", EAGLE3, "--trace", trace, "--no-compare", *tree_flags,
                       "--acceptance-rate", "0.1", "--format", "json")
    assert json.loads(out)["sim"]["steps"] == sim["steps"]


# --- a closed loop's queue ------------------------------------------------------------------------------------------

def test_a_closed_loop_with_more_clients_than_sequences_has_no_queue_growth(capsys):
    """40 clients against max_num_seqs 1: 39 requests wait behind the one running, always (the queue holds every
    client's request but one, and a client sends again only when answered). The last request sent drains behind 39
    others, about 40 x 1.2 s, longer than 30 s and 3 x its own 1.2 s decode: the run had said 'queue growth: 46 s to
    drain the backlog' and exited 1, for a queue that cannot grow."""
    code, out, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--client-concurrency", "40",
                         "--num-requests", "200", "--max-num-seqs", "1", "--prompt-tokens-median", "100",
                         "--output-tokens-median", "300", "--no-compare", "--format", "json")
    import json

    sim = json.loads(out)["sim"]
    assert sim["max_queue"] == 39 and sim["completed"] == 200
    assert sim["problems"] == [] and code == 0, (sim["problems"], err)


# --- a closed loop over replicas ------------------------------------------------------------------------------------

def _row(out: str, label: str) -> list[int]:
    line = next(line for line in out.splitlines() if line.startswith(label))
    return [int(cell.replace(",", "")) for cell in line[len(label):].split()]


@pytest.mark.parametrize("clients, per_replica, multiple", [(1, 1, 1.0), (5, 2, 2.5), (8, 2, 4.0)])
def test_a_closed_loops_fleet_throughput_counts_its_clients_not_its_replicas(capsys, clients, per_replica, multiple):
    """4 replicas, each simulated with the busiest one's share of the clients, ceil(C / 4). One client keeps one
    request in flight in the whole fleet: its throughput is one replica's, not four times it (the row had said 967
    tok/s for a client that gets 242). Five clients are 2 + 1 + 1 + 1: 2.5 replicas' worth of the simulated 2; eight
    are 4 x 2."""
    code, out, _ = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--gpus", "4", "--client-concurrency",
                       clients, "--num-requests", "40", "--prompt-tokens-median", "500", "--output-tokens-median", "100")
    assert code == 0
    busy = "" if clients >= 4 else f" ({clients} busy)"  # the replicas the clients reach
    one, fleet = _row(out, "throughput tok/s"), _row(out, f"all 4 replicas{busy}, tok/s")
    # both rows are shown rounded to whole tok/s: one replica's within 0.5 of its value, so `multiple` of it within
    # multiple / 2, and the fleet's own rounding 0.5 more
    assert all(abs(f - o * multiple) <= multiple / 2 + 0.5 for f, o in zip(fleet, one)), (one, fleet)
    scenario = out.splitlines()[0]
    if clients % 4:
        assert scenario.startswith(f"scenario: closed loop: {per_replica} client{'s' if per_replica > 1 else ''}, "
                                   f"10 requests per replica ({clients} client{'s' if clients > 1 else ''} in all over "
                                   "4 replicas")
    else:
        assert scenario.startswith("scenario: closed loop: 2 clients, 10 requests per replica (x 4 replicas)")


def test_a_short_traces_fleet_throughput_counts_the_replicas_it_reaches(tmp_path, capsys):
    """A trace's requests go round-robin over the replicas and the first replica's share is simulated: 2 requests over
    4 replicas reach two of them, each with one request, so the fleet serves 2 x one replica's tokens, not 4 x."""
    trace = tmp_path / "two.csv"
    trace.write_text("arrival_time,prompt_tokens,output_tokens\n0,100,100\n0.1,200,100\n")
    code, out, _ = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--gpus", "4", "--trace", trace)
    assert code == 0
    one, fleet = _row(out, "throughput tok/s"), _row(out, "all 4 replicas (2 busy), tok/s")
    assert all(abs(f - 2 * o) <= 1 for f, o in zip(fleet, one)), (one, fleet)


# --- the envelope's rate ---------------------------------------------------------------------------------------------

def _envelope_rate(capsys, concurrency: int, outputs: str) -> float:
    import json

    code, out, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--max-num-seqs", "8",
                         "--concurrency", concurrency, "--output-tokens", outputs, "--duration", "2", "--no-compare",
                         "--burst-factor", "1", "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)["sim"]["scenario_detail"]["rate_req_s"]


@pytest.mark.parametrize("outputs", ["p50=1,p95=1,p99=1,max=1", "p50=20,p99=50,max=100"])
def test_the_envelopes_rate_is_littles_law_with_the_prefill_share_at_every_load(capsys, outputs):
    """The rate that keeps L requests in flight when each takes E unshared and P seconds of prefill stretch every
    step by 1 / (1 - rate x P): rate x E / (1 - rate x P) = L, so 1 / rate = E / L + P, a straight line in 1 / L with
    the same E and P for every L at or above max_num_seqs (8: the batch, hence E, stops growing there), and never a
    rate past 1 / P, all the engine can prefill. A damped iteration capped at 95% had settled past it: with 1-token
    outputs 31.4 / 44.2 / 103.5 req/s at L = 8 / 16 / 64, where prefill alone takes 26 ms a prompt (38.5 req/s at
    most; 69.9 req/s at the file's L = 44, 181% of the GPU), and with 20-token outputs a rate that fell as L grew
    (39.7 req/s at 16, 37.6 at 64)."""
    loads = (8, 16, 64)
    inverse = [1 / _envelope_rate(capsys, n, outputs) for n in loads]
    slopes = [(inverse[i] - inverse[i + 1]) / (1 / loads[i] - 1 / loads[i + 1]) for i in range(2)]
    assert slopes[0] == pytest.approx(slopes[1], rel=1e-9) and slopes[0] > 0  # E
    per_prompt = inverse[-1] - slopes[1] / loads[-1]  # P, the intercept
    assert 0.02 < per_prompt < 0.03  # about 26 ms to prefill the mean prompt of ~1,160 tokens
    assert inverse[0] > inverse[1] > inverse[2] > per_prompt  # more in flight, more arrivals, never past 1 / P


# --- a closed loop's clients wait for their answers ------------------------------------------------------------------

def test_a_closed_loop_never_has_more_requests_in_flight_than_clients(capsys):
    """1,000 clients of 1-token requests, whose API server streams at its cap (the step floor), so each answer's
    front-end latency is stretched 20-fold (12.5 ms / (1 - 0.95)). A closed loop of N clients holds N requests at most:
    by Little's law the completion rate x the mean end-to-end latency (which counts that stretched latency) cannot
    pass N. Clients had sent their next request after the bare 12.5 ms, before their last answer had reached them:
    1,095 requests in flight for 1,000 clients."""
    import json

    code, out, err = run(capsys, "simulate", EAGLE3, "--acceptance-rate", "0.7", "--prompt-tokens-median", "1",
                         "--output-tokens-median", "1", "--client-concurrency", "1000", "--num-requests", "20000",
                         "--no-compare", "--format", "json")
    sim = json.loads(out)["sim"]
    assert code == 0, err
    in_flight = sim["littles_law"]["arrival_rate_x_mean_e2e"]
    assert 900 < in_flight <= 1000 * (1 + 1e-9), in_flight


@pytest.mark.parametrize("which", ["prompt", "output"])
def test_a_p99_below_its_median_is_named_as_the_flag_that_holds_it(capsys, which):
    """The error had named `tokens_p99`, the workload generator's own name and no input."""
    code, _, err = run(capsys, "simulate", "--acceptance-rate", "0.7", f"--{which}-tokens-median", "100",
                       f"--{which}-tokens-p99", "50", "--duration", "10")
    assert code == 2 and err.startswith(f"specsize: error: {which}_tokens_p99: 50 is below the median 100")
