"""Hunt 55: gpt-oss's MXFP4 experts on AMD Instinct GPUs in vLLM, and the layout value that carries them.

1. vLLM on ROCm runs gpt-oss's experts on OpenAI's Triton kernels (the default: the AITER backends need
   VLLM_ROCM_USE_AITER=1) and pads them by its own rule, read in the release sources
   (vllm/model_executor/layers/quantization/mxfp4.py Mxfp4MoEMethod.create_weights, from 0.19 fused_moe/oracle/
   mxfp4.py mxfp4_round_up_hidden_size_and_intermediate_size; quantization/utils/mxfp4_utils.py _swizzle_mxfp4,
   get_padding_alignment, should_use_cdna4_mx_scale_swizzle): both dimensions to 128 in 0.10.2; to 256 in 0.11.0; in
   0.11.1-0.18 to 256 on gfx950 (CDNA4: MI350X / MI355X), else 128 (CDNA3: MI300X / MI325X); to 256 from 0.19. Values
   and CDNA3's scales stay as loaded (StridedLayout: a view); from 0.11 CDNA4's scales are swizzled
   (GFX950MXScaleLayout / CDNA4MXScaleLayout: a permuted copy, no padding) beside the loaded ones, which stay
   allocated until 0.25 deletes them (and from 0.24 the swizzle runs at TP <= 2 only); biases become float32.
   specsize had planned every AMD GPU at Marlin's (256, 128) with bf16 biases: 120b on one MI300X at 0.32 65.91 GiB,
   where vLLM holds 68.68.
2. core.weights.Mxfp4Layout was a tuple subclass: dataclasses.asdict rebuilt it from its two numbers (the swizzle,
   the kept scales and the bias dtype lost), JSON wrote the pair, and a plain layout equalled its pair. It is a frozen
   dataclass with an explicit `pads` pair now.

gpt-oss-120b: 36 MoE layers of 128 experts, hidden 2,880, expert intermediate 2,880, with biases; an expert's gate/up
is (2 x intermediate, hidden), its down (hidden, intermediate); MXFP4 packs two values a byte and keeps one e8m0
scale byte per 32 values.
"""

from __future__ import annotations

import copy
import json
import pickle
from dataclasses import asdict, replace

import pytest
from helpers import GiB, deployment, profile
from helpers import run_cli as run

from specsize.catalog import load_model
from specsize.core.memory import account
from specsize.core.weights import Mxfp4Layout, weight_breakdown

H = 2880  # gpt-oss's hidden size
MODEL = "openai/gpt-oss-120b"


