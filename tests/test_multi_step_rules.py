"""vLLM V0's multi-step scheduling (--num-scheduler-steps N, 0.6-0.7) where vLLM itself refuses or changes it, each
rule on both sides. Found by fuzz pass 15; read in vLLM's sources: the 0.6.0 sdist and the 0.6.1.post2 / 0.6.2 / 0.6.3
/ 0.6.6 / 0.7.0 wheels' engine/arg_utils.py, the 0.6.4 and 0.7.3 sdists' config.py and worker/cpu_model_runner.py."""

import pytest

from helpers import deployment, profile
from specsize.core.errors import SpecError
from specsize.core.memory import account

LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def _steps(version: str, **kwargs) -> int:
    return account(deployment(**kwargs), profile(version)).settings.scheduler_steps


def test_before_0_6_3_multi_step_and_chunked_prefill_are_refused_together():
    # 0.6.0-0.6.2 arg_utils: "Chunked prefill is not supported with multi-step (--num-scheduler-steps > 1)", after
    # turning chunked prefill on by itself for a model longer than 32K (Llama-3.1-8B: 131,072)
    for version in ("0.6.0", "0.6.1", "0.6.2"):
        with pytest.raises(SpecError, match="num_scheduler_steps: .*chunked prefill") as info:
            _steps(version, num_scheduler_steps=8)
        assert "0.6.3 or later" in str(info.value)
        with pytest.raises(SpecError, match="num_scheduler_steps"):
            _steps(version, num_scheduler_steps=8, max_model_len=8192, chunked_prefill="on")
        # SGLang's benchmark_vllm_060 ran 0.6.0 with --num-scheduler-steps 10 --max_model_len 4096: chunked prefill off
        assert _steps(version, num_scheduler_steps=10, max_model_len=4096) == 10
        assert _steps(version, num_scheduler_steps=8, chunked_prefill="off") == 8
    # 0.6.3 runs the pair (its own profile now; the accounting is 0.6.0-0.6.2's)
    assert _steps("0.6.3", num_scheduler_steps=8) == 8
    assert profile("0.6.3").other_processes_in_non_torch == profile("0.6.2").other_processes_in_non_torch
    assert profile("0.6.3").label != profile("0.6.2").label


def test_multi_step_chunked_prefill_is_refused_over_pipeline_stages():
    # 0.6.3-0.7 arg_utils: "Multi-Step Chunked-Prefill is not supported for pipeline-parallel-size > 1"
    for version in ("0.6.3", "0.6.4", "0.7.3"):
        with pytest.raises(SpecError, match="num_scheduler_steps: .*pipeline"):
            _steps(version, target=LLAMA_70B, gpu="A100-80GB", tp=2, pp=2, num_scheduler_steps=8)
        # without chunked prefill (a model length of at most 32K) the stages run multi-step
        assert _steps(version, target=LLAMA_70B, gpu="A100-80GB", tp=2, pp=2, num_scheduler_steps=8,
                      max_model_len=8192) == 8


def test_multi_step_is_refused_on_the_cpu():
    # worker/cpu_model_runner.py execute_model (0.6.2-0.7.3): "CPU worker does not support multi-step execution."
    for version in ("0.6.4", "0.7.3"):
        with pytest.raises(SpecError, match="num_scheduler_steps: .*CPU worker"):
            _steps(version, target="Qwen/Qwen2.5-0.5B-Instruct", num_scheduler_steps=8, device="cpu")
        assert _steps(version, target="Qwen/Qwen2.5-0.5B-Instruct", num_scheduler_steps=1, device="cpu") == 1


def test_multi_step_never_chunks_a_prompt():
    # 0.6.3-0.7 config.py SchedulerConfig: "Multi-step Chunked-Prefill doesn't allow prompt-chunking" (its default
    # budget max(max_model_len, 2048)); core/scheduler.py ignores a prompt longer than the budget: a budget below the
    # model length is refused, one at it runs
    with pytest.raises(SpecError, match="max_num_batched_tokens: 1024 is below max_model_len \\(8192\\)"):
        _steps("0.6.3", num_scheduler_steps=8, chunked_prefill="on", max_num_batched_tokens=1024, max_model_len=8192)
    s = account(deployment(num_scheduler_steps=8, chunked_prefill="on", max_num_batched_tokens=8192,
                           max_model_len=8192), profile("0.6.3")).settings
    assert (s.scheduler_steps, s.max_num_batched_tokens) == (8, 8192)
    default = account(deployment(num_scheduler_steps=8, chunked_prefill="on", max_model_len=8192),
                      profile("0.6.3")).settings
    assert default.max_num_batched_tokens == 8192
    # one step at a time, chunked prefill takes the small budget
    assert _steps("0.6.3", chunked_prefill="on", max_num_batched_tokens=1024, max_model_len=8192) == 1


def test_a_refusals_alternatives_are_each_accepted():
    # each alternative a multi-step refusal names plans (the review of stop 62: 0.6.3 had been offered where pipeline
    # stages refuse it too, and a shorter max_model_len where chunked prefill was asked for, not on by default)
    with pytest.raises(SpecError) as pp:
        _steps("0.6.2", target=LLAMA_70B, gpu="A100-80GB", tp=2, pp=2, num_scheduler_steps=8)
    assert "0.6.3" not in str(pp.value) and "max_model_len of at most 32,768" in str(pp.value)
    assert _steps("0.6.2", target=LLAMA_70B, gpu="A100-80GB", tp=2, pp=2, num_scheduler_steps=8,
                  max_model_len=32_768) == 8
    with pytest.raises(SpecError) as asked:
        _steps("0.6.2", num_scheduler_steps=8, chunked_prefill="on", max_model_len=8192)
    assert "max_model_len" not in str(asked.value).split("(accepted")[1] and "0.6.3 or later" in str(asked.value)
    assert _steps("0.6.3", num_scheduler_steps=8, chunked_prefill="on", max_model_len=8192) == 8


def test_the_raise_max_model_len_fix_keeps_multi_step_running(capsys):
    # a 40,500-token request past a 16,384-token length: raising it above 32K turns V0's chunked prefill on, which
    # 0.6.2 refuses beside multi-step, so the fix turns it off too (it had been dropped without a word); an explicit
    # 16,384-token budget under multi-step is raised with the length (vLLM never chunks a prompt there)
    from helpers import run_cli

    base = ["plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--output-tokens", "500",
            "--num-scheduler-steps", "8", "--format", "json"]
    import json

    code, out, err = run_cli(capsys, *base, "--engine-version", "0.6.2", "--max-model-len", "16384",
                             "--prompt-tokens", "40000")
    fixes = {f["action"]: f for f in json.loads(out)["recommendations"]}
    assert code == 0 and "raise_max_model_len" in fixes, err
    assert fixes["raise_max_model_len"]["changes"] == {"max_model_len": 40512, "chunked_prefill": "off"}
    assert "with chunked_prefill off" in fixes["raise_max_model_len"]["description"]
    code, out, err = run_cli(capsys, *base, "--engine-version", "0.7.3", "--max-model-len", "16384",
                             "--max-num-batched-tokens", "16384", "--prompt-tokens", "20000")
    fixes = {f["action"]: f for f in json.loads(out)["recommendations"]}
    assert fixes["raise_max_model_len"]["changes"] == {"max_model_len": 20512, "max_num_batched_tokens": 20512}
    assert "max_num_batched_tokens 16384 -> 20512" in fixes["raise_max_model_len"]["description"]
