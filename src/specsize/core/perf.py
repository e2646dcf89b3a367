"""Step times and what speculation is worth, per engine instance. Pure: no I/O.

One forward pass of B sequences, each scoring q new tokens over a context of L tokens, on one GPU of a
TP group, is the sum of its operations, each at its own roofline (docs/performance.md):

    GEMMs      max(weight bytes / (bandwidth x eff_memory), flops / (peak x eff_compute(T))) + fixed per kernel,
               eff_compute(T) = eff_compute x T / (T + gemm_half_tokens): tile and wave losses at few tokens
    fused MoE  the experts the step's tokens touch, at eff_compute(tokens per touched expert) and the bandwidth
               of the experts' dtype (bf16, fp8, 4-bit), plus a fixed cost per MoE layer (routing, alignment) and
               the traffic of its elementwise kernels per token (gated activation, weighted sum: moe_activation_elements)
    attention  max(KV bytes / (bandwidth x attn_memory), attention flops / (peak x attn_compute)); a sliding window
               reads min(context, window) tokens, DeepSeek-V3.2's sparse attention min(context, index_topk) latents
               beside its indexer's key scan of the whole context
    all-reduce 2 per layer (TP > 1): latency + 2 (TP-1)/TP x message bytes / bus bandwidth
    sampler    the logits of the sampled positions (B x vocab x fp32) read and written `sampler_passes` times
    CPU        per step + per scheduled sequence (scheduler, input preparation, output processing); the API
               server's per-sequence streaming work runs beside the engine and bounds a step from below

bytes = weights read once per step (for MoE: the shared part plus every distinct expert the step's B x q
tokens touch) + the KV cache of every sequence's context; flops = 2 x active parameters x tokens +
attention over the context; the lm_head multiplies only the positions sampled. A speculative step is one verification pass of k+1 positions per sequence,
the drafter's k forwards (the first over the positions just verified: DRAFT_EXTEND_*) and a fixed per-step cost
(rejection sampling, bookkeeping):

    tokens_per_pass = (1 - a^(k+1)) / (1 - a)          (Leviathan et al. 2023, eq. 1)
    speedup(B)      = tokens_per_pass x t_decode(B) / t_spec_step(B)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from .kvcache import indexed_mla_bytes, model_kv_layers
from .memory import GRAPH_ALL
from .specs import DTYPE_BYTES, Deployment, GpuSpec, ModelSpec, Quantization, effective_target, medusa_at_k
from .speculation import (ASYNC_DRAFTERS_V1, SpecMethod, acceptance_from_mean_length, drafter_kind,  # noqa: F401 - re-exported
                          keeps_overlap, tokens_per_pass, verified_per_sequence)
from .weights import (VLLM_MXFP4_PAD, Mxfp4Layout, Mxfp4Pad, expert_bytes_per_rank, expert_hidden, experts_on_rank,
                      indexer_dims, padded_vocab, weight_breakdown)

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of a GPU family's peaks and fixed per-step costs (calibrated; overridable)."""

    family: str
    memory: float  # achieved fraction of HBM bandwidth in decode
    compute: float  # achieved fraction of dense tensor FLOP/s in large GEMMs
    step_overhead_s: float  # per target forward: launches, sampler, scheduler
    spec_step_overhead_s: float  # per speculative step, every method: rejection sampler, bookkeeping
    draft_step_overhead_s: float  # per drafter forward
    draft_setup_overhead_s: float  # per speculative step with a model-based drafter: its pass over the accepted tokens
    allreduce_latency_s: float  # per all-reduce
    ngram_per_seq_s: float = 2e-5  # CPU prompt-lookup per sequence per step
    ngram_scan_per_token_s: float = 0.0  # the lookup's scan per context token of each sequence per step (the release's)
    source: str = ""
    # The terms below default to neutral values (a pure roofline); the catalog's rows set them per family.
    gemm_half_tokens: float = 0.0  # tokens in a GEMM at which it reaches half its compute efficiency
    gemm_fixed_s: float = 0.0  # per GEMM kernel: launch inside a CUDA graph, ramp-up of a small matrix
    attn_memory: float = 0.0  # fraction of HBM bandwidth reading the KV cache in decode (0: as `memory`)
    attn_compute: float = 0.0  # fraction of peak in prefill attention (0: as `compute`)
    # fraction of peak of a prompt's attention where the engine release runs it through its paged prefix kernel
    # (ResolvedSettings.prefix_prompt_kernel: vLLM V0's chunked prefill on ROCm); 0: as attn_compute
    attn_prefix_compute: float = 0.0
    moe_memory: float = 0.0  # fraction of HBM bandwidth streaming routed experts (0: as `memory`)
    moe_seq_reuse: float = 0.0  # share of a sequence's extra tokens in one pass routed to experts it already touches
    moe_routing_skew: float = 0.0  # Zipf exponent of the experts' popularity in a batch (0: uniform routing)
    low_bit_memory: float = 0.0  # fraction of HBM bandwidth of w4a16 / MXFP4 dequantising kernels (0: `memory`)
    low_bit_half_tokens: float = 0.0  # gemm_half_tokens of those dequantising kernels (0: as gemm_half_tokens)
    moe_fp8_memory: float = 0.0  # fraction of HBM bandwidth streaming fp8 routed experts (0: as `moe_memory`)
    moe_layer_fixed_s: float = 0.0  # per MoE layer and forward: routing, top-k, token alignment and permutation
    # per MLA layer and forward, the engine's MLA module beyond its four GEMMs' priced time (AccountingProfile.
    # mla_layer_fixed_s_by_gpu: vLLM's latent projections, norms, rope, absorbed batched matmuls and attention launch)
    mla_layer_fixed_s: float = 0.0
    allreduce_bus_fraction: float = 1.0  # achieved bus bandwidth / interconnect bandwidth
    allreduce_latency_per_gpu_s: float = 0.0  # extra latency per GPU beyond 2 in the all-reduce
    # per all-reduce where the engine release runs its own custom all-reduce kernel on this family rather than the
    # collective library's (AccountingProfile.custom_allreduce: vLLM on ROCm from 0.8.3); 0: allreduce_latency_s always
    allreduce_latency_custom_s: float = 0.0
    sampler_passes: float = 0.0  # fp32 logits passes of the sampler (softmax, top-k/p, sampling)
    cpu_per_seq_s: float = 0.0  # engine-core CPU per scheduled sequence per step
    api_per_seq_s: float = 0.0  # API server per sequence per step (detokenise, stream): a floor on the step
    # the engine process's output processing per emitted token (AccountingProfile.output_per_token_s: vLLM V0), after
    # the step where nothing overlaps it (SpecCosts.serial_output_s)
    output_per_token_s: float = 0.0
    eager_layer_s: float = 0.0  # extra launch cost per layer of a forward outside a CUDA graph (--enforce-eager, ...)
    # the same per MoE layer on top: routing, expert alignment and grouped-GEMM launches issued from Python
    eager_moe_layer_s: float = 0.0
    # ... of an MoE layer behind ordinary attention (not MLA), where the engine's own differs (AccountingProfile.
    # eager_gqa_moe_layer_s); 0: eager_moe_layer_s
    eager_gqa_moe_layer_s: float = 0.0
    frontend_latency_s: float = 0.0  # per request before its first step and after its first token (HTTP, IPC)
    frontend_serial_s: float = 0.0  # per request, API-server intake on one shared core: a burst queues before the engine
    draft_step_tp_s: float = 0.0  # per drafter forward when the drafter is sharded over TP > 1 GPUs
    spec_step_tp_s: float = 0.0  # per speculative step when the target is sharded over TP > 1 GPUs
    # per decoding sequence of a speculative step, the host's bookkeeping an engine that hands over between drafter
    # and target on the host does after the forwards, where nothing overlaps the step (SGLang's spec v1 worker)
    spec_seq_host_s: float = 0.0


def api_server_scaled(eff: Efficiency, scale: float) -> Efficiency:
    """The API server's work - a request's front-end latency and intake, its per-token streaming that floors a step -
    times `scale` (an engine release's own front end: AccountingProfile.api_cost_scale)."""
    if scale == 1.0:
        return eff
    return replace(eff, frontend_latency_s=eff.frontend_latency_s * scale,
                   frontend_serial_s=eff.frontend_serial_s * scale, api_per_seq_s=eff.api_per_seq_s * scale)


def streamed_every(eff: Efficiency, tokens: int) -> Efficiency:
    """The API server's per-token work when the engine hands it a request's tokens every `tokens` tokens (SGLang's
    --stream-interval: its scheduler sends a running request's output to the detokenizer and the tokenizer manager
    only then, so they detokenise and stream 1 / tokens of the messages); the per-request intake is unchanged."""
    return replace(eff, api_per_seq_s=eff.api_per_seq_s / tokens) if tokens > 1 else eff


def engine_kernels(eff: Efficiency, moe_fp8_memory: float, ngram_per_seq_s: float = 0.0,
                   eager_gqa_moe_layer_s: float = 0.0, moe_layer_fixed_s: float = 0.0,
                   output_per_token_s: float = 0.0, ngram_scan_per_token_s: float = 0.0,
                   custom_allreduce: bool = False, mla_layer_fixed_s: float = 0.0) -> Efficiency:
    """The family's terms with an engine release's own code where it differs from what the terms were measured with:
    its fused-MoE kernels for fp8 experts (AccountingProfile.moe_fp8_memory), its n-gram proposer's host time per
    sequence (AccountingProfile.ngram_proposer_per_seq_s: vLLM V0 proposes one sequence at a time through small GPU
    operations and device syncs), the launches of its MoE layers behind ordinary attention outside a CUDA graph
    (AccountingProfile.eager_gqa_moe_layer_s) and the fixed time of its fused-MoE kernels in a layer on this GPU
    family (AccountingProfile.moe_layer_fixed_s_by_gpu), its MLA module's (mla_layer_fixed_s_by_gpu), its output processing per emitted token in the engine's
    process (AccountingProfile.output_per_token_s); 0 keeps the family's. The n-gram lookup's scan per context token
    (AccountingProfile.ngram_scan_per_token_s) is the release's alone: the family has none. Where the release runs its
    custom all-reduce kernel on a family that has a latency for it (AccountingProfile.custom_allreduce, Efficiency.
    allreduce_latency_custom_s), that latency."""
    if custom_allreduce and eff.allreduce_latency_custom_s:
        eff = replace(eff, allreduce_latency_s=eff.allreduce_latency_custom_s)
    if moe_fp8_memory:
        eff = replace(eff, moe_fp8_memory=moe_fp8_memory)
    if moe_layer_fixed_s:
        eff = replace(eff, moe_layer_fixed_s=moe_layer_fixed_s)
    if mla_layer_fixed_s:
        eff = replace(eff, mla_layer_fixed_s=mla_layer_fixed_s)
    if eager_gqa_moe_layer_s:
        eff = replace(eff, eager_gqa_moe_layer_s=eager_gqa_moe_layer_s)
    if output_per_token_s:
        eff = replace(eff, output_per_token_s=output_per_token_s)
    if ngram_scan_per_token_s:
        eff = replace(eff, ngram_scan_per_token_s=ngram_scan_per_token_s)
    return replace(eff, ngram_per_seq_s=ngram_per_seq_s) if ngram_per_seq_s else eff


