"""Simulator against cases worked out by hand (a GPU of round numbers: 1e12 B/s, 1e15 FLOP/s, ideal
efficiency, no overheads) and Little's law on a long Poisson run."""

import dataclasses

import numpy as np
import pytest

from specsize.catalog import load_model
from specsize.core.errors import SpecError
from specsize.core.perf import Efficiency, coefficients, model_cost
from specsize.core.specs import GpuSpec
from specsize.simulator.engine import EngineConfig, simulate
from specsize.simulator.workload import AcceptanceSpec, LengthSpec, RateProfile, closed_batch, generate

ROUND_GPU = GpuSpec("round", "round", 80 * 2**30, memory_bandwidth_bytes_s=1e12, bf16_flops=1e15, fp8_flops=None,
                    interconnect_bytes_s=1e11)
IDEAL = Efficiency("ideal", 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0)
W = 2_471_628_800  # Llama-3.2-1B weights read per step (tied table read as the lm_head)
ACT = 2 * 2048 * 2 * 16  # activation bytes per token
KV = 32_768  # KV bytes per context token


def config(num_blocks=100_000, k=0, max_num_seqs=256, batched=8192):
    co = coefficients(model_cost(load_model("meta-llama/Llama-3.2-1B-Instruct"), 1, "bfloat16", None),
                      ROUND_GPU, IDEAL)
    return EngineConfig(num_blocks=num_blocks, block_size=16, max_num_seqs=max_num_seqs,
                        max_num_batched_tokens=batched, k=k, target=co)


def test_single_request_by_hand():
    # prefill of 1,000 tokens, no context: memory-bound (2.47e12 flops take 2.47 ms at 1e15, the bytes 2.60 ms)
    # + causal attention inside the prompt: 1000 x 1001 / 2 pairs x 4 x (32 heads x 64) x 16 layers flops at 1e15
    ttft = (W + ACT * 1000) / 1e12 + 1000 * 1001 / 2 * 4 * 2048 * 16 / 1e15
    # then 4 decode steps over contexts 1000..1003
    decodes = sum(W + ACT + KV * (1000 + j) for j in range(4)) / 1e12
    r = simulate(config(), closed_batch(1, 1000, 5), seed=0)
    assert r.ttft_s[0] == pytest.approx(ttft, rel=1e-9)
    assert r.e2e_s[0] == pytest.approx(ttft + decodes, rel=1e-9)
    assert r.tpot_s[0] == pytest.approx(decodes / 4, rel=1e-9)
    assert r.steps == 5 and r.preemptions == 0


def test_closed_batch_exactly_fills_the_pool():
    # 8 requests of 1,000 + 25 tokens hold at most 1,024 KV tokens each (the last token's KV is never
    # written) = 64 blocks of 16: 512 blocks hold all 8 at once without preempting
    r = simulate(config(num_blocks=512), closed_batch(8, 1000, 25), seed=0)
    assert r.preemptions == 0 and r.finished.all()
    assert r.series["kv_used_fraction"].max() == pytest.approx(1.0)
    # one block less and the newest request is preempted when the pool runs out
    short = simulate(config(num_blocks=511), closed_batch(8, 1000, 25), seed=0)
    assert short.preemptions >= 1 and short.finished.all()


def test_burst_that_must_preempt_by_hand():
    # two requests of 160 + 161 tokens in a 30-block pool: both grow to 15 blocks (240 tokens) and then need
    # a 16th each; the newest is preempted (freeing 15), recomputes 240 tokens after the first finishes
    # (it needs 15 blocks, only 14 are free before that), and then completes alone: exactly 1 preemption
    r = simulate(config(num_blocks=30), closed_batch(2, 160, 161), seed=0)
    assert r.preemptions == 1
    assert r.recomputed_tokens == 240
    assert r.finished.all()
    assert r.e2e_s[1] > r.e2e_s[0]


def test_speculation_accepts_all_with_acceptance_one():
    # k=3 and a=1: every step yields 4 tokens, so 1 prefill + ceil(12 / 4) = 3 verification steps make 13
    r = simulate(config(k=3), closed_batch(1, 100, 13, acceptance=1.0), seed=0)
    assert r.steps == 4
    r0 = simulate(config(k=3), closed_batch(1, 100, 13, acceptance=0.0), seed=0)
    assert r0.steps == 13  # a=0: one token per step


def test_a_draft_trees_siblings_are_verified_beside_its_chain():
    # SGLang's tree of N = 8 nodes at k = 3 verifies 8 tokens a sequence (the chain of 4 and 4 siblings at its
    # positions), accepting at most 4: one request of 1,000 + 5 tokens at a = 1 prefills, then verifies once over
    # its 1,000 tokens, memory-bound: the weights, 8 tokens' activations and the context's KV (the chain: 4 tokens')
    import dataclasses

    for extra, tokens in ((0, 4), (4, 8)):
        cfg = dataclasses.replace(config(k=3), tree_extra=extra)
        r = simulate(cfg, closed_batch(1, 1000, 5, acceptance=1.0), seed=0)
        assert r.steps == 2
        assert r.e2e_s[0] - r.ttft_s[0] == pytest.approx((W + ACT * tokens + KV * 1000) / 1e12, rel=1e-12)


def test_a_request_longer_than_the_pool_is_said_to_be_one_the_engine_never_runs():
    # a pool of 64 blocks of 16 holds 1,024 tokens: a 2,000-token prompt can never be admitted. It had been reported as
    # "queue growth" (with a queue that never held a request); the run says what it is, and the rest still run
    r = simulate(config(num_blocks=64), _mixed_lengths(), seed=0)
    assert r.too_long == 1 and int(r.finished.sum()) == 2
    # in a closed loop of one client the refusal answers it: it sends its third request (it had waited for ever)
    closed = simulate(config(num_blocks=64), dataclasses.replace(_mixed_lengths(), clients=1), seed=0)
    assert closed.too_long == 1 and int(closed.finished.sum()) == 2
    from specsize import api

    common = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", rate=1, duration=20,
                  kv_cache_memory_bytes=2_000_000_000, prompt_tokens_median=5000, prompt_tokens_p99=40000,
                  output_tokens_median=50, max_model_len=60000, no_compare=True)
    s = api.simulate(**common).spec
    assert s.too_long > 0 and s.unfinished == s.too_long  # 2 GB hold 15,258 tokens of Llama-3.1-8B
    assert [p.kind for p in s.problems] == ["unfinished"] and "can never run" in s.problems[0]
    assert not any("queue growth" in p for p in s.problems)


