"""Local model folders: which safetensors count, at which dtype, and what their config.json allows.

Every fixture is built here in tmp_path (a config.json and header-only safetensors files); expectations are worked
out by hand from the tensor shapes below.
"""

from __future__ import annotations

import json
import struct

import pytest

from helpers import SHARED, deployment, profile, run_cli as run, write_safetensors_header
from specsize.engines import resolve_profile
from specsize.catalog import load_model
from specsize.core.memory import account

# A tiny Llama: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 128, vocabulary 256, untied, 128 positions.
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
        "max_position_embeddings": 128, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}

# Its tensors. Elements: embedding 256 x 64 = 16,384, lm_head 16,384, final norm 64; per layer q 64 x 64 = 4,096,
# k and v 32 x 64 = 2,048 each, o 4,096, gate, up and down 128 x 64 = 8,192 each, two norms of 64: 36,992;
# two layers 73,984. In all 16,384 + 16,384 + 64 + 73,984 = 106,816 elements.
ELEMENTS = 106_816
BF16_BYTES = ELEMENTS * 2  # 213,632
F32_BYTES = ELEMENTS * 4  # 427,264
# the rotary cos/sin cache vLLM counts with the weights (not in the checkpoint): 128 positions x 16 dims
ROTARY_BF16, ROTARY_F32 = 128 * 16 * 2, 128 * 16 * 4


def _tiny_tensors(prefix: str = "model.") -> dict[str, list[int]]:
    shapes = {f"{prefix}embed_tokens.weight": [256, 64], f"{prefix}norm.weight": [64], "lm_head.weight": [256, 64]}
    for i in range(2):
        layer = f"{prefix}layers.{i}."
        shapes |= {layer + "self_attn.q_proj.weight": [64, 64], layer + "self_attn.k_proj.weight": [32, 64],
                   layer + "self_attn.v_proj.weight": [32, 64], layer + "self_attn.o_proj.weight": [64, 64],
                   layer + "mlp.gate_proj.weight": [128, 64], layer + "mlp.up_proj.weight": [128, 64],
                   layer + "mlp.down_proj.weight": [64, 128], layer + "input_layernorm.weight": [64],
                   layer + "post_attention_layernorm.weight": [64]}
    return shapes


def _write_header(path, shapes: dict[str, list[int]], dtype: str = "BF16") -> None:
    """A header-only safetensors file of one dtype (helpers.write_safetensors_header)."""
    write_safetensors_header(path, {name: (dtype, shape) for name, shape in shapes.items()})