def up(n: int, m: int) -> int:
    return -(-n // m) * m


def rocm_layer(inter: int, pad: int, *, kept: bool = False, experts: int = 128) -> int:
    """One MoE layer on one rank as vLLM's Triton path on ROCm holds it: hidden and intermediate padded to `pad`,
    values (out, in / 2) and scales (out, in / 32) of the padded shapes, the CDNA4 scale swizzle's copy beside the
    loaded scales where `kept`, biases float32."""
    h, i = up(H, pad), up(inter, pad)
    values = 2 * i * h // 2 + h * i // 2
    scales = 2 * i * (h // 32) + h * (i // 32)
    return experts * (values + scales * (2 if kept else 1) + (2 * i + h) * 4)


def marlin_layer(inter: int, experts: int = 128) -> int:
    """Marlin (every release on an A100): hidden to 256, intermediate to 128, bf16 biases."""
    h, i = up(H, 256), up(inter, 128)
    return experts * ((2 * i * h + h * i) // 2 + 2 * i * (h // 32) + h * (i // 32) + (2 * i + h) * 2)


def weights(gpu: str, version: str, tp: int = 1) -> int:
    return account(deployment(MODEL, gpu=gpu, tp=tp), profile(version)).weights_target.total


def test_the_hand_worked_layers():
    # 120b at TP1, per expert: at 256, (6144 x 1536 + 3072 x 1536) values + (6144 + 3072) x 96 scales + 9216 x 4 bias
    # bytes = 14,155,776 + 884,736 + 36,864; at 128, 2944-wide: 13,000,704 + 812,544 + 35,328; Marlin (3072 hidden,
    # 2944 intermediate): 13,565,952 + 847,872 + 17,920
    assert rocm_layer(2880, 256) == 128 * 15_077_376 == 1_929_904_128
    assert rocm_layer(2880, 256, kept=True) == 128 * (15_077_376 + 884_736) == 2_043_150_336
    assert rocm_layer(2880, 128) == 128 * 13_848_576 == 1_772_617_728
    assert marlin_layer(2880) == 128 * 14_431_744 == 1_847_263_232


@pytest.mark.parametrize("gpu,version,tp,layer", [
    # 0.10.2: both dimensions to 128 on any ROCm GPU (create_weights: "elif current_platform.is_rocm() or ...")
    ("MI300X-192GB", "0.10.2", 1, rocm_layer(2880, 128)),
    ("MI355X-288GB", "0.10.2", 1, rocm_layer(2880, 128)),
    # 0.11.0: 256 on any ROCm GPU; CDNA4 swizzles its scales into a copy (GFX950MXScaleLayout if on_gfx950()) and
    # keeps the loaded ones (the TRITON branch deletes layer.w13_weight / w2_weight only)
    ("MI300X-192GB", "0.11.0", 1, rocm_layer(2880, 256)),
    ("MI355X-288GB", "0.11.0", 1, rocm_layer(2880, 256, kept=True)),
    # 0.11.1-0.18: get_padding_alignment(): 256 on gfx950, else 128
    ("MI300X-192GB", "0.11.1", 1, rocm_layer(2880, 128)),
    ("MI355X-288GB", "0.11.1", 1, rocm_layer(2880, 256, kept=True)),
    ("MI300X-192GB", "0.14", 1, rocm_layer(2880, 128)),
    ("MI325X-256GB", "0.18", 1, rocm_layer(2880, 128)),
    ("MI300X-192GB", "0.18", 4, rocm_layer(720, 128)),
    ("MI355X-288GB", "0.17", 1, rocm_layer(2880, 256, kept=True)),
    # 0.19 on: the oracle's ROCm branch, 256 on both
    ("MI300X-192GB", "0.19", 1, rocm_layer(2880, 256)),
    ("MI300X-192GB", "0.19", 2, rocm_layer(1440, 256)),
    ("MI355X-288GB", "0.19", 1, rocm_layer(2880, 256, kept=True)),
    ("MI355X-288GB", "0.23", 4, rocm_layer(720, 256, kept=True)),
    # 0.24: should_use_cdna4_mx_scale_swizzle() = on_gfx950() and TP <= 2: at TP 4 the scales stay strided, no copy
    ("MI355X-288GB", "0.24", 2, rocm_layer(1440, 256, kept=True)),
    ("MI355X-288GB", "0.24", 4, rocm_layer(720, 256)),
    # 0.25 on: the TRITON branch deletes the loaded scales ("del layer.w13_weight_scale")
    ("MI355X-288GB", "0.25", 1, rocm_layer(2880, 256)),
    ("MI355X-288GB", "0.32", 1, rocm_layer(2880, 256)),
    ("MI300X-192GB", "0.32", 8, rocm_layer(360, 256)),
])
def test_amd_experts_by_family_and_release(gpu, version, tp, layer):
    # against an A100 (Marlin in every release) on the same release: the rest of the model is the same bytes
    per_rank = 2880 // tp
    assert weights(gpu, version, tp) - weights("A100-80GB", version, tp) == 36 * (layer - marlin_layer(per_rank))


def test_plan_json_gpt_oss_120b_on_one_mi300x_and_one_mi355x(capsys):
    def planned(gpu: str, version: str) -> int:
        code, out, err = run(capsys, "plan", "--target", MODEL, "--gpu", gpu, "--method", "none", "--engine-version",
                             version, "--max-model-len", "8192", "--format", "json")
        assert code == 0, err
        return json.loads(out)["per_gpu"]["weights_target_bytes"]

    dense = planned("A100-80GB", "0.32") - 36 * marlin_layer(2880)  # what the experts leave: 4,271,906,944 B
    assert dense == 4_271_906_944
    mi300x = planned("MI300X-192GB", "0.32")
    assert mi300x == dense + 36 * rocm_layer(2880, 256) == 73_748_455_552  # 68.68 GiB (was Marlin's 65.91)
    assert round(mi300x / GiB, 2) == 68.68
    assert planned("MI355X-288GB", "0.19") == dense + 36 * rocm_layer(2880, 256, kept=True) == 77_825_319_040
    assert planned("MI300X-192GB", "0.14") == dense + 36 * rocm_layer(2880, 128) == 68_086_145_152


def test_a_decode_step_reads_the_swizzled_scales_not_the_kept_ones():
    # CDNA4 on 0.19 holds the loaded scales beside the swizzled copy; a step reads only the copy: what it reads of an
    # expert is MI300X's (the same 256 padding, no copy), what it holds is 884,736 B an expert more
    from specsize.catalog.gpus import load_efficiency
    from specsize.core.speculation import Tree
    from specsize.planner.perf import costs_for

    read = {}
    for gpu in ("MI300X-192GB", "MI355X-288GB"):
        d = deployment(MODEL, gpu=gpu)
        read[gpu] = costs_for(d, account(d, profile("0.19")), load_efficiency(d.gpu), 0, Tree()).target.expert_bytes
    assert read["MI300X-192GB"] == read["MI355X-288GB"]
    assert weights("MI355X-288GB", "0.19") - weights("MI300X-192GB", "0.19") == 36 * 128 * 884_736


# -- the layout value -------------------------------------------------------------------------------------------------

TRITON = Mxfp4Layout((1, 64), kernel="t", value_rows=16, value_cols=32, scale_rows=256, scale_cols=2,
                     keeps_checkpoint_scales=True, bias_bytes=4)


def test_a_profile_survives_asdict_and_json():
    # the old tuple subclass came back from dataclasses.asdict as Mxfp4Layout((1, 64)) - Triton's swizzle, its kept
    # scales and float32 biases gone - and JSON wrote [1, 64]; every field now goes through, and Mxfp4Layout.of reads
    # it back into the same layout, a profile rebuilt from it equal to (and hashing as) the original
    p = profile("0.19")
    data = json.loads(json.dumps(asdict(p)))
    rules = dict(data["mxfp4_pad_by_gpu"])
    assert rules["hopper"]["keeps_checkpoint_scales"] is True and rules["hopper"]["value_rows"] == 64
    assert rules["cdna4"] == {"pads": [256, 256], "kernel": rules["cdna4"]["kernel"], "value_rows": 1,
                              "value_cols": 1, "scale_rows": 1, "scale_cols": 1, "keeps_checkpoint_scales": True,
                              "bias_bytes": 4, "swizzle_max_tp": 0}
    rebuilt = tuple((key, Mxfp4Layout.of(value)) for key, value in data["mxfp4_pad_by_gpu"])
    assert rebuilt == p.mxfp4_pad_by_gpu
    again = replace(p, mxfp4_pad_by_gpu=rebuilt, mxfp4_pad=Mxfp4Layout.of(data["mxfp4_pad"]).pads)
    assert again == p and hash(again) == hash(p)
    d = deployment(MODEL, gpu="H100-SXM-80GB")
    assert account(d, again).weights_target.total == account(d, p).weights_target.total
    assert Mxfp4Layout.of([256, 128]) == Mxfp4Layout((256, 128))  # a plain pair as JSON writes it


def test_equality_is_by_value_and_never_with_a_pair():
    # the caches (weight_breakdown's lru_cache, planner.perf's costs keyed on ResolvedSettings) key on the layout:
    # equal layouts hash alike; a swizzled layout, a plain one and the bare pair are three keys, none standing in for
    # another; a plain layout and its pair give the same bytes
    same = Mxfp4Layout((1, 64), kernel="t", value_rows=16, value_cols=32, scale_rows=256, scale_cols=2,
                       keeps_checkpoint_scales=True, bias_bytes=4)
    assert TRITON == same and hash(TRITON) == hash(same)
    assert TRITON != (1, 64) and (1, 64) != TRITON
    assert TRITON != replace(TRITON, keeps_checkpoint_scales=False)
    assert Mxfp4Layout((256, 128)) != (256, 128)
    m = load_model(MODEL)
    assert weight_breakdown(m, mxfp4_pad=(1, 64)).total != weight_breakdown(m, mxfp4_pad=TRITON).total
    plain = Mxfp4Layout((256, 128))
    assert weight_breakdown(m, mxfp4_pad=plain).total == weight_breakdown(m, mxfp4_pad=(256, 128)).total
    assert pickle.loads(pickle.dumps(TRITON)) == TRITON and copy.deepcopy(TRITON) == TRITON
    with pytest.raises(AttributeError):
        TRITON.bias_bytes = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        tuple(TRITON)  # type: ignore[arg-type]  # not a pair: nothing can drop what it adds by unpacking it
    s = account(deployment(MODEL, gpu="MI355X-288GB"), profile("0.19")).settings
    assert hash(s) == hash(replace(s)) and s.mxfp4_pad == Mxfp4Layout.of(s.mxfp4_pad)


@pytest.mark.parametrize("bad", [(0, 64), (1,), (1, 64, 2), (1.5, 64)])
def test_a_malformed_layout_is_refused(bad):
    with pytest.raises(ValueError, match="pads a pair of integers"):
        Mxfp4Layout(bad)
    with pytest.raises(ValueError):
        Mxfp4Layout((1, 64), bias_bytes=-1)
    with pytest.raises(ValueError, match="no field value_row"):
        Mxfp4Layout.of({"pads": [1, 64], "value_row": 16})


def test_vllm_0_10_1_on_rocm_pads_the_intermediate_alone(capsys):
    """vLLM 0.10.1 on ROCm rounds gpt-oss's intermediate per partition up to 128 and leaves the hidden size at 2,880
    (quantization/mxfp4.py Mxfp4MoEMethod.create_weights, "elif current_platform.is_rocm()"); 0.10.2 pads both.
    An expert at TP 1, fp4 values two a byte, an e8m0 scale per 32, fp32 biases: 0.10.1 (5,888 x 1,440 + 2,880 x
    1,472) + (5,888 x 90 + 2,880 x 92) + (5,888 + 2,880) x 4 = 13,548,032 B; 0.10.2 (5,888 x 1,472 + 2,944 x 1,472) +
    (5,888 x 92 + 2,944 x 92) + (5,888 + 2,944) x 4 = 13,848,576 B; 36 layers of 128 experts: 1,384,906,752 B apart,
    and the 0.10.1 weights 4,271,906,944 + 4,608 x 13,548,032 = 66,701,238,400 B."""
    def weights(version: str) -> int:
        code, out, err = run(capsys, "plan", "--target", "openai/gpt-oss-120b", "--gpu", "MI300X-192GB", "--method",
                             "none", "--engine-version", version, "--max-model-len", "8192", "--format", "json")
        assert code == 0, err
        return json.loads(out)["per_gpu"]["weights_target_bytes"]

    assert weights("0.10.2") - weights("0.10.1") == 36 * 128 * (13_848_576 - 13_548_032)
    assert weights("0.10.1") == 4_271_906_944 + 36 * 128 * 13_548_032
