"""Where an artist's draw can touch pixels, and drawing within a box (resplot/ui/reach.py): a
reach too small would leave a stale pixel on screen at the next live poll or miss an artist
that draws into a box. Real Agg canvases, no window."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Polygon

from resplot.ui.reach import disjoint, meet, reach, redraw_box, ring, whole_pixels


def _figure():
    fig = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    return fig, ax


def _artists(ax) -> dict[str, object]:
    """One of each kind a chart's live tier holds (lines with markers and a dash, texts with and
    without a box, a legend, spines, collections, a polygon), some reaching past the axes."""
    out = {}
    (out["line"],) = ax.plot([1, 4, 9.9], [2, 8, 9.9], linewidth=3.0)
    (out["marker"],) = ax.plot([5.02], [5.37], "X", markersize=9, markeredgewidth=1.6)
    (out["cross"],) = ax.plot([9.95], [0.1], "x", markersize=6, markeredgewidth=1.6)
    (out["dashed"],) = ax.plot([2, 7], [1, 1.5], "--", linewidth=1.0, marker="o")
    out["note"] = ax.text(9.8, 0.3, "min–max per 512 steps", ha="right", fontsize=7)
    out["boxed"] = ax.text(0.2, 9.5, "boxed", bbox={"facecolor": "w", "edgecolor": "k"})
    out["outside"] = ax.text(10.5, 5, "past the right edge", clip_on=False)
    out["legend"] = ax.legend(handles=[out["line"]], labels=["a run  2.447"], loc="lower right")
    out["lines"] = ax.add_collection(LineCollection([[(3, 0), (3, 10)], [(6, 0), (6, 10)]]))
    out["polys"] = ax.add_collection(PolyCollection([[(1, 1), (2, 3), (3, 1)]], alpha=0.5))
    out["polygon"] = ax.add_patch(Polygon([(6, 6), (9, 7), (8, 9)], alpha=0.3))
    for side, spine in ax.spines.items():
        out[f"spine {side}"] = spine
    return out


def _alone(fig, artist) -> np.ndarray:
    """The pixels (rows top first) `artist` changes when drawn alone over a blank canvas."""
    canvas = fig.canvas
    renderer = canvas.get_renderer()
    renderer.clear()
    blank = np.asarray(renderer.buffer_rgba()).copy()
    artist.draw(renderer)
    return (np.asarray(renderer.buffer_rgba()) != blank).any(axis=2)


def test_every_pixel_an_artist_draws_lies_within_its_reach():
    fig, ax = _figure()
    artists = _artists(ax)
    fig.canvas.draw()  # laid out as the window's full draw lays them out
    renderer = fig.canvas.get_renderer()
    height = int(renderer.height)
    whole = (0.0, 0.0, float(renderer.width), float(height))
    for name, artist in artists.items():
        box = reach(artist, renderer, whole)
        assert box is not None, name
        x0, y0, x1, y1 = whole_pixels(box, whole)
        drawn = _alone(fig, artist)
        assert drawn.any(), name
        inside = np.zeros_like(drawn)
        inside[height - int(y1) : height - int(y0), int(x0) : int(x1)] = True
        assert not (drawn & ~inside).any(), f"{name} draws outside its reach"
        # ... and the reach is about the artist, not the figure (the collections and the
        # polygon are bounded by their axes' box)
        assert (x1 - x0) * (y1 - y0) < 0.9 * renderer.width * height, name


def test_a_hidden_artist_or_one_without_a_finite_vertex_reaches_nothing():
    fig, ax = _figure()
    (hidden,) = ax.plot([1, 2], [1, 2])
    hidden.set_visible(False)
    (nan,) = ax.plot([np.nan, np.nan], [1, 2])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    whole = (0.0, 0.0, float(renderer.width), float(renderer.height))
    assert reach(hidden, renderer, whole) is None
    assert reach(nan, renderer, whole) is None


@pytest.mark.parametrize("box", [(100, 80, 300, 260), (0, 0, 241, 400), (333, 17, 600, 399)])
def test_a_box_redrawn_is_a_full_draws_pixels_there_and_touches_nothing_else(box):
    """The artists that reach into the box drawn whole over the saved picture put back there:
    inside the box a full draw's pixels (lines along its edges too: a clip there shifted their
    antialiasing by a level), outside it the frame as it was."""
    fig, ax = _figure()
    artists = list(_artists(ax).values())
    for artist in artists:
        artist.set_animated(True)  # left out of the figure's draw, drawn over it below
    canvas = fig.canvas
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    renderer = canvas.get_renderer()
    for artist in artists:
        artist.draw(renderer)
    full = np.asarray(renderer.buffer_rgba()).copy()
    height = int(renderer.height)
    whole = (0.0, 0.0, float(renderer.width), float(height))
    reaches = [reach(a, renderer, whole) for a in artists]
    # A frame that is something else (a diagonal ramp), then the box redrawn.
    ramp = (np.add.outer(np.arange(height), np.arange(int(renderer.width))) % 251).astype(np.uint8)
    np.asarray(renderer.buffer_rgba())[..., :3] = ramp[..., None]
    other = np.asarray(renderer.buffer_rgba()).copy()
    meets = [(a, r) for a, r in zip(artists, reaches, strict=True) if r and meet(r, box)]

    def draw() -> None:
        for a, _r in meets:
            a.draw(renderer)

    redraw_box(canvas, background, box, [r for _a, r in meets], draw)
    now = np.asarray(renderer.buffer_rgba())
    x0, y0, x1, y1 = box
    inside = np.zeros(now.shape[:2], bool)
    inside[height - y1 : height - y0, x0:x1] = True
    assert np.array_equal(now[inside], full[inside])
    assert np.array_equal(now[~inside], other[~inside])


def test_ring_is_the_outer_box_less_the_inner_one():
    outer, inner = (0, 0, 10, 8), (3, 2, 6, 5)
    pieces = ring(outer, inner)
    covered = np.zeros((8, 10), int)
    for x0, y0, x1, y1 in [*pieces, inner]:
        covered[y0:y1, x0:x1] += 1
    assert (covered == 1).all()
    assert ring(outer, outer) == []


def test_overlapping_boxes_are_joined_until_each_pixel_is_in_one():
    boxes = [(0, 0, 10, 10), (20, 0, 30, 10), (8, 5, 22, 6), (50, 50, 60, 60), (59, 59, 70, 70)]
    out = disjoint(boxes)
    assert sorted(out) == [(0, 0, 30, 10), (50, 50, 70, 70)]
    for i, a in enumerate(out):
        for b in out[i + 1 :]:
            assert meet(a, b) is None
    assert disjoint([(0, 0, 10, 10), (10, 0, 20, 10)]) == [(0, 0, 10, 10), (10, 0, 20, 10)]
    assert whole_pixels((0.5, 0.2, 10.1, 9.9), (0, 0, 8, 100)) == (0, 0, 8, 10)
    assert whole_pixels((20.0, 0, 30, 10), (0, 0, 8, 100)) is None
