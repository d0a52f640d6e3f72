"""A live series drawn as a body and a tail: the body goes into the page's saved picture at a
full draw, a live poll draws the tail alone (resplot/ui/layers.py).

A poll adds points at a live series' end: in the chart's pixel columns (data/decimate.py) only
the last column or two change, but drawing the series over the saved picture stroked all of
its vertices again, every series of every live run: for raw lines (a per-pixel min/max
zig-zag, ~2,300 vertices) 387-435 ms a poll of 12 live runs at 1280×800, against 106-123 ms
drawing tails (docs/benchmarks/viewer.md; a smoothed curve's few hundred vertices cost about
what matplotlib spends around any artist's draw, whole or tail). So each long solid line and
each long edgeless band (a faint raw envelope) of the live tier is cut at a chunk boundary: a
whole pixel, a multiple of CHUNK_PX from its axes' left edge, at least MARGIN_PX left of its
last point. Its part left of the boundary (the body) is drawn at the full draw, under
everything the blit draws; the rest (the tail) at every blit, each by a twin artist of its
style clipped at the boundary. Each part holds its vertices (a band: its columns) up to PAD_PX
past the boundary, so that every pixel is stroked or filled as the whole series would be
there, joins included; the clip gives each pixel column to one of them (a body ending at the
boundary and a tail starting there left a faint seam in a dense zig-zag: two caps instead of
a join).

A blit is a full draw's pixels because a full draw is the same sequence: every cut made from
the state alone (the boundary from the series' own end), bodies first. Before a blit each cut
is checked: the body still the series' first vertices (a change anywhere but the end: another
level of detail, smoothing, x range), its style the same, its end still before the next
boundary, and no other series to cut (one come, one grown long); else the cuts are made again
(resplot/ui/layers.py: from the picture as it was before the bodies).

A page drawn this way differs from matplotlib drawing each series whole only by a level or so
of antialiasing: at the clip, and where a part is simplified otherwise than the whole
(matplotlib leaves out vertices within 1/9 pixel of a straight run in a path of 128 or more).
Both parts are snapped to the pixel grid as Agg would snap the whole series (it snaps a path of
at most AUTO_SNAP_MAX vertices whose segments are all level or upright): a short flat tail of a
sloped line, snapped on its own, was crisper than the rest of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Polygon
from matplotlib.transforms import Bbox

from resplot.draw.plain_draw import PlainLine, draw_band, draw_line
from resplot.ui.reach import grown, on_screen

# Bodies end on multiples of CHUNK_PX from the axes' left edge. A poll draws a tail of
# MARGIN_PX to MARGIN_PX + CHUNK_PX columns: each of a raw series' is four vertices of
# zig-zag for Agg to stroke, ~0.6 ms a 40-column tail on the System page. A series' end passing
# a boundary cuts the page's live series again (their bodies drawn): at 16 rather than 64 four
# times as often, which costs less than the longer tails did even for a run whose x range
# grows 0.5 % a poll (docs/benchmarks/viewer.md, stop 66).
CHUNK_PX = 16
MARGIN_PX = 8  # ... at least this far left of the series' last point (the columns a poll changes)
MIN_VERTICES = 64  # a shorter series is drawn whole
PAD_PX = 3  # each part reaches this far past the boundary (half a stroke, its join, antialias)
AUTO_SNAP_MAX = 1024  # Agg snaps a path of at most this many vertices if it can (path_converters.h)
LEVEL = 1e-4  # a segment moving less than this (pixels) along x or y is upright or level to Agg
PROBE_VERTICES = 16  # _square looks at these first


@dataclass
class Cut:
    """Where one artist was cut: its boundary (display x, a whole pixel), the last vertex (line)
    or column (band) of its body and the first of its tail, the data x its end may reach
    before the boundary moves, its body as drawn (a band's: its tops and its bottoms, left to
    right), its style then, the twins that draw its parts, and the snap they draw with."""

    boundary: float
    body_end: int
    tail_start: int
    ends: tuple[float, float]
    body: tuple[np.ndarray, ...]
    style: tuple
    twins: tuple[Line2D | Polygon, Line2D | Polygon]  # the body's, the tail's
    snap: bool  # both parts snapped (the whole series would be)
    # every segment of the body level or upright; None: not looked at (too many vertices for
    # Agg to snap the artist then)
    body_square: bool | None


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


def _columns(artist) -> tuple[np.ndarray, ...] | None:
    """A cuttable artist's vertices, one row a column, as parallel arrays: a long solid line's
    (x, y) rows; a long edgeless band's tops and bottoms, left to right (as tracks.py fills
    it); None: not one to cut."""
    if isinstance(artist, Line2D):
        if (
            not artist.get_visible()
            or artist.get_linestyle() not in ("-", "solid")
            or artist.get_marker() not in ("None", "none", "", " ", None)
            or artist.get_drawstyle() != "default"
        ):
            return None
        xy = artist.get_xydata()
        return (xy,) if len(xy) >= MIN_VERTICES else None
    if isinstance(artist, Polygon):
        if (
            not artist.get_visible()
            or artist.get_hatch()
            or (artist.get_linewidth() > 0 and artist.get_edgecolor()[3] > 0)
        ):
            return None
        xy = artist.get_xy()
        if len(xy) < MIN_VERTICES:
            return None
        if len(xy) % 2:
            xy = xy[:-1]  # the closing vertex
        n = len(xy) // 2
        return xy[:n], xy[n:][::-1]
    return None


def _rising(x: np.ndarray) -> bool:
    return bool(np.all(x[1:] >= x[:-1]))


def _square(artist, *runs: np.ndarray) -> bool:
    """Whether every segment of these runs of vertices (data) is level or upright on screen,
    as Agg's auto snap asks (segments to or from a NaN vertex are not drawn)."""
    to_display = artist.get_transform()
    # A series' first few segments nearly always hold a slanted one: looked at first, the
    # rest only when they do not (every full draw asks this of each live series).
    for part in (slice(0, PROBE_VERTICES), slice(None)):
        for run in runs:
            if _slanted(to_display, run[part]):
                return False
    return True


