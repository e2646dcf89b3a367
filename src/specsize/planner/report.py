"""Everything `specsize report` shows, as data: the analysed plan, curves for the plots, the controls."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.envelope import request_tokens
from ..core.kvcache import request_kv_bytes
from ..core.traffic import decode_context, peak_concurrency
from ..core.units import GiB
from ..core.speculation import Acceptance, Tree
from .compliance import ControlResult, controls
from .perf import SpeedupTable, speedup_table
from .plan import PlanResult, replica_workload


@dataclass(frozen=True)
class GpuBar:
    label: str
    terms: tuple[tuple[str, float], ...]  # (term, GiB) bottom to top
    budget_gib: float
    total_gib: float


@dataclass(frozen=True)
class KvCurve:
    concurrency: tuple[int, ...]
    demand_gib: tuple[tuple[str, tuple[float, ...]], ...]  # (shape label, GiB per concurrency)
    capacity_gib: float
    target: int
    peak: int
    max_num_seqs: int


@dataclass(frozen=True)
class ReportData:
    result: PlanResult
    gpu_bars: tuple[GpuBar, ...]
    kv_curve: KvCurve
    speedup: SpeedupTable | None
    speedup_note: str | None
    controls: tuple[ControlResult, ...]
    acceptance: Acceptance | None


def gpu_bars(r: PlanResult) -> tuple[GpuBar, ...]:
    m = r.memory
    d = r.deployment
    total, budget = m.total_bytes / GiB, m.budget_bytes / GiB
    kv = max(0, m.kv_cache_bytes) / GiB
    common = [("activation peak", m.activation_peak_bytes / GiB), ("non-torch", m.non_torch_bytes / GiB),
              ("CUDA graphs", m.cuda_graph_bytes / GiB)]
    rank0 = [("target weights", m.weights_target_bytes / GiB), ("draft weights", m.weights_draft_bytes / GiB),
             *common, ("KV cache", kv)]
    rank0.append(("free", max(0.0, total - sum(v for _, v in rank0))))
    bars = [GpuBar("GPU 0 (rank 0)" if d.tp > 1 else "GPU", tuple(rank0), budget, total)]
    if d.tp > 1 and d.speculative.kind.own_tp and d.speculative.draft_tp == 1:
        # the other ranks hold no draft: the same number of blocks takes fewer bytes there
        other_kv = m.kv_blocks * m.settings.block_size * m.kv_bytes_per_token_target / GiB
        others = [("target weights", m.weights_target_bytes / GiB), ("draft weights", 0.0), *common,
                  ("KV cache", other_kv)]
        others.append(("free", max(0.0, total - sum(v for _, v in others))))
        bars.append(GpuBar(f"GPUs 1-{d.tp - 1}", tuple(others), budget, total))
    return tuple(bars)


def kv_curve(r: PlanResult) -> KvCurve:
    m = r.memory
    s = m.settings
    w = replica_workload(r.deployment, r.workload)
    peak = peak_concurrency(w.concurrency, w.burst_factor)
    top = max(peak * 2, s.max_num_seqs // 4, 8)
    top = min(top, max(s.max_num_seqs, peak))
    steps = sorted({max(1, round(top * i / 40)) for i in range(41)})
    k = s.num_speculative_tokens
    curves = []
    for label in ("p50", "p99", "max"):
        tokens = request_tokens(s, w.prompt_tokens.at(label), w.output_tokens.at(label))  # as the verdict holds them
        per_request = request_kv_bytes(m.pool_layers, tokens, s.block_size, in_flight=k + 1) / GiB
        curves.append((label, tuple(min(c, s.max_num_seqs) * per_request for c in steps)))
    return KvCurve(concurrency=tuple(steps), demand_gib=tuple(curves), capacity_gib=m.pool_bytes / GiB,
                   target=w.concurrency, peak=peak, max_num_seqs=s.max_num_seqs)


def build_report(result: PlanResult, efficiency, acceptance: Acceptance | None, tree: Tree = Tree(),
                 settings: dict | None = None, security: dict | None = None) -> ReportData:
    """The report's data from an analysed plan (simulation folded in when it ran). `settings`: the request as
    a deployment-file mapping, for the standards mapping's evidence."""
    d, w = result.deployment, result.workload
    table, note = None, None
    if not d.speculative.enabled:
        note = "no speculative method: nothing to price"
    elif acceptance is None:
        note = "acceptance not given: pass --acceptance-rate or --mean-accepted-length (or set it in the file)"
    elif d.gpu.memory_bandwidth_bytes_s <= 0:
        note = "the GPU has no bandwidth figure (--gpu-memory-gib alone)"
    else:
        s = result.memory.settings
        batches = [1]
        while batches[-1] * 2 <= max(s.max_num_seqs, 2):
            batches.append(batches[-1] * 2)
        k_now = d.speculative.num_speculative_tokens
        ks = sorted({1, 2, 3, 4, 6, 8, k_now})
        context = decode_context(w.prompt_tokens.p50, w.output_tokens.p50)
        table = speedup_table(d, result.memory, efficiency, acceptance, batches, ks, context, tree)
    return ReportData(result=result, gpu_bars=gpu_bars(result), kv_curve=kv_curve(result), speedup=table,
                      speedup_note=note, controls=controls(result, settings or {}, security), acceptance=acceptance)
