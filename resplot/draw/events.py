"""Events on a chart: checkpoints, resumes and alerts as vertical lines, each kind switchable
(View → Event markers, ViewState.hidden_events), and with more than a few runs on the chart
only those of the highlighted or selected runs (resplot/data/marks.py).

A kind's lines are one path (NaN between lines), however many: a run that logs an event a
second adds 3,600 lines an hour to every chart, which were a Path object each, compared one by
one at every refresh."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba_array

from resplot.data import marks, xaxis
from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef
from resplot.data.views import same_stamp
from resplot.draw.axis_art import lines_across
from resplot.draw.clip_box import share_clip_box

# In drawing order: an alert's line over a checkpoint's at the same step.
COLORS = {"checkpoint": "#7f7f7f", "resume": "#1f77b4", "alert": "#d62728"}


class EventLines:
    """A chart's event lines: one LineCollection holding a path a kind, each line a segment
    of it (NaN between them), in the kind's colour; none for a chart without events (a
    section's card). Of a kind's lines in one pixel column only one is drawn (the others
    would draw the same dotted column), and none outside the view."""

    def __init__(self, ax=None) -> None:
        self.ax = ax
        self.collection: LineCollection | None = None
        self._xs: dict[str, np.ndarray] = {kind: np.zeros(0) for kind in COLORS}
        self._drawn: dict[str, np.ndarray] = dict(self._xs)
        self._shown_for: tuple = ()  # the x's, limits and size the drawn lines were laid out for
        if ax is None:
            return
        self.collection = LineCollection(
            [],
            linewidths=0.8,
            linestyles="dotted",
            transform=ax.get_xaxis_transform(),
            zorder=0.5,  # over the grid, under every series
        )
        ax.add_collection(self.collection, autolim=False)
        share_clip_box(ax, self.collection)

    def artists(self) -> list[LineCollection]:
        return [] if self.collection is None else [self.collection]

    def xs(self, kind: str) -> np.ndarray:
        """Where kind's events are (data x), in drawing order."""
        return self._xs[kind]

    def drawn(self, kind: str) -> np.ndarray:
        """Where the lines of kind drawn are: one a pixel column of the view."""
        return self._drawn[kind]

    def count(self) -> int:
        """Lines drawn, every kind."""
        return sum(len(xs) for xs in self._drawn.values())

    def placed(self) -> int:
        """Events placed on the chart, every kind (drawn or sharing a line's pixel column)."""
        return sum(len(xs) for xs in self._xs.values())

    def set(self, by_kind: dict[str, np.ndarray]) -> None:
        """The events' x's, a kind (drawn by `show`)."""
        xs = {kind: np.asarray(by_kind.get(kind, ()), float) for kind in COLORS}
        # The same x's keep their arrays: `show` knows them by identity.
        self._xs = {k: self._xs[k] if np.array_equal(self._xs[k], v) else v for k, v in xs.items()}

    def show(self) -> None:
        """Lay the lines out for the chart's limits and size; the collection is set only when
        they moved (a set marks the chart's saved picture out of date: events lie under the
        series, resplot/ui/layers.py)."""
        if self.collection is None:
            return
        ax = self.ax
        shown_for = (
            tuple(self._xs.values()),
            ax.get_xscale(),
            *ax.viewLim.intervalx,
            ax.bbox.bounds,
        )
        if (
            self._shown_for
            and all(a is b for a, b in zip(shown_for[0], self._shown_for[0], strict=True))
            and shown_for[1:] == self._shown_for[1:]
        ):
            return  # laid out for these already (a poll that moved nothing under them)
        self._shown_for = shown_for
        drawn = {kind: self._thinned(xs) for kind, xs in self._xs.items()}
        if all(np.array_equal(self._drawn[k], xs) for k, xs in drawn.items()):
            return
        self._drawn = drawn
        paths, colors = [], []
        for kind, xs in drawn.items():
            if len(xs):
                paths.append(np.column_stack(lines_across(xs)))
                colors.append(COLORS[kind])
        self.collection.set_segments(paths)
        self.collection.set_color(to_rgba_array(colors or ["#7f7f7f"]))

    def _thinned(self, xs: np.ndarray) -> np.ndarray:
        """The first of `xs` in each pixel column inside the view."""
        if not len(xs):
            return xs
        ax = self.ax
        px = ax.transData.transform(np.column_stack([xs, np.zeros(len(xs))]))[:, 0]
        box = ax.bbox
        inside = np.isfinite(px) & (px >= box.x0 - 1) & (px <= box.x1 + 1)
        xs, px = xs[inside], px[inside]
        _, first = np.unique(np.floor(px), return_index=True)
        return xs[np.sort(first)]


class EventPlaces:
    """Where each run's events go on the x axis, kind by kind, kept while nothing they are
    placed from changed (the run's events, the axis, the hidden kinds, the run's start on a
    relative axis, a guided axis's guide): a run that logs an event a second holds thousands,
    and every chart of a page placed all of them again at every poll (8.7 ms of a 62 ms poll,
    two live runs of 3,600 events, scripts/bench/bench_live_poll.py --events 3600)."""

    def __init__(self) -> None:
        self._held: dict[RunRef, tuple[tuple, dict[str, np.ndarray]]] = {}

    def keep(self, refs) -> None:
        """Forget the runs not in `refs` (a page's runs: removed ones are not held)."""
        keep = set(refs)
        for ref in [r for r in self._held if r not in keep]:
            del self._held[ref]

    def of(
        self, cache: SeriesCache, ref: RunRef, ctx, mode: str, hidden: frozenset[str]
    ) -> dict[str, np.ndarray]:
        """The x's of the run's events of each kind shown (NaN-placed ones left out)."""
        run = cache.run(ref)
        guide = () if ctx is None or ctx.guide is None else tuple(ctx.guide)
        start = run.created_at if run is not None and mode == "relative" else None
        stamp = (cache.event_changes(ref), mode, hidden, start, *guide)
        held = self._held.get(ref)
        if held is not None and same_stamp(stamp, held[0]):
            return held[1]
        by_kind: dict[str, np.ndarray] = {}
        for kind in COLORS:
            evs = [] if kind in hidden else cache.events(ref, kind)
            if not evs:
                continue
            xs = xaxis.event_xs(
                mode,
                run,
                [ev.step for ev in evs],
                [ev.wall for ev in evs],
                ctx.guide if ctx else None,
            )
            xs = xs[np.isfinite(xs)]
            if len(xs):
                by_kind[kind] = xs
        self._held[ref] = (stamp, by_kind)
        return by_kind


def draw_events(
    events: EventLines,
    places: EventPlaces,
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
    frozen = frozenset(hidden)
    by_kind: dict[str, list[np.ndarray]] = {kind: [] for kind in COLORS}
    for ref in shown:
        for kind, xs in places.of(cache, ref, contexts.get(ref), mode, frozen).items():
            by_kind[kind].append(xs)
    events.set({kind: np.concatenate(parts or [np.zeros(0)]) for kind, parts in by_kind.items()})
    if not left_out:
        return False
    kinds = set(COLORS) - hidden
    return any(not cache.event_kinds(ref).isdisjoint(kinds) for ref in refs if ref not in shown)