def test_drawn_requests_longer_than_max_model_len_are_refused_as_a_traces_are():
    # prompts drawn lognormal with p50 3,000 and p99 30,000 (sigma = ln 10 / 2.326 = 0.99) against max_model_len
    # 8,192 with 200-token outputs: P(prompt > 7,992) = P(z > ln(7992 / 3000) / 0.99 = 0.99) = 16%. The engine answers
    # those 400 (as a trace's): they had been cut to 8,191 tokens and run, 8,391 tokens each
    from specsize import api

    common = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", rate=4, duration=50,
                  prompt_tokens_median=3000, prompt_tokens_p99=30000, output_tokens_median=200, max_model_len=8192,
                  no_compare=True)
    r = api.simulate(**common)
    drawn = r.scenario.rejected + r.spec.requests
    assert 0.08 < r.scenario.rejected / drawn < 0.26, (r.scenario.rejected, drawn)
    assert "which the engine refuses, left out" in r.scenario.description and r.spec.unfinished == 0
    # outputs alike: p50 3,000 and p99 30,000 with 100-token prompts, P(output > 8,092) = P(z > 1.00) = 16% (they had
    # been cut to 4,096 tokens and run)
    outputs = api.simulate(**{**common, "prompt_tokens_median": 100, "prompt_tokens_p99": None,
                              "output_tokens_median": 3000, "output_tokens_p99": 30000})
    drawn = outputs.scenario.rejected + outputs.spec.requests
    assert 0.08 < outputs.scenario.rejected / drawn < 0.26, (outputs.scenario.rejected, drawn)
    # a workload's lengths are drawn up to its own max (a longer request is never sent), not to max_model_len
    env = api.simulate(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", rate=1, duration=10,
                       prompt_tokens="p50=1000,p99=4000,max=5000", output_tokens="p50=100,p99=400,max=500",
                       max_model_len=16384, no_compare=True)
    assert (env.scenario.prompt.maximum, env.scenario.output.maximum) == (5000, 500)


def test_a_lengths_files_request_longer_than_max_model_len_is_refused_as_a_traces_is(tmp_path):
    from specsize import api

    lengths = tmp_path / "lengths.csv"
    lengths.write_text("prompt_tokens,output_tokens\n100,200\n300,100\n100,10000\n")
    r = api.simulate(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", rate=2, duration=30,
                     lengths_file=str(lengths), max_model_len=8192, no_compare=True, seed=1)
    drawn = r.scenario.rejected + r.spec.requests  # a third of the draws are the 10,100-token pair
    assert 0.15 < r.scenario.rejected / drawn < 0.55 and r.spec.unfinished == 0, (r.scenario.rejected, drawn)
    lengths.write_text("prompt_tokens,output_tokens\n100,10000\n")
    with pytest.raises(SpecError, match="lengths_file"):
        api.simulate(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", rate=2, duration=30,
                     lengths_file=str(lengths), max_model_len=8192, no_compare=True)


def _mixed_lengths():
    from specsize.simulator.workload import Requests

    return Requests(arrival_s=np.array([0.0, 0.1, 0.2]), prompt_tokens=np.array([500, 2000, 500]),
                    output_tokens=np.array([10, 10, 10]), acceptance=np.zeros(3), duration_s=1.0)


def test_littles_law_on_a_long_poisson_run():
    req = generate(RateProfile(2.0), 3000.0, LengthSpec.lognormal(400, 1600, 4000), LengthSpec.lognormal(100, 400, 800),
                   AcceptanceSpec(0.0), seed=7)
    r = simulate(config(num_blocks=20_000, max_num_seqs=64), req, seed=7)
    assert r.finished.all()
    offered_rate = len(req) / 3000.0
    mean_in_system = r.area_in_system / r.end_time_s
    assert mean_in_system == pytest.approx(offered_rate * np.mean(r.e2e_s), rel=0.02)
    # SGLang's receive interval holds arrivals back from its queue: they are in the system all the same
    import dataclasses

    held = simulate(dataclasses.replace(config(num_blocks=20_000, max_num_seqs=64), prefill_first=True,
                                        recv_interval=30), req, seed=7)
    assert held.finished.all() and np.mean(held.ttft_s) > np.mean(r.ttft_s)
    assert held.area_in_system / held.end_time_s == pytest.approx(offered_rate * np.mean(held.e2e_s), rel=0.02)


def test_deterministic_under_seed():
    req = generate(RateProfile(5.0), 60.0, LengthSpec.lognormal(300, 900), LengthSpec.lognormal(60, 200),
                   AcceptanceSpec(0.7, 0.1), seed=3)
    a = simulate(config(k=4), req, seed=11)
    b = simulate(config(k=4), req, seed=11)
    c = simulate(config(k=4), req, seed=12)
    assert np.array_equal(a.e2e_s, b.e2e_s) and a.steps == b.steps
    assert not np.array_equal(a.e2e_s, c.e2e_s)


def test_acceptance_draws_read_in_blocks_are_the_generators_own_stream():
    # the simulator draws its uniforms in blocks of 65,536 (engine._Uniforms); read n at a time across block ends they
    # must be the values numpy's generator gives when asked for n at a time, so a seed means one run
    from specsize.simulator.engine import _Uniforms

    blocks, direct = _Uniforms(5), np.random.default_rng(5)
    for n in [1, 70, 65_000, 600, 3, 200_000, 256] * 3:
        assert np.array_equal(blocks.take(n), direct.random(n))


