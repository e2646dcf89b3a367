"""Turn a Hugging Face `config.json` (as a dict) into a ModelSpec. Pure: no file access here."""

from __future__ import annotations

import math
import re
from dataclasses import fields, replace

from typing import Any

from ..core.errors import SpecError
from ..core.specs import (DERIVED_SOURCE, DTYPE_ALIASES, NEMOTRON_H_MTP_STEP, AttentionKind, AttentionLayer, MLASpec,
                          MixerKind, ModelSpec, MoESpec, Quantization, StateLayer, VisionSpec, derived_label)
from ..core.weights import GroupedQuantization, LatentMoESpec

REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def _text_config(cfg: dict) -> dict:
    """Multimodal checkpoints (Gemma 3, Llama 4, Mistral 3) keep the language model under text_config. The
    quantization is read where vLLM reads it (vllm/config/model.py _parse_quant_hf_config, model_executor/
    model_loader/weight_utils.py get_quant_config): quantization_config, the text config's, else the
    compression_config key of older compressed-tensors (llm-compressor) checkpoints."""
    text = cfg.get("text_config")
    if isinstance(text, dict) and "hidden_size" in text:
        merged = {k: v for k, v in cfg.items() if k != "text_config"}
        merged.update(text)
        merged["quantization_config"] = cfg.get("quantization_config") or text.get("quantization_config")
        cfg = merged
    if cfg.get("quantization_config") is None and cfg.get("compression_config") is not None:
        cfg = {**cfg, "quantization_config": cfg["compression_config"]}
    return cfg


# Bounds of a config.json's sizes: far above any published model, low enough that nothing overflows.
SIZE_LIMITS = {"hidden_size": 1 << 20, "num_hidden_layers": 10_000, "num_attention_heads": 1 << 16,
               "vocab_size": 1 << 27, "num_key_value_heads": 1 << 16, "head_dim": 1 << 16,
               "intermediate_size": 1 << 24, "intermediate_size_mlp": 1 << 24, "max_position_embeddings": 1 << 31,
               "kv_lora_rank": 1 << 16, "q_lora_rank": 1 << 16, "qk_nope_head_dim": 1 << 16,
               "qk_rope_head_dim": 1 << 16, "v_head_dim": 1 << 16, "num_local_experts": 1 << 16,
               "n_routed_experts": 1 << 16, "num_experts": 1 << 16, "num_experts_per_tok": 1 << 16,
               "moe_intermediate_size": 1 << 24, "sliding_window": 1 << 31, "draft_vocab_size": 1 << 27,
               "attention_head_dim": 1 << 16, "attention_chunk_size": 1 << 31,
               "shared_expert_intermediate_size": 1 << 24}
OPTIONAL_ZERO_OK = ("num_nextn_predict_layers", "n_shared_experts", "first_k_dense_replace")
MAX_ROTARY_POSITIONS = 1 << 31  # as max_position_embeddings: a rotary cache past it is a typo, not a model


def check_config(cfg: dict, model_id: str) -> None:
    """Every size a config.json gives is a positive integer within bounds, and its dtype is one we know:
    a config is validated like any other input (a `hidden_size: -1` must never plan as a fit)."""
    for name, limit in SIZE_LIMITS.items():
        value = cfg.get(name)
        if value is None or (name not in REQUIRED and value == 0 and name in (
                "sliding_window", "q_lora_rank", "num_local_experts", "num_experts", "n_routed_experts",
                "shared_expert_intermediate_size")):
            continue
        ok = isinstance(value, int) and not isinstance(value, bool) or \
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        if not ok or not 1 <= value <= limit:
            raise SpecError(f"config.json:{name}", f"{model_id}: must be an integer from 1 to {limit:,}, got {value!r}",
                            "a Hugging Face config.json")
    for name in OPTIONAL_ZERO_OK:
        value = cfg.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10_000):
            raise SpecError(f"config.json:{name}", f"{model_id}: must be an integer from 0 to 10,000, got {value!r}",
                            "a Hugging Face config.json")
    if cfg["hidden_size"] < cfg["num_attention_heads"] and not cfg.get("head_dim"):
        raise SpecError("config.json:num_attention_heads", f"{model_id}: {cfg['num_attention_heads']} heads for a "
                        f"hidden size of {cfg['hidden_size']} leave no head_dim", "a Hugging Face config.json")
    _check_shapes(cfg, model_id)
    raw = cfg.get("torch_dtype") or cfg.get("dtype")
    if raw is not None and str(raw).replace("torch.", "").lower() not in (*DTYPE_ALIASES, "float8_e4m3fn", "uint8",
                                                                           "int8", "auto"):
        raise SpecError("config.json:torch_dtype", f"{model_id}: unknown dtype {raw!r}",
                        "bfloat16, float16, float32 (or their aliases)")


def _real(value: object) -> bool:
    """A finite number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: object, low: int = 1) -> bool:
    """An integer (not a bool) of at least `low`."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _check_shapes(cfg: dict, model_id: str) -> None:
    """The fields that must agree with each other or have a shape, as the model's own library requires them."""
    def fail(name: str, why: str, accepted: str = "a Hugging Face config.json") -> SpecError:
        return SpecError(f"config.json:{name}", f"{model_id}: {why}", accepted)

    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads")
    if kv and (kv > heads or heads % kv):
        raise fail("num_key_value_heads", f"{kv} KV heads for {heads} attention heads",
                   "a divisor of num_attention_heads")
    experts = expert_count(cfg)
    per_token = cfg.get("num_experts_per_tok")
    if experts and per_token and per_token > experts:
        raise fail("num_experts_per_tok", f"{per_token} experts per token of {experts}", f"at most {experts}")
    layer_types = cfg.get("layer_types")
    if layer_types is not None and (not isinstance(layer_types, list) or len(layer_types) != cfg["num_hidden_layers"]):
        raise fail("layer_types", f"must list one type for each of the {cfg['num_hidden_layers']} layers",
                   "a list as long as num_hidden_layers")
    factor = cfg.get("partial_rotary_factor")
    if factor is not None and not (_real(factor) and 0 < factor <= 1):
        raise fail("partial_rotary_factor", f"must be a number in (0, 1], got {factor!r}", "a number in (0, 1]")
    rope = cfg.get("rope_scaling")
    if rope is not None and not isinstance(rope, dict):
        raise fail("rope_scaling", f"must be an object, got {rope!r}", "an object or null")
    scale = (rope or {}).get("factor")
    if scale is not None and not (_real(scale) and scale > 0):
        raise fail("rope_scaling.factor", f"must be a positive number, got {scale!r}", "a number > 0")
    for name in ("sliding_window_pattern", "spatial_merge_size"):
        value = cfg.get(name)
        if value is not None and not _whole(value):
            raise fail(name, f"must be a positive integer, got {value!r}", "a positive integer")
    raw_vision = cfg.get("vision_config")
    vision: dict = raw_vision if isinstance(raw_vision, dict) else {}
    ratio = vision.get("pixel_shuffle_ratio")
    if ratio is not None and not (_real(ratio) and 0 < ratio <= 1):
        raise fail("vision_config.pixel_shuffle_ratio", f"must be a number in (0, 1], got {ratio!r}",
                   "a number in (0, 1]")
    qc = cfg.get("quantization_config")
    if qc is not None and not isinstance(qc, dict):
        raise fail("quantization_config", f"must be an object, got {qc!r}", "an object or null")
    block = (qc or {}).get("weight_block_size")
    if block is not None and not (isinstance(block, list) and len(block) == 2 and all(
            _whole(b) and b <= 1 << 16 for b in block)):
        raise fail("quantization_config.weight_block_size", f"must be two positive integers, got {block!r}",
                   "e.g. [128, 128]")


def _dtype(cfg: dict) -> str:
    raw = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").replace("torch.", "")
    dtype = DTYPE_ALIASES.get(raw.lower(), "bfloat16")
    # vLLM's dtype "auto" serves a float32 checkpoint in bfloat16 (16-bit is what GPUs serve)
    return "bfloat16" if dtype == "float32" else dtype


def _kept_modules(qc: dict, nested: dict, model: str) -> tuple[str, ...]:
    """The modules a quantized checkpoint leaves in the model dtype, under the key each method's vLLM config reads
    (core.weights.unquantized_layers): fbgemm_fp8 / AWQ modules_to_not_convert, fp8 ignored_layers, compressed-tensors
    ignore, modelopt exclude_modules."""
    keep = (qc.get("modules_to_not_convert") or qc.get("ignored_layers") or qc.get("ignore")
            or qc.get("exclude_modules") or nested.get("exclude_modules") or ())
    field = "quantization_config.modules_to_not_convert"
    if not isinstance(keep, (list, tuple)) or not all(isinstance(e, str) for e in keep):
        raise SpecError(field, f"{model}: the modules kept unquantized must be a list of module names",
                        'a list of strings, e.g. ["lm_head"]')
    _check_patterns(keep, field, model, 'module names, globs or "re:" regular expressions')
    return tuple(keep)


def _check_patterns(entries, field: str, model: str, accepted: str) -> None:
    """Refuse a "re:" module pattern that is no regular expression (an ignore list's, a config group's targets)."""
    for entry in entries:
        if entry.startswith("re:"):
            try:
                re.compile(entry[3:])
            except re.error as err:
                raise SpecError(field, f"{model}: {entry!r} is not a valid regular expression ({err})",
                                accepted) from None


GROUP_ACCEPTED = "a positive integer up to 65,536, or -1 (per channel)"


def _quant_int(qc: dict, model: str, names: tuple[str, ...], default: int, field: str, accepted: str) -> int:
    """A whole-number quantization setting (the first of `names` present): bits a positive integer, a group size
    one too or -1 (per channel); anything else (a string, 4.9, 0, -5, 10**30) refused rather than read as another."""
    value = next((qc[name] for name in names if qc.get(name) is not None), default)
    whole = isinstance(value, int) and not isinstance(value, bool)
    if not whole or not (1 <= value <= 1 << 16 or (value == -1 and accepted == GROUP_ACCEPTED)):
        raise SpecError(f"quantization_config.{field}", f"{model}: {field} {value!r}", accepted)
    return value


CT_ACCEPTED = "config_groups: {group: {targets: [...], weights: {num_bits, type, ...}}}, or none (unquantized weights)"


def _ct_groups(qc: dict, model: str) -> dict:
    """compressed-tensors' config_groups as vLLM keeps them (CompressedTensorsConfig.from_config): a group whose one
    target names an attention module ("LlamaAttention", "...Attention") is dropped - attention quantization rides on
    the KV cache's - the others kept in their order."""
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, dict) or not all(isinstance(g, dict) for g in groups.values()):
        raise SpecError("quantization_config.config_groups", f"{model}: config_groups {groups!r}", CT_ACCEPTED)
    kept = {}
    for name, group in groups.items():
        targets = group.get("targets", ["Linear"])
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise SpecError(f"quantization_config.config_groups.{name}.targets", f"{model}: targets {targets!r}",
                            'a list of module names, class names ("Linear") or "re:" regular expressions')
        _check_patterns(targets, f"quantization_config.config_groups.{name}.targets", model,
                        '"re:" and a regular expression')
        if len(targets) == 1 and targets[0].endswith("Attention"):
            continue
        kept[name] = group
    return kept


def _ct_scheme(group: Any, model: str, unquantized: tuple[str, ...]) -> Quantization | None:
    """One compressed-tensors config group's weight scheme (none for weights: vLLM leaves its targets unquantized),
    read by the engine's compressed-tensors config (Quantization.config_method)."""
    scheme = _ct_weight_scheme(group, model, unquantized)
    return None if scheme is None else replace(scheme, config_method="compressed-tensors")


