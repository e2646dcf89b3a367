"""Build the target and the drafter with PyTorch and measure what the memory model predicts.

Random weights from the config by default (the footprint does not depend on the values), or real weights
from a local model directory. On CUDA the terms come from torch.cuda memory statistics; on CPU from the
allocator (the bytes of the tensors themselves, and the profiler's record of every allocation for peaks).

Terms measured (Hugging Face modules, eager):
- weights: bytes of the parameters (a tied table once); the prediction is specsize's weight bytes without
  the engine's rotary cache (vLLM keeps one; Hugging Face does not);
- KV: bytes of the cache tensors after a prefill of B sequences of P tokens and one verification pass of
  k+1 positions, target and drafter (prediction: KV bytes per token x tokens held);
- activation peak: the largest allocation above weights and cache during the prefill (Hugging Face's eager
  forward, not vLLM's profiling pass: it is reported, not asserted).

Acceptance (real weights and a prompt file): the drafter proposes k tokens, the target verifies them, with
greedy verification (accept while the draft token is the target's argmax) and sampled verification
(Leviathan et al. 2023: accept with min(1, p/q), else resample from max(0, p - q)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..core.kvcache import model_kv_layers
from ..core.specs import DTYPE_BYTES, ModelSpec
from ..core.weights import weight_breakdown


@dataclass
class Term:
    name: str
    predicted: float
    measured: float
    note: str = ""

    @property
    def error(self) -> float | None:
        return None if not self.measured else self.predicted / self.measured - 1


@dataclass
class MeasureResult:
    device: str
    dtype: str
    batch_size: int
    prompt_tokens: int
    k: int
    terms: list[Term] = field(default_factory=list)
    acceptance: dict | None = None


def _torch():
    import warnings  # noqa: PLC0415

    try:
        import torch  # noqa: PLC0415 - measure is an optional extra: specsize[measure]
        import transformers  # noqa: F401, PLC0415 - fail early with the install hint
    except ImportError as err:
        from ..core.errors import SpecError  # noqa: PLC0415

        raise SpecError("measure", f"needs PyTorch and transformers ({err.name} is missing)",
                        "pip install 'specsize[measure]' (torch, transformers)") from None
    warnings.filterwarnings("ignore", category=FutureWarning, message=".*past_key_values.*")
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    return torch


def hf_config(spec_config: dict):
    from transformers import AutoConfig  # noqa: PLC0415

    cfg = dict(spec_config)
    text = cfg.get("text_config")
    if isinstance(text, dict) and "hidden_size" in text:
        cfg = {**text, "architectures": cfg.get("architectures")}
    model_type = cfg.pop("model_type", None) or "llama"
    cfg.pop("quantization_config", None)  # random weights in the serving dtype
    cfg.pop("architectures", None)
    cfg.pop("auto_map", None)
    return AutoConfig.for_model(model_type, **cfg)


def build_model(config: dict | None, path: str | None, dtype: str, device: str):
    """A causal LM with random weights from `config`, or real weights from the local directory `path`."""
    torch = _torch()
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    torch_dtype = getattr(torch, dtype)
    torch.manual_seed(0)
    if not path:  # random weights are drawn where they will live: no host copy of a large model
        assert config is not None, "a model without a local directory is built from its config"
        with torch.device(device):
            try:
                return AutoModelForCausalLM.from_config(hf_config(config), dtype=torch_dtype).eval()
            except TypeError:
                return AutoModelForCausalLM.from_config(hf_config(config), torch_dtype=torch_dtype).eval()
    # here `path` is set: the branch above returns (or raises) for every model built from its config
    try:  # transformers >= 4.56 names it dtype; older releases torch_dtype
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch_dtype)
    # transformers wraps PreTrainedModel.to in functools.wraps, whose stub loses the bound `self`
    return model.to(device).eval()  # type: ignore[arg-type]


def parameter_bytes(model) -> int:
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel() * p.element_size()
    return total


def cache_bytes(cache) -> int:
    """Bytes of a Hugging Face cache's key and value tensors, whatever its layout."""
    torch = _torch()
    total = 0
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            for name in ("keys", "values"):
                t = getattr(layer, name, None)
                if isinstance(t, torch.Tensor):
                    total += t.numel() * t.element_size()
        return total
    for name in ("key_cache", "value_cache"):
        for t in getattr(cache, name, []) or []:
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    return total