def test_workload_lognormal_percentiles():
    rng = np.random.default_rng(0)
    samples = LengthSpec.lognormal(1000, 4000).sample(rng, 200_000)
    assert np.median(samples) == pytest.approx(1000, rel=0.02)
    assert np.percentile(samples, 99) == pytest.approx(4000, rel=0.03)


def test_burst_rate_profile():
    from specsize.simulator.workload import Burst

    profile = RateProfile(10.0, (Burst(100, 50, 3.0),))
    arrivals = generate(profile, 300, LengthSpec.lognormal(10), LengthSpec.lognormal(10), AcceptanceSpec(0.5),
                        seed=1).arrival_s
    inside = ((arrivals >= 100) & (arrivals < 150)).sum() / 50
    outside = ((arrivals < 100) | (arrivals >= 150)).sum() / 250
    assert inside == pytest.approx(30, rel=0.15) and outside == pytest.approx(10, rel=0.1)


def test_trace_formats(tmp_path):
    from specsize.catalog.traces import read_trace

    azure = tmp_path / "azure.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n")
    t = read_trace(azure)
    assert t.arrival_s[0] == 0 and t.arrival_s[1] == pytest.approx(4.314579, abs=1e-5)
    assert t.prompt_tokens == [374, 396] and t.output_tokens == [44, 109]
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"arrival_time": 2.5, "prompt_tokens": 10, "output_tokens": 3}\n'
                     '{"arrival_time": 1.0, "prompt_tokens": 20, "output_tokens": 4}\n')
    t = read_trace(jsonl)
    assert t.arrival_s == [0.0, 1.5] and t.prompt_tokens == [20, 10]


def test_frontend_intake_by_hand():
    from specsize.simulator.engine import frontend_receive

    # 10 ms of intake each on one shared core (processor sharing): two sent together each get half of it and both
    # reach the engine at 20 ms; one sent at 1 s finds the API server idle (1.01 s); one never sent stays at inf
    t = frontend_receive(np.array([0.0, 0.0, 1.0, np.inf]), 0.01)
    assert t[:3] == pytest.approx([0.02, 0.02, 1.01])
    assert np.isinf(t[3])
    # sent at 0 and 5 ms: the first has 5 ms done alone, then both share; it needs 5 ms more at half speed (10 ms,
    # done at 15 ms), by when the second has 5 ms done and finishes its other 5 ms alone (20 ms)
    assert frontend_receive(np.array([0.0, 0.005]), 0.01) == pytest.approx([0.015, 0.02])


def test_a_burst_queues_in_the_front_end():
    # 200 one-token requests sent at once share the API server's 5 ms of intake each: all reach the engine together
    # after 200 x 5 ms = 1 s, so every TTFT grows by about 1 s against a front-end without that work
    import dataclasses

    req = closed_batch(200, 16, 1)
    base = simulate(config(), req, seed=0)
    queued = simulate(dataclasses.replace(config(), frontend_serial_s=0.005), req, seed=0)
    assert np.nanmin(queued.ttft_s) >= 200 * 0.005 - 1e-9
    assert np.nanmean(queued.ttft_s) - np.nanmean(base.ttft_s) == pytest.approx(200 * 0.005, rel=0.1)


def test_frontend_intake_properties():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from specsize.simulator.engine import frontend_receive

    @settings(max_examples=50, deadline=None)
    @given(st.lists(st.floats(0, 100), min_size=1, max_size=50), st.floats(1e-4, 0.1))
    def check(gaps, serial):
        sent = np.cumsum(gaps)
        t = frontend_receive(sent, serial)
        assert (t >= sent + serial - 1e-9).all()  # none leaves before it was sent and served
        assert (np.diff(t) >= -1e-9).all()  # equal work: they leave in the order sent
        # against one at a time in the order sent (t_i = max(sent_i, t_(i-1)) + serial): both keep the core busy
        # while anyone waits, so each busy period ends at the same moment; sharing never lets a request out sooner
        fifo = np.empty(len(sent))
        prev = -np.inf
        for i, x in enumerate(sent):
            prev = fifo[i] = max(x, prev) + serial
        assert (t >= fifo - 1e-9).all()
        assert t[-1] == pytest.approx(fifo[-1])

    check()


def test_prefill_first_steps_by_hand():
    # SGLang / vLLM V0: a step runs prompts only or decodes only, prompts first. Two requests of 1,000 + 3 tokens sent
    # at once with a budget of 1,000 tokens: step 1 prefills request 0 (P, as in test_single_request_by_hand),
    # step 2 prefills request 1 while request 0 waits with its first token, steps 3-4 decode both together over
    # contexts 1000 + 1000 and 1001 + 1001 (memory-bound: the weights once, both sequences' KV and activations)
    import dataclasses

    p = (W + ACT * 1000) / 1e12 + 1000 * 1001 / 2 * 4 * 2048 * 16 / 1e15
    d1 = (W + 2 * ACT + KV * 2000) / 1e12
    d2 = (W + 2 * ACT + KV * 2002) / 1e12
    r = simulate(dataclasses.replace(config(batched=1000), prefill_first=True), closed_batch(2, 1000, 3), seed=0)
    assert r.steps == 4
    assert r.ttft_s == pytest.approx([p, 2 * p], rel=1e-6)
    assert r.e2e_s == pytest.approx([2 * p + d1 + d2] * 2, rel=1e-6)
    assert r.tpot_s == pytest.approx([(p + d1 + d2) / 2, (d1 + d2) / 2], rel=1e-6)
    # V1's mixed steps instead run request 0's first decode beside request 1's prompt in step 2: a step sooner
    mixed = simulate(config(batched=1000), closed_batch(2, 1000, 3), seed=0)
    assert mixed.e2e_s[0] < r.e2e_s[0]


