"""specsize measure on the CPU: PyTorch-built models against the memory model (weights and KV within 1%), and
acceptance measurement on a pair whose answer is known."""

import json

import pytest

torch = pytest.importorskip("torch", reason="measure needs PyTorch: pip install 'specsize[measure]' "
                                            "(python3 dev.py test installs torch==2.13.0 when it can)")
pytest.importorskip("transformers", reason="measure needs transformers: pip install 'specsize[measure]'")

from specsize.catalog.configs import spec_from_config  # noqa: E402
from specsize.cli.main import main  # noqa: E402
from specsize.measure.run import build_model, measure, measure_acceptance  # noqa: E402

GQA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
       "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 1024,
       "max_position_embeddings": 2048, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
MOE = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_size": 256, "intermediate_size": 384,
       "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 1024,
       "max_position_embeddings": 2048, "num_local_experts": 4, "num_experts_per_tok": 2, "torch_dtype": "bfloat16"}
DRAFT = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128, "intermediate_size": 256,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 1024,
         "max_position_embeddings": 2048, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}


def _within(result, name, tolerance=0.01):
    term = next(t for t in result.terms if t.name == name)
    assert term.measured > 0 and abs(term.error) <= tolerance, (name, term.predicted, term.measured)
    return term


def test_gqa_dense_with_separate_drafter():
    r = measure(spec_from_config(GQA, "gqa", "test"), GQA, None, spec_from_config(DRAFT, "draft", "test"), DRAFT,
                None, batch_size=3, prompt_tokens=100, k=3, device="cpu")
    # KV by hand: 4 layers x 2 x 2 heads x 32 x 2 B = 1,024 B/token x 3 sequences x (100 + 3 + 1) tokens
    assert _within(r, "target KV cache").measured == 1_024 * 3 * 104
    _within(r, "target weights")
    _within(r, "draft weights")  # tied embeddings counted once
    # the drafter also writes its k draft tokens: 104 + 3 positions
    assert _within(r, "draft KV cache").measured == 2 * 2 * 1 * 32 * 2 * 3 * 107


def test_moe():
    r = measure(spec_from_config(MOE, "moe", "test"), MOE, None, None, None, None, batch_size=2, prompt_tokens=64,
                k=2, device="cpu")
    _within(r, "target weights")
    _within(r, "target KV cache")


def test_greedy_acceptance_of_a_model_against_itself_is_one(tmp_path):
    model = build_model(GQA, None, "float32", "cpu")
    result = measure_acceptance(model, model, [[1, 2, 3, 4, 5], [7, 8, 9]], k=3, max_new_tokens=12)
    assert result["greedy"]["mean_accepted_length"] == pytest.approx(4.0)
    assert result["greedy"]["acceptance_rate"] == pytest.approx(1.0, abs=1e-6)
    assert result["sampled"]["mean_accepted_length"] == pytest.approx(4.0)  # identical p and q: always accepted


def test_measure_cli_json_and_store(tmp_path, capsys):
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(GQA))
    store = tmp_path / "s.sqlite"
    with pytest.raises(SystemExit) as exc:
        main(["measure", "--target", str(target / "config.json"), "--device", "cpu", "--gpu-memory-gib", "10",
              "--max-model-len", "1024", "--prompt-tokens", "p50=64,p99=128", "--output-tokens", "p50=8,p99=16",
              "--format", "json", "--record", "tiny", "--store", str(store)])
    assert exc.value.code == 0
    data = json.loads(capsys.readouterr().out)
    weights = next(t for t in data["terms"] if t["term"] == "target weights")
    assert weights["error"] == 0.0 and data["device"] == "cpu"
    from specsize.adapters.store import Store

    with Store(store) as s:
        assert [o.kind for o in s.list(tag="tiny")] == ["footprint"]


