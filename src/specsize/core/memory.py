"""The per-GPU memory account of one engine instance, the way the serving engine computes it.

    budget      = total * gpu_memory_utilization
    kv_bytes    = budget - weights(target) - weights(draft) - activation_peak - non_torch [- cuda_graphs]
    kv_blocks   = floor(kv_bytes / (block_size * kv_bytes_per_token))
    kv_tokens   = kv_blocks * block_size

How an engine version fills in each term (its profiling pass, its defaults, whether CUDA graphs are
subtracted) is an `AccountingProfile`: data, defined in `specsize.engines`, never branches here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from .errors import SpecError
from .kvcache import (NVFP4_KV_BYTES, HybridPool, KVLayer, bytes_per_token, hybrid_block_size, hybrid_pool,
                      layer_blocks, layer_groups, model_kv_layers, model_state_layers, pool_layer_slots)
from .multimodal import deepstack_buffer_bytes, encoder_profile, pixel_values_bytes, tower_forward_peak
from .speculation import ASYNC_DRAFTERS_V1, SpecMethod
from .specs import (DTYPE_BYTES, Deployment, EngineSettings, GpuSpec, ModelSpec, Quantization, VisionSpec, canonical_dtype,
                    checkpoint_format_needed, effective_target, medusa_at_k)
from .units import GiB, ceil_div
from .weights import VLLM_MXFP4_PAD, Mxfp4Pad, WeightBreakdown, indexer_dims, padded_vocab, weight_breakdown


# A step size no CUDA-graph limit reaches: every such step runs in a graph (AccountingProfile.graph_max_tokens)
GRAPH_ALL = 1 << 62
MLA_ABSORBED = 1 << 62  # AccountingProfile.mla_prompt_mha: no prefix reaches it, every prompt with one absorbed


@dataclass(frozen=True)
class AccountingProfile:
    """One engine version's memory accounting, as numbers. Coefficients carry the rows they were fitted on."""

    engine: str
    version: str
    label: str
    generation: str  # "V0" / "V1" for vLLM
    # defaults the engine picks when the user leaves a setting unset
    default_gpu_memory_utilization: float = 0.9
    default_max_num_seqs: int = 256
    default_max_num_seqs_large_gpu: int = 256
    default_max_num_batched_tokens: int = 2048
    default_max_num_batched_tokens_large_gpu: int = 2048
    large_gpu_bytes: int = 70 * GiB  # "large" GPUs get the larger defaults
    large_gpu_excluded_names: tuple[str, ...] = ()  # GPUs (a part of their name) kept on the smaller defaults
    large_gpu_names: tuple[str, ...] = ()  # when set, only these GPUs (a part of their name) get the larger defaults
    # a third tier, whatever the name: GPUs of at least huge_gpu_bytes schedule this many tokens a step by default
    # (0: none) and take the large GPUs' sequences
    huge_gpu_bytes: int = 0
    default_max_num_batched_tokens_huge_gpu: int = 0
    # the engine's own defaults on its CPU backend (device "cpu"), whatever the memory, in place of the tiers above:
    # max_num_seqs and max_num_batched_tokens for the API server, times the engine's world size (TP x PP) where
    # cpu_defaults_per_rank (vLLM from 0.10; 0.9.2 for the whole engine: engines/vllm.py); 0: the tiers above
    cpu_default_max_num_seqs: int = 0
    cpu_default_max_num_batched_tokens: int = 0
    cpu_defaults_per_rank: bool = False
    # what vLLM does to a default it fills in (engine/arg_utils.py, the `vllm serve` path): a defaulted max_num_seqs
    # no larger than max_num_batched_tokens (0.10.1 on: "self.max_num_seqs = min(default_max_num_seqs[usage_context],
    # self.max_num_batched_tokens ...)"), a defaulted max_num_batched_tokens no larger than max_num_seqs x
    # max_model_len (0.11.1 on: "Ensure max_num_batched_tokens does not exceed model limit")
    default_seqs_within_batched: bool = False
    default_batched_within_seqs_len: bool = False
    batched_tokens_at_least_max_model_len: bool = False  # V0 without chunked prefill
    # a step runs either new prompts or decodes, prompts first (vLLM V0 without chunked prefill, SGLang without
    # --enable-mixed-chunk); False: V1's mixed steps, running decodes first, then prompt chunks in the budget
    prefill_first: bool = False
    # a model drafter's speculative step syncs with the host between draft, verify and draft extend, every TP rank
    # in lockstep (SGLang's EAGLE worker without overlap scheduling): Efficiency.spec_step_tp_s / draft_step_tp_s
    spec_host_handover: bool = False
    # what a model drafter's first forward of a speculative step runs over (core.perf.draft_extend_tokens, read by
    # core.perf.build_costs): "verified" (every verified position, k + 1 a sequence: vLLM 0.11 on, SGLang 0.4.10 on),
    # "accepted" (the tokens the pass emitted: vLLM 0.8-0.10, SGLang before 0.4.10), "last" (one: vLLM V0);
    # draft_model_extend where a separate draft model's differs ("verified+next": vLLM's adds the sampled token's slot)
    draft_extend: str = "verified"
    draft_model_extend: str = ""
    # vLLM V0 scores drafts by batch expansion (vllm/spec_decode/batch_expansion.py): each sequence with k drafts
    # becomes k + 1 single-token queries, each prepared by the model runner as a sequence of its own (the multi-query
    # scorer that avoids it ran only with --enforce-eager: spec_decode_worker.py "Disabling MQA scorer as the target
    # model is not running in eager mode"); the extra time per extra query, beyond the sequence preparation
    # Efficiency.cpu_per_seq_s already prices. 0: no expansion (V1 verifies k + 1 tokens as one query per sequence)
    spec_expansion_query_s: float = 0.0
    # the API server's work (Efficiency.api_per_seq_s, its per-token streaming that floors a step, and the
    # front-end latency and intake of a request) relative to the catalog's, which is fitted on vLLM 0.10-0.11 servers
    api_cost_scale: float = 1.0
    # vLLM's async scheduling (default on from 0.14, vllm-project/vllm PR 27614, the 0.14.0 release notes: "Async
    # scheduling is now enabled by default"; not with pipeline parallel or the CPU backend): the engine core schedules
    # and prepares step N + 1 while the GPU runs step N, so its per-sequence work runs beside the forward; V0's
    # asynchronous output processing from 0.6.0 (PR 7049; vLLM blog 2024-09-05: step N's outputs processed while
    # step N + 1 runs, "time-per-output-token of running Llama 70B models on 4xH100" 8.7% lower) likewise
    async_scheduling: bool = False
    # the speculative methods the overlap survives (core.speculation.keeps_overlap), in vLLM's names: V1 keeps async
    # scheduling with EAGLE / MTP (vllm-project/vllm PR 31998, 0.14: "Default-on when speculative_config.method is
    # EAGLE/MTP; otherwise disabled"; config/vllm.py VllmConfig.__post_init__, EagleModelTypes) and, from 0.28, with a
    # draft model (the same check gains `method != "draft_model"`: 0.27.1 lacks it; an explicit --async-scheduling
    # had taken one from 0.16); none for V0 ("Async output processing is not supported with speculative decoding
    # currently") or SGLang's spec v1 worker
    async_drafters: tuple[str, ...] = ASYNC_DRAFTERS_V1
    # the scheduler forms step N + 1 while the GPU runs step N, so a request received while the engine is busy joins
    # the step after next, not the next one: vLLM V1's async scheduling (v1/engine/core.py step_with_batch_queue, a
    # batch queue of two: schedule and launch, then block on the older batch, then take new requests in) and SGLang's
    # overlap scheduler (managers/scheduler.py event_loop_overlap: receive, form and launch batch N + 1, then wait for
    # batch N's result). Not V0's asynchronous output processing, which schedules after the step it overlaps. With
    # speculation as async_drafters says (SGLang's spec v1 worker turns the overlap off)
    scheduled_ahead: bool = False
    # what admission holds back for the running requests (simulator.engine.EngineConfig.admission): "chunk" (vLLM V1
    # allocates as a prompt's chunks run: v1/core/sched/scheduler.py), "prompt" (vLLM V0's block manager allocates a
    # whole prompt at admission: core/block_manager.py can_allocate), "sglang" (the prompt and the output reserved)
    admission: str = "chunk"
    # the multiples the engine pads mxfp4 experts' hidden and intermediate sizes to (core.weights.mxfp4_expert_dims):
    # what its weights hold and what a step reads; `mxfp4_pad_by_gpu` where a GPU's differs ((GPU family or "cc10",
    # multiples) rules, the first that matches: for_gpu)
    mxfp4_pad: Mxfp4Pad = VLLM_MXFP4_PAD
    mxfp4_pad_by_gpu: tuple[tuple[str, Mxfp4Pad], ...] = ()
    # when a prompt step of an MLA model (DeepSeek-V2/V3, Kimi K2) runs its attention as ordinary multi-head
    # attention over decompressed keys and values rather than absorbed over the latent (core.perf.ModelCost.
    # prompt_attn_width; 3.6x fewer flops per pair): (when the step's prompts have no cached prefix, from this many
    # prefix tokens in the step on; MLA_ABSORBED: never). vLLM always (MLACommonImpl's prefill path); SGLang by the
    # dispatch of the attention backend it picks for the GPU (models/deepseek_v2.py): `mla_prompt_mha_by_gpu`, rules
    # by GPU family or "cc10" (datacenter Blackwell, GpuSpec.compute_capability_10), the first that matches
    mla_prompt_mha: tuple[bool, int] = (True, 0)
    mla_prompt_mha_by_gpu: tuple[tuple[str, tuple[bool, int]], ...] = ()
    # the engine caches an MLA model's latent (its MLA kernels); False: every head's keys and values, decompressed
    # (core.kvcache.model_kv_layers mla_latent; vLLM before 0.7.1)
    mla_latent_cache: bool = True
    # which drafters run on SGLang's spec v2 worker, inside the overlap scheduler: a tier of core.speculation.
    # SPEC_V2_TIERS ("" none, "chain" from 0.5.11, "model" 0.5.13, "all" from 0.5.14); their steps are formed ahead as
    # without speculation (core.speculation.keeps_overlap says why their host handovers stay priced), and the decode
    # check reserves spec v2's slots for them (engines/sglang/accounting.py decode_reserve_tokens)
    spec_v2: str = ""
    # the release takes --stream-interval (SGLang's own flag; vLLM's from PR 27869, merged 2025-11, in 0.12 on)
    stream_interval_flag: bool = False
    # kv_cache_dtype auto takes the checkpoint's calibrated KV cache dtype (a ModelOpt kv_cache_quant_algo FP8:
    # Quantization.kv_cache_dtype) rather than the model dtype: vLLM's EngineArgs resolves it when it builds its
    # CacheConfig (utils/torch_utils.py resolve_kv_cache_dtype_string; PR 30785, merged 2025-12-16, from 0.14)
    checkpoint_kv_dtype: bool = False
    # a compressed-tensors checkpoint's kv_cache_scheme (ModelSpec.kv_cache_scheme), as the release's Attention
    # layer reads it (model_executor/layers/attention/attention.py Attention.__init__): "ignored" (up to 0.14: the
    # scheme only brings scales, the cache keeps kv_cache_dtype's dtype, the model's under auto; 0.14.1's
    # attention/layer.py reads no kv_cache_scheme), "forced" (0.15 - 0.21: "llm-compressor mdls need to set
    # cache_dtype to fp8 manually" sets kv_cache_dtype and cache_config.cache_dtype to "fp8" whatever
    # --kv-cache-dtype says; read in 0.16.0, 0.17.0, 0.20.0 and 0.21.0), "auto" (0.22 on: the same, only where
    # kv_cache_dtype is "auto"; read in 0.22.0 and 0.32.0). SGLang: "ignored"
    ct_kv_cache_scheme: str = "ignored"
    # an NVFP4 KV cache (core.kvcache.NVFP4_KV_BYTES) - --kv-cache-dtype nvfp4, or under auto a ModelOpt checkpoint
    # calibrated for it (Quantization.kv_cache_dtype "nvfp4"): "" where the release has none (vLLM up to 0.19: no
    # "nvfp4" CacheDType, and MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP maps fp8 only, so auto keeps the model dtype;
    # SGLang: ModelRunner reads an "FP8" kv_cache_quant_algo only), "refused" (vLLM 0.20: auto resolves to "nvfp4" -
    # utils/torch_utils.py get_kv_cache_quant_algo_string - but FlashInfer's metadata builder, the one backend listing
    # it, raises "nvfp4 KV cache is not yet supported"), "served" (vLLM 0.21 - 0.31, every sdist read: datacenter
    # Blackwell's trtllm-gen kernels only - flashinfer.py has no other path for it before 0.32.0), "served_fa2" (0.32:
    # compute capability 8.x / 9.x / 12.x too, FlashInfer's FA2 path, _nvfp4_kv_on_fa2). Head sizes: _check_nvfp4_kv
    nvfp4_kv: str = ""
    # --kv-cache-dtype fp8_e5m2 beside weights whose quantization config loads the attention layers' KV scales: vLLM
    # raises "fp8_e5m2 kv-cache is not supported with fp8 checkpoints" (model_executor/layers/attention/attention.py,
    # Attention's KV-scale setup; MLA's layer has no such check in 0.32). Those configs: Fp8Config (an fp8 checkpoint,
    # or --quantization fp8 over 16-bit weights: Fp8KVCacheMethod), ModelOpt's fp8 / NVFP4 (ModelOptKVCacheMethod),
    # compressed-tensors (CompressedTensorsKVCacheMethod); not fbgemm_fp8, AWQ, GPTQ, MXFP4 or bitsandbytes, which
    # return none for attention. "refused": every such checkpoint (up to 0.23, read in 0.20.0 - 0.23.0); "scheme":
    # from 0.24 a compressed-tensors checkpoint only where it declares a kv_cache_scheme ("weight-only ones declare
    # none and must keep fp8_e5m2, the only fp8 KV dtype usable on Ampere", read in 0.24.0 - 0.32.0); "online": as
    # "scheme", and --quantization fp8 over 16-bit weights no longer builds Fp8Config but the online fp8_per_tensor
    # config, whose get_quant_method gives attention none (model_loader/weight_utils.py get_quant_config: "--quantization
    # fp8 is deprecated for online quantization", in the 0.31.0 and 0.32.0 sdists, not in 0.30.0's); "": no check
    # (SGLang)
    e5m2_fp8_weights: str = ""
    # CUDA graphs: the largest step (tokens) the engine replays from a graph; a larger one runs its kernels launched
    # one by one from the host (Efficiency.eager_layer_s / eager_moe_layer_s). GRAPH_ALL: no limit modelled
    graph_max_tokens: int = GRAPH_ALL
    # the largest capture size on a GPU of compute capability 10 (B200 / B300) where the release raises it (0: as
    # elsewhere): graph_max_tokens and cuda_graph_max_capture both (capture_ceiling)
    graph_max_tokens_cc10: int = 0
    # steps with prompt tokens: "capture" (graphed like any step, up to graph_max_tokens: vLLM V1's piecewise graphs),
    # "eager" (never graphed: vLLM V0 and SGLang before its piecewise graphs capture decode batches only),
    # "piecewise" (SGLang's piecewise graphs: up to the chunked-prefill size, 2048 tokens for MLA models)
    graph_prompts: str = "capture"
    # model types whose own model code sets the capture sizes ((model_type, largest) pairs): the largest step graphed
    # is then that, no more than the token budget, whatever max_num_seqs (vLLM's GptOssForCausalLMConfig)
    graph_max_tokens_by_model: tuple[tuple[str, int], ...] = ()
    # the longest sequence a decode batch may hold and still replay a CUDA graph; a longer one sends the whole step
    # outside it (vLLM V0's max_seq_len_to_capture, 8192 by default: engine/arg_utils.py EngineArgs, worker/
    # model_runner.py _use_captured_graph "max_decode_seq_len <= self.runner.max_seq_len_to_capture", read in the
    # 0.6.3 sdist). 0: no such limit (V1's piecewise graphs, SGLang)
    graph_max_context: int = 0
    # GPU vendors on which this release's chunked prefill runs every prompt's attention through the paged prefix
    # kernel (Efficiency.attn_prefix_compute): vLLM V0 on ROCm, whose ROCmFlashAttentionImpl sends a prompt with a
    # block table to PagedAttention.forward_prefix (the Triton context_attention_fwd of attention/ops/
    # prefix_prefill.py), and with chunked prefill on every prompt has one (attention/backends/utils.py
    # CommonMetadataBuilder: "chunked_prefill_enabled or not is_prompt"), read in the 0.6.3 sdist; CUDA's flash-attn
    # backend takes the block table itself
    prefix_prompt_vendors: tuple[str, ...] = ()
    # GPU families on which this release's fp8 attention (an fp8 KV cache) runs its products no faster than the 16-bit
    # peak (vLLM from 0.11.1 on Hopper: engines/vllm.py FP8_ATTENTION_TWO_LEVEL); elsewhere at the fp8 peak
    fp8_attention_16bit_families: tuple[str, ...] = ()
    # GPU vendors on which vLLM V0 turns chunked prefill on by itself for a model longer than 32K (v0_chunked_prefill)
    chunked_default_vendors: tuple[str, ...] = ("nvidia", "amd")
    # where "piecewise" graphs do not run, prompt steps stay eager: GPU vendors the engine captures them on, and
    # model types it excludes (SGLang's _handle_piecewise_cuda_graph: non-CUDA hardware, its model-arch blacklist)
    piecewise_vendors: tuple[str, ...] = ("nvidia",)
    piecewise_excluded_model_types: tuple[str, ...] = ()
    # ... and targets for which the engine picks, on datacenter Blackwell (GpuSpec.compute_capability_10), a MoE
    # runner that turns them off ((model_type, weight quantization methods) pairs, "none": unquantised weights):
    # SGLang 0.5.10-0.5.12's flashinfer_trtllm (sglang/srt/server_args.py _handle_moe_kernel_config)
    piecewise_off_sm100: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # ... for a multimodal target (SGLang: "Multimodal / VLM models", model_config.is_multimodal), save the model
    # types whose multimodal path the engine leaves off unless asked (then served as text models)
    text_only_multimodal_types: tuple[str, ...] = ()
    # ... and with speculative decoding (SGLang 0.5.10; they run together from 0.5.11, sgl-project/sglang PR 22128)
    piecewise_off_speculative: bool = False
    # the release takes --scheduler-recv-interval (SGLang's SchedulerRecvSkipper; vLLM has no such flag)
    recv_interval_flag: bool = False
    # ... and --cuda-graph-max-bs (SGLang's; vLLM sizes its graphs from max_num_seqs and its capture sizes)
    graph_bs_flag: bool = False
    # the block sizes the release takes (vLLM's --block-size choices); (): any (SGLang's --page-size)
    block_sizes: tuple[int, ...] = ()
    # the release refuses a step token budget below max_num_seqs, or below max_model_len where prompts are not
    # chunked (vLLM: vllm/config/scheduler.py verify_max_model_len; V0's SchedulerConfig._verify_args)
    token_budget_rules: bool = False
    # the engine's own fused-MoE kernels for fp8 (block-)quantised experts, as a fraction of HBM bandwidth, where they
    # differ from the vLLM kernels the GPU family's terms were measured with (Efficiency.moe_fp8_memory); 0: the family's
    moe_fp8_memory: float = 0.0
    # the release runs its own custom all-reduce kernel where the GPU family has a latency for one (Efficiency.
    # allreduce_latency_custom_s: AMD's). Upstream vLLM on ROCm from 0.8.3 (device_communicators/custom_all_reduce.py
    # asserts current_platform.is_cuda_alike(), csrc/custom_all_reduce.cu built for both; 0.8.2 asserted is_cuda());
    # before, its ROCm builds all-reduce through RCCL (AMD's own rocm/vllm images carried the kernel from mid-2024,
    # ROCm/vllm PR 27: a release number cannot tell them apart, so the upstream rule is taken)
    custom_allreduce: bool = False
    # the host's launches of an MoE layer behind ordinary (not MLA) attention in a forward outside a CUDA graph, where
    # the engine's own differ from the family's Efficiency.eager_moe_layer_s (whose sources are MLA + MoE layers);
    # 0: the family's
    eager_gqa_moe_layer_s: float = 0.0
    # the fixed time of one MoE layer's fused-MoE kernels in a step (Efficiency.moe_layer_fixed_s: routing, alignment,
    # the grouped GEMMs' tiles at few tokens per expert) where the engine's own kernels on a GPU family differ from the
    # vLLM kernels the family's term was measured with, for bf16 / fp8 experts (MXFP4 experts keep the family's):
    # (GPU family or "cc10", seconds) rules, the first that matches (for_gpu); none: the family's
    moe_layer_fixed_s_by_gpu: tuple[tuple[str, float], ...] = ()
    # the engine's MLA module per layer and forward beyond its four GEMMs' priced time, by GPU (for_gpu keys;
    # Efficiency.mla_layer_fixed_s): vLLM's, from NVIDIA's measured tables of its whole MLA module (engines/vllm.py)
    mla_layer_fixed_s_by_gpu: tuple[tuple[str, float], ...] = ()
    # the release's n-gram proposer, host time per running sequence and speculative step (Efficiency.ngram_per_seq_s,
    # the family's, prices a proposer that matches on the CPU in a few microseconds: vLLM V1's); 0: the family's
    ngram_proposer_per_seq_s: float = 0.0
    # the release's n-gram lookup per context token of each running sequence and speculative step, on top: a lookup that
    # scans the sequence's whole history for its suffix every step (vLLM V1's KMP match in numba); 0: none (a lookup
    # kept incrementally, SGLang's n-gram cache, or one not measured)
    ngram_scan_per_token_s: float = 0.0
    # output processing in the engine's own process per token a step emits (vLLM V0: the token appended, detokenised,
    # checked against the stop conditions and returned in the request's output), paid after the step where nothing
    # overlaps it (Efficiency.output_per_token_s; SpecCosts.serial_output_s); 0: none on the engine's critical path
    # (V1 and SGLang detokenise in another process, priced by the API server's api_per_seq_s)
    output_per_token_s: float = 0.0
    # the share of decode steps the engine's n-gram lookup proposes in, where the request gives none
    # (SpeculativeConfig.proposal_rate); 1: every step verifies its draft tokens (SGLang pads its trie's candidates)
    ngram_proposal_rate: float = 1.0
    default_block_size: int = 16
    mla_block_size: int = 16
    cpu_block_size: int = 128
    # profiling pass: activation peak = forward + sampler (+ speculation), bytes
    act_hidden_coef: float = 2.6  # x tokens x hidden x activation bytes
    act_intermediate_coef: float = 0.73  # x tokens x intermediate-per-rank x activation bytes
    act_moe_coef: float = 1.0  # x tokens x top_k x (3 x expert-intermediate-per-rank + hidden) x bytes
    act_vocab_coef: float = 3.2  # x sampler rows x vocab x 4 bytes (fp32 logits and their copies)
    act_softcap_coef: float = 0.3  # extra, when final_logit_softcapping is set
    # fp32 vocabulary row-sets per sampler row more that an install without FlashInfer profiles (PyTorch's sort-based
    # top-k/top-p where the planned one runs FlashInfer's kernel: vLLM 0.8-0.11.0 pip installs); 0: no such gap
    sort_sampler_sets: float = 0.0
    # V1 (phases): the peak is the larger of the forward and the sampler step (which holds act_sampler_hidden_coef
    # hidden-state sets of the batch besides the logits), plus the fused-MoE kernel's workspaces, which the first
    # forward allocates and keeps (moe_workspace_bytes); False: forward + sampler (V0's fit)
    act_phases: bool = False
    act_sampler_hidden_coef: float = 0.0  # x tokens x hidden x activation bytes, held through the sampler step
    spec_profile_vocab_coef: float = 1.0  # extra fp32 logits rows the profiling pass adds per dummy draft token
    spec_profile_base_coef: float = 0.0  # and once, whatever the draft count (measured: 0.5 with d drafts, 3.5 each)
    # whether the profiling pass's dummy rejection sampler drafts k tokens per sequence (else one, whatever k is)
    spec_profile_k_aware: bool = False
    # memory outside torch's allocator
    non_torch_bytes: int = int(0.25 * GiB)
    non_torch_tp_base_bytes: int = 0  # with TP > 1: NCCL and custom all-reduce buffers
    non_torch_tp_per_rank_bytes: int = 0
    # CUDA graphs
    cuda_graph_bytes_per_layer: int = int(0.023 * GiB)
    cuda_graph_reference_sizes: int = 67  # capture sizes the per-layer figure was measured at
    cuda_graph_max_capture: int = 512
    cuda_graph_subtracted: bool = False
    # vLLM 0.25-0.27: Model Runner V2, the default for dense models from 0.25 (vllm PR 44443), estimated no CUDA
    # graph memory (profile_cudagraph_memory returned 0: vllm issue 49224, fixed by PR 53306), so the KV pool kept
    # what the V1 runner sets aside for graphs; MoE and hybrid models (and n-gram speculation) stayed on V1
    mrv2_dense_reserves_no_graphs: bool = False
    # which models vLLM runs on Model Runner V2 when VLLM_USE_V2_MODEL_RUNNER is unset (config/vllm.py
    # use_v2_model_runner): "" none, "dense" (0.25 - 0.28: not MoE, not hybrid), "all" (0.29 on); the speculative
    # methods that keep a run on the V1 runner (`mrv2_v1_methods`); and EAGLE-3 with pipeline stages on V1 (0.25 - 0.29)
    model_runner_v2: str = ""
    mrv2_v1_methods: tuple[str, ...] = ()
    mrv2_eagle3_pp_on_v1: bool = False
    # vLLM 0.33: on Model Runner V2 a separate draft model shorter than the target lowers max_model_len to the draft's
    # (config/vllm.py VllmConfig._limit_max_model_len_to_draft: "the V2 model runner can't skip speculation for longer
    # sequences; reducing max_model_len to %d", `self.model_config.max_model_len = draft_max_model_len`; skipped where
    # config/speculative.py draft_shares_target_positions, never for method "draft_model"); 0.32 kept the target's
    mrv2_max_model_len_to_draft: bool = False
    # start-up
    refuses_start_below_max_model_len: bool = True
    null_blocks: int = 0  # blocks the block pool holds back for good (V1's null block)
    # the profiling pass counts every byte on the card outside torch, other processes' included, as its own
    # non-torch memory (vLLM up to 0.6.3); later releases take a baseline first and refuse a budget above it
    other_processes_in_non_torch: bool = False
    null_block_in_startup_check: bool = False  # the start-up check plans against usable blocks (0.32)
    token_report: str = "blocks"  # "blocks": tokens = blocks x block_size; "requests": whole requests' worth
    # hybrid models (state layers): pages one sequence's state holds per state group beyond 1 + k ("align": prefix
    # caching keeps the previous block's state too), the kernel block the attention block size is a multiple of,
    # and the start-up refusal when max_num_seqs exceeds the pool's blocks (full CUDA graphs need one per sequence)
    state_cache_mode: str = "none"
    mamba2_checkpoint_pages: int = 0  # "align": pages a mamba2 layer adds for its prefill checkpoint
    hybrid_kernel_block: int = 16
    refuses_max_num_seqs_above_blocks: bool = False
    # V0's multi-step scheduling beside chunked prefill (vLLM 0.6.3 on; 0.6.0-0.6.2 engine/arg_utils.py: "Chunked
    # prefill is not supported with multi-step (--num-scheduler-steps > 1)", read in the 0.6.0 sdist and the 0.6.1.post2
    # / 0.6.2 wheels): core.memory.scheduler_steps
    multi_step_chunked: bool = True
    # attention-only pools of several kinds (sliding + full, chunked + full) are grouped with padded layer slots
    # (vLLM's hybrid KV-cache manager, default since 0.10: core.kvcache.pool_layer_slots)
    kv_groups_by_kind: bool = False
    sources: tuple[str, ...] = field(default=(), compare=False)
    # An engine whose budget is not `total x utilization` (SGLang's mem_fraction_static) brings its own account:
    # a function (deployment, profile) -> MemoryAccount, defined with the engine's profile under engines/.
    accountant: Callable[..., MemoryAccount] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ResolvedSettings:
    gpu_memory_utilization: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    dtype: str
    kv_cache_dtype: str
    kv_dtype_bytes: int
    quantization: Quantization | None
    enforce_eager: bool
    num_speculative_tokens: int
    prefill_first: bool = False  # the engine's step policy (AccountingProfile.prefill_first)
    # the max_model_len a shorter draft model lowered max_model_len from (AccountingProfile.mrv2_max_model_len_to_draft);
    # 0: not lowered
    max_model_len_before_draft: int = 0
    # the engine holds the target's quantized MoE experts unquantized and runs them so (SGLang's MXFP4 experts under
    # expert parallelism off datacenter Blackwell: engines/sglang/accounting.py); the step costs then price the
    # target as a `none` override serves it (planner.perf)
    experts_upcast: bool = False
    spec_host_handover: bool = False  # AccountingProfile.spec_host_handover
    draft_extend: str = "verified"  # AccountingProfile.draft_extend (draft_model_extend for a separate draft model)
    spec_expansion_query_s: float = 0.0  # AccountingProfile.spec_expansion_query_s, 0 with --enforce-eager
    api_cost_scale: float = 1.0  # AccountingProfile.api_cost_scale
    moe_fp8_memory: float = 0.0  # AccountingProfile.moe_fp8_memory (0: the GPU family's)
    custom_allreduce: bool = False  # AccountingProfile.custom_allreduce
    eager_gqa_moe_layer_s: float = 0.0  # AccountingProfile.eager_gqa_moe_layer_s (0: the GPU family's)
    # AccountingProfile.moe_layer_fixed_s_by_gpu where one matches, for bf16 / fp8 experts (0: the family's)
    moe_layer_fixed_s: float = 0.0
    mla_layer_fixed_s: float = 0.0  # AccountingProfile.mla_layer_fixed_s_by_gpu where one matches (0: the family's)
    ngram_proposer_per_seq_s: float = 0.0  # AccountingProfile.ngram_proposer_per_seq_s (0: the GPU family's)
    ngram_scan_per_token_s: float = 0.0  # AccountingProfile.ngram_scan_per_token_s
    output_per_token_s: float = 0.0  # AccountingProfile.output_per_token_s
    scheduler_steps: int = 1  # vLLM V0's multi-step scheduling (EngineSettings.num_scheduler_steps)
    # a multi-step group hands each step's outputs over as it runs, so a request that finishes inside it reaches its
    # client then, not at the group's end: V0's async output processing, on unless pipeline parallel, eager mode
    # (--enforce-eager, 8-bit bitsandbytes) or a device other than a GPU turns it off (vLLM 0.6 config.py
    # ModelConfig.verify_async_output_proc; ROCm is device "cuda" there). With it worker/multi_step_model_runner.py
    # hands each step to the engine's output processing as soon as its tokens are ready (_async_process_outputs, or
    # _final_process_outputs' callback branch step by step when the host ran ahead); without it
    # _final_process_outputs returns the group's outputs together at its last step
    group_streams: bool = False
    recv_interval: int = 1  # SGLang's --scheduler-recv-interval (EngineSettings.scheduler_recv_interval)
    async_scheduling: bool = False  # AccountingProfile.async_scheduling, where the deployment allows it
    async_drafters: tuple[str, ...] = ASYNC_DRAFTERS_V1  # AccountingProfile.async_drafters
    scheduled_ahead: bool = False  # AccountingProfile.scheduled_ahead, where the deployment allows it
    admission: str = "chunk"  # AccountingProfile.admission
    mxfp4_pad: Mxfp4Pad = VLLM_MXFP4_PAD  # AccountingProfile.mxfp4_pad (_by_gpu where one matches)
    mla_prompt_mha: tuple[bool, int] = (True, 0)  # AccountingProfile.mla_prompt_mha (_by_gpu where one matches)
    mla_latent_cache: bool = True  # AccountingProfile.mla_latent_cache
    spec_v2: str = ""  # AccountingProfile.spec_v2, where the deployment allows the overlap ("" where it does not)
    stream_interval: int = 1  # --stream-interval (EngineSettings.stream_interval)
    graph_max_tokens: int = GRAPH_ALL  # the largest step in a CUDA graph (AccountingProfile.graph_max_tokens)
    # the largest decode step the same server without speculation replays from a graph (the baseline a speed-up is
    # against: its capture sizes follow one token a sequence, not 1 + k); 0: graph_max_tokens
    plain_graph_max_tokens: int = 0
    graph_prompt_tokens: int = GRAPH_ALL  # the largest step with prompt tokens in one (0: none; graph_prompts)
    graph_max_context: int = 0  # AccountingProfile.graph_max_context where max_model_len exceeds it (0: no limit)
    prefix_prompt_kernel: bool = False  # chunked prefill on a GPU of AccountingProfile.prefix_prompt_vendors
    fp8_attention_16bit: bool = False  # the GPU's family in AccountingProfile.fp8_attention_16bit_families
    # the KV slots beyond its computed tokens a decoding request holds at a step with speculation (its 1 + k scheduled
    # tokens included), as the engine's decode check wants them free (SGLang: engines/sglang's decode_reserve_tokens);
    # 0: k scheduled + k lookahead + 1 (vLLM's; simulator.engine.EngineConfig.decode_reserve)
    decode_reserve: int = 0


