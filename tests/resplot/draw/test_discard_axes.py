"""A chart page built anew throws its old axes away without clearing them
(resplot/draw/chart_layout.py, discard_axes): `Figure.clear()` clears each axes first, making
its ticks, titles, patch and grid anew only to drop them (~100 ms and ~4,500 objects for the
collector on the All page of the soak's sweep, at every rebuild and release)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from resplot.data.cache import SeriesCache
from resplot.data.state import ViewState
from resplot.draw.charts import ChartPage, render
from resplot.sources import open_source, parse_spec
from tests.fixtures.stores import make_run, new_store


def _store(path) -> None:
    engine = new_store(path)
    make_run(
        engine,
        name="a",
        points={"train/loss": [(s, 3.0 - s / 100) for s in range(100)]},
        events=[("checkpoint", "step 50", 50)],
    )
    make_run(
        engine,
        name="b",
        points={
            "train/loss": [(s, 2.0 + s / 200) for s in range(100)],
            "extra/grad_norm": [(s, 1.0 + (s % 7) / 10) for s in range(100)],
        },
    )
    engine.dispose()


def _pixels(page: ChartPage) -> np.ndarray:
    canvas = FigureCanvasAgg(page.figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


def test_a_page_built_anew_drops_its_old_axes_uncleared_and_draws_as_a_new_page(tmp_path):
    path = tmp_path / "rebuild.db"
    _store(path)
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    try:
        source.poll(cache)
        runs = {r.name: r.ref for r in cache.runs()}
        both, one = [runs["a"], runs["b"]], [runs["a"]]
        state = ViewState(page="all")
        fetch = lambda: source.poll(cache)  # noqa: E731
        page = render(cache, state, both, size=(12.8, 8), fetch=fetch)
        _pixels(page)
        old = list(page.axes)
        assert any("grad_norm" in s.title for s in page.specs)
        titles = [ax.title for ax in old]
        # What was added to them: the series, marks, notes, the axis art.
        children = [
            a for ax in old for kind in (ax.lines, ax.patches, ax.texts, ax.artists) for a in kind
        ]
        assert len(children) > 20

        page.refresh(cache, state, one)  # run b gone: its key's chart and section go
        for _ in range(3):
            fetch()
            page.refresh(cache, state, one)
        assert not any("grad_norm" in s.title for s in page.specs)
        assert not set(map(id, page.axes)) & set(map(id, old))
        # Not cleared: an axes cleared makes its titles (and ticks, patch, grid) anew.
        assert [ax.title for ax in old] == titles
        assert all(a is b for a, b in zip([ax.title for ax in old], titles, strict=True))
        # Each artist the old axes held is detached from them and from the figure.
        for artist in children:
            assert artist.axes is None, artist
            assert artist.get_figure(root=True) is None, artist
        gone = [weakref.ref(ax) for ax in old]
        del old, titles, children, artist
        gc.collect()
        assert all(r() is None for r in gone)  # nothing holds a chart thrown away

        fresh = render(cache, state, one, size=(12.8, 8), fetch=fetch)
        assert np.array_equal(_pixels(page), _pixels(fresh))
    finally:
        source.close()


def test_a_released_page_holds_no_axes_and_builds_again(tmp_path):
    path = tmp_path / "release.db"
    _store(path)
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    try:
        source.poll(cache)
        refs = [r.ref for r in cache.runs()]
        state = ViewState(page="training")
        page = render(cache, state, refs, size=(12.8, 8), fetch=lambda: source.poll(cache))
        before = _pixels(page)
        old = [weakref.ref(ax) for ax in page.axes]
        page.release()
        assert page.figure.axes == [] and page.axes == []
        gc.collect()
        assert all(r() is None for r in old)
        page.refresh(cache, state, refs)
        page.refresh(cache, state, refs)
        assert np.array_equal(_pixels(page), before)
    finally:
        source.close()


def _figure_of_four() -> Figure:
    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    for i in range(4):
        ax = fig.add_subplot(2, 2, i + 1)
        ax.plot([0, 1], [1, 0])
        ax.set_title("t")
        ax.text(0.5, 0.5, "note")
    return fig


def test_discarding_axes_makes_no_artist_where_clearing_the_figure_makes_many(monkeypatch):
    from matplotlib.artist import Artist

    from resplot.draw.chart_layout import discard_axes

    ours, theirs = _figure_of_four(), _figure_of_four()
    made: list[str] = []
    init = Artist.__init__

    def counting(self, *args, **kwargs):  # a spy: every artist is still made by matplotlib
        made.append(type(self).__name__)
        init(self, *args, **kwargs)

    monkeypatch.setattr(Artist, "__init__", counting)
    discard_axes(ours)
    assert ours.axes == [] and made == []
    theirs.clear()
    assert theirs.axes == [] and len(made) > 40, made  # ticks, titles, patch, spines anew
