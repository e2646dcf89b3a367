"""KV-cache bytes: per token for every layer in the engine's block pool, and per request.

The pool is shared by the target's attention layers and the drafter's (a separate draft model, an
EAGLE/EAGLE-3 head, MTP layers). Bytes are per GPU (one tensor-parallel rank).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from .specs import DTYPE_BYTES, ModelSpec, StateLayer
from .units import ceil_div
from .weights import kv_heads_per_rank


@dataclass(frozen=True, eq=False)  # identity equality: layer tuples are cached and hashed often
class KVLayer:
    owner: str  # "target" or "draft"
    kind: str  # full / sliding / chunked / mla, or "state" (a linear-attention / state-space layer)
    window: int | None
    bytes_per_token: int  # on one GPU (0 for a state layer)
    state_bytes: int = 0  # a state layer: its conv + recurrent state for one sequence, on one GPU
    state_pages: int = 0  # a state layer: pool pages one sequence holds in it for its lifetime
    # a windowed layer kept in a pool of its own that holds this share of the main pool's tokens (SGLang's hybrid SWA
    # pool, --swa-full-tokens-ratio; its bytes_per_token then that share of the layer's): a sequence holds the larger
    # of its main-pool blocks and its window's blocks over the share (BlockRule.split); 0: in the one pool
    pool_share: float = 0.0


def mamba2_groups_per_rank(groups: int, tp: int) -> int:
    """vLLM replicates mamba2 groups so that every rank holds the groups its heads need
    (MambaStateShapeCalculator.extra_groups_for_head_shards): groups + (tp - groups) when tp does not divide them."""
    return groups if groups % tp == 0 else groups + tp - groups


def state_bytes(layer: StateLayer, tp: int, conv_bytes: int, ssm_bytes: int, num_spec: int = 0) -> int:
    """One sequence's state in one layer on one GPU, as vLLM allocates it (mamba_utils.py
    MambaStateShapeCalculator): a conv window of (kernel - 1 [+ k with speculation]) rows over the layer's conv
    channels, split by TP, and the recurrent state, split by heads."""
    if layer.kind == "gated_delta_net":
        conv_dim = 2 * layer.groups * layer.state_dim + layer.heads * layer.head_dim
        conv = conv_dim // tp * (layer.conv_kernel - 1 + num_spec)
        return conv * conv_bytes + layer.heads // tp * layer.head_dim * layer.state_dim * ssm_bytes
    if layer.kind == "mamba2":
        conv_dim = layer.intermediate + 2 * mamba2_groups_per_rank(layer.groups, tp) * layer.state_dim
        conv = conv_dim // tp * (layer.conv_kernel - 1 + num_spec)
        return conv * conv_bytes + layer.heads // tp * layer.head_dim * layer.state_dim * ssm_bytes
    channels = layer.intermediate // tp  # mamba1: no speculative conv rows
    return channels * (layer.conv_kernel - 1) * conv_bytes + channels * layer.state_dim * ssm_bytes


@lru_cache(maxsize=1024)
def model_state_layers(m: ModelSpec, tp: int, conv_bytes: int, ssm_bytes: int | None, owner: str, num_spec: int,
                       pages: int, pp: int = 1) -> tuple[KVLayer, ...]:
    """The state layers of `m` on one GPU (the first PP stage), each holding `pages` pool pages per sequence.
    `ssm_bytes` None: each layer's own state dtype (its config's, else the model dtype's `conv_bytes`)."""
    chosen = m.state_layers[: ceil_div(len(m.state_layers), pp)] if pp > 1 else m.state_layers
    out = []
    for layer in chosen:
        ssm = ssm_bytes if ssm_bytes is not None else DTYPE_BYTES.get(layer.ssm_dtype or "", conv_bytes)
        out.append(KVLayer(owner=owner, kind="state", window=None, bytes_per_token=0,
                           state_bytes=state_bytes(layer, tp, conv_bytes, ssm, num_spec), state_pages=pages))
    return tuple(out)


