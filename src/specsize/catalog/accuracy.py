"""The timing model's measured accuracy (catalog/data/timing_accuracy.json, written by
`bench/accuracy_serving.py --write-accuracy`) as a core.accuracy.TimingAccuracy."""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

from ..core.accuracy import METRICS, MetricError, TimingAccuracy
from .files import catalog_error, packaged_json

ACCURACY_FILE = "timing_accuracy.json"


def _metric(data: dict, name: str) -> MetricError:
    row = data.get(name)
    accepted = '{"runs": N > 0, "median_abs_error": x >= 0, "bias": x >= -1}'
    if not isinstance(row, dict):
        raise catalog_error(ACCURACY_FILE, name, "missing or not an object", accepted)
    runs, err, bias = row.get("runs"), row.get("median_abs_error"), row.get("bias")
    if not (isinstance(runs, int) and not isinstance(runs, bool) and runs > 0):
        raise catalog_error(ACCURACY_FILE, name, f"runs must be a positive integer, got {runs!r}", accepted)
    checked = {}
    for field, value, low in (("median_abs_error", err, 0.0), ("bias", bias, -1.0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < low:
            raise catalog_error(ACCURACY_FILE, name, f"{field} must be a finite number >= {low:g}, got {value!r}",
                                accepted)
        checked[field] = float(value)
    return MetricError(runs=runs, median_abs_error=checked["median_abs_error"], bias=checked["bias"])


def timing_accuracy_from(data: object) -> TimingAccuracy:
    """The file's content, checked: a bad one raises SpecError naming the file and the metric."""
    if not isinstance(data, dict) or not isinstance(data.get("held_out"), dict):
        raise catalog_error(ACCURACY_FILE, None, "must be a JSON object with a 'held_out' object",
                            '{"measured_on": ..., "source": ..., "held_out": {"throughput": ..., "ttft": ..., '
                            '"tpot": ...}}')
    held = data["held_out"]
    return TimingAccuracy(measured_on=str(data.get("measured_on", "")), source=str(data.get("source", "")),
                          **{m: _metric(held, m) for m in METRICS})


@lru_cache(maxsize=1)
def load_timing_accuracy() -> TimingAccuracy:
    return timing_accuracy_from(packaged_json(ACCURACY_FILE))
