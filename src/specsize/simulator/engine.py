"""Iteration-level simulation of a continuous-batching server with a paged KV cache (vLLM V1's scheduler).

Each iteration is one engine step:
1. requests that have arrived join the waiting queue (FCFS; where the engine forms a step while the last one runs,
   those that arrived before the last step began, unless the engine is idle);
2. running requests are scheduled first, in admission order, within max_num_batched_tokens: a decoding
   request takes 1 + k tokens (its last token and k drafts), a prefilling one the rest of its prompt in
   chunks (chunked prefill);
3. each scheduled request needs KV blocks for computed + scheduled + k lookahead tokens (or as many as the engine's
   decode check wants free for it: EngineConfig.decode_reserve, SGLang's per release); when the pool runs
   short the newest running request is preempted (its blocks freed, its KV recomputed on re-admission) until
   the rest fit;
4. waiting requests are admitted from the head of the queue while max_num_seqs, the token budget and free
   blocks allow (the head blocks the queue: no overtaking); vLLM V1 admits none in a step that preempted;
5. the step takes the performance model's time for its exact composition (tokens, contexts, drafts);
6. each decoding request accepts n of its k drafts, n drawn from its own acceptance rate (P(n >= j) = a^j),
   and gains n + 1 tokens.

State is O(running + waiting): arrays over the running set, a queue of waiting ids; per-request results
are O(requests). Deterministic under a seed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..core.errors import SpecError
from ..core.kvcache import BlockRule, block_rule
from ..core.memory import GRAPH_ALL
from ..core.perf import (StepCoefficients, api_busy_share, drafter_forwards_s, frontend_stretched, in_graph,
                         ngram_lookup_s, pipeline_microbatches, prompt_as_mha, step_time)
from ..core.speculation import verified_per_sequence
from .workload import Requests


RECV_WEIGHT_PROMPT = 1000  # SGLang's SchedulerRecvSkipper: the weight of a step that is not decode or verify
_sum = np.add.reduce  # ndarray.sum without its Python wrapper (integer sums: exact in any order)


def _isum(values: np.ndarray) -> int:
    """The exact sum of an integer array as a Python int: through a list for a batch-sized array (faster than a
    reduction below about 64 elements), else by numpy's reduction."""
    return sum(values.tolist()) if len(values) <= 64 else int(_sum(values))


@dataclass(frozen=True)
class EngineConfig:
    num_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    k: int  # drafted tokens per step; 0 = no speculation
    target: StepCoefficients
    draft: StepCoefficients | None = None
    draft_steps: int = 0  # drafter forwards per speculative step
    # positions per decoding sequence of the drafter's first forward (core.perf.draft_extend_tokens; 0: as the others)
    draft_extend_tokens: float = 0.0
    draft_width: int = 1
    # a draft tree's nodes beyond the chain of 1 + k a decoding sequence verifies (SGLang's num_draft_tokens N:
    # N - 1 - k siblings sharing the chain's positions): scored, sampled and priced, never accepted beyond k
    tree_extra: int = 0
    spec_step_overhead_s: float = 0.0
    draft_setup_overhead_s: float = 0.0
    draft_step_overhead_s: float = 0.0
    cpu_draft_per_seq_s: float = 0.0  # n-gram lookup
    cpu_draft_per_token_s: float = 0.0  # n-gram lookup's scan per context token of each decoding sequence
    # the share of decode steps in which the drafter proposes (core.specs.SpeculativeConfig.proposal_rate): the
    # others verify one token and accept none; the budget and lookahead slots still hold k + 1 (what the engine
    # reserves), the step is priced at the mean width, as core.perf prices it
    proposal_rate: float = 1.0
    prefix_hit_rate: float = 0.0
    kv_layers: tuple = ()  # the pool's layers (core.kvcache.KVLayer); empty: every layer full attention
    draft_prefills: bool = False  # the drafter also runs over prompt chunks (its own KV cache): in TTFT
    # drafts scored by batch expansion (vLLM V0): each of a decoding sequence's k extra positions is a query of its own,
    # prepared as a sequence and costing this much more (core.perf.SpecCosts.expansion_query_s); 0: one query each
    expansion_query_s: float = 0.0
    # the engine's output processing per token a speculative step emits, after the step where the release overlaps
    # nothing with it (core.perf.SpecCosts.serial_output_s: vLLM V0); the next step starts that much later
    serial_output_s: float = 0.0
    frontend_latency_s: float = 0.0  # per request outside the engine (HTTP, tokenisation, IPC, first chunk)
    frontend_serial_s: float = 0.0  # per request, the API server's work taking it in, one core shared by the requests
    # being taken in (_Front: a burst is taken in together, at the end)
    prefill_first: bool = False  # a step is prompts only or decodes only, prompts first (SGLang, vLLM V0)
    # vLLM V0's multi-step scheduling (--num-scheduler-steps N): a decode step opens a group of N decode steps over
    # the same batch; nothing is admitted, prefilled or retired inside a group, and tokens reach the client at its end
    scheduler_steps: int = 1
    # ... unless the group streams (core.memory.ResolvedSettings.group_streams: V0's async output processing): then a
    # request that finished inside a group reaches its client at the step that finished it, its rows staying in the
    # group's batch until the group ends
    group_streams: bool = False
    # SGLang's --scheduler-recv-interval N: the scheduler takes new requests in only once the steps since it last did
    # weigh N (a decode step 1, any step with prompt tokens 1000: SchedulerRecvSkipper); an idle engine takes them at once
    recv_interval: int = 1
    # CUDA graphs (ResolvedSettings): a step of more tokens, or with prompt tokens more than graph_prompt_tokens, runs
    # outside a graph and pays the host's launches (StepCoefficients.ungraphed_s)
    graph_max_tokens: int = GRAPH_ALL
    graph_max_context: int = 0  # a decode step holding a longer sequence runs outside its graph (0: no limit)
    graph_prompt_tokens: int = GRAPH_ALL
    # the scheduler forms each step while the one before it runs (core.memory.AccountingProfile.scheduled_ahead): a
    # request received while the engine is busy joins the step after next; an idle engine takes it at once
    scheduled_ahead: bool = False
    # what admission holds back for the requests already running (AccountingProfile.admission): "chunk" (vLLM V1)
    # admits a request when its first chunk's blocks fit; "prompt" (vLLM V0) when its whole prompt's do, after the
    # rest of the running prompts; "sglang" also reserves its output, min(max_new_tokens, 4096) (schedule_policy.py
    # PrefillAdder.add_one_req), and the running requests' remaining outputs times a ratio that falls from 0.7 to 0.098
    # over 600 decode steps, back to 0.7 when the engine idles or retracts (scheduler.py new_token_ratio)
    admission: str = "chunk"
    # when a prompt step of an MLA target runs as multi-head attention (core.perf.prompt_as_mha; AccountingProfile.
    # mla_prompt_mha): its prompt pairs then cost StepCoefficients.attn_flops_per_prompt_pair, else a decode's
    mla_prompt_mha: tuple[bool, int] = (True, 0)
    # the KV slots beyond its computed tokens a decoding request holds at a step, its 1 + k scheduled tokens included
    # (core.memory.ResolvedSettings.decode_reserve: what the engine's decode check wants free, SGLang's per release);
    # 0: 1 + 2k, the k scheduled drafts and k lookahead slots beside the last token (vLLM's)
    decode_reserve: int = 0

    @cached_property
    def blocks(self) -> BlockRule:
        """core.kvcache's rule for the pool blocks one sequence holds, built once (every layer full attention when
        `kv_layers` is empty)."""
        return block_rule(self.kv_layers, self.block_size, self.k + 1) if self.kv_layers else BlockRule(self.block_size)

    @cached_property
    def decode_ahead(self) -> int:
        """Slots a decoding request holds beyond its 1 + k scheduled tokens (k lookahead, or what the engine's decode
        reserve leaves beyond them; never fewer than none), and a multi-step group's N - 1."""
        reserve = self.decode_reserve or 1 + 2 * self.k
        return max(reserve - 1 - self.k, 0) + self.scheduler_steps - 1

    @cached_property
    def decode_widths(self) -> np.ndarray:
        """1 + k for each request the engine runs at once, built once and read-only (the common step's widths)."""
        widths = np.full(min(self.max_num_seqs, 4096), 1 + self.k, dtype=np.int64)
        widths.flags.writeable = False
        return widths


