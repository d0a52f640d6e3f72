"""A series' line, a live series' tail and end mark drawn through the renderer's public calls,
as Line2D.draw and Patch.draw make them, without what an artist's draw costs around them.

A live poll draws each live series' tail (resplot/ui/tails.py): a twin artist given the tail's
vertices, then drawn. For a tail of a few dozen vertices matplotlib's bookkeeping was most of
that: `set_data` and the `recache` it triggers (the vertices copied into a new Path), the
rasterization wrapper, the transformed-path cache made anew, the properties read one call
each (~60 µs of a ~150 µs tail, scripts/bench/bench_live_poll.py). Here the same renderer calls
are made with the same graphics context, path and transform, so the pixels are the artist's
own (tests/resplot/draw/test_plain_draw.py compares them); an artist this does not cover (a
dash, a marker, a hatch, path effects, a sketch, rasterized, filtered) returns False and is
drawn by matplotlib. The live tier's end marks (a live dot, a crash's cross: one point, a
marker, no line) are drawn the same way (`draw_mark`), ~8 a poll.

Every series' own lines are PlainLines, drawn the same way from the data as set: a zoom draws
~100 of them anew, and Line2D.draw's recache (the data stacked and copied, a Path made, the
transformed-path cache made anew) and its per-property calls were half of a line's draw
(scripts/bench/bench_zoom_page.py).
"""

from __future__ import annotations

from numbers import Real

import matplotlib as mpl
import numpy as np
from matplotlib import cbook
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Polygon
from matplotlib.path import Path

# Line2D draws only the part of a longer line sorted by x that lies inside the view, and one
# vertex past each end (its subslice): the same segments in view, but the path Agg simplifies
# starts at another vertex, so drawn from exactly those vertices here too.
SUBSLICE_MIN = 1000
_PLAIN = ("None", "none", "", " ", None)


def _plain(renderer, artist) -> bool:
    """Nothing about the artist (or the renderer: Agg's, the window's) that its own draw
    would do differently from a path drawn."""
    return (
        isinstance(renderer, RendererAgg)
        and artist.get_visible()
        and not artist.get_path_effects()
        and artist.get_sketch_params() is None
        and not artist.get_rasterized()
        and artist.get_agg_filter() is None
    )


def _gc(renderer, artist):
    """A graphics context clipped as the artist's draw clips it (Artist._set_gc_clip)."""
    gc = renderer.new_gc()
    if artist.get_clip_on():
        if artist.get_clip_box() is not None:
            gc.set_clip_rectangle(artist.get_clip_box())
        gc.set_clip_path(artist.get_clip_path())
    else:
        gc.set_clip_rectangle(None)
        gc.set_clip_path(None)
    gc.set_url(artist.get_url())
    gc.set_antialiased(artist.get_antialiased())
    gc.set_snap(artist.get_snap())
    return gc


def draw_line(renderer, line: Line2D, xy: np.ndarray) -> bool:
    """Draw `line` through the vertices `xy` (data, (n, 2) floats) as its draw would with that
    data set: its stroke (solid, or dashed where its pattern is known: `dash_pattern`) and its
    markers (`_markers`), in that order (True); else nothing (False)."""
    if not _plain(renderer, line) or line.get_drawstyle() != "default":
        return False
    style = line.get_linestyle()
    stroked = style not in _PLAIN
    dashes = dash_pattern(line) if stroked and style not in ("-", "solid") else None
    marked = line.get_marker() not in _PLAIN and line.get_markersize() > 0
    if (stroked and style not in ("-", "solid") and dashes is None) or (
        marked and not _markers_covered(line)
    ):
        return False
    # (where the drawn part starts: Line2D.contains reads it)
    xy, line.ind_offset = _in_view(line, xy) if len(xy) > SUBSLICE_MIN else (xy, 0)
    transform = line.get_transform()
    path = transform.transform_path_non_affine(Path(xy))
    if not len(path.vertices):
        return True  # (nothing to stroke or mark, as Line2D.draw)
    every = line.get_markevery() if marked else None
    if (
        every is not None
        and len(every)
        and not -len(path.vertices) <= min(every) <= max(every) < len(path.vertices)
    ):
        return False  # (Line2D's own draw says what is wrong)
    affine = transform.get_affine().frozen()
    if stroked:
        gc = _gc(renderer, line)
        width = line.get_linewidth()
        gc.set_linewidth(width)
        if dashes is None:
            gc.set_joinstyle(line.get_solid_joinstyle())
            gc.set_capstyle(line.get_solid_capstyle())
        else:
            gc.set_joinstyle(line.get_dash_joinstyle())
            gc.set_capstyle(line.get_dash_capstyle())
        gc.set_foreground(to_rgba(line.get_color(), line.get_alpha()), isRGBA=True)
        # (a zero-width line's dashes would all be zero: as Line2D, none)
        gc.set_dashes(*(dashes if dashes is not None and width > 0 else (0, None)))
        renderer.draw_path(gc, path, affine)
        gc.restore()
    if marked:
        points = path if every is None else Path(path.vertices[np.asarray(every, int)])
        _markers(renderer, line, points, affine)
    return True