def _ct_weight_scheme(group: Any, model: str, unquantized: tuple[str, ...]) -> Quantization | None:
    weights = group.get("weights") if isinstance(group, dict) else "?"
    if weights is None:  # no group, or none for weights (sparsity / KV-cache schemes): vLLM leaves them unquantized
        return None
    if not isinstance(weights, dict):
        raise SpecError("quantization_config.config_groups", f"{model}: a group of {group!r}", CT_ACCEPTED)
    bits = _quant_int(weights, model, ("num_bits",), 8, "config_groups.weights.num_bits", "4 or 8")
    kind = str(weights.get("type", "int"))
    if bits not in (4, 8):
        raise SpecError("quantization_config.config_groups", f"{model}: {bits}-bit weights are not supported",
                        "4 or 8 bits")
    if bits == 4 and kind == "float":
        return Quantization("nvfp4", unquantized=unquantized)
    # the scales' layout (compressed_tensors QuantizationStrategy): "channel" one scale per output row, "group"
    # one per group_size inputs of a row, "block" one per block_structure tile (vLLM's block fp8, 128 x 128)
    strategy = str(weights.get("strategy") or "").lower()
    if bits == 4:
        group_size = -1 if strategy == "channel" else _quant_int(weights, model, ("group_size",), 128,
                                                                  "config_groups.weights.group_size", GROUP_ACCEPTED)
        return Quantization("int4", group_size=group_size if group_size > 0 else None,
                            has_zeros=not weights.get("symmetric", True), unquantized=unquantized)
    if kind != "float" and strategy == "group":  # W8A16 with groups: fp16 scales per group, as GPTQ's
        group_size = _quant_int(weights, model, ("group_size",), 128, "config_groups.weights.group_size",
                                GROUP_ACCEPTED)
        return Quantization("int8", group_size=group_size if group_size > 0 else None,
                            has_zeros=not weights.get("symmetric", True), unquantized=unquantized)
    block = weights.get("block_structure") if strategy == "block" else None
    if block is not None and not (isinstance(block, list) and len(block) == 2 and all(
            _whole(b) and b <= 1 << 16 for b in block)):
        raise SpecError("quantization_config.config_groups.weights.block_structure",
                        f"{model}: must be two positive integers, got {block!r}", "e.g. [128, 128]")
    return Quantization("fp8" if kind == "float" else "int8", block=tuple(block) if block else None,
                        unquantized=unquantized)


def _compressed_tensors(qc: dict, model: str, unquantized: tuple[str, ...]) -> Quantization | None:
    """compressed-tensors: the first config group's weight scheme, every group checked (none: vLLM leaves the weights
    unquantized). Where the groups give a model's layers different schemes, compressed_tensors_layers reads each
    layer's (catalog.configs._build_spec)."""
    groups = _ct_groups(qc, model)
    schemes = [_ct_scheme(g, model, unquantized) for g in groups.values()]
    return schemes[0] if schemes else None


# vLLM's linear modules of a decoder layer, as compressed-tensors matches them (layer name, class name, the checkpoint
# shards a fused module is made of): llama.py / qwen2.py LlamaAttention (QKVParallelLinear qkv_proj, RowParallelLinear
# o_proj), LlamaMLP (MergedColumnParallelLinear gate_up_proj, RowParallelLinear down_proj), deepseek_v2.py's MLA
_CT_ATTENTION = (("self_attn.qkv_proj", "QKVParallelLinear", ("q_proj", "k_proj", "v_proj")),
                 ("self_attn.o_proj", "RowParallelLinear", ()))
_CT_MLA = (("self_attn.q_a_proj", "ReplicatedLinear", ()), ("self_attn.q_b_proj", "ColumnParallelLinear", ()),
           ("self_attn.kv_a_proj_with_mqa", "ReplicatedLinear", ()),
           ("self_attn.kv_b_proj", "ColumnParallelLinear", ()), ("self_attn.o_proj", "RowParallelLinear", ()))
_CT_MLA_NO_Q_LORA = (("self_attn.q_proj", "ColumnParallelLinear", ()),) + _CT_MLA[2:]
_CT_MLP = (("mlp.gate_up_proj", "MergedColumnParallelLinear", ("gate_proj", "up_proj")),
           ("mlp.down_proj", "RowParallelLinear", ()))
# where a model's decoder layer names its blocks otherwise (the prefix its modules are built with, which the targets
# match): mixtral.py MixtralDecoderLayer and granitemoe.py GraniteMoeDecoderLayer block_sparse_moe, llama4.py
# Llama4DecoderLayer and jamba.py's layers feed_forward (their MoE and their dense MLPs), gpt_oss.py TransformerBlock attn
_CT_BLOCK_NAMES = {"mixtral": {"mlp": "block_sparse_moe"}, "granitemoe": {"mlp": "block_sparse_moe"},
                   "llama4": {"mlp": "feed_forward"}, "llama4_text": {"mlp": "feed_forward"},
                   "jamba": {"mlp": "feed_forward"}, "gpt_oss": {"self_attn": "attn"}}


