"""Where a live poll changes a chart page's pixels, and drawing there alone.

A poll that adds points inside the followed limits changes few of a page's pixels: the live
series' tails (resplot/ui/tails.py: right of their cut), their end marks, now and then a
legend's values or a note. Layers (resplot/ui/layers.py) puts back the saved picture and draws
the live artists over it in those boxes only, and has Qt copy only them: the pixels are a full
draw's, because inside a box every artist that can touch it is drawn, whole and in the same
order, over the same saved pixels, and what they draw outside the box is put back as it was.

An artist's reach is the box of display pixels its draw may touch, padded for its stroke and
antialiasing: its data's extent for a line (with its markers), the text's or legend's box,
and for kinds whose extent matplotlib does not give cheaply or exactly (collections, patches,
images) the box it is clipped to, or the whole figure. A reach too large costs time, never
pixels.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.spines import Spine
from matplotlib.text import Text
from matplotlib.transforms import Bbox

Box = tuple[float, float, float, float]  # x0, y0, x1, y1: display pixels, y up

PAD_PX = 2.0  # antialiasing past a stroke's edge, rounding
MARKER_SNAP_PX = 1.0  # Agg moves each marker to a whole pixel


def reach(artist, renderer, figure_box: Box) -> Box | None:
    """The display pixels `artist`'s draw may touch (None: none: hidden, or nothing to draw)."""
    if not artist.get_visible():
        return None
    points = renderer.points_to_pixels(1.0)
    extent: Box | None
    try:
        if isinstance(artist, Line2D):
            # Its vertices on screen: Line2D.get_window_extent builds a Path and a Bbox around
            # the same transform (8x its cost; a live poll asks it of every end mark), and
            # leaves the stroke out.
            extent = on_screen(artist.get_transform(), artist.get_xydata())
            pad = (artist.get_linewidth() + artist.get_markeredgewidth()) * points / 2
            if artist.get_marker() not in ("None", "none", "", " ", None):
                pad += artist.get_markersize() * points / 2 + MARKER_SNAP_PX
        elif isinstance(artist, Text):
            extent = _extents(artist.get_window_extent(renderer))
            patch = artist.get_bbox_patch()
            pad = 0.0
            if patch is not None:
                extent = join(extent, _extents(patch.get_window_extent(renderer)))
                pad = patch.get_linewidth() * points / 2
        elif isinstance(artist, Spine):
            # Its edge (the ticks are the axis's, drawn under the series: its window extent
            # would lay them out, ~1 ms a spine at every full draw).
            extent = on_screen(artist.get_transform(), artist.get_path().vertices)
            pad = artist.get_linewidth() * points / 2
        elif isinstance(artist, Legend):
            extent = _extents(artist.get_window_extent(renderer))  # its box with its frame
            pad = artist.get_frame().get_linewidth() * points / 2
        else:
            return _clip_or(artist, figure_box)
    except (ValueError, TypeError, RuntimeError):
        return figure_box
    if extent is None:
        return None  # no finite vertex
    if not all(math.isfinite(v) for v in extent):
        return _clip_or(artist, figure_box)
    box = grown(extent, pad + PAD_PX)
    clip = _clip(artist)
    return box if clip is None else meet(box, clip)


def on_screen(transform, vertices) -> Box | None:
    """The box around vertices (data) on screen, their finite ones (None: none)."""
    xy = transform.transform(vertices)
    xy = xy[np.isfinite(xy).all(axis=1)]
    if not len(xy):
        return None
    (x0, y0), (x1, y1) = xy.min(axis=0), xy.max(axis=0)
    return (float(x0), float(y0), float(x1), float(y1))


def _extents(bbox) -> Box | None:
    """A matplotlib box as a Box (None: a null box, around nothing)."""
    x0, y0, x1, y1 = (float(v) for v in bbox.extents)
    return None if x0 > x1 or y0 > y1 else (x0, y0, x1, y1)


def grown(box: Box, pad: float) -> Box:
    return (box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad)