def test_multi_step_groups_by_hand():
    # vLLM V0 with --num-scheduler-steps 4: a decode step opens a group of 4 decode steps over the same batch.
    # Request 0 (1,000 + 3 tokens, at t = 0) is prefilled (P, as in test_single_request_by_hand), then decodes
    # over contexts 1000 and 1001 and has all 3 tokens after the group's second step; it stays in the batch for the
    # other two (computed, context 1002, nothing gained) and leaves when the group ends. Request 1 arrives just
    # after the prefill: it waits for the group's end, then is prefilled alone (no context of its own yet).
    import dataclasses

    from specsize.simulator.workload import from_arrays

    p = (W + ACT * 1000) / 1e12 + 1000 * 1001 / 2 * 4 * 2048 * 16 / 1e15
    def d(context):
        return (W + ACT + KV * context) / 1e12
    group = d(1000) + d(1001) + 2 * d(1002)
    arrive = p + 1e-6
    req = from_arrays([0.0, arrive], [1000, 1000], [3, 3], [0.0, 0.0])
    cfg = dataclasses.replace(config(batched=1000), prefill_first=True, scheduler_steps=4)
    r = simulate(cfg, req, seed=0)
    assert r.ttft_s[0] == pytest.approx(p, rel=1e-9)
    assert r.e2e_s[0] == pytest.approx(p + group, rel=1e-9)  # its last token reaches the client at the group's end
    assert r.ttft_s[1] == pytest.approx(p + group + p - arrive, rel=1e-9)
    assert r.steps == 1 + 4 + 1 + 4
    # one step at a time, request 1 is prefilled right after request 0's first decode
    single = simulate(dataclasses.replace(cfg, scheduler_steps=1), req, seed=0)
    assert single.ttft_s[1] == pytest.approx(p + d(1000) + p - arrive, rel=1e-9)


def test_a_streaming_multi_step_group_answers_a_request_at_the_step_that_finished_it():
    # The same pair with V0's async output processing (vLLM 0.6 worker/multi_step_model_runner.py
    # _async_process_outputs hands every step of the group to engine/llm_engine.py _process_model_outputs, which
    # sends a finished request's output then): request 0's third token, made by the group's second step, reaches its
    # client at once; it still decodes in the group's batch until the end (the group's time is unchanged), and
    # request 1 still waits for the group's end to be prefilled.
    from specsize.simulator.workload import from_arrays

    p = PROMPT_1000
    group = decode_1(1000) + decode_1(1001) + 2 * decode_1(1002)
    arrive = p + 1e-6
    req = from_arrays([0.0, arrive], [1000, 1000], [3, 3], [0.0, 0.0])
    cfg = dataclasses.replace(config(batched=1000), prefill_first=True, scheduler_steps=4, group_streams=True)
    r = simulate(cfg, req, seed=0)
    assert r.e2e_s[0] == pytest.approx(p + decode_1(1000) + decode_1(1001), rel=1e-9)
    assert r.tpot_s[0] == pytest.approx((decode_1(1000) + decode_1(1001)) / 2, rel=1e-9)
    assert r.ttft_s[1] == pytest.approx(p + group + p - arrive, rel=1e-9)
    assert r.steps == 1 + 4 + 1 + 4
    # one client (a closed loop): its second request is sent when the first's answer arrives, inside the group,
    # and waits for the group's last two steps (contexts 1002) before its prefill; without streaming it had been sent
    # at the group's end and prefilled at once
    closed = dataclasses.replace(closed_batch(2, 1000, 3), clients=1)
    loop = simulate(cfg, closed, seed=0)
    assert loop.ttft_s[1] == pytest.approx(2 * decode_1(1002) + p, rel=1e-9)
    at_end = simulate(dataclasses.replace(cfg, group_streams=False), closed, seed=0)
    assert at_end.ttft_s[1] == pytest.approx(p, rel=1e-9)


def test_a_streaming_group_frees_an_answered_requests_blocks_and_never_preempts_inside():
    # vLLM schedules, allocates and preempts nothing inside a multi-step group: its first step reserved N - 1
    # lookahead slots, and a request answered inside it frees its blocks at once (_process_model_outputs ->
    # free_finished_seq_groups). Three 1,000-token prompts (outputs 20, 20, 2) at N = 8 in 189 blocks of 16: the prompt
    # step holds ceil((1,000 + 7) / 16) = 63 blocks each, all 189; the group's first decode needs ceil(1,008 / 16) = 63,
    # nothing more; request 2 is answered at the group's second step and frees its 63; the next group's first step
    # needs ceil(1,016 / 16) = 64 for each of the other two, 2 of those 63. No preemption, no prompt recomputed (the
    # simulator had reserved a slot more at every step inside the group and preempted request 2 after its answer)
    from specsize.simulator.workload import from_arrays

    req = from_arrays([0.0, 0.0, 0.0], [1000, 1000, 1000], [20, 20, 2], [0.0, 0.0, 0.0])
    for streams in (True, False):
        cfg = dataclasses.replace(config(num_blocks=189, batched=4000), prefill_first=True, scheduler_steps=8,
                                  group_streams=streams)
        r = simulate(cfg, req, seed=0)
        assert r.finished.all() and r.preemptions == 0 and r.prefill_tokens == 3000
    # one block less and the prompts do not all fit their lookahead: the third waits
    tight = simulate(dataclasses.replace(config(num_blocks=188, batched=4000), prefill_first=True, scheduler_steps=8,
                                         group_streams=True), req, seed=0)
    assert tight.finished.all() and tight.ttft_s[2] > tight.ttft_s[0]


def test_littles_law_holds_when_groups_stream():
    # an answered request has left the system though its rows stay in the group's batch: the mean number in the
    # system over the run is the arrival rate times the mean end-to-end latency, streaming or not
    req = generate(RateProfile(20.0), 300.0, LengthSpec.lognormal(200, 600, 2000), LengthSpec.lognormal(20, 60, 200),
                   AcceptanceSpec(0.0), seed=5)
    for streams in (False, True):
        cfg = dataclasses.replace(config(num_blocks=20_000, max_num_seqs=64), prefill_first=True, scheduler_steps=16,
                                  group_streams=streams)
        r = simulate(cfg, req, seed=5)
        assert r.finished.all()
        rate = len(req) / 300.0
        assert r.area_in_system / r.end_time_s == pytest.approx(rate * np.mean(r.e2e_s), rel=0.02)


