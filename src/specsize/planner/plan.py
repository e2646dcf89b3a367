"""Plan one deployment: the engine's memory account, the workload envelope, the verdict.

Everything a report shows is a field of `PlanResult` first; renderers only format.
"""

from __future__ import annotations

from dataclasses import replace

from ..engines.block_fp8 import check_deployment
from ..engines.registry import engine_label
from ..core.envelope import evaluate
from ..core.errors import SpecError
from ..core.memory import AccountingProfile, account, unstarted
from ..core.specs import (NEMOTRON_H_MTP_STEP, QUANTIZED_AT_LOAD, Deployment, ModelSpec, SpeculativeConfig,
                          Workload, check_lengths, UNQUANTIZED, VARIANT_SOURCE, checkpoint_format_needed)
from ..core.speculation import Acceptance, SpecMethod, Tree
from ..core.traffic import decode_context, replica_share
from ..core.ratios import speedup_text
from ..core.units import GiB, MiB
from ..core.weights import experts_on_rank, pp_stages
from .perf import expert_parallel_step, summarize, thin_gain, thin_gain_text
from .result import PlanResult

__all__ = ["PlanResult", "plan", "replica_workload", "require_mtp_layers", "validate", "validate_speculative"]


def validate(d: Deployment, w: Workload, headroom: float) -> None:
    """Checks that need the whole deployment (single fields are checked where they are read)."""
    e = d.engine
    if e.gpu_memory_utilization is not None and not 0 < e.gpu_memory_utilization <= 1:
        raise SpecError("gpu_memory_utilization", f"must be in (0, 1], got {e.gpu_memory_utilization}",
                        "a fraction such as 0.9")
    _validate_parallelism(d)
    _validate_speculation(d)
    _validate_engine_limits(d)
    if not 0 <= headroom < 1:
        raise SpecError("headroom", f"must be in [0, 1), got {headroom}", "a fraction such as 0.2")
    _validate_workload(w)


def _validate_parallelism(d: Deployment) -> None:
    for name in ("tp", "pp"):
        value = getattr(d, name)
        if not isinstance(value, int) or value < 1:
            raise SpecError(name, f"must be a positive integer, got {value!r}", "1, 2, 4, 8, ...")
    if d.num_gpus is not None and (d.num_gpus < d.gpus_per_instance or d.num_gpus % d.gpus_per_instance):
        raise SpecError("gpus", f"{d.num_gpus} GPUs are not a whole number of instances of tp x pp = "
                        f"{d.gpus_per_instance}", f"a multiple of {d.gpus_per_instance}")
    layers = d.target.num_layers
    if d.pp > layers > 0:
        # vLLM's get_pp_indices (distributed/utils.py) hands n // pp = 0 layers to every stage and the remainder one
        # apiece from the stage before the last backwards: pp - n stages hold no layer. Such a worker has no KV cache
        # spec, v1/core/kv_cache_utils.py get_kv_cache_config_from_groups gives it num_blocks = 1 ("Attention free"),
        # and get_kv_cache_configs cuts every worker to the smallest count: a pool of one block. SGLang's
        # get_pp_indices (srt/distributed/utils.py) leaves stages empty too: the first pp - n from 0.5.6, every stage
        # but the last before it (n // pp layers each, the rest to the last)
        raise SpecError("pp", f"{d.pp} pipeline stages for the {layers} layers of {d.target.model_id}: {d.pp - layers} "
                        "stage(s) would hold no layer (the engines split whole layers between stages)",
                        f"at most {layers}")
    if d.pp > 1 and d.target.mixers and "none" in d.target.mixers:
        # a hybrid's MLP-only layers (Nemotron-H's '-') hold no cache: a stage of only those is a worker without a KV
        # cache spec, cut to one block like an empty one (vLLM's split, core.weights.pp_stages)
        bare = [i for i, ids in enumerate(pp_stages(layers, d.pp)) if all(d.target.mixer(j) == "none" for j in ids)]
        if bare:
            fits = [p for p in range(d.pp - 1, 0, -1) if not any(
                all(d.target.mixer(j) == "none" for j in ids) for ids in pp_stages(layers, p))][:1]
            raise SpecError("pp", f"{d.pp} pipeline stages for {d.target.model_id}: stage {bare[0]} holds only MLP "
                            "layers, no attention or state layer, so its worker has no KV cache and the engine cuts "
                            "every stage's pool to one block", "a pp whose every stage holds an attention or state "
                            "layer" + (f" (e.g. {fits[0]})" if fits else ""))
    heads = d.target.num_attention_heads
    if heads % d.tp:
        raise SpecError("tp", f"{d.tp} does not divide the target's {heads} attention heads",
                        "a divisor of " + str(heads) + ": " + ", ".join(str(t) for t in range(1, heads + 1)
                                                                       if heads % t == 0))
    kv = d.target.num_kv_heads
    if d.target.mla is None and kv % d.tp and d.tp % kv:
        raise SpecError("tp", f"{d.tp} neither divides nor is a multiple of the target's {kv} KV heads",
                        "a divisor or multiple of " + str(kv))
    _check_group_split(d.target, d.tp)  # a search's TP sizes too, not only a plan's


