"""Replicas across nodes, N+k failover, shared GPUs, storage and cold start.

- Placement: a replica's TP x PP group lives inside one node (GPUs per node, default 8) where it fits, and replicas
  fill nodes in order; a wider replica spans whole nodes, its TP group inside each node and its pipeline stages
  across them, the layout vLLM's distributed-serving guide gives for a model too large for one node ("set the
  tensor parallel size to the number of GPUs in each node, and the pipeline parallel size to the number of nodes";
  ranks are pp_rank x tp + tp_rank, so each node holds whole stages). A TP group wider than a node is refused: its
  all-reduce would cross the network, which the performance model (NVLink-class links) does not price.
- Failover: with `spare` replicas (or the replicas of `spare` nodes) down, the survivors take the whole
  peak load; each one's concurrency and its headroom then, from a re-plan. A node holding part of a replica takes
  that whole replica down.
- Cold start: the bytes each node must read (target and drafter checkpoints) over the storage bandwidth,
  plus engine start-up (profiling, CUDA graphs, torch.compile) from `StartupCosts`; while a replica
  restarts, the survivors' backlog grows when the load exceeds what they can serve, and the added wait
  must stay inside the TTFT SLO.
- Storage per node: every artefact that must be present (checkpoints as stored, quantized variants,
  compile caches) and the host RAM needed while loading. Every node reads the whole checkpoint, a node of a
  pipeline stage too: vLLM's loader iterates every tensor of every safetensors file on every rank and drops the
  ones of other stages only after reading them (model_loader/weight_utils.py safetensors_weights_iterator; only
  experts of other ranks under expert parallelism are skipped before the read). The nodes of one replica read in
  parallel, each from its own storage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..core.envelope import headroom_text
from ..core.errors import SpecError
from ..core.memory import AccountingProfile
from ..core.specs import DTYPE_BYTES, UNQUANTIZED, Deployment, ModelSpec, checkpoint_format_needed, effective_target
from ..core.traffic import littles_law_rate
from ..core.units import GiB
from ..core.weights import weight_breakdown
from .plan import PlanResult, plan, replica_workload


# model types whose checkpoints store an embedding and a head in every MTP layer (DeepSeek-V3's layout; Qwen3-Next's
# and MiMo's MTP layers read the target's and store none)
MTP_STORES_OWN_EMBEDDING = ("deepseek_v3", "deepseek_v32")


@dataclass(frozen=True)
class StartupCosts:
    """Engine start-up besides reading weights; estimates, each overridable."""

    engine_init_s: float = 30.0  # process start, memory profiling, KV allocation, CUDA graph capture
    compile_s: float = 40.0  # torch.compile without a cache
    compile_cached_s: float = 8.0  # with a warm compile cache on the node
    compile_cache_bytes: int = int(0.5 * GiB)  # per model (target, drafter)
    loader_ram_bytes_per_rank: int = 2 * GiB  # worker process + safetensors read buffers
    source: str = ("estimates: vLLM start-up logs print 'init engine (profile, create kv cache, warmup model) took' "
                   "20-60 s on H100-class GPUs and torch.compile 20-60 s on a cold cache; not calibrated on a row")


@dataclass(frozen=True)
class Artefact:
    name: str
    bytes: int
    note: str


@dataclass(frozen=True)
class Storage:
    artefacts: tuple[Artefact, ...]
    disk_bytes_per_node: int
    host_ram_bytes_per_node: int
    read_bytes_per_node: int  # what a cold start reads from storage
    cold_start_s: float
    cold_start_cached_s: float


@dataclass(frozen=True)
class Failover:
    replicas: int
    lost: int
    survivors: int
    load_per_survivor: int  # each survivor's share of the workload's concurrency (its burst on top)
    verdict: str
    headroom: float
    tpot_s: float | None
    cold_start_s: float
    backlog_requests: float  # queued at each survivor while the lost capacity restarts
    added_wait_s: float
    within_ttft_slo: bool | None
    sentence: str


@dataclass(frozen=True)
class Placement:
    gpus_per_node: int
    nodes: int
    replicas_per_node: tuple[int, ...]  # replicas with ranks on each node (1 on each node of a replica wider than one)
    failover: Failover | None
    storage: Storage
    nodes_per_replica: int = 1  # more than 1: the replica's pipeline stages span that many whole nodes
    gpus_used_per_node: tuple[int, ...] = ()  # GPUs holding ranks on each node
    layout: str = ""  # which ranks sit where, in words


def layout_problem(tp: int, pp: int, gpus_per_node: int) -> tuple[str, str, str] | None:
    """Why a replica of TP x PP GPUs cannot be laid out on nodes of `gpus_per_node` GPUs, as (field, problem,
    accepted values); None where it can: inside one node, or across whole nodes with its TP group inside each node and
    its pipeline stages split between them (the module's docstring)."""
    per_instance = tp * pp
    if per_instance <= gpus_per_node:
        return None
    if tp > gpus_per_node:
        return ("tp", f"a TP group of {tp} spans nodes of {gpus_per_node} GPUs: its all-reduce would cross the network "
                "on every layer, which the performance model does not price (it prices NVLink-class links inside a "
                "node)", f"at most gpus_per_node ({gpus_per_node}), with pipeline stages (pp) across nodes, "
                "as vLLM's multi-node guide lays a large model out")
    if gpus_per_node % tp or per_instance % gpus_per_node:
        whole = [p for p in range(2, 65) if tp * p % gpus_per_node == 0 and gpus_per_node % tp == 0][:3]
        return ("pp", f"a replica of tp x pp = {tp} x {pp} = {per_instance} GPUs does not fill whole nodes of "
                f"{gpus_per_node} GPUs with whole TP groups", "tp dividing gpus_per_node and tp x pp a multiple of it"
                + (f" (pp {', '.join(map(str, whole))}, ... at tp {tp})" if whole else ""))
    return None


def checkpoint_bytes(m: ModelSpec, include_mtp: bool = True) -> int:
    """Bytes of the checkpoint as stored (exact when safetensors headers were read). Stored mxfp4 experts are not
    padded: the engines pad them to their kernels' tiles only when they allocate them (core.weights.mxfp4_expert_dims;
    gpt-oss-120b's files hold 60.8 GiB, the padded experts 65.9 GiB on the GPU). An EAGLE-3 head stores no embedding:
    it reads the target's, which its trainers leave out of the files (SpecForge's checkpoint filter: "EAGLE3 owns a
    frozen embedding loaded from the target; do not persist it"); its own lm_head over the draft vocabulary is stored."""
    if m.weight_bytes_exact:
        return m.weight_bytes_exact
    dtype = m.dtype if m.dtype in DTYPE_BYTES else "bfloat16"
    stored = weight_breakdown(m, 1, 1, dtype, None, include_mtp=include_mtp, rotary_cache=False, mxfp4_pad=(1, 1))
    # an EAGLE-3 head: one decoder layer behind its fc of 3 inputs. Medusa's heads (catalog.configs.medusa_heads) have
    # no decoder layer and count their heads in the same field: with 3 of them their lm_heads, held as the
    # "embedding", had been dropped from the files (0.09 GiB on disk for the 0.83 GiB loaded at k 3, not at k 2 or 4)
    eagle3 = m.is_head and m.eagle_fc_inputs == 3 and m.num_layers > 0
    total = stored.total - (stored.embedding if eagle3 else 0)
    if include_mtp and m.model_type in MTP_STORES_OWN_EMBEDDING:
        # each MTP layer's files hold an embedding table and a head of their own, which the engine maps onto (or
        # shares with) the target's only once loaded: vLLM's deepseek_mtp.py _rewrite_spec_layer_name reads
        # model.layers.{61}.embed_tokens and .shared_head.head from the checkpoint. DeepSeek-V3's two copies, in bf16,
        # are 2 x 129,280 x 7,168 x 2 B = 3.7 GB of its files that the disk had left out
        total += m.num_mtp_layers * (stored.embedding + stored.lm_head)
    return total


def storage(d: Deployment, result: PlanResult, bandwidth_bytes_s: float, costs: StartupCosts,
            replicas_on_node: int, ranks_on_node: int | None = None) -> Storage:
    """`ranks_on_node`: the engine ranks on the busiest node (default: `replicas_on_node` whole replicas; a node of a
    replica wider than a node holds only its share of the ranks)."""
    quant = result.memory.settings.quantization
    needed = checkpoint_format_needed(d.target, d.quantization_override)
    served, _ = effective_target(d)  # the weights as the engine holds them (an unquantized `none` included)
    serving = (weight_breakdown(served, 1, 1, result.memory.settings.dtype, quant, rotary_cache=False,
                                mxfp4_pad=(1, 1)).total  # as stored: unpadded (checkpoint_bytes)
               if (quant is not None and quant.source == "override") or needed else 0)
    if needed:  # the engine serves a checkpoint stored in the format, not the target's own
        kind = needed if needed == UNQUANTIZED else f"{needed}, pre-quantized"
        arts = [Artefact(f"target checkpoint ({kind})", serving,
                         f"a{'n' if needed == UNQUANTIZED else ''} {needed} checkpoint of {d.target.model_id} (the "
                         "plan's note says why)")]
    else:
        arts = [Artefact("target checkpoint", checkpoint_bytes(d.target), d.target.model_id)]
    if serving and quant is not None and not needed:
        arts.append(Artefact(f"{quant.method} variant (optional, pre-quantized)", serving,
                             "quantized at load from the stored checkpoint unless saved"))
    if d.speculative.draft is not None:
        arts.append(Artefact("drafter checkpoint", checkpoint_bytes(d.speculative.draft), d.speculative.draft.model_id))
    models = 1 + (d.speculative.draft is not None)
    if not result.memory.settings.enforce_eager:
        arts.append(Artefact("torch.compile cache", costs.compile_cache_bytes * models, "per node, reused across restarts"))
    disk = sum(a.bytes for a in arts)
    read = sum(a.bytes for a in arts if "checkpoint" in a.name)
    ranks = ranks_on_node if ranks_on_node is not None else d.gpus_per_instance * replicas_on_node
    largest_rank_share = max(a.bytes for a in arts if "checkpoint" in a.name) // d.gpus_per_instance  # tp x pp
    ram = ranks * costs.loader_ram_bytes_per_rank + largest_rank_share
    if bandwidth_bytes_s <= 0:
        raise SpecError("storage_bandwidth", f"must be positive, got {bandwidth_bytes_s}", "bytes/s > 0 (e.g. 2 GB/s)")
    read_s = read / bandwidth_bytes_s
    compile_s = 0.0 if result.memory.settings.enforce_eager else costs.compile_s
    compile_cached = 0.0 if result.memory.settings.enforce_eager else costs.compile_cached_s
    return Storage(artefacts=tuple(arts), disk_bytes_per_node=disk, host_ram_bytes_per_node=ram,
                   read_bytes_per_node=read, cold_start_s=read_s + costs.engine_init_s + compile_s,
                   cold_start_cached_s=read_s + costs.engine_init_s + compile_cached)


def place(result: PlanResult, profile: AccountingProfile, gpus_per_node: int = 8, spare: int = 1,
          unit: str = "replica", storage_bandwidth_bytes_s: float = 2e9, costs: StartupCosts = StartupCosts(),
          efficiency=None, acceptance=None, ttft_slo_s: float | None = None, warm_cache: bool = True) -> Placement:
    d = result.deployment
    per_instance = d.gpus_per_instance
    problem = layout_problem(d.tp, d.pp, gpus_per_node)
    if problem is not None:
        raise SpecError(*problem)
    replicas = d.replicas
    spans = -(-per_instance // gpus_per_node)  # nodes one replica occupies (1 where it fits a node)
    layout: list[int] = []
    if spans > 1:  # whole nodes of whole pipeline stages: each node holds ranks of one replica
        layout = [1] * (replicas * spans)
        used = [gpus_per_node] * len(layout)
        stages = gpus_per_node // d.tp
        text = (f"each replica spans {spans} nodes of {gpus_per_node} GPUs: TP {d.tp} inside a node, "
                f"{stages} pipeline stage{'s' if stages > 1 else ''} per node, stage hand-offs over the network "
                f"between nodes; {replicas} replica{'s' if replicas > 1 else ''} on {len(layout)} nodes")
    else:
        per_node = gpus_per_node // per_instance
        left = replicas
        while left > 0:
            layout.append(min(per_node, left))
            left -= per_node
        used = [n * per_instance for n in layout]
        text = (f"{replicas} replica{'s' if replicas > 1 else ''} of {per_instance} GPU{'s' if per_instance > 1 else ''}"
                f" on {len(layout)} node{'s' if len(layout) > 1 else ''} of {gpus_per_node} GPUs, up to {per_node} a "
                f"node")
    # the ranks on the busiest node: a node of a wide replica is full of it
    st = storage(d, result, storage_bandwidth_bytes_s, costs, max(layout), ranks_on_node=max(used))
    if unit not in ("replica", "node"):
        raise SpecError("failure_unit", f"unknown unit {unit!r}", "replica, node")
    units = replicas if unit == "replica" else len(layout)
    if spare > units:
        raise SpecError("spare", f"{spare} {unit}s may fail, but the deployment has {units}",
                        f"at most {units} (the deployment's {unit}s)")
    if unit == "replica":
        lost = spare
    elif spans > 1:  # at worst each failed node belongs to another replica, and takes all of it down
        lost = min(spare, replicas)
    else:
        lost = sum(sorted(layout, reverse=True)[:spare])
    failover = None
    if spare > 0:  # a replica restarts on its node, compile cache and all; a node is replaced by one without
        cause = "" if unit != "node" or spans <= 1 else (
            f"a failed node takes down the whole replica it holds stages of ({spans} nodes a replica): " if spare == 1
            else f"{spare} failed nodes of {len(layout)} take down a whole replica each at worst ({spans} nodes a "
                 "replica): ")
        failover = _failover(result, profile, replicas, lost, st, efficiency, acceptance, ttft_slo_s,
                             warm_cache and unit == "replica", cause)
    return Placement(gpus_per_node=gpus_per_node, nodes=len(layout), replicas_per_node=tuple(layout),
                     failover=failover, storage=st, nodes_per_replica=spans, gpus_used_per_node=tuple(used),
                     layout=text)


def _failover(result: PlanResult, profile: AccountingProfile, replicas: int, lost: int, st: Storage, efficiency,
              acceptance, ttft_slo_s: float | None, warm_cache: bool, cause: str = "") -> Failover:
    d, w = result.deployment, result.workload
    survivors = replicas - lost
    restart = st.cold_start_cached_s if warm_cache else st.cold_start_s
    if survivors <= 0:
        return Failover(replicas, lost, 0, 0, "does_not_fit", -math.inf, None, restart, math.inf, math.inf,
                        False if ttft_slo_s else None,
                        f"{cause}with {lost} of {replicas} replicas down nothing serves for {restart:.0f} s")
    per_survivor = math.ceil(w.concurrency / survivors)  # the workload's concurrency is the total
    survivors_only = replace(d, num_gpus=survivors * d.gpus_per_instance)
    after = plan(survivors_only, w, profile, result.verdict.headroom_policy, efficiency=efficiency,
                 acceptance=acceptance if d.speculative.enabled else None,
                 tpot_slo_s=result.perf.tpot_slo_s if result.perf is not None else None)
    tpot = None
    # without a performance model (no efficiencies for the device) the queue is not known: NaN (null in JSON), and no
    # verdict on the TTFT SLO (it had read 0 requests queued, within the SLO)
    backlog = added_wait = math.nan
    if after.perf is not None:
        tpot = after.perf.tpot_s or after.perf.tpot_s_no_spec
        # per replica: requests/s it can serve at its max useful batch vs what arrives for it
        s = after.memory.settings
        capacity_batch = min(s.max_num_seqs, max(1, next(
            (sh.max_concurrency for sh in after.verdict.shapes if sh.label == "p50"), s.max_num_seqs)))
        mean_output = max(1, w.output_tokens.p50)
        served = littles_law_rate(capacity_batch, tpot * mean_output + after.perf.ttft_s)
        # the requests keep arriving at the rate that held the concurrency in flight before the failure, at the
        # latency each replica served then (Little's law), now split over the survivors: at the survivors' own,
        # slower latency the arrivals had been undercounted (2 replicas of 90 at 13.0 ms a token, one survivor held at
        # 128 at 15.6 ms: 38 requests/s counted, 46 arriving, and the queue 40% short)
        before = result.perf
        if before is not None:
            before_tpot = before.tpot_s or before.tpot_s_no_spec
            total = replicas * littles_law_rate(replica_workload(d, w).concurrency,
                                                before_tpot * mean_output + before.ttft_s)
        else:
            total = littles_law_rate(w.concurrency, tpot * mean_output + after.perf.ttft_s)
        arriving = total / survivors
        excess = max(0.0, arriving - served)
        backlog = excess * restart
        added_wait = backlog / served if served > 0 else math.inf
    within = None if ttft_slo_s is None or math.isnan(added_wait) else added_wait <= ttft_slo_s
    headroom = after.verdict.worst_case.headroom_fraction
    sentence = (f"{cause}with {lost} of {replicas} replicas down, each of {survivors} survivors takes {per_survivor} "
                f"concurrent requests: {after.verdict.verdict}, headroom "
                f"{headroom_text(headroom, after.verdict.headroom_policy)}"
                + (f", TPOT {tpot * 1e3:.1f} ms" if tpot else "")
                + f"; the lost capacity is back after {restart:.0f} s"
                + (f", by then {backlog:.0f} requests queue at each survivor ({added_wait:.1f} s extra wait)"
                   if backlog and not math.isnan(backlog) else
                   "; the queue meanwhile is not estimated (no performance model for this device)"
                   if math.isnan(backlog) else ""))
    return Failover(replicas=replicas, lost=lost, survivors=survivors, load_per_survivor=per_survivor,
                    verdict=after.verdict.verdict, headroom=headroom, tpot_s=tpot, cold_start_s=restart,
                    backlog_requests=backlog, added_wait_s=added_wait, within_ttft_slo=within, sentence=sentence)
