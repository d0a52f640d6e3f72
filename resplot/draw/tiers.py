"""Which tier of a page's picture a series is drawn in (resplot/ui/layers.py).

A live run's series lie over every settled run's: from LIVE_FLOOR up are the live tier's series
(their own order kept, squeezed under the spines at 2.5) and what lies over all series. The
window keeps a picture of its page with the settled series in it and draws a live poll's
series over that: a run followed beside finished ones costs its own series a poll, not every
run's.

Settled: a run that ended itself (finished, failed, killed), or crashed CRASH_SETTLES_S ago
(its writer long gone: a sweep's crashed runs are drawn with the finished ones). A stalled run
and one crashed lately stay live: a stalled run's process is there (its telemetry may still
come in), and a crash seen lately may be a clock between hosts that is off. A run that comes
back moves to the live tier, which draws the page once, as any series moving between the
tiers does.

A live run's series whose end lies past the view's right edge is settled too while the view
stays: its new points land off the chart, so its pixels stay as they are, and a full draw
(a zoom, a pan into its past) draws it with the settled series rather than cutting it into a
body and a tail and tracking where its tail reaches (docs/benchmarks/viewer.md). A poll that
leaves its cut into pixel columns as it was then leaves its artists alone (`same_cut`): set
again, they would mark the saved picture out of date and every poll would draw the page.
"""

from __future__ import annotations

import time

import numpy as np

from resplot.data.decimate import Decimated
from resplot.data.model import RunInfo
from schema.store.status import CRASHED, END_STATUSES

LIVE_FLOOR = 2.05
PAST_FLOOR = 2.01  # ... PAST_FLOOR + 0.02: under LIVE_FLOOR, over every settled zorder (0-2)
CRASH_SETTLES_S = 600.0
# A series whose view holds its newest point ends past the right edge once this many of its
# points (at a level above raw: of its buckets) lie past it: decimate_many keeps the first
# point past an edge, which is then not the newest, so no poll changes it (a bucket level's
# newest bucket fills in over polls). A view that ends before the series does lies wholly
# left of the newest point, and of every point a poll brings.
PAST_EDGE_POINTS = 2
_FIELDS = ("x", "y", "nan_x", "posinf_x", "neginf_x", "col_x", "col_min", "col_max")


def tier_zorder(base: float, live: bool, streaming: bool = False) -> float:
    """The zorder of a series artist whose settled zorder is `base` (0-2): in the live tier,
    or settled; a streaming run's series settled by the view lie over every other settled
    series (PAST_FLOOR), as they do in the live tier, so that zooming into the run's past
    does not change which line lies on top."""
    if live:
        return LIVE_FLOOR + 0.1 * base
    return PAST_FLOOR + 0.01 * base if streaming else base


def streams(run: RunInfo | None, now: float | None = None) -> bool:
    """Whether a run's series may still get points (a run not known yet may), as of `now`
    (time.time())."""
    if run is None:
        return True
    if run.status == CRASHED:
        gone = (time.time() if now is None else now) - run.heartbeat_at
        return gone < CRASH_SETTLES_S
    return run.status not in END_STATUSES


def ends_past(x: np.ndarray, x_mid: np.ndarray, level: int, xlim, holds_end: bool) -> bool:
    """Whether a series ends past the right edge of the x range `xlim` by enough that its
    new points change nothing drawn: its view (its points' x and, above raw, its buckets'
    middles) ends before the series does, or holds PAST_EDGE_POINTS past the edge."""
    if xlim is None or not len(x):
        return False
    if not holds_end:
        return True
    right = max(xlim)
    with np.errstate(invalid="ignore"):
        past = int(np.count_nonzero(x > right))
        if level:
            past = min(past, int(np.count_nonzero(x_mid > right)))
    return past >= PAST_EDGE_POINTS


def same_cut(a: tuple[Decimated, ...], b: tuple[Decimated, ...]) -> bool:
    """Whether two cuts of a series into pixel columns hold the same bytes, field by field."""
    if len(a) != len(b):
        return False
    for one, other in zip(a, b, strict=True):
        if one is other:
            continue
        for name in _FIELDS:
            u, v = getattr(one, name), getattr(other, name)
            if u is v:
                continue
            if (
                u is None
                or v is None
                or u.dtype != v.dtype
                or u.shape != v.shape
                or u.tobytes() != v.tobytes()
            ):
                return False
    return True
