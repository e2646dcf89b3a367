"""SGLang's memory account: `--mem-fraction-static` is not a share of the card.

Read from sgl-project/sglang (paths under python/sglang/srt/):

- model_executor/model_runner_kv_cache_mixin.py @ 001ccef0072a4537d4ec6bdd50a73e6feb2c907d,
  `profile_max_num_token`: rest = available_after_loading - total_gpu_memory x (1 - mem_fraction_static),
  tokens = int(rest x 2^30) // cell_size, then `init_memory` aligns them down to the page size. The
  `total_gpu_memory` it is given is what was FREE before the model loaded (after torch.distributed init), not
  the card: so the pool is f x free_before - weights, and anything else on the card (the desktop, another
  model) shrinks the pool by f x its size; a co-resident model must RAISE f, not lower it. SGLang prints
  "GB" for these figures but divides by 2^30 (GiB).
- The same file: the draft worker's pool gets `draft_runner_cache_size`, the target's token count, and is
  allocated after the target's (releases before sgl-project/sglang#23862); the draft's weights and pool then
  come out of the (1 - f) share together with activations and CUDA graphs (sgl-project/sglang#6875 reports
  the resulting OOMs). After #23862 (merged 2026-04-27) and #28855 (2026-06-21) the draft's weights are loaded
  before profiling and the target's cell size is scaled by (1 + draft_layers / target_layers)
  (model_executor/pool_configurator.py @ 003fca8027387a3d6565b2c08e497e3020ac6211, DefaultPoolConfigurator),
  so both pools sit inside the fraction and share one token count.
- EAGLE-family and NEXTN drafts build their own embedding (and lm_head) and replace them with the target's
  after loading (`set_embed_and_head`): the duplicate is live while the draft loads, and, since the draft
  loads before sizing in the newer releases, while the pool is sized (sgl-project/sglang#36452, open fix
  #32468: "the duplicate vocab tensors are resident when free memory is measured").
- server_args.py, `_handle_gpu_memory_settings` (PR #10975, releases 0.5.3 and later): chunked_prefill_size
  and cuda_graph_max_bs by GPU memory bucket, then mem_fraction_static = round((gpu_mem - reserved) / gpu_mem,
  3) with reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs + tp x pp / 8 x 1024
  MiB (+ 8 MiB a captured prompt size of the piecewise CUDA graphs, 1.5 GiB for MLA, from 0.5.10), at least 10 GiB
  above 60 GiB cards, + 2 GiB for EAGLE-family drafts (4 GiB in 0.5.10-0.5.13; 6 GiB STANDALONE) until #23862.
  Before 0.5.3 the defaults changed five times (`Rules.defaults`; read in every release's PyPI wheel,
  server_args.py `__post_init__` and model_executor/cuda_graph_runner.py `get_batch_sizes_to_capture`; gpu_mem
  is the card's MiB):
  - "tp_table" (0.4.0-0.4.5.post2): 0.88 / 0.87 / 0.85 / 0.81 / 0.79 for TP 1 / 2 / 4 / 8 / 16, chunked prefill
    2048 below 25,000 MiB else 8192, CUDA graphs up to 8 (TP < 4) or 80 below 25,000 MiB, else 160;
  - "big13" (0.4.5.post3-0.4.6.post1): above 81,920 MiB the fraction is (gpu_mem - 13 GiB) / gpu_mem and decode
    graphs are captured up to 256 (`capture_bs += range(160, 257, 8)`; cuda_graph_max_bs is left unset);
  - "big48" (0.4.6.post2-0.4.6.post5): the table by TP x PP up to 81,920 MiB, else 0.88; above 96 GiB
    min(f + 48 GiB x (1 - f) / gpu_mem, (gpu_mem - 18 GiB) / gpu_mem) and graphs up to 256;
  - "big48_b200" (0.4.7): as "big48", but 0.79 on CUDA cards above 180,000 MiB, 20 GiB reserved with a
    speculative algorithm (x 0.95 on smaller cards), chunked prefill 16,384 and graphs up to 512 above 180,000
    MiB;
  - "reserved" (0.4.7.post1-0.5.2): round((gpu_mem - reserved) / gpu_mem, 3) with reserved 2.8 + TP x PP / 10
    GiB below 35 GiB, 9.5 + TP x PP / 2 below 90 GiB, 12 + TP x PP / 2 below 160 GiB, else 32 GiB, + 2 GiB with a
    speculative algorithm (6 GiB STANDALONE); chunked prefill 2048 below 35 GiB, 8192 below 160 GiB, else 16,384;
    graphs up to 8 (TP < 4) or 80 below 35 GiB, 256 above 90 GiB, 512 above 160,000 MiB, else 160.
- Speculative EAGLE/EAGLE3/STANDALONE (and NEXTN, an alias of EAGLE) and NGRAM set max_running_requests to 48 when
  it is not given (server_args.py, from 0.4.4.post4; 0.5.x logs "Max running requests is reset to 48 for speculative
  decoding").
  Otherwise the request pool holds min(max(tokens / context_len x 512, 2048), 4096) requests and the
  scheduler runs at most min(tokens // 2, that) (mixin `init_memory`; managers/tp_worker.py).
- CUDA graph batch sizes (`_generate_cuda_graph_batch_sizes`): [1, 2, 4, 8, 12] + 16..256 step 8 + 272..496
  step 16 + 512.. step 32 without speculation; 1..8, 10..32 step 2, 40..64 step 4, 72..256 step 8, 272.. step
  16 with it; capped by cuda_graph_max_bs and the running-request limit.

- The hybrid SWA pools (hybrid_swa, hybrid_split): where a release gives a model a pool for its full-attention layers
  and one for its windowed layers, holding --swa-full-tokens-ratio (0.8) x as many tokens, the pool's token count
  (max_total_num_tokens) is the full one's; elsewhere windowed layers are charged every token, as SGLang does.
- max_running_requests and the request table follow the pool (running_requests), as each release resolves them.

- A request on the hybrid SWA pools holds its tokens in the full pool and about min(tokens, window) in the SWA pool
  (managers/schedule_batch.py maybe_evict_swa frees what falls behind the window): it is counted against whichever it
  fills first (swa_pool_slots; core.kvcache.BlockRule.split), the SWA pool for requests shorter than window / 0.8.
- With speculation the decode check wants free KV slots for each running request, per release (decode_reserve_tokens);
  the simulator holds them (simulator.engine.EngineConfig.decode_reserve).

What is not modelled (each is said in `engine_terms["notes"]` when it applies): SWAChunkCapPoolConfigurator (0.5.14 on, an explicit
--max-running-requests with --disable-radix-cache), the mamba/linear-attention state carve-out (refused); the VLM
reduction of the default fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...core.errors import SpecError
from ...core.kvcache import KVLayer, bytes_per_token, model_kv_layers, pool_blocks
from ...core.memory import (AccountingProfile, MemoryAccount, ResolvedSettings, activation_peak, draft_weight_bytes,
                            graph_limits, resolve_settings, target_weights)
from ...core.specs import Deployment, Quantization, effective_target
from ...core.speculation import runs_spec_v2
from ...core.units import GiB
from ...core.weights import WeightBreakdown

MiB = 1 << 20
MODELLED_LAYER_KINDS = ("full", "sliding", "chunked", "mla")
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
# the algorithms that set max_running_requests to 48 when it is not given: the EAGLE family and NGRAM, from its first
# release (server_args.py "if self.speculative_algorithm == 'NGRAM': ... self.max_running_requests = 48", read in the
# 0.5.3 and 0.5.9 wheels; 0.5.14's arg_groups/speculative_hook.py _handle_ngram)
SPEC_RUNNING_CAPPED = EAGLE_FAMILY + ("NGRAM",)


@dataclass(frozen=True)
class Rules:
    """What differs between SGLang releases (the module docstring cites each)."""

    defaults: str  # "tp_table", "big13", "big48", "big48_b200", "reserved" (before 0.5.3; module docstring) or
    # "heuristic" (0.5.3 and later)
    spec_reserve_mib: int  # what the default fraction reserves for an EAGLE-family draft (0: nothing; 6 GiB STANDALONE
    # whenever it reserves): 2 GiB in 0.5.3-0.5.9, 4 GiB in 0.5.10-0.5.13 (server_args.py _handle_gpu_memory_settings,
    # "eagle draft models and cuda graphs", read in the 0.5.3, 0.5.9, 0.5.10, 0.5.11 and 0.5.13 wheels), none from
    # 0.5.14 (#23862: the draft is sized inside the fraction)
    draft_in_sizing: bool  # draft weights loaded and draft KV budgeted before the pool is sized
    spec_max_running_requests: int | None  # default running-request limit with speculation (EAGLE family, NGRAM)
    # the default fraction reserves room for the piecewise CUDA graphs of prompt steps when they are on (0.5.10 and
    # later): 8 MiB a captured size, 1.5 GiB flat for an MLA model (server_args.py _handle_gpu_memory_settings, "For
    # piecewise cuda graphs"); from 0.5.13 the largest captured size is clamped to --context-length (#21112), and from
    # 0.5.14 --disable-cuda-graph turns the prefill graphs (and so the reserve) off too (_parse_cuda_graph_config)
    # an EAGLE-family draft's extra pool slots (_draft_headroom): "draft_only" (0.4.1.post4-0.4.3.post2: the draft's
    # pool alone, R x steps + 100), "shared" (0.4.3.post3-0.5.6: both pools), "" (none: 0.5.7 on)
    draft_headroom: str = ""
    pipeline_parallel: bool = True  # --pp-size (server_args.py: from the 0.4.6.post2 wheel; not in 0.4.6.post1's)
    # on compute capability 10 (sm100_attention): DeepseekV3ForCausalLM runs trtllm_mla (0.5.4 on), any MHA model
    # trtllm_mha (0.5.7 on)
    trtllm_mla_sm100: bool = False
    trtllm_mha_sm100: bool = False
    piecewise_reserve: bool = False
    piecewise_clamped_to_context: bool = False
    piecewise_off_when_eager: bool = False
    # how the running-request limit and the request table follow the pool (running_requests): "pool" (before 0.5.10),
    # "estimate" (0.5.10-0.5.13), "half_pool" (0.5.14 on)
    running_rule: str = "pool"
    small_card_graph_bs: int = 24  # cuda_graph_max_bs at TP 1-3 on cards of 20-35 GiB (0.5.3 on; 16 in 0.5.3-0.5.4)
    # the hybrid SWA pool (hybrid_swa): the checkpoint types SGLang gives it, whether gpt-oss loses it beside the
    # trtllm_mha backend (0.5.8-0.5.9) or any speculative algorithm (0.5.8), and how the pool is split (hybrid_split)
    hybrid_swa_types: tuple[str, ...] = ()
    hybrid_swa_off_trtllm: bool = False
    hybrid_swa_off_speculative: bool = False
    hybrid_split_rule: str = ""
    # the draft's KV sized with a hybrid SWA target's pools (0.5.15 on: HybridSWAPoolConfigurator budgets the draft's
    # layers at the target's full-attention bytes per token; 0.5.14's does not, its draft pool comes after)
    hybrid_draft_in_sizing: bool = False
    # the free KV slots the decode check wants for each running request with speculation (decode_reserve_tokens):
    # "draft_tokens" (0.4.1.post4 - 0.4.3.post2), "draft_tokens_topk" (0.4.3.post3), "tree" (0.4.3.post4 - 0.5.8),
    # "max" (0.5.9 on; spec v2's doubled reserve where the release runs the drafter on it: AccountingProfile.spec_v2)
    decode_check: str = "tree"
    tp_extra_nvlink_bytes: int = int(1.59 * GiB)  # torch.distributed init beyond TP 1 (NCCL, custom all-reduce)
    tp_extra_pcie_bytes: int = int(0.36 * GiB)


LEGACY = ("tp_table", "big13", "big48", "big48_b200", "reserved")  # the rules before 0.5.3, oldest first


def default_chunk_and_graph(rules: Rules, gpu_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) SGLang picks for a card of `gpu_mib` MiB; before 0.5.3 the largest
    decode batch its default capture list holds (cuda_graph_max_bs itself left unset above the small cards)."""
    if rules.defaults in LEGACY:
        small = 35 * 1024 if rules.defaults == "reserved" else 25_000
        if gpu_mib < small:
            return 2048, (8 if tp < 4 else 80)
        chunk = 8192
        if rules.defaults == "big48_b200" and gpu_mib > 180_000:
            chunk = 16384
        elif rules.defaults == "reserved" and gpu_mib >= 160 * 1024:
            chunk = 16384
        graph = 160
        if rules.defaults == "big13" and gpu_mib > 81_920:
            graph = 256
        elif rules.defaults in ("big48", "big48_b200") and gpu_mib > 96 * 1024:
            graph = 512 if rules.defaults == "big48_b200" and gpu_mib > 180_000 else 256
        elif rules.defaults == "reserved" and gpu_mib > 90 * 1024:
            graph = 512 if gpu_mib > 160_000 else 256
        return chunk, graph
    for below_gib, chunk, small_tp, large_tp in ((20, 2048, 8, 8), (35, 2048, rules.small_card_graph_bs, 80), (60, 4096, 32, 160),
                                                 (90, 8192, 256, 512), (160, 8192, 256, 512)):
        if gpu_mib < below_gib * 1024:
            return chunk, (small_tp if tp < 4 else large_tp)
    return 16384, 512


