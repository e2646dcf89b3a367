"""Weight bytes per tensor-parallel rank, from the architecture.

Follows how vLLM shards a checkpoint: vocab-parallel embedding and lm_head (vocab padded to a multiple of
64, then split), column-parallel q/k/v and gate/up, row-parallel o and down, KV heads replicated when there
are fewer of them than ranks, MoE experts split by TP (no expert parallelism), norms, routers and MLA's
down-projections replicated. Quantized linear layers add their scales (and zero points).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache

from .specs import DTYPE_BYTES, ModelSpec, MoESpec, Quantization, StateLayer, VisionSpec
from .units import ceil_div

VOCAB_PADDING = 64  # vLLM's DEFAULT_VOCAB_PADDING_SIZE


@dataclass(frozen=True)
class WeightBreakdown:
    """Bytes on one GPU, by component."""

    embedding: int
    lm_head: int
    attention: int
    mlp: int
    norms_and_routers: int
    buffers: int  # rotary cos/sin cache: allocated with the model, counted in the engine's weights figure
    params: int  # parameters on this rank (counts, not bytes)
    vision: int = 0  # a multimodal target's vision tower and projector
    # parameters of the linear layers a quantized checkpoint keeps in the model dtype (Quantization.unquantized)
    params_unquantized: int = 0

    @property
    def total(self) -> int:
        return (self.embedding + self.lm_head + self.attention + self.mlp + self.norms_and_routers + self.buffers
                + self.vision)


@dataclass(frozen=True)
class GroupedQuantization(Quantization):
    """A checkpoint whose layers are stored in different schemes (compressed-tensors' config_groups: W8A8 attention
    beside W4A16 MLPs, a group for some layers only): the scheme of each decoder layer's attention block and of its
    MLP (its routed experts in an MoE layer), None where none applies (UnquantizedLinearMethod), as
    catalog.configs.compressed_tensors_layers matched them. Its own fields are the scheme that stands for the model
    where one is read (the routed experts', else the one most blocks take); weight_breakdown reads each layer's.
    Quantization.unquantized (the ignore list) still applies on top."""

    layer_schemes: tuple[tuple[Quantization | None, Quantization | None], ...] = ()


@dataclass(frozen=True)
class LatentMoESpec(MoESpec):
    """An MoE block whose routed experts work in a latent width narrower than the model's (NVIDIA Nemotron-3 Super /
    Ultra, moe_latent_size): vLLM 0.32's nemotron_h.py NemotronHMoE projects each token hidden -> latent_size
    (fc1_latent_proj) before the experts and latent_size -> hidden after them (fc2_latent_proj), both ReplicatedLinear
    (whole on every rank, in the checkpoint's quantization), with a bias where mlp_bias; its FusedMoE has
    hidden_size = latent_size. The router and the shared experts keep the model's hidden width."""

    latent_size: int = 0
    latent_bias: bool = False


def expert_hidden(moe: MoESpec, hidden: int) -> int:
    """The width a routed expert reads and writes: the model's hidden size, or an MoE's latent one (LatentMoESpec)."""
    return moe.latent_size if isinstance(moe, LatentMoESpec) and moe.latent_size else hidden


def up_projections(m: ModelSpec) -> int:
    """The up-projections an MLP or expert has: 2 (gate and up, SwiGLU) or 1 (up only: Nemotron-H's squared-ReLU MLP,
    and its experts - vLLM's FusedMoE with a non-gated activation holds w13 of intermediate rows, not 2 x:
    fused_moe/unquantized_fused_moe_method.py create_weights, w13_up_dim)."""
    return 2 if m.gated_mlp else 1


def kv_heads_per_rank(num_kv_heads: int, tp: int) -> int:
    """KV heads one rank holds: split when there are at least as many heads as ranks, else replicated."""
    return max(1, num_kv_heads // tp)


def linear_bytes(out_features: int, in_features: int, dtype_bytes: int, quant: Quantization | None,
                 bias: bool = False) -> int:
    """Bytes of one linear layer's weight (out x in) as stored, plus its scales and bias."""
    bias_bytes = out_features * dtype_bytes if bias else 0
    n = out_features * in_features
    if quant is None:
        return n * dtype_bytes + bias_bytes
    m = quant.method
    if m == "int8" and quant.group_size:
        # GPTQ / compressed-tensors 8-bit with groups (Qwen's -GPTQ-Int8, group_size 128): fp16 scales per group of
        # a row (gptq_marlin.py create_weights: scales (in / group, out) in the model dtype), 8-bit zero points
        # where asymmetric
        groups = ceil_div(in_features, quant.group_size) * out_features
        return n + groups * 2 + (groups if quant.has_zeros else 0) + bias_bytes
    if m in ("fp8", "int8"):
        if quant.block:
            bo, bi = quant.block
            scales = ceil_div(out_features, bo) * ceil_div(in_features, bi) * 4
        else:
            scales = out_features * 4  # per-output-channel fp32 scale
        return n + scales + bias_bytes
    if m == "int4":
        # group_size None: one scale per output channel (GPTQ's group_size -1, compressed-tensors' "channel"
        # strategy: vLLM's scales are (1, out) for them, gptq_marlin.py / compressed_tensors_wNa16.py)
        groups = (ceil_div(in_features, quant.group_size) if quant.group_size else 1) * out_features
        zeros = ceil_div(groups, 2) if quant.has_zeros else 0  # 4-bit zero points, packed
        return ceil_div(n, 2) + groups * 2 + zeros + bias_bytes  # fp16 scales
    if m == "mxfp4":
        return ceil_div(n, 2) + ceil_div(n, 32) + bias_bytes  # e8m0 scale per 32 values
    if m == "nvfp4":
        return ceil_div(n, 2) + ceil_div(n, 16) + 4 + bias_bytes  # fp8 scale per 16 values + fp32 global
    if m == "bnb4":
        # bitsandbytes 4-bit as vLLM 0.9.2-0.27 holds it: the values packed two a byte (quantization/bitsandbytes.py
        # create_qweight_for_4bit: (in x out / 2, 1) uint8) and one float32 absmax per block of group_size (64) values
        # - a double-quantized checkpoint's too: the loader dequantizes its uint8 absmax back to float32 at load
        # (model_loader/bitsandbytes_loader.py dequantize_dq, PR 19742, first in 0.9.2) and frees the nested state
        return ceil_div(n, 2) + ceil_div(n, quant.group_size or 64) * 4 + bias_bytes
    if m == "bnb8":
        # bitsandbytes LLM.int8(): int8 values (create_qweight_for_8bit: Int8Params (out, in)) and the float32 scale
        # of each row (SCB), loaded on the CPU and copied to the GPU at the profiling run's first matmul, where the
        # matmul state keeps it (_apply_8bit_weight: matmul_states[i].SCB = quant_states[i].to(x.device))
        return n + out_features * 4 + bias_bytes
    raise ValueError(f"unknown quantization method {m}")


# a layer's attention and MLP as vLLM names their linear layers; one listed keeps the block in the model dtype
_ATTENTION_MODULES = ("self_attn.q_proj", "self_attn.q_a_proj", "self_attn.o_proj")
_MLP_MODULES = ("mlp.gate_proj", "mlp.down_proj", "feed_forward.gate_proj", "feed_forward.down_proj")  # Llama 4


@lru_cache(maxsize=64)
def unquantized_layers(entries: tuple[str, ...], n_layers: int) -> tuple[frozenset[int], frozenset[int]]:
    """(layers whose attention, layers whose dense MLP) a checkpoint keeps unquantized (Quantization.unquantized):
    vLLM gives a listed linear layer UnquantizedLinearMethod (is_layer_skipped in the quantization configs), and a
    fused q/k/v or gate/up takes its shards' common choice. An entry is a module name (naming the module or one
    holding it), a glob with "*", or compressed-tensors' "re:" regular expression matched from the start of the full
    name, as compressed-tensors matches them; names and globs are compared from their "layers." on, so a model's own
    prefix ("model.", "language_model.model.") does not matter. Meta's Llama-3.1-405B-Instruct-FP8 keeps every
    attention block and the first and last layers' MLP in bfloat16 (The Llama 3 Herd of Models, arXiv 2407.21783,
    sec. 6.2: "We do not quantize parameters in the self-attention layers", "we do not perform quantization in the
    first and last Transformer layers")."""
    names: set[str] = set()
    globs: list[str] = []
    patterns: list[re.Pattern[str]] = []
    for e in entries:
        if e.startswith("re:"):
            patterns.append(re.compile(e[3:]))
        elif "layers." in e:  # not lm_head, embed_tokens or a vision tower: a decoder layer's module
            short = e[e.find("layers."):]
            if "*" in short:
                globs.append(short)
            else:
                names.add(short)

    def listed(full: str) -> bool:
        short = full[len("model."):]
        parts = short.split(".")
        if any(".".join(parts[:n]) in names for n in range(2, len(parts) + 1)):
            return True
        return (any(fnmatchcase(short, g) or fnmatchcase(short, g + ".*") for g in globs)
                or any(p.match(full) for p in patterns))

    attention: set[int] = set()
    mlp: set[int] = set()
    for i in range(n_layers):
        for modules, into in ((_ATTENTION_MODULES, attention), (_MLP_MODULES, mlp)):
            if any(listed(f"model.layers.{i}.{name}") for name in modules):
                into.add(i)
    return frozenset(attention), frozenset(mlp)


def pp_stages(n_layers: int, pp: int) -> tuple[range, ...]:
    """The layers of each pipeline stage, as vLLM splits them (vllm/distributed/utils.py get_pp_indices, without
    VLLM_PP_LAYER_PARTITION): n // pp each, the remainder one apiece to the stages before the last, from the
    second-to-last backwards (61 layers on 4 stages: 15, 15, 16, 15)."""
    sizes = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        sizes[-i] += 1
    starts = [sum(sizes[:i]) for i in range(pp)]
    return tuple(range(start, start + size) for start, size in zip(starts, sizes))


def padded_vocab(vocab_size: int) -> int:
    return ceil_div(vocab_size, VOCAB_PADDING) * VOCAB_PADDING


def _attention_bytes(m: ModelSpec, tp: int, wb: int, q: Quantization | None) -> tuple[int, int]:
    """(bytes, params) of one attention block on one rank."""
    h = m.hidden_size
    if m.mla is not None:
        a = m.mla
        heads = m.num_attention_heads // tp
        qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim
        parts = []
        if a.q_lora_rank:
            parts.append((a.q_lora_rank, h))  # q_a_proj, replicated
            parts.append((heads * qk_head, a.q_lora_rank))  # q_b_proj, column-parallel
        else:
            parts.append((heads * qk_head, h))
        parts.append((a.kv_lora_rank + a.qk_rope_head_dim, h))  # kv_a_proj_with_mqa, replicated
        parts.append((heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank))  # kv_b_proj
        parts.append((h, heads * a.v_head_dim))  # o_proj, row-parallel
        norms = (a.q_lora_rank or 0) + a.kv_lora_rank
        b = sum(linear_bytes(o, i, wb, q) for o, i in parts) + norms * wb
        p = sum(o * i for o, i in parts) + norms
        ib, ip = _indexer_bytes(m, wb, q)
        return b + ib, p + ip
    heads = m.num_attention_heads // tp
    kvh = kv_heads_per_rank(m.num_kv_heads, tp)
    d = m.head_dim
    # Qwen3-Next / Qwen3.5 gate each head's output: q_proj projects queries and gates (2 x heads x head_dim)
    qkv_out = (heads * (2 if m.attention_output_gate else 1) + 2 * kvh) * d
    # an EAGLE-3 head attends over [token embedding ; fused hidden state]: q/k/v take 2 x hidden inputs
    qkv_in = 2 * h if m.eagle_fc_inputs == 3 else h
    b = linear_bytes(qkv_out, qkv_in, wb, q, bias=m.attention_bias)
    b += linear_bytes(h, heads * d, wb, q, bias=m.attention_bias and m.model_type == "gpt_oss")
    p = qkv_out * qkv_in + h * heads * d + (qkv_out if m.attention_bias else 0)
    if m.qk_norm and m.model_type == "minimax_m2":
        # one RMSNorm over all heads' queries and one over all KV heads' keys, their weights split across the ranks
        # (minimax_m2.py MiniMaxM2Attention: MiniMaxText01RMSNormTP(head_dim x total heads), weight hidden // tp)
        norm = heads * d + m.num_kv_heads * d // tp
        b += norm * wb
        p += norm
    elif m.qk_norm:
        b += 2 * d * wb
        p += 2 * d
    if m.model_type == "gpt_oss":  # learned attention-sink logit per head
        b += heads * 4
        p += heads
    return b, p


def indexer_dims(m: ModelSpec) -> tuple[int, int, int]:
    """(heads, head dim, top-k) of an MLA model's sparse-attention indexer (DeepSeek-V3.2), zeros without one."""
    for layer in m.layers:
        if layer.kind == "mla" and layer.indexer_heads and layer.indexer_head_dim:
            return layer.indexer_heads, layer.indexer_head_dim, layer.indexer_topk
    return 0, 0, 0


def _indexer_bytes(m: ModelSpec, wb: int, q: Quantization | None) -> tuple[int, int]:
    """(bytes, params) of one layer's sparse-attention indexer, on every rank whole (vllm/model_executor/models/
    deepseek_v2.py Indexer: "no tensor parallel, just replicated"): wq_b q_lora_rank -> heads x head_dim in the
    checkpoint's quantization; wk and weights_proj fused into one hidden -> head_dim + heads projection kept in the
    model dtype (quant_config=None: fp8 wk is upcast at load); k_norm a LayerNorm (weight and bias) over head_dim in
    the model dtype, as vLLM 0.11-0.17 build it (deepseek_v2.py Indexer: LayerNorm(head_dim, eps=1e-6)); vLLM 0.32
    makes it float32 (models/deepseek_v32/attention.py DeepseekV32Indexer: dtype=torch.float32), 512 B a layer more
    at head_dim 128, which this release-free count leaves out."""
    heads, dim, _ = indexer_dims(m)
    if not heads or m.mla is None:
        return 0, 0
    h, rank = m.hidden_size, m.mla.q_lora_rank or m.hidden_size
    b = linear_bytes(heads * dim, rank, wb, q) + linear_bytes(dim + heads, h, wb, None) + 2 * dim * wb
    return b, heads * dim * rank + (dim + heads) * h + 2 * dim


def _state_mixer_parts(m: ModelSpec, s: StateLayer, tp: int) -> tuple[list[tuple[int, int, bool, bool]],
                                                                       list[tuple[int, int]]]:
    """One linear-attention / state-space mixer on one rank, sharded as vLLM shards it (input projections column-
    parallel, output row-parallel, conv channels and heads split; mamba2 groups replicated to cover the heads):
    (its linears as (out, in, in the checkpoint's quantization, with a bias), its other tensors as (elements, bytes
    each; 0: the model dtype's)). A / A_log and D are float32 where vLLM keeps them so. The one layout
    _state_mixer_bytes and _state_mixer_params read."""
    h = m.hidden_size
    if s.kind == "gated_delta_net":  # vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py
        key, value = s.groups * s.state_dim, s.heads * s.head_dim
        heads = s.heads // tp
        return ([((2 * key + 2 * value) // tp, h, True, False), (2 * s.heads // tp, h, False, False),
                 (h, value // tp, True, False)],
                [((2 * key + value) // tp * s.conv_kernel, 0), (heads, 0), (heads, 4), (s.head_dim, 0)])
    if s.kind == "mamba2":  # vllm/model_executor/layers/mamba/mamba_mixer2.py
        from .kvcache import mamba2_groups_per_rank  # noqa: PLC0415 - one owner of the group rule
        groups = mamba2_groups_per_rank(s.groups, tp)
        inter = s.intermediate // tp
        conv = inter + 2 * groups * s.state_dim // tp
        heads = s.heads // tp
        return ([(2 * inter + 2 * groups * s.state_dim // tp + heads, h, True, s.proj_bias),
                 (h, inter, True, s.proj_bias)],
                [(conv * s.conv_kernel, 0), (conv if s.conv_bias else 0, 0), (heads, 4), (2 * heads, 0), (inter, 0)])
    inter = s.intermediate // tp  # mamba1, vllm/model_executor/layers/mamba/mamba_mixer.py
    return ([(2 * inter, h, True, s.proj_bias), (s.dt_rank + 2 * s.state_dim, inter, True, False),
             (inter, s.dt_rank, True, True), (h, inter, True, s.proj_bias)],
            [(inter * s.conv_kernel, 0), (inter if s.conv_bias else 0, 0), (inter * s.state_dim, 4), (inter, 4)])


def _state_mixer_bytes(m: ModelSpec, s: StateLayer, tp: int, wb: int, q: Quantization | None) -> int:
    """Bytes of one state mixer on one rank (_state_mixer_parts), its linears in the checkpoint's quantization."""
    linears, tensors = _state_mixer_parts(m, s, tp)
    return (sum(linear_bytes(out, inp, wb, q if quantized else None, bias=bias) for out, inp, quantized, bias in linears)
            + sum(n * (b or wb) for n, b in tensors))


def _state_mixer_params(m: ModelSpec, s: StateLayer, tp: int) -> int:
    """Parameters of one state mixer on one rank (_state_mixer_parts): a float32 A / A_log or D counts one parameter
    an element, not bytes / dtype bytes (that had added 64 to each of Nemotron-3-Nano's 23 mamba layers)."""
    linears, tensors = _state_mixer_parts(m, s, tp)
    return sum(out * inp + (out if bias else 0) for out, inp, _, bias in linears) + sum(n for n, _ in tensors)


VLLM_MXFP4_PAD = (256, 128)  # the multiples vLLM's Marlin path pads mxfp4 experts' hidden and intermediate sizes to


@dataclass(frozen=True)
class Mxfp4Layout:
    """How an engine holds one MoE layer's mxfp4 experts once its kernel has them:

    - pads: the (hidden, intermediate per rank) multiples it allocates them padded to (mxfp4_expert_dims);
    - value_rows / value_cols: the multiples a swizzle pads each expert's packed values to, in rows (output
      features) and in bytes of a row (two fp4 values a byte);
    - scale_rows / scale_cols: the same for its e8m0 block scales, in rows and in scale groups (32 values each);
    - keeps_checkpoint_scales: the scales as loaded stay allocated beside the swizzled copy the kernel reads;
    - bias_bytes: bytes of a bias element where the engine converts the checkpoint's (0: the model dtype);
    - swizzle_max_tp: the largest tensor-parallel size the kernel swizzles at (0: every size); beyond it the values
      and scales stay as loaded, no tiles and no copy (vLLM's ROCm path on CDNA4 from 0.24:
      should_use_cdna4_mx_scale_swizzle, TP <= 2);
    - kernel: the name of the engine's kernel, for the reader.

    AccountingProfile.mxfp4_pad (and its _by_gpu rules) holds either this or a plain (hidden, intermediate) pair,
    the padding alone (Marlin's, SGLang's): Mxfp4Layout.of reads either, and the dict dataclasses.asdict and JSON
    make of a layout. A value, not a pair: it compares and hashes by every field (the caches that key on it, the
    weight_breakdown lru_cache and planner.perf's costs, keep a swizzled layout apart from the pair it pads to),
    and a layout never equals a plain pair, so nothing that rebuilds or compares the pair can stand in for it."""

    pads: tuple[int, int] = (1, 1)
    kernel: str = ""
    value_rows: int = 1
    value_cols: int = 1
    scale_rows: int = 1
    scale_cols: int = 1
    keeps_checkpoint_scales: bool = False
    bias_bytes: int = 0
    swizzle_max_tp: int = 0

    def __post_init__(self) -> None:
        pads = tuple(self.pads)  # a list where JSON wrote it
        multiples = (*pads, self.value_rows, self.value_cols, self.scale_rows, self.scale_cols)
        if (len(pads) != 2 or any(type(x) is not int or x < 1 for x in multiples)
                or any(type(x) is not int or x < 0 for x in (self.bias_bytes, self.swizzle_max_tp))
                or not isinstance(self.keeps_checkpoint_scales, bool) or not isinstance(self.kernel, str)):
            raise ValueError(f"Mxfp4Layout: pads a pair of integers >= 1, tiles integers >= 1, bias_bytes and "
                             f"swizzle_max_tp integers >= 0; got {self!r}")
        object.__setattr__(self, "pads", pads)

    @classmethod
    def of(cls, value: Mxfp4Pad | Mapping[str, object]) -> Mxfp4Layout:
        """The layout `value` says: a layout as it is, a (hidden, intermediate) pair as the padding alone, a mapping
        (dataclasses.asdict's, or JSON's) as the layout it was written from."""
        if isinstance(value, Mxfp4Layout):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise ValueError(f"Mxfp4Layout: no field {', '.join(sorted(map(str, unknown)))}; the fields are "
                                 f"{', '.join(cls.__dataclass_fields__)}")
            return cls(**value)  # type: ignore[arg-type]  # __post_init__ checks each field
        hidden, inter = value
        return cls((hidden, inter))

    @property
    def swizzled(self) -> bool:
        """Whether the kernel's layout adds anything to the padding (else the pair alone says the bytes)."""
        return (self.value_rows, self.value_cols, self.scale_rows, self.scale_cols, self.keeps_checkpoint_scales,
                self.bias_bytes) != (1, 1, 1, 1, False, 0)

    def at_tp(self, tp: int) -> Mxfp4Layout:
        """The layout at tensor-parallel size `tp`: beyond swizzle_max_tp the padding and the bias dtype alone."""
        if not self.swizzle_max_tp or tp <= self.swizzle_max_tp:
            return self
        return Mxfp4Layout(self.pads, kernel=self.kernel, bias_bytes=self.bias_bytes)


# what AccountingProfile.mxfp4_pad holds: a plain (hidden, intermediate) pair or a kernel's Mxfp4Layout
Mxfp4Pad = tuple[int, int] | Mxfp4Layout


def mxfp4_expert_dims(hidden: int, inter_per_rank: int, pad: Mxfp4Pad = VLLM_MXFP4_PAD) -> tuple[int, int]:
    """(hidden, intermediate per rank) of an engine's mxfp4 MoE expert tensors, padded to the kernels' tiles (`pad`:
    the hidden and intermediate multiples: the engine's, AccountingProfile.mxfp4_pad; vLLM's Marlin by default).

    vLLM's Mxfp4MoEMethod.create_weights allocates the experts padded (vllm/model_executor/layers/fused_moe/
    oracle/mxfp4.py, mxfp4_round_up_hidden_size_and_intermediate_size; quantization/mxfp4.py before 0.19) by the
    backend it picked: Marlin to a hidden size a multiple of 256 and an intermediate a multiple of 128 (its n % 256,
    k % 128 rule), gpt-oss-120b 65.97 GiB at TP1 on an H100 (vllm-project/vllm issue 23278, vLLM 0.10.1 with the
    Marlin warning; 65.91 padded, 60.78 not); OpenAI's Triton kernels only the intermediate, to 64, and then swizzle
    them (Mxfp4Layout, mxfp4_linear_bytes); FlashInfer's TRT-LLM kernels both to 256 (the intermediate to 128 from
    0.27); the Triton kernels on ROCm both to 128 or 256 by release and CDNA generation. engines/vllm.py says which
    backend each release picks on which GPU."""
    h_mul, i_mul = Mxfp4Layout.of(pad).pads
    return ceil_div(hidden, h_mul) * h_mul, ceil_div(inter_per_rank, i_mul) * i_mul


def _round_up(n: int, multiple: int) -> int:
    return ceil_div(n, multiple) * multiple


def mxfp4_linear_bytes(out_features: int, in_features: int, layout: Mxfp4Layout, dtype_bytes: int,
                       bias: bool, read: bool = False) -> int:
    """Bytes of one expert's mxfp4 linear (out x in, already padded by mxfp4_expert_dims) as a swizzling kernel holds
    it: its packed values and e8m0 block scales padded to the layout's tiles, the scales as loaded where they stay
    allocated, and its bias in the layout's bias dtype.

    vLLM's OpenAI Triton path (vllm/model_executor/layers/quantization/utils/mxfp4_utils.py _swizzle_mxfp4, mx_axis=1,
    num_warps=8) hands each expert's (out, in / 2) uint8 values to triton_kernels' HopperMXValueLayout and its
    (out, in / 32) scales to HopperMXScaleLayout (triton_kernels/tensor_details/layout_details/hopper_value.py,
    hopper_scale.py swizzle_data): the values padded to 16 rows and 32 bytes (tags v3.5.0 / v3.5.1; v3.6.0 first
    pads both to 64), the scales to 2 x num_warps x 16 = 256 rows and an even number of groups. The swizzled copies
    are new tensors: vLLM deletes the loaded values (del layer.w13_weight) and, from 0.25, the loaded scales; until
    then layer.w13_weight_scale stays a parameter of the layer. The biases become float32 (w13_bias.to(torch.float32)
    in the Triton and TRT-LLM paths). "Model loading took" is torch's allocated memory after
    process_weights_after_loading, so it holds exactly these. On ROCm (_swizzle_mxfp4's is_rocm branch) the values
    and CDNA3's scales stay strided, views of the loaded tensors (tiles of 1), and CDNA4's scales are permuted into a
    copy of the same size (GFX950MXScaleLayout / CDNA4MXScaleLayout), held beside the loaded ones until 0.25 - the
    same sum. `read`: only what the kernel reads (the loaded scales
    kept beside the swizzled copy are held, never read)."""
    L = layout
    groups = ceil_div(in_features, 32)
    values = _round_up(out_features, L.value_rows) * _round_up(ceil_div(in_features, 2), L.value_cols)
    scales = _round_up(out_features, L.scale_rows) * _round_up(groups, L.scale_cols)
    if L.keeps_checkpoint_scales and not read:
        scales += out_features * groups
    return values + scales + (out_features * (L.bias_bytes or dtype_bytes) if bias else 0)


def experts_on_rank(num_experts: int, ep: int) -> int:
    """Routed experts the busiest rank of `ep` expert-parallel ranks holds: vLLM hands the first
    num_experts % ep ranks one more (fused_moe/expert_map_manager.py determine_expert_map: "base_experts + 1 if
    ep_rank < remainder"; its workers' KV pools are the smallest worker's, so rank 0 decides); SGLang refuses a
    split that is not whole (engines.support.check_expert_parallel)."""
    return -(-num_experts // max(1, ep))


def _mlp_bytes(m: ModelSpec, layer: int, tp: int, wb: int, q: Quantization | None,
               mxfp4_pad: Mxfp4Pad = VLLM_MXFP4_PAD, ep: int = 1) -> tuple[int, int, int, int]:
    """(bytes, params, router bytes, router params) of one layer's MLP or MoE block on one rank. `ep` > 1: the
    routed experts are split by expert over that many ranks, each expert whole (expert parallelism, vLLM's
    --enable-expert-parallel: FusedMoEParallelConfig with use_ep has the MoE layers' tp_size 1); the shared experts
    and the router stay as TP has them."""
    h = m.hidden_size
    moe = m.moe
    if m.mlp_layers is not None and layer < m.num_layers and layer not in m.mlp_layers:
        return 0, 0, 0, 0  # a Nemotron-H mamba or attention layer: no MLP
    ups = up_projections(m)
    dense_q = None if (q and q.experts_only) else q
    if moe is None or layer not in moe.moe_layers:
        inter = m.intermediate_size // tp
        up = ups * inter
        return (linear_bytes(up, h, wb, dense_q) + linear_bytes(h, inter, wb, dense_q), (up + inter) * h, 0, 0)
    expert_tp, local = (1, experts_on_rank(moe.num_experts, ep)) if ep > 1 else (tp, moe.num_experts)
    one = _expert_bytes(m, expert_tp, wb, q, mxfp4_pad)
    b = local * one
    p = local * _expert_params(m, expert_tp)
    if moe.num_shared_experts:
        s_inter = moe.shared_intermediate_size * moe.num_shared_experts // tp
        b += linear_bytes(ups * s_inter, h, wb, dense_q) + linear_bytes(h, s_inter, wb, dense_q)
        p += (ups + 1) * h * s_inter
    if isinstance(moe, LatentMoESpec) and moe.latent_size:
        # fc1_latent_proj (hidden -> latent) and fc2_latent_proj (latent -> hidden), replicated on every rank
        latent = moe.latent_size
        b += (linear_bytes(latent, h, wb, dense_q, bias=moe.latent_bias)
              + linear_bytes(h, latent, wb, dense_q, bias=moe.latent_bias))
        p += 2 * h * latent + ((latent + h) if moe.latent_bias else 0)
    # the router (MoESpec.router_fp32: float32, else the model dtype) and its float32 bias per expert
    # (MoESpec.router_bias; one parameter an expert: counted as 4 / wb parameters it had added 23,040 to Kimi K2's)
    bias = moe.num_experts if moe.router_bias else 0
    router_bytes = 4 if moe.router_fp32 else wb
    return b, p, moe.num_experts * h * router_bytes + 4 * bias, moe.num_experts * h + bias


@lru_cache(maxsize=4096)
def weight_breakdown(m: ModelSpec, tp: int = 1, pp: int = 1, dtype: str | None = None,
                     quant: Quantization | None = None, *, include_mtp: bool = False,
                     share_embeddings: bool = False, rotary_cache: bool = True,
                     mxfp4_pad: Mxfp4Pad = VLLM_MXFP4_PAD, ep: int = 1) -> WeightBreakdown:
    """Bytes of `m` on the busiest GPU of a TP x PP instance.

    `share_embeddings` drops the embedding and lm_head (an EAGLE head or MTP layer that reuses the
    target's). `quant` overrides the checkpoint's declared quantization. `mxfp4_pad`: the engine's padding of
    mxfp4 experts (mxfp4_expert_dims). `ep`: the routed experts split by expert over that many ranks (_mlp_bytes).
    """
    wb = DTYPE_BYTES[dtype or m.dtype]
    q = quant if quant is not None else m.quantization
    h = m.hidden_size
    vocab_rank = padded_vocab(m.vocab_size) // tp
    embedding = 0 if share_embeddings else vocab_rank * h * wb
    lm_vocab_rank = padded_vocab(m.draft_vocab_size) // tp if m.draft_vocab_size else vocab_rank
    if share_embeddings and not m.draft_vocab_size and m.eagle_fc_inputs != 3:
        lm_head = 0  # (an EAGLE-3 head builds its own lm_head, over the whole vocabulary without draft_vocab_size:
        # llama_eagle3.py. It is counted whole: vLLM 0.32 shares the target's in its place where the checkpoint holds
        # no lm_head or an identical one, which a config does not tell)
    elif m.tie_word_embeddings and not m.draft_vocab_size:
        lm_head = 0
    else:
        lm_head = lm_vocab_rank * h * wb
    params = (embedding + lm_head) // wb

    # experts-only quantization (gpt-oss mxfp4: quantization_config.modules_to_not_convert names
    # model.layers.*.self_attn, the router, embed_tokens and lm_head) leaves attention in the model dtype
    dense_q = None if (q and q.experts_only) else q
    n_layers = m.num_layers + (m.num_mtp_layers if include_mtp else 0)
    attention = mlp = norms = kept = 0
    keep_attention, keep_mlp = unquantized_layers(q.unquantized, m.num_layers) if q else (frozenset(), frozenset())

    # MTP layers are shaped like the last layer; Nemotron-H's step ("*E": an attention and an MoE block) like its last
    # MoE layer, whatever block ends the model (Nemotron-3-Ultra's last layer is a mamba one)
    mtp_like = m.moe.moe_layers[-1] if (m.model_type == "nemotron_h" and m.moe and m.moe.moe_layers) \
        else m.num_layers - 1

    def layer_parts(layer: int, state_index: int) -> tuple[int, int, int, int, int, int, int]:
        """(attention bytes, attention params, MLP bytes, MLP params, router bytes, router params, params kept
        unquantized)."""
        lid = layer if layer < m.num_layers else mtp_like
        mixer = m.mixer(layer)  # MTP layers (beyond the model) attend
        kept_attention, kept_mlp = lid in keep_attention, lid in keep_mlp
        layer_attn_q, layer_mlp_q = dense_q, q
        if isinstance(q, GroupedQuantization) and lid < len(q.layer_schemes):
            layer_attn_q, layer_mlp_q = q.layer_schemes[lid]  # each layer's own (compressed-tensors config groups)
            kept_attention, kept_mlp = kept_attention or layer_attn_q is None, kept_mlp or layer_mlp_q is None
        attn_q = None if kept_attention else layer_attn_q
        ab, ap = _attention_bytes(m, tp, wb, attn_q) if mixer in ("attention", "both") else (0, 0)
        if mixer in ("state", "both"):
            layer_state = m.state_layers[min(state_index, len(m.state_layers) - 1)]
            sb = _state_mixer_bytes(m, layer_state, tp, wb, q)
            ab, ap = ab + sb, ap + _state_mixer_params(m, layer_state, tp)
        mb, mp, rb, rp = _mlp_bytes(m, lid, tp, wb, None if kept_mlp else layer_mlp_q, mxfp4_pad, ep)
        return ab, ap, mb, mp, rb, rp, (ap if kept_attention else 0) + (mp if kept_mlp else 0)

    per_layer, states = [], 0
    for layer in range(n_layers):
        per_layer.append(layer_parts(layer, states))
        states += m.mixer(layer) in ("state", "both")
    # The busiest stage: with PP, vLLM's stages hold consecutive layers (pp_stages); take the stage whose layers
    # weigh the most (DeepSeek-V3's first_k_dense_replace dense layers make the first stage the lightest), plus the
    # larger of the embedding (first stage) and the lm_head (last stage)
    layer_ids = max(pp_stages(n_layers, pp), key=lambda ids: sum(per_layer[i][0] + per_layer[i][2] + per_layer[i][4]
                                                                  for i in ids)) if pp > 1 else range(n_layers)
    for layer in layer_ids:
        ab, ap, mb, mp, rb, rp, kept_params = per_layer[layer]
        kept += kept_params
        attention += ab
        mlp += mb
        norms += m.norms_per_layer * h * wb + rb
        params += ap + mp + m.norms_per_layer * h + rp
    if pp > 1:
        embedding, lm_head = max(embedding, lm_head), 0
    norms += h * wb  # final norm
    params += h
    if include_mtp and m.num_mtp_layers and m.model_type == "nemotron_h":
        # Nemotron-H MTP (vLLM 0.32 nemotron_h_mtp.py NemotronHMultiTokenPredictor, mtp_hybrid_override_pattern "*E"):
        # one step is an attention layer and an MoE layer (counted above as one layer shaped like the last, an E, that
        # attends, with one norm) whose second norm, enorm, hnorm and final_layernorm come here, and eh_proj (2H -> H) a
        # ColumnParallelLinear split by TP in the checkpoint's quantization; embedding and head shared with the target
        eh_q = None if (q and q.experts_only) else q
        norms += m.num_mtp_layers * 4 * h * wb
        mlp += m.num_mtp_layers * linear_bytes(h // tp, 2 * h, wb, eh_q)
        params += m.num_mtp_layers * (4 * h + 2 * h * (h // tp))
    elif include_mtp and m.num_mtp_layers:
        # DeepSeek MTP: enorm + hnorm + eh_proj (2H -> H) per layer; embedding and head shared with the target
        extra = m.num_mtp_layers * (2 * h * wb + linear_bytes(h, 2 * h, wb, None))
        norms += extra
        params += m.num_mtp_layers * (2 * h + 2 * h * h)
    if m.eagle_fc_inputs:
        fc = linear_bytes(h, m.eagle_fc_inputs * h, wb, None, bias=m.eagle_fc_inputs == 2)
        mlp += fc
        params += m.eagle_fc_inputs * h * h
    positions = sum(m.rotary_cache_positions) or m.max_position_embeddings
    buffers = positions * m.rotary_dim * wb if (rotary_cache and m.rotary_dim) else 0
    vision = 0
    if m.vision is not None:  # with PP the tower loads with the first stage; the busiest is at least that
        replicated, sharded = vision_params(m.vision, h)
        vision = (replicated + ceil_div(sharded, tp)) * wb
        params += replicated + ceil_div(sharded, tp)
    return WeightBreakdown(embedding=embedding, lm_head=lm_head, attention=attention, mlp=mlp,
                           norms_and_routers=norms, buffers=buffers, params=params, vision=vision,
                           params_unquantized=kept)


def vision_params(v: VisionSpec, text_hidden: int) -> tuple[int, int]:
    """(parameters every rank holds whole, parameters split across TP ranks) of a vision tower and its
    projector, laid out as vLLM's module for the family builds them (mm_encoder_tp_mode "weights", the
    default: the towers' linear layers are tensor-parallel, embeddings and norms replicated).

    vllm/model_executor/models/siglip.py + gemma3_mm.py (Gemma3MultiModalProjector: one plain weight,
    hidden x text_hidden, and an RMSNorm), mllama4.py (Llama4VisionModel, pixel-shuffle adapter MLP, a
    bias-free projector), pixtral.py + mistral3.py (PixtralHF tower: RMSNorm, no biases, SwiGLU; projector:
    RMSNorm, 2x2 patch merger, two linears), qwen2_vl.py (Conv3d patch embed, LayerNorm + QuickGELU blocks with
    biases, merger over 2x2 patches), qwen2_5_vl.py (Conv3d patch embed, SwiGLU blocks with biases,
    merger over 2x2 patches), qwen3_vl.py (Qwen3_VisionTransformer, which qwen3_5.py builds for Qwen3.5 too).
    """
    h, i, n, p, c = v.hidden_size, v.intermediate_size, v.num_layers, v.patch_size, v.num_channels
    grid = (v.image_size // p) ** 2
    if v.kind == "siglip":
        replicated = c * p * p * h + h + grid * h + n * (4 * h + 3 * h + h + i + h) + 2 * h
        sharded = n * (4 * h * h + 2 * h * i)
        replicated += h * text_hidden + h  # the projector is a plain weight (not split) and a norm
        return replicated, sharded
    if v.kind == "llama4":
        replicated = c * p * p * h + h + (grid + 1) * h + 4 * h + n * (4 * h + 4 * h + i + h)
        sharded = n * (4 * h * h + 2 * h * i)
        sharded += 4 * h * v.projector_input + v.projector_input * v.projector_output  # pixel-shuffle MLP
        sharded += v.projector_output * text_hidden
        return replicated, sharded
    if v.kind == "pixtral":
        replicated = c * p * p * h + h + n * 2 * h + h
        sharded = n * (4 * h * h + 3 * h * i) + 4 * h * h + h * text_hidden + text_hidden * text_hidden
        return replicated, sharded
    if v.kind == "qwen2_vl":
        # qwen2_vl.py: Conv3d patch embed as a bias-free ReplicatedLinear; LayerNorms (weight and bias) before the
        # attention, the MLP and the merger; qkv / fc1 / merger mlp.0 column-parallel with their biases split,
        # proj / fc2 / merger mlp.2 row-parallel with their biases whole on every rank
        replicated = c * v.temporal_patch_size * p * p * h + n * (4 * h + h + h) + 2 * h + text_hidden
        sharded = n * (3 * h * h + 3 * h + h * h + 2 * h * i + i) + 16 * h * h + 4 * h + 4 * h * text_hidden
        return replicated, sharded
    if v.kind == "qwen2_5_vl":
        replicated = c * v.temporal_patch_size * p * p * h + n * (2 * h + 3 * h + h + 2 * i + h) + h
        replicated += 4 * h + text_hidden  # merger biases
        sharded = n * (4 * h * h + 3 * h * i) + 16 * h * h + 4 * h * text_hidden
        return replicated, sharded
    if v.kind == "qwen3_vl":
        # vllm 0.32 qwen3_vl.py Qwen3_VisionTransformer.__init__: Qwen3_VisionPatchEmbed (a Conv3dLayer with bias,
        # layers/conv.py: plain parameters), pos_embed (nn.Embedding num_position_embeddings x hidden), both whole
        # on every rank. Qwen3_VisionBlock: norm1 / norm2 LayerNorms (weight and bias); attn Qwen2_5_VisionAttention
        # (qwen2_5_vl.py: qkv QKVParallelLinear bias=True, its bias split; proj RowParallelLinear, bias default True,
        # whole on every rank); mlp Qwen3_VisionMLP(bias=True): linear_fc1 column-parallel (bias split), linear_fc2
        # row-parallel (bias whole); no gate (fc1 -> hidden_act -> fc2). Qwen3_VisionPatchMerger: a LayerNorm over
        # hidden (the final merger) or over merge^2 x hidden (deepstack mergers, use_postshuffle_norm), linear_fc1
        # merge^2 x hidden square (column-parallel, bias split), linear_fc2 to out_hidden_size (row-parallel, bias
        # whole); one final merger plus one per deepstack_visual_indexes entry (empty in Qwen3.5). The rotary
        # cos/sin cache (get_rope over 8,192 positions x head_dim / 2, 576 KiB in bf16) is a buffer, not counted.
        out = v.projector_output or text_hidden
        merged = v.spatial_merge_size * v.spatial_merge_size * h
        replicated = c * v.temporal_patch_size * p * p * h + h + v.position_embeddings * h + n * (4 * h + h + h)
        replicated += 2 * h + out + v.deepstack_mergers * (2 * merged + out)
        sharded = n * (3 * h * h + 3 * h + h * h + 2 * h * i + i)
        sharded += (1 + v.deepstack_mergers) * (merged * merged + merged + merged * out)
        return replicated, sharded
    raise ValueError(f"unknown vision tower kind {v.kind}")


def total_params(m: ModelSpec) -> int:
    """Parameter count of the whole checkpoint (TP=1, every layer), for comparison with published counts."""
    return weight_breakdown(m, tp=1, rotary_cache=False).params


def expert_bytes_per_rank(m: ModelSpec, tp: int, dtype: str | None = None, quant: Quantization | None = None,
                          mxfp4_pad: Mxfp4Pad = VLLM_MXFP4_PAD, read: bool = False) -> tuple[int, int]:
    """(bytes, params) of one routed expert of one MoE layer on one rank, as allocated (mxfp4 experts padded to the
    kernels' tiles: the padded tensor is what the kernel reads; where an engine keeps the loaded scales beside the
    swizzled ones, Mxfp4Layout.keeps_checkpoint_scales, their share is counted here too, so that a model's bytes
    less its experts' are its dense weights; `read`: without them, what a step that touches the expert reads);
    (0, 0) for a dense model."""
    if m.moe is None:
        return 0, 0
    q = quant if quant is not None else m.quantization
    return _expert_bytes(m, tp, DTYPE_BYTES[dtype or m.dtype], q, mxfp4_pad, read), _expert_params(m, tp)


def _expert_params(m: ModelSpec, tp: int) -> int:
    """Parameters of one routed expert on one rank: its up-projections and its down-projection (up_projections + 1)
    between its width (expert_hidden) and its intermediate size split over `tp`."""
    assert m.moe is not None
    return (up_projections(m) + 1) * expert_hidden(m.moe, m.hidden_size) * (m.moe.expert_intermediate_size // tp)


def _expert_bytes(m: ModelSpec, tp: int, wb: int, q: Quantization | None,
                  mxfp4_pad: Mxfp4Pad = VLLM_MXFP4_PAD, read: bool = False) -> int:
    """Bytes of one routed expert of one MoE layer on one rank with the quantization `q` already resolved."""
    assert m.moe is not None
    h, inter = expert_hidden(m.moe, m.hidden_size), m.moe.expert_intermediate_size // tp
    layout = Mxfp4Layout.of(mxfp4_pad).at_tp(tp)
    h_pad, inter_pad = mxfp4_expert_dims(h, inter, layout) if (q and q.method == "mxfp4") else (h, inter)
    bias = m.moe.expert_bias
    if q and q.method == "mxfp4" and layout.swizzled:
        # the kernel's own layout (Mxfp4Layout): gate/up (2 x intermediate, hidden) and down (hidden, intermediate)
        return (mxfp4_linear_bytes(2 * inter_pad, h_pad, layout, wb, bias, read)
                + mxfp4_linear_bytes(h_pad, inter_pad, layout, wb, bias, read))
    ups = up_projections(m)
    return (linear_bytes(ups * inter_pad, h_pad, wb, q, bias=bias)
            + linear_bytes(h_pad, inter_pad, wb, q, bias=bias))
