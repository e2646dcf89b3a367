"""Everything `specsize plan` adds around the verdict: ranked fixes, robustness margins, placement,
failover, storage and cold start, and the engine commands to deploy with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..core.errors import SpecError
from ..core.memory import AccountingProfile, MemoryAccount, account
from ..core.specs import ModelSpec
from ..core.speculation import Acceptance
from ..engines.emit import EMITTERS, can_serve
from ..engines.methods import draft_tp_problem
from ..engines.registry import resolve_profile
from .placement import StartupCosts, place
from .plan import PlanResult
from .recommend import recommend
from .robustness import analyse


def _account_for(engine: str, result: PlanResult, profile: AccountingProfile) -> MemoryAccount | None:
    """Each engine's command carries that engine's own settings: the plan's account for the plan's engine,
    the newest profile's account for the other (SGLang's mem_fraction_static is not vLLM's
    gpu_memory_utilization). None when the other engine cannot account the deployment."""
    if engine == profile.engine:
        return result.memory
    try:
        return account(result.deployment, resolve_profile(engine))
    except SpecError:
        return None


def analyse_plan(result: PlanResult, profile: AccountingProfile, efficiency=None,
                 acceptance: Acceptance | None = None, *, emit: tuple[str, ...] = tuple(EMITTERS),
                 gpus_per_node: int = 8, spare: int = 1, failure_unit: str = "replica",
                 storage_bandwidth_bytes_s: float = 2e9, ttft_slo_s: float | None = None,
                 tpot_slo_s: float | None = None, startup: StartupCosts = StartupCosts(),
                 fragile_below: float = 0.15, catalog: Callable[[], tuple[ModelSpec, ...]] = tuple,
                 engine_version: str | None = None) -> PlanResult:
    """`catalog`: gives the catalog's models, where the fixes look for smaller drafts and EAGLE heads (read only when
    a fix needs them); `engine_version`: the release asked for (its speculative methods bound the fixes)."""
    recs = tuple(recommend(result, profile, efficiency, acceptance, catalog=catalog, engine_version=engine_version,
                           gpus_per_node=gpus_per_node))
    robust = analyse(result, efficiency, acceptance, tpot_slo_s=tpot_slo_s, fragile_below=fragile_below)
    # one replica has no failover to plan at the default of one spare; more spares than units are refused (place)
    spare = spare if result.deployment.replicas > 1 or spare > 1 else 0
    placement = place(result, profile, gpus_per_node=gpus_per_node, spare=spare, unit=failure_unit,
                      storage_bandwidth_bytes_s=storage_bandwidth_bytes_s, costs=startup, efficiency=efficiency,
                      acceptance=acceptance, ttft_slo_s=ttft_slo_s)
    ordered = sorted(emit, key=lambda engine: engine != profile.engine)  # the plan's own engine's command first
    accounts = {engine: _account_for(engine, result, profile) for engine in ordered
                if can_serve(engine, result.deployment)}  # an engine without the method gets no command
    nodes = placement.nodes_per_replica  # a vLLM command across nodes names the Ray backend
    # the plan's own engine's command in the flags of the release planned (SGLang 0.4.6's --enable-ep-moe, not the
    # --ep-size of 0.4.10.post2 on); the other engine's is accounted, and so written, as its newest release
    commands = tuple(EMITTERS[engine](result.deployment, mem, nodes, engine_version if engine == profile.engine
                                      else None) for engine, mem in accounts.items() if mem is not None)
    return replace(result, recommendations=recs, robustness=robust, placement=placement, commands=commands,
                   warnings=result.warnings + _launch_warnings(result, profile, engine_version, commands)
                   + _multi_node_warnings(placement, tuple(c for c in commands if c.engine == profile.engine)))


def _multi_node_warnings(placement, commands: tuple) -> tuple[str, ...]:
    """How a replica whose pipeline stages span nodes (placement.place) is launched: the emitted command starts one
    node's ranks only. vLLM: a Ray cluster over the replica's nodes, the command run on its head node (vLLM's
    distributed-serving guide, "Multi-node deployment": the same command, ray start --head / --address on the nodes)
    with --distributed-executor-backend ray: up to 0.11.0 vLLM picked Ray itself where the world size exceeds the node's
    GPUs, from 0.11.1 it refuses to ("Tensor parallel size (16) cannot be larger than the number of available GPUs
    (8)"; from 0.13 "World size (16) is larger than the number of available GPUs (8) in this node ... set
    '--distributed-executor-backend ray'": config/parallel.py ParallelConfig.__post_init__), and the flag names Ray on
    every release; SGLang: the command on every node with --nnodes, --node-rank and --dist-init-addr
    (python/sglang/srt/server_args.py, ServerArgs: nnodes, node_rank, dist_init_addr)."""
    if placement is None or placement.nodes_per_replica <= 1:
        return ()
    n = placement.nodes_per_replica
    out = []
    for command in commands:
        if command.engine == "vllm":
            out.append(f"a replica spans {n} nodes: the vllm command starts it only from a Ray cluster over those "
                       "nodes (`ray start --head` on one, `ray start --address=<head>:6379` on the others), run on the "
                       "head node; it carries --distributed-executor-backend ray (vLLM 0.11.1 and later refuse a world "
                       "size larger than the node's GPUs without it)")
        else:
            out.append(f"a replica spans {n} nodes: run the sglang command on each of them with --nnodes {n} "
                       f"--node-rank <0..{n - 1}> --dist-init-addr <node 0>:<port>")
    return tuple(out)


def _launch_warnings(result: PlanResult, profile: AccountingProfile, engine_version: str | None,
                     commands: tuple = ()) -> tuple[str, ...]:
    """What keeps the plan's own engine release from starting the command it is given: a draft model at a TP the
    release refuses (engines.methods: vLLM 0.15 and later run one only at the target's TP), and flags the command
    carries that came after the release (engine_flags.json `flags_from`: SGLang's --page-size from 0.4.4)."""
    from ..engines.emit import engine_flags  # noqa: PLC0415
    from ..engines.registry import released_by  # noqa: PLC0415

    out = []
    d = result.deployment
    sp = d.speculative
    problem = draft_tp_problem(profile.engine, engine_version, sp.method, d.tp, sp.draft_tp) if sp.kind.own_tp \
        else None
    if problem:
        out.append(f"{problem}: the emitted command cannot start; plan with draft_tp {d.tp}")
    firsts = engine_flags()[profile.engine].get("flags_from", {})
    before = engine_flags()[profile.engine].get("flags_before", {})  # what an older release takes in a flag's place
    for command in commands:
        lacking = [a for a in command.argv if command.engine == profile.engine
                   and a in firsts and not released_by(engine_version, firsts[a])]
        name = "vLLM" if profile.engine == "vllm" else "SGLang"
        dropped = [f"{a} (from {firsts[a]})" for a in lacking if a not in before]
        if dropped:
            out.append(f"{name} {engine_version} has no {', '.join(dropped)}: leave it out of the {command.engine} "
                       "command, whose header names the releases that take every flag it carries")
        for a in lacking:
            if a in before:
                out.append(f"{name} {engine_version} takes {before[a]} in place of {a} and its value (from "
                           f"{firsts[a]}): write it so in the {command.engine} command")
    return tuple(out)
