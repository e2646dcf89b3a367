"""Envelope and verdict on a pool of known size: 1,000 usable blocks of 16 tokens of Llama-3.1-8B
(131,072 B/token); the engine's pool holds one more, the null block no request can use."""

from specsize.core.envelope import evaluate
from specsize.core.memory import account

from helpers import deployment, profile, workload

POOL = 1_000 * 16 * 131_072  # 2,097,152,000 bytes usable
POOL_WITH_NULL_BLOCK = 1_001 * 16 * 131_072


def plan_for(concurrency, burst=1.0, k=0, prompt=3000, output=200, **engine):
    method = "ngram" if k else "none"
    d = deployment(kv_cache_memory_bytes=POOL_WITH_NULL_BLOCK, max_model_len=8192, method=method, k=k, **engine)
    m = account(d, profile())
    w = workload(prompt=(1000, 2000, prompt, prompt), output=(100, 150, output, output),
                 concurrency=concurrency, burst=burst)
    return m, evaluate(m, w, 0.20)


def test_pool_is_exact():
    m, _ = plan_for(1)
    assert m.kv_blocks == 1_001 and m.usable_blocks == 1_000 and m.pool_bytes == POOL


def test_verdicts_by_hand():
    # a p99 request: 3,000 + 200 = 3,200 tokens = 200 blocks = 419,430,400 B; the pool holds 5 of them
    per_request = 200 * 16 * 131_072
    _, v = plan_for(3)
    assert v.worst_case.demand_bytes == 3 * per_request
    assert abs(v.worst_case.headroom_fraction - 0.4) < 1e-12 and v.verdict == "fits"
    _, v = plan_for(4, burst=1.25)  # peak 5: exactly full
    assert v.worst_case.concurrency == 5 and v.worst_case.headroom_fraction == 0.0 and v.verdict == "thin"
    _, v = plan_for(6)
    assert v.verdict == "does_not_fit" and "preempts" in v.breaks_first
    assert {s.label: s.max_concurrency for s in v.shapes}["p99"] == 5


def test_lookahead_slots_count():
    # k=4: 3,204 tokens -> 201 blocks per request
    _, v = plan_for(1, k=4)
    assert v.worst_case.demand_bytes == 201 * 16 * 131_072


def test_max_num_seqs_queues_the_rest():
    _, v = plan_for(10, max_num_seqs=4)
    assert (v.worst_case.concurrency, v.worst_case.queued) == (4, 6)
    assert v.verdict == "fits" and "max_num_seqs=4" in v.breaks_first


def test_request_longer_than_max_model_len_does_not_fit():
    _, v = plan_for(1, prompt=8000, output=1000)
    assert v.verdict == "does_not_fit" and "exceed max_model_len=8192" in v.breaks_first


def test_engine_refuses_to_start_when_one_request_does_not_fit():
    d = deployment(kv_cache_memory_bytes=100 * 16 * 131_072, max_model_len=8192)
    m = account(d, profile())
    assert m.startup_problem and "refuses to start" in m.startup_problem
    assert evaluate(m, workload(concurrency=1), 0.2).verdict == "does_not_fit"
