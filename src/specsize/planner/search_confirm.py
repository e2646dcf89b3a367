"""Simulate a search finalist on the envelope's burst scenario to confirm what the screen found."""

from __future__ import annotations

from dataclasses import replace

from ..core.errors import SpecError
from ..core.memory import AccountingProfile
from ..core.specs import Deployment
from ..core.speculation import Tree
from .scenario import envelope_settings, run_simulation
from .search import Candidate


def confirmer(space, profile: AccountingProfile, efficiency_for):
    """A function candidate -> (confirmed, summary) for run_search."""
    drafters = {d.label: d for d in space.drafters}
    gpus = {g.gpu.gpu_id: g.gpu for g in space.gpus}

    def confirm(c: Candidate) -> tuple[bool, dict]:
        option = drafters[c.drafter]
        spec = option.at(c.k, c.tp)
        engine = replace(space.engine, kv_cache_dtype=c.kv_cache_dtype, max_num_seqs=c.max_num_seqs)
        d = Deployment(target=space.target, gpu=gpus[c.gpu], speculative=spec, tp=c.tp, pp=c.pp, num_gpus=c.gpus,
                       engine=engine, expert_parallel=c.expert_parallel)
        eff = efficiency_for(d.gpu)
        acceptance = option.acceptance if spec.enabled else None
        sim = replace(envelope_settings(space.workload, space.simulate_seconds, 0, "the search spec's workload",
                                        space.slo.ttft_p99_s), compare=False)
        try:
            report = run_simulation(d, space.workload, option.profile or profile, eff, acceptance,
                                    space.slo.tpot_p99_s, Tree(), sim, space.headroom)
        except SpecError as err:
            if err.field not in ("duration", "rate"):
                raise
            # the scenario's length and rate are the spec's simulate_seconds and workload here, not flags it has
            raise SpecError("simulate_seconds", err.problem, "a run long enough for the workload's arrivals "
                            "(simulate_seconds up to 3600)") from None
        s = report.spec
        ok = s.sustains
        if space.slo.ttft_p99_s and s.ttft_s.p99 is not None:
            ok &= s.ttft_s.p99 <= space.slo.ttft_p99_s
        if space.slo.tpot_p99_s and s.tpot_s.p99 is not None:
            ok &= s.tpot_s.p99 <= space.slo.tpot_p99_s
        return ok, {"ttft_p99_s": s.ttft_s.p99, "tpot_p99_s": s.tpot_s.p99, "preemptions": s.preemptions,
                    "max_queue": s.max_queue, "problems": [str(p) for p in s.problems], "scenario": report.description}

    return confirm
