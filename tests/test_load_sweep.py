"""Where speculation stops paying as the load grows (`specsize stops-paying`, planner/load_sweep.py): the ladder
and its bisection by hand, the verdicts at both ends, the CLI's contract, and the vLLM blog's measured sweep."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specsize
from specsize.planner.load_sweep import LoadPoint, crossing, sweep_loads
from helpers import run_cli as run


def point(rate: float, ratio: float) -> LoadPoint:
    return LoadPoint(rate_req_s=rate, e2e_spec_s=ratio, e2e_plain_s=1.0, tpot_spec_s=None, tpot_plain_s=None,
                     sustains_spec=True, sustains_plain=True)


def test_ladder_and_bisection_by_hand():
    # a latency ratio of 0.5 + 0.05 x rate reaches 1 at 10 req/s. From a centre of 5 the ladder is 0.625 ... 40;
    # the rung (5, 10) brackets the crossing (0.75 -> 1.0), its geometric middles 7.07, 8.41, 9.17 are simulated,
    # and the crossing is read linearly between 9.17 (0.958) and 10 (1.0): exactly 10 for a linear ratio
    seen = []

    def evaluate(rate):
        seen.append(rate)
        return point(rate, 0.5 + 0.05 * rate)

    sweep = sweep_loads(evaluate, 5.0, "rate")
    assert seen[:7] == pytest.approx([0.625, 1.25, 2.5, 5, 10, 20, 40])
    assert seen[7:] == pytest.approx([50 ** 0.5, (50 ** 0.5 * 10) ** 0.5, ((50 ** 0.5 * 10) ** 0.5 * 10) ** 0.5])
    assert sweep.stops_paying_req_s == pytest.approx(10.0, rel=1e-9)
    assert [p.rate_req_s for p in sweep.points] == sorted(seen)
    assert sweep.verdict == "speculation stops paying at about 10 req/s"


def test_no_rung_above_the_highest_rate_a_simulation_takes():
    # a centre of 200,000 req/s would ladder up to 1.6 million; with the request's bound of 1 million the top rungs
    # become one rung at the bound (stops-paying had simulated half the ladder, then refused its own 1.6e6 rung)
    seen = []

    def evaluate(rate):
        seen.append(rate)
        return point(rate, 0.5)

    sweep_loads(evaluate, 200_000.0, "rate", max_rate=1e6)
    assert seen == pytest.approx([25_000, 50_000, 100_000, 200_000, 400_000, 800_000, 1e6])


def test_verdicts_at_both_ends_of_the_ladder():
    pays = sweep_loads(lambda r: point(r, 0.5), 1.0, "littles_law")
    assert pays.stops_paying_req_s is None and len(pays.points) == 7
    assert pays.verdict == "speculation still pays at 8 req/s, the highest load tried"
    never = sweep_loads(lambda r: point(r, 1.2), 1.0, "littles_law")
    assert never.stops_paying_req_s == pytest.approx(0.125)
    assert never.verdict == "speculation does not pay even at 0.125 req/s, the lowest load tried"
    assert crossing([point(1, 0.9), LoadPoint(2, None, None, None, None, False, False), point(4, 1.1)]) == \
        pytest.approx(2.5)  # a rate without a latency (nothing finished) is skipped


def test_the_vllm_blogs_draft_model_sweep():
    # vLLM blog 2024-10-17 (bench/data/spec_load_sweeps.jsonl): Llama 3 70B on 4 x H100, vLLM 0.6, a Qwama-0.5B
    # draft with k = 4 on ShareGPT (202-token prompts, 179-token outputs on average): the latency ratio reaches 1
    # at 8.1 QPS measured (0.97 at 8, 1.40 at 10). With the acceptance that its 1 QPS ratio gives (0.578), the
    # sweep must land within issue #11's 25% of it
    # (the blog ran the draft at TP 1, --speculative-draft-tensor-parallel-size 1: Qwama's 14 heads do not shard 4 ways)
    sweep = specsize.stops_paying(target="meta-llama/Llama-3.1-70B-Instruct", gpu="H100-SXM-80GB", tp=4,
                                  draft="turboderp/Qwama-0.5B-Instruct", num_speculative_tokens=4, draft_tp=1,
                                  acceptance_rate=0.578, engine_version="0.6", max_model_len=8192, rate=4.0,
                                  duration=60.0, prompt_tokens_median=202, output_tokens_median=179)
    assert sweep.stops_paying_req_s == pytest.approx(8.1, rel=0.25)
    low = sweep.points[0]
    assert low.ratio == pytest.approx(0.62, abs=0.05)  # the blog: 0.64 at 1 QPS




SMALL = ("--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--method", "ngram", "-k", "3",
         "--acceptance-rate", "0.5", "--rate", "2", "--duration", "20", "--prompt-tokens-median", "500",
         "--output-tokens-median", "100")


def test_cli_json_is_the_whole_stdout(capsys):
    code, out, _ = run(capsys, "stops-paying", *SMALL, "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["schema_version"] == "1.0"
    sweep = data["stops_paying"]
    assert sweep["centre_req_s"] == 2 and sweep["centre_source"] == "rate"
    rates = [p["rate_req_s"] for p in sweep["points"]]
    assert rates == sorted(rates) and rates[0] == 0.25 and len(rates) >= 7
    assert sweep["verdict"].startswith("speculation")
    # the rungs' rates are the sweep's own: the scenario had said "rate: given" of the lowest rung's 1/8 x centre
    assert "(rate: the load sweep's, from 1/8 to 8 times its centre;" in sweep["scenario"]
    assert sweep["scenario"].startswith("Poisson 0.25 req/s")


@pytest.mark.parametrize("argv, field", [
    (("--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB"), "method"),
    (SMALL[:-8] + ("--client-concurrency", "8"), "client_concurrency"),
    (SMALL[:8], "acceptance_rate"),
])
def test_cli_bad_input_is_one_line_and_exit_2(capsys, argv, field):
    code, out, err = run(capsys, "stops-paying", *argv)
    assert code == 2 and not out
    assert field in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@settings(max_examples=60, deadline=None)
@given(st.floats(0.1, 50), st.floats(0.2, 3.0), st.floats(0.01, 2.0), st.floats(0.5, 3.0))
def test_the_crossing_lies_between_the_rates_that_bracket_it(centre, intercept, slope, power):
    # any latency ratio growing with the load (intercept + slope x rate^power): the load reported sits between the
    # highest rate simulated below 1 and the lowest at or above it, and none is reported when no rate reaches 1
    sweep = sweep_loads(lambda r: point(r, intercept + slope * r ** power), centre, "rate")
    below = [p.rate_req_s for p in sweep.points if p.ratio < 1]
    above = [p.rate_req_s for p in sweep.points if p.ratio >= 1]
    if not above:
        assert sweep.stops_paying_req_s is None
    elif not below:
        assert sweep.stops_paying_req_s == pytest.approx(min(above))
    else:
        assert max(below) <= sweep.stops_paying_req_s <= min(above)


def test_a_ramp_keeps_its_shape_on_every_rung(capsys):
    """A sweep around 2 req/s ramping to 4 ramps each rung to twice its rate (each had ramped to the user's 4: the
    0.25 req/s rung ran at a mean of 2.1 req/s, and the 16 req/s rung ramped down to 4)."""
    code, out, _ = run(capsys, "stops-paying", *SMALL, "--ramp-to", "4", "--format", "json")
    assert code == 0
    sweep = json.loads(out)["stops_paying"]
    assert sweep["centre_req_s"] == 2 and sweep["points"][0]["rate_req_s"] == 0.25
    # the first rung simulated is the lowest: 0.25 req/s ramping to 0.25 x 4 / 2 = 0.5
    assert "Poisson 0.25 req/s" in sweep["scenario"] and "ramping to 0.5 req/s" in sweep["scenario"]
