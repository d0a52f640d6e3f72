"""A live series drawn as a body and a tail: the body goes into the page's saved picture at a
full draw, a live poll draws the tail alone (resplot/ui/layers.py).

A poll adds points at a live series' end: in the chart's pixel columns (data/decimate.py) only
the last column or two change, but drawing the series over the saved picture stroked all of
its ~2,500 vertices again, every series of every live run (~50 of the ~60 ms a 12-run page's
series took to draw a poll). So each long solid line and each long edgeless band (a faint raw
envelope) of the live tier is cut at a chunk boundary: a multiple of CHUNK_PX from its axes'
left edge, at least MARGIN_PX left of its last point. Its part left of the boundary (the body)
is drawn at the full draw, under everything the blit draws; the rest (the tail, from the last
vertex or column at or before the boundary on) at every blit, by a twin artist of its style.

A blit is a full draw's pixels because a full draw is the same sequence: every cut made from
the state alone (the boundary from the series' own end), bodies first. Before a blit each cut
is checked: the body still the series' first vertices (a change anywhere but the end: another
level of detail, smoothing, x range), its style the same, its end still before the next
boundary, and no other series to cut (one come, one grown long); else the cuts are made again
(resplot/ui/layers.py: from the picture as it was before the bodies).
A page drawn this way differs from matplotlib drawing each series whole only where a body and
its tail meet (they overlap at one vertex or column) and where a live body lay over another
live artist drawn after it, by a level or two of antialiasing. Both parts are snapped to the
pixel grid as Agg would snap the whole series (it snaps a path of at most AUTO_SNAP_MAX
vertices whose segments are all level or upright): a short flat tail of a sloped line, snapped
on its own, was crisper than the rest of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Polygon

CHUNK_PX = 64  # bodies end on multiples of this from the axes' left edge
MARGIN_PX = 8  # ... at least this far left of the series' last point (the columns a poll changes)
MIN_VERTICES = 64  # a shorter series is drawn whole
AUTO_SNAP_MAX = 1024  # Agg snaps a path of at most this many vertices if it can (path_converters.h)
LEVEL = 1e-4  # a segment moving less than this (pixels) along x or y is upright or level to Agg


@dataclass
class Cut:
    """Where one artist was cut: the data x of its boundary, the last vertex (line) or column
    (band) of its body, the data x its end may reach before the boundary moves, its body as
    drawn (a band's: its tops, then its bottoms as the polygon holds them), its style then,
    and the twin that draws its parts."""

    split_x: float
    at: int
    ends: tuple[float, float]
    body: tuple[np.ndarray, ...]
    style: tuple
    twin: Line2D | Polygon
    snap: bool  # both parts snapped (the whole series would be)
    body_square: bool  # every segment of the body level or upright


def _style(artist) -> tuple:
    """What an artist's pixels depend on besides its data (a change: draw it whole again)."""
    if isinstance(artist, Line2D):
        return (
            artist.get_visible(),
            artist.get_color(),
            artist.get_linewidth(),
            artist.get_linestyle(),
            artist.get_marker(),
            artist.get_drawstyle(),
            artist.get_alpha(),
            artist.get_zorder(),
            artist.get_antialiased(),
            artist.get_solid_capstyle(),
            artist.get_solid_joinstyle(),
        )
    return (
        artist.get_visible(),
        tuple(artist.get_facecolor()),
        tuple(artist.get_edgecolor()),
        artist.get_linewidth(),
        artist.get_hatch(),
        artist.get_alpha(),
        artist.get_zorder(),
        artist.get_antialiased(),
    )


def _line_xy(line: Line2D) -> np.ndarray | None:
    """A long solid line's vertices, or None: not one to cut."""
    if (
        not line.get_visible()
        or line.get_linestyle() not in ("-", "solid")
        or line.get_marker() not in ("None", "none", "", " ", None)
        or line.get_drawstyle() != "default"
    ):
        return None
    xy = line.get_xydata()
    return xy if len(xy) >= MIN_VERTICES else None


def _band_halves(band: Polygon) -> tuple[np.ndarray, np.ndarray] | None:
    """A long edgeless band's tops (left to right) and bottoms as its polygon holds them
    (right to left), as tracks.py fills it; None: not one to cut."""
    if (
        not band.get_visible()
        or band.get_hatch()
        or (band.get_linewidth() > 0 and band.get_edgecolor()[3] > 0)
    ):
        return None
    xy = band.get_xy()
    if len(xy) < MIN_VERTICES:
        return None
    if len(xy) % 2:
        xy = xy[:-1]  # the closing vertex
    n = len(xy) // 2
    return xy[:n], xy[n:]


def _rising(x: np.ndarray) -> bool:
    return bool(np.all(x[1:] >= x[:-1]))


def _square(artist, *runs: np.ndarray) -> bool:
    """Whether every segment of these runs of vertices (data) is level or upright on screen,
    as Agg's auto snap asks (segments to or from a NaN vertex are not drawn)."""
    to_display = artist.get_transform()
    for run in runs:
        if len(run) < 2:
            continue
        with np.errstate(invalid="ignore"):
            p = to_display.transform(run)
            d = np.abs(np.diff(p, axis=0))
            drawn = np.isfinite(p[:-1]).all(axis=1) & np.isfinite(p[1:]).all(axis=1)
            if np.any(drawn & (d[:, 0] >= LEVEL) & (d[:, 1] >= LEVEL)):
                return False
    return True


def _vertices(artist) -> int:
    """The vertices of the path Agg draws of the whole artist."""
    return len(artist.get_xydata() if isinstance(artist, Line2D) else artist.get_xy())


def _runs(artist, at: int, tail: bool) -> tuple[np.ndarray, ...]:
    """The runs of vertices whose segments make the body (or the tail, from `at` on, with the
    segment joining a band's last top to its last bottom)."""
    if isinstance(artist, Line2D):
        xy = artist.get_xydata()
        return (xy[at:],) if tail else (xy[: at + 1],)
    top, bottom = _band_halves(artist)  # type: ignore[misc]
    n = len(top)
    if tail:
        return top[at:], bottom[: n - at], np.stack([top[-1], bottom[0]])
    return top[: at + 1], bottom[n - at - 1 :]


def _plan(ax, artist) -> tuple[float, int, tuple[float, float]] | None:
    """(boundary's data x, body's last vertex or column, the end's data x range keeping that
    boundary) of an artist's cut as its data say now; None: drawn whole."""
    if isinstance(artist, Line2D):
        xy = _line_xy(artist)
        if xy is None or not _rising(xy[:, 0]):
            return None
        x = xy[:, 0]
    elif isinstance(artist, Polygon):
        halves = _band_halves(artist)
        if halves is None:
            return None
        top, bottom = halves
        x = top[:, 0]
        if not (np.array_equal(x, bottom[::-1, 0]) and _rising(x)):
            return None
    else:
        return None
    to_display = artist.get_transform()
    end = to_display.transform((x[-1], 0.0))[0]
    if not math.isfinite(end):
        return None
    left = ax.bbox.x0
    chunks = math.floor((end - MARGIN_PX - left) / CHUNK_PX)
    if chunks <= 0:
        return None
    boundary = left + chunks * CHUNK_PX
    to_data = to_display.inverted()
    split_x, lo, hi = to_data.transform(
        [(boundary, 0.0), (boundary + MARGIN_PX, 0.0), (boundary + MARGIN_PX + CHUNK_PX, 0.0)]
    )[:, 0]
    at = int(np.searchsorted(x, split_x, side="right")) - 1
    if at < 1 or at > len(x) - 2:
        return None
    return float(split_x), at, (float(lo), float(hi))


def _body(artist, at: int) -> tuple[np.ndarray, ...]:
    if isinstance(artist, Line2D):
        return (artist.get_xydata()[: at + 1],)
    top, bottom = _band_halves(artist)  # type: ignore[misc]
    return top[: at + 1], bottom[len(top) - at - 1 :]


def _still(cut: Cut, artist) -> bool:
    """Whether an artist is cut where its data say now, its body as drawn (O(tail), and a
    comparison of the body)."""
    if _style(artist) != cut.style:
        return False
    at = cut.at
    if isinstance(artist, Line2D):
        xy = _line_xy(artist)
        if xy is None:
            return False
        x, bodies = xy[:, 0], (xy,)
        tail_ok = True
    else:
        halves = _band_halves(artist)
        if halves is None:
            return False
        top, bottom = halves
        n = len(top)
        x, bodies = top[:, 0], (top, bottom[n - at - 1 :])
        tail_ok = np.array_equal(x[at:], bottom[: n - at][::-1, 0])
    lo, hi = cut.ends
    return (
        tail_ok
        and len(x) > at + 1
        and lo <= x[-1] < hi
        and x[at + 1] > cut.split_x
        and _rising(x[at:])
        and all(
            np.array_equal(have[: len(was)], was, equal_nan=True)
            for have, was in zip(bodies, cut.body, strict=True)
        )
        and _snaps(artist, at, cut.body_square) == cut.snap
    )


def _snaps(artist, at: int, body_square: bool) -> bool:
    """Whether Agg snaps the whole artist: as it says, or (auto) at most AUTO_SNAP_MAX
    vertices, each segment level or upright (the body's known; the tail's looked at only when
    that can matter)."""
    if artist.get_snap() is not None:
        return bool(artist.get_snap())
    return (
        _vertices(artist) <= AUTO_SNAP_MAX
        and body_square
        and _square(artist, *_runs(artist, at, tail=True))
    )


def _twin(artist, snap: bool) -> Line2D | Polygon:
    twin = Line2D([], []) if isinstance(artist, Line2D) else Polygon(np.zeros((0, 2)))
    twin.update_from(artist)  # style, transform, clip box and path, visibility, alpha
    twin.set_snap(snap)  # as Agg snaps the whole artist, or not
    # In the figure, not the axes: its changes (a poll's new tail) mark nothing stale.
    twin.set_figure(artist.get_figure())
    return twin


def _set_part(twin, artist, at: int, tail: bool) -> None:
    """The twin holds the artist's body (up to vertex or column `at`) or its tail (from it)."""
    if isinstance(artist, Line2D):
        xy = artist.get_xydata()
        part = xy[at:] if tail else xy[: at + 1]
        twin.set_data(part[:, 0], part[:, 1])
        return
    top, bottom = _band_halves(artist)  # type: ignore[misc]
    n = len(top)
    if tail:
        twin.set_xy(np.concatenate([top[at:], bottom[: n - at]]))
    else:
        twin.set_xy(np.concatenate([top[: at + 1], bottom[n - at - 1 :]]))


class Tails:
    """The cuts of one page's live series, made at each full draw."""

    def __init__(self) -> None:
        self.cuts: dict[int, Cut] = {}  # id(artist) -> its cut
        self._held: list = []  # the artists cut (their ids key `cuts`)

    def clear(self) -> None:
        self.cuts, self._held = {}, []

    def cut(self, ax, artists: list) -> None:
        """At a full draw: cut these artists of one chart (the live tier's, in drawing order)
        and draw their bodies (into the picture about to be saved). Only those before the first
        visible one not cut: a body drawn early must have nothing under it that a full
        draw of the whole artists would draw over it."""
        figure = ax.get_figure()
        for artist in artists:
            plan = _plan(ax, artist)
            if plan is None:
                if artist.get_visible():
                    return
                continue
            split_x, at, ends = plan
            body = tuple(part.copy() for part in _body(artist, at))
            square = artist.get_snap() is None and _square(artist, *_runs(artist, at, tail=False))
            snap = _snaps(artist, at, square)
            twin = _twin(artist, snap)
            self.cuts[id(artist)] = Cut(split_x, at, ends, body, _style(artist), twin, snap, square)
            self._held.append(artist)
            _set_part(twin, artist, at, tail=False)
            figure.draw_artist(twin)

    def fresh(self, charts: list[tuple[object, list]]) -> bool:
        """Whether every artist of these charts (axes, live tier) is cut as the state says now
        and its body is as drawn: a blit then shows a full draw's pixels."""
        seen = 0
        for ax, artists in charts:
            for artist in artists:
                cut = self.cuts.get(id(artist))
                if cut is None:
                    if _plan(ax, artist) is not None:
                        return False  # to be cut now (a new series, one grown long)
                    if artist.get_visible():
                        break  # the cuts' end (cut() stopped there too)
                    continue
                if not _still(cut, artist):
                    return False
                seen += 1
        return seen == len(self.cuts)

    def draw(self, artist) -> bool:
        """Draw an artist's tail if it is cut (True), else nothing (False: draw it whole)."""
        cut = self.cuts.get(id(artist))
        if cut is None:
            return False
        _set_part(cut.twin, artist, cut.at, tail=True)
        artist.get_figure().draw_artist(cut.twin)
        return True
