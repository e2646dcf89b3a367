"""The one typed request: every deployment, workload, acceptance, SLO and scenario input, declared once.

Each field's `F(...)` declaration is the single source of its type, range, default, unit, doc, YAML key and
flag. `inputs.load.load_request` builds a `Request` from a deployment file and overrides (file < flags);
the CLI's options and docs/cli.md's table are generated from `fields()` below.

Why dataclasses and a field table rather than pydantic: the CLI must answer in well under a second and the
core stays dependency-free; a frozen dataclass with typed attributes is checked by mypy, and the few
coercions we need (integers that YAML wrote as 4.0, lengths as p50=...,p99=..., NaN refused) are a page of
code in `inputs.fields`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..core.specs import KV_CACHE_DTYPES, QUANT_NAMES, LengthDistribution
from ..core.speculation import SPEC_METHODS
from ..engines import DEFAULT_ENGINE, ENGINES
from .fields import (ACCEPTANCE, ANALYSIS, DEPLOYMENT, PERF, SIMULATION, SPEEDUP, WORKLOAD, F, FieldInfo)

PERCENTILES = LengthDistribution.PERCENTILES


@dataclass(frozen=True)
class Request:
    # --- the deployment -----------------------------------------------------------------------------------
    target: str | None = F(None, "Target model: catalog id, config.json, model directory or hub id.", "str",
                           DEPLOYMENT)
    draft: str | None = F(None, "Draft model or head config (draft_model, eagle, eagle3, medusa).", "str",
                          DEPLOYMENT)
    method: str | None = F(None, "Speculative method.", "choice", DEPLOYMENT, choices=SPEC_METHODS,
                           default_doc="draft_model when a draft is given, else none")
    num_speculative_tokens: int | None = F(None, "Tokens drafted per step (k); `speedup` takes a list K,K,... "
                                           "(unset with MTP: the checkpoint's MTP layers, as vLLM)",
                                           "int", DEPLOYMENT, minimum=0, maximum=64, flag="", short="-k")
    draft_tp: int | None = F(None, "Tensor parallel size of a separate draft model (default: the target's TP, as vLLM "
                             "and SGLang set it; 1 runs it on one GPU, which only vLLM 0.5.1 - 0.9 start).", "int",
                             DEPLOYMENT, minimum=1)
    gpu: str | None = F(None, "GPU id from `specsize gpus`.", "str", DEPLOYMENT)
    gpus: int | None = F(None, "GPUs in total (a multiple of tp x pp; more means replicas).", "int", DEPLOYMENT,
                         minimum=1, maximum=100_000, default_doc="tp x pp (one engine instance)")
    tp: int = F(1, "Tensor parallel size.", "int", DEPLOYMENT, minimum=1, maximum=1024)
    pp: int = F(1, "Pipeline parallel size.", "int", DEPLOYMENT, minimum=1, maximum=1024)
    expert_parallel: bool = F(False, "Split an MoE target's routed experts by expert over the TP group instead of by "
                              "rows (vLLM 0.8+ --enable-expert-parallel, SGLang 0.4.1.post4+ --ep-size = --tp-size): each GPU "
                              "holds whole experts; a step waits on the GPU whose experts the batch routes to most.",
                              "bool", DEPLOYMENT)
    gpu_memory_gib: float | None = F(None, "Override the GPU's memory (as the driver reports it).", "float",
                                     DEPLOYMENT, unit="GiB", minimum=0.001, maximum=1 << 20)
    gpu_memory_utilization: float | None = F(None, "Fraction of GPU memory the engine may use (SGLang: "
                                             "--mem-fraction-static, a fraction of the memory free before "
                                             "loading).", "float", DEPLOYMENT, minimum=0, exclusive_minimum=True,
                                             maximum=1, default_doc="the engine profile's default (vLLM: 0.92 from 0.20, 0.9 before; "
                                             "SGLang: from GPU memory and TP)")
    shared_reserved_gib: float = F(0.0, "Memory of each GPU another workload holds (shared pools).", "float",
                                   DEPLOYMENT, unit="GiB", minimum=0, maximum=1 << 20)
    other_processes_gib: float = F(0.0, "Memory of each GPU held by other processes before the engine starts "
                                   "(desktop, WSL, another server). vLLM: caps gpu_memory_utilization; SGLang: "
                                   "shrinks the pool by mem_fraction_static x this.", "float", DEPLOYMENT,
                                   unit="GiB", minimum=0, maximum=1 << 20)
    nvidia_smi: str | None = F(None, "nvidia-smi output (its table, or --query-gpu=memory.used --format=csv) "
                               "taken before the engine starts: sets other_processes_gib from the busiest GPU's "
                               "memory in use.", "path", DEPLOYMENT)
    max_model_len: int | None = F(None, "Longest request (prompt + output) the engine accepts.", "int", DEPLOYMENT,
                                  unit="tokens", minimum=1, maximum=1 << 30,
                                  default_doc="the target's longest context: max_position_embeddings, or as its "
                                  "config's rope_scaling and length keys extend it (as vLLM derives it)")
    max_num_seqs: int | None = F(None, "Sequences the engine runs at once.", "int", DEPLOYMENT, minimum=1,
                                 maximum=1 << 20, default_doc="the engine profile's default")
    max_num_batched_tokens: int | None = F(None, "Tokens one engine step schedules.", "int", DEPLOYMENT,
                                           unit="tokens", minimum=1, maximum=1 << 30,
                                           default_doc="the engine profile's default")
    kv_cache_dtype: str = F("auto", "KV cache dtype: auto (the served dtype, or the checkpoint's calibrated one where "
                            "the release takes it), fp8, or nvfp4 (vLLM 0.21 on datacenter Blackwell, 0.32 on NVIDIA 8.x - 12.x); a 16- or "
                            "32-bit dtype only as the served one.", "choice", DEPLOYMENT, choices=KV_CACHE_DTYPES)
    kv_cache_memory_bytes: int | None = F(None, "vLLM's flag: fix the KV pool size.", "int", DEPLOYMENT,
                                          unit="bytes", minimum=0, maximum=1 << 50,
                                          default_doc="what the budget leaves")
    quantization: str | None = F(None, "Override the weights' quantization (specsize's names or the engines' own: "
                                 "awq and gptq are int4, modelopt_fp4 is nvfp4).", "choice", DEPLOYMENT,
                                 choices=QUANT_NAMES, default_doc="the checkpoint's own")
    dtype: str = F("auto", "Activation and weight dtype.", "choice", DEPLOYMENT,
                   choices=("auto", "bfloat16", "float16", "float32", "bf16", "fp16", "fp32", "half", "float"))
    enforce_eager: bool = F(False, "No CUDA graphs.", "bool", DEPLOYMENT)
    chunked_prefill: str = F("auto", "vLLM V0's --enable-chunked-prefill (0.6-0.7): auto is the engine's default, on for "
                             "models whose max_model_len exceeds 32K (then a 512-token budget and mixed steps; from 0.6.5 "
                             "not on AMD GPUs), off otherwise. V1 and SGLang always chunk prompts.", "choice", DEPLOYMENT,
                             choices=("auto", "on", "off"))
    num_scheduler_steps: int = F(1, "vLLM V0's multi-step scheduling (--num-scheduler-steps, releases 0.6-0.7): "
                                 "decodes run in groups of N steps and requests are admitted only between groups; "
                                 "a request finished inside a group reaches its client at once where V0's async output "
                                 "processing runs (not with pipeline parallel or in eager mode), else at the group's "
                                 "end.", "int", DEPLOYMENT, minimum=1, maximum=64)
    block_size: int | None = F(None, "KV cache block size (vLLM: 1, 8, 16, 32, 64, 128 or 256; SGLang's "
                               "--page-size: any).", "int", DEPLOYMENT,
                               unit="tokens", minimum=1, maximum=1 << 16, default_doc="the engine profile's "
                               "default (vLLM: 16; SGLang: 1)")
    cuda_graph_max_bs: int | None = F(None, "Largest decode batch captured in a CUDA graph (SGLang's "
                                      "--cuda-graph-max-bs).", "int", DEPLOYMENT, minimum=1, maximum=1 << 16,
                                      default_doc="SGLang's default for the GPU's memory and TP")
    scheduler_recv_interval: int = F(1, "SGLang's --scheduler-recv-interval: while it decodes, its scheduler takes "
                                     "new requests in only every N decode steps (a step with prompt tokens counts "
                                     "as N), which adds to their TTFT.", "int", DEPLOYMENT, minimum=1, maximum=1000)
    stream_interval: int = F(1, "--stream-interval (SGLang; vLLM from 0.12): a running request's tokens go "
                             "to the API server every N tokens, which divides its per-token streaming work by N.",
                             "int", DEPLOYMENT, minimum=1, maximum=1000)
    device: str = F("cuda", "Accelerator the engine runs on.", "choice", DEPLOYMENT, choices=("cuda", "cpu"))
    cpu_isa: str = F("avx512_bf16", "With device cpu: the host CPU's vector instructions. vLLM's CPU platform keeps a "
                     "hybrid model's SSM state in float32 on AVX-512 BF16 hosts and in the model's dtype on the others, "
                     "which changes its block size and pool.", "choice", DEPLOYMENT,
                     choices=("avx512_bf16", "avx512", "avx2"))
    engine: str = F(DEFAULT_ENGINE, "Serving engine whose accounting to follow.", "choice", DEPLOYMENT,
                    choices=tuple(ENGINES))
    engine_version: str | None = F(None, "Engine release X.Y.", "str", DEPLOYMENT, default_doc="newest profile")
    headroom: float = F(0.20, "Headroom policy: below it the verdict is thin.", "float", DEPLOYMENT, minimum=0,
                        maximum=1, exclusive_maximum=True)
    name: str | None = F(None, "A name for the deployment.", "str", DEPLOYMENT, flag=None)
    description: str | None = F(None, "What the deployment is for.", "str", DEPLOYMENT, flag=None)
    security: dict | None = F(None, "How each serving component is protected (inference_endpoint, "
                              "metrics_endpoint, dashboard: {auth, note}).", "mapping", DEPLOYMENT, flag=None)
    # --- the workload (under `workload:` in a deployment file) --------------------------------------------
    prompt_tokens: LengthDistribution | None = F(None, "Prompt lengths.", "lengths", WORKLOAD, unit="tokens",
                                                 yaml="workload")
    output_tokens: LengthDistribution | None = F(None, "Output lengths, same forms as prompt_tokens.", "lengths",
                                                 WORKLOAD, unit="tokens", yaml="workload")
    samples_file: str | None = F(None, "JSONL/CSV of requests with prompt_tokens and output_tokens.", "path",
                                 WORKLOAD, yaml="workload")
    concurrency: int = F(1, "Target concurrent requests (all replicas together); `simulate` without a rate runs "
                         "the open-loop arrival rate that keeps them in flight, with the envelope's burst (a closed "
                         "loop of N clients, as `vllm bench serve --max-concurrency N`, is `--client-concurrency N`).",
                         "int", WORKLOAD, minimum=1,
                         maximum=1 << 24, yaml="workload")
    burst_factor: float = F(1.0, "Peak concurrency = concurrency x burst factor.", "float", WORKLOAD, minimum=1,
                            maximum=1000, yaml="workload")
    percentile: str = F("p99", "Request shape of the worst-case envelope.", "choice", WORKLOAD,
                        choices=PERCENTILES, yaml="workload")
    images_per_request: int = F(0, "Images in every request (multimodal targets): their tokens join each prompt.",
                                "int", WORKLOAD, minimum=0, maximum=10_000, yaml="workload")
    image_tokens: int | None = F(None, "Tokens one image becomes (smaller images, other processor settings).", "int",
                                 WORKLOAD, unit="tokens", minimum=1, maximum=1 << 20, yaml="workload",
                                 default_doc="the model's largest image")
    # --- acceptance: measured, never assumed ---------------------------------------------------------------
    acceptance_rate: float | None = F(None, "Per-token acceptance rate a.", "float", ACCEPTANCE, minimum=0,
                                      maximum=1)
    mean_accepted_length: float | None = F(None, "Mean tokens per target pass incl. the bonus token, as measured "
                                           "(see measured_at_k).", "float", ACCEPTANCE, unit="tokens",
                                           minimum=1, maximum=1025)
    measured_at_k: int | None = F(None, "k at which mean_accepted_length was measured.", "int", ACCEPTANCE,
                                  minimum=1, maximum=1024, default_doc="the deployment's k; `speedup` with several k "
                                  "and a mean given beside them needs it")
    acceptance_source: str | None = F(None, "Where the acceptance figure comes from.", "str", ACCEPTANCE, flag=None)
    acceptance_spread: float = F(0.0, "Std. dev. of per-request acceptance (Beta-distributed around the mean).",
                                 "float", ACCEPTANCE, minimum=0, maximum=0.5, exclusive_maximum=True)
    proposal_rate: float | None = F(None, "Share of decode steps in which the drafter proposes (n-gram: the prompt "
                                    "lookup finds a match; vLLM's spec_decode_num_drafts over decode steps). The "
                                    "acceptance is then per proposal, as vLLM reports it; a step without one verifies "
                                    "one token.", "float", ACCEPTANCE, minimum=0, exclusive_minimum=True, maximum=1,
                                    default_doc="n-gram on vLLM 0.38 (its lookup as specsize deploys it, over four "
                                    "published workloads); otherwise 1")
    acceptance_from_store: str | None = F(None, "Use the newest acceptance recorded under this tag in the "
                                          "calibration store.", "str", ACCEPTANCE, yaml=None)
    store: str | None = F(None, "Calibration store (SQLite) path.", "path", ACCEPTANCE, yaml=None,
                          default_doc="$SPECSIZE_STORE, else $XDG_DATA_HOME/specsize/calibration.sqlite (~/.local/share/...)")
    # --- performance model -----------------------------------------------------------------------------------
    tree_topk: int = F(1, "Tree drafting (SGLang's EAGLE, EAGLE-3, MTP and draft model; vLLM drafts a chain): "
                          "top-k branches.", "int", PERF, minimum=1, maximum=64)
    num_draft_tokens: int | None = F(None, "Tree drafting (SGLang only): tokens verified per sequence (N), the last verified token "
                                     "included as the tree's root (steps 3 at top-k 1: 4).",
                                     "int", PERF, minimum=1, maximum=4096)
    tpot_slo_ms: float | None = F(None, "TPOT target: report the concurrency that still meets it; a simulation "
                                  "with fewer than 99% of requests within it is thin (slo_missed).", "float", PERF,
                                  unit="ms", minimum=0, exclusive_minimum=True, maximum=1e7)
    memory_efficiency: float | None = F(None, "Override the achieved fraction of HBM bandwidth.", "float", PERF,
                                        minimum=1e-3, maximum=1)
    compute_efficiency: float | None = F(None, "Override the achieved fraction of FLOP/s.", "float", PERF,
                                         minimum=1e-3, maximum=1)
    step_overhead_ms: float | None = F(None, "Override the fixed cost of one forward step.", "float", PERF,
                                       unit="ms", minimum=0, maximum=1e4)
    # --- what `plan` adds around the verdict -------------------------------------------------------------------
    ttft_slo_ms: float | None = F(None, "TTFT limit (goodput; the failover backlog must stay within it; a "
                                  "simulation with fewer than 99% of requests within it is thin: slo_missed).",
                                  "float", ANALYSIS, unit="ms", minimum=0, exclusive_minimum=True, maximum=1e8)
    gpus_per_node: int = F(8, "GPUs per node.", "int", ANALYSIS, minimum=1, maximum=1024)
    spare: int = F(1, "Replicas (or nodes) that may fail: N+k.", "int", ANALYSIS, minimum=0, maximum=1024)
    failure_unit: str = F("replica", "What fails together.", "choice", ANALYSIS, choices=("replica", "node"))
    storage_gbs: float = F(2.0, "Storage read bandwidth for cold starts (local NVMe ~3-7, network ~0.5-2).",
                           "float", ANALYSIS, unit="GB/s", minimum=0.001, maximum=1e5)
    fragile_below: float = F(0.15, "Flag the plan fragile when an input can grow less than this before the "
                             "verdict flips.", "float", ANALYSIS, minimum=0, maximum=10)
    simulate: bool = F(False, "Also simulate the envelope's burst scenario and use the result in the verdict.",
                       "bool", ANALYSIS, yaml=None)
    # --- simulation scenario ------------------------------------------------------------------------------------
    duration: float = F(300.0, "Seconds of arrivals simulated (simulate, plan --simulate, report alike).", "float",
                        SIMULATION, unit="s", minimum=0, exclusive_minimum=True, maximum=1e6,
                        aliases=("--sim-duration",), yaml=None)
    seed: int = F(0, "Seed of the simulation.", "int", SIMULATION, minimum=0, maximum=2**32 - 1, yaml=None)
    rate: float | None = F(None, "Requests/s across all replicas.", "float", SIMULATION, unit="req/s", minimum=0,
                           exclusive_minimum=True, maximum=1e6, yaml=None,
                           default_doc="what keeps `concurrency` requests in flight (Little's law)")
    prompt_tokens_median: float | None = F(None, "Simulated prompt length; alone: every prompt this long.",
                                           "float", SIMULATION, unit="tokens", minimum=1, maximum=1 << 30, yaml=None)
    prompt_tokens_p99: float | None = F(None, "With the median: lognormal prompt lengths with this p99.", "float",
                                        SIMULATION, unit="tokens", minimum=1, maximum=1 << 30, yaml=None)
    output_tokens_median: float | None = F(None, "Simulated output length; alone: every output this long.",
                                           "float", SIMULATION, unit="tokens", minimum=1, maximum=1 << 30, yaml=None)
    output_tokens_p99: float | None = F(None, "With the median: lognormal output lengths with this p99.", "float",
                                        SIMULATION, unit="tokens", minimum=1, maximum=1 << 30, yaml=None)
    burst_start: float | None = F(None, "Start of one burst at x burst_factor.", "float", SIMULATION, unit="s",
                                  minimum=0, maximum=1e6, yaml=None)
    burst_duration: float | None = F(None, "Length of that burst.", "float", SIMULATION, unit="s", minimum=0,
                                     exclusive_minimum=True, maximum=1e6, yaml=None)
    on_off: str | None = F(None, "Repeating bursts PERIOD,ON at x burst_factor.", "str", SIMULATION, unit="s",
                           yaml=None)
    ramp_to: float | None = F(None, "Ramp the rate linearly from `rate` to this over the duration.", "float",
                              SIMULATION, unit="req/s", minimum=0, maximum=1e6, yaml=None)
    client_concurrency: int | None = F(None, "Closed loop: this many requests in flight, each answer sending the "
                                       "next (as `vllm bench serve --max-concurrency`).", "int", SIMULATION,
                                       minimum=1, maximum=1 << 20, yaml=None, default_doc="open loop (`rate`)",
                                       aliases=("--max-concurrency",))
    num_requests: int = F(1000, "Requests sent in a closed loop (`client_concurrency`).", "int", SIMULATION,
                          minimum=1, maximum=2_000_000, yaml=None, aliases=("--num-prompts",))
    trace: str | None = F(None, "Replay a CSV/JSONL trace (Azure columns accepted).", "path", SIMULATION, yaml=None)
    lengths_file: str | None = F(None, "Resample (prompt, output) pairs from this CSV/JSONL; arrivals as `rate` "
                                 "says.", "path", SIMULATION, yaml=None)
    prefix_hit_rate: float = F(0.0, "Share of prompt tokens served from the prefix cache.", "float", SIMULATION,
                               minimum=0, maximum=1, exclusive_maximum=True, yaml=None)
    no_compare: bool = F(False, "Skip the run without speculation.", "bool", SIMULATION, yaml=None)
    offline: bool = F(False, "Offline batch inference (vLLM `LLM.generate`, `benchmark_throughput.py`): no API server "
                      "in front, so no front-end latency, intake queue or per-token streaming cost (simulate, and the speed-up "
                      "tables of speedup).", "bool",
                      SIMULATION, yaml=None)
    # --- speed-up tables ---------------------------------------------------------------------------------------
    batch_sizes: tuple[int, ...] = F((1, 2, 4, 8, 16, 32, 64, 128), "Batch sizes B[,B...].", "int_list", SPEEDUP,
                                     minimum=1, maximum=1 << 20, flag="--batch-size", yaml=None)
    speedup_ks: tuple[int, ...] | None = F(None, "Values of k to tabulate (the -k list of `speedup`).",
                                           "int_list", SPEEDUP, minimum=1, maximum=64, flag=None, yaml=None,
                                           default_doc="the deployment's k")
    context_len: int = F(2048, "Context length L of each sequence.", "int", SPEEDUP, unit="tokens", minimum=1,
                         maximum=1 << 30, yaml=None)
    candidates: tuple[str, ...] = F((), "Compare another drafter: method=M[,draft=MODEL][,acceptance=A|"
                                    "mean_accepted_length=T][,k=K]. Repeatable.", "str_list", SPEEDUP,
                                    flag="--candidate", yaml=None)
    # --- provenance (not an input): where each value came from -------------------------------------------------
    sources: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        """A Request built directly (not by `load_request`) is validated the same way, field by field."""
        from .load import validated  # noqa: PLC0415 - load imports this module

        for name in FIELDS:
            object.__setattr__(self, name, validated(name, getattr(self, name)))

    def source_of(self, name: str) -> str:
        """default, embedded default, file, or override (a flag or an API keyword)."""
        return self.sources.get(name, "default")

    def given(self, name: str) -> bool:
        """Whether the user set `name` (a file or an override), not a default."""
        return self.source_of(name) in ("file", "override")

    def simulates(self, default: bool) -> bool:
        """Whether the command runs a simulation: `simulate` where the user set it, else the command's own default
        (a report simulates, a plan does not)."""
        return bool(self.simulate) if self.given("simulate") else default

    def settings(self) -> dict:
        """The values someone set (a file, an override or the embedded default), as `to_dict` gives them."""
        return {name: value for name, value in self.to_dict().items() if self.source_of(name) != "default"}

    def replace(self, **changes: Any) -> Request:
        """A copy with `changes` applied as overrides (validated like any other input)."""
        from .load import apply_overrides  # noqa: PLC0415

        return apply_overrides(self, changes)

    def to_dict(self) -> dict:
        """The request as a deployment-file-shaped mapping (JSON types): what `load_request` reads back."""
        out: dict = {}
        for f in fields():
            value = getattr(self, f.name)
            if value is None or f.name == "sources":
                continue
            if isinstance(value, LengthDistribution):
                value = {"p50": value.p50, "p95": value.p95, "p99": value.p99, "max": value.max}
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


def fields() -> tuple[dataclasses.Field, ...]:
    """The declared input fields, in declaration order (not `sources`)."""
    return tuple(f for f in dataclasses.fields(Request) if "specsize" in f.metadata)


def info(name: str) -> FieldInfo:
    return FIELDS[name].metadata["specsize"]


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in fields()}
YAML_TOP_KEYS = tuple(name for name, f in FIELDS.items() if f.metadata["specsize"].yaml == "top")
YAML_WORKLOAD_KEYS = tuple(name for name, f in FIELDS.items() if f.metadata["specsize"].yaml == "workload")
