"""Request streams for the simulator: arrivals, lengths and per-request acceptance, generated under a seed.

Arrivals are a Poisson process whose rate can change over time (a constant rate, a single spike, on/off
bursts, a linear ramp), drawn by thinning; lengths are fixed, lognormal (from a median and a p99) or
empirical (resampled from given values); acceptance is constant or Beta-distributed around a mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core.errors import SpecError
from ..core.speculation import beta_concentration

Z99 = 2.3263478740408408  # standard normal quantile at 0.99


@dataclass(frozen=True)
class LengthSpec:
    kind: str  # fixed | lognormal | empirical
    median: float = 0.0
    p99: float = 0.0
    values: tuple[int, ...] = ()
    maximum: int | None = None  # clip (e.g. to max_model_len)

    @classmethod
    def lognormal(cls, median: float, p99: float | None = None, maximum: int | None = None) -> "LengthSpec":
        if median < 1:
            raise SpecError("tokens_median", f"must be >= 1, got {median}", "tokens >= 1")
        if p99 is None or p99 <= median:
            if p99 is not None and p99 < median:
                raise SpecError("tokens_p99", f"{p99} is below the median {median}", "p99 >= median")
            return cls("fixed", median=median, p99=median, maximum=maximum)
        return cls("lognormal", median=median, p99=p99, maximum=maximum)

    @property
    def sigma(self) -> float:
        return math.log(self.p99 / self.median) / Z99 if self.kind == "lognormal" else 0.0

    @property
    def mean(self) -> float:
        """What a long run of sampled lengths averages to (before clipping)."""
        if self.kind == "empirical":
            return float(np.mean(self.values))
        return self.median * math.exp(self.sigma ** 2 / 2)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            out = np.full(n, int(round(self.median)), dtype=np.int64)
        elif self.kind == "lognormal":
            out = np.rint(rng.lognormal(math.log(self.median), self.sigma, n)).astype(np.int64)
        elif self.kind == "empirical":
            if not self.values:
                raise SpecError("lengths", "no values to resample", "a non-empty list of token counts")
            out = rng.choice(np.asarray(self.values, dtype=np.int64), size=n, replace=True)
        else:
            raise SpecError("lengths", f"unknown kind {self.kind!r}", "fixed, lognormal, empirical")
        out = np.maximum(out, 1)
        return np.minimum(out, self.maximum) if self.maximum else out


@dataclass(frozen=True)
class Burst:
    start_s: float
    duration_s: float
    factor: float


@dataclass(frozen=True)
class RateProfile:
    """Requests/s over time: base rate x the factor of any burst covering t; or a ramp from base to end."""

    base: float
    bursts: tuple[Burst, ...] = ()
    on_off: tuple[float, float, float] | None = None  # (period s, on s, factor): repeating bursts
    ramp_to: float | None = None  # linear ramp from base (t=0) to ramp_to (t=duration)

    def rate(self, t: np.ndarray, duration: float) -> np.ndarray:
        if self.ramp_to is not None:
            r = self.base + (self.ramp_to - self.base) * np.clip(t / max(duration, 1e-9), 0, 1)
        else:
            r = np.full_like(t, self.base, dtype=float)
        for b in self.bursts:
            r = np.where((t >= b.start_s) & (t < b.start_s + b.duration_s), r * b.factor, r)
        if self.on_off:
            period, on, factor = self.on_off
            r = np.where(np.mod(t, period) < on, r * factor, r)
        return r

    def peak(self) -> float:
        top = max(self.base, self.ramp_to or 0.0)
        for b in self.bursts:
            top = max(top, top * b.factor)
        if self.on_off:
            top *= max(1.0, self.on_off[2])
        return top


@dataclass(frozen=True)
class AcceptanceSpec:
    mean: float  # per-token acceptance rate
    spread: float = 0.0  # standard deviation across requests (Beta-distributed); 0 = constant

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if not 0 <= self.mean <= 1:
            raise SpecError("acceptance_rate", f"must be in [0, 1], got {self.mean}", "a rate in [0, 1]")
        concentration = beta_concentration(self.mean, self.spread)
        if concentration is None:
            return np.full(n, self.mean)
        return rng.beta(self.mean * concentration, (1 - self.mean) * concentration, n)


@dataclass(frozen=True)
class Requests:
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    acceptance: np.ndarray
    duration_s: float
    description: str = field(default="", compare=False)
    clients: int = 0  # > 0: closed loop, `clients` requests in flight, arrival_s ignored (vllm --max-concurrency)

    def __len__(self) -> int:
        return len(self.arrival_s)


def poisson_arrivals(profile: RateProfile, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """Arrival times of a non-homogeneous Poisson process on [0, duration), by thinning."""
    if profile.base < 0 or duration_s <= 0:
        raise SpecError("rate", f"rate {profile.base} and duration {duration_s} must be positive", "> 0")
    peak = profile.peak()
    if peak <= 0:
        return np.zeros(0)
    n = rng.poisson(peak * duration_s)
    t = np.sort(rng.uniform(0.0, duration_s, n))
    keep = rng.uniform(0.0, 1.0, n) < profile.rate(t, duration_s) / peak
    return t[keep]


def generate(profile: RateProfile, duration_s: float, prompt: LengthSpec, output: LengthSpec,
             acceptance: AcceptanceSpec, seed: int) -> Requests:
    rng = np.random.default_rng(seed)
    arrivals = poisson_arrivals(profile, duration_s, rng)
    n = len(arrivals)
    return Requests(arrival_s=arrivals, prompt_tokens=prompt.sample(rng, n), output_tokens=output.sample(rng, n),
                    acceptance=acceptance.sample(rng, n), duration_s=duration_s,
                    description=f"Poisson {profile.base:g} req/s for {duration_s:g} s")


def closed_batch(n: int, prompt: int, output: int, acceptance: float = 0.0) -> Requests:
    """n identical requests all arriving at t = 0."""
    return Requests(arrival_s=np.zeros(n), prompt_tokens=np.full(n, prompt, dtype=np.int64),
                    output_tokens=np.full(n, output, dtype=np.int64), acceptance=np.full(n, acceptance),
                    duration_s=0.0, description=f"closed batch of {n}")


def from_arrays(arrival_s, prompt_tokens, output_tokens, acceptance, description: str = "trace") -> Requests:
    """Requests as given (a trace: the caller leaves out those the engine would refuse, never cuts them to fit)."""
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    outputs = np.asarray(output_tokens, dtype=np.int64)
    arrivals = np.asarray(arrival_s, dtype=float)
    return Requests(arrival_s=arrivals, prompt_tokens=prompts, output_tokens=outputs,
                    acceptance=np.asarray(acceptance, dtype=float),
                    duration_s=float(arrivals[-1]) if len(arrivals) else 0.0, description=description)