@dataclass(frozen=True)
class MemoryAccount:
    """Per GPU (rank 0, the busiest) of one engine instance. Bytes unless named otherwise."""

    settings: ResolvedSettings
    total_bytes: int
    budget_bytes: int
    weights_target: WeightBreakdown
    weights_draft_bytes: int
    activation_peak_bytes: int
    activation_terms: dict
    non_torch_bytes: int
    cuda_graph_bytes: int
    cuda_graph_counted: bool
    kv_cache_bytes: int  # what the engine hands to the KV pool (may be <= 0: it refuses to start)
    kv_layers: tuple[KVLayer, ...]
    kv_blocks: int
    kv_cache_tokens: int  # per engine instance, as vLLM's "GPU KV cache size"
    max_concurrency: float  # requests of max_model_len tokens the pool holds at once
    unprofiled_runtime_bytes: int  # peaks at run time that the profiling pass did not see
    startup_problem: str | None

    # the startup problem stops the engine before a pool runs at all, whatever the pool's size: vLLM's check that every
    # decoding sequence of a hybrid model has a state block for full CUDA graph capture (_hybrid_problem), not its
    # max_model_len check, whose pool is simulated with the too-long requests named (pool_never_built)
    start_refused: bool = False
    block_bytes: int = 0  # bytes of one pool block when it is not block_size x kv_bytes_per_token (hybrid models,
    # and pools of several attention kinds with padded layer slots)
    pool_slots: tuple[KVLayer, ...] = ()  # the pool's layer slots where vLLM pads them (core.kvcache.pool_layer_slots)
    state_bytes_per_sequence: int = 0  # hybrid models: one sequence's recurrent state on this GPU, unpadded
    state_blocks_per_sequence: int = 0  # hybrid models: pool blocks one sequence's state holds for its lifetime
    kv_cache_groups: int = 1  # vLLM's KV-cache groups (several with state layers)

    @property
    def weights_target_bytes(self) -> int:
        return self.weights_target.total

    @property
    def outside_budget_bytes(self) -> int:
        """What gpu_memory_utilization leaves outside the engine's budget on this GPU (the one owner)."""
        return self.total_bytes - self.budget_bytes

    @property
    def pool_layers(self) -> tuple[KVLayer, ...]:
        """The layers as the pool lays them out, padding slots included: what a request's blocks are counted over
        (its KV demand, the blocks the simulator holds for it); `kv_layers` where nothing is padded."""
        return self.pool_slots or self.kv_layers

    @property
    def kv_bytes_per_token(self) -> int:
        return bytes_per_token(self.kv_layers)

    @property
    def kv_bytes_per_token_target(self) -> int:
        return bytes_per_token(self.kv_layers, "target")

    @property
    def kv_bytes_per_token_draft(self) -> int:
        return bytes_per_token(self.kv_layers, "draft")

    null_blocks: int = 0
    # what an engine with its own budget rule reports beside the common terms (SGLang: mem_fraction_static,
    # the memory free before loading, what the fraction leaves outside the pool), bytes unless named
    engine_terms: dict = field(default_factory=dict, compare=False)

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can hold: the pool less the engine's null block."""
        return max(0, self.kv_blocks - self.null_blocks)

    @property
    def bytes_per_block(self) -> int:
        return self.block_bytes or self.settings.block_size * self.kv_bytes_per_token

    @property
    def pool_bytes(self) -> int:
        """Bytes of the blocks requests can actually use."""
        return self.usable_blocks * self.bytes_per_block

    @property
    def max_sequences(self) -> int | None:
        """Hybrid models: the most sequences the pool holds at once by their state alone (None otherwise)."""
        return self.usable_blocks // self.state_blocks_per_sequence if self.state_blocks_per_sequence else None

    @property
    def used_bytes(self) -> int:
        """Everything the engine holds on this GPU once started, CUDA graphs included whether or not the
        engine subtracted them from its budget."""
        return (self.weights_target_bytes + self.weights_draft_bytes + self.activation_peak_bytes
                + self.non_torch_bytes + self.cuda_graph_bytes + max(0, self.kv_cache_bytes))

    @property
    def free_bytes(self) -> int:
        """Memory of the card left over once the engine has started (negative: it would run out)."""
        return self.total_bytes - self.used_bytes