def ngram_lookup_s(per_seq_s: float, per_token_s: float, seqs: float, context_tokens: float) -> float:
    """The n-gram proposer's host time in a speculative step of `seqs` sequences holding `context_tokens` of context
    together: a fixed part per sequence (Efficiency.ngram_per_seq_s) and the release's scan of each history
    (Efficiency.ngram_scan_per_token_s)."""
    return per_seq_s * seqs + per_token_s * context_tokens


def offline_efficiency(eff: Efficiency) -> Efficiency:
    """The costs of an engine driven in-process (vLLM `LLM.generate`, `benchmark_throughput.py`): no API server takes
    requests in or streams their tokens."""
    return api_server_scaled(eff, 0.0)


@dataclass(frozen=True)
class ModelCost:
    """What one forward of a model costs on one GPU, precomputed once (per GPU, bytes and params)."""

    dense_bytes: int  # weights read every step whatever the routing
    dense_params: int  # parameters that multiply every token
    expert_bytes: int  # one routed expert of one MoE layer
    expert_params: int
    moe_layers: int
    num_experts: int
    top_k: int
    kv_layers: tuple  # (bytes per token, window or None, heads on this GPU x head dim) per attention layer
    hidden: int
    n_layers: int
    act_bytes: int
    tp: int
    fp8_compute: bool
    # expert-parallel ranks (Deployment.ep): expert_bytes / expert_params are then one whole expert, and a step's
    # experts are the busiest of the ranks' (step_time)
    ep: int = 1
    lm_head_params: int = 0  # per rank; multiplies only the sampled positions
    vocab: int = 0  # logits per sampled position on this rank
    low_bit: bool = False  # 4-bit weights (int4 w4a16, MXFP4, NVFP4): dequantised in the GEMM unless the GPU has FP4
    low_bit_experts_only: bool = False
    fp4: str = ""  # the FP4 format ("mxfp4", "nvfp4") of 4-bit float weights, "" otherwise (NATIVE_FP4 runs them)
    # the kv_layers' widths as a prompt token's attention sees them, where that differs (0: the same). MLA runs a
    # prompt as ordinary multi-head attention over the decompressed keys and values (heads x (qk_nope + qk_rope)
    # query-key, heads x v_head_dim value-output: vLLM's MLACommonImpl prefill, SGLang's MHA_CHUNKED_KV), and decodes
    # absorbed over the latent (heads x (kv_lora_rank + qk_rope) wide): about 3.6x the prompt's flops per pair
    prompt_attn_width: int = 0
    # the KV cache is fp8: attention's products run in fp8 (FlashAttention 3's fp8 path in vLLM and SGLang) where the
    # GPU has an fp8 peak; otherwise in the activations' 16-bit type whatever the weights' format
    kv_fp8: bool = False
    mla: bool = False  # its attention layers are MLA (their MoE layers launch as Efficiency.eager_moe_layer_s says)
    # DeepSeek-V3.2's sparse-attention indexer: its flops per (new token x context token), every layer's summed
    indexer_flops_per_pair: float = 0.0
    # ... and its index_topk, the latents each query reads: the kv_layers entries with this window are its sparse
    # attention's latents, not a sliding window (0: none; the model has no sliding window of that size)
    sparse_window: int = 0
    # with fp8_compute, the share of the dense GEMMs' parameters held in fp8: the rest, linear layers the checkpoint
    # keeps in the model dtype (Quantization.unquantized), multiply at the 16-bit peak
    fp8_share: float = 1.0
    # activation elements a token moves through the fused MoE's own elementwise kernels, every MoE layer summed
    # (moe_activation_elements; 0 for a dense model or where the experts' kernel fuses them)
    moe_act_elements: float = 0.0


@dataclass(frozen=True)
class StepTime:
    time_s: float
    flops: float
    bytes: float
    bound: str  # "memory" or "compute" (or "overhead" when neither dominates the fixed costs)


def tree_tokens_per_pass(acceptance: float, depth: int, topk: int, num_draft_tokens: int) -> float:
    """Tree drafting (SGLang EAGLE): w candidates per depth make each depth's acceptance 1 - (1 - a)^w, and the
    chain of `depth` such levels is capped by the `num_draft_tokens` verified, SGLang's
    --speculative-num-draft-tokens, whose tree holds the last verified token as its root (steps 3, top-k 1: 4): a pass
    gains at most that many tokens. The N - 1 draft nodes spread over the depths give w = min(top-k, (N - 1) / depth)
    candidates a depth (N = 8 over 3 depths: 2.33, not the 4 of a full top-4 tree; N = depth + 1: a chain; fewer
    nodes than depths: a chain of N - 1)."""
    a_level = tree_level_acceptance(acceptance, depth, topk, num_draft_tokens)
    # fewer draft nodes than depths (N - 1 < depth) verify a chain of N - 1 drafts
    return min(tokens_per_pass(a_level, max(1, min(depth, num_draft_tokens - 1))), float(num_draft_tokens))


def tree_level_acceptance(acceptance: float, depth: int, topk: int, num_draft_tokens: int) -> float:
    """A tree depth's acceptance: 1 - (1 - a)^w with w = min(top-k, (N - 1) / depth) candidates a depth
    (tree_tokens_per_pass; the simulator draws each depth at it)."""
    width = min(max(1, topk), max(1.0, (num_draft_tokens - 1) / max(1, depth)))
    return 1 - (1 - acceptance) ** width


@lru_cache(maxsize=512)  # a pure function of frozen inputs, asked again for every candidate a plan weighs
def model_cost(m: ModelSpec, tp: int, dtype: str, quant: Quantization | None, *, share_embeddings: bool = False,
               kv_dtype_bytes: int = 2, layers: int | None = None, include_mtp_only: bool = False,
               mxfp4_pad: Mxfp4Pad = VLLM_MXFP4_PAD, mla_latent: bool = True, ep: int = 1) -> ModelCost:
    """`ep` > 1: the routed experts split by expert over that many ranks (Deployment.ep): a rank holds
    experts_on_rank of them whole, and a step waits on the busiest rank (step_time)."""
    # the routed experts as one rank holds them: rows split over TP, or whole under expert parallelism
    expert_tp, local = (1, experts_on_rank(m.moe.num_experts, ep)) if (ep > 1 and m.moe) else (
        tp, m.moe.num_experts if m.moe else 0)
    if include_mtp_only:
        full = weight_breakdown(m, tp, 1, dtype, quant, include_mtp=True, rotary_cache=False, mxfp4_pad=mxfp4_pad,
                                ep=ep)
        base = weight_breakdown(m, tp, 1, dtype, quant, include_mtp=False, rotary_cache=False, mxfp4_pad=mxfp4_pad,
                                ep=ep)
        # One forward runs ONE of the checkpoint's MTP layers, the (spec_step_idx % num_mtp_layers)-th, plus the
        # shared lm_head: a drafting step of k forwards takes the layers in turn, reusing them when k is larger
        # (vllm/model_executor/models/deepseek_mtp.py DeepSeekMultiTokenPredictor.forward and compute_logits:
        # "current_step_idx = spec_step_idx % self.num_mtp_layers"; qwen3_next_mtp.py alike). The MTP layers are
        # alike (shaped like the last: core.weights.weight_breakdown), so one is 1 / num_mtp_layers of them; a
        # checkpoint with 3 had been priced as 3 layers a forward
        mtp = max(1, m.num_mtp_layers)
        per_layer_expert, expert_params = expert_bytes_per_rank(m, expert_tp, dtype, quant, mxfp4_pad)
        moe_layers = 1 if m.moe else 0
        routed = moe_layers * local * per_layer_expert
        dense_bytes = (full.total - base.total) // mtp + base.lm_head - routed
        dense_params = (full.params - base.params) // mtp + base.lm_head // DTYPE_BYTES[dtype] - (
            moe_layers * local * expert_params)
        n_layers = 1
        lm_head_params = (base.lm_head or base.embedding) // DTYPE_BYTES[dtype]
        kept_params = (full.params_unquantized - base.params_unquantized) // mtp
        layers = 1  # its attention: the one layer's KV cache
    else:
        w = weight_breakdown(m, tp, 1, dtype, quant, share_embeddings=share_embeddings, rotary_cache=False,
                             mxfp4_pad=mxfp4_pad, ep=ep)
        per_layer_expert, expert_params = expert_bytes_per_rank(m, expert_tp, dtype, quant, mxfp4_pad)
        moe_layers = len(m.moe.moe_layers) if m.moe else 0
        routed_bytes = moe_layers * local * per_layer_expert
        # an embedding lookup reads B rows, not the table; a tied table is read whole as the lm_head
        tied = w.lm_head == 0 and not share_embeddings
        emb_bytes = 0 if tied else w.embedding
        dense_bytes = w.total - emb_bytes - routed_bytes
        emb_params = emb_bytes // DTYPE_BYTES[dtype]
        dense_params = w.params - emb_params - moe_layers * local * expert_params
        n_layers = m.num_layers
        lm_head_params = (w.lm_head or (w.embedding if tied else 0)) // DTYPE_BYTES[dtype]
        kept_params = w.params_unquantized
    q = quant if quant is not None else m.quantization
    kv: list[tuple[int, int | None, int]] = []
    heads = m.num_attention_heads // tp
    prompt_width = 0
    mla = m.mla
    index_heads, index_dim, index_topk = indexer_dims(m) if (mla is not None and mla_latent) else (0, 0, 0)
    indexer_flops = 0
    for layer in model_kv_layers(m, tp, kv_dtype_bytes, "x", layers=layers if layers else None, mla_latent=mla_latent):
        if mla is None:
            width = heads * m.head_dim
        elif mla_latent:
            width = heads * (mla.kv_lora_rank + mla.qk_rope_head_dim)
            # a prompt: (query-key + value-output) / 2, so that 4 x width prices both products as for ordinary heads
            prompt_width += heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim) // 2
        else:  # every head's keys and values decompressed, qk_nope + qk_rope wide (core.kvcache.model_kv_layers)
            width = heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
        if index_topk and layer.kind == "mla":
            # DeepSeek-V3.2's sparse attention (DSA): the indexer scores every cached token with its fp8 key (vLLM's
            # model_executor/layers/sparse_attn_indexer.py: fp8 paged MQA logits over each sequence's whole
            # seq_lens, index_n_heads x index_head_dim per pair, then top_k_per_row), and the MLA kernel reads only
            # those index_topk latents (v1/attention/backends/mla/flashmla_sparse.py: flash_mla_with_kvcache with the
            # top-k indices): the latent part of the token's bytes is read as a window of index_topk, the key
            # (core.kvcache.indexed_mla_bytes with no latent) over the whole context; the indexer is replicated on
            # every rank (core.weights._indexer_bytes), so its heads are all here. The decode's k + 1 verified
            # queries of a sequence select mostly the same latents: read once a sequence, as a window is
            key = indexed_mla_bytes(0, index_dim, kv_dtype_bytes)
            kv.append((layer.bytes_per_token - key, index_topk, width))
            kv.append((key, None, 0))
            indexer_flops += 2 * index_heads * index_dim  # every token of every forward, prompts' too
            continue
        kv.append((layer.bytes_per_token, layer.window, width))
    # a step reads an expert's tensors as the kernel has them, not the loaded scales an engine keeps beside them
    # (Mxfp4Layout.keeps_checkpoint_scales: held, counted in the weights and out of the dense bytes above, never read)
    read_expert = expert_bytes_per_rank(m, expert_tp, dtype, quant, mxfp4_pad, read=True)[0]
    moe_act = moe_activation_elements(m, expert_params, moe_layers, ep, q, mxfp4_pad) if m.moe else 0.0
    return ModelCost(dense_bytes=dense_bytes, dense_params=max(0, dense_params), expert_bytes=read_expert,
                     expert_params=expert_params, moe_layers=moe_layers,
                     num_experts=m.moe.num_experts if m.moe else 0, top_k=m.moe.experts_per_token if m.moe else 0,
                     kv_layers=tuple(kv), hidden=m.hidden_size, n_layers=n_layers, act_bytes=DTYPE_BYTES[dtype],
                     tp=tp, ep=ep if m.moe else 1, fp8_compute=bool(q and q.method == "fp8"),
                     lm_head_params=min(lm_head_params, max(0, dense_params)),
                     vocab=lm_head_params // max(1, m.hidden_size),
                     # bitsandbytes 4-bit runs a dequantising kernel too (vLLM's _apply_4bit_weight: bitsandbytes'
                     # matmul_4bit, gemv_4bit at decode) over the packed bytes: priced as the w4a16 kernels
                     low_bit=bool(q and q.method in ("int4", "mxfp4", "nvfp4", "bnb4")),
                     low_bit_experts_only=bool(q and q.experts_only),
                     fp4=q.method if (q and q.method in ("mxfp4", "nvfp4")) else "", prompt_attn_width=prompt_width,
                     kv_fp8=kv_dtype_bytes == 1, mla=m.mla is not None, moe_act_elements=moe_act,
                     fp8_share=1.0 - kept_params / dense_params if dense_params > 0 else 1.0,
                     indexer_flops_per_pair=indexer_flops, sparse_window=index_topk if indexer_flops else 0)


