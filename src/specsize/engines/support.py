"""Which engine releases can load which architecture: the first vLLM / SGLang release whose model registry names
each model_type's class (data/model_support.json, read in each release's PyPI package, with its source). A plan for
a release that cannot load the model would size a server that never starts."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..core.errors import SpecError
from ..core.specs import Deployment, ModelSpec, checkpoint_format_needed, effective_target
from ..core.weights import GroupedQuantization, LatentMoESpec
from .registry import engine_label, predates, release_key, released_by


@lru_cache(maxsize=1)
def model_support() -> dict:
    return json.loads((Path(__file__).resolve().parent / "data" / "model_support.json").read_text(encoding="utf-8"))


def support_problem(engine: str, version: str | None, model_type: str) -> str | None:
    """Why release `version` of `engine` cannot load an architecture of `model_type` (None: it can, the newest
    release always can, or the data does not say)."""
    entry = model_support().get(engine, {}).get(model_type)
    if entry is None or version in (None, "", "latest"):
        return None
    name = engine_label(engine)
    # the earliest release proven to load it in any format: a pre-release carrying the class, or another checkpoint
    # format the publisher serves it in (Mistral-Small-3.1 through Pixtral from 0.8.1); only what none loads is refused
    first = first_release(engine, model_type)
    if first is None:
        if entry.get("at_or_before") or entry.get("class") not in (None, ""):
            return None  # in every release specsize covers, or not pinned: nothing proven to refuse
        return f"no {name} release loads {model_type} ({entry.get('bound') or 'no model class for it'})"
    if not predates(version, first):  # a series X.Y holds the release within it (gpt-oss with vLLM "0.10": 0.10.1)
        return None
    return (f"{name} {version} cannot load a {model_type} model ({entry.get('class')}): the first release that does is "
            f"{first}")


def first_release(engine: str, model_type: str) -> str | None:
    """The earliest release proven to load `model_type` (support_problem's reading), None where none is pinned."""
    entry = model_support().get(engine, {}).get(model_type) or {}
    return min((f for f in (entry.get("first"), entry.get("first_prerelease"), entry.get("first_any_format")) if f),
               key=lambda f: release_key(f) or (0,), default=None)


# bitsandbytes (core.weights.linear_bytes "bnb4" / "bnb8"): the vLLM releases whose in-tree loader specsize sizes.
# From 0.9.2 the loader undoes double quantization at load (model_loader/bitsandbytes_loader.py dequantize_dq, PR
# 19742; 0.9.1 keeps the nested uint8 absmax); from 0.10.0 BitsAndBytesMoEMethod quantizes an MoE's experts (0.9.2's
# BitsAndBytesConfig.get_quant_method gives FusedMoE none); 0.28.0 moved bitsandbytes out of vLLM into the
# vllm-bnb-plugin package (vllm-project/vllm PR 43529: no bitsandbytes.py or bitsandbytes_loader.py in 0.28.0 - 0.32)
BNB_FIRST, BNB_FIRST_MOE, BNB_GONE = "0.9.2", "0.10.0", "0.28.0"


# The first release of each engine whose quantization registry loads a checkpoint stored in a 4-bit float format: engine
# -> key -> release, the key a format (core.specs.QUANT_METHODS), then what else the checkpoint needs where that came
# later: "compressed-tensors" (the format declared through a compressed-tensors config, catalog.configs
# _ct_weight_scheme; otherwise ModelOpt's NVFP4, Quark's or the engine's own MXFP4), "moe" (an MoE model's experts). A
# release before any entry that applies refuses the checkpoint (_fp4_problem). Where several checkpoints of one format
# load from different releases, the earliest counts (only what no release loads is refused, as support_problem does).
# Read in the PyPI packages' model_executor/layers/quantization (vLLM wheels) and srt/layers/quantization (SGLang
# wheels), __init__.py's registry (vLLM QUANTIZATION_METHODS; SGLang QUANTIZATION_METHODS / BASE_QUANTIZATION_METHODS):
#  vLLM nvfp4: ModelOptNvFp4Config from 0.8.0 (under "nvfp4"; "modelopt_fp4" from 0.9.0; none in 0.7.3); moe:
#   modelopt.py ModelOptNvFp4FusedMoE from 0.9.0 (0.8.5.post1's get_quant_method returns None for a FusedMoE, whose
#   fused_moe/layer.py asserts "self.quant_method is not None"); compressed-tensors: schemes/
#   compressed_tensors_w4a16_nvfp4.py from 0.9.0 (compressed_tensors_w4a4_nvfp4.py, W4A4, from 0.9.1: the
#   Quantization records no activation scheme to tell them apart); compressed-tensors moe: compressed_tensors_moe.py
#   CompressedTensorsW4A4MoeMethod from 0.9.2 (none in 0.9.1).
#  vLLM mxfp4: quark/schemes/quark_w4a4_mxfp4.py from 0.9.0 (AMD's Quark checkpoints; none in 0.8.5); moe:
#   quark/quark_moe.py QuarkW4A4MXFp4MoEMethod from 0.10.0 (0.9.2's get_moe_method raises "Unsupported FusedMoe
#   scheme"), vLLM's own "mxfp4" (mxfp4.py Mxfp4MoEMethod, gpt-oss's) from 0.10.1.
#  SGLang nvfp4: "modelopt_fp4" (modelopt_quant.py ModelOptFp4Config, linear layers) from 0.4.5.post1 (none in 0.4.5;
#   until 0.5.3.post1's configs/model_config.py _parse_modelopt_quant_config a ModelOpt NVFP4 checkpoint loads only
#   under --quantization modelopt_fp4); moe: ModelOptNvFp4FusedMoEMethod from 0.4.7 (0.4.6.post5's get_quant_method
#   returns None for a FusedMoE, whose fused_moe_triton/layer.py asserts "self.quant_method is not None");
#   compressed-tensors (moe too): schemes/compressed_tensors_w4a4_nvfp4.py CompressedTensorsW4A4Fp4 and
#   compressed_tensors_moe.py CompressedTensorsW4A4Nvfp4MoEMethod from 0.5.7 (0.5.6.post2's CompressedTensorsConfig
#   raises "No compressed-tensors compatible scheme was found.").
#  SGLang mxfp4: "mxfp4" (mxfp4.py Mxfp4Config, MoE experts: gpt-oss's) and "quark" (MXFP4 linear layers on ROCm:
#   fp4.py MxFp4Config, from 0.5.1 quark/schemes/quark_w4a4_mxfp4.py) from the 0.5.0rc0 pre-release (0.5.0 was never
#   released; 0.5.1 is the first final release, and the first to load gpt-oss: data/model_support.json); none in
#   0.4.10.post2.
FP4_FIRST: dict[str, dict[str, str]] = {
    "vllm": {"nvfp4": "0.8.0", "nvfp4 moe": "0.9.0", "nvfp4 compressed-tensors": "0.9.0",
             "nvfp4 compressed-tensors moe": "0.9.2", "mxfp4": "0.9.0", "mxfp4 moe": "0.10.0"},
    "sglang": {"nvfp4": "0.4.5.post1", "nvfp4 moe": "0.4.7", "nvfp4 compressed-tensors": "0.5.7",
               "mxfp4": "0.5.0rc0"},
}
_FP4_NEEDS = {"moe": " for an MoE's experts", "compressed-tensors": " through a compressed-tensors config",
              "compressed-tensors moe": " for an MoE's experts through a compressed-tensors config"}


def _fp4_problem(engine: str, version: str | None, model: ModelSpec, quantization: str | None) -> tuple[str, str] | None:
    """(why, accepted) where release `version` of `engine` predates the 4-bit float format `model` is served in
    (FP4_FIRST): the checkpoint's own (any layer's, for one whose layers take different schemes), or the one a
    quantization override needs it stored in."""
    table = FP4_FIRST.get(engine)
    if table is None:
        return None
    stored = model.quantization
    needed = checkpoint_format_needed(model, quantization) if quantization else None
    if needed is not None:
        # the override's format; the checkpoint's own config where it stores that format (the flag restates it)
        formats = {needed}
        ct = stored is not None and stored.method == needed and stored.compressed_tensors
    elif stored is not None:
        schemes = stored.layer_schemes if isinstance(stored, GroupedQuantization) else ()  # each layer's own
        formats = {stored.method} | {s.method for pair in schemes for s in pair if s is not None}
        ct = stored.compressed_tensors
    else:
        return None
    needs = ["", "compressed-tensors" if ct else "", "moe" if model.moe is not None else "",
             "compressed-tensors moe" if ct and model.moe is not None else ""]
    for fmt in sorted(formats):
        entries = [(first, need) for need in needs if (first := table.get(f"{fmt} {need}".strip())) is not None]
        if not entries:
            continue
        first, need = max(entries, key=lambda e: release_key(e[0]) or (0,))  # at or after every entry that applies
        if not predates(version, first):
            continue
        name = engine_label(engine)
        return (f"{name} {version} cannot load {model.model_id} as a {fmt} checkpoint: the first release whose "
                f"quantization registry holds the format{_FP4_NEEDS.get(need, '')} is {first}",
                f"engine_version {first} or later, or another quantization")
    return None


def quantization_problem(engine: str, version: str | None, model: ModelSpec,
                         quantization: str | None = None) -> tuple[str, str] | None:
    """(why, accepted) where release `version` of `engine` cannot load `model`'s quantization as specsize sizes it -
    the checkpoint's own, or bitsandbytes quantized at load (`quantization` "bitsandbytes" over unquantized weights:
    core.specs.QUANT_ALIASES; the same releases, as the loader undoes the nested absmax of its quantize_4bit from 0.9.2
    and quantizes an MoE's experts from 0.10), or a 4-bit float format before the engine's registry holds it (FP4_FIRST);
    None where it can (every other format: their engine-side checks are the profiles' and the plan's)."""
    fp4 = _fp4_problem(engine, version, model, quantization)
    if fp4 is not None:
        return fp4
    q = model.quantization
    asked = str(quantization or "").lower() == "bitsandbytes"
    # --quantization bitsandbytes over weights stored in another format plans a pre-quantized bitsandbytes checkpoint
    # (core.specs.checkpoint_format_needed): the releases that load one are the same
    stored = (q is not None and q.method in ("bnb4", "bnb8")) or (
        asked and checkpoint_format_needed(model, "bitsandbytes") is not None)
    in_flight = not stored and q is None and asked
    if not (stored or in_flight):
        return None
    what = ("is a bitsandbytes checkpoint" if q is not None and q.method in ("bnb4", "bnb8") else
            "is served as a pre-quantized bitsandbytes checkpoint (--quantization bitsandbytes over its stored "
            f"{q.method} weights)" if stored and q is not None else
            "is quantized by bitsandbytes at load (--quantization bitsandbytes)")
    first = BNB_FIRST_MOE if model.moe is not None else BNB_FIRST
    accepted = f"engine vllm with engine_version {first} to 0.27"
    if engine != "vllm":
        return (f"{model.model_id} {what}: specsize sizes it as vLLM {first} - 0.27 load it, not SGLang's loader",
                accepted)
    wanted = release_key(version) if version not in (None, "", "latest") else None
    if wanted is None or wanted >= (release_key(BNB_GONE) or ()):
        name = f"vLLM {version}" if wanted is not None else "the newest vLLM"
        return (f"{model.model_id} {what}, and {name} has no bitsandbytes loader (0.28 moved it to the vllm-bnb-plugin "
                "package, which specsize does not size)", accepted)
    if predates(version, first):
        if model.moe is not None:
            return (f"{model.model_id} {what}: vLLM {version} does not quantize its MoE experts (the first release "
                    f"that does is {first})", accepted)
        # a 4-bit checkpoint's double-quantized absmax stays nested before 0.9.2; an 8-bit or singly quantized one
        # may load there, but its loader is not the one specsize sizes
        return (f"{model.model_id} {what}: specsize sizes bitsandbytes as vLLM {first} - 0.27 load it (from {first} "
                f"the loader undoes a 4-bit checkpoint's double-quantized absmax), not vLLM {version}", accepted)
    return None


# Layer kinds an architecture gained after the release that first registered it: (engine, model_type, feature) ->
# (first release whose model code builds them, source). A Nemotron-H release before them refuses the config (vLLM
# nemotron_h.py's ALL_DECODER_LAYER_TYPES has no "E"; SGLang's nemotron_h.py no NemotronHMoE) or builds the experts
# at the full hidden width without moe_latent_size's projections. Read in the releases' PyPI packages
LAYER_FEATURE_RELEASES: dict[tuple[str, str, str], tuple[str, str]] = {
    ("vllm", "nemotron_h", "moe"): ("0.11.1", "vLLM 0.11.1 model_executor/models/nemotron_h.py: NemotronHMoE and the "
                                    "'E': NemotronHMoEDecoderLayer entry of ALL_DECODER_LAYER_TYPES; absent in the "
                                    "0.11.0 sdist (https://pypi.org/project/vllm/0.11.1/, /0.11.0/)"),
    ("vllm", "nemotron_h", "latent_moe"): ("0.13.0", "vLLM 0.13.0 nemotron_h.py NemotronHMoE reads moe_latent_size "
                                           "(fc1_latent_proj / fc2_latent_proj); absent in the 0.12.0 sdist "
                                           "(https://pypi.org/project/vllm/0.13.0/, /0.12.0/)"),
    ("sglang", "nemotron_h", "moe"): ("0.5.6", "SGLang 0.5.6 srt/models/nemotron_h.py NemotronHMoE; absent in "
                                      "0.5.5.post3, 0.5.5.post2, 0.5.5.post1 and 0.5.5 (PyPI wheels)"),
    ("sglang", "nemotron_h", "latent_moe"): ("0.5.8", "SGLang 0.5.8 srt/models/nemotron_h.py reads moe_latent_size; "
                                             "absent in 0.5.7 (PyPI wheels)"),
}


def model_features(model: ModelSpec) -> tuple[str, ...]:
    """The later layer kinds of LAYER_FEATURE_RELEASES `model` uses: "moe" (MoE layers of an architecture that began
    dense, Nemotron-H's E), "latent_moe" (experts in a latent width, LatentMoESpec)."""
    if model.moe is None:
        return ()
    latent = isinstance(model.moe, LatentMoESpec) and bool(model.moe.latent_size)
    return ("moe", "latent_moe") if latent else ("moe",)


def feature_problem(engine: str, version: str | None, model: ModelSpec) -> tuple[str, str] | None:
    """(why, accepted) where release `version` of `engine` predates a layer kind `model` uses (LAYER_FEATURE_RELEASES);
    None where it does not, for the newest release, or where no entry pins one."""
    if version in (None, "", "latest"):
        return None
    model_type = model.checkpoint_type or model.model_type
    for feature in model_features(model):
        entry = LAYER_FEATURE_RELEASES.get((engine, model_type, feature))
        if entry is None:
            continue
        first, source = entry
        if not predates(version, first):
            continue
        name = engine_label(engine)
        what = "experts in a latent width (moe_latent_size)" if feature == "latent_moe" else "MoE layers"
        return (f"{name} {version} cannot build {model.model_id}'s {what}: the first release that does is {first} "
                f"({source})", f"engine_version {first} or later")
    return None


def check_model_support(engine: str, version: str | None, model: ModelSpec, field: str = "engine_version",
                        quantization: str | None = None) -> None:
    """Refuse a plan for a release that cannot load `model`, naming the first release that can. The engine loads the
    checkpoint's own architecture: a multimodal checkpoint's wrapper (ModelSpec.checkpoint_type), not the language
    model inside it, whose own entry holds for a top-level text-only checkpoint (qwen3_5_text from vLLM 0.27, while a
    qwen3_5 checkpoint wrapping it loads from 0.17)."""
    model_type = model.checkpoint_type or model.model_type
    problem = support_problem(engine, version, model_type)
    if problem is not None:
        first = first_release(engine, model_type)
        raise SpecError(field, problem, f"engine_version {first} or later" if first else "another engine for this model")
    feature = feature_problem(engine, version, model)
    if feature is not None:
        raise SpecError(field, *feature)
    quant = quantization_problem(engine, version, model, quantization)  # `quantization`: the deployment's override
    if quant is not None:
        raise SpecError(field, *quant)


# The first releases with expert parallelism over the TP group: vLLM's --enable-expert-parallel (vllm-project/vllm PR
# 14305, merged 2025-03-06, replacing the VLLM_TEST_ENABLE_EP variable: in 0.8.0's engine/arg_utils.py), SGLang's
# --enable-ep-moe (server_args.py from the 0.4.1.post4 wheel read; 0.4.0's has none: "if self.enable_ep_moe:
# self.ep_size = self.tp_size"). SGLang's --ep-size N alone switches the MoE layers to it from 0.4.10.post2
# (get_moe_impl_class reads the expert-parallel world size); from 0.5.3 --enable-ep-moe is a DeprecatedAction that
# raises ("Please set `--ep-size` to the same value as `--tp-size` instead"): engine_flags.json's flags_before.
EXPERT_PARALLEL_FROM = {"vllm": "0.8.0", "sglang": "0.4.1.post4"}
# SGLang before 0.4.10.post2 ran --enable-ep-moe only in the model files that build EPMoE (get_moe_impl_class):
# deepseek_v2.py (DeepSeek-V2 / V3) and mixtral.py from 0.4.1.post4, grok.py from 0.4.5, qwen2_moe.py / qwen3_moe.py
# from 0.4.6.post2, glm4_moe.py from 0.4.10; from 0.4.10.post2 FusedMoE reads moe_ep_size itself, for every model
SGLANG_EP_ARCH_FROM = {"deepseek_v2": "0.4.1.post4", "deepseek_v3": "0.4.1.post4", "mixtral": "0.4.1.post4",
                       "grok-1": "0.4.5", "qwen2_moe": "0.4.6.post2", "qwen3_moe": "0.4.6.post2", "glm4_moe": "0.4.10"}
SGLANG_EP_ANY_ARCH_FROM = "0.4.10.post2"
# vLLM's determine_expert_map gave every leftover expert to the last rank ("All remaining experts are assigned to the
# last rank": 30 experts on 8 ranks held [3, 3, 3, 3, 3, 3, 3, 9]) until vllm-project/vllm PR 21497 (merged 2025-07-24)
# spread them one apiece over the first ranks, as read in 0.10.1.1's fused_moe/layer.py; 0.10.0 is taken as the old
# rule (its release came the same day)
VLLM_EP_REMAINDER_FIRST_FROM = "0.10.1"
# ... and its EPMoE held block-fp8 experts from 0.4.3.post3 (Fp8EPMoEMethod's block_quant: none in the 0.4.1.post4 -
# 0.4.3.post2 wheels, one scale an expert; sgl-project/sglang PR 3602)
SGLANG_EP_BLOCK_FP8_FROM = "0.4.3.post3"
# SGLang 0.5.10 - 0.5.14 force the triton_kernel MoE runner for MXFP4 experts on compute capability 12 (workstation
# and consumer Blackwell) and assert "self.ep_size == 1" there (server_args.py, mxfp4.py)
SGLANG_EP_MXFP4_CC12_REFUSED = ("0.5.10", "0.5.15")


def expert_parallel_problem(engine: str, version: str | None) -> str | None:
    """Why the release has no expert parallelism (None: it has)."""
    first = EXPERT_PARALLEL_FROM.get(engine)
    if first is None or released_by(version, first):
        return None
    name = engine_label(engine)
    return f"{name} {version} has no expert parallelism ({name} {first} on)"


def check_expert_parallel(engine: str, version: str | None, d: Deployment) -> None:
    """Refuse expert parallelism the engine cannot run for the deployment's target as served (Deployment.ep > 1: an
    MoE target at TP > 1; elsewhere the flag changes nothing and is left out): a release without it; on SGLang a split
    that is not a whole number of experts a GPU (its FusedMoE asserts "(num_experts - num_fused_shared_experts) %
    moe_ep_size == 0", fused_moe_triton/layer.py in the 0.5.x wheels; 0.4.x's EPMoE takes num_experts // tp_size and
    would drop the rest), an architecture or weight format its EPMoE did not take yet (SGLANG_EP_ARCH_FROM,
    SGLANG_EP_BLOCK_FP8_FROM), MXFP4 experts on compute capability 12 in 0.5.10 - 0.5.14. vLLM gives the first
    num_experts % tp ranks one more (core.weights.experts_on_rank)."""
    if d.ep <= 1:
        return
    problem = expert_parallel_problem(engine, version)
    if problem is not None:
        raise SpecError("expert_parallel", problem,
                        f"false, or engine_version {EXPERT_PARALLEL_FROM[engine]} or later")
    target, quant = effective_target(d)
    moe = target.moe
    assert moe is not None  # Deployment.ep
    if engine != "sglang":
        if moe.num_experts % d.tp and not released_by(version, VLLM_EP_REMAINDER_FIRST_FROM):
            raise SpecError("expert_parallel", f"{target.model_id}'s {moe.num_experts} experts over TP {d.tp} leave "
                            f"{moe.num_experts % d.tp}, which vLLM {version} gives all to the last rank; specsize "
                            f"sizes the split of vLLM {VLLM_EP_REMAINDER_FIRST_FROM} on (one more on each first rank)",
                            f"a TP that divides the experts, or engine_version {VLLM_EP_REMAINDER_FIRST_FROM} or later")
        return
    if moe.num_experts % d.tp:
        raise SpecError("expert_parallel", f"{target.model_id}'s {moe.num_experts} experts do not split evenly over "
                        f"TP {d.tp}, which SGLang requires", "a TP that divides the experts, or false")
    first = SGLANG_EP_ARCH_FROM.get(target.model_type, SGLANG_EP_ANY_ARCH_FROM)
    if not released_by(version, first):
        raise SpecError("expert_parallel", f"SGLang {version} runs expert parallelism for {target.model_type} "
                        f"models from {first} (its model file builds no EPMoE before)",
                        f"false, or engine_version {first} or later")
    if quant is not None and quant.method == "fp8" and quant.block and not released_by(version, SGLANG_EP_BLOCK_FP8_FROM):
        raise SpecError("expert_parallel", f"SGLang {version}'s EPMoE holds no block-fp8 experts (from "
                        f"{SGLANG_EP_BLOCK_FP8_FROM})", f"false, or engine_version {SGLANG_EP_BLOCK_FP8_FROM} or later")
    cc12 = d.gpu.vendor == "nvidia" and d.gpu.family == "blackwell" and not d.gpu.compute_capability_10
    low, high = SGLANG_EP_MXFP4_CC12_REFUSED
    if quant is not None and quant.method == "mxfp4" and cc12 and released_by(version, low) and \
            not released_by(version, high):
        raise SpecError("expert_parallel", f"SGLang {version} runs MXFP4 experts on {d.gpu.gpu_id} (compute "
                        "capability 12) with its triton_kernel runner only, which asserts ep_size == 1",
                        f"false, or engine_version {high} or later")