def _check_group_split(target: ModelSpec, tp: int) -> None:
    """A checkpoint quantized in groups along its rows (GPTQ, AWQ, compressed-tensors W4A16 / W8A16) splits its
    row-parallel linear layers' inputs (o_proj, the dense MLP's down_proj) over the TP ranks only in whole
    groups: vLLM refuses to load one whose split input is not a multiple of group_size (gptq.py / awq.py
    create_weights: "The input size is not aligned with the quantized weight shape. This can be caused by too large
    tensor parallel size."; Qwen2.5-72B's 29,568-wide MLP at TP8 is 3,696 per rank, 28.9 groups of 128). A published
    variant read by its name is priced on its base's config, not its own shapes, and is not checked."""
    q = target.quantization
    if tp <= 1 or q is None or q.method not in ("int4", "int8") or not q.group_size or \
            target.source.startswith(VARIANT_SOURCE):
        return
    widths = [("num_attention_heads x v_head_dim" if target.mla else "num_attention_heads x head_dim",
               target.num_attention_heads * (target.mla.v_head_dim if target.mla else target.head_dim))]
    moe = target.moe
    if moe is None or len(moe.moe_layers) < target.num_layers:
        widths.append(("intermediate_size", target.intermediate_size))
    for name, width in widths:
        if width % tp or width // tp % q.group_size:
            fits = [t for t in (1, 2, 4, 8, 16) if t < tp and not width % t and not width // t % q.group_size]
            raise SpecError("tp", f"{tp} splits {target.model_id}'s {name} ({width:,}) into {width / tp:,.6g} inputs a "
                            f"rank, not whole groups of {q.group_size} (its quantization_config's group_size): vLLM "
                            "refuses to load it", "a TP size that splits it into whole groups"
                            + (f": {', '.join(map(str, fits))}" if fits else ""))


def _validate_speculation(d: Deployment) -> None:
    validate_speculative(d.target, d.speculative)
    sp = d.speculative
    if sp.kind.own_tp and sp.draft_tp not in (1, d.tp):  # vLLM's SpeculativeConfig: one GPU or the target's TP group
        raise SpecError("draft_tp", f"{sp.draft_tp} with a target at TP {d.tp}: the draft model runs on one GPU or on "
                        "the target's TP group", f"1 or {d.tp}" if d.tp > 1 else "1")


def require_mtp_layers(target: ModelSpec) -> None:
    """MTP drafts with the target's own next-token layers: a target without them cannot run it."""
    if target.num_mtp_layers < 1:
        raise SpecError("method", f"mtp needs a target with MTP layers; {target.model_id} has none "
                        "(num_nextn_predict_layers)", "draft_model, eagle, eagle3, medusa, ngram, none")
    if target.model_type == "nemotron_h":
        # vLLM 0.32 nemotron_h_mtp.py NemotronHMultiTokenPredictor asserts num_nextn_predict_layers == 1 and builds
        # only * and E letters (NotImplementedError otherwise, an assertion on an empty step); specsize's weights and
        # KV for the step are those of "*E" (core.weights, core.specs.NEMOTRON_H_MTP_STEP): another step had been
        # planned as "*E", and a second MTP layer as a fit the engine never starts
        if target.num_mtp_layers != 1:
            raise SpecError("method", f"mtp on {target.model_id}: vLLM builds one Nemotron-H MTP layer, the checkpoint "
                            f"has {target.num_mtp_layers} (num_nextn_predict_layers)",
                            "num_nextn_predict_layers 1, or a method other than mtp")
        if target.mtp_step != NEMOTRON_H_MTP_STEP:
            raise SpecError("method", f"mtp on {target.model_id}: an MTP step of {target.mtp_step!r} "
                            "(mtp_hybrid_override_pattern) is not modelled by specsize",
                            f"{NEMOTRON_H_MTP_STEP!r} (an attention and an MoE layer, as every published Nemotron-3), "
                            "or a method other than mtp")


VOCAB_PADDING = 1024  # tokens by which two checkpoints of one tokenizer may differ (padded embedding tables)


def validate_speculative(target: ModelSpec, sp: SpeculativeConfig) -> None:
    """The drafter fits its kind and the target: the one check of a drafter, for plans and search specs."""
    if sp.enabled and sp.num_speculative_tokens < 1:
        raise SpecError("num_speculative_tokens", f"must be >= 1 with method {sp.method}, got "
                        f"{sp.num_speculative_tokens}" if sp.num_speculative_tokens else
                        f"must be given (>= 1) with method {sp.method}", "an integer >= 1")
    if sp.proposal_rate != 1.0 and not (sp.kind.cpu_drafted and 0 < sp.proposal_rate < 1):
        raise SpecError("proposal_rate", f"{sp.proposal_rate:g} with method {sp.method}: a model drafter proposes "
                        "every step", "1, or a share in (0, 1] with method ngram")
    if sp.kind.needs_draft_config and sp.draft is None:
        raise SpecError("draft", f"method {sp.method} needs a draft model or head", "a catalog id or config path")
    if sp.kind.derives_from_target:
        require_mtp_layers(target)
    if sp.kind.own_tp and sp.draft is not None:
        if sp.draft.is_head:  # it drafts from the target's hidden states: no forward of its own to run
            raise SpecError("draft", f"{sp.draft.model_id} is an EAGLE{'-3' if sp.draft.eagle_fc_inputs == 3 else ''} "
                            f"head ({sp.draft.num_layers} decoder layer), not a draft model that runs on its own",
                            "a smaller model of the target's family, or --method "
                            f"{'eagle3' if sp.draft.eagle_fc_inputs == 3 else 'eagle'} with this head")
        if sp.draft.num_attention_heads % sp.draft_tp:
            # the draft runs on one GPU or on the target's TP group (_validate_speculation), the latter by default
            raise SpecError("draft_tp", f"{sp.draft_tp} does not divide the draft {sp.draft.model_id}'s "
                            f"{sp.draft.num_attention_heads} attention heads (a draft model runs at the target's TP "
                            "unless draft_tp says otherwise)", "draft_tp 1 where the engine release runs a draft model "
                            "on one GPU (vLLM 0.5.1 - 0.9), else a draft model whose attention heads the TP divides")
    head = sp.kind.shares_embeddings and not sp.kind.derives_from_target  # an EAGLE / EAGLE-3 head
    if sp.draft is not None and head and (sp.draft.num_layers > 2 or sp.draft.hidden_size != target.hidden_size):
        # an EAGLE/EAGLE-3 head is one or two layers as wide as the target: a whole model is a draft model
        raise SpecError("draft", f"{sp.draft.model_id} ({sp.draft.num_layers} layers, hidden {sp.draft.hidden_size}) "
                        f"is not an {sp.method} head for {target.model_id} (hidden {target.hidden_size})",
                        "a one- or two-layer head as wide as the target, or --method draft_model")
    if sp.draft is not None and sp.method == SpecMethod.MEDUSA and sp.draft.hidden_size != target.hidden_size:
        # Medusa's heads run on the target's last hidden states (vLLM medusa.py ResidualBlock(config.hidden_size))
        raise SpecError("draft", f"{sp.draft.model_id} (hidden {sp.draft.hidden_size}) is not a Medusa head for "
                        f"{target.model_id} (hidden {target.hidden_size})", "Medusa heads as wide as the target")
    # a draft model, and an EAGLE / EAGLE-3 head (it reads the target's embedding and drafts its token ids; its
    # config's vocab_size is the target's, EAGLE-3's reduced draft vocabulary maps back to them), shares the target's
    # tokenizer: vocabularies more than VOCAB_PADDING apart are another model family (Medusa's derived heads hold
    # k x vocab rows in that field, so they are not compared)
    if sp.draft is not None and (sp.kind.own_tp or head) and \
            abs(sp.draft.vocab_size - target.vocab_size) > VOCAB_PADDING:
        what = "head" if head else "draft model"
        raise SpecError("draft", f"{sp.draft.model_id} has a vocabulary of {sp.draft.vocab_size} tokens, "
                        f"the target {target.vocab_size}: a {what} must share the target's tokenizer",
                        f"a {what} of the target's model family")


def _validate_engine_limits(d: Deployment) -> None:
    e = d.engine
    for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size"):
        value = getattr(e, name)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise SpecError(name, f"must be a positive integer, got {value!r}", "an integer >= 1")
    if e.kv_cache_memory_bytes is not None and e.kv_cache_memory_bytes < 0:
        raise SpecError("kv_cache_memory_bytes", "must not be negative", "bytes >= 0")


def _validate_workload(w: Workload) -> None:
    if w.concurrency < 1:
        raise SpecError("concurrency", f"must be >= 1, got {w.concurrency}", "an integer >= 1")
    if not w.burst_factor >= 1:
        raise SpecError("burst_factor", f"must be >= 1, got {w.burst_factor}", "a number >= 1 (1 = no burst)")
    for side in ("prompt_tokens", "output_tokens"):
        check_lengths(side, getattr(w, side))


def replica_workload(d: Deployment, w: Workload) -> Workload:
    """The workload's concurrency is the deployment's total; its replicas share it evenly."""
    return w if d.replicas == 1 else replace(w, concurrency=replica_share(w.concurrency, d.replicas))


def _expert_parallel_notes(d: Deployment, mem, efficiency, batch: int, context: int) -> list[str]:
    """What expert_parallel does to this deployment: nothing for a dense target or one GPU (the command leaves the
    flag out); else how many experts a GPU holds and, where steps are priced, what waiting on the busiest GPU costs
    a decode step at the plan's batch against the experts split by rows."""
    if not d.expert_parallel:
        return []
    moe = d.target.moe
    if d.ep == 1 or moe is None:
        why = "has no routed experts" if moe is None else "runs at TP 1 (no TP group to split its experts over)"
        return [f"expert_parallel: {d.target.model_id} {why}: nothing to split, and the launch command leaves the flag "
                "out"]
    held = f"expert parallelism: each GPU holds {experts_on_rank(moe.num_experts, d.ep)} of the {moe.num_experts} experts whole"
    if efficiency is None or d.gpu.memory_bandwidth_bytes_s <= 0:
        return [held]
    split, rows = expert_parallel_step(d, mem, efficiency, batch, context)
    return [f"{held}, and a step waits on the GPU the batch routes most to: a decode step at {batch} sequences takes "
            f"{split * 1e3:.2f} ms, against {rows * 1e3:.2f} ms with the experts split by rows "
            f"({split / rows - 1:+.1%})"]


def _amd_notes(d: Deployment, s) -> list[str]:
    """What planning for an AMD GPU leaves unmeasured, and vLLM V0's chunked prefill there (ResolvedSettings.
    prefix_prompt_kernel: AccountingProfile.prefix_prompt_vendors)."""
    if d.gpu.vendor != "amd":
        return []
    notes = ["AMD GPUs: vLLM's ROCm build follows the same accounting; the profile was fitted on NVIDIA start-up logs"]
    if s.prefix_prompt_kernel:
        notes.append("chunked prefill on ROCm: this vLLM V0 release runs every prompt's attention through its Triton "
                     "prefix-prefill kernel, which the time to first token prices at about 1% of the GPU's peak "
                     "(quadratic in the prompt); vLLM 0.6.5 and later leave chunked prefill off on ROCm unless asked "
                     "(chunked_prefill: off)")
    return notes


def _amount(n_bytes: int) -> str:
    """Bytes as a warning shows them: GiB at two decimals, MiB below 0.1 GiB, where two decimals of GiB round a few
    MiB to "0.00 GiB" (the logits of 4 positions x 256 sequences a Llama-3.1-8B plan warned of). Shown, not skipped:
    however small, an amount beyond what gpu_memory_utilization leaves free (none at 1.0) is what the warning is for."""
    return f"{n_bytes / GiB:.2f} GiB" if n_bytes >= 0.1 * GiB else f"{n_bytes / MiB:.1f} MiB"


def plan(d: Deployment, w: Workload, profile: AccountingProfile, headroom: float = 0.20, *,
         efficiency=None, acceptance: Acceptance | None = None, tpot_slo_s: float | None = None,
         tree: Tree | None = None, perf_detail: bool = True) -> PlanResult:
    """The memory account, envelope and verdict; with `efficiency`, the performance section too (with
    `perf_detail=False` its rates alone: see planner.perf.summarize), priced with the deployment's own drafting tree
    unless `tree` is given."""
    validate(d, w, headroom)
    # block-fp8 weights the release cannot split at this TP (engines.block_fp8): vLLM before 0.29 and SGLang refuse to
    # load an expert whose rows over TP are not whole blocks
    check_deployment(profile.engine, profile.version, d)
    mem = account(d, profile)
    s = mem.settings
    limit = d.target.context_limit(profile.engine)
    if s.max_model_len > limit:
        what = ("max_position_embeddings" if limit == d.target.max_position_embeddings
                else "longest context (its config's rope_scaling and length keys, as vLLM derives it)")
        raise SpecError("max_model_len", f"{s.max_model_len} exceeds the target's {what} ({limit}) as "
                        f"{d.target.model_id} is read here",
                        f"at most {limit}, or the checkpoint's own config.json (a path) where it allows more, as a "
                        "newer revision's may")
    per_replica = replica_workload(d, w)
    verdict = evaluate(mem, per_replica, headroom)
    warnings = []
    if s.max_model_len_before_draft:
        draft_id = d.speculative.draft.model_id if d.speculative.draft is not None else "the draft"
        warnings.append(f"max_model_len {s.max_model_len_before_draft:,} -> {s.max_model_len:,}: "
                        f"{engine_label(profile.engine)} {profile.version} serves no request longer than its draft "
                        f"model {draft_id} takes (Model Runner V2 cannot skip "
                        "speculation for longer sequences; vLLM warns 'reducing max_model_len'): a longer context needs "
                        "a draft with as long a context, or an EAGLE / MTP head")
    reserve = mem.outside_budget_bytes
    if mem.unprofiled_runtime_bytes:
        level = "exceeds" if mem.unprofiled_runtime_bytes > reserve else "fits in"
        warnings.append(
            f"verification of {s.num_speculative_tokens + 1} positions for {min(s.max_num_seqs, s.max_num_batched_tokens)}"
            f" sequences needs {_amount(mem.unprofiled_runtime_bytes)} of logits the profiling pass did not "
            f"reserve; it {level} the {_amount(reserve)} outside the budget")
    # vLLM builds alone profile one draft token per sequence; SGLang sizes its pool as f x free - weights, with the
    # activations in the 1 - f share (engines/sglang/accounting.py), so the gap says nothing of its pool
    one_draft_gap = mem.activation_terms.get("speculation_beyond_one_draft", 0) if profile.engine == "vllm" else 0
    if one_draft_gap >= 0.1 * GiB:
        warnings.append(
            f"the pool leaves {mem.activation_terms['speculation'] / GiB:.2f} GiB for the rejection sampler over "
            f"{mem.activation_terms['sampler_rows']} sequences x {s.num_speculative_tokens} draft tokens, what a full "
            f"verification step needs; a vLLM build whose profiling pass drafts one token per sequence prints a pool "
            f"{one_draft_gap / GiB:.2f} GiB larger and can run out of memory at full batch")
    sort_gap = mem.activation_terms.get("sort_sampler_beyond", 0)
    if sort_gap >= 0.1 * GiB:
        left = mem.kv_cache_bytes - sort_gap
        after = f"{left / GiB:.2f} GiB of KV cache" if left > 0 else "no KV cache: the engine does not start"
        warnings.append(f"planned with FlashInfer's sampler, as vLLM's images run it; a pip install of this release "
                        f"has no FlashInfer and profiles PyTorch's sort over {mem.activation_terms['sampler_rows']} "
                        f"sequences, {sort_gap / GiB:.2f} GiB more, which leaves {after} (fewer max_num_seqs shrink it)")
    if not mem.cuda_graph_counted and mem.cuda_graph_bytes and mem.cuda_graph_bytes > reserve:
        warnings.append(f"CUDA graphs take about {mem.cuda_graph_bytes / GiB:.2f} GiB outside the budget, more than "
                        f"the {reserve / GiB:.2f} GiB gpu_memory_utilization leaves free")
    shape = verdict.worst_case.request_len
    if shape > limit:
        warnings.append(f"{w.percentile} requests of {shape} tokens are longer than {d.target.model_id}'s longest "
                        f"context ({limit} tokens): no engine setting serves them; shorten them or choose a model "
                        "with a longer context")
    needed = checkpoint_format_needed(d.target, d.quantization_override)
    stored = d.target.quantization.method if d.target.quantization is not None else None
    if needed == UNQUANTIZED:
        warnings.append(f"quantization none: {d.target.model_id} is stored quantized ({stored}) and the engines load "
                        "it as stored; serve an unquantized checkpoint of it (the launch command leaves its path to "
                        "fill in)")
    elif needed:
        made = (f"the engines quantize weights only to {', '.join(QUANTIZED_AT_LOAD)} while loading" if stored is None
                else f"{d.target.model_id} is stored as {stored}, which the engines load only as stored")
        warnings.append(f"quantization {d.quantization_override}: {made}; serve a checkpoint of {d.target.model_id} "
                        f"stored as {d.quantization_override} (the launch command leaves its path to fill in)")
    warnings += _amd_notes(d, s)
    if d.speculative.kind.own_tp and d.speculative.draft_tp == 1 and d.tp > 1:
        warnings.append(f"the draft model runs unsharded on rank 0 (draft_tp=1): that GPU holds "
                        f"{mem.weights_draft_bytes / GiB:.2f} GiB more than its peers and sets the pool size")
    perf = None
    batch = max(1, min(per_replica.concurrency, s.max_num_seqs))
    context = decode_context(w.prompt_tokens.p50, w.output_tokens.p50)
    warnings += _expert_parallel_notes(d, mem, efficiency, batch, context)
    # an engine that serves no request (core.memory.unstarted: its pool never built) has no performance to show: the
    # plan had printed a decode table and its JSON 2,804 tok/s under "DOES NOT FIT: the engine does not start"
    if efficiency is not None and d.gpu.memory_bandwidth_bytes_s > 0 and unstarted(d, mem) is None:
        perf = summarize(d, mem, efficiency, acceptance, batch, context, w.prompt_tokens.p50, tpot_slo_s, tree,
                         detail=perf_detail)
        if perf.speedup is not None and perf.speedup < 1:
            below = f"; it pays below {perf.crossover_batch} sequences" if perf.crossover_batch else ""
            warnings.append(f"at {batch} concurrent requests speculation is a slowdown ({speedup_text(perf.speedup)})"
                            f"{below}")
        if perf.speedup is not None and thin_gain(perf.speedup):
            warnings.append(f"the speed-up at {batch} concurrent requests, {speedup_text(perf.speedup)}, lies "
                            f"{thin_gain_text()}")
    return PlanResult(deployment=d, workload=w, profile=profile, memory=mem, verdict=verdict,
                      warnings=tuple(warnings), perf=perf, acceptance=acceptance)
