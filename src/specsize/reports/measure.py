"""Rendering of `specsize measure`: predicted vs measured bytes per term, and measured acceptance."""

from __future__ import annotations

from .jsonsafe import dumps



def terms_of(result) -> list[dict]:
    return [{"term": t.name, "predicted_bytes": None if t.predicted != t.predicted else int(t.predicted),
             "measured_bytes": int(t.measured), "error": t.error if t.predicted == t.predicted else None,
             "note": t.note} for t in result.terms]


def render(result, batch_size: int, prompt: int, k: int, fmt: str) -> str:
    terms = terms_of(result)
    if fmt == "json":
        return dumps({"schema_version": "1.0", "device": result.device, "dtype": result.dtype,
                      "batch_size": batch_size, "prompt_tokens": prompt, "k": k, "terms": terms,
                      "acceptance": result.acceptance})
    lines = [f"measured on {result.device} ({result.dtype}), {batch_size} sequences x {prompt} prompt tokens, k={k}",
             f"{'term':44} {'predicted MiB':>14} {'measured MiB':>13} {'error':>8}"]
    for t in terms:
        predicted = "-" if t["predicted_bytes"] is None else f"{t['predicted_bytes'] / 2**20:,.3f}"
        error = "-" if t["error"] is None else f"{t['error']:+.2%}"
        lines.append(f"{t['term']:44} {predicted:>14} {t['measured_bytes'] / 2**20:>13,.3f} {error:>8}")
    if result.acceptance:
        for mode, figures in result.acceptance.items():
            lines.append(f"acceptance ({mode}): mean accepted length {figures['mean_accepted_length']:.2f}, "
                         f"a = {figures['acceptance_rate']:.3f} over {figures['steps']} steps")
    return "\n".join(lines) + "\n"
