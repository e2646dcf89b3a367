"""How a plan maps to the controls a governance review asks about, with this plan's evidence.

- NIST SP 800-53 Rev. 5 SC-5 (Denial-of-Service Protection): capacity and headroom under expected and burst
  demand — pass when the worst case fits with the policy's headroom (and, when simulated, the burst is
  sustained), attention when thin, fail when it does not fit.
- CIS Controls v8, Control 4 (Secure Configuration of Enterprise Assets and Software): the resource limits
  set explicitly in the emitted engine configuration — pass when every limit is pinned in the command,
  with each value, and which ones the deployment file left to the engine's version-dependent defaults.
- NIST CSF 2.0 PR.PS-01 ("Configuration management practices are established and applied"), as the issue
  maps it to the access configuration of the serving components: the inference endpoint, the metrics
  endpoint and any cluster dashboard, and whether the plan says how each is protected (an API key alone does not
  protect the metrics endpoint: neither engine's --api-key guards /metrics). (CSF 2.0 files
  identity and access management under PR.AA; the evidence here is the components' access configuration,
  part of their configuration baseline.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.envelope import DOES_NOT_FIT, FITS, VERDICT_RANK, headroom_text, policy_text, verdict_for
from ..core.units import GiB
from .plan import PlanResult

PASS, ATTENTION, FAIL = "pass", "attention", "fail"
COMPONENT_NAMES = {"inference_endpoint": "inference endpoint (OpenAI-compatible API)",
                   "metrics_endpoint": "metrics endpoint (Prometheus /metrics)",
                   "dashboard": "cluster dashboard"}
ENGINE_LIMITS = ("gpu_memory_utilization", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size",
                 "kv_cache_dtype", "tensor_parallel_size")


@dataclass(frozen=True)
class ControlResult:
    framework: str
    control: str
    title: str
    status: str
    summary: str
    evidence: tuple[str, ...]


def envelope_verdict(r: PlanResult) -> str:
    """The verdict of the worst-case envelope alone (core.envelope.verdict_for its headroom), before a simulation or a
    start-up refusal had its say."""
    headroom = r.verdict.worst_case.headroom_fraction
    return verdict_for(headroom, r.verdict.headroom_policy) if math.isfinite(headroom) else DOES_NOT_FIT


def simulation_worsened(r: PlanResult) -> bool:
    """Whether the simulated burst, and nothing else, set a verdict worse than the envelope's (`plan --simulate`:
    planner.scenario.fold_simulation, whose reasons it adds as "simulated burst: ...")."""
    v = r.verdict
    return (r.simulation is not None and VERDICT_RANK[v.verdict] < VERDICT_RANK[envelope_verdict(r)]
            and all(reason.startswith("simulated burst: ") for reason in v.reasons))


def sc5(r: PlanResult) -> ControlResult:
    v = r.verdict
    worst, expected = v.worst_case, v.expected
    status = {"fits": PASS, "thin": ATTENTION, "does_not_fit": FAIL}[v.verdict]
    replicas = r.deployment.replicas
    # the envelope is one replica's (planner.plan.replica_workload): 24 requests over 2 replicas read "12 concurrent"
    each = f" per replica (of {replicas}, {r.workload.concurrency} in all)" if replicas > 1 else ""
    evidence = [
        f"expected demand: {expected.concurrency} concurrent p50 requests{each} need "
        f"{expected.demand_bytes / GiB:.1f} GiB "
        f"of {expected.capacity_bytes / GiB:.1f} GiB KV cache per GPU "
        f"(headroom {headroom_text(expected.headroom_fraction, v.headroom_policy)})",
        f"burst demand: {worst.requested_concurrency} concurrent {worst.percentile} requests{' per replica' if each else ''} "
        f"({worst.concurrency} running, {worst.queued} queued at max_num_seqs) need {worst.demand_bytes / GiB:.1f} GiB "
        f"(headroom {headroom_text(worst.headroom_fraction, v.headroom_policy)}; policy {policy_text(v.headroom_policy)})",
        f"first limit hit: {v.breaks_first}",
    ]
    summary = {PASS: "capacity holds the burst with the policy's headroom",
               ATTENTION: "capacity holds the burst, but with less headroom than the policy requires",
               FAIL: "capacity does not hold the burst"}[status]
    if r.memory.startup_problem:
        # no pool is built to hold or miss the burst: 'capacity does not hold the burst' had stood beside 40.4 GiB of
        # demand against 186.26 GiB asked for with --kv-cache-memory-bytes (the first limit hit names the refusal)
        summary = "the engine does not start, so no capacity holds the burst"
    if simulation_worsened(r):
        # the envelope's headroom met (or came closer to) the policy: the simulated burst set the verdict, and the
        # summary had said "less headroom than the policy requires" beside a headroom of 74.8% under a 20% policy
        summary = ("the envelope holds the burst with the policy's headroom" if envelope_verdict(r) == FITS else
                   "the envelope holds the burst, but with less headroom than the policy requires") + (
                  ", but the simulated burst is not sustained" if envelope_verdict(r) == FITS else
                  ", and the simulated burst is not sustained")
    if r.simulation is not None:
        s = r.simulation.spec
        ttft = f"p99 TTFT {s.ttft_s.p99:.2f} s" if s.ttft_s.p99 is not None else "no request finished"
        evidence.append(f"simulated burst ({r.simulation.description}): "
                        + ("sustained" if s.sustains else "NOT sustained: " + "; ".join(s.problems))
                        + f"; {ttft}, {s.preemptions} preemptions")
        if not s.sustains and status == PASS:
            status, summary = ATTENTION, "the envelope holds the burst, but the simulated burst is not sustained"
    failover = r.placement.failover if r.placement is not None else None
    if failover is not None:
        evidence.append(f"failover: {failover.sentence}")
        if failover.verdict != "fits" and status == PASS:  # docs/report.md: failover counts where there are replicas
            status, summary = ATTENTION, (f"capacity holds the burst, but not with a replica down (failover: "
                                          f"{failover.verdict})")
        elif failover.within_ttft_slo is False and status == PASS:  # the survivors fit, but fall short of the SLO
            status, summary = ATTENTION, (f"capacity holds the burst, but while a replica restarts the survivors' "
                                          f"queue adds {failover.added_wait_s:.1f} s of wait, past the TTFT SLO")
    return ControlResult("NIST SP 800-53 Rev. 5", "SC-5", "Denial-of-Service Protection", status, summary,
                         tuple(evidence))


def _flag(engine: str, limit: str) -> str:
    """The engine's flag for a resource limit (SGLang names them its own way; vLLM's are the field names)."""
    from ..engines.emit import engine_flags  # noqa: PLC0415

    return engine_flags().get(engine, {}).get("limits", {}).get(limit, f"--{limit.replace('_', '-')}")


def _speculation_evidence(r: PlanResult, command) -> str:
    """How the command pins CUDA graphs and speculation, by the flags it writes: vLLM's --enforce-eager and
    --speculative-config, SGLang's --disable-cuda-graph and --speculative-* flags (engines.emit.sglang_command; SGLang
    has no speculative_config, which its evidence had named)."""
    s, sp = r.memory.settings, r.deployment.speculative
    if command is None or command.engine == "vllm":
        return f"enforce_eager = {s.enforce_eager}; " + (
            f"speculative_config pins method {sp.method}, k = {sp.num_speculative_tokens}" if sp.enabled
            else "no speculation (no speculative_config)")
    argv = command.argv
    eager = f"enforce_eager = {s.enforce_eager}" + (" (--disable-cuda-graph)" if "--disable-cuda-graph" in argv else "")
    pins = [f"{flag} {argv[i + 1]}" for i, flag in enumerate(argv[:-1])
            if flag.startswith("--speculative-") and flag != "--speculative-draft-model-path"]
    return f"{eager}; " + (f"speculation pinned by {', '.join(pins)} (method {sp.method}, k = {sp.num_speculative_tokens})"
                           if pins else "no speculation (no --speculative-algorithm)")


def cis4(r: PlanResult, raw: dict) -> ControlResult:
    s = r.memory.settings
    kv = r.deployment.engine.kv_cache_dtype  # as the command gives it: "auto" stores the dtype the model is served in
    values = {"gpu_memory_utilization": s.gpu_memory_utilization, "max_model_len": s.max_model_len,
              "max_num_seqs": s.max_num_seqs, "max_num_batched_tokens": s.max_num_batched_tokens,
              "block_size": s.block_size, "kv_cache_dtype": kv if kv == s.kv_cache_dtype else f"{kv}: the served {s.kv_cache_dtype}",
              "tensor_parallel_size": r.deployment.tp}
    file_keys = {"tensor_parallel_size": "tp"}
    command = next((c for c in r.commands if c.engine == r.profile.engine), None)
    evidence = []
    defaulted, unpinned = [], []
    for name in ENGINE_LIMITS:
        key = file_keys.get(name, name)
        flag = _flag(command.engine, name) if command is not None else ""
        pinned = command is not None and flag in command.argv
        engine_sized = name == "block_size" and not pinned and bool(r.memory.state_blocks_per_sequence)
        if raw.get(key) is not None:
            source = "set in the deployment"
        else:
            defaulted.append(name)
            source = ("engine default, pinned by specsize" if pinned else
                      "sized by the engine to the model's state pages" if engine_sized else "engine default")
        if not (pinned or engine_sized):
            unpinned.append(name)
        shown = str(values[name])
        if pinned and command is not None:
            # the flag as the command writes it where a reviewer would not find it by the field's name (SGLang's
            # --mem-fraction-static, --max-running-requests, --page-size ...) or with another value
            # (engines.emit._kv_dtype: SGLang's fp8 is fp8_e4m3)
            given = command.argv[command.argv.index(flag) + 1]
            if flag != f"--{name.replace('_', '-')}" or not shown.startswith(given):
                source = f"{flag} {given}; {source}"
        evidence.append(f"{name} = {shown} ({source}){'' if pinned or engine_sized else ' — NOT in the emitted command'}")
    evidence.append(_speculation_evidence(r, command))
    status = PASS if command is not None and not unpinned else ATTENTION if command is not None else FAIL
    if command is None:
        summary = "no engine command could be emitted for this plan"
    elif unpinned:
        summary = f"{', '.join(unpinned)} left to the engine's defaults, NOT in the emitted command"
    else:
        summary = ("every resource limit is explicit in the emitted engine configuration"
                   + (f"; {len(defaulted)} came from engine defaults that change between releases — keep the "
                      "emitted values" if defaulted else ""))
    return ControlResult("CIS Controls v8", "CIS-4", "Secure Configuration of Enterprise Assets and Software", status,
                         summary, tuple(evidence))


def pr_ps01(r: PlanResult, security: dict | None) -> ControlResult:
    security = security or {}
    evidence = []
    missing, open_, key_only = [], [], []
    engine = "SGLang" if r.profile.engine == "sglang" else "vLLM"
    for component, name in COMPONENT_NAMES.items():
        spec = security.get(component)
        note = f" — {spec['note']}" if spec is not None and spec["note"] else ""
        if spec is None:
            missing.append(name)
            evidence.append(f"{name}: the plan does not say how it is protected")
        elif spec["auth"] == "none":
            open_.append(name)
            evidence.append(f"{name}: UNPROTECTED (auth: none){note}")
        elif component == "metrics_endpoint" and spec["auth"] == "api_key":
            # the engine's own --api-key never guards /metrics: vLLM 0.32 entrypoints/serve/middleware/authenticate.py
            # checks the token on GUARDED_PREFIX ("/v1", "/v2", "/inference", "/cohere") alone; SGLang 0.5.23
            # srt/utils/auth.py lets /health and /metrics through always. An API key alone had passed the control.
            key_only.append(name)
            evidence.append(f"{name}: api_key{note} — {engine}'s --api-key does not guard /metrics: say what "
                            "restricts it (network_policy, reverse_proxy, mtls, not_exposed)")
        else:
            evidence.append(f"{name}: {spec['auth']}{note}")
    inference = security.get("inference_endpoint")
    if inference is not None and inference["auth"] == "api_key":
        # the key is a secret the plan does not hold: the emitted command leaves it out and says where it goes
        evidence.append("note: the emitted command carries no API key (a secret, not the plan's to hold): " + (
            "launch SGLang with --api-key KEY (srt/server_args.py; it reads no environment variable for it)"
            if r.profile.engine == "sglang" else
            "vLLM reads VLLM_API_KEY from its environment (vllm/envs.py) where --api-key is not given"))
    if r.profile.engine == "sglang":  # sglang/srt/utils/auth.py: "Health/metrics endpoints are always allowed"
        evidence.append("note: SGLang's --api-key leaves /health and /metrics open on the same port unless the "
                        "network or a proxy restricts them")
    else:
        evidence.append("note: vLLM's --api-key guards the /v1 routes only; /metrics on the same port stays open "
                        "unless the network or a proxy restricts it")
    if open_:
        status, summary = FAIL, "unprotected: " + ", ".join(open_)
    elif missing or key_only:
        status, summary = ATTENTION, "; ".join(
            ([f"protection not stated for: {', '.join(missing)}"] if missing else [])
            + ([f"{', '.join(key_only)}: api_key alone, and {engine}'s --api-key does not guard /metrics"]
               if key_only else []))
    else:
        status, summary = PASS, "every serving component states how it is authenticated or isolated"
    return ControlResult("NIST CSF 2.0", "PR.PS-01", "Configuration management practices are established and applied "
                         "(access configuration of the serving components)", status, summary, tuple(evidence))


def controls(r: PlanResult, raw: dict, security: dict | None) -> tuple[ControlResult, ...]:
    return (sc5(r), cis4(r, raw), pr_ps01(r, security))
