"""vLLM's CPU backend picks its own max_num_seqs and max_num_batched_tokens, release by release.

vllm/engine/arg_utils.py, "# cpu specific default values. if current_platform.is_cpu():", the `vllm serve` values
(UsageContext.OPENAI_API_SERVER), read in each PyPI sdist:
- 0.8.0, 0.8.5, 0.9.0, 0.9.1: no such branch (the GPU tiers, by the host's memory: CpuPlatform.get_device_total_memory);
- 0.9.2 (_set_default_args_v1): 2048 tokens and 32 sequences, whatever TP and PP;
- 0.10.0 - 0.32.0 (_set_default_args_v1, _set_default_args, get_batch_defaults): "2048 * world_size" tokens and
  "128 * world_size" sequences, world_size = pipeline_parallel_size * tensor_parallel_size.
The V0 engine's defaults (_set_default_args_v0: 256 sequences; SchedulerConfig: max(max_model_len, 2048) tokens without
chunked prefill, which V0 turns on by itself only on a GPU) have no CPU branch.
"""
import json

import pytest

from specsize.engines.registry import ENGINES
from tests.helpers import run_cli

TARGET = ("--target", "meta-llama/Llama-3.2-1B-Instruct")


def _plan(capsys, *argv) -> tuple[int, int, dict[str, str]]:
    """The plan's max_num_seqs and max_num_batched_tokens, and the emitted vllm serve command's flags."""
    code, out, err = run_cli(capsys, "plan", "--device", "cpu", *TARGET, *argv, "--format", "json")
    assert code in (0, 1), err
    data = json.loads(out)
    command = next(c["argv"] for c in data["engine_commands"] if c["engine"] == "vllm")
    flags = {flag: command[command.index(flag) + 1] for flag in ("--max-num-seqs", "--max-num-batched-tokens")}
    return data["inputs"]["max_num_seqs"], data["inputs"]["max_num_batched_tokens"], flags


@pytest.mark.parametrize("version, tp, pp, seqs, tokens", [
    # 0.10 on: 128 and 2,048 per rank of TP x PP
    ("0.32.0", 1, 1, 128, 2048),
    ("0.32.0", 2, 1, 2 * 128, 2 * 2048),
    ("0.32.0", 2, 2, 4 * 128, 4 * 2048),
    ("0.28.0", 1, 1, 128, 2048),
    ("0.24.0", 1, 1, 128, 2048),
    ("0.14.0", 4, 1, 4 * 128, 4 * 2048),
    ("0.11.0", 1, 1, 128, 2048),
    ("0.10.0", 2, 1, 2 * 128, 2 * 2048),
    # 0.9.2: 32 and 2,048 for the whole engine
    ("0.9.2", 1, 1, 32, 2048),
    ("0.9.2", 2, 1, 32, 2048),
    # 0.9.1: the GPU tiers by the host's memory, the nominal 64 GiB below the 70 GiB tier: 256 and 2,048
    ("0.9.1", 1, 1, 256, 2048),
    ("0.9.1", 2, 1, 256, 2048),
])
def test_the_cpu_backends_defaults_by_release(capsys, version, tp, pp, seqs, tokens):
    got_seqs, got_tokens, flags = _plan(capsys, "--engine-version", version, "--tp", tp, "--pp", pp)
    assert (got_seqs, got_tokens) == (seqs, tokens)
    assert flags == {"--max-num-seqs": str(seqs), "--max-num-batched-tokens": str(tokens)}


@pytest.mark.parametrize("version, memory_gib, seqs, tokens", [
    # from 0.9.2 the CPU branch replaces the tiers whatever the memory: 200 GiB would be the 160 GiB tier on a GPU
    # (16,384 and 1,024 in 0.32) and 100 GiB the 70 GiB tier (8,192 and 1,024)
    ("0.32.0", 200, 128, 2048),
    ("0.32.0", 100, 128, 2048),
    ("0.9.2", 100, 32, 2048),
    # 0.9.1 had no branch: a host of 100 GiB (psutil's total) took the 70 GiB tier, 1,024 and 8,192
    ("0.9.1", 100, 1024, 8192),
])
def test_the_host_memory_picks_no_tier_from_0_9_2(capsys, version, memory_gib, seqs, tokens):
    got_seqs, got_tokens, _ = _plan(capsys, "--engine-version", version, "--gpu-memory-gib", memory_gib)
    assert (got_seqs, got_tokens) == (seqs, tokens)


def test_what_the_user_sets_wins(capsys):
    # each flag replaces its own default only: --max-num-seqs 8 beside the default 2,048 tokens, --max-num-batched-tokens
    # 512 beside the default 128 sequences (0.32, TP 1)
    assert _plan(capsys, "--engine-version", "0.32.0", "--max-num-seqs", "8")[:2] == (8, 2048)
    assert _plan(capsys, "--engine-version", "0.32.0", "--max-num-batched-tokens", "512")[:2] == (128, 512)
    assert _plan(capsys, "--engine-version", "0.32.0", "--tp", "2", "--max-num-seqs", "300",
                 "--max-num-batched-tokens", "1024")[:2] == (300, 1024)


def test_v0_on_the_cpu_keeps_its_own_defaults(capsys):
    # vLLM 0.7.3 (V0): 256 sequences; no chunked prefill on a CPU, so the budget is max(max_model_len, 2048) = 4,096
    assert _plan(capsys, "--engine-version", "0.7.3", "--max-model-len", "4096")[:2] == (256, 4096)
    # a draft model on 0.9.2 falls back to V0 (engines/vllm.py V1_FALLBACK_METHODS), whose defaults have no CPU branch
    assert _plan(capsys, "--engine-version", "0.9.2", "--max-model-len", "4096", "--method", "draft_model",
                 "--draft", "meta-llama/Llama-3.2-1B-Instruct", "-k", "2")[:2] == (256, 4096)


def test_a_gpu_keeps_the_gpu_tiers(capsys):
    # the same release on CUDA: an L40S (below 70 GiB) 256 and 2,048, an H100 1,024 and 8,192, whatever TP
    for gpu, seqs, tokens in (("L40S-48GB", 256, 2048), ("H100-SXM-80GB", 1024, 8192)):
        code, out, err = run_cli(capsys, "plan", *TARGET, "--gpu", gpu, "--tp", "2", "--engine-version", "0.32.0",
                                 "--format", "json")
        assert code in (0, 1), err
        inputs = json.loads(out)["inputs"]
        assert (inputs["max_num_seqs"], inputs["max_num_batched_tokens"]) == (seqs, tokens)


def test_sglang_takes_none_of_vllms_cpu_defaults():
    # SGLang's profiles derive from vLLM's newest (engines/sglang _BASE); its CPU limits are its own
    for _, profile in ENGINES["sglang"]:
        assert (profile.cpu_default_max_num_seqs, profile.cpu_default_max_num_batched_tokens) == (0, 0)