@dataclass
class SimResult:
    ttft_s: np.ndarray  # per request (nan: never produced a token)
    tpot_s: np.ndarray  # per request with > 1 output token (nan otherwise)
    e2e_s: np.ndarray
    finished: np.ndarray  # bool
    output_tokens: np.ndarray
    arrival_s: np.ndarray
    end_time_s: float
    steps: int
    preemptions: int
    recomputed_tokens: int
    series: dict  # time series: t, running, waiting, kv_used_fraction, preemptions
    area_in_system: float  # integral of (running + waiting) dt, for Little's law
    prefill_tokens: int
    decode_tokens: int
    kv_peak_fraction: float = 0.0  # the most of the pool's blocks held at the end of any step
    max_waiting: int = 0  # the longest the waiting queue was at the end of any step
    too_long: int = 0  # requests needing more blocks than the whole pool holds: never admitted, left unfinished


def _blocks_for(cfg: EngineConfig, tokens):
    """Pool blocks a sequence of `tokens` holds (core.kvcache.pool_blocks: windowed layers hold their window)."""
    return cfg.blocks(tokens, np.minimum)


@dataclass(slots=True)
class _Book:
    """Per-request state (O(requests)); the arrays are updated in place, never rebound."""

    prompt: np.ndarray
    output: np.ndarray
    log_acc: np.ndarray
    computed: np.ndarray
    generated: np.ndarray
    held: np.ndarray  # blocks held
    first_token: np.ndarray
    finish: np.ndarray
    first_seen: np.ndarray  # prefix-cache credit only on the first admission
    prefill_target: np.ndarray
    front_busy: np.ndarray  # the API server's busy share streaming tokens when the request's first token came out
    # requests needing more blocks than the whole pool holds, never admitted (one element): SimResult.too_long, and
    # in a closed loop each such refusal answers its client
    dropped: np.ndarray
    ratio: np.ndarray  # SGLang's new_token_ratio (one element; EngineConfig.admission "sglang")


SGLANG_RATIO_INIT, SGLANG_RATIO_MIN = 0.7, 0.7 * 0.14  # global_config.py: init 0.7, min factor 0.14, 600 steps
SGLANG_RATIO_DECAY = (SGLANG_RATIO_INIT - SGLANG_RATIO_MIN) / 600
SGLANG_CLIP_NEW_TOKENS = 4096  # schedule_policy.py CLIP_MAX_NEW_TOKENS


def _book(req: Requests) -> _Book:
    n = len(req)
    prompt = req.prompt_tokens.astype(np.int64)
    return _Book(prompt=prompt, output=req.output_tokens.astype(np.int64),
                 log_acc=_log_acceptance(req.acceptance), computed=np.zeros(n, dtype=np.int64),
                 generated=np.zeros(n, dtype=np.int64), held=np.zeros(n, dtype=np.int64),
                 first_token=np.full(n, np.nan), finish=np.full(n, np.nan), first_seen=np.zeros(n, dtype=bool),
                 prefill_target=prompt.copy(), front_busy=np.zeros(n), dropped=np.zeros(1, dtype=np.int64),
                 ratio=np.full(1, SGLANG_RATIO_INIT))


def _held_back(cfg: EngineConfig, b: _Book, run: np.ndarray) -> int:
    """Blocks an engine that reserves at admission (EngineConfig.admission) keeps for the running requests: the rest
    of their prompts, and under SGLang their remaining outputs times its new-token ratio."""
    if cfg.admission == "chunk" or not len(run):
        return 0
    rest = int(np.maximum(_blocks_for(cfg, b.prefill_target[run]) - b.held[run], 0).sum())
    if cfg.admission == "sglang":
        left = np.minimum(np.maximum(b.output[run] - b.generated[run], 0), SGLANG_CLIP_NEW_TOKENS)
        rest += int(math.ceil(float(b.ratio[0]) * float(left.sum()) / cfg.block_size))
    return rest


