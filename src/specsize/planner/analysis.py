"""Everything `specsize plan` adds around the verdict: ranked fixes, robustness margins, placement,
failover, storage and cold start, and the engine commands to deploy with."""

from __future__ import annotations

from dataclasses import replace

from ..core.memory import AccountingProfile
from ..engines.emit import sglang_command, vllm_command
from .perf import Acceptance
from .placement import StartupCosts, place
from .plan import PlanResult
from .recommend import recommend
from .robustness import analyse


def analyse_plan(result: PlanResult, profile: AccountingProfile, efficiency=None,
                 acceptance: Acceptance | None = None, *, emit: tuple[str, ...] = ("vllm", "sglang"),
                 gpus_per_node: int = 8, spare: int = 1, failure_unit: str = "replica",
                 storage_bandwidth_bytes_s: float = 2e9, ttft_slo_s: float | None = None,
                 tpot_slo_s: float | None = None, startup: StartupCosts = StartupCosts(),
                 fragile_below: float = 0.15) -> PlanResult:
    recs = tuple(recommend(result, profile, efficiency, acceptance))
    robust = analyse(result, efficiency, acceptance, tpot_slo_s=tpot_slo_s, fragile_below=fragile_below)
    spare = spare if result.deployment.replicas > 1 else 0
    placement = place(result, profile, gpus_per_node=gpus_per_node, spare=spare, unit=failure_unit,
                      storage_bandwidth_bytes_s=storage_bandwidth_bytes_s, costs=startup, efficiency=efficiency,
                      acceptance=acceptance, ttft_slo_s=ttft_slo_s)
    commands = []
    for engine in emit:
        maker = {"vllm": vllm_command, "sglang": sglang_command}[engine]
        try:
            commands.append(maker(result.deployment, result.memory))
        except Exception:  # an engine without this method: the other command still stands
            continue
    return replace(result, recommendations=recs, robustness=robust, placement=placement, commands=tuple(commands))
