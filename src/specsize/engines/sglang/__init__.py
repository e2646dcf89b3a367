"""SGLang's accounting profiles, one per range of releases (see accounting.py for what each rule is read from).

- 0.4 - 0.5.3: default mem_fraction_static by TP size (0.88 at TP 1 ... 0.79 at TP 16); the draft's weights
  and KV pool are allocated after the target's pool, out of the (1 - f) share.
- 0.5.4 - 0.5.13: the default fraction from GPU memory, chunked prefill and CUDA graph size (PR #10975),
  with 2 GiB (6 GiB STANDALONE) reserved for a draft, 4 GiB from 0.5.10 (and room for the piecewise graphs once they
  are on: 8 MiB a captured prompt size, 1.5 GiB for MLA); the draft still comes after the target's pool. From 0.5.10
  prompt steps run in piecewise CUDA graphs (PR #16331; the 0.5.9 wheel still has enable_piecewise_cuda_graph
  False, the 0.5.10 wheel disable_piecewise_cuda_graph False); before, only decode batches are graphed. In
  0.5.10 - 0.5.12 not where the flashinfer_trtllm MoE runner runs, the default for DeepSeek-V3 and Qwen3 MoE
  targets on datacenter Blackwell; 0.5.13 graphs those too. 0.5.10 not with speculative decoding either; no release
  for a multimodal target (Gemma 3 and Llama 4 are served as text models by default and keep them).
- 0.5.14 and later: draft weights loaded and the draft's KV budgeted before the pool is sized (#23862,
  #28855); no flat draft reservation; max_running_requests at most half the pool's tokens, asked for or not. 0.5.15
  on: also beside a hybrid SWA target (0.5.14 sizes that draft's pool after the target's). Which release first
  carried #28855 (merged 2026-06-21; 0.5.13 was out by 2026-06-22) is inferred, not read from a changelog.
- Hybrid SWA pools (a full-attention pool and a smaller windowed one): Gemma 2 and 3 in 0.4.10 - 0.4.10.post2, gpt-oss
  and Llama 4 from 0.5.8 (accounting.hybrid_swa); the running-request limit capped by the request pool's estimate in
  0.5.10 - 0.5.13 (accounting.running_requests).

The activation and CUDA graph estimates (what must fit in the (1 - f) share, not the pool) reuse vLLM V1's
fitted coefficients; SGLang prints no profiling pass to fit them on.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from ...core.memory import GRAPH_ALL, MLA_ABSORBED, AccountingProfile
from ...core.units import GiB
from .. import vllm
from .accounting import Rules, account

_SOURCES = (
    "sgl-project/sglang python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py @ 001ccef0 "
    "(profile_max_num_token, init_memory)",
    "sgl-project/sglang python/sglang/srt/model_executor/pool_configurator.py @ 003fca80 (draft cell scaling, "
    "PR #23862)",
    "sgl-project/sglang python/sglang/srt/server_args.py (_handle_gpu_memory_settings, PR #10975; the TP table "
    "before it; max_running_requests 48 with EAGLE-family speculation)",
    "context before loading: 0.60 GiB at TP 1 (H200, 'Load weight end ... avail mem=131.08 GB, mem usage=8.13 "
    "GB', sgl-project/sglang#4826); at TP 8 on NVLink the mean of 2.47 GiB (H200, 'Load weight begin. avail "
    "mem=137.34 GB', sgl-project/sglang#11716) and 1.91 GiB (H200, 'avail mem=12.25 GB, mem usage=125.65 GB', "
    "SemiAnalysisAI/InferenceX#2128); 0.96 GiB at TP 4 on PCIe (RTX PRO 6000, 'Load weight begin. avail "
    "mem=94.01 GB', sgl-project/sglang#40558)",
    "activation and CUDA graph coefficients: vLLM V1's (engines/vllm.py), for the (1 - f) share only",
)

_BASE = replace(vllm.V1_LATEST, engine="sglang", generation="SGLang",
                # vLLM's ROCm custom all-reduce is vLLM's: SGLang 0.4 - 0.4.3.post2 all-reduce through RCCL on AMD
                # (distributed/device_communicators/custom_all_reduce.py: custom_ar = False "For AMD GPUs and CPUs");
                # later releases' own kernel on AMD is not sourced here, so RCCL's latency stays
                custom_allreduce=False, model_runner_v2="", mrv2_v1_methods=(),
                # vLLM's default --gpu-memory-utilization is vLLM's: SGLang derives mem_fraction_static
                # (engines/sglang/accounting.py default_fraction)
                default_gpu_memory_utilization=AccountingProfile.default_gpu_memory_utilization,
                huge_gpu_bytes=0,  # vLLM 0.28's 160 GiB tier: SGLang sizes its chunks by GPU memory its own way
                graph_max_tokens_cc10=0,  # and vLLM 0.28's capture ceiling on B200 / B300: SGLang's own bs rule
                # vLLM's CPU backend defaults (engines/vllm.py CPU_MAX_NUM_SEQS_PER_RANK_010) are vLLM's: SGLang on a
                # CPU keeps its own chunk size and running-request limit (accounting.py)
                cpu_default_max_num_seqs=0, cpu_default_max_num_batched_tokens=0, cpu_defaults_per_rank=False,
                # and how vLLM caps one default by the other (AccountingProfile.default_seqs_within_batched)
                default_seqs_within_batched=False, default_batched_within_seqs_len=False,
                # vLLM V1's n-gram history scan (engines/vllm.py V1_NGRAM_SCAN_PER_TOKEN_S): SGLang keeps its n-gram
                # cache incrementally and pays none (docs/efficiency-history.md, stop 45); derived from vLLM's newest
                # profile, its profiles had carried 1.06 ns a token of context
                ngram_scan_per_token_s=0.0,
                # vLLM's MLA module's fixed time is vLLM's (engines/vllm.py VLLM_MLA_LAYER_FIXED_S): SGLang's DeepSeek
                # decodes within 5% of the model without it
                mla_layer_fixed_s_by_gpu=(),
                # vLLM's two-level fp8 attention is its FlashAttention fork's (vllm-project/flash-attention PR 104):
                # SGLang's fp8 attention keeps the fp8 peak
                fp8_attention_16bit_families=(),
                # vLLM's refusal of fp8_e5m2 beside KV-scale-loading weights is vLLM's (AccountingProfile)
                e5m2_fp8_weights="",
                # MLA prompts as multi-head attention only without a prefix (triton's rule; by GPU: _profile's mla)
                mla_prompt_mha=(True, MLA_ABSORBED),
                # a step is a prefill batch or the decode batch, prefill first: sgl-project/sglang python/sglang/srt/
                # managers/scheduler.py get_next_batch_to_run ("# Run prefill first if possible"; mixed steps only
                # with --enable-mixed-chunk, off by default)
                prefill_first=True, default_block_size=1, mla_block_size=1,
                # EAGLE worker (spec v1): draft, verify and draft extend each behind a host sync (.item() / .cpu()
                # in python/sglang/srt/speculative/eagle_worker.py), every TP rank in lockstep
                spec_host_handover=True,
                # the draft extend after verification (AccountingProfile.draft_extend): from 0.4.10 a CUDA graph of
                # speculative_num_steps + 1 tokens a request (speculative/eagle_draft_extend_cuda_graph_runner.py; spec
                # v2's _draft_extend_for_decode fills num_draft_tokens); before, eager over accept_length + 1
                # (eagle_utils.py prepare_extend_after_decode: _legacy's "accepted"); a STANDALONE draft model as EAGLE
                draft_extend="verified", draft_model_extend="",
                # its API server's costs: the catalog's (fitted with SGLang 0.4-0.5 servers among the rows), not
                # vLLM 0.17+'s lighter front end
                api_cost_scale=1.0, stream_interval_flag=True, recv_interval_flag=True, graph_bs_flag=True,
                # --page-size takes any size, and its token budget (chunked prefill) no floor of vLLM's
                block_sizes=(), token_budget_rules=False,
                # its n-gram worker pads the trie's candidates and verifies them every step (speculative/
                # ngram_worker.py, "here we always enforce it"): every step carries a proposal
                ngram_proposal_rate=1.0,
                # its overlap scheduler (on by default from 0.4.0; off with speculation, server_args.py
                # "disable_overlap_schedule = True" for EAGLE / STANDALONE / NGRAM) forms a batch while the last runs
                # (AccountingProfile.scheduled_ahead); its host work beside the forward is inside the terms fitted on
                # SGLang runs: no async scheduling on top (AccountingProfile.async_scheduling)
                async_scheduling=False, scheduled_ahead=True, async_drafters=(),
                # a request is admitted only when its prompt and min(max_new_tokens, 4096) fit beside what the running
                # ones still need, their outputs times new_token_ratio (managers/schedule_policy.py PrefillAdder;
                # simulator.engine.EngineConfig.admission)
                admission="sglang",
                # its mxfp4 experts (layers/quantization/mxfp4.py Mxfp4MoEMethod.create_weights, read in the 0.5.3
                # wheel): the intermediate to a multiple of 32 (triton_kernels; gpt-oss's 2,880 is one) and the hidden
                # size as it is, both to 256 for FlashInfer's kernels on compute capability 10, its gpt-oss default there
                mxfp4_pad=(1, 32), mxfp4_pad_by_gpu=(("cc10", (256, 256)),),
                # its fused-MoE kernels for fp8 block-quantised experts (DeepGEMM / its tuned Triton configs on Hopper,
                # its Blackwell and AITER paths) stream at 0.45 of HBM, not the 0.538 (Hopper) / 0.374 (Blackwell) of
                # vLLM 0.24's kernels in the kernel tables (0.35 / 0.125 before stop 59 took the collector's launch
                # time out of their block-fp8 GEMMs): fitted on InferenceX's DeepSeek-R1-0528 FP8 SGLang runs
                # (bench/data/serving_runs_ix.jsonl, fit slice, H200 TP 8 at 4-64 clients). With uniform routing
                # bench/fit_serving.py hopper.moe_fp8_memory 0.35 / 0.5 / 0.6 / 0.75 scored 1.172 / 0.857 / 0.690 /
                # 0.836 (TPOT |err| 39% / 18% / 7% / 11%); refitted once the experts' routing skew was modelled
                # (Efficiency.moe_routing_skew 0.95: fewer distinct experts read per step), SGL.moe_fp8_memory
                # 0.7 / 0.6 / 0.5 / 0.45 with match='SGLang 0\.5.*H200.*concurrency.*DeepSeek': 1.014 / 0.862 / 0.650 /
                # 0.578 (TPOT |err| 19.7% / 13.9% / 6.9% / 5.9%); 0.4 scored worse over every SGLang DeepSeek fit run
                moe_fp8_memory=0.45,
                # an MoE layer behind ordinary attention (Qwen3 MoE, gpt-oss, Mixtral) launches 0.25 ms of kernels
                # outside a CUDA graph, not the 1 ms measured on SGLang 0.3's DeepSeek-V2 layers (MLA + MoE:
                # Efficiency.eager_moe_layer_s, kept for them): SGLang 0.5.6's Qwen3-235B-A22B on 8 x B200 reaches its
                # first token in 65 ms for a 610-token prompt at one client (its cookbook, bench/data/
                # serving_runs_modern.jsonl), its prompt step outside a graph: no more than about 40 ms for 94 MoE
                # layers, 0.43 ms each, whatever else the step holds; bench/accuracy_serving.py on the fit runs, sum of
                # the median |log(predicted / measured)| of throughput, TTFT and TPOT, at 1 / 0.6 / 0.4 / 0.25 / 0.1 ms:
                # 0.681 / 0.677 / 0.675 / 0.668 / 0.677 (docs/efficiency-history.md "stop 38")
                eager_gqa_moe_layer_s=2.5e-4,
                # its fused-MoE layer on a datacenter Blackwell takes 35 us of fixed time a step, not the 16 us of
                # vLLM 0.24's kernels in the kernel tables (Efficiency.moe_layer_fixed_s, kept for vLLM): fitted on its
                # B200 runs (SGLang's cookbook Qwen3-235B-A22B BF16 and DeepSeek-R1-0528 FP8 at TP 8, InferenceX's
                # DeepSeek-R1 on 0.5.12: at one client their TPOT was 11-31% low at 16 us). bench/accuracy_serving.py on the
                # fit runs, sum of the median |log(predicted / measured)| of throughput, TTFT and TPOT, at 16 / 25 / 35
                # / 50 us: 0.668 / 0.662 / 0.653 / 0.655; one lead for the engine's own cost, read in the 0.5.4 wheel:
                # its Triton fused-MoE ships tuned tile configs for Qwen3-235B's TP-8 expert shard (fused_moe_triton/
                # configs, E=128,N=192) for the H100, H200, H20 and A800 and none for the B200, which then runs the
                # default tiles. Not for MXFP4 experts, which it runs with FlashInfer's own fused runner on compute
                # capability 10 (server_args.py: flashinfer_mxfp4 for gpt-oss; its gpt-oss-120b on 8 x B200, already
                # predicted slow, TPOT +46% at one client). Not on Hopper: its H200 DeepSeek-R1 runs at 4-64 clients
                # (InferenceX, 0.5.12) go from -1..+16% to +11..+20% TPOT at 35 us (docs/efficiency-history.md
                # "stop 39")
                moe_layer_fixed_s_by_gpu=(("cc10", 3.5e-5),),
                cpu_block_size=1, null_blocks=0, null_block_in_startup_check=False, token_report="blocks",
                cuda_graph_subtracted=False, refuses_start_below_max_model_len=False,
                # CUDA graphs capture decode batches (cuda_graph_runner.py); prefill (extend) batches run eager until
                # the piecewise graphs became the default (_PIECEWISE below). Decode batches above --cuda-graph-max-bs
                # also run eager: the accountant sets that limit once it has the default (accounting.py)
                graph_max_tokens=GRAPH_ALL, graph_prompts="eager",
                non_torch_bytes=int(0.60 * GiB), sources=_SOURCES)


# How a prompt step of an MLA model runs its attention (AccountingProfile.mla_prompt_mha: (with no cached prefix,
# from this many prefix tokens in the step on) as multi-head attention over decompressed keys and values, absorbed over
# the latent otherwise): models/deepseek_v2.py's dispatch (no_absorb up to 0.4.5, dispatch_attn_forward_method, then
# _handle_attention_backend and the handle_attention_<backend> functions from 0.5.3) for the backend model_runner.py
# picks when none is given, read in the PyPI wheels 0.4.1-0.5.4:
# - triton (every GPU up to 0.4.5; off Hopper after, Ampere and Ada throughout) and flashinfer's ragged prefill (datacenter
#   Blackwell from 0.4.10): multi-head only for a batch with no prefix (sum(extend_prefix_lens) == 0);
# - fa3, the default on Hopper from 0.4.5.post1: 0.4.5.post1-0.4.5.post3 only from a prefix of
#   chunked_prefix_cache_threshold (8,192; SGL_CHUNKED_PREFIX_CACHE_THRESHOLD) on (MHA_CHUNKED_KV), absorbed without
#   one; from 0.4.6 with no prefix too;
# - flashinfer on Blackwell from 0.5.3 as fa3; trtllm_mla, the DeepseekV3 default on compute capability 10 from 0.5.4
#   (server_args.py _handle_model_specific_adjustments): multi-head for every prompt step (handle_attention_trtllm_mla);
# - aiter, AMD's MLA default in 0.5.3-0.5.4 (read from 0.4.10, taken from 0.5.3): every prompt step. It takes 16 or
#   128 heads per GPU (DeepSeek at TP 8 or 1); at TP 2 or 4 SGLang falls back to triton, which keeps a prompt with a
#   prefix absorbed: not modelled, every TP gets aiter's rule.
# Releases after 0.5.4 keep 0.5.4's rules (no wheel read). The threshold holds for a prompt longer than the chunked-
# prefill size: its later chunks run absorbed under 8,192 tokens of prefix
_MLA_FA3_0451 = (False, 8192)
_MLA_CHUNKED = (True, 8192)
_MLA_EVERY = (True, 0)
MLA_0451 = (("hopper", _MLA_FA3_0451),)
MLA_046 = (("hopper", _MLA_CHUNKED),)
MLA_053 = (("hopper", _MLA_CHUNKED), ("blackwell", _MLA_CHUNKED), ("cdna3", _MLA_EVERY), ("cdna4", _MLA_EVERY))
MLA_054 = (("cc10", _MLA_EVERY),) + MLA_053


def _profile(version: str, label: str, rules: Rules, graph_prompts: str = "eager",
             piecewise_off_sm100: tuple[tuple[str, tuple[str, ...]], ...] = (),
             piecewise_off_speculative: bool = False, spec_v2: str = "",
             mla: tuple[tuple[str, tuple[bool, int]], ...] = MLA_054) -> AccountingProfile:
    # kv_cache_dtype auto takes a ModelOpt checkpoint's kv_cache_quant_algo FP8 from 0.5.3 (model_runner.py: "if
    # self.server_args.kv_cache_dtype == 'auto'" reads quant_config.kv_cache_quant_algo; absent in the 0.5.2 wheel)
    profile = replace(_BASE, version=version, label=label, graph_prompts=graph_prompts, spec_v2=spec_v2,
                      checkpoint_kv_dtype=True,
                      piecewise_excluded_model_types=_PIECEWISE_EXCLUDED, piecewise_off_sm100=piecewise_off_sm100,
                      text_only_multimodal_types=_TEXT_ONLY_MULTIMODAL,
                      piecewise_off_speculative=piecewise_off_speculative, mla_prompt_mha_by_gpu=mla)
    return replace(profile, accountant=partial(account, rules=rules))


# Piecewise CUDA graphs for prefill (extend) batches by default: sgl-project/sglang PR 16331 ("Piecewise Cuda Graph
# set default", merged 2026-03-02; --disable-piecewise-cuda-graph turns them off), capturing prompt steps up to the
# chunked-prefill size, 2048 tokens for MLA models (core.memory.graph_limits). 0.5.10 is its first release: the
# 0.5.9 wheel on PyPI (2026-02-23) has enable_piecewise_cuda_graph False, the 0.5.10 wheel (2026-04-05)
# disable_piecewise_cuda_graph False.
_PIECEWISE = "piecewise"
# Where they stay off (python/sglang/srt/server_args.py _handle_piecewise_cuda_graph, "Disable piecewise cuda graph
# with following conditions"): non-CUDA hardware (HIP: AMD's GPUs; AccountingProfile.piecewise_vendors' default) and
# the model architectures of python/sglang/srt/configs/model_config.py piecewise_cuda_graph_disabled_model_archs
# (DeepseekV32ForCausalLM, Qwen3NextForCausalLM, GlmMoeDsaForCausalLM, BailingMoeV2_5ForCausalLM, LLaDAModelLM), by
# their model_type
_PIECEWISE_EXCLUDED = ("deepseek_v32", "qwen3_next", "glm_moe_dsa", "bailing_moe_v2_5", "llada")
# 0.5.10-0.5.12 also turn them off whenever the MoE runner is flashinfer_trtllm, gpt-oss excepted
# (server_args.py _handle_moe_kernel_config: "Piecewise cuda graph is disabled for MoE runner backend
# 'flashinfer_trtllm' (bypassed topk is incompatible with torch.compile)"; the rule is gone in 0.5.13), and
# _handle_model_specific_adjustments picks that runner by default on compute capability 10 (is_sm100_supported) for
# these architectures and weight quantizations (SGLang's fp8 / modelopt_fp8 -> fp8, modelopt_fp4 -> nvfp4, none ->
# none): DeepseekV3ForCausalLM (DeepSeek-V3 / R1, Kimi K2) with fp8, modelopt_fp4 or none (0.5.11 keeps a bf16
# checkpoint of that architecture off the runner; 0.5.12's rule is taken); the Qwen3 MoE family (Qwen3MoeForCausalLM,
# Qwen3VLMoeForConditionalGeneration, Qwen3_5MoeForConditionalGeneration, Qwen3_5ForConditionalGeneration;
# Qwen3-Next is excluded above) with fp8, modelopt_fp4 or none; Llama 4 with fp8 or modelopt_fp8; Glm4MoeForCausalLM
# with modelopt_fp4. Read in the 0.5.10, 0.5.11, 0.5.12 and 0.5.13 wheels on PyPI (sglang/srt/server_args.py)
_QWEN3_MOE_SM100 = ("none", "fp8", "nvfp4")
_FLASHINFER_TRTLLM_SM100 = (
    (("deepseek_v3", ("none", "fp8", "nvfp4")), ("kimi_k2", ("none", "fp8", "nvfp4")), ("glm4_moe", ("nvfp4",)))
    # a multimodal target's language model is read by its text config's model_type (catalog.configs)
    + tuple((model_type, ("fp8",)) for model_type in ("llama4", "llama4_text"))
    + tuple((model_type, _QWEN3_MOE_SM100) for model_type in (
        "qwen3_moe", "qwen3_vl_moe", "qwen3_vl_moe_text", "qwen3_5_moe", "qwen3_5_moe_text",
        # Qwen3_5ForConditionalGeneration is in the list too: the runner is set, so the graphs go, MoE or not
        "qwen3_5", "qwen3_5_text")))
# Every release with piecewise graphs keeps them off for a multimodal target (_handle_piecewise_cuda_graph,
# "Multimodal / VLM models": model_config.is_multimodal), save Gemma3ForConditionalGeneration and
# Llama4ForConditionalGeneration, which it serves as text models unless --enable-multimodal is given
# (configs/model_config.py mm_disabled_models); their language models' model types, as the catalog reads them. 0.5.10
# also keeps them off with any speculative algorithm (its rule 2; gone in 0.5.11, PR 22128). Read in the 0.5.10 -
# 0.5.13 wheels.
_TEXT_ONLY_MULTIMODAL = ("gemma3", "gemma3_text", "llama4", "llama4_text")
_HEURISTIC = Rules(defaults="heuristic", spec_reserve_mib=2048, draft_in_sizing=False, spec_max_running_requests=48,
                   trtllm_mla_sm100=True)
# 0.5.3-0.5.6: the draft's pool headroom (Rules); 0.5.3-0.5.4: decode graphs to 16 (not 24) at TP 1-3 on cards of
# 20-35 GiB (server_args.py _handle_gpu_memory_settings "self.cuda_graph_max_bs = 16", read in the 0.5.3 and 0.5.4
# wheels; 24 in 0.5.5's and every later one read)
_HEURISTIC_0505 = replace(_HEURISTIC, draft_headroom="shared")
_HEURISTIC_0503 = replace(_HEURISTIC_0505, small_card_graph_bs=16)
# 0.5.7: trtllm_mha, pages of 64, for an MHA model on compute capability 10 (accounting.sm100_attention)
_HEURISTIC_0507 = replace(_HEURISTIC, trtllm_mha_sm100=True)
# the hybrid SWA pools (accounting.hybrid_swa): from 0.5.8 for GptOssForCausalLM and Llama4ForConditionalGeneration
# (configs/model_config.py is_hybrid_swa_model), gpt-oss not beside trtllm_mha in 0.5.8-0.5.9 nor with speculation in
# 0.5.8; split by layer count in 0.5.8, by bytes in 0.5.9 - 0.5.10, by its pool configurator from 0.5.11
# (accounting.hybrid_split)
_HYBRID_0508 = ("gpt_oss", "llama4")
_HEURISTIC_0508 = replace(_HEURISTIC_0507, hybrid_swa_types=_HYBRID_0508, hybrid_swa_off_trtllm=True,
                          hybrid_swa_off_speculative=True, hybrid_split_rule="layers_aligned")
# 0.5.9 on: the decode check wants max(steps x topk, draft tokens) free a running request (accounting.
# decode_reserve_tokens)
_HEURISTIC_0509 = replace(_HEURISTIC_0508, hybrid_swa_off_speculative=False, hybrid_split_rule="bytes",
                          decode_check="max")
# 0.5.10: 4 GiB for an EAGLE-family draft, and room for the piecewise graphs now on by default (Rules); gpt-oss keeps
# its hybrid pools beside trtllm_mha; the running-request limit capped by the request pool's estimate
# (accounting.running_requests)
_HEURISTIC_0510 = replace(_HEURISTIC_0509, spec_reserve_mib=4096, piecewise_reserve=True, hybrid_swa_off_trtllm=False,
                          running_rule="estimate")
# 0.5.11: the hybrid SWA pools sized by model_executor/pool_configurator.py HybridSWAPoolConfigurator (the bytes the
# fraction leaves over F + r x S; in the 0.5.11, 0.5.12 and 0.5.13 wheels, model_runner_kv_cache_mixin.py
# _resolve_memory_pool_config), and an EAGLE-family chain on spec v2, which keeps twice its decode allocation
# (accounting.decode_reserve_tokens)
_HEURISTIC_0511 = replace(_HEURISTIC_0510, hybrid_split_rule="configurator")
_HEURISTIC_0513 = replace(_HEURISTIC_0511, piecewise_clamped_to_context=True)

# before 0.5.3 the default fraction, chunked-prefill size and decode-graph limit changed five times (accounting.py's
# docstring, Rules.defaults); from 0.4.4.post4 an EAGLE / EAGLE3 / NEXTN draft sets max_running_requests to 48 when it
# is not given (server_args.py "if self.max_running_requests is None: self.max_running_requests = 48", read in the
# 0.4.4.post4 wheel and every later one); 0.4.3.post3 - 0.4.4.post3 set 32 for an EAGLE draft (the same lines with 32
# in the 0.4.3.post3, 0.4.3.post4 and 0.4.4 wheels; none in 0.4.3.post2's)
def _legacy(version: str, label: str, defaults: str, spec_running: int | None = 48,
            mla: tuple[tuple[str, tuple[bool, int]], ...] = MLA_046, headroom: str = "shared",
            recv_flag: bool = False, pp: bool = True, hybrid: tuple[str, ...] = (),
            draft_extend: str = "accepted", decode_check: str = "tree") -> AccountingProfile:
    # --scheduler-recv-interval from 0.5.1 (server_args.py: no scheduler_recv_interval in the 0.4.10.post2 wheel, in
    # 0.5.1's; no 0.5.0 was released): a run planned with it on an older release is refused, not emitted
    return replace(_profile(version, label, Rules(defaults=defaults, spec_reserve_mib=0, draft_in_sizing=False,
                                                  spec_max_running_requests=spec_running, draft_headroom=headroom,
                                                  pipeline_parallel=pp, hybrid_swa_types=hybrid,
                                                  hybrid_split_rule="layers" if hybrid else "",
                                                  decode_check=decode_check),
                            mla=mla), recv_interval_flag=recv_flag, checkpoint_kv_dtype=False,
                   draft_extend=draft_extend)


# 0.4.10 - 0.4.10.post1: the hybrid SWA pools for every model whose class reports a sliding window (model_runner.py,
# "Check if the model is using hybrid SWA"; accounting.hybrid_swa): Gemma 2, Gemma 3 (its text model and its multimodal
# checkpoint) and Gemma 3n; 0.4.10.post2 turns Gemma 2's off (server_args.py "Disable hybrid SWA memory for
# Gemma2ForCausalLM", absent from the 0.4.10.post1 wheel), 0.5.1 all three ("as it is not yet supported")
_GEMMA3_TYPES = ("gemma3", "gemma3_text", "gemma3n", "gemma3n_text")


# no --page-size before 0.4.4 (server_args.py: no page_size in the 0.4.3.post4 wheel, "--page-size" in 0.4.4's): a
# token pool of pages of one, and the planner refuses another block size there (AccountingProfile.block_sizes)
_NO_PAGE_SIZE = (1,)
V04 = replace(_legacy("0.4", "SGLang 0.4-0.4.3.post2 (default fraction by TP size; draft pool after the target's)",
                      "tp_table", spec_running=None, mla=(), headroom="draft_only", pp=False,
                      decode_check="draft_tokens"), block_sizes=_NO_PAGE_SIZE)
# the decode check's multiplier (accounting.decode_reserve_tokens): N + topk x N in 0.4.3.post3 only, N + topk x steps
# from 0.4.3.post4 (managers/scheduler.py decode_mem_cache_buf_multiplier in the two wheels)
V043P3 = replace(_legacy("0.4.3.post3", "SGLang 0.4.3.post3 (as 0.4; target and draft pools share the draft's extra "
                         "slots; 32 running requests with an EAGLE draft)", "tp_table", spec_running=32, mla=(),
                         pp=False, decode_check="draft_tokens_topk"),
                 block_sizes=_NO_PAGE_SIZE)
V043P4 = replace(_legacy("0.4.3.post4", "SGLang 0.4.3.post4 (as 0.4.3.post3; the decode check holds draft tokens + "
                         "top-k x steps a request)", "tp_table", spec_running=32, mla=(), pp=False),
                 block_sizes=_NO_PAGE_SIZE)
V044 = _legacy("0.4.4", "SGLang 0.4.4-0.4.4.post3 (as 0.4.3.post4; --page-size)", "tp_table", spec_running=32, mla=(),
               pp=False)
V044P4 = _legacy("0.4.4.post4", "SGLang 0.4.4.post4-0.4.5 (as 0.4; 48 running requests with an EAGLE-family draft)",
                 "tp_table", mla=(), pp=False)
V045P1 = _legacy("0.4.5.post1", "SGLang 0.4.5.post1-0.4.5.post2 (as 0.4.4.post4; fa3 on Hopper, MLA prompts absorbed "
                 "under 8,192 tokens of prefix)", "tp_table", mla=MLA_0451, pp=False)
V045P3 = _legacy("0.4.5.post3", "SGLang 0.4.5.post3 (above 80 GiB: 13 GiB left outside the fraction, decode graphs to "
                 "256)", "big13", mla=MLA_0451, pp=False)
V046 = _legacy("0.4.6", "SGLang 0.4.6-0.4.6.post1 (as 0.4.5.post3; MLA prompts without a prefix as multi-head "
               "attention on Hopper too)", "big13", pp=False)
V046P2 = _legacy("0.4.6.post2", "SGLang 0.4.6.post2-0.4.6.post5 (above 96 GiB: 48 GiB of headroom shared, at least "
                 "18 GiB outside the fraction, decode graphs to 256)", "big48")
V047 = _legacy("0.4.7", "SGLang 0.4.7 (as 0.4.6.post2; 0.79 and decode graphs to 512 on CUDA cards above 180,000 "
               "MiB)", "big48_b200")
V047P1 = _legacy("0.4.7.post1", "SGLang 0.4.7.post1-0.4.9 (default fraction from a reserve by GPU memory and TP x PP)",
                 "reserved")
V0410 = _legacy("0.4.10", "SGLang 0.4.10-0.4.10.post1 (as 0.4.7.post1; hybrid SWA pools for Gemma 2, 3 and 3n)", "reserved",
                hybrid=("gemma2",) + _GEMMA3_TYPES, draft_extend="verified")
V0410P2 = _legacy("0.4.10.post2", "SGLang 0.4.10.post2 (as 0.4.10; hybrid SWA pools for Gemma 3 and 3n only)", "reserved",
                  hybrid=_GEMMA3_TYPES, draft_extend="verified")
V051 = _legacy("0.5.1", "SGLang 0.5.1-0.5.2 (as 0.4.7.post1; --scheduler-recv-interval)", "reserved", recv_flag=True,
               draft_extend="verified")
V053 = _profile("0.5.3", "SGLang 0.5.3 (default fraction from GPU memory; draft pool after the target's)",
                replace(_HEURISTIC_0503, trtllm_mla_sm100=False), mla=MLA_053)
V054 = _profile("0.5.4", "SGLang 0.5.4 (as 0.5.3; trtllm_mla for DeepSeek-V3 on compute capability 10)",
                _HEURISTIC_0503)
V055 = _profile("0.5.5", "SGLang 0.5.5-0.5.6 (as 0.5.4; decode graphs to 24 on cards of 20-35 GiB)", _HEURISTIC_0505)
V057 = _profile("0.5.7", "SGLang 0.5.7 (as 0.5.5; no extra pool slots for a draft; trtllm_mha on compute "
                "capability 10)", _HEURISTIC_0507)
V058 = _profile("0.5.8", "SGLang 0.5.8 (as 0.5.7; hybrid SWA pools for gpt-oss and Llama 4)", _HEURISTIC_0508)
V059 = _profile("0.5.9", "SGLang 0.5.9 (as 0.5.8; hybrid SWA pools for gpt-oss with speculation too)", _HEURISTIC_0509)
V0510 = _profile("0.5.10", "SGLang 0.5.10 (as 0.5.4; prompt steps in piecewise CUDA graphs, not with the "
                 "flashinfer_trtllm MoE runner nor with speculation)", _HEURISTIC_0510, _PIECEWISE, _FLASHINFER_TRTLLM_SM100,
                 piecewise_off_speculative=True)
V0511 = _profile("0.5.11", "SGLang 0.5.11-0.5.12 (as 0.5.10; piecewise CUDA graphs with speculation too)", _HEURISTIC_0511,
                 _PIECEWISE, _FLASHINFER_TRTLLM_SM100, spec_v2="chain")
V0513 = _profile("0.5.13", "SGLang 0.5.13 (as 0.5.11; piecewise CUDA graphs with every MoE runner; spec v2 for "
                 "trees too)", _HEURISTIC_0513, _PIECEWISE, spec_v2="model")
_HEURISTIC_0514 = replace(_HEURISTIC_0513, spec_reserve_mib=0, draft_in_sizing=True, piecewise_off_when_eager=True,
                          running_rule="half_pool", hybrid_split_rule="configurator")
V0514 = _profile("0.5.14", "SGLang 0.5.14 (draft weights and KV inside mem_fraction_static; spec v2 for every "
                 "drafter)", _HEURISTIC_0514, _PIECEWISE, spec_v2="all")
# 0.5.15: HybridSWAPoolConfigurator budgets an EAGLE-family draft's layers too (pool_configurator.py, read in the 0.5.15,
# 0.5.18 and 0.5.23 wheels; not in 0.5.14's): a hybrid SWA target's draft pool inside the fraction as well
V0515 = _profile("0.5.15", "SGLang 0.5.15 and later (as 0.5.14; a hybrid SWA target's draft KV inside the fraction too)",
                 replace(_HEURISTIC_0514, hybrid_draft_in_sizing=True), _PIECEWISE, spec_v2="all")

# The series whose X.Y.0 was never released: PyPI's sglang history goes from 0.4.10.post2 to the pre-releases 0.5.0rc0 -
# 0.5.0rc2 and then 0.5.1 (https://pypi.org/project/sglang/#history; `pip index versions sglang` lists no 0.5.0), so
# "0.5" names no one release (engines.registry refuses it, naming the series' releases)
UNRELEASED_FIRST = ((0, 5),)

# (first release covered, profile), oldest first
PROFILES = (((0, 4), V04), ((0, 4, 3, 3), V043P3), ((0, 4, 3, 4), V043P4), ((0, 4, 4), V044), ((0, 4, 4, 4), V044P4), ((0, 4, 5, 1), V045P1),
            ((0, 4, 5, 3), V045P3), ((0, 4, 6), V046), ((0, 4, 6, 2), V046P2), ((0, 4, 7), V047), ((0, 4, 7, 1), V047P1),
            ((0, 4, 10), V0410), ((0, 4, 10, 2), V0410P2), ((0, 5, 1), V051), ((0, 5, 3), V053), ((0, 5, 4), V054),
            ((0, 5, 5), V055), ((0, 5, 7), V057), ((0, 5, 8), V058), ((0, 5, 9), V059), ((0, 5, 10), V0510),
            ((0, 5, 11), V0511), ((0, 5, 13), V0513), ((0, 5, 14), V0514), ((0, 5, 15), V0515))

# The drafter shape SGLang runs when no --speculative-num-steps is given (EAGLE, EAGLE3 and NEXTN, its MTP; from
# 0.5.2 STANDALONE, its draft model): server_args.py auto_choose_speculative_params (0.5.14 on: arg_groups/
# speculative_hook.py _auto_choose_speculative_params), by the target's architecture, read in every release's PyPI
# wheel. (steps = k, top-k, draft tokens): 5 / 4 / 8 is a tree, 3 / 1 / 4 a chain. Each rule holds from its first
# release to the next rule's: (first release, the shape of every other architecture, the architectures (as
# config.json model_type) that take the other shape).
CHAIN, TREE = (3, 1, 4), (5, 4, 8)
_DEEPSEEK = ("deepseek_v3", "deepseek_v2")
_CHAIN_0503 = _DEEPSEEK + ("gpt_oss", "deepseek_v32", "bailing_moe", "bailing_moe_v2")
AUTO_SHAPE_RULES: tuple[tuple[tuple[int, int, int], tuple[int, int, int], tuple[str, ...]], ...] = (
    ((0, 0, 0), TREE, ()),  # 0.4.1.post4-0.4.6: every architecture 5 / 4 / 8
    ((0, 4, 7), TREE, _DEEPSEEK),  # 0.4.7: DeepseekV3 / DeepseekV2ForCausalLM 3 / 1 / 4
    ((0, 5, 1), TREE, _DEEPSEEK + ("gpt_oss",)),  # 0.5.1: + GptOssForCausalLM (no 0.5.0 was released)
    ((0, 5, 3), TREE, _CHAIN_0503),  # 0.5.3: + DeepseekV32, BailingMoe, BailingMoeV2
    # 0.5.6.post1: + Glm4MoeForCausalLM (and MistralLarge3 / Pixtral); 0.5.7: + MiMoV2Flash (a post release counts
    # from its base release, as engines/methods.py does)
    ((0, 5, 6), TREE, _CHAIN_0503 + ("glm4_moe",)),
    # 0.5.8: every other architecture 3 / 1 / 4 ("# The default value for all other models"); LlamaForCausalLM keeps
    # 5 / 4 / 8 (so does Grok-1, not in the catalog); the same in 0.5.23's speculative_hook.py
    ((0, 5, 8), CHAIN, ("llama",)),
)
AUTO_SPECULATIVE_METHODS = ("eagle", "eagle3", "mtp")
# STANDALONE's own rule ("if ... == 'STANDALONE': return (3, 1, 4)"), from its first release
STANDALONE_FROM = (0, 5, 2)
# NGRAM (0.5.3 on) verifies --speculative-num-draft-tokens, unset: --speculative-ngram-max-match-window-size (12) in
# 0.5.3-0.5.10 (server_args.py "self.speculative_num_draft_tokens = (self.speculative_ngram_max_match_window_size)"),
# 12 from 0.5.11 ("speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding")
NGRAM_FROM, NGRAM_SHAPE = (0, 5, 3), (11, 1, 12)


def auto_speculative_params(model_type: str, version: str | None = None,
                            method: str = "eagle3") -> tuple[int, int, int] | None:
    """(speculative_num_steps = k, speculative_eagle_topk, speculative_num_draft_tokens) SGLang picks for a target
    of this model_type when the request leaves them unset, in the release `version` stands for (X.Y: X.Y.0; None:
    the newest); None where it picks none (a method before the release that has it, or medusa)."""
    from ..registry import release_with_patch

    release = release_with_patch(version) if version not in (None, "", "latest") else None
    release = release or (10**6, 0, 0)
    if method == "draft_model":
        return CHAIN if release >= STANDALONE_FROM else None
    if method == "ngram":  # 12 draft tokens verified: a chain of 11 as specsize prices n-gram (check_tree)
        return NGRAM_SHAPE if release >= NGRAM_FROM else None
    if method not in AUTO_SPECULATIVE_METHODS:
        return None
    _first, default, others = [rule for rule in AUTO_SHAPE_RULES if rule[0] <= release][-1]
    other = CHAIN if default == TREE else TREE
    return other if model_type in others else default