def for_gpu(rules: tuple, gpu: GpuSpec, default):
    """The value of the first (key, value) rule whose key names the GPU: its family, "cc10" for a datacenter
    Blackwell (GpuSpec.compute_capability_10), or "*" for any; `default` where none does (AccountingProfile's *_by_gpu
    tables)."""
    return next((value for key, value in rules
                 if key in (gpu.family, "*") or (key == "cc10" and gpu.compute_capability_10)), default)


def quant_config_name(quant: Quantization | None) -> str:
    """The quantization config the engine builds for `quant`: the checkpoint's quant_method, or the override's."""
    if quant is None:
        return "unquantized"
    return quant.config_method or quant.method


def _loads_kv_scales(target: ModelSpec, p: AccountingProfile, quant: Quantization | None) -> bool:
    """Whether the served weights' quantization config gives attention a KV-scale method, which vLLM refuses beside
    an fp8_e5m2 cache (AccountingProfile.e5m2_fp8_weights)."""
    if not p.e5m2_fp8_weights or quant is None:
        return False
    method = quant.config_method  # the checkpoint's quant_method, or the override's engine name
    if method == "fp8" and quant.source == "override" and p.e5m2_fp8_weights == "online":
        return False  # the online fp8_per_tensor config: no KV-scale method for attention
    if method == "compressed-tensors":
        return p.e5m2_fp8_weights == "refused" or target.kv_cache_scheme
    return method in ("fp8", "modelopt", "modelopt_fp4", "nvfp4")


