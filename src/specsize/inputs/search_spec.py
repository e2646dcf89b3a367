"""Search specifications (YAML) -> a SearchSpace of catalog objects. See docs/search.md for the format."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

from ..catalog import load_gpu, load_target
from ..core.errors import SpecError, first_repeated
from ..core.memory import AccountingProfile
from ..core.multimodal import with_images
from ..core.specs import KV_CACHE_DTYPES, QUANT_NAMES, EngineSettings, GpuSpec, ModelSpec, SpeculativeConfig, Workload
from ..core.speculation import Acceptance, SpecMethod
from ..engines import DEFAULT_ENGINE, resolve_profile
from ..engines.support import check_model_support
from ..engines.methods import check_method
from .fields import FieldInfo, coerce
from .load import build_request, field_value, model_near, read_yaml_file
from .request import info
from ..planner.plan import validate_speculative
from .resolve import (check_mtp_release, default_draft_tp, proposal_rate_of, refuse_unsharded_draft_tp,
                      speculative_config, workload_of)


def _given(data: dict, key: str, default: Any = None) -> Any:
    """A key's value, or `default` where the spec leaves it out or writes null (`headroom:` with nothing after it): null
    is unset, as in a deployment file (inputs.load._layer). A null had reached the arithmetic: exit 4."""
    value = data.get(key)
    return default if value is None else value


def _int(data: dict, key: str, default: Any = None, minimum: int = 1) -> Any:
    return coerce(key, FieldInfo(doc="", kind="int", group="deployment", minimum=minimum), _given(data, key, default))


def _float(data: dict, key: str, default: Any = None, minimum: float | None = None, maximum: float | None = None,
           exclusive_minimum: bool = False) -> Any:
    return coerce(key, FieldInfo(doc="", kind="float", group="deployment", minimum=minimum, maximum=maximum,
                                 exclusive_minimum=exclusive_minimum), _given(data, key, default))


def _workload(data: Any, target: ModelSpec, base: Path) -> Workload:
    """The spec's workload; a relative samples_file (or @FILE lengths) is read from the spec's folder, as a deployment
    file's are, never from wherever the search runs."""
    if not isinstance(data, dict):
        raise SpecError("workload", "must be a mapping", "prompt_tokens, output_tokens, concurrency, burst_factor")
    request = build_request({"workload": data}, {}, base=base, where="the search spec")
    return with_images(workload_of(request), target, request.images_per_request, request.image_tokens)

SPEC_KEYS = {"target", "drafters", "ks", "gpus", "tp", "pp", "expert_parallel", "kv_cache_dtypes", "max_num_seqs", "max_model_len",
             "gpu_memory_utilization", "max_num_batched_tokens", "quantization", "workload", "slo", "headroom",
             "gpus_per_node", "finalists", "simulate_seconds", "engine_version", "engine", "name", "description"}
DRAFTER_KEYS = {"method", "draft", "acceptance_rate", "mean_accepted_length", "measured_at_k", "ks", "label",
                "draft_tp", "proposal_rate"}
SLO_KEYS = {"ttft_p99_ms", "tpot_p99_ms", "request_rate", "throughput_tok_s"}


@dataclass(frozen=True)
class DrafterOption:
    label: str
    speculative: SpeculativeConfig  # num_speculative_tokens filled per k by the search
    acceptance: Acceptance | None  # measured at `measured_at_k` (default: each configuration's k); None without a method
    ks: tuple[int, ...]
    draft_tp: int | None = None  # a draft model's TP as given; None: each configuration's TP (inputs.resolve.draft_tp_for)
    # the release's engine for this drafter (vLLM 0.8 / 0.9 serve a draft model on V0: engines.registry's method)
    profile: AccountingProfile | None = None

    def at(self, k: int, tp: int) -> SpeculativeConfig:
        """The drafter of a configuration at TP `tp` drafting k: a draft model runs at that TP unless the spec gives
        its own (vLLM 0.15 and later start it at no other), for the screen and its confirming simulation alike."""
        sp = self.speculative
        return replace(sp, num_speculative_tokens=k, draft_tp=self.draft_tp or default_draft_tp(sp.method, tp))


