"""Loaders: catalog ids, local config.json, model directories with safetensors headers, the hub path."""

import json
import re
import struct
import sys
import types
from pathlib import Path

import pytest

from specsize.catalog import catalog_ids, gpu_ids, load_gpu, load_model
from specsize.core.errors import SpecError
from specsize.core.weights import weight_breakdown

REQUIRED_GPUS = ["H100-SXM-80GB", "H100-PCIe-80GB", "H200-141GB", "H20-96GB", "B200-180GB", "GB200-186GB",
                 "B300-288GB", "A100-40GB", "A100-80GB", "A100-80GB-PCIe", "A40-48GB", "L40S-48GB", "L4-24GB", "A10G-24GB",
                 "RTX-3090-24GB", "RTX-4090-24GB", "RTX-5090-32GB", "RTX-6000-Ada-48GB", "RTX-PRO-6000-96GB",
                 "MI300X-192GB", "MI325X-256GB", "MI355X-288GB"]

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
        "max_position_embeddings": 128, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def test_every_shared_config_is_in_the_catalog(shared):
    ids = set(catalog_ids())
    for cfg in (shared / "model-configs").glob("*/*/config.json"):
        assert f"{cfg.parent.parent.name}/{cfg.parent.name}" in ids
        assert load_model(f"{cfg.parent.parent.name}/{cfg.parent.name}").num_layers > 0


def test_catalog_is_case_insensitive_and_carries_source():
    m = load_model("META-LLAMA/llama-3.1-8b-instruct")
    assert m.model_id == "meta-llama/Llama-3.1-8B-Instruct" and m.source.startswith("catalog: ")


def test_the_vocabulary_read_from_a_catalog_config_is_the_one_its_spec_has():
    """api.catalog_models builds only the catalog models whose config gives the target's vocabulary (the ranked fixes'
    drafts and heads share it): the raw figure must be the spec's wherever it is given."""
    from specsize.api import catalog_models
    from specsize.catalog.models import catalog_vocab

    for model_id in catalog_ids():
        assert catalog_vocab(model_id) in (None, load_model(model_id).vocab_size), model_id
    llama = {m.model_id for m in catalog_models(128256)}
    assert {"meta-llama/Llama-3.2-1B-Instruct", "sgl-project/SpecForge-llama3-8B-eagle3"} <= llama
    assert not any(m.model_id.startswith("Qwen/") for m in catalog_models(128256))
    assert {m.model_id for m in catalog_models()} == set(catalog_ids())


def test_gpu_catalog_has_every_required_id_with_sources():
    assert set(REQUIRED_GPUS) <= set(gpu_ids())
    for gpu_id in REQUIRED_GPUS:
        g = load_gpu(gpu_id)
        assert g.memory_bytes > 0 and g.memory_bandwidth_bytes_s > 0 and g.bf16_flops > 0
        assert g.sources["memory"] and g.sources["performance"]
    assert abs(load_gpu("H100-SXM-80GB").memory_bytes / 2**30 - 79.19) < 0.005  # as the driver reports it


def test_gpu_memory_override():
    assert load_gpu("L4-24GB", 30).memory_bytes == 30 * 2**30


def test_local_config_json(shared):
    path = shared / "model-configs" / "Qwen" / "Qwen3-8B" / "config.json"
    m = load_model(str(path))
    assert m.num_layers == 36 and m.head_dim == 128 and m.source.startswith("local: ")


def _write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_model_directory_with_safetensors_headers(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    _write_safetensors(tmp_path / "model-00001.safetensors",
                       {"model.embed_tokens.weight": ("BF16", [256, 64], 256 * 64 * 2)})
    _write_safetensors(tmp_path / "model-00002.safetensors",
                       {"model.layers.0.mlp.up_proj.weight": ("BF16", [128, 64], 128 * 64 * 2),
                        "lm_head.weight": ("BF16", [256, 64], 256 * 64 * 2)})
    m = load_model(str(tmp_path))
    assert m.weight_bytes_exact == (256 * 64 + 128 * 64 + 256 * 64) * 2


def test_model_directory_with_index_only(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123456},
                                                                       "weight_map": {}}))
    assert load_model(str(tmp_path)).weight_bytes_exact == 123456


def _raw_safetensors(path, header, data: bytes = b"") -> None:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


# TINY's weights by hand: embedding and lm_head 256 x 64 each; per layer q 64 x 64, k and v 64 x 32, o 64 x 64,
# gate / up / down 3 x 64 x 128, two norms of 64; a final norm of 64: 106,816 parameters, 213,632 bf16 bytes
TINY_BYTES = 2 * (2 * 256 * 64 + 2 * (64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128 + 2 * 64) + 64)


