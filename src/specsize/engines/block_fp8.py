"""Which tensor-parallel sizes an engine release can load a block-quantized fp8 checkpoint at.

A block-fp8 checkpoint (quantization_config.weight_block_size, DeepSeek-V3's and Qwen's own -FP8: 128 x 128) keeps
one scale per block of each weight. Tensor parallelism splits a layer's rows (column parallel: gate / up) or
columns (row parallel: down) between the GPUs, and the engines refuse a split that cuts a block:

- fused MoE experts (vLLM model_executor/layers/quantization/fp8.py Fp8MoEMethod.create_weights, from 0.29
  utils/fp8_utils.py validate_fp8_block_shape_moe; SGLang srt/layers/quantization/fp8.py Fp8MoEMethod.create_weights,
  every 0.4.6 - 0.5.23 wheel read): "The output_size of gate's and up's weight = N is not divisible by weight
  quantization block_n", N the expert's intermediate size over TP, and at TP > 1 the same for block_k ("The
  input_size of down's weight"). From vLLM 0.29 (fused_moe/oracle/fp8.py refine_fp8_moe_block_shape) the scales are
  upsampled at load to gcd(block_n, block_k, N, hidden) when that is at least 32 (a lossless refinement the Triton MoE
  kernels take), and the load goes on;
- dense and shared-expert MLPs (vLLM utils/fp8_utils.py validate_fp8_block_shape, SGLang fp8.py
  Fp8LinearMethod.create_weights): at TP > 1 each GPU's rows of gate / up must be whole blocks of block_n and its
  columns of down whole blocks of block_k; no release refines these.

Reported: Qwen/Qwen3-30B-A3B-FP8 at TP 4 (vllm-project/vllm issue 25292: 768 / 4 = 192 rows), Qwen3-235B-A22B-FP8 and
Qwen3-30B-A3B-FP8 at TP 4 / 8 on SGLang 0.4.6.post5 (QwenLM/Qwen3 issue 1485), Qwen3-Next-80B-A3B-FP8 at TP 8 on SGLang
(sgl-project/sglang issue 10852: its 512-wide shared expert, 64 rows a GPU); gpustack's Qwen3-235B-A22B-FP8 runs on
vLLM 0.11 serve it at TP 4 with expert parallelism because "TP8 only is not compatible with the model weight".
"""

from __future__ import annotations

from math import gcd

from ..core.errors import SpecError
from ..core.specs import Deployment, ModelSpec, effective_target
from .registry import engine_label, release_with_patch
from .support import expert_parallel_problem

# the first vLLM release that refines an fp8 MoE's block scales to fit the TP shard (refine_fp8_moe_block_shape: in
# the 0.29.0 source, not in 0.28.0's)
VLLM_MOE_REFINE_FROM = (0, 29, 0)
REFINE_MIN = 32  # refine_fp8_moe_block_shape: "if refine < 32: return None"
TP_CANDIDATES = (1, 2, 4, 8, 16, 32)


def _refines(engine: str, version: str | None, model: ModelSpec) -> bool:
    """vLLM 0.29 on refines a native fp8 checkpoint's MoE block scales (Fp8MoEMethod); its compressed-tensors block
    fp8 MoE (compressed_tensors_moe_w8a8_fp8.py create_weights) refuses in every release."""
    if engine != "vllm" or model.quantization is None or not model.quantization.moe_block_refine:
        return False
    if version in (None, "", "latest"):
        return True
    wanted = release_with_patch(str(version))
    return wanted is not None and wanted >= VLLM_MOE_REFINE_FROM


def _blocks(model: ModelSpec) -> tuple[int, int] | None:
    q = model.quantization
    if q is None or q.method != "fp8" or not q.block:
        return None
    return int(q.block[0]), int(q.block[1])


def _dense_mlp_widths(model: ModelSpec) -> list[tuple[str, int]]:
    """(what, intermediate size) of the MLPs TP splits as linear layers: the dense layers' and the shared experts'."""
    widths = []
    moe = model.moe
    dense_layers = model.num_layers if moe is None else model.num_layers - len(moe.moe_layers)
    if dense_layers > 0 and model.intermediate_size:
        widths.append(("dense MLP", model.intermediate_size))
    if moe is not None and moe.num_shared_experts and moe.shared_intermediate_size:
        widths.append(("shared expert", moe.shared_intermediate_size))
    return widths


