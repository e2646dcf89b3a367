"""The typed result of planning one deployment. Everything a report shows is a field here first; renderers
(specsize.reports) only format it. `to_dict()` is exactly the JSON of `specsize plan --format json`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.envelope import Verdict
from ..core.memory import AccountingProfile, MemoryAccount
from ..core.specs import Deployment, Workload
from ..core.speculation import Acceptance
from .perf import PerfSummary

if TYPE_CHECKING:  # the sections' types; imported lazily at run time to keep `plan` light
    from ..engines.emit import EngineCommand
    from .placement import Placement
    from .recommend import Recommendation
    from .robustness import Robustness
    from .simulate import SimulationReport


@dataclass(frozen=True)
class PlanResult:
    deployment: Deployment
    workload: Workload
    profile: AccountingProfile
    memory: MemoryAccount
    verdict: Verdict
    warnings: tuple[str, ...]
    perf: PerfSummary | None = None
    simulation: SimulationReport | None = None  # with `plan --simulate`
    recommendations: tuple[Recommendation, ...] = ()  # ranked
    robustness: Robustness | None = None
    placement: Placement | None = None
    commands: tuple[EngineCommand, ...] = ()
    acceptance: Acceptance | None = None  # the acceptance the plan was given, with its provenance
    notes: tuple[str, ...] = ()  # what the inputs left to defaults (printed on stderr by the CLI)

    def to_dict(self) -> dict:
        """The JSON contract of `specsize plan` (docs/json.md), as plain JSON types."""
        import json  # noqa: PLC0415

        from ..reports.jsonout import render  # noqa: PLC0415 - the contract's one owner

        return json.loads(render(self))