def _new_token_ratio(cfg: EngineConfig, b: _Book, preempted: int, prefill_tokens: int, decode_tokens: int) -> None:
    """SGLang's new_token_ratio after a step: back to its start when the step retracted requests (retract_decode's
    own estimate is taken as that start), one decay step lower after a decode step (scheduler.py)."""
    if cfg.admission != "sglang":
        return
    if preempted:
        b.ratio[0] = SGLANG_RATIO_INIT
    elif decode_tokens and not prefill_tokens:
        b.ratio[0] = max(float(b.ratio[0]) - SGLANG_RATIO_DECAY, SGLANG_RATIO_MIN)


def _log_acceptance(acceptance: np.ndarray) -> np.ndarray:
    """log of each request's acceptance rate, kept below 0 (an acceptance of 1 accepts every draft: log u / tiny is
    huge, capped at k) so that drawing needs no division by zero."""
    return np.minimum(np.log(np.clip(acceptance, 1e-12, 1.0)), -1e-300)


def _time_limits(arrival: np.ndarray, max_time_s: float | None,
                 sample_interval_s: float | None) -> tuple[float, float]:
    n = len(arrival)
    if max_time_s is None:
        last = float(arrival[-1]) if n else 0.0
        max_time_s = last * 2 + 3600.0
    if sample_interval_s is None:
        sample_interval_s = max(0.05, (float(arrival[-1]) if n else 1.0) / 2000)
    return max_time_s, sample_interval_s


def _schedule_running(cfg: EngineConfig, b: _Book, run: np.ndarray, waiting: deque[int], free: int):
    """Steps 2-3 for a non-empty running set: its share of the token budget, then preemption of the newest
    until the rest fit. Returns (run, c, sched, decoding, free, budget left, preemptions, recomputed tokens)."""
    k = cfg.k
    c = b.computed[run]
    target_len = b.prefill_target[run]
    decoding = c >= target_len
    ahead = cfg.decode_ahead
    held = b.held[run]
    uniform = (1 + k) * len(run) <= cfg.max_num_batched_tokens and np.count_nonzero(decoding) == len(run)
    if uniform:
        # the common step: every running request decodes and all fit the budget (the same numbers as below)
        sched = _decode_widths(cfg, len(run))
        need = _blocks_for(cfg, c + (1 + k + ahead)) - held
    else:
        want = np.where(decoding, 1 + k, target_len - c)
        before = np.cumsum(want) - want
        sched = np.minimum(np.maximum(cfg.max_num_batched_tokens - before, 0), want)
        sched = np.where(decoding & (sched < want), 0, sched)  # a decode is all k+1 or nothing
        # the lookahead slots (EngineConfig.decode_ahead) for decoders and for prefills that finish this step
        lookahead = np.where(decoding | (c + sched >= target_len), ahead, 0)
        need = _blocks_for(cfg, c + sched + lookahead) - held
    np.maximum(need, 0, out=need)
    total_need = _isum(need)
    preemptions = recomputed = 0
    while total_need > free and len(run):
        victim = int(run[-1])
        free += int(b.held[victim])
        total_need -= int(need[-1])
        recomputed += int(b.computed[victim])
        b.held[victim] = 0
        b.computed[victim] = 0
        b.prefill_target[victim] = b.prompt[victim] + max(int(b.generated[victim]) - 1, 0)
        preemptions += 1
        waiting.appendleft(victim)
        run, c, sched, need, held, decoding = run[:-1], c[:-1], sched[:-1], need[:-1], held[:-1], decoding[:-1]
    free -= total_need
    b.held[run] = held + need
    budget = cfg.max_num_batched_tokens - ((1 + k) * len(run) if uniform else _isum(sched))
    return run, c, sched, decoding, free, budget, preemptions, recomputed


def _decode_widths(cfg: EngineConfig, n: int) -> np.ndarray:
    """1 + k tokens for each of `n` decoding requests (a read-only view of EngineConfig.decode_widths)."""
    widths = cfg.decode_widths
    return widths[:n] if n <= len(widths) else np.full(n, 1 + cfg.k, dtype=np.int64)


def _schedule_prefill_first(cfg: EngineConfig, b: _Book, run: np.ndarray, waiting: deque[int], free: int):
    """Steps 2-4 of an engine whose step is prompts only or decodes only, prompts first (SGLang's
    get_next_batch_to_run, vLLM V0 without chunked prefill): the running requests still prefilling take their next
    chunks and the queue's head is admitted within the budget; when no prompt token can be scheduled, every running
    request decodes (with V1's preemption of the newest when blocks run short). Returns (run, c, sched, decoding,
    free, preemptions, recomputed tokens)."""
    k = cfg.k
    c = b.computed[run]
    target_len = b.prefill_target[run]
    decoding = c >= target_len
    if waiting or not decoding.all():
        want = np.where(decoding, 0, target_len - c)
        before = np.cumsum(want) - want
        sched = np.minimum(np.maximum(cfg.max_num_batched_tokens - before, 0), want)
        lookahead = np.where(~decoding & (c + sched >= target_len), k, 0)
        need = np.where(sched > 0, np.maximum(_blocks_for(cfg, c + sched + lookahead) - b.held[run], 0), 0)
        total = int(need.sum())
        if total <= free:
            held_before = b.held[run].copy()
            b.held[run] += need
            budget = cfg.max_num_batched_tokens - int(sched.sum())
            run2, c2, sched2, dec2, free2 = _admit(cfg, b, waiting, run, c, sched, decoding, free - total, budget)
            if int(sched2.sum()):
                return run2, c2, sched2, dec2, free2, 0, 0
            b.held[run] = held_before  # nothing to prefill after all: a decode step
    run, c, sched, decoding, free, _, preempted, lost = _schedule_running(cfg, b, run, waiting, free)
    sched = np.where(decoding, sched, 0)  # prompts wait for a prefill step
    return run, c, sched, decoding, free, preempted, lost