def _ct_named(modules: tuple[tuple[str, str, tuple[str, ...]], ...],
              model_type: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """`modules` with their block prefix as `model_type`'s decoder layer names it (_CT_BLOCK_NAMES)."""
    names = _CT_BLOCK_NAMES.get(model_type, {})
    out = []
    for name, cls, shards in modules:
        block, _, rest = name.partition(".")
        out.append((f"{names.get(block, block)}.{rest}", cls, shards))
    return tuple(out)


def _ct_match(value: str, target: str, contains: bool = False) -> bool:
    """vLLM's is_equal_or_regex_match (quantization/utils/config_utils.py): "re:" a regular expression matched from the
    start, else the same name, or with `contains` (class names) the target inside the value, case aside."""
    if target.startswith("re:"):
        return re.match(target[3:], value) is not None
    return target.lower() in value.lower() if contains else target == value


def _ct_target(name: str, class_name: str, shards: tuple[str, ...], targets: list[str]) -> str | None:
    """The target a module takes, as vLLM's find_matched_target looks (compressed_tensors/utils.py): the first target
    matching its name; else, for a fused module, the first shard's where every shard matches one; else the first
    matching its class name."""
    found = next((t for t in targets if _ct_match(name, t)), None)
    if found is None and shards:
        prefix = name[:name.rfind(".") + 1]
        per_shard = [next((t for t in targets if _ct_match(prefix + s, t)), None) for s in shards]
        found = per_shard[0] if all(per_shard) else None
    return found if found is not None else next((t for t in targets if _ct_match(class_name, t, True)), None)


CT_FIELD = "quantization_config.config_groups"


def _ct_block(model: str, layer: int, modules: tuple[tuple[str, str, tuple[str, ...]], ...], what: str,
              scheme_of: dict[str, Quantization | None]) -> Quantization | None:
    """The one scheme a layer's block of modules takes (compressed_tensors_layers), refused where they differ."""
    found = {name: _ct_target(f"model.layers.{layer}.{name}", cls, shards, list(scheme_of))
             for name, cls, shards in modules}
    chosen = {scheme_of[t] if t is not None else None for t in found.values()}
    if len(chosen) > 1:
        raise SpecError(CT_FIELD, f"{model}: layer {layer}'s {what} modules take different schemes ("
                        + ", ".join(f"{n}: {t or 'none'}" for n, t in found.items())
                        + "); specsize sizes an attention or MLP block in one scheme",
                        "config groups that give each layer's attention, and each layer's MLP, one scheme")
    return chosen.pop()


def _ct_moe_block(model: str, layer: int, scheme_of: dict[str, Quantization | None],
                  shared: str, model_type: str = "") -> Quantization | None:
    """An MoE layer's scheme: its routed experts' - the first expert's gate, up and down projections, "Linear" standing
    for the fused experts module too (_add_fused_moe_to_target_scheme_map) - with its shared experts (`shared`: their
    module name, "" without) in the same scheme or left unquantized (Quantization.experts_only)."""
    with_experts = dict(scheme_of)
    if "Linear" in with_experts and "RoutedExperts" not in with_experts:
        with_experts["RoutedExperts"] = with_experts["Linear"]
    experts = _ct_block(model, layer, _ct_named(tuple((f"mlp.experts.0.{p}", "RoutedExperts", ()) for p in
                                                      ("gate_proj", "up_proj", "down_proj")), model_type),
                        "routed experts'", with_experts)
    if not shared:
        return experts
    common = _ct_block(model, layer, _ct_named(tuple((f"mlp.{shared}.{n.split('.', 1)[1]}", c, s)
                                                     for n, c, s in _CT_MLP), model_type), "shared experts'",
                       scheme_of)
    if common is None and experts is not None:
        return replace(experts, experts_only=True)
    if common != experts:
        raise SpecError(CT_FIELD, f"{model}: layer {layer}'s routed experts take {experts} and its shared experts "
                        f"{common}; specsize sizes an MoE block in one scheme",
                        "one scheme for a layer's routed and shared experts, or the shared ones ignored")
    return experts


def compressed_tensors_layers(qc: dict, declared: Quantization | None, model: str, n_layers: int,
                              moe: MoESpec | None, mla: MLASpec | None, model_type: str,
                              hybrid: bool) -> Quantization | None:
    """A compressed-tensors checkpoint's scheme for each decoder layer's attention and MLP, by the config group whose
    targets match its modules as vLLM 0.32's CompressedTensorsConfig.get_scheme_dict matches them (every target of
    every group in one map, in order, a target named again taking the later group's scheme; a module no target
    matches is unquantized - UnquantizedLinearMethod). The ignore list stays Quantization.unquantized's, read per
    layer by core.weights. `declared`: the first group's (parse_quantization), kept where every layer takes it.

    A routed-experts module takes the scheme of its first expert's gate, up and down projections, which must agree
    (compressed_tensors_moe.py get_moe_method: "All MoE projections need to have same quantization scheme"), "Linear"
    standing for it too (_add_fused_moe_to_target_scheme_map). specsize sizes an attention block and an MLP block in
    one scheme each: a block whose modules take different ones (q/k/v 8-bit, o_proj 4-bit) is refused by name."""
    groups = _ct_groups(qc, model)
    scheme_of: dict[str, Quantization | None] = {}
    for group in groups.values():
        scheme = _ct_scheme(group, model, declared.unquantized if declared else ())
        for target in group.get("targets", ["Linear"]):
            scheme_of[target] = scheme
    if not scheme_of:
        return declared
    attention = _ct_named((_CT_MLA if mla.q_lora_rank else _CT_MLA_NO_Q_LORA) if mla is not None else _CT_ATTENTION,
                          model_type)
    dense_mlp = _ct_named(_CT_MLP, model_type)
    # qwen2_moe.py / qwen3_next.py / llama4.py shared_expert, deepseek_v2.py and the like shared_experts
    shared = "shared_expert" if model_type in ("qwen2_moe", "qwen3_next", "llama4", "llama4_text") else "shared_experts"
    table = []
    for layer in range(n_layers):
        attn = _ct_block(model, layer, attention, "attention", scheme_of)
        if moe is not None and layer in moe.moe_layers:
            mlp = _ct_moe_block(model, layer, scheme_of, shared if moe.num_shared_experts else "", model_type)
        else:
            mlp = _ct_block(model, layer, dense_mlp, "MLP", scheme_of)
        table.append((attn, mlp))
    if all(pair == (declared, declared) for pair in table):
        return declared
    if hybrid:
        raise SpecError(CT_FIELD, f"{model}: the config groups give its layers different schemes, which specsize does not "
                        "model for a hybrid (state-space / linear-attention) model", "one scheme for every layer")
    used = [s for pair in table for s in pair if s is not None]
    if not used:
        return None
    # the scheme standing for the model where one is read (core.perf's compute path, the routed experts' bytes a step
    # reads): the one most layers' MLPs (routed experts) take - the bulk of a layer's weights - else their attention's
    mlps = [replace(mlp, experts_only=False) for _, mlp in table if mlp is not None] or used
    base = max(mlps, key=mlps.count)
    return GroupedQuantization(**{f.name: getattr(base, f.name) for f in fields(base)},
                               layer_schemes=tuple(table))


def parse_quantization(qc: dict | None, is_moe: bool, model: str) -> Quantization | None:
    """The checkpoint's declared quantization (`quantization_config`), or None for unquantized weights; its
    `config_method` the quant_method the engine reads (ModelOpt's own layout: modelopt)."""
    if not qc:
        return None
    q = _parse_quantization(qc, is_moe, model)
    return None if q is None else replace(q, config_method=_quant_method(qc))


def _quant_method(qc: dict) -> str:
    """The quant_method a quantization_config names (lower case; ModelOpt's own layout, hf_quant_config.json or copied
    into config.json, names none: its algorithm sits under "quantization", and vLLM's
    transformers_utils/model_arch_config_convertor.py _normalize_quantization_config names it modelopt)."""
    method = str(qc.get("quant_method") or qc.get("quant_algo") or "").lower()
    producer = qc.get("producer")
    inner = qc.get("quantization")
    if not method and isinstance(producer, dict) and producer.get("name") == "modelopt":
        method = "modelopt"
    elif not method and isinstance(inner, dict) and inner.get("quant_algo"):
        # hf_quant_config.json's own layout ({"quantization": {"quant_algo": ...}}), which only ModelOpt writes, copied
        # without its producer block (aiconfigurator-core's copy of NVIDIA-Nemotron-3-Super-120B-A12B-FP8's): read as
        # ModelOpt's, as vLLM reads the published file (its producer names modelopt)
        method = "modelopt"
    return method


def _parse_quantization(qc: dict, is_moe: bool, model: str) -> Quantization | None:
    method = _quant_method(qc)
    inner = qc.get("quantization")
    nested: dict = inner if isinstance(inner, dict) else {}
    unquantized = _kept_modules(qc, nested, model)
    if method == "fp8":
        block = qc.get("weight_block_size")
        return Quantization("fp8", block=tuple(block) if block else None, moe_block_refine=bool(block),
                            unquantized=unquantized)
    if method == "fbgemm_fp8":  # Meta's FP8 checkpoints: per-channel fp8 weights, fp32 scales (vLLM FBGEMMFp8Config)
        return Quantization("fp8", unquantized=unquantized)
    if method in ("awq", "gptq", "gptq_marlin", "awq_marlin", "auto-round", "auto_round"):
        bits = _quant_int(qc, model, ("bits", "w_bit"), 4, "bits", "4 or 8")
        group = _quant_int(qc, model, ("group_size", "q_group_size"), 128, "group_size", GROUP_ACCEPTED)
        zeros = bool(qc.get("zero_point", True)) if method.startswith("awq") else not bool(qc.get("sym", True))
        if bits == 8:
            return Quantization("int8", group_size=group if group > 0 else None, has_zeros=zeros,
                                unquantized=unquantized)
        if bits != 4:
            raise SpecError("quantization_config.bits", f"{model}: {bits}-bit {method} is not supported", "4 or 8")
        return Quantization("int4", group_size=group if group > 0 else None, has_zeros=zeros, unquantized=unquantized)
    if method == "mxfp4":
        return Quantization("mxfp4", experts_only=is_moe)
    if method in ("modelopt", "modelopt_fp4", "nvfp4"):
        algo = str(qc.get("quant_algo") or nested.get("quant_algo") or method).upper()
        return Quantization("nvfp4" if "FP4" in algo else "fp8", unquantized=unquantized,
                            kv_cache_dtype=_modelopt_kv_dtype(qc, nested))
    if method == "compressed-tensors":
        return _compressed_tensors(qc, model, unquantized)
    if method == "bitsandbytes":
        return _bitsandbytes(qc, is_moe, model)
    raise SpecError("quantization_config.quant_method", f"{model}: quantization {method!r} is not supported",
                    "fp8, fbgemm_fp8, awq, gptq, compressed-tensors, mxfp4, modelopt (fp8/nvfp4), bitsandbytes")


BNB_BLOCK = 64  # bitsandbytes' 4-bit block: one absmax per 64 values (transformers' checkpoints; quantize_4bit's default)


def _bitsandbytes(qc: dict, is_moe: bool, model: str) -> Quantization:
    """A bitsandbytes checkpoint as vLLM's BitsAndBytesConfig.from_config reads it (quantization/bitsandbytes.py,
    0.9.2-0.27): load_in_8bit (default false) for int8 weights, else 4-bit (nf4 or fp4 alike in bytes: packed two a
    byte, core.weights.linear_bytes "bnb4"), whatever bnb_4bit_use_double_quant says (the loader undoes double
    quantization at load); llm_int8_skip_modules kept in the model dtype, a module skipped where an entry is one of
    its name's dot-separated parts or a leading run of them (is_layer_skipped_bnb). Only uint8 4-bit storage loads
    (BitsAndBytesConfig: "Unsupported bnb_4bit_quant_storage"), and the loader refuses a pre-quantized 8-bit MoE
    checkpoint ("Prequant BitsAndBytes 8bit models with FusedMoE is not supported yet")."""
    field = "quantization_config"
    skip = qc.get("llm_int8_skip_modules") or []
    if not isinstance(skip, list) or not all(isinstance(e, str) and e for e in skip):
        raise SpecError(f"{field}.llm_int8_skip_modules", f"{model}: {skip!r}", 'a list of module names, e.g. ["lm_head"]')
    for name in ("load_in_8bit", "load_in_4bit", "bnb_4bit_use_double_quant"):
        if qc.get(name) is not None and not isinstance(qc.get(name), bool):
            raise SpecError(f"{field}.{name}", f"{model}: {name} {qc.get(name)!r}", "true or false")
    storage = qc.get("bnb_4bit_quant_storage") or "uint8"
    eight = bool(qc.get("load_in_8bit"))
    if not eight and storage != "uint8":
        raise SpecError(f"{field}.bnb_4bit_quant_storage", f"{model}: vLLM loads 4-bit bitsandbytes weights stored as "
                        f"uint8 only, not {storage!r}", "uint8")
    if eight and is_moe:
        raise SpecError(f"{field}.load_in_8bit", f"{model}: vLLM does not load a pre-quantized 8-bit bitsandbytes "
                        "MoE checkpoint (its bitsandbytes loader: 8-bit experts are not supported)",
                        "a 4-bit bitsandbytes checkpoint of it, or another format")
    # each entry as the part of a module name it skips: a whole dot-separated part, or (dotted) the name's beginning
    kept = tuple(f"re:{re.escape(e)}(?:\\..*)?$" if "." in e else f"re:(?:.*\\.)?{re.escape(e)}(?:\\..*)?$"
                 for e in skip)
    return Quantization("bnb8" if eight else "bnb4", group_size=None if eight else BNB_BLOCK, has_zeros=False,
                        unquantized=kept)


def _modelopt_kv_dtype(qc: dict, nested: dict) -> str | None:
    """The KV cache dtype a ModelOpt checkpoint was calibrated for, as vLLM reads it (utils/torch_utils.py
    get_kv_cache_quant_algo_string: kv_cache_scheme or kv_cache_quant_algo, under `quantization` or at the top; a
    scheme of static 8-bit floats is fp8, of 4-bit floats nvfp4); None without one or for one vLLM does not map."""
    algo = nested.get("kv_cache_scheme") or qc.get("kv_cache_scheme") or nested.get("kv_cache_quant_algo") \
        or qc.get("kv_cache_quant_algo")
    if isinstance(algo, dict):
        if algo.get("dynamic") is False and algo.get("num_bits") == 8 and algo.get("type") == "float":
            return "fp8"
        return "nvfp4" if algo.get("num_bits") == 4 and algo.get("type") == "float" else None
    return str(algo).lower() if isinstance(algo, str) and str(algo).lower() in ("fp8", "nvfp4") else None


# The model types whose layers specsize models (dense and MoE transformers, their windowed and MLA variants,
# and the hybrids below). Anything else is refused by name rather than planned as a dense model: its layers
# may keep state or KV in ways the accounting does not know.
TRANSFORMER_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "gemma",
                     "gemma2", "gemma3", "gemma3_text", "llama4", "llama4_text", "mistral3", "deepseek_v2",
                     "deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "minimax_m2", "gpt_oss", "granite",
                     "granitemoe", "glm_moe_dsa",
                     # vision-language checkpoints whose language model is one of the above (the vision tower is
                     # the multimodal accounting's)
                     "qwen2_vl", "qwen2_5_vl",
                     # Qwen3-VL (vllm 0.32 qwen3_vl.py / qwen3_vl_moe.py): Qwen3 / Qwen3-MoE decoder layers (q/k norm)
                     # under text_config (qwen3_vl_text / qwen3_vl_moe_text) with an interleaved MRoPE whose cos/sin
                     # cache spans max_position_embeddings (mrope_positions_factor 1 unless video pruning is on)
                     "qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text")
HYBRID_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "nemotron_h",
                "granitemoehybrid", "jamba", "falcon_h1")
MODELLED_TYPES = TRANSFORMER_TYPES + HYBRID_TYPES
# DeepseekV3ForCausalLM under another model_type: Kimi K2 (vLLM's ModelConfig.is_deepseek_mla lists kimi_k2 beside
# deepseek_v2 / v3; its config.json names architectures ["DeepseekV3ForCausalLM"]). GLM-5 (glm_moe_dsa,
# GlmMoeDsaForCausalLM) is DeepSeek-V3.2's architecture under Z.ai's name: vLLM 0.32's model registry maps it to
# vllm.models.deepseek_v32 (models/deepseek_v32/__init__.py: "from .nvidia.model import DeepseekV32ForCausalLM as
# GlmMoeDsaForCausalLM"; deepseek_v2.py GlmMoeDsaForCausalLM(DeepseekV2ForCausalLM) elsewhere) - the same MLA,
# DSA indexer, first_k_dense_replace dense layers, shared experts and noaux_tc router, read from the same config
# fields. Its differences are values (q_lora_rank 2048, qk_nope 192, v_head 256, index_n_heads 32), a bf16 router
# whose logits come out in float32 (deepseek_v2.py _get_moe_router_dtype: GateLinear out_dtype only, the weight
# stays in the model dtype) and its indexer's rotary sharing the attention's (indexer_rope_interleave true)
DEEPSEEK_ALIKE = ("kimi_k2", "glm_moe_dsa")
# DeepSeek-V3.2's sparse-attention indexer keeps its own per-token key beside the MLA latent: vLLM's
# deepseek_v2.py Indexer builds it when the config has index_topk (is_v32 = hasattr(hf_config, "index_topk"))
INDEXER_KEYS = ("index_topk", "index_n_heads", "index_head_dim")


# The DeepSeek-V2/V3 model types whose vLLM model (deepseek_v2.py DeepseekV2DecoderLayer) attends through MLA (plain
# multi-head attention only where qk_nope_head_dim and qk_rope_head_dim are both 0, as DeepSeek-OCR / VL2's language
# configs, which specsize refuses on qk_nope_head_dim 0) and reads first_k_dense_replace and moe_intermediate_size for
# its MoE layers: DeepSeek-V1 ("deepseek") has neither
MLA_FAMILY = ("deepseek_v2", "deepseek_v3", "deepseek_v32") + DEEPSEEK_ALIKE
# what each field _check_mla_family asks for builds
MLA_FAMILY_NEEDS = {"kv_lora_rank": "its MLA latent width", "moe_intermediate_size": "its experts' width",
                    "first_k_dense_replace": "its dense layers before the MoE ones",
                    **{key: "its sparse-attention indexer" for key in INDEXER_KEYS}}
# the types whose config class always has the DeepSeek-V3.2 indexer (transformers 5 DeepseekV32Config and
# GlmMoeDsaConfig: index_topk 2048 by default), which vLLM builds wherever the config has index_topk
INDEXER_TYPES = ("deepseek_v32", "glm_moe_dsa")


