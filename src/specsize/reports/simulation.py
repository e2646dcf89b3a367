"""Rendering of `specsize simulate`: JSON (docs/json.md) or a side-by-side text table."""

from __future__ import annotations


from ..planner.simulate import SimSummary, SimulationReport
from ..simulator.scenario import Scenario
from .jsonsafe import dumps


def _ms(x):
    return "-" if x is None else f"{x * 1e3:,.1f}"


def _s(x):
    return "-" if x is None else f"{x:,.2f}"


def speculates(run: SimSummary) -> bool:
    """Whether the run drafted: a deployment without speculation simulates its one run under the label none."""
    return run.label != "none"


def run_label(run: SimSummary) -> str:
    return f"{run.label} ({'speculation' if speculates(run) else 'no speculation'})"


def _fleet_label(scenario: Scenario | None) -> str:
    """The row of the whole deployment's throughput: "all 8 replicas" had headed 3 requests in flight over 8 replicas,
    whose figure (3 x the busiest replica's) is 3 busy replicas'."""
    replicas = scenario.replicas if scenario is not None else 1
    busy = scenario.busy_replicas if scenario is not None else replicas
    return f"all {replicas} replicas, tok/s" if busy >= replicas else f"all {replicas} replicas ({busy} busy), tok/s"


def render(rep: SimulationReport, fmt: str) -> str:
    if fmt == "json":
        return dumps({"schema_version": "1.0", "sim": rep.to_dict()})
    runs = [rep.spec] + ([rep.no_spec] if rep.no_spec else [])
    replicas = rep.scenario.replicas if rep.scenario is not None else 1
    # the whole deployment's load in simulated replicas (Scenario.replica_multiple): fewer than `replicas` where a
    # closed loop's clients do not fill every replica with the simulated one's share
    multiple = rep.scenario.replica_multiple if rep.scenario is not None else 1.0
    header = [f"one replica of {replicas}" if replicas > 1 else "", *(run_label(r) for r in runs)]
    rows = [
        ["requests completed", *(f"{r.completed:,} / {r.requests:,}" for r in runs)],
        ["TTFT p50 / p99 ms", *(f"{_ms(r.ttft_s.p50)} / {_ms(r.ttft_s.p99)}" for r in runs)],
        ["TPOT p50 / p99 ms", *(f"{_ms(r.tpot_s.p50)} / {_ms(r.tpot_s.p99)}" for r in runs)],
        ["E2E p50 / p99 s", *(f"{_s(r.e2e_s.p50)} / {_s(r.e2e_s.p99)}" for r in runs)],  # "-": none finished
        ["throughput tok/s", *(f"{r.throughput_tok_s:,.0f}" for r in runs)],
        *([[_fleet_label(rep.scenario), *(f"{r.throughput_tok_s * multiple:,.0f}" for r in runs)]]
          if replicas > 1 else []),
        ["goodput req/s", *("-" if r.goodput_req_s is None else f"{r.goodput_req_s:,.2f}" for r in runs)],
        ["preemptions (recomputed tokens)", *(f"{r.preemptions:,} ({r.recomputed_tokens:,})" for r in runs)],
        ["max queue", *(f"{r.max_queue:,}" for r in runs)],
        ["KV peak occupancy", *(f"{r.kv_peak_fraction:.1%}" for r in runs)],
        ["engine steps", *(f"{r.steps:,}" for r in runs)],
        ["sustains the load", *("yes" if r.sustains else "NO" for r in runs)],
    ]
    widths = [max(len(str(row[i])) for row in [header] + rows) for i in range(len(header))]
    scenario = rep.scenario.summary if rep.scenario is not None else rep.description
    lines = [f"scenario: {scenario} (seed {rep.seed})", ""]
    lines.append("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    for row in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    for r in runs:
        for problem in r.problems:
            lines.append(f"! {r.label}: {problem}")
    lines.append("TPOT here is what requests saw: decode steps shared with other requests' prefill chunks, at the "
                 "batch the load built up; the plan's perf section is steady decode at the expected batch, without "
                 "prefill interference or queueing.")
    if rep.accuracy is not None:
        lines.append(rep.accuracy.summary() + ".")
    return "\n".join(lines) + "\n"