def test_a_streaming_group_answers_each_client_once():
    # one client, three requests of 1,000 + 3 tokens: each next request is sent when the previous answer arrives
    # (no front-end latency), never twice
    closed = dataclasses.replace(closed_batch(3, 1000, 3), clients=1)
    cfg = dataclasses.replace(config(batched=1000), prefill_first=True, scheduler_steps=4, group_streams=True)
    r = simulate(cfg, closed, seed=0)
    assert r.finished.all()
    assert r.arrival_s[1] == pytest.approx(r.arrival_s[0] + r.e2e_s[0], rel=1e-12)
    assert r.arrival_s[2] == pytest.approx(r.arrival_s[1] + r.e2e_s[1], rel=1e-12)


PROMPT_1000 = (W + ACT * 1000) / 1e12 + 1000 * 1001 / 2 * 4 * 2048 * 16 / 1e15  # a 1,000-token prefill step


def decode_1(context):
    """One decode step of one sequence over `context` tokens."""
    return (W + ACT + KV * context) / 1e12


def second_request_after_a_prefill(**engine):
    """Request 0 (1,000 + 10 tokens, at t = 0) is prefilled at once, then decodes; request 1 arrives just after the
    prefill, during the first decode step. The engine: prompt and decode steps apart (SGLang), and `engine`.
    Returns (simulated, when request 1 arrived, when it would be prefilled if taken in after that decode step)."""
    import dataclasses

    from specsize.simulator.workload import from_arrays

    arrive = PROMPT_1000 + 1e-6
    cfg = dataclasses.replace(config(batched=1000), prefill_first=True, **engine)
    r = simulate(cfg, from_arrays([0.0, arrive], [1000, 1000], [10, 10], [0.0, 0.0]), seed=0)
    assert r.ttft_s[0] == pytest.approx(PROMPT_1000, rel=1e-9)
    # an idle engine takes a request in at once, whatever its loop: request 1 comes after request 0 is done
    alone = simulate(cfg, from_arrays([0.0, 5.0], [1000, 1000], [2, 2], [0.0, 0.0]), seed=0)
    assert alone.ttft_s[1] == pytest.approx(PROMPT_1000, rel=1e-9)
    return r, arrive


def test_scheduler_recv_interval_by_hand():
    # SGLang's --scheduler-recv-interval 3: while it decodes, its scheduler takes new requests in only once the steps
    # since it last did weigh 3 (a decode step 1, a prompt step 1000: SchedulerRecvSkipper). The loop after request
    # 0's prefill takes requests in (weight 1000) before request 1 has come; the next two loops weigh 1 and 2 and do
    # not; the third takes it in, so it is prefilled after three decode steps, not one.
    p, d = PROMPT_1000, decode_1
    r, arrive = second_request_after_a_prefill(recv_interval=3)
    assert r.ttft_s[1] == pytest.approx(p + d(1000) + d(1001) + d(1002) + p - arrive, rel=1e-9)
    every, arrive = second_request_after_a_prefill(recv_interval=1)
    assert every.ttft_s[1] == pytest.approx(p + d(1000) + p - arrive, rel=1e-9)


def test_scheduled_ahead_by_hand():
    # vLLM V1's async scheduling and SGLang's overlap scheduler form step N + 1 while step N runs. Request 1 arrives
    # during request 0's first decode step, whose successor was formed when it started, before request 1 came: it is
    # prefilled after two decode steps, not one.
    p, d = PROMPT_1000, decode_1
    r, arrive = second_request_after_a_prefill(scheduled_ahead=True)
    assert r.ttft_s[1] == pytest.approx(p + d(1000) + d(1001) + p - arrive, rel=1e-9)
    sync, arrive = second_request_after_a_prefill(scheduled_ahead=False)
    assert sync.ttft_s[1] == pytest.approx(p + d(1000) + p - arrive, rel=1e-9)


def test_intervals_are_refused_where_the_engine_has_no_such_flag(capsys):
    from specsize.cli.main import main

    base = ["simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--rate", "1",
            "--duration", "5"]
    # vLLM has no receive interval; its --stream-interval came with 0.12 (PR 27869): 0.11 has none
    for extra, field in ((["--scheduler-recv-interval", "10"], "scheduler_recv_interval"),
                         (["--stream-interval", "10", "--engine-version", "0.11"], "stream_interval")):
        with pytest.raises(SystemExit) as exit_info:
            main(base + extra)
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert exit_info.value.code == 2 and field in err and "engine sglang" in err, err


def test_stream_interval_divides_the_api_servers_token_work():
    # SGLang hands a request's tokens to its API server every N tokens (--stream-interval): the per-sequence streaming
    # work of the catalog's Hopper row (150 us per sequence and step, SGLang's api_cost_scale 1) over 10
    from specsize.catalog import load_gpu
    from specsize.catalog.gpus import load_efficiency
    from specsize.core.memory import account
    from specsize.core.specs import Deployment, EngineSettings
    from specsize.engines import resolve_profile
    from specsize.planner.perf import Tree, costs_for

    def api_cost(interval):
        d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("H100-SXM-80GB"),
                       engine=EngineSettings(stream_interval=interval))
        mem = account(d, resolve_profile("sglang"))
        return costs_for(d, mem, load_efficiency(d.gpu), 0, Tree()).target_co.api_per_seq_s

    assert api_cost(1) == pytest.approx(150e-6, rel=1e-12)
    assert api_cost(10) == pytest.approx(15e-6, rel=1e-12)


