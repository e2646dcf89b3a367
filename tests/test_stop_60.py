"""Stop 60: which speculative methods keep vLLM's async scheduling, release by release."""
from dataclasses import replace

import pytest

from specsize.core.speculation import drafter_kind, keeps_overlap
from specsize.engines.registry import resolve_profile


@pytest.mark.parametrize("engine, version, method, kept", [
    # config/vllm.py VllmConfig.__post_init__, read in each PyPI sdist: async scheduling by default with EAGLE / MTP
    # from 0.14, with a draft model from 0.28 (0.27.1's check lacks `method != "draft_model"`); never with the CPU
    # n-gram lookup or Medusa; V0 and SGLang's spec v1 worker keep none
    ("vllm", "0.27.1", "draft_model", False),
    ("vllm", "0.28.0", "draft_model", True),
    ("vllm", "0.32.0", "draft_model", True),
    ("vllm", "0.27.1", "eagle3", True),
    ("vllm", "0.14.0", "mtp", True),
    ("vllm", "0.32.0", "ngram", False),
    ("vllm", "0.32.0", "medusa", False),
    ("vllm", "0.6.4", "eagle", False),
    ("sglang", None, "draft_model", False),
])
def test_async_scheduling_kept_by_method_and_release(engine, version, method, kept):
    profile = resolve_profile(engine, version, method)
    assert keeps_overlap(drafter_kind(method), profile.async_drafters, "", 1) is kept


def test_a_draft_models_host_work_hides_behind_the_forward_from_0_28():
    # with the overlap the engine core's per-sequence work (Efficiency.cpu_per_seq_s) runs beside the forward, not
    # after it: at batch 32 and 10 us a sequence a draft model's step is 32 x 10 us = 0.32 ms shorter where the
    # forward outlasts that work (a Llama-3.1-8B verification pass does, by milliseconds)
    from specsize.catalog.models import load_model
    from specsize.core.perf import build_costs, spec_step_time
    from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig
    from tests.test_step_model import IDEAL, ROUND_GPU

    eff = replace(IDEAL, cpu_per_seq_s=1e-5)
    spec = SpeculativeConfig("draft_model", load_model("meta-llama/Llama-3.2-1B-Instruct"), 4)
    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=ROUND_GPU, speculative=spec,
                   engine=EngineSettings(max_model_len=8192))
    before, after = (build_costs(d, eff, "bfloat16", None, 2, async_scheduling=True,
                                 async_drafters=resolve_profile("vllm", v, "draft_model").async_drafters)
                     for v in ("0.27.1", "0.28.0"))
    assert spec_step_time(before, 32, 500) - spec_step_time(after, 32, 500) == pytest.approx(32 * 1e-5, abs=1e-12)


@pytest.mark.parametrize("engine, version, argv, flag", [
    # SGLang before 0.5.3.post1 reads a ModelOpt NVFP4 checkpoint's quant_method "modelopt" as the FP8 config, which
    # refuses it: the command names modelopt_fp4 (configs/model_config.py: compatible with "modelopt"); 0.5.4 detects it
    ("sglang", "0.4.7", ["--target", "nvidia/Llama-3.1-8B-Instruct-FP4", "--gpu", "B200-180GB"], "modelopt_fp4"),
    ("sglang", "0.5.4", ["--target", "nvidia/Llama-3.1-8B-Instruct-FP4", "--gpu", "B200-180GB"], None),
    # an MXFP4 checkpoint declares its own quant_method (gpt-oss's "mxfp4", AMD Quark's "quark"), and a --quantization
    # mxfp4 beside "quark" is refused (vLLM 0.32 config/model.py: only Mxfp4Config overrides, for gpt_oss; SGLang has no
    # mxfp4 -> quark compatibility), nor does 0.10.0's registry name it: the command names none, on either engine
    ("vllm", "0.10.0", ["--target", "Qwen/Qwen3-30B-A3B", "--quantization", "mxfp4", "--gpu", "MI355X-288GB"], None),
    ("vllm", "0.10.1", ["--target", "Qwen/Qwen3-30B-A3B", "--quantization", "mxfp4", "--gpu", "MI355X-288GB"], None),
    ("sglang", "0.5.12", ["--target", "Qwen/Qwen3-30B-A3B", "--quantization", "mxfp4", "--gpu", "MI355X-288GB"], None),
])
def test_the_quantization_flag_is_the_one_the_release_reads(capsys, engine, version, argv, flag):
    import json

    from tests.helpers import run_cli

    code, out, _ = run_cli(capsys, "plan", *argv, "--engine", engine, "--engine-version", version, "--format", "json")
    assert code in (0, 1)
    argv_out = next(c["argv"] for c in json.loads(out)["engine_commands"] if c["engine"] == engine)
    named = argv_out[argv_out.index("--quantization") + 1] if "--quantization" in argv_out else None
    assert named == flag


def _plan(capsys, *argv):
    import json

    from tests.helpers import run_cli

    code, out, _ = run_cli(capsys, "plan", *argv, "--format", "json")
    assert code in (0, 1)
    data = json.loads(out)
    command = next(c["argv"] for c in data["engine_commands"] if c["engine"] == "vllm")
    return data, {flag: command[command.index(flag) + 1] for flag in
                  ("--gpu-memory-utilization", "--max-num-batched-tokens", "--max-num-seqs")}


