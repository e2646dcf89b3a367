"""Traffic arithmetic with one owner each: peak concurrency, a replica's share, Little's law, decode context.

Before these lived here, four places computed the peak concurrency and disagreed (50 x 1.1 gave 55 or 56).
"""

from __future__ import annotations

import math


def peak_concurrency(concurrency: int, burst_factor: float) -> int:
    """Requests in flight at the burst peak: ceil(concurrency x burst_factor), read as the decimal the user
    wrote (50 x 1.1 is 55, not 56: the float product 55.000000000000007 is rounded to 9 places first)."""
    return max(0, math.ceil(round(concurrency * burst_factor, 9)))


def replica_share(total: int, replicas: int) -> int:
    """One replica's share of `total` concurrent requests spread evenly (rounded up: the busiest replica)."""
    return -(-total // max(1, replicas))


def decode_context(prompt_tokens: float, output_tokens: float) -> int:
    """The mean context a decoding sequence attends over: its prompt plus half its output."""
    return int(prompt_tokens + output_tokens // 2)


def shared_prefill_rate(in_flight: float, latency_s: float, prefill_s: float) -> float:
    """The arrival rate that keeps `in_flight` requests in the system when each takes `latency_s` unshared and every
    arrival adds `prefill_s` of prompt work that stretches all of them: W = E / (1 - rate x P), so by Little's law
    rate = L / (E + L x P), below 1 / P at any load (the envelope's rate: planner.simulate and the search's screen)."""
    return littles_law_rate(in_flight, latency_s + in_flight * prefill_s)


def littles_law_rate(in_flight: float, latency_s: float) -> float:
    """Little's law, L = lambda x W: the arrival rate (requests/s) that keeps `in_flight` requests in the
    system when each stays `latency_s` seconds."""
    if not latency_s > 0:
        return math.inf
    return in_flight / latency_s
