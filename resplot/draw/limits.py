"""A chart page's limits: following the data (with headroom while a run streams in), the y
range refitted after a zoom or pan, the outlier and placeholder rules, and the changes made
quietly, drawn over the saved axes (resplot/ui/layers.py: `layer_artists` says which artists
that is). ChartPage (resplot/draw/charts.py) is one; the rules live here, the page's layout
and series there.

A followed chart's data limits come from its tracks' own per-line limits (Track.limits, worked
out by `line_limits` and `extent_points` when a series' artists are set, kept while it gets no
new points), not from `Axes.relim`:
relim walked every line's path through its transform at every poll (a quarter of a live
poll's refresh, issue 31).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib as mpl
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox

from resplot.data import headroom
from resplot.data.state import ViewState
from resplot.data.yrange import padded, placeholder_lead, robust_limits, visible_limits
from resplot.draw.axis_art import AxisArt
from resplot.draw.follow import FollowsData

ONE_WALL_TIME_DAYS = 60 / 86400  # the x range either side of the one wall time of a page


class ChartLimits(FollowsData):
    """The limits part of a ChartPage (its axes, specs, tracks and follow state are the
    page's)."""

    def _follow_x(self) -> tuple[float, float] | None:
        """Set and return the x range every chart follows (None: matplotlib's own rules), set
        only when it moves: a limit set marks the page for a full draw."""
        wanted = self._follow_xlim()
        if wanted is None:
            return None
        ax = self.chart_axes()[0]  # the charts share x
        current = tuple(ax.get_xlim())
        last = self._followed.get(-1)  # None after a rebuild or a reset: fit the data exactly
        shown = headroom.follow(last if self.headroom else None, wanted, margin=ax.margins()[0])
        if tuple(shown) != current:
            ax.set_xlim(shown)
        self._followed[-1] = tuple(ax.get_xlim())
        return tuple(ax.get_xlim())

    def _follow_y(self, i: int, ax, state: ViewState, scalex: bool, before: tuple) -> tuple:
        """A followed chart's y range: autoscaled (the outlier and placeholder rules, a flat
        series widened), then kept while it still fits (headroom). Worked out quietly and
        set once, and only when it moves: a set marks the page for a full draw, and even the
        same limits set again invalidate every transform of the chart. A y range the user
        set (a pan or zoom along y alone) is kept until Follow data. Returns the chart's
        limits now (shown_limits: each read of a chart's limits walks its shared axes)."""
        if i in self._user_y:
            return shown_limits(ax)
        with quietly(ax):
            wanted = self._autoscaled_y(i, ax, scalex)
            wanted = self._clip_outliers(i, state) or wanted
            wanted = _widened(ax, wanted)
            shown = wanted
            last = self._followed.get(i)
            if self.headroom and last is not None and self.specs[i].kind != "section":
                shown = tuple(
                    headroom.follow(
                        last, wanted, log=ax.get_yscale() == "log", margin=ax.margins()[1]
                    )
                )
            if tuple(ax.get_ylim()) != shown:
                ax.set_ylim(shown)
        now = shown_limits(ax)
        if self._views[i]:  # limits fitted to data (not an empty chart's 0..1)
            self._followed[i] = now[1]
        else:
            self._followed.pop(i, None)
        if now != before:
            ax.stale = True  # new limits: the page's axes are drawn again
        return now

    def _autoscaled_y(self, i: int, ax, scalex: bool) -> tuple[float, float]:
        """The y range matplotlib's autoscaling gives chart i's data (its margins, sticky
        edges, scale), worked out again only when what it depends on changed: most polls
        add points inside the page's y data limits. Left set on the axes when worked out
        (with x too when `scalex`: the page follows no x range of its own)."""
        key = _autoscale_key(ax, self._sticky_y(i, ax))
        kept = self._autoscaled.get(i)
        if not scalex and kept is not None and kept[0] == key:
            return kept[1]
        # Any limits set since (the kept ones, an outlier rule's, the followed x range)
        # turned autoscaling off: it then left them as they were.
        ax.set_autoscaley_on(True)
        if scalex:
            ax.set_autoscalex_on(True)
        ax.autoscale_view(scalex=scalex)
        wanted = tuple(ax.get_ylim())
        self._autoscaled[i] = (key, wanted)
        return wanted

    def _sticky_y(self, i: int, ax) -> tuple:
        """The sticky y edges of chart i's children and of the axes sharing its y, in order,
        kept while they are the same children: matplotlib sets an artist's sticky edges when
        it makes it (a bar, a fill, an image), and resplot sets none; reading them through
        each child's property was ~100 calls a chart at every followed poll."""
        siblings = ax.get_shared_y_axes().get_siblings(ax)
        children = (
            tuple(ax.get_children())  # (a chart shares y with no other: no Python loop)
            if len(siblings) == 1
            else tuple(child for a in siblings for child in a.get_children())
        )
        kept = self._sticky.get(i)
        if kept is None or kept[0] != children:
            edges = tuple(sorted(v for child in children for v in child.sticky_edges.y))
            kept = self._sticky[i] = (children, edges)
        return kept[1]

    def _on_chart_ylim_changed(self, ax) -> None:
        # By the axes, not its index: a chart kept by a rebuild (chart_layout) moves.
        for i, shown in enumerate(self.axes):
            if shown is ax:
                self._on_ylim_changed(i)
                return

    def _on_ylim_changed(self, i: int) -> None:
        if not self._updating and not self._keeping_y:
            self._user_y.add(i)  # a zoom box or a pan: the user's y range is kept

    @contextmanager
    def keeping_y(self) -> Iterator[None]:
        """A pan along x (the window's pan tool): matplotlib sets each panned chart's y to
        the range it had when the drag began; each keeps the range it has (the last refresh's
        fit) and stays the page's to fit."""
        kept = [(ax, ax.get_ylim()) for ax in self.axes]
        self._keeping_y = True
        try:
            yield
        finally:
            self._keeping_y = False
            for ax, ylim in kept:
                ax.set_ylim(ylim, emit=False)

    def reset_view(self) -> None:
        super().reset_view()
        self._user_y = set()
        self._followed = {}  # the data's own fit first, headroom from there

    def _refit_y(self, i: int, state: ViewState, xlim) -> None:
        """After a zoom or pan, a line chart's y range fits what is drawn inside the x range
        (the outlier rule where the chart has it), unless the user set that chart's y too."""
        spec, ax = self.specs[i], self.axes[i]
        if spec.kind != "line" or i in self._user_y or xlim is None:
            return
        lo, hi = sorted(xlim)
        tracks = self.tracks[i].values()
        ys = []
        for line in [t.line for t in tracks] + [t.raw for t in tracks if t.raw is not None]:
            if line.get_visible():
                x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
                ys.append(y[(x >= lo) & (x <= hi)])
                ys.append(_crossing(x, y, (lo, hi)))
        ys += [xy[(xy[:, 0] >= lo) & (xy[:, 0] <= hi), 1] for t in tracks for xy in t.band_xy]
        placeholder = self._placeholders.get(i)
        if placeholder is not None:  # left out of a zoom's range as of the whole chart's
            ys = [y[y != placeholder] for y in ys]
        if not ys:
            return
        robust = spec.robust_y and state.ignore_outliers
        limits, clipped = visible_limits(np.concatenate(ys), log=spec.log_y, robust=robust)
        if limits is not None and tuple(ax.get_ylim()) != tuple(limits):
            ax.set_ylim(*limits)
        if clipped != (i in self._clipped):
            self._clipped.symmetric_difference_update({i})
            self._note(i, state.smoothing)

    def _clip_outliers(self, i: int, state: ViewState) -> tuple[float, float] | None:
        """A loss chart's y range without its top 1 % (resplot.data.yrange), said in its note,
        or the range without a placeholder; None: autoscaling's range stands."""
        spec = self.specs[i]
        limits = None
        robust = spec.robust_y and state.ignore_outliers and spec.kind == "line"
        tracks = list(self.tracks[i].values()) if spec.kind == "line" else []
        # A placeholder before training (nanoGPT's mfu -100) sets no range: the range is then
        # the raw points' without it (a smoothed line stays inside them).
        views = [t.view for t in tracks if t.view is not None and t.line.get_visible()]
        leads = [placeholder_lead(v.values) for v in views]
        placeholder = next(
            (float(v.values[0]) for v, k in zip(views, leads, strict=True) if k), None
        )
        if placeholder is not None:
            ys = [v.values[k:] for v, k in zip(views, leads, strict=True)]
            limits = robust_limits(np.concatenate(ys), log=spec.log_y) if robust else None
            clipped = limits is not None
            limits = limits or padded(np.concatenate(ys), log=spec.log_y)
        elif robust:
            lines = [t.line for t in tracks] + [t.raw for t in tracks if t.raw is not None]
            ys = [np.asarray(ln.get_ydata(), float) for ln in lines if ln.get_visible()]
            ys += [xy[:, 1] for t in tracks for xy in t.band_xy]
            if ys:
                limits = robust_limits(np.concatenate(ys), log=spec.log_y)
            clipped = limits is not None
        else:
            clipped = False
        changed = clipped != (i in self._clipped)
        changed |= self._placeholders.get(i) != placeholder
        if clipped != (i in self._clipped):
            self._clipped.symmetric_difference_update({i})
        if placeholder is None:
            self._placeholders.pop(i, None)
        else:
            self._placeholders[i] = placeholder
        if changed:
            self._note(i, state.smoothing)
        return None if limits is None else (float(limits[0]), float(limits[1]))

    def _follow_xlim(self) -> tuple[float, float] | None:
        """The x range autoscaling would give every series of the page (None: no series, or
        one x: matplotlib's own rules then, ±5 % of it, but for one wall time)."""
        found = [r for ts in self.tracks for t in ts.values() if (r := t.x_range()) is not None]
        if not found:
            return None
        lo, hi = min(r[0] for r in found), max(r[1] for r in found)
        if not hi > lo:
            if self.x_mode == "wall" and np.isfinite(lo):
                # ±5 % of a date (days since 1970) is ±2 years: a run's first point, until
                # its second came, sat alone on an axis of years.
                return lo - ONE_WALL_TIME_DAYS, lo + ONE_WALL_TIME_DAYS
            return None
        margin = self.chart_axes()[0].margins()[0] * (hi - lo)
        return lo - margin, hi + margin

    def layer_artists(self, i: int) -> list:
        """Chart i's artists drawn over the saved picture of its axes (resplot/ui/layers.py),
        in the order a full draw draws them: everything in the axes box (series, bands,
        events, notes, legend, spines) but its background, ticks, labels, grid and title. The
        axis lines sit under every series (dress()), so the order is a full draw's."""
        if i >= len(self.specs) or self.specs[i].kind == "section":
            return []  # a section's card never changes with data
        ax = self.axes[i]
        children = ax.get_children()
        # A poll leaves most charts' artists as they were: the last answer while the children
        # and their zorders are (walking matplotlib's artist lists for `own` ~0.1 ms a chart,
        # at every poll and blit).
        key = (tuple(children), tuple([a.zorder for a in children]))  # (no call an artist)
        kept = self._layered.get(i)
        if kept is not None and kept[0] == key:
            return list(kept[1])
        own = {
            *ax.lines,
            *ax.collections,
            *ax.patches,
            *ax.texts,
            *ax.images,
            *ax.artists,
            *ax.spines.values(),
        }
        if ax.get_legend() is not None:
            own.add(ax.get_legend())
        own.discard(AxisArt.of(ax))  # the ticks and labels: under the series, saved
        layered = sorted((a for a in children if a in own), key=lambda a: a.get_zorder())
        self._layered[i] = (key, layered)
        return list(layered)

    def settled_artists(self, i: int) -> set:
        """Chart i's artists that a live poll leaves as they are: the series of runs that
        ended (resplot/draw/tiers.py, streams), their stacks and throttle bars, and the event
        lines. The window keeps them in its saved picture of the chart, up to the first artist
        in drawing order that is not one of them (resplot/ui/layers.py)."""
        if i >= len(self.tracks):
            return set()
        out = {a for track in self.tracks[i].values() for a in track.settled_artists()}
        if i < len(self._composites) and self._composites[i] is not None:
            out.update(self._composites[i].settled_artists())
        if i < len(self._events):
            out.update(self._events[i].artists())
        return out


def line_limits(line: Line2D, y: bool = True) -> tuple[bool, bool, np.ndarray]:
    """What `Axes.relim` takes from a line, as (update x, update y, points): a few points with
    the extents of its finite points and, per axis, their smallest positive value (a log
    axis's limit). Invisible lines count, as relim counts them."""
    xs = np.asarray(line.get_xdata(), float)
    ys = np.asarray(line.get_ydata(), float) if y else np.zeros(len(xs))
    return True, y, extent_points(xs, ys)


def extent_points(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Up to three points whose data limits (extents and smallest positive values, as
    `Bbox.update_from_data_xy` takes them) are those of the finite points (xs, ys)."""
    with np.errstate(over="ignore", invalid="ignore"):
        finite = bool(np.isfinite(np.add.reduce(xs) + np.add.reduce(ys)))  # NaN, inf carry
    if not finite:  # (or a sum that overflowed: the exact path either way)
        ok = np.isfinite(xs) & np.isfinite(ys)
        xs, ys = xs[ok], ys[ok]
    if not len(xs):
        return np.empty((0, 2))
    x0, x1, y0, y1 = xs.min(), xs.max(), ys.min(), ys.max()
    points = [(x0, y0), (x1, y1)]
    # The smallest positive value (a log axis's limit): the smallest value where all are.
    px = x0 if x0 > 0 else (xs[xs > 0].min() if x1 > 0 else None)
    py = y0 if y0 > 0 else (ys[ys > 0].min() if y1 > 0 else None)
    if px is not None or py is not None:
        points.append((x0 if px is None else px, y0 if py is None else py))
    return np.array(points)


def fit_data_limits(ax, tracks, extra: list) -> None:
    """Set a followed chart's data limits (what autoscaling fits) from its tracks' lines and
    bands and the page's other artists' limits, as `Axes.relim` plus the bands would: from
    each track's limits kept since its last change (Track.limits). A chart with lines of its
    own (not a track's) is measured by relim."""
    tracks = list(tracks)
    own = {ln for t in tracks for ln in (t.line, t.raw, t.end, t.bad) if ln is not None}
    groups: dict[tuple[bool, bool], list[np.ndarray]] = {}
    # (`ax.lines` filters the children through a Python call each: ~100 a chart a poll)
    if [a for a in ax.get_children() if isinstance(a, Line2D) and a not in own]:
        ax.relim()
        for track in tracks:
            groups.setdefault((True, True), []).extend(track.band_xy)
    else:
        ax.dataLim.ignore(True)
        ax.dataLim.set_points(Bbox.null().get_points())
        ax.ignore_existing_data_limits = True
        for track in tracks:
            for updatex, updatey, points in track.limits:
                if len(points):
                    groups.setdefault((updatex, updatey), []).append(points)
    for artist in extra:
        if hasattr(artist, "_resplot_limits"):
            groups.setdefault((True, True), []).append(np.asarray(artist._resplot_limits))
    # Lines first, as relim then the bands: x-only points (NaN markers) with their own flags.
    for (updatex, updatey), points in sorted(groups.items(), key=lambda g: not g[0][1]):
        if points:
            ax.update_datalim(np.concatenate(points), updatex=updatex, updatey=updatey)


def shown_limits(ax) -> tuple:
    """A chart's (xlim, ylim), read quietly (a pending autoscale runs on a read)."""
    with quietly(ax):
        return tuple(ax.get_xlim()), tuple(ax.get_ylim())


@contextmanager
def quietly(ax) -> Iterator[None]:
    """Changes to a chart's series that do not mark its figure for a full draw: a window's
    page draws them over the saved axes (resplot/ui/layers.py); whoever changes limits or
    anything else under the series says so (`ax.stale = True`)."""
    callback = ax.stale_callback
    ax.stale_callback = None
    try:
        yield
    finally:
        ax.stale_callback = callback


def _crossing(x: np.ndarray, y: np.ndarray, edges: tuple[float, float]) -> np.ndarray:
    """Where a line's segments cross these x values (a zoomed range's edges), as drawn: a
    sparse series zoomed between two of its points draws a segment across the view with no
    point inside it, and the y range is to fit that segment. x in order (a line along steps or
    time: out of order, the segment found may be one of several); nothing for a segment to or
    from a non-finite point."""
    if len(x) < 2:
        return np.empty(0)
    out = []
    for edge in edges:
        # (each segment found is checked to cross: a pass over x to prove it in order cost
        # more than the rest of a zoom's y refit)
        k = int(np.searchsorted(x, edge, side="right"))
        if 0 < k < len(x) and x[k - 1] < edge < x[k]:
            (x0, x1), (y0, y1) = x[k - 1 : k + 1], y[k - 1 : k + 1]
            if np.isfinite(y0) and np.isfinite(y1):
                out.append(y0 + (y1 - y0) * (edge - x0) / (x1 - x0))
    return np.asarray(out, float)


def _widened(ax, limits: tuple[float, float]) -> tuple[float, float]:
    """A y range narrower than float noise around its value (a constant series whose means
    differ in the 15th digit: matplotlib labelled it `1e-15+3.6e-1`) widened to ±5 % of it."""
    lo, hi = limits
    mid = (lo + hi) / 2
    if ax.get_yscale() == "linear" and mid and 0 < abs(hi - lo) < 1e-9 * abs(mid):
        return (mid - 0.05 * abs(mid), mid + 0.05 * abs(mid))
    return limits


def _autoscale_key(ax, sticky_y: tuple) -> tuple:
    """What matplotlib's autoscaling of a chart's y depends on (Axes.autoscale_view): the
    data limits of the axes sharing its y, their sticky edges (`sticky_y`), the margin, the
    scale and the locator (its nonsingular rule)."""
    shared = ax.get_shared_y_axes().get_siblings(ax)
    margin = ax.margins()[1]
    sticky = sticky_y if ax.use_sticky_edges and margin else ()
    return (
        ax,
        tuple((tuple(a.dataLim.intervaly), float(a.dataLim.minposy)) for a in shared),
        sticky,
        margin,
        ax.get_yscale(),
        ax.yaxis.get_major_locator(),
        mpl.rcParams["axes.autolimit_mode"],
    )