def fp8_block_tp_problem(engine: str, version: str | None, model: ModelSpec, tp: int, ep: int = 1) -> str | None:
    """Why the release cannot load `model`'s block-fp8 weights split over `tp` GPUs (None: it can). `ep` > 1: the
    routed experts are split by expert (Deployment.ep), each whole on its GPU, so only the dense and shared MLPs
    split their rows."""
    blocks = _blocks(model)
    if blocks is None or tp <= 1:
        return None
    block_n, block_k = blocks
    name = engine_label(engine)
    written = f"{name} {version}" if version not in (None, "", "latest") else f"the newest {name}"
    moe = model.moe
    if moe is not None and ep <= 1 and moe.expert_intermediate_size % tp == 0:
        rows = moe.expert_intermediate_size // tp
        if rows % block_n or rows % block_k:
            refine = gcd(block_n, block_k, rows, model.hidden_size)
            if not (_refines(engine, version, model) and refine >= REFINE_MIN):
                return (f"{model.model_id}'s fp8 experts are quantized in {block_n} x {block_k} blocks, and at TP {tp} "
                        f"each GPU holds {moe.expert_intermediate_size:,} / {tp} = {rows:,} rows of each expert, not "
                        f"a whole number of blocks: {written} refuses to load it (fp8.py: \"not divisible by weight "
                        "quantization block_n\")")
    for what, width in _dense_mlp_widths(model):
        if width % tp:
            continue
        part = width // tp
        if part % block_n or part % block_k:
            return (f"{model.model_id}'s fp8 {what} is quantized in {block_n} x {block_k} blocks, and at TP {tp} "
                    f"each GPU holds {width:,} / {tp} = {part:,} of its rows, not a whole number of blocks: "
                    f"{written} refuses to load it (its fp8 linear layers' block-shape check)")
    return None


def check_fp8_block_tp(engine: str, version: str | None, model: ModelSpec, tp: int, field: str = "tp",
                       ep: int = 1) -> None:
    """Refuse a TP the release cannot load the block-fp8 checkpoint at (fp8_block_tp_problem), naming the TP sizes
    it can, and expert parallelism where that loads it."""
    problem = fp8_block_tp_problem(engine, version, model, tp, ep)
    if problem is None:
        return
    fits = [t for t in TP_CANDIDATES if t < tp and fp8_block_tp_problem(engine, version, model, t) is None]
    later = ("" if engine != "vllm" or _refines(engine, version, model) or fp8_block_tp_problem(engine, None, model, tp)
             else f"; or vLLM 0.29 or later at TP {tp} (it refines the experts' scales to blocks that divide the split)")
    whole = ("; or expert_parallel: true (each GPU then holds whole experts)"
             if ep <= 1 and model.moe is not None and field == "tp" and expert_parallel_problem(engine, version) is None
             and fp8_block_tp_problem(engine, version, model, tp, tp) is None else "")
    accepted = (f"a TP of {', '.join(map(str, fits))}" if fits else "a smaller TP") + later + whole + (
        "; or a checkpoint without block scales (bf16, per-channel fp8)")
    raise SpecError(field, problem, accepted)


def check_deployment(engine: str, version: str | None, d: Deployment) -> None:
    """check_fp8_block_tp for what the deployment loads: the target as served (core.specs.effective_target: a
    --quantization override serves a checkpoint without these blocks) at its TP, and a draft model at its own TP.
    SGLang on AMD GPUs is left alone: under AITER (SGLANG_USE_AITER, set in AMD's ROCm images) its fp8 MoE pads the
    split to whole 128-row blocks instead of refusing (fp8.py: "if not (_use_aiter and padding_size == block_n ==
    block_k)", 0.5.11 - 0.5.23 wheels)."""
    if engine == "sglang" and d.gpu.vendor == "amd":
        return
    target, quant = effective_target(d)
    check_fp8_block_tp(engine, version, target if quant is target.quantization else target.with_(quantization=quant),
                       d.tp, ep=d.ep)
    sp = d.speculative
    if sp.draft is not None and sp.kind.own_tp:
        check_fp8_block_tp(engine, version, sp.draft, sp.draft_tp or d.tp, field="draft_tp")
