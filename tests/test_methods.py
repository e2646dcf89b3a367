"""A speculative method the engine release cannot launch is refused (exit 2), not planned.

The boundaries are the first releases read in the engines' PyPI wheels (engines/methods.py cites file and line):
vLLM EAGLE-3 from 0.8.5, DeepSeek MTP from 0.7.3, a draft model absent from 0.10.0 to 0.14.x (V0 removed, V1's
back in 0.15.0), Medusa removed in 0.33.0; SGLang NEXTN from 0.4.3.post1, EAGLE3 from 0.4.4.post2, STANDALONE
from 0.5.2, NGRAM from 0.5.3, Medusa never.
"""

from __future__ import annotations

import pytest

from specsize.cli.main import main
from specsize.core.errors import SpecError
from specsize.core.speculation import SpecMethod
from specsize.engines.methods import available, check_method

REFUSED = [
    ("vllm", "0.6", "eagle3"), ("vllm", "0.7", "eagle3"), ("vllm", "0.8.4", "eagle3"),
    ("vllm", "0.6", "mtp"), ("vllm", "0.6.4", "mtp"), ("vllm", "0.7.2", "mtp"),
    ("vllm", "0.10", "draft_model"), ("vllm", "0.12", "draft_model"), ("vllm", "0.14.1", "draft_model"),
    ("vllm", "0.33", "medusa"),
    ("sglang", "0.4", "ngram"), ("sglang", "0.5.2", "ngram"), ("sglang", "0.4", "draft_model"),
    ("sglang", "0.5.1", "draft_model"), ("sglang", "0.4.0", "eagle"), ("sglang", "0.4.2", "mtp"),
    ("sglang", "0.4.3", "eagle3"),
]
ALLOWED = [
    ("vllm", "0.8", "eagle3"),  # the 0.8 series includes 0.8.5
    ("vllm", "0.8.5", "eagle3"), ("vllm", "0.7", "mtp"), ("vllm", "0.7.3", "mtp"), ("vllm", "0.9", "draft_model"),
    ("vllm", "0.15", "draft_model"), ("vllm", "0.6", "draft_model"), ("vllm", "0.6", "eagle"), ("vllm", "0.6", "ngram"),
    ("vllm", "0.6", "medusa"), ("vllm", "0.32", "medusa"), ("vllm", "0.32", "eagle3"),
    ("sglang", "0.5", "ngram"), ("sglang", "0.5.3", "ngram"), ("sglang", "0.5.2", "draft_model"),
    ("sglang", "0.4", "eagle"), ("sglang", "0.4", "mtp"), ("sglang", "0.4", "eagle3"),
]


@pytest.mark.parametrize("engine,version,method", REFUSED)
def test_a_release_without_the_method_is_refused(engine, version, method):
    assert not available(engine, version, SpecMethod(method))
    with pytest.raises(SpecError) as err:
        check_method(engine, version, SpecMethod(method))
    assert err.value.field == "method"
    assert method not in err.value.accepted.split(" with ")[0].split(", ")


@pytest.mark.parametrize("engine,version,method", ALLOWED)
def test_a_release_with_the_method_is_planned(engine, version, method):
    assert available(engine, version, SpecMethod(method))
    check_method(engine, version, SpecMethod(method))


@pytest.mark.parametrize("method", [m for m in SpecMethod if m != SpecMethod.MEDUSA])
def test_the_newest_vllm_release_launches_every_method(method):
    assert available("vllm", None, method)


def test_a_plan_without_a_version_takes_the_newest_release_which_has_no_medusa():
    # vLLM 0.33 removed Medusa (config/speculative.py SpeculativeMethod; MedusaProposer deleted): a plan that names no
    # release is planned with 0.33's profile, and had still launched it there
    assert not available("vllm", None, SpecMethod.MEDUSA) and not available("vllm", "latest", SpecMethod.MEDUSA)
    assert available("vllm", "0.32", SpecMethod.MEDUSA)
    with pytest.raises(SpecError) as err:
        check_method("vllm", None, SpecMethod.MEDUSA)
    assert "vLLM 0.33 (the newest" in str(err.value) and "medusa with" not in str(err.value)


def test_sglang_never_had_medusa():
    assert not available("sglang", "0.5.14", SpecMethod.MEDUSA)
    assert not available("sglang", None, SpecMethod.MEDUSA)