@pytest.mark.parametrize("case,needle", [
    ("reversed", "data_offsets [100, 0]"),
    ("negative", "data_offsets [0, -5]"),
    ("past_end", "<= 16, the data's size"),
    ("header_past_file", "a header of 1,000,000 bytes"),
    ("twice", "names 'w' twice"),
    ("not_object", "not a JSON object"),
    ("bad_utf8", "not a JSON object"),
    ("shape", "shape [-1, 64]"),
    ("folder", "is not a file"),
])
def test_malformed_safetensors_are_refused_naming_the_file(tmp_path, case, needle):
    """Fuzz pass 3: reversed or negative offsets planned negative weights as "fits"; other malformed headers ended in
    internal errors. Each is a SpecError of the field weights, naming the file."""
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    shard = tmp_path / "model.safetensors"
    tensor = {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}
    if case == "reversed":
        _raw_safetensors(shard, {"w": tensor | {"data_offsets": [100, 0]}})
    elif case == "negative":
        _raw_safetensors(shard, {"w": tensor | {"data_offsets": [0, -5]}})
    elif case == "past_end":  # a truncated download: the data stops short of the offsets
        _raw_safetensors(shard, {"w": tensor, "v": tensor | {"data_offsets": [16, 32]}}, b"\0" * 16)
    elif case == "header_past_file":
        shard.write_bytes(struct.pack("<Q", 1_000_000) + b"{}")
    elif case == "twice":
        _raw_safetensors(shard, b'{"w": ' + json.dumps(tensor).encode() + b', "w": ' + json.dumps(tensor).encode() + b"}")
    elif case == "not_object":
        _raw_safetensors(shard, [1, 2])
    elif case == "bad_utf8":
        _raw_safetensors(shard, b'{"\xff": 1}')
    elif case == "shape":
        _raw_safetensors(shard, {"w": tensor | {"shape": [-1, 64]}})
    else:
        shard.mkdir()
    with pytest.raises(SpecError) as err:
        load_model(str(tmp_path))
    assert err.value.field == "weights" and needle in str(err.value) and str(tmp_path) in err.value.problem


def test_a_checkpoint_missing_shards_or_implausibly_small_is_refused(tmp_path):
    """An interrupted download (the index lists two shards, one is there) had been planned from the one shard, and an
    index's total_size of 1 byte as the model's weights: both refused."""
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    _write_safetensors(tmp_path / "model-00001-of-00002.safetensors",
                       {"model.embed_tokens.weight": ("BF16", [256, 64], 256 * 64 * 2)})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": TINY_BYTES}, "weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}}))
    with pytest.raises(SpecError, match=r"1 of the 2 shards its index lists are missing \(model-00002-of-00002"):
        load_model(str(tmp_path))
    (tmp_path / "model-00001-of-00002.safetensors").unlink()
    for size, needle in ((1, "0.25x-4x"), (-5, "total_size -5"), (True, "total_size True"), (1.5, "total_size 1.5")):
        index.write_text(json.dumps({"metadata": {"total_size": size}, "weight_map": {}}))
        with pytest.raises(SpecError, match=re.escape(needle)):
            load_model(str(tmp_path))
    index.write_text(json.dumps({"metadata": {"total_size": TINY_BYTES}, "weight_map": {}}))
    assert load_model(str(tmp_path)).weight_bytes_exact == 213_632 == weight_breakdown(
        load_model(str(tmp_path)), rotary_cache=False).total


def test_a_head_without_its_own_embedding_and_lm_head_is_not_taken_for_a_partial_checkpoint(tmp_path):
    """An EAGLE-1 head declared as a Llama (yuhuili's, SafeAILab's configs) ships its layer and fc, not the
    embedding and lm_head it shares with the target: the size check compares the tensors present (the review of stop
    42: it had refused such a head at 0.198x)."""
    (tmp_path / "config.json").write_text(json.dumps(TINY | {"num_hidden_layers": 1}))
    layer = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128 + 2 * 64  # q, o; k, v; gate, up, down; two norms
    _write_safetensors(tmp_path / "model.safetensors", {"model.layers.0.w": ("BF16", [layer], layer * 2),
                                                         "model.norm.weight": ("BF16", [64], 128)})
    assert load_model(str(tmp_path)).weight_bytes_exact == layer * 2 + 128


