"""The profiling pass's sampler peak counted by hand (tools/measure_sampler_peak.py `expected_units`, derived in
docs/accounting.md); tests/engine/test_sampler_peak.py checks the same numbers against vLLM's own code."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from measure_sampler_peak import expected_units  # noqa: E402


def test_hand_counts():
    """Worked out by hand in docs/accounting.md: without speculation 6 row-sets with the PyTorch sort, 3.5 in
    place; the profiling pass's one draft token adds 3 (sort) or 4 (in place); d draft tokens 7d - 4 or 3.5d + 0.5."""
    assert expected_units("native", False) == 6.0 and expected_units("triton", False) == 3.5
    assert expected_units("native", True, 1) - expected_units("native", False) == 3.0
    assert expected_units("triton", True, 1) - expected_units("triton", False) == 4.0
    assert expected_units("triton", True, 4) - expected_units("triton", False) == 14.5
    assert expected_units("native", True, 4) - expected_units("native", False) == 24.0
