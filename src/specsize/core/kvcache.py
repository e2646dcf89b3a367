"""KV-cache bytes: per token for every layer in the engine's block pool, and per request.

The pool is shared by the target's attention layers and the drafter's (a separate draft model, an
EAGLE/EAGLE-3 head, MTP layers). Bytes are per GPU (one tensor-parallel rank).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .specs import ModelSpec
from .units import ceil_div
from .weights import kv_heads_per_rank


@dataclass(frozen=True, eq=False)  # identity equality: layer tuples are cached and hashed often
class KVLayer:
    owner: str  # "target" or "draft"
    kind: str  # full / sliding / chunked / mla
    window: int | None
    bytes_per_token: int  # on one GPU


@lru_cache(maxsize=4096)
def model_kv_layers(m: ModelSpec, tp: int, kv_dtype_bytes: int, owner: str, pp: int = 1,
                    layers: int | None = None) -> tuple[KVLayer, ...]:
    """The KV layers of `m` held on one GPU of a TP x PP instance (the first, busiest stage with PP).

    `layers` limits to the first N attention layers (MTP: the drafter's layers are shaped like the target's).
    """
    chosen = m.layers if layers is None else tuple(m.layers[i % len(m.layers)] for i in range(layers))
    if pp > 1:
        chosen = chosen[: ceil_div(len(chosen), pp)]
    out = []
    for layer in chosen:
        if layer.kind == "mla":
            per_token = layer.mla_width * kv_dtype_bytes  # one latent per token, shared by all heads, not sharded
        else:
            per_token = 2 * kv_heads_per_rank(layer.num_kv_heads, tp) * layer.head_dim * kv_dtype_bytes
        out.append(KVLayer(owner=owner, kind=layer.kind, window=layer.window, bytes_per_token=per_token))
    return tuple(out)


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


def pool_blocks(layers: tuple[KVLayer, ...], tokens, block_size: int, in_flight: int = 1, minimum=min):
    """Blocks of the engine's pool one sequence of `tokens` holds: its KV bytes (`request_kv_bytes`) over the
    bytes of one pool block (block_size tokens of every layer), rounded up; ceil(tokens / block_size) when
    every layer is full attention. Works on ints, and on integer numpy arrays with `minimum=np.minimum` (the
    simulator's per-step demand): the one owner of blocks per request."""
    full = -(-tokens // block_size)
    total = bytes_per_token(layers)
    if not total or not has_windows(layers):
        return full
    held = 0
    for kind, window, _count, per_token in layer_groups(layers):
        cap = window_cap(kind, window, block_size, in_flight)
        held = held + (full if cap is None else minimum(full, cap)) * per_token
    return -(-held // total)


def request_kv_bytes(layers: tuple[KVLayer, ...], tokens: int, block_size: int, in_flight: int = 1) -> int:
    """KV bytes one sequence of `tokens` (prompt + output + lookahead) needs on one GPU, in whole blocks."""
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
