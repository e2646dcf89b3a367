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


def test_measured_rejection_sampler_term_by_hand():
    """specsize's profiled speculation term, the measured form (spec_profile_base_coef + per draft x drafts) at k
    drafts per sequence, which the shipped V1 profiles use (engines/vllm.py): Qwen3-8B, 256 sequences, k 4 is
    (0.5 + 3.5 x 4) x 256 x 151,936 x 4 bytes; the pass covered 256 x (1 + 14.5 / 3.68) = 1,264.7 of the
    min(256 x 5, 2048) = 1,280 rows a verification step scores, at 3.68 row-sets a row (the sampler step's fitted
    cost): (1,280 x 3.68 - 256 x 3.68 - 256 x 14.5) x 607,744 = 56.32 x 607,744 bytes are left unprofiled."""
    from specsize.core.memory import account

    from helpers import deployment, profile

    d = deployment("Qwen/Qwen3-8B", gpu="L4-24GB", method="ngram", k=4, max_num_seqs=256, max_model_len=8192)
    m = account(d, profile("0.32"))
    assert m.activation_terms["speculation"] == 2_255_945_728  # 14.5 x 155,582,464
    assert abs(m.unprofiled_runtime_bytes - 56.32 * 607_744) <= 1
    # V0 keeps its one fitted row-set: 256 x 151,936 x 4 = 155,582,464 bytes
    assert account(d, profile("0.6.4")).activation_terms["speculation"] == 155_582_464
