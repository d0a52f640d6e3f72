"""Follow mode's limits on a ChartPage (resplot/draw/limits.py), from real stores: where the
page follows no x range of its own (one x), matplotlib's rules fit it, whatever limits were
set before (one wall time: a minute either side); the autoscaling kept between refreshes gives
what a fresh fit gives. A wall-time page's ticks are times of day."""

from __future__ import annotations

import time
from datetime import datetime

import numpy as np
import pytest

from resplot.data.state import ViewState
from resplot.draw.axis_art import AxisArt
from resplot.draw.charts import render
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from tests.fixtures.stores import BASE_TIME, make_run, new_store


@pytest.fixture
def loaded(tmp_path):
    path = tmp_path / "follow.db"
    engine = new_store(path)
    long = [(s, 2.0 + np.exp(-s / 500)) for s in range(3000)]
    make_run(engine, name="long", points={"train/loss": long}, created_at=BASE_TIME)
    # A run that has logged one point so far, past the other's steps (resumed at 8000).
    make_run(engine, name="new", points={"train/loss": [(8000, 2.5)]}, created_at=BASE_TIME + 1)
    engine.dispose()
    with Loaded([parse_spec(str(path))]) as out:
        yield out


def _refs(loaded) -> dict[str, object]:
    return {r.name: r.ref for r in loaded.cache.runs()}


def _refresh(page, loaded, state, refs) -> None:
    """Refresh until the tiles the page asks for are in (what the window's poll does)."""
    for _ in range(6):
        page.refresh(loaded.cache, state, refs)
        if not loaded.cache.wanted_count():
            return
        loaded.fetch()
    raise AssertionError("the page's tiles did not come")


def test_a_single_point_is_shown_after_a_followed_range_that_leaves_it_out(loaded):
    """The page followed one run's steps 0-3000; then only a run with one point at step 8000
    is plotted. The page has no x range of its own for one x (matplotlib's rules fit it),
    but the range it had set turned matplotlib's x autoscaling off: the chart kept 0-3000
    and showed nothing."""
    refs = _refs(loaded)
    state = ViewState(page="custom", custom_keys=["train/loss"])
    page = render(loaded.cache, state, [refs["long"]], fetch=loaded.fetch)
    assert page.axes[0].get_xlim()[1] < 8000
    _refresh(page, loaded, state, [refs["new"]])
    (track,) = page.tracks[0].values()
    assert list(track.line.get_xdata()) == [8000]
    lo, hi = page.axes[0].get_xlim()
    assert lo < 8000 < hi, (lo, hi)


