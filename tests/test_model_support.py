"""A plan for an engine release that cannot load the model is refused (engines.support, data/model_support.json:
the first release whose model registry names each architecture's class, read in the releases' PyPI packages)."""

import json
from pathlib import Path

import pytest

import specsize
from helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "src" / "specsize" / "engines" / "data" / "model_support.json"


@pytest.mark.parametrize("engine, version, target, first", [
    ("vllm", "0.10.0", "openai/gpt-oss-20b", "0.10.1"),  # GptOssForCausalLM from 0.10.1
    ("vllm", "0.10", "openai/gpt-oss-20b", None),  # the 0.10 series holds 0.10.1: not refused
    ("vllm", "0.9", "openai/gpt-oss-20b", "0.10.1"),
    ("vllm", "0.7.3", "google/gemma-3-12b-it", "0.8.0"),  # Gemma3ForConditionalGeneration from 0.8.0
    ("vllm", "0.8.3", "Qwen/Qwen3-8B", "0.8.4"),
    ("vllm", "0.10.1", "moonshotai/Kimi-K2-Instruct", None),  # 0.10.0 reads kimi_k2 as MLA: accepted
    ("sglang", "0.5.1", "Qwen/Qwen3-Next-80B-A3B-Instruct", "0.5.2"),
])
def test_a_release_that_cannot_load_the_model_is_refused(capsys, engine, version, target, first):
    args = ("plan", "--target", target, "--gpu", "H200-141GB", "--method", "none", "--engine", engine,
            "--engine-version", version, "--tp", "8", "--gpus", "8")
    code, _, err = run(capsys, *args)
    if first is None:
        assert "cannot load" not in err
        return
    assert code == 2 and err.startswith("specsize: error: engine_version:") and "cannot load" in err
    assert f"engine_version {first} or later" in err


def test_a_multimodal_checkpoint_is_checked_as_the_wrapper_the_engine_loads():
    # Mistral-Small-3.1 is mistral3 around a mistral language model: vLLM registers Mistral3ForConditionalGeneration
    # from 0.8.3, and the publisher serves its Mistral-format checkpoint through Pixtral from 0.8.1 (the model card:
    # "Make sure you install vLLM >= 0.8.1"): only what no format loads is refused
    from specsize.catalog import load_model

    m = load_model("mistralai/Mistral-Small-3.1-24B-Instruct-2503")
    assert (m.model_type, m.checkpoint_type) == ("mistral", "mistral3")
    with pytest.raises(specsize.SpecError, match="cannot load a mistral3 model"):
        specsize.plan(target=m.model_id, gpu="H100-SXM-80GB", engine_version="0.8.0", method="none")
    assert specsize.plan(target=m.model_id, gpu="H100-SXM-80GB", engine_version="0.8.1", method="none").verdict


def test_a_qwen35_checkpoint_loads_from_its_wrappers_release_not_its_text_models():
    """A qwen3_5_moe checkpoint wraps a qwen3_5_moe_text language model: vLLM loads the wrapper from 0.17.0 (the text
    class alone, for a text-only checkpoint, from 0.27.0). It had been refused on 0.17 - 0.26 by its inner type."""
    from test_hybrid import QWEN36_35B

    from specsize.catalog.configs import spec_from_config

    wrapper = {"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"],
               "text_config": QWEN36_35B}
    m = spec_from_config(wrapper, "qwen3.6-35b", "test")
    assert m.checkpoint_type == "qwen3_5_moe"
    from specsize.engines.support import check_model_support

    check_model_support("vllm", "0.17.0", m)
    check_model_support("sglang", "0.5.9", m)
    with pytest.raises(specsize.SpecError, match="first release that does is 0.17.0"):
        check_model_support("vllm", "0.16", m)


def test_a_draft_model_is_checked_as_a_model_of_its_own():
    with pytest.raises(specsize.SpecError, match="cannot load a qwen3 model"):
        specsize.plan(target="Qwen/Qwen2.5-7B-Instruct", draft="Qwen/Qwen3-0.6B", num_speculative_tokens=3,
                      gpu="H100-SXM-80GB", engine_version="0.8.3")  # Qwen3ForCausalLM from 0.8.4


def test_every_modelled_architecture_has_a_sourced_entry_for_both_engines():
    from specsize.catalog.configs import MODELLED_TYPES

    data = json.loads(DATA.read_text())
    for engine in ("vllm", "sglang"):
        for model_type in MODELLED_TYPES:
            entry = data[engine].get(model_type)
            assert entry is not None and entry.get("source"), (engine, model_type)


def test_a_search_for_a_release_that_cannot_load_its_target_is_refused(tmp_path):
    example = Path(__file__).resolve().parents[1] / "examples" / "search" / "llama70b.yaml"
    spec = tmp_path / "s.yaml"
    spec.write_text(example.read_text().replace("target: meta-llama/Llama-3.1-70B-Instruct",
                                                "target: openai/gpt-oss-120b\nengine_version: '0.9'")
                    .replace("  - {method: draft_model, draft: meta-llama/Llama-3.2-1B-Instruct, acceptance_rate: 0.65}\n", "")
                    .replace("  - {method: eagle3, draft: sgl-project/SpecForge-llama3-70B-eagle3, mean_accepted_length: "
                             "3.2, measured_at_k: 4}\n", ""))
    with pytest.raises(specsize.SpecError, match="cannot load a gpt_oss model"):
        specsize.search(spec, simulate=False)
