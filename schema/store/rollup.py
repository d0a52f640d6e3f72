"""The rollup aggregate of a group of points, how two of them combine, and when a series starts
over: the one definition of each.

Standard library only, Python 3.8 syntax: the writer folds every flush with it, the viewer folds
live points into the tiles it holds with it, and the tests' brute-force reference uses it.

An aggregate (`Agg`, a plain tuple in AGG_COLUMNS order) describes the points of one series in
one bucket, or in the whole series (the `series` summary row):

    n        points                     vmin, vmax   smallest / largest finite value (None: none)
    nan      NaN points                 min_at       step of vmin (ties: the smallest step)
    posinf   +inf points                max_at       step of vmax (ties: the smallest step)
    neginf   -inf points                vsum         sum of the finite values
    step_lo  first step                 last         value at step_hi (ties: the newest point);
    step_hi  last step                               None stands for NaN, as in the store
    wall_lo  earliest wall time         bits         OR of the values when every finite value is
    wall_hi  latest wall time                        an integer in [0, 2**53) (flags such as
                                                     NVML throttle reasons), else -1
    nonfinite_at  the first step holding a NaN or ±inf value (None: there is none)

Every field but vsum combines exactly, in any grouping; vsum is a float sum, so two groupings
of the same points can differ in the last bits (it only feeds the mean).
"""

from __future__ import annotations

from bisect import bisect_left
from functools import reduce
from operator import or_

AGG_COLUMNS = (
    "n",
    "nan",
    "posinf",
    "neginf",
    "vmin",
    "vmax",
    "min_at",
    "max_at",
    "vsum",
    "step_lo",
    "step_hi",
    "last",
    "wall_lo",
    "wall_hi",
    "bits",
    "nonfinite_at",
)
(
    N,
    NAN,
    POSINF,
    NEGINF,
    VMIN,
    VMAX,
    MIN_AT,
    MAX_AT,
    VSUM,
    STEP_LO,
    STEP_HI,
    LAST,
    WALL_LO,
    WALL_HI,
    BITS,
    NONFINITE_AT,
) = range(len(AGG_COLUMNS))
# The float fields; the others are integers (counts, steps, flags). Wire layouts and arrays
# of aggregates take their types from here.
AGG_FLOATS = frozenset(("vmin", "vmax", "vsum", "last", "wall_lo", "wall_hi"))

INF = float("inf")
MAX_BITS = 1 << 53
NOT_FLAGS = -1


def _bits(finite: list, lo, hi, total) -> int:
    if not finite:
        return 0
    if lo < 0 or hi >= MAX_BITS or total != int(total):  # ordinary float metrics stop here
        return NOT_FLAGS
    ints = list(map(int, finite))
    if ints != finite:  # elementwise 3 == 3.0: a fraction somewhere
        return NOT_FLAGS
    return reduce(or_, ints, 0)


def _at(values: list, steps: list, target) -> int:
    """Step of `target` in `values` (the smallest step when it occurs more than once)."""
    if values.count(target) == 1:
        return steps[values.index(target)]
    return min(s for v, s in zip(values, steps) if v == target)


def fold(steps: list, walls: list, values: list, ordered: bool = False) -> tuple:
    """The aggregate of a non-empty group of points given in arrival order (NaN as None or
    float('nan')); `ordered`: the steps are known not to decrease."""
    if ordered:
        step_lo, step_hi = steps[0], steps[-1]
    else:
        step_lo, step_hi = min(steps), max(steps)
    return _fold(steps, values, step_lo, step_hi, min(walls), max(walls), ordered)


def _fold(steps, values, step_lo, step_hi, wall_lo, wall_hi, ordered: bool) -> tuple:
    try:
        total = sum(values)
        all_finite = total - total == 0.0  # NaN and inf propagate through the sum
    except TypeError:  # a None: NaN as the store keeps it
        all_finite = False
    nan = posinf = neginf = 0
    bad_at = None
    if all_finite:
        finite, fsteps = values, steps
    else:
        finite, fsteps, bad = [], [], []
        for v, s in zip(values, steps):
            if v is None or v != v:
                nan += 1
                bad.append(s)
            elif v == INF:
                posinf += 1
                bad.append(s)
            elif v == -INF:
                neginf += 1
                bad.append(s)
            else:
                finite.append(v)
                fsteps.append(s)
        total = sum(finite)
        bad_at = min(bad) if bad else None
    if finite:
        vmin, vmax = min(finite), max(finite)
        if ordered:  # the first occurrence has the smallest step
            min_at, max_at = fsteps[finite.index(vmin)], fsteps[finite.index(vmax)]
        else:
            min_at, max_at = _at(finite, fsteps, vmin), _at(finite, fsteps, vmax)
    else:
        vmin = vmax = min_at = max_at = None
    if steps[-1] == step_hi:
        last = values[-1]
    else:
        i = len(steps) - 1 - steps[::-1].index(step_hi)
        last = values[i]
    if last is not None and last != last:
        last = None
    return (
        len(values),
        nan,
        posinf,
        neginf,
        vmin,
        vmax,
        min_at,
        max_at,
        float(total),
        step_lo,
        step_hi,
        last,
        wall_lo,
        wall_hi,
        _bits(finite, vmin, vmax, total),
        bad_at,
    )