@dataclass(frozen=True)
class StepCoefficients:
    """A model's forward priced on one GPU as a closed form of a step's composition (for fast loops)."""

    dense_bytes: float
    expert_bytes_per_layer: float  # one routed expert, summed over MoE layers
    num_experts: int
    top_k: int
    flops_per_token: float  # dense GEMMs (lm_head excluded: it multiplies only the sampled positions)
    attn_flops_per_pair: float  # per (new token x context token)
    act_bytes_per_token: float
    kv_full_bytes_per_token: float  # context bytes per token of the full-attention layers
    kv_windows: tuple  # (window, bytes per token) of the sliding / chunked layers
    inv_flops: float  # 1 / (peak x efficiency), s per flop
    inv_bandwidth: float  # 1 / (bandwidth x efficiency), s per byte
    comm_fixed_s: float  # all-reduce latency per step
    comm_per_token_s: float
    overhead_s: float
    expert_flops_per_token: float = 0.0  # routed experts (top_k of them) per token
    lm_head_flops_per_logit: float = 0.0
    half_tokens: float = 0.0  # eff_compute(T) = eff_compute x T / (T + half_tokens)
    half_tokens_experts: float = 0.0  # the same for the routed experts (a dequantising kernel's own curve)
    fixed_s: float = 0.0  # per-kernel fixed costs of every layer (and launches without CUDA graphs)
    inv_bandwidth_experts: float = 0.0
    inv_bandwidth_kv: float = 0.0
    inv_flops_attn: float = 0.0
    sampler_s_per_logit: float = 0.0  # per sampled position: B x vocab fp32 passes
    cpu_per_seq_s: float = 0.0
    api_per_seq_s: float = 0.0
    expert_seq_reuse: float = 0.0  # Efficiency.moe_seq_reuse
    expert_skew: float = 0.0  # Efficiency.moe_routing_skew
    # the engine core's per-sequence work (cpu_per_seq_s: scheduling, input preparation, output processing) runs
    # beside the forward (vLLM's async scheduling): the step takes the longer of the two, then the per-forward fixed
    # cost (overhead_s: graph launch, the sampled tokens' sync), which stays on the critical path
    host_overlapped: bool = False
    # the host's kernel launches a forward pays when it runs outside a CUDA graph (step_time(graphed=False): a step
    # larger than the engine captures, a prompt step of an engine that graphs decodes only); 0 when the coefficients
    # already price every forward eager (--enforce-eager: in fixed_s)
    ungraphed_s: float = 0.0
    # per (prompt token x context token), where a prompt's attention differs from a decode's (ModelCost.
    # prompt_attn_width: MLA); 0: attn_flops_per_pair. It runs over keys and values decompressed to 16 bits whatever
    # the cache's dtype, so at the bf16 peak: inv_flops_attn_prompt (0: inv_flops_attn)
    attn_flops_per_prompt_pair: float = 0.0
    inv_flops_attn_prompt: float = 0.0
    # DeepSeek-V3.2's sparse attention (ModelCost.sparse_window): its flops per (new token x latent read),
    # which reads min(context, index_topk) latents a sequence, and that window's place in kv_windows (-1: none).
    # A decode's or verification's pairs, and a prompt's beyond index_topk, are priced over the window's share of the
    # context (step_time); a prompt within it as attn_flops_per_prompt_pair says
    sparse_flops_per_pair: float = 0.0
    sparse_window_index: int = -1
    indexer_flops_per_pair: float = 0.0  # ModelCost.indexer_flops_per_pair: over every pair, a prompt's too
    inv_flops_indexer: float = 0.0  # ... at the fp8 peak where the GPU has one (0: inv_flops_attn)
    # pipeline stages (Deployment.pp). Both engines keep a batch in flight a stage and split the running requests
    # among them (vLLM V1: VllmConfig.max_concurrent_batches = pipeline_parallel_size, EngineCore.
    # step_with_batch_queue schedules the next batch from the requests not already in flight, a decode waiting for
    # its sampled token; V0: one virtual engine a stage; SGLang: scheduler_pp_mixin.event_loop_pp's micro-batches of
    # max_running_requests // pp_size). A round, in which every request advances one step, is then one micro-batch's
    # pass through every stage (the model's layers once, at the micro-batch's size) while the other micro-batches
    # fill the other stages: step_time prices a step of many sequences as one of its `microbatches` parts
    stages: int = 1
    ep: int = 1  # ModelCost.ep: the experts' time is the busiest expert-parallel rank's (busiest_rank)



# GPU families whose matrix cores take FP4 weights without dequantising them, and which formats: NVIDIA Blackwell
# (FP4 tensor cores, NVFP4 and the OCP MX formats) and AMD CDNA 4 (MI350X / MI355X: "native support for ultra-low-
# precision FP4 and FP6" in its matrix cores, the OCP MX formats - AMD's "Introducing AMD CDNA 4 Architecture"
# whitepaper; NVFP4 is NVIDIA's own format). Elsewhere 4-bit weights are dequantised inside the GEMM.
NATIVE_FP4 = {"blackwell": ("mxfp4", "nvfp4"), "cdna4": ("mxfp4",)}


def sampler_s(passes: float, vocab: int, gpu: GpuSpec, eff: Efficiency) -> float:
    """Seconds of the sampler per sampled position: `passes` fp32 passes over its `vocab` logits, streamed at the
    family's memory fraction (Efficiency.sampler_passes passes in a step; bench/gpu_sampler_check.py measures them)."""
    bw = gpu.memory_bandwidth_bytes_s
    return passes * 4.0 * vocab * (1.0 / (bw * eff.memory)) if (bw and vocab) else 0.0