@dataclass(frozen=True)
class GpuOption:
    gpu: GpuSpec
    counts: tuple[int, ...]
    price_per_hour: float | None


@dataclass(frozen=True)
class SearchSlo:
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    request_rate: float | None = None
    throughput_tok_s: float | None = None


# finalists x simulate_seconds at most: the confirmation runs up to 10 x finalists simulations, so at most 72,000 s of
# simulated time (about 4 minutes here: the 1-hour run of bench/sim_speed.py takes 5.5 s, spec and no-spec twice that)
MAX_CONFIRMING_S = 7_200


@dataclass(frozen=True)
class SearchSpace:
    name: str
    target: object  # ModelSpec
    drafters: tuple[DrafterOption, ...]
    gpus: tuple[GpuOption, ...]
    tps: tuple[int, ...]
    kv_cache_dtypes: tuple[str, ...]
    max_num_seqs: tuple[int, ...]
    engine: EngineSettings
    workload: Workload
    slo: SearchSlo
    headroom: float
    gpus_per_node: int
    finalists: int
    simulate_seconds: float
    engine_version: str | None
    engine_name: str = "vllm"  # whose accounting the screen follows (the field table's `engine` choices)
    # pipeline stages a replica may take: more than one spreads a replica wider than a node over whole nodes (TP inside
    # a node, stages across, as vLLM serves a model too large for one node: planner.placement)
    pps: tuple[int, ...] = (1,)
    # the MoE experts split by rows (False) and / or by expert (True: Deployment.expert_parallel) over each TP; a
    # target without routed experts screens False only (the flag changes nothing there)
    expert_parallel: tuple[bool, ...] = (False,)
    notes: tuple[str, ...] = ()  # what the reader did with the spec that its author should know (aliases dropped)


def _list(data: dict, key: str, default: list) -> list:
    value = _given(data, key, default)
    if not isinstance(value, list) or not value:
        raise SpecError(key, f"must be a non-empty list, got {value!r}", "a YAML list")
    return value


def _bools(data: dict, key: str, default: list) -> tuple[bool, ...]:
    """One boolean or a non-empty list of distinct ones (true / false, as a deployment file writes them)."""
    info = FieldInfo(doc="", kind="bool", group="deployment")
    value = _given(data, key, default)
    items = value if isinstance(value, list) else [value]
    if not items:
        raise SpecError(key, "must be true, false or a non-empty list of them", "e.g. [false, true]")
    out = tuple(coerce(key, info, item) for item in items)
    twice = first_repeated(list(out))
    if twice is not None:
        raise SpecError(key, f"lists {str(twice).lower()} twice", "each value once: [false, true]")
    return out


