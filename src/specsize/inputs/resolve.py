"""A validated `Request` -> the core's typed objects: models and GPU loaded from the catalog, the engine
profile, efficiencies, the acceptance (from the request or the calibration store), the tree shape.

This is where inputs meet files (model configs, the GPU catalog, the store); the planner below receives
only typed objects.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..catalog import load_gpu, load_target
from ..catalog.configs import standard_head
from ..catalog.gpus import load_efficiency
from ..catalog.models import exists, load_model_as
from ..core.errors import SpecError
from ..core.memory import AccountingProfile
from ..core.multimodal import with_images
from ..core.perf import Efficiency
from ..core.specs import Deployment, EngineSettings, GpuSpec, ModelSpec, SpeculativeConfig, Workload, canonical_dtype
from ..core.speculation import Acceptance, SpecMethod
from ..engines.block_fp8 import check_deployment
from ..engines import resolve_profile
from ..engines.methods import check_draft_tp, check_method, check_mtp_release, check_proposal_rate, check_tree
from ..engines.sglang import auto_speculative_params
from ..engines.support import check_expert_parallel, check_model_support
from ..planner.perf import Tree
from ..planner.plan import require_mtp_layers
from .fields import SIMULATION
from .request import FIELDS, Request


@dataclass(frozen=True)
class Resolved:
    request: Request
    deployment: Deployment
    workload: Workload
    profile: AccountingProfile
    efficiency: Efficiency
    acceptance: Acceptance | None
    tree: Tree
    tpot_slo_s: float | None
    ttft_slo_s: float | None
    drafter_note: str | None = None  # the drafter's shape the engine picked where the request gave none

    @property
    def workload_defaulted(self) -> bool:
        return not self.request.given("prompt_tokens")


def _gpu(r: Request) -> GpuSpec:
    if r.device == "cpu" and not r.gpu:
        # vLLM's CPU backend: the pool comes from VLLM_CPU_KVCACHE_SPACE or --kv-cache-memory-bytes
        memory = r.gpu_memory_gib or 64.0
        gpu = load_gpu(None, memory)
        return replace(gpu, gpu_id="CPU", name=f"host CPU ({memory:g} GiB)",
                       sources={"memory": "host memory (nominal)"})
    return load_gpu(r.gpu, r.gpu_memory_gib)


def method_of(method_name: str | None, draft_id: str | None, field: str = "method") -> SpecMethod:
    """The method named, or by default draft_model when a draft is given and none otherwise."""
    return SpecMethod.parse(method_name or (SpecMethod.DRAFT_MODEL if draft_id else SpecMethod.NONE), field)


DERIVABLE = (SpecMethod.EAGLE, SpecMethod.EAGLE3, SpecMethod.MEDUSA)


def _hub_shaped(draft_id: str) -> bool:
    """An owner/name id that is no local file or directory (a hub id the catalog does not hold)."""
    return draft_id.count("/") == 1 and not draft_id.startswith((".", "/", "~")) and not exists(Path(draft_id))


def refuse_draft(method: SpecMethod, draft_id: str | None, field: str = "draft") -> None:
    """A draft model named for a method that takes none (n-gram, MTP): refused, by plan and calibrations add alike."""
    if draft_id and not SpeculativeConfig(method=method).kind.needs_draft_config:
        raise SpecError(field, f"method {method} takes no draft model", "no draft, or a method that uses one")


def speculative_config(method_name: str | None, draft_id: str | None, k: int | None, draft_tp: int,
                       field: str = "method", target: ModelSpec | None = None,
                       draft_field: str = "draft") -> SpeculativeConfig:
    """The drafter a request names, its config loaded when its kind needs one. An EAGLE, EAGLE-3 or Medusa
    method without a readable head config gets the standard head derived from the target's config
    (catalog.configs.standard_head; the reports say so). `field` / `draft_field`: what the errors call the method and
    the draft (a search spec's drafters.draft, a speedup candidate's candidate.draft)."""
    method = method_of(method_name, draft_id, field)
    kind = SpeculativeConfig(method=method).kind
    refuse_draft(method, draft_id, draft_field)
    draft = None
    if kind.needs_draft_config:
        derivable = target is not None and method in DERIVABLE
        if not draft_id and not derivable:
            raise SpecError(draft_field, f"method {method} needs a draft model or head config",
                            "a catalog id (specsize models), a config.json or a model directory")
        if draft_id:
            # a head method's unreadable hub id gets the derived head under that id; one read as a variant of a catalog
            # model is checked as that model is (validate_speculative: a head of the target's width, or refused)
            try:
                draft = load_model_as(str(draft_id), draft_field)
            except SpecError:
                if not (derivable and _hub_shaped(str(draft_id))):
                    raise
                draft = None
        if draft is None:
            assert target is not None
            draft = standard_head(target, str(method), k or 1, named=str(draft_id) if draft_id else None)
        elif method == SpecMethod.EAGLE:
            draft = draft.as_eagle_head()
    if method != SpecMethod.NONE and (k is None or k < 1):
        raise SpecError("num_speculative_tokens", f"must be given (>= 1) with method {method}" if k is None else
                        f"must be >= 1 with method {method}, got {k}",
                        "an integer >= 1 (vLLM picks it itself only for MTP, the checkpoint's MTP layers; SGLang "
                        "for EAGLE, EAGLE-3 and MTP, from 0.5.2 for a draft model, from 0.5.3 for n-gram)")
    return SpeculativeConfig(method=method, draft=draft, num_speculative_tokens=(k or 0) if method != SpecMethod.NONE else 0,
                             draft_tp=draft_tp)


def refuse_unsharded_draft_tp(spec: SpeculativeConfig, field: str) -> None:
    """A draft_tp other than 1 for a drafter with no separate model to shard (EAGLE, EAGLE-3, Medusa heads and MTP run
    at the target's TP, n-gram on the CPU): refused, as a deployment's --draft-tp is (_drafter_settings),
    not dropped. A `--candidate` and a search spec's drafter had been priced without it, and said nothing."""
    if spec.draft_tp != 1 and not spec.kind.own_tp:
        raise SpecError(field, f"{spec.draft_tp} with method {spec.method}: it has no separate draft model to shard",
                        "draft_tp with method draft_model, or none")


def _drafter_settings(r: Request) -> str | None:
    """The draft a request's method uses. Settings given side by side that cannot both hold are refused; a
    method given over a lower layer's draft (a flag over the file's) wins, and that draft does not apply."""
    method = method_of(r.method, r.draft)
    kind = SpeculativeConfig(method=method).kind

    def together(*names: str) -> bool:  # given side by side, in the same layer (a file, or flags)
        sources = {r.source_of(name) for name in names}
        return len(sources) == 1 and sources <= {"file", "override"}

    if method == SpecMethod.NONE and r.num_speculative_tokens and together("num_speculative_tokens", "method"):
        raise SpecError("num_speculative_tokens", "k is given but the method is none", "a speculative method")
    if r.draft_tp is not None and r.given("draft_tp"):
        refuse_unsharded_draft_tp(SpeculativeConfig(method=method, draft_tp=r.draft_tp), "draft_tp")
    if r.draft and not kind.needs_draft_config and not together("draft", "method"):
        return None
    return r.draft


def drafter_shape(r: Request, draft: str | None, target: ModelSpec) -> tuple[int | None, int, int | None, str | None]:
    """(k, tree top-k, draft tokens) as the request gives them or, where it gives no k at all, as the engine picks
    them, with the note saying so: SGLang's own shape for an EAGLE-family method or its draft model, by release and
    architecture (engines.sglang.auto_speculative_params); vLLM's k for MTP, the checkpoint's MTP layers
    (vllm/config/speculative.py, SpeculativeConfig.__post_init__: num_speculative_tokens unset takes the draft
    config's n_predict)."""
    k, topk, draft_tokens = r.num_speculative_tokens, r.tree_topk, r.num_draft_tokens
    if k is not None or r.speedup_ks:  # a k table without a k: the deployment takes its first, as `speedup -k` does
        return (r.speedup_ks[0] if k is None and r.speedup_ks else k), topk, draft_tokens, None
    method = method_of(r.method, draft)
    shape = (auto_speculative_params(target.model_type, r.engine_version, str(method.value))
             if r.engine == "sglang" and topk == 1 and draft_tokens is None else None)
    if shape is not None:
        k, topk, draft_tokens = shape
        tree = f", top-k {topk}, {draft_tokens} draft tokens" if topk > 1 else ""
        release = f"SGLang {r.engine_version}" if r.engine_version not in (None, "", "latest") else "SGLang"
        whose = {SpecMethod.DRAFT_MODEL: "a draft model (STANDALONE)", SpecMethod.NGRAM: "n-gram, 12 draft tokens"}.get(
            method, target.model_type)
        where = ("its --speculative-num-draft-tokens default" if method == SpecMethod.NGRAM
                 else "auto_choose_speculative_params")
        return k, topk, draft_tokens, (f"k = {k}{tree}: no drafter shape given, {release}'s own choice for {whose} "
                                       f"(server_args.py, {where})")
    if method == SpecMethod.MTP:
        require_mtp_layers(target)  # say what is missing: the target's MTP layers, not k
        k = target.num_mtp_layers
        return k, topk, draft_tokens, (f"k = {k}: no --num-speculative-tokens given, vLLM's default for MTP (the "
                                       "checkpoint's MTP layers)")
    return k, topk, draft_tokens, None


def proposal_rate_of(profile: AccountingProfile, method: str, given: float | None) -> float:
    """The share of decode steps that carry a proposal: the one given (checked against the engine), else the
    engine's for its n-gram lookup (AccountingProfile.ngram_proposal_rate), else 1 (a model drafter proposes every
    step). The one rule for a request's drafter, `--candidate`s and search-spec drafters."""
    if given is not None:
        check_proposal_rate(profile.engine, given)
        return given
    return profile.ngram_proposal_rate if method == SpecMethod.NGRAM else 1.0


def default_draft_tp(method: SpecMethod, tp: int) -> int:
    """A drafter's TP where none is given: a draft model runs at the target's (vLLM and SGLang set it so), a drafter
    without a model of its own has none (1)."""
    return tp if SpeculativeConfig(method=method).kind.own_tp else 1


def draft_tp_for(method: SpecMethod, given: int | None, tp: int, engine: str, version: str | None,
                 field: str = "draft_tp") -> int:
    """A separate draft model's TP beside a target at `tp`: `given`, which the engine release must be able to start
    (vLLM 0.15 and later run a draft model only at the target's TP: engines.methods.check_draft_tp), else the
    target's, as vLLM (SpeculativeConfig._verify_and_get_draft_tp: an unset draft_tensor_parallel_size is the
    target's) and SGLang set it. The default had been 1, which vLLM 0.15 - 0.32 refuse beside a sharded target at
    start-up. 1 for a drafter without a model of its own."""
    if given is None or not SpeculativeConfig(method=method).kind.own_tp:
        return given if given is not None else default_draft_tp(method, tp)
    try:
        check_draft_tp(engine, version, method, tp, given)
    except SpecError as err:
        raise SpecError(field, err.problem, err.accepted) from None
    return given


def _draft_tp(r: Request, draft: str | None) -> int:
    """The request's draft TP (draft_tp_for): the one it gives, else the target's."""
    return draft_tp_for(method_of(r.method, draft), r.draft_tp if r.given("draft_tp") else None, r.tp, r.engine,
                        r.engine_version)


def deployment_of(r: Request) -> tuple[Deployment, str | None]:
    """The deployment a request describes, and the note on a drafter shape the engine picked (drafter_shape)."""
    if not r.target:
        raise SpecError("target", "no target model given", "a catalog id (specsize models) or a config.json path")
    draft = _drafter_settings(r)
    profile = resolve_profile(r.engine, r.engine_version)  # an unknown engine or release: refused before its methods
    check_method(r.engine, r.engine_version, method_of(r.method, draft))  # a method this release cannot launch
    _check_release_flags(r)
    target = load_target(r.target)
    # a release that cannot load it starts no server: its architecture, its quantization (bitsandbytes, also asked for
    # at load); its block-fp8 weights split over this TP below, once the deployment is built
    check_model_support(r.engine, r.engine_version, target, quantization=r.quantization)
    k, topk, draft_tokens, shape_note = drafter_shape(r, draft, target)
    speculative = speculative_config(r.method, draft, k, _draft_tp(r, draft), target=target)
    if speculative.method == SpecMethod.MTP:
        check_mtp_release(r.engine, r.engine_version, target)
    if speculative.kind.own_tp and speculative.draft is not None:  # a draft model is loaded as a model of its own
        check_model_support(r.engine, r.engine_version, speculative.draft)
    if speculative.enabled and (topk != 1 or draft_tokens is not None):
        check_tree(r.engine, speculative.method, topk, draft_tokens)  # a tree the engine does not run: exit 2
        speculative = replace(speculative, tree_topk=topk, num_draft_tokens=draft_tokens)
    rate = proposal_rate_of(profile, speculative.method, r.proposal_rate)
    if rate != 1.0:
        speculative = replace(speculative, proposal_rate=rate)
    settings = EngineSettings(
        gpu_memory_utilization=r.gpu_memory_utilization, max_model_len=r.max_model_len,
        max_num_seqs=r.max_num_seqs, max_num_batched_tokens=r.max_num_batched_tokens, block_size=r.block_size,
        kv_cache_dtype=r.kv_cache_dtype, dtype=r.dtype if r.dtype == "auto" else canonical_dtype(r.dtype),
        quantization=r.quantization, enforce_eager=r.enforce_eager, device=r.device,
        num_scheduler_steps=r.num_scheduler_steps, cpu_isa=r.cpu_isa, chunked_prefill=r.chunked_prefill,
        kv_cache_memory_bytes=r.kv_cache_memory_bytes, cuda_graph_max_bs=r.cuda_graph_max_bs,
        scheduler_recv_interval=r.scheduler_recv_interval, stream_interval=r.stream_interval)
    gpu = _gpu(r)
    d = Deployment(target=target, gpu=gpu, speculative=speculative, tp=r.tp, pp=r.pp, num_gpus=r.gpus,
                   engine=settings, shared_reserved_bytes=int(r.shared_reserved_gib * 2**30) + _other_processes(r, gpu),
                   expert_parallel=r.expert_parallel)
    check_deployment(r.engine, r.engine_version, d)  # block-fp8 weights the release cannot split at this TP
    check_expert_parallel(r.engine, r.engine_version, d)  # expert parallelism the release cannot run
    return d, shape_note


def _check_release_flags(r: Request) -> None:
    """Settings whose flag the engine release lacks: refused rather than planned and emitted."""
    from ..engines.registry import released_by  # noqa: PLC0415
    from ..engines.vllm import KV_CACHE_MEMORY_BYTES_FROM  # noqa: PLC0415

    if r.kv_cache_memory_bytes is not None and r.engine == "vllm" and \
            not released_by(r.engine_version, KV_CACHE_MEMORY_BYTES_FROM):
        raise SpecError("kv_cache_memory_bytes", f"vLLM {r.engine_version} has no --kv-cache-memory-bytes (vLLM "
                        f"{KV_CACHE_MEMORY_BYTES_FROM} on)", "gpu_memory_utilization with this release, or "
                        f"engine_version {KV_CACHE_MEMORY_BYTES_FROM} or later")


def _other_processes(r: Request, gpu: GpuSpec) -> int:
    """Bytes other processes hold on each GPU: given, or read from an nvidia-smi printout (not both); a printout
    showing more in use than the GPU holds is of another card."""
    if r.nvidia_smi is None:
        return int(r.other_processes_gib * 2**30)
    if r.given("other_processes_gib"):
        raise SpecError("nvidia_smi", "given together with other_processes_gib", "one of the two")
    from ..catalog.files import read_text  # noqa: PLC0415
    from ..catalog.gpus import used_memory_from_nvidia_smi  # noqa: PLC0415

    used = used_memory_from_nvidia_smi(read_text(r.nvidia_smi, "nvidia_smi", "a readable nvidia-smi printout"))
    if used > gpu.memory_bytes:
        raise SpecError("nvidia_smi", f"{used / 2**30:,.2f} GiB in use, more than the {gpu.gpu_id} holds "
                        f"({gpu.memory_bytes / 2**30:,.2f} GiB)", "a printout of this deployment's GPU")
    return used


def workload_of(r: Request) -> Workload:
    if r.prompt_tokens is None or r.output_tokens is None:
        missing = "prompt_tokens" if r.prompt_tokens is None else "output_tokens"
        raise SpecError(missing, "no workload lengths given", "p50=N,p95=N,p99=N,max=N | N,N,... | @FILE "
                        "(specsize.load_request fills the default envelope when none is given)")
    return Workload(prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens, concurrency=r.concurrency,
                    burst_factor=r.burst_factor, percentile=r.percentile)


def acceptance_of(r: Request, d: Deployment) -> Acceptance | None:
    """The request's acceptance, or the newest one recorded under `acceptance_from_store`."""
    k = d.speculative.num_speculative_tokens or None
    sources = {r.source_of(name) for name in ("acceptance_rate", "mean_accepted_length")
               if getattr(r, name) is not None}
    if r.acceptance_from_store:
        if "override" in sources:
            raise SpecError("acceptance_from_store", "give the acceptance once: a rate, a mean length or a store tag",
                            "one of --acceptance-rate, --mean-accepted-length, --acceptance-from-store")
        from ..adapters.store import Store  # noqa: PLC0415

        with Store(r.store, create=False) as store:  # a mistyped --store is refused, not created empty
            spec = d.speculative
            found = store.latest_acceptance(r.acceptance_from_store, target=d.target.model_id,
                                            draft=spec.draft.model_id if spec.draft else None, method=spec.method)
        form = found.acceptance_fields()  # a tree server's length read as measured, not widened again
        return Acceptance(rate=form.get("acceptance_rate"), mean_accepted_length=form.get("mean_accepted_length"),
                          measured_at_k=form.get("measured_at_k") or k, source=found.provenance,
                          spread=r.acceptance_spread)
    if not sources:
        return None
    rate, length = r.acceptance_rate, r.mean_accepted_length
    if rate is not None and length is not None:
        by = {r.source_of("acceptance_rate"), r.source_of("mean_accepted_length")}
        if by != {"file", "override"}:
            raise SpecError("acceptance_rate", "give either acceptance_rate or mean_accepted_length, not both",
                            "one of the two")
        # a flag overrides the file, whichever of the two forms each gives
        rate, length = (rate, None) if r.source_of("acceptance_rate") == "override" else (None, length)
    # a figure given now is the user's; one from a file carries the file's stated source
    source = "user" if "override" in sources else r.acceptance_source or (
        "deployment file" if "file" in sources else "user")
    return Acceptance(rate=rate, mean_accepted_length=length,
                      measured_at_k=r.measured_at_k or k, source=source, spread=r.acceptance_spread)


_GENERATED_LENGTHS = ("prompt_tokens_median", "prompt_tokens_p99", "output_tokens_median", "output_tokens_p99")


def check_scenario(q: Request) -> None:
    """Scenario settings that cannot all apply: refused rather than one silently ignored."""
    if q.trace is not None:
        clash = [name for name in ("rate", "lengths_file", "on_off", "burst_start", "ramp_to", *_GENERATED_LENGTHS)
                 if getattr(q, name) is not None]
        if clash:
            raise SpecError(clash[0], "a trace sets arrivals and lengths itself", "either --trace or the generators")
    if q.client_concurrency is not None:
        clash = [name for name in ("rate", "trace", "on_off", "burst_start", "ramp_to") if getattr(q, name) is not None]
        if clash:
            raise SpecError(clash[0], "a closed loop sends each request when an answer arrives",
                            "either --client-concurrency or an arrival process")
    if q.on_off is not None and (q.burst_start is not None or q.burst_duration is not None):
        raise SpecError("burst_start", "--on-off repeats bursts itself", "either --on-off or --burst-start")
    if q.burst_duration is not None and q.burst_start is None:
        raise SpecError("burst_duration", "a burst length needs its start", "--burst-start S --burst-duration S")
    if q.burst_start is not None and q.burst_start >= q.duration:
        raise SpecError("burst_start", f"{q.burst_start:g} s is after the {q.duration:g} s of arrivals",
                        f"a start before {q.duration:g} s")
    if q.burst_start is not None and q.burst_duration is not None and q.burst_start + q.burst_duration > q.duration:
        # the scenario had said "x2 from 50 s for 100 s" of a 60 s run, whose burst lasted 10 s
        left = q.duration - q.burst_start
        raise SpecError("burst_duration", f"the burst from {q.burst_start:g} s for {q.burst_duration:g} s ends after the "
                        f"{q.duration:g} s of arrivals", f"at most {left:g} s from {q.burst_start:g} s, or a longer "
                        "--duration")
    asked = "burst_start" if q.burst_start is not None else "on_off" if q.on_off is not None else None
    if asked and q.client_concurrency is None and q.trace is None and q.burst_factor <= 1:
        # "x1 from 10 s for 5 s": a burst that changes no rate had been run and reported as the burst asked for
        raise SpecError(asked, f"asks for a burst, and burst_factor is {q.burst_factor:g} "
                        f"({q.source_of('burst_factor')}): the rate would not change", "--burst-factor F above 1 with it")
    if q.lengths_file is not None and any(getattr(q, name) is not None for name in _GENERATED_LENGTHS):
        raise SpecError("lengths_file", "the lengths file gives the lengths",
                        "either --lengths-file or the medians and p99s")
    if q.given("num_requests") and q.client_concurrency is None:
        raise SpecError("num_requests", "counts the requests of a closed loop, and none is asked for (open-loop "
                        "arrivals run for --duration or the trace)", "--client-concurrency N with it")


ENVELOPE_SCENARIO = ("duration", "seed")  # all a plan's or a report's burst run takes of the scenario's settings


def check_envelope_scenario(q: Request, command: str) -> None:
    """`plan --simulate` and `report` simulate the envelope's own burst: a scenario setting of `simulate` given to them
    would be ignored, so it is refused (the command line offers them none)."""
    for name, f in FIELDS.items():
        if f.metadata["specsize"].group == SIMULATION and name not in ENVELOPE_SCENARIO and q.given(name):
            raise SpecError(name, f"{command} simulates the envelope's own burst scenario, which takes no {name}",
                            "specsize.simulate(...) for a scenario of your own; duration and seed here")


def check_applies(r: Request, d: Deployment) -> None:
    """Settings given where nothing reads them: refused rather than silently ignored."""
    if r.given("cpu_isa") and r.device != "cpu":
        raise SpecError("cpu_isa", f"applies to device cpu only, the device is {r.device}", "device cpu with it")
    if r.image_tokens is not None and not r.images_per_request:
        raise SpecError("image_tokens", "sizes a request's images, and the workload has none",
                        "images_per_request N with it")
    if r.measured_at_k is not None and r.mean_accepted_length is None and not r.acceptance_from_store:
        raise SpecError("measured_at_k", "is the k a mean accepted length was measured at, and none is given",
                        "mean_accepted_length T with it (an acceptance rate is per token, whatever the k)")
    if r.given("acceptance_spread") and r.acceptance_spread and not d.speculative.enabled:
        raise SpecError("acceptance_spread", "spreads the acceptance of a drafter, and the deployment has none",
                        "a speculative method with it")


def resolve(r: Request) -> Resolved:
    d, shape_note = deployment_of(r)
    check_applies(r, d)
    w = with_images(workload_of(r), d.target, r.images_per_request, r.image_tokens)
    # the release's engine for this drafter: vLLM 0.8 / 0.9 fall back to V0 for a draft model (engines.registry)
    profile = resolve_profile(r.engine, r.engine_version, d.speculative.method.value)
    overrides = {"memory": r.memory_efficiency, "compute": r.compute_efficiency,
                 "step_overhead_s": r.step_overhead_ms / 1e3 if r.step_overhead_ms is not None else None}
    efficiency = load_efficiency(d.gpu, overrides)
    return Resolved(request=r, deployment=d, workload=w, profile=profile, efficiency=efficiency,
                    acceptance=acceptance_of(r, d), tree=d.speculative.tree,
                    tpot_slo_s=r.tpot_slo_ms / 1e3 if r.tpot_slo_ms else None,
                    ttft_slo_s=r.ttft_slo_ms / 1e3 if r.ttft_slo_ms else None, drafter_note=shape_note)
