"""How far the timing model's predictions are from published measurements: the figures `bench/accuracy_serving.py`
measures on the runs it never fitted on, shown beside every simulation so a timing is read with its error band.
Pure: the catalog loads the measured figures (catalog/data/timing_accuracy.json)."""

from __future__ import annotations

from dataclasses import dataclass

METRICS = ("throughput", "ttft", "tpot")
LABELS = {"throughput": "throughput", "ttft": "TTFT", "tpot": "TPOT"}


@dataclass(frozen=True)
class MetricError:
    """One metric over a slice of published runs: predicted / measured - 1 per run."""

    runs: int
    median_abs_error: float  # median |predicted / measured - 1|
    bias: float  # median of predicted / measured - 1 (> 0: the model predicts more than was measured)

    def to_dict(self) -> dict:
        return {"runs": self.runs, "median_abs_error": self.median_abs_error, "bias": self.bias}


@dataclass(frozen=True)
class TimingAccuracy:
    """The simulator against published serving runs it was not fitted on (the held-out slice)."""

    measured_on: str  # the date the bench ran
    source: str  # the command and the runs it read
    throughput: MetricError
    ttft: MetricError
    tpot: MetricError

    def metric(self, name: str) -> MetricError:
        return getattr(self, name)

    def summary(self) -> str:
        """One line: the median |error| and the typical direction of each metric, and where the figures come from."""
        spread = ", ".join(f"{LABELS[m]} {self.metric(m).median_abs_error:.0%}" for m in METRICS)
        # a bias under half a percent reads "+0%", not "-0%" (round first: -0.0049 had printed as "-0%")
        direction = ", ".join(f"{LABELS[m]} {round(100 * self.metric(m).bias) + 0:+d}%" for m in METRICS)
        runs = max(self.metric(m).runs for m in METRICS)
        return (f"timing accuracy (bench/accuracy_serving.py, {self.measured_on}; up to {runs} published serving runs "
                f"the model was not fitted on): median |error| {spread}; typical direction {direction} (negative: "
                f"the simulator predicts less than was measured). Read the timings above as estimates within that "
                f"band, not as measurements")

    def to_dict(self) -> dict:
        return {"measured_on": self.measured_on, "source": self.source,
                **{m: self.metric(m).to_dict() for m in METRICS}}