@dataclass(frozen=True)
class HybridPool:
    """vLLM V1's one block pool for attention and state layers (vllm/v1/core/kv_cache_utils.py,
    _get_kv_cache_groups_uniform_page_size and get_kv_cache_config_from_groups): every layer's page (one block)
    has the same bytes, the state's padded up to the attention page; layers are grouped `group_size` at a time
    (the smaller layer count of the kinds, or the larger when it is under 1.5x the smaller), and one pool block
    is one page of every layer of a group. A sequence holds ceil(tokens / block_size) blocks in each attention
    group and `state_pages` blocks in each state group (1 + k, or 2 + k when prefix caching aligns the state)."""

    block_size: int
    page_bytes: int
    group_size: int
    attention_groups: int
    state_groups: int
    state_pages: int
    state_bytes: int  # one sequence's state over every state layer on this GPU, unpadded

    @property
    def block_bytes(self) -> int:
        return self.group_size * self.page_bytes

    @property
    def groups(self) -> int:
        return self.attention_groups + self.state_groups

    @property
    def state_blocks(self) -> int:
        """Pool blocks one sequence's state holds, however long it is."""
        return self.state_groups * self.state_pages

    def request_blocks(self, tokens: int) -> int:
        """Pool blocks one sequence of `tokens` tokens holds: its KV in every attention group, its state."""
        return self.attention_groups * ceil_div(tokens, self.block_size) + self.state_blocks


def is_hybrid(layers: tuple[KVLayer, ...]) -> bool:
    return any(layer.kind == "state" for layer in layers)


@lru_cache(maxsize=4096)
def hybrid_pool(layers: tuple[KVLayer, ...], block_size: int) -> HybridPool | None:
    """The pool of a model with state layers (None without them), at an already aligned `block_size`."""
    states = [layer for layer in layers if layer.kind == "state"]
    if not states:
        return None
    attention = [layer for layer in layers if layer.kind != "state"]
    # attention layers of one shape form one bucket (a drafter's of another shape its own); in a hybrid pool a
    # windowed layer is charged like a full one (a conservative simplification)
    buckets: dict[int, int] = {}
    for layer in attention:
        buckets[layer.bytes_per_token] = buckets.get(layer.bytes_per_token, 0) + 1
    page = max([block_size * per_token for per_token in buckets] + [max(s.state_bytes for s in states)])
    counts = [*buckets.values(), len(states)]
    group_size = min(counts)
    if max(counts) < 1.5 * min(counts):
        group_size = max(counts)
    return HybridPool(block_size=block_size, page_bytes=page, group_size=group_size,
                      attention_groups=sum(ceil_div(n, group_size) for n in buckets.values()),
                      state_groups=ceil_div(len(states), group_size),
                      state_pages=max(s.state_pages for s in states),
                      state_bytes=sum(s.state_bytes for s in states))


def hybrid_block_size(attention_bytes_per_token: int, state_page_bytes: int, requested: int,
                      kernel_block: int = 16) -> int:
    """The block size vLLM raises a hybrid model's attention to, so that one attention page holds one layer's state
    (vllm/platforms/interface.py, Platform._align_hybrid_block_size): a multiple of max(kernel block, requested)
    tokens, never below the requested size."""
    if attention_bytes_per_token <= 0 or state_page_bytes <= 0:
        return requested
    align = max(kernel_block, requested)
    aligned = align * ceil_div(state_page_bytes, align * attention_bytes_per_token)
    return max(requested, aligned)


@lru_cache(maxsize=1024)
def pool_layer_slots(layers: tuple[KVLayer, ...]) -> tuple[KVLayer, ...]:
    """The layer slots vLLM V1 allocates for an attention-only pool of several attention kinds (Gemma-3's sliding and
    full layers, Llama-4's chunked and full): layers of one spec form a bucket, buckets are cut into groups of
    `group_size` layers (the smallest bucket, or the largest when it is under 1.5x the smallest), the last group of
    a bucket padded, and every group holds a page per slot in each pool block
    (vllm/v1/core/kv_cache_utils.py, _get_kv_cache_groups_uniform_page_size; get_kv_cache_config_from_groups
    divides the memory by page size x group size). A request holds each group's blocks, padding slots included:
    the slots are each bucket's layers and, as padding, copies of its last layer. Gemma-3-27B: 52 sliding + 10 full
    layers -> 7 groups of 10, 70 slots for 62 layers. `layers` itself when one kind fills the pool, with state
    layers (core.kvcache.HybridPool) or when the layers' bytes per token differ (not grouped this way)."""
    if not layers or is_hybrid(layers) or len({layer.bytes_per_token for layer in layers}) != 1:
        return layers
    buckets: dict[tuple[str, int | None], list[KVLayer]] = {}
    for layer in layers:
        buckets.setdefault((layer.kind, layer.window if layer.kind != "full" else None), []).append(layer)
    if len(buckets) == 1:
        return layers
    counts = [len(members) for members in buckets.values()]
    group_size = max(counts) if max(counts) < 1.5 * min(counts) else min(counts)
    slots: list[KVLayer] = []
    for members in buckets.values():
        slots += members + [members[-1]] * (ceil_div(len(members), group_size) * group_size - len(members))
    return tuple(slots) if len(slots) != len(layers) else layers