def test_compressed_tensors_without_weight_groups_is_unquantized():
    """vLLM's CompressedTensorsConfig takes an empty or missing config_groups (sparsity or KV-cache schemes) and
    leaves the weights unquantized; a config_groups that is not a mapping is refused."""
    from specsize.catalog.configs import parse_quantization

    for qc in ({"quant_method": "compressed-tensors"}, {"quant_method": "compressed-tensors", "config_groups": {}},
               {"quant_method": "compressed-tensors", "config_groups": {"g": {"input_activations": {}}}}):
        assert parse_quantization(qc, False, "m") is None
    with pytest.raises(SpecError, match="config_groups"):
        parse_quantization({"quant_method": "compressed-tensors", "config_groups": [1]}, False, "m")


def test_mla_fields_on_a_model_type_without_mla_are_ignored_as_vllm_ignores_them(tmp_path):
    """A Llama config carrying kv_lora_rank and the qk_* fields had been planned with DeepSeek's compressed latent
    cache; vLLM's Llama reads none of them (fuzz pass 3)."""
    (tmp_path / "config.json").write_text(json.dumps(TINY | {"kv_lora_rank": 16, "qk_nope_head_dim": 8,
                                                             "qk_rope_head_dim": 8, "v_head_dim": 16}))
    assert load_model(str(tmp_path)).mla is None


def test_exact_bytes_scale_the_plan(tmp_path):
    from specsize.core.memory import account
    from specsize.core.specs import Deployment
    from specsize.engines import resolve_profile

    (tmp_path / "config.json").write_text(json.dumps(TINY))
    m = load_model(str(tmp_path))
    arch = weight_breakdown(m, rotary_cache=False).total
    exact = m.with_(weight_bytes_exact=arch * 2)
    gpu = load_gpu("L4-24GB")
    w1 = account(Deployment(target=m, gpu=gpu), resolve_profile()).weights_target_bytes
    w2 = account(Deployment(target=exact, gpu=gpu), resolve_profile()).weights_target_bytes
    rotary = 128 * 16 * 2
    assert abs((w2 - rotary) - 2 * (w1 - rotary)) <= 8


def test_hub_path_through_local_files(tmp_path, monkeypatch):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    fake = types.ModuleType("huggingface_hub")
    calls = []

    def hf_hub_download(repo_id, filename):  # the hub's files land in one snapshot folder; a missing one raises
        calls.append((repo_id, filename))
        if not (tmp_path / filename).is_file():
            raise FileNotFoundError(filename)
        return str(tmp_path / filename)

    fake.hf_hub_download = hf_hub_download
    fake.get_safetensors_metadata = lambda repo_id: types.SimpleNamespace(parameter_count={"BF16": 1000, "F32": 10})
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    monkeypatch.setattr("specsize.catalog.models._hub_reachable", lambda: True)
    m = load_model("someone/tiny-llama")
    # config.json, and the hf_quant_config.json a ModelOpt checkpoint may keep beside it (this one has none)
    assert calls == [("someone/tiny-llama", "config.json"), ("someone/tiny-llama", "hf_quant_config.json")]
    assert m.weight_bytes_exact == 1000 * 2 + 10 * 4 and m.source == "hub: someone/tiny-llama"
    assert m.quantization is None
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    q = load_model("someone/tiny-llama-fp8").quantization
    assert q is not None and (q.method, q.kv_cache_dtype) == ("fp8", "fp8")


def test_hub_unreachable_is_a_clear_error(monkeypatch):
    fake = types.ModuleType("huggingface_hub")

    def offline(repo_id, filename):
        raise ConnectionError("offline")

    fake.hf_hub_download = offline
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    monkeypatch.setattr("specsize.catalog.models._hub_reachable", lambda: True)
    with pytest.raises(SpecError, match="hub could not provide it"):
        load_model("meta-llama/Llama-3.1-8B-Instuct")


def test_config_missing_fields(tmp_path):
    cfg = dict(TINY)
    del cfg["num_attention_heads"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SpecError, match="num_attention_heads"):
        load_model(str(tmp_path / "config.json"))


@pytest.mark.parametrize("model_id,kinds", [
    ("google/gemma-3-1b-it", {"sliding": 22, "full": 4}),
    ("openai/gpt-oss-120b", {"sliding": 18, "full": 18}),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", {"chunked": 36, "full": 12}),
    ("deepseek-ai/DeepSeek-R1", {"mla": 61}),
    ("Qwen/Qwen2.5-3B-Instruct", {"full": 36}),  # use_sliding_window false: window is inert
])
def test_attention_kinds(model_id, kinds):
    m = load_model(model_id)
    counts = {}
    for layer in m.layers:
        counts[layer.kind] = counts.get(layer.kind, 0) + 1
    assert counts == kinds


