"""Where a series' state shows on its chart (no Qt, no artists here):

- non-finite values: one marker at the first NaN (+inf, -inf) of each stretch, and the stretch
  shaded, where one `x` per point or bucket drew ~3,000 markers as a thick bar;
- a point no segment of its line reaches (a series' only point, a value between NaNs): a dot;
- the run's status at the end of its line: running runs a live dot, crashed / failed / killed
  runs a cross, any other status (a new one, e.g. "stalled") a neutral diamond; finished runs
  end plainly (on time axes, resplot/draw/tracks.py adds a dashed tail to the last heartbeat).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from schema.store.status import CRASHED, FAILED, FINISHED, KILLED, RUNNING

MERGE_PX = 4.0  # non-finite points closer than this on screen are one stretch


class EndMark(NamedTuple):
    marker: str
    size: float
    edge: str  # edge colour ("" : the run's colour)
    face: str  # face colour ("" : the run's colour)


END_MARKS = {
    RUNNING: EndMark("o", 6.0, "#ffffff", ""),
    CRASHED: EndMark("X", 8.0, "#000000", ""),
    FAILED: EndMark("X", 8.0, "#000000", ""),
    KILLED: EndMark("X", 8.0, "#000000", ""),
}
NEUTRAL_END = EndMark("D", 5.5, "#444444", "#ffffff")
PLAIN_END = frozenset({FINISHED})


def end_mark(status: str | None) -> EndMark | None:
    """How a line of a run in `status` ends (None: plainly)."""
    if status is None or status in PLAIN_END:
        return None
    return END_MARKS.get(status, NEUTRAL_END)


def last_finite(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    ok = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    if len(ok) == 0:
        return None
    i = ok[np.argmax(x[ok])]
    return float(x[i]), float(y[i])


def stretches(x: np.ndarray, flags: np.ndarray, merge: float) -> list[tuple[float, float]]:
    """(first x, last x) of each stretch of flagged entries: entries next to each other in the
    series, or closer than `merge` in x, are one stretch."""
    idx = np.flatnonzero(flags & np.isfinite(x))
    if len(idx) == 0:
        return []
    order = np.argsort(x[idx], kind="stable")
    idx = idx[order]
    xs = x[idx]
    split = (np.diff(idx) != 1) & (np.diff(xs) > merge)
    starts = np.r_[0, np.flatnonzero(split) + 1]
    ends = np.r_[starts[1:] - 1, len(xs) - 1]
    return [(float(xs[a]), float(xs[b])) for a, b in zip(starts, ends, strict=True)]


# -- what a chart leaves out when many runs share it (a sweep) ------------------------------
EVENT_KINDS = ("checkpoint", "resume", "alert")  # drawn as vertical lines, each switchable
EVENT_RUNS_MAX = 5  # more runs on a chart: events of the highlighted or selected runs only
MARKER_POINTS_MAX = 40  # a series shows its points (validation) when no more are in view
MARKERS_MAX = 160  # and the chart holds no more of them than this in all


def lone_points(y) -> list[int]:
    """The indices of finite values whose neighbours are both missing or not finite: a line
    through them draws no segment there."""
    ok = np.isfinite(np.asarray(y, float))
    if ok.all():  # most series (a zoom asks of ~70): a point alone only if it is the only one
        return [0] if len(ok) == 1 else []
    lone = ok.copy()
    lone[1:] &= ~ok[:-1]
    lone[:-1] &= ~ok[1:]
    return np.flatnonzero(lone).tolist()


def event_runs(refs: list, highlighted, selected) -> tuple[list, bool]:
    """The runs whose events a chart of `refs` draws, and whether some were left out: all of
    them up to EVENT_RUNS_MAX runs, else the highlighted and selected ones (a 12-run sweep's
    checkpoints were 60 dotted lines)."""
    if len(refs) <= EVENT_RUNS_MAX:
        return list(refs), False
    chosen = [r for r in refs if r == highlighted or r in selected]
    return chosen, len(chosen) < len(refs)


def markers_shown(points_in_view: list[int]) -> bool:
    """Whether a chart's marked series (validation: a dot per point) show their points: when
    each has few in view and all together are not a cloud (12 runs × 40 = 480 dots)."""
    return bool(points_in_view) and (
        max(points_in_view) <= MARKER_POINTS_MAX and sum(points_in_view) <= MARKERS_MAX
    )
