"""Hunt 54: gpt-oss's MXFP4 experts as each vLLM release holds them on each GPU family (which MoE backend vLLM picks
and how that backend pads and swizzles the expert tensors). Every expectation is worked by hand from vLLM's release
sources (vllm/model_executor/layers/quantization/mxfp4.py, fused_moe/oracle/mxfp4.py, quantization/utils/
mxfp4_utils.py _swizzle_mxfp4, cmake/external_projects/triton_kernels.cmake) and from the triton_kernels its wheels
carry (tensor_details/layout_details/hopper_value.py, hopper_scale.py swizzle_data), then checked against the public
"Model loading took" lines cited per test.

gpt-oss-120b: 36 MoE layers of 128 experts; gpt-oss-20b: 24 of 32; both hidden 2,880 and expert intermediate 2,880,
with biases. An expert's gate/up is (2 x intermediate, hidden), its down (hidden, intermediate); MXFP4 packs two
values a byte and keeps one e8m0 scale byte per 32 values.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import asdict, dataclass

import pytest
from helpers import GiB, deployment, profile
from helpers import run_cli as run

from specsize.catalog import load_model
from specsize.core.memory import account
from specsize.core.weights import Mxfp4Layout, expert_bytes_per_rank, weight_breakdown

H = 2880  # hidden size of both gpt-oss models


def triton_layer(experts: int, inter: int, *, rows: int, cols: int, groups: int = 2, kept: bool) -> int:
    """One MoE layer on one rank as vLLM's Triton path on Hopper holds it, worked from the sources, not the code under
    test: the intermediate padded to 64 (mxfp4_round_up_hidden_size_and_intermediate_size: round_up(inter, 64));
    values (rows, bytes) padded to (16, 32) by triton_kernels v3.5.x's HopperMXValueLayout (k_tile x warp_tile x
    threads x scott_trick x contig: 1x2x4x2x1 rows, 4x2x4x1x1 bytes) or to (64, 64) by v3.6.0's pre-pad; scales
    padded to 2 x num_warps(8) x 2 x 8 = 256 rows and an even number of groups (4 where vLLM 0.26+ pads them);
    the loaded scales kept (until 0.25); biases float32."""
    i = -(-inter // 64) * 64

    def up(n: int, m: int) -> int:
        return -(-n // m) * m

    values = up(2 * i, rows) * up(H // 2, cols) + up(H, rows) * up(i // 2, cols)
    scales = up(2 * i, 256) * up(H // 32, groups) + up(H, 256) * up(i // 32, groups)
    loaded = (2 * i * (H // 32) + H * (i // 32)) if kept else 0
    bias = (2 * i + H) * 4
    return experts * (values + scales + loaded + bias)


def marlin_layer(experts: int, inter: int) -> int:
    """Marlin: hidden padded to 256, intermediate to 128 (its n % 256, k % 128 rule); values, e8m0 scales and bf16
    biases of the padded shapes."""
    h, i = -(-H // 256) * 256, -(-inter // 128) * 128
    return experts * ((2 * i * h + h * i) // 2 + (2 * i * h + h * i) // 32 + (2 * i + h) * 2)


def trtllm_layer(experts: int, inter: int, inter_multiple: int) -> int:
    """FlashInfer TRT-LLM (datacenter Blackwell): hidden to 256, intermediate to 256 (128 from 0.27), shuffled in place
    of the loaded tensors (same sizes), biases float32."""
    h, i = -(-H // 256) * 256, -(-inter // inter_multiple) * inter_multiple
    return experts * ((2 * i * h + h * i) // 2 + (2 * i * h + h * i) // 32 + (2 * i + h) * 4)


def non_expert(model: str, tp: int) -> int:
    """What the experts leave of the weights: the same under every backend (the Marlin figure less its experts)."""
    m = load_model(model)
    return weight_breakdown(m, tp=tp).total - len(m.moe.moe_layers) * m.moe.num_experts * expert_bytes_per_rank(m, tp)[0]


def weights(model: str, gpu: str, version: str, tp: int = 1) -> int:
    return account(deployment(model, gpu=gpu, tp=tp), profile(version)).weights_target.total


# -- Hopper: Marlin until the wheels carry triton_kernels (0.12), then the Triton kernels ------------------------------

def test_gpt_oss_120b_on_one_h100_with_the_triton_backend_of_0_14_1():
    # vllm-project/vllm issue 33155 (vLLM 0.14.1, one H100, "[mxfp4.py:165] Using Triton backend"): "Model loading
    # took 64.38 GiB". It had been planned at Marlin's 65.91 GiB on every release, 1.53 GiB (2.4%) more: most of what
    # one H100 has left for the KV cache at 0.9. 0.14.1's wheel carries triton_kernels v3.5.0 and keeps the loaded
    # scales (its TRITON branch deletes layer.w13_weight / w2_weight only)
    layer = triton_layer(128, 2880, rows=16, cols=32, kept=True)
    assert layer == 1_799_700_480  # 1,592,524,800 values + 103,219,200 swizzled scales + 99,532,800 loaded + 4,423,680
    got = weights("openai/gpt-oss-120b", "H100-SXM-80GB", "0.14.1")
    assert got == non_expert("openai/gpt-oss-120b", 1) + 36 * layer
    assert got / GiB == pytest.approx(64.38, rel=0.002)  # 64.32


def test_gpt_oss_120b_on_one_h100_with_0_10_1_is_still_marlin():
    # vllm-project/vllm issue 23278 (vLLM 0.10.1, H100, the Marlin warning in the log): "Model loading took 65.9651
    # GiB". 0.10.1 pins torch 2.7.1, and Mxfp4MoEMethod._should_use_marlin takes Marlin below torch 2.8 on Hopper
    got = weights("openai/gpt-oss-120b", "H100-SXM-80GB", "0.10.1")
    assert got == non_expert("openai/gpt-oss-120b", 1) + 36 * marlin_layer(128, 2880)
    assert got / GiB == pytest.approx(65.9651, rel=0.002)  # 65.91


def test_gpt_oss_120b_kv_cache_of_vllm_0_11_on_an_h100_is_marlins():
    # vllm-project/vllm issue 27508 (vLLM 0.11, 2025-10-31, one H100, --gpu-memory-utilization 0.95
    # --max-num-batched-tokens 1024): "Available KV cache memory: 1.71 GiB". 0.11's wheels carry no triton_kernels
    # (has_triton_kernels() is False without a separate install), so Marlin: 79.19 x 0.95 - 65.91 (weights) - 7.34
    # (the sort-based sampler's peak at 1,024 sequences) - 0.25 (non-torch) = 1.73 GiB; the Triton layout would leave
    # 3.32 GiB. The 0.11.0 was a pip install (/opt/conda): the sort, 5.88 x 1,024 x 201,088 x 4 B more than
    # the FlashInfer kernel 0.11.0's images profile, which the plan is priced with (and warns of the sort's figure)
    r = account(deployment("openai/gpt-oss-120b", gpu="H100-SXM-80GB", gpu_memory_utilization=0.95,
                           max_num_batched_tokens=1024), profile("0.11.0"))
    assert (r.kv_cache_bytes - 5.88 * 1024 * 201_088 * 4) / GiB == pytest.approx(1.71, rel=0.03)
    r = account(deployment("openai/gpt-oss-120b", gpu="H100-SXM-80GB", gpu_memory_utilization=0.95,
                           max_num_batched_tokens=1024), profile("0.11.1"))  # the sort whatever is installed
    assert r.kv_cache_bytes / GiB == pytest.approx(1.71, rel=0.03)


@dataclass(frozen=True)
class _Run:
    tp: int
    utilization: float
    loading_gib: float
    kv_gib: float
    kv_tokens: int


# llm-d-planner d3121e05, accuracy/results/v0.19.0/logs/openai-gpt-oss-20b--h100-80gb--tp{1,2}pp1dp1--8192*.log
# (vLLM 0.19.0, H100, "Using 'TRITON' Mxfp4 MoE backend", max_model_len 8192, prefix caching off)
LLMD_RUNS = (_Run(1, 0.95, 13.64, 58.47, 1_277_184), _Run(2, 0.9, 7.01, 59.32, 2_591_776))


@pytest.mark.parametrize("run_", LLMD_RUNS, ids=lambda r: f"tp{r.tp}")
def test_gpt_oss_20b_on_h100_with_the_triton_backend_of_0_19_0(run_):
    # 0.19.0's wheel carries triton_kernels v3.6.0, whose HopperMXValueLayout first pads both dimensions to 64: at TP2
    # the intermediate 1,440 becomes 1,472 (vLLM's 64) and the down projection's 736 bytes a row become 768. Planned
    # with Marlin's padding this had been 7.08 GiB (+1.0%) and 13.69 GiB
    layer = triton_layer(32, 2880 // run_.tp, rows=64, cols=64, kept=True)
    if run_.tp == 2:
        assert layer == 32 * (2944 * 1472 + 2880 * 768 + 3072 * 90 + 3072 * 46 + 2944 * 90 + 2880 * 46
                              + (2944 + 2880) * 4)
    r = account(deployment("openai/gpt-oss-20b", gpu="H100-SXM-80GB", tp=run_.tp, max_model_len=8192,
                           gpu_memory_utilization=run_.utilization), profile("0.19.0"))
    assert r.weights_target.total == non_expert("openai/gpt-oss-20b", run_.tp) + 24 * layer
    assert r.weights_target.total / GiB == pytest.approx(run_.loading_gib, rel=0.006)  # 13.62 / 6.97
    assert r.kv_cache_bytes / GiB == pytest.approx(run_.kv_gib, rel=0.003)
    assert r.kv_cache_tokens == pytest.approx(run_.kv_tokens, rel=0.003)


def test_releases_that_free_the_loaded_scales_and_pad_the_scale_groups():
    # 0.25 deletes the loaded scales once swizzled (convert_gpt_oss_weight_to_mxfp4_moe_kernel_format: "drop the
    # now-dead weight/scale Parameters"); 0.26 pads the scale groups to a multiple of 4 on Hopper (_swizzle_mxfp4,
    # "pad K (num scale groups) to 0 mod 4"): 90 -> 92 groups for gpt-oss-120b at TP1
    w24, w25, w26, w32 = (weights("openai/gpt-oss-120b", "H100-SXM-80GB", v) for v in ("0.24", "0.25", "0.26", "0.32"))
    assert w24 - w25 == 36 * 128 * (5760 * 90 + 2880 * 90)  # the loaded scales, 3.34 GiB
    assert w26 - w25 == 36 * 128 * (5888 + 3072) * (92 - 90)  # the swizzled scales' two more groups
    assert w32 == w26 == non_expert("openai/gpt-oss-120b", 1) + 36 * triton_layer(128, 2880, rows=16, cols=32,
                                                                                   groups=4, kept=False)


@pytest.mark.parametrize("version,rows,cols", [("0.12", 16, 32), ("0.16", 16, 32), ("0.17", 64, 64), ("0.21", 64, 64),
                                               ("0.22", 16, 32), ("0.24", 16, 32)])
def test_triton_kernels_generation_by_release(version, rows, cols):
    # the tag cmake/external_projects/triton_kernels.cmake pins: v3.5.0 (0.12-0.16), v3.6.0 (0.17-0.21), v3.5.1 (0.22 on)
    # - gpt-oss-20b at TP2, where v3.6.0's 64-pads differ from v3.5's (16, 32)
    got = weights("openai/gpt-oss-20b", "H100-SXM-80GB", version, tp=2)
    assert got == non_expert("openai/gpt-oss-20b", 2) + 24 * triton_layer(32, 1440, rows=rows, cols=cols, kept=True)


# -- the other GPU families -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gpu,version,pair,layer", [
    # Ampere and Ada (cc 8.x): below the Triton kernels' 9.0 <= cc < 11.0 gate and FlashInfer CUTLASS's cc 9.0: Marlin
    ("A100-80GB", "0.19", (256, 128), marlin_layer(128, 2880)),
    ("L40S-48GB", "0.32", (256, 128), marlin_layer(128, 2880)),
    # consumer / workstation Blackwell (cc 12.x): outside the gate until 0.31; 0.32 admits it but orders Triton after
    # Marlin (_get_priority_backends_for_gpt_oss; vllm-project/vllm issue 40153: 0.17 on an RTX PRO 6000 "falls back
    # to ... Marlin")
    ("RTX-PRO-6000-96GB", "0.17", (256, 128), marlin_layer(128, 2880)),
    ("RTX-PRO-6000-96GB", "0.32", (256, 128), marlin_layer(128, 2880)),
    # Hopper without triton_kernels in the wheel (0.11)
    ("H200-141GB", "0.11", (256, 128), marlin_layer(128, 2880)),
    ("H200-141GB", "0.13", (1, 64), triton_layer(128, 2880, rows=16, cols=32, kept=True)),
    # datacenter Blackwell: FlashInfer's TRT-LLM kernels, both dimensions to 256 until 0.26, the intermediate to 128
    # from 0.27 (mxfp4_round_up_hidden_size_and_intermediate_size, TRTLLM_BACKENDS)
    ("B200-180GB", "0.14", (256, 256), trtllm_layer(128, 2880, 256)),
    ("B200-180GB", "0.26", (256, 256), trtllm_layer(128, 2880, 256)),
    ("B200-180GB", "0.27", (256, 128), trtllm_layer(128, 2880, 128)),
    ("B200-180GB", "0.32", (256, 128), trtllm_layer(128, 2880, 128)),
])
def test_backend_by_gpu_family_and_release(gpu, version, pair, layer):
    r = account(deployment("openai/gpt-oss-120b", gpu=gpu), profile(version))
    assert Mxfp4Layout.of(r.settings.mxfp4_pad).pads == pair
    assert r.weights_target.total == non_expert("openai/gpt-oss-120b", 1) + 36 * layer


def test_a_decode_step_reads_the_swizzled_experts():
    # what a step reads of an expert is the tensor the kernel holds: on an H100 with vLLM 0.32, 2,880-wide (no hidden
    # padding) where Marlin's were 3,072 x 2,944; per expert (5760 x 1440 + 2880 x 1440) values + (5888 + 3072) x 92
    # scales + (5760 + 2880) x 4 bias bytes, against SGLang 0.5.6's (1, 32) padding: the checkpoint's shapes, bf16 bias
    from specsize.catalog.gpus import load_efficiency
    from specsize.core.speculation import Tree
    from specsize.engines import resolve_profile
    from specsize.planner.perf import costs_for

    d = deployment("openai/gpt-oss-120b", gpu="H100-SXM-80GB")
    eff = load_efficiency(d.gpu)
    read = {name: costs_for(d, account(d, p), eff, 0, Tree()).target.expert_bytes
            for name, p in (("vllm", resolve_profile("vllm", "0.32")), ("sglang", resolve_profile("sglang", "0.5.6")))}
    vllm_expert = 5760 * 1440 + 2880 * 1440 + (5888 + 3072) * 92 + (5760 + 2880) * 4
    sglang_expert = 5760 * 1440 + 2880 * 1440 + (5760 + 2880) * 90 + (5760 + 2880) * 2
    assert read["vllm"] / read["sglang"] == pytest.approx(vllm_expert / sglang_expert, rel=1e-9)


# -- the layout value: a (hidden, intermediate) pair to every caller that passes the pair on --------------------------

def test_the_layout_keeps_what_it_adds_to_its_pair():
    """The layout is its pair and what the kernel adds: a plain layout prices as its pair, a Triton layout never
    shares a cache entry with its bare pair, and it survives a process pool and a JSON round trip whole (hunt 55
    checks equality and the profile's round trip)."""
    triton = Mxfp4Layout((1, 64), kernel="t", value_rows=16, value_cols=32, scale_rows=256, scale_cols=2,
                         keeps_checkpoint_scales=True, bias_bytes=4)
    assert pickle.loads(pickle.dumps(triton)) == triton  # a process pool gets the layout, not just the pair
    with pytest.raises(AttributeError):
        triton.bias_bytes = 2  # type: ignore[misc]

    @dataclass(frozen=True)
    class Holder:
        pad: Mxfp4Layout

    assert Mxfp4Layout.of(json.loads(json.dumps(asdict(Holder(triton))))["pad"]) == triton
    # weight_breakdown's cache keys on the layout: the plain (1, 64) and the Triton layout must not share an entry
    m = load_model("openai/gpt-oss-120b")
    assert weight_breakdown(m, mxfp4_pad=(1, 64)).total != weight_breakdown(m, mxfp4_pad=triton).total
    assert weight_breakdown(m, mxfp4_pad=Mxfp4Layout((256, 128))).total == weight_breakdown(m, mxfp4_pad=(256, 128)).total


def test_plan_json_on_an_h100_with_vllm_0_14_1(capsys, tmp_path):
    code, out, err = run(capsys, "plan", "--target", "openai/gpt-oss-120b", "--gpu", "H100-SXM-80GB", "--method",
                         "none", "--engine-version", "0.14.1", "--max-model-len", "8192", "--format", "json")
    assert code == 0, err
    per_gpu = json.loads(out)["per_gpu"]
    assert per_gpu["weights_target_bytes"] == non_expert("openai/gpt-oss-120b", 1) + 36 * triton_layer(
        128, 2880, rows=16, cols=32, kept=True)