def test_moe_layout():
    v3 = load_model("deepseek-ai/DeepSeek-V3")
    assert len(v3.moe.moe_layers) == 58 and v3.moe.num_shared_experts == 1  # first 3 layers dense
    maverick = load_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert len(maverick.moe.moe_layers) == 24 and maverick.intermediate_size == 16384
    gpt = load_model("openai/gpt-oss-20b")
    assert gpt.quantization.method == "mxfp4" and gpt.quantization.experts_only


def test_offline_machine_answers_at_once(monkeypatch):
    import time

    fake = types.ModuleType("huggingface_hub")
    fake.hf_hub_download = lambda *a: (_ for _ in ()).throw(AssertionError("must not be called offline"))
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    monkeypatch.setattr("specsize.catalog.models._hub_reachable", lambda: False)
    start = time.perf_counter()
    with pytest.raises(SpecError, match="cannot be reached; did you mean meta-llama/Llama-3.1-8B-Instruct"):
        load_model("meta-llama/Llama-3.1-8B-Instuct")
    assert time.perf_counter() - start < 1


# Published variants of catalog models, read offline from their ids (catalog.variants): the base's architecture, the
# weights the name says
@pytest.fixture
def offline(monkeypatch):
    """No hub answers, whether or not huggingface_hub is installed on this machine."""
    monkeypatch.setattr("specsize.catalog.models._hub_reachable", lambda: False)


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("model_id,base,method,zeros", [
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "meta-llama/Llama-3.1-70B-Instruct", "fp8", None),
    ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "meta-llama/Llama-3.3-70B-Instruct", "fp8", None),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "meta-llama/Meta-Llama-3.1-8B-Instruct", "fp8", None),
    ("amd/Mixtral-8x7B-Instruct-v0.1-FP8-KV", "mistralai/Mixtral-8x7B-Instruct-v0.1", "fp8", None),
    ("Qwen/Qwen2.5-72B-Instruct-AWQ", "Qwen/Qwen2.5-72B-Instruct", "int4", True),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "Qwen/Qwen2.5-7B-Instruct", "int4", False),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "meta-llama/Meta-Llama-3.1-8B-Instruct", "int8", None),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "Qwen/Qwen3-235B-A22B", None, None),
    ("unsloth/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", None, None),
    ("meta-llama/Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B", None, None),
    ("Qwen/Qwen3-8B-Base", "Qwen/Qwen3-8B", None, None),
    # a catalog model whose own name ends in -FP8: its layout (attention and two layers' MLPs in bf16) is kept
    ("nvidia/Llama-3.1-405B-Instruct-FP8", "meta-llama/Llama-3.1-405B-Instruct-FP8", None, None),
])
def test_a_published_variant_is_priced_as_its_catalog_model(model_id, base, method, zeros):
    from specsize.catalog.models import variant_note

    m, b = load_model(model_id), load_model(base)
    assert m.model_id == model_id and m.source == f"variant: {base}"
    assert (m.num_layers, m.hidden_size, m.num_kv_heads, m.vocab_size) == (b.num_layers, b.hidden_size,
                                                                           b.num_kv_heads, b.vocab_size)
    if method is None:
        assert m.quantization == b.quantization
    else:  # a stored checkpoint in that format (declared), not quantized at load
        assert m.quantization.method == method and m.quantization.source == "declared"
        if zeros is not None:
            assert m.quantization.has_zeros is zeros  # AWQ keeps zero points, GPTQ is symmetric
    note = variant_note(m)
    assert note.startswith(f"{model_id} is not in the catalog") and f"priced as {base}" in note