def _slanted(to_display, run: np.ndarray) -> bool:
    """Whether a segment of this run of vertices is neither level nor upright on screen."""
    if len(run) < 2:
        return False
    with np.errstate(invalid="ignore"):
        p = to_display.transform(run)
        d = np.abs(p[1:] - p[:-1])
    # A segment is drawn where both ends are finite, which is where its run is (NaN and inf
    # compare false against inf).
    return bool(((d >= LEVEL) & (d < np.inf)).all(axis=1).any())


def _runs(columns: tuple[np.ndarray, ...], part: slice) -> tuple[np.ndarray, ...]:
    """The runs of vertices whose segments a part draws (a band's right end joins its last
    top to its last bottom)."""
    runs = tuple(c[part] for c in columns)
    if len(columns) == 2 and part.stop is None:
        runs += (np.stack([columns[0][-1], columns[1][-1]]),)
    return runs


def _vertices(artist) -> int:
    return len(artist.get_xydata() if isinstance(artist, Line2D) else artist.get_xy())


def _snaps(artist, columns, tail_start: int, body_square: bool | None) -> bool:
    """Whether Agg snaps the whole artist: as it says, or (auto) at most AUTO_SNAP_MAX
    vertices, each segment level or upright (the body's known; the tail's looked at only when
    that can matter)."""
    if artist.get_snap() is not None:
        return bool(artist.get_snap())
    return bool(
        _vertices(artist) <= AUTO_SNAP_MAX
        and body_square
        and _square(artist, *_runs(columns, slice(tail_start, None)))
    )


Plan = tuple[float, int, int, tuple[float, float]]


def _plan(ax, artist, columns: tuple[np.ndarray, ...] | None) -> Plan | None:
    """(boundary, body's last vertex or column, tail's first, the end's data x range keeping
    that boundary) of an artist's cut as its data (`columns`: _columns) say now; None: drawn
    whole."""
    return _plans(ax, [(artist, columns)])[0]


