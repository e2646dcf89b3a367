"""vLLM caps one serving default by the other when it fills them in (engine/arg_utils.py, the `vllm serve` path, read
in the 0.10.0-0.32.0 sdists): a defaulted max_num_seqs is no larger than max_num_batched_tokens from 0.10.1
("self.max_num_seqs = min(default_max_num_seqs[usage_context], self.max_num_batched_tokens or sys.maxsize)"; 0.10.0
assigns the default as it is), and a defaulted max_num_batched_tokens no larger than max_num_seqs x max_model_len from
0.11.1 ("Ensure max_num_batched_tokens does not exceed model limit"; not in 0.11.0). A value the user sets is never
capped, and a budget below the sequences the user set is still refused, as vLLM's SchedulerConfig refuses it."""

from __future__ import annotations

import pytest

from specsize.catalog import load_gpu, load_model
from specsize.core.errors import SpecError
from specsize.core.memory import account
from specsize.core.specs import Deployment, EngineSettings
from specsize.engines import resolve_profile


def settings(version: str, **engine):
    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("H100-SXM-80GB"), tp=1,
                   engine=EngineSettings(**engine))
    return account(d, resolve_profile("vllm", version)).settings


def test_a_small_budget_caps_the_default_sequences_from_0_10_1():
    # an H100 takes 1,024 sequences by default (>= 70 GiB, not an A100): 0.10.0 refuses a 512-token budget below them,
    # 0.10.1 on start with 512 sequences
    with pytest.raises(SpecError) as err:
        settings("0.10.0", max_num_batched_tokens=512)
    assert err.value.field == "max_num_batched_tokens"
    for version in ("0.10.1", "0.10.2", "0.11.0", "0.14", "0.32", "0.33"):
        s = settings(version, max_num_batched_tokens=512)
        assert (s.max_num_seqs, s.max_num_batched_tokens) == (512, 512), version
    # sequences the user sets are not capped: vLLM refuses the budget below them
    with pytest.raises(SpecError) as err:
        settings("0.32", max_num_batched_tokens=512, max_num_seqs=1024)
    assert err.value.field == "max_num_batched_tokens"
    # a budget above the default leaves it: 1,024 sequences under 16,384 tokens
    assert settings("0.32", max_num_batched_tokens=16_384).max_num_seqs == 1024


def test_few_short_sequences_cap_the_default_budget_from_0_11_1():
    # 2 sequences of at most 2,048 tokens: the H100's default 8,192-token budget becomes 2 x 2,048 = 4,096 from
    # 0.11.1, stays 8,192 in 0.11.0; a budget the user sets stays
    assert settings("0.11.0", max_num_seqs=2, max_model_len=2048).max_num_batched_tokens == 8192
    for version in ("0.11.1", "0.11.2", "0.12", "0.14", "0.32", "0.33"):
        assert settings(version, max_num_seqs=2, max_model_len=2048).max_num_batched_tokens == 4096, version
    assert settings("0.32", max_num_seqs=2, max_model_len=2048,
                    max_num_batched_tokens=8192).max_num_batched_tokens == 8192


def test_sglang_profiles_do_not_take_vllms_caps():
    for version in ("0.4.6", "0.5.6", "latest"):
        p = resolve_profile("sglang", version)
        assert not p.default_seqs_within_batched and not p.default_batched_within_seqs_len