@lru_cache(maxsize=1024)  # as model_cost
def coefficients(c: ModelCost, gpu: GpuSpec, eff: Efficiency, overhead: bool = True,
                 eager: bool = False, host_overlapped: bool = False, stages: int = 1,
                 prefix_kernel: bool = False, fp8_attention_16bit: bool = False) -> StepCoefficients:
    """A forward's cost terms on `gpu` (`prefix_kernel`: the engine runs every prompt's attention through its paged
    prefix kernel, at Efficiency.attn_prefix_compute: ResolvedSettings.prefix_prompt_kernel; `fp8_attention_16bit`:
    its fp8 attention runs no faster than the 16-bit peak, ResolvedSettings.fp8_attention_16bit)."""
    # FP4 matrix cores: their FP4 formats need no dequantisation; int4 (AWQ/GPTQ) stays a dequantising kernel
    fp4_native = c.fp4 in NATIVE_FP4.get(gpu.family, ())
    fp8 = c.fp8_compute or fp4_native
    peak = gpu.fp8_flops if (fp8 and gpu.fp8_flops) else gpu.bf16_flops
    if c.fp8_compute and gpu.fp8_flops and gpu.bf16_flops and c.fp8_share < 1.0:
        # the layers kept in the model dtype run at the 16-bit peak: the flops' mean time per flop
        peak = 1.0 / (c.fp8_share / gpu.fp8_flops + (1.0 - c.fp8_share) / gpu.bf16_flops)
    # ModelCost.kv_fp8, unless the release's fp8 attention runs no faster than 16 bits (fp8_attention_16bit: its
    # FlashAttention's two-level accumulation); MLA runs an fp8 cache through FlashMLA's fp8 kernel instead (vLLM 0.32
    # platforms/cuda.py: FLASH_ATTN_MLA takes no fp8 cache, FLASHMLA's flash_mla_with_kvcache_fp8 multiplies in fp8)
    two_level = fp8_attention_16bit and not c.mla
    attn_peak = gpu.fp8_flops if (c.kv_fp8 and gpu.fp8_flops and not two_level) else gpu.bf16_flops
    full = sum(b for b, window, _ in c.kv_layers if not window)
    windows: dict[int, float] = {}
    for b, window, _ in c.kv_layers:
        if window:
            windows[window] = windows.get(window, 0) + b
    sparse_index = list(windows).index(c.sparse_window) if c.sparse_window in windows else -1
    comm_fixed = comm_token = 0.0
    if c.tp > 1:
        link = (gpu.interconnect_bytes_s or 1e12) * eff.allreduce_bus_fraction
        latency = eff.allreduce_latency_s + eff.allreduce_latency_per_gpu_s * (c.tp - 2)
        comm_fixed = 2 * c.n_layers * latency
        comm_token = 2 * c.n_layers * c.hidden * c.act_bytes * 2 * (c.tp - 1) / c.tp / link
    bw = gpu.memory_bandwidth_bytes_s

    def inv_bw(fraction: float) -> float:
        return 1.0 / (bw * (fraction or eff.memory)) if bw else 0.0

    low_bit = c.low_bit and not fp4_native
    dense_memory = eff.low_bit_memory if (low_bit and not c.low_bit_experts_only) else eff.memory
    dequant_half = eff.low_bit_half_tokens or eff.gemm_half_tokens  # the dequantising kernels' own curve
    dense_half = dequant_half if (low_bit and not c.low_bit_experts_only) else eff.gemm_half_tokens
    expert_memory = eff.low_bit_memory if low_bit else eff.moe_memory
    if low_bit and eff.low_bit_memory and eff.moe_memory:
        expert_memory = min(eff.low_bit_memory, eff.moe_memory)
    if c.fp8_compute and not low_bit and eff.moe_fp8_memory:
        expert_memory = eff.moe_fp8_memory
    lm_head_flops = 2.0 * c.lm_head_params
    dense_flops = 2.0 * c.dense_params - lm_head_flops
    # four GEMMs per layer (QKV, output projection, gate/up, down) plus the MoE router where there is one
    kernels_per_layer = 4 + (1 if c.moe_layers else 0)
    moe_launch = (eff.eager_gqa_moe_layer_s or eff.eager_moe_layer_s) if not c.mla else eff.eager_moe_layer_s
    launches = c.n_layers * eff.eager_layer_s + c.moe_layers * moe_launch  # a forward outside a graph
    fixed = (c.n_layers * kernels_per_layer * eff.gemm_fixed_s + c.moe_layers * eff.moe_layer_fixed_s
             + (c.n_layers * eff.mla_layer_fixed_s if c.mla else 0.0)
             + (launches if eager else 0.0))
    sampler = sampler_s(eff.sampler_passes, c.vocab, gpu, eff)
    attn_per_pair = 4.0 * sum(width for _, window, width in c.kv_layers
                              if not (c.sparse_window and window == c.sparse_window))
    # a prompt's pairs apart from a decode's: MLA's prompt width (at the bf16 peak), or the paged prefix kernel's
    prompt_per_pair, inv_prompt = 4.0 * c.prompt_attn_width, 0.0
    if c.prompt_attn_width and gpu.bf16_flops:
        inv_prompt = 1.0 / (gpu.bf16_flops * (eff.attn_compute or eff.compute))
    elif prefix_kernel and eff.attn_prefix_compute and gpu.bf16_flops:
        # the Triton kernel turns an fp8 cache's keys and values back to the query's dtype before its products
        # (attention/ops/prefix_prefill.py, 0.6.4 sdist): the 16-bit peak whatever the KV dtype
        prompt_per_pair, inv_prompt = attn_per_pair, 1.0 / (gpu.bf16_flops * eff.attn_prefix_compute)
    return StepCoefficients(
        dense_bytes=c.dense_bytes, expert_bytes_per_layer=c.moe_layers * c.expert_bytes, num_experts=c.num_experts,
        top_k=c.top_k, flops_per_token=max(0.0, dense_flops),
        attn_flops_per_pair=attn_per_pair,
        act_bytes_per_token=(2.0 * c.hidden * c.n_layers + c.moe_act_elements) * c.act_bytes,
        kv_full_bytes_per_token=full,
        kv_windows=tuple(windows.items()),
        inv_flops=1.0 / (peak * eff.compute) if peak else 0.0,
        inv_bandwidth=inv_bw(dense_memory),
        comm_fixed_s=comm_fixed, comm_per_token_s=comm_token, overhead_s=eff.step_overhead_s if overhead else 0.0,
        expert_flops_per_token=2.0 * c.moe_layers * c.top_k * c.expert_params, lm_head_flops_per_logit=lm_head_flops,
        half_tokens=dense_half, half_tokens_experts=dequant_half if low_bit else eff.gemm_half_tokens,
        fixed_s=fixed, inv_bandwidth_experts=inv_bw(expert_memory),
        inv_bandwidth_kv=inv_bw(eff.attn_memory),
        inv_flops_attn=1.0 / (attn_peak * (eff.attn_compute or eff.compute)) if attn_peak else 0.0,
        sampler_s_per_logit=sampler, cpu_per_seq_s=eff.cpu_per_seq_s if overhead else 0.0,
        api_per_seq_s=eff.api_per_seq_s if overhead else 0.0, expert_seq_reuse=eff.moe_seq_reuse,
        expert_skew=eff.moe_routing_skew, host_overlapped=host_overlapped, ungraphed_s=0.0 if eager else launches,
        attn_flops_per_prompt_pair=prompt_per_pair, inv_flops_attn_prompt=inv_prompt,
        sparse_flops_per_pair=4.0 * sum(width for _, window, width in c.kv_layers
                                        if c.sparse_window and window == c.sparse_window),
        sparse_window_index=sparse_index, indexer_flops_per_pair=c.indexer_flops_per_pair,
        # the indexer's logits are an fp8 MQA (vLLM's sparse_attn_indexer.py: fp8 queries against the fp8 key cache,
        # DeepGEMM fp8_mqa_logits / fp8_paged_mqa_logits) whatever the KV cache's dtype
        inv_flops_indexer=1.0 / (gpu.fp8_flops * (eff.attn_compute or eff.compute))
        if (c.indexer_flops_per_pair and gpu.fp8_flops) else 0.0, stages=max(1, stages), ep=c.ep)


def moe_activation_elements(m: ModelSpec, expert_params: int, moe_layers: int, ep: int,
                            quant: Quantization | None, mxfp4_pad: Mxfp4Pad) -> float:
    """Activation elements a token moves through the fused-MoE layers' own elementwise kernels on one GPU, beside
    their grouped GEMMs (vLLM 0.32 fused_moe.py fused_experts_impl / experts/triton_moe.py TritonExperts.apply,
    fused_marlin_moe; SGLang's fused_moe_triton alike): the activation reads each of a token's top_k expert rows of
    the first GEMM's output and writes their product or activation (expert_params / the experts' width: 3 x the
    rank's intermediate a gated expert, 2 x ungated), and moe_sum reads the token's expert outputs and writes one
    (top_k + 1 rows of the experts' width: the latent width of a latent MoE, core.weights.expert_hidden).

    Under expert parallelism every rank holds every token (no dispatch within one data-parallel rank,
    prepare_finalize/no_dp_ep.py) and runs the activation over all of its top_k rows at the whole expert's width (no
    expert-map mask there), while moe_sum reads only the slots of its own experts (ops.moe_sum(..., expert_map)):
    top_k / ep of them. Separate kernels: their traffic adds to the GEMMs' time, which a prompt's tokens make
    compute-bound. None where the experts' kernel fuses both into its GEMMs: OpenAI's triton_kernels matmul_ogs
    (swiglu in the first GEMM, the reduction by its scatter: gpt_oss_triton_kernels_moe.py) and FlashInfer's TRT-LLM
    runner, the MXFP4 layouts that name them (Mxfp4Layout.kernel); Marlin's MXFP4 MoE runs them separately."""
    if m.moe is None or not moe_layers or not m.moe.experts_per_token:
        return 0.0
    q = quant if quant is not None else m.quantization
    if q is not None and q.method == "mxfp4":
        kernel = Mxfp4Layout.of(mxfp4_pad).kernel
        if "triton_kernels" in kernel or "trtllm" in kernel:
            return 0.0
    width = expert_hidden(m.moe, m.hidden_size)
    top_k = m.moe.experts_per_token
    return moe_layers * (top_k * expert_params / width + (top_k / max(1, ep) + 1) * width)


def gemm_time(bytes_: float, flops: float, tokens: float, co: StepCoefficients, inv_bandwidth: float,
              half_tokens: float) -> float:
    """One GEMM's roofline with the compute efficiency falling at few tokens (tile and wave quantisation: the
    kernel's curve reaches half its efficiency at `half_tokens`)."""
    t_memory = bytes_ * inv_bandwidth
    if tokens <= 0:
        return t_memory
    slow = (tokens + half_tokens) / tokens if half_tokens else 1.0
    return max(t_memory, flops * co.inv_flops * slow)


def pipeline_microbatches(stages: int, seqs: float, tokens: float = 0.0, batch_tokens: float = 0.0,
                          largest: float = 0.0) -> float:
    """The micro-batches a step of `seqs` sequences and `tokens` tokens fills on `stages` pipeline stages: one a
    sequence, and one a `batch_tokens` budget of tokens (a long prompt's chunks pipeline: the engine schedules the
    next chunk while the last is in flight, its computed tokens counted when scheduled), at most one a stage; and no
    lighter than `largest` tokens, the most one sequence's chunk puts in one batch (a request sits in one batch of a
    round: a prompt chunk beside a few decodes is not split among them)."""
    if stages <= 1:
        return 1.0
    parts = float(min(stages, max(1.0, seqs, math.ceil(tokens / batch_tokens) if batch_tokens > 0 else 1.0)))
    return max(1.0, min(parts, tokens / largest)) if largest > 0 else parts