def _plans(ax, items: list[tuple[object, tuple[np.ndarray, ...] | None]]) -> list[Plan | None]:
    """_plan of each (artist, columns) of one chart: the artists of one transform (all of a
    chart's, as a rule) taken to the screen and back together (two transforms of a few points
    cost what the rest of a plan does, ~40 µs an artist)."""
    out: list[Plan | None] = [None] * len(items)
    # id(transform) -> (it, [(item, its x)])
    groups: dict[int, tuple[object, list[tuple[int, np.ndarray]]]] = {}
    for k, (artist, columns) in enumerate(items):
        if columns is None:
            continue
        x = columns[0][:, 0]
        if not _rising(x) or (len(columns) == 2 and not np.array_equal(x, columns[1][:, 0])):
            continue
        to_display = artist.get_transform()
        groups.setdefault(id(to_display), (to_display, []))[1].append((k, x))
    left = ax.bbox.x0
    for to_display, xs_of in groups.values():
        lasts = [x[-1] for _k, x in xs_of]
        ends = to_display.transform(np.column_stack([lasts, np.zeros(len(lasts))]))[:, 0]
        with np.errstate(invalid="ignore"):
            chunks = np.floor((ends - MARGIN_PX - left) / CHUNK_PX)
        keep = np.isfinite(ends) & (chunks > 0)
        if not keep.any():
            continue
        xs_of, chunks = [kx for kx, kept in zip(xs_of, keep, strict=True) if kept], chunks[keep]
        at = left + chunks * CHUNK_PX
        boundaries = np.round(at)
        probes = np.column_stack(
            [boundaries - PAD_PX, boundaries + PAD_PX, at + MARGIN_PX, at + CHUNK_PX + MARGIN_PX]
        ).ravel()
        xs = to_display.inverted().transform(np.column_stack([probes, np.zeros(len(probes))]))
        for (k, x), boundary, (low, high, lo, hi) in zip(
            xs_of, boundaries, xs[:, 0].reshape(-1, 4), strict=True
        ):
            tail_start = int(np.searchsorted(x, low, side="right")) - 1  # the last at or before
            body_end = int(np.searchsorted(x, high, side="left"))  # the first at or past it
            if tail_start >= 1 and body_end <= len(x) - 2:
                out[k] = (float(boundary), body_end, tail_start, (float(lo), float(hi)))
    return out


def _still(cut: Cut, artist) -> bool:
    """Whether an artist is cut where its data say now, its body as drawn (O(tail), and a
    comparison of the body)."""
    if _style(artist) != cut.style:
        return False
    columns = _columns(artist)
    if columns is None:
        return False
    x = columns[0][:, 0]
    end, tail = cut.body_end, slice(cut.tail_start, None)
    lo, hi = cut.ends
    return (
        len(x) > end + 1
        and lo <= x[-1] < hi
        and _rising(x[tail])
        and (len(columns) == 1 or np.array_equal(x[tail], columns[1][tail, 0]))
        and all(
            _same_bits(have[: end + 1], was) for have, was in zip(columns, cut.body, strict=True)
        )
        and _snaps(artist, columns, cut.tail_start, cut.body_square) == cut.snap
        # a body not looked at, of an artist Agg may snap now: cut it again
        and not (
            cut.body_square is None
            and artist.get_snap() is None
            and _vertices(artist) <= AUTO_SNAP_MAX
        )
    )


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays hold the same bytes (a copy and a memcmp; a value kept but written
    otherwise, -0.0 for 0.0 or another NaN, only makes the cut again). np.array_equal with NaN
    equal made six passes over each body."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _made_from(artist, style: tuple) -> tuple:
    """What a twin copies from its artist (update_from): its style (_style) and where it
    draws."""
    extra = (
        ()
        if isinstance(artist, Line2D)
        else (artist.get_fill(), artist.get_joinstyle(), artist.get_capstyle())
    )
    return (
        style,
        *extra,
        artist.get_transform(),
        artist.get_clip_path(),
        artist.get_clip_on(),
        artist.get_figure(),
    )


