"""The straggler rule (schema/rules/stragglers.py) over a job's whole history at once: what the
Ranks page judges on every refresh. StragglerDetector fed step by step spent ~25 ms a rank a refresh
in Python dicts (64 ranks: over a second); here each phase is a ranks x steps matrix and every
rank's excess over the median of the others is worked out with numpy, column by column, exactly
as the rule's `_excess` does it. Only the ranks and phases whose slow steps ever fill the rule's
sustained share of a window go to the rule's own verdict (`StragglerDetector.add_marks`), so
what is named, from when and by how much is the rule's, not a copy of it;
tests/resplot/data/test_straggler_matrix.py holds the two to the same findings on random jobs.

The rule's step-by-step feed judges a step once every rank has logged it; over a history (the
page's, and `finish()`) every step is judged with the ranks that logged it, which is what this
does: a step logged by fewer than two ranks is not judged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from schema.rules.ranks import STEP, own_work
from schema.rules.stragglers import Straggler, StragglerDetector, StragglerRule

Series = tuple[np.ndarray, np.ndarray]  # steps, values


def judge(
    series: Mapping[tuple[int, str], Series],
    hosts: Mapping[int, str],
    rule: StragglerRule | None = None,
) -> list[Straggler]:
    """Every straggler of a job's history: `series` maps (rank, phase) to that rank's
    (steps, seconds) of the phase ("step", "comm" and the own-work phases), `hosts` each rank's
    host. In the order the rule names them (by the step that named them)."""
    rule = rule or StragglerRule()
    ranks = sorted({rank for rank, _ in series})
    names = sorted({phase for _, phase in series})
    if len(ranks) < 2 or not series:
        return []
    steps = np.unique(np.concatenate([s for s, _ in series.values()]))
    row = {rank: i for i, rank in enumerate(ranks)}
    shape = (len(ranks), len(steps))
    values = {p: np.full(shape, np.nan) for p in names}
    present = {p: np.zeros(shape, bool) for p in names}
    for (rank, phase), (s, v) in series.items():
        at = np.searchsorted(steps, s)
        values[phase][row[rank], at] = v
        present[phase][row[rank], at] = True
    logged = np.any(np.stack(list(present.values())), axis=0)  # a rank's row at a step
    judged = logged.sum(axis=0) >= 2  # the rule judges nothing with fewer than two ranks
    threshold = _threshold(values, present, logged, rule)
    waits = _excess(values["comm"], present["comm"]) if "comm" in values else None
    order = {p: i for i, p in enumerate(own_work(names))}
    detector = StragglerDetector(dict(hosts), rule)
    keys: list[tuple[int, int, int]] = []  # each finding's place in the rule's own order
    need = rule.sustained * rule.window
    for phase in own_work(names):
        excess = _excess(values[phase], present[phase])
        marked = np.isfinite(excess) & judged
        slow = (excess > threshold) & marked
        for rank in ranks:
            i = row[rank]
            cols = np.flatnonzero(marked[i])
            if len(cols) < rule.window:
                continue
            flags = slow[i, cols]
            counts = np.cumsum(flags)
            window = counts[rule.window - 1 :] - np.r_[0, counts[: -rule.window]]
            if not np.any(window >= need):
                continue  # never a window sustained enough: the rule names nothing here
            wait = waits[i, cols] if waits is not None else np.full(len(cols), np.nan)
            marks = [
                (int(s), bool(f), float(e), None if math.isnan(w) else float(w))
                for s, f, e, w in zip(
                    steps[cols].tolist(),
                    flags.tolist(),
                    excess[i, cols].tolist(),
                    wait.tolist(),
                    strict=True,
                )
            ]
            detector.add_marks(rank, phase, marks)
            keys += [(s.found_at, order[phase], rank) for s in detector.found[len(keys) :]]
    # detector.found holds each finding as it ended (a recovery replaces it in place).
    return [s for _, s in sorted(zip(keys, detector.found, strict=True), key=lambda f: f[0])]


def _threshold(values, present, logged, rule: StragglerRule) -> np.ndarray:
    """Each step's "slow" threshold: at least min_excess_s, and rel_excess of the median step
    time of the ranks that logged it (their `step`, else the sum of their finite phases)."""
    finite_sum = sum(np.where(present[p] & np.isfinite(values[p]), values[p], 0.0) for p in values)
    step = np.where(present[STEP], values[STEP], finite_sum) if STEP in values else finite_sum
    step = np.where(logged, step, np.nan)
    counted = np.isfinite(step).any(axis=0)
    median = np.zeros(step.shape[1])
    if counted.any():
        median[counted] = np.nanmedian(step[:, counted], axis=0)
    return np.maximum(rule.min_excess_s, rule.rel_excess * median)


def _excess(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Each rank's value minus the median of the other ranks' finite values at each step (NaN
    where it has none, or fewer than two ranks have one): the rule's `_excess`, by column."""
    finite = present & np.isfinite(values)
    k = finite.sum(axis=0)
    ranked = np.where(finite, values, np.inf)
    order = np.argsort(ranked, axis=0, kind="stable")
    ordered = np.take_along_axis(ranked, order, axis=0)
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(len(values))[:, None], axis=0)
    n = k[None, :] - 1  # the others
    mid = np.maximum(n // 2, 0)

    def at(t: np.ndarray) -> np.ndarray:  # the t-th of the others, sorted
        index = np.clip(np.where(t >= position, t + 1, t), 0, len(values) - 1)
        return np.take_along_axis(ordered, index, axis=0)

    upper = at(np.broadcast_to(mid, values.shape))
    lower = at(np.broadcast_to(np.maximum(mid - 1, 0), values.shape))
    with np.errstate(invalid="ignore"):
        median = np.where(n % 2 == 1, upper, (lower + upper) / 2.0)
        out = values - median
    return np.where(finite & (k >= 2)[None, :], out, np.nan)