def _by_tp_size(size: int) -> float:
    return next(f for at_least, f in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88)) if size >= at_least)


def default_fraction(rules: Rules, gpu_mib: float, tp: int, pp: int, chunked: int, graph_bs: int,
                     algorithm: str | None, cuda: bool = True, piecewise_mib: float = 0.0) -> float:
    """SGLang's default mem_fraction_static (`cuda`: an NVIDIA card, for 0.4.7's rule for the largest ones;
    `piecewise_mib`: what it reserves for the piecewise CUDA graphs of prompt steps, `piecewise_reserve_mib`)."""
    if rules.defaults == "tp_table":
        return _by_tp_size(tp * pp)
    if rules.defaults == "big13":
        return _by_tp_size(tp) if gpu_mib <= 81_920 else (gpu_mib - 13 * 1024) / gpu_mib
    if rules.defaults in ("big48", "big48_b200"):
        f = _by_tp_size(tp * pp) if gpu_mib <= 81_920 else 0.88
        if rules.defaults == "big48_b200" and gpu_mib > 180_000 and cuda:
            return 0.79
        if gpu_mib > 96 * 1024:
            reserve = 20 * 1024 if rules.defaults == "big48_b200" and algorithm is not None else 18 * 1024
            return min(f + 48 * 1024 * (1 - f) / gpu_mib, (gpu_mib - reserve) / gpu_mib)
        return f * 0.95 if rules.defaults == "big48_b200" and algorithm is not None else f
    if rules.defaults == "reserved":
        size = tp * pp
        gib = (2.8 + size / 10 if gpu_mib < 35 * 1024 else 9.5 + size / 2 if gpu_mib < 90 * 1024
               else 12 + size / 2 if gpu_mib < 160 * 1024 else 32)
        reserved = gib * 1024 + (0 if algorithm is None else 6 * 1024 if algorithm == "STANDALONE" else 2 * 1024)
        return round((gpu_mib - reserved) / gpu_mib, 3)
    reserved = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024 + piecewise_mib
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if rules.spec_reserve_mib and algorithm is not None and algorithm != "NGRAM":
        reserved += 6 * 1024 if algorithm == "STANDALONE" else rules.spec_reserve_mib
    return round((gpu_mib - reserved) / gpu_mib, 3)