def _kv_cache_dtype(d: Deployment, p: AccountingProfile, quant: Quantization | None, dtype: str) -> tuple[str, int]:
    """(the KV cache's dtype, its bytes a value) as the release resolves --kv-cache-dtype for the served weights."""
    e = d.engine
    target = d.target
    auto_kv = e.kv_cache_dtype in ("auto", None)
    nvfp4_checkpoint = auto_kv and bool(p.nvfp4_kv) and quant is not None and quant.kv_cache_dtype == "nvfp4"
    if target.kv_cache_scheme and (p.ct_kv_cache_scheme == "forced" or (p.ct_kv_cache_scheme == "auto" and auto_kv)):
        # a compressed-tensors kv_cache_scheme: vLLM's "fp8" (e4m3), over an explicit dtype too in 0.15 - 0.21 (an
        # explicit nvfp4 included: attention.py sets the layer's dtype to "fp8" whatever was asked)
        # (AccountingProfile.ct_kv_cache_scheme)
        kv_dtype, kv_bytes = "fp8_e4m3", 1
    elif e.kv_cache_dtype == "nvfp4" or nvfp4_checkpoint:
        _check_nvfp4_kv(d, p, nvfp4_checkpoint)
        kv_dtype, kv_bytes = "nvfp4", NVFP4_KV_BYTES
    elif auto_kv and p.checkpoint_kv_dtype and quant and quant.kv_cache_dtype == "fp8":
        kv_dtype, kv_bytes = "fp8_e4m3", 1  # the checkpoint's calibrated fp8 KV cache (AccountingProfile)
    elif e.kv_cache_dtype in ("auto", None):
        kv_dtype, kv_bytes = dtype, DTYPE_BYTES[dtype]
    elif e.kv_cache_dtype.startswith("fp8"):
        kv_dtype, kv_bytes = e.kv_cache_dtype, 1
        if kv_dtype == "fp8_e5m2" and target.mla is None and _loads_kv_scales(target, p, quant):
            raise SpecError("kv_cache_dtype", f"fp8_e5m2 beside {target.model_id}'s {quant_config_name(quant)} "
                            "weights: vLLM refuses it (\"fp8_e5m2 kv-cache is not supported with fp8 checkpoints\": "
                            "their quantization config loads the KV cache's e4m3 scales)", "fp8 (e4m3), fp8_e4m3 or auto")
    else:
        kv_dtype = canonical_dtype(e.kv_cache_dtype, "kv_cache_dtype")
        kv_bytes = DTYPE_BYTES[kv_dtype]
        if kv_dtype != dtype:  # attention reads the cache in the activations' dtype unless it is fp8
            raise SpecError("kv_cache_dtype", f"{kv_dtype} beside a {dtype} model: the engines keep the KV cache in "
                            "the dtype the model is served in (auto) or in fp8", "auto (or the served dtype), fp8, "
                            "fp8_e4m3, fp8_e5m2")
    return kv_dtype, kv_bytes


def resolve_settings(d: Deployment, p: AccountingProfile, quant: Quantization | None) -> ResolvedSettings:
    e = d.engine
    target = d.target
    dtype = target.dtype if e.dtype in (None, "auto") else canonical_dtype(e.dtype, "dtype")
    kv_dtype, kv_bytes = _kv_cache_dtype(d, p, quant, dtype)
    # a pre-quantized bitsandbytes checkpoint: the target's own, or the one a --quantization bitsandbytes over weights
    # stored in another format asks to serve (checkpoint_format_needed: the engines quantize at load only unquantized
    # weights)
    prequant_bnb = quant is not None and quant.method in ("bnb4", "bnb8") and (
        quant.source != "override" or checkpoint_format_needed(d.target, d.quantization_override) is not None)
    if prequant_bnb and d.tp > 1:
        # vLLM 0.9.2 - 0.27 model_loader/bitsandbytes_loader.py _load_weights: "Prequant BitsAndBytes models with
        # tensor parallelism is not supported" (the quant states cannot follow a split weight); in-flight
        # quantization (--quantization bitsandbytes on unquantized weights) shards as usual
        raise SpecError("tp", f"{target.model_id} is a pre-quantized bitsandbytes checkpoint, which vLLM does not "
                        f"load at tensor parallel {d.tp}", "tp 1 (split across GPUs with pp instead)")
    # vLLM 0.9.2 - 0.27 ModelConfig._verify_bnb_config: a pre-quantized 8-bit bitsandbytes checkpoint (load_in_8bit)
    # runs eager, "CUDA graph is not supported on BitsAndBytes 8bit yet" (read in 0.10.1.1, 0.12.0, 0.17.0, 0.25.0):
    # no CUDA graphs captured, none of their memory
    eager = e.enforce_eager or (prequant_bnb and quant is not None and quant.method == "bnb8")
    max_model_len = e.max_model_len or target.context_limit(p.engine)
    sp = d.speculative
    lowered_from = 0
    if p.mrv2_max_model_len_to_draft and sp.enabled and sp.method == SpecMethod.DRAFT_MODEL and sp.draft is not None \
            and on_model_runner_v2(d, p) and max_model_len <= target.context_limit(p.engine):
        # the draft's max_model_len is its own derived length, no more than the target's (config/speculative.py
        # _maybe_override_draft_max_model_len); an explicit longer max_model_len is lowered with a warning, not
        # refused; one above the target's own limit is refused first (config/model.py, before VllmConfig's
        # __post_init__ caps it: planner.plan refuses it)
        capped = min(max_model_len, sp.draft.context_limit(p.engine))
        lowered_from, max_model_len = (max_model_len if capped < max_model_len else 0), capped
    gpu_name = f"{d.gpu.gpu_id} {d.gpu.name}".lower()
    huge = bool(p.huge_gpu_bytes) and d.gpu.memory_bytes >= p.huge_gpu_bytes
    large = huge or d.gpu.memory_bytes >= p.large_gpu_bytes and not any(
        part in gpu_name for part in p.large_gpu_excluded_names) and (
        not p.large_gpu_names or any(part in gpu_name for part in p.large_gpu_names))
    # the CPU backend's own defaults replace the GPU tiers (AccountingProfile.cpu_default_max_num_seqs), the engine's
    # world size (TP x PP) times them where the release scales them
    world = d.tp * d.pp if p.cpu_defaults_per_rank else 1
    cpu_seqs = p.cpu_default_max_num_seqs * world if e.device == "cpu" else 0
    cpu_batched = p.cpu_default_max_num_batched_tokens * world if e.device == "cpu" else 0
    max_num_seqs = e.max_num_seqs or cpu_seqs or (
        p.default_max_num_seqs_large_gpu if large else p.default_max_num_seqs)
    chunked = v0_chunked_prefill(d, p, max_model_len)
    steps = scheduler_steps(d, p, chunked)
    if e.max_num_batched_tokens:
        batched = e.max_num_batched_tokens
        if steps > 1 and chunked and batched < max_model_len:
            # multi-step scheduling never chunks a prompt (0.6.3-0.7 config.py SchedulerConfig: "Multi-step
            # Chunked-Prefill doesn't allow prompt-chunking"; core/scheduler.py ignores a prompt longer than the budget)
            raise SpecError("max_num_batched_tokens", f"{batched} is below max_model_len ({max_model_len}): with "
                            "multi-step scheduling vLLM does not chunk prompts and ignores every longer one",
                            f"at least max_model_len ({max_model_len}), a smaller max_model_len, or "
                            "num_scheduler_steps 1")
    else:
        batched = cpu_batched or (p.default_max_num_batched_tokens_huge_gpu if huge else
                                  p.default_max_num_batched_tokens_large_gpu if large else
                                  p.default_max_num_batched_tokens)
        if p.batched_tokens_at_least_max_model_len:
            # V0's SchedulerConfig: 512 with chunked prefill ("chosen to have a balance between ITL and TTFT"; the
            # whole model length with multi-step), else at least the model length
            batched = 512 if chunked and steps == 1 else max(batched, max_model_len)
        if p.default_batched_within_seqs_len:
            batched = min(batched, max_num_seqs * max_model_len)
    if not e.max_num_seqs and p.default_seqs_within_batched:
        max_num_seqs = min(max_num_seqs, batched)
    if e.max_num_batched_tokens and p.token_budget_rules:
        _check_token_budget(e.max_num_batched_tokens, max_num_seqs, max_model_len, p.generation == "V0" and not chunked)
    _check_engine_flags(e, p)
    if e.block_size:
        block_size = e.block_size
    elif e.device == "cpu":
        block_size = p.cpu_block_size
    elif target.mla is not None:
        block_size = p.mla_block_size
    else:
        block_size = p.default_block_size
    # host / GPU overlap: not on the CPU, nor with pipeline parallel but on Model Runner V2 (vLLM config/vllm.py:
    # "Async scheduling is disabled because the V1 model runner does not support it with pipeline parallelism")
    overlaps = (d.pp == 1 or on_model_runner_v2(d, p)) and e.device == "cuda"
    return ResolvedSettings(
        max_model_len_before_draft=lowered_from,
        gpu_memory_utilization=(p.default_gpu_memory_utilization if e.gpu_memory_utilization is None
                                else e.gpu_memory_utilization), max_model_len=max_model_len,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=batched, block_size=block_size, dtype=dtype,
        kv_cache_dtype=kv_dtype, kv_dtype_bytes=kv_bytes, quantization=quant, enforce_eager=eager,
        num_speculative_tokens=d.speculative.num_speculative_tokens if d.speculative.enabled else 0,
        prefill_first=p.prefill_first and not chunked, spec_host_handover=p.spec_host_handover,
        draft_extend=(p.draft_model_extend or p.draft_extend) if d.speculative.method == SpecMethod.DRAFT_MODEL
        else p.draft_extend,
        spec_expansion_query_s=0.0 if eager else p.spec_expansion_query_s,
        api_cost_scale=p.api_cost_scale,
        scheduler_steps=steps, group_streams=steps > 1 and d.pp == 1 and not eager,
        moe_fp8_memory=p.moe_fp8_memory, custom_allreduce=p.custom_allreduce,
        ngram_proposer_per_seq_s=p.ngram_proposer_per_seq_s,
        # the lookup's host scan where n-gram runs on the V1 runner's numba proposer; Model Runner V2 (n-gram on it from
        # 0.32: mrv2_v1_methods) proposes on the GPU (v1/worker/gpu/spec_decode/__init__.py: use_ngram() ->
        # NgramGPUSpeculator, a Triton _ngram_scan_kernel over the GPU's token history: 4 B a token of history, 64
        # sequences of 32k tokens in about 0.1 ms of an H100's bandwidth, not priced)
        ngram_scan_per_token_s=0.0 if on_model_runner_v2(d, p) else p.ngram_scan_per_token_s,
        output_per_token_s=p.output_per_token_s, eager_gqa_moe_layer_s=p.eager_gqa_moe_layer_s,
        # MXFP4 experts run their own fused runner (SGLang: FlashInfer's) and keep the family's
        moe_layer_fixed_s=0.0 if (quant and quant.method == "mxfp4") else for_gpu(p.moe_layer_fixed_s_by_gpu, d.gpu, 0.0),
        # only where the release runs the MLA module (mla_latent_cache): vLLM before 0.7.1 runs DeepSeek as ordinary
        # attention over decompressed keys and values
        mla_layer_fixed_s=for_gpu(p.mla_layer_fixed_s_by_gpu, d.gpu, 0.0) if p.mla_latent_cache else 0.0,
        async_scheduling=p.async_scheduling and overlaps, async_drafters=p.async_drafters,
        scheduled_ahead=p.scheduled_ahead and overlaps, spec_v2=p.spec_v2 if overlaps else "",
        admission=p.admission,
        mxfp4_pad=for_gpu(p.mxfp4_pad_by_gpu, d.gpu, p.mxfp4_pad),
        mla_prompt_mha=for_gpu(p.mla_prompt_mha_by_gpu, d.gpu, p.mla_prompt_mha),
        mla_latent_cache=p.mla_latent_cache, experts_upcast=False,
        graph_max_context=p.graph_max_context if 0 < p.graph_max_context < max_model_len else 0,
        prefix_prompt_kernel=chunked and d.gpu.vendor in p.prefix_prompt_vendors,
        fp8_attention_16bit=d.gpu.family in p.fp8_attention_16bit_families,
        recv_interval=_engine_interval("scheduler_recv_interval", e.scheduler_recv_interval, p.recv_interval_flag, p,
                                       "engine_version 0.5.1 or later" if p.engine == "sglang" else "engine sglang"),
        stream_interval=_engine_interval("stream_interval", e.stream_interval, p.stream_interval_flag, p,
                                         "engine sglang, or vllm from 0.12"),
        **dict(zip(("graph_max_tokens", "graph_prompt_tokens"),
                   graph_limits(p, target, max_num_seqs, batched, d.speculative.num_speculative_tokens
                                if d.speculative.enabled else 0, gpu=d.gpu,
                                quant_method=quant.method if quant else "none"))),
        plain_graph_max_tokens=graph_limits(p, target, max_num_seqs, batched, 0, gpu=d.gpu,
                                            quant_method=quant.method if quant else "none")[0],
    )


