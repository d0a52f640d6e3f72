"""The Ranks page's straggler judgement over a job's history with numpy
(resplot/data/straggler_matrix.py) names the same stragglers, from the same step, to the same
step, by the same amounts, as the rule itself (schema/rules/stragglers.py StragglerDetector) fed the
same job step by step: random jobs with jitter, slow stretches in several phases, ranks that
skip steps or log NaN, two ranks, a short window."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from resplot.data.straggler_matrix import judge
from schema.rules.stragglers import StragglerDetector, StragglerRule
from tests.schema.test_rank_rules import healthy_step

PHASES = ("data", "h2d", "forward", "backward", "optimizer")


def random_job(seed: int, ranks: int, steps: int, holes: float = 0.0):
    """rank -> step -> phases of a lockstep job with 0-3 slow stretches (random rank, phase,
    size, span); `holes`: the share of (rank, step) never logged, and of values logged NaN."""
    rng = random.Random(seed)
    stretches = []
    for _ in range(rng.randint(0, 3)):
        first = rng.randint(1, steps)
        stretches.append(
            (
                rng.randrange(ranks),
                rng.choice(PHASES),
                rng.uniform(0.004, 0.2),
                first,
                first + rng.randint(5, 120),
            )
        )
    out: dict[int, dict[int, dict[str, float]]] = {r: {} for r in range(ranks)}
    for step in range(1, steps + 1):
        own = {r: healthy_step(rng) for r in range(ranks)}
        for rank, phase, extra, first, last in stretches:
            if first <= step <= last:
                own[rank][phase] += extra
        done = max(sum(p.values()) for p in own.values()) + 0.002
        for r in range(ranks):
            if rng.random() < holes:
                continue
            phases = dict(own[r], comm=done - sum(own[r].values()))
            phases["step"] = sum(phases.values())
            if rng.random() < holes:
                phases[rng.choice(list(phases))] = math.nan
            out[r][step] = phases
    return out


def by_rule(job, hosts, rule):
    det = StragglerDetector(hosts, rule)
    for step in sorted({s for steps in job.values() for s in steps}):
        for rank in sorted(job):
            if step in job[rank]:
                det.add(rank, step, job[rank][step])
    det.finish()
    return det.found


def by_matrix(job, hosts, rule):
    series = {}
    for rank, steps in job.items():
        names = {p for phases in steps.values() for p in phases}
        for name in names:
            at = [s for s in sorted(steps) if name in steps[s]]
            series[(rank, name)] = (
                np.array(at, np.int64),
                np.array([steps[s][name] for s in at], float),
            )
    return judge(series, hosts, rule)


def findings(found):
    return sorted(
        (
            s.rank,
            s.host,
            s.phase,
            s.since,
            s.found_at,
            s.until,
            round(s.excess_s, 12),
            None if s.others_wait_s is None else round(s.others_wait_s, 12),
        )
        for s in found
    )


@pytest.mark.parametrize(
    ("seed", "ranks", "steps", "holes", "window"),
    [(s, 4, 400, 0.0, 20) for s in range(8)]
    + [(s, 8, 300, 0.02, 20) for s in range(8, 12)]
    + [(s, 2, 300, 0.0, 20) for s in range(12, 16)]
    + [(s, 5, 300, 0.05, 3) for s in range(16, 20)],
)
def test_the_matrix_names_what_the_rule_names(seed, ranks, steps, holes, window):
    job = random_job(seed, ranks, steps, holes)
    hosts = {r: f"gpu-{r // 2}" for r in range(ranks)}
    rule = StragglerRule(window=window)
    expected = findings(by_rule(job, hosts, rule))
    assert findings(by_matrix(job, hosts, rule)) == expected


@pytest.mark.slow
def test_the_seeds_name_stragglers_and_healthy_jobs_none():
    """The parity above is not vacuous: its jobs name stragglers (with holes and a short window
    too), and some name none."""
    cases = [
        (range(8), 4, 400, 0.0, 20),
        (range(8, 12), 8, 300, 0.02, 20),
        (range(16, 20), 5, 300, 0.05, 3),
    ]
    for seeds, ranks, steps, holes, window in cases:
        named = [
            len(
                by_rule(
                    random_job(s, ranks, steps, holes),
                    {r: "h" for r in range(ranks)},
                    StragglerRule(window=window),
                )
            )
            for s in seeds
        ]
        assert sum(named) >= 2, (ranks, named)
    assert 0 in [
        len(by_rule(random_job(s, 4, 400), {r: "h" for r in range(4)}, StragglerRule()))
        for s in range(8)
    ]