def _distinct_kv_dtypes(kv: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The KV dtypes with each dtype once, the first spelling kept, and a note for each spelling dropped: vLLM's fp8
    and fp8_e4m3 are one E4M3 cache (SGLang's command writes fp8 as fp8_e4m3: engines.emit), sized alike
    (inputs.study.sized_as, which a study's axis refuses to repeat), so [fp8, fp8_e4m3] had screened every
    configuration twice under two names. A value written twice alike is refused before (read_search_spec): a typo, not an
    alias."""
    from .study import sized_as  # noqa: PLC0415 - the one owner of which spellings are one value

    kept: dict[Any, str] = {}
    notes = []
    for value in kv:
        key = sized_as("kv_cache_dtype", value)
        if key in kept and kept[key] != value:
            notes.append(f"kv_cache_dtypes: {value} is {kept[key]} (one E4M3 KV cache in vLLM and SGLang): screened "
                         f"once, as {kept[key]}")
            continue
        kept.setdefault(key, value)
    return tuple(kept.values()), tuple(notes)


def _ints(data: dict, key: str, default: list, minimum: int, maximum: int) -> tuple[int, ...]:
    """A non-empty list of distinct integers within bounds."""
    info = FieldInfo(doc="", kind="int", group="deployment", minimum=minimum, maximum=maximum)
    items = _list(data, key, default)
    if any(v is None for v in items):  # [null] or [1, ~]: no value, where one is needed (had been exit 4)
        raise SpecError(key, f"holds a null: {items!r:.80}", info.accepted)
    values = tuple(coerce(key, info, v) for v in items)
    if len(set(values)) != len(values):
        raise SpecError(key, f"repeats a value: {list(values)}", "distinct values")
    return values


GPU_KEYS = {"gpu", "counts", "price_per_hour"}
# the screen judges about 7,000 configurations a second on the slow 2-core machine of 2026-12-06 (bench/search_speed.py):
# the cap is about 70 s there, well inside the service's 300 s job deadline
MAX_CONFIGURATIONS = 500_000


@contextmanager
def _as_drafter() -> Iterator[None]:
    """A plan's refusal of a drafter's method or draft named as the spec gives them: drafters.method, drafters.draft (a
    search whose drafter could not run had been refused as `method: ...`, a key the spec does not have at its top)."""
    try:
        yield
    except SpecError as err:
        if err.field not in ("method", "draft"):
            raise
        raise SpecError(f"drafters.{err.field}", err.problem, err.accepted) from None


def _drafter(item: dict, default_ks: list[int], target: ModelSpec, engine: str, version: str | None,
             base: Path) -> DrafterOption:
    if not isinstance(item, dict):
        raise SpecError("drafters", f"each drafter must be a mapping, got {item!r}", ", ".join(sorted(DRAFTER_KEYS)))
    unknown = set(item) - DRAFTER_KEYS
    if unknown:
        raise SpecError("drafters", f"unknown key(s) {', '.join(sorted(unknown))}", ", ".join(sorted(DRAFTER_KEYS)))
    draft_ref = item.get("draft")
    # read as the field table reads a draft (a list had been looked up as the model "['a']", true as 'True')
    draft_ref = (model_near(coerce("drafters.draft", info("draft"), draft_ref), base, "drafters.draft")
                 if draft_ref is not None else None)
    # an EAGLE / EAGLE-3 / Medusa head that cannot be read: derived, as plan
    given_tp = _int(item, "draft_tp")
    spec = speculative_config(item.get("method") or "none", draft_ref, 1, given_tp or 1, "drafters.method",
                              target=target, draft_field="drafters.draft")
    # the method as parsed (SpecMethod reads NONE, None or Eagle3 as its own), never the text as written: `method: NONE`
    # had passed the checks of a method with its acceptance and ks, and was screened once per k as one configuration
    method = str(spec.method.value)
    refuse_unsharded_draft_tp(spec, "drafters.draft_tp")
    # n-gram: the share of steps that propose, the one given (checked as plan checks it) or the engine's own
    given = _float(item, "proposal_rate", minimum=0, maximum=1, exclusive_minimum=True)
    spec = replace(spec, proposal_rate=proposal_rate_of(resolve_profile(engine, version), spec.method, given))
    with _as_drafter():
        validate_speculative(target, spec)
    draft = spec.draft
    rate = _float(item, "acceptance_rate", minimum=0, maximum=1)
    mean = _float(item, "mean_accepted_length", minimum=1, maximum=65)
    if method != "none" and (rate is None) == (mean is None):
        raise SpecError("drafters", f"{method}: give exactly one of acceptance_rate or mean_accepted_length",
                        "acceptance_rate or mean_accepted_length (measured, never assumed)")
    if method == "none" and (rate is not None or mean is not None or item.get("ks") is not None
                             or item.get("measured_at_k") is not None):
        raise SpecError("drafters", "method none takes no acceptance, measured_at_k or ks",
                        "acceptance, measured_at_k and ks with a method")
    if item.get("measured_at_k") is not None and mean is None:  # as a plan refuses it (inputs.resolve.check_applies)
        raise SpecError("drafters.measured_at_k", f"{method}: is the k a mean accepted length was measured at, and "
                        "none is given", "mean_accepted_length T with it (an acceptance rate is per token, whatever "
                        "the k)")
    ks = _ints({"ks": item.get("ks")}, "ks", default_ks, 1, 64) if method != "none" else (0,)
    given_label = item.get("label")
    if given_label is not None and (isinstance(given_label, bool) or not isinstance(given_label, (str, int, float))):
        # a list or a mapping had become its Python form ("['a']") in every line naming the drafter
        raise SpecError("drafters.label", f"must be a string, got {type(given_label).__name__}",
                        "a name for the drafter")
    label = str(given_label or (method + (f" {draft.model_id}" if draft else "")))
    acceptance = None
    if spec.enabled:
        # a mean accepted length without measured_at_k is taken at each configuration's own k, as a plan takes it
        acceptance = Acceptance(rate=rate, mean_accepted_length=mean, measured_at_k=_int(item, "measured_at_k"),
                                source="search spec")
        for k in ks:  # reachable at every k of the drafter: refused here, as a plan of that k refuses it
            try:
                acceptance.per_token(k)
            except SpecError as err:
                raise SpecError("drafters", f"{label}: {err.problem}",
                                "a mean accepted length reachable at each of its ks, or measured_at_k (the k it was "
                                "measured at)") from None
    return DrafterOption(label=label, speculative=replace(spec, num_speculative_tokens=0), acceptance=acceptance,
                         draft_tp=given_tp if spec.kind.own_tp else None,
                         profile=resolve_profile(engine, version, spec.method.value),
                         ks=ks)


def _gpus(data: dict) -> tuple[GpuOption, ...]:
    gpus = []
    for item in _list(data, "gpus", []):
        if not isinstance(item, dict) or "gpu" not in item:
            raise SpecError("gpus", f"each entry needs a gpu id, got {item!r}", "{gpu: ID, counts: [..], price_per_hour: X}")
        unknown = set(item) - GPU_KEYS
        if unknown:
            raise SpecError("gpus", f"unknown key(s) {', '.join(sorted(map(str, unknown)))}", ", ".join(sorted(GPU_KEYS)))
        counts = _ints({"gpus.counts": item.get("counts")}, "gpus.counts", [1, 2, 4, 8], 1, 100_000)
        price = _float(item, "price_per_hour", minimum=0, maximum=1e6)
        gpus.append(GpuOption(load_gpu(coerce("gpus.gpu", info("gpu"), item["gpu"])), counts, price))
    priced = [g.price_per_hour is not None for g in gpus]
    if any(priced) and not all(priced):  # $/h and GPU counts are not one scale: 2 unpriced GPUs are not cheaper than $2.5/h
        unpriced = next(g.gpu.gpu_id for g in gpus if g.price_per_hour is None)
        raise SpecError("gpus.price_per_hour", f"{unpriced} has no price while another GPU has one: costs in $/h and in "
                        "GPUs cannot be ranked together", "a price_per_hour for every GPU, or for none (cost = GPUs)")
    return tuple(gpus)


def _slo(data: dict) -> SearchSlo:
    slo_data = data.get("slo")
    if not isinstance(slo_data, dict) or not slo_data:
        raise SpecError("slo", "a search needs the SLO it is to meet", ", ".join(sorted(SLO_KEYS)))
    unknown = set(slo_data) - SLO_KEYS
    if unknown:
        raise SpecError("slo", f"unknown key(s) {', '.join(sorted(map(str, unknown)))}", ", ".join(sorted(SLO_KEYS)))
    values = {key: _float(slo_data, key, minimum=0, maximum=1e9, exclusive_minimum=True) for key in SLO_KEYS}
    if all(v is None for v in values.values()):
        raise SpecError("slo", "no target given", ", ".join(sorted(SLO_KEYS)))
    return SearchSlo(ttft_p99_s=values["ttft_p99_ms"] / 1e3 if values["ttft_p99_ms"] else None,
                     tpot_p99_s=values["tpot_p99_ms"] / 1e3 if values["tpot_p99_ms"] else None,
                     request_rate=values["request_rate"], throughput_tok_s=values["throughput_tok_s"])


def _engine(data: dict) -> EngineSettings:
    quantization = data.get("quantization")
    if quantization is not None and str(quantization) not in QUANT_NAMES:
        raise SpecError("quantization", f"unknown value {quantization!r}", ", ".join(QUANT_NAMES))
    # not given: the engine release's own default, as a plan takes it (SGLang sizes its mem_fraction_static itself)
    return EngineSettings(gpu_memory_utilization=_float(data, "gpu_memory_utilization", None, minimum=0,
                                                        maximum=1, exclusive_minimum=True),
                          max_model_len=coerce("max_model_len", info("max_model_len"), data.get("max_model_len")),
                          max_num_batched_tokens=coerce("max_num_batched_tokens", info("max_num_batched_tokens"),
                                                        data.get("max_num_batched_tokens")),
                          quantization=None if quantization is None else str(quantization))


def _check_drafter_release(engine_name: str, engine_version: str | None, target: ModelSpec,
                           drafter: DrafterOption) -> None:
    """A drafter the engine release cannot launch is refused, as a plan refuses it: its method, an MTP drafter for the
    target's architecture, a draft model's own architecture."""
    sp = drafter.speculative
    check_method(engine_name, engine_version, sp.method)
    if sp.method == SpecMethod.MTP:
        check_mtp_release(engine_name, engine_version, target)
    if sp.kind.own_tp and sp.draft is not None:
        check_model_support(engine_name, engine_version, sp.draft)


def read_search_spec(path: str) -> SearchSpace:
    data = read_yaml_file(path, "search")
    unknown = set(data) - SPEC_KEYS
    if unknown:
        raise SpecError(sorted(map(str, unknown))[0], "unknown key in a search spec", ", ".join(sorted(SPEC_KEYS)))
    if not data.get("target"):
        raise SpecError("target", "no target model given", "a catalog id (specsize models) or a config.json path")
    folder = Path(path).resolve().parent  # the spec's relative paths are read relative to it
    # the field table's reading of a target, as a deployment file's: a list or mapping had been looked up as the model
    # "['a']" (a number still reads as its digits)
    target = load_target(model_near(coerce("target", info("target"), data["target"]), folder, "target"))
    ks = list(_ints(data, "ks", [1, 2, 3, 4, 5], 1, 64))
    engine_name = coerce("engine", info("engine"), _given(data, "engine", DEFAULT_ENGINE))
    # read as a deployment file's is (an unquoted 0.10 is YAML's 0.1: refused with that said)
    engine_version = None if data.get("engine_version") is None else field_value("engine_version",
                                                                                 data["engine_version"], None)
    tps = _ints(data, "tp", [1, 2, 4, 8], 1, 64)
    pps = _ints(data, "pp", [1], 1, 64)
    drafters = tuple(_drafter(item, ks, target, engine_name, engine_version, folder)
                     for item in _list(data, "drafters", [{"method": "none"}]))
    # the results, the confirming simulation and the rejected families name a drafter by its label: two alike would be
    # screened apart but simulated and reported as one (the last one's acceptance for both)
    twice = first_repeated([d.label for d in drafters])
    if twice is not None:
        raise SpecError("drafters", f"two drafters are labelled {twice!r}",
                        "a distinct label for each drafter (label: NAME), e.g. two acceptance rates of one method")
    gpus = _gpus(data)
    kv = tuple(str(v) for v in _list(data, "kv_cache_dtypes", ["auto"]))
    for value in kv:
        if value not in KV_CACHE_DTYPES:
            raise SpecError("kv_cache_dtypes", f"unknown value {value!r}", ", ".join(KV_CACHE_DTYPES))
    # the same configurations screened twice (one GPU at two prices, spot and on-demand, is two options); a KV dtype
    # written twice alike is refused before its aliases are dropped, whatever the order
    listed: tuple[tuple[str, list], ...] = (("kv_cache_dtypes", list(kv)),
                                            ("gpus", [(g.gpu.gpu_id, g.price_per_hour) for g in gpus]))
    kv, notes = _distinct_kv_dtypes(kv)
    for key, values in listed:
        twice = first_repeated(values)
        if twice is not None:
            raise SpecError(key, f"lists {twice!r} twice", "each value once (a GPU twice at two prices)")
    if data.get("name") is not None and not isinstance(data["name"], str):
        raise SpecError("name", f"must be a string, got {type(data['name']).__name__}", "a name for the search")
    if data.get("name") is not None:  # the field table's rule for a name: not blank, no NUL ("\0" had been printed)
        data = {**data, "name": coerce("name", info("name"), data["name"])}
    if not data.get("workload"):
        raise SpecError("workload", "a search needs the workload envelope", "prompt_tokens, output_tokens, concurrency")
    max_num_seqs = _ints(data, "max_num_seqs", [64, 128, 256], 1, 1 << 16)
    expert_parallel = _bools(data, "expert_parallel", [False]) if target.moe is not None else (False,)
    size = len(tps) * len(pps) * len(expert_parallel) * len(kv) * len(max_num_seqs) * sum(len(g.counts) for g in gpus) * sum(len(d.ks) for d in drafters)
    if size > MAX_CONFIGURATIONS:
        raise SpecError("search", f"the space holds {size:,} configurations; at most {MAX_CONFIGURATIONS:,} are "
                        "screened", "fewer values per axis")
    engine = _engine(data)
    # a release that cannot load it: refused, as a plan (its quantization asked for at load too)
    check_model_support(engine_name, engine_version, target, quantization=engine.quantization)
    for drafter in drafters:
        with _as_drafter():
            _check_drafter_release(engine_name, engine_version, target, drafter)
    finalists = coerce("finalists", FieldInfo(doc="", kind="int", group="analysis", minimum=1, maximum=100),
                       _given(data, "finalists", 3))
    # at least a second of arrivals: a shorter run had ended in "duration: the scenario produced no requests", a field
    # a search spec does not have
    simulate_seconds = _float(data, "simulate_seconds", 120.0, minimum=1, maximum=3600)
    if finalists * simulate_seconds > MAX_CONFIRMING_S:  # up to 10 x finalists runs of simulate_seconds each
        raise SpecError("finalists", f"{finalists} finalists x {simulate_seconds:g} s of simulation each: up to "
                        f"{10 * finalists * simulate_seconds:,.0f} s of simulated time to confirm them",
                        f"finalists x simulate_seconds <= {MAX_CONFIRMING_S:,} (e.g. 3 x 120 s, 2 x 3600 s)")
    return SearchSpace(
        name=str(data.get("name") or path), target=target, drafters=drafters, gpus=gpus, tps=tps, pps=pps,
        kv_cache_dtypes=kv, max_num_seqs=max_num_seqs, engine=engine, workload=_workload(data["workload"], target, folder),
        slo=_slo(data), headroom=_float(data, "headroom", 0.2, minimum=0, maximum=0.99),
        gpus_per_node=coerce("gpus_per_node", info("gpus_per_node"), _given(data, "gpus_per_node", 8)),
        finalists=finalists, simulate_seconds=simulate_seconds,
        engine_version=engine_version, engine_name=engine_name, expert_parallel=expert_parallel, notes=notes)
