"""The command line: exit codes, the JSON contract on stdout, one-line errors, never overwriting output."""

import json

import pytest

from helpers import run_cli as run




def test_default_plan_text(capsys):
    code, out, err = run(capsys, "plan")
    assert code == 0  # printed; the verdict (thin) is in the output
    assert run(capsys, "plan", "--fail-on", "thin")[0] == 1  # the embedded default is thin
    assert run(capsys, "plan", "--fail-on", "does_not_fit")[0] == 0
    assert "THIN" in out and "What breaks first" in out and "KV cache" in out
    assert "Llama-3.2-1B-Instruct" in out


def test_json_contract_on_stdout_only(capsys):
    code, out, err = run(capsys, "plan", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "thin" and data["schema_version"] == "1.0"
    for key in ("headroom_fraction", "kv_cache_tokens", "max_concurrency", "inputs"):
        assert key in data
    assert set(data["kv_bytes_per_token"]) == {"target", "draft", "total"}
    for key in ("total_bytes", "budget_bytes", "weights_target_bytes", "weights_draft_bytes",
                "activation_peak_bytes", "non_torch_bytes", "cuda_graph_bytes", "kv_cache_bytes"):
        assert isinstance(data["per_gpu"][key], int)
    for key in ("demand_bytes", "capacity_bytes", "concurrency", "prompt_tokens", "output_tokens"):
        assert key in data["envelope"]
    # 70B: 80 layers x K, V x 8 / 4 KV heads x 128 x 2 B; the 1B draft at the target's TP 4 (vLLM's default, and the
    # only TP vLLM 0.15+ start a draft model at): 16 layers x 2 x 8 / 4 x 64 x 2 B
    assert data["kv_bytes_per_token"]["total"] == 80 * 2 * 2 * 128 * 2 + 16 * 2 * 2 * 64 * 2 == 81_920 + 8_192


def test_fits_and_does_not_fit_exit_codes(capsys):
    code, _, _ = run(capsys, "plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                     "--max-model-len", "8192", "--concurrency", "4", "--prompt-tokens", "p50=500,p99=2000",
                     "--output-tokens", "p50=100,p99=400", "--fail-on", "thin")
    assert code == 0
    code, out, _ = run(capsys, "plan", "--target", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "L4-24GB",
                       "--format", "json", "--fail-on", "does_not_fit")
    assert code == 3 and json.loads(out)["verdict"] == "does_not_fit"


def test_flags_override_file(tmp_path, capsys):
    spec = tmp_path / "d.yaml"
    spec.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: A100-80GB\nmax_model_len: 4096\n"
                    "workload:\n  prompt_tokens: {p50: 100, p99: 1000}\n  output_tokens: {p50: 10, p99: 100}\n"
                    "  concurrency: 2\n")
    code, out, _ = run(capsys, "plan", str(spec), "--gpu", "H200-141GB", "--format", "json")
    data = json.loads(out)
    assert data["inputs"]["gpu"] == "H200-141GB" and data["inputs"]["max_model_len"] == 4096 and code == 0


def test_markdown_and_output_file_never_overwritten(tmp_path, capsys):
    target = tmp_path / "plan.md"
    code, out, err = run(capsys, "plan", "--format", "markdown", "-o", str(target))
    assert code == 0 and out == "" and target.read_text().startswith("# specsize plan")
    target.write_text("mine")
    code, _, err = run(capsys, "plan", "--format", "markdown", "-o", str(target))
    assert code == 2 and "exists" in err and target.read_text() == "mine"
    code, _, _ = run(capsys, "plan", "--format", "markdown", "-o", str(target), "--force")
    assert code == 0 and target.read_text().startswith("# specsize plan")


