"""A chart page built anew throws its old axes away without clearing them
(resplot/draw/chart_layout.py, discard_axes): `Figure.clear()` clears each axes first, making
its ticks, titles, patch and grid anew only to drop them (~100 ms and ~4,500 objects for the
collector on the All page of the soak's sweep, at every rebuild and release)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
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
            "valid/loss": [(s, 2.5 + (s % 7) / 10) for s in range(0, 100, 10)],
        },
    )
    engine.dispose()


def _pixels(page: ChartPage) -> np.ndarray:
    canvas = FigureCanvasAgg(page.figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


def _open(path):
    _store(path)
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    source.poll(cache)
    runs = {r.name: r.ref for r in cache.runs()}
    return cache, source, runs


def _refreshed(page: ChartPage, cache, source, state, refs) -> None:
    state.assign_looks(refs)  # as the window does before each refresh
    page.refresh(cache, state, refs)
    for _ in range(3):
        source.poll(cache)
        page.refresh(cache, state, refs)


def test_a_page_built_anew_keeps_the_charts_it_still_shows_and_drops_the_rest(tmp_path):
    cache, source, runs = _open(tmp_path / "rebuild.db")
    try:
        both, one = [runs["a"], runs["b"]], [runs["a"]]
        state = ViewState(page="all")
        fetch = lambda: source.poll(cache)  # noqa: E731
        page = render(cache, state, both, size=(12.8, 8), fetch=fetch)
        _pixels(page)
        old = list(page.axes)
        titles = [s.title for s in page.specs]
        assert "valid/loss" in titles
        loss_chart = old[titles.index("train/loss")]
        loss_tracks = dict(page.tracks[titles.index("train/loss")])
        dropped = [ax for ax, t in zip(old, titles, strict=True) if "valid" in t]
        assert len(dropped) == 2  # the valid section's card and its chart
        # What was added to them: the series, marks, notes, the axis art.
        children = [
            a
            for ax in dropped
            for kind in (ax.lines, ax.patches, ax.texts, ax.artists)
            for a in kind
        ]
        assert len(children) > 5
        dropped_titles = [ax.title for ax in dropped]

        _refreshed(page, cache, source, state, one)  # run b gone: its key's section goes
        assert "valid/loss" not in [s.title for s in page.specs]
        # The train section and its chart are the same axes, with the same series.
        assert loss_chart in page.axes and len(page.axes) == len(old) - 2
        now = page.tracks[page.axes.index(loss_chart)]
        run_a = [item for item in loss_tracks if item.ref == runs["a"]]
        assert run_a and all(now[item] is loss_tracks[item] for item in run_a)
        # The others taken out, not cleared (an axes cleared makes its titles, ticks, patch
        # and grid anew), each artist they held detached from them and from the figure.
        assert all(
            a is b for a, b in zip([ax.title for ax in dropped], dropped_titles, strict=True)
        )
        for artist in children:
            assert artist.axes is None, artist
            assert artist.get_figure(root=True) is None, artist
        gone = [weakref.ref(ax) for ax in dropped]
        del old, dropped, dropped_titles, children, artist, loss_tracks, now
        gc.collect()
        assert all(r() is None for r in gone)  # nothing holds a chart thrown away

        fresh = render(cache, state, one, size=(12.8, 8), fetch=fetch)
        assert np.array_equal(_pixels(page), _pixels(fresh))

        # Back to both runs: the valid section made anew beside the kept charts, every chart
        # on one x axis, as a page built for them draws it.
        _refreshed(page, cache, source, state, both)
        charts = page.chart_axes()
        assert len(charts) == 2 and loss_chart in charts
        assert charts[0].get_shared_x_axes().joined(charts[0], charts[1])
        fresh = render(cache, state, both, size=(12.8, 8), fetch=fetch)
        assert np.array_equal(_pixels(page), _pixels(fresh))
        # A zoom on the chart made anew is the user's view of the page (the page hears it).
        assert page.follow
        made = next(ax for ax in charts if ax is not loss_chart)
        made.set_xlim(10, 40)
        assert not page.follow and loss_chart.get_xlim() == (10, 40)

        # The train section folded: the page's first chart goes (the charts share x with an
        # invisible anchor, not with it), the valid section's charts stay, none left behind.
        page.reset_view()
        valid_chart = page.axes[[s.title for s in page.specs].index("valid/loss")]
        first = weakref.ref(page.chart_axes()[0])
        del charts, made, loss_chart
        state.collapsed_sections = ["train"]
        _refreshed(page, cache, source, state, both)
        assert [s.title for s in page.specs][-1] == "valid/loss"
        assert valid_chart in page.axes
        gc.collect()
        assert first() is None
        extra = [ax for ax in page.figure.axes if all(ax is not a for a in page.axes)]
        assert len(extra) == 1 and not extra[0].get_visible() and not extra[0].get_navigate()
        fresh = render(cache, state, both, size=(12.8, 8), fetch=fetch)
        assert np.array_equal(_pixels(page), _pixels(fresh))
    finally:
        source.close()


def test_a_build_dropped_midway_leaves_no_chart_it_had_yet_to_take(tmp_path):
    path = tmp_path / "dropped.db"
    engine = new_store(path)
    steps = range(100)
    make_run(engine, name="a", points={"train/loss": [(s, 3 - s / 50) for s in steps]})
    make_run(engine, name="b", points={"aux/grad": [(s, 1 + s / 90) for s in steps]})
    make_run(engine, name="c", points={"zz/x": [(s, s / 100) for s in steps]})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    try:
        source.poll(cache)
        runs = {r.name: r.ref for r in cache.runs()}
        state = ViewState(page="all")
        fetch = lambda: source.poll(cache)  # noqa: E731
        page = render(cache, state, [runs["a"], runs["c"]], size=(12.8, 8), fetch=fetch)
        every = list(runs.values())
        state.assign_looks(every)
        # The aux section comes first: made (a yield each) before the kept train and zz charts.
        steps_of = page.refresh_steps(cache, state, every)
        next(steps_of)
        steps_of.close()
        assert len(page.axes) == 1  # the aux card made; the rest not yet taken
        shown = lambda: [ax for ax in page.figure.axes if ax.get_visible()]  # noqa: E731
        assert shown() == page.axes  # and not drawn meanwhile
        _refreshed(page, cache, source, state, every)
        assert shown() == page.axes and len(page.axes) == 6
        fresh = render(cache, state, every, size=(12.8, 8), fetch=fetch)
        assert np.array_equal(_pixels(page), _pixels(fresh))
    finally:
        source.close()


@pytest.fixture
def training(tmp_path):
    """The Training page of the two runs, rendered: (cache, source, refs, state, page)."""
    cache, source, runs = _open(tmp_path / "training.db")
    refs = list(runs.values())
    state = ViewState(page="training")
    try:
        page = render(cache, state, refs, size=(12.8, 8), fetch=lambda: source.poll(cache))
        yield cache, source, refs, state, page
    finally:
        source.close()


def test_another_x_axis_builds_every_chart_anew(training):
    cache, source, refs, state, page = training
    old = set(map(id, page.axes))
    state.x_axis = "wall"
    _refreshed(page, cache, source, state, refs)
    assert page.axes and not old & set(map(id, page.axes))
    fresh = render(cache, state, refs, size=(12.8, 8), fetch=lambda: source.poll(cache))
    assert np.array_equal(_pixels(page), _pixels(fresh))


def test_a_released_page_holds_no_axes_and_builds_again(training):
    cache, _source, refs, state, page = training
    before = _pixels(page)
    old = [weakref.ref(ax) for ax in page.axes]
    page.release()
    assert page.figure.axes == [] and page.axes == []
    gc.collect()
    assert all(r() is None for r in old)
    page.refresh(cache, state, refs)
    page.refresh(cache, state, refs)
    assert np.array_equal(_pixels(page), before)


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