# SGLang's piecewise CUDA graphs capture prompt steps up to --piecewise-cuda-graph-max-tokens, by default the
# chunked-prefill size, 2048 tokens for MLA models (docs.sglang.io advanced_features/piecewise_cuda_graph)
PIECEWISE_MLA_TOKENS = 2048


def capture_ceiling(p: AccountingProfile, gpu: GpuSpec, ceiling: int) -> int:
    """A release's largest CUDA-graph capture size `ceiling` (graph_max_tokens, cuda_graph_max_capture) on `gpu`:
    AccountingProfile.graph_max_tokens_cc10 on compute capability 10 where the release sets one."""
    return p.graph_max_tokens_cc10 if p.graph_max_tokens_cc10 and gpu.compute_capability_10 else ceiling


def model_capture_max(p: AccountingProfile, target: ModelSpec, batched: int) -> int:
    """The largest CUDA-graph capture size the target's own model code sets in this engine (vLLM's
    GptOssForCausalLMConfig: 1024 tokens), no more than the token budget; 0 where the engine's default rule applies."""
    own = dict(p.graph_max_tokens_by_model).get(target.model_type, 0)
    return min(own, batched) if own else 0


def graph_limits(p: AccountingProfile, target: ModelSpec, max_num_seqs: int, batched: int, k: int,
                 gpu: GpuSpec, quant_method: str) -> tuple[int, int]:
    """(the largest step, the largest step with prompt tokens) the engine runs in a CUDA graph. vLLM V1's largest
    capture size (vllm/config/vllm.py _set_cudagraph_sizes): min(max_num_seqs x (1 + k) x 2, 512), no more than the
    token budget, or the model code's own largest size (AccountingProfile.graph_max_tokens_by_model); prompt steps as
    AccountingProfile.graph_prompts says, eager where the engine's piecewise graphs do not run (on a GPU of another
    vendor, for a model type it excludes, where its MoE runner on datacenter Blackwell turns them off, for a
    multimodal target, with speculative decoding where the release says so)."""
    largest = capture_ceiling(p, gpu, p.graph_max_tokens)
    by_model = model_capture_max(p, target, batched)
    if p.graph_prompts == "capture" and by_model:
        largest = by_model
    elif p.graph_prompts == "capture" and largest < GRAPH_ALL:
        largest = min(largest, max_num_seqs * (1 + k) * 2, batched)
    sm100_off = gpu.compute_capability_10 and quant_method in dict(p.piecewise_off_sm100).get(target.model_type, ())
    multimodal_off = target.vision is not None and target.model_type not in p.text_only_multimodal_types
    piecewise_off = p.graph_prompts == "piecewise" and (
        gpu.vendor not in p.piecewise_vendors or target.model_type in p.piecewise_excluded_model_types or sm100_off
        or multimodal_off or (p.piecewise_off_speculative and k > 0))
    if p.graph_prompts == "eager" or piecewise_off:
        return largest, 0
    if p.graph_prompts == "piecewise":
        return largest, PIECEWISE_MLA_TOKENS if target.mla is not None else batched
    return largest, largest


def _check_token_budget(batched: int, max_num_seqs: int, max_model_len: int, whole_prompts: bool) -> None:
    """A step token budget the release refuses (AccountingProfile.token_budget_rules): below max_num_seqs (every
    running sequence needs a token a step), or, where prompts are not chunked (V0 without chunked prefill), below
    max_model_len."""
    if batched < max_num_seqs:
        raise SpecError("max_num_batched_tokens", f"{batched} is below max_num_seqs ({max_num_seqs}): vLLM refuses "
                        "to start", f"at least max_num_seqs ({max_num_seqs}), or a smaller max_num_seqs")
    if whole_prompts and batched < max_model_len:
        raise SpecError("max_num_batched_tokens", f"{batched} is below max_model_len ({max_model_len}) without chunked "
                        "prefill: vLLM refuses to start", f"at least max_model_len ({max_model_len}), a smaller "
                        "max_model_len, or chunked_prefill: on")


def _engine_interval(field: str, value: int, has_flag: bool, p: AccountingProfile, where: str) -> int:
    """A scheduler interval (1: the engine's default, every step); refused above 1 for a release without the flag."""
    if value > 1 and not has_flag:
        flag = "--" + field.replace("_", "-")
        raise SpecError(field, f"{p.label} has no {flag}", f"1, or {where}")
    return value


# the head sizes vLLM's FlashInfer backend takes (FlashInferBackend.get_supported_head_sizes: 64 / 128 / 256 in
# 0.20.0 - 0.21.0, 512 too from 0.22.0, read in 0.20.0 - 0.32.0); it is the one backend listing "nvfp4" among its
# supported_kv_cache_dtypes, so at any other head size the selector finds no backend for an NVFP4 KV cache
# (platforms/cuda.py get_attn_backend_cls: "No valid attention backend found", FLASHINFER: "head_size not supported")
NVFP4_KV_HEAD_SIZES = (64, 128, 256, 512)


def _kv_head_sizes(m: ModelSpec) -> set[int]:
    """The head sizes of a model's KV-holding attention layers (none for Medusa's heads, which hold no KV)."""
    return {layer.head_dim for layer in m.layers if layer.head_dim}


def _check_nvfp4_kv(d: Deployment, p: AccountingProfile, from_checkpoint: bool) -> None:
    """An NVFP4 KV cache where the release, the model and the GPU serve one (AccountingProfile.nvfp4_kv). vLLM runs it
    through FlashInfer only - the one attention backend whose supported_kv_cache_dtypes lists "nvfp4" (0.20.0 -
    0.32.0); no MLA backend does. 0.21 - 0.31 run it on FlashInfer's trtllm-gen kernels alone, datacenter Blackwell
    (compute capability 10): v1/attention/backends/flashinfer.py passes backend "trtllm-gen" to its wrappers ("fa2/fa3
    do not support nvfp4"); off capability 10 0.21.0 / 0.22.0 keep model-dtype queries and FlashInferImpl.forward's
    assert "NVFP4 KV cache requires FP8 quantized queries" fails, 0.23.0 / 0.24.0's FlashInferMetadataBuilder raises
    "--kv-cache-dtype nvfp4 requires sm100f", and from 0.25.0 FlashInferBackend.supports_kv_cache_dtype admits it on
    is_device_capability_family(100) only. 0.32 adds FlashInfer's FA2 path on 8.x / 9.x / 12.x (_nvfp4_kv_on_fa2)."""
    why = "the checkpoint's NVFP4 KV cache (kv_cache_dtype auto)" if from_checkpoint else "kv_cache_dtype nvfp4"
    other = "kv_cache_dtype fp8 or the model dtype"
    if p.nvfp4_kv not in ("served", "served_fa2"):
        problem = ("FlashInfer's metadata builder raises \"nvfp4 KV cache is not yet supported\"" if p.nvfp4_kv
                   else "the release has no NVFP4 KV cache")
        raise SpecError("kv_cache_dtype", f"{why} on {p.label}: {problem}", f"{other}, or engine vllm with "
                        "engine_version 0.21 or later")
    drafter = d.speculative.draft if d.speculative.enabled else None
    models = (d.target,) + ((drafter,) if drafter is not None else ())
    if any(m.mla is not None for m in models):
        raise SpecError("kv_cache_dtype", f"{why}: no MLA attention backend of vLLM takes an NVFP4 KV cache",
                        f"{other} for an MLA model")
    heads = set().union(*(_kv_head_sizes(m) for m in models))
    odd = sorted(heads - set(NVFP4_KV_HEAD_SIZES))
    if odd:
        raise SpecError("kv_cache_dtype", f"{why}: vLLM's one backend for an NVFP4 KV cache, FlashInfer, takes head "
                        f"sizes {' / '.join(map(str, NVFP4_KV_HEAD_SIZES))}, not {' / '.join(map(str, odd))} "
                        "(FlashInferBackend.get_supported_head_sizes)", f"{other} for this model")
    fa2 = p.nvfp4_kv == "served_fa2" and d.gpu.vendor == "nvidia" and not d.gpu.compute_capability_10 and \
        d.gpu.family in ("ampere", "ada", "hopper", "blackwell")
    if fa2:
        # vLLM 0.32 also serves it on compute capability 8.x / 9.x / 12.x through FlashInfer's FA2 path
        # (flashinfer.py _nvfp4_kv_on_fa2, supports_combination): not at head_size 64, not with attention sinks
        if 64 in heads:
            raise SpecError("kv_cache_dtype", f"{why}: vLLM's FA2 path for an NVFP4 KV cache off datacenter Blackwell "
                            "misreads it at head_size 64 (flashinfer.py supports_combination)",
                            f"{other} for this model on the {d.gpu.gpu_id}")
        if any(m.model_type == "gpt_oss" for m in models):
            raise SpecError("kv_cache_dtype", f"{why}: vLLM's FA2 path for an NVFP4 KV cache off datacenter Blackwell "
                            "cannot read it beside attention sinks (gpt-oss's; flashinfer.py supports_combination)",
                            f"{other} for this model on the {d.gpu.gpu_id}")
    elif not d.gpu.compute_capability_10:
        raise SpecError("kv_cache_dtype", f"{why}: vLLM {p.version} serves an NVFP4 KV cache with FlashInfer's trtllm-gen "
                        f"kernels, on datacenter Blackwell only, not the {d.gpu.gpu_id}",
                        f"{other} on this GPU, a B200 / B300 class GPU, or vLLM 0.32 on NVIDIA compute capability "
                        "8.x / 9.x / 12.x")


