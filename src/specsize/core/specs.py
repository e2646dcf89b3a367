"""Domain objects. Validated at the boundary (catalog loaders, CLI); the core trusts them.

Sizes are in the model's own units (heads, dims, tokens); bytes are ints.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Literal

from .errors import SpecError
from .speculation import (SPEC_METHODS, DrafterKind, SpecMethod, Tree, drafter_kind,  # noqa: F401 - SPEC_METHODS re-exported
                          verified_per_sequence)

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# The one MTP step specsize models for Nemotron-H: an attention layer then an MoE layer ("*E", NemotronHConfig's
# default mtp_layers_block_type ["full_attention", "moe"], every published Nemotron-3 checkpoint's), built once (vLLM
# 0.32 nemotron_h_mtp.py NemotronHMultiTokenPredictor: "Only one MTP layer is supported for NemotronH-MTP", and a
# NotImplementedError for any letter but * and E); core.weights counts its weights, planner.plan refuses another
NEMOTRON_H_MTP_STEP = "*E"
DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32", "float32": "float32",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp16": "float16", "half": "float16", "float16": "float16",
}
# nvfp4: vLLM's NVFP4 KV cache, 0.20 on (config/cache.py CacheDType; AccountingProfile.nvfp4_kv)
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16", "float32", "nvfp4")
QUANT_METHODS = ("none", "fp8", "int8", "int4", "mxfp4", "nvfp4")
# The engines' own --quantization names for those formats, accepted as the override too (vLLM's
# model_executor/layers/quantization/__init__.py QuantizationMethods; SGLang's server_args.py QUANTIZATION_CHOICES):
# AWQ and GPTQ are 4-bit integer weights in groups of 128 (AWQ with zero points, GPTQ symmetric by default), ModelOpt's
# are fp8 and nvfp4, SGLang's w8a8_int8 is 8-bit integer weights
QUANT_ALIASES = {"awq": "int4", "awq_marlin": "int4", "gptq": "int4", "gptq_marlin": "int4", "fbgemm_fp8": "fp8",
                 "modelopt": "fp8", "modelopt_fp4": "nvfp4", "w8a8_int8": "int8",
                 # vLLM's in-flight bitsandbytes (0.9.2 - 0.27, model_loader/bitsandbytes_loader.py
                 # _unquantized_generator): quantize_4bit(quant_type="nf4", compress_statistics=True) at its default
                 # blocks of 64, the nested absmax dequantized back to float32 at load (_bind_quant_states_to_params
                 # _dequantize_dq): core.weights.linear_bytes "bnb4", as a 4-bit checkpoint
                 "bitsandbytes": "bnb4"}
QUANT_NAMES = QUANT_METHODS + tuple(QUANT_ALIASES)  # what a quantization override accepts
# The override names the engines make from unquantized weights while loading them (vLLM's and SGLang's --quantization
# fp8 on a bf16 checkpoint: dynamic fp8, "quantized at load"); every other name (ModelOpt's and FBGEMM's fp8 included)
# needs a checkpoint stored in that format
QUANTIZED_AT_LOAD = ("fp8", "bitsandbytes")

AttentionKind = Literal["full", "sliding", "chunked", "mla"]
StateKind = Literal["gated_delta_net", "mamba2", "mamba1"]
MixerKind = Literal["attention", "state", "both", "none"]


def canonical_dtype(value: str, field_name: str = "dtype") -> str:
    key = str(value).lower()
    if key not in DTYPE_ALIASES:
        raise SpecError(field_name, f"unknown dtype {value!r}", "bfloat16, float16, float32 (or bf16, fp16, fp32)")
    return DTYPE_ALIASES[key]


@dataclass(frozen=True)
class AttentionLayer:
    """The KV-cache shape of one attention layer (whole model, before tensor parallelism)."""

    kind: AttentionKind
    num_kv_heads: int = 0
    head_dim: int = 0
    window: int | None = None  # sliding window or attention chunk, tokens
    mla_width: int = 0  # kv_lora_rank + qk_rope_head_dim, values per token (MLA only)
    # DeepSeek-V3.2's sparse-attention indexer beside the MLA latent (index_n_heads, index_head_dim; 0 without one)
    indexer_heads: int = 0
    indexer_head_dim: int = 0
    indexer_topk: int = 0  # the latents each token attends to (index_topk)


@dataclass(frozen=True)
class StateLayer:
    """A linear-attention or state-space mixer (whole model, before tensor parallelism): instead of KV that grows
    with the context it keeps a fixed-size state per sequence, a causal-convolution window and a recurrent state,
    for the sequence's whole lifetime. Fields follow vLLM's MambaStateShapeCalculator
    (vllm/model_executor/layers/mamba/mamba_utils.py):

    - gated_delta_net (Qwen3-Next, Qwen3.5/3.6): heads = value heads, head_dim = value head dim, state_dim = key
      head dim, groups = key heads; conv channels 2 x key heads x key dim + value heads x value dim.
    - mamba2 (Nemotron-H, Granite-4.0-H, Falcon-H1): heads, head_dim, state_dim = ssm state size, groups = n_groups,
      intermediate = heads x head_dim (or the config's own); conv channels intermediate + 2 x groups x state_dim.
    - mamba1 (Jamba): intermediate channels, state_dim, dt_rank.
    """

    kind: StateKind
    conv_kernel: int
    state_dim: int
    heads: int = 0
    head_dim: int = 0
    groups: int = 0
    intermediate: int = 0
    dt_rank: int = 0
    conv_bias: bool = False
    proj_bias: bool = False
    ssm_dtype: str | None = None  # the recurrent state's dtype the model's config asks for (None: the model dtype)


@dataclass(frozen=True)
class MoESpec:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0
    moe_layers: tuple[int, ...] = ()  # indices of MoE layers; the others are dense
    expert_bias: bool = False  # gpt-oss experts carry biases
    router_bias: bool = False  # a float32 bias per expert beside the router (DeepSeek-V3's noaux_tc and the like)
    router_fp32: bool = False  # the router's weight itself float32 (GLM-4.5, MiniMax-M2), not the model dtype


@dataclass(frozen=True)
class MLASpec:
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class VisionSpec:
    """A multimodal target's vision tower and projector, from its config's vision section.

    `kind` names the tower family whose layout the weight count follows (vLLM's module for it):
    siglip (Gemma 3), llama4 (Llama 4), pixtral (Mistral 3 / Mistral-Small-3.1), qwen2_vl (Qwen2-VL),
    qwen2_5_vl (Qwen2.5-VL), qwen3_vl (Qwen3-VL and the Qwen3.5 / Qwen3.6 checkpoints, which reuse its tower).
    """

    kind: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    patch_size: int
    image_size: int  # pixels per side of the largest image the tower takes in one piece (a tile)
    tokens_per_image: int  # the most embedding tokens one image becomes (vLLM's max tokens per item)
    patches_per_image: int  # patches the tower runs over for that image (before any merging/pooling)
    projector_input: int = 0  # llama4: vision adapter output width (projector_input_dim)
    projector_output: int = 0  # llama4: vision_output_dim; qwen3_vl: out_hidden_size (the mergers' output width)
    num_channels: int = 3
    temporal_patch_size: int = 1  # qwen2_vl, qwen2_5_vl, qwen3_vl: frames per patch
    spatial_merge_size: int = 1  # qwen3_vl: patches merged per side into one token (its mergers' input is merge^2 x hidden)
    position_embeddings: int = 0  # qwen3_vl: rows of its learned position table (num_position_embeddings)
    deepstack_mergers: int = 0  # qwen3_vl: mergers beside the final one (len(deepstack_visual_indexes))
    source: str = ""  # where tokens_per_image comes from


@dataclass(frozen=True)
class Quantization:
    """How the linear-layer weights are stored. Embeddings, lm_head, norms and routers stay in the model dtype."""

    method: str  # one of QUANT_METHODS except none
    group_size: int | None = None  # int4: values per scale group; fp8: None = per-channel
    block: tuple[int, int] | None = None  # fp8 block scales (DeepSeek-V3: 128x128)
    # the blocks are a native fp8 checkpoint's (quant_method fp8), whose fused-MoE scales vLLM 0.29 and later refine to
    # fit a TP split (engines.block_fp8); compressed-tensors' block fp8 MoE never refines
    moe_block_refine: bool = False
    has_zeros: bool = True  # int4 asymmetric (AWQ / GPTQ zero points)
    experts_only: bool = False  # mxfp4 in gpt-oss: only the MoE experts are quantized
    source: str = "declared"  # "declared" (checkpoint quantization_config) or "override"
    # the modules the checkpoint keeps in the model dtype, as its quantization_config names them (fbgemm_fp8's
    # modules_to_not_convert, fp8's ignored_layers, compressed-tensors' ignore): module names, globs with "*",
    # or "re:" regular expressions. core.weights.unquantized_layers reads them per layer
    unquantized: tuple[str, ...] = ()
    # the KV cache dtype the checkpoint was calibrated for (a ModelOpt kv_cache_quant_algo: "fp8" or "nvfp4"), which
    # vLLM 0.14 and later serve under kv_cache_dtype auto (AccountingProfile.checkpoint_kv_dtype); None without one
    kv_cache_dtype: str | None = None
    # the checkpoint's quantization_config.quant_method as the engine reads it (fp8, fbgemm_fp8, awq, gptq,
    # compressed-tensors, mxfp4, modelopt, bitsandbytes; "" for an override or a format given by name), which decides
    # what else the engine's quantization config does (core.memory: its attention layers' KV scales)
    config_method: str = ""

    @property
    def compressed_tensors(self) -> bool:
        """Whether the checkpoint declares its format through a compressed-tensors config (either spelling)."""
        return self.config_method.replace("_", "-") == "compressed-tensors"


VARIANT_SOURCE = "variant"  # the source prefix of a published variant of a catalog model (catalog.variants)
DERIVED_SOURCE = "derived"  # the source prefix of a drafter head built from the target's config
DERIVED_LABEL_END = ", derived)"  # the end of such a head's model_id where the user named none (derived_label)


def derived_label(target_id: str, what: str) -> str:
    """The model_id of a drafter head derived from `target_id`'s config where the user named none: a label, not a
    checkpoint ("meta-llama/Llama-3.1-8B-Instruct (EAGLE-3 head, derived)"; ModelSpec.names_checkpoint)."""
    return f"{target_id} ({what}{DERIVED_LABEL_END}"


@dataclass(frozen=True, eq=False)  # identity equality: cheap hashing for the caches keyed on models
class ModelSpec:
    model_id: str
    source: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    layers: tuple[AttentionLayer, ...]
    max_position_embeddings: int
    dtype: str = "bfloat16"
    # the config's own top-level model_type where it wraps a language model of another (mistral3 around mistral,
    # qwen3_5 around qwen3_5_text): what the engine's model registry loads (engines.support); "" for the same
    checkpoint_type: str = ""
    # the longest max_model_len the engine accepts, and its default, where the config's rope_scaling or its other
    # length keys make it differ from max_position_embeddings (catalog.configs.derived_max_model_len); None: the same
    derived_max_model_len: int | None = None
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    rotary_dim: int = 0
    # positions of each distinct rotary cos/sin cache the engine builds (empty: one of max_position_embeddings);
    # Gemma-3: a local cache and a linear-scaled global one (catalog.configs._rotary_caches)
    rotary_cache_positions: tuple[int, ...] = ()
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    quantization: Quantization | None = None
    # a compressed-tensors checkpoint that declares a kv_cache_scheme (llm-compressor's calibrated fp8 KV cache), with
    # or without weight schemes: vLLM serves its KV cache in fp8 by its own rule per release
    # (AccountingProfile.ct_kv_cache_scheme), whatever the scheme's fields say (model_executor/layers/attention/
    # attention.py Attention.__init__: kv_cache_dtype = "fp8"); the checkpoint's, so a quantization override keeps it
    kv_cache_scheme: bool = False
    num_mtp_layers: int = 0
    # the layer kinds of one MTP step as the engine builds it, in hybrid_override_pattern letters (Nemotron-H's
    # mtp_hybrid_override_pattern); "" for a DeepSeek-style step (enorm, hnorm, eh_proj and one decoder layer)
    mtp_step: str = ""
    draft_vocab_size: int | None = None  # EAGLE-3 reduced lm_head
    eagle_fc_inputs: int = 0  # EAGLE fuses 2 (EAGLE-1) or 3 (EAGLE-3) hidden states through an fc layer
    final_logit_softcapping: float | None = None
    weight_bytes_exact: int | None = None  # whole checkpoint as stored, from safetensors headers
    # of those, the floating-point tensors (F64/F32/F16/BF16, quantization scales aside): bytes as stored and elements
    # (None: not known, e.g. an index's total_size alone); the engine loads them at the served dtype
    weight_float_bytes: int = 0
    weight_float_elements: int | None = None
    params_published: str | None = None
    vision: VisionSpec | None = None  # a multimodal target's vision tower and projector
    own_embedding: bool = False  # a speculator head that ships its own input embedding (its weights say so)
    # hybrid models: what mixes tokens in each layer ("attention", "state", "both", "none"); empty: attention in
    # every layer. `layers` holds the attention layers only, `state_layers` one entry per state mixer, in order.
    mixers: tuple[MixerKind, ...] = ()
    state_layers: tuple[StateLayer, ...] = ()
    mlp_layers: tuple[int, ...] | None = None  # layers with an MLP / MoE block (None: every layer)
    attention_output_gate: bool = False  # Qwen3-Next / Qwen3.5: q_proj also projects a per-head output gate
    gated_mlp: bool = True  # False: up + down only (Nemotron-H's squared-ReLU MLP)

    @property
    def is_derived(self) -> bool:
        """A drafter head built from the target's config (no readable checkpoint config of its own was given)."""
        return self.source.startswith(DERIVED_SOURCE)

    @property
    def is_head(self) -> bool:
        """A drafter head's config, not a model that runs on its own: an EAGLE-3 head (the fc fusing the target's
        hidden states), an EAGLE head (one decoder layer over the target's features) or Medusa's heads (none)."""
        return bool(self.eagle_fc_inputs) or self.num_layers <= 1

    @property
    def names_checkpoint(self) -> bool:
        """Its model_id names a checkpoint an engine can load: every model but a derived head labelled after its
        target ("... (EAGLE-3 head, derived)"); a head derived in place of a named one that could not be read keeps
        that name (catalog.configs.standard_head)."""
        return not (self.is_derived and self.model_id.endswith(DERIVED_LABEL_END))

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def max_model_len_limit(self) -> int:
        """The longest context vLLM serves this model at, and its default max_model_len."""
        return self.derived_max_model_len or self.max_position_embeddings

    def context_limit(self, engine: str) -> int:
        """The longest context `engine` serves this model at, and its default. SGLang's own reading of the config
        (hf_transformers_utils.get_context_length) applies no rope factor beside original_max_position_embeddings
        and starts no longer context unless told to (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN): its plans keep
        max_position_embeddings, vLLM's the length vLLM derives."""
        return self.max_position_embeddings if engine == "sglang" else self.max_model_len_limit

    def weight_bytes_served(self, dtype: str) -> int | None:
        """The checkpoint's bytes once loaded in `dtype` (a DTYPE_BYTES key): vLLM casts unquantized floating-point
        tensors to the served dtype (model_loader/weight_utils.py default_weight_loader copies into parameters made
        in it); integer, fp8 and packed tensors and scales stay as stored. None without exact bytes, or where the
        stored floating-point share is not known, or `dtype` is not one the engines serve in."""
        if not self.weight_bytes_exact or self.weight_float_elements is None or dtype not in DTYPE_BYTES:
            return None
        return self.weight_bytes_exact - self.weight_float_bytes + self.weight_float_elements * DTYPE_BYTES[dtype]

    @property
    def is_hybrid(self) -> bool:
        """Some layers keep a per-sequence recurrent state (linear attention / state-space) instead of KV."""
        return bool(self.state_layers)

    def mixer(self, layer: int) -> MixerKind:
        """What mixes tokens in `layer` (MTP layers beyond the model are attention layers)."""
        return self.mixers[layer] if self.mixers and layer < len(self.mixers) else "attention"

    def with_(self, **changes) -> "ModelSpec":
        return replace(self, **changes)

    def as_eagle_head(self) -> "ModelSpec":
        """Served as method eagle, a one-layer Llama-style config is an EAGLE-1 head: it fuses 2 hidden states
        (fc 2H -> H); an EAGLE-3 head (3H -> H) is kept as it is."""
        return self if self.eagle_fc_inputs else self.with_(eagle_fc_inputs=2)


def medusa_at_k(heads: ModelSpec, k: int) -> ModelSpec:
    """Medusa heads as vLLM runs them at k: k heads whatever the checkpoint declares. SpeculativeConfig writes
    num_speculative_tokens into the draft config's num_lookahead_tokens, whose MedusaConfig setter sets num_heads
    (vllm/transformers_utils/configs/medusa.py: "self.num_heads = num_lookahead_tokens"), and MedusaProposer.propose
    runs every head once (vllm/v1/spec_decode/medusa.py). catalog.configs.medusa_heads holds them as one residual
    fc of heads x H x H and one lm_head of heads x vocab rows (eagle_fc_inputs = heads); a speed-up table's rows at
    other k than the deployment's had been priced with the deployment's heads (-k 1,4,8 and -k 8,4,1 disagreed)."""
    per_head = heads.eagle_fc_inputs
    if heads.num_layers or per_head <= 0 or k <= 0 or per_head == k or heads.vocab_size % per_head:
        return heads  # not catalog.configs.medusa_heads' shape (a draft config given as medusa), or already k heads
    return heads.with_(vocab_size=heads.vocab_size // per_head * k, eagle_fc_inputs=k)


@dataclass(frozen=True)
class GpuSpec:
    gpu_id: str
    name: str
    memory_bytes: int  # as the driver reports it (what torch.cuda.mem_get_info gives as total)
    memory_bandwidth_bytes_s: float
    bf16_flops: float  # dense
    fp8_flops: float | None  # dense; None where the card has no fp8 tensor cores
    interconnect_bytes_s: float  # per GPU, one direction
    vendor: str = "nvidia"
    family: str = "unknown"  # selects the calibrated efficiencies of the performance model
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    segment: str = "datacenter"  # consumer / workstation cards often share memory with a desktop or WSL

    @property
    def compute_capability_10(self) -> bool:
        """NVIDIA's datacenter Blackwell (B200, GB200, B300, GB300: compute capability 10.x, the sm100 engines test
        for); its workstation and consumer cards are 12.x (CUDA GPUs list, developer.nvidia.com/cuda-gpus)."""
        return self.vendor == "nvidia" and self.family == "blackwell" and self.segment == "datacenter"


@dataclass(frozen=True)
class SpeculativeConfig:
    method: SpecMethod = SpecMethod.NONE
    draft: ModelSpec | None = None  # draft_model / eagle / eagle3 / medusa head config; None for mtp/ngram/none
    num_speculative_tokens: int = 0
    draft_tp: int = 1
    tree_topk: int = 1  # tree drafting (SGLang --speculative-eagle-topk): branches per depth
    num_draft_tokens: int | None = None  # tokens verified per sequence (SGLang); None: a chain of k + 1
    # the share of a sequence's decode steps in which the drafter proposes: an n-gram lookup that finds no match
    # proposes nothing and that step verifies one token (vLLM: spec_decode_num_drafts / decode steps); model
    # drafters always propose (1)
    proposal_rate: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.method, SpecMethod):
            object.__setattr__(self, "method", SpecMethod.parse(self.method))

    @property
    def enabled(self) -> bool:
        return self.method != SpecMethod.NONE

    @property
    def kind(self) -> DrafterKind:
        return drafter_kind(self.method)

    @property
    def verified_per_sequence(self) -> float:
        """Positions a chain's verification scores per sequence, on average (core.speculation)."""
        return verified_per_sequence(self.num_speculative_tokens, self.proposal_rate)

    @property
    def drafter_tp(self) -> int | None:
        """The drafter's own TP size when it has one (a separate draft model); None: the target's."""
        return self.draft_tp if self.kind.own_tp else None

    @property
    def tree(self) -> Tree:
        """The drafting tree the steps are priced with (a chain: top-k 1)."""
        return Tree(topk=self.tree_topk, num_draft_tokens=self.num_draft_tokens)


@dataclass(frozen=True)
class EngineSettings:
    """What the user sets on the engine. None means: the engine version's default."""

    gpu_memory_utilization: float | None = None  # None: the engine profile's default
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None  # override of the checkpoint's
    enforce_eager: bool = False
    num_scheduler_steps: int = 1  # vLLM V0's --num-scheduler-steps (multi-step scheduling)
    chunked_prefill: str = "auto"  # vLLM V0's --enable-chunked-prefill: auto (its default), on, off
    kv_cache_memory_bytes: int | None = None  # vLLM's own flag: fixes the KV pool, bypassing the budget
    device: str = "cuda"
    cpu_isa: str = "avx512_bf16"  # with device cpu: the host's vector ISA (AVX-512 BF16: vLLM keeps SSM state in fp32)
    cuda_graph_max_bs: int | None = None  # largest decode batch captured in a CUDA graph (SGLang's flag)
    scheduler_recv_interval: int = 1  # SGLang's --scheduler-recv-interval: new requests taken in every N decode steps
    stream_interval: int = 1  # SGLang's --stream-interval: a request's tokens sent to the API server every N tokens


@dataclass(frozen=True)
class Deployment:
    target: ModelSpec
    gpu: GpuSpec
    speculative: SpeculativeConfig = SpeculativeConfig()
    tp: int = 1
    pp: int = 1
    num_gpus: int | None = None  # defaults to tp * pp (one engine instance); more means replicas
    engine: EngineSettings = EngineSettings()
    shared_reserved_bytes: int = 0  # memory another workload holds on each GPU (shared pools)
    # the MoE layers' routed experts split by expert over the TP group instead of by rows (vLLM's
    # --enable-expert-parallel with one data-parallel rank, SGLang's --ep-size = --tp-size)
    expert_parallel: bool = False

    @property
    def ep(self) -> int:
        """The expert-parallel ranks the target's routed experts are split over: the TP group under
        expert_parallel, 1 (split by rows over TP) otherwise or for a model without experts."""
        return self.tp if (self.expert_parallel and self.target.moe is not None and self.tp > 1) else 1

    @property
    def draft_ep(self) -> int:
        """The expert-parallel ranks of a separate MoE draft model: under expert_parallel its own TP (vLLM's
        config/speculative.py create_draft_parallel_config: enable_expert_parallel = the target's and the draft
        model's is_moe; SGLang's draft worker shares the MoE groups), 1 otherwise."""
        sp = self.speculative
        draft = sp.draft
        moe = self.expert_parallel and draft is not None and draft.moe is not None and sp.kind.own_tp
        return sp.draft_tp if (moe and sp.draft_tp > 1) else 1

    @property
    def gpus_per_instance(self) -> int:
        return self.tp * self.pp

    @property
    def quantization_override(self) -> str | None:
        """The engine's `quantization` as it changes what is served: None without one, or where it restates the
        format the checkpoint declares (the engine loads the checkpoint as stored). The memory account, the plan's
        warning, the disk plan and the launch command all read it here."""
        q = self.engine.quantization
        return None if q is None or restates_checkpoint(self.target, q) else q

    def served_unquantized(self) -> "Deployment":
        """The deployment with its weights served unquantized, as `--quantization none` serves them: what an engine
        that upcasts a checkpoint's experts at load holds and runs (ResolvedSettings.experts_upcast)."""
        return replace(self, engine=replace(self.engine, quantization="none"))

    @property
    def replicas(self) -> int:
        return max(1, (self.num_gpus or self.gpus_per_instance) // self.gpus_per_instance)

    @property
    def gpus_total(self) -> int:
        """GPUs the deployment occupies: every replica's instance."""
        return self.gpus_per_instance * self.replicas


@dataclass(frozen=True)
class LengthDistribution:
    """Token lengths by percentile. From samples, percentiles are nearest-rank."""

    p50: int
    p95: int
    p99: int
    max: int
    samples: int | None = None  # how many samples it came from, if any

    PERCENTILES = ("p50", "p95", "p99", "max")

    def at(self, percentile: str) -> int:
        if percentile not in self.PERCENTILES:
            raise SpecError("percentile", f"unknown percentile {percentile!r}", ", ".join(self.PERCENTILES))
        return getattr(self, percentile)

    @classmethod
    def from_samples(cls, values: list[int]) -> "LengthDistribution":
        if not values:
            raise SpecError("samples", "no samples given", "a non-empty list of token counts")
        ordered = sorted(values)

        def rank(q: float) -> int:
            index = max(0, -(-int(q * len(ordered) * 1000) // 1000) - 1)
            return ordered[min(index, len(ordered) - 1)]

        return cls(p50=rank(0.50), p95=rank(0.95), p99=rank(0.99), max=ordered[-1], samples=len(ordered))


@dataclass(frozen=True)
class RequestTrace:
    """Requests read from a file: arrival times in seconds from the first, prompt and output tokens, and the
    per-request acceptance when the file gives it."""

    arrival_s: list[float]
    prompt_tokens: list[int]
    output_tokens: list[int]
    acceptance: list[float] | None
    path: str = ""


def check_lengths(name: str, dist: LengthDistribution) -> LengthDistribution:
    """Percentiles that do not decrease, prompts of at least one token, outputs of at least none."""
    values = [dist.p50, dist.p95, dist.p99, dist.max]
    if any(v < (1 if name == "prompt_tokens" else 0) for v in values):
        raise SpecError(name, f"lengths must be positive, got {values}", "token counts >= 1")
    if values != sorted(values):
        raise SpecError(name, f"percentiles must not decrease (p50 <= p95 <= p99 <= max), got {values}",
                        "p50 <= p95 <= p99 <= max")
    return dist


@dataclass(frozen=True)
class Workload:
    prompt_tokens: LengthDistribution
    output_tokens: LengthDistribution
    concurrency: int
    burst_factor: float = 1.0
    percentile: str = "p99"  # the request shape of the worst-case envelope
    image_tokens_per_request: int = 0  # prompt tokens images add to every request (already in prompt_tokens)


def quantization_override(name: str | None, model: ModelSpec) -> Quantization | None:
    """The Quantization a `--quantization NAME` flag asks for; None keeps the checkpoint's own."""
    if name is None:
        return None
    given = str(name).lower()
    if given not in QUANT_NAMES:
        raise SpecError("quantization", f"unknown quantization {name!r}", ", ".join(QUANT_NAMES))
    key = quantization_format(given)
    if key == "none":
        return Quantization("none")
    if key == "int4":
        return Quantization("int4", group_size=128, has_zeros=not given.startswith("gptq"), source="override")
    if key == "bnb4":  # in-flight bitsandbytes: nf4 in blocks of 64, one float32 absmax a block (QUANT_ALIASES)
        return Quantization("bnb4", group_size=64, has_zeros=False, source="override")
    if key == "mxfp4":
        # an MoE model's experts (vLLM's Mxfp4Config quantizes fused-MoE experts only), a dense model's linear layers
        # (AMD Quark's MXFP4 checkpoints, e.g. amd/Llama-3.3-70B-Instruct-MXFP4-Preview on MI355X)
        return Quantization("mxfp4", experts_only=model.is_moe, source="override")
    # the engine's config for it (Quantization.config_method): fp8 builds Fp8Config, fbgemm_fp8 FBGEMMFp8Config, ...
    return Quantization(key, source="override", config_method=given)


def quantization_format(name: str) -> str:
    """specsize's format (QUANT_METHODS) for an override name, one of its own or an engine's (QUANT_ALIASES)."""
    given = str(name).lower()
    return QUANT_ALIASES.get(given, given)


UNQUANTIZED = "unquantized"  # checkpoint_format_needed: `none` over a checkpoint stored quantized


def checkpoint_format_needed(target: ModelSpec, name: str | None) -> str | None:
    """The format a quantization override (Deployment.quantization_override: None where there is none or it restates
    the checkpoint's own) needs the served checkpoint stored in; None: the target's checkpoint serves, as stored or
    quantized by the engine while loading (QUANTIZED_AT_LOAD, from unquantized weights only: vLLM refuses a
    --quantization other than the one a quantized checkpoint's config declares), UNQUANTIZED for `none` over a
    checkpoint stored quantized (the engines load it as stored). The one owner of this rule: the launch command, the
    disk plan and the plan's warning read it."""
    if name is None:
        return None
    given = str(name).lower()
    stored = target.quantization is not None and target.quantization.source != "override"
    if given == "none":
        return UNQUANTIZED if stored else None
    return None if given in QUANTIZED_AT_LOAD and not stored else quantization_format(given)


def effective_target(d: Deployment) -> tuple[ModelSpec, Quantization | None]:
    """The target as the engine will load it, and its weights' quantization: the checkpoint's own, or the
    `quantization` override (`none`: unquantized). An override drops the checkpoint's exact byte count, which
    describes the checkpoint's format, not the override's; one that restates the format the checkpoint declares
    changes nothing (its layout, e.g. the bf16 attention of Meta's fbgemm_fp8 405B, and its byte count stay).
    The one owner of this rule."""
    override = d.quantization_override
    if override is None:
        return d.target, d.target.quantization
    return _overridden(d.target, str(override))


def restates_checkpoint(target: ModelSpec, name: str | None) -> bool:
    """A `--quantization` naming the format the checkpoint itself declares (fp8, fbgemm_fp8 or modelopt on an fp8
    checkpoint; awq or gptq on an int4 one): the engine loads the checkpoint as stored, so the plan is the one
    without the flag (Deployment.quantization_override)."""
    q = target.quantization
    given = str(name).lower() if name is not None else "none"
    if q is not None and q.source != "override" and given == "bitsandbytes" and q.method in ("bnb4", "bnb8"):
        return True  # vLLM loads a bitsandbytes checkpoint, 8-bit too, as its quantization_config says
    return q is not None and q.source != "override" and given != "none" and quantization_format(given) == q.method


@lru_cache(maxsize=1024)  # one spec object per (model, override): the caches keyed on models keep hitting
def _overridden(target: ModelSpec, name: str) -> tuple[ModelSpec, Quantization | None]:
    override = quantization_override(name, target)
    assert override is not None  # a name was given; bad names raise SpecError above
    if override.method == "none":
        return target.with_(quantization=None, weight_bytes_exact=None), None
    return target.with_(weight_bytes_exact=None), override
