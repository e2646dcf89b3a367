"""One configuration, three views: the search's screen, `plan` and the simulator agree on it (the same
memory account, peak concurrency, replica share and block pool), whatever the load."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import deployment, profile, workload
from specsize.catalog.gpus import load_efficiency
from specsize.core.memory import account
from specsize.core.speculation import Acceptance
from specsize.inputs.search_spec import DrafterOption, GpuOption, SearchSlo, SearchSpace
from specsize.planner.plan import plan, replica_workload
from specsize.planner.search import screen
from specsize.planner.simulate import engine_config

DRAFT = "meta-llama/Llama-3.2-1B-Instruct"
TARGET = "meta-llama/Llama-3.1-8B-Instruct"


@settings(max_examples=25, deadline=None)
@given(concurrency=st.integers(1, 400), burst=st.sampled_from([1.0, 1.1, 1.25, 1.5, 2.0, 3.3]),
       gpus=st.sampled_from([1, 2, 4]), k=st.integers(1, 5), mns=st.sampled_from([16, 64, 256]))
def test_search_plan_and_simulator_agree(concurrency, burst, gpus, k, mns):
    d = replace(deployment(TARGET, draft=DRAFT, method="draft_model", k=k, max_model_len=16384, max_num_seqs=mns),
                num_gpus=gpus)
    w = workload(concurrency=concurrency, burst=burst)
    planned = plan(d, w, profile())
    space = SearchSpace(name="one", target=d.target,
                        drafters=(DrafterOption("draft", d.speculative, Acceptance(rate=0.7), (k,)),),
                        gpus=(GpuOption(d.gpu, (gpus,), None),), tps=(1,), kv_cache_dtypes=("auto",),
                        max_num_seqs=(mns,), engine=replace(d.engine, max_num_seqs=None), workload=w,
                        slo=SearchSlo(), headroom=0.2, gpus_per_node=8, finalists=0, simulate_seconds=10.0,
                        engine_version=None)
    (candidate,), _ = screen(space, profile(), load_efficiency)
    assert candidate.headroom == planned.verdict.worst_case.headroom_fraction
    assert candidate.kv_cache_tokens == planned.memory.kv_cache_tokens
    assert (candidate.status == "does_not_fit") == (planned.verdict.verdict == "does_not_fit")
    # the simulator runs the plan's pool and limits for one replica's share
    cfg = engine_config(d, account(d, profile()), load_efficiency(d.gpu))
    assert cfg.num_blocks == planned.memory.usable_blocks and cfg.max_num_seqs == planned.memory.settings.max_num_seqs
    assert replica_workload(d, w).concurrency == -(-concurrency // gpus)


def test_a_configurations_screen_figures_do_not_depend_on_the_rest_of_the_space():
    """The screen shares work between configurations (one memory account per engine instance, step costs per
    GPU, TP, drafter, k and KV dtype). max_num_seqs sets the largest step in a CUDA graph (2 x max_num_seqs x (1 + k)
    tokens, at most 512): with 16 sequences a 64-sequence decode step runs eagerly, with 64 in a graph. So the
    64-sequence configuration screened beside a 16-sequence one must be screened as it is alone, on one GPU and on
    several (replicas)."""
    d = deployment(TARGET, draft=DRAFT, method="draft_model", k=3, max_model_len=16384)
    w = workload(concurrency=80, burst=1.0)

    def space(mns: tuple[int, ...]) -> SearchSpace:
        return SearchSpace(name="one", target=d.target,
                           drafters=(DrafterOption("none", replace(d.speculative, method="none", draft=None),
                                                   None, (0,)),
                                     DrafterOption("draft", d.speculative, Acceptance(rate=0.7), (3,))),
                           gpus=(GpuOption(d.gpu, (1, 2), None),), tps=(1,), kv_cache_dtypes=("auto",),
                           max_num_seqs=mns, engine=replace(d.engine, max_num_seqs=None), workload=w,
                           slo=SearchSlo(), headroom=0.2, gpus_per_node=8, finalists=0, simulate_seconds=10.0,
                           engine_version=None)

    alone, _ = screen(space((64,)), profile(), load_efficiency)
    beside, _ = screen(space((16, 64)), profile(), load_efficiency)
    assert [c for c in beside if c.max_num_seqs == 64] == alone
    assert len(alone) == 4 and all(c.tpot_s for c in alone)
    assert {c.max_num_seqs for c in beside} == {16, 64}

    # two drafters a spec labels alike, at the same k, are still two drafters (a 1B and a 3B draft model)
    from specsize.catalog import load_model

    small = DrafterOption("same", d.speculative, Acceptance(rate=0.7), (3,))
    big = DrafterOption("same", replace(d.speculative, draft=load_model("meta-llama/Llama-3.2-3B-Instruct")),
                        Acceptance(rate=0.7), (3,))
    each = [screen(replace(space((64,)), drafters=(o,)), profile(), load_efficiency)[0] for o in (small, big)]
    both, _ = screen(replace(space((64,)), drafters=(small, big)), profile(), load_efficiency)
    # the screen's order: GPU count, then drafter
    assert [(c.gpus, c.status, c.tpot_s) for c in both] == \
        [(c.gpus, c.status, c.tpot_s) for pair in zip(*each) for c in pair]
    assert each[0][0].tpot_s != each[1][0].tpot_s


def test_acceptance_is_one_type_everywhere():
    from specsize.planner import perf, search, speedup

    assert perf.Acceptance is Acceptance and search.Acceptance is Acceptance and speedup.Acceptance is Acceptance


def test_blocks_per_request_have_one_owner_sliding_windows_included():
    """gpt-oss-20b alternates full attention with 128-token sliding windows: a long request holds about half
    the blocks a full-attention count gives, in the envelope and in the simulator alike."""
    import numpy as np

    from specsize.core.kvcache import pool_blocks, request_kv_bytes
    from specsize.simulator.engine import _blocks_for

    d = deployment("openai/gpt-oss-20b", max_model_len=16384)
    mem = account(d, profile())
    layers, bs = mem.kv_layers, mem.settings.block_size
    tokens = 8000
    full_layers = sum(1 for layer in layers if layer.kind == "full")
    window = next(layer.window for layer in layers if layer.kind == "sliding")
    # by hand: full layers hold ceil(8000/16) = 500 blocks, sliding ones ceil((128 - 1 + 1)/16) + 1 = 9
    expected = -(-(full_layers * 500 + (len(layers) - full_layers) * (-(-window // bs) + 1)) // len(layers))
    assert pool_blocks(layers, tokens, bs) == expected < 500
    assert pool_blocks(layers, tokens, bs) * bs * mem.kv_bytes_per_token >= request_kv_bytes(layers, tokens, bs)
    cfg = engine_config(d, mem, load_efficiency(d.gpu))
    assert list(_blocks_for(cfg, np.array([tokens, 16, 0]))) == [expected, 1, 0]
