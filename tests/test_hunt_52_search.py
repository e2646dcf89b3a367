"""Hunt 52 (search and placement): each bug with the value worked out by hand, independently of the code's formula."""

from dataclasses import replace
from pathlib import Path

import pytest

from specsize import api
from specsize.catalog.gpus import load_efficiency
from specsize.core.memory import account
from specsize.core.perf import decode_step, prefill_time, spec_tpot
from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig
from specsize.core.speculation import Tree
from specsize.engines import resolve_profile
from specsize.inputs.search_spec import read_search_spec
from specsize.planner.perf import costs_for, pass_tokens
from specsize.planner.search import Candidate, SearchResult, pareto_front, run_search
from specsize.reports.search import render
from helpers import run_cli as run

PROFILE = resolve_profile()




def spec_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


WORKLOAD_8B = """
target: meta-llama/Llama-3.1-8B-Instruct
tp: [1]
max_model_len: 16384
workload:
  prompt_tokens: {p50: 3000, p99: 4000}
  output_tokens: {p50: 150, p99: 500}
  concurrency: 48
  burst_factor: 1.5
"""


def test_gpus_with_and_without_a_price_are_refused_not_ranked_on_one_scale(tmp_path, capsys):
    # before: one unpriced A100 (cost 1, in GPUs) ranked as cheaper than one H100 at $2.5/h
    spec = spec_file(tmp_path, WORKLOAD_8B + """
drafters: [{method: none}]
gpus:
  - {gpu: H100-SXM-80GB, counts: [1], price_per_hour: 2.5}
  - {gpu: A100-80GB, counts: [1, 2]}
max_num_seqs: [256]
slo: {tpot_p99_ms: 500}
""")
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 2 and out == ""
    assert "gpus.price_per_hour" in err and "A100-80GB" in err and "Traceback" not in err


def test_two_drafters_with_one_label_are_refused(tmp_path, capsys):
    # before: both screened as "ngram", but the simulation looked the drafter up by label (the last one's acceptance
    # for both) and the second was skipped as an already-confirmed neighbour
    body = WORKLOAD_8B + """
gpus: [{gpu: H100-SXM-80GB, counts: [1], price_per_hour: 2.5}]
kv_cache_dtypes: [fp8]
max_num_seqs: [256]
slo: {tpot_p99_ms: 500}
drafters:
  - {method: ngram, acceptance_rate: 0.9, ks: [2]%s}
  - {method: ngram, acceptance_rate: 0.1, ks: [2]%s}
"""
    code, _, err = run(capsys, "search", spec_file(tmp_path, body % ("", "")), "--no-simulate")
    assert code == 2 and "drafters" in err and "'ngram'" in err and "label" in err
    labelled = read_search_spec(str(spec_file(tmp_path, body % (", label: good", ", label: poor"))))
    assert [d.label for d in labelled.drafters] == ["good", "poor"]


PREFILL_HEAVY = WORKLOAD_8B + """
gpus: [{gpu: H100-SXM-80GB, counts: [1], price_per_hour: 2.5}]
kv_cache_dtypes: [fp8]
max_num_seqs: [256]
slo: {tpot_p99_ms: 500}
drafters:
  - {method: none}
  - {method: ngram, acceptance_rate: 0.5, ks: [3], proposal_rate: 1, label: a50}
  - {method: ngram, acceptance_rate: 0.7, ks: [3], proposal_rate: 1, label: a70}
  - {method: ngram, acceptance_rate: 0.9, ks: [3], proposal_rate: 1, label: a90}
"""


def _unshared(space, label: str):
    """(TPOT, TTFT of the p99 prompt, seconds of prefill per p50 prompt) before prefill shares the GPU, from the
    performance model's step costs at the peak batch (72 = 48 x 1.5, under max_num_seqs=256)."""
    drafter = next(d for d in space.drafters if d.label == label)
    k = drafter.ks[0]
    spec = SpeculativeConfig() if not drafter.speculative.enabled else \
        SpeculativeConfig(method="ngram", num_speculative_tokens=k, proposal_rate=drafter.speculative.proposal_rate)
    d = Deployment(target=space.target, gpu=space.gpus[0].gpu, speculative=spec, tp=1, num_gpus=1,
                   engine=EngineSettings(max_model_len=16384, kv_cache_dtype="fp8", max_num_seqs=256))
    mem = account(d, PROFILE)
    costs = costs_for(d, mem, load_efficiency(d.gpu), k if spec.enabled else 0, Tree())
    context = 4000 + 500 // 2  # p99 prompt + half the p99 output
    if spec.enabled:
        tpot = spec_tpot(costs, 72, context, pass_tokens(drafter.acceptance.per_token(k), k, Tree()))
    else:
        tpot = decode_step(costs, 72, context).time_s
    chunk = mem.settings.max_num_batched_tokens
    return tpot, prefill_time(costs, 4000, chunk), prefill_time(costs, 3000, chunk)


