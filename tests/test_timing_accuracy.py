"""The timing model's measured accuracy, shown beside every simulation (core/accuracy.py,
catalog/data/timing_accuracy.json written by bench/accuracy_serving.py --write-accuracy)."""

from __future__ import annotations

import json

import pytest

from specsize.catalog.accuracy import load_timing_accuracy, timing_accuracy_from
from specsize.core.errors import SpecError

from helpers import bench_module


def _bench():
    return bench_module("accuracy_serving")


def test_bench_record_by_hand():
    # errors (predicted / measured - 1) of three held-out runs: throughput +10%, -30%, +20% -> median |error| 20%,
    # median +10%; TPOT -50%, +10% -> median |error| (0.5 + 0.1) / 2 = 30%, median (-0.5 + 0.1) / 2 = -20%
    errs = {("heldout", "throughput"): [0.1, -0.3, 0.2], ("heldout", "ttft"): [0.4], ("heldout", "tpot"): [-0.5, 0.1],
            ("heldout poisson", "ttft"): [0.4], ("fit", "throughput"): [0.05]}
    record = _bench().accuracy_record(errs, "2026-12-03", "a hand-made set")
    assert record["held_out"]["throughput"] == {"runs": 3, "median_abs_error": 0.2, "bias": 0.1}
    assert record["held_out"]["tpot"] == {"runs": 2, "median_abs_error": 0.3, "bias": -0.2}
    assert record["held_out_no_bursts"] == {"ttft": {"runs": 1, "median_abs_error": 0.4, "bias": 0.4}}
    assert record["fit"] == {"throughput": {"runs": 1, "median_abs_error": 0.05, "bias": 0.05}}
    # the file the bench writes is the file the tool reads
    acc = timing_accuracy_from(json.loads(json.dumps(record)))
    assert (acc.throughput.median_abs_error, acc.tpot.bias, acc.ttft.runs) == (0.2, -0.2, 1)
    line = acc.summary()
    assert "median |error| throughput 20%, TTFT 40%, TPOT 30%" in line
    assert "typical direction throughput +10%, TTFT +40%, TPOT -20%" in line and "up to 3 published" in line
    # a bias under half a percent either way reads +0%, never "-0%"
    near_zero = timing_accuracy_from({**record, "held_out": {**record["held_out"], "tpot": {
        "runs": 2, "median_abs_error": 0.3, "bias": -0.0049}}})
    assert "TPOT +0%" in near_zero.summary() and "-0%" not in near_zero.summary()


def test_the_issue_shaped_slice():
    # issue #11's own set: runs at a rate, a concurrency or offline, of Llama / Qwen / gpt-oss, on A100-MI300X GPUs
    bench = _bench()
    row = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "engine": "vLLM", "request_rate": 4, "max_concurrency": None}
    assert bench.issue_shaped(row)
    assert not bench.issue_shaped({**row, "request_rate": "inf"})  # every request at t = 0: a burst
    assert bench.issue_shaped({**row, "request_rate": "inf", "max_concurrency": 8})  # a closed loop
    assert not bench.issue_shaped({**row, "gpu": "B200"})
    assert not bench.issue_shaped({**row, "gpu": ""})  # no GPU named: not one of the issue's
    assert not bench.issue_shaped({**row, "model": "deepseek-ai/DeepSeek-R1"})
    record = bench.accuracy_record({("heldout issue", "tpot"): [0.1, -0.3]}, "2026-12-03", "a hand-made set")
    assert record["held_out_issue_shaped"] == {"tpot": {"runs": 2, "median_abs_error": 0.2, "bias": -0.1}}


@pytest.mark.parametrize("data, needle", [
    ([], "must be a JSON object"),
    ({"held_out": {"throughput": {"runs": 3, "median_abs_error": 0.2, "bias": 0.1}}}, "missing required key held_out.'ttft'"),
    ({"held_out": {m: {"runs": 0, "median_abs_error": 0.2, "bias": 0.1} for m in ("throughput", "ttft", "tpot")}},
     "runs must be a positive integer"),
    ({"held_out": {m: {"runs": 3, "median_abs_error": "x", "bias": 0.1} for m in ("throughput", "ttft", "tpot")}},
     "median_abs_error must be a finite number"),
    ({"held_out": {m: {"runs": 3, "median_abs_error": 0.2, "bias": float("nan")} for m in ("throughput", "ttft",
                                                                                            "tpot")}},
     "bias must be a finite number >= -1"),
])
def test_a_bad_accuracy_file_is_a_one_line_catalog_error(data, needle):
    with pytest.raises(SpecError) as err:
        timing_accuracy_from(data)
    assert err.value.field == "catalog" and "timing_accuracy.json" in str(err.value) and needle in str(err.value)


def test_packaged_figures_are_a_measurement():
    acc = load_timing_accuracy()
    assert acc.measured_on[:4].isdigit() and "bench/accuracy_serving.py" in acc.source
    for m in (acc.throughput, acc.ttft, acc.tpot):
        assert m.runs >= 20 and 0 < m.median_abs_error < 1 and -1 < m.bias < 1


def test_simulate_shows_its_accuracy(capsys):
    from specsize import api
    from specsize.reports.simulation import render

    rep = api.simulate(target="meta-llama/Llama-3.2-1B-Instruct", gpu="H100-SXM-80GB", rate=2, duration=10,
                       no_compare=True)
    assert rep.accuracy == load_timing_accuracy()
    assert json.loads(render(rep, "json"))["sim"]["timing_accuracy"] == load_timing_accuracy().to_dict()
    assert render(rep, "text").rstrip().splitlines()[-1].startswith("timing accuracy (bench/accuracy_serving.py")