# vLLM's NVFP4 KV cache (kv_cache_dtype "nvfp4", served from 0.21: AccountingProfile.nvfp4_kv): each head's key, and
# its value, packed two values a byte with one fp8 scale per 16 values, head_size // 2 + head_size // 16 uint8 a head
# a token (utils/torch_utils.py nvfp4_kv_cache_full_dim; v1/kv_cache_interface.py AttentionSpec.real_page_size_bytes:
# 2 x block x heads x that; in 0.21.0 and 0.32.0):
# 72 B a head for keys and 72 for values at head_dim 128. Its bytes a value are no whole number, so the settings carry
# it as this marker in place of the bytes a value (ResolvedSettings.kv_dtype_bytes), read by kv_head_bytes only
NVFP4_KV_BYTES = 0


def kv_head_bytes(head_dim: int, kv_dtype_bytes: int) -> int:
    """Bytes one KV head's key (or value) takes a token in the cache: head_dim values of kv_dtype_bytes, or NVFP4's
    packed values and block scales (NVFP4_KV_BYTES)."""
    if kv_dtype_bytes == NVFP4_KV_BYTES:
        return head_dim // 2 + head_dim // 16
    return head_dim * kv_dtype_bytes


@lru_cache(maxsize=4096)
def model_kv_layers(m: ModelSpec, tp: int, kv_dtype_bytes: int, owner: str, pp: int = 1,
                    layers: int | None = None, mla_latent: bool = True) -> tuple[KVLayer, ...]:
    """The KV layers of `m` held on one GPU of a TP x PP instance (the first, busiest stage with PP).

    `layers` limits to the first N attention layers (MTP: the drafter's layers are shaped like the target's);
    `mla_latent` False: an engine without MLA kernels caches an MLA model's keys and values decompressed, every head's,
    both at qk_nope + qk_rope wide (the values zero-padded to it), split by TP (AccountingProfile.mla_latent_cache).
    """
    chosen = m.layers if layers is None else tuple(m.layers[i % len(m.layers)] for i in range(layers))
    if pp > 1:
        chosen = chosen[: ceil_div(len(chosen), pp)]
    out = []
    for layer in chosen:
        if layer.kind == "mla" and not mla_latent and m.mla is not None:
            width = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim
            per_token = 2 * kv_heads_per_rank(m.num_attention_heads, tp) * width * kv_dtype_bytes
            out.append(KVLayer(owner=owner, kind="full", window=None, bytes_per_token=per_token))
            continue
        if layer.kind == "mla":
            per_token = layer.mla_width * kv_dtype_bytes  # one latent per token, shared by all heads, not sharded
            if layer.indexer_head_dim:  # DeepSeek-V3.2: the sparse indexer's key, in the same block pool
                per_token = indexed_mla_bytes(layer.mla_width, layer.indexer_head_dim, kv_dtype_bytes)
        else:
            per_token = 2 * kv_heads_per_rank(layer.num_kv_heads, tp) * kv_head_bytes(layer.head_dim, kv_dtype_bytes)
        out.append(KVLayer(owner=owner, kind=layer.kind, window=layer.window, bytes_per_token=per_token))
    return tuple(out)