def changed(artist) -> bool:
    """Whether an artist, or one it is made of, changed since it was drawn (matplotlib's stale
    flags: a legend is not told when one of its texts changes)."""
    return artist.stale or any(changed(child) for child in artist.get_children())


def settle(artist) -> None:
    """As drawn: the artist and those it is made of not stale (an animated artist, or one of
    its children, tells no one: only a change marks anything stale)."""
    artist.stale = False
    for child in artist.get_children():
        settle(child)


def _clip(artist) -> Box | None:
    """The box an artist is clipped to (its axes'), as Agg clips: a marker or a bitmap may
    light the pixel column and row just past it (its clip is inclusive)."""
    clip = artist.get_clip_box() if artist.get_clip_on() else None
    if clip is None:
        return None
    return grown(tuple(float(v) for v in clip.extents), PAD_PX)  # type: ignore[arg-type]


def _clip_or(artist, figure_box: Box) -> Box:
    """The box an artist is clipped to, else the whole figure."""
    return _clip(artist) or figure_box


def meet(a: Box, b: Box) -> Box | None:
    """Where two boxes overlap (None: nowhere)."""
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def join(a: Box | None, b: Box | None) -> Box | None:
    """The box around both (None: neither)."""
    if a is None or b is None:
        return b if a is None else a
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def whole_pixels(box: Box, figure_box: Box) -> Box | None:
    """A box grown to whole pixels, inside the figure (None: outside it)."""
    grown = (math.floor(box[0]), math.floor(box[1]), math.ceil(box[2]), math.ceil(box[3]))
    return meet(grown, figure_box)


def disjoint(boxes: list[Box]) -> list[Box]:
    """Boxes that overlap joined into their bounding box until none does: each pixel is then
    in one box, and an artist drawn in each box it meets blends into each pixel once."""
    out = list(boxes)
    merged = True
    while merged:
        merged = False
        for i in range(len(out)):
            for j in range(i + 1, len(out)):
                if meet(out[i], out[j]) is not None:
                    out[i] = join(out[i], out[j])  # type: ignore[assignment]
                    del out[j]
                    merged = True
                    break
            if merged:
                break
    return out


def ring(outer: Box, inner: Box) -> list[Box]:
    """`outer` less `inner` (inside it) as up to four boxes: below, above, left, right."""
    x0, y0, x1, y1 = outer
    a0, b0, a1, b1 = inner
    pieces = [(x0, y0, x1, b0), (x0, b1, x1, y1), (x0, b0, a0, b1), (a1, b0, x1, b1)]
    return [p for p in pieces if p[2] > p[0] and p[3] > p[1]]


def put_back(canvas, region, box: Box) -> None:
    """Copy `box` (whole display pixels) of a saved region back into the canvas's buffer."""
    height = canvas.get_width_height(physical=True)[1]
    x0, y0, x1, y1 = (int(v) for v in box)
    # The region's rows count from the top; Agg copies a rectangle's last column and row too.
    canvas.restore_region(
        region, bbox=(x0, height - y1, x1 - 1, height - y0 - 1), xy=region.get_extents()[:2]
    )


def redraw_box(canvas, background, box: Box, reaches: list[Box], draw: Callable[[], None]) -> None:
    """Put `background` back in `box` and `draw` over it (artists whose reaches meet the box,
    drawn whole), every pixel outside the box left as it was: inside it the pixels are a full
    draw's, with no clip of Agg's (clipping a path at a box edge shifts the antialiasing of
    pixels beside the edge by a level)."""
    figure_box = (0.0, 0.0, *(float(v) for v in canvas.get_width_height(physical=True)))
    around = box
    for r in reaches:
        around = join(around, r)
    around = whole_pixels(around, figure_box) or box
    saved = canvas.copy_from_bbox(Bbox.from_extents(*around)) if around != box else None
    put_back(canvas, background, box)
    draw()
    if saved is not None:
        for piece in ring(around, box):
            put_back(canvas, saved, piece)