def test_screen_stretches_by_the_prefill_share_of_the_rate_that_keeps_the_concurrency(tmp_path):
    # The arrivals that keep C = 48 requests in flight, found by iterating Little's law with the latency the prefill
    # share stretches (as the simulation's rate is found), times the burst (1.5) at the peak. Before, the rate came
    # from the unstretched latency: the faster the decode, the more arrivals it was charged, so every drafter "needed
    # 195%-342% of the GPU" for prefill and even plain decode 148%. Worked by hand for `none`: E = 0.092 s + 150 x
    # 13.18 ms = 2.07 s, P = 67.4 ms (the fp8 cache's prompt attention at the 16-bit peak on Hopper since stop 59):
    # r = 48 / (2.07 + 48 x 0.0674) = 0.61 / P, u = 1.5 x 0.61 = 0.915 < 0.95, TPOT 13.18 / (1 - 0.915) = 155 ms;
    # for a = 0.9 at k = 3, E = 0.90 s: r P = 0.78, u = 1.17 > 1: the burst's prompts alone overrun the GPU (1.18 since
    # vLLM 0.32's n-gram lookup scans on the GPU, Model Runner V2's NgramGPUSpeculator: no host scan in E; 1.19 since
    # 0.33 keeps async scheduling with n-gram on Model Runner V2: the engine core's 10 us a sequence beside the forward).
    path = spec_file(tmp_path, PREFILL_HEAVY)
    space = read_search_spec(str(path))
    result = run_search(space, PROFILE, load_efficiency)
    by_label = {c.drafter: c for c in result.candidates}
    for label, cand in by_label.items():
        tpot, ttft, per_prompt = _unshared(space, label)
        latency = ttft + 150 * tpot
        lo, hi = 0.0, 1 / per_prompt  # Little's law with the stretched latency, rate x latency / (1 - share) = 48,
        for _ in range(200):  # by bisection (the left side grows with the rate)
            rate = (lo + hi) / 2
            lo, hi = (rate, hi) if rate * latency / (1 - rate * per_prompt) < 48 else (lo, rate)
        share = 1.5 * rate * per_prompt
        if share >= 0.95:
            assert cand.status == "misses_throughput" and f"{share:.0%} of the GPU" in cand.reason, label
        else:
            assert cand.tpot_s == pytest.approx(tpot / (1 - share), rel=1e-9), label
            assert cand.ttft_s == pytest.approx(ttft / (1 - share), rel=1e-9), label
    assert by_label["none"].status == "ok" and by_label["none"].tpot_s == pytest.approx(0.155, rel=0.01)
    assert by_label["a90"].status == "misses_throughput" and "119% of the GPU at the burst" in by_label["a90"].reason


def test_queue_that_never_drains_misses_without_a_ttft_target(tmp_path):
    # 64 requests in flight per replica, only a TPOT target: max_num_seqs=32 can run half of them, so the arrivals
    # that keep 64 in flight outrun what it serves and the queue grows for as long as the load lasts (the simulation
    # rejects it for queue growth); before, it was "ok" and spent the confirmation budget. max_num_seqs=64 equals the
    # expected load, and the burst (x2) adds 64 more that it never has a free slot to drain; 256 serves the burst.
    spec = spec_file(tmp_path, """
target: meta-llama/Llama-3.1-8B-Instruct
drafters: [{method: none}]
gpus: [{gpu: H200-141GB, counts: [1], price_per_hour: 3.5}]
tp: [1]
kv_cache_dtypes: [fp8]
max_num_seqs: [32, 64, 256]
max_model_len: 8192
workload:
  prompt_tokens: {p50: 500, p99: 2000}
  output_tokens: {p50: 200, p99: 500}
  concurrency: 64
  burst_factor: 2
slo: {tpot_p99_ms: 200}
""")
    result = run_search(read_search_spec(str(spec)), PROFILE, load_efficiency)
    by_seqs = {c.max_num_seqs: c for c in result.candidates}
    assert by_seqs[32].status == "misses_throughput" and "(96 at its peak) never drains" in by_seqs[32].reason
    assert by_seqs[64].status == "misses_throughput" and "(64 at its peak) never drains" in by_seqs[64].reason
    assert by_seqs[256].status == "ok"


def _cand(i: int, cost: float, headroom: float, throughput: float, status: str = "ok") -> Candidate:
    return Candidate(gpu="g", gpus=1, tp=1, replicas=1, drafter="d", method="none", k=i, kv_cache_dtype="auto",
                     max_num_seqs=1, status=status, reason="", headroom=headroom, tpot_s=1.0, ttft_s=1.0,
                     throughput_tok_s=throughput, cost=cost, cost_unit="GPUs", kv_cache_tokens=1)