# DeepSeek-V3.2's indexer key cache: vllm/model_executor/models/deepseek_v2.py Indexer builds DeepseekV32IndexerCache
# with head_dim = index_head_dim + index_head_dim // quant_block_size * 4 and dtype torch.uint8 (fp8 values and one
# fp32 scale per 128; quant_block_size = 128), whose get_kv_cache_spec is an MLAAttentionSpec of one head at the pool's
# block size: 132 bytes a token a layer for index_head_dim 128, whatever the KV cache dtype
INDEXER_QUANT_BLOCK = 128
# the latent under --kv-cache-dtype fp8 on DeepSeek-V3.2: vLLM's DeepseekV32ForCausalLM.verify_and_update_config turns
# any fp8 cache dtype into "fp8_ds_mla", whose MLAAttentionSpec page is 656 bytes a token (kv_cache_interface.py:
# 512 fp8 latent values, 4 fp32 scales, the 64 rope values kept in bf16)
FP8_DS_MLA_BYTES = 656


def indexed_mla_bytes(mla_width: int, index_head_dim: int, kv_dtype_bytes: int) -> int:
    """Bytes a token of one DeepSeek-V3.2 layer holds on every GPU: the MLA latent (kv_lora_rank + qk_rope_head_dim
    in the cache dtype, or fp8_ds_mla's 656 with an fp8 cache) and the indexer's quantized key."""
    latent = FP8_DS_MLA_BYTES if kv_dtype_bytes == 1 and mla_width == 576 else mla_width * kv_dtype_bytes
    return latent + index_head_dim + index_head_dim // INDEXER_QUANT_BLOCK * 4


@lru_cache(maxsize=8192)
def bytes_per_token(layers: tuple[KVLayer, ...], owner: str | None = None) -> int:
    return sum(layer.bytes_per_token for layer in layers if owner is None or layer.owner == owner)


def layer_blocks(layer: KVLayer, tokens: int, block_size: int, in_flight: int = 1) -> int:
    """Blocks one sequence of `tokens` holds in `layer` at steady state.

    A full-attention layer holds every token. A sliding-window layer holds the window plus what is being
    written this step (`in_flight` tokens: 1 for decode, k+1 for verification), plus the partly filled
    block; a chunked-local layer holds at most one chunk plus a block.
    """
    if tokens <= 0:
        return 0
    full = ceil_div(tokens, block_size)
    cap = window_cap(layer.kind, layer.window, block_size, in_flight)
    return full if cap is None else min(full, cap)


def window_cap(kind: str, window: int | None, block_size: int, in_flight: int = 1) -> int | None:
    """The most blocks a windowed layer holds per sequence (None: a full-attention layer holds all)."""
    if kind == "sliding" and window:
        return ceil_div(window - 1 + in_flight, block_size) + 1
    if kind == "chunked" and window:
        return ceil_div(window, block_size) + 1
    return None


def windowed_layers(layers: tuple[KVLayer, ...]) -> tuple[int, tuple[int, ...]]:
    """(how many layers hold at most a window, the distinct windows): what the sliding-window accounting spares."""
    groups = [(count, window) for kind, window, count, _ in layer_groups(layers)
              if window is not None and window_cap(kind, window, 1) is not None]
    return sum(count for count, _ in groups), tuple(sorted({window for _, window in groups}))


def has_windows(layers: tuple[KVLayer, ...]) -> bool:
    return windowed_layers(layers)[0] > 0