def _admit(cfg: EngineConfig, b: _Book, waiting: deque[int], run: np.ndarray, c: np.ndarray, sched: np.ndarray,
           decoding: np.ndarray, free: int, budget: int):
    """Step 4: admit from the head of the queue. Returns (run, c, sched, decoding, free)."""
    k = cfg.k
    admitted: list[int] = []
    admitted_sched: list[int] = []
    held_back = _held_back(cfg, b, run)
    # after its prompt (or its recompute) a request with tokens still to come decodes 1 + k tokens with the lookahead
    # slots _schedule_running gives it (EngineConfig.decode_ahead)
    decode_span = 1 + k + cfg.decode_ahead
    while waiting and len(run) + len(admitted) < cfg.max_num_seqs and budget > 0:
        head = waiting[0]
        # longer than the whole pool: the engine can never run it (left unfinished). What it must fit is its next step
        # after the prompt: a request preempted near the pool's end and readmitted when only its recompute (prompt +
        # k) fitted had been preempted again by its next decode, and again, for ever, gaining nothing
        last = int(b.output[head]) <= max(int(b.generated[head]), 1)  # the prompt's own token is its last
        if int(_blocks_for(cfg, int(b.prefill_target[head]) + (k if last else decode_span))) > cfg.num_blocks:
            waiting.popleft()
            b.dropped[0] += 1
            continue
        start = int(b.computed[head])
        if not b.first_seen[head]:
            start = min(int(b.prompt[head] * cfg.prefix_hit_rate), int(b.prompt[head]) - 1) \
                if cfg.prefix_hit_rate else 0
        remaining = int(b.prefill_target[head]) - start
        chunk = min(remaining, budget)
        lookahead = k if chunk == remaining else 0
        blocks = int(_blocks_for(cfg, start + chunk + lookahead))
        if blocks > free:
            break
        if cfg.admission != "chunk":  # the whole prompt (and under SGLang the output) must fit beside the reserve
            whole = int(_blocks_for(cfg, int(b.prefill_target[head]) + k + (
                min(int(b.output[head]), SGLANG_CLIP_NEW_TOKENS) if cfg.admission == "sglang" else 0)))
            if whole + held_back > free and (run.size or admitted):
                break
            held_back += whole - blocks
        waiting.popleft()
        b.first_seen[head] = True
        b.computed[head] = start
        b.held[head] = blocks
        free -= blocks
        budget -= chunk
        admitted.append(head)
        admitted_sched.append(chunk)
    if admitted:
        new_ids = np.asarray(admitted, dtype=np.int64)
        run = np.concatenate([run, new_ids])
        c = np.concatenate([c, b.computed[new_ids]])
        sched = np.concatenate([sched, np.asarray(admitted_sched, dtype=np.int64)])
        decoding = np.concatenate([decoding, np.zeros(len(new_ids), dtype=bool)])
    return run, c, sched, decoding, free


def _schedule(cfg: EngineConfig, b: _Book, run: np.ndarray, waiting: deque[int], free: int, in_group: bool):
    """Steps 2-4 by the engine's policy. Returns (run, c, sched, decoding, free, preemptions, recomputed tokens)."""
    if in_group:
        # inside a multi-step group the same batch decodes again, finished requests included, in the blocks the
        # group's first step reserved (its N - 1 lookahead slots: EngineConfig.decode_ahead): vLLM schedules,
        # allocates and preempts nothing until the group ends
        c = b.computed[run]
        decoding = c >= b.prefill_target[run]
        return run, c, np.where(decoding, 1 + cfg.k, 0), decoding, free, 0, 0
    if cfg.prefill_first:  # 2-4 as one choice: a prefill step if any prompt token can run, else decodes
        return _schedule_prefill_first(cfg, b, run, waiting, free)
    # 2-3. schedule running requests within the token budget; preempt the newest until the rest fit
    preempted = lost = 0
    if len(run):
        run, c, sched, decoding, free, budget, preempted, lost = _schedule_running(cfg, b, run, waiting, free)
    else:
        c = sched = np.zeros(0, dtype=np.int64)
        decoding = np.zeros(0, dtype=bool)
        budget = cfg.max_num_batched_tokens
    # 4. admit from the head of the queue; vLLM V1 admits nothing in a step that preempted (vllm/v1/core/sched/
    # scheduler.py schedule(): "if not preempted_reqs:" before the WAITING loop), unless nothing else runs
    if not (preempted and cfg.admission == "chunk" and _isum(sched)):
        run, c, sched, decoding, free = _admit(cfg, b, waiting, run, c, sched, decoding, free, budget)
    return run, c, sched, decoding, free, preempted, lost


def _pair_sums(sched: np.ndarray, context: np.ndarray) -> tuple[int, int]:
    """The attention pairs of sequences taking `sched` new tokens over `context` tokens each, as two exact integers
    (sum of s x context, sum of s (s + 1)): each new token attends to the context before the step and, causally, to
    the new tokens before it (a prompt chunk's own triangle: s (s + 1) / 2); pairs = first + second / 2."""
    return _isum(sched * context), _isum(sched * (sched + 1))


def _spans(context: np.ndarray, windows: tuple) -> tuple:
    """Per sliding window, the sum of min(context, window) over the sequences (core.perf.step_time's
    `window_tokens`)."""
    return tuple(float(_sum(np.minimum(context, w))) for w in windows) if windows else ()