def test_pareto_front_is_the_brute_force_front_and_stays_fast():
    import random

    rng = random.Random(7)
    for _ in range(300):
        cands = [_cand(i, rng.choice([1, 2, 3]), rng.choice([0.1, 0.3, rng.random()]),
                       rng.choice([100.0, 200.0, rng.random() * 300]), rng.choice(["ok", "thin", "misses_tpot"]))
                 for i in range(rng.randint(0, 30))]
        meeting = [c for c in cands if c.status in ("ok", "thin")]
        # by definition: no other configuration at most as dear with at least its headroom and throughput, ties kept
        # once (the cheapest, then most headroom, then most throughput, then first listed)
        order = sorted(meeting, key=lambda c: (c.cost, -c.headroom, -c.throughput_tok_s))
        want = [c for n, c in enumerate(order) if not any(
            o.cost <= c.cost and o.headroom >= c.headroom and o.throughput_tok_s >= c.throughput_tok_s
            for o in order[:n])]
        assert pareto_front(cands) == want
    # 40,000 configurations all on the front (each dearer one has more headroom): a scan of the front for each was
    # 800 million comparisons (minutes); the staircase's speed is bench/search_speed.py's to measure
    many = [_cand(i, float(i), i / 40_000, 1000.0 - i / 100) for i in range(40_000)]
    assert len(pareto_front(many)) == 40_000


def test_a_family_where_nothing_starts_names_the_configuration_least_short():
    """Every configuration without a KV cache has headroom -inf: the first listed had been named the closest. The one
    least short of a pool is (here the third: 1 GiB short against 5 and 3)."""
    from specsize.planner.search import rejected_families

    short = [replace(_cand(i, 1.0, float("-inf"), 0.0, "does_not_fit"), kv_cache_bytes=-gib * 2**30)
             for i, gib in enumerate((5, 3, 1))]
    (family,) = rejected_families(short)
    assert family["status"] == "does_not_fit" and ", k=2," in family["why"]


def test_rejected_family_names_the_configuration_nearest_the_slo(tmp_path):
    # a family that misses TPOT everywhere: its closest is the one with the lowest TPOT, not the first with the most
    # headroom (before: 98.6 ms named over 47.5 ms for the 70B on A100s of the example)
    result = api.search(Path(__file__).resolve().parent.parent / "examples" / "search" / "llama70b.yaml",
                        simulate=False)
    family = next(f for f in result.rejected_families if f["gpu"] == "A100-80GB" and f["drafter"] == "none")
    members = [c for c in result.candidates if c.gpu == "A100-80GB" and c.drafter == "none"
               and c.status == "misses_tpot"]
    assert family["status"] == "misses_tpot" and len(members) > 1
    fastest = min(c.tpot_s for c in members)
    assert f"TPOT {fastest * 1e3:.1f} ms" in family["why"]


def test_text_says_none_confirmed_when_the_simulation_rejects_every_finalist():
    # the screen found a configuration, the simulation rejected it: "none" alone read as if nothing met the screen
    rejected = replace(_cand(1, 1.0, 0.5, 100.0), confirmed=False, simulation={"problems": ["queue growth"]})
    result = SearchResult(name="s", screened=1, skipped=0, screen_seconds=0.0, candidates=(_cand(1, 1.0, 0.5, 100.0),),
                          cheapest=None, pareto=(), rejected_families=(), finalists=(), simulated_rejected=(rejected,))
    assert "  none confirmed by simulation\n" in render(result, "text")


def test_failover_backlog_is_per_survivor_and_says_so():
    # 150 requests on 3 x H100 (8B, max_num_seqs 64): one replica down leaves 2 survivors with 75 each; each runs 64,
    # so 11 per survivor wait; the sentence's count is the per-survivor backlog, and says it is
    p = api.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", gpus=3, concurrency=150,
                 max_num_seqs=64, max_model_len=16384, prompt_tokens="p50=2000,p99=8000",
                 output_tokens="p50=300,p99=1000", ttft_slo_ms=2000)
    f = p.placement.failover
    assert (f.survivors, f.load_per_survivor) == (2, 75)
    assert f.backlog_requests > 0
    assert f"by then {f.backlog_requests:.0f} requests queue at each survivor" in f.sentence
    # the clients send 150 / L(50) requests a second, as the three replicas held them (Little's law, L the latency of
    # a request at 50 in flight: TTFT + 300 x TPOT); each survivor takes half and serves 64 per L(64): the backlog
    # grows at 75 / L(50) - 64 / L(64) for the restart and drains at 64 / L(64) (tests/test_hunt_54_placement.py)
    survivors = api.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", gpus=2, concurrency=150,
                         max_num_seqs=64, max_model_len=16384, prompt_tokens="p50=2000,p99=8000",
                         output_tokens="p50=300,p99=1000", ttft_slo_ms=2000)
    before = p.perf.ttft_s + 300 * p.perf.tpot_s_no_spec
    after = survivors.perf.ttft_s + 300 * survivors.perf.tpot_s_no_spec
    served = 64 / after
    assert f.added_wait_s == pytest.approx((150 / before / 2 - served) * f.cold_start_s / served, rel=1e-9)
    assert f.added_wait_s > 11 / 64 * f.cold_start_s  # 75 against 64 at one latency: the survivors are slower
    assert f.cold_start_s == pytest.approx(p.placement.storage.cold_start_cached_s)  # a replica restarts warm