def test_multi_step_scheduling_is_vllm_v0_only(capsys):
    from specsize.cli.main import main

    base = ["simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100-80GB", "--rate", "1",
            "--duration", "5", "--num-scheduler-steps", "10"]
    for extra, why in ((["--engine-version", "0.11"], "V0 engine only"),
                       (["--engine", "sglang"], "V0 engine only"),
                       (["--engine-version", "0.6", "--method", "ngram", "-k", "3", "--acceptance-rate", "0.5"],
                        "speculative")):
        with pytest.raises(SystemExit) as exit_info:
            main(base + extra)
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert exit_info.value.code == 2 and "num_scheduler_steps" in err and why in err, err


def test_offline_has_no_api_server_in_front():
    # one request alone (a closed loop of one client): online, its TTFT carries the catalog's front-end latency
    # and its own intake on the idle API server (frontend_latency_s + frontend_serial_s, 25 + 5 ms on an H100, as
    # the engine release scales its API server's work: api_cost_scale of the default, newest vLLM profile);
    # offline (LLM.generate) neither. The engine's work is the same, so the difference is exactly their sum.
    import specsize
    from specsize.catalog import load_gpu
    from specsize.catalog.gpus import load_efficiency
    from specsize.engines.registry import resolve_profile

    eff = load_efficiency(load_gpu("H100-SXM-80GB"))
    scale = resolve_profile("vllm").api_cost_scale
    common = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", client_concurrency=1,
                  num_requests=1, prompt_tokens_median=512, output_tokens_median=64, no_compare=True, seed=0)
    online = specsize.simulate(specsize.load_request(**common)).spec
    offline = specsize.simulate(specsize.load_request(offline=True, **common)).spec
    # the API server streams no other request's tokens, so nothing stretches the latency (its own prefill step had
    # counted as streaming load, 1 / (1 - api_per_seq_s / step): a longer prompt then reached its first token sooner)
    assert online.ttft_s.mean - offline.ttft_s.mean == pytest.approx(
        eff.frontend_latency_s * scale + eff.frontend_serial_s * scale, rel=1e-6)
    assert offline.tpot_s.mean == pytest.approx(online.tpot_s.mean, rel=1e-9)


def test_frontend_latency_stretches_with_the_api_servers_streaming_load():
    # 4 requests prefilled in one step of T seconds: the API server works api_per_seq_s = 1 ms per stream of the step,
    # and each first token shares it with the 3 others: busy 3 ms / T, and the 20 ms front-end latency of each becomes
    # 20 ms / (1 - 3 ms / T) (processor sharing; its own stream is no load beside itself); with no API-server work per
    # sequence it stays 20 ms
    import dataclasses

    base = config()
    busy_cfg = dataclasses.replace(base, frontend_latency_s=0.02,
                                   target=dataclasses.replace(base.target, api_per_seq_s=1e-3))
    bare = simulate(base, closed_batch(4, 1000, 5), seed=0)
    step = bare.ttft_s[0]
    assert bare.ttft_s == pytest.approx([step] * 4)
    loaded = simulate(busy_cfg, closed_batch(4, 1000, 5), seed=0)
    assert loaded.ttft_s == pytest.approx([step + 0.02 / (1 - 3e-3 / step)] * 4, rel=1e-9)
    idle = simulate(dataclasses.replace(base, frontend_latency_s=0.02), closed_batch(4, 1000, 5), seed=0)
    assert idle.ttft_s == pytest.approx([step + 0.02] * 4, rel=1e-9)


def test_admission_holds_back_what_the_running_requests_still_need_by_hand():
    # two requests of 1,000 + 10 tokens, chunks of 256, a 100-block pool (1,600 tokens)
    # vLLM V1 ("chunk") admits the second as soon as its first chunk's 16 blocks fit beside the first's: both prompts
    # grow to 63 blocks each and the pool runs short: the newest is preempted
    def run(admission, blocks=100):
        cfg = config(num_blocks=blocks, batched=256)
        cfg = EngineConfig(**{**cfg.__dict__, "admission": admission})
        return simulate(cfg, closed_batch(2, 1000, 10), seed=0)

    chunk = run("chunk")
    assert chunk.preemptions >= 1 and chunk.finished.all()
    # vLLM V0 ("prompt") admits the second only when its whole prompt (63 blocks: 1,000 tokens + the last token's
    # slot) fits beside the first's remaining prompt: 63 + 63 > 100, so it waits for the first to finish
    prompt = run("prompt")
    assert prompt.preemptions == 0 and prompt.finished.all()
    assert prompt.ttft_s[1] > prompt.e2e_s[0] - 1e-12
    # SGLang ("sglang") also reserves the output: 1,000 + 10 tokens = 64 blocks of 16 (ceil 1,010 / 16), and the
    # first's 10 outputs x 0.7: with 128 blocks both fit (64 + 63 + 1 = 128); with 127 the second waits
    assert run("sglang", 128).ttft_s[1] < run("sglang", 128).e2e_s[0]
    waits = run("sglang", 127)
    assert waits.preemptions == 0 and waits.ttft_s[1] > waits.e2e_s[0] - 1e-12


def test_a_run_past_its_step_limit_stops_with_an_error():
    """One request of 1 + 4 steps (prefill, then 4 decodes) runs with a limit of 5 and stops at a limit of 4."""
    from specsize.core.errors import SpecError

    assert simulate(config(), closed_batch(1, 1000, 5), seed=0, max_steps=5).steps == 5
    with pytest.raises(SpecError, match="passed 4 engine steps"):
        simulate(config(), closed_batch(1, 1000, 5), seed=0, max_steps=4)