def _step_seconds(cfg: EngineConfig, windows: tuple, draft_windows: tuple, c: np.ndarray, sched: np.ndarray,
                  active: np.ndarray, n_active: int, decoding: np.ndarray) -> tuple[float, np.ndarray, int]:
    """Step 5: the performance model's time for this exact composition (`active`: the scheduled requests, `n_active`
    of them). Returns (seconds, decoding mask of the scheduled requests, how many)."""
    k = cfg.k
    tokens = _isum(sched)
    every = n_active == len(c)  # every running request is scheduled
    ctx = c if every else c[active]
    ctx_sum = _isum(ctx)
    ctx_total = float(ctx_sum)
    span = _spans(ctx, windows)
    dec = decoding if every else decoding & active
    n_dec = int(np.count_nonzero(dec))
    prompt = n_active > n_dec  # prompt tokens in the step
    # attention pairs (_pair_sums) of the prompt chunks (pre: their sequences) and of the decoding requests, 1 + k
    # tokens each over their contexts
    pre_c = None
    pre_sum, pre_over, pre_own = 0, 0, 0
    if prompt:
        pre = active & ~decoding
        pre_c = c[pre]
        pre_sum = _isum(pre_c)
        pre_over, pre_own = _pair_sums(sched[pre], pre_c)
    dec_sum = ctx_sum - pre_sum  # the decoding requests' contexts
    pairs = float(pre_over + (1 + k) * dec_sum) + float(pre_own + n_dec * (1 + k) * (2 + k)) / 2
    extra = cfg.tree_extra * n_dec  # a tree's siblings: each over its sequence's context and half the tree's depth
    if extra:
        pairs += float(cfg.tree_extra * dec_sum) + extra * (2 + k) / 2
    prompt_pairs = float(pre_over) + float(pre_own) / 2 if prompt else 0.0
    # sampled positions: one per prefilling sequence, k + 1 per decoding one (verification), a tree's siblings too
    logits = (n_active - n_dec) + n_dec * (1 + k)
    expanded = k * n_dec if cfg.expansion_query_s else 0  # batch expansion's extra queries
    stages = cfg.target.stages  # a round of micro-batches on pipeline stages, each within its share of the budget
    parts = 1.0
    if stages > 1:
        batch_tokens = cfg.max_num_batched_tokens / stages
        largest = min(float(sched[active].max()), batch_tokens) if prompt else 0.0  # a prompt chunk stays whole
        parts = pipeline_microbatches(stages, n_active, tokens, batch_tokens, largest)
    # a decode step's longest sequence with its new tokens, read only where the release limits it (vLLM V0)
    longest = int(ctx.max()) + 1 + k if cfg.graph_max_context and not prompt else 0
    graphed = in_graph((tokens + extra) / parts, cfg.graph_prompt_tokens if prompt else cfg.graph_max_tokens,
                       longest, cfg.graph_max_context)
    mha = prompt and prompt_as_mha(cfg.mla_prompt_mha, float(pre_sum))
    unproposed = 0.0  # positions the decode steps without a proposal do not verify (one token each instead)
    dec_ctx = float(dec_sum)
    if cfg.proposal_rate < 1.0 and k and n_dec:  # scheduled at 1 + k each, priced at the mean width
        unproposed = n_dec * (1 + k - verified_per_sequence(k, cfg.proposal_rate))
        pairs -= unproposed * dec_ctx / n_dec
    seconds = step_time(cfg.target, tokens - unproposed + extra, ctx_total, span, pairs, seqs=n_active,
                        logits=logits - unproposed + extra, positions=tokens if extra else None,
                        prepared=n_active + expanded, graphed=graphed,
                        prompt_pairs=prompt_pairs if mha else 0.0, microbatches=parts)[0] + \
        cfg.expansion_query_s * expanded
    if cfg.draft is not None and cfg.draft_prefills and k:
        prefill_tokens = tokens - n_dec * (1 + k)
        if prefill_tokens > 0 and pre_c is not None:  # the drafter builds its own KV cache over the prompt chunks
            pspan = _spans(pre_c, draft_windows)
            seconds += step_time(cfg.draft, prefill_tokens, float(pre_sum), pspan,
                                 prompt_pairs, seqs=0, logits=0, prompt_pairs=prompt_pairs if mha else 0.0)[0]
    if k and n_dec:
        if cfg.draft is not None and cfg.draft_steps:
            dctx = c if n_dec == len(c) else c[dec]
            dspan = _spans(dctx, draft_windows)
            # on pipeline stages the last stage drafts for each micro-batch in turn (core.perf.spec_step_time)
            turns = pipeline_microbatches(stages, n_dec) if stages > 1 else 1
            if turns > 1:
                dspan = tuple(x / turns for x in dspan)
            seconds += turns * drafter_forwards_s(cfg.draft, cfg.draft_steps, cfg.draft_width, cfg.draft_extend_tokens,
                                                  n_dec / turns, dec_ctx / turns, dspan, cfg.draft_step_overhead_s,
                                                  cfg.draft_setup_overhead_s) + (turns - 1) * cfg.spec_step_overhead_s
        seconds += cfg.spec_step_overhead_s
        if cfg.cpu_draft_per_seq_s or cfg.cpu_draft_per_token_s:
            seconds += ngram_lookup_s(cfg.cpu_draft_per_seq_s, cfg.cpu_draft_per_token_s, n_dec, dec_ctx)
    return seconds, dec, n_dec


def _advance(b: _Book, rng: _Uniforms, k: int, run: np.ndarray, c: np.ndarray, sched: np.ndarray,
             active: np.ndarray, decoding: np.ndarray, dec: np.ndarray, n_dec: int, now: float,
             api: StepCoefficients | None = None, seconds: float = 0.0,
             proposal_rate: float = 1.0) -> tuple[int, int, np.ndarray | None]:
    """Step 6: advance the scheduled requests (`c`: their computed tokens when scheduled). A request whose first token
    the step produces keeps the API server's share of the `seconds`-long step streaming the other requests' tokens
    beside it (`api`: the costs whose api_per_seq_s it is, None where no front end is modelled; core.perf.
    api_busy_share, frontend_stretched): the decoding requests' and the other first tokens', not its own. Returns (prefill tokens, decode tokens, which requests of `run` produced all
    their output where every one decoded, else None)."""
    prefill_tokens = decode_tokens = 0
    pre = active & ~decoding if n_dec < len(run) else None  # None: every request in the step decodes
    if pre is not None and np.count_nonzero(pre):
        ids = run[pre]
        b.computed[ids] += sched[pre]
        prefill_tokens = _isum(sched[pre])
        done = b.computed[ids] >= b.prefill_target[ids]
        fresh = ids[done & (b.generated[ids] == 0)]
        b.generated[fresh] = 1
        b.first_token[fresh] = now
        b.front_busy[fresh] = api_busy_share(api, n_dec + len(fresh) - 1, seconds) if api is not None else 0.0
    finished = None
    if n_dec:
        every = n_dec == len(run)
        ids = run if every else run[dec]
        if k:  # P(n >= j) = a^j: n = floor(log u / log a), at most k (log_acc < 0: _book)
            u = rng.take_log(n_dec) / b.log_acc[ids]  # >= 0: truncation is the floor
            accepted = np.minimum(u, k, out=u).astype(np.int64)
            if proposal_rate < 1.0:  # a step without a proposal accepts nothing (drawn only then: same stream at 1)
                accepted = np.where(rng.take(n_dec) < proposal_rate, accepted, 0)
            accepted += 1
        else:
            accepted = np.ones(n_dec, dtype=np.int64)
        generated = b.generated[ids]
        left = b.output[ids] - generated
        gained = np.minimum(accepted, left)
        b.generated[ids] = generated + gained
        b.computed[ids] = (c if every else c[dec]) + gained  # a decoding request's computed is c since the schedule
        decode_tokens = _isum(gained)
        if every:  # every running request decoded: those with nothing left are done (_retire's test)
            finished = left <= gained
    return prefill_tokens, decode_tokens, finished


