"""vLLM's own sampler and rejection sampler, run as its profiling pass runs them (issue #12): the live-bytes peak
measured by tools/measure_sampler_peak.py in the engine's environment, against the count done by hand from the
source (the tool's `expected_units`, docs/accounting.md), and against the speculation term specsize uses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specsize.engines import resolve_profile

from test_real_engine import ENGINE_PYTHON, ROOT

sys.path.insert(0, str(ROOT / "tools"))
from measure_sampler_peak import expected_units  # noqa: E402

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not Path(ENGINE_PYTHON).exists(),
                       reason="vLLM is not installed in the engine environment: run `python3 dev.py engine-env`"),
]

VOCABS = (32000, 50257)
ROWS = (8, 24)
DRAFTS = (1, 2, 4)


@pytest.fixture(scope="module")
def measured() -> list[dict]:
    argv = [ENGINE_PYTHON, str(ROOT / "tools" / "measure_sampler_peak.py"), "--vocab", *map(str, VOCABS),
            "--rows", *map(str, ROWS), "--path", "native", "triton", "--drafts", *map(str, DRAFTS)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(VOCABS) * len(ROWS) * 2 * len(DRAFTS)
    return rows


def test_peak_is_a_constant_number_of_vocab_rows(measured):
    """The peak is c x R x V x 4 bytes, c the same for every R and V (to the few hundred bytes of per-request
    tensors), and c is what the hand count gives."""
    for row in measured:
        unit = row["rows"] * row["vocab"] * 4
        assert row["peak_nospec"] == pytest.approx(expected_units(row["path"], False) * unit, rel=2e-3), row
        assert row["peak_spec"] == pytest.approx(expected_units(row["path"], True, row["drafts"]) * unit,
                                                 rel=2e-3), row


def test_specsize_speculation_term_is_the_measured_one(measured):
    """The V1 profiles reserve the rejection sampler at k drafts per sequence (engines/vllm.py): base + per draft x
    d fp32 row-sets must be what vLLM's own code peaks at beyond the plain sampler, for every d measured (top-k /
    top-p in place, as on CUDA)."""
    p = resolve_profile("vllm", "0.32")
    assert p.spec_profile_k_aware
    for row in (r for r in measured if r["path"] == "triton"):
        assert p.spec_profile_base_coef + p.spec_profile_vocab_coef * row["drafts"] == pytest.approx(
            row["c_delta"], abs=0.01), row