def dash_pattern(line: Line2D) -> tuple[float, list[float]] | None:
    """A dashed PlainLine's (offset, dashes) in points, as Line2D strokes it; None where not
    known (another kind of line, a pattern given as numbers or copied by `update_from`)."""
    named = getattr(line, "plain_dashes", None)
    if named is None or named[0] != line.get_linestyle() or line.get_gapcolor() is not None:
        return None
    _style, offset, dashes, scaled = named
    width = line.get_linewidth() if scaled else 1.0
    return offset * width, [d * width for d in dashes]


def _named_dashes(line: Line2D, style) -> tuple | None:
    """(the style as the line reads it, offset, dashes, scaled by its width) for a named
    dashed style, from the rcParams matplotlib reads for it at the same moment (the
    linestyle's documented patterns); None for any other."""
    full = cbook.ls_mapper.get(style, style) if isinstance(style, str) else None
    if full not in ("dashed", "dashdot", "dotted"):
        return None
    dashes = [float(d) for d in mpl.rcParams[f"lines.{full}_pattern"]]
    return (line.get_linestyle(), 0.0, dashes, bool(mpl.rcParams["lines.scale_dashes"]))


def _markers_covered(line: Line2D) -> bool:
    """Markers `_markers` draws as Line2D.draw would: a fill of one part, at every point or
    at listed ones, edge and face alike in alpha (or no face)."""
    every = line.get_markevery()
    if every is not None and not (
        isinstance(every, list | np.ndarray)
        and all(isinstance(i, int | np.integer) and not isinstance(i, bool) for i in every)
    ):
        return False
    face = line.get_markerfacecolor()
    alpha = line.get_alpha()
    # (an "auto" edge takes the face's alpha: matplotlib's own rule, not readable from here)
    faceless = isinstance(face, str) and face.lower() == "none"
    if not faceless and to_rgba(line.get_markeredgecolor(), alpha)[3] != to_rgba(face, alpha)[3]:
        return False
    return _style(line).get_alt_path() is None


def _in_view(line: Line2D, xy: np.ndarray) -> tuple[np.ndarray, int]:
    """The vertices of a line of more than SUBSLICE_MIN that Line2D.draw strokes, and the
    index of the first: where its x are sorted (NaN aside, at least one number) and it is
    drawn clipped in data coordinates of a linear rectilinear x axis, those between the x
    bounds and one past each end (NaN x filled in between their neighbours to find them);
    else all of them (Line2D.recache and draw)."""
    ax = line.axes
    if (
        ax is None
        or ax.name != "rectilinear"
        or ax.get_xscale() != "linear"
        or line.get_markevery() is not None
        or not line.get_clip_on()
        or line.get_transform() != ax.transData
    ):
        return xy, 0
    x = xy[:, 0]
    nan = np.isnan(x)
    numbers = x[~nan]
    if not len(numbers) or bool((numbers[1:] < numbers[:-1]).any()):
        return xy, 0
    if len(numbers) < len(x):
        at = np.arange(len(x))
        x = x.copy()
        x[nan] = np.interp(at[nan], at[~nan], numbers)
    x0, x1 = ax.get_xbound()
    start = max(int(x.searchsorted(x0, "left")) - 1, 0)
    return xy[start : int(x.searchsorted(x1, "right")) + 1], start


def _float_column(values) -> bool:
    # (exactly an ndarray: a masked array's masked values are NaN to Line2D)
    return type(values) is np.ndarray and values.dtype == np.float64 and values.ndim == 1


class PlainLine(Line2D):
    """A Line2D that, where it is a plain solid line of float data on Agg's renderer with no
    units on its axes, is drawn by `draw_line` from its data as set; else by Line2D.draw.
    Left to matplotlib, what reads its data (get_xydata, get_path) works it out as before.

    A named dashed style's pattern is noted where Line2D works its own out (at a change of
    style or width, from the rcParams then), as `plain_dashes`: Line2D does not say it."""

    plain_dashes: tuple | None = None

    def set_linestyle(self, ls) -> None:
        super().set_linestyle(ls)
        self.plain_dashes = _named_dashes(self, ls)

    def set_linewidth(self, w) -> None:
        super().set_linewidth(w)
        if self.plain_dashes is not None:  # (whether dashes scale with the width: read now)
            self.plain_dashes = (*self.plain_dashes[:3], bool(mpl.rcParams["lines.scale_dashes"]))

    def draw(self, renderer) -> None:
        if self.get_visible():
            x, y = self.get_xdata(orig=True), self.get_ydata(orig=True)
            ax = self.axes
            if (
                _float_column(x)
                and _float_column(y)
                and len(x) == len(y)
                and (ax is None or not (ax.xaxis.have_units() or ax.yaxis.have_units()))
                and draw_line(renderer, self, np.column_stack((x, y)))
            ):
                self.stale = False  # as drawn (Line2D.draw's last step)
                return
        super().draw(renderer)


