"""specsize: will a speculative-decoding deployment fit, with headroom, at the load you expect?

The public surface (see README, "Python API"):

    import specsize
    request = specsize.load_request("deployment.yaml", concurrency=64)   # a file and/or field overrides
    result = specsize.plan(request)                                      # a PlanResult
    result.verdict.verdict                                               # "fits" / "thin" / "does_not_fit"
    result.to_dict()                                                     # == `specsize plan --format json`

Names load lazily, so `import specsize` (and the CLI) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Request", "load_request", "plan", "simulate", "speedup", "stops_paying", "report", "search", "check_live",
           "PlanResult", "SimulationReport", "SpeedupReport", "LoadSweep", "ReportData", "SearchResult", "LiveCheck",
           "SpecError", "SpecMethod", "Acceptance", "__version__"]

if TYPE_CHECKING:
    from .api import (LiveCheck, LoadSweep, PlanResult, ReportData, Request, SearchResult,  # noqa: F401
                      SimulationReport, SpeedupReport, check_live, load_request, plan, report, search, simulate,
                      speedup, stops_paying)
    from .core.errors import SpecError  # noqa: F401
    from .core.speculation import Acceptance, SpecMethod  # noqa: F401


def __getattr__(name: str) -> Any:
    if name in ("SpecError",):
        from .core import errors  # noqa: PLC0415

        return getattr(errors, name)
    if name in ("SpecMethod", "Acceptance"):
        from .core import speculation  # noqa: PLC0415

        return getattr(speculation, name)
    if name in __all__:
        from . import api  # noqa: PLC0415

        return getattr(api, name)
    raise AttributeError(f"module 'specsize' has no attribute {name!r}")