@pytest.mark.parametrize("version, utilization", [("0.19.1", "0.9"), ("0.20.0", "0.92"), ("0.32.0", "0.92")])
def test_vllms_default_memory_utilization_by_release(capsys, version, utilization):
    # config/cache.py CacheConfig.gpu_memory_utilization: Field(default=0.9) in 0.19.1, default=0.92 from 0.20.0
    _, flags = _plan(capsys, "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                     "--engine-version", version)
    assert flags["--gpu-memory-utilization"] == utilization


def test_the_0_92_default_holds_two_hundredths_of_the_gpu_more_kv(capsys):
    # the budget is utilization x the GPU's memory and the rest of the account does not depend on it: on a B200
    # (178.35 GiB as the driver reports it) 0.02 x 178.35 GiB = 3.567 GiB more cache, at Llama-3.1-8B's 128 KiB a
    # token (32 layers x 8 KV heads x 128 x 2 x 2 B) 0.02 x 178.35 x 8,192 = 29,221.9 tokens, within a 16-token block
    argv = ("--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "B200-180GB", "--engine-version", "0.32.0")
    default, _ = _plan(capsys, *argv)
    explicit, _ = _plan(capsys, *argv, "--gpu-memory-utilization", "0.9")
    assert abs(default["kv_cache_tokens"] - explicit["kv_cache_tokens"] - 0.02 * 178.35 * 8192) <= 16


@pytest.mark.parametrize("version, gpu, tokens, seqs", [
    # engine/arg_utils.py EngineArgs.get_batch_defaults: from 0.28 a GPU of at least 160 GiB schedules 16,384 tokens a
    # step for the API server (B200: 178.35 GiB; MI300X: 191.98 GiB, no A100 name check in that branch); the H200's
    # 139.81 GiB stays on the 70 GiB tier's 8,192; 0.27.1 has no such tier
    ("0.27.1", "B200-180GB", "8192", "1024"),
    ("0.28.0", "B200-180GB", "16384", "1024"),
    ("0.32.0", "MI300X-192GB", "16384", "1024"),
    ("0.32.0", "H200-141GB", "8192", "1024"),
])
def test_vllms_160_gib_tier_from_0_28(capsys, version, gpu, tokens, seqs):
    _, flags = _plan(capsys, "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", gpu, "--engine-version", version)
    assert (flags["--max-num-batched-tokens"], flags["--max-num-seqs"]) == (tokens, seqs)


@pytest.mark.parametrize("version, gpu, largest", [
    # config/vllm.py _set_cudagraph_sizes: min(max_num_seqs x (1 + k) x 2, ceiling), the ceiling 1024 on compute
    # capability 10 from 0.28 ("1024 if current_platform.is_device_capability_family(100) else 512"), 512 before and
    # elsewhere; 1024 sequences x 2 passes both
    ("0.27.1", "B200-180GB", 512),
    ("0.28.0", "B200-180GB", 1024),
    ("0.32.0", "B300-288GB", 1024),
    ("0.32.0", "H200-141GB", 512),
])
def test_vllms_capture_ceiling_on_compute_capability_10(version, gpu, largest):
    from specsize.catalog import load_gpu, load_model
    from specsize.core.memory import account
    from specsize.core.specs import Deployment, EngineSettings

    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu(gpu),
                   engine=EngineSettings(max_model_len=8192))
    assert account(d, resolve_profile("vllm", version, "none")).settings.graph_max_tokens == largest


@pytest.mark.parametrize("version, scan", [("0.31.0", 1.06e-9), ("0.32.0", 0.0)])
def test_the_ngram_lookups_host_scan_is_the_v1_runners(version, scan):
    # vLLM 0.31 keeps n-gram on the V1 runner (its numba NgramProposer scans each history on the host: 1.06 ns a
    # token, engines/vllm.py V1_NGRAM_SCAN_PER_TOKEN_S); 0.32 runs it on Model Runner V2, whose NgramGPUSpeculator
    # scans on the GPU (v1/worker/gpu/spec_decode/__init__.py use_ngram)
    from specsize.catalog import load_gpu, load_model
    from specsize.core.memory import account
    from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig

    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("H100-SXM-80GB"),
                   speculative=SpeculativeConfig("ngram", None, 3), engine=EngineSettings(max_model_len=8192))
    assert account(d, resolve_profile("vllm", version, "ngram")).settings.ngram_scan_per_token_s == scan


def test_a_plan_for_a_release_past_the_newest_profile_says_what_is_known_to_differ():
    # vLLM 0.34's config/cache.py: the extensible KV cache on by default, DEFAULT_BLOCK_SIZE 64: said with the note
    # (0.33's changes are modelled: tests/test_vllm_033.py)
    from specsize.engines.registry import beyond_known

    assert beyond_known("vllm", "0.32.0") is None
    assert beyond_known("vllm", "0.33.1") is None  # modelled since stop 61 (engines/vllm.py V1_033)
    past = beyond_known("vllm", "0.34.0")
    assert past is not None and "extensible KV cache" in past and "blocks of 64 tokens" in past


@pytest.mark.parametrize("version", [None, "0.5.12", "0.4.6"])
def test_sglangs_ngram_pays_no_history_scan(version):
    # SGLang keeps its n-gram cache incrementally (docs/efficiency-history.md, stop 45): none of vLLM V1's 1.06 ns a
    # token, which its profiles had inherited from vLLM's newest
    from specsize.catalog import load_gpu, load_model
    from specsize.core.memory import account
    from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig

    d = Deployment(target=load_model("meta-llama/Llama-3.1-8B-Instruct"), gpu=load_gpu("H100-SXM-80GB"),
                   speculative=SpeculativeConfig("ngram", None, 3), engine=EngineSettings(max_model_len=8192))
    assert account(d, resolve_profile("sglang", version, "ngram")).settings.ngram_scan_per_token_s == 0.0
