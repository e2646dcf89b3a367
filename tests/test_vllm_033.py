"""vLLM 0.33 as a profile of its own (engines/vllm.py V1_033), each rule against 0.32 on its other side.

Read in the 0.33.0 wheel against 0.32.0's (0.33.0 is the only 0.33 release on PyPI): Model Runner V2 for every method
specsize plans (Medusa gone), async scheduling checked by method only on the V1 runner, and a draft model shorter than
the target lowering max_model_len on V2. The V2 sampler's second (fp32) warm-up pass and the cuBLAS handles created
before the start-up snapshot are not pinned from the source: 0.33 plans them as 0.32 does (the last test).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from specsize.catalog import load_gpu, load_model
from specsize.core.memory import account, on_model_runner_v2
from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig
from specsize.core.speculation import drafter_kind, keeps_overlap
from specsize.engines.registry import beyond_known, resolve_profile


@pytest.mark.parametrize("version", ["0.33", "0.33.0", "0.33.4", None])
def test_033_is_modelled_and_the_newest(version):
    profile = resolve_profile("vllm", version)
    assert profile.version == "0.33" and profile.label.startswith("vLLM 0.33 (")
    assert resolve_profile("vllm", "0.32.9").version == "0.32"
    assert beyond_known("vllm", version) is None


def test_only_034_is_beyond_the_newest():
    # engines/registry.py BEYOND_NEWEST keeps 0.34's note (the extensible KV cache, blocks of 64) and none for 0.33
    assert beyond_known("vllm", "0.33.1") is None
    note = beyond_known("vllm", "0.34.0")
    assert note is not None and "(0.33)" in note and "extensible KV cache" in note and "blocks of 64 tokens" in note
    assert "0.33 keeps" not in note


@pytest.mark.parametrize("version, method, kept", [
    # config/vllm.py VllmConfig.__post_init__: 0.32 turns async scheduling off for "ngram" (not in EagleModelTypes,
    # NgramGPUTypes = "ngram_gpu", draft_model, dspark, dflash) whatever the runner; 0.33 checks the method only
    # "if not self.use_v2_model_runner", and every method runs on V2
    ("0.32.0", "ngram", False),
    ("0.33.0", "ngram", True),
    ("0.32.0", "draft_model", True),
    ("0.33.0", "draft_model", True),
    ("0.33.0", "eagle3", True),
    ("0.33.0", "mtp", True),
])
def test_async_scheduling_with_ngram_from_033(version, method, kept):
    profile = resolve_profile("vllm", version, method)
    assert keeps_overlap(drafter_kind(method), profile.async_drafters, "", 1) is kept


def test_ngrams_host_work_hides_behind_the_forward_from_033():
    # the overlap runs the engine core's per-sequence work beside the forward: at batch 32 and 10 us a sequence an
    # n-gram step is 32 x 10 us = 0.32 ms shorter on 0.33 than on 0.32 (the forward outlasts that work)
    from specsize.core.perf import build_costs, spec_step_time
    from tests.test_step_model import IDEAL, ROUND_GPU

    eff = replace(IDEAL, cpu_per_seq_s=1e-5)
    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=ROUND_GPU,
                   speculative=SpeculativeConfig("ngram", None, 4), engine=EngineSettings(max_model_len=8192))
    before, after = (build_costs(d, eff, "bfloat16", None, 2, async_scheduling=True,
                                 async_drafters=resolve_profile("vllm", v, "ngram").async_drafters)
                     for v in ("0.32.0", "0.33.0"))
    assert spec_step_time(before, 32, 500) - spec_step_time(after, 32, 500) == pytest.approx(32 * 1e-5, abs=1e-12)


@pytest.mark.parametrize("method", ["ngram", "draft_model", "eagle", "eagle3", "mtp"])
@pytest.mark.parametrize("pp", [1, 2])
def test_every_method_runs_model_runner_v2_on_033(method, pp):
    # config/vllm.py _get_v2_model_runner_unsupported_features: only "suffix" and "custom_class" in 0.33; Medusa, the
    # one method 0.32 kept on V1, is gone (engines/methods.py refuses it)
    target = load_model("deepseek-ai/DeepSeek-V2-Lite-Chat" if method == "mtp" else "meta-llama/Llama-3.1-8B-Instruct")
    draft = load_model("meta-llama/Llama-3.2-1B-Instruct") if method == "draft_model" else None
    d = Deployment(target=target, gpu=load_gpu("H100-SXM-80GB"), pp=pp,
                   speculative=SpeculativeConfig(method, draft, 3), engine=EngineSettings(max_model_len=8192))
    assert on_model_runner_v2(d, resolve_profile("vllm", "0.33.0", method))
    assert resolve_profile("vllm", "0.32.0").mrv2_v1_methods == ("medusa",)
    assert resolve_profile("vllm", "0.33.0").mrv2_v1_methods == ()


def _draft_deployment(method: str = "draft_model", max_model_len: int | None = None) -> Deployment:
    # Qwen3-8B serves 40,960 tokens (max_position_embeddings); Qwen2.5-0.5B-Instruct 32,768, the same 151,936 vocabulary
    draft = load_model("Qwen/Qwen2.5-0.5B-Instruct") if method == "draft_model" else None
    return Deployment(target=load_model("Qwen/Qwen3-8B"), gpu=load_gpu("H100-SXM-80GB"),
                      speculative=SpeculativeConfig(method, draft, 3),
                      engine=EngineSettings(max_model_len=max_model_len))


@pytest.mark.parametrize("version, max_model_len, expected", [
    # config/vllm.py _limit_max_model_len_to_draft (0.33): "reducing max_model_len to %d" where the draft's is smaller
    ("0.32.0", None, 40_960),
    ("0.33.0", None, 32_768),
    ("0.33.0", 36_000, 32_768),  # an explicit longer length is lowered with a warning, not refused
    ("0.33.0", 16_384, 16_384),  # a shorter one stays
])
def test_a_shorter_draft_model_caps_max_model_len_on_033(version, max_model_len, expected):
    d = _draft_deployment(max_model_len=max_model_len)
    assert account(d, resolve_profile("vllm", version, "draft_model")).settings.max_model_len == expected


def test_the_cap_leaves_the_pool_and_counts_more_requests():
    # the same pool bytes and blocks; a request of max_model_len holds ceil(40,960 / 16) = 2,560 blocks a layer on
    # 0.32 and ceil(32,768 / 16) = 2,048 on 0.33: 2,560 / 2,048 = 1.25 times the concurrency
    old, new = (account(_draft_deployment(), resolve_profile("vllm", v, "draft_model")) for v in ("0.32.0", "0.33.0"))
    assert new.kv_cache_bytes == old.kv_cache_bytes and new.kv_blocks == old.kv_blocks
    assert new.max_concurrency / old.max_concurrency == pytest.approx(2560 / 2048)


def test_an_eagle_head_keeps_the_targets_length():
    # EAGLE / MTP heads share the target's positions (config/speculative.py draft_shares_target_positions; heads with
    # other RoPE types, which 0.33 would cap too, are not modelled)
    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("H100-SXM-80GB"),
                   speculative=SpeculativeConfig("eagle3", None, 3), engine=EngineSettings())
    assert account(d, resolve_profile("vllm", "0.33.0", "eagle3")).settings.max_model_len == 131_072


@pytest.mark.parametrize("method", ["none", "eagle3", "ngram"])
def test_033_accounts_the_pool_as_032(method):
    # not pinned from the source alone (engines/vllm.py above V1_033): the V2 sampler's fp32 warm-up pass stays the V1
    # fit of 3.68 fp32 row-sets, 1,024 x 128,256 x 4 B x 3.68 = 1.80 GiB for Llama-3.1-8B on an H100 at the defaults;
    # the cuBLAS handles' share stays in the 0.25 GiB of non-torch memory at TP 1
    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("H100-SXM-80GB"),
                   speculative=SpeculativeConfig(method, None, 3 if method != "none" else 0),
                   engine=EngineSettings(max_model_len=8192))
    old, new = (account(d, resolve_profile("vllm", v, method)) for v in ("0.32.0", "0.33.0"))
    assert (new.kv_cache_bytes, new.activation_peak_bytes, new.non_torch_bytes, new.cuda_graph_bytes) == \
        (old.kv_cache_bytes, old.activation_peak_bytes, old.non_torch_bytes, old.cuda_graph_bytes)
    assert new.non_torch_bytes == int(0.25 * 2**30)
    assert new.settings.gpu_memory_utilization == 0.92 and new.settings.block_size == 16
    assert new.settings.max_num_seqs == 1024 and new.settings.max_num_batched_tokens == 8192
    sampler = new.activation_terms["sampler"] - 1.29 * 8192 * 4096 * 2  # less the hidden-state sets it holds
    assert sampler == pytest.approx(1024 * 128_256 * 4 * 3.68, rel=1e-6)
