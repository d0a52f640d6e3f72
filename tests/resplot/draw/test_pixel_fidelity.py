"""Charts drawn from columns look like charts drawn from every raw point: a series read through
the agent into the cache and drawn by a Track is compared, pixel by pixel with antialiasing
off, with the same series drawn from all of its raw points, from the whole run down to 100
steps, and every run of a chart is cut into the same pixel columns.

What remains: matplotlib's Agg strokes a line as a polygon of its width, so points inside one
pixel column that M4 leaves out still move that polygon's edge by a pixel here and there. Even
exact M4 of the raw points (computed here from every point) differs from the raw drawing in
about 1 % of the line's pixels; every such pixel touches a pixel of the other drawing (nothing
differs by more than one pixel), and the columns differ no more than exact M4 does.
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from resplot.data.cache import SeriesCache
from resplot.data.decimate import Grid
from resplot.data.pages import Item
from resplot.data.state import ViewState
from resplot.draw.charts import render
from resplot.draw.track_inputs import RunContext
from resplot.draw.tracks import Track
from resplot.sources import open_source, parse_spec
from tests.fixtures.pixels import far
from tests.fixtures.stores import make_run, new_store

W, H = 600, 300
RECT = (0.0537, 0.113, 0.8911, 0.79)  # fractional pixel edges, as a real layout gives


def series(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    s = np.arange(n)
    y = 2.0 + 3.0 * np.exp(-s / max(n / 5, 1)) + 0.3 * rng.standard_normal(n)
    y[n // 3] = 20.0  # a one-step spike
    y[(2 * n) // 3] = -5.0  # and a dip
    return y


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Runs of 1,000, 10,000 and 100,000 steps in one store, read through a local agent."""
    path = tmp_path_factory.mktemp("pixels") / "reslog.db"
    engine = new_store(path)
    values = {}
    for n in (1_000, 10_000, 100_000):
        values[n] = series(n, seed=n)
        make_run(engine, name=f"n{n}", points={"loss": list(enumerate(values[n].tolist()))})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    source.poll(cache)
    refs = {int(r.name[1:]): r.ref for r in cache.runs()}
    yield cache, source, refs, values, path
    source.close()


def _figure():
    fig = Figure(figsize=(W / 100, H / 100), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes(RECT)
    ax.set_axis_off()
    return fig, ax


def _pixels(fig) -> np.ndarray:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., 0] < 128


def draw_raw(x, y, xlim, ylim) -> np.ndarray:
    fig, ax = _figure()
    ax.plot(x, y, color="#000000", linewidth=1.4, antialiased=False)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    return _pixels(fig)


def draw_track(cache, source, ref, xlim, ylim, band: bool) -> tuple[np.ndarray, Track]:
    """The chart's own path: the view at the axes' width from the cache (fetching its tiles),
    cut into the axes' pixel columns by Track.place: the M4 line, or with `band` (pages of
    many series) dense stretches filled as their min/max envelope."""
    fig, ax = _figure()
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    track = Track(ax, Item(ref, "loss", "loss", "#000000", smooth=False))
    pixels = int(ax.bbox.width)
    lo, hi = np.floor(xlim[0]), np.ceil(xlim[1])
    for _ in range(3):
        view = track.prepare(cache, RunContext(None, lo, hi, None), "step", 0.0, pixels)
        if view is not None and view.complete:
            break
        source.poll(cache)  # the tiles the view asked for
    assert track.view is not None and track.view.complete
    track.place(pixels, xlim, Grid.of(xlim, ax.bbox.x0, ax.bbox.width), band)
    for artist in (track.line, track.band):
        if artist is not None:  # (the band: made on a dense page's first place())
            artist.set_antialiased(False)
    return _pixels(fig), track


ZOOMS = {"whole": (0.0, 1.0), "10%": (0.3, 0.4), "1%": (0.31, 0.32), "100 steps": (0.333, None)}
CASES = [(n, z) for n in (1_000, 10_000, 100_000) for z in ZOOMS if n * 0.01 >= 100 or z != "1%"]