class _Uniforms:
    """Uniform draws on [0, 1) from one seeded generator, drawn in blocks: `take(n)` returns the next n values of the
    stream, the same values as drawing them n at a time (PCG64 gives one double per 64-bit output, in order);
    `take_log(n)` the logs of those n values (floored at 1e-300), worked out once per block."""

    __slots__ = ("rng", "block", "logs", "at")
    SIZE = 1 << 16

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self._fill(self.SIZE)
        self.at = 0

    def _fill(self, size: int) -> None:
        self.block = self.rng.random(size)
        self.logs = np.log(np.maximum(self.block, 1e-300))

    def _next(self, n: int, logs: bool) -> np.ndarray:
        at = self.at
        if at + n <= len(self.block):
            self.at = at + n
            return (self.logs if logs else self.block)[at:at + n]
        rest = (self.logs if logs else self.block)[at:]
        self._fill(max(self.SIZE, n - len(rest)))
        self.at = n - len(rest)
        return np.concatenate([rest, (self.logs if logs else self.block)[:self.at]])

    def take(self, n: int) -> np.ndarray:
        return self._next(n, False)

    def take_log(self, n: int) -> np.ndarray:
        return self._next(n, True)


_NONE = np.zeros(0, dtype=np.int64)


def _retire(b: _Book, run: np.ndarray, now: float,
            finished_mask: np.ndarray | None = None) -> tuple[np.ndarray, int, np.ndarray]:
    """Requests that produced all their output (`finished_mask` where known) leave the running set. Returns (run,
    blocks freed, their ids)."""
    if finished_mask is None:
        finished_mask = b.generated[run] >= b.output[run]
    if not np.count_nonzero(finished_mask):
        return run, 0, _NONE
    done_ids = run[finished_mask]
    freed = _isum(b.held[done_ids])
    b.held[done_ids] = 0
    answered = np.isnan(b.finish[done_ids])  # not already streamed inside a multi-step group (_streamed)
    done_ids = done_ids[answered]
    b.finish[done_ids] = now
    return run[~finished_mask], freed, done_ids


def _leave(cfg: EngineConfig, b: _Book, run: np.ndarray, now: float, finished: np.ndarray | None, group_left: int,
           decode_tokens: int, answered: int) -> tuple[np.ndarray, int, np.ndarray, int]:
    """The finished requests leave the running set (and their last tokens reach the client) when a step ends outside a
    multi-step group or its last step does; inside a group that streams, they are answered at once (_streamed).
    Returns (run, blocks freed, the answered requests' ids, how many of run a streaming group has answered)."""
    if not group_left:
        run, freed, done = _retire(b, run, now, finished)
        return run, freed, done, 0
    if cfg.group_streams and decode_tokens:
        done, freed = _streamed(b, run, now)
        return run, freed, done, answered + len(done)
    return run, 0, _NONE, answered


def _streamed(b: _Book, run: np.ndarray, now: float) -> tuple[np.ndarray, int]:
    """Inside a multi-step group that streams (EngineConfig.group_streams): the requests of `run` whose last token this
    step produced reach their clients now and free their blocks (vLLM 0.6 engine/llm_engine.py _process_model_outputs,
    handed each step of the group as its tokens are ready by worker/multi_step_model_runner.py's async callback, sends
    a finished request's output and frees it from the scheduler, free_finished_seq_groups); their rows stay in the
    group's batch, computed to its end. Returns (their ids, blocks freed)."""
    ids = run[(b.generated[run] >= b.output[run]) & np.isnan(b.finish[run])]
    b.finish[ids] = now
    freed = _isum(b.held[ids])
    b.held[ids] = 0
    return ids, freed


def _within(max_steps: int | None, steps: int, now: float, left: int) -> None:
    """A run past `max_steps` engine steps stops here with a one-line error rather than running on for hours."""
    if max_steps is not None and steps > max_steps:
        raise SpecError("duration", f"the run passed {max_steps:,} engine steps at {now:,.0f} s of simulated time "
                        f"with {left:,} requests still to finish; at most {max_steps:,} steps are simulated",
                        "fewer requests, a shorter duration or trace, or more concurrent clients")


