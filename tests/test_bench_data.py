"""The published serving runs the timing accuracy is measured on (bench/data/serving_runs*.jsonl, and the blind set
bench/data/blind_serving_runs.jsonl): every row parses,
has a unique id, its source and the quote of the printout, and a measured figure to compare with."""

from __future__ import annotations

import json
import math

from helpers import ROOT, bench_module

# and the blind set gathered after the model was last changed (bench/data/README.md)
FILES = sorted((ROOT / "bench" / "data").glob("serving_runs*.jsonl")) + [ROOT / "bench" / "data" /
                                                                        "blind_serving_runs.jsonl"]
REQUIRED = ("id", "engine", "model", "gpu", "tp", "input_len", "output_len", "measured", "source", "quote")


def _bench():
    return bench_module("accuracy_serving")


def _rows() -> list[tuple[str, int, dict]]:
    return [(f.name, n, json.loads(line)) for f in FILES
            for n, line in enumerate(f.read_text().splitlines(), 1) if line.strip()]


def test_every_serving_run_has_its_source_and_a_measurement():
    rows = _rows()
    assert len(FILES) >= 10 and len(rows) >= 500
    for name, n, row in rows:
        where = f"{name} line {n}"
        assert all(key in row for key in REQUIRED), f"{where}: missing {[k for k in REQUIRED if k not in row]}"
        assert isinstance(row["source"], str) and row["source"].strip(), where
        assert isinstance(row["quote"], str) and row["quote"].strip(), where
        figures = [v for v in row["measured"].values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        assert figures and all(math.isfinite(v) and v >= 0 for v in figures), where


def test_serving_run_ids_are_unique_across_files():
    ids = [row["id"] for _, _, row in _rows()]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_a_figure_marked_not_compared_is_left_out_with_its_reason():
    bench = _bench()
    row = {"measured": {"output_throughput_tok_s": 100.0, "ttft_mean_ms": 75.0, "tpot_median_ms": 10.0},
           "dataset": "random", "output_len": 128}
    assert bench.measured(row) == {"throughput": ("mean", 100.0), "ttft": ("mean", 0.075), "tpot": ("p50", 0.01)}
    assert set(bench.measured({**row, "not_compared": {"ttft": "cache hits"}})) == {"throughput", "tpot"}
    for name, n, data in _rows():
        for metric, reason in (data.get("not_compared") or {}).items():
            assert metric in ("throughput", "ttft", "tpot") and len(reason) > 40, f"{name} line {n}"


def test_no_run_is_counted_twice():
    # the same printout gathered twice (two files, two ids) would weigh twice in every median
    seen: dict[str, str] = {}
    for name, n, row in _rows():
        key = json.dumps([row["source"], row["model"], row["gpu"], row["tp"], row["input_len"], row["output_len"],
                          row.get("request_rate"), row.get("max_concurrency"), row["measured"]], sort_keys=True)
        assert key not in seen, f"{name} line {n} repeats {seen[key]}"
        seen[key] = f"{name} line {n}"


def test_no_compared_first_token_beats_the_prompts_flops_at_peak():
    # a TTFT shorter than the prompt's FLOPs (as core.perf counts a prefill's) at the GPUs' full dense peak is not a
    # prefill time (prefix-cache hits, a misread figure): such a figure must be listed under not_compared with its
    # reason
    from specsize.catalog.gpus import load_efficiency, load_gpu
    from specsize.catalog.models import load_model
    from specsize.core.perf import coefficients, model_cost, uniform_step

    bench = _bench()
    checked = 0
    for name, n, row in _rows():
        ttft = bench.measured(row).get("ttft")
        mapped = bench.MODELS.get(row["model"])
        gpu = bench.GPUS.get(str(row["gpu"]))
        prompt = bench.number(row["input_len"])
        if not (ttft and mapped and gpu and prompt and isinstance(row.get("tp"), int)):
            continue
        g = load_gpu(gpu)
        co = coefficients(model_cost(load_model(mapped[0]), row["tp"], "bfloat16", None), g, load_efficiency(g))
        flops = uniform_step(co, 1, int(prompt), int(prompt) // 2).flops  # one GPU's share of the TP group's
        fp8 = (mapped[1] or row.get("quantization")) == "fp8" and g.fp8_flops
        bound = flops / (g.fp8_flops if fp8 else g.bf16_flops)
        assert ttft[1] >= bound, f"{name} line {n} ({row['id']}): TTFT {ttft[1] * 1e3:.1f} ms < {bound * 1e3:.1f} ms"
        checked += 1
    assert checked >= 300


def test_the_context_bands_read_prompt_plus_half_the_output():
    # mean context per sequence = prompt + output / 2: 5,000 + 1,000 / 2 = 5,500 tokens; 2,048 + 256 / 2 = 2,176 (the
    # leading number of a stated distribution); 999 + 0 / 2 stays under 1,000; 8,000 + 0 opens the top band
    band = _bench().context_band
    assert band({"input_len": 5000, "output_len": 1000}) == "3k-8k"
    assert band({"input_len": "~2048 (normal, sd 1024, 10-4096)", "output_len": "~256 (normal, sd 128)"}) == "1k-3k"
    assert band({"input_len": 999, "output_len": 0}) == "<1k"
    assert band({"input_len": 8000, "output_len": 0}) == ">=8k"
    assert band({"input_len": 512, "output_len": None}) is None


def test_every_batch_sweep_row_has_its_source_and_figure_reading():
    """bench/data/spec_batch_sweeps.jsonl: speed-ups read from the vector Figure 1 of arXiv 2601.11580's project
    page; each row names its source, quotes its panel and series, and every series starts at batch 1 (where the
    bench solves its acceptance) with distinct batch sizes."""
    path = ROOT / "bench" / "data" / "spec_batch_sweeps.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    series: dict = {}
    for row in rows:
        assert row["source"].startswith("https://github.com/SpecDecode-Bench/") and "Figure 1" in row["quote"]
        assert row["speedup"] > 0 and row["engine"] == "vLLM" and row["method"] in ("ngram", "eagle", "eagle3",
                                                                                   "draft_model")
        series.setdefault(row["group"], []).append(row["batch_size"])
    assert len(rows) == 156 and len({row["id"] for row in rows}) == len(rows)
    assert all(sorted(batches) == [1, 16, 64, 128] for batches in series.values())


def test_every_fresh_speedup_row_has_the_published_schema_its_source_and_its_printed_figure():
    """bench/data/spec_speedups_s56.jsonl (held out, read by accuracy_speedup.fresh()): every row carries every field
    the rows of spec_speedups.jsonl all carry, a unique id across both files, its source and a quote holding the
    printed ratio; where both arms' throughputs are printed their ratio is the printed speed-up (to 0.011: the blog's
    ratios are means over seeds, 162 / 90 = 1.800 printed 1.79); a group without acceptance has batches beyond its
    anchor; and the fit never reads the file."""
    data = ROOT / "bench" / "data"
    old = [json.loads(line) for line in (data / "spec_speedups.jsonl").read_text().splitlines() if line.strip()]
    new = [json.loads(line) for line in (data / "spec_speedups_s56.jsonl").read_text().splitlines() if line.strip()]
    common = set.intersection(*(set(row) for row in old))
    assert len(new) == 42 and len({row["id"] for row in old + new}) == len(old) + len(new)
    groups: dict = {}
    for row in new:
        assert common <= set(row), (row["id"], common - set(row))
        assert row["source"].startswith("https://") and f"{row['speedup']:.2f}" in row["quote"]
        if row["baseline"] and row["spec"]:
            assert abs(row["spec"]["tok_s"] / row["baseline"]["tok_s"] - row["speedup"]) <= 0.011, row["id"]
        if not row["acceptance"]:
            groups.setdefault(row["group"], set()).add(row["batch_size"])
    assert groups and all(len(batches) >= 3 for batches in groups.values())
    assert "spec_speedups_s56" not in (ROOT / "bench" / "fit_speedup.py").read_text()


def test_the_ngram_lookup_replay_proposes_as_vllm_documents_it():
    """bench/ngram_replay.py's lookup, on vLLM's own docstring example (vllm/v1/spec_decode/ngram_proposer.py:
    [1, 2, 3, 4, 2, 3] with n-grams of 2-3 and k = 4 proposes [4, 2, 3], the three tokens left after the match) and
    by hand: the longest suffix wins, at its earliest occurrence, and no match proposes nothing."""
    replay = bench_module("ngram_replay")
    assert replay.lookup([1, 2, 3, 4, 2, 3], 2, 3, 4) == [4, 2, 3]
    # suffix [5, 7, 8] occurs only at the end; [7, 8] first at 0 (again at 3): the 4 tokens after index 1
    assert replay.lookup([7, 8, 9, 7, 8, 5, 7, 8], 2, 3, 4) == [9, 7, 8, 5]
    # [9, 7, 8] (3 tokens) occurs at 2, and is preferred to the earlier [7, 8] at 0
    assert replay.lookup([7, 8, 1, 9, 7, 8, 4, 9, 7, 8], 2, 3, 2) == [4, 9]
    assert replay.lookup([1, 2, 3, 4], 2, 3, 4) == [] and replay.lookup([5], 2, 3, 4) == []
    # a request walked at k = 2: prompt [1, 2, 3, 1, 2], generation [3, 1, 2, 9]. Step 1 (context ends "1 2", first
    # at 0) proposes [3, 1]: the generation confirms both -> 3 tokens; step 2 at position 3 (context ends "3 1 2",
    # first at 2) proposes [3, 1], the generation goes on with 9: 1 token. 2 steps, both proposing, 4 tokens
    walked = replay.walk([([1, 2, 3, 1, 2], [3, 1, 2, 9], [3, 2, 1, 1])], 2, 3, 2)
    assert walked == {"steps": 2, "proposal_rate": 1.0, "tokens_per_proposal": 2.0, "tokens_per_step": 2.0}
    # the same request with 3-token suffixes only: step 1 (the suffix "3 1 2" occurs only where it ends the context)
    # proposes nothing and gains 1; step 2 (context "1 2 3 1 2 3": "1 2 3" first at 0) proposes [1, 2], both
    # confirmed by the generation: 3 tokens. 2 steps, 1 proposing
    walked = replay.walk([([1, 2, 3, 1, 2], [3, 1, 2, 9], [1, 3, 2, 1])], 3, 3, 2)
    assert walked == {"steps": 2, "proposal_rate": 0.5, "tokens_per_proposal": 3.0, "tokens_per_step": 2.0}


def test_the_replayed_ngram_proposal_rates_carry_their_source_and_hold_together():
    """bench/data/ngram_proposal_rates.json: from the study's published token data at a pinned commit; every
    dataset at k = 3, 4 and 5 for the study's lookup (3-5), vLLM V1's default (5-5), the 2-4 specsize deploys and
    V0's default minimum (1-4); tokens per step = 1 + rate x (tokens per proposal - 1); and the tool's default share
    and its spread are the file's own: the median and the extremes of the deployed lookup's shares at k = 3."""
    from specsize.engines.emit import vllm_command  # noqa: F401 - emit writes NGRAM_LOOKUP
    from specsize.engines.vllm import NGRAM_LOOKUP, NGRAM_PROPOSAL_RATE, NGRAM_PROPOSAL_SPREAD, V0
    from specsize.inputs.request import info

    record = json.loads((ROOT / "bench" / "data" / "ngram_proposal_rates.json").read_text())
    assert record["source"].startswith("https://github.com/SpecDecode-Bench/simulator/tree/2fdccbd")
    assert record["study_lookup"] == {**record["study_lookup"], "prompt_lookup_min": 3, "prompt_lookup_max": 5}
    rows = {(r["dataset"], r["lookup"], r["k"]): r for r in record["rates"]}
    datasets, lookups = ("cnn_dailymail", "gsm8k", "sharegpt", "instructcoder"), ("5-5", "3-5", "2-4", "1-4")
    assert set(rows) == {(d, lookup, k) for d in datasets for lookup in lookups for k in (3, 4, 5)}
    for (dataset, lookup, k), r in rows.items():
        assert 0 < r["proposal_rate"] <= 1 and 1 <= r["tokens_per_proposal"] <= k + 1
        assert math.isclose(r["tokens_per_step"], 1 + r["proposal_rate"] * (r["tokens_per_proposal"] - 1),
                            abs_tol=2e-4)
    deployed = sorted(rows[(d, "{}-{}".format(*NGRAM_LOOKUP), 3)]["proposal_rate"] for d in datasets)
    assert round((deployed[1] + deployed[2]) / 2, 2) == NGRAM_PROPOSAL_RATE == V0.ngram_proposal_rate
    assert NGRAM_PROPOSAL_SPREAD == (round(deployed[0], 2), round(deployed[-1], 2))
    assert f"{NGRAM_PROPOSAL_RATE:g}" in info("proposal_rate").default_doc


def test_expert_parallel_runs_carry_their_source_and_pair_up():
    # bench/data/ep_runs_s57.jsonl (read by accuracy_serving.py --data ...: its EP / TP pair table): every row has the
    # fields a serving run has plus expert_parallel and dp; ids unique here and against the serving runs; every plain
    # row (expert_parallel false) has its EP row in the same group (the bench pairs those at one data-parallel size)
    path = ROOT / "bench" / "data" / "ep_runs_s57.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(rows) >= 30
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) and not set(ids) & {row["id"] for _, _, row in _rows()}
    for r in rows:
        assert all(key in r for key in REQUIRED + ("expert_parallel", "dp")), r["id"]
        assert r["source"].strip() and r["quote"].strip(), r["id"]
    ep = {r["group"] for r in rows if r["expert_parallel"]}
    for r in rows:
        if r["expert_parallel"] is False:
            assert r["group"] in ep, r["id"]


def test_a_published_server_flag_is_read_with_its_words_joined_by_underscores_too():
    # vLLM's FlexibleArgumentParser and SGLang's argparse take --max_model_len as --max-model-len: SGLang's vLLM 0.6.0
    # comparison ran `--num-scheduler-steps 10 --max_model_len 4096` (a 131,072-token model length had turned 0.6.0's
    # chunked prefill on, which that release refuses beside multi-step)
    serving = bench_module("accuracy_serving")
    notes = "vllm serve M --max_model_len 4096 --gpu_memory_utilization=0.98 --num-scheduler-steps 10 --max-num-seqs 64"
    assert serving.server_flags({"notes": notes}) == {"max_model_len": 4096, "gpu_memory_utilization": 0.98,
                                                      "num_scheduler_steps": 10, "max_num_seqs": 64}
    rows = {row["id"]: row for row in serving.load_rows()}
    assert serving.server_flags(rows["sgl060-8b-a100x1-vllm-rps4"]) == {"max_model_len": 4096, "num_scheduler_steps": 10}