def _check_engine_flags(e: EngineSettings, p: AccountingProfile) -> None:
    """Settings the release refuses, or that are another engine's: refused rather than planned and emitted."""
    if e.block_size and p.block_sizes and e.block_size not in p.block_sizes:
        raise SpecError("block_size", f"{p.label} takes no block size of {e.block_size}",
                        ", ".join(map(str, p.block_sizes)) + (" (no --page-size before SGLang 0.4.4), or engine_version "
                                                              "0.4.4 or later" if p.engine == "sglang" else
                                                              " (SGLang's --page-size takes any)"))
    if e.cuda_graph_max_bs is not None and not p.graph_bs_flag:
        raise SpecError("cuda_graph_max_bs", f"is SGLang's --cuda-graph-max-bs; {p.label} sizes its CUDA graphs "
                        "itself (max_num_seqs and its capture sizes)", "no value with engine vllm, or engine sglang")


def _v0_only(field: str, problem: str, otherwise: str) -> None:
    """Refuse a vLLM V0 setting given to another engine (V1, SGLang)."""
    raise SpecError(field, problem, f"{otherwise}, or engine vllm with engine_version 0.6 or 0.7")


V0_CHUNKED_ABOVE = 32 * 1024  # V0 turns chunked prefill on for models longer than this (vllm/engine/arg_utils.py)


def v0_chunked_prefill(d: Deployment, p: AccountingProfile, max_model_len: int) -> bool:
    """Whether vLLM V0 chunks prompts (its --enable-chunked-prefill; then a step mixes decodes and prompt chunks, as
    V1's do). Its default (vllm/engine/arg_utils.py, 0.6): on for a model longer than 32K ("Chunked prefill is enabled
    by default for models with max_model_len > 32K") on a GPU, without a sliding window, speculation or
    sequence-length-agnostic (state) layers, from 0.6.5 not on ROCm (AccountingProfile.chunked_default_vendors). V1 and
    SGLang always chunk: setting it there is refused."""
    setting = d.engine.chunked_prefill
    if p.generation != "V0":
        if setting != "auto":
            _v0_only("chunked_prefill", f"{p.label} always chunks prompts",
                     "auto (set max_num_batched_tokens for the chunk size)")
        return False
    if setting != "auto":
        return setting == "on"
    windowed = any(layer.window for layer in d.target.layers)
    return (max_model_len > V0_CHUNKED_ABOVE and d.engine.device == "cuda" and not windowed
            and d.gpu.vendor in p.chunked_default_vendors and not d.speculative.enabled and not d.target.is_hybrid)


def scheduler_steps(d: Deployment, p: AccountingProfile, chunked: bool = False) -> int:
    """Decode steps per scheduling round: vLLM V0's --num-scheduler-steps (0.6-0.7; V1 has no such flag, SGLang
    none), never with speculation (vLLM 0.6 refuses the pair: "Speculative decoding is not supported with
    multi-step"), on the CPU (worker/cpu_model_runner.py, 0.6.2-0.7.3: "CPU worker does not support multi-step
    execution."), with chunked prefill (`chunked`, v0_chunked_prefill: on by default above a 32K model length) before
    0.6.3 (AccountingProfile.multi_step_chunked), or with it over pipeline stages (0.6.3-0.7 engine/arg_utils.py:
    "Multi-Step Chunked-Prefill is not supported for pipeline-parallel-size > 1")."""
    steps = d.engine.num_scheduler_steps
    if steps <= 1:
        return 1
    if p.generation != "V0":
        _v0_only("num_scheduler_steps", f"multi-step scheduling is vLLM's V0 engine only, not {p.label}", "1")
    if d.speculative.enabled:
        raise SpecError("num_scheduler_steps", "vLLM's multi-step scheduling does not run with speculative decoding",
                        "1, or method none")
    if d.engine.device == "cpu":
        raise SpecError("num_scheduler_steps", "vLLM's CPU worker does not run multi-step scheduling (\"CPU worker "
                        "does not support multi-step execution\")", "1, or device cuda")
    by_default = d.engine.chunked_prefill == "auto"  # on by itself above the length: a shorter one turns it off
    shorter = [f"a max_model_len of at most {V0_CHUNKED_ABOVE:,}"] if by_default else []
    if chunked and not p.multi_step_chunked:
        raise SpecError("num_scheduler_steps", f"{p.label} does not run multi-step scheduling with chunked prefill"
                        + (f" (on by default above a {V0_CHUNKED_ABOVE:,}-token model length)" if by_default else ""),
                        _alternatives(["1", "chunked_prefill: off", *shorter]
                                      + (["engine_version 0.6.3 or later"] if d.pp == 1 else [])))
    if chunked and d.pp > 1:
        raise SpecError("num_scheduler_steps", "vLLM does not run multi-step scheduling with chunked prefill over "
                        "pipeline stages (\"Multi-Step Chunked-Prefill is not supported for pipeline-parallel-size > "
                        "1\")", _alternatives(["1", "pp 1", "chunked_prefill: off", *shorter]))
    return steps


def multi_step_refuses_chunked(d: Deployment, p: AccountingProfile) -> bool:
    """Whether vLLM refuses multi-step scheduling beside chunked prefill for this deployment: before 0.6.3
    (AccountingProfile.multi_step_chunked), and over pipeline stages (scheduler_steps' refusals)."""
    return not p.multi_step_chunked or d.pp > 1


def v0_whole_prompts(d: Deployment, p: AccountingProfile, max_model_len: int) -> bool:
    """Whether vLLM V0 runs every prompt whole, so an explicit step budget must hold max_model_len: without chunked
    prefill, or under multi-step scheduling, which never chunks a prompt (resolve_settings' refusals)."""
    return p.generation == "V0" and (d.engine.num_scheduler_steps > 1 or not v0_chunked_prefill(d, p, max_model_len))


def _alternatives(items: list[str]) -> str:
    """'a, b, or c': the accepted alternatives of a refusal."""
    return ", ".join(items[:-1]) + f", or {items[-1]}" if len(items) > 2 else " or ".join(items)


def target_weights(d: Deployment, dtype: str, quant: Quantization | None,
                   mxfp4_pad: Mxfp4Pad = VLLM_MXFP4_PAD) -> WeightBreakdown:
    """The target's weights on rank 0, by component (exact checkpoint bytes, when known, scale the
    architecture's split; the rotary buffer is not in the checkpoint; `mxfp4_pad`: the engine's padding of mxfp4
    experts, vLLM's by default). The checkpoint's floating-point tensors count at the served `dtype`
    (ModelSpec.weight_bytes_served); where only its total is known (an index's total_size), it is taken as stored in
    the config's dtype and scaled against that architecture."""
    m = d.target
    w_target = weight_breakdown(m, d.tp, d.pp, dtype, quant, mxfp4_pad=mxfp4_pad, ep=d.ep)
    if m.weight_bytes_exact:
        served = m.weight_bytes_served(dtype)
        stored_dtype = dtype if served is not None or m.dtype not in DTYPE_BYTES else m.dtype
        # the checkpoint against its architecture as stored: mxfp4 experts unpadded (the engine pads them when it
        # allocates them, mxfp4_expert_dims), so the padded split below keeps the padding
        arch = weight_breakdown(m, 1, 1, stored_dtype, quant, rotary_cache=False, mxfp4_pad=(1, 1)).total
        ratio = (served if served is not None else m.weight_bytes_exact) / arch if arch else 1.0
        w_target = WeightBreakdown(
            embedding=int(w_target.embedding * ratio), lm_head=int(w_target.lm_head * ratio),
            attention=int(w_target.attention * ratio), mlp=int(w_target.mlp * ratio),
            norms_and_routers=int(w_target.norms_and_routers * ratio), buffers=w_target.buffers,
            params=w_target.params, vision=int(w_target.vision * ratio))
    return w_target


def draft_weight_bytes(d: Deployment, s: ResolvedSettings) -> int:
    """Bytes of the drafter on rank 0 (a drafter with its own TP 1 lives on rank 0 whole)."""
    sp = d.speculative
    kind = sp.kind
    if kind.derives_from_target:  # MTP: the layers the target's checkpoint carries beyond the model
        with_mtp = weight_breakdown(d.target, d.tp, 1, s.dtype, s.quantization, include_mtp=True, rotary_cache=False,
                                    mxfp4_pad=s.mxfp4_pad, ep=d.ep)
        without = weight_breakdown(d.target, d.tp, 1, s.dtype, s.quantization, include_mtp=False, rotary_cache=False,
                                   mxfp4_pad=s.mxfp4_pad, ep=d.ep)
        return with_mtp.total - without.total
    draft = sp.draft
    if draft is None or not kind.needs_draft_config:
        return 0
    if kind.own_tp:
        return weight_breakdown(draft, sp.draft_tp, 1, s.dtype if draft.quantization is None else draft.dtype,
                                mxfp4_pad=s.mxfp4_pad, ep=d.draft_ep).total
    # heads reuse the target's embedding (and, except EAGLE-3's reduced vocabulary, its lm_head), unless their
    # checkpoint ships an embedding of their own (`ModelSpec.own_embedding`, read from its weights); vLLM builds k
    # Medusa heads whatever the checkpoint declares (medusa_at_k), as the step costs price them
    if sp.method == SpecMethod.MEDUSA:
        draft = medusa_at_k(draft, sp.num_speculative_tokens)
    head = weight_breakdown(draft, d.tp, 1, s.dtype, None, share_embeddings=kind.shares_embeddings).total
    if draft.own_embedding and kind.shares_embeddings:
        head += padded_vocab(draft.vocab_size) // d.tp * draft.hidden_size * DTYPE_BYTES[s.dtype]
    return head


FUSED_MOE_CHUNK_TOKENS = 16 * 1024  # VLLM_FUSED_MOE_CHUNK_SIZE's default (vllm/envs.py): rows per fused-MoE call