def simulate(cfg: EngineConfig, req: Requests, seed: int = 0, max_time_s: float | None = None,
             sample_interval_s: float | None = None, progress=None, max_steps: int | None = None) -> SimResult:
    """Run the engine over the requests until all finish or `max_time_s` passes; more than `max_steps` engine
    steps is a SpecError (a run that would take hours, refused rather than waited for)."""
    rng = _Uniforms(seed)
    n = len(req)
    arrival = req.arrival_s
    clients = req.clients
    sent, arrival, released, front = _first_sends(cfg, arrival, clients)
    b = _book(req)
    time_limit, sample_every = _time_limits(req.arrival_s, max_time_s, sample_interval_s)
    if clients and max_time_s is None:
        time_limit = 1e7  # a closed loop ends when its last request does (this bounds a run that cannot)

    windows = tuple(w for w, _ in cfg.target.kv_windows)
    draft_windows = tuple(w for w, _ in cfg.draft.kv_windows) if cfg.draft else ()
    waiting: deque[int] = deque()
    run = np.zeros(0, dtype=np.int64)  # running request ids, admission order
    free = cfg.num_blocks
    now = 0.0
    next_arrival = 0
    steps = preemptions = recomputed = prefill_total = decode_total = 0
    area = 0.0
    series: dict[str, list] = {"t": [], "running": [], "waiting": [], "kv_used_fraction": [], "preemptions": []}
    next_sample = 0.0
    least_free, most_waiting = cfg.num_blocks, 0
    group_left = 0  # decode steps left in the current multi-step group (cfg.scheduler_steps > 1)
    answered = 0  # requests of the running set a streaming group has answered already (_streamed)
    answered_drops = 0  # requests refused as longer than the pool whose clients have sent their next (closed loop)

    recv_weight = cfg.recv_interval  # the first loop takes requests in
    formed = 0.0  # when the coming step was formed: its start, or with cfg.scheduled_ahead the last step's start
    while now <= time_limit:
        next_arrival, recv_weight = _receive(cfg, recv_weight, not (len(run) or waiting), front, arrival,
                                             next_arrival, now, waiting, formed)
        if not len(run) and not waiting:
            b.ratio[0] = SGLANG_RATIO_INIT  # an idle SGLang scheduler resets it (self_check_during_idle)
            upcoming = _upcoming(front, arrival, next_arrival)
            if not np.isfinite(upcoming):
                break
            now = formed = max(now, upcoming)
            continue

        run, c, sched, decoding, free, preempted, lost = _schedule(cfg, b, run, waiting, free, group_left > 0)
        # closed loop: a request refused as longer than the pool answers its client at once (open: all are sent)
        released, answered_drops = _answered(cfg, b, sent, arrival, released, answered_drops, _NONE, now)
        preemptions += preempted
        recomputed += lost
        active = sched > 0
        n_active = int(np.count_nonzero(active))
        if not n_active:
            group_left = 0
            recv_weight = cfg.recv_interval  # an idle scheduler takes requests in at once
            if preempted and waiting:
                # the step only preempted (an engine that decodes or prefills, not both, or a multi-step group): the
                # victims head the queue and the next step admits them, at once. It had waited for the next arrival
                # as if the engine were idle, or with none to come ended the run with them unfinished
                continue
            # nothing fits this step (pool full of prefills waiting on blocks): wait for the next arrival
            upcoming = _upcoming(front, arrival, next_arrival)
            if np.isfinite(upcoming):
                now = formed = max(now, upcoming)
                continue
            break

        # 5. step time for this exact composition
        seconds, dec, n_dec = _step_seconds(cfg, windows, draft_windows, c, sched, active, n_active, decoding)
        in_system = len(run) - answered + len(waiting)  # a group's answered requests have left (Little's law)
        area += in_system * seconds
        formed = now if cfg.scheduled_ahead else now + seconds
        now += seconds
        steps += 1
        _within(max_steps, steps, now, len(run) + len(waiting) + n - next_arrival)
        area = _arrivals_area(area, arrival, next_arrival, now, now - seconds)

        # 6. advance the scheduled requests
        # _advance counts the other streams beside a first token for the front end's share (every scheduled request
        # had counted, its own prefill and chunks that stream nothing included, so an idle server's first token came
        # sooner after a longer prompt: a shorter step, a larger share)
        api = cfg.target if cfg.frontend_latency_s else None
        prefill_tokens, decode_tokens, finished = _advance(b, rng, cfg.k, run, c, sched, active, decoding, dec, n_dec,
                                                           now, api, seconds, cfg.proposal_rate)
        _new_token_ratio(cfg, b, preempted, prefill_tokens, decode_tokens)
        processing = cfg.serial_output_s * decode_tokens  # the step's tokens processed before the next step forms
        area += in_system * processing
        now += processing
        prefill_total += prefill_tokens
        decode_total += decode_tokens
        recv_weight += RECV_WEIGHT_PROMPT if prefill_tokens else 1
        if group_left:
            group_left -= 1
        elif cfg.scheduler_steps > 1 and not prefill_tokens and decode_tokens:
            group_left = cfg.scheduler_steps - 1  # a decode step opens a group
        run, freed, done, answered = _leave(cfg, b, run, now, finished, group_left, decode_tokens, answered)
        free += freed
        # the clients whose answers arrived send their next requests
        released, answered_drops = _answered(cfg, b, sent, arrival, released, answered_drops, done, now)
        least_free = min(least_free, free)  # the peaks are every step's, not only the sampled ones
        most_waiting = max(most_waiting, len(waiting))
        if now >= next_sample:
            _sample(series, now, len(run), len(waiting), 1 - free / cfg.num_blocks, preemptions)
            next_sample = now + sample_every
            if progress is not None:
                progress(min(next_arrival, n), n)

    if cfg.frontend_serial_s:  # requests waiting in the API server are in the system too (Little's law)
        seen = np.isfinite(sent) & (sent <= now)
        area += float((np.minimum(arrival[seen], now) - sent[seen]).sum())
    return _result(b, sent, series, now=now, steps=steps, preemptions=preemptions, recomputed=recomputed,
                   area=area, prefill_total=prefill_total, decode_total=decode_total,
                   frontend_s=cfg.frontend_latency_s,
                   peaks=(1 - least_free / cfg.num_blocks if cfg.num_blocks else 0.0, most_waiting))


def _first_sends(cfg: EngineConfig, arrival: np.ndarray,
                 clients: int) -> tuple[np.ndarray, np.ndarray, int, _Front | None]:
    """(when each client sends its request, when the engine receives it, how many are sent, the API server's intake
    between the two: it fills the receive times as the run goes); a closed loop sends its `clients` first requests
    at t = 0, the rest later."""
    n = len(arrival)
    sent, released = arrival, n
    if clients:
        sent = np.full(n, np.inf)
        released = min(clients, n)
        sent[:released] = 0.0
    if not cfg.frontend_serial_s:
        return sent, sent.copy(), released, None
    received = np.full(n, np.inf)
    return sent, received, released, _Front(cfg.frontend_serial_s, sent, received)


def _answered(cfg: EngineConfig, b: _Book, sent: np.ndarray, arrival: np.ndarray, released: int, refusals: int,
              done: np.ndarray, now: float) -> tuple[int, int]:
    """Closed loop: the clients answered by the `done` requests, finished at `now`, and by the refusals (requests
    longer than the pool, _Book.dropped) beyond the `refusals` already answered, send their next requests (an open
    loop has sent every request: nothing). Returns (how many are sent so far, refusals answered)."""
    dropped = int(b.dropped[0])
    more = len(done) + dropped - refusals
    if more and released < len(sent):
        # a client has its answer when its last token reaches it: the front-end latency its end-to-end latency counts
        # (_result: stretched by the API server's streaming load), a refusal's unstretched. Sending at the bare latency,
        # a client had had its next request in flight before the last one's answer: with the API server busy, more
        # requests in flight than clients (1,000 clients of 1-token requests: 1,095 by Little's law)
        latency = cfg.frontend_latency_s
        answers = now + np.concatenate([frontend_stretched(latency, b.front_busy[done]) if latency else
                                        np.zeros(len(done)), np.full(dropped - refusals, latency)])
        answers.sort()
        released = _send_next(cfg, sent, arrival, released, answers[:len(sent) - released])
    return released, dropped