def _check_mla_family(cfg: dict, model_id: str) -> None:
    """The fields a DeepSeek-V2/V3-style model is built from, present: a config leaving kv_lora_rank out had been
    planned as GQA attention over every head (159,744 B of KV a token for GLM-5, not its latent's 100,152 B),
    one leaving moe_intermediate_size out with experts of the dense width (548 GB of GLM-5 weights), and one leaving
    first_k_dense_replace out with no dense layers, and GLM-5 or DeepSeek-V3.2 leaving index_topk out without its
    indexer's 132 B a token a layer - where the model's config class fills its own defaults and vLLM's
    model code fails on a null (deepseek_v2.py: layer_idx >= config.first_k_dense_replace; kv_lora_rank + rope); and
    0 routed experts, which had been planned as a dense model vLLM does not build."""
    if str(cfg.get("model_type") or "") not in MLA_FAMILY:
        return
    if cfg.get("n_routed_experts") == 0:  # deepseek_v2.py: MoE layers whenever n_routed_experts is not None
        raise SpecError("config.json:n_routed_experts", f"{model_id}: 0 routed experts (vLLM builds the MoE layers of "
                        f"a {cfg['model_type']} model whenever n_routed_experts is not null)",
                        "an integer of at least 2, or null for a dense model")
    needed = ["kv_lora_rank"]
    if cfg["model_type"] in INDEXER_TYPES:  # their config classes always carry the indexer (index_topk 2048)
        needed += list(INDEXER_KEYS)
    experts = expert_count(cfg)
    if isinstance(experts, int) and experts > 1:
        needed += ["moe_intermediate_size", "first_k_dense_replace"]
    for name in needed:
        if cfg.get(name) is None or (name == "kv_lora_rank" and cfg.get(name) == 0):
            raise SpecError(f"config.json:{name}", f"{model_id}: {name} is missing or null (a "
                            f"{cfg['model_type']} model needs it: {MLA_FAMILY_NEEDS[name]})",
                            f"the config.json as published, with {name}")


def deepseek_like(model_type: str) -> bool:
    """A DeepSeek-V2/V3 architecture: MLA when kv_lora_rank is set, first_k_dense_replace dense layers, shared experts,
    the noaux_tc router's score-correction bias."""
    return model_type.startswith("deepseek") or model_type in DEEPSEEK_ALIKE


# GLM-4.5 / 4.5-Air / 4.6 / 4.7 (Glm4MoeForCausalLM): DeepSeek-V3's MoE (first_k_dense_replace dense layers, shared
# experts, the noaux_tc router and its float32 score-correction bias) behind ordinary GQA attention with a qkv bias,
# optional q/k norms and half-width rotary (vllm/model_executor/models/glm4_moe.py Glm4MoeDecoderLayer, Glm4MoE,
# Glm4MoeAttention)
FIRST_K_DENSE_TYPES = ("glm4_moe",)
# Nemotron-H's hybrid_override_pattern letters: M mamba2, * attention, - MLP, E MoE (vLLM nemotron_h.py
# ALL_DECODER_LAYER_TYPES: NemotronHMambaDecoderLayer, NemotronHAttentionDecoderLayer, NemotronHMLPDecoderLayer,
# NemotronHMoEDecoderLayer - one block per layer, so an MLP or MoE layer mixes no tokens)
_PATTERN = {"M": "state", "*": "attention", "-": "none", "E": "none"}
# transformers 5's NemotronHConfig (which vLLM 0.32 imports) names the layers in layers_block_type instead, its legacy
# names remapped (configuration_utils.py _LEGACY_LAYER_TYPE_REMAP: mamba -> linear_attention, attention ->
# full_attention), and derives hybrid_override_pattern and num_hidden_layers from the list (_list_to_pattern)
_BLOCK_TYPE_LETTERS = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*", "mlp": "-",
                       "moe": "E"}
# hybrids whose attention layers have no rotary embedding, so no cos/sin cache (vLLM's nemotron_h.py
# NemotronHAttention and jamba.py JambaAttentionDecoderLayer build qkv_proj, o_proj and attn only)
NOPE_TYPES = ("nemotron_h", "jamba")
# layer_types entries: attention kinds, and the state kinds of the hybrids above
ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "attention")
STATE_LAYER_TYPES = ("linear_attention", "mamba")


def _unmodelled(what: str, model_id: str, found: str, accepted: str) -> SpecError:
    return SpecError(f"config.json:{what}", f"{model_id}: {found} is not modelled by specsize (planning it as a dense "
                     "transformer would be wrong)", accepted)


def check_modelled(cfg: dict, model_id: str) -> None:
    """Refuse a config whose model type or layer kinds specsize does not model: one line naming what it does not
    understand. A config without model_type is refused where a user gives it (catalog/models.py); the catalog's
    own partial copies, which lack it, are read as Llama-style models."""
    model_type = cfg.get("model_type")
    if model_type is not None and str(model_type) not in MODELLED_TYPES:
        raise _unmodelled("model_type", model_id, f"model type {str(model_type)!r}", ", ".join(MODELLED_TYPES))
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list):
        unknown = sorted({str(k) for k in kinds} - set(ATTENTION_LAYER_TYPES) - set(STATE_LAYER_TYPES))
        if unknown:
            raise _unmodelled("layer_types", model_id, "layer kind " + ", ".join(map(repr, unknown)),
                              ", ".join(ATTENTION_LAYER_TYPES + STATE_LAYER_TYPES))
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None:
        unknown = sorted(set(str(pattern)) - set(_PATTERN))
        if unknown:
            raise _unmodelled("hybrid_override_pattern", model_id, "layer kind " + ", ".join(map(repr, unknown)),
                              "M (mamba2), * (attention), - (MLP), E (MoE)")
        experts = expert_count(cfg)
        if "E" in str(pattern) and not (_whole(experts) and experts > 1):
            # vLLM's NemotronHMoE reads config.n_routed_experts for every E layer
            raise SpecError("config.json:n_routed_experts", f"{model_id}: its MoE layers ('E' in "
                            f"hybrid_override_pattern) need the routed experts' count, got {experts!r}",
                            "an integer of at least 2")


def _nemotron_pattern(cfg: dict, model_id: str) -> dict:
    """A Nemotron-H config as transformers 5's NemotronHConfig reads it (what vLLM 0.32 builds the model from): where
    it lists layers_block_type and gives no hybrid_override_pattern (NVIDIA-Nemotron-3-Ultra, Nemotron-3.5), the
    pattern is the list's letters and num_hidden_layers its length ("num_hidden_layers is deprecated and ignored if
    layers_block_type is explicitly provided"; the property returns len(self.layers_block_type)); the class's defaults
    for the fields it leaves out (_nemotron_defaults) and its one MTP step's letters under mtp_hybrid_override_pattern
    (_nemotron_mtp_step); other configs as they are."""
    if str(cfg.get("model_type") or "") != "nemotron_h":
        return cfg
    cfg = {**_nemotron_defaults(cfg), "mtp_hybrid_override_pattern": _nemotron_mtp_step(cfg, model_id)}
    if cfg.get("hybrid_override_pattern"):
        return cfg
    kinds = cfg.get("layers_block_type")
    if kinds is None:
        return cfg
    if not (isinstance(kinds, list) and kinds and all(isinstance(k, str) for k in kinds)):
        raise SpecError("config.json:layers_block_type", f"{model_id}: layers_block_type {kinds!r}",
                        "a list of " + ", ".join(_BLOCK_TYPE_LETTERS))
    unknown = sorted({k for k in kinds if k not in _BLOCK_TYPE_LETTERS})
    if unknown:
        raise _unmodelled("layers_block_type", model_id, "layer kind " + ", ".join(map(repr, unknown)),
                          ", ".join(_BLOCK_TYPE_LETTERS))
    return {**cfg, "hybrid_override_pattern": "".join(_BLOCK_TYPE_LETTERS[k] for k in kinds),
            "num_hidden_layers": len(kinds)}


# What NemotronHConfig takes for a field the config.json leaves out (transformers 5 configuration_nemotron_h.py, which
# vLLM 0.32 loads; vLLM 0.9.1 - 0.11's own transformers_utils/configs/nemotron_h.py and SGLang's copy of it,
# srt/configs/nemotron_h.py, default them alike): a field the model code reads, never planned from another default
# (hidden_size // heads, all heads as KV heads, one group had been planned silently). mamba_n_groups and mamba_d_conv
# are the names the class also takes (__post_init__ pops them over n_groups and conv_kernel).
NEMOTRON_H_DEFAULTS = {"head_dim": 128, "num_key_value_heads": 8, "n_groups": 8, "conv_kernel": 4}
NEMOTRON_H_ALIASES = {"mamba_n_groups": "n_groups", "mamba_d_conv": "conv_kernel"}


def _nemotron_defaults(cfg: dict) -> dict:
    """A Nemotron-H config with the class's defaults where it leaves a field out (an explicit null stays null: the
    model code reads a null head_dim as hidden_size // heads, NemotronHConfig a null num_key_value_heads as every
    head)."""
    out = dict(cfg)
    for alias, name in NEMOTRON_H_ALIASES.items():
        if alias in out:
            out[name] = out.pop(alias)
    for name, value in NEMOTRON_H_DEFAULTS.items():
        out.setdefault(name, value)
    return out


def _nemotron_ssm_dtype(cfg: dict, model_id: str) -> str | None:
    """The SSM state's dtype vLLM keeps for a Nemotron-H model (None: the model's dtype): the config's
    mamba_ssm_cache_dtype, else float32 (vLLM 0.32 model_executor/models/config.py NemotronHForCausalLMConfig
    .update_mamba_ssm_cache_dtype); "auto" is the conv state's, the model dtype (layers/mamba/mamba_utils.py
    MambaStateDtypeCalculator._mamba_state_dtype). Any other value (config/cache.py MambaDType: auto, float32,
    float16, bfloat16) stops the engine, and had been planned as float32."""
    raw = cfg.get("mamba_ssm_cache_dtype")
    if raw is None:
        return "float32"
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return None
    name = _dtype_name(raw) if isinstance(raw, str) else None
    if name is None:
        raise SpecError("config.json:mamba_ssm_cache_dtype", f"{model_id}: mamba_ssm_cache_dtype {raw!r}",
                        "auto, float32, float16 or bfloat16")
    return name


def _nemotron_mtp_step(cfg: dict, model_id: str) -> str:
    """The letters of one Nemotron-H MTP step as NemotronHConfig reads them: mtp_layers_block_type where given, else
    mtp_hybrid_override_pattern, else "*E"; a value the class cannot read (not a string of M, *, -, E; not a list of
    its layer kinds) is refused as it refuses the config."""
    kinds = cfg.get("mtp_layers_block_type")
    if kinds is not None:
        if not (isinstance(kinds, list) and all(isinstance(k, str) and k in _BLOCK_TYPE_LETTERS for k in kinds)):
            raise SpecError("config.json:mtp_layers_block_type", f"{model_id}: mtp_layers_block_type {kinds!r}",
                            "a list of " + ", ".join(_BLOCK_TYPE_LETTERS))
        return "".join(_BLOCK_TYPE_LETTERS[k] for k in kinds)
    pattern = cfg.get("mtp_hybrid_override_pattern")
    if pattern is None:
        return NEMOTRON_H_MTP_STEP
    if not (isinstance(pattern, str) and set(pattern) <= set(_PATTERN)):
        raise SpecError("config.json:mtp_hybrid_override_pattern", f"{model_id}: mtp_hybrid_override_pattern "
                        f"{pattern!r}", "a string of M, *, -, E (one MTP step's layers, e.g. '*E')")
    return pattern


def _int(cfg: dict, model_id: str, *names: str, default: int | None = None) -> int:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or \
                    not 1 <= value <= 1 << 24:
                raise SpecError(f"config.json:{name}", f"{model_id}: must be an integer from 1 to {1 << 24:,}, "
                                f"got {value!r}", "a Hugging Face config.json")
            return int(value)
    if default is None:
        raise SpecError(f"config.json:{names[0]}", f"{model_id}: missing field {names[0]!r}, needed for its "
                        "state layers", "a config.json of a hybrid model")
    return default