@dataclass(frozen=True)
class BlockRule:
    """How many pool blocks one sequence holds, as a function of its tokens, with the layer walk done once (the
    simulator asks it for every running request at every step): `attention_groups` x ceil(tokens / block_size)
    plus `state_blocks` for a live sequence of a hybrid pool; with windows, the per-token bytes each group holds
    (`caps`: (blocks cap or None, bytes per token)) over the bytes of one token of every layer, rounded up."""

    block_size: int
    attention_groups: int = 1
    state_blocks: int = 0
    caps: tuple[tuple[int | None, int], ...] = ()
    total: int = 0
    # a separate windowed pool (KVLayer.pool_share): (its blocks cap per sequence, share numerator, denominator). A
    # sequence holds max(its blocks, ceil(min(its blocks, cap) / share)) blocks of the main pool: whichever of the two
    # pools it fills faster binds (exact for requests of one shape; for mixed shapes it charges each its own binding)
    split: tuple[int, int, int] | None = None

    def __call__(self, tokens, minimum=min):
        full = (tokens + (self.block_size - 1)) // self.block_size  # ceil: one ufunc fewer than -(-t // b)
        if self.split is not None:
            cap, numerator, denominator = self.split
            windowed = -(-minimum(full, cap) * denominator // numerator)
            return full + windowed - minimum(full, windowed)  # the larger of the two, for ints and arrays alike
        if self.state_blocks or self.attention_groups != 1:
            return self.attention_groups * full + (tokens > 0) * self.state_blocks
        if not self.caps:
            return full
        held = 0
        for cap, per_token in self.caps:
            held = held + (full if cap is None else minimum(full, cap)) * per_token
        return -(-held // self.total)


@lru_cache(maxsize=1024)
def block_rule(layers: tuple[KVLayer, ...], block_size: int, in_flight: int = 1) -> BlockRule:
    """pool_blocks' rule for these layers (cached: layer tuples compare by identity)."""
    split = _split_pool(layers, block_size, in_flight)
    if split is not None:
        return BlockRule(block_size, split=split)
    pool = hybrid_pool(layers, block_size)
    if pool is not None:  # a live sequence (tokens > 0) holds its state blocks whatever its length
        return BlockRule(block_size, pool.attention_groups, pool.state_blocks)
    total = bytes_per_token(layers)
    if not total or not has_windows(layers):
        return BlockRule(block_size)
    caps = tuple((window_cap(kind, window, block_size, in_flight), per_token)
                 for kind, window, _count, per_token in layer_groups(layers))
    return BlockRule(block_size, caps=caps, total=total)


def _split_pool(layers: tuple[KVLayer, ...], block_size: int, in_flight: int) -> tuple[int, int, int] | None:
    """BlockRule.split for layers with a separate windowed pool (KVLayer.pool_share), None without one: the
    smallest window's cap (the engine evicts its one pool at one window) and the share as a fraction."""
    shared = [layer for layer in layers if layer.pool_share]
    if not shared:
        return None
    caps = [cap for cap in (window_cap(layer.kind, layer.window, block_size, in_flight) for layer in shared)
            if cap is not None]
    share = Fraction(shared[0].pool_share).limit_denominator(1000)
    return (min(caps) if caps else 2**62), share.numerator, share.denominator


def pool_blocks(layers: tuple[KVLayer, ...], tokens, block_size: int, in_flight: int = 1, minimum=min):
    """Blocks of the engine's pool one sequence of `tokens` holds: its KV bytes (`request_kv_bytes`) over the
    bytes of one pool block (block_size tokens of every layer), rounded up; ceil(tokens / block_size) when
    every layer is full attention. Works on ints, and on integer numpy arrays with `minimum=np.minimum` (the
    simulator's per-step demand): the one owner of blocks per request (block_rule)."""
    return block_rule(layers, block_size, in_flight)(tokens, minimum)


def request_kv_bytes(layers: tuple[KVLayer, ...], tokens: int, block_size: int, in_flight: int = 1) -> int:
    """KV bytes one sequence of `tokens` (prompt + output + lookahead) needs on one GPU, in whole blocks (with state
    layers: its pool blocks, attention and state, times the bytes of one pool block)."""
    pool = hybrid_pool(layers, block_size)
    if pool is not None:
        return pool_blocks(layers, tokens, block_size, in_flight) * pool.block_bytes
    if any(layer.pool_share for layer in layers):  # a pool block: block_size tokens of every slot (BlockRule.split)
        return pool_blocks(layers, tokens, block_size, in_flight) * block_size * bytes_per_token(layers)
    total = 0
    for kind, window, _count, per_token in layer_groups(layers):
        probe = KVLayer("x", kind, window, 0)
        total += layer_blocks(probe, tokens, block_size, in_flight) * block_size * per_token
    return total


@lru_cache(maxsize=4096)
def layer_groups(layers: tuple[KVLayer, ...]) -> tuple[tuple[str, int | None, int, int], ...]:
    """(kind, window, layer count, bytes per token summed) per distinct kind and window."""
    groups: dict[tuple[str, int | None], list[int]] = {}
    for layer in layers:
        entry = groups.setdefault((layer.kind, layer.window), [0, 0])
        entry[0] += 1
        entry[1] += layer.bytes_per_token
    return tuple((kind, window, count, per_token) for (kind, window), (count, per_token) in groups.items())