def piecewise_capture_tokens(max_tokens: int) -> list[int]:
    """The prompt-step sizes SGLang's piecewise CUDA graphs capture up to `max_tokens` (server_args.py
    _generate_piecewise_cuda_graph_tokens; 0.5.14: _generate_prefill_cuda_graph_batch_sizes, the same list)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [size for size in sizes if size <= max_tokens]


def piecewise_reserve_mib(d: Deployment, p: AccountingProfile, rules: Rules, s: ResolvedSettings, chunked: int) -> float:
    """What SGLang's default fraction reserves for the piecewise CUDA graphs of prompt steps (Rules.piecewise_reserve).
    Whether they are on is settled before the fraction by the release's own rules (vendor, model type, a multimodal
    target, speculation in 0.5.10; core.memory.graph_limits) and pipeline parallelism (every release with them: "pp_size
    > 1"); the flashinfer_trtllm MoE runner that turns them off on datacenter Blackwell is picked after the fraction
    (_handle_moe_kernel_config), so it keeps the reserve (no quantization passed for that rule here)."""
    if not rules.piecewise_reserve or d.pp > 1 or (s.enforce_eager and rules.piecewise_off_when_eager):
        return 0.0
    k = d.speculative.num_speculative_tokens if d.speculative.enabled else 0
    if graph_limits(p, d.target, s.max_num_seqs, chunked, k, gpu=d.gpu, quant_method="")[1] <= 0:
        return 0.0
    if d.target.mla is not None:  # "For MLA backend the memory overhead is much higher than expected with fa3"
        return 1.5 * 1024
    largest = chunked
    if "llama-2" in d.target.model_id.lower():  # "For Llama2 series models, the max tokens is limited to 4096"
        largest = min(largest, 4096)
    if rules.piecewise_clamped_to_context:
        largest = min(largest, s.max_model_len)
    return len(piecewise_capture_tokens(largest)) * 8


def capture_sizes(max_bs: int, speculative: bool) -> list[int]:
    if speculative:
        sizes = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
                 + list(range(272, max_bs + 1, 16)))
    else:
        sizes = ([1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16))
                 + list(range(512, max_bs + 1, 32)))
    return [b for b in sizes if b <= max_bs]


def _as_pool_layers(layers: tuple[KVLayer, ...]) -> tuple[KVLayer, ...]:
    """SGLang's token pool holds every token in every layer (its hybrid SWA split is not modelled)."""
    for layer in layers:
        if layer.kind not in MODELLED_LAYER_KINDS:
            raise SpecError("engine", f"SGLang's pool for {layer.kind} layers is not modelled", "--engine vllm")
    return tuple(layer if layer.kind in ("full", "mla") else
                 KVLayer(layer.owner, "full", None, layer.bytes_per_token) for layer in layers)


def _asked_running(asked: int | None, algorithm: str | None, rules: Rules) -> tuple[int | None, str | None]:
    """The --max-running-requests the server starts with (None: not given), and a note where speculation set it."""
    if asked or algorithm not in SPEC_RUNNING_CAPPED or not rules.spec_max_running_requests:
        return asked or None, None
    given = rules.spec_max_running_requests
    return given, (f"SGLang runs at most {given} requests at once with {algorithm} drafting when "
                   "--max-running-requests is not given (server_args.py): more concurrent requests wait in its queue; "
                   "give max_num_seqs to run more")


def graph_tokens_per_sequence(d: Deployment) -> int:
    """Tokens a decode step scores per sequence in SGLang's CUDA graphs: its last token and k drafts, or a tree's
    --speculative-num-draft-tokens nodes. Decode batches of more than cuda_graph_max_bs sequences run eager
    (cuda_graph_runner.py can_run: "bs <= max_bs"), and the target-verify graphs are captured with num_tokens_per_bs =
    speculative_num_draft_tokens (cuda_graph_runner.py CudaGraphRunner.__init__): a tree of 8 nodes at k = 5 is graphed
    up to cuda_graph_max_bs x 8 tokens, not x 6."""
    sp = d.speculative
    if not sp.enabled:
        return 1
    k = sp.num_speculative_tokens
    return max(sp.tree.nodes(k), k + 1) if sp.tree_topk > 1 else k + 1


def request_estimate(tokens: int, context_len: int) -> int:
    """The request pool SGLang estimates from a KV pool of `tokens`: min(max(tokens / context_len x 512, 2048),
    4096) (model_runner.py init_memory_pool; model_runner_kv_cache_mixin.py _resolve_max_num_reqs from 0.5.10)."""
    return min(max(int(tokens / context_len * 512), 2048), 4096)


def running_requests(rules: Rules, given: int | None, estimate: int, tokens: int) -> tuple[int, int]:
    """(max_running_requests, rows of the request table) for a pool of `tokens` (its full-attention layers' pool on a
    hybrid SWA model), `given` the --max-running-requests asked for (or set by speculation), `estimate`
    request_estimate's.

    - "pool" (0.4 - 0.5.9): the request table holds `given`, else the estimate; the scheduler runs `given`, else
      min(tokens // 2, the table) (managers/tp_worker.py "self.max_total_num_tokens // 2 if
      server_args.max_running_requests is None else server_args.max_running_requests"; model_runner.py from 0.5.7);
    - "estimate" (0.5.10 - 0.5.13, model_runner_kv_cache_mixin.py _resolve_max_num_reqs): min(given, the estimate),
      else min(the estimate, tokens // 2), and the request table holds that many (_init_pools: size=max_num_reqs =
      self.max_running_requests);
    - "half_pool" (0.5.14 on; the same function, read in the 0.5.14 wheel and 0.5.23's mem_cache/
      kv_cache_configurator.py resolve_max_num_reqs): min(given, tokens // 2), else min(the estimate, tokens // 2)."""
    half = max(1, tokens // 2)
    if rules.running_rule == "pool":
        return (given, given) if given else (min(half, estimate), estimate)
    running = min(given, estimate if rules.running_rule == "estimate" else half) if given else min(estimate, half)
    return running, running


# --speculative-ngram-max-bfs-breadth's default (10 in the 0.5.3, 0.5.8, 0.5.9, 0.5.11 and 0.5.14 wheels), which SGLang
# makes NGRAM's speculative_eagle_topk (server_args.py 'self.speculative_eagle_topk = self.speculative_ngram_max_bfs_
# breadth'; 0.5.14's arg_groups/speculative_hook.py _handle_ngram); the emitted command gives no top-k for NGRAM
NGRAM_BFS_BREADTH = 10


def _ceil_align(tokens: int, page: int) -> int:
    return -(-tokens // page) * page


def decode_reserve_tokens(rules: Rules, d: Deployment, algorithm: str | None, page: int, spec_v2: str = "") -> int:
    """The KV slots beyond its committed tokens that SGLang's decode step holds free for each running request with
    speculation (0: none, the simulator's own 1 + 2k; simulator.engine.EngineConfig.decode_reserve): where fewer are
    free the scheduler retracts requests (managers/scheduler.py update_running_batch: "if not
    batch.check_decode_mem(...)"). With steps = --speculative-num-steps (k), topk = --speculative-eagle-topk and N =
    --speculative-num-draft-tokens, read in the PyPI wheels (sglang/srt/managers/...):

    - "draft_tokens" (0.4.1.post4 - 0.4.3.post2): scheduler.py decode_mem_cache_buf_multiplier =
      speculative_num_draft_tokens; schedule_batch.py check_decode_mem wants len(reqs) x that free;
    - "draft_tokens_topk" (0.4.3.post3): the multiplier N + topk x N (speculative_eagle_topk x
      speculative_num_draft_tokens);
    - "tree" (0.4.3.post4 - 0.5.8): N + topk x steps ("(speculative_eagle_topk or 1) x (speculative_num_steps or 1)"
      from 0.5.3); with pages of more than one token check_decode_mem charges it a page each for the requests
      new_page_count_next_decode counts (those about to cross a page), which the simulator's blocks for c + that
      approximate;
    - "max" (0.5.9 on): schedule_batch.py new_tokens_required_next_decode, max(steps x topk, N) a request, each term
      aligned up to the page (steps + a page first for a tree on pages); where the release runs the drafter on spec v2
      (`spec_v2`, AccountingProfile.spec_v2 read through core.speculation.runs_spec_v2: chains from 0.5.11, trees from
      0.5.13, NGRAM from 0.5.14) its requests keep kv_committed_len + 2 x get_alloc_len_per_decode allocated
      (_new_tokens_required_next_decode_spec_v2, mem_cache/common.py get_alloc_reserve_per_decode: "The 2x is a
      double-buffer"): 2 x max(steps x topk, N), for a tree on pages ceil((2 x page - 2 + steps) / page) pages a
      branch instead of steps.

    NGRAM runs with topk = NGRAM_BFS_BREADTH and no --speculative-num-steps (counted as 1; from 0.5.14 N // topk,
    _handle_ngram)."""
    sp = d.speculative
    if not sp.enabled or algorithm is None:
        return 0
    steps, topk = sp.num_speculative_tokens, sp.tree_topk
    draft_tokens = sp.num_draft_tokens or steps + 1
    v2 = rules.decode_check == "max" and runs_spec_v2(sp.kind, spec_v2, topk)
    ngram = algorithm == "NGRAM"
    if ngram:
        topk = NGRAM_BFS_BREADTH
        steps = (draft_tokens // topk if v2 else 0) or 1
    rule = rules.decode_check
    if rule == "draft_tokens":
        return draft_tokens
    if rule == "draft_tokens_topk":
        return draft_tokens + topk * draft_tokens
    if rule == "tree":
        return draft_tokens + topk * steps
    if v2:
        if page > 1 and topk > 1 and not ngram:  # a tree's branches on pages (0.5.13 on; 0.5.11 - 0.5.12 run none)
            per_branch = (page - 1 + steps + page - 1) // page * page
            return 2 * max(per_branch * topk, draft_tokens)
        return 2 * max(steps * topk, draft_tokens)
    per_branch = steps if page == 1 else _ceil_align(steps + page, page) if topk > 1 else _ceil_align(steps, page)
    return max(per_branch * topk, _ceil_align(draft_tokens, page))


SWA_FULL_TOKENS_RATIO = 0.8  # --swa-full-tokens-ratio's default in every release that has it (0.4.10 on)


def hybrid_swa(d: Deployment, rules: Rules, s: ResolvedSettings) -> bool:
    """Whether SGLang serves the target with its hybrid SWA pools: a pool for the full-attention layers and a smaller
    one for the windowed layers. Read in the PyPI wheels (sglang/srt/...):

    - 0.4.10 - 0.5.6: any model whose class has get_attention_sliding_window_size, Llama 4 excepted
      (model_executor/model_runner.py, "Check if the model is using hybrid SWA"): Gemma 2, Gemma 3 and Gemma 3n (and
      gpt-oss, whose class has it from 0.5.1); server_args.py turns it off for Gemma 2 from 0.4.10.post2 ("Disable
      hybrid SWA memory for Gemma2ForCausalLM"), for Gemma 2, 3 and 3n from 0.5.1 ("as it is not yet supported") and
      for gpt-oss in every release up to 0.5.7 (its _handle_model_specific_adjustments branch:
      "self.disable_hybrid_swa_memory = True");
    - 0.5.7: only MiMo-V2 and Llama 4 given --hybrid-kvcache-ratio (configs/model_config.py is_hybrid_model);
    - 0.5.8 on: the architectures of configs/model_config.py is_hybrid_swa_model (Llama4ForConditionalGeneration and
      GptOssForCausalLM among them; Gemma 3 never), gpt-oss not beside the trtllm_mha backend in 0.5.8-0.5.9 ("Disable
      hybrid SWA memory for GPT-OSS model with trtllm_mha attention backend") nor with speculation in 0.5.8 ("Disable
      hybrid SWA memory for GPT-OSS model with speculative decoding")."""
    model = d.target
    if (model.checkpoint_type or model.model_type) not in rules.hybrid_swa_types:
        return False
    if model.model_type == "gpt_oss":
        if rules.hybrid_swa_off_speculative and d.speculative.enabled:
            return False
        if rules.hybrid_swa_off_trtllm and sm100_attention(d, s, rules) == "trtllm_mha":
            return False
    return True


def _by_attention(layers: tuple[KVLayer, ...]) -> tuple[int, int]:
    """(bytes per token of the full-attention layers, of the windowed ones) on this GPU."""
    windowed = sum(layer.bytes_per_token for layer in layers if layer.kind in ("sliding", "chunked"))
    return bytes_per_token(layers) - windowed, windowed


def hybrid_split(rules: Rules, layers: tuple[KVLayer, ...], tokens: int, rest_bytes: float, page: int,
                 draft_layers: int = 0) -> tuple[int, int]:
    """(full-attention pool tokens, SWA pool tokens) of SGLang's hybrid SWA pools, `tokens` the pool as profiled for
    every layer (page-aligned), `rest_bytes` what the fraction leaves for the pools, r = SWA_FULL_TOKENS_RATIO:

    - "layers" (0.4.10 - 0.5.6, model_runner.py set_num_token_hybrid): full = int(tokens x layers / (r x windowed
      layers + full layers)), swa = int(full x r), neither aligned to the page; "layers_aligned" (0.5.8's
      model_runner_kv_cache_mixin.py set_num_tokens_hybrid_swa) the same, each then aligned down to the page;
    - "bytes" (0.5.9 - 0.5.10, set_num_tokens_hybrid_swa / _resolve_hybrid_swa_tokens): full = int(tokens x (F + S)
      / (F + r x S)), F and S the bytes per token of the full and windowed layers, swa = int(full x r), each aligned
      down to the page;
    - "configurator" (0.5.11 on, model_executor/pool_configurator.py HybridSWAPoolConfigurator, read in the 0.5.11,
      0.5.12, 0.5.13 and 0.5.14 wheels): full = int(bytes // (F + r x S)) and swa = int(full x r), each aligned down to
      the page; from 0.5.15 (Rules.hybrid_draft_in_sizing)
      an EAGLE-family draft's `draft_layers` are budgeted in the full term at a full layer's bytes per token ("EAGLE/
      STANDALONE draft KV pool inherits max_total tokens with its full-attn layers; budget into the full term")."""
    full_bytes, swa_bytes = _by_attention(layers)
    r = SWA_FULL_TOKENS_RATIO
    if rules.hybrid_split_rule in ("layers", "layers_aligned"):
        windowed = sum(1 for layer in layers if layer.kind in ("sliding", "chunked"))
        full = int(tokens * len(layers) / (r * windowed + len(layers) - windowed))
        swa = int(full * r)
        return (full, swa) if rules.hybrid_split_rule == "layers" else (full // page * page, swa // page * page)
    if rules.hybrid_split_rule == "bytes":
        full = int(tokens * (full_bytes + swa_bytes) / (full_bytes + r * swa_bytes)) // page * page
    else:
        full_layers = sum(1 for layer in layers if layer.kind not in ("sliding", "chunked"))
        draft_bytes = full_bytes // full_layers * draft_layers if full_layers else 0
        full = int(int(rest_bytes) // (full_bytes + draft_bytes + r * swa_bytes)) // page * page
    return full, int(full * r) // page * page


def swa_pool_slots(layers: tuple[KVLayer, ...]) -> tuple[KVLayer, ...]:
    """The target's layers as a request is counted against the hybrid SWA pools: a windowed layer charged r bytes of
    the SWA pool for each token of the full pool (its r x tokens), so that the pool's blocks are block_size tokens of
    both pools (core.memory.MemoryAccount.pool_slots), and marked as the SWA pool's (KVLayer.pool_share = r): a
    request of n tokens holds n slots of the full pool and min(n, window) of the SWA pool, so it is charged
    max(n, min(n, window) / r) full-pool slots (core.kvcache.BlockRule.split): the SWA pool binds for requests shorter
    than window / r. Exact below the window (nothing is evicted there); beyond it the window is the least SGLang
    holds: it frees the slots behind the window in steps (managers/schedule_batch.py maybe_evict_swa: every window of
    decode steps in 0.5.8 - 0.5.13, SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER 1.0 from 0.5.11; every
    SGLANG_SWA_EVICTION_INTERVAL = 128 steps from 0.5.14), and 0.4.10's radix cache frees only a prompt's slots (under
    pressure), never a running request's decoded tokens'."""
    return tuple(KVLayer(layer.owner, layer.kind, layer.window, int(layer.bytes_per_token * SWA_FULL_TOKENS_RATIO),
                         pool_share=SWA_FULL_TOKENS_RATIO)
                 if layer.kind in ("sliding", "chunked") else layer for layer in layers)


def _draft_layers(d: Deployment, kv_bytes: int) -> tuple[KVLayer, ...]:
    sp = d.speculative
    if not sp.enabled or not sp.kind.keeps_kv:
        return ()
    if sp.kind.derives_from_target:
        return model_kv_layers(d.target, d.tp, kv_bytes, "draft", layers=d.target.num_mtp_layers)
    if sp.draft is None:
        return ()
    return model_kv_layers(sp.draft, sp.drafter_tp or d.tp, kv_bytes, "draft")


def _draft_headroom(d: Deployment, rules: Rules, algorithm: str | None, requests: int) -> int:
    """The token slots an EAGLE-family draft adds to the profiled pool in the releases that had them
    (Rules.draft_headroom; model_runner.py init_memory_pool): 0.4.3.post3-0.5.6 size both pools, which share indices,
    at draft_runner_cache_size = max_total_num_tokens + max_num_reqs x speculative_num_steps x speculative_eagle_topk
    + max_num_reqs x speculative_num_draft_tokens + 100 ("both verify and draft tokens can be concurrently allocated,
    so we should give a headroom for it"), then align it to the page; 0.4.1.post4-0.4.3.post2 give the draft's pool
    alone max_total_num_tokens + max_num_reqs x speculative_num_steps + 100. max_num_reqs is --max-running-requests
    (48 by default from 0.4.4.post4), else the request pool; 0.5.7's model_runner_kv_cache_mixin.py has none. The
    slots beyond the profiled pool come out of the (1 - f) share."""
    sp = d.speculative
    if not rules.draft_headroom or algorithm not in EAGLE_FAMILY:
        return 0
    k = sp.num_speculative_tokens
    if rules.draft_headroom == "draft_only":
        return requests * k + 100
    return requests * (k * sp.tree_topk + (sp.num_draft_tokens or k + 1)) + 100


def _duplicate_head_bytes(d: Deployment, embedding: int, lm_head: int) -> int:
    """The embedding (and lm_head) an EAGLE-family or NEXTN draft builds before taking the target's."""
    sp = d.speculative
    if not sp.enabled or not sp.kind.shares_embeddings:
        return 0
    own_head = sp.draft is not None and bool(sp.draft.draft_vocab_size)  # EAGLE-3's reduced lm_head is its own
    return embedding + (lm_head if sp.kind.shares_lm_head and not own_head else 0)


def context_bytes(d: Deployment, p: AccountingProfile, rules: Rules) -> int:
    """What CUDA, torch and torch.distributed hold before the weights load (SGLang's "Init torch distributed
    ends. mem usage"), per GPU."""
    if d.tp * d.pp == 1:
        return p.non_torch_bytes
    nvlink = d.gpu.interconnect_bytes_s >= 100e9
    return p.non_torch_bytes + (rules.tp_extra_nvlink_bytes if nvlink else rules.tp_extra_pcie_bytes)


# the model types of DeepseekV3ForCausalLM checkpoints (DeepSeek-V3 / R1, Kimi K2), as engines/sglang's piecewise table
DEEPSEEK_V3_TYPES = ("deepseek_v3", "kimi_k2")
# the page sizes SGLang's TensorRT-LLM attention backends take; any other becomes 64
# (_handle_attention_backend_compatibility: "TensorRT-LLM MLA only supports page_size of 32 or 64", "TensorRT-LLM MHA
# only supports page_size of 16, 32 or 64, changing page_size from N to 64")
TRTLLM_PAGES = {"trtllm_mla": (32, 64), "trtllm_mha": (16, 32, 64)}


def sm100_attention(d: Deployment, s: ResolvedSettings, rules: Rules) -> str | None:
    """The TensorRT-LLM attention backend SGLang picks on compute capability 10 when none is given, or None (another
    backend, whose pages are the page size asked for). Read in the 0.5.3, 0.5.4, 0.5.7, 0.5.9 and 0.5.14 wheels
    (server_args.py): trtllm_mla for DeepseekV3ForCausalLM from 0.5.4 (_handle_model_specific_adjustments, "Use
    trtllm_mla as attention backend on sm100 for DeepseekV3ForCausalLM"); trtllm_mha for gpt-oss from 0.5.3 (the same
    function: "if is_cuda() and is_sm100_supported(): self.attention_backend = 'trtllm_mha'"), and from 0.5.7 for any
    other MHA model (the default backend: "Use trtllm_mha for SM100/SM103 ... excluding spec with topk > 1", taken when
    is_no_spec_infer_or_topk_one - no top-k, or a top-k of 1 beside pages of one token - and the speculative algorithm,
    if any, was given a top-k, as the emitted EAGLE-family command does and an n-gram one does not)."""
    if not (d.gpu.compute_capability_10 and d.engine.device != "cpu"):
        return None
    target, sp = d.target, d.speculative
    if target.mla is not None:
        return "trtllm_mla" if rules.trtllm_mla_sm100 and target.model_type in DEEPSEEK_V3_TYPES else None
    if target.model_type == "gpt_oss" and rules.defaults not in LEGACY:
        return "trtllm_mha"
    if not rules.trtllm_mha_sm100:
        return None
    if not sp.enabled:
        return "trtllm_mha"
    topk_given = not sp.kind.cpu_drafted  # the emitted command gives --speculative-eagle-topk to the EAGLE family
    return "trtllm_mha" if topk_given and sp.tree_topk == 1 and s.block_size == 1 else None


def _sm100_pages(d: Deployment, s: ResolvedSettings, rules: Rules) -> ResolvedSettings:
    """Pages of the TensorRT-LLM backend SGLang runs (sm100_attention); a top-k tree there is refused at start-up:
    beside pages of more than one token on trtllm_mla ('speculative_eagle_topk > 1 with page_size > 1' is supported
    on flashinfer - 0.5.4 -, fa3 and triton - 0.5.14's arg_groups/speculative_hook.py - only), on trtllm_mha always
    ("trtllm_mha backend only supports topk = 1 for speculative decoding")."""
    backend = sm100_attention(d, s, rules)
    if backend is None:
        return s
    sp = d.speculative
    if sp.enabled and sp.tree_topk > 1:
        raise SpecError("tree_topk", f"{sp.tree_topk}: SGLang serves {d.target.model_id} on {d.gpu.gpu_id} with its "
                        f"{backend} attention backend, which refuses a top-k tree at start-up (server_args.py: "
                        + ("'speculative_eagle_topk > 1 with page_size > 1' only on flashinfer, fa3 and triton, and "
                           "trtllm_mla takes pages of 32 or 64)" if backend == "trtllm_mla" else
                           "'trtllm_mha backend only supports topk = 1 for speculative decoding')"),
                        "tree_topk 1 (a chain) for this model on this GPU with --engine sglang")
    pages = TRTLLM_PAGES[backend]
    return s if s.block_size in pages else replace(s, block_size=64)


def _tokens(rest_bytes: float, cell: int, page: int) -> int:
    if rest_bytes <= 0 or cell <= 0:
        return 0
    return int(rest_bytes) // cell // page * page


def _refuse_hybrid(d: Deployment) -> None:
    """A model's state layers are not KV layers: SGLang's state cache is refused, never dropped."""
    for model in (d.target, d.speculative.draft):
        if model is not None and model.is_hybrid:
            kinds = ", ".join(sorted({state.kind for state in model.state_layers}))
            raise SpecError("engine", f"SGLang's state cache for {model.model_id}'s {kinds} layers (carved out "
                            "before the KV pool, capping running requests) is not modelled", "--engine vllm for this model")


def _sglang_rotary_caches(d: Deployment, w: WeightBreakdown) -> WeightBreakdown:
    """SGLang's Gemma-3 builds both its ropes unscaled ("Override the values in config.json": rope_scaling
    {"rope_type": "default"} for the sliding and the global layers, python/sglang/srt/models/gemma3_causal.py), so
    its two cos/sin caches hold max_position_embeddings positions each, not vLLM's x 8 global one."""
    m = d.target
    if not (m.model_type.startswith("gemma3") and w.buffers and m.rotary_cache_positions):
        return w
    per_position = w.buffers // sum(m.rotary_cache_positions)  # rotary dim x dtype bytes
    return replace(w, buffers=len(m.rotary_cache_positions) * m.max_position_embeddings * per_position)


def _served(d: Deployment) -> tuple[Deployment, Quantization | None, bool]:
    """The deployment with its target as SGLang loads it (core.specs.effective_target), the weights' quantization, and
    whether it holds the experts unquantized (_experts_upcast: then as a `none` override holds them, every weight in
    the model dtype, gpt-oss quantizing its experts only)."""
    target, quant = effective_target(d)
    upcast = _experts_upcast(d, quant)
    if upcast:
        target, quant = effective_target(d.served_unquantized())
    return (d if target is d.target else replace(d, target=target)), quant, upcast


def _experts_upcast(d: Deployment, quant) -> bool:
    """SGLang's MXFP4 experts under expert parallelism off datacenter Blackwell: it picks the triton_kernel MoE runner
    for MXFP4 only at ep_size 1 (server_args.py, 0.5.1 - 0.5.14; arg_groups/model_overrides/gpt_oss.py in 0.5.23), and
    otherwise Mxfp4MoEMethod.process_weights_after_loading upcasts the experts to bfloat16 (upcast_from_mxfp, every
    0.5.x wheel); compute capability 10 keeps them through FlashInfer's MXFP4 MoE. AMD's path (AITER) is not read and
    left as the MXFP4 account. gpt-oss-120b at TP 2: 64 experts x 36 layers x (3 x 2,880 x 2,880 + 3 x 2,880) x 2 B =
    106.82 GiB a GPU."""
    return (d.ep > 1 and quant is not None and quant.method == "mxfp4" and d.gpu.vendor == "nvidia"
            and not d.gpu.compute_capability_10)


def account(d: Deployment, p: AccountingProfile, rules: Rules, search_fit: bool = True) -> MemoryAccount:
    """SGLang's memory account; where it cannot start, `fraction_to_fit` is the fraction that starts it (the search
    for it, `search_fit`, accounts the deployment again at each candidate)."""
    e = d.engine
    if e.kv_cache_memory_bytes is not None:
        raise SpecError("kv_cache_memory_bytes", "is vLLM's flag; SGLang sizes its pool from --mem-fraction-static",
                        "gpu_memory_utilization (emitted as --mem-fraction-static) with --engine sglang")
    d, quant, upcast = _served(d)
    _refuse_hybrid(d)
    if d.pp > 1 and not rules.pipeline_parallel:
        raise SpecError("pp", f"{d.pp}: {p.label} has no --pp-size (pipeline parallelism came with SGLang 0.4.6.post2)",
                        "1, or engine_version 0.4.6.post2 or later")
    sp = d.speculative
    if sp.kind.own_tp and sp.draft_tp != d.tp:  # SGLang runs a STANDALONE draft at the target's TP
        sp = replace(sp, draft_tp=d.tp)
        d = replace(d, speculative=sp)
    algorithm = sp.kind.engine_name("sglang") if sp.enabled else None
    if sp.enabled and algorithm is None:
        raise SpecError("method", f"SGLang has no {sp.method} speculative algorithm",
                        "draft_model, eagle, eagle3, mtp, ngram or none with --engine sglang")
    s = replace(_sm100_pages(d, resolve_settings(d, p, quant), rules), experts_upcast=upcast)
    total = d.gpu.memory_bytes
    gpu_mib = total / MiB
    chunk_default, graph_default = default_chunk_and_graph(rules, gpu_mib, d.tp)
    chunked = e.max_num_batched_tokens or chunk_default
    graph_bs = e.cuda_graph_max_bs or graph_default
    # and the server without speculation, the speed-up's baseline, one token a sequence (CudaGraphRunner.can_run
    # tests the batch, bs <= max_bs, whatever the method)
    s = replace(s, graph_max_tokens=min(s.graph_max_tokens, graph_bs * graph_tokens_per_sequence(d)),
                plain_graph_max_tokens=min(s.plain_graph_max_tokens, graph_bs))
    fraction = e.gpu_memory_utilization if e.gpu_memory_utilization is not None else default_fraction(
        rules, gpu_mib, d.tp, d.pp, chunked, graph_bs, algorithm, cuda=d.gpu.vendor == "nvidia",
        piecewise_mib=piecewise_reserve_mib(d, p, rules, s, chunked))
    page = s.block_size

    context = context_bytes(d, p, rules)
    free_before = total - d.shared_reserved_bytes - context
    w_target = _sglang_rotary_caches(d, target_weights(d, s.dtype, quant, s.mxfp4_pad))
    w_draft = draft_weight_bytes(d, s)
    duplicate = _duplicate_head_bytes(d, w_target.embedding, w_target.lm_head)
    own_layers = model_kv_layers(d.target, d.tp, s.kv_dtype_bytes, "target", d.pp)
    target_layers = _as_pool_layers(own_layers)
    draft_layers = _as_pool_layers(_draft_layers(d, s.kv_dtype_bytes))
    cell_target, cell_draft = bytes_per_token(target_layers), bytes_per_token(draft_layers)
    hybrid = hybrid_swa(d, rules, s) and any(layer.kind in ("sliding", "chunked") for layer in own_layers)
    # the draft's pool is sized with the target's (#23862) by the default configurator, and by the hybrid one only
    # from 0.5.15
    draft_kv_inside = rules.draft_in_sizing and (not hybrid or rules.hybrid_draft_in_sizing)

    loaded = w_target.total + (w_draft + duplicate if rules.draft_in_sizing else 0)
    rest = fraction * free_before - loaded  # = free after loading - (1 - f) x free before loading
    sizing_cell = cell_target
    if draft_kv_inside and draft_layers and target_layers:
        sizing_cell = int(cell_target * (1 + len(draft_layers) / len(target_layers)))
    profiled = _tokens(rest, sizing_cell, 1)
    estimate = request_estimate(profiled, s.max_model_len)
    given, capped = _asked_running(e.max_num_seqs, algorithm, rules)
    request_pool = given or estimate  # the max_num_reqs the draft's extra slots are counted for
    headroom = _draft_headroom(d, rules, algorithm, request_pool) if profiled else 0
    draft_extra = headroom if rules.draft_headroom == "draft_only" else 0  # the draft's pool alone is larger
    tokens = (profiled + headroom - draft_extra) // page * page
    drafted = len(draft_layers) if draft_kv_inside else 0
    tokens, swa_tokens = (hybrid_split(rules, own_layers, tokens, rest, page, drafted) if hybrid and tokens > 0 else
                          (tokens, 0))
    if rules.running_rule != "pool":  # estimated from the pool as finally sized (its full-attention tokens)
        estimate = request_estimate(tokens, s.max_model_len)
    running, request_rows = running_requests(rules, given, estimate, tokens)
    # ReqToTokenPool: an int32 slot per (request, position), context_len + 4 (+ draft tokens) positions
    draft_positions = (sp.num_draft_tokens or sp.num_speculative_tokens + 1) if sp.enabled else 0
    request_table = request_rows * (s.max_model_len + 4 + draft_positions) * 4
    s = replace(s, gpu_memory_utilization=fraction, max_num_batched_tokens=chunked, max_num_seqs=running,
                decode_reserve=decode_reserve_tokens(rules, d, algorithm, page, p.spec_v2))

    graphs = 0
    captured: list[int] = []
    if not s.enforce_eager and e.device != "cpu":
        captured = capture_sizes(min(graph_bs, running), sp.enabled)
        graphs = int(p.cuda_graph_bytes_per_layer * (len(target_layers) + len(draft_layers)) * len(captured)
                     / p.cuda_graph_reference_sizes)
    # run-time activations: one chunked-prefill forward and the logits of the largest graph-captured decode batch
    act, act_terms, _ = activation_peak(d, replace(s, max_num_seqs=min(running, graph_bs)), p)
    kv_bytes = tokens * (cell_target + cell_draft) + draft_extra * cell_draft
    slots = swa_pool_slots(own_layers) + draft_layers if swa_tokens else ()
    if swa_tokens:
        full_bytes, swa_bytes = _by_attention(own_layers)
        kv_bytes = tokens * (full_bytes + cell_draft) + swa_tokens * swa_bytes
    outside = (1 - fraction) * free_before
    # what the (1 - f) share must hold at run time; before #23862 also the draft's weights and pool (and its pool
    # beside a hybrid SWA target, which #23862's configurator does not size with the target's)
    draft_pool_after = 0 if draft_kv_inside else (tokens + draft_extra) * cell_draft
    draft_after = (0 if rules.draft_in_sizing else w_draft + duplicate) + draft_pool_after
    needs = act + graphs + draft_after + request_table + (headroom - draft_extra) * cell_target

    problem = None
    fraction_to_fit = None
    if rest <= 0 or tokens <= 0:
        least = loaded / free_before if free_before > 0 else float("inf")
        most = 0.0
        if least < 0.98 and search_fit:
            # the largest fraction that starts (the most pool, its run-time buffers sized for the requests it then
            # runs), else one point above the least (a pool, though the run time may not fit beside it)
            most = _largest_starting_fraction(d, p, rules, least)
            fraction_to_fit = most if most > least + 0.01 else math.ceil(least * 100 + 1) / 100
        problem = (f"SGLang refuses to start (no memory left for the KV cache): mem_fraction_static={fraction:g} of "
                   f"the {free_before / GiB:.2f} GiB free before loading is {fraction * free_before / GiB:.2f} GiB, and "
                   f"the weights take {loaded / GiB:.2f} GiB: increase --mem-fraction-static above {least:.4f}"
                   + (f" (up to {most:.2f} leaves the run-time buffers room)" if most > least + 0.01 else ""))
        if d.shared_reserved_bytes:
            problem += (f"; other processes hold {d.shared_reserved_bytes / GiB:.2f} GiB, which shrinks the pool: "
                        "raise mem_fraction_static")
    elif needs > outside:
        fraction_to_fit = (_largest_starting_fraction(d, p, rules, loaded / free_before, round(fraction - 0.01, 2))
                           or None) if search_fit else None
        problem = (f"SGLang runs out of memory at start-up: mem_fraction_static={fraction:g} leaves "
                   f"{outside / GiB:.2f} GiB outside the pool for "
                   + (f"the draft's weights ({(w_draft + duplicate) / GiB:.2f} GiB while loading) and its KV pool "
                      f"({draft_pool_after / GiB:.2f} GiB), " if draft_after > draft_pool_after else
                      f"the draft's KV pool ({draft_pool_after / GiB:.2f} GiB), " if draft_pool_after else "")
                   + (f"the {headroom - draft_extra:,} slots the draft adds to the target's pool "
                      f"({(headroom - draft_extra) * cell_target / GiB:.2f} GiB), " if headroom - draft_extra > 0 else "")
                   + f"the request table ({request_table / GiB:.2f} GiB), CUDA graphs ({graphs / GiB:.2f} GiB) and "
                   f"activations ({act / GiB:.2f} GiB): "
                   + (f"lower mem_fraction_static to at most {fraction_to_fit:.2f}" if fraction_to_fit else
                      _no_fraction_fix(request_table, graphs, act, draft_after) if search_fit else
                      "lower mem_fraction_static"))
    notes = _notes(d, s, capped, hybrid=bool(swa_tokens), rules=rules, given=given, running=running)
    terms = {"mem_fraction_static": fraction, "free_before_loading_bytes": int(free_before),
             "other_processes_bytes": d.shared_reserved_bytes, "context_bytes": context,
             "outside_fraction_bytes": int(outside), "outside_fraction_needs_bytes": int(needs),
             "duplicate_embedding_bytes": duplicate, "request_table_bytes": request_table, "sizing_bytes_per_token": sizing_cell,
             "draft_headroom_tokens": headroom,
             "cuda_graph_max_bs": graph_bs, "cuda_graph_batch_sizes": len(captured),
             "draft_sized_with_target": draft_kv_inside, "swa_pool_tokens": swa_tokens, "fraction_to_fit": fraction_to_fit, "notes": notes}
    return MemoryAccount(
        settings=s, total_bytes=total, budget_bytes=int(fraction * free_before), weights_target=w_target,
        weights_draft_bytes=w_draft, activation_peak_bytes=act, activation_terms=act_terms, non_torch_bytes=context,
        cuda_graph_bytes=graphs, cuda_graph_counted=False, kv_cache_bytes=kv_bytes if tokens else int(rest),
        kv_layers=target_layers + draft_layers, kv_blocks=tokens // page, kv_cache_tokens=tokens, pool_slots=slots,
        block_bytes=page * bytes_per_token(slots) if slots else 0,
        # requests of max_model_len tokens at once: the full pool's tokens over each one's slots in it, or on the hybrid
        # SWA pools over the larger of those and its windowed slots over the ratio (swa_pool_slots)
        max_concurrency=tokens / (pool_blocks(slots, s.max_model_len, 1) if slots else s.max_model_len),
        unprofiled_runtime_bytes=0,  # nothing is profiled: see problem
        startup_problem=problem, null_blocks=0, engine_terms=terms)


def _no_fraction_fix(request_table: int, graphs: int, act: int, draft: int) -> str:
    """What to change where no mem_fraction_static starts the server (the search found none: the (1 - f) share's needs
    do not shrink with the fraction), by the largest of them."""
    largest = max((request_table, "request"), (graphs, "graphs"), (act, "act"), (draft, "draft"))[1]
    return "no mem_fraction_static leaves room for them: " + {
        # ReqToTokenPool: max_num_reqs rows of context_len + 4 int32 slots (model_runner_kv_cache_mixin.py _init_pools)
        "request": "lower max_model_len (--context-length) or max_num_seqs (--max-running-requests): the request "
                   "table holds an int32 slot for every position of every request row",
        "graphs": "lower cuda_graph_max_bs (--cuda-graph-max-bs) or run without CUDA graphs (--disable-cuda-graph)",
        "act": "lower max_num_batched_tokens (--chunked-prefill-size)",
        "draft": "a smaller draft, or a release that sizes the draft inside the fraction (0.5.14 on)",
    }[largest]


def _notes(d: Deployment, s: ResolvedSettings, capped: str | None, hybrid: bool, rules: Rules, given: int | None,
           running: int) -> list[str]:
    notes = [capped] if capped else []
    if given and running < given:
        notes.append(f"SGLang lowers max_running_requests from {given} to {running} at start-up ("
                     + ("the request pool it estimates from the KV pool, model_runner_kv_cache_mixin.py "
                        "_resolve_max_num_reqs" if rules.running_rule == "estimate" else
                        "half the KV pool's tokens, model_runner_kv_cache_mixin.py _resolve_max_num_reqs: 'max_running_"
                        "requests was reduced from the requested ... due to the available KV cache capacity'") + ")")
    if d.engine.block_size and s.block_size != d.engine.block_size:
        notes.append(f"page size {s.block_size}, not {d.engine.block_size}: SGLang's TensorRT-LLM attention backend "
                     f"(its default for this model on {d.gpu.gpu_id}) changes a page size it does not take to 64")
    if hybrid:
        window = min(layer.window or 0 for layer in d.target.layers if layer.kind in ("sliding", "chunked"))
        notes.append(f"SGLang's hybrid SWA pools: the KV cache tokens are its full-attention layers' pool, the windowed "
                     f"layers' pool holding {SWA_FULL_TOKENS_RATIO:g} x as many (--swa-full-tokens-ratio); a request is "
                     f"counted against the pool it fills first: the full pool when longer than about "
                     f"{window / SWA_FULL_TOKENS_RATIO:,.0f} tokens ({window:,}-token window / {SWA_FULL_TOKENS_RATIO:g}), "
                     "else the windowed pool, which holds all of a shorter request's tokens")
    elif any(layer.kind in ("sliding", "chunked") for layer in d.target.layers):
        notes.append("windowed layers charged every token: this SGLang release keeps this model in one pool (its hybrid "
                     "SWA pool is off for it)")
    return notes


def _largest_starting_fraction(d: Deployment, p: AccountingProfile, rules: Rules, least: float,
                               below: float = 0.99) -> float:
    """The largest fraction, in steps of 0.01 from `below` down to one point above the weights' share `least`, that
    SGLang starts with: its pool holds tokens and its outside share the run-time buffers for the requests that pool
    then runs (0.0: none does). Each candidate is accounted whole: what it runs, and so its CUDA graphs and request
    table, changes with the pool."""
    f = below
    while f > least + 0.01:
        at = account(replace(d, engine=replace(d.engine, gpu_memory_utilization=f)), p, rules, search_fit=False)
        if at.startup_problem is None:
            return f
        f = round(f - 0.01, 2)
    return 0.0
