"""Hunt 59, fuzz pass 12: local config.json variants of the newest models (GLM-5, NVIDIA Nemotron-3) with a field
left out, null, zero or of another kind, and odd MTP layer patterns. Each had planned silently - with another default
than the model's config class gives the engine, or as a model vLLM does not build - and now plans as vLLM builds it or
is refused in one line naming the field. Every expected number is worked by hand from the published config values.

Sources: transformers 5.19 models/nemotron_h/configuration_nemotron_h.py NemotronHConfig (which vLLM 0.32 loads; vLLM
0.9.1 - 0.11's transformers_utils/configs/nemotron_h.py and SGLang's srt/configs/nemotron_h.py default alike:
head_dim 128, num_key_value_heads 8, n_groups 8, conv_kernel 4, mtp_layers_block_type ["full_attention", "moe"]);
vLLM 0.32 model_executor/models/nemotron_h.py NemotronHAttention (a null head_dim is hidden_size // heads),
nemotron_h_mtp.py NemotronHMultiTokenPredictor (asserts one MTP layer; only * and E letters), models/config.py
NemotronHForCausalLMConfig (mamba_ssm_cache_dtype from the config, else float32), layers/mamba/mamba_utils.py
(_mamba_state_dtype: "auto" keeps the conv state's dtype), config/cache.py MambaDType; deepseek_v2.py
DeepseekV2DecoderLayer (MoE layers wherever n_routed_experts is not None and layer_idx >= first_k_dense_replace)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli as run
from specsize.catalog import catalog_entry
from specsize.catalog.configs import spec_from_config
from specsize.core.errors import SpecError
from specsize.core.kvcache import bytes_per_token, model_kv_layers
from specsize.core.weights import weight_breakdown

NANO, SUPER = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"
GLM5 = "zai-org/GLM-5-FP8"
BF16 = 2
WORKLOAD = ("--prompt-tokens", "2000", "--output-tokens", "300", "--concurrency", "4")

ROOT_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _config(model: str, **changes) -> dict:
    """The catalog's copy of `model`'s config.json with `changes` (a value of ... removes the key)."""
    cfg = dict(catalog_entry(model)["config"])
    for name, value in changes.items():
        if value is ...:
            cfg.pop(name, None)
        else:
            cfg[name] = value
    return cfg


def _write(tmp_path, name: str, cfg: dict) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return str(folder)


def _spec(model: str, **changes):
    return spec_from_config(_config(model, **changes), "variant", "test")


# --- 1. Nemotron-H's MTP step: one layer of '*E', as vLLM builds it ------------------------------------------------

@pytest.mark.parametrize("pattern", ["", "*", "E", "**E", "*E*E", "M*", "*-"])
def test_an_mtp_step_other_than_attention_then_moe_is_refused_with_mtp(tmp_path, capsys, pattern):
    """vLLM builds one MTP step of the config's letters, * and E only (NotImplementedError otherwise; an assertion on an
    empty step); specsize weighs the step as '*E' (an attention and an MoE layer: 1.40 GiB of Super's drafter at TP 4).
    Any other step had been planned as '*E'. Without MTP the checkpoint still plans: the step is never built."""
    target = _write(tmp_path, "super", _config(SUPER, mtp_hybrid_override_pattern=pattern))
    args = ("plan", "--target", target, "--gpu", "H100-SXM-80GB", "--tp", "4", "--max-model-len", "16384", *WORKLOAD)
    code, out, err = run(capsys, *args, "--method", "mtp", "--format", "json")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "mtp_hybrid_override_pattern" in err and repr(pattern) in err and "'*E'" in err
    code, out, _ = run(capsys, *args, "--format", "json")
    assert code == 0 and json.loads(out)["verdict"] in ("fits", "thin", "does_not_fit")


def test_two_nemotron_mtp_layers_are_refused_with_mtp(tmp_path, capsys):
    """num_nextn_predict_layers 2: vLLM asserts 'Only one MTP layer is supported for NemotronH-MTP', so the engine
    never starts; it had been planned a fit with k = 2 and two MTP layers' weights and KV."""
    target = _write(tmp_path, "super2", _config(SUPER, num_nextn_predict_layers=2))
    code, out, err = run(capsys, "plan", "--target", target, "--gpu", "H100-SXM-80GB", "--tp", "4", "--method", "mtp",
                         "--max-model-len", "16384", *WORKLOAD, "--format", "json")
    assert code == 2 and out == ""
    assert "num_nextn_predict_layers" in err and "has 2" in err


@pytest.mark.parametrize("value", [0, -1, True, [1], "X", "*E?"])
def test_an_mtp_pattern_the_config_class_cannot_read_is_refused(tmp_path, capsys, value):
    """NemotronHConfig reads mtp_hybrid_override_pattern letter by letter through {M, E, *, -} (_pattern_to_list): a
    number, a list or another letter stops the config's load, whatever the method. It had been ignored."""
    with pytest.raises(SpecError) as exc:
        _spec(SUPER, mtp_hybrid_override_pattern=value)
    assert exc.value.field == "config.json:mtp_hybrid_override_pattern"


def test_the_published_step_written_either_way_plans_the_same_mtp(capsys, tmp_path):
    """'*E' given, left out (NemotronHConfig's default) or listed as mtp_layers_block_type ["attention", "moe"] (the
    legacy names it remaps): the same step, the catalog's Super at TP 4 with MTP k = 1."""
    def draft_bytes(target):
        code, out, _ = run(capsys, "plan", "--target", target, "--gpu", "H100-SXM-80GB", "--tp", "4", "--method", "mtp",
                           "--max-model-len", "16384", *WORKLOAD, "--format", "json")
        assert code == 0
        plan = json.loads(out)
        return plan["per_gpu"]["weights_draft_bytes"], plan["kv_bytes_per_token"]["draft"]

    published = draft_bytes(SUPER)
    # the step's KV: one attention layer x 2 (K, V) x 2 KV heads x 128 x 1 B (the checkpoint's fp8 KV cache); the two
    # KV heads split over TP 4 replicate to one a rank
    assert published[1] == 1 * 2 * 1 * 128 * 1
    assert draft_bytes(_write(tmp_path, "left-out", _config(SUPER, mtp_hybrid_override_pattern=...))) == published
    listed = _config(SUPER, mtp_hybrid_override_pattern=...)
    listed["mtp_layers_block_type"] = ["attention", "moe"]
    assert draft_bytes(_write(tmp_path, "listed", listed)) == published


def test_an_mtp_layer_list_with_another_step_is_refused_with_mtp(tmp_path, capsys):
    """mtp_layers_block_type wins over mtp_hybrid_override_pattern in NemotronHConfig: a list of one attention layer
    is the step '*', not the pattern's '*E'."""
    cfg = _config(SUPER)
    cfg["mtp_layers_block_type"] = ["full_attention"]
    target = _write(tmp_path, "list", cfg)
    code, _, err = run(capsys, "plan", "--target", target, "--gpu", "H100-SXM-80GB", "--tp", "4", "--method", "mtp",
                       "--max-model-len", "16384", *WORKLOAD)
    assert code == 2 and "an MTP step of '*'" in err


# --- 2. Nemotron-H fields left out take NemotronHConfig's defaults ---------------------------------------------------

def test_nemotron_head_dim_left_out_is_128_and_null_is_hidden_over_heads():
    """Nano: 6 attention layers, 2 KV heads, hidden 2,688 over 32 heads. head_dim left out: the class's 128 -> 6 x 2 x
    2 x 128 x 2 B = 6,144 B a token (had been 2,688 // 32 = 84: 4,032 B); head_dim null: the model code's
    hidden_size // heads = 84 -> 6 x 2 x 2 x 84 x 2 = 4,032 B."""
    left_out = _spec(NANO, head_dim=...)
    assert left_out.head_dim == 128
    assert bytes_per_token(model_kv_layers(left_out, 1, BF16, "target")) == 6 * 2 * 2 * 128 * 2 == 6_144
    null = _spec(NANO, head_dim=None)
    assert null.head_dim == 84
    assert bytes_per_token(model_kv_layers(null, 1, BF16, "target")) == 6 * 2 * 2 * 84 * 2 == 4_032


def test_nemotron_kv_heads_left_out_are_8_and_null_are_every_head():
    """num_key_value_heads left out: the class's 8 -> 6 x 2 x 8 x 128 x 2 = 24,576 B a token (had been every one of
    the 32 heads: 98,304 B); null: NemotronHConfig's 'for backward compatibility' every head -> 98,304 B."""
    left_out = _spec(NANO, num_key_value_heads=...)
    assert left_out.num_kv_heads == 8
    assert bytes_per_token(model_kv_layers(left_out, 1, BF16, "target")) == 6 * 2 * 8 * 128 * 2 == 24_576
    null = _spec(NANO, num_key_value_heads=None)
    assert null.num_kv_heads == 32
    assert bytes_per_token(model_kv_layers(null, 1, BF16, "target")) == 6 * 2 * 32 * 128 * 2 == 98_304


def test_nemotron_groups_left_out_are_8_and_take_the_mamba_name(capsys, tmp_path):
    """n_groups left out: the class's 8 (had been 1). Each of Nano's 23 mamba layers keeps a conv window of 3 rows x
    (64 x 64 + 2 x 8 x 128) channels x 2 B and a float32 state of 64 x 64 x 128 x 4 B: 23 x (36,864 + 2,097,152) =
    49,082,368 B a sequence; with 1 group, 3 x (4,096 + 256) x 2 = 26,112 B of conv: 48,835,072 B. mamba_n_groups,
    the name NemotronHConfig also takes, reads as n_groups."""
    assert catalog_entry(NANO)["config"]["hybrid_override_pattern"].count("M") == 23

    def state(cfg):
        code, out, _ = run(capsys, "plan", "--target", _write(tmp_path, f"v{len(list(tmp_path.iterdir()))}", cfg),
                           "--gpu", "H100-SXM-80GB", "--max-model-len", "16384", *WORKLOAD, "--format", "json")
        assert code == 0
        return json.loads(out)["hybrid"]["state_bytes_per_sequence"]

    assert state(_config(NANO, n_groups=...)) == 23 * (3 * (4096 + 2 * 8 * 128) * 2 + 64 * 64 * 128 * 4) == 49_082_368
    assert state(_config(NANO, n_groups=1)) == 23 * (3 * (4096 + 2 * 1 * 128) * 2 + 64 * 64 * 128 * 4) == 48_835_072
    aliased = _config(NANO, n_groups=...)
    aliased["mamba_n_groups"] = 1
    assert state(aliased) == 48_835_072


# --- 3. mamba_ssm_cache_dtype: auto is the model's dtype, an unknown value is refused -------------------------------

def test_nemotron_ssm_cache_dtype_auto_keeps_the_state_in_the_model_dtype(capsys, tmp_path):
    """'auto' keeps the recurrent state in the conv state's dtype, bf16: 23 x (36,864 + 64 x 64 x 128 x 2) =
    24,965,120 B a sequence (had been float32's 49,082,368)."""
    target = _write(tmp_path, "auto", _config(NANO, mamba_ssm_cache_dtype="auto"))
    code, out, _ = run(capsys, "plan", "--target", target,
                       "--gpu", "H100-SXM-80GB", "--max-model-len", "16384", *WORKLOAD, "--format", "json")
    assert code == 0
    assert json.loads(out)["hybrid"]["state_bytes_per_sequence"] == 23 * (36_864 + 64 * 64 * 128 * 2) == 24_965_120


@pytest.mark.parametrize("value", ["abc", 0, -1, True, ["float32"], "int8"])
def test_nemotron_ssm_cache_dtype_outside_vllms_choices_is_refused(value):
    """vLLM takes auto, float32, float16 or bfloat16 (config/cache.py MambaDType); another value stops the engine.
    It had been planned as float32."""
    with pytest.raises(SpecError) as exc:
        _spec(NANO, mamba_ssm_cache_dtype=value)
    assert exc.value.field == "config.json:mamba_ssm_cache_dtype"


# --- 4. GLM-5 / DeepSeek-V3 fields the model is built from ------------------------------------------------------------

@pytest.mark.parametrize("name, value", [("kv_lora_rank", ...), ("kv_lora_rank", None),
                                         ("moe_intermediate_size", ...), ("moe_intermediate_size", None),
                                         ("first_k_dense_replace", ...), ("first_k_dense_replace", None),
                                         ("n_routed_experts", 0), ("index_topk", ...), ("index_topk", None)])
def test_a_glm5_config_without_what_its_model_is_built_from_is_refused(tmp_path, capsys, name, value):
    """kv_lora_rank left out had planned GLM-5 as GQA over 64 KV heads of 64: 78 x 2 x 8 heads a rank x 64 x 2 B =
    159,744 B of KV a token at TP 8, against the latent's 78 x (576 x 2 + 132) = 100,152; moe_intermediate_size left
    out gave its experts the dense width (548 GB of weights a rank); first_k_dense_replace left out, no dense layers;
    0 routed experts, a dense model vLLM does not build (deepseek_v2.py builds MoE layers whenever n_routed_experts is
    not None); index_topk left out, no indexer, where GlmMoeDsaConfig defaults it to 2048 and vLLM builds the indexer:
    78 x 1,152 = 89,856 B a token instead of 78 x (1,152 + 132) = 100,152."""
    target = _write(tmp_path, "glm5", _config(GLM5, **{name: value}))
    code, out, err = run(capsys, "plan", "--target", target, "--gpu", "H200-141GB", "--tp", "8", *WORKLOAD,
                         "--format", "json")
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"config.json:{name}" in err


def test_glm5_with_null_routed_experts_is_the_dense_model_vllm_builds():
    """n_routed_experts null: DeepseekV2DecoderLayer builds a dense MLP (intermediate_size 12,288) in every layer:
    no MoE, and the refusal above does not reach it."""
    spec = _spec(GLM5, n_routed_experts=None)
    assert spec.moe is None and spec.mla is not None and spec.mla.kv_lora_rank == 512


def test_the_published_configs_still_plan_as_before():
    """The catalog's GLM-5 and Nemotron-3 copies carry every field: MLA 512 + 64 over 78 layers (+ the indexer's
    132 B), and Nano's 63,155,889,408 B of bf16 weights (tests/test_models_glm5_nemotron3.py's hand count)."""
    glm = spec_from_config(catalog_entry(GLM5)["config"], GLM5, "catalog")
    assert glm.mla.kv_lora_rank + glm.mla.qk_rope_head_dim == 576
    nano = spec_from_config(catalog_entry(NANO)["config"], NANO, "catalog")
    assert weight_breakdown(nano, 1).total == 63_155_889_408
    assert (nano.num_kv_heads, nano.head_dim) == (2, 128)


# --- 5. a CSV row with more values than its header names columns ------------------------------------------------------

@pytest.mark.parametrize("command, flag", [("plan", "--samples-file"), ("simulate", "--lengths-file"),
                                           ("simulate", "--trace")])
def test_a_csv_row_wider_than_its_header_is_refused(tmp_path, capsys, command, flag):
    """A spreadsheet's thousands separator: "1,500,200" under prompt_tokens,output_tokens had been read as a prompt of
    1 token and 500 of output (the 200 dropped): `plan` sized p99 requests of 501 tokens, not 1,700. csv.DictReader
    files the extra value under None; the row is now refused, naming the line and the header's columns."""
    header = "timestamp,prompt_tokens,output_tokens" if flag == "--trace" else "prompt_tokens,output_tokens"
    row = "0,1,500,200" if flag == "--trace" else "1,500,200"
    path = tmp_path / "requests.csv"
    path.write_text(f"{header}\n{row}\n")
    duration = ("--duration", "5") if flag == "--lengths-file" else ()
    code, out, err = run(capsys, command, flag, path, "--target", "meta-llama/Llama-3.1-8B-Instruct",
                         "--gpu", "H100-SXM-80GB", *duration, "--format", "json")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "values under a header of" in err and "1500, not 1,500" in err


def test_the_same_request_without_the_separator_or_with_an_empty_trailing_cell_is_read(tmp_path, capsys):
    """1500,200 is a request of 1,500 + 200 tokens; a trailing empty cell (0,1500,200,) moves no value."""
    path = tmp_path / "requests.csv"
    path.write_text("prompt_tokens,output_tokens\n1500,200,\n")
    code, out, _ = run(capsys, "plan", "--samples-file", path, "--target", "meta-llama/Llama-3.1-8B-Instruct",
                       "--gpu", "H100-SXM-80GB", "--format", "json")
    assert code == 0
    envelope = json.loads(out)["envelope"]
    assert (envelope["prompt_tokens"], envelope["output_tokens"]) == (1500, 200)


# --- 6. a mean accepted length beside several k -----------------------------------------------------------------------

def test_a_mean_length_beside_a_k_list_needs_its_k(capsys):
    """GLM-5's MTP at 1.9 tokens a pass: measured at k = 1 that is a = 0.9 (1 + a), at k = 3 a = 0.509 (1 + a + a^2 +
    a^3). `speedup -k 1,3` had read it at k = 1 and `-k 3,1` at k = 3: k = 3 priced 2.72x or 1.50x for one
    measurement. Without --measured-at-k it is refused; with it, both orders give the one table."""
    base = ("speedup", "--target", GLM5, "--gpu", "H200-141GB", "--tp", "8", "--method", "mtp",
            "--mean-accepted-length", "1.9", "--batch-size", "1", "--format", "json")
    for ks in ("1,3", "3,1"):
        code, out, err = run(capsys, *base, "-k", ks)
        assert code == 2 and out == "" and "measured_at_k" in err
    tables = []
    for ks in ("1,3", "3,1"):
        code, out, err = run(capsys, *base, "-k", ks, "--measured-at-k", "1")
        assert code == 0, err
        data = json.loads(out)
        assert data["acceptance_rate"] == pytest.approx(0.9, rel=1e-9)
        tables.append(sorted((row["k"], row["speedup"]) for row in data["rows"]))
    assert [k for k, _ in tables[0]] == [k for k, _ in tables[1]] == [1, 3]
    assert [x for _, x in tables[0]] == pytest.approx([x for _, x in tables[1]])
    # one k: the mean is that k's (the flag's documented default)
    code, out, _ = run(capsys, *base, "-k", "3")
    assert code == 0
    a = json.loads(out)["acceptance_rate"]
    assert 1 + a + a ** 2 + a ** 3 == pytest.approx(1.9, rel=1e-9) and a == pytest.approx(0.509, abs=1e-3)


def test_a_candidates_mean_length_beside_a_k_list_needs_its_k(capsys):
    """A candidate n-gram drafter at 1.5 tokens a pass had been read at the -k list's first: a = 0.50 (1 + a at k = 1)
    under -k 1,3 and a = 0.34 (1 + a + a^2 + a^3 = 1.5) under -k 3,1. Refused without its k; with k=1 it is a = 0.5
    and priced at its k."""
    base = ("speedup", "--target", GLM5, "--gpu", "H200-141GB", "--tp", "8", "--method", "mtp", "--acceptance-rate",
            "0.8", "--batch-size", "1", "--format", "json")
    for ks in ("1,3", "3,1"):
        code, out, err = run(capsys, *base, "-k", ks, "--candidate", "method=ngram,mean_accepted_length=1.5")
        assert code == 2 and out == "" and "candidate" in err and "no k it was measured at" in err
    code, out, err = run(capsys, *base, "-k", "3,1", "--candidate", "method=ngram,mean_accepted_length=1.5,k=1")
    assert code == 0, err
    (candidate,) = json.loads(out)["candidates"]
    assert candidate["acceptance_rate"] == pytest.approx(0.5, rel=1e-9)
    assert [row["k"] for row in candidate["rows"]] == [1]


# --- 7. a hybrid pool of fewer blocks than max_num_seqs: the engine does not start ------------------------------------

NANO_16K = ("--target", NANO, "--gpu", "H100-SXM-80GB", "--max-model-len", "16384", "--prompt-tokens", "2000",
            "--output-tokens", "300", "--concurrency", "8")


def test_simulate_refuses_a_hybrid_engine_whose_graphs_need_more_state_blocks_than_it_has(capsys):
    """vLLM 0.32 config/compilation.py raises 'max_num_seqs (1024) exceeds available Mamba cache blocks' with full
    decode CUDA graphs (issue 34094): Nano on one H100 at max_model_len 16,384 never starts, as `plan` says. `simulate`
    had replayed it and printed 'sustains the load: yes' (exit 0); it must refuse it as it refuses any engine that
    does not start. At max_num_seqs 512, within the pool's blocks, it starts and is simulated."""
    code, out, _ = run(capsys, "plan", *NANO_16K)
    assert code == 0 and "exceeds the hybrid pool's" in out and "does not start" in out.lower()
    code, out, _ = run(capsys, "simulate", *NANO_16K, "--max-num-seqs", "512", "--duration", "10")
    assert code == 0 and "sustains the load" in out
    code, out, err = run(capsys, "simulate", *NANO_16K, "--duration", "10")
    assert code == 2 and out == "" and "the engine does not start" in err


def test_a_release_written_with_a_capital_v_reads_as_with_a_small_one(capsys):
    """A git tag copied as 'V0.7.3' had been refused ('cannot read version') where 'v0.7.3' and '0.7.3' plan: the
    same release, the same profile (vLLM 0.7.1-0.7's V0, 256 sequences by default)."""
    from specsize.engines.registry import is_series, release, release_key, resolve_profile

    assert release("V0.7.3") == release("v0.7.3") == (0, 7)
    assert release_key("V0.6.3.post1") == (0, 6, 3, 1) and not is_series("V0.7.3") and is_series("V0.7")
    assert resolve_profile("vllm", "V0.7.3") is resolve_profile("vllm", "0.7.3")
    code, out, _ = run(capsys, "plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB",
                       "--engine-version", "V0.7.3", "--format", "json")
    assert code == 0 and json.loads(out)


def test_a_files_mean_reads_alike_whatever_the_order_of_k(capsys, tmp_path):
    """Review of stop 59: a deployment file's mean beside the file's own k (DeepSeek-V3 MTP, k = 3, 2.5 tokens) is that
    k's measurement whatever order `-k` lists (3,2,4 had left it unpinned, the list's first being the file's k), and a
    file's mean without a k beside several k is refused as the flags' is (-k 1,3 had read 1.9 tokens at k = 1, a = 0.90,
    and -k 3,1 at k = 3, a = 0.51). At k = 3, 2.5 tokens a pass: 1 + a + a^2 + a^3 = 2.5."""
    src = (ROOT_EXAMPLES / "deepseek-v3-mtp-8xh200.yaml").read_text()
    with_k = tmp_path / "with_k.yaml"
    with_k.write_text(src.replace("num_speculative_tokens: 1", "num_speculative_tokens: 3\nmean_accepted_length: 2.5"))
    tables = []
    for ks in ("3,2,4", "2,3,4", "4,3,2"):
        code, out, _ = run(capsys, "speedup", str(with_k), "-k", ks, "--batch-size", "1", "--format", "json")
        assert code == 0
        tables.append(sorted((r["k"], round(r["speedup"], 9)) for r in json.loads(out)["rows"]))
    assert tables[0] == tables[1] == tables[2]
    without_k = tmp_path / "without_k.yaml"
    without_k.write_text(src.replace("num_speculative_tokens: 1\n", "mean_accepted_length: 1.9\n"))
    for ks in ("1,3", "3,1"):
        code, out, err = run(capsys, "speedup", str(without_k), "-k", ks, "--batch-size", "1")
        assert code == 2 and out == "" and "measured_at_k" in err


@pytest.mark.parametrize("quant,before,first", [("nvfp4", "0.7.3", "0.8.0"), ("modelopt_fp4", "0.7.3", "0.8.0"),
                                                ("mxfp4", "0.8.5", "0.9.0")])
def test_a_4_bit_float_checkpoint_before_the_release_that_loads_it_is_refused(capsys, quant, before, first):
    """vLLM's quantization registry, read in the PyPI sdists: ModelOptNvFp4Config ("nvfp4") from 0.8.0, none in 0.7.3;
    Quark's W4A4 MXFP4 scheme from 0.9.0, none in 0.8.5. Planned on an older release, the server never loads the
    checkpoint: refused naming the first release; that release plans."""
    args = ("plan", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--quantization", quant)
    code, out, err = run(capsys, *args, "--engine-version", before)
    assert code == 2 and out == "" and f"the first release whose quantization registry holds the format is {first}" \
        in err
    code, _, _ = run(capsys, *args, "--engine-version", first, "--format", "json")
    assert code == 0
