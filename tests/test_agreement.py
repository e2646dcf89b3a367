"""One configuration, three views: the search's screen, `plan` and the simulator agree on it (the same
memory account, peak concurrency, replica share and block pool), whatever the load."""

from __future__ import annotations

from dataclasses import replace

import pytest
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


def _spec(tmp_path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ntarget: {TARGET}\n" + body + """
max_model_len: 16384
workload:
  prompt_tokens: {p50: 1500, p95: 4000, p99: 8000, max: 12000}
  output_tokens: {p50: 300, p95: 800, p99: 1200, max: 2000}
  concurrency: 24
slo: {ttft_p99_ms: 5000, tpot_p99_ms: 60}
""")
    return str(path)


def _planned(candidate, **drafter):
    """A plan of the configuration a search screened, from the same fields as _spec's."""
    import specsize

    fields = dict(target=TARGET, gpu=candidate.gpu, gpus=candidate.gpus, tp=candidate.tp, max_model_len=16384,
                  kv_cache_dtype=candidate.kv_cache_dtype, max_num_seqs=candidate.max_num_seqs,
                  prompt_tokens="p50=1500,p95=4000,p99=8000,max=12000", output_tokens="p50=300,p95=800,p99=1200,max=2000",
                  concurrency=24, **drafter)
    if candidate.k:
        fields["num_speculative_tokens"] = candidate.k
    return specsize.plan(**fields)


def test_an_sglang_search_sizes_the_pool_as_a_plan_does(tmp_path):
    # without gpu_memory_utilization in the spec the engine release's default holds (SGLang sizes its own
    # mem_fraction_static: 0.834 on an H100 here, 414,148 KV tokens); the screen had taken 0.9 (456,640 tokens)
    import specsize

    spec = _spec(tmp_path, "sglang", "engine: sglang\ndrafters: [{method: none}]\ngpus: [{gpu: H100-SXM-80GB, counts: [1]}]\n"
                 "tp: [1]\nkv_cache_dtypes: [auto, fp8]\nmax_num_seqs: [64]\n")
    result = specsize.search(spec, simulate=False)
    assert len(result.candidates) == 2
    for candidate in result.candidates:
        planned = _planned(candidate, engine="sglang")
        assert candidate.kv_cache_tokens == planned.memory.kv_cache_tokens
        assert candidate.headroom == planned.verdict.worst_case.headroom_fraction


def test_a_search_takes_a_mean_accepted_length_at_each_ks_own_k_and_any_order_of_ks_alike(tmp_path):
    # a mean accepted length without measured_at_k is a plan's: measured at the deployment's own k. The screen had
    # converted it at the first k listed, so [2, 5] and [5, 2] gave one configuration two TPOTs
    import specsize

    body = ("drafters: [{{method: eagle3, draft: sgl-project/SpecForge-llama3-8B-eagle3, mean_accepted_length: 2.5}}]\n"
            "ks: {ks}\ngpus: [{{gpu: H100-SXM-80GB, counts: [1]}}]\ntp: [1]\nkv_cache_dtypes: [auto]\nmax_num_seqs: [64]\n")
    one = specsize.search(_spec(tmp_path, "a", body.format(ks="[2, 5]")), simulate=False).candidates
    other = specsize.search(_spec(tmp_path, "b", body.format(ks="[5, 2]")), simulate=False).candidates
    assert sorted(one, key=lambda c: c.k) == sorted(other, key=lambda c: c.k)
    assert {c.k for c in one} == {2, 5} and all(c.tpot_s for c in one)
    for candidate in one:
        planned = _planned(candidate, method="eagle3", draft="sgl-project/SpecForge-llama3-8B-eagle3",
                           mean_accepted_length=2.5)
        assert candidate.headroom == planned.verdict.worst_case.headroom_fraction
    # 3.2 tokens per pass cannot be reached at k = 1 (at most 2): a spec listing k = 1 for it is refused by name
    with pytest.raises(specsize.SpecError, match="drafters"):
        specsize.search(_spec(tmp_path, "c", body.format(ks="[1, 4]").replace("2.5", "3.2")), simulate=False)


def test_a_search_screens_only_draft_tp_values_a_plan_accepts(tmp_path):
    # a draft model runs on one GPU or on the target's TP group: draft_tp 4 beside TP 1 or 2 is refused by a plan, so
    # the screen keeps only TP 4 (it had ranked 1 GPU at TP 1 the cheapest)
    import specsize

    spec = _spec(tmp_path, "dtp", "drafters: [{method: draft_model, draft: meta-llama/Llama-3.2-1B-Instruct, "
                 "acceptance_rate: 0.65, draft_tp: 4}]\nks: [3]\ngpus: [{gpu: H100-SXM-80GB, counts: [1, 2, 4]}]\n"
                 "tp: [1, 2, 4]\nkv_cache_dtypes: [auto]\nmax_num_seqs: [64]\n")
    result = specsize.search(spec, simulate=False)
    assert {c.tp for c in result.candidates} == {4}
    assert result.cheapest is not None and result.cheapest.tp == 4