def test_the_simulator_prices_ngram_steps_without_a_proposal_as_the_tables_do():
    """With proposals in half the decode steps (k = 3, a = 0.6 per proposed token) a request gains 1.588 tokens a
    step, not 2.176, and verifies 2.5 positions on average: one request at a time, the simulated TPOT is the
    speed-up table's at batch 1 (both about 4.5 ms for Llama-3.1-8B on an H100, against 3.3 ms when every step
    proposes)."""
    from specsize import api

    common = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", method="ngram",
                  num_speculative_tokens=3, acceptance_rate=0.6, offline=True)
    tpots = {}
    for rate in (1.0, 0.5):
        simulated = api.simulate(proposal_rate=rate, rate=0.2, duration=120, prompt_tokens_median=1000,
                                 output_tokens_median=200, seed=0, **common).spec.tpot_s.p50
        table = api.speedup(proposal_rate=rate, batch_sizes=(1,), context_len=1100, **common).drafters[0].table
        assert simulated == pytest.approx(table.rows[0].tpot_s, rel=0.03)
        tpots[rate] = simulated
    assert tpots[0.5] / tpots[1.0] == pytest.approx(2.176 / 1.588, rel=0.03)  # per-pass gain, same step cost at B=1


def test_a_missed_slo_is_a_problem_and_turns_a_fitting_plan_thin():
    """Fuzz pass 3: --ttft-slo-ms counted the goodput (0 requests within 0.1 us) yet the plan said fits. Fewer than
    99% of the requests within the SLO is now a problem of its own (slo_missed), which makes fits thin; a generous SLO
    counts every finished request and trips nothing."""
    from specsize import api

    common = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", max_model_len=16384,
                  prompt_tokens="p50=800,p99=6000", output_tokens="p50=250,p99=1000", concurrency=8, duration=20,
                  acceptance_rate=0.7, seed=0)
    tight = api.simulate(ttft_slo_ms=1e-4, **common).spec
    assert tight.goodput_req_s == 0.0 and [p.kind for p in tight.problems] == ["slo_missed"] and not tight.sustains
    assert "0.0% of the requests finished within TTFT <= 0.0001 ms" in tight.problems[0]
    loose = api.simulate(ttft_slo_ms=1e7, **common).spec
    assert not loose.problems and loose.goodput_req_s == pytest.approx(loose.completed / loose.end_time_s)
    thin = api.plan(simulate=True, ttft_slo_ms=1e-4, **common).verdict
    assert thin.verdict == "thin" and thin.breaks_first.startswith("Under the simulated burst: ")  # what worsened it
    assert api.plan(simulate=True, ttft_slo_ms=1e7, **common).verdict.verdict == "fits"
    # a plan the envelope already refuses keeps its own sentence (by how much the cache falls short), not the milder
    # problem the burst run finds on top
    short = api.plan(simulate=True, ttft_slo_ms=1e-4, **{**common, "concurrency": 120, "gpu": "L40S-48GB"}).verdict
    assert short.verdict == "does_not_fit" and short.breaks_first.startswith("The KV cache: at ")
    assert any(reason.startswith("simulated burst: ") for reason in short.reasons)


def test_the_ngram_lookups_scan_of_each_history_by_hand():
    # vLLM V1's n-gram lookup scans each decoding sequence's history every speculative step: k = 3 and a = 1 verify
    # after a 100-token prompt over histories of 100, 104 and 108 tokens, so 312 tokens x 1 us = 312 us more end to
    # end; the prefill step proposes nothing and the first token is not delayed
    base = simulate(config(k=3), closed_batch(1, 100, 13, acceptance=1.0), seed=0)
    cfg = EngineConfig(**{**config(k=3).__dict__, "cpu_draft_per_token_s": 1e-6})
    slow = simulate(cfg, closed_batch(1, 100, 13, acceptance=1.0), seed=0)
    assert slow.steps == base.steps == 4
    assert slow.e2e_s[0] - base.e2e_s[0] == pytest.approx(312e-6, rel=1e-9)
    assert slow.ttft_s[0] == pytest.approx(base.ttft_s[0], rel=1e-12)


def test_serial_output_processing_by_hand():
    # vLLM V0 with speculation processes a step's emitted tokens before it forms the next step (no asynchronous
    # output processing): k = 3 and a = 1 give 3 verification steps of 4 tokens after the prefill's first token,
    # so 12 tokens x 50 us = 0.6 ms more end to end; the first token is not delayed by the steps after it
    base = simulate(config(k=3), closed_batch(1, 100, 13, acceptance=1.0), seed=0)
    cfg = EngineConfig(**{**config(k=3).__dict__, "serial_output_s": 50e-6})
    slow = simulate(cfg, closed_batch(1, 100, 13, acceptance=1.0), seed=0)
    assert slow.steps == base.steps == 4
    assert slow.e2e_s[0] - base.e2e_s[0] == pytest.approx(12 * 50e-6, rel=1e-9)
    assert slow.ttft_s[0] == pytest.approx(base.ttft_s[0], rel=1e-12)


def test_a_batch_sent_at_once_is_not_scheduling_instability():
    # 200 requests sent together (an offline batch, as `--client-concurrency 200 --num-requests 200`): their prompts
    # are prefilled 16 at a time within the 8,192-token budget, so the last quarter's first tokens come ~4x later than
    # the first quarter's. That is the order of one batch, not latency degrading under a sustained load
    from specsize import api

    common = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", max_model_len=8192,
                  prompt_tokens_median=500, output_tokens_median=200, offline=True, no_compare=True)
    batch = api.simulate(client_concurrency=200, num_requests=200, **common).spec
    assert batch.ttft_s.p99 > 1.5 * batch.ttft_s.p50 and batch.completed == 200  # the last wait behind the first
    assert batch.sustains and not batch.problems
    # nor is a long one queue growth: 1,000 requests through 32 sequences take about a minute, all of it "after the
    # last arrival"
    long = api.simulate(client_concurrency=1000, num_requests=1000, max_num_seqs=32, **common).spec
    assert long.end_time_s > 30 and long.completed == 1000 and long.sustains and not long.problems


