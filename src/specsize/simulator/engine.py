"""Iteration-level simulation of a continuous-batching server with a paged KV cache (vLLM V1's scheduler).

Each iteration is one engine step:
1. requests that have arrived join the waiting queue (FCFS);
2. running requests are scheduled first, in admission order, within max_num_batched_tokens: a decoding
   request takes 1 + k tokens (its last token and k drafts), a prefilling one the rest of its prompt in
   chunks (chunked prefill);
3. each scheduled request needs KV blocks for computed + scheduled + k lookahead tokens; when the pool runs
   short the newest running request is preempted (its blocks freed, its KV recomputed on re-admission) until
   the rest fit;
4. waiting requests are admitted from the head of the queue while max_num_seqs, the token budget and free
   blocks allow (the head blocks the queue: no overtaking);
5. the step takes the performance model's time for its exact composition (tokens, contexts, drafts);
6. each decoding request accepts n of its k drafts, n drawn from its own acceptance rate (P(n >= j) = a^j),
   and gains n + 1 tokens.

State is O(running + waiting): arrays over the running set, a queue of waiting ids; per-request results
are O(requests). Deterministic under a seed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..core.perf import StepCoefficients, step_time
from .workload import Requests


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
    draft_width: int = 1
    spec_step_overhead_s: float = 0.0
    draft_setup_overhead_s: float = 0.0
    draft_step_overhead_s: float = 0.0
    cpu_draft_per_seq_s: float = 0.0  # n-gram lookup
    prefix_hit_rate: float = 0.0


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


def _blocks_for(tokens: np.ndarray, block_size: int) -> np.ndarray:
    return -(-tokens // block_size)


def simulate(cfg: EngineConfig, req: Requests, seed: int = 0, max_time_s: float | None = None,
             sample_interval_s: float | None = None, progress=None) -> SimResult:
    """Run the engine over the requests until all finish or `max_time_s` passes."""
    rng = np.random.default_rng(seed)
    n = len(req)
    arrival = req.arrival_s
    prompt = req.prompt_tokens.astype(np.int64)
    output = req.output_tokens.astype(np.int64)
    log_acc = np.log(np.clip(req.acceptance, 1e-12, 1.0))
    computed = np.zeros(n, dtype=np.int64)
    generated = np.zeros(n, dtype=np.int64)
    held = np.zeros(n, dtype=np.int64)  # blocks held
    first_token = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    k = cfg.k
    bs = cfg.block_size
    budget_total = cfg.max_num_batched_tokens
    if max_time_s is None:
        last = float(arrival[-1]) if n else 0.0
        max_time_s = last * 2 + 3600.0
    if sample_interval_s is None:
        sample_interval_s = max(0.05, (float(arrival[-1]) if n else 1.0) / 2000)

    windows = tuple(w for w, _ in cfg.target.kv_windows)
    draft_windows = tuple(w for w, _ in cfg.draft.kv_windows) if cfg.draft else ()
    waiting: deque[int] = deque()
    run = np.zeros(0, dtype=np.int64)  # running request ids, admission order
    free = cfg.num_blocks
    now = 0.0
    next_arrival = 0
    steps = preemptions = recomputed = prefill_total = decode_total = 0
    area = 0.0
    series_t, series_run, series_wait, series_kv, series_pre = [], [], [], [], []
    next_sample = 0.0
    first_seen = np.zeros(n, dtype=bool)  # prefix-cache credit only on the first admission
    prefill_target = prompt.copy()

    while now <= max_time_s:
        while next_arrival < n and arrival[next_arrival] <= now:
            waiting.append(next_arrival)
            next_arrival += 1
        if not len(run) and not waiting:
            if next_arrival >= n:
                break
            now = float(arrival[next_arrival])
            continue

        # 2. schedule running requests within the token budget
        if len(run):
            c = computed[run]
            target_len = prefill_target[run]
            decoding = c >= target_len
            want = np.where(decoding, 1 + k, target_len - c)
            before = np.cumsum(want) - want
            sched = np.clip(budget_total - before, 0, want)
            sched = np.where(decoding & (sched < want), 0, sched)  # a decode is all k+1 or nothing
            # k lookahead slots for decoders and for prefills that finish this step
            lookahead = np.where(decoding | (c + sched >= target_len), k, 0)
            need = _blocks_for(c + sched + lookahead, bs) - held[run]
            need = np.maximum(need, 0)
            total_need = int(need.sum())
            # 3. preempt the newest until the rest fit
            while total_need > free and len(run):
                victim = int(run[-1])
                free += int(held[victim])
                total_need -= int(need[-1])
                recomputed += int(computed[victim])
                held[victim] = 0
                computed[victim] = 0
                prefill_target[victim] = prompt[victim] + max(int(generated[victim]) - 1, 0)
                preemptions += 1
                waiting.appendleft(victim)
                run, c, sched, need, decoding = run[:-1], c[:-1], sched[:-1], need[:-1], decoding[:-1]
            free -= total_need
            held[run] += need
            budget = budget_total - int(sched.sum())
        else:
            c = sched = np.zeros(0, dtype=np.int64)
            decoding = np.zeros(0, dtype=bool)
            budget = budget_total

        # 4. admit from the head of the queue
        admitted, admitted_sched = [], []
        while waiting and len(run) + len(admitted) < cfg.max_num_seqs and budget > 0:
            head = waiting[0]
            start = int(computed[head])
            if not first_seen[head]:
                start = min(int(prompt[head] * cfg.prefix_hit_rate), int(prompt[head]) - 1) \
                    if cfg.prefix_hit_rate else 0
            remaining = int(prefill_target[head]) - start
            chunk = min(remaining, budget)
            lookahead = k if chunk == remaining else 0
            blocks = -(-(start + chunk + lookahead) // bs)
            if blocks > free:
                break
            waiting.popleft()
            first_seen[head] = True
            computed[head] = start
            held[head] = blocks
            free -= blocks
            budget -= chunk
            admitted.append(head)
            admitted_sched.append(chunk)
        if admitted:
            new_ids = np.asarray(admitted, dtype=np.int64)
            run = np.concatenate([run, new_ids])
            c = np.concatenate([c, computed[new_ids]])
            sched = np.concatenate([sched, np.asarray(admitted_sched, dtype=np.int64)])
            decoding = np.concatenate([decoding, np.zeros(len(new_ids), dtype=bool)])

        active = sched > 0
        if not active.any():
            # nothing fits this step (pool full of prefills waiting on blocks): wait for the next arrival
            if next_arrival < n:
                now = max(now, float(arrival[next_arrival]))
                continue
            break

        # 5. step time for this exact composition
        tokens = int(sched.sum())
        ctx_total = float(c[active].sum())
        span = tuple(float(np.minimum(c[active], w).sum()) for w in windows)
        pairs = float((sched * c).sum())
        seconds = step_time(cfg.target, tokens, ctx_total, span, pairs)[0]
        dec = decoding & active
        n_dec = int(dec.sum())
        if k and n_dec:
            if cfg.draft is not None and cfg.draft_steps:
                dctx = c[dec]
                dspan = tuple(float(np.minimum(dctx, w).sum()) for w in draft_windows)
                width = cfg.draft_width
                one = step_time(cfg.draft, n_dec * width, float(dctx.sum()) * width, dspan,
                                float(dctx.sum()) * width)[0]
                seconds += cfg.draft_steps * (one + cfg.draft_step_overhead_s) + cfg.draft_setup_overhead_s
            seconds += cfg.spec_step_overhead_s + cfg.cpu_draft_per_seq_s * n_dec
        in_system = len(run) + len(waiting)
        area += in_system * seconds
        now += seconds
        steps += 1
        # requests that arrive during the step are in the system from their arrival on
        probe = next_arrival
        while probe < n and arrival[probe] <= now:
            area += now - arrival[probe]
            probe += 1

        # 6. advance the scheduled requests
        pre = active & ~decoding
        if pre.any():
            ids = run[pre]
            computed[ids] += sched[pre]
            prefill_total += int(sched[pre].sum())
            done = computed[ids] >= prefill_target[ids]
            fresh = ids[done & (generated[ids] == 0)]
            generated[fresh] = 1
            first_token[fresh] = now
        if n_dec:
            ids = run[dec]
            if k:
                u = rng.random(n_dec)
                la = log_acc[ids]
                with np.errstate(divide="ignore", invalid="ignore"):
                    accepted = np.where(la < 0, np.floor(np.log(u) / la), k)
                accepted = np.clip(accepted, 0, k).astype(np.int64)
            else:
                accepted = np.zeros(n_dec, dtype=np.int64)
            gained = np.minimum(accepted + 1, output[ids] - generated[ids])
            generated[ids] += gained
            computed[ids] += gained
            decode_total += int(gained.sum())
        finished_mask = generated[run] >= output[run]
        if finished_mask.any():
            done_ids = run[finished_mask]
            finish[done_ids] = now
            free += int(held[done_ids].sum())
            held[done_ids] = 0
            run = run[~finished_mask]
        if now >= next_sample:
            series_t.append(now)
            series_run.append(len(run))
            series_wait.append(len(waiting))
            series_kv.append(1 - free / cfg.num_blocks)
            series_pre.append(preemptions)
            next_sample = now + sample_interval_s
            if progress is not None:
                progress(min(next_arrival, n), n)

    ttft = first_token - arrival
    e2e = finish - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (finish - first_token) / (output - 1), np.nan)
    return SimResult(ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, finished=~np.isnan(finish), output_tokens=output,
                     arrival_s=arrival, end_time_s=now, steps=steps, preemptions=preemptions,
                     recomputed_tokens=recomputed,
                     series={"t": np.asarray(series_t), "running": np.asarray(series_run),
                             "waiting": np.asarray(series_wait), "kv_used_fraction": np.asarray(series_kv),
                             "preemptions": np.asarray(series_pre)},
                     area_in_system=area, prefill_tokens=prefill_total, decode_tokens=decode_total)