def _send_next(cfg: EngineConfig, sent: np.ndarray, arrival: np.ndarray, released: int, times: np.ndarray) -> int:
    """Closed loop: the clients answered at `times` (ascending) send their next requests then, in the order sent so far
    (no earlier than the last); with intake work the API server (_Front) takes them in. Returns how many are sent."""
    if released:
        times = np.maximum(times, sent[released - 1])
    more = len(times)
    sent[released:released + more] = times
    if not cfg.frontend_serial_s:
        arrival[released:released + more] = times
    return released + more


class _Front:
    """The API server's intake as one core shared equally by the requests it is taking in (processor sharing: an
    asyncio loop runs each request's handler in turn), `serial` seconds of work each: a request sent alone is taken
    in after `serial`, a burst of N sent together all after about N x serial. Fills `arrival` (when the engine
    receives each request) as simulated time passes (`advance`)."""

    __slots__ = ("serial", "sent", "arrival", "nxt", "levels", "ids", "v", "t")

    def __init__(self, serial: float, sent: np.ndarray, arrival: np.ndarray):
        self.serial, self.sent, self.arrival = serial, sent, arrival
        self.nxt = 0
        self.levels: deque[float] = deque()  # virtual finish times of the requests being taken in, in order sent
        self.ids: deque[int] = deque()
        self.v = self.t = 0.0  # virtual time (service each request in the system has had) at time t

    def next_time(self) -> float:
        """When the next request reaches the engine if no other is sent meanwhile, or the next send if sooner."""
        m = len(self.levels)
        dep = self.t + (self.levels[0] - self.v) * m if m else np.inf
        join = float(self.sent[self.nxt]) if self.nxt < len(self.sent) else np.inf
        return min(dep, join)

    def advance(self, until: float) -> None:
        if until < self.t:  # already there (a step formed before the last look)
            return
        sent, n = self.sent, len(self.sent)
        while True:
            m = len(self.levels)
            join = float(sent[self.nxt]) if self.nxt < n else np.inf
            dep = self.t + (self.levels[0] - self.v) * m if m else np.inf
            if min(join, dep) > until or join == dep == np.inf:
                if m:
                    self.v += (until - self.t) / m
                self.t = max(self.t, until)
                return
            if dep <= join:
                self.v = self.levels.popleft()
                self.t = dep
                self.arrival[self.ids.popleft()] = dep
            else:
                if m:
                    self.v += (join - self.t) / m
                self.t = max(self.t, join)
                self.levels.append(self.v + self.serial)
                self.ids.append(self.nxt)
                self.nxt += 1


def _receive(cfg: EngineConfig, weight: int, idle: bool, front: _Front | None, arrival: np.ndarray, next_arrival: int,
             now: float, waiting: deque[int], formed: float) -> tuple[int, int]:
    """Step 1 as the scheduler's loop takes requests in: every loop, or with SGLang's receive interval once the steps
    since it last did weigh `cfg.recv_interval` (an idle engine at once); the requests received by `formed`, when the
    coming step was formed (an idle engine: `now`). Returns (next request to come, the weight carried on)."""
    if weight < cfg.recv_interval and not idle:
        return next_arrival, weight
    return _ingest(front, arrival, next_arrival, now if idle else formed, waiting), 0


def _ingest(front: _Front | None, arrival: np.ndarray, next_arrival: int, now: float, waiting: deque[int]) -> int:
    """Step 1: the requests the engine has received by `now` join the waiting queue. Returns the next one to come."""
    if front is not None:
        front.advance(now)
    n = len(arrival)
    while next_arrival < n and arrival[next_arrival] <= now:
        waiting.append(next_arrival)
        next_arrival += 1
    return next_arrival


def _upcoming(front: _Front | None, arrival: np.ndarray, next_arrival: int) -> float:
    """When the engine may next receive a request: the next known arrival, else the API server's next event (inf:
    none will come)."""
    if next_arrival < len(arrival) and np.isfinite(arrival[next_arrival]):
        return float(arrival[next_arrival])
    return front.next_time() if front is not None else np.inf


def frontend_receive(sent: np.ndarray, serial_s: float) -> np.ndarray:
    """When the engine receives each request sent at `sent` (non-decreasing; inf: never sent) through the API
    server's shared intake (_Front)."""
    received = np.full(len(sent), np.inf)
    _Front(serial_s, sent, received).advance(np.inf)
    return received


def _arrivals_area(area: float, arrival: np.ndarray, next_arrival: int, now: float, start: float) -> float:
    """Requests that reached the engine but are not in its queue yet (arrived during the step, or held back by
    SGLang's receive interval) are in the system from their arrival, or the step's start, on."""
    n = len(arrival)
    probe = next_arrival
    while probe < n and arrival[probe] <= now:
        area += now - max(float(arrival[probe]), start)
        probe += 1
    return area


def _sample(series: dict[str, list], now: float, running: int, waiting: int, kv_used: float,
            preemptions: int) -> None:
    series["t"].append(now)
    series["running"].append(running)
    series["waiting"].append(waiting)
    series["kv_used_fraction"].append(kv_used)
    series["preemptions"].append(preemptions)


def _result(b: _Book, arrival: np.ndarray, series: dict[str, list], *, now: float, steps: int, preemptions: int,
            recomputed: int, area: float, prefill_total: int, decode_total: int,
            frontend_s: float = 0.0, peaks: tuple[float, int] = (0.0, 0)) -> SimResult:
    """Client-side latencies: the engine's plus the per-request front-end latency, stretched by the API server's
    streaming load when the request's first token came out (core.perf.frontend_stretched)."""
    output, first_token, finish = b.output, b.first_token, b.finish
    arrival = np.where(np.isfinite(arrival), arrival, np.nan)
    front = frontend_stretched(frontend_s, b.front_busy)
    ttft = first_token - arrival + front
    e2e = finish - arrival + front
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (finish - first_token) / (output - 1), np.nan)
    return SimResult(ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, finished=~np.isnan(finish), output_tokens=output,
                     arrival_s=arrival, end_time_s=now, steps=steps, preemptions=preemptions,
                     recomputed_tokens=recomputed, series={name: np.asarray(v) for name, v in series.items()},
                     area_in_system=area, prefill_tokens=prefill_total, decode_tokens=decode_total,
                     kv_peak_fraction=peaks[0], max_waiting=peaks[1], too_long=int(b.dropped[0]))