def _hybrid(cfg: dict, model_type: str, n_layers: int, model_id: str
            ) -> tuple[tuple[MixerKind, ...], tuple[StateLayer, ...], tuple[int, ...] | None]:
    """(the mixer of every layer, one StateLayer per state mixer, the layers with an MLP or None for all)."""
    hidden = int(cfg["hidden_size"])
    mixers: list[MixerKind]
    mlp_layers: tuple[int, ...] | None = None
    kinds = cfg.get("layer_types") or cfg.get("layers_block_type")
    if model_type.startswith(("qwen3_next", "qwen3_5")):
        if isinstance(kinds, list):
            mixers = ["state" if k in STATE_LAYER_TYPES else "attention" for k in kinds]
        else:
            interval = _int(cfg, model_id, "full_attention_interval", default=4)
            mixers = ["attention" if (i + 1) % interval == 0 else "state" for i in range(n_layers)]
        state = StateLayer("gated_delta_net", conv_kernel=_int(cfg, model_id, "linear_conv_kernel_dim", default=4),
                           state_dim=_int(cfg, model_id, "linear_key_head_dim"),
                           heads=_int(cfg, model_id, "linear_num_value_heads"),
                           head_dim=_int(cfg, model_id, "linear_value_head_dim"),
                           groups=_int(cfg, model_id, "linear_num_key_heads"),
                           ssm_dtype=_dtype_name(cfg.get("mamba_ssm_dtype")))
    elif model_type == "nemotron_h":
        pattern = str(cfg.get("hybrid_override_pattern") or "")
        if len(pattern) != n_layers:
            raise SpecError("config.json:hybrid_override_pattern", f"{model_id}: {len(pattern)} layer kinds for "
                            f"{n_layers} layers", "one of M, *, -, E per layer")
        mixers = [_PATTERN[c] for c in pattern]  # type: ignore[misc]
        mlp_layers = tuple(i for i, c in enumerate(pattern) if c in "-E")  # an MLP (-) or an MoE (E) block
        heads = _int(cfg, model_id, "mamba_num_heads")
        head_dim = _int(cfg, model_id, "mamba_head_dim")
        state = StateLayer("mamba2", conv_kernel=_int(cfg, model_id, "conv_kernel"),  # _nemotron_defaults
                           state_dim=_int(cfg, model_id, "ssm_state_size"), heads=heads, head_dim=head_dim,
                           groups=_int(cfg, model_id, "n_groups"), intermediate=heads * head_dim,
                           conv_bias=bool(cfg.get("use_conv_bias", True)), proj_bias=bool(cfg.get("use_bias", False)),
                           ssm_dtype=_nemotron_ssm_dtype(cfg, model_id))
    elif model_type in ("granitemoehybrid", "falcon_h1"):
        if model_type == "falcon_h1":  # parallel hybrid: attention and mamba2 side by side in every layer
            mixers = ["both"] * n_layers
        elif isinstance(kinds, list):
            mixers = ["state" if k in STATE_LAYER_TYPES else "attention" for k in kinds]
        else:
            raise SpecError("config.json:layer_types", f"{model_id}: no layer_types", "mamba / attention per layer")
        heads = _int(cfg, model_id, "mamba_n_heads")
        head_dim = _int(cfg, model_id, "mamba_d_head")
        intermediate = _int(cfg, model_id, "mamba_d_ssm", default=_int(cfg, model_id, "mamba_expand", default=2) * hidden)
        state = StateLayer("mamba2", conv_kernel=_int(cfg, model_id, "mamba_d_conv", default=4),
                           state_dim=_int(cfg, model_id, "mamba_d_state"), heads=heads, head_dim=head_dim,
                           groups=_int(cfg, model_id, "mamba_n_groups", default=1), intermediate=intermediate,
                           conv_bias=bool(cfg.get("mamba_conv_bias", True)),
                           proj_bias=bool(cfg.get("mamba_proj_bias", False)))
    elif model_type == "jamba":
        period = _int(cfg, model_id, "attn_layer_period", default=8)
        offset = int(cfg.get("attn_layer_offset") or 0)
        mixers = ["attention" if i % period == offset else "state" for i in range(n_layers)]
        intermediate = _int(cfg, model_id, "mamba_expand", default=2) * hidden
        state = StateLayer("mamba1", conv_kernel=_int(cfg, model_id, "mamba_d_conv", default=4),
                           state_dim=_int(cfg, model_id, "mamba_d_state", default=16), intermediate=intermediate,
                           dt_rank=_int(cfg, model_id, "mamba_dt_rank", default=-(-hidden // 16)),
                           conv_bias=bool(cfg.get("mamba_conv_bias", True)),
                           proj_bias=bool(cfg.get("mamba_proj_bias", False)))
    else:
        return (), (), None
    if len(mixers) != n_layers:
        raise SpecError("config.json:layer_types", f"{model_id}: {len(mixers)} layer kinds for {n_layers} layers",
                        "one kind per layer")
    count = sum(1 for m in mixers if m in ("state", "both"))
    return tuple(mixers), (state,) * count, mlp_layers


def _dtype_name(raw) -> str | None:
    return DTYPE_ALIASES.get(str(raw).replace("torch.", "").lower()) if raw else None


def _layers(cfg: dict, model_type: str, n_layers: int, kv_heads: int, head_dim: int, mla: MLASpec | None,
            mixers: tuple[MixerKind, ...] = (), model_id: str = "config.json"):
    if mixers:  # a hybrid: its attention layers (full attention) only; the state layers are kept apart
        count = sum(1 for m in mixers if m in ("attention", "both"))
        return tuple(AttentionLayer("full", num_kv_heads=kv_heads, head_dim=head_dim) for _ in range(count))
    if mla is not None:
        width = mla.kv_lora_rank + mla.qk_rope_head_dim
        heads, dim, topk = _indexer(cfg, model_id)  # DeepSeek-V3.2's sparse-attention indexer, zeros without one
        return tuple(AttentionLayer("mla", mla_width=width, indexer_heads=heads, indexer_head_dim=dim,
                                    indexer_topk=topk) for _ in range(n_layers))
    window = cfg.get("sliding_window")
    kinds: list[tuple[AttentionKind, int | None]]
    if isinstance(cfg.get("layer_types"), list):
        names = cfg["layer_types"]
        kinds = [("sliding", window) if "sliding" in t else ("chunked", cfg.get("attention_chunk_size"))
                 if "chunk" in t else ("full", None) for t in names]
    elif model_type == "gemma2" and window:
        kinds = [("sliding", window) if i % 2 == 0 else ("full", None) for i in range(n_layers)]
    elif model_type.startswith("gemma3") and window:
        pattern = int(cfg.get("sliding_window_pattern") or 6)
        kinds = [("full", None) if (i + 1) % pattern == 0 else ("sliding", window) for i in range(n_layers)]
    elif model_type.startswith("llama4") and cfg.get("attention_chunk_size"):
        # the NoPE layers attend globally, the rope layers within a chunk (vLLM llama4.py Llama4Attention:
        # nope = no_rope_layers[layer] == 0; use_chunked_local_attn = not nope and attention_chunk_size); without the
        # list, transformers' Llama4TextConfig makes every no_rope_layer_interval-th (4th) layer a NoPE one
        flags = cfg.get("no_rope_layers")
        given = cfg.get("no_rope_layer_interval")
        interval = given if isinstance(given, int) and _whole(given) else 4
        nope = [flag == 0 for flag in flags] if isinstance(flags, list) and len(flags) == n_layers else \
            [(i + 1) % interval == 0 for i in range(n_layers)]
        kinds = [("full", None) if nope[i] else ("chunked", cfg["attention_chunk_size"]) for i in range(n_layers)]
    elif window and model_type in ("mistral", "mixtral", "phi3") and cfg.get("use_sliding_window", True):
        kinds = [("sliding", window)] * n_layers
    else:
        kinds = [("full", None)] * n_layers
    return tuple(AttentionLayer(kind, num_kv_heads=kv_heads, head_dim=head_dim, window=w) for kind, w in kinds)


def _indexer(cfg: dict, model_id: str) -> tuple[int, int, int]:
    """(index_n_heads, index_head_dim, index_topk) of a DeepSeek-V3.2 sparse-attention indexer; zeros without one."""
    if cfg.get("index_topk") is None:
        return 0, 0, 0
    freq, pattern = cfg.get("index_topk_freq"), cfg.get("index_topk_pattern")
    if freq not in (None, 1) or pattern is not None:
        # vLLM 0.32's DeepseekV32Attention builds no indexer (and so no indexer cache) in the layers it skips
        # (skip_topk: max(layer - index_skip_topk_offset + 1, 0) % index_topk_freq != 0, or an "S" in
        # index_topk_pattern; GLM-5.2: index_topk_freq 4, a full indexer in 20 of 78 layers), which splits the layers
        # into two KV-cache page sizes whose grouping specsize does not model
        raise _unmodelled("index_topk_freq", model_id, f"a sparse-attention indexer in only some layers "
                          f"(index_topk_freq {freq!r}, index_topk_pattern {pattern!r})",
                          "an indexer in every layer (index_topk_freq 1 or unset, no index_topk_pattern)")
    for key in INDEXER_KEYS:
        if not _whole(cfg.get(key)):
            raise SpecError(f"config.json:{key}", f"{model_id}: {key} comes to {cfg.get(key)!r}",
                            "a positive integer (DeepSeek-V3.2's sparse-attention indexer)")
    return int(cfg["index_n_heads"]), int(cfg["index_head_dim"]), int(cfg["index_topk"])


def expert_count(cfg: dict):
    """The routed experts a config.json declares, under whichever name its model type uses (None or 0: dense)."""
    return cfg.get("num_local_experts") or cfg.get("n_routed_experts") or cfg.get("num_experts")


def _moe(cfg: dict, model_type: str, n_layers: int, model_id: str) -> MoESpec | None:
    experts = expert_count(cfg)
    if not experts or int(experts) <= 1:
        return None
    top_k = int(cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or cfg.get("moe_topk") or 2)
    inter = int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"])
    shared = int(cfg.get("n_shared_experts") or 0)
    shared_inter = int(cfg.get("moe_intermediate_size") or 0) if shared else 0
    if cfg.get("shared_expert_intermediate_size"):  # Qwen2-MoE
        shared, shared_inter = 1, int(cfg["shared_expert_intermediate_size"])
    if model_type == "granitemoehybrid":  # a shared MLP next to the experts in every layer
        shared, shared_inter = 1, int(cfg.get("shared_intermediate_size") or 0)
    if model_type == "nemotron_h":
        return _nemotron_moe(cfg, int(experts), top_k, inter, model_id)
    if model_type == "jamba":
        period = _int(cfg, model_id, "expert_layer_period", default=2)
        offset = int(cfg.get("expert_layer_offset") or 0)
        layers = tuple(i for i in range(n_layers) if i % period == offset)
    elif model_type.startswith("llama4"):
        shared, shared_inter = 1, inter
        step = _int(cfg, model_id, "interleave_moe_layer_step", default=1)
        layers = tuple(i for i in range(n_layers) if (i + 1) % step == 0)
    elif deepseek_like(model_type) or model_type in FIRST_K_DENSE_TYPES:
        first_dense = int(cfg.get("first_k_dense_replace") or 0)
        freq = _int(cfg, model_id, "moe_layer_freq", default=1)
        layers = tuple(i for i in range(first_dense, n_layers) if i % freq == 0)
    elif cfg.get("decoder_sparse_step") or cfg.get("mlp_only_layers"):
        step = _int(cfg, model_id, "decoder_sparse_step", default=1)
        dense = cfg.get("mlp_only_layers") or []
        if not (isinstance(dense, list) and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_layers
                                                for i in dense)):
            raise SpecError("config.json:mlp_only_layers", f"{model_id}: mlp_only_layers {dense!r}",
                            f"a list of layer indices from 0 to {n_layers - 1}")
        layers = tuple(i for i in range(n_layers) if i not in dense and (i + 1) % step == 0)
    else:
        layers = tuple(range(n_layers))
    return MoESpec(num_experts=int(experts), experts_per_token=top_k, expert_intermediate_size=inter,
                   num_shared_experts=shared, shared_intermediate_size=shared_inter, moe_layers=layers,
                   expert_bias=model_type == "gpt_oss", router_bias=model_type in ROUTER_BIAS_TYPES,
                   router_fp32=model_type in FLOAT32_ROUTER_TYPES)


NEMOTRON_SHARED_DEFAULT = 7688  # transformers' NemotronHConfig moe_shared_expert_intermediate_size default


def _nemotron_moe(cfg: dict, experts: int, top_k: int, inter: int, model_id: str) -> MoESpec | None:
    """Nemotron-3's MoE layers (the pattern's E), as vLLM 0.32's nemotron_h.py NemotronHMoE builds each: a GateLinear
    router (hidden -> n_routed_experts, no quant_config: the model dtype on Hopper and Blackwell, whose router kernels
    take force_fp32_compute; float32 only where none applies) and its float32 e_score_correction_bias; the routed
    experts a FusedMoE of moe_intermediate_size, not gated (activation_without_mul(relu2): w13 is up_proj alone, the
    "is_non_gated_moe" of NemotronHForCausalLM), over hidden_size or, with moe_latent_size, over that latent width
    between fc1_latent_proj (hidden -> latent) and fc2_latent_proj (latent -> hidden), both ReplicatedLinear; the
    shared experts one NemotronHMLP (up_proj column-parallel, down_proj row-parallel, squared ReLU) of
    moe_shared_expert_intermediate_size x n_shared_experts over hidden_size. None where the pattern has no E."""
    pattern = str(cfg.get("hybrid_override_pattern") or "")
    layers = tuple(i for i, c in enumerate(pattern) if c == "E")
    if not layers:
        return None  # a dense Nemotron-H: vLLM builds no MoE whatever n_routed_experts says (has_moe: "E" in pattern)
    shared = int(cfg.get("n_shared_experts") or 0)
    shared_inter = _int(cfg, model_id, "moe_shared_expert_intermediate_size",
                        default=NEMOTRON_SHARED_DEFAULT) if shared else 0
    spec = MoESpec(num_experts=experts, experts_per_token=top_k, expert_intermediate_size=inter,
                   num_shared_experts=shared, shared_intermediate_size=shared_inter, moe_layers=layers,
                   router_bias=True, router_fp32=False)
    latent = cfg.get("moe_latent_size")
    if latent is None:
        return spec
    return LatentMoESpec(**{f.name: getattr(spec, f.name) for f in fields(spec)},
                         latent_size=_int(cfg, model_id, "moe_latent_size"), latent_bias=bool(cfg.get("mlp_bias")))


# the routers with a float32 score-correction bias per expert as vLLM builds them: DeepSeek-V3's noaux_tc (V3.2's,
# Kimi K2's), GLM-4.5's, gpt-oss's, MiniMax-M2's (MiniMaxM2MoE's float32 e_score_correction_bias, built when
# use_routing_bias, as every published MiniMax-M2 config sets it)
ROUTER_BIAS_TYPES = ("deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "minimax_m2", "gpt_oss", "glm_moe_dsa")
# the routers whose weight itself is float32: glm4_moe.py Glm4MoE (nn.Linear(hidden, n_routed_experts,
# dtype=torch.float32)), minimax_m2.py MiniMaxM2MoE.gate (a ReplicatedLinear, params_dtype=torch.float32)
FLOAT32_ROUTER_TYPES = ("glm4_moe", "minimax_m2")


QWEN2_VL_MAX_PIXELS = 12845056  # Qwen2-VL image processor default max_pixels (preprocessor_config.json)
LLAMA4_MAX_TILES = 16  # Llama 4 processor default max_patches; one global tile is added to them
# Qwen3-VL's and Qwen3.5's image processor default size.longest_edge (preprocessor_config.json: {"longest_edge":
# 16777216, "shortest_edge": 65536}, patch_size 16, merge_size 2: 4096 x 4096 pixels), the max_pixels vLLM reads
QWEN3_VL_MAX_PIXELS = 16_777_216
# the configs whose vision_config is Qwen3-VL's tower: vLLM 0.32 qwen3_vl.py (Qwen3-VL), qwen3_vl_moe.py and
# qwen3_5.py (Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration) all build Qwen3_VisionTransformer
QWEN3_VL_TOWERS = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")


def _vision_int(vc: dict, key: str, model_id: str, default: int | None = None) -> int:
    value = vc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 24:
        raise SpecError(f"config.json:vision_config.{key}", f"{model_id}: must be an integer from 1 to {1 << 24:,}, "
                        f"got {value!r}", "a Hugging Face config.json")
    return value


def _rotary_caches(cfg: dict, max_positions: int) -> tuple[int, ...]:
    """Positions of each distinct cos/sin cache vLLM builds (one buffer per distinct get_rope key; empty: the one
    max_position_embeddings cache). vllm/model_executor/layers/rotary_embedding/__init__.py get_rope builds a linear
    or a dynamic-NTK rope over max_position_embeddings x factor positions (linear_scaling_rope.py,
    dynamic_ntk_scaling_rope.py: "max_len = self.max_position_embeddings * self.scaling_factor") and a YaRN rope over
    original_max_position_embeddings x factor (yarn_scaling_rope.py, deepseek_scaling_rope.py; Qwen3 with YaRN 4x:
    32,768 x 4 = 131,072 positions, not the config's 40,960); the other kinds (llama3, longrope, mrope, default) the
    max_position_embeddings. Gemma-3's sliding layers get their own unscaled rope at rope_local_base_freq
    (models/gemma3.py: one get_rope per layer type), as do transformers v5 configs' per-layer-type rope_parameters."""
    def positions(scaling: object) -> int:
        if not isinstance(scaling, dict):
            return max_positions
        kind = scaling.get("rope_type") or scaling.get("type")
        raw = scaling.get("factor")
        if not (isinstance(raw, (int, float)) and _real(raw) and raw > 0) or "mrope_section" in scaling:
            return max_positions
        factor = float(raw)
        if kind == "linear" or (kind == "dynamic" and "alpha" not in scaling):
            return math.ceil(max_positions * factor)
        if kind == "yarn":
            original = scaling.get("original_max_position_embeddings")
            return math.ceil((original if isinstance(original, int) and _whole(original) else max_positions) * factor)
        return max_positions

    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(rope, dict) and rope and all(isinstance(v, dict) for v in rope.values()):
        caches = tuple(positions(v) for v in rope.values())  # transformers v5: one rope per layer type
    else:
        caches = (positions(rope),)
        if cfg.get("rope_local_base_freq"):
            caches = (caches[0], max_positions)
    return () if caches == (max_positions,) else caches


# the config keys vLLM reads a model's length from, the smallest one present counting (model_max_length overrides)
_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")


def derived_max_model_len(cfg: dict, model_id: str) -> int | None:
    """The longest max_model_len vLLM accepts for this (text) config, and its default, where it is not
    max_position_embeddings; None where it is. As vLLM's _get_and_verify_max_len (vllm/config/model.py): the
    smallest of its length keys (model_max_length wins where set), times rope_scaling's factor for rope types
    other than su / longrope / llama3 (a yarn rope from its original_max_position_embeddings; mrope keeps 1), not
    for Gemma 3, whose max_position_embeddings is already scaled. A rope_scaling without a type is left unscaled."""
    def length(key: str) -> int | None:
        value = cfg.get(key)
        if isinstance(value, (int, float)) and _real(value) and float(value).is_integer() and value >= 1:
            return int(value)
        return None

    lengths = [n for n in map(length, _LENGTH_KEYS) if n is not None]
    if not lengths:
        return None
    derived = length("model_max_length") or min(lengths)
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    scalings = list(rope.values()) if isinstance(rope, dict) and rope and all(
        isinstance(v, dict) for v in rope.values()) else [rope]  # transformers v5: one per layer type
    factor = 1.0
    if "gemma3" not in str(cfg.get("model_type") or ""):
        for scaling in scalings:
            if not isinstance(scaling, dict):
                continue
            kind = scaling.get("rope_type") or scaling.get("type")
            if kind in (None, "su", "longrope", "llama3", "default") or "mrope_section" in scaling:
                continue
            value = scaling.get("factor", factor)
            if not (_real(value) and value > 0):
                raise SpecError("config.json:rope_scaling.factor", f"{model_id}: must be a positive number, got "
                                f"{value!r}", "a number > 0")
            factor = float(value)
            if kind == "yarn" and "original_max_position_embeddings" in scaling:
                original = scaling["original_max_position_embeddings"]
                if not _whole(original) or original > MAX_ROTARY_POSITIONS:
                    raise SpecError("config.json:rope_scaling.original_max_position_embeddings",
                                    f"{model_id}: must be an integer from 1 to {MAX_ROTARY_POSITIONS:,}, got {original!r}",
                                    "a Hugging Face config.json")
                derived = original
    if not 1 <= derived * factor <= MAX_ROTARY_POSITIONS:
        raise SpecError("config.json:rope_scaling.factor", f"{model_id}: gives a context of {derived * factor:g} "
                        "tokens", f"a factor giving 1 to {MAX_ROTARY_POSITIONS:,} tokens")
    limit = int(derived * factor)
    return None if limit == length("max_position_embeddings") else limit


def _vision(raw: dict, model_id: str) -> VisionSpec | None:
    """The vision tower of a multimodal config (its vision_config section), or None for a text-only one.

    Tokens per image are the most a single image becomes in vLLM's processor for the family (what its
    profiling pass reserves): Gemma 3 mm_tokens_per_image (pan-and-scan off, vLLM's default); Llama 4
    (max_patches + 1 global tile) x (image_size/patch)^2 x pixel_shuffle_ratio^2; Pixtral (Mistral 3)
    rows x (columns + 1 [IMG_BREAK]/[IMG_END]) of (image_size / patch / spatial_merge) patches a side;
    Qwen2.5-VL max_pixels / (patch x merge)^2; Qwen3-VL and Qwen3.5 the same from their own max_pixels
    (_qwen3_vl_tower).
    """
    vc = raw.get("vision_config")
    if not isinstance(vc, dict):
        return None
    model_type = str(raw.get("model_type") or "")
    vtype = str(vc.get("model_type") or "")
    if model_type == "gemma3" or vtype.startswith("siglip"):
        p, size = _vision_int(vc, "patch_size", model_id), _vision_int(vc, "image_size", model_id)
        return VisionSpec("siglip", _vision_int(vc, "hidden_size", model_id), _vision_int(vc, "intermediate_size", model_id),
                          _vision_int(vc, "num_hidden_layers", model_id), _vision_int(vc, "num_attention_heads", model_id),
                          p, size, tokens_per_image=_vision_int(raw, "mm_tokens_per_image", model_id, 256),
                          patches_per_image=(size // p) ** 2, source="config mm_tokens_per_image")
    if model_type == "llama4":
        p, size = _vision_int(vc, "patch_size", model_id), _vision_int(vc, "image_size", model_id)
        ratio = float(vc.get("pixel_shuffle_ratio") or 0.5)
        per_tile = int((size // p) ** 2 * ratio * ratio)
        tiles = LLAMA4_MAX_TILES + 1
        return VisionSpec("llama4", _vision_int(vc, "hidden_size", model_id), _vision_int(vc, "intermediate_size", model_id),
                          _vision_int(vc, "num_hidden_layers", model_id), _vision_int(vc, "num_attention_heads", model_id),
                          p, size, tokens_per_image=tiles * per_tile, patches_per_image=tiles * (size // p) ** 2,
                          projector_input=_vision_int(vc, "projector_input_dim", model_id),
                          projector_output=_vision_int(vc, "vision_output_dim", model_id),
                          source=f"{tiles} tiles x {per_tile} tokens (max_patches {LLAMA4_MAX_TILES} + 1 global)")
    if model_type == "mistral3" or vtype == "pixtral":
        p, size = _vision_int(vc, "patch_size", model_id), _vision_int(vc, "image_size", model_id)
        merge = int(raw.get("spatial_merge_size") or 1)
        side = size // p // merge
        return VisionSpec("pixtral", _vision_int(vc, "hidden_size", model_id), _vision_int(vc, "intermediate_size", model_id),
                          _vision_int(vc, "num_hidden_layers", model_id), _vision_int(vc, "num_attention_heads", model_id),
                          p, size, tokens_per_image=side * (side + 1), patches_per_image=(size // p) ** 2,
                          source=f"{side} rows x ({side} + 1) tokens")
    if model_type in ("qwen2_5_vl", "qwen2_vl"):
        p = _vision_int(vc, "patch_size", model_id, 14)
        if model_type == "qwen2_vl":  # a ViT of embed_dim x mlp_ratio: its hidden_size is the projector's output
            return _qwen2_vl_tower(vc, p, model_id)
        merge = _vision_int(vc, "spatial_merge_size", model_id, 2)
        tokens = QWEN2_VL_MAX_PIXELS // (p * merge) ** 2
        side = math.isqrt(tokens * merge * merge)
        return VisionSpec("qwen2_5_vl", _vision_int(vc, "hidden_size", model_id), _vision_int(vc, "intermediate_size", model_id),
                          _vision_int(vc, "depth", model_id), _vision_int(vc, "num_heads", model_id), p, side * p,
                          tokens_per_image=tokens, patches_per_image=tokens * merge * merge,
                          temporal_patch_size=_vision_int(vc, "temporal_patch_size", model_id, 2),
                          source=f"max_pixels {QWEN2_VL_MAX_PIXELS} / ({p} x {merge})^2")
    if vtype in QWEN3_VL_TOWERS or model_type in QWEN3_VL_TOWERS:
        return _qwen3_vl_tower(vc, model_id)
    raise SpecError("config.json:vision_config", f"{model_id}: vision tower {vtype or model_type!r} is not modelled",
                    "the vision towers of gemma3, llama4, mistral3 (pixtral), qwen2_vl, qwen2_5_vl, qwen3_vl, "
                    "qwen3_vl_moe, qwen3_5, qwen3_5_moe")


def _qwen_vl_largest_grid(max_pixels: int, unit: int) -> tuple[int, int]:
    """(rows, columns) of merged tokens in the image vLLM profiles as the largest: Qwen2VLProcessingInfo.
    get_image_size_with_most_features (vllm 0.32 qwen2_vl.py, inherited by Qwen3VLProcessingInfo) factors
    max_pixels // unit^2 tokens into the closest pair whose aspect ratio is at most 200, one token fewer until one
    is; smart_resize then keeps that image (its area is at most max_pixels), so its tokens are rows x columns
    (Qwen3VLProcessingInfo._get_vision_info: grid_t 1 for an image, patches // merge^2)."""
    for tokens in range(max_pixels // (unit * unit), 0, -1):
        rows = next(d for d in range(math.isqrt(tokens), 0, -1) if tokens % d == 0)
        if tokens // rows <= 200 * rows:
            return rows, tokens // rows
    return 0, 0


def _qwen3_vl_tower(vc: dict, model_id: str) -> VisionSpec:
    """Qwen3-VL's vision tower, which Qwen3.5 / Qwen3.6 reuse (vllm 0.32 qwen3_5.py builds qwen3_vl.py's
    Qwen3_VisionTransformer): see core.weights.vision_params for its layout. Images: the largest is 4096 x 4096 px
    (QWEN3_VL_MAX_PIXELS), 16,384 tokens of 2 x 2 merged 16-px patches; vLLM profiles images, not videos, with it
    (vllm/multimodal/encoder_budget.py get_modality_with_max_tokens: Qwen3VLProcessingInfo.get_max_video_tokens
    is 12,288 for the published video processor's longest_edge 25,165,824 / temporal_patch_size 2)."""
    p = _vision_int(vc, "patch_size", model_id, 16)
    merge = _vision_int(vc, "spatial_merge_size", model_id, 2)
    hidden, heads = _vision_int(vc, "hidden_size", model_id), _vision_int(vc, "num_heads", model_id)
    depth = _vision_int(vc, "depth", model_id)
    if hidden % heads:
        raise SpecError("config.json:vision_config.num_heads", f"{model_id}: must divide hidden_size ({hidden}), "
                        f"got {heads}", "a divisor of vision_config.hidden_size (16 of 1152 in Qwen3.5)")
    deepstack = vc.get("deepstack_visual_indexes") or []
    if not (isinstance(deepstack, list) and all(_whole(i, 0) and i < depth for i in deepstack)):
        raise SpecError("config.json:vision_config.deepstack_visual_indexes", f"{model_id}: must be a list of "
                        f"block indices below depth ({depth}), got {deepstack!r}", "a list such as [8, 16, 24] or []")
    rows, columns = _qwen_vl_largest_grid(QWEN3_VL_MAX_PIXELS, p * merge)
    if not rows:
        raise SpecError("config.json:vision_config.patch_size", f"{model_id}: a {p} x {merge} merged patch is larger "
                        f"than the largest image ({QWEN3_VL_MAX_PIXELS:,} px)", "16 (with spatial_merge_size 2)")
    tokens = rows * columns
    return VisionSpec("qwen3_vl", hidden, _vision_int(vc, "intermediate_size", model_id), depth, heads, p,
                      columns * merge * p, tokens_per_image=tokens, patches_per_image=tokens * merge * merge,
                      projector_output=_vision_int(vc, "out_hidden_size", model_id),
                      num_channels=_vision_int(vc, "in_channels", model_id, 3),
                      temporal_patch_size=_vision_int(vc, "temporal_patch_size", model_id, 2),
                      spatial_merge_size=merge,
                      position_embeddings=_vision_int(vc, "num_position_embeddings", model_id, 2304),
                      deepstack_mergers=len(deepstack),
                      source=f"max_pixels {QWEN3_VL_MAX_PIXELS} / ({p} x {merge})^2")


def _qwen2_vl_tower(vc: dict, p: int, model_id: str) -> VisionSpec:
    """Qwen2-VL's vision tower (vllm/model_executor/models/qwen2_vl.py, Qwen2VisionTransformer): blocks of width
    vision_config.embed_dim whose fc1 -> QuickGELU -> fc2 MLP is int(embed_dim x mlp_ratio) wide (the config has no
    intermediate_size; its hidden_size is the language model's, what the patch merger projects to). Images as
    Qwen2.5-VL's: max_pixels / (patch x merge)^2 tokens."""
    merge = _vision_int(vc, "spatial_merge_size", model_id, 2)
    embed = _vision_int(vc, "embed_dim", model_id, 1280)
    ratio = vc.get("mlp_ratio", 4)
    if not (_real(ratio) and 0 < ratio <= 1 << 10 and int(embed * ratio) >= 1):
        raise SpecError("config.json:vision_config.mlp_ratio", f"{model_id}: must be a positive number, got {ratio!r}",
                        "a number > 0 (4 in the published Qwen2-VL configs)")
    tokens = QWEN2_VL_MAX_PIXELS // (p * merge) ** 2
    side = math.isqrt(tokens * merge * merge)
    return VisionSpec("qwen2_vl", embed, int(embed * ratio), _vision_int(vc, "depth", model_id),
                      _vision_int(vc, "num_heads", model_id), p, side * p, tokens_per_image=tokens,
                      patches_per_image=tokens * merge * merge,
                      num_channels=_vision_int(vc, "in_chans", model_id, 3),
                      temporal_patch_size=_vision_int(vc, "temporal_patch_size", model_id, 2),
                      source=f"max_pixels {QWEN2_VL_MAX_PIXELS} / ({p} x {merge})^2")


def spec_from_config(raw: dict[str, Any], model_id: str, source: str, *, params_published: str | None = None,
                     weight_bytes_exact: int | None = None) -> ModelSpec:
    """Build a ModelSpec from a config.json dict; raises SpecError naming the first missing or malformed field.
    A field of a type or value the checks above do not foresee still ends in a one-line error, never a traceback."""
    try:
        spec = _build_spec(raw, model_id, source, params_published=params_published,
                           weight_bytes_exact=weight_bytes_exact)
    except SpecError:  # a check's own error names its field (a SpecError is a ValueError: not re-wrapped)
        raise
    except KeyError as err:
        key = str(err.args[0]) if err.args else "?"
        raise SpecError(f"config.json:{key}", f"{model_id}: {key} is missing",
                        "a Hugging Face config.json with the fields its model_type needs") from None
    except (TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError,
            RecursionError) as err:
        raise SpecError("config.json", f"{model_id}: a field has a value of the wrong type or size "
                        f"({type(err).__name__}: {err})", "a Hugging Face config.json") from None
    _check_spec(spec, model_id)
    return spec


def _bad(model_id: str, name: str, value: object, accepted: str) -> SpecError:
    return SpecError(f"config.json:{name}", f"{model_id}: {name} comes to {value!r}", accepted)


def _check_spec(m: ModelSpec, model_id: str) -> None:
    """The built model's sizes, whichever config fields they came from: each a positive integer where it must be
    (a negative size would plan as a fit), an integer where one is counted, and one attention layer at least."""
    if m.num_layers and not m.layers:  # (Medusa heads have no layers at all: medusa_heads)
        raise SpecError("config.json:layer_types", f"{model_id}: the model has no attention layer (a KV cache of "
                        "no size), which specsize does not model", "a model with at least one attention layer")
    for name, value in (("head_dim", m.head_dim), ("num_key_value_heads", m.num_kv_heads),
                        ("intermediate_size", m.intermediate_size)):
        if not _whole(value):
            raise _bad(model_id, name, value, "a positive integer")
    for name, value in (("partial_rotary_factor", m.rotary_dim), ("num_nextn_predict_layers", m.num_mtp_layers)):
        if not _whole(value, 0):
            raise _bad(model_id, name, value, "a non-negative integer")
    if any(not _whole(n) or n > MAX_ROTARY_POSITIONS for n in m.rotary_cache_positions):
        raise _bad(model_id, "rope_scaling.factor", m.rotary_cache_positions,
                   f"a factor giving 1 to {MAX_ROTARY_POSITIONS:,} positions")
    for layer in m.layers:
        if layer.window is not None and not _whole(layer.window):
            raise _bad(model_id, "sliding_window", layer.window, "a positive integer (tokens)")
    if m.draft_vocab_size is not None and not 1 <= m.draft_vocab_size <= m.vocab_size:
        raise _bad(model_id, "draft_vocab_size", m.draft_vocab_size, f"1 to vocab_size ({m.vocab_size:,})")
    q = m.quantization
    if q is not None and q.group_size is not None and not _whole(q.group_size):
        raise _bad(model_id, "quantization_config.group_size", q.group_size, "a positive integer (or -1: per channel)")
    if m.final_logit_softcapping is not None and not (_real(m.final_logit_softcapping)
                                                     and m.final_logit_softcapping > 0):
        raise _bad(model_id, "final_logit_softcapping", m.final_logit_softcapping, "a positive number or null")
    _check_parts(m, model_id)


def _check_parts(m: ModelSpec, model_id: str) -> None:
    """_check_spec's MoE and vision-tower sizes."""
    if m.moe is not None:
        e = m.moe
        if not (_whole(e.num_experts) and _whole(e.experts_per_token) and e.experts_per_token <= e.num_experts):
            raise _bad(model_id, "num_experts_per_tok", e.experts_per_token, f"an integer from 1 to {e.num_experts}")
        if not (_whole(e.expert_intermediate_size) and _whole(e.shared_intermediate_size, 0)
                and _whole(e.num_shared_experts, 0)):
            raise _bad(model_id, "moe_intermediate_size", e.expert_intermediate_size, "positive integers")
        if any(not _whole(i, 0) or i >= m.num_layers for i in e.moe_layers):
            raise _bad(model_id, "mlp_only_layers", e.moe_layers, f"layer indices from 0 to {m.num_layers - 1}")
    v = m.vision
    if v is not None:
        if _whole(v.patch_size) and _whole(v.image_size) and v.patch_size > v.image_size:
            raise _bad(model_id, "vision_config.patch_size", v.patch_size, f"at most image_size ({v.image_size})")
        for name in ("hidden_size", "num_layers", "patch_size", "image_size", "tokens_per_image", "patches_per_image"):
            if not _whole(getattr(v, name)):
                raise _bad(model_id, f"vision_config.{name}", getattr(v, name), "a positive integer")


def _build_spec(raw: dict[str, Any], model_id: str, source: str, *, params_published: str | None,
                weight_bytes_exact: int | None) -> ModelSpec:
    if not isinstance(raw, dict):
        raise SpecError("config.json", f"{model_id}: expected a JSON object", "a Hugging Face config.json")
    cfg = _nemotron_pattern(_text_config(raw), model_id)
    if "medusa_num_heads" in cfg and "num_hidden_layers" not in cfg:  # a Medusa head's own config.json
        return medusa_heads(_medusa_field(cfg, "hidden_size", model_id), _medusa_field(cfg, "vocab_size", model_id),
                            _medusa_field(cfg, "medusa_num_heads", model_id), model_id, source,
                            str(cfg.get("torch_dtype") or "bfloat16"))
    for name in REQUIRED:
        if cfg.get(name) in (None, ""):
            raise SpecError(f"config.json:{name}", f"{model_id}: missing field {name!r}",
                            "a config.json with " + ", ".join(REQUIRED))
    check_config(cfg, model_id)
    check_modelled(cfg if cfg.get("model_type") else raw, model_id)
    _check_mla_family(cfg, model_id)
    archs = [str(a) for a in raw.get("architectures") or []]
    model_type = str(cfg.get("model_type") or raw.get("model_type") or "llama")
    hidden = int(cfg["hidden_size"])
    n_layers = int(cfg["num_hidden_layers"])
    heads = int(cfg["num_attention_heads"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or cfg.get("attention_head_dim") or hidden // heads)
    experts = expert_count(cfg)
    if cfg.get("intermediate_size_mlp") is None and cfg.get("intermediate_size") is None and \
            not (isinstance(experts, int) and experts > 1):
        # a dense model's MLP width: no default to take (transformers' classes default it per model type -
        # LlamaConfig 11,008, not 4 x hidden - and an explicit null reaches vLLM's model as None); 4 x hidden had been
        # planned silently. An MoE config may leave it out: its experts take moe_intermediate_size
        raise SpecError("config.json:intermediate_size", f"{model_id}: missing or null", "the MLP's width, as the "
                        "published config.json gives it")
    intermediate = int(cfg.get("intermediate_size_mlp") or cfg.get("intermediate_size") or 4 * hidden)
    mixers, state_layers, mlp_layers = _hybrid(cfg, model_type, n_layers, model_id)
    if model_type == "granitemoehybrid" and not (cfg.get("num_local_experts") or 0) > 1:
        intermediate = int(cfg.get("shared_intermediate_size") or intermediate)  # dense Granite-4.0-H: the shared MLP
    mla = None
    if cfg.get("kv_lora_rank") and deepseek_like(model_type):  # MLA: vLLM's other types ignore the fields
        mla = MLASpec(q_lora_rank=cfg.get("q_lora_rank"), kv_lora_rank=int(cfg["kv_lora_rank"]),
                      qk_nope_head_dim=int(cfg["qk_nope_head_dim"]), qk_rope_head_dim=int(cfg["qk_rope_head_dim"]),
                      v_head_dim=int(cfg["v_head_dim"]))
    moe = _moe(cfg, model_type, n_layers, model_id)
    # GLM-4.5's attention rotates half of each head unless its config says otherwise (glm4_moe.py Glm4MoeAttention:
    # rope_parameters.setdefault("partial_rotary_factor", 0.5))
    factor = cfg.get("partial_rotary_factor") or (0.5 if model_type in FIRST_K_DENSE_TYPES else 1.0)
    rotary = mla.qk_rope_head_dim if mla else int(head_dim * float(factor))
    if model_type == "minimax_m2" and not cfg.get("partial_rotary_factor"):
        # MiniMax-M2 names its rotary width (minimax_m2.py MiniMaxM2Attention: partial_rotary_factor = rotary_dim /
        # head_dim unless the rope parameters give one)
        rotary = int(cfg.get("rotary_dim") or head_dim)
    if cfg.get("position_embedding_type") == "nope" or model_type in NOPE_TYPES:
        rotary = 0
    rotary_caches = _rotary_caches(cfg, int(cfg.get("max_position_embeddings") or 4096)) if rotary else ()
    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = model_type.startswith("gemma")  # Gemma ties by default; others (Llama, Qwen) default to untied
    is_eagle3 = any("eagle3" in a.lower() for a in archs) or cfg.get("draft_vocab_size") is not None
    is_eagle = any("eagle" in a.lower() for a in archs) and not is_eagle3
    return ModelSpec(
        model_id=model_id, source=source, model_type=model_type, hidden_size=hidden, num_layers=n_layers,
        checkpoint_type=str(raw.get("model_type") or "") if raw.get("model_type") != model_type else "",
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, vocab_size=int(cfg["vocab_size"]),
        intermediate_size=intermediate,
        layers=_layers(cfg, model_type, n_layers, kv_heads, head_dim, mla, mixers, model_id),
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 4096), dtype=_dtype(cfg),
        derived_max_model_len=derived_max_model_len(cfg, model_id),
        tie_word_embeddings=bool(tie),
        attention_bias=bool(cfg.get("attention_bias", model_type in ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"))),
        qk_norm=model_type in ("qwen3", "qwen3_moe", "qwen3_next") or model_type.startswith(("gemma3", "qwen3_5",
                                                                                              "qwen3_vl"))
        or (model_type == "glm4_moe" and bool(cfg.get("use_qk_norm")))  # Glm4MoeAttention: q_norm, k_norm
        or model_type == "minimax_m2",  # MiniMaxM2Attention builds its q_norm and k_norm whatever the config says
        # Nemotron-H's layers are one block each behind one RMSNorm (nemotron_h.py NemotronH*DecoderLayer: self.norm)
        norms_per_layer=4 if model_type.startswith("gemma") else (3 if is_eagle3 else (
            1 if model_type == "nemotron_h" else 2)), rotary_dim=rotary, moe=moe, mla=mla,
        rotary_cache_positions=rotary_caches,
        quantization=_quantization(cfg, moe, mla, model_type, n_layers, bool(state_layers), model_id),
        kv_cache_scheme=_ct_kv_cache_scheme(cfg, model_id),
        num_mtp_layers=_mtp_layers(cfg, model_type),
        mtp_step=str(cfg.get("mtp_hybrid_override_pattern") or "") if model_type == "nemotron_h" else "",
        draft_vocab_size=int(cfg["draft_vocab_size"]) if cfg.get("draft_vocab_size") else None,
        eagle_fc_inputs=3 if is_eagle3 else (2 if is_eagle else 0),
        final_logit_softcapping=cfg.get("final_logit_softcapping"),
        weight_bytes_exact=weight_bytes_exact, params_published=params_published, vision=_vision(raw, model_id),
        mixers=mixers, state_layers=state_layers, mlp_layers=mlp_layers,
        attention_output_gate=bool(cfg.get("attn_output_gate", True)) if model_type.startswith(
            ("qwen3_next", "qwen3_5")) else False,
        gated_mlp=model_type != "nemotron_h",
    )


def _quantization(cfg: dict, moe: MoESpec | None, mla: MLASpec | None, model_type: str, n_layers: int,
                  hybrid: bool, model_id: str) -> Quantization | None:
    """The checkpoint's quantization (parse_quantization), each layer's where compressed-tensors' config groups give
    its layers different schemes (compressed_tensors_layers)."""
    qc = cfg.get("quantization_config")
    declared = parse_quantization(qc, moe is not None, model_id)
    if isinstance(qc, dict) and str(qc.get("quant_method") or "").lower() == "compressed-tensors":
        return compressed_tensors_layers(qc, declared, model_id, n_layers, moe, mla, model_type, hybrid)
    return declared


def _ct_kv_cache_scheme(cfg: dict, model_id: str) -> bool:
    """Whether a compressed-tensors checkpoint declares a kv_cache_scheme (ModelSpec.kv_cache_scheme): vLLM's
    CompressedTensorsConfig keeps it whatever its weights' groups (none included), and its Attention layers serve the
    cache in fp8 by the release's rule (AccountingProfile.ct_kv_cache_scheme)."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, dict) or str(qc.get("quant_method") or "").lower() != "compressed-tensors":
        return False
    scheme = qc.get("kv_cache_scheme")
    if scheme is not None and not isinstance(scheme, dict):
        raise SpecError("quantization_config.kv_cache_scheme", f"{model_id}: kv_cache_scheme {scheme!r}",
                        '{num_bits: 8, type: "float", strategy: "tensor"}, or none')
    return bool(scheme)


def _mtp_layers(cfg: dict, model_type: str) -> int:
    """MTP layers the checkpoint carries: DeepSeek's num_nextn_predict_layers, Qwen3.5's mtp_num_hidden_layers;
    Qwen3-Next ships one (vLLM's qwen3_next_mtp reads num_nextn_predict_layers, default 1)."""
    if cfg.get("num_nextn_predict_layers") is not None:
        return int(cfg["num_nextn_predict_layers"])
    if cfg.get("mtp_num_hidden_layers") is not None:
        return int(cfg["mtp_num_hidden_layers"])
    return 1 if model_type == "qwen3_next" else 0


# EAGLE-3 heads predict over a reduced draft vocabulary: 32,000 tokens in the published heads
# (sgl-project/SpecForge configs/llama3-8B-eagle3.json and configs/llama3-70B-eagle3.json, vendored in the
# catalog as sgl-project/SpecForge-llama3-*-eagle3; yuhuili/EAGLE3-LLaMA3.1-Instruct-8B config.json).
EAGLE3_DRAFT_VOCAB = 32_000


def standard_head(target: ModelSpec, method: str, k: int, named: str | None = None) -> ModelSpec:
    """The usual drafter of `method` for `target` when none is given, built from the target's config (`named`: the
    head a user named whose config could not be read; the derived head keeps that id, which the launch command serves):

    - eagle: one decoder layer at the target's widths + the fc 2H -> H fusing token embedding and hidden state;
      embeddings and lm_head shared with the target (Li et al. 2024, EAGLE; vLLM EagleLlamaForCausalLM);
    - eagle3: one decoder layer whose attention takes 2H inputs, the fc 3H -> H fusing three target layers'
      hidden states, and its own lm_head over a 32,000-token draft vocabulary (EAGLE-3, Li et al. 2025);
    - medusa: k heads, each a residual block H -> H and an lm_head H -> vocab (Cai et al. 2024, Medusa-1).
    An MoE target's head is dense at the target's dense intermediate size; an MLA target's head is a Llama
    layer with 128-wide heads, as the published DeepSeek EAGLE heads."""
    h = target.hidden_size
    if target.mla is not None or not target.num_kv_heads:
        heads, kv_heads, head_dim = max(1, h // 128), 8, 128
    else:
        heads, kv_heads, head_dim = target.num_attention_heads, target.num_kv_heads, target.head_dim
    inter = target.intermediate_size or 4 * h
    base = {"model_type": "llama", "hidden_size": h, "intermediate_size": inter, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "head_dim": head_dim, "vocab_size": target.vocab_size,
            "max_position_embeddings": target.max_position_embeddings, "tie_word_embeddings": False,
            "torch_dtype": target.dtype}
    label = f"{DERIVED_SOURCE}: the standard {method} head of {target.model_id}"
    if named:
        label += f" ({named} could not be read)"
    if method == "eagle3":
        cfg = {**base, "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1,
               "draft_vocab_size": min(EAGLE3_DRAFT_VOCAB, target.vocab_size)}
        return spec_from_config(cfg, named or derived_label(target.model_id, "EAGLE-3 head"), label)
    if method == "eagle":
        cfg = {**base, "architectures": ["EagleLlamaForCausalLM"], "num_hidden_layers": 1}
        return spec_from_config(cfg, named or derived_label(target.model_id, "EAGLE head"), label).as_eagle_head()
    if method == "medusa":
        heads_k = max(1, k)
        return medusa_heads(h, target.vocab_size, heads_k,
                            named or derived_label(target.model_id, f"Medusa, {heads_k} heads"), label, target.dtype)
    raise ValueError(method)


def _medusa_field(cfg: dict, name: str, model_id: str) -> int:
    value = cfg.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1 << 24:
        raise SpecError(f"config.json:{name}", f"{model_id}: a Medusa config needs it as a positive integer, got "
                        f"{value!r}", "a Medusa config.json (medusa_num_heads, hidden_size, vocab_size)")
    return value


def medusa_heads(hidden: int, vocab: int, heads: int, model_id: str, source: str, dtype: str) -> ModelSpec:
    """Medusa-1 heads (Cai et al. 2024): no decoder layer; `heads` residual blocks H -> H (priced as the fc of
    heads x H x H) and `heads` lm_heads H -> vocab (one table of heads x vocab rows, read whole each step)."""
    cfg = {"architectures": ["MedusaModel"], "model_type": "llama", "hidden_size": hidden,
           "intermediate_size": 4 * hidden, "num_attention_heads": max(1, hidden // 128), "num_key_value_heads": 1,
           "num_hidden_layers": 1, "vocab_size": heads * vocab, "tie_word_embeddings": True, "torch_dtype": dtype,
           "max_position_embeddings": 4096}
    return spec_from_config(cfg, model_id, source).with_(num_layers=0, layers=(), eagle_fc_inputs=heads)