class _CpuPeak:
    """Peak bytes allocated by torch on the CPU during a block, from the profiler's memory records."""

    def __enter__(self):
        torch = _torch()
        self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
        self._prof.__enter__()
        return self

    def __exit__(self, *exc):
        self._prof.__exit__(*exc)
        events = [(e.time_range.start, e.cpu_memory_usage) for e in self._prof.profiler.function_events
                  if getattr(e, "cpu_memory_usage", 0)]
        running = peak = 0
        for _, delta in sorted(events):
            running += delta
            peak = max(peak, running)
        self.peak = peak


def measure(target_spec: ModelSpec, target_config: dict | None, target_path: str | None, draft_spec: ModelSpec | None,
            draft_config: dict | None, draft_path: str | None, *, batch_size: int, prompt_tokens: int, k: int,
            dtype: str = "bfloat16", device: str | None = None) -> MeasureResult:
    """One shape; see measure_shapes for several on the same models."""
    return measure_shapes(target_spec, target_config, target_path, draft_spec, draft_config, draft_path,
                          shapes=[(batch_size, prompt_tokens)], k=k, dtype=dtype, device=device)[0]


def measure_shapes(target_spec: ModelSpec, target_config: dict | None, target_path: str | None,
                   draft_spec: ModelSpec | None, draft_config: dict | None, draft_path: str | None, *,
                   shapes: list[tuple[int, int]], k: int, dtype: str = "bfloat16",
                   device: str | None = None) -> list[MeasureResult]:
    """Build each model once and measure it at every (batch size, prompt length) in `shapes`."""
    torch = _torch()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    wb = DTYPE_BYTES[dtype]
    results = [MeasureResult(device=device, dtype=dtype, batch_size=b, prompt_tokens=p, k=k) for b, p in shapes]
    models = [("target", target_spec, target_config, target_path)]
    if draft_spec is not None:
        models.append(("draft", draft_spec, draft_config, draft_path))
    for role, spec, config, path in models:
        model = build_model(config, path, dtype, device)
        measured_weights = parameter_bytes(model)
        predicted_weights = weight_breakdown(spec, 1, 1, dtype, None, rotary_cache=False).total
        kv_layers = model_kv_layers(spec, 1, wb, role)
        vocab = model.config.vocab_size
        for result, (batch_size, prompt_tokens) in zip(results, shapes):
            result.terms.append(Term(f"{role} weights", predicted_weights, measured_weights,
                                     "parameters; rotary cache excluded on both sides"))
            ids = torch.randint(0, vocab, (batch_size, prompt_tokens), device=device)
            if device == "cuda":
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                with torch.no_grad():
                    out = model(ids, use_cache=True)
                torch.cuda.synchronize()
                activation = torch.cuda.max_memory_allocated() - base
            else:
                with _CpuPeak() as peak, torch.no_grad():
                    out = model(ids, use_cache=True)
                activation = peak.peak
            # the verification pass: k + 1 new positions per sequence over the prompt's cache
            verify = torch.randint(0, vocab, (batch_size, k + 1), device=device)
            with torch.no_grad():
                out = model(verify, past_key_values=out.past_key_values, use_cache=True)
                if role == "draft" and k:
                    step = verify[:, -1:]
                    for _ in range(k):  # the drafter's k steps, one token each
                        out = model(step, past_key_values=out.past_key_values, use_cache=True)
                        step = out.logits[:, -1:].argmax(-1)
            held = prompt_tokens + k + 1 + (k if role == "draft" else 0)
            windowed = [_kept(layer, held) for layer in kv_layers if _kept(layer, held) < held]
            note = f"{batch_size} sequences x {held} tokens" + (
                f" ({len(windowed)} of {len(kv_layers)} layers keep only their window's last "
                f"{', '.join(map(str, sorted(set(windowed))))})" if windowed else "")
            result.terms.append(Term(f"{role} KV cache", batch_size * sum(layer.bytes_per_token * _kept(layer, held)
                                                                          for layer in kv_layers),
                                     cache_bytes(out.past_key_values), note))
            result.terms.append(Term(f"{role} activation peak (HF eager prefill)", math.nan, activation,
                                     "reported, not compared: vLLM's profiling pass differs from an eager forward"))
            del out
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
    return results


