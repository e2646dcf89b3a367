"""`specsize measure` over a request: build the models with PyTorch, measure, optionally record."""

from __future__ import annotations

import json


from ..core.errors import SpecError
from ..inputs.request import Request
from ..inputs.resolve import resolve


PROMPTS_ACCEPTED = "one JSON object per line: {'prompt_ids': [token ids]} or {'prompt': 'text'}"


def _prompt_ids(prompts: str, target_dir: str | None, vocab: int) -> list[list[int]]:
    """The prompts of a JSONL file as token ids, each checked before any model is built: an object per line with
    a non-empty `prompt_ids` list of ids below `vocab`, or a `prompt` text (the target's tokenizer encodes it)."""
    from ..catalog.files import read_text  # noqa: PLC0415
    from ..core.errors import unique_keys  # noqa: PLC0415

    ids: list[list[int]] = []
    tokenizer = None
    # a line naming prompt_ids (or prompt) twice is refused: json.loads kept the later list, and the acceptance was
    # measured on a prompt other than the one the file's first reader sees
    once = unique_keys(("prompt_ids", "prompt"))
    for number, line in enumerate(read_text(prompts, "prompts", "a JSONL file of prompts").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{prompts} line {number}"
        try:
            item = json.loads(line, object_pairs_hook=once)
        except json.JSONDecodeError as err:
            raise SpecError("prompts", f"{where} is not JSON ({err.msg})", PROMPTS_ACCEPTED) from None
        except ValueError:  # a number of more than 4,300 digits, which Python's JSON reader refuses (had been exit 4)
            raise SpecError("prompts", f"{where} holds a number of more than 4,300 digits", PROMPTS_ACCEPTED) \
                from None
        except RecursionError:  # lists nested thousands deep (had been exit 4)
            raise SpecError("prompts", f"{where} nests too deeply to be a prompt", PROMPTS_ACCEPTED) from None
        repeated = getattr(item, "repeated", None)
        if repeated is not None:
            raise SpecError("prompts", f"{where} names {repeated} twice", f"each key once; {PROMPTS_ACCEPTED}")
        if isinstance(item, dict) and "prompt_ids" in item:
            ids.append(_token_ids(item["prompt_ids"], where, vocab))
        elif isinstance(item, dict) and isinstance(item.get("prompt"), str) and item["prompt"]:
            tokenizer = tokenizer or _tokenizer(target_dir, where)
            ids.append(_token_ids(tokenizer.encode(item["prompt"]), where, vocab))
        else:
            raise SpecError("prompts", f"{where} has neither prompt_ids nor a prompt text", PROMPTS_ACCEPTED)
    if not ids:
        raise SpecError("prompts", f"{prompts} holds no prompts", PROMPTS_ACCEPTED)
    return ids


def _token_ids(raw, where: str, vocab: int) -> list[int]:
    """`raw` as a prompt's token ids: a non-empty list of integers in [0, vocab)."""
    if not isinstance(raw, list) or not raw or any(isinstance(t, bool) or not isinstance(t, int) for t in raw):
        raise SpecError("prompts", f"{where}: prompt_ids must be a non-empty list of integer token ids",
                        PROMPTS_ACCEPTED)
    wrong = next((t for t in raw if not 0 <= t < vocab), None)
    if wrong is not None:
        shown = str(wrong) if len(str(wrong)) <= 24 else f"{str(wrong)[:12]}... ({len(str(abs(wrong))):,} digits)"
        raise SpecError("prompts", f"{where}: token id {shown} is outside the vocabulary of {vocab:,}",
                        f"token ids >= 0 and < {vocab:,}")
    return list(raw)


def _first_line(err: BaseException) -> str:
    """An exception as one line of a message: its first line, at most 200 characters, or its type's name."""
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__


def _tokenizer(target_dir: str | None, where: str):
    """The target's tokenizer (a prompt given as text), or one line saying why it cannot be loaded."""
    from transformers import AutoTokenizer  # noqa: PLC0415

    try:
        return AutoTokenizer.from_pretrained(target_dir)
    except (OSError, ValueError, ImportError, TypeError) as err:
        raise SpecError("prompts", f"{where} is text, and the tokenizer of {target_dir} cannot be loaded "
                        f"({_first_line(err)})",
                        "prompt_ids per line, or a model directory with its tokenizer files") from None


def _check_acceptance_inputs(prompts: str | None, weights: str, d, record: str | None) -> None:
    """Refused before any model is built: --prompts without real weights of a target and a drafter, an empty tag."""
    if record is not None and not record.strip():
        raise SpecError("record", "the tag is empty", "a non-empty TAG")
    if record is not None:  # one no store takes (a line break, past 200 characters), before the run, not after it
        from ..adapters.store import check_tag  # noqa: PLC0415

        check_tag(record, "record")
    if prompts and (weights != "local" or d.speculative.draft is None):
        raise SpecError("prompts", "measuring acceptance needs real weights of a target and a draft model",
                        "--weights local --target DIR --draft DIR --method draft_model")


def _run_bytes(d, dtype: str, batch_size: int, prompt: int, k: int) -> int:
    """Bytes the PyTorch run holds: every model whole on one device (the run builds no TP or PP shards) with its
    weights in the run's `dtype` (random weights drop the checkpoint's quantization, measure.run.hf_config), and the KV
    cache of the tokens it holds (the prompt, the verification pass and, for the drafter, its own k steps) - the
    figures measure.run predicts. The engine's per-GPU account had been used: a 70B target planned at --tp 8 passed as
    16.4 GiB on a host with 50 GiB free, then built all 131.4 GiB of it."""
    from ..core.kvcache import model_kv_layers  # noqa: PLC0415
    from ..core.specs import DTYPE_BYTES  # noqa: PLC0415
    from ..core.weights import weight_breakdown  # noqa: PLC0415

    need = 0
    for role, spec in (("target", d.target), ("draft", d.speculative.draft)):
        if spec is None:
            continue
        held = prompt + k + 1 + (k if role == "draft" else 0)
        per_token = sum(layer.bytes_per_token for layer in model_kv_layers(spec, 1, DTYPE_BYTES[dtype], role))
        need += weight_breakdown(spec, 1, 1, dtype, None, rotary_cache=False).total + batch_size * held * per_token
    return need


def _available_bytes() -> int | None:
    """Host memory a new run can take: Linux's MemAvailable (/proc/meminfo: free memory plus the page cache and
    reclaimable slabs the kernel gives back on demand), else the free pages. The free pages alone had refused runs the
    host holds: a checkpoint just read sits in the page cache (on this workplace's 23.5 GiB host, 18.1 GiB free of
    22.7 GiB available), where an 8B model measured after reading its 15 GiB of weights would have been refused."""
    import os  # noqa: PLC0415

    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _fits_here(d, dtype: str, batch_size: int, prompt: int, k: int) -> None:
    """Refuse a run the host cannot hold (checked before building anything: a 405B target on a laptop ends in
    one line, not in the kernel's OOM killer)."""
    need = _run_bytes(d, dtype, batch_size, prompt, k)
    available = _available_bytes()
    if available is None:
        return
    if need > 0.8 * available:
        raise SpecError("measure", f"the run needs about {need / 2**30:.1f} GiB; this machine has "
                        f"{available / 2**30:.1f} GiB available", "a smaller model, batch or prompt (or a bigger host)")


def _config_dict(field: str, ref: str) -> tuple[dict, str | None]:
    """catalog.models.load_config_dict under the flag's own name: a model the plan reads as a published sibling (no
    config of its own in the catalog) had been refused as `model: ... needs a config`, naming no flag."""
    from ..catalog.models import load_config_dict  # noqa: PLC0415

    try:
        return load_config_dict(ref)
    except SpecError as err:
        if err.field != "model":
            raise
        raise SpecError(field, f"{err.problem}; measure builds the model from its own config.json", err.accepted) \
            from None


def measure(request: Request, *, batch_size: int = 2, prompt_len: int | None = None, weights: str = "random",
            prompts: str | None = None, max_new_tokens: int = 64, temperature: float = 1.0,
            record: str | None = None, store: str | None = None):
    """(measurement, prompt tokens, k) for the request's target and drafter."""
    from .run import build_model, measure as run_measure, measure_acceptance  # noqa: PLC0415

    r = resolve(request)
    d = r.deployment
    k = d.speculative.num_speculative_tokens
    prompt = prompt_len or min(512, r.workload.prompt_tokens.p50)
    if batch_size < 1 or prompt < 1:
        raise SpecError("batch_size", "batch size and prompt length must be positive", "integers >= 1")
    _check_acceptance_inputs(prompts, weights, d, record)
    target_cfg, target_dir = _config_dict("target", str(request.target))
    draft_cfg = draft_dir = None
    if d.speculative.draft is not None:
        draft_cfg, draft_dir = _config_dict("draft", str(request.draft))
    if weights == "local" and (target_dir is None or (d.speculative.draft is not None and draft_dir is None)):
        raise SpecError("weights", "local weights need local model directories for the target and the drafter",
                        "--target DIR [--draft DIR] with their safetensors")
    vocab = min(spec.vocab_size for spec in (d.target, d.speculative.draft) if spec is not None)
    ids = _prompt_ids(prompts, target_dir, vocab) if prompts else None  # read before hours of work, not after
    dtype = d.engine.dtype if d.engine.dtype != "auto" else d.target.dtype
    device = "cpu" if request.device == "cpu" else None  # None: CUDA when present, else the CPU
    _fits_here(d, dtype, batch_size, prompt, k)
    try:
        result = run_measure(d.target, target_cfg, target_dir if weights == "local" else None, d.speculative.draft,
                             draft_cfg, draft_dir if weights == "local" else None, batch_size=batch_size,
                             prompt_tokens=prompt, k=k, dtype=dtype, device=device)
        if ids is not None:
            target_model = build_model(None, target_dir, dtype, result.device)
            draft_model = build_model(None, draft_dir, dtype, result.device)
            result.acceptance = measure_acceptance(target_model, draft_model, ids, k, max_new_tokens, temperature)
    except (OSError, MemoryError, RuntimeError) as err:  # missing weights, or the run outgrew the machine
        raise SpecError("measure", f"the PyTorch run failed: {_first_line(err)}",
                        "local model directories with their safetensors, and shapes this machine holds") from None
    if record:
        _record(record, store, result, d, batch_size, prompt, k)
    return result, prompt, k


def _record(tag: str, store: str | None, result, d, batch_size: int, prompt: int, k: int) -> None:
    from ..adapters.store import Store  # noqa: PLC0415

    sp = d.speculative
    with Store(store) as s:
        # a term measured but not predicted (the activation peak) has no prediction: null, not the NaN it is in memory,
        # which json.dumps writes as a bare NaN that is no JSON (PostgreSQL's `payload::jsonb`, jq and browsers refuse it)
        terms = [t.__dict__ | {"predicted": None if t.predicted != t.predicted else t.predicted} for t in result.terms]
        payload = {"terms": terms, "device": result.device,
                   "batch_size": batch_size, "prompt_tokens": prompt}
        s.add("footprint", tag, payload, "specsize measure", target=d.target.model_id,
              draft=sp.draft.model_id if sp.draft else None, method=sp.method, k=k)
        for mode, figures in (result.acceptance or {}).items():
            s.add("acceptance", tag, figures | {"verification": mode}, f"specsize measure ({mode})",
                  target=d.target.model_id, draft=sp.draft.model_id, method=sp.method, k=k,
                  acceptance_rate=figures["acceptance_rate"], mean_accepted_length=figures["mean_accepted_length"])


__all__ = ["measure"]