def _local_pair(tmp_path):
    """A target and a drafter as local model directories (config.json only: enough to be refused before loading)."""
    for name, config in (("target", GQA), ("draft", DRAFT)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
    return ["--target", str(tmp_path / "target"), "--draft", str(tmp_path / "draft"), "--method", "draft_model",
            "-k", "3", "--device", "cpu", "--gpu-memory-gib", "10", "--max-model-len", "1024",
            "--prompt-tokens", "p50=32,p99=64", "--output-tokens", "p50=8,p99=16", "--weights", "local"]


@pytest.mark.parametrize("lines, problem", [
    ([], "holds no prompts"),
    (['{"prompt_ids": []}'], "prompt_ids must be a non-empty list of integer token ids"),
    (['{"prompt_ids": [1, 2.7]}'], "prompt_ids must be a non-empty list of integer token ids"),
    (['{"prompt_ids": [true, 2]}'], "prompt_ids must be a non-empty list of integer token ids"),
    (['{"prompt_ids": ["a"]}'], "prompt_ids must be a non-empty list of integer token ids"),
    (['{"prompt_ids": 5}'], "prompt_ids must be a non-empty list of integer token ids"),
    (['{"prompt_ids": [1, 2]}', '{"prompt_ids": [1, 1024]}'], "line 2: token id 1024 is outside the vocabulary"),
    (['{"prompt_ids": [-1]}'], "token id -1 is outside the vocabulary"),
    (["[1, 2, 3]"], "has neither prompt_ids nor a prompt text"),
    (['{"text": "hello"}'], "has neither prompt_ids nor a prompt text"),
    (['{"prompt": "hello"}'], "is text, and the tokenizer of"),  # no tokenizer files in the folder
    (["not json"], "is not JSON"),
])
def test_a_bad_prompts_file_is_one_line_before_any_model_is_built(tmp_path, capsys, monkeypatch, lines, problem):
    """Fuzz pass 7: these were internal errors (exit 4) after the memory run (an empty list, ids outside the
    vocabulary, a non-object line, text without a tokenizer), or silently wrong (an empty file measured acceptance 0
    over 0 steps; 2.7 and true were read as ids 2 and 1)."""
    import specsize.measure.run as run

    monkeypatch.setattr(run, "measure_shapes", lambda *a, **k: pytest.fail("a model was built"))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(SystemExit) as exc:
        main(["measure", *_local_pair(tmp_path), "--prompts", str(prompts)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("specsize: error: prompts: ") and problem in err, err


@pytest.mark.parametrize("argv, field", [
    (["--weights", "random", "--prompts", "{prompts}"], "prompts: measuring acceptance needs real weights"),
    (["--record", " "], "record: the tag is empty"),
])
def test_flags_that_cannot_work_are_refused_before_any_model_is_built(tmp_path, capsys, monkeypatch, argv, field):
    """Fuzz pass 7: --prompts with random weights was refused only after the whole memory run (minutes on a CPU);
    an empty --record tag recorded nothing, silently."""
    import specsize.measure.run as run

    monkeypatch.setattr(run, "measure_shapes", lambda *a, **k: pytest.fail("a model was built"))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt_ids": [1, 2, 3]}\n')
    with pytest.raises(SystemExit) as exc:
        main(["measure", *_local_pair(tmp_path), *[a.format(prompts=prompts) for a in argv]])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(f"specsize: error: {field}"), err


def test_sampled_verification_at_temperature_zero_is_greedy():
    """Fuzz pass 7: --temperature 0 (the flag's lower bound) divided the logits by zero: an internal error."""
    target, draft = build_model(GQA, None, "float32", "cpu"), build_model(DRAFT, None, "float32", "cpu")
    result = measure_acceptance(target, draft, [[1, 2, 3, 4, 5], [7, 8, 9]], k=3, max_new_tokens=12, temperature=0)
    assert result["sampled"] == result["greedy"]


def test_a_rejected_draft_is_followed_by_a_draw_from_the_residual():
    """Sampled verification (Leviathan et al. 2023): after a rejection the target's token is drawn from
    max(0, p - q), never one the drafter over-proposed; it had been the target's argmax."""
    from specsize.measure.run import _next_token

    logits = torch.tensor([2.0, 1.0, -30.0, -30.0])  # p ~ [0.73, 0.27, 0, 0]: argmax 0
    q = torch.tensor([1.0, 0.0, 0.0, 0.0])  # the drafter proposed token 0 with certainty, more than p: rejected
    generator = torch.Generator().manual_seed(0)
    assert {_next_token("sampled", logits, q, 1.0, generator) for _ in range(50)} == {1}
    assert _next_token("greedy", logits, q, 1.0, generator) == 0