@pytest.mark.parametrize("args,needle", [
    (["--target", "meta-llama/Llama-3.1-8B-Instuct"], "did you mean meta-llama/Llama-3.1-8B-Instruct"),
    (["--target", "llama-3.1-8b"], "did you mean"),
    (["--gpu", "H100"], "did you mean"),
    (["--max-num-seqs", "0"], "max_num_seqs"),
    (["--tp", "0"], "tp"),
    (["--concurrency", "0"], "concurrency"),
    (["--gpu-memory-utilization", "0"], "gpu_memory_utilization"),
    (["--gpu-memory-utilization", "1.5"], "gpu_memory_utilization"),
    (["--tp", "3", "--gpus", "3"], "does not divide"),
    (["--tp", "3"], "a multiple of 3"),
    (["--method", "draft_model", "-k", "0"], "num_speculative_tokens"),
    (["--max-model-len", "-5"], "max_model_len"),
    (["--prompt-tokens", "p50=10,p99=5"], "percentiles must not decrease"),
    (["--burst-factor", "0.5"], "burst_factor"),
    (["--headroom", "1.2"], "headroom"),
    (["--kv-cache-dtype", "int3"], "kv_cache_dtype"),
    (["--quantization", "int3"], "quantization"),
    (["--engine-version", "0.2"], "engine_version"),
    (["--method", "mtp", "-k", "1"], "mtp needs a target with MTP layers"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, needle):
    code, out, err = run(capsys, "plan", *args)
    assert code == 2, err
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_malformed_yaml_and_unknown_key(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("target: [unclosed\n")
    code, _, err = run(capsys, "plan", str(bad))
    assert code == 2 and "not valid YAML" in err and len(err.strip().splitlines()) == 1
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu_count: 4\n")
    code, _, err = run(capsys, "plan", str(unknown))
    assert code == 2 and "gpu_count" in err and "accepted" in err


def test_config_missing_fields_via_cli(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2}))
    code, _, err = run(capsys, "plan", "--target", str(cfg), "--gpu", "L4-24GB")
    assert code == 2 and "num_attention_heads" in err


def test_a_config_without_model_type_is_refused_not_read_as_llama(tmp_path, capsys):
    # a complete Llama-3.1-8B shape but no model_type: vLLM cannot load it, and specsize does not guess
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                               "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                               "max_position_embeddings": 8192}))
    code, out, err = run(capsys, "plan", "--target", str(cfg), "--gpu", "H100-SXM-80GB", "--format", "json")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "config.json:model_type" in err and "no model_type" in err and "llama" in err


def test_samples_workload(tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps({"prompt_tokens": 100 * i, "output_tokens": 10 * i}) for i in range(1, 101)))
    code, out, _ = run(capsys, "plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                       "--samples-file", str(trace), "--concurrency", "2", "--format", "json")
    wl = json.loads(out)["inputs"]["workload"]
    assert wl["prompt_tokens"]["p99"] == 9900 and wl["prompt_tokens"]["max"] == 10000  # nearest rank
    assert wl["output_tokens"]["p50"] == 500


def test_catalog_listings(capsys):
    code, out, _ = run(capsys, "models", "--format", "json")
    assert code == 0 and any(m["id"] == "deepseek-ai/DeepSeek-V3" for m in json.loads(out))
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "MI355X-288GB" in out


def test_engine_version_selects_profile(capsys):
    _, out, _ = run(capsys, "plan", "--engine-version", "0.19.0", "--format", "json")
    assert json.loads(out)["engine"]["profile_version"] == "0.19"
    _, out, _ = run(capsys, "plan", "--engine-version", "0.6.2", "--format", "json")
    assert json.loads(out)["engine"]["profile_version"] == "0.6"
    # 0.6.3 has its own profile (multi-step scheduling beside chunked prefill: tests/test_multi_step_rules.py)
    _, out, _ = run(capsys, "plan", "--engine-version", "0.6.3", "--format", "json")
    assert json.loads(out)["engine"]["profile_version"] == "0.6.3"


def test_plan_perf_section(capsys):
    code, out, _ = run(capsys, "plan", "--format", "json", "--acceptance-rate", "0.7", "--tpot-slo-ms", "30")
    perf = json.loads(out)["perf"]
    for key in ("tpot_s", "tpot_s_no_spec", "speedup", "throughput_tok_s", "throughput_tok_s_no_spec",
                "crossover_batch", "best_k", "tokens_per_pass"):
        assert key in perf
    assert perf["tokens_per_pass"] == pytest.approx((1 - 0.7 ** 5) / 0.3)
    assert perf["speedup"] == pytest.approx(perf["tpot_s_no_spec"] / perf["tpot_s"])
    assert perf["max_concurrency_for_tpot_slo"] >= 1


def test_plan_without_acceptance_prices_no_speculation_only(capsys):
    _, out, _ = run(capsys, "plan", "--format", "json", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu",
                    "H100-SXM-80GB", "--method", "ngram", "-k", "3", "--max-model-len", "8192")
    perf = json.loads(out)["perf"]
    assert perf["speedup"] is None and perf["tpot_s_no_spec"] > 0 and "acceptance not given" in perf["note"]


def test_speedup_json_contract(capsys):
    code, out, _ = run(capsys, "speedup", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                       "--method", "ngram", "-k", "2,4", "--batch-size", "1,16,512", "--mean-accepted-length", "2.2",
                       "--measured-at-k", "4", "--format", "json",
                       "--candidate", "method=eagle3,draft=sgl-project/SpecForge-llama3-8B-eagle3,acceptance=0.75")
    data = json.loads(out)
    assert code == 0 and len(data["rows"]) == 6
    for row in data["rows"]:
        assert set(("batch_size", "k", "tokens_per_pass", "tpot_s", "tpot_s_no_spec", "speedup", "throughput_tok_s",
                    "throughput_tok_s_no_spec")) <= set(row)
        assert row["speedup"] == pytest.approx(row["tpot_s_no_spec"] / row["tpot_s"])
    assert set(data["crossover_batch"]) == {"2", "4"} and set(data["best_k"]) == {"1", "16", "512"}
    assert data["candidates"][0]["method"] == "eagle3"


@pytest.mark.parametrize("args,needle", [
    ([], "acceptance"),
    (["--acceptance-rate", "1.5"], "acceptance_rate"),
    (["--mean-accepted-length", "9", "--measured-at-k", "3"], "mean_accepted_length"),
    (["--acceptance-rate", "0.5", "--batch-size", "0"], "batch_size"),
    (["--acceptance-rate", "0.5", "--candidate", "method=eagle3"], "candidate"),
])
def test_speedup_bad_input(capsys, args, needle):
    code, _, err = run(capsys, "speedup", "--method", "ngram", "-k", "3", "--target",
                       "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", *args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_simulate_json_and_series(tmp_path, capsys):
    series = tmp_path / "series.csv"
    code, out, _ = run(capsys, "simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                       "--method", "ngram", "-k", "3", "--acceptance-rate", "0.5", "--max-model-len", "8192",
                       "--rate", "4", "--duration", "60", "--prompt-tokens-median", "500", "--prompt-tokens-p99",
                       "2000", "--output-tokens-median", "100", "--output-tokens-p99", "400", "--burst-factor", "2",
                       "--burst-start", "20", "--burst-duration", "10", "--seed", "3", "--format", "json",
                       "--series", str(series))
    sim = json.loads(out)["sim"]
    assert code == 0 and sim["sustains"] is True
    for key in ("throughput_tok_s", "preemptions", "max_queue", "kv_peak_fraction"):
        assert key in sim and key in sim["no_spec"]
    for key in ("p50", "p99"):
        assert sim["ttft_s"][key] > 0 and sim["tpot_s"][key] > 0
    assert sim["tpot_s"]["p50"] < sim["no_spec"]["tpot_s"]["p50"]  # n-gram at a=0.5 pays at this load
    header = series.read_text().splitlines()[0]
    assert header == "t,running,waiting,kv_used_fraction,preemptions"


def test_simulate_needs_acceptance_with_speculation(capsys):
    code, _, err = run(capsys, "simulate", "--duration", "10", "--target", "meta-llama/Llama-3.1-8B-Instruct",
                       "--gpu", "H100-SXM-80GB", "--method", "ngram", "-k", "3", "--max-model-len", "8192")
    assert code == 2 and "acceptance" in err


def test_simulate_replays_a_trace(tmp_path, capsys):
    trace = tmp_path / "azure.csv"
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    rows += [f"2023-11-16 18:15:{10 + i // 10:02d}.{i % 10}000000,{200 + i},{20 + i % 7}" for i in range(40)]
    trace.write_text("\n".join(rows) + "\n")
    code, out, _ = run(capsys, "simulate", "--target", "meta-llama/Llama-3.2-1B-Instruct", "--gpu", "L4-24GB",
                       "--max-model-len", "4096", "--trace", str(trace), "--format", "json", "--no-compare")
    sim = json.loads(out)["sim"]
    assert code == 0 and sim["requests"] == 40 and sim["completed"] == 40 and sim["no_spec"] is None


def test_plan_simulate_folds_into_verdict(capsys):
    code, out, _ = run(capsys, "plan", "--format", "json", "--simulate", "--acceptance-rate", "0.7",
                       "--sim-duration", "120", "--fail-on", "thin")
    data = json.loads(out)
    assert data["simulation"]["method"] == "draft_model"
    assert data["verdict"] in ("thin", "does_not_fit") and code in (1, 3)


def test_check_gate(tmp_path, capsys):
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "llama70b-draft1b-4xh100.yaml"
    keep = tmp_path / "gate.json"
    code, out, _ = run(capsys, "check", str(example), "-o", str(keep))
    assert code == 1 and out.startswith("thin: worst-case headroom")
    assert json.loads(keep.read_text())["verdict"] == "thin"
    code, out, _ = run(capsys, "check", str(example), "--concurrency", "4", "--format", "json")
    assert code == 0 and json.loads(out)["verdict"] == "fits"
    code, _, err = run(capsys, "check")
    assert code == 2 and "deployment file" in err


def test_plan_json_has_planner_sections(capsys):
    code, out, _ = run(capsys, "plan", "--format", "json", "--acceptance-rate", "0.7", "--gpus", "8")
    data = json.loads(out)
    assert data["placement"]["failover"]["survivors"] == 1
    assert data["robustness"]["margins"][0]["input"] == "prompt_tokens"
    assert {c["engine"] for c in data["engine_commands"]} == {"vllm", "sglang"}


def test_plan_emit(capsys):
    code, out, err = run(capsys, "plan", "--emit", "vllm")  # a thin plan still emits, exit 0: `> serve.sh && ...`
    assert code == 0 and "vllm serve meta-llama/Llama-3.1-70B-Instruct" in out and "speculative-config:" in out
    assert "verdict thin" in err


def test_search_cli(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("""target: meta-llama/Llama-3.1-8B-Instruct
drafters:
  - {method: none}
  - {method: ngram, acceptance_rate: 0.4}
ks: [2, 4]
gpus:
  - {gpu: L4-24GB, counts: [1, 2], price_per_hour: 0.8}
  - {gpu: H100-SXM-80GB, counts: [1], price_per_hour: 2.5}
tp: [1, 2]
max_num_seqs: [32]
max_model_len: 8192
workload: {prompt_tokens: {p50: 500, p99: 2000}, output_tokens: {p50: 100, p99: 400}, concurrency: 4}
slo: {tpot_p99_ms: 100}
finalists: 1
simulate_seconds: 30
""")
    code, out, _ = run(capsys, "search", str(spec), "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["cheapest"]["confirmed"] is True and data["screened"] > 0
    assert data["cheapest"]["cost"] <= 2.5
    bad = tmp_path / "bad.yaml"
    bad.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpus: [{gpu: H100}]\nworkload: {}\n")
    code, _, err = run(capsys, "search", str(bad))
    assert code == 2 and "did you mean" in err


def test_simulate_resamples_lengths_from_a_file(tmp_path, capsys):
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("prompt_tokens,output_tokens\n100,20\n300,50\n")
    code, out, _ = run(capsys, "simulate", "--target", "meta-llama/Llama-3.2-1B-Instruct", "--gpu", "L4-24GB",
                       "--max-model-len", "4096", "--rate", "2", "--duration", "20", "--burst-factor", "1",
                       "--lengths-file", str(lengths), "--no-compare", "--format", "json", "--seed", "1")
    sim = json.loads(out)["sim"]
    assert code == 0 and sim["completed"] == sim["requests"] > 10


def test_closed_loop_takes_vllm_bench_serve_flag_names(capsys):
    # `--max-concurrency N --num-prompts M` (vllm bench serve's flags) are `--client-concurrency N --num-requests M`:
    # the same closed loop of 4 clients and 12 requests, the same run
    common = ("simulate", "--target", "meta-llama/Llama-3.2-1B-Instruct", "--gpu", "L4-24GB", "--max-model-len",
              "4096", "--prompt-tokens-median", "200", "--output-tokens-median", "30", "--no-compare", "--format",
              "json")
    code, out, _ = run(capsys, *common, "--max-concurrency", "4", "--num-prompts", "12")
    ours = json.loads(out)["sim"]
    assert code == 0 and ours["scenario"] == "closed loop: 4 clients, 12 requests" and ours["completed"] == 12
    code, out, _ = run(capsys, *common, "--client-concurrency", "4", "--num-requests", "12")
    assert code == 0 and json.loads(out)["sim"] == ours
    # without a rate or a closed loop, --concurrency is the envelope's open loop, and the scenario says so
    code, out, _ = run(capsys, *common, "--concurrency", "4", "--duration", "20")
    detail = json.loads(out)["sim"]["scenario_detail"]
    assert code == 0 and detail["rate_source"] != "rate" and "--client-concurrency" in detail["summary"]
    # on two replicas each is simulated with half the clients and requests (and a Poisson rate's half): the scenario
    # line says the figures are one replica's
    code, out, _ = run(capsys, *common, "--gpus", "2", "--client-concurrency", "10", "--num-requests", "100")
    assert code == 0 and json.loads(out)["sim"]["scenario"] == "closed loop: 5 clients, 50 requests per replica (x 2 replicas)"
    code, out, _ = run(capsys, *common, "--gpus", "2", "--rate", "12", "--duration", "5")
    assert code == 0 and json.loads(out)["sim"]["scenario"].startswith("Poisson 6.00 req/s per replica (x 2 replicas)")


def test_speedup_json_reports_the_engine_release_terms_it_priced(capsys):
    """The `efficiency` block is what the table was priced with, the engine release's own terms included: vLLM 0.6's
    n-gram proposer ran on the GPU (0.6.4 moved it to the CPU, vLLM PR 9333), and the only difference between the two
    releases' spec steps is that per-sequence time, so TPOT differs by exactly B x its difference / tokens per pass."""
    def speedup(version):
        _, out, _ = run(capsys, "speedup", "--target", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM-80GB",
                        "--tp", "4", "--engine-version", version, "--max-model-len", "8192", "--method", "ngram",
                        "-k", "4", "--batch-size", "16", "--acceptance-rate", "0.7", "--format", "json")
        return json.loads(out)

    gpu_path, cpu_path = speedup("0.6"), speedup("0.6.4")
    per_seq = gpu_path["efficiency"]["ngram_per_seq_s"] - cpu_path["efficiency"]["ngram_per_seq_s"]
    assert per_seq > 0
    row_gpu, row_cpu = gpu_path["rows"][0], cpu_path["rows"][0]
    assert row_gpu["tpot_s"] - row_cpu["tpot_s"] == pytest.approx(16 * per_seq / row_gpu["tokens_per_pass"], rel=1e-6)


def test_speedup_offline_drops_the_api_server_floor(capsys):
    """Served, the API server streams every sequence's tokens each step (api_per_seq_s, 150 us at vLLM 0.10): at
    batch 128 that floors the plain step at 128 x 0.15 ms = 19.2 ms, above the GPU's step. `--offline`
    (LLM.generate) has no API server: the same batch is priced by the GPU alone, and batch 1, where the floor
    (0.15 ms) is far below the step, is unchanged."""
    def rows(*extra):
        code, out, _ = run(capsys, "speedup", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                           "--engine-version", "0.10.1", "--method", "eagle3",
                           "-k", "3", "--mean-accepted-length", "2.44", "--batch-size", "1,128", "--context-len",
                           "1000", "--format", "json", *extra)
        assert code == 0
        data = json.loads(out)
        return data["efficiency"], data["rows"]

    served_eff, served = rows()
    offline_eff, offline = rows("--offline")
    assert served_eff["api_per_seq_s"] == pytest.approx(150e-6) and offline_eff["api_per_seq_s"] == 0.0
    assert served[1]["tpot_s_no_spec"] == pytest.approx(128 * 150e-6)
    assert offline[1]["tpot_s_no_spec"] < served[1]["tpot_s_no_spec"]
    assert offline[1]["speedup"] < served[1]["speedup"]  # the floor had flattered the speculative step
    assert offline[0]["tpot_s_no_spec"] == pytest.approx(served[0]["tpot_s_no_spec"])


def test_a_candidate_takes_its_own_proposal_rate(capsys):
    """--candidate ...,proposal_rate=0.5 prices an n-gram drafter that proposes in half the steps: 1 + 0.5 x 1.176
    = 1.588 tokens a pass at a = 0.6 and k = 3 (the deployment's own, at vLLM's default share of 0.38:
    1 + 0.38 x 1.176 = 1.44688)."""
    code, out, _ = run(capsys, "speedup", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                       "--method", "ngram", "-k", "3", "--acceptance-rate", "0.6", "--batch-size", "1", "--candidate",
                       "method=ngram,acceptance=0.6,k=3,proposal_rate=0.5", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["rows"][0]["tokens_per_pass"] == pytest.approx(1.44688)
    assert data["candidates"][0]["rows"][0]["tokens_per_pass"] == pytest.approx(1.588)