@pytest.mark.usefixtures("offline")
def test_a_variants_weights_are_its_base_stored_in_the_format_its_name_says():
    from dataclasses import replace

    from specsize.core.memory import account
    from specsize.core.specs import Deployment, quantization_override
    from specsize.engines import resolve_profile

    gpu = load_gpu("H100-SXM-80GB")
    variant = load_model("Qwen/Qwen3-8B-FP8")
    base = load_model("Qwen/Qwen3-8B")
    # Qwen's own -FP8 checkpoints keep 128 x 128 scale blocks (catalog.variants.QWEN_FP8_BLOCK)
    declared = base.with_(quantization=replace(quantization_override("fp8", base), block=(128, 128)))
    w_variant = account(Deployment(target=variant, gpu=gpu), resolve_profile()).weights_target_bytes
    w_base = account(Deployment(target=declared, gpu=gpu), resolve_profile()).weights_target_bytes
    assert w_variant == w_base
    # by hand: Qwen3-8B's 36 layers of linear weights in fp8 (q 4096x4096, k and v 4096x1024, o 4096x4096, gate, up
    # and down 4096x12288: 192,937,984 bytes a layer), its embedding and lm_head (151,936 x 4096) in bf16
    by_hand = 36 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 12288) + 2 * 151936 * 4096 * 2
    assert abs(w_variant / by_hand - 1) < 0.01


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("model_id", ["foo/Bar-7B", "zai-org/GLM-4.7",
                                      "unsloth/Llama-3.1-8B-Instruct-bnb-4bit", "deepseek-ai/DeepSeek-R1-0528-FP4",
                                      # two formats in one name (fuzz pass 4: read as int4 or fp8 of Meta's fp8 405B)
                                      "meta-llama/Llama-3.1-405B-Instruct-FP8-AWQ", "x/Llama-3.1-405B-Instruct-FP8-FP8",
                                      "nvidia/Llama-3.1-70B-Instruct-FP8-GPTQ-Int4"])
def test_an_id_no_catalog_model_explains_is_still_refused(model_id):
    with pytest.raises(SpecError, match="is not in the catalog"):
        load_model(model_id)


def test_the_hub_wins_over_a_variant_reading_when_it_answers(tmp_path, monkeypatch):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    fake = types.ModuleType("huggingface_hub")
    fake.hf_hub_download = lambda repo_id, filename: str(config)
    fake.get_safetensors_metadata = lambda repo_id: (_ for _ in ()).throw(RuntimeError("no metadata"))
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    monkeypatch.setattr("specsize.catalog.models._hub_reachable", lambda: True)
    m = load_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    assert m.source == "hub: nvidia/Llama-3.1-70B-Instruct-FP8" and m.hidden_size == 64


def test_a_config_the_hub_served_and_specsize_refuses_is_not_read_as_a_variant(tmp_path, monkeypatch):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**TINY, "model_type": "some_new_arch"}))
    fake = types.ModuleType("huggingface_hub")
    fake.hf_hub_download = lambda repo_id, filename: str(config)
    fake.get_safetensors_metadata = lambda repo_id: (_ for _ in ()).throw(RuntimeError("no metadata"))
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    monkeypatch.setattr("specsize.catalog.models._hub_reachable", lambda: True)
    with pytest.raises(SpecError, match="some_new_arch"):
        load_model("unsloth/Llama-3.1-8B-Instruct")


