"""The JSON contract of `specsize plan` (docs/json.md). Add fields freely; never rename or remove one."""

from __future__ import annotations

import math
from dataclasses import asdict

from ..core.envelope import EnvelopeCase, verdict_for
from ..planner.plan import PlanResult
from .jsonsafe import dumps

SCHEMA_VERSION = "1.0"


def _finite(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


def headroom_json(x: float, policy: float) -> float | None:
    """A headroom at six decimals, more where rounding would carry it across the policy or 0 (core.envelope.verdict_for,
    as headroom_text does for the text): 0.13256641 under a policy of 0.1325664 fits, and its JSON had said 0.132566,
    below the policy it met, a figure every reader of the JSON (the service's pages among them) took for THIN."""
    if not math.isfinite(x):
        return None
    for digits in range(6, 17):
        shown = round(x, digits)
        if verdict_for(shown, policy) == verdict_for(x, policy):
            return shown
    return x


def _case(c: EnvelopeCase, policy: float) -> dict:
    return {
        "percentile": c.percentile, "prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens,
        "requested_concurrency": c.requested_concurrency, "concurrency": c.concurrency, "queued": c.queued,
        "demand_bytes": c.demand_bytes, "capacity_bytes": c.capacity_bytes,
        "headroom_fraction": headroom_json(c.headroom_fraction, policy),
    }


def perf_to_dict(r: PlanResult) -> dict | None:
    p = r.perf
    if p is None:
        return None
    gpus = r.deployment.gpus_per_instance
    out = asdict(p)
    out["throughput_tok_s_per_gpu"] = p.throughput_tok_s / gpus if p.throughput_tok_s is not None else None
    out["throughput_tok_s_no_spec_per_gpu"] = p.throughput_tok_s_no_spec / gpus
    return out


def _simulation(r: PlanResult) -> dict | None:
    if r.simulation is None:
        return None
    from ..planner.simulate import report_to_dict  # noqa: PLC0415

    return report_to_dict(r.simulation)


def _acceptance_rate(r: PlanResult) -> float | None:
    """The per-token acceptance the plan was given (converted from a mean accepted length if need be)."""
    if r.acceptance is None or not r.deployment.speculative.enabled:
        return None
    return r.acceptance.per_token(r.deployment.speculative.num_speculative_tokens)


def _robustness(r: PlanResult) -> dict | None:
    rob = r.robustness
    if rob is None:
        return None
    return {"margins": [asdict(m) for m in rob.margins], "acceptance_floor": rob.acceptance_floor,
            "acceptance_current": rob.acceptance_current, "speculation_pays": rob.speculation_pays,
            "fragile": rob.fragile, "fragile_reasons": list(rob.fragile_reasons)}


def _placement(r: PlanResult) -> dict | None:
    p = r.placement
    if p is None:
        return None
    st = p.storage
    out = {"gpus_per_node": p.gpus_per_node, "nodes": p.nodes, "replicas_per_node": list(p.replicas_per_node),
           "nodes_per_replica": p.nodes_per_replica, "gpus_used_per_node": list(p.gpus_used_per_node),
           "layout": p.layout,
           "storage": {"artefacts": [asdict(a) for a in st.artefacts], "disk_bytes_per_node": st.disk_bytes_per_node,
                       "host_ram_bytes_per_node": st.host_ram_bytes_per_node,
                       "read_bytes_per_node": st.read_bytes_per_node, "cold_start_s": st.cold_start_s,
                       "cold_start_cached_s": st.cold_start_cached_s},
           "failover": None}
    if p.failover is not None:
        f = asdict(p.failover)
        f["headroom"] = headroom_json(f["headroom"], r.verdict.headroom_policy)
        for key in ("backlog_requests", "added_wait_s"):
            f[key] = f[key] if math.isfinite(f[key]) else None
        out["failover"] = f
    return out


def _hybrid(m) -> dict | None:
    """Models with linear-attention / state-space layers: the per-sequence state and the pool that holds it."""
    if not m.state_blocks_per_sequence:
        return None
    return {"state_layers": sum(1 for layer in m.kv_layers if layer.kind == "state"),
            "state_bytes_per_sequence": m.state_bytes_per_sequence,
            "state_blocks_per_sequence": m.state_blocks_per_sequence, "bytes_per_block": m.bytes_per_block,
            "kv_cache_groups": m.kv_cache_groups, "max_sequences": m.max_sequences}


def plan_to_dict(r: PlanResult) -> dict:
    m, v, d, s = r.memory, r.verdict, r.deployment, r.memory.settings
    sp = d.speculative
    w = r.workload
    return {
        "schema_version": SCHEMA_VERSION,
        "verdict": v.verdict,
        "headroom_fraction": headroom_json(v.worst_case.headroom_fraction, v.headroom_policy),
        "headroom_policy": v.headroom_policy,
        "breaks_first": v.breaks_first,
        "reasons": list(v.reasons),
        "warnings": list(r.warnings),
        "notes": list(r.notes),
        "kv_cache_tokens": m.kv_cache_tokens,
        "kv_blocks": m.kv_blocks,
        "block_size": s.block_size,
        "max_concurrency": round(m.max_concurrency, 4) if math.isfinite(m.max_concurrency) else None,
        "max_concurrency_tokens": s.max_model_len,
        "kv_bytes_per_token": {"target": m.kv_bytes_per_token_target, "draft": m.kv_bytes_per_token_draft,
                               "total": m.kv_bytes_per_token},
        "hybrid": _hybrid(m),
        "per_gpu": {
            "total_bytes": m.total_bytes, "budget_bytes": m.budget_bytes,
            "weights_target_bytes": m.weights_target_bytes, "weights_draft_bytes": m.weights_draft_bytes,
            "activation_peak_bytes": m.activation_peak_bytes, "non_torch_bytes": m.non_torch_bytes,
            "cuda_graph_bytes": m.cuda_graph_bytes, "cuda_graph_in_budget": m.cuda_graph_counted,
            "kv_cache_bytes": m.kv_cache_bytes, "kv_pool_bytes": m.pool_bytes,
            "used_bytes": m.used_bytes, "free_bytes": m.free_bytes,
            "unprofiled_runtime_bytes": m.unprofiled_runtime_bytes,
            "weights_target_detail": {k: val for k, val in asdict(m.weights_target).items()},
            "activation_detail": dict(m.activation_terms),
            "engine_terms": dict(m.engine_terms),
        },
        "perf": perf_to_dict(r),
        "simulation": _simulation(r),
        "recommendations": [asdict(x) | {"headroom_after": headroom_json(x.headroom_after, v.headroom_policy),
                                         "headroom_gained": _finite(x.headroom_gained)} for x in r.recommendations],
        "robustness": _robustness(r),
        "placement": _placement(r),
        "engine_commands": [{"engine": c.engine, "versions": c.versions, "argv": list(c.argv), "shell": c.shell,
                             "config_yaml": c.config_yaml} for c in r.commands],
        "envelope": _case(v.worst_case, v.headroom_policy),
        "expected": _case(v.expected, v.headroom_policy),
        "shapes": [asdict(shape) for shape in v.shapes],
        "engine": {"name": r.profile.engine, "profile_version": r.profile.version, "profile": r.profile.label,
                   "sources": list(r.profile.sources)},
        "gpus": {"gpu": d.gpu.gpu_id, "per_instance": d.gpus_per_instance, "replicas": d.replicas,
                 "total": d.replicas * d.gpus_per_instance},
        "inputs": {
            "target": d.target.model_id, "target_source": d.target.source,
            "draft": sp.draft.model_id if sp.draft else None, "method": sp.method,
            "num_speculative_tokens": sp.num_speculative_tokens, "proposal_rate": sp.proposal_rate,
            "tree_topk": sp.tree_topk, "num_draft_tokens": sp.num_draft_tokens,
            "draft_tp": sp.draft_tp,
            "gpu": d.gpu.gpu_id, "gpu_memory_bytes": d.gpu.memory_bytes, "gpu_memory_source": d.gpu.sources.get("memory"),
            "tp": d.tp, "pp": d.pp, "expert_parallel": d.expert_parallel, "gpus": d.num_gpus,
            "gpu_memory_utilization": s.gpu_memory_utilization, "max_model_len": s.max_model_len,
            "max_num_seqs": s.max_num_seqs, "max_num_batched_tokens": s.max_num_batched_tokens,
            "block_size": s.block_size, "dtype": s.dtype, "kv_cache_dtype": s.kv_cache_dtype,
            "quantization": s.quantization.method if s.quantization else None,
            "enforce_eager": s.enforce_eager, "num_scheduler_steps": s.scheduler_steps,
            "chunked_prefill": d.engine.chunked_prefill, "cpu_isa": d.engine.cpu_isa,
            "scheduler_recv_interval": s.recv_interval, "stream_interval": s.stream_interval,
            "kv_cache_memory_bytes": d.engine.kv_cache_memory_bytes,
            "device": d.engine.device,
            "workload": {
                "prompt_tokens": asdict(w.prompt_tokens), "output_tokens": asdict(w.output_tokens),
                "concurrency": w.concurrency, "burst_factor": w.burst_factor, "percentile": w.percentile,
                "image_tokens_per_request": w.image_tokens_per_request,
            },
            "headroom": v.headroom_policy,
            "acceptance_rate": _acceptance_rate(r),
            "acceptance_source": r.acceptance.source if r.acceptance is not None else None,
        },
    }


def render(r: PlanResult) -> str:
    return dumps(plan_to_dict(r))