def step_time(co: StepCoefficients, tokens: float, context_tokens: float, window_tokens: tuple,
              pairs: float, seqs: float | None = None, logits: float | None = None,
              positions: float | None = None, prepared: float | None = None,
              graphed: bool = True, prompt_pairs: float = 0.0,
              prompt_seq_max: float = 0.0, microbatches: float = 0.0) -> tuple[float, float, float, bool]:
    """(seconds, flops, bytes, compute-bound?) of one forward over `tokens` new tokens.

    `context_tokens`: sum of the sequences' context lengths (full-attention layers read all of it);
    `window_tokens`: per window of `co.kv_windows`, the sum of min(context, window); `pairs`: sum of
    new tokens x context over sequences (attention flops); `seqs`: sequences in the step (CPU costs; default
    `tokens`); `logits`: positions whose logits are computed and sampled (default `seqs`); `positions`: distinct
    sequence positions among the tokens (default `tokens`; fewer in a draft tree, whose siblings share a position);
    `prepared`: sequences the engine core prepares inputs for (default `seqs`; k + 1 per sequence under batch
    expansion, while the API server still streams `seqs`); `graphed` False: the forward runs outside a CUDA graph and
    the host's launches (`co.ungraphed_s`) add to its GPU time; `prompt_pairs`: the share of `pairs` that prompt
    tokens make (priced at `co.attn_flops_per_prompt_pair` where the model sets one: MLA); `prompt_seq_max`: the
    longest of those prompts with the step's chunk (0: not known), which decides DeepSeek-V3.2's prompt path.

    On `co.stages` pipeline stages the step is a round over `microbatches` equal micro-batches (0: one a sequence,
    pipeline_microbatches): its seconds are one micro-batch's pass through the whole model, in which every one
    advances; flops and bytes are the round's. The API server still streams every sequence's token.
    """
    seqs = tokens if seqs is None else seqs
    logits = seqs if logits is None else logits
    streamed = seqs
    parts = 1.0
    if co.stages > 1:
        parts = microbatches or pipeline_microbatches(co.stages, seqs)
        if parts > 1:
            share = 1.0 / parts
            tokens, context_tokens, pairs, seqs, logits = (tokens * share, context_tokens * share, pairs * share,
                                                           seqs * share, logits * share)
            window_tokens = tuple(w * share for w in window_tokens)
            positions = positions * share if positions is not None else None
            prepared = prepared * share if prepared is not None else None
            prompt_pairs *= share
    # a sequence's own tokens in one pass (verified drafts, tree siblings, a prompt chunk) route alike: only the
    # first is an independent draw, a share `expert_seq_reuse` of the others lands on experts already touched
    # siblings of a draft tree are alternatives at one position and route as one token
    spread = tokens if positions is None else min(tokens, positions)
    routed = seqs + (spread - seqs) * (1 - co.expert_seq_reuse) if spread > seqs else spread
    kv = co.kv_full_bytes_per_token * context_tokens
    if co.kv_windows:  # (the simulator calls this every step: no loop set up for a model without windows)
        for (_, per_token), span in zip(co.kv_windows, window_tokens):
            kv += per_token * span
    t_experts, expert_bytes, expert_flops = experts_time(co, tokens, routed)
    act = co.act_bytes_per_token * tokens
    moved = co.dense_bytes + expert_bytes + kv + act
    dense_flops = co.flops_per_token * tokens + co.lm_head_flops_per_logit * logits
    inv_attn = co.inv_flops_attn or co.inv_flops
    if not co.attn_flops_per_prompt_pair:  # a prompt's pairs cost a decode's
        prompt_pairs = 0.0
    topk = co.kv_windows[co.sparse_window_index][0] if co.sparse_flops_per_pair else 0
    if topk and prompt_pairs:
        # DeepSeek-V3.2 runs its prompts as dense multi-head attention only while the step's longest prompt fits in
        # index_topk (vLLM's sparse_mla_attention.py _use_dense_mha_prefill: prefill_max_seq_len <= topk_tokens),
        # otherwise through the sparse kernel over the top-k latents like a decode. Not told the longest: a prompt
        # whose pairs average at most topk / 2 a token, a chunk of at most topk tokens from its start, is dense
        dense = prompt_seq_max <= topk if prompt_seq_max else prompt_pairs <= tokens * topk / 2
        if not dense:
            prompt_pairs = 0.0
    prompt_flops = co.attn_flops_per_prompt_pair * prompt_pairs
    other_flops = co.attn_flops_per_pair * (pairs - prompt_pairs)
    if topk:  # DSA: the other pairs over the top-k latents each token reads, the window's share of the context
        read = window_tokens[co.sparse_window_index] / context_tokens if context_tokens > 0 else 1.0
        other_flops += co.sparse_flops_per_pair * min((pairs - prompt_pairs) * read, tokens * topk)
    indexer_flops = co.indexer_flops_per_pair * pairs  # DSA's indexer scores every pair, whatever runs the attention
    attn_flops = other_flops + prompt_flops + indexer_flops
    t_attn_compute = (other_flops * inv_attn + prompt_flops * (co.inv_flops_attn_prompt or inv_attn)
                      + indexer_flops * (co.inv_flops_indexer or inv_attn))
    flops = dense_flops + expert_flops + attn_flops
    t_dense = gemm_time(co.dense_bytes, dense_flops, tokens, co, co.inv_bandwidth, co.half_tokens)
    t_kv_read = kv * (co.inv_bandwidth_kv or co.inv_bandwidth)
    t_attn = max(t_kv_read, t_attn_compute)
    t_gpu = t_dense + t_experts + t_attn + act * co.inv_bandwidth + co.fixed_s + co.sampler_s_per_logit * logits
    if not graphed:
        t_gpu += co.ungraphed_s
    comm = co.comm_fixed_s + co.comm_per_token_s * tokens if co.comm_fixed_s or co.comm_per_token_s else 0.0
    host = co.cpu_per_seq_s * (seqs if prepared is None else prepared)  # beside the forward with async scheduling, after it without
    engine = (max(t_gpu + comm, host) if co.host_overlapped else t_gpu + comm + host) + co.overhead_s
    seconds = max(engine, co.api_per_seq_s * streamed)
    t_memory = moved * co.inv_bandwidth
    return seconds, flops * parts, moved * parts, flops * co.inv_flops > t_memory


def experts_time(co: StepCoefficients, tokens: float, routed: float | None = None) -> tuple[float, float, float]:
    """(seconds, bytes, flops) of the routed experts of every MoE layer in a forward over `tokens` tokens on one GPU
    (`routed`: the independent routing draws among them, default `tokens`; step_time's). Split by rows over TP, every
    rank reads its slice of each distinct expert the tokens touch; under expert parallelism (co.ep) each rank holds
    its experts whole and runs the tokens routed to them, and the step waits on the busiest rank (busiest_rank),
    whose distinct experts and assignments exceed the mean; bytes and flops are then the mean rank's."""
    if not co.num_experts or tokens <= 0:
        return 0.0, 0.0, 0.0
    routed = tokens if routed is None else routed
    touched = distinct_experts(co.num_experts, co.top_k, routed, co.expert_skew)
    inv_bandwidth = co.inv_bandwidth_experts or co.inv_bandwidth
    flops = co.expert_flops_per_token * tokens
    if co.ep > 1:
        touched_rank, load_rank = busiest_rank(co.num_experts, co.top_k, co.expert_skew, co.ep, routed, tokens)
        seconds = gemm_time(touched_rank * co.expert_bytes_per_layer, co.expert_flops_per_token * load_rank / co.top_k,
                            load_rank / touched_rank, co, inv_bandwidth, co.half_tokens_experts)
        return seconds, touched * co.expert_bytes_per_layer / co.ep, flops / co.ep
    bytes_ = touched * co.expert_bytes_per_layer
    return (gemm_time(bytes_, flops, tokens * co.top_k / touched, co, inv_bandwidth, co.half_tokens_experts),
            bytes_, flops)


API_BUSY_MAX = 0.95  # the API server's streaming share is capped here (the step floor above keeps it <= 1)


def api_busy_share(co: StepCoefficients, seqs: float, seconds: float) -> float:
    """The share of a `seconds`-long step of `seqs` sequences the API server spends streaming their tokens (the
    work that floors the step in step_time), capped at API_BUSY_MAX."""
    return min(API_BUSY_MAX, co.api_per_seq_s * seqs / seconds) if seconds > 0 else 0.0


def frontend_stretched(latency_s: float, busy: np.ndarray) -> np.ndarray:
    """A request's front-end latency through an API server busy `busy` of the time with other streams: its one
    event loop takes the request in and streams its first token beside them (processor sharing, M/G/1-PS)."""
    return latency_s / (1.0 - busy)


def busiest_rank(num_experts: int, top_k: int, skew: float, ep: int, routed: float, tokens: float) -> tuple[float, float]:
    """(distinct experts, routed token-expert assignments) of the busiest of `ep` expert-parallel ranks in a step
    of `tokens` tokens (`routed`: the independent draws among them, step_time's): the step waits on it.

    A rank holds n = experts_on_rank experts, placed by expert id (vLLM's linear placement, determine_expert_map;
    SGLang's alike), so which popular experts share a rank is, for the router's popularity (expert_popularity), a
    draw of n experts out of num_experts. Over that draw and the routing, a rank's distinct experts have mean
    n x mean(q_e) and variance n x mean(q_e (1 - q_e)) + n x var(q_e) x (E - n) / (E - 1), q_e = 1 - (1 - p_e)^routed
    the chance expert e is touched; its assignments mean tokens x n x mean(p_e), variance tokens x n x mean(p_e
    (1 - p_e)) + tokens^2 x n x var(p_e) x (E - n) / (E - 1). The busiest of ep ranks is taken at the mean plus
    expected_max_normal(ep) standard deviations (a normal approximation of each), capped at n experts and at
    tokens x min(top_k, n) assignments, and at least the load of the GPU holding the most popular expert (that
    expert's share and the mean of the others': the approximation runs 6-26% short of a Monte Carlo of the same
    placement where the popularity is skewed) and one assignment a distinct expert."""
    n = experts_on_rank(num_experts, ep)
    shares = expert_popularity(num_experts, top_k, skew) if skew else (top_k / num_experts,) * num_experts
    return _busiest(n, num_experts, shares, ep, round(routed, 3), round(tokens, 3))