def moe_workspace_bytes(m: ModelSpec, tokens: int, tp: int, act_bytes: int) -> int:
    """The fused-MoE kernel's two workspaces for one call over `tokens` tokens (vLLM V1's TritonExperts.
    workspace_shapes, vllm/model_executor/layers/fused_moe/fused_moe.py: (M, top_k, max(N / 2, K)) and
    (M, top_k, max(N, K)), N = 2 x expert intermediate per rank, K = hidden). The modular kernel keeps them once
    allocated, so they add to the sampler step's peak. Checked on vLLM 0.19.0 start-ups at 8192 tokens (torch
    peak = sampler step + these): Qwen3-30B-A3B 2.68 GiB (2.17 + 0.50), Mixtral-8x7B TP2 1.21 (0.53 + 0.66),
    DeepSeek-V2-Lite 1.93 (1.48 + 0.45), Qwen1.5-MoE-A2.7B 2.47 (2.17 + 0.30; llm-d-planner accuracy logs).
    mxfp4 experts (gpt-oss) run OpenAI's monolithic Triton kernel, whose buffers live inside the call
    ("MoEPrepareAndFinalizeNoDPEPMonolithic"; gpt-oss-20b TP2 2.87 GiB = the sampler step alone): none. Under
    expert parallelism `tp` is the MoE layers' own, 1 (moe_tp): every rank's experts are whole, and with one
    data-parallel rank each call still takes every token (the expert map masks the other ranks' experts)."""
    moe = m.moe
    if moe is None or not moe.moe_layers or (m.quantization is not None and m.quantization.method == "mxfp4"):
        return 0
    rows = min(tokens, FUSED_MOE_CHUNK_TOKENS) * moe.experts_per_token
    n, k = 2 * moe.expert_intermediate_size // tp, m.hidden_size
    return rows * (max(n // 2, k) + max(n, k)) * act_bytes


def moe_tp(d: Deployment) -> int:
    """The ranks the target's MoE layers split each expert's rows over: the TP degree, or 1 under expert
    parallelism (Deployment.ep), where every rank holds its experts whole."""
    return 1 if d.ep > 1 else d.tp


def _forward_activation(m: ModelSpec, tokens: int, tp: int, act_bytes: int, p: AccountingProfile,
                        dense_tp: int | None = None) -> float:
    """The profiling forward's activations; `tp` splits the experts' rows, `dense_tp` (default `tp`) the dense MLP's."""
    hidden = p.act_hidden_coef * tokens * m.hidden_size * act_bytes
    dense = p.act_intermediate_coef * tokens * (m.intermediate_size // (dense_tp or tp)) * act_bytes
    if p.act_phases and m.moe is not None and m.moe.moe_layers:
        # the experts' buffers are the kept workspaces (moe_workspace_bytes); dense MLP layers keep their term
        dense = dense if len(m.moe.moe_layers) < m.num_layers else 0.0
    elif m.moe is not None and m.moe.moe_layers:
        moe = m.moe
        moe_term = (p.act_moe_coef * tokens * moe.experts_per_token
                    * (3 * moe.expert_intermediate_size // tp + m.hidden_size) * act_bytes)
        dense = moe_term if len(moe.moe_layers) == m.num_layers else max(dense, moe_term)
    if m.eagle_fc_inputs:
        hidden += tokens * m.eagle_fc_inputs * m.hidden_size * act_bytes
    return hidden + dense


def activation_peak(d: Deployment, s: ResolvedSettings, p: AccountingProfile) -> tuple[int, dict, int]:
    """(bytes the profiling pass peaks at, its terms, bytes a real verification step adds beyond it)."""
    ab = DTYPE_BYTES[s.dtype]
    tokens = s.max_num_batched_tokens
    rows = min(s.max_num_seqs, tokens)
    target = _forward_activation(d.target, tokens, moe_tp(d), ab, p, d.tp)
    draft = 0.0
    sp = d.speculative
    if sp.draft is not None and sp.kind.has_gpu_drafter:
        draft_tp = sp.drafter_tp or d.tp
        draft = _forward_activation(sp.draft, tokens, draft_tp, ab, p)
    forward = max(target, draft)
    encoder_terms: dict = {}
    tower = held = 0
    if d.target.vision is not None:
        tower, held, encoder_terms = _encoder_phase(d.target.vision, d.target.hidden_size, s, d.tp, ab)
    vocab = d.target.vocab_size
    logits_row = vocab * 4
    sampler = p.act_vocab_coef * rows * logits_row
    if d.target.final_logit_softcapping:
        sampler += p.act_softcap_coef * rows * logits_row
    drafted = max(1, s.num_speculative_tokens) if p.spec_profile_k_aware else 1  # dummy draft tokens per sequence
    spec_sets = p.spec_profile_base_coef + p.spec_profile_vocab_coef * drafted  # fp32 row-sets, per sequence
    spec = spec_sets * rows * logits_row if sp.enabled else 0.0
    workspace = 0
    if p.act_phases:  # the language model's forward and its sampler step peak one after the other
        sampler += p.act_sampler_hidden_coef * tokens * d.target.hidden_size * ab
        workspace = moe_workspace_bytes(d.target, tokens, moe_tp(d), ab)
        if sp.draft is not None and sp.kind.has_gpu_drafter:
            draft_moe_tp = 1 if d.draft_ep > 1 else (sp.drafter_tp or d.tp)  # a draft model's experts as moe_tp
            workspace = max(workspace, moe_workspace_bytes(sp.draft, tokens, draft_moe_tp, ab))
        language = max(forward, sampler + spec) + workspace
    else:
        language = forward + sampler + spec
    # the tower's phase comes first and ends before the language model's; what it leaves (the cached embeddings,
    # the pixel values) stays held through the forward and the sampler (core.multimodal)
    peak = int(max(tower, language + held))
    # At run time a verification step scores k+1 positions per sequence (up to the token budget); the
    # profiling pass scored fewer rows. The difference is memory the engine did not reserve.
    runtime_rows = min(rows * (s.num_speculative_tokens + 1), tokens) if sp.enabled else rows
    profiled_rows = rows * ((1 + spec_sets / p.act_vocab_coef) if sp.enabled else 1)
    unprofiled = max(0, int((runtime_rows - profiled_rows) * p.act_vocab_coef * logits_row))
    # what a build whose pass drafts one token per sequence would leave out of this term (engines/vllm.py)
    beyond_one = p.spec_profile_vocab_coef * (drafted - 1) * rows * logits_row if sp.enabled else 0.0
    # what an install whose sampler sorts (a pip install without FlashInfer: AccountingProfile.sort_sampler_sets)
    # profiles beyond this peak
    sort_sampler = p.sort_sampler_sets * rows * logits_row
    terms = {"forward_target": int(target), "forward_draft": int(draft), "sampler": int(sampler),
             "speculation": int(spec), "speculation_beyond_one_draft": int(beyond_one),
             "sort_sampler_beyond": int(sort_sampler), "tokens": tokens,
             "sampler_rows": rows, "moe_workspace": int(workspace), **encoder_terms}
    return peak, terms, unprofiled


def _encoder_phase(v: VisionSpec, text_hidden: int, s: ResolvedSettings, tp: int, act_bytes: int
                   ) -> tuple[int, int, dict]:
    """(peak of the vision encoder's phase of the profiling pass, bytes it leaves held for the language model's
    forward and sampler, terms), as core.multimodal describes vLLM's profile_run: the tower's forward over the
    largest image batch with that batch's pixel values; then the encoder cache holding the batch's embeddings, and
    the pixel values, kept until the sampler has run."""
    enc = encoder_profile(v, s.max_num_batched_tokens, s.max_model_len, s.max_num_seqs)
    pixels = pixel_values_bytes(v, enc.patches, act_bytes)
    tower = tower_forward_peak(v, enc.patches, tp, act_bytes) + pixels
    cached = enc.cached_tokens * text_hidden * act_bytes
    terms = {"encoder_forward": int(tower), "encoder_cache": int(cached), "encoder_pixels": int(pixels),
             "encoder_budget_tokens": enc.budget_tokens, "encoder_images": enc.images}
    return tower, cached + pixels, terms


def non_torch_bytes(d: Deployment, p: AccountingProfile) -> int:
    extra = p.non_torch_tp_base_bytes + p.non_torch_tp_per_rank_bytes * d.tp if d.tp > 1 else 0
    return p.non_torch_bytes + extra


def cuda_graph_bytes(d: Deployment, s: ResolvedSettings, p: AccountingProfile, n_layers: int) -> int:
    if s.enforce_eager or d.engine.device == "cpu":
        return 0
    # the model code's own capture sizes where it sets them (as graph_limits), else the fitted default rule
    widest = model_capture_max(p, d.target, s.max_num_batched_tokens) or min(
        s.max_num_seqs * (s.num_speculative_tokens + 1), capture_ceiling(p, d.gpu, p.cuda_graph_max_capture))
    sizes = len([b for b in (1, 2, 4) if b <= widest]) + widest // 8
    return int(p.cuda_graph_bytes_per_layer * n_layers * sizes / p.cuda_graph_reference_sizes)


def kv_layers_for(d: Deployment, kv_dtype_bytes: int, s: ResolvedSettings | None = None,
                  p: AccountingProfile | None = None) -> tuple[KVLayer, ...]:
    latent = p is None or p.mla_latent_cache
    layers = model_kv_layers(d.target, d.tp, kv_dtype_bytes, "target", d.pp, mla_latent=latent)
    if d.target.is_hybrid:
        # the state is kept in the model's dtype (vLLM's mamba_cache_dtype "auto"), never in the KV cache's fp8;
        # the recurrent part in the dtype the model's config asks for (Nemotron-H, Qwen3.5: float32)
        dtype = s.dtype if s is not None else d.target.dtype
        k = s.num_speculative_tokens if s is not None else 0
        align = p is not None and p.state_cache_mode == "align"
        pages = 1 + k + (1 if align else 0)
        if align and p is not None and d.target.state_layers[0].kind == "mamba2":
            pages += p.mamba2_checkpoint_pages
        # vLLM's CPU platform resets the recurrent state to float32 on CPUs with AVX-512 BF16 (vllm/platforms/cpu.py
        # check_and_update_config: "if torch.cpu._is_avx512_bf16_supported() and mamba_ssm_cache_dtype != 'float32'");
        # elsewhere (AVX2 hosts) it keeps the model's dtype, as on a GPU
        ssm = 4 if d.engine.device == "cpu" and d.engine.cpu_isa == "avx512_bf16" else None
        layers += model_state_layers(d.target, d.tp, DTYPE_BYTES[dtype], ssm, "target", k, pages, d.pp)
    sp = d.speculative
    if not sp.kind.keeps_kv:
        return layers
    if sp.kind.derives_from_target:
        layers += model_kv_layers(d.target, d.tp, kv_dtype_bytes, "draft", layers=d.target.num_mtp_layers,
                                  mla_latent=latent)
    elif sp.draft is not None:
        layers += model_kv_layers(sp.draft, sp.drafter_tp or d.tp, kv_dtype_bytes, "draft", mla_latent=latent)
    return layers


def max_usage_blocks(kind: str, window: int | None, tokens: int, block_size: int, batched_tokens: int) -> int:
    """The blocks vLLM V1 charges one layer for a request of `tokens` tokens at most (vllm/v1/kv_cache_interface.py,
    max_memory_usage_bytes over the page size): a full layer every token; a sliding-window layer its window plus one
    chunk of prefill, plus a block (the window need not start at a block's start); a chunked-local layer one chunk
    plus one chunk of prefill. What its start-up check and its printed maximum concurrency count."""
    if kind == "sliding" and window:
        return ceil_div(min(window - 1 + batched_tokens, tokens), block_size) + 1
    if kind == "chunked" and window:
        return ceil_div(min(window + batched_tokens, tokens), block_size)
    return ceil_div(tokens, block_size)


def max_concurrency_at(layers: tuple[KVLayer, ...], kv_blocks: int, block_size: int, tokens: int,
                       batched_tokens: int, whole_requests: bool = False) -> float:
    """Requests of `tokens` the pool holds at once, as vLLM V1 reports it at start-up.

    Full-attention layers need every token; a sliding-window layer is charged its window plus one chunk
    of prefill (the engine's own worst case), plus one block.
    """
    groups = layer_groups(layers)
    per_request_layer_blocks = 0
    windowed = False
    for kind, window, count, _ in groups:
        windowed = windowed or (kind in ("sliding", "chunked") and bool(window))
        per_request_layer_blocks += count * max_usage_blocks(kind, window, tokens, block_size, batched_tokens)
    if per_request_layer_blocks == 0:
        return float("inf")
    if not windowed and not whole_requests:
        return kv_blocks * block_size / tokens
    return kv_blocks * len(layers) / per_request_layer_blocks


def _check_tp(d: Deployment) -> None:
    if d.target.num_attention_heads % d.tp:
        raise SpecError("tp", f"{d.tp} does not divide the target's {d.target.num_attention_heads} attention heads",
                        "a divisor of num_attention_heads")
    for state in d.target.state_layers[:1]:  # vLLM divides the state's heads (or channels) over the TP ranks
        split = state.heads or state.intermediate
        if split % d.tp:
            raise SpecError("tp", f"{d.tp} does not divide the {split} heads of the target's {state.kind} layers",
                            f"a divisor of {split}")


def _hybrid_setup(d: Deployment, s: ResolvedSettings, p: AccountingProfile, layers: tuple[KVLayer, ...]
                  ) -> tuple[ResolvedSettings, HybridPool | None]:
    """A hybrid model's settings with the block size vLLM raises its attention to (one layer's page holds one
    layer's state), and its pool; (s, None) for other models."""
    if not d.target.is_hybrid:
        return s, None
    attention = [layer.bytes_per_token for layer in layers if layer.kind != "state"]
    state_page = max(layer.state_bytes for layer in layers if layer.kind == "state")
    kernel = s.block_size if d.engine.device == "cpu" else p.hybrid_kernel_block
    s = replace(s, block_size=hybrid_block_size(attention[0] if attention else 0, state_page, s.block_size, kernel))
    return s, hybrid_pool(layers, s.block_size)


def _hybrid_capacity(pool: HybridPool, blocks: int, s: ResolvedSettings, whole: bool) -> tuple[float, int]:
    """(max concurrency, printed tokens) as vLLM reports a hybrid pool: num_blocks over the blocks one
    max_model_len request holds in every group (attention and state); the tokens: older releases divide the blocks
    evenly over the groups (blocks // groups x block_size, which under-states a hybrid pool), newer ones print
    concurrency x max_model_len."""
    concurrency = blocks / pool.request_blocks(s.max_model_len)
    return concurrency, int(concurrency * s.max_model_len) if whole else blocks // pool.groups * s.block_size


def _hybrid_problem(d: Deployment, s: ResolvedSettings, p: AccountingProfile, pool: HybridPool, kv_bytes: int,
                    blocks: int) -> tuple[str | None, bool]:
    """The hybrid pool's startup problem, and whether it stops the engine before any pool runs
    (MemoryAccount.start_refused)."""
    per_block = pool.block_bytes
    if p.refuses_start_below_max_model_len and \
            pool.request_blocks(s.max_model_len) * per_block > kv_bytes - (per_block if p.null_block_in_startup_check
                                                                           else 0):
        return (f"the engine refuses to start: one request of max_model_len={s.max_model_len} tokens (its KV and "
                f"its recurrent state) needs more of the pool than the {blocks} blocks available"), False
    if p.refuses_max_num_seqs_above_blocks and not s.enforce_eager and d.engine.device != "cpu" and \
            s.max_num_seqs > blocks:
        # vllm/config/compilation.py: with full decode CUDA graphs each decode sequence needs one state block
        # (vllm-project/vllm issue 34094); the ValueError comes before any request runs
        return (f"the engine refuses to start: max_num_seqs ({s.max_num_seqs}) exceeds the hybrid pool's "
                f"{blocks} blocks (each decoding sequence needs a state block for CUDA graph capture); lower "
                f"max_num_seqs to at most {blocks} or raise gpu_memory_utilization"), True
    return None, False


def on_model_runner_v2(d: Deployment, p: AccountingProfile) -> bool:
    """Whether the release runs `d` on vLLM's Model Runner V2 (AccountingProfile.model_runner_v2: dense targets
    from 0.25, vllm PR 44443; every target from 0.29), unless its speculative method keeps it on the V1 runner."""
    if not p.model_runner_v2 or (p.model_runner_v2 == "dense" and (d.target.is_moe or d.target.is_hybrid)):
        return False
    method = d.speculative.method if d.speculative.enabled else None
    if method is not None and str(method) in p.mrv2_v1_methods:
        return False
    return not (method == SpecMethod.EAGLE3 and d.pp > 1 and p.mrv2_eagle3_pp_on_v1)


def graphs_reserved(d: Deployment, p: AccountingProfile) -> bool:
    """Whether the engine takes its CUDA graph estimate out of the KV budget for deployment `d`: not on 0.25 - 0.27's
    Model Runner V2, which estimated none (AccountingProfile.mrv2_dense_reserves_no_graphs)."""
    return p.cuda_graph_subtracted and not (p.mrv2_dense_reserves_no_graphs and on_model_runner_v2(d, p))


def account(d: Deployment, p: AccountingProfile) -> MemoryAccount:
    """The memory account of rank 0 of one engine instance of deployment `d` (with the deployment's
    quantization override applied: `specs.effective_target`)."""
    _check_tp(d)
    if p.accountant is not None:
        return p.accountant(d, p)
    target, quant = effective_target(d)
    if target is not d.target:
        d = replace(d, target=target)
    s = resolve_settings(d, p, quant)
    total = d.gpu.memory_bytes
    budget = int(total * s.gpu_memory_utilization)
    w_target = target_weights(d, s.dtype, quant, s.mxfp4_pad)
    topk = indexer_dims(d.target)[2]
    if topk:  # DeepSeek-V3.2: the model's topk_indices_buffer, max_num_batched_tokens x index_topk int32 on every rank
        w_target = replace(w_target, buffers=w_target.buffers + s.max_num_batched_tokens * topk * 4)
    w_target = replace(w_target, buffers=w_target.buffers  # Qwen3-VL's deepstack buffers, allocated with the model
                       + deepstack_buffer_bytes(d.target, s.max_num_batched_tokens, DTYPE_BYTES[s.dtype]))
    w_draft = draft_weight_bytes(d, s)
    if d.speculative.draft is not None and not d.speculative.kind.derives_from_target:
        # a Qwen3-VL draft model builds its tower and deepstack buffers too (vLLM 0.32 config/speculative.py: the
        # draft's ModelConfig keeps its multimodal config)
        w_draft += deepstack_buffer_bytes(d.speculative.draft, s.max_num_batched_tokens, DTYPE_BYTES[s.dtype])
    if topk and d.speculative.kind.derives_from_target:
        # each MTP layer of a sparse-attention model (DeepSeek-V3.2, GLM-5) allocates a topk_indices_buffer of its own
        # (vllm/model_executor/models/deepseek_mtp.py DeepSeekMultiTokenPredictorLayer, "if self.is_v32:", read in the
        # 0.11.0, 0.13.0 and 0.32 sources)
        w_draft += d.target.num_mtp_layers * s.max_num_batched_tokens * topk * 4
    act, act_terms, unprofiled = activation_peak(d, s, p)
    non_torch = non_torch_bytes(d, p) + (d.shared_reserved_bytes if p.other_processes_in_non_torch else 0)
    layers = kv_layers_for(d, s.kv_dtype_bytes, s, p)
    s, pool = _hybrid_setup(d, s, p, layers)
    graphs = cuda_graph_bytes(d, s, p, len(layers))
    reserved = graphs_reserved(d, p)
    if d.engine.kv_cache_memory_bytes is not None:
        kv_bytes = d.engine.kv_cache_memory_bytes
    else:
        kv_bytes = budget - w_target.total - w_draft - act - non_torch - (graphs if reserved else 0)
    # a pool of several attention kinds allocates padded layer slots: the pool's blocks and each request's demand count
    # them (pool_layer_slots: the layers where nothing is padded)
    slots = pool_layer_slots(layers) if pool is None and p.kv_groups_by_kind else layers
    padded = len(slots) != len(layers)
    per_token = bytes_per_token(slots)
    per_block = pool.block_bytes if pool is not None else s.block_size * per_token
    blocks = max(0, kv_bytes // per_block) if per_block else 0
    whole = p.token_report == "requests"
    if pool is not None:
        concurrency, tokens = _hybrid_capacity(pool, blocks, s, whole)
    else:
        concurrency = max_concurrency_at(slots, blocks, s.block_size, s.max_model_len, s.max_num_batched_tokens,
                                         whole)
        # what the engine prints as its token capacity: blocks x block size, or (newer releases) whole requests
        # of max_model_len tokens, which differs when max_model_len is not a multiple of the block size
        tokens = int(concurrency * s.max_model_len) if whole else blocks * s.block_size
    problem, refused = None, False
    free_at_start = total - d.shared_reserved_bytes
    if d.shared_reserved_bytes and budget > free_at_start and not p.other_processes_in_non_torch:
        most = int(free_at_start / total * 100) / 100
        problem = (f"the engine refuses to start: another workload holds {d.shared_reserved_bytes / GiB:.2f} GiB, "
                   f"leaving {free_at_start / GiB:.2f} GiB free for a budget of {budget / GiB:.2f} GiB "
                   f"(gpu_memory_utilization at most {most:.2f})")
    elif kv_bytes <= 0:
        problem = (f"no memory is left for the KV cache: the budget of {budget / GiB:.2f} GiB is spent "
                   f"before the cache ({-kv_bytes / GiB:.2f} GiB short)")
    elif d.engine.kv_cache_memory_bytes is not None and \
            kv_bytes > (room := free_at_start - w_target.total - w_draft - act - non_torch - graphs):
        # vLLM's --kv-cache-memory-bytes bypasses the budget: a pool larger than the card has left cannot be
        # allocated, whatever gpu_memory_utilization says
        problem = (f"the engine runs out of memory at start-up: kv_cache_memory_bytes asks for "
                   f"{kv_bytes / GiB:.2f} GiB of KV cache but only {max(0, room) / GiB:.2f} GiB of the card are left "
                   f"after weights, activations, non-torch memory and CUDA graphs")
    elif pool is not None:
        problem, refused = _hybrid_problem(d, s, p, pool, kv_bytes, blocks)
    elif p.refuses_start_below_max_model_len:
        # V1 charges each layer its most (check_enough_kv_cache_memory); V0 as before: each layer's blocks at
        # max_model_len, a window's capped
        one_request = sum(count * (max_usage_blocks(kind, window, s.max_model_len, s.block_size,
                                                    s.max_num_batched_tokens) if p.generation != "V0" else
                                   layer_blocks(KVLayer("x", kind, window, 0), s.max_model_len, s.block_size))
                          for kind, window, count, _ in layer_groups(layers))
        # newer releases check against the usable blocks: the null block is held back first
        checked = kv_bytes - (per_block if p.null_block_in_startup_check else 0)
        if one_request * s.block_size * bytes_per_token(layers) > checked * len(layers):  # the layers, unpadded
            problem = (f"the engine refuses to start: one request of max_model_len={s.max_model_len} tokens "
                       f"needs more KV cache than the {tokens} tokens available")
    return MemoryAccount(
        settings=s, total_bytes=total, budget_bytes=budget, weights_target=w_target, weights_draft_bytes=w_draft,
        activation_peak_bytes=act, activation_terms=act_terms, non_torch_bytes=non_torch,
        cuda_graph_bytes=graphs, cuda_graph_counted=reserved, kv_cache_bytes=kv_bytes,
        kv_layers=layers, pool_slots=slots if padded else (), kv_blocks=blocks, kv_cache_tokens=tokens, max_concurrency=concurrency,
        unprofiled_runtime_bytes=unprofiled, startup_problem=problem, start_refused=refused,
        null_blocks=p.null_blocks, block_bytes=pool.block_bytes if pool is not None else (per_block if padded else 0),
        state_bytes_per_sequence=pool.state_bytes if pool is not None else 0,
        state_blocks_per_sequence=pool.state_blocks if pool is not None else 0,
        kv_cache_groups=pool.groups if pool is not None else 1,
    )


def unstarted(d: Deployment, mem: MemoryAccount) -> str | None:
    """Why a deployment's engine serves no request - its KV cache empty, or its pool never built (pool_never_built) -
    or None where it runs: the one rule simulate, speedup and a sweep's cells refuse or leave unpriced by."""
    if mem.kv_blocks <= 0:
        return "the KV cache is empty"
    if pool_never_built(d, mem):
        return f"the engine does not start ({(mem.startup_problem or '').rstrip('.')})"
    return None


def pool_never_built(d: Deployment, mem: MemoryAccount) -> bool:
    """Whether the engine refuses to start for want of memory (core.memory's startup_problem, with its memory and any
    other workload's past the card: vLLM's --kv-cache-memory-bytes beyond what is left, SGLang's fraction running
    out, another workload holding the budget), so that no pool exists to simulate. vLLM's refusal of a max_model_len
    one request cannot hold leaves the pool in memory: it is simulated, its too-long requests named as never run; its
    state-block check for a hybrid model's CUDA graphs does not (MemoryAccount.start_refused)."""
    return bool(mem.startup_problem) and (mem.start_refused or mem.free_bytes < d.shared_reserved_bytes)
