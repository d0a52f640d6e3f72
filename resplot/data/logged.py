"""The logged value nearest a step: the hover's number. From the series' raw tiles where they
are cached (the hovered tile, or past its first or last point the neighbouring one: a sparse
key, a gap), else NaN until the next poll brings the tile asked for; exact where the bucket
view shows only NaN there. No Qt here; resplot/data/hover.py reads every series of a chart
through `values_at`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef
from resplot.data.views import SeriesView
from schema.store import buckets
from schema.store.rollup import STEP_HI, STEP_LO


@dataclass(frozen=True)
class Logged:
    """What `value_at` found at a step: the logged point nearest to it (`exact`), or only that
    every point of the bucket holding it is NaN (a NaN stretch, `exact` too: nothing else was
    logged there), or nothing yet (`pending`: its raw tile is asked for)."""

    step: int
    value: float
    wall: float
    exact: bool
    pending: bool = False


def value_at(
    cache: SeriesCache, ref: RunRef, key: str, step: int, view: SeriesView | None = None
) -> Logged | None:
    """The logged value nearest to `step` (the hover's number): from the raw tiles when they
    are cached; otherwise those tiles are asked for (the next poll brings them) and, when
    `view` is a bucket view whose bucket at `step` holds only NaN, NaN. None when the series
    is unknown or has no point near `step` yet."""
    return _value(cache, ref, key, step, view)


def _value(
    cache: SeriesCache, ref: RunRef, key: str, step: int, view: SeriesView | None
) -> Logged | None:
    summary = cache.summary(ref, key)
    if summary is None:
        return None
    agg = summary.agg
    step = int(min(max(step, agg[STEP_LO]), agg[STEP_HI]))
    found = _logged_near(cache, ref, key, agg, step)
    return found if found is not None else _pending(cache, ref, key, step, view)


def _pending(
    cache: SeriesCache, ref: RunRef, key: str, step: int, view: SeriesView | None
) -> Logged:
    """value_at where the raw tile holding `step` (inside the series' steps) is not cached:
    that tile asked for, and NaN: exact where the bucket view's bucket there holds only NaN."""
    cache.want_tiles(ref, key, 0, [buckets.tile_of(step)])
    firsts = view.first_steps if view is not None else None
    if firsts is not None and len(firsts):
        # The bucket at `step` (or the nearest): all NaN means nothing else was logged there.
        # Python numbers (.item): numpy's scalar calls were most of a pending lookup's cost.
        last = len(firsts) - 1
        b = min(max(int(firsts.searchsorted(step, side="right")) - 1, 0), last)
        end = view.last_steps.item(b)
        if step > end and b < last and firsts.item(b + 1) - step < step - end:
            b += 1
        only_nan = view.nan.item(b) and not (view.posinf.item(b) or view.neginf.item(b))
        if only_nan and not math.isfinite(view.means.item(b)):
            return Logged(step, float("nan"), float(view.mid_walls.item(b)), True, True)
    return Logged(step, float("nan"), float("nan"), False, True)


def values_at(
    cache: SeriesCache, queries: list[tuple[RunRef, str, int, SeriesView | None]]
) -> list[Logged | None]:
    """`value_at` for each (run, key, step, view) of many series (the hover reads every
    series of a chart a move)."""
    return [_value(cache, ref, key, step, view) for ref, key, step, view in queries]


def _logged_near(cache: SeriesCache, ref: RunRef, key: str, agg: tuple, step: int):
    """The logged point nearest to `step` (inside the series' steps) in its cached raw tile or,
    past that tile's first or last point, the cached neighbour's (a sparse key, a gap; the
    earlier on a tie, the newest of points at one step): a Logged, or None when the step's
    tile is not cached or no cached tile near it holds a point."""
    index = buckets.tile_of(step)
    here = cache.tile(ref, key, 0, index)
    if here is None:
        return None
    s = here.cols["step"]
    n = len(s)
    # Python numbers from here on (.item): numpy scalars' arithmetic and comparisons were
    # half of a series' ~25 µs.
    if n == 0 or step < s.item(0):
        before = _last(_neighbour(cache, ref, key, agg, index - 1))
        after = _first(_neighbour(cache, ref, key, agg, index + 1)) if n == 0 else (here, 0)
        found = _nearer(step, before, after)
    elif step > s.item(n - 1):
        found = _nearer(step, (here, n - 1), _first(_neighbour(cache, ref, key, agg, index + 1)))
    else:
        i = int(s.searchsorted(step))  # < n: step <= the last
        if i > 0 and step - s.item(i - 1) <= s.item(i) - step:
            i -= 1
        found = (here, i)
    if found is None:
        return None
    near, i = found
    s = near.cols["step"]
    at = s.item(i)
    if i + 1 < len(s) and s.item(i + 1) == at:
        i = int(s.searchsorted(at, side="right")) - 1  # the newest of points at one step
    cols = near.cols
    return Logged(int(at), float(cols["value"].item(i)), float(cols["wall"].item(i)), True)


def _neighbour(cache: SeriesCache, ref: RunRef, key: str, agg: tuple, index: int):
    """The raw tile `index` next to the hovered one, or None; one not cached yet inside the
    series' steps is asked for: until it comes the nearest point is this tile's (a sparse key
    hovered just past a tile's start read the point after it, a tile away, until some move
    happened to ask for the tile before)."""
    found = cache.tile(ref, key, 0, index)
    if found is None and buckets.tile_of(agg[STEP_LO]) <= index <= buckets.tile_of(agg[STEP_HI]):
        cache.want_tiles(ref, key, 0, [index])
    return found


def _first(t) -> tuple | None:
    """(tile, index) of a cached tile's first point, None if it is not cached or empty."""
    return None if t is None or len(t.cols["step"]) == 0 else (t, 0)


def _last(t) -> tuple | None:
    return None if t is None or len(t.cols["step"]) == 0 else (t, len(t.cols["step"]) - 1)


def _nearer(step: int, before: tuple | None, after: tuple | None) -> tuple | None:
    """The nearer to `step` of a point before it and one after (the earlier on a tie); either
    may be None (its tile not cached or empty)."""
    if before is None or after is None:
        return before if after is None else after
    gap_before = step - before[0].cols["step"].item(before[1])
    gap_after = after[0].cols["step"].item(after[1]) - step
    return before if gap_before <= gap_after else after
