"""Where speculation stops paying as the load grows: the spec / no-spec simulation at a ladder of request rates,
and the rate where the speculative server's mean end-to-end latency reaches the plain server's.

Pure: the caller hands in `evaluate(rate) -> LoadPoint` (api.stops_paying runs the simulator there). The ladder
is `centre x factor^j` for j = -steps..steps; the first rung pair whose latency ratio crosses 1 is bisected
`refine` times, and the crossing is read linearly between the two rates that bracket it (as bench/accuracy_serving.py
reads it from published sweeps). docs/simulation.md: "Where speculation stops paying".
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from .simulate import SimSummary

STOPS = 1.0  # the latency ratio (speculation / none) at which speculation no longer pays
MAX_RUNG_DURATION_S = 3_600  # a sweep runs about twenty simulations: an hour each takes about two minutes here


@dataclass(frozen=True)
class LoadPoint:
    rate_req_s: float
    e2e_spec_s: float | None  # mean end-to-end latency, speculation
    e2e_plain_s: float | None  # the same server without speculation
    tpot_spec_s: float | None  # median TPOT
    tpot_plain_s: float | None
    sustains_spec: bool
    sustains_plain: bool

    @property
    def ratio(self) -> float | None:
        """Mean end-to-end latency with speculation / without (below 1: speculation pays)."""
        if self.e2e_spec_s is None or not self.e2e_plain_s:
            return None
        return self.e2e_spec_s / self.e2e_plain_s

    @property
    def tpot_ratio(self) -> float | None:
        if self.tpot_spec_s is None or not self.tpot_plain_s:
            return None
        return self.tpot_spec_s / self.tpot_plain_s

    def to_dict(self) -> dict:
        return {"rate_req_s": self.rate_req_s, "e2e_mean_s": {"spec": self.e2e_spec_s, "no_spec": self.e2e_plain_s},
                "tpot_p50_s": {"spec": self.tpot_spec_s, "no_spec": self.tpot_plain_s},
                "latency_ratio": self.ratio, "tpot_ratio": self.tpot_ratio,
                "sustains": {"spec": self.sustains_spec, "no_spec": self.sustains_plain}}


@dataclass(frozen=True)
class LoadSweep:
    points: tuple[LoadPoint, ...]  # every rate simulated, ascending
    stops_paying_req_s: float | None  # where the latency ratio reaches 1; None: not within the rates tried
    centre_req_s: float
    centre_source: str  # "rate" (given) or "littles_law" (what keeps `concurrency` in flight)
    scenario: str = ""  # what each simulation ran, besides its rate

    @property
    def verdict(self) -> str:
        lo, hi = self.points[0], self.points[-1]
        if self.stops_paying_req_s is not None:
            if lo.ratio is not None and lo.ratio >= STOPS:
                return f"speculation does not pay even at {lo.rate_req_s:.3g} req/s, the lowest load tried"
            above = next((p for p in self.points if p.rate_req_s >= self.stops_paying_req_s), self.points[-1])
            plain = "" if above.sustains_plain else (f"; at {above.rate_req_s:.3g} req/s the server without "
                                                     "speculation does not sustain the load either")
            return f"speculation stops paying at about {self.stops_paying_req_s:.3g} req/s{plain}"
        return f"speculation still pays at {hi.rate_req_s:.3g} req/s, the highest load tried"

    def to_dict(self) -> dict:
        return {"stops_paying_req_s": self.stops_paying_req_s, "verdict": self.verdict,
                "centre_req_s": self.centre_req_s, "centre_source": self.centre_source, "scenario": self.scenario,
                "points": [p.to_dict() for p in self.points]}


def load_point(rate: float, spec: SimSummary, plain: SimSummary) -> LoadPoint:
    """One rung: the speculative run and the plain one at `rate`."""
    return LoadPoint(rate_req_s=rate, e2e_spec_s=spec.e2e_s.mean, e2e_plain_s=plain.e2e_s.mean,
                     tpot_spec_s=spec.tpot_s.p50, tpot_plain_s=plain.tpot_s.p50, sustains_spec=spec.sustains,
                     sustains_plain=plain.sustains)


def crossing_rate(rates: list[float], ratios: list[float | None], stops: float = STOPS) -> float | None:
    """The rate where the ratio first reaches `stops`, linear between the two rates around it (rates ascending,
    a None ratio skipped); the lowest rate when it is already there; None when no ratio reaches it."""
    known = [(rate, ratio) for rate, ratio in zip(rates, ratios) if ratio is not None]
    if known and known[0][1] >= stops:
        return known[0][0]
    for (l0, r0), (l1, r1) in zip(known, known[1:]):
        if r0 < stops <= r1:
            return l0 + (l1 - l0) * (stops - r0) / (r1 - r0)
    return None


def crossing(points: list[LoadPoint]) -> float | None:
    """`crossing_rate` of the points' latency ratios."""
    return crossing_rate([p.rate_req_s for p in points], [p.ratio for p in points])


FACTOR, STEPS = 2.0, 3  # the ladder: centre x 2^-3 .. centre x 2^3


def ladder(centre: float, max_rate: float = math.inf, factor: float = FACTOR, steps: int = STEPS) -> list[float]:
    """The rates the sweep simulates first, lowest to highest (no rung above `max_rate`)."""
    return sorted({min(centre * factor ** j, max_rate) for j in range(-steps, steps + 1)})


def sweep_loads(evaluate: Callable[[float], LoadPoint], centre: float, centre_source: str, scenario: str = "",
                factor: float = FACTOR, steps: int = STEPS, refine: int = 3,
                progress: Callable[[int, int], None] | None = None, max_rate: float = math.inf) -> LoadSweep:
    """Simulate the ladder centre x factor^-steps .. centre x factor^steps (no rung above `max_rate`, the highest rate
    a simulation takes), then bisect the first rung pair whose latency ratio crosses 1 `refine` times."""
    rates = ladder(centre, max_rate, factor, steps)
    total = len(rates) + refine
    points: list[LoadPoint] = []
    for i, rate in enumerate(rates):
        points.append(evaluate(rate))
        if progress is not None:
            progress(i + 1, total)
    done = len(rates)
    for _ in range(refine):
        known = [p for p in points if p.ratio is not None]
        bracket = next(((a, b) for a, b in zip(known, known[1:])
                        if a.ratio < STOPS <= b.ratio), None)  # type: ignore[operator]
        if bracket is None:
            break
        a, b = bracket
        points.append(evaluate((a.rate_req_s * b.rate_req_s) ** 0.5))  # the geometric middle of the rung
        points.sort(key=lambda p: p.rate_req_s)
        done += 1
        if progress is not None:
            progress(done, total)
    return LoadSweep(points=tuple(points), stops_paying_req_s=crossing(points), centre_req_s=centre,
                     centre_source=centre_source, scenario=scenario)