def _twin(artist) -> Line2D | Polygon:
    twin = PlainLine([], []) if isinstance(artist, Line2D) else Polygon(np.zeros((0, 2)))
    return _styled(twin, artist)


def _styled(twin, artist) -> Line2D | Polygon:
    """The twin drawing as its artist does: its style, transform, clip box and path,
    visibility and alpha. (Its clip box and snap are set by each cut, its data by each draw:
    a twin restyled is one made anew.)"""
    twin.update_from(artist)
    # In the figure, not the axes: its changes (a poll's new tail) mark nothing stale.
    twin.set_figure(artist.get_figure())
    return twin


def _set_part(twin, columns: tuple[np.ndarray, ...], part: slice) -> None:
    """The twin holds these columns of the artist's."""
    if len(columns) == 1:
        xy = columns[0][part]
        twin.set_data(xy[:, 0], xy[:, 1])
    else:
        top, bottom = columns
        twin.set_xy(np.concatenate([top[part], bottom[part][::-1]]))


class Tails:
    """The cuts of one page's live series, made at each full draw."""

    def __init__(self) -> None:
        self.cuts: dict[int, Cut] = {}  # id(artist) -> its cut
        self._held: list = []  # the artists cut (their ids key `cuts`)
        # id(artist) -> (the artist, what its twins copied, its twins): kept from one full draw
        # to the next (a twin's making and styling cost ~0.2 ms; 112 of them a full draw of a
        # 12-run page all live).
        self._twins: dict[int, tuple[object, tuple, tuple]] = {}

    def clear(self, twins: bool = False) -> None:
        """Forget the cuts (a full draw makes them again); `twins`: their twins too (the page
        given back). The twins of artists no longer in a figure go either way; those of an
        artist left uncut by a draw are kept for the next that cuts it (a zoom in leaves a
        live series too short to cut, the zoom back out cut it again: ~9 twins made a zoom
        of the Training page)."""
        kept: dict[int, tuple[object, tuple, tuple]] = {}
        if not twins:
            kept = {k: v for k, v in self._twins.items() if v[0].get_figure(root=True) is not None}
        self.cuts, self._held, self._twins = {}, [], kept

    def _twins_of(self, artist, style: tuple, snap: bool, boundary: float) -> tuple:
        """The artist's twins (body, tail): last cut's where what they copy is the same, with
        this cut's snap and clips (the artist's clip box, left and right of the boundary)."""
        made = _made_from(artist, style)
        kept = self._twins.get(id(artist))
        figure = made[-1]  # a twin is put in its artist's figure once (set_figure)
        if kept is None or kept[0] is not artist or kept[1][-1] is not figure:
            twins = (_twin(artist), _twin(artist))
        else:
            # Restyled in place where the series was (a run highlighted fades the others, a
            # run ended moves to the settled tier): made anew, ~970 twins' MarkerStyles a
            # minute were cyclic garbage in the soak (each holds a bound method of itself),
            # for every full collector pass to free.
            twins = kept[2]
            if kept[1] != made:
                for twin in twins:
                    _styled(twin, artist)
        self._twins[id(artist)] = (artist, made, twins)
        clip = artist.get_clip_box() or artist.get_figure().bbox
        x0, y0, x1, y1 = clip.extents
        for twin, (left, right) in zip(twins, ((x0, boundary), (boundary, x1)), strict=True):
            twin.set_snap(snap)  # as Agg snaps the whole artist, or not
            twin.set_clip_box(Bbox.from_extents(left, y0, right, y1))
        return twins

    def cut(self, ax, artists: list) -> None:
        """At a full draw: cut these artists of one chart (the live tier's, in drawing order)
        and draw their bodies (into the picture about to be saved). Only those before the first
        visible one not cut: a body drawn early must have nothing under it that a full
        draw of the whole artists would draw over it."""
        figure = ax.get_figure()
        items = [(artist, _columns(artist)) for artist in artists]
        for (artist, columns), plan in zip(items, _plans(ax, items), strict=True):
            if plan is None or columns is None:
                if artist.get_visible():
                    return
                continue
            boundary, body_end, tail_start, ends = plan
            body = slice(None, body_end + 1)
            # Whether the body is square matters only where Agg may snap the whole artist:
            # looking cost a transform of every vertex at each full draw.
            square = (
                None
                if artist.get_snap() is not None or _vertices(artist) > AUTO_SNAP_MAX
                else _square(artist, *_runs(columns, body))
            )
            snap = _snaps(artist, columns, tail_start, square)
            style = _style(artist)
            twins = self._twins_of(artist, style, snap, boundary)
            kept = tuple(c[body].copy() for c in columns)
            self.cuts[id(artist)] = Cut(
                boundary, body_end, tail_start, ends, kept, style, twins, snap, square
            )
            self._held.append(artist)
            _set_part(twins[0], columns, body)
            figure.draw_artist(twins[0])

    def fresh(self, charts: list[tuple[object, list]]) -> bool:
        """Whether every artist of these charts (axes, live tier) is cut as the state says now
        and its body is as drawn: a blit then shows a full draw's pixels."""
        seen = 0
        for ax, artists in charts:
            for artist in artists:
                cut = self.cuts.get(id(artist))
                if cut is None:
                    if _plan(ax, artist, _columns(artist)) is not None:
                        return False  # to be cut now (a new series, one grown long)
                    if artist.get_visible():
                        break  # the cuts' end (cut() stopped there too)
                    continue
                if not _still(cut, artist):
                    return False
                seen += 1
        return seen == len(self.cuts)

    def tail_box(self, artist) -> tuple[float, float, float, float] | None:
        """The display box a cut artist's tail may touch (None: not cut): right of its
        boundary, inside its clip, around its vertices from the tail's first on, padded by its
        stroke (a miter join reaches twice its width out) and antialiasing."""
        cut = self.cuts.get(id(artist))
        if cut is None:
            return None
        clip = tuple(float(v) for v in cut.twins[1].get_clip_box().extents)
        columns = _columns(artist)
        tail = None
        if columns is not None:
            with np.errstate(invalid="ignore"):
                tail = on_screen(
                    artist.get_transform(), np.concatenate([c[cut.tail_start :] for c in columns])
                )
        if tail is not None:
            _, low, right, high = grown(
                tail, 2.0 * artist.get_linewidth() * artist.get_figure().dpi / 72.0
            )
            x0, y0, x1, y1 = clip
            clip = (x0, max(y0, low), min(x1, right), min(y1, high))
        return grown(clip, PAD_PX)  # type: ignore[arg-type]

    def draw(self, artist) -> bool:
        """Draw an artist's tail if it is cut (True), else nothing (False: draw it whole). One
        changed since its cut so that it has no tail there (a refresh between a draw's
        pieces: a few points now, hidden, dashed) is drawn whole; the present that refresh
        asked for cuts it again once the draw is done (Layers.after_pieces)."""
        cut = self.cuts.get(id(artist))
        if cut is None:
            return False
        columns = _columns(artist)
        if columns is None or len(columns[0]) <= cut.tail_start:
            return False
        tail, part = cut.twins[1], slice(cut.tail_start, None)
        figure = artist.get_figure()
        renderer = figure.canvas.get_renderer()
        # Drawn from the columns as its twin would draw them (resplot/draw/plain_draw.py),
        # without setting them on it first; else given them and drawn by matplotlib.
        if len(columns) == 1:
            drawn = draw_line(renderer, tail, columns[0][part])
        else:
            top, bottom = columns
            drawn = draw_band(renderer, tail, np.concatenate([top[part], bottom[part][::-1]]))
        if not drawn:
            _set_part(tail, columns, part)
            figure.draw_artist(tail)
        return True
