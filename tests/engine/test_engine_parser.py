"""The emitted `vllm serve` command and its YAML config, parsed back by vLLM 0.32's own argument parser
(in the engine's environment)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from specsize.inputs.load import load_request
from specsize.inputs.resolve import resolve
from specsize.engines import resolve_profile
from specsize.engines.emit import vllm_command
from specsize.planner.plan import plan

from test_real_engine import ENGINE_PYTHON, ROOT

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not Path(ENGINE_PYTHON).exists(),
                       reason="vLLM is not installed in the engine environment: run `python3 dev.py engine-env`"),
]
EXAMPLES = ["llama70b-draft1b-4xh100.yaml", "llama8b-eagle3-h100.yaml", "deepseek-v3-mtp-8xh200.yaml",
            "gpt-oss-120b-ngram-h100.yaml"]


def parse(argv: list[str]) -> dict:
    done = subprocess.run([ENGINE_PYTHON, str(ROOT / "tests" / "engine" / "vllm_parse.py"), json.dumps(argv)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", EXAMPLES)
def test_vllm_parses_the_emitted_command_and_config(name, tmp_path):
    inputs = resolve(load_request(ROOT / "examples" / name))
    r = plan(inputs.deployment, inputs.workload, resolve_profile(), inputs.request.headroom)
    command = vllm_command(r.deployment, r.memory)
    s = r.memory.settings
    for argv in (list(command.argv[2:]), None):
        if argv is None:
            config = tmp_path / "serve.yaml"
            config.write_text(command.config_yaml)
            argv = [command.argv[2], "--config", str(config)]
        parsed = parse(argv)
        assert parsed["tensor_parallel_size"] == r.deployment.tp
        assert parsed["max_num_seqs"] == s.max_num_seqs and parsed["max_model_len"] == s.max_model_len
        assert parsed["max_num_batched_tokens"] == s.max_num_batched_tokens
        assert float(parsed["gpu_memory_utilization"]) == s.gpu_memory_utilization
        assert parsed["block_size"] == s.block_size
        spec = parsed["speculative_config"]
        if r.deployment.speculative.enabled:
            spec = spec if isinstance(spec, dict) else json.loads(spec)
            assert spec["num_speculative_tokens"] == r.deployment.speculative.num_speculative_tokens
            assert spec["method"] == r.deployment.speculative.method


@pytest.mark.parametrize("name", ["int4", "gptq", "nvfp4", "fp8", "mxfp4", "int8", "modelopt"])
def test_vllm_accepts_the_emitted_quantization(name):
    # --quantization is one of vLLM's QuantizationMethods (an argparse choice): nvfp4 is ModelOpt's modelopt_fp4 there;
    # an MXFP4 checkpoint names its own quant_method (mxfp4, or Quark's quark, which a flag would contradict), so the
    # command gives none and the engine's parser reads its default, None
    from dataclasses import replace

    inputs = resolve(load_request(ROOT / "examples" / "llama8b-eagle3-h100.yaml"))
    d = replace(inputs.deployment, engine=replace(inputs.deployment.engine, quantization=name))
    r = plan(d, inputs.workload, resolve_profile(), inputs.request.headroom)
    argv = list(vllm_command(r.deployment, r.memory).argv[2:])
    emitted = argv[argv.index("--quantization") + 1] if "--quantization" in argv else None
    assert (emitted is None) == (name == "mxfp4")
    assert parse(argv)["quantization"] == emitted


def test_the_cpu_backends_batch_defaults_are_the_plans():
    # vLLM's own EngineArgs.get_batch_defaults on the engine environment's platform (the CPU build), for `vllm serve`,
    # against what a CPU plan for the same release resolves at TP x PP of that world size: 128 sequences and 2,048
    # tokens per rank from 0.10 (engines/vllm.py CPU_MAX_NUM_SEQS_PER_RANK_010); no model or weights are read
    from specsize.catalog import load_model
    from specsize.catalog.gpus import load_gpu
    from specsize.core.memory import account
    from specsize.core.specs import Deployment, EngineSettings

    done = subprocess.run([ENGINE_PYTHON, str(ROOT / "tests" / "engine" / "vllm_parse.py"), "--batch-defaults",
                           "1", "2", "4"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    engine = json.loads(done.stdout.strip().splitlines()[-1])
    profile = resolve_profile("vllm", engine["version"])
    for tp, pp in ((1, 1), (2, 1), (2, 2)):
        d = Deployment(target=load_model("meta-llama/Llama-3.2-1B-Instruct"), gpu=load_gpu(None, 64.0), tp=tp, pp=pp,
                       engine=EngineSettings(device="cpu", max_model_len=4096))
        s = account(d, profile).settings
        assert engine["defaults"][str(tp * pp)] == [s.max_num_seqs, s.max_num_batched_tokens], (engine["version"], tp, pp)