def _kept(layer, held: int) -> int:
    """Tokens a Hugging Face cache keeps per sequence in `layer` after `held` tokens went through it: all of them in a
    full (or MLA) layer, the last window - 1 in a sliding-window or chunked-attention layer (transformers'
    cache_utils.DynamicSlidingWindowLayer.update: "Only cache the last `self.sliding_window - 1` tokens"; chunked
    attention uses the same layer, its chunk as the window). The prediction had counted every token in every layer:
    a Mistral with a 64-token window after 204 tokens, +224% on a cache the model sizes right."""
    if layer.kind in ("sliding", "chunked") and layer.window:
        return min(held, max(layer.window - 1, 0))
    return held


def _distribution(logits, temperature: float):
    """The sampling distribution of `logits` at `temperature`; at 0, all its mass on the argmax (the limit of the
    softmax as the temperature falls, so sampled verification at 0 is greedy verification)."""
    torch = _torch()
    if temperature > 0:
        return torch.softmax(logits / temperature, -1)
    return torch.nn.functional.one_hot(logits.argmax(), logits.shape[-1]).to(logits.dtype)


def _next_token(mode: str, target_logits, q, temperature: float, generator) -> int:
    """The token the target adds after the accepted drafts: its argmax (greedy); sampled, a draw from max(0, p - q)
    after a rejected draft (`q` its drafter's distribution), or from p after k accepted ones."""
    if mode == "greedy":
        return int(target_logits.argmax())
    torch = _torch()
    p = _distribution(target_logits, temperature)
    if q is not None:
        residual = (p - q.to(p.device)).clamp(min=0)
        p = residual if float(residual.sum()) > 0 else p
    return int(torch.multinomial(p.cpu(), 1, generator=generator))


def measure_acceptance(target, draft, prompts: list[list[int]], k: int, max_new_tokens: int = 64,
                       temperature: float = 1.0, seed: int = 0) -> dict:
    """Acceptance of `draft` against `target` (loaded models) on token-id prompts, greedy and sampled."""
    torch = _torch()
    generator = torch.Generator(device="cpu").manual_seed(seed)
    out = {}
    for mode in ("greedy", "sampled"):
        accepted_total = steps = 0
        per_position = [0] * k
        for prompt in prompts:
            tokens = list(prompt)
            produced = 0
            while produced < max_new_tokens:
                context = torch.tensor([tokens], device=next(target.parameters()).device)
                drafted: list[int] = []
                q_probs: list[Any] = []  # the drafter's distribution per drafted token (None when greedy)
                draft_ctx = context
                with torch.no_grad():
                    for _ in range(k):
                        logits = draft(draft_ctx).logits[0, -1].float()
                        if mode == "greedy":
                            token = int(logits.argmax())
                            q = None
                        else:
                            q = _distribution(logits, temperature)
                            token = int(torch.multinomial(q.cpu(), 1, generator=generator))
                        drafted.append(token)
                        q_probs.append(q)
                        draft_ctx = torch.cat([draft_ctx, torch.tensor([[token]], device=draft_ctx.device)], 1)
                    target_logits = target(draft_ctx).logits[0, -(k + 1):].float()
                accepted = 0
                for i, token in enumerate(drafted):
                    if mode == "greedy":
                        ok = int(target_logits[i].argmax()) == token
                    else:
                        p = _distribution(target_logits[i], temperature)
                        ratio = float(p[token] / max(float(q_probs[i][token]), 1e-12))
                        ok = float(torch.rand(1, generator=generator)) < min(1.0, ratio)
                    if not ok:
                        break
                    accepted += 1
                    per_position[i] += 1
                accepted_total += accepted
                steps += 1
                rejected = q_probs[accepted] if accepted < k else None
                tokens += drafted[:accepted] + [_next_token(mode, target_logits[accepted], rejected, temperature,
                                                            generator)]
                produced += accepted + 1
        mean_length = 1 + accepted_total / max(1, steps)
        from ..core.perf import acceptance_from_mean_length  # noqa: PLC0415

        out[mode] = {"steps": steps, "mean_accepted_length": mean_length,
                     "acceptance_rate": acceptance_from_mean_length(min(mean_length, k + 1), k) if k else None,
                     "per_position": [c / max(1, steps) for c in per_position]}
    return out