@lru_cache(maxsize=8192)  # the batch sizes repeat from step to step
def _busiest(n: int, num_experts: int, shares: tuple[float, ...], ep: int, routed: float,
             tokens: float) -> tuple[float, float]:
    finite = num_experts - n  # the finite-population correction's numerator
    correction = finite / (num_experts - 1) if num_experts > 1 else 0.0
    z = expected_max_normal(ep)
    q = [1.0 - (1.0 - min(1.0, p)) ** routed for p in shares]
    q_mean = sum(q) / num_experts
    q_var = sum((x - q_mean) ** 2 for x in q) / num_experts
    d_mean = n * q_mean
    d_var = n * sum(x * (1.0 - x) for x in q) / num_experts + n * q_var * correction
    p_mean = sum(shares) / num_experts
    p_var = sum((p - p_mean) ** 2 for p in shares) / num_experts
    a_mean = tokens * n * p_mean
    a_var = tokens * n * sum(min(1.0, p) * (1.0 - min(1.0, p)) for p in shares) / num_experts \
        + tokens * tokens * n * p_var * correction
    distinct = max(min(float(n), d_mean + z * math.sqrt(max(0.0, d_var))), min(float(n), 1.0))
    # the normal approximation runs short of the busiest GPU's assignments where the popularity is skewed (a Zipf sum
    # is right-skewed): at least the GPU holding the most popular expert carries that expert's share and the mean of
    # the others', and each distinct expert at least one assignment
    top = min(1.0, max(shares))
    rest = (sum(min(1.0, p) for p in shares) - top) / (num_experts - 1) if num_experts > 1 else 0.0
    floor = max(distinct, tokens * (top + (n - 1) * rest), a_mean)
    load = max(floor, a_mean + z * math.sqrt(max(0.0, a_var)))
    return distinct, min(tokens * min(n, round(sum(shares))), load)