@pytest.fixture(params=["UTC0", "XYZ-5:30"])
def zone(request, monkeypatch):
    """This process's local time zone (a POSIX TZ: no zone database needed), as a user's."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


def test_a_wall_time_page_labels_local_times_of_day(tmp_path, zone):
    """Every chart of a wall-time page labels its x ticks as times: the charts share one x
    ticker, and each chart's set-up put back the number formatter after the first had set the
    dates (the ticks read "19.675931k", days since 1970). The times are the local ones, as
    `reslog show` prints them (matplotlib's default is UTC), and the axis says its zone."""
    path = tmp_path / "wall.db"
    engine = new_store(path)
    steps = range(0, 3000, 10)
    points = {
        "train/loss": [(s, 2.0 + np.exp(-s / 500)) for s in steps],
        "train/lr": [(s, 1e-3) for s in steps],
    }
    make_run(engine, name="run", points=points, created_at=BASE_TIME)
    engine.dispose()
    state = ViewState(page="training", x_axis="wall")
    with Loaded([parse_spec(str(path))]) as loaded:
        refs = [r.ref for r in loaded.cache.runs()]
        page = render(loaded.cache, state, refs, fetch=loaded.fetch)
    assert len(page.chart_axes()) == 2
    for ax in page.chart_axes():
        _major, labels, _minor = AxisArt.of(ax).ticks["x"].locations()
        assert len(labels) >= 3 and all(":" in text for text in labels), labels
        # No date under the labels: the page leaves it no row (it sat on the next title).
        assert ax.xaxis.get_major_formatter().get_offset() == ""
    # The hover's x says the whole local date and time (the first point's: the run's start).
    (track,) = page.tracks[0].values()
    start = datetime.fromtimestamp(BASE_TIME).strftime("%Y-%m-%d %H:%M")
    assert page.chart_axes()[0].format_xdata(track.line.get_xdata()[0]).startswith(start)
    assert page.x_label == f"wall time ({zone[:3]})"


def test_one_wall_time_is_shown_on_a_minutes_range(loaded):
    """A run with one point so far on the wall-time axis: matplotlib's rule for one value
    (±5 % of it) gave ±2 years around its date (days since 1970); the page fits a minute either
    side of it, and its ticks say times of day (they said days since 1970: "19.676018k")."""
    refs = _refs(loaded)
    state = ViewState(page="custom", custom_keys=["train/loss"], x_axis="wall")
    page = render(loaded.cache, state, [refs["long"]], fetch=loaded.fetch)
    _refresh(page, loaded, state, [refs["new"]])
    (track,) = page.tracks[0].values()
    (x,) = track.line.get_xdata()
    lo, hi = page.axes[0].get_xlim()
    assert lo < x < hi
    assert (hi - lo) * 86400 == pytest.approx(120, rel=0.01), (lo, hi)
    _major, labels, _minor = AxisArt.of(page.axes[0]).ticks["x"].locations()
    # Concise dates: "00:26" on the minute, the seconds between ("15", "30").
    assert any(":" in text for text in labels), labels
    assert all(text.replace(":", "").isdigit() for text in labels), labels


def test_the_kept_autoscaling_gives_a_fresh_fit(loaded):
    """Refreshes that change nothing the y fit depends on reuse it; the limits are those a
    page built anew on the same data fits."""
    refs = _refs(loaded)
    state = ViewState(page="custom", custom_keys=["train/loss"])
    both = [refs["long"], refs["new"]]
    page = render(loaded.cache, state, both, fetch=loaded.fetch)
    fitted = page.axes[0].get_ylim()
    kept = dict(page._autoscaled)
    for _ in range(2):
        page.refresh(loaded.cache, state, both)
    assert page._autoscaled[0] is kept[0]  # not worked out again
    assert page.axes[0].get_ylim() == fitted
    fresh = render(loaded.cache, state, both, fetch=loaded.fetch)
    assert fresh.axes[0].get_ylim() == fitted


def test_a_zoom_between_two_points_fits_the_segment_across_it(tmp_path):
    """An evaluation every 1,000 steps zoomed to steps 1,200-1,800: no point lies inside, the
    segment from step 1,000 to 2,000 crosses the view, and the y range fits what that segment
    shows there (0.12-0.18), not the whole series' 0-1 (nothing inside to fit, it was kept)."""
    path = tmp_path / "sparse.db"
    engine = new_store(path)
    acc = [(s, s / 10_000) for s in range(0, 10_001, 1000)]
    make_run(engine, name="eval", points={"eval/acc": acc}, created_at=BASE_TIME)
    engine.dispose()
    with Loaded([parse_spec(str(path))]) as loaded:
        refs = [r.ref for r in loaded.cache.runs()]
        state = ViewState(page="custom", custom_keys=["eval/acc"])
        page = render(loaded.cache, state, refs, fetch=loaded.fetch)
        ax = page.axes[0]
        ax.set_xlim(1200, 1800)  # the user's zoom
        _refresh(page, loaded, state, refs)
        assert not page.follow
        lo, hi = ax.get_ylim()
        assert 0.10 < lo < 0.12 and 0.18 < hi < 0.20, (lo, hi)


def test_a_refresh_counts_again_only_the_fine_points_of_series_that_changed(loaded, monkeypatch):
    """Whether a page's fine views are over its host's budget is asked at every refresh: a
    series whose summary and range are as they were keeps its count (a followed poll asked
    every series of the page, a finished run's too); one with a new summary is counted again,
    and the page's total is the same as counting every series anew."""
    import resplot.draw.chart_scope as chart_scope

    refs = _refs(loaded)
    state = ViewState(page="custom", custom_keys=["train/loss"])
    page = render(loaded.cache, state, list(refs.values()), fetch=loaded.fetch)
    counted: list[object] = []
    fine_points = chart_scope.fine_points

    def counting(summary, *args):
        counted.append(summary)
        return fine_points(summary, *args)

    monkeypatch.setattr(chart_scope, "fine_points", counting)
    _refresh(page, loaded, state, list(refs.values()))
    assert counted == []
    cache = loaded.cache
    summary = cache.summary(refs["new"], "train/loss")
    cache.set_summaries(refs["new"], {"train/loss": summary._replace(tail=(8001, 0.0))})
    page.refresh(cache, state, list(refs.values()))
    assert counted == [cache.summary(refs["new"], "train/loss")]
    specs, contexts = page.specs, [page._contexts(cache, state, list(refs.values()), None, 100)]
    kept = page._fine_points(cache, specs, contexts * len(specs), page._fine)
    page._fine_kept = {}
    assert page._fine_points(cache, specs, contexts * len(specs), page._fine) == kept


def test_a_charts_sticky_edges_are_read_again_when_its_children_change(loaded, monkeypatch):
    """The followed y fit's key holds the sticky y edges of the chart's children (a bar's
    base, a fill's): kept while the children are the same (reading every child's was ~100
    calls a chart a poll), read again when one comes or goes."""
    from matplotlib.artist import Artist

    refs = _refs(loaded)
    state = ViewState(page="custom", custom_keys=["train/loss"])
    page = render(loaded.cache, state, list(refs.values()), fetch=loaded.fetch)
    ax = page.axes[0]
    assert page._sticky_y(0, ax) == ()
    reads: list[object] = []
    sticky = Artist.sticky_edges
    monkeypatch.setattr(
        Artist, "sticky_edges", property(lambda a: (reads.append(a), sticky.fget(a))[1])
    )
    _refresh(page, loaded, state, list(refs.values()))
    assert reads == []  # the same children: none read
    bars = ax.bar([100.0], [2.5])
    assert page._sticky_y(0, ax) == (0.0,)  # a bar's base
    bars.remove()
    assert page._sticky_y(0, ax) == ()
    page.refresh(loaded.cache, state, list(refs.values()))
    assert page._followed[0] == tuple(ax.get_ylim())
