"""Published variants of catalog models, read from their Hugging Face ids when neither the catalog nor the hub has
them: a quantized checkpoint (`nvidia/Llama-3.1-70B-Instruct-FP8`, `Qwen/Qwen3-8B-AWQ`,
`RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8`), a mirror under another organisation
(`unsloth/Llama-3.1-8B-Instruct`), a dated revision (`Qwen/Qwen3-235B-A22B-Instruct-2507`) or the base / instruct
sibling of a catalog model. Each keeps the architecture of the model it derives from; what the name alone cannot
say (the checkpoint's exact layout, a revision's longer max_position_embeddings) the caller's note names.

Pure: names in, a match out. catalog.models turns a match into a ModelSpec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Quantized-checkpoint name suffixes, the way their publishers name them, and the quantization each stores (names as
# core.specs.QUANT_NAMES takes them: awq keeps zero points, gptq is symmetric). Matched at the end of the name, the
# first pattern in this order that matches wins: NVIDIA ModelOpt (-FP8, -FP4 / -NVFP4), AMD Quark (-FP8-KV: fp8
# weights and activations with fp8 KV scales; -MXFP4-Preview), Red Hat / Neural Magic's llm-compressor
# (-FP8-dynamic, -quantized.w8a8 and -W8A8-INT8 (int8 weights and activations), -quantized.w8a16 (int8 weights),
# -quantized.w4a16 (GPTQ int4), -W8A8-FP8, -NVFP4A16), Qwen's own (-FP8, -AWQ, -GPTQ-Int4, -GPTQ-Int8)
QUANT_SUFFIXES: tuple[tuple[str, str], ...] = (
    (r"fp8[-_]kv", "fp8"),
    (r"w8a8[-_.]fp8", "fp8"),
    (r"fp8[-_.]?(?:dynamic|static|block|e4m3)?", "fp8"),
    (r"(?:quantized[.])?w8a8(?:[-_.]int8)?", "w8a8_int8"),
    (r"(?:quantized[.])?w8a16", "int8"),
    (r"(?:quantized[.])?w4a16(?:[-_]g128)?", "gptq"),
    (r"gptq[-_.]?int8", "int8"),
    (r"gptq(?:[-_.]?(?:int4|4bit))?", "gptq"),
    (r"awq(?:[-_.]?(?:int4|4bit))?", "awq"),
    (r"int4", "int4"),
    (r"int8", "int8"),
    (r"(?:nv)?fp4(?:a16)?", "nvfp4"),
    (r"mxfp4(?:[-_.]preview)?", "mxfp4"),
)
_QUANT = tuple((re.compile(rf"[-_.]{pattern}$", re.IGNORECASE), name) for pattern, name in QUANT_SUFFIXES)
_FP8_KV = _QUANT[0][0]  # QUANT_SUFFIXES' first: fp8 weights with fp8 KV scales
# Qwen's own -FP8 checkpoints (Qwen/<model>-FP8) store fp8 weights in 128 x 128 blocks with one scale each ("fine-grained
# fp8 quantization with block size of 128", their model cards; the blocks that keep Qwen3-30B-A3B-FP8 off TP 4 in
# vllm-project/vllm issue 25292 and Qwen3-235B-A22B-FP8 off TP 4 / 8 in QwenLM/Qwen3 issue 1485): read so by name, the
# engines' block-shape check then applies (engines.block_fp8)
QWEN_FP8_BLOCK = (128, 128)
_QWEN_FP8 = re.compile(r"^qwen/.+-fp8$", re.IGNORECASE)
_REVISION = re.compile(r"-(?:instruct|thinking)-\d{4}$", re.IGNORECASE)  # Qwen3's 2507 revisions
_SIBLING = re.compile(r"-(?:instruct|it|chat|base|pt)$", re.IGNORECASE)


@dataclass(frozen=True)
class Variant:
    """A published id read as a catalog model: `base` (a catalog id), the quantization its name says it stores
    (None: the base's own), and what else the name was read through (for the caller's note)."""

    model_id: str
    base: str
    quantization: str | None
    readings: tuple[str, ...]
    fp8_kv: bool = False  # the name says the checkpoint carries fp8 KV scales (AMD Quark's -FP8-KV)
    fp8_block: tuple[int, int] | None = None  # the fp8 weights' scale blocks the publisher's name implies (QWEN_FP8_BLOCK)


def variant_of(model_id: str, catalog_ids: list[str]) -> Variant | None:
    """The catalog model a published id derives from, or None when its name matches none. `catalog_ids`: the
    catalog's ids. The org is not required to match (mirrors and quantizers publish under their own), but the
    base's own org wins a tie."""
    if "/" not in model_id:
        return None
    org, name = model_id.split("/", 1)
    by_name: dict[str, list[str]] = {}
    for cid in catalog_ids:
        by_name.setdefault(cid.split("/", 1)[-1].lower(), []).append(cid)
    stems: list[tuple[str, str | None]] = [(name, None)]  # the whole name first: a catalog model named -FP8 itself
    fp8_kv = False
    for pattern, method in _QUANT:
        match = pattern.search(name)
        if match:
            stem = name[:match.start()]
            if not any(other.search(stem) for other, _ in _QUANT):  # one format per name: -FP8-AWQ says two
                stems.append((stem, method))
            fp8_kv = pattern is _FP8_KV
            break
    for stem, quant in stems:
        for candidate, readings in _candidates(stem):
            ids = by_name.get(candidate.lower())
            if ids:
                base = next((cid for cid in ids if cid.split("/", 1)[0].lower() == org.lower()), sorted(ids)[0])
                if base.lower() == model_id.lower():
                    return None
                block = QWEN_FP8_BLOCK if quant == "fp8" and _QWEN_FP8.match(model_id) else None
                return Variant(model_id, base, quant, readings, fp8_kv and quant is not None, block)
    return None


def _candidates(stem: str) -> list[tuple[str, tuple[str, ...]]]:
    """Names to look up for a stem, most literal first, each with the readings it took."""
    names: list[tuple[str, tuple[str, ...]]] = [(stem, ())]
    revision = _REVISION.search(stem)
    if revision:
        names.append((stem[:revision.start()], (f"the {stem[revision.start() + 1:]} revision",)))
    more = []
    for name, readings in names:
        sibling = _SIBLING.search(name)
        if sibling is None:  # a base model's id: the catalog may hold its instruct-tuned sibling
            more.append((name + "-Instruct", readings + ("its instruct sibling",)))
        else:  # -Instruct / -it / -chat: the base; -Base / -pt: the catalog's tuned model of the same name
            tuned = sibling.group().lower() in ("-base", "-pt")
            more.append((name[:sibling.start()], readings + (f"its {'tuned' if tuned else 'base'} sibling",)))
    names += more
    out = []
    for name, readings in names:
        out.append((name, readings))
        if name.lower().startswith("meta-"):
            out.append((name[5:], readings))
        else:
            out.append(("Meta-" + name, readings))
    return out
