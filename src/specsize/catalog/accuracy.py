"""The timing model's measured accuracy (catalog/data/timing_accuracy.json, written by
`bench/accuracy_serving.py --write-accuracy`) as a core.accuracy.TimingAccuracy."""

from __future__ import annotations

from functools import lru_cache

from ..core.accuracy import METRICS, MetricError, TimingAccuracy
from .files import RowCheck, packaged_json

ACCURACY_FILE = "timing_accuracy.json"


def _metric(held: RowCheck, name: str) -> MetricError:
    row = RowCheck(ACCURACY_FILE, "held_out", held.mapping(name), prefix=f"{name}.")
    return MetricError(runs=int(row.number("runs", integer=True) or 0),
                       median_abs_error=float(row.number("median_abs_error", inclusive=True) or 0.0),
                       bias=float(row.number("bias", minimum=-1.0, inclusive=True) or 0.0))


def timing_accuracy_from(data: object) -> TimingAccuracy:
    """The file's content, checked: a bad one raises SpecError naming the file and the key."""
    top = RowCheck(ACCURACY_FILE, "", data)
    held = RowCheck(ACCURACY_FILE, "", top.mapping("held_out"), prefix="held_out.")
    metrics = {m: _metric(held, m) for m in METRICS}
    return TimingAccuracy(measured_on=top.text("measured_on") or "", source=top.text("source") or "", **metrics)


@lru_cache(maxsize=1)
def load_timing_accuracy() -> TimingAccuracy:
    return timing_accuracy_from(packaged_json(ACCURACY_FILE))