@lru_cache(maxsize=64)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] (0.5642 for 2, 1.0294 for 4, 1.4236 for 8): the integral of
    x n phi(x) Phi(x)^(n-1), by the midpoint rule over [-8, 8]."""
    if n <= 1:
        return 0.0
    steps, lo, hi = 4000, -8.0, 8.0
    width = (hi - lo) / steps
    total = 0.0
    for i in range(steps):
        x = lo + (i + 0.5) * width
        phi = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        total += x * n * phi * (0.5 * (1 + math.erf(x / math.sqrt(2)))) ** (n - 1) * width
    return total


def distinct_experts(num_experts: int, top_k: int, tokens: float, skew: float = 0.0) -> float:
    """Expected distinct experts that `tokens` tokens, each routed to top_k of num_experts, touch: the sum over
    experts of 1 - (1 - p_e)^tokens, p_e the share of tokens routed to expert e (`expert_popularity`; `skew` 0 is
    uniform routing, p_e = top_k / num_experts)."""
    if num_experts == 0 or tokens <= 0:
        return 0.0
    if not skew:
        return num_experts * (1 - (1 - top_k / num_experts) ** tokens)
    return _distinct_skewed(num_experts, top_k, skew, round(tokens, 3))


@lru_cache(maxsize=8192)  # a step's routed-token count repeats from step to step (the batch size)
def _distinct_skewed(num_experts: int, top_k: int, skew: float, tokens: float) -> float:
    return sum(1.0 - math.exp(tokens * log_miss) for log_miss in _log_miss(num_experts, top_k, skew))


@lru_cache(maxsize=64)
def _log_miss(num_experts: int, top_k: int, skew: float) -> tuple[float, ...]:
    """log(1 - p_e) per expert (p_e = 1: -inf), for `_distinct_skewed`."""
    return tuple(math.log1p(-p) if p < 1.0 else -math.inf for p in expert_popularity(num_experts, top_k, skew))


@lru_cache(maxsize=64)
def expert_popularity(num_experts: int, top_k: int, skew: float) -> tuple[float, ...]:
    """The share of a batch's tokens routed to each expert when the experts' popularity falls with rank as
    rank^-skew (a Zipf law; Efficiency.moe_routing_skew): p_e proportional to e^-skew, summing to top_k (every token
    picks top_k distinct experts), none above 1 (an expert takes a token at most once; the excess goes to the
    others in proportion)."""
    weights = [(rank + 1) ** -skew for rank in range(num_experts)]
    total = sum(weights)
    shares = [top_k * w / total for w in weights]
    for _ in range(num_experts):
        excess = sum(p - 1.0 for p in shares if p > 1.0)
        if excess <= 1e-12:
            break
        room = sum(p for p in shares if p < 1.0)
        shares = [1.0 if p >= 1.0 else p + excess * p / room for p in shares]
    return tuple(shares)


def forward_time(c: ModelCost, gpu: GpuSpec, eff: Efficiency, batch: int, q: int, context: int,
                 overhead: bool = True) -> StepTime:
    """One forward of `batch` sequences scoring `q` new tokens each over `context` tokens of history."""
    return uniform_step(coefficients(c, gpu, eff, overhead), batch, q, context)


@dataclass(frozen=True)
class SpecCosts:
    """Everything needed to price steps of one deployment, built once."""

    target: ModelCost
    draft: ModelCost | None
    draft_gpu_tp: int
    method: str
    gpu: GpuSpec
    eff: Efficiency
    verify_width: float  # positions scored per sequence in a verification pass (a mean: SpeculativeConfig)
    draft_steps: int  # drafter forwards per speculative step
    draft_width: int  # tokens per sequence in each drafter forward (tree top-k)
    target_co: StepCoefficients | None = None
    draft_co: StepCoefficients | None = None
    plain_co: StepCoefficients | None = None  # the target without speculation (the baseline a speed-up is against)
    draft_prefills: bool = False  # the drafter runs over the prompt too (it keeps a KV cache of its own)
    host_handover: bool = False  # the engine syncs with the host between drafter and target (handover_time)
    # the engine's per-request bookkeeping of a speculative step waits for the forwards (Efficiency.spec_seq_host_s):
    # a host-handover engine whose overlap of host work and forward does not survive speculation with this drafter
    host_serial: bool = False
    # verification by batch expansion (vLLM V0, AccountingProfile.spec_expansion_query_s): each of a sequence's
    # verify_width positions is a query of its own, prepared as a sequence, every extra one costing this much more
    expansion_query_s: float = 0.0
    graph_max_tokens: int = GRAPH_ALL  # the largest decode / verification step in a CUDA graph (ResolvedSettings)
    plain_graph_max_tokens: int = GRAPH_ALL  # the plain decode's (ResolvedSettings.plain_graph_max_tokens)
    graph_max_context: int = 0  # the longest sequence a step in a CUDA graph holds (ResolvedSettings; 0: no limit)
    mla_prompt_mha: tuple[bool, int] = (True, 0)  # ResolvedSettings.mla_prompt_mha
    # the engine's output processing per emitted token, paid after a speculative step (Efficiency.output_per_token_s)
    # where the release overlaps nothing with it (vLLM V0: asynchronous output processing is off with speculation);
    # 0 where it runs beside the forward or in another process
    serial_output_s: float = 0.0
    # per speculative step, the fixed cost of a drafter's pass over the positions the target just verified (Efficiency.
    # draft_setup_overhead_s: its input preparation and launches; the forward's own roofline is its first forward's,
    # draft_extend) where it has one: a drafter that keeps KV cache (a draft model, EAGLE / EAGLE-3 heads, MTP layers)
    # extends it over those positions before drafting; Medusa's heads read the sampled
    # positions' hidden states and nothing else (vllm/v1/worker/gpu_model_runner.py propose_draft_token_ids, the
    # medusa branch: "hidden_states = sample_hidden_states[indices]"); 0 without a GPU drafter
    draft_setup_s: float = 0.0
    # the positions per sequence the drafter's first forward of a speculative step runs over (draft_extend_tokens):
    # DRAFT_EXTEND_VERIFIED, _VERIFIED_NEXT, _ACCEPTED or _LAST; "" for a drafter that keeps no KV cache (Medusa) or
    # none at all
    draft_extend: str = ""


# The drafter's first forward of a speculative step, over the positions the target just verified, as each engine runs
# it. A drafter with a KV cache of its own (a draft model, EAGLE / EAGLE-3 heads, MTP layers) runs it to write that
# cache for the verified positions and to draft its first token; its other k - 1 forwards run one position (a tree's
# top-k) per sequence.
# - VERIFIED, every position the target verified, k + 1 a sequence, rejected ones as padding: vLLM V1 from 0.11
#   (vllm-project/vllm PR 24539 "Efficient padded speculation", the default since; 0.32's v1/spec_decode/
#   llm_base_proposer.py SpecDecodeBaseProposer.propose runs `self.model(**model_kwargs)` over num_tokens =
#   target_token_ids.shape[0] after prepare_inputs_padded, "all tokens are included as inputs to the speculator, with
#   the rejected tokens used as padding", then its k - 1 more over batch_size; Model Runner V2's
#   TargetDependentARSpeculator.propose likewise prefills the draft over the target's batch shape), and SGLang from
#   0.4.10, whose draft extend after verify replays a CUDA graph captured at num_tokens_per_bs = speculative_num_steps
#   + 1 a request (speculative/eagle_draft_extend_cuda_graph_runner.py; spec v2's _draft_extend_for_decode fills
#   num_draft_tokens a request, k + 1 for a chain), then draft_forward's speculative_num_steps - 1 forwards
# - VERIFIED_NEXT, those and a slot for the token the target sampled, k + 2 a sequence: vLLM V1's separate draft model
#   (DraftModelProposer: pass_hidden_states_to_model False makes net_num_new_slots_per_request 1, and
#   set_inputs_first_pass appends that slot to every request; Model Runner V2's StandaloneARSpeculator,
#   num_extra_query_per_req = 1), where an EAGLE head's shifted inputs need none
# - ACCEPTED, the accepted positions and the bonus token (the tokens a pass emits): vLLM V1 0.8-0.10 (EagleProposer.
#   prepare_inputs drops the rejected ones: q - rejected = accepted + 1 a request) and SGLang's eager draft extend
#   (eagle_info.py prepare_extend_after_decode: extend_lens = accept_length + 1)
# - LAST, the one sampled position: vLLM V0's proposer, whose cache already holds the accepted drafts' keys and values
#   (written while it drafted them); the forward is one of its k at one position a sequence
DRAFT_EXTEND_VERIFIED = "verified"
DRAFT_EXTEND_VERIFIED_NEXT = "verified+next"
DRAFT_EXTEND_ACCEPTED = "accepted"
DRAFT_EXTEND_LAST = "last"


def draft_extend_tokens(c: SpecCosts, per_pass: float | None = None) -> float:
    """Positions per sequence of the drafter's first forward in a speculative step (SpecCosts.draft_extend): k + 1 for
    VERIFIED, k + 2 for VERIFIED_NEXT, the tokens a pass emits (`per_pass`; k + 1 where not given) for ACCEPTED, 0
    where that forward is one of the others (LAST, or a drafter without a KV cache)."""
    if c.draft_extend == DRAFT_EXTEND_VERIFIED or (c.draft_extend == DRAFT_EXTEND_ACCEPTED and per_pass is None):
        return float(c.draft_steps + 1)
    if c.draft_extend == DRAFT_EXTEND_VERIFIED_NEXT:
        return float(c.draft_steps + 2)
    if c.draft_extend == DRAFT_EXTEND_ACCEPTED:
        assert per_pass is not None
        return per_pass
    return 0.0


def drafter_forwards_s(co: StepCoefficients, steps: int, width: float, extend: float, seqs: float,
                       context_tokens: float, window_tokens: tuple, per_forward_s: float, setup_s: float) -> float:
    """The drafter's `steps` forwards in one speculative step of `seqs` sequences holding `context_tokens` tokens of
    context together (`window_tokens`: per window of co.kv_windows, the sum of min(context, window)): the first over
    `extend` positions a sequence where that is not 0 (draft_extend_tokens: the verified positions), sampling one
    each, the others over `width` (a tree's top-k) sampling all; `per_forward_s` a forward beyond its roofline
    (draft_forward_overhead) and `setup_s` once (SpecCosts.draft_setup_s)."""
    if not steps:
        return 0.0
    one = step_time(co, seqs * width, context_tokens, window_tokens, context_tokens * width, seqs=seqs,
                    logits=seqs * width)[0]
    forwards = steps * one
    if extend:
        first = step_time(co, seqs * extend, context_tokens, window_tokens, context_tokens * extend, seqs=seqs,
                          logits=seqs)[0]
        forwards += first - one
    return forwards + steps * per_forward_s + setup_s


def _head_lm_head(draft: ModelCost, d: Deployment, dtype: str) -> ModelCost:
    """An EAGLE / EAGLE-3 head priced without an lm_head of its own (its weights share the target's: core.weights
    drops it) still projects every drafted position through a full vocabulary, and the drafter picks its token over
    those logits. EAGLE-1 through the target's lm_head (vllm/v1/spec_decode/eagle.py load_model: "Loading EAGLE LM
    head weights from the target model"); an EAGLE-3 head with no draft_vocab_size through an lm_head of its own
    config's vocab_size (vllm/model_executor/models/llama_eagle3.py Eagle3LlamaForCausalLM.__init__: "default to the
    base vocab size when absent", ParallelLMHead(draft_vocab_size, hidden_size)). An EAGLE-3 head without
    draft_vocab_size had been priced with no lm_head and no logits at all."""
    spec = d.speculative.draft if d.speculative.method == SpecMethod.EAGLE3 and d.speculative.draft else d.target
    rows = padded_vocab(spec.vocab_size) // d.tp
    params = rows * spec.hidden_size
    return replace(draft, dense_bytes=draft.dense_bytes + params * DTYPE_BYTES[dtype],
                   dense_params=draft.dense_params + params, lm_head_params=params, vocab=rows)


def prompt_as_mha(rule: tuple[bool, int], prefix_tokens: float) -> bool:
    """Whether a prompt step whose prompts hold `prefix_tokens` tokens already in the cache runs MLA as multi-head
    attention (AccountingProfile.mla_prompt_mha: (with no prefix, from this prefix on))."""
    without_prefix, from_prefix = rule
    return (without_prefix and prefix_tokens == 0) or prefix_tokens >= from_prefix


def build_costs(d: Deployment, eff: Efficiency, dtype: str, quant: Quantization | None, kv_dtype_bytes: int,
                k: int | None = None, tree_topk: int = 1, num_draft_tokens: int | None = None,
                host_handover: bool = False, async_scheduling: bool = False,
                expansion_query_s: float = 0.0, async_drafters: tuple[str, ...] = ASYNC_DRAFTERS_V1,
                graph_max_tokens: int = GRAPH_ALL, spec_v2: str = "", eager: bool | None = None,
                plain_graph_max_tokens: int = 0,
                mxfp4_pad: Mxfp4Pad = VLLM_MXFP4_PAD,
                mla_prompt_mha: tuple[bool, int] = (True, 0), mla_latent: bool = True,
                draft_extend: str = DRAFT_EXTEND_VERIFIED, graph_max_context: int = 0,
                prefix_kernel: bool = False, fp8_attention_16bit: bool = False) -> SpecCosts:
    """What steps of this deployment cost. `async_scheduling`: the release runs the engine core's per-sequence work
    beside the forward (ResolvedSettings.async_scheduling, StepCoefficients.host_overlapped); with speculation as
    core.speculation.keeps_overlap says (`async_drafters`: the methods the release keeps it with;
    `spec_v2`: SGLang's spec v2 tier), and `plain_co`, the target without speculation, always has it. `draft_extend`: what the
    drafter's first forward of a step runs over (DRAFT_EXTEND_VERIFIED, the current releases of both engines).
    `graph_max_context`, `prefix_kernel` and `fp8_attention_16bit`: ResolvedSettings' (a longer sequence sends a decode
    step outside its CUDA graph; prompts' attention through the paged prefix kernel; an fp8 cache's attention at the
    16-bit peak)."""
    sp = d.speculative
    k = sp.num_speculative_tokens if k is None else k
    eager = d.engine.enforce_eager if eager is None else eager  # `eager`: the resolved setting (ResolvedSettings)
    # the target as the engine loads it: a `none` override serves the weights unquantized (core.specs.effective_target;
    # `quant` is then None, which model_cost would read as the checkpoint's own)
    served = effective_target(d)[0]
    target = model_cost(served, d.tp, dtype, quant, kv_dtype_bytes=kv_dtype_bytes, mxfp4_pad=mxfp4_pad,
                        mla_latent=mla_latent, ep=d.ep)
    draft = None
    draft_tp = d.tp
    kind = sp.kind
    if kind.derives_from_target:
        draft = model_cost(served, d.tp, dtype, quant, kv_dtype_bytes=kv_dtype_bytes, include_mtp_only=True,
                           mxfp4_pad=mxfp4_pad, mla_latent=mla_latent, ep=d.ep)
    elif sp.draft is not None and kind.own_tp:
        draft_tp = sp.draft_tp
        draft = model_cost(sp.draft, sp.draft_tp, dtype, sp.draft.quantization, kv_dtype_bytes=kv_dtype_bytes,
                           mxfp4_pad=mxfp4_pad, ep=d.draft_ep)
    elif sp.draft is not None and kind.has_gpu_drafter:
        draft = model_cost(medusa_at_k(sp.draft, k) if sp.method == SpecMethod.MEDUSA else sp.draft, d.tp, dtype,
                           None, share_embeddings=kind.shares_embeddings, kv_dtype_bytes=kv_dtype_bytes)
        if kind.shares_lm_head and not draft.lm_head_params:
            draft = _head_lm_head(draft, d, dtype)
        if not kind.keeps_kv:  # Medusa heads keep no KV cache
            draft = ModelCost(**{**draft.__dict__, "kv_layers": ()})
    if tree_topk > 1 and num_draft_tokens:
        verified = float(num_draft_tokens)  # the tree's nodes, its root included (SGLang's convention)
    else:
        verified = verified_per_sequence(k, sp.proposal_rate)
    steps = kind.steps(k)
    kept = keeps_overlap(kind, async_drafters, spec_v2, tree_topk)
    overlapped = async_scheduling and kept
    # SGLang overlaps host and GPU by scheduling ahead (AccountingProfile.scheduled_ahead), not async_scheduling: its
    # speculative step keeps that where keeps_overlap says (spec v2 chains), with or without async_scheduling
    host_serial = host_handover and not kept
    # how the release runs every forward's kernels, the target's and the drafter's alike
    kernels = dict(eager=eager, prefix_kernel=prefix_kernel, fp8_attention_16bit=fp8_attention_16bit)
    return SpecCosts(target=target, draft=draft, draft_gpu_tp=draft_tp, method=sp.method, gpu=d.gpu, eff=eff,
                     verify_width=verified, draft_steps=steps, draft_width=max(1, tree_topk),
                     target_co=coefficients(target, d.gpu, eff, host_overlapped=overlapped, stages=d.pp, **kernels),
                     plain_co=coefficients(target, d.gpu, eff, host_overlapped=async_scheduling, stages=d.pp,
                                           **kernels),
                     draft_co=coefficients(draft, d.gpu, eff, overhead=False, **kernels)
                     if draft is not None else None,
                     draft_prefills=draft is not None and kind.keeps_kv, host_handover=host_handover,
                     host_serial=host_serial,
                     expansion_query_s=expansion_query_s, graph_max_tokens=graph_max_tokens,
                     plain_graph_max_tokens=plain_graph_max_tokens or graph_max_tokens,
                     graph_max_context=graph_max_context,
                     mla_prompt_mha=mla_prompt_mha,
                     serial_output_s=eff.output_per_token_s if k and sp.enabled and not overlapped else 0.0,
                     draft_setup_s=eff.draft_setup_overhead_s if draft is not None and kind.keeps_kv else 0.0,
                     draft_extend=draft_extend if draft is not None and kind.keeps_kv and steps else "")


def in_graph(step_tokens: float, graph_max_tokens: int, longest: float = 0.0, graph_max_context: int = 0) -> bool:
    """Whether a step replays a CUDA graph: no more tokens (a micro-batch's) than the largest capture, and no sequence
    longer than `graph_max_context` where the release has such a limit (vLLM V0's max_seq_len_to_capture:
    AccountingProfile.graph_max_context; `longest`: the step's longest sequence with its new tokens). The one rule
    uniform_step and the simulator's steps read."""
    return step_tokens <= graph_max_tokens and not (graph_max_context and longest > graph_max_context)


def uniform_step(co: StepCoefficients, batch: int, q: float, context: int, sampled: float = 1,
                 positions: int | None = None, expansion_query_s: float = 0.0,
                 graph_max_tokens: int = GRAPH_ALL, prompt: bool = False, prompt_seq_max: float = 0.0,
                 graph_max_context: int = 0) -> StepTime:
    """`batch` sequences scoring `q` tokens each over `context` tokens, `sampled` of them per sequence
    through the lm_head and the sampler (1 for decode and prefill, q for verification); `positions` per sequence
    the distinct positions among the q (a draft tree's depth + 1; default q); `expansion_query_s` > 0: the q tokens
    are q queries of their own (batch expansion), each prepared as a sequence, every extra one costing this more;
    a step of more than `graph_max_tokens` tokens, or of sequences longer than `graph_max_context` (0: no limit), runs
    outside a CUDA graph; `prompt`: the q tokens are a prompt's
    (their attention priced as a prompt's, step_time's `prompt_pairs`, `prompt_seq_max` long with this chunk)."""
    windows = tuple(batch * min(context, window) for window, _ in co.kv_windows)
    queries = batch * q if expansion_query_s else batch
    pairs = batch * q * context
    parts = pipeline_microbatches(co.stages, batch)  # a micro-batch a stage: each its own CUDA graph
    seconds, flops, moved, compute = step_time(co, batch * q, batch * context, windows, pairs,
                                               seqs=batch, prepared=queries, logits=batch * sampled,
                                               positions=batch * positions if positions else None,
                                               graphed=in_graph(batch * q / parts, graph_max_tokens, context + q,
                                                                graph_max_context),
                                               prompt_pairs=pairs if prompt else 0.0,
                                               prompt_seq_max=prompt_seq_max if prompt else 0.0,
                                               microbatches=parts)
    return StepTime(time_s=seconds + expansion_query_s * (queries - batch), flops=flops, bytes=moved,
                    bound="compute" if compute else "memory")


def _target_co(c: SpecCosts) -> StepCoefficients:
    assert c.target_co is not None  # build_costs always sets it
    return c.target_co


def decode_step(c: SpecCosts, batch: int, context: int) -> StepTime:
    """One decode step of the target without speculation."""
    assert c.plain_co is not None  # build_costs always sets it
    return uniform_step(c.plain_co, batch, 1, context, graph_max_tokens=c.plain_graph_max_tokens,
                        graph_max_context=c.graph_max_context)


def spec_step_time(c: SpecCosts, batch: int, context: int, per_pass: float | None = None) -> float:
    """One speculative step: drafting, one verification pass of verify_width positions, fixed costs (`per_pass`, the
    tokens a pass emits, sizes a drafter's first forward where it runs over the accepted positions: draft_extend)."""
    # every verified position goes through the lm_head and the (rejection) sampler: B x (k+1) x vocab
    # a tree (draft_width > 1) spans draft_steps + 1 positions per sequence, a chain one per verified token
    depth = c.draft_steps + 1 if c.draft_width > 1 else None
    verify = uniform_step(_target_co(c), batch, c.verify_width, context, sampled=c.verify_width,
                          positions=depth, expansion_query_s=c.expansion_query_s,
                          graph_max_tokens=c.graph_max_tokens, graph_max_context=c.graph_max_context).time_s
    cpu_drafted = drafter_kind(c.method).cpu_drafted
    host = ngram_lookup_s(spec_host_per_seq_s(c), c.eff.ngram_scan_per_token_s if cpu_drafted else 0.0, batch,
                          batch * context)
    if cpu_drafted:
        return verify + c.eff.spec_step_overhead_s + host
    # on pipeline stages the drafter and the rejection sampler run on the last stage only (vLLM's model runner builds
    # the drafter where get_pp_group().is_last_rank), once a micro-batch: its share of the round's micro-batches in turn
    parts = pipeline_microbatches(_target_co(c).stages, batch)
    if parts > 1:
        return verify + host + parts * (c.eff.spec_step_overhead_s + handover_time(c) +
                                        draft_time(c, max(1, round(batch / parts)), context, per_pass))
    return verify + host + c.eff.spec_step_overhead_s + handover_time(c) + draft_time(c, batch, context, per_pass)


def spec_host_per_seq_s(c: SpecCosts) -> float:
    """The host's work per decoding sequence of a speculative step that the step waits for: a CPU drafter's lookup
    (Efficiency.ngram_per_seq_s: the n-gram proposer's fixed part) and, in an engine that hands over between drafter
    and target on the host (SpecCosts.host_handover: SGLang) where nothing overlaps the step (SpecCosts.host_serial:
    SGLang turns its overlap scheduler off for speculation except where its spec v2 worker keeps it, core.speculation.
    keeps_overlap: chains from 0.5.11), its per-request
    bookkeeping after the forwards (Efficiency.spec_seq_host_s): SGLang's EagleVerifyInput.verify walks every request
    and accepted token in Python (output_ids.append, check_finished), prepare_extend_after_decode and the scheduler's
    process_batch_result_decode / stream_output walk every request again, all on the scheduler's one thread."""
    lookup = c.eff.ngram_per_seq_s if drafter_kind(c.method).cpu_drafted else 0.0
    return lookup + (c.eff.spec_seq_host_s if c.host_serial else 0.0)


def handover_time(c: SpecCosts) -> float:
    """A model drafter's step hands over between drafter and target three times (draft, verify, draft extend),
    each behind a host sync (SGLang eagle_worker.py: .item() / .cpu() between the phases); sharded over TP > 1
    GPUs, every rank's host work runs in lockstep: `spec_step_tp_s` per speculative step, in engines whose profile
    says so (SGLang's EAGLE worker; vLLM V1 proposes inside one model-runner step)."""
    if not c.host_handover or c.draft is None or drafter_kind(c.method).cpu_drafted or c.target.tp <= 1:
        return 0.0
    return c.eff.spec_step_tp_s


def draft_forward_overhead(c: SpecCosts) -> float:
    """Fixed cost of one drafter forward beyond its roofline: its launches (`draft_step_overhead_s`) and, sharded
    over TP > 1 GPUs in a host-handover engine (SGLang), the sync of its all-reduces and vocab-parallel logits
    around softmax / top-k (`draft_step_tp_s`)."""
    sharded = c.host_handover and c.draft is not None and c.draft.tp > 1
    return c.eff.draft_step_overhead_s + (c.eff.draft_step_tp_s if sharded else 0.0)


def draft_time(c: SpecCosts, batch: int, context: int, per_pass: float | None = None) -> float:
    """The drafter's forwards of one speculative step at batch `batch` (its own roofline: a draft model or head
    turns compute-bound at large B too), the first over the positions the target verified (draft_extend_tokens), its
    per-forward launch cost and its set-up pass."""
    if c.draft is None or not c.draft_steps:
        return 0.0
    assert c.draft_co is not None  # build_costs sets draft_co whenever it sets draft
    spans = tuple(batch * min(context, window) for window, _ in c.draft_co.kv_windows)
    return drafter_forwards_s(c.draft_co, c.draft_steps, c.draft_width, draft_extend_tokens(c, per_pass), batch,
                              batch * context, spans, draft_forward_overhead(c), c.draft_setup_s)


@dataclass(frozen=True)
class SpeedupPoint:
    batch_size: int
    k: int
    tokens_per_pass: float
    tpot_s: float
    tpot_s_no_spec: float
    speedup: float
    throughput_tok_s: float
    throughput_tok_s_no_spec: float
    bound_no_spec: str


def spec_tpot(c: SpecCosts, batch: int, context: int, per_pass: float) -> float:
    """Time per output token of each of `batch` sequences with speculation: a speculative step over the tokens it
    emits (`per_pass` per sequence), and the output processing of those batch x per_pass tokens after the step where
    the release overlaps nothing with it (SpecCosts.serial_output_s), batch x serial_output_s per token."""
    return spec_step_time(c, batch, context, per_pass) / per_pass + c.serial_output_s * batch


def speedup_point(c: SpecCosts, batch: int, context: int, per_pass: float, k: int) -> SpeedupPoint:
    plain = decode_step(c, batch, context)
    tpot = spec_tpot(c, batch, context, per_pass)
    return SpeedupPoint(batch_size=batch, k=k, tokens_per_pass=per_pass, tpot_s=tpot, tpot_s_no_spec=plain.time_s,
                        speedup=plain.time_s / tpot, throughput_tok_s=batch / tpot,
                        throughput_tok_s_no_spec=batch / plain.time_s, bound_no_spec=plain.bound)


def crossover_batch(points: list[SpeedupPoint]) -> int | None:
    """The smallest batch size at which speculation stops paying (speed-up < 1), among those given."""
    for p in sorted(points, key=lambda p: p.batch_size):
        if p.speedup < 1:
            return p.batch_size
    return None


PREFILL_STEPS_PRICED = 1024  # chunks priced one by one; a longer prefill prices runs of chunks at their mean context


def prefill_time(c: SpecCosts, prompt_tokens: int, chunk: int) -> float:
    """Time to prefill one prompt in chunks of `chunk` tokens (each chunk one engine step). A drafter that keeps
    its own KV cache (a draft model, EAGLE heads, MTP layers) prefills the prompt in the same steps, so its
    forward over the chunk delays the first token too. Beyond PREFILL_STEPS_PRICED chunks (millions of tokens in
    small chunks: a plan of images by the thousand), runs of equal chunks are priced at their chunks' mean
    context, exact where a step's time is linear in its context, so the time stays a bounded computation. On
    pipeline stages the chunks follow each other through them (pipeline_microbatches): the first token comes a
    stage's share of every chunk after the first stage starts, plus the last chunk's pass through the others."""
    drafter = c.draft_co if (c.draft_co is not None and c.draft_prefills) else None
    run = -(-(prompt_tokens // chunk) // PREFILL_STEPS_PRICED)  # full chunks priced together

    def steps(done: int, size: int, count: int) -> float:
        start = done + (count - 1) * size // 2  # the mean start of the run's chunks (exact for one chunk)
        mha = prompt_as_mha(c.mla_prompt_mha, start)
        time = uniform_step(_target_co(c), 1, size, start + size // 2, prompt=mha, prompt_seq_max=start + size).time_s
        if drafter is not None:
            time += uniform_step(drafter, 1, size, start + size // 2, prompt=mha, prompt_seq_max=start + size).time_s
        return count * time

    total = last = 0.0
    done = 0
    while run > 1 and prompt_tokens - done >= run * chunk:
        total += steps(done, chunk, run)
        done += run * chunk
    while done < prompt_tokens:
        size = min(chunk, prompt_tokens - done)
        last = steps(done, size, 1)
        total += last
        done += size
    stages = _target_co(c).stages
    if stages > 1 and not last:  # the runs took every chunk: the last one's own pass through the other stages
        last = steps(prompt_tokens - chunk, chunk, 1)
    return (total + (stages - 1) * last) / stages if stages > 1 else total


def prefill_share(c: SpecCosts, rate: float, prompt_tokens: float, chunk: int) -> float:
    """The fraction of the engine's time spent prefilling arrivals: requests/s x seconds to prefill one
    prompt. Decode steps share the GPU with that work, so a token takes 1 / (1 - share) longer."""
    return rate * prefill_time(c, max(1, int(prompt_tokens)), chunk)


def concurrency_for_tpot(tpot_at, slo_s: float, upper: int) -> int:
    """The largest concurrency in [1, upper] whose TPOT (tpot_at(B), non-decreasing in B) meets the SLO; 0 if none."""
    if tpot_at(1) > slo_s:
        return 0
    lo, hi = 1, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tpot_at(mid) <= slo_s:
            lo = mid
        else:
            hi = mid - 1
    return lo
