"""The artists of a chart share one clip box (resplot/draw/clip_box.py): matplotlib gives every
artist added to an axes its own chain of transforms for the same rectangle, 41 of the 54
objects the collector traverses for a line drawn in a chart."""

from __future__ import annotations

import gc
import math

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Polygon
from matplotlib.transforms import Bbox, TransformedBbox

from resplot.data.cache import SeriesCache
from resplot.data.state import ViewState
from resplot.draw.charts import render
from resplot.draw.clip_box import axes_clip_box, share_clip_box
from resplot.sources import open_source, parse_spec
from tests.fixtures.stores import make_run, new_store


def _figure_with_artists_over_the_edges() -> tuple[Figure, object, list]:
    """A line, a band, a collection and a text each reaching past every edge of the axes."""
    fig = Figure(figsize=(4, 3), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.13, 0.17, 0.71, 0.66))  # edges at fractional pixels
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    ax.set_axis_off()  # nothing of the axes' own outside them
    line = ax.add_line(Line2D([-5, 15], [-3, 13], linewidth=3, color="C0"))
    band = ax.add_artist(Polygon([(-2, 4), (12, 4), (12, 6), (-2, 6)], color="C1", alpha=0.5))
    bars = ax.add_collection(LineCollection([[(5, -4), (5, 14)], [(-4, 8), (14, 8)]], lw=2))
    text = ax.text(9.5, 1, "past the right edge", fontsize=12, clip_on=True)
    return fig, ax, [line, band, bars, text]


def _pixels(fig) -> np.ndarray:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


def test_a_shared_box_clips_as_each_artists_own_did_before_and_after_a_resize():
    fig, ax, artists = _figure_with_artists_over_the_edges()
    own = [a.get_clip_box() for a in artists]
    assert len({id(box) for box in own}) == len(artists)  # matplotlib's: one an artist
    before = _pixels(fig)
    fig.set_size_inches(5.3, 3.7)
    before_resized = _pixels(fig)
    fig.set_size_inches(4, 3)

    share_clip_box(ax, *artists)
    box = axes_clip_box(ax)
    assert all(a.get_clip_box() is box for a in artists)
    assert axes_clip_box(ax) is box  # one an axes
    assert np.array_equal(_pixels(fig), before)
    fig.set_size_inches(5.3, 3.7)  # the axes move and grow: the shared box follows them
    assert np.array_equal(_pixels(fig), before_resized)
    assert box.bounds == TransformedBbox(Bbox.unit(), ax.transAxes).bounds == ax.bbox.bounds
    # Clipping is on: the ink stops at the axes, where unclipped it reaches past them.
    left = math.floor(ax.bbox.x0) - 2
    assert (before_resized[:, :left, :3] == 255).all()
    for artist in artists:
        artist.set_clip_on(False)
    assert (_pixels(fig)[:, :left, :3] < 255).any()


def test_a_shared_box_leaves_fewer_objects_for_the_collector():
    def tracked_per_line(share: bool) -> float:
        fig = Figure(figsize=(4, 3), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
        gc.collect()
        start = len(gc.get_objects())
        for i in range(50):
            line = ax.add_line(Line2D(np.arange(20.0), np.arange(20.0) + i))
            if share:
                share_clip_box(ax, line)
        fig.canvas.draw()
        gc.collect()
        return (len(gc.get_objects()) - start) / 50

    own, shared = tracked_per_line(False), tracked_per_line(True)
    assert shared < own - 30, (own, shared)


def test_every_artist_a_chart_page_adds_to_a_chart_shares_its_clip_box(tmp_path):
    path = tmp_path / "clip.db"
    engine = new_store(path)
    loss = [(s, float("nan") if 40 <= s < 50 else 3.0 - s / 100) for s in range(100)]
    make_run(
        engine,
        name="a",
        points={"train/loss": loss, "train/lr": [(s, 1e-3) for s in range(100)]},
        events=[("checkpoint", "step 50", 50)],
    )
    make_run(engine, name="b", status="running", points={"train/loss": loss[:60]})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    try:
        source.poll(cache)
        refs = [r.ref for r in cache.runs()]
        state = ViewState(page="training", smoothing=0.6)
        page = render(cache, state, refs, size=(12.8, 8), fetch=lambda: source.poll(cache))
        FigureCanvasAgg(page.figure).draw()
    finally:
        source.close()
    kinds: set[str] = set()
    for ax in page.chart_axes():
        box = axes_clip_box(ax)
        added = [*ax.lines, *ax.patches, *ax.collections, *ax.texts, *ax.artists]
        assert added
        for artist in added:
            assert artist.get_clip_box() is box, (type(artist).__name__, artist)
            kinds.add(type(artist).__name__)
    # The series (smoothed line, faint raw series or band), the NaN marks and spans, the end
    # marks, the event lines, the notes and the axis art were all looked at.
    assert {"Line2D", "PolyCollection", "LineCollection", "Text", "AxisArt"} <= kinds, kinds
