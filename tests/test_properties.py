"""Invariants, checked with hypothesis."""

from hypothesis import given, settings
from hypothesis import strategies as st

from specsize.core.envelope import evaluate
from specsize.core.memory import account
from specsize.core.specs import Deployment

from helpers import deployment, profile, workload

MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B", "google/gemma-2-9b", "mistralai/Mixtral-8x7B-v0.1",
          "openai/gpt-oss-20b", "microsoft/Phi-3-mini-4k-instruct", "Qwen/Qwen2.5-7B-Instruct"]
BASE = {m: account(deployment(m, gpu="H200-141GB", max_model_len=8192), profile()) for m in MODELS}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 300), st.integers(1, 300), st.integers(1, 30_000),
       st.integers(1, 30_000), st.integers(0, 8))
def test_more_concurrency_or_longer_prompts_never_need_less(model, c1, c2, p1, p2, k):
    m = BASE[model]
    lo_c, hi_c = sorted((c1, c2))
    lo_p, hi_p = sorted((p1, p2))

    def demand(c, p):
        return evaluate(m, workload(prompt=(p, p, p, p), output=(10, 10, 10, 10), concurrency=c), 0.2) \
            .worst_case.demand_bytes

    assert demand(lo_c, lo_p) <= demand(hi_c, lo_p) <= demand(hi_c, hi_p)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([1, 2, 4, 8]))
def test_fp8_kv_halves_kv_bytes(model, tp):
    d = deployment(model, gpu="H200-141GB", tp=tp, max_model_len=8192)
    if d.target.num_attention_heads % tp:
        return
    half = account(deployment(model, gpu="H200-141GB", tp=tp, max_model_len=8192, kv_cache_dtype="fp8"), profile())
    assert 2 * half.kv_bytes_per_token == account(d, profile()).kv_bytes_per_token


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.floats(20, 300), st.floats(20, 300))
def test_larger_gpu_never_fits_fewer_tokens(model, a, b):
    from specsize.catalog import load_gpu

    small, large = sorted((a, b))
    # the same engine settings on both: vLLM's own defaults grow at 70 GiB (max_num_seqs 1024, 8192 batched
    # tokens), which takes more activation memory, so with defaults a 70 GiB card can hold fewer tokens than a
    # 55 GiB one (gpt-oss-20b: 1,026,443 vs 1,030,566) -- the engine's behaviour, not the memory model's
    d = deployment(model, max_model_len=4096, max_num_seqs=256, max_num_batched_tokens=2048)

    def tokens(gib):
        return account(Deployment(target=d.target, gpu=load_gpu("H100-SXM-80GB", gib), engine=d.engine),
                       profile()).kv_cache_tokens

    assert tokens(small) <= tokens(large)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-3B-Instruct"]),
       st.integers(1, 8), st.sampled_from([1, 2, 4]))
def test_adding_a_drafter_never_adds_tokens(draft, k, tp):
    target = "meta-llama/Llama-3.1-70B-Instruct"
    plain = account(deployment(target, tp=tp, gpu="H200-141GB", max_model_len=8192), profile())
    with_draft = account(deployment(target, tp=tp, gpu="H200-141GB", max_model_len=8192, draft=draft,
                                    method="draft_model", k=k), profile())
    eagle = account(deployment(target, tp=tp, gpu="H200-141GB", max_model_len=8192,
                               draft="sgl-project/SpecForge-llama3-70B-eagle3", method="eagle3", k=k), profile())
    assert with_draft.kv_cache_tokens <= plain.kv_cache_tokens
    assert eagle.kv_cache_tokens <= plain.kv_cache_tokens
