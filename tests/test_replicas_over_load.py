"""More replicas than requests in flight (fuzz pass 9's findings A and B): each replica is sized and simulated at its
rounded-up share, the busiest's, but the whole deployment's figures had counted that share on every replica: 16
requests on 64 GPUs at TP 1 read as 64 in flight, four times the load."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_cli as run


def test_search_throughput_counts_the_requests_in_flight_not_every_replica(tmp_path: Path, capsys):
    # 16 requests on 64 x H100 at TP 1: each replica's share rounds up to 1, so the screen's batch is 1, but no more
    # than 16 sequences decode at once: throughput = 16 / TPOT, not 64 / TPOT. The plan's own TPOT at one sequence is
    # the TPOT the screen prices; 5,000 tok/s would need TPOT <= 3.2 ms
    spec = tmp_path / "spec.yaml"
    spec.write_text("""
target: meta-llama/Llama-3.1-8B-Instruct
tp: [1]
max_model_len: 8192
drafters: [{method: none}]
gpus: [{gpu: H100-SXM-80GB, counts: [64]}]
max_num_seqs: [256]
workload:
  prompt_tokens: {p50: 800, p99: 2000}
  output_tokens: {p50: 200, p99: 400}
  concurrency: 16
slo: {throughput_tok_s: 5000}
""")
    code, out, err = run(capsys, "search", spec, "--no-simulate", "--format", "json")
    assert code == 3, err  # none meets the SLO (docs/cli.md: search exits 3)
    doc = json.loads(out)
    assert doc["status_counts"] == {"misses_throughput": 1}
    why = doc["rejected_families"][0]["why"]
    # 16 sequences at an H100's ~7.2 ms TPOT for Llama-3.1-8B at one sequence a GPU: 16 / 0.0072 = 2,222 tok/s (had
    # been 8,888: 64 replicas x 1 sequence, and "meets the SLO")
    figure = float(why.split(": ")[-1].split(" tok/s")[0].replace(",", ""))
    assert 2_000 < figure < 2_500


def test_simulate_counts_the_busy_replicas_only(capsys):
    # Little's law at the busiest replica's share (1 in flight), and 16 replicas carry that load, not 64
    code, out, err = run(capsys, "simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                         "--gpus", "64", "--concurrency", "16", "--prompt-tokens", "p50=800,p99=4000",
                         "--output-tokens", "p50=200,p99=800", "--duration", "30", "--format", "json")
    assert code == 0, err
    scenario = json.loads(out)["sim"]["scenario_detail"]
    assert (scenario["concurrency"], scenario["concurrency_total"], scenario["replicas"]) == (1, 16, 64)
    code, out, err = run(capsys, "simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                         "--gpus", "64", "--concurrency", "16", "--prompt-tokens", "p50=800,p99=4000",
                         "--output-tokens", "p50=200,p99=800", "--duration", "30")
    assert code == 0, err
    per = float(next(line for line in out.splitlines() if line.startswith("throughput tok/s")).split()[-1].replace(",", ""))
    total = float(next(line for line in out.splitlines() if line.startswith("all 64 replicas")).split()[-1]
                  .replace(",", ""))
    assert abs(total - 16 * per) <= 16  # the text rounds each to whole tokens