def patch_style(gc, patch, linewidth: float) -> None:
    """Set `gc` as a solid patch's draw sets it for its edge (Patch's
    _draw_paths_with_artist_properties), its clip aside: `linewidth` 0 where the edge is not
    drawn (an edgeless band, a transparent spine)."""
    gc.set_linewidth(linewidth)
    gc.set_capstyle(patch.get_capstyle())
    gc.set_joinstyle(patch.get_joinstyle())
    gc.set_antialiased(patch.get_antialiased())
    gc.set_snap(patch.get_snap())
    gc.set_alpha(patch.get_alpha())
    gc.set_foreground(patch.get_edgecolor(), isRGBA=True)
    gc.set_dashes(0, None)


def _closed(xy: np.ndarray) -> Path:
    """The path Polygon.set_xy makes of a closed polygon's vertices: its first vertex again at
    its end unless it is there already, and a CLOSEPOLY code."""
    if len(xy) == 1 or (len(xy) > 1 and (xy[0] != xy[-1]).any()):
        xy = np.concatenate([xy, xy[:1]])
    return Path(xy, closed=True)


def draw_band(renderer, band: Polygon, xy: np.ndarray) -> bool:
    """Draw `band` as a closed polygon through `xy` (data) as its draw would with those
    vertices set: an edgeless, unhatched fill (True), else nothing (False)."""
    edge = band.get_edgecolor()
    if (
        not _plain(renderer, band)
        or not band.get_closed()
        or band.get_hatch()
        or (band.get_linewidth() > 0 and edge[3] > 0)
    ):
        return False
    transform = band.get_transform()
    path = transform.transform_path_non_affine(_closed(xy))
    gc = _gc(renderer, band)
    patch_style(gc, band, 0.0)  # an edgeless patch
    face = band.get_facecolor()
    renderer.draw_path(gc, path, transform.get_affine(), face if face[3] else None)
    gc.restore()
    return True


_STYLES: dict[tuple, MarkerStyle] = {}  # (marker, fillstyle) -> its MarkerStyle, made once


def _style(line: Line2D) -> MarkerStyle:
    key = (line.get_marker(), line.get_fillstyle())
    marker = _STYLES.get(key)
    if marker is None:
        marker = _STYLES[key] = MarkerStyle(*key)
    return marker


def _markers(renderer, line: Line2D, points: Path, affine) -> None:
    """The line's markers at `points` (display coordinates but `affine`), as Line2D.draw
    draws them (`_markers_covered`)."""
    alpha = line.get_alpha()
    marker = _style(line)
    gc = _gc(renderer, line)
    gc.set_linewidth(line.get_markeredgewidth())
    gc.set_foreground(to_rgba(line.get_markeredgecolor(), alpha), isRGBA=True)
    size = renderer.points_to_pixels(line.get_markersize())
    snap = marker.get_snap_threshold()
    gc.set_snap(size >= snap if isinstance(snap, Real) else snap)
    gc.set_joinstyle(marker.get_joinstyle())
    gc.set_capstyle(marker.get_capstyle())
    path, scaled = marker.get_path(), marker.get_transform().scale(size)
    if marker.get_marker() == ",":
        gc.set_linewidth(0)
        scaled = marker.get_transform()
    face = to_rgba(line.get_markerfacecolor(), alpha)
    renderer.draw_markers(gc, path, scaled, points, affine, face)
    gc.restore()


def draw_mark(renderer, line: Line2D) -> bool:
    """Draw a one-point marker line (an end mark: no line) as its draw would (True), else
    nothing (False)."""
    xy = line.get_xydata()
    if (
        line.get_linestyle() not in _PLAIN
        or line.get_marker() in _PLAIN
        or len(xy) != 1
        or line.get_markevery() not in (None, [0])
        or not draw_line(renderer, line, np.asarray(xy, float))
    ):
        return False
    line.stale = False  # as drawn (Line2D.draw's last step)
    return True


class PlainBand(Polygon):
    """A Polygon that, where it is an edgeless, unhatched fill on Agg's renderer, is drawn by
    `draw_band` from its vertices as set (a zoom draws a faint band for each smoothed
    series: Patch.draw's property calls were a sixth of one); else by Polygon.draw."""

    def draw(self, renderer) -> None:
        if self.get_visible() and draw_band(renderer, self, self.get_xy()):
            self.stale = False  # as drawn (Patch.draw's last step)
            return
        super().draw(renderer)