def test_the_peaks_are_every_steps_not_only_the_sampled_ones():
    # the time series is sampled (about 2,000 points a run); the KV and queue peaks a run is judged by are the most
    # of every step: the same as a series sampled at every step, whatever the sampling
    req = generate(RateProfile(30.0), 20.0, LengthSpec.lognormal(400, 1600, 4000), LengthSpec.lognormal(100, 400, 800),
                   AcceptanceSpec(0.0), seed=2)
    every = simulate(config(num_blocks=1_000, max_num_seqs=8), req, seed=2, sample_interval_s=1e-12)
    sparse = simulate(config(num_blocks=1_000, max_num_seqs=8), req, seed=2, sample_interval_s=1e9)
    assert len(every.series["t"]) == every.steps and len(sparse.series["t"]) == 1
    for r in (every, sparse):
        assert r.kv_peak_fraction == max(every.series["kv_used_fraction"]) > 0.3
        assert r.max_waiting == max(every.series["waiting"]) > 0


def test_a_burst_whose_backlog_outlasts_the_arrivals_is_queue_growth():
    # 6 req/s with a x3 burst over the first 40 s, into 16 sequences at a time: the burst's backlog (852 requests at
    # its peak) is still draining when the arrivals end at 200 s. Its drain had been held against 3 x the p50
    # end-to-end latency, which that same backlog had stretched to 141 s, so the run "sustained" the load; it is held
    # against 3 x a request's own time in the engine (first token to last), which no queue lengthens
    from specsize import api

    common = dict(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", max_model_len=16384,
                  prompt_tokens="p50=1500,p99=8000", output_tokens="p50=300,p99=1200", max_num_seqs=16,
                  no_compare=True, seed=0)
    backlog = api.simulate(rate=6, burst_factor=3, burst_start=0, burst_duration=40, duration=200, **common).spec
    assert backlog.max_queue > 800 and backlog.e2e_s.p50 > 100
    assert [p.kind for p in backlog.problems] == ["queue_growth"] and not backlog.sustains
    steady = api.simulate(rate=2, duration=60, **common).spec  # no backlog: nothing to drain
    assert steady.sustains and steady.max_queue == 0


def test_the_text_shows_no_end_to_end_latency_where_no_request_finished(capsys):
    # prompts of 100,000 tokens arriving once a second into a 1 GB cache: none finishes in 5 s. The JSON says null;
    # the text had printed "0.00 / 0.00" s beside TTFT and TPOT's "-"
    from specsize.cli.main import main

    with pytest.raises(SystemExit):
        main(["simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--rate", "1",
              "--duration", "5", "--kv-cache-memory-bytes", "1000000000", "--prompt-tokens-median", "100000",
              "--output-tokens-median", "10", "--max-model-len", "100010"])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("E2E p50 / p99 s"))
    assert row.split()[-3:] == ["-", "/", "-"], row


def test_the_simulator_draws_an_sglang_tree_as_the_performance_model_prices_it():
    # EAGLE-3 on SGLang, top-4, k = 3 at a = 0.7: a tree of N = 2 (the root and one draft) gains 1.7 tokens a pass,
    # one of N = 8 (7 draft nodes, 2.33 a depth) 3.65; the simulator had drawn both as the same chain of 3 at 0.7
    # (the same TPOT to the digit)
    import specsize

    def tpot(n: int) -> float:
        return specsize.simulate(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine="sglang",
                                 method="eagle3", num_speculative_tokens=3, acceptance_rate=0.7, tree_topk=4,
                                 num_draft_tokens=n, client_concurrency=4, num_requests=40,
                                 prompt_tokens_median=500, output_tokens_median=200, no_compare=True,
                                 seed=3).spec.tpot_s.p50

    small, large = tpot(2), tpot(8)
    # a step's time barely changes at 4 sequences; the tokens a pass set TPOT: 3.65 / 1.7 = 2.15x
    assert 1.6 < small / large < 2.6, (small, large)


def test_a_replicas_figures_are_said_to_be_one_replicas(capsys):
    # 4 replicas at 20 req/s: each is simulated at 5 req/s, and the table had shown one replica's throughput as if it
    # were the fleet's; the header says so and a row gives all four
    from specsize.cli.main import main

    with pytest.raises(SystemExit):
        main(["simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--gpus", "4",
              "--rate", "20", "--duration", "10", "--no-compare"])
    out = capsys.readouterr().out
    assert "one replica of 4" in out
    one = int(next(line for line in out.splitlines() if line.startswith("throughput tok/s")).split()[-1].replace(",", ""))
    fleet = next(line for line in out.splitlines() if line.startswith("all 4 replicas, tok/s")).split()[-1]
    assert abs(int(fleet.replace(",", "")) - 4 * one) <= 2


def test_vllm_v1_admits_nothing_in_a_step_that_preempted_by_hand():
    """vLLM V1 schedules WAITING requests only when no running request was preempted in the step
    (vllm/v1/core/sched/scheduler.py schedule(): "if not preempted_reqs:"). Two running requests of 32 computed
    tokens (2 blocks each) both need a third block to decode with 1 block free: the newest is preempted (3 free
    after), the oldest takes its block (2 left). The victim, now the head of the queue, would fit again (its 32
    tokens: 2 blocks) but is not re-admitted in that step."""
    from collections import deque

    from specsize.simulator.engine import _book, _schedule
    from specsize.simulator.workload import from_arrays

    def step(cfg):
        b = _book(from_arrays([0.0, 0.0], [32, 32], [10, 10], [0.0, 0.0]))
        b.computed[:], b.generated[:], b.held[:], b.first_seen[:] = 32, 1, 2, True
        waiting: deque[int] = deque()
        return _schedule(cfg, b, np.array([0, 1]), waiting, 1, False), waiting

    (run, _, sched, _, free, preempted, lost), waiting = step(config(num_blocks=5))
    assert preempted == 1 and lost == 32
    assert run.tolist() == [0] and sched.tolist() == [1] and free == 2
    assert list(waiting) == [1]  # not re-admitted in the step that preempted it
    # V0's whole-prompt admission keeps its own rule: the victim is admitted again at once
    (run, *_), waiting = step(dataclasses.replace(config(num_blocks=5), admission="prompt"))
    assert run.tolist() == [0, 1] and not waiting
