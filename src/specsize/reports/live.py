"""Rendering of `specsize check-live`: JSON (docs/json.md) or a few lines of text."""

from __future__ import annotations


from ..planner.live import LiveCheck
from .jsonsafe import dumps


def render(result: LiveCheck, fmt: str) -> str:
    if fmt == "json":
        return dumps(result.to_dict())
    o = result.observed
    change = ""
    if result.verdict_changes:  # the memory verdict, or speculation's gain (the verdict the plan stands on)
        change = (" (the verdict changes)" if result.verdict_now != result.planned_verdict
                  else " (the verdict changes: speculation no longer pays)")
    lines = [f"plan: {result.planned_verdict}; reality: {result.verdict_now}{change}"]
    # usage at one decimal: a pool 99.6% full had read "usage 100%", as if the engine were preempting
    lines.append(f"observed: KV cache {'?' if o.kv_cache_tokens is None else format(o.kv_cache_tokens, ',')} tokens, usage "
                 f"{'?' if o.kv_usage_fraction is None else format(o.kv_usage_fraction, '.1%')}, "
                 # a count, summed from a counter's float samples: "preemptions 0.0" had read like a fraction
                 f"preemptions {'?' if o.preemptions is None else format(o.preemptions, ',.0f')}"
                 + (f", acceptance {o.acceptance_rate:.2f}" if o.acceptance_rate is not None else ""))
    lines += [f"! {line}" for line in result.violations]
    lines += [f"  {line}" for line in result.notes]
    return "\n".join(lines) + "\n"