def _folder(tmp_path, config: dict | str = TINY, dtype: str = "BF16"):
    (tmp_path / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    _write_header(tmp_path / "model.safetensors", _tiny_tensors(), dtype)
    return tmp_path




def _one_line_error(code: int, err: str, needle: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert needle in err, err


# B1: a folder with HF shards, their index and Mistral's consolidated.safetensors


def _sharded_with_consolidated(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    shapes = _tiny_tensors()
    names = list(shapes)
    first, second = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    _write_header(tmp_path / first, {n: shapes[n] for n in names[:10]})
    _write_header(tmp_path / second, {n: shapes[n] for n in names[10:]})
    index = {"metadata": {"total_size": BF16_BYTES},
             "weight_map": {n: first if i < 10 else second for i, n in enumerate(names)}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    # the same weights again under Mistral's own names, which vLLM leaves out (filter_duplicate_safetensors_files)
    mistral = {n.replace("model.", "").replace("self_attn.q_proj", "attention.wq").replace("lm_head", "output"): s
               for n, s in shapes.items()}
    _write_header(tmp_path / "consolidated.safetensors", mistral)
    return tmp_path


def test_an_index_counts_only_the_shards_it_names(tmp_path):
    m = load_model(str(_sharded_with_consolidated(tmp_path)))
    assert m.weight_bytes_exact == BF16_BYTES  # not 2 x 213,632 with consolidated.safetensors counted too


def test_an_index_whose_shards_are_absent_is_still_refused_beside_a_consolidated_file(tmp_path):
    folder = _sharded_with_consolidated(tmp_path)
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(Exception, match="1 of the 2 shards its index lists are missing"):
        load_model(str(folder))


# B2: floating-point tensors count at the served dtype


def _weights(folder, dtype: str) -> int:
    d = deployment(target=str(folder), dtype=dtype, max_model_len=128)
    return account(d, profile()).weights_target_bytes


def test_a_bf16_checkpoint_served_in_float32_holds_four_bytes_a_parameter(tmp_path):
    folder = _folder(tmp_path)
    assert load_model(str(folder)).weight_bytes_exact == BF16_BYTES  # as stored (the disk plan's figure)
    assert _weights(folder, "bfloat16") == BF16_BYTES + ROTARY_BF16  # 217,728
    assert _weights(folder, "float32") == F32_BYTES + ROTARY_F32  # 435,456 (was 221,824: the bf16 bytes)


def test_a_float32_checkpoint_served_in_bf16_holds_two_bytes_a_parameter(tmp_path):
    # a float32 config: vLLM's dtype auto serves it in bfloat16
    folder = _folder(tmp_path, {**TINY, "torch_dtype": "float32"}, dtype="F32")
    assert load_model(str(folder)).weight_bytes_exact == F32_BYTES
    assert _weights(folder, "auto") == BF16_BYTES + ROTARY_BF16  # 217,728 (was 431,360: the float32 bytes)
    assert _weights(folder, "float32") == F32_BYTES + ROTARY_F32


def test_quantized_tensors_stay_as_stored(tmp_path):
    # int8 linear weights with float32 per-channel scales: only the 16-bit embedding, lm_head and norms follow the
    # served dtype. Stored: 16,384 x 2 x 2 (embedding, lm_head) + 64 x 5 x 2 (norms) = 66,176 bytes of BF16;
    # 73,728 int8 bytes (the layers' linear weights: 2 x (12,288 + 24,576)); scales 4 bytes per output row.
    shapes = _tiny_tensors()
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    header, offset = {}, 0
    for name, shape in shapes.items():
        linear = len(shape) == 2 and ".layers." in name
        size = shape[0] * shape[1] if linear else 2 * (shape[0] * (shape[1] if len(shape) > 1 else 1))
        header[name] = {"dtype": "I8" if linear else "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
        if linear:
            header[name + "_scale"] = {"dtype": "F32", "shape": [shape[0], 1],
                                       "data_offsets": [offset, offset + 4 * shape[0]]}
            offset += 4 * shape[0]
    raw = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    m = load_model(str(tmp_path))
    # scales: per layer (64 + 32 + 32 + 64 + 128 + 128 + 64) rows x 4 bytes = 2,048; two layers 4,096
    assert m.weight_bytes_exact == 66_176 + 73_728 + 4_096
    assert m.weight_bytes_served("float32") == 66_176 * 2 + 73_728 + 4_096
    assert m.weight_bytes_served("bfloat16") == m.weight_bytes_exact


# B8: a DeepSeek-style MTP config whose num_hidden_layers is not a number


@pytest.mark.parametrize("value", ["missing", None, "sixteen"])
def test_an_mtp_config_without_a_layer_count_is_a_one_line_error(tmp_path, capsys, value):
    config = {**TINY, "num_nextn_predict_layers": 1}
    if value == "missing":
        del config["num_hidden_layers"]
    else:
        config["num_hidden_layers"] = value
    folder = _folder(tmp_path, config)
    code, _, err = run(capsys, "plan", "--target", folder, "--gpu", "H100-SXM-80GB")
    _one_line_error(code, err, "num_hidden_layers")


# B9: integers past Python's 4,300-digit conversion limit


def test_a_config_with_a_number_of_5000_digits_is_a_one_line_error(tmp_path, capsys):
    text = json.dumps(TINY).replace('"vocab_size": 256', '"vocab_size": 1' + "0" * 4999)
    folder = _folder(tmp_path, text)
    code, _, err = run(capsys, "plan", "--target", folder, "--gpu", "H100-SXM-80GB")
    _one_line_error(code, err, "config.json")


def test_an_index_with_a_number_of_5000_digits_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"metadata": {"total_size": 1' + "0" * 4999 + '}, "weight_map": {}}')
    code, _, err = run(capsys, "plan", "--target", tmp_path, "--gpu", "H100-SXM-80GB")
    _one_line_error(code, err, "model.safetensors.index.json")


# B11: the longest context as vLLM derives it from rope_scaling and the config's length keys


def _qwen_yarn(tmp_path):
    config = json.loads((SHARED / "model-configs" / "Qwen" / "Qwen2.5-7B-Instruct" / "config.json").read_text())
    assert config["max_position_embeddings"] == 32768
    # Qwen's documented long-context setup (the model card's "Processing Long Texts")
    config["rope_scaling"] = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_a_yarn_config_serves_and_defaults_to_its_scaled_context(tmp_path, capsys, shared):
    folder = _qwen_yarn(tmp_path)
    settings = account(deployment(target=str(folder)), profile()).settings
    assert settings.max_model_len == 32768 * 4  # vLLM's default, yarn: original x factor = 131,072; was 32,768
    code, out, err = run(capsys, "plan", "--target", folder, "--gpu", "H100-SXM-80GB", "--max-model-len", "131072",
                         "--format", "json")
    assert code in (0, 1, 3) and json.loads(out)["max_concurrency_tokens"] == 131072, err  # was refused, exit 2
    code, _, err = run(capsys, "plan", "--target", folder, "--gpu", "H100-SXM-80GB", "--max-model-len", "131073")
    _one_line_error(code, err, "max_model_len")


def test_sglang_keeps_its_own_context_for_a_yarn_config(tmp_path, capsys, shared):
    # SGLang applies no rope factor beside original_max_position_embeddings (get_context_length) and refuses a longer
    # --context-length: its plan keeps 32,768 and refuses 131,072, where a vLLM plan takes it
    folder = _qwen_yarn(tmp_path)
    settings = account(deployment(target=str(folder)), resolve_profile("sglang")).settings
    assert settings.max_model_len == 32768
    code, _, err = run(capsys, "plan", "--target", folder, "--gpu", "H100-SXM-80GB", "--engine", "sglang",
                       "--max-model-len", "131072")
    _one_line_error(code, err, "max_model_len")


@pytest.mark.parametrize("extra,limit", [
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 32}}, 128),
    ({"rope_scaling": {"type": "mrope", "mrope_section": [4, 2, 2]}}, 128),  # mrope: factor 1
    ({"rope_scaling": {"rope_type": "longrope", "factor": 4.0}}, 128),
    ({"rope_scaling": {"type": "linear", "factor": 2.0}}, 256),  # linear, dynamic: x factor
    ({"rope_scaling": {"type": "dynamic", "factor": 3.0}}, 384),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}}, 256),
    ({"rope_scaling": {"factor": 8.0}}, 128),  # no type: not scaled
    ({"seq_length": 100}, 100),  # the smallest length key
    ({"seq_length": 100, "model_max_length": 200}, 200),  # model_max_length wins where set
    ({"rope_scaling": {"type": "linear", "factor": 2.0}, "model_type": "gemma3_text",
      "architectures": ["Gemma3ForCausalLM"]}, 128),  # Gemma 3: already scaled
])
def test_the_default_max_model_len_follows_vllm(tmp_path, extra, limit):
    (tmp_path / "config.json").write_text(json.dumps({**TINY, **extra}))
    assert account(deployment(target=str(tmp_path / "config.json")), profile()).settings.max_model_len == limit