@pytest.mark.usefixtures("offline")
def test_a_head_method_reads_a_named_head_as_it_reads_the_catalog():
    """Fuzz pass 4: `--method eagle3 --draft sgl-project/SpecForge-llama3-70B-eagle3-FP8` on an 8B target had been
    priced as a standard 8B head, and `--draft meta-llama/Llama-3.2-1B-Instruct-FP8` too, where the catalog ids
    without the suffix are refused. A variant is now checked as its catalog model is; only an id that is neither
    readable nor a variant gets the derived head, under that id."""
    from specsize import api
    from specsize.inputs.resolve import speculative_config

    target = load_model("meta-llama/Llama-3.1-8B-Instruct")
    common = dict(target=target.model_id, gpu="H100-SXM-80GB", method="eagle3", num_speculative_tokens=3)
    for whole_model in ("unsloth/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-1B-Instruct-FP8",
                        "sgl-project/SpecForge-llama3-70B-eagle3-FP8"):  # 16 layers; a head 8192 wide
        with pytest.raises(SpecError, match=r"draft: .* is not an eagle3 head for meta-llama/Llama-3.1-8B"):
            api.plan(**common, draft=whole_model)
    head = api.plan(**common, draft="sgl-project/SpecForge-llama3-8B-eagle3-FP8").deployment.speculative.draft
    assert (head.num_layers, head.hidden_size, head.quantization.method) == (1, 4096, "fp8")
    derived = speculative_config("eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 3, 1, target=target).draft
    assert derived.is_derived and derived.num_layers == 1 and derived.model_id == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert derived.names_checkpoint  # the launch command serves the head the user named
    assert not speculative_config("eagle3", None, 3, 1, target=target).draft.names_checkpoint
    model = speculative_config("draft_model", "unsloth/Llama-3.2-1B-Instruct", 3, 1, target=target).draft
    assert model.source == "variant: meta-llama/Llama-3.2-1B-Instruct" and model.num_layers == 16


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("head", ["sgl-project/SpecForge-llama3-8B-eagle3", "sgl-project/SpecForge-llama3-8B-eagle3-FP8",
                                  "SafeAILab/EAGLE-train-config-vicuna-7B"])
def test_a_head_is_neither_a_target_nor_a_draft_model(head):
    """Fuzz pass 4: a one-layer head had been planned as a model to serve, and as a draft model (exit 0)."""
    from specsize import api

    with pytest.raises(SpecError, match="is a drafter head's config") as err:
        api.plan(target=head, gpu="H100-SXM-80GB")
    assert err.value.field == "target"
    if "eagle3" in head:
        with pytest.raises(SpecError, match="not a draft model that runs on its own") as err:
            api.plan(target="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", method="draft_model",
                     draft=head, num_speculative_tokens=3)
        assert err.value.field == "draft"


@pytest.mark.usefixtures("offline")
def test_an_fp8_kv_variant_says_its_kv_cache_is_priced_in_the_model_dtype():
    from specsize.catalog.models import variant_note

    assert "--kv-cache-dtype fp8" in variant_note(load_model("amd/Mixtral-8x7B-Instruct-v0.1-FP8-KV"))
    assert "--kv-cache-dtype" not in variant_note(load_model("nvidia/Llama-3.1-70B-Instruct-FP8"))


@pytest.mark.usefixtures("offline")
def test_plan_simulate_and_speedup_say_what_a_variant_was_priced_as():
    from specsize import api

    said = "Qwen/Qwen3-8B-AWQ is not in the catalog and was not read from the hub: priced as Qwen/Qwen3-8B"
    common = dict(target="Qwen/Qwen3-8B-AWQ", gpu="H100-SXM-80GB", max_model_len=8192)
    assert any(n.startswith(said) for n in api.plan(**common).notes)
    sim = api.simulate(**common, rate=1.0, duration=5.0, no_compare=True)
    assert any(n.startswith(said) for n in sim.notes) and sim.to_dict()["notes"] == list(sim.notes)
    table = api.speedup(**common, method="ngram", num_speculative_tokens="3", acceptance_rate=0.5)
    assert any(n.startswith(said) for n in table.notes)


def test_a_process_that_reads_models_by_name_only_reads_no_path_and_no_hub(tmp_path, monkeypatch):
    # the service sets it: a variant-shaped id that happens to be a folder here is still read by its name
    folder = tmp_path / "org" / "Llama-3.1-8B-Instruct-FP8"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(TINY))
    monkeypatch.chdir(tmp_path)
    assert load_model("org/Llama-3.1-8B-Instruct-FP8").hidden_size == 64  # a CLI reads the folder
    monkeypatch.setenv("SPECSIZE_MODELS_BY_NAME_ONLY", "1")
    fake = types.ModuleType("huggingface_hub")
    fake.hf_hub_download = lambda *a: (_ for _ in ()).throw(AssertionError("the hub must not be read"))
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    monkeypatch.setattr("specsize.catalog.models._hub_reachable", lambda: True)
    m = load_model("org/Llama-3.1-8B-Instruct-FP8")
    assert m.hidden_size == 4096 and m.source == "variant: meta-llama/Llama-3.1-8B-Instruct"
    with pytest.raises(SpecError, match="this server reads no hub"):
        load_model("someone/tiny-llama")


def test_the_catalog_rebuilds_byte_for_byte_from_its_sources(tmp_path):
    """`python3 dev.py catalog` had deleted three entries added by hand (Qwama, both Llama 405B FP8 ids) and undone
    four published corrections (Mistral-Large's context, Mixtral-8x22B-Instruct's vocabulary, two rope types): every
    entry now comes from ../shared/model-configs or tools/model-configs-extra, and a rebuild changes nothing."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    shared = root.parent / "shared" / "model-configs"
    if not shared.is_dir():
        pytest.skip(f"no {shared} to rebuild from")
    done = subprocess.run([sys.executable, str(root / "tools" / "build_catalog.py"), "--shared", str(shared),
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    committed = root / "src" / "specsize" / "catalog" / "data" / "models"
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(p.name for p in committed.glob("*.json"))
    for built in tmp_path.glob("*.json"):
        assert built.read_bytes() == (committed / built.name).read_bytes(), built.name