def test_the_cli_refuses_eagle3_on_vllm_06_with_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["speedup", "--target", "Qwen/Qwen3-8B", "--method", "eagle3", "--engine-version", "0.6",
              "--gpu", "H100-SXM-80GB", "-k", "3", "--acceptance-rate", "0.6"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "method" in err and "0.8.5" in err


def test_the_cli_plans_eagle3_on_vllm_085(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["speedup", "--target", "Qwen/Qwen3-8B", "--method", "eagle3", "--engine-version", "0.8.5",
              "--gpu", "H100-SXM-80GB", "-k", "3", "--acceptance-rate", "0.6", "--format", "json"])
    assert exit_info.value.code == 0


def test_a_search_spec_with_a_method_its_release_lacks_is_refused(tmp_path, capsys):
    spec = tmp_path / "search.yaml"
    spec.write_text("target: Qwen/Qwen3-8B\nengine: sglang\nengine_version: '0.4'\n"
                    "drafters:\n  - {method: ngram, acceptance_rate: 0.5}\n"
                    "gpus: [{gpu: H100-SXM-80GB, counts: [1]}]\ntp: [1]\n"
                    "workload: {prompt_tokens: 512, output_tokens: 256, concurrency: 8}\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["search", str(spec)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert "ngram" in err and "0.5.3" in err


def test_docs_table_names_every_boundary():
    from pathlib import Path

    from specsize.engines.methods import METHOD_RELEASES, NEVER

    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    rows = {line.split("|")[1].strip(): line.split("|")[2:4] for line in text.splitlines()
            if line.startswith("| ") and line.count("|") == 4}
    for (engine, method), (ranges, source) in METHOD_RELEASES.items():
        cell = rows[method.value][0 if engine == "vllm" else 1]
        assert source
        for start, end in ranges:
            assert ".".join(map(str, start)) in cell, (engine, method, cell)
            if end != NEVER:
                assert ".".join(map(str, end)) in cell, (engine, method, cell)


@pytest.mark.parametrize("args, field", [
    # vLLM drafts a chain of k per sequence: a top-k tree or a number of draft tokens would be priced for a server
    # that never runs it (a top-4 tree widened n-gram's acceptance of 0.3 to a 2.7x speed-up)
    (["--method", "ngram", "--num-speculative-tokens", "3", "--tree-topk", "4"], "tree_topk"),
    (["--method", "eagle3", "--num-speculative-tokens", "3", "--num-draft-tokens", "8"], "num_draft_tokens"),
    # SGLang's n-gram candidates come from a trie, not top-k draws (k = 11 over a top-10 tree priced 10x at a = 0.3)
    (["--engine", "sglang", "--method", "ngram", "--num-speculative-tokens", "11", "--tree-topk", "10",
      "--num-draft-tokens", "12"], "tree_topk"),
])
def test_a_tree_the_engine_does_not_run_is_refused(args, field, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["speedup", "--target", "Qwen/Qwen3-8B", "--gpu", "H200-141GB", "--acceptance-rate", "0.3",
              "--batch-size", "1", *args])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and f"error: {field}:" in err, err


def test_sglangs_eagle_tree_is_planned(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["speedup", "--engine", "sglang", "--target", "Qwen/Qwen3-8B", "--gpu", "H200-141GB",
              "--acceptance-rate", "0.6", "--batch-size", "1", "--method", "eagle3", "--num-speculative-tokens", "5",
              "--tree-topk", "4", "--num-draft-tokens", "8"])
    assert exit_info.value.code == 0, capsys.readouterr().err


def test_an_emitted_commands_header_names_the_releases_that_launch_its_method(capsys):
    """The header had been the flags' checked range whatever the method: '# vllm 0.11 - 0.32' over a draft-model
    command, which vLLM 0.10 to 0.14 refuse (draft models return in 0.15.0; METHOD_RELEASES)."""
    from specsize.cli.main import main
    from specsize.core.speculation import SpecMethod
    from specsize.engines.methods import launch_versions

    vllm, sglang = "0.11 - 0.32 (vllm serve)", "0.4 - 0.5.x (python -m sglang.launch_server)"
    assert launch_versions("vllm", SpecMethod.DRAFT_MODEL, vllm) == "0.15 - 0.32 (vllm serve)"
    assert launch_versions("vllm", SpecMethod.EAGLE3, vllm) == vllm  # from 0.8.5: the whole range
    assert launch_versions("vllm", SpecMethod.MEDUSA, "0.11 - 0.34 (x)") == "0.11 - 0.33 (not included) (x)"
    assert launch_versions("sglang", SpecMethod.NGRAM, sglang) == "0.5.3 - 0.5.x (python -m sglang.launch_server)"
    assert launch_versions("sglang", SpecMethod.NONE, sglang) == sglang
    with pytest.raises(SystemExit):
        main(["plan", "--emit", "vllm"])  # the embedded default: a 1B draft model
    assert capsys.readouterr().out.startswith("# vllm 0.15 - 0.33 ")


def test_a_tree_for_a_method_sglang_lacks_says_sglang_lacks_it(capsys):
    # --method medusa --tree-topk 4 on SGLang had been told about n-gram tries, and offered tree_topk 1 with medusa,
    # which SGLang does not run either
    from helpers import run_cli

    code, _, err = run_cli(capsys, "plan", "--engine", "sglang", "--method", "medusa", "-k", "3", "--tree-topk", "4",
                           "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB")
    assert code == 2 and "SGLang has no medusa speculative algorithm" in err and "trie" not in err
    assert "tree_topk 1 with method medusa" not in err
