"""Events on a chart: checkpoints, resumes and alerts as vertical lines (one LineCollection per
chart), each kind switchable (View → Event markers, ViewState.hidden_events), and with more than
a few runs on the chart only those of the highlighted or selected runs (resplot/data/marks.py)."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba_array

from resplot.data import marks, xaxis
from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef

COLORS = {"alert": "#d62728", "checkpoint": "#7f7f7f", "resume": "#1f77b4"}


def draw_events(
    events: LineCollection,
    cache: SeriesCache,
    refs: list[RunRef],
    contexts,
    mode: str,
    hidden: set[str],
    highlighted,
    selected,
) -> bool:
    """Set the chart's event lines; True when some run's events were left out (too many runs
    and it is neither highlighted nor selected)."""
    shown, left_out = marks.event_runs(refs, highlighted, selected)
    segments, colors = [], []
    for ref in shown:
        ctx = contexts.get(ref)
        run = cache.run(ref)
        for ev in cache.events(ref):
            color = COLORS.get(ev.kind)
            if color is None or ev.kind in hidden:
                continue
            x = xaxis.event_x(mode, run, ev.step, ev.wall, ctx.guide if ctx else None)
            if x is not None and np.isfinite(x):
                segments.append([(x, 0.0), (x, 1.0)])
                colors.append(color)
    # Set only when they changed: a set marks the chart's saved picture out of date (events
    # lie under the series, in the picture the window keeps: resplot/ui/layers.py).
    rgba = to_rgba_array(colors or ["#7f7f7f"])
    old = events.get_segments()
    if len(old) != len(segments) or not all(
        np.array_equal(a, b) for a, b in zip(old, segments, strict=True)
    ):
        events.set_segments(segments)
    if not np.array_equal(events.get_color(), rgba):
        events.set_color(rgba)
    if not left_out:
        return False
    kinds = set(COLORS) - hidden
    return any(ev.kind in kinds for ref in refs if ref not in shown for ev in cache.events(ref))