def merge(a: tuple, b: tuple) -> tuple:
    """Two aggregates of the same series as one; `b` holds the newer points (its `last` wins a
    tie on step_hi)."""
    if a[VMIN] is None:
        vmin, min_at = b[VMIN], b[MIN_AT]
    elif b[VMIN] is None or a[VMIN] < b[VMIN]:
        vmin, min_at = a[VMIN], a[MIN_AT]
    elif b[VMIN] < a[VMIN]:
        vmin, min_at = b[VMIN], b[MIN_AT]
    else:
        vmin, min_at = a[VMIN], min(a[MIN_AT], b[MIN_AT])
    if a[VMAX] is None:
        vmax, max_at = b[VMAX], b[MAX_AT]
    elif b[VMAX] is None or a[VMAX] > b[VMAX]:
        vmax, max_at = a[VMAX], a[MAX_AT]
    elif b[VMAX] > a[VMAX]:
        vmax, max_at = b[VMAX], b[MAX_AT]
    else:
        vmax, max_at = a[VMAX], min(a[MAX_AT], b[MAX_AT])
    bits = NOT_FLAGS if a[BITS] == NOT_FLAGS or b[BITS] == NOT_FLAGS else a[BITS] | b[BITS]
    bad = (
        a[NONFINITE_AT]
        if b[NONFINITE_AT] is None
        else (b[NONFINITE_AT] if a[NONFINITE_AT] is None else min(a[NONFINITE_AT], b[NONFINITE_AT]))
    )
    return (
        a[N] + b[N],
        a[NAN] + b[NAN],
        a[POSINF] + b[POSINF],
        a[NEGINF] + b[NEGINF],
        vmin,
        vmax,
        min_at,
        max_at,
        a[VSUM] + b[VSUM],
        min(a[STEP_LO], b[STEP_LO]),
        max(a[STEP_HI], b[STEP_HI]),
        b[LAST] if b[STEP_HI] >= a[STEP_HI] else a[LAST],
        min(a[WALL_LO], b[WALL_LO]),
        max(a[WALL_HI], b[WALL_HI]),
        bits,
        bad,
    )


def merge_all(aggs) -> tuple:
    """Aggregates in arrival (or step) order as one; at least one."""
    it = iter(aggs)
    out = next(it)
    for agg in it:
        out = merge(out, agg)
    return out


def fold_buckets(steps: list, walls: list, values: list, shift: int) -> dict:
    """{bucket: aggregate} of one series' points (arrival order) cut into buckets of 2**shift
    steps, in the order the buckets first appear."""
    if not steps:
        return {}
    lo = min(steps)
    if lo >> shift == max(steps) >> shift:
        # One bucket (a slow run's flush; the common live case): no split needed.
        return {lo >> shift: fold(steps, walls, values)}
    if steps == sorted(steps):
        return fold_group(steps, walls, {0: values}, shift)[0]
    groups = {}
    for s, w, v in zip(steps, walls, values):
        g = groups.get(s >> shift)
        if g is None:
            groups[s >> shift] = ([s], [w], [v])
        else:
            g[0].append(s)
            g[1].append(w)
            g[2].append(v)
    return {b: fold(ss, ws, vs) for b, (ss, ws, vs) in groups.items()}


def fold_group(steps: list, walls: list, columns: dict, shift: int) -> dict:
    """{key: {bucket: aggregate}} of several series logged at the same steps and wall times
    (`columns`: key -> values, each as long as `steps`), the bucket cuts and the step and wall
    bounds worked out once for all of them."""
    if not steps:
        return {}
    if steps != sorted(steps):
        return {k: fold_buckets(steps, walls, vs, shift) for k, vs in columns.items()}
    cuts = []
    i, n = 0, len(steps)
    while i < n:
        b = steps[i] >> shift
        j = bisect_left(steps, (b + 1) << shift, i)
        ws = walls[i:j]
        cuts.append((b, i, j, steps[i:j], min(ws), max(ws)))
        i = j
    out = {}
    for key, values in columns.items():
        out[key] = {
            b: _fold(ss, values[i:j], ss[0], ss[-1], wlo, whi, True)
            for b, i, j, ss, wlo, whi in cuts
        }
    return out


def fold_up(buckets: dict, shift: int) -> dict:
    """{parent bucket: aggregate} of child buckets one level up (`shift`: LEVEL_SHIFT); children
    of one parent are combined in the order given."""
    parents = {}
    for b, agg in buckets.items():
        p = b >> shift
        prev = parents.get(p)
        parents[p] = agg if prev is None else merge(prev, agg)
    return parents


def is_restart(prev_step: int, prev_wall: float, step: int, wall: float) -> bool:
    """The restart rule: a point with a lower step than the one before it (in arrival order),
    logged later (a larger wall time), starts the series over: a run resumed from an older
    checkpoint. It supersedes every earlier point at its step or later; the store keeps both
    takes and readers show the newer one (docs/reslog.md, "Resume"). Equal steps (system
    samples) and a lower step at the same wall time (a late row) are no restart."""
    return step < prev_step and wall > prev_wall


def newest_take(steps, walls) -> list:
    """Which points (given in arrival order) stand after restarts (is_restart): TensorBoard's
    purge rule. resplot.data.model.newest_take is the numpy twin for the viewer's cache."""
    keep = [True] * len(steps)
    floor = None  # the lowest restart step seen so far, walking backwards
    for i in range(len(steps) - 1, 0, -1):
        if floor is not None and steps[i] >= floor:
            keep[i] = False
        if is_restart(steps[i - 1], walls[i - 1], steps[i], walls[i]):
            floor = steps[i] if floor is None else min(floor, steps[i])
    if floor is not None and steps[0] >= floor:
        keep[0] = False
    return keep


def mean(agg: tuple) -> float:
    """Mean of the finite values (NaN when there is none)."""
    finite = agg[N] - agg[NAN] - agg[POSINF] - agg[NEGINF]
    return agg[VSUM] / finite if finite > 0 and agg[VSUM] is not None else float("nan")