@pytest.mark.parametrize(
    ("n", "zoom"), [(n, ZOOMS[z]) for n, z in CASES], ids=[f"{n}-{z}" for n, z in CASES]
)
def test_columns_draw_what_every_raw_point_draws(loaded, n, zoom):
    cache, source, refs, values, _path = loaded
    y = values[n]
    x = np.arange(n, dtype=float)
    lo = zoom[0] * n
    hi = lo + 100 if zoom[1] is None else zoom[1] * n
    xlim = (lo - 0.5, hi - 0.5)
    inside = (x >= xlim[0] - 1) & (x <= xlim[1] + 1)
    ylim = (float(y[inside].min()) - 1.0, float(y[inside].max()) + 1.0)
    raw = draw_raw(x, y, xlim, ylim)
    line, track = draw_track(cache, source, refs[n], xlim, ylim, band=False)
    banded, _ = draw_track(cache, source, refs[n], xlim, ylim, band=True)
    x_drawn = np.asarray(track.line.get_xdata(), dtype=float)
    ax_px = RECT[2] * W
    columns = len(
        np.unique(np.floor((x_drawn[np.isfinite(x_drawn)] - xlim[0]) / (hi - lo) * ax_px))
    )
    if (hi - lo) / ax_px > 1:  # a point per pixel or more: every pixel column is drawn
        assert columns >= 0.98 * ax_px
    else:  # the raw points themselves
        assert (line != raw).sum() == 0
    # Nothing the columns draw is more than a pixel from what every raw point draws, and the
    # line through them differs from the raw line in under 1 % of its pixels (exact M4 of
    # every point: 0-0.3 % here; the band: ~5 %).
    assert far(line, raw) == 0 and far(banded, raw) == 0
    assert (line != raw).sum() <= 0.01 * raw.sum()


def test_every_run_of_a_chart_is_cut_into_the_same_pixel_columns(loaded):
    """Runs of 1,000, 10,000 and 100,000 steps on one chart: each is cut at the chart's own
    pixel edges, so column k of one run and column k of another cover the same x (a run cut
    at edges of its own would put up to eight points in a column of the chart)."""
    cache, source, refs, _values, _path = loaded
    state = ViewState(page="custom", smoothing=0.0, custom_keys=["loss"])
    page = render(cache, state, list(refs.values()), fetch=lambda: source.poll(cache))
    ax = page.axes[0]
    edges = Grid.of(ax.get_xlim(), ax.bbox.x0, ax.bbox.width).edges()
    tracks = list(page.tracks[0].values())
    assert len(tracks) == 3 and all(t.view is not None and t.view.complete for t in tracks)
    assert ax.get_xlim()[0] < 0 < 99_999 < ax.get_xlim()[1]  # the x range autoscaling gives
    cut = 0
    for track in tracks:
        x = np.asarray(track.line.get_xdata(), dtype=float)
        x = x[np.isfinite(x)]
        if len(x) == len(track.view.steps):
            continue  # every point drawn (1,000 steps on 11 pixels: cheap enough as they are)
        cut += 1
        column = np.searchsorted(edges, x, side="right") - 1
        counts = np.bincount(column - column.min())
        assert counts.max() <= 4 and (counts > 0).all()
    assert cut == 2


def test_a_finished_store_draws_the_same_bytes_twice(loaded, tmp_path):
    """Two viewers reading the same finished store from scratch (their own agents and caches)
    draw identical paths and save identical PNGs, at a raw, a fine and a stored level."""
    *_rest, path = loaded
    drawn = []
    for attempt in range(2):
        cache = SeriesCache()
        fresh = open_source(parse_spec(str(path)))
        try:
            fresh.poll(cache)
            state = ViewState(page="custom", smoothing=0.6, custom_keys=["loss"])
            refs = sorted((r.ref for r in cache.runs()), key=lambda r: r.uid)
            page = render(cache, state, refs, fetch=lambda s=fresh, c=cache: s.poll(c))
            levels = {t.view.level for ts in page.tracks for t in ts.values()}
            paths = [
                (
                    t.item.ref.uid,
                    np.asarray(t.line.get_xydata()).tobytes(),
                    None if t.raw is None else np.asarray(t.raw.get_xydata()).tobytes(),
                )
                for ts in page.tracks
                for t in ts.values()
            ]
            png = tmp_path / f"snap{attempt}.png"
            page.save(png)
            drawn.append((levels, paths, png.read_bytes()))
        finally:
            fresh.close()
    assert drawn[0][1] == drawn[1][1] and drawn[0][2] == drawn[1][2]
    assert len(drawn[0][0]) >= 2  # the runs are drawn at different levels
