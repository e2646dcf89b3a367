"""The typed scenario a simulation runs: arrivals, lengths and where each came from.

A scenario says what was simulated in words a reviewer can check ("Poisson 3.2 req/s for 600 s, x1.5 from
200 s for 100 s; prompts lognormal p50 1500 / p99 8000 tokens from the deployment file"), so that a value
given alone never brings in hidden shape from a default without the output saying so.
"""

from __future__ import annotations

from dataclasses import dataclass

from .workload import LengthSpec, RateProfile


def _lengths(spec: LengthSpec | None) -> dict | None:
    if spec is None:
        return None
    out: dict = {"kind": spec.kind, "maximum": spec.maximum}
    if spec.kind == "empirical":
        out["values"] = len(spec.values)
    else:
        out.update(median=spec.median, p99=spec.p99)
    return out


def describe_lengths(spec: LengthSpec | None) -> str:
    if spec is None:
        return "from the trace"
    if spec.kind == "fixed":
        return f"fixed {spec.median:g} token{'' if spec.median == 1 else 's'}"
    if spec.kind == "lognormal":
        return f"lognormal p50 {spec.median:g} / p99 {spec.p99:g} tokens"
    return f"resampled from {len(spec.values):,} values"


@dataclass(frozen=True)
class Scenario:
    arrivals: str  # "poisson", "closed_loop" or "trace"
    duration_s: float
    rate_req_s: float | None  # per replica, before bursts
    rate_source: str  # "rate" (given), "littles_law" (what keeps `concurrency` in flight), "trace", "swept" (a load sweep's rung)
    rates: RateProfile | None
    prompt: LengthSpec | None
    output: LengthSpec | None
    lengths_source: str  # "flags", "lengths_file", "trace", or the workload's source (file, embedded default...)
    burst_source: str | None  # where the burst factor came from, None without a burst
    replicas: int
    trace_path: str | None = None
    requests: int = 0
    clients: int = 0  # closed loop: requests in flight (per replica: the busiest replica's share)
    clients_total: int = 0  # closed loop: the clients of every replica together (0: `clients` x `replicas`)
    # Little's law's rate (rate_source "littles_law"): the requests in flight it keeps, the simulated replica's share
    # (the busiest replica's, rounded up) and every replica's together (0: not known, or `concurrency` x `replicas`)
    concurrency: int = 0
    concurrency_total: int = 0
    # requests longer than max_model_len (prompt + output), a trace's or drawn ones: the engine refuses them (vLLM's
    # OpenAI server answers 400), so they are left out of the run, counted here
    rejected: int = 0
    # where each request's acceptance came from when not the deployment's: "trace" (its acceptance_rate column, which
    # --acceptance-rate does not override); None: the deployment's acceptance, or no speculation
    acceptance_source: str | None = None

    @property
    def description(self) -> str:
        if self.arrivals == "trace":
            share = f", 1/{self.replicas} per replica" if self.replicas > 1 else ""
            acceptance = "; acceptance per request from its acceptance_rate column" \
                if self.acceptance_source == "trace" else ""
            return (f"trace {self.trace_path} ({self.requests:,} request{'' if self.requests == 1 else 's'}{share}"
                    f"{self.refused}{acceptance})")
        # each replica is simulated with its share of the load: the figures are one replica's
        per = f" per replica (x {self.replicas} replicas)" if self.replicas > 1 else ""
        if self.arrivals == "closed_loop":
            if self.replicas > 1 and self.clients_total and self.clients_total != self.clients * self.replicas:
                # fewer clients than replicas, or not a multiple of them: the busiest replica's share, named as such
                # (it had read as clients x replicas: one client over 4 replicas as four)
                total = self.clients_total
                per = (f" per replica ({total} client{'' if total == 1 else 's'} in all over {self.replicas} replicas"
                       f"{'' if self.clients == 1 else ': the busiest replica'})")
            return (f"closed loop: {self.clients} client{'' if self.clients == 1 else 's'}, {self.requests:,} "
                    f"requests{per}{self.refused}")
        assert self.rates is not None and self.rate_req_s is not None
        if self.replicas > 1 and self.concurrency_total and self.concurrency_total != self.concurrency * self.replicas:
            # fewer requests in flight than replicas, or not a multiple of them: the busiest replica's share
            per = (f" per replica (the busiest's share of {self.concurrency_total} in flight over {self.replicas} "
                   "replicas)")
        shape = f"Poisson {self.rate_req_s:.2f} req/s{per} for {self.duration_s:g} s"
        for b in self.rates.bursts:
            shape += f", x{b.factor:g} from {b.start_s:g} s for {b.duration_s:g} s"
        if self.rates.on_off:
            period, on, factor = self.rates.on_off
            shape += f", x{factor:g} for {on:g} s every {period:g} s"
        if self.rates.ramp_to is not None:
            shape += f", ramping to {self.rates.ramp_to:g} req/s" + (" per replica" if self.replicas > 1 else "")
        return shape + self.refused

    @property
    def replica_multiple(self) -> float:
        """How many simulated replicas' load the whole deployment carries: its replicas, or in a closed loop its clients
        over one replica's (one client over 4 replicas keeps one replica busy, not four), or a trace's requests over
        the simulated replica's (every replicas-th, from the first: 2 requests over 4 replicas busy two)."""
        if self.arrivals == "closed_loop" and self.clients_total and self.clients:
            return min(float(self.replicas), self.clients_total / self.clients)
        if self.arrivals == "poisson" and self.concurrency_total and self.concurrency:
            # Little's law at the busiest replica's share: 16 in flight over 64 replicas keep 16 replicas' load
            return min(float(self.replicas), self.concurrency_total / self.concurrency)
        if self.arrivals == "trace" and self.requests:
            return self.requests / -(-self.requests // self.replicas)
        return float(self.replicas)

    @property
    def busy_replicas(self) -> int:
        """How many of the replicas the load reaches: every one, unless fewer requests are in flight (Little's law's
        concurrency, a closed loop's clients) or in the trace than there are replicas, each of which then keeps one
        replica busy (replica_multiple says how many simulated replicas' worth of load they carry: 10 in flight over
        8 replicas busy all 8, with 5 replicas' worth of the busiest's 2)."""
        load = {"closed_loop": self.clients_total, "poisson": self.concurrency_total, "trace": self.requests}
        return min(self.replicas, load.get(self.arrivals) or self.replicas)

    @property
    def refused(self) -> str:
        """The requests left out as longer than max_model_len, as a clause ("" when none)."""
        return f"; {self.rejected:,} longer than max_model_len, which the engine refuses, left out" if self.rejected \
            else ""

    @property
    def summary(self) -> str:
        """One line: arrivals, lengths and their provenance."""
        if self.arrivals == "trace":
            return self.description
        if self.arrivals == "closed_loop":
            return (f"{self.description}; prompts {describe_lengths(self.prompt)}, outputs "
                    f"{describe_lengths(self.output)} (lengths from {self.lengths_source})")
        rate = {"rate": "given", "swept": "the load sweep's, from 1/8 to 8 times its centre"}.get(
            self.rate_source, "Little's law at the workload's concurrency, an open loop: --client-concurrency runs a closed one")
        burst = f"; burst from {self.burst_source}" if self.burst_source else "; no burst"
        return (f"{self.description} (rate: {rate}{burst}); prompts {describe_lengths(self.prompt)}, outputs "
                f"{describe_lengths(self.output)} (lengths from {self.lengths_source})")

    def to_dict(self) -> dict:
        r = self.rates
        return {
            "arrivals": self.arrivals, "duration_s": self.duration_s, "rate_req_s": self.rate_req_s,
            "rate_source": self.rate_source, "replicas": self.replicas, "trace": self.trace_path,
            "clients": self.clients or None, "clients_total": self.clients_total or None,
            "concurrency": self.concurrency or None, "concurrency_total": self.concurrency_total or None,
            "rejected_requests": self.rejected,
            "bursts": [{"start_s": b.start_s, "duration_s": b.duration_s, "factor": b.factor} for b in r.bursts]
            if r else [],
            "on_off": None if r is None or r.on_off is None else
            {"period_s": r.on_off[0], "on_s": r.on_off[1], "factor": r.on_off[2]},
            "ramp_to_req_s": r.ramp_to if r else None, "burst_source": self.burst_source,
            "prompt_tokens": _lengths(self.prompt), "output_tokens": _lengths(self.output),
            "lengths_source": self.lengths_source, "acceptance_source": self.acceptance_source,
            "summary": self.summary,
        }
