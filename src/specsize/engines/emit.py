"""Engine launch commands for a plan: `vllm serve` (and its YAML config form) and SGLang's launch_server.

Flag names are recorded in data/engine_flags.json from each engine's argument definitions; the tests check
every emitted flag against them (and against the engine's own parser when it is importable).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..core.errors import SpecError
from ..core.memory import MemoryAccount
from ..core.specs import Deployment, checkpoint_format_needed
from ..core.speculation import DRAFTER_KINDS
from .registry import engine_label, predates
from .vllm import NGRAM_LOOKUP


@lru_cache(maxsize=1)
def engine_flags() -> dict:
    # beside this module in a checkout and in an installed wheel (importlib.resources: 30 ms of imports more)
    return json.loads((Path(__file__).resolve().parent / "data" / "engine_flags.json").read_text(encoding="utf-8"))


def flags_note(engine: str, version: str | None) -> str | None:
    """A note where the release planned is older than the releases whose flags the emitted command was checked
    against (engine_flags.json's `versions`): some flags are named otherwise there."""
    from .registry import released_by  # noqa: PLC0415

    checked = engine_flags()[engine]["versions"]
    if released_by(version, checked.split()[0]):
        return None  # (a flag the command carries that came later still: planner.analysis._launch_warnings)
    older = " (before 0.8 the drafter was --speculative-model and --num-speculative-tokens, not --speculative-config)" \
        if engine == "vllm" else ""
    name = engine_label(engine)
    return (f"the {name} command uses the flags of {name} {checked.split(' (')[0]}; {name} {version} names some "
            f"otherwise{older}: check it against that release's --help")


def _versions(engine: str, d, argv: list[str] | tuple[str, ...] = (), checked: str | None = None,
              since: str | None = None) -> str:
    """The releases the command is for: the flags' checked range (`checked`: a narrower one), narrowed to those that
    launch d's method and have every flag in `argv` (engine_flags.json's `flags_from`: the first release with each;
    `since`: the first release of a flag the table has no entry for)."""
    from .methods import launch_versions  # noqa: PLC0415
    from .registry import release_key  # noqa: PLC0415

    table = engine_flags()[engine]
    firsts = [table.get("flags_from", {}).get(a) for a in argv if a.startswith("--")] + [since]
    since = max((f for f in firsts if f), key=lambda f: release_key(f) or (0,), default=None)
    return launch_versions(engine, d.speculative.method, checked or table["versions"], since, d.target.model_type)


@dataclass(frozen=True)
class EngineCommand:
    engine: str
    versions: str
    argv: tuple[str, ...]
    config_yaml: str | None  # vLLM's --config file form

    @property
    def shell(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv)


def _kv_dtype(value: str, engine: str, served: str) -> str | None:
    """The engine's --kv-cache-dtype for a KV dtype (None: auto). The served dtype itself is auto: neither engine
    takes float16 or float32 there (vLLM's CacheDType, SGLang's choices), SGLang takes bfloat16 only in later
    releases, and core.memory refuses any other 16- or 32-bit dtype."""
    if value in ("auto", None) or value == served:
        return None
    if value == "fp8":
        return "fp8" if engine == "vllm" else "fp8_e4m3"
    return value


def _draft_path(d: Deployment) -> str:
    """The drafter's checkpoint; a head specsize derived from the target's config has none, so the command
    names the gap instead of a path that does not exist (the plan's note says the head was derived), unless it was
    derived in place of a named head whose config could not be read: the engine serves that one."""
    draft = d.speculative.draft
    assert draft is not None
    if not draft.names_checkpoint:
        return _gap(f"{d.speculative.kind.method.value}_HEAD")
    return draft.model_id


def _gap(what: str) -> str:
    """A path the command cannot know and the user fills in: a derived head's, a pre-quantized checkpoint's."""
    return f"PATH_TO_YOUR_{what.upper()}"


# --quantization as each engine names a format (vLLM's QuantizationMethods, SGLang's QUANTIZATION_CHOICES): the Marlin
# kernels for AWQ and GPTQ (a method named outright is the one the engine runs), ModelOpt's name for nvfp4 (which a
# compressed-tensors NVFP4 checkpoint would refuse, as below for mxfp4), the compressed-tensors (vLLM) or w8a8_int8
# (SGLang) layout of 8-bit integer weights; none for mxfp4: an MXFP4 checkpoint declares its own quant_method, gpt-oss's
# "mxfp4" or AMD Quark's "quark", and both engines refuse a --quantization other than the checkpoint's (vLLM 0.32
# config/model.py: only Mxfp4Config overrides, for gpt_oss alone; SGLang's compatible_quantization_methods has no
# mxfp4 -> quark), nor does a release before 0.10.1 know the name; any other name as given
_ENGINE_QUANTIZATION = {
    "vllm": {"int4": "awq_marlin", "awq": "awq_marlin", "gptq": "gptq_marlin", "int8": "compressed-tensors",
             "w8a8_int8": "compressed-tensors", "nvfp4": "modelopt_fp4", "mxfp4": None},
    "sglang": {"int4": "awq_marlin", "awq": "awq_marlin", "gptq": "gptq_marlin", "int8": "w8a8_int8",
               "nvfp4": "modelopt_fp4", "fbgemm_fp8": "fp8", "mxfp4": None},
}


def engine_quantization(engine: str, override: str | None) -> str | None:
    """The --quantization value `engine` is given for a quantization override name (None: none, the checkpoint's own)."""
    name = str(override or "none").lower()
    return None if name == "none" else _ENGINE_QUANTIZATION[engine].get(name, name)


# SGLang releases before this one read a ModelOpt NVFP4 checkpoint's quant_method "modelopt" as ModelOpt's FP8 config,
# which refuses it ("only supports static FP8"): they load it under --quantization modelopt_fp4, which their
# configs/model_config.py lists as compatible with "modelopt"; 0.5.3.post1 tells the two apart by the checkpoint's
# quant_algo (ModelConfig._parse_modelopt_quant_config; none in the 0.5.3 wheel)
SGLANG_MODELOPT_FP4_DETECTED = "0.5.3.post1"


def quantization_flag(d: Deployment, engine: str, version: str | None = None) -> str | None:
    """The --quantization value for the plan's override (None: the checkpoint's own, which the engine reads), or the one
    release `version` of `engine` (None: the newest) needs named to read the checkpoint's own."""
    flag = engine_quantization(engine, d.quantization_override)
    stored = d.target.quantization
    if (flag is None and d.quantization_override is None and engine == "sglang" and stored is not None
            and stored.method == "nvfp4" and not stored.compressed_tensors
            and predates(version, SGLANG_MODELOPT_FP4_DETECTED)):
        return _ENGINE_QUANTIZATION["sglang"]["nvfp4"]
    return flag


def served_model(d: Deployment) -> str:
    """The checkpoint the command serves: the target's, or, when the override is a format the engines do not make at
    load (anything but fp8), the gap a checkpoint stored in that format fills (the plan's warning says so)."""
    needed = checkpoint_format_needed(d.target, d.quantization_override)
    return _gap(f"{needed}_CHECKPOINT") if needed else d.target.model_id


def _speculative_config(d: Deployment) -> dict | None:
    sp = d.speculative
    if not sp.enabled:
        return None
    method = sp.kind.engine_name("vllm")
    if method is None:
        raise SpecError("emit", f"vLLM has no {sp.method} speculative method", supported("vllm"))
    out: dict = {"method": method, "num_speculative_tokens": sp.num_speculative_tokens}
    if sp.draft is not None:
        out["model"] = _draft_path(d)
    if sp.kind.own_tp:
        out["draft_tensor_parallel_size"] = sp.draft_tp
    if sp.kind.cpu_drafted:  # the lookup the plan's n-gram share was measured with (engines/vllm.py)
        out["prompt_lookup_max"] = NGRAM_LOOKUP[1]
        out["prompt_lookup_min"] = NGRAM_LOOKUP[0]
    return out


def vllm_command(d: Deployment, mem: MemoryAccount, nodes: int = 1, version: str | None = None) -> EngineCommand:
    """`nodes`: the nodes one replica's pipeline stages span (planner.placement's nodes_per_replica). Across nodes
    vLLM runs the replica's workers on a Ray cluster only with --distributed-executor-backend ray: its default
    backend is multiprocessing, and from 0.11.1 a world size above the node's GPUs is refused without the flag
    (vllm 0.32 config/parallel.py ParallelConfig.__post_init__: "World size (16) is larger than the number of
    available GPUs (8) in this node ... set '--distributed-executor-backend ray'"; the flag's choices are
    DistributedExecutorBackend = ray, mp, uni, external_launcher, engine/arg_utils.py EngineArgs.add_cli_args).
    `version`: the release planned (None: the newest), whose registry names the --quantization flag (quantization_flag)."""
    s = mem.settings
    e = d.engine
    options: dict[str, object] = {
        "tensor-parallel-size": d.tp,
        "pipeline-parallel-size": d.pp,
        **({"distributed-executor-backend": "ray"} if nodes > 1 else {}),
        "gpu-memory-utilization": s.gpu_memory_utilization,
        "max-model-len": s.max_model_len,
        "max-num-seqs": s.max_num_seqs,
        "max-num-batched-tokens": s.max_num_batched_tokens,
        "block-size": e.block_size or s.block_size,
        "dtype": s.dtype,
    }
    if mem.state_blocks_per_sequence and not e.block_size:
        # a hybrid model's attention block size is the engine's own, sized to its state pages (272 for Qwen3-Next at
        # TP 4) from whatever is given: releases whose --block-size takes at most 256 refuse it given, and every
        # release works it out alike; a size the user gave is passed on as given
        del options["block-size"]
    options["kv-cache-dtype"] = _kv_dtype(e.kv_cache_dtype, "vllm", s.dtype) or "auto"  # pinned: CIS-4
    if e.kv_cache_memory_bytes is not None:
        options["kv-cache-memory-bytes"] = e.kv_cache_memory_bytes
    if s.scheduler_steps > 1:  # V0 only (core.memory.scheduler_steps)
        options["num-scheduler-steps"] = s.scheduler_steps
    if s.stream_interval > 1:  # vLLM from 0.12 (AccountingProfile.stream_interval_flag)
        options["stream-interval"] = s.stream_interval
    if e.chunked_prefill != "auto":  # V0 only (core.memory.v0_chunked_prefill); 0.6 reads "--enable-chunked-prefill False"
        options["enable-chunked-prefill"] = e.chunked_prefill == "on"
    quantization = quantization_flag(d, "vllm", version)
    if quantization:
        options["quantization"] = quantization
    spec = _speculative_config(d)
    if spec:
        options["speculative-config"] = json.dumps(spec, separators=(",", ":"))
    model = served_model(d)
    argv = ["vllm", "serve", model]
    for key, value in options.items():
        argv += [f"--{key}", str(value)]
    if s.enforce_eager:
        argv.append("--enforce-eager")
    if d.ep > 1:  # the experts split by expert over the TP group (Deployment.ep; from 0.8.0: engines.support)
        argv.append("--enable-expert-parallel")
    lines = [f"# vllm serve {model} --config this.yaml"]
    for key, value in options.items():
        rendered = f"'{value}'" if key == "speculative-config" else value
        lines.append(f"{key}: {rendered}")
    if s.enforce_eager:
        lines.append("enforce-eager: true")
    if d.ep > 1:
        lines.append("enable-expert-parallel: true")
    return EngineCommand("vllm", _versions("vllm", d), tuple(argv), "\n".join(lines) + "\n")


def _sglang_expert_parallel(d: Deployment, version: str | None) -> tuple[list[str], str | None, str | None]:
    """SGLang's flags for expert parallelism over the TP group in release `version` (None: the newest), with the
    releases range and the first release such a command is for where the flag narrows them (None: no narrowing).
    From 0.4.10.post2 `--ep-size N` alone switches the MoE layers to it; before, from 0.4.1.post4, `--enable-ep-moe`
    does, setting ep_size = tp_size itself (ServerArgs.__post_init__: "if self.enable_ep_moe: self.ep_size =
    self.tp_size", server_args.py in the 0.4.1.post4 - 0.4.10 wheels, where --ep-size alone left the MoE layers on TP:
    engine_flags.json's flags_from / flags_before). A 0.4.6 plan had been given --ep-size and a note to rewrite it.
    --enable-ep-moe is accepted up to 0.5.2 (a DeprecatedAction that raises from 0.5.3), so such a command is
    headed with the 0.4 series only."""
    from .registry import released_by  # noqa: PLC0415
    from .support import EXPERT_PARALLEL_FROM, SGLANG_EP_ARCH_FROM  # noqa: PLC0415

    if d.ep <= 1:
        return [], None, None
    table = engine_flags()["sglang"]
    if released_by(version, table["flags_from"]["--ep-size"]):
        return ["--ep-size", str(d.ep)], None, None
    assert d.ep == d.tp  # --enable-ep-moe takes no size: the TP group's (Deployment.ep)
    checked = table["versions"].split(" - ")[0] + " - 0.4.x (" + table["versions"].partition(" (")[2]
    # the first release whose model file builds EPMoE for the architecture (engines.support refuses the others)
    since = SGLANG_EP_ARCH_FROM.get(d.target.model_type, EXPERT_PARALLEL_FROM["sglang"])
    return [table["flags_before"]["--ep-size"]], checked, since


def sglang_command(d: Deployment, mem: MemoryAccount, nodes: int = 1, version: str | None = None) -> EngineCommand:
    """`nodes` is taken for the emitters' one signature: a replica across nodes runs this command on each node with its
    own --node-rank, which one command cannot carry (planner.analysis._multi_node_warnings says how). `version`: the
    release planned (None: the newest), whose flags the command carries where releases name one setting otherwise."""
    s = mem.settings
    e = d.engine
    sp = d.speculative
    argv = ["python", "-m", "sglang.launch_server", "--model-path", served_model(d), "--tp-size", str(d.tp)]
    if d.pp > 1:
        argv += ["--pp-size", str(d.pp)]
    ep_flags, checked, since = _sglang_expert_parallel(d, version)
    argv += ep_flags
    argv += ["--mem-fraction-static", str(s.gpu_memory_utilization), "--context-length", str(s.max_model_len),
             "--max-running-requests", str(s.max_num_seqs), "--chunked-prefill-size", str(s.max_num_batched_tokens),
             "--dtype", s.dtype, "--page-size", str(s.block_size)]
    argv += ["--kv-cache-dtype", _kv_dtype(e.kv_cache_dtype, "sglang", s.dtype) or "auto"]
    quantization = quantization_flag(d, "sglang", version)
    if quantization:
        argv += ["--quantization", quantization]
    if s.enforce_eager:
        argv.append("--disable-cuda-graph")
    if sp.enabled:
        algorithm = sp.kind.engine_name("sglang")
        if algorithm is None:
            raise SpecError("emit", f"SGLang has no {sp.method} speculative algorithm", supported("sglang"))
        argv += ["--speculative-algorithm", algorithm]
        if sp.draft is not None:
            argv += ["--speculative-draft-model-path", _draft_path(d)]
        draft_tokens = sp.num_draft_tokens or sp.num_speculative_tokens + 1
        if sp.kind.cpu_drafted:
            argv += ["--speculative-num-draft-tokens", str(draft_tokens)]
        else:
            argv += ["--speculative-num-steps", str(sp.num_speculative_tokens), "--speculative-eagle-topk",
                     str(sp.tree_topk), "--speculative-num-draft-tokens", str(draft_tokens)]
    graph_bs = mem.engine_terms.get("cuda_graph_max_bs") or e.cuda_graph_max_bs
    if graph_bs and not s.enforce_eager:
        argv += ["--cuda-graph-max-bs", str(graph_bs)]
    if s.recv_interval > 1:
        argv += ["--scheduler-recv-interval", str(s.recv_interval)]
    if s.stream_interval > 1:
        argv += ["--stream-interval", str(s.stream_interval)]
    return EngineCommand("sglang", _versions("sglang", d, argv, checked, since), tuple(argv), None)


def supported(engine: str) -> str:
    """The speculative methods `engine` can serve, from the drafter-kind table."""
    return ", ".join(m for m, kind in DRAFTER_KINDS.items() if kind.engine_name(engine) or m == "none")


def can_serve(engine: str, d: Deployment) -> bool:
    return not d.speculative.enabled or d.speculative.kind.engine_name(engine) is not None


EMITTERS = {"vllm": vllm_command, "sglang": sglang_command}


def emitted_flags(command: EngineCommand) -> list[str]:
    return [a for a in command.argv if a.startswith("--")]
