"""How a plan maps to the controls a governance review asks about, with this plan's evidence.

- NIST SP 800-53 Rev. 5 SC-5 (Denial-of-Service Protection): capacity and headroom under expected and burst
  demand — pass when the worst case fits with the policy's headroom (and, when simulated, the burst is
  sustained), attention when thin, fail when it does not fit.
- CIS Controls v8, Control 4 (Secure Configuration of Enterprise Assets and Software): the resource limits
  set explicitly in the emitted engine configuration — pass when every limit is pinned in the command,
  with each value, and which ones the deployment file left to the engine's version-dependent defaults.
- NIST CSF 2.0 PR.PS-01 ("Configuration management practices are established and applied"), as the issue
  maps it to the access configuration of the serving components: the inference endpoint, the metrics
  endpoint and any cluster dashboard, and whether the plan says how each is protected. (CSF 2.0 files
  identity and access management under PR.AA; the evidence here is the components' access configuration,
  part of their configuration baseline.)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.envelope import headroom_text, policy_text
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


def sc5(r: PlanResult) -> ControlResult:
    v = r.verdict
    worst, expected = v.worst_case, v.expected
    status = {"fits": PASS, "thin": ATTENTION, "does_not_fit": FAIL}[v.verdict]
    evidence = [
        f"expected demand: {expected.concurrency} concurrent p50 requests need {expected.demand_bytes / GiB:.1f} GiB "
        f"of {expected.capacity_bytes / GiB:.1f} GiB KV cache per GPU "
        f"(headroom {headroom_text(expected.headroom_fraction, v.headroom_policy)})",
        f"burst demand: {worst.requested_concurrency} concurrent {worst.percentile} requests "
        f"({worst.concurrency} running, {worst.queued} queued at max_num_seqs) need {worst.demand_bytes / GiB:.1f} GiB "
        f"(headroom {headroom_text(worst.headroom_fraction, v.headroom_policy)}; policy {policy_text(v.headroom_policy)})",
        f"first limit hit: {v.breaks_first}",
    ]
    summary = {PASS: "capacity holds the burst with the policy's headroom",
               ATTENTION: "capacity holds the burst, but with less headroom than the policy requires",
               FAIL: "capacity does not hold the burst"}[status]
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
        pinned = command is not None and _flag(command.engine, name) in command.argv
        engine_sized = name == "block_size" and not pinned and bool(r.memory.state_blocks_per_sequence)
        if raw.get(key) is not None:
            source = "set in the deployment"
        else:
            defaulted.append(name)
            source = ("engine default, pinned by specsize" if pinned else
                      "sized by the engine to the model's state pages" if engine_sized else "engine default")
        if not (pinned or engine_sized):
            unpinned.append(name)
        evidence.append(f"{name} = {values[name]} ({source}){'' if pinned or engine_sized else ' — NOT in the emitted command'}")
    sp = r.deployment.speculative
    evidence.append(f"enforce_eager = {s.enforce_eager}; " + (
        f"speculative_config pins method {sp.method}, k = {sp.num_speculative_tokens}" if sp.enabled
        else "no speculation (no speculative_config)"))
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
    missing, open_ = [], []
    for component, name in COMPONENT_NAMES.items():
        spec = security.get(component)
        if spec is None:
            missing.append(name)
            evidence.append(f"{name}: the plan does not say how it is protected")
        elif spec["auth"] == "none":
            open_.append(name)
            evidence.append(f"{name}: UNPROTECTED (auth: none){' — ' + spec['note'] if spec['note'] else ''}")
        else:
            evidence.append(f"{name}: {spec['auth']}{' — ' + spec['note'] if spec['note'] else ''}")
    if r.profile.engine == "sglang":  # sglang/srt/utils/auth.py: "Health/metrics endpoints are always allowed"
        evidence.append("note: SGLang's --api-key leaves /health and /metrics open on the same port unless the "
                        "network or a proxy restricts them")
    else:
        evidence.append("note: vLLM's --api-key guards the /v1 routes only; /metrics on the same port stays open "
                        "unless the network or a proxy restricts it")
    if open_:
        status, summary = FAIL, "unprotected: " + ", ".join(open_)
    elif missing:
        status, summary = ATTENTION, "protection not stated for: " + ", ".join(missing)
    else:
        status, summary = PASS, "every serving component states how it is authenticated or isolated"
    return ControlResult("NIST CSF 2.0", "PR.PS-01", "Configuration management practices are established and applied "
                         "(access configuration of the serving components)", status, summary, tuple(evidence))


def controls(r: PlanResult, raw: dict, security: dict | None) -> tuple[ControlResult, ...]:
    return (sc5(r), cis4(r, raw), pr_ps01(r, security))
