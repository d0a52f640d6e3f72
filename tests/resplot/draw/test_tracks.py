"""A Track's artists are made when first needed: each costs matplotlib ~0.3 ms to add, and
Python's collector ~13 objects to traverse at every full pass for as long as the page lives
(resplot/draw/tracks.py); its next view worked out ahead (warm) is not shown until prepared."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from resplot.data.cache import SeriesCache
from resplot.data.decimate import Grid
from resplot.data.pages import Item
from resplot.draw.tiers import tier_zorder
from resplot.draw.track_inputs import RunContext
from resplot.draw.tracks import Track
from resplot.sources import open_source, parse_spec
from tests.fixtures.stores import make_run, new_store

STEPS = 20_000


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Two runs of 20,000 steps (dense: many points a pixel column), read through the agent."""
    path = tmp_path_factory.mktemp("tracks") / "reslog.db"
    engine = new_store(path)
    rng = np.random.default_rng(0)
    for i in range(2):
        y = 2.0 + i + 0.3 * rng.standard_normal(STEPS)
        make_run(engine, name=f"r{i}", points={"loss": list(enumerate(y.tolist()))})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    source.poll(cache)
    refs = sorted((r.ref for r in cache.runs()), key=lambda ref: cache.run(ref).name)
    yield cache, source, refs
    source.close()


def _tracks(loaded) -> tuple:
    cache, source, refs = loaded
    fig = Figure(figsize=(6, 3), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    ax.set_xlim(0, STEPS)
    tracks = [
        Track(ax, Item(ref, "loss", "loss", f"C{i}", smooth=False)) for i, ref in enumerate(refs)
    ]
    pixels = int(ax.bbox.width)
    for track in tracks:
        for _ in range(3):
            view = track.prepare(cache, RunContext(None, 0, STEPS, None), "step", 0.0, pixels)
            if view is not None and view.complete:
                break
            source.poll(cache)  # the tiles the view asked for
        assert track.view is not None and track.view.complete
    return ax, tracks, pixels


def _place(ax, tracks, pixels, band: bool) -> None:
    xlim = (0.0, float(STEPS))
    for track in tracks:
        track.place(pixels, xlim, Grid.of(xlim, ax.bbox.x0, ax.bbox.width), band)


def test_the_main_lines_band_is_made_on_a_dense_page_only(loaded):
    ax, tracks, pixels = _tracks(loaded)
    _place(ax, tracks, pixels, band=False)
    assert [t.band for t in tracks] == [None, None]
    assert not ax.patches  # (unsmoothed: no faint series either)
    assert all(len(t.line.get_xdata()) for t in tracks)
    # A page past BAND_FROM_SERIES fills dense stretches: each track's band made then, in the
    # tracks' order (the order they were made in before), in its tier.
    _place(ax, tracks, pixels, band=True)
    bands = [t.band for t in tracks]
    assert all(b is not None and b.get_visible() for b in bands)
    assert all(not t.line.get_visible() for t in tracks)  # under its band
    children = ax.get_children()
    assert children.index(bands[0]) < children.index(bands[1])
    assert all(t.band.get_zorder() == tier_zorder(1.0, t.live, t.streaming) for t in tracks)
    # Fewer series again: the line, its band kept hidden.
    _place(ax, tracks, pixels, band=False)
    assert [t.band for t in tracks] == bands
    assert not any(b.get_visible() for b in bands)
    assert all(t.line.get_visible() for t in tracks)


def test_a_faded_tracks_band_is_made_faded(loaded):
    ax, tracks, pixels = _tracks(loaded)
    tracks[1].fade(True)
    _place(ax, tracks, pixels, band=True)
    assert tracks[0].band.get_alpha() in (None, 1.0)
    assert tracks[1].band.get_alpha() == pytest.approx(0.12)
    tracks[1].fade(False)
    assert tracks[1].band.get_alpha() == pytest.approx(1.0)


def test_a_warmed_track_shows_its_view_until_prepared_then_takes_the_warm_work(loaded, monkeypatch):
    """warm() works out what prepare() will (the view, its x, its smoothed curve) and keeps
    it aside: the track shows what it showed (the hover reads it) until prepare() with the
    same arguments takes that work without doing it again, the same as a track not warmed."""
    cache, source, refs = loaded
    ax, _tracks_placed, pixels = _tracks(loaded)
    item = Item(refs[0], "loss", "loss", "C0", smooth=True)
    track, plain = Track(ax, item), Track(ax, item)
    whole = RunContext(None, 0, STEPS, None)
    track.prepare(cache, whole, "step", 0.6, pixels)
    shown = (track.view, track.x, track.x_mid, track.smoothed)
    zoomed = RunContext(None, 5_000, 6_000, None)
    for _ in range(4):  # the zoomed view's tiles and its curve's warm-up fetched
        track.warm(cache, zoomed, "step", 0.6, pixels)
        if track._warmed is not None and track._warmed[1][3] and track._warmed[0][0].complete:
            break
        source.poll(cache)
    now = (track.view, track.x, track.x_mid, track.smoothed)
    assert all(a is b for a, b in zip(now, shown, strict=True))
    work = []
    done = Track._work
    monkeypatch.setattr(Track, "_work", lambda *a: work.append(1) or done(*a))
    view = track.prepare(cache, zoomed, "step", 0.6, pixels)
    assert not work and view is track._memo.view and view.steps[0] >= 4_900
    assert track._warmed is None
    plain.prepare(cache, zoomed, "step", 0.6, pixels)
    assert work == [1]
    for name in ("x", "x_mid", "smoothed"):
        np.testing.assert_array_equal(getattr(track, name), getattr(plain, name))
