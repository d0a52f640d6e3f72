"""A chart page in two layers (resplot/ui/layers.py): a poll whose points stay inside the
followed limits draws the series over the saved axes, with no full draw of the page; a limit
change draws the page; and the blitted frame is the same pixels as a full draw of the same
state, on every chart page.

The real MainWindow (offscreen) over a real SQLite store read through a local agent
(resplot.sources.polling.Loaded, the headless poll), so that each poll is a step of the test.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from PyQt5.QtWidgets import QApplication

from resplot.draw.limits import quietly
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from resplot.ui import settings as settings_mod
from resplot.ui.window import MainWindow
from schema.rules.compare import metric_stats
from schema.store import read
from schema.store.connect import open_store
from tests.fixtures.stores import BASE_TIME, add_points, make_run, new_store

pytestmark = pytest.mark.integration

N = 3000
RUNS = 3
DRAW_WAIT_S = 60.0  # a page's draw, its turns and the redraw timer it may wait for


def _points(i: int) -> dict:
    steps = range(N)
    loss = [(s, 4.0 * np.exp(-s / 150) + 2 + 0.2 * i + 0.05 * np.sin(s)) for s in steps]
    loss[2000 + 40 * i] = (2000 + 40 * i, float("nan"))
    return {
        "train/loss": loss,
        "valid/loss": [(s, 2.5 + 0.2 * i) for s in range(0, N, 50)],
        "train/lr": [(s, 3e-4 * min(1, s / 50)) for s in steps],
        "train/tokens_per_s": [(s, 40_000.0 + 10 * (s % 7) + i) for s in steps],
        "time/data": [(s, 0.01) for s in steps],
        "time/forward": [(s, 0.1) for s in steps],
        "time/backward": [(s, 0.2) for s in steps],
        "time/optimizer": [(s, 0.03) for s in steps],
        "time/step": [(s, 0.4) for s in steps],
        "sys/gpu0/util": [(s, 90.0 + (s % 5) + i) for s in steps],
        "sys/gpu0/temp_c": [(s, 70.0 + (s % 3)) for s in steps],
    }


@pytest.fixture
def loaded(store_path):
    engine = new_store(store_path)
    for i in range(RUNS):
        make_run(
            engine,
            name=f"lr-{i}e-4",
            status="running",
            created_at=BASE_TIME + i,
            heartbeat_at=time.time() + 1e6,  # alive: a run crashed long ago is settled
            points=_points(i),
        )
    engine.dispose()
    with Loaded([parse_spec(str(store_path))]) as source:
        source.path = store_path
        yield source


@pytest.fixture
def window(qtbot, loaded, tmp_path):
    win = MainWindow(loaded.cache, settings_mod.Settings(), tmp_path / "settings.json")
    qtbot.addWidget(win)
    win.resize(1280, 800)
    win.show()
    win.set_custom_keys(["train/*"])
    win.set_smoothing(0.6)  # a smoothed line over its faint raw band
    win.on_runs_changed()  # what the poller's first report does: the runs ticked
    show(win, loaded)
    yield win
    win.close()


def show(win, loaded, page: str | None = None) -> None:
    """Redraw the page (fetching the tiles it asks for) until it is drawn as it stands."""
    if page is not None:
        win.set_page(page)
    for _ in range(6):
        QApplication.processEvents()
        win.redraw_now()
        if not win.cache.wanted_count():
            break
        loaded.fetch()
    QApplication.processEvents()  # the full draw a draw_idle queued, and the Qt layout
    win.redraw_now()
    drawn(win)


def drawn(win) -> None:
    """Run the event loop until the page's draw (in pieces: resplot/ui/pieces.py) is done,
    a draw held for the window's redraw timer included (bounded by time, not turns)."""
    canvas = win.page_view().canvas
    deadline = time.monotonic() + DRAW_WAIT_S
    while time.monotonic() < deadline:
        QApplication.processEvents()
        if not canvas.draw_due:
            return
    raise AssertionError("the page's draw did not end")


def poll(win, loaded, steps: np.ndarray, runs: int | None = None, bumps: dict | None = None):
    """A live run's poll: every series of every run (of the first `runs`) gets its last value
    again (plus `bumps[key]`) at `steps`, written to the store and read by the headless poll,
    then the window's redraw."""
    fetch(win, loaded, steps, runs, bumps)
    win.redraw_now()
    drawn(win)


def fetch(win, loaded, steps: np.ndarray, runs: int | None = None, bumps: dict | None = None):
    """poll() up to the window's redraw: the points written and read into the cache."""
    cache = win.cache
    by_name = {}
    for run in cache.runs()[:runs]:
        series = {}
        for key, summary in cache.summaries(run.ref).items():
            value = last_value(summary) + (bumps or {}).get(key, 0.0)
            series[key] = [(int(s), value) for s in steps]
        by_name[run.name] = series
    write_points(loaded, by_name)
    loaded.fetch()


def write_points(loaded, by_name: dict[str, dict]) -> None:
    """Points written to the store: {run name: {key: [(step, value), ...]}}."""
    engine = open_store(loaded.path)
    with engine.connect() as conn:
        ids = {run.name: row_id for row_id, run in read.list_runs(conn, store=str(loaded.path))}
    for name, series in by_name.items():
        add_points(engine, ids[name], series)
    engine.dispose()


def last_value(summary) -> float:
    """A series' last logged value; 1.0 where it has none, or it is not finite."""
    last = metric_stats(summary.agg)[0]
    return 1.0 if last is None or not np.isfinite(last) else float(last)


def counts(win) -> tuple[int, int]:
    layers = win.page_view().layers
    return layers.full_draws, layers.blits


def test_a_poll_inside_the_headroom_draws_no_full_page(window, loaded):
    page = window.current_page()
    xlim = page.axes[0].get_xlim()
    assert xlim[1] > N  # the followed range has room past the last step
    full, blits = counts(window)
    assert full >= 1
    poll(window, loaded, np.arange(N, N + 5))
    assert counts(window) == (full, blits + 1)
    assert page.axes[0].get_xlim() == xlim
    loss = next(ln for (title, _r, key), ln in page.lines().items() if key == "train/loss")
    assert np.nanmax(np.asarray(loss.get_xdata(), float)) >= N + 4  # the new points drawn


def test_a_poll_recomputes_only_the_series_that_got_points(window, loaded):
    """One run of three logs: its series' views, smoothing and decimation are worked out
    again, the other runs' tracks keep their views and artists as they were, and the page's
    data limits are found without walking every line (what relim gives, all the same)."""
    page = window.current_page()
    live = window.cache.runs()[0].ref
    tracks = [t for ts in page.tracks for t in ts.values() if t.view is not None]
    views = {id(t): t.view for t in tracks}
    full, blits = counts(window)
    poll(window, loaded, np.arange(N, N + 5), runs=1)
    assert counts(window) == (full, blits + 1)  # no full draw: the new points fit
    grew = {id(t) for t in tracks if t.item.ref == live and t.item.key.startswith("train/")}
    assert grew and all(t.changed for t in tracks if id(t) in grew)
    for t in tracks:
        if t.item.ref != live:
            assert not t.changed and t.view is views[id(t)]  # nothing recomputed
    for i, ax in enumerate(page.axes):
        if page.specs[i].kind != "line":
            continue
        fitted = ax.dataLim.get_points().copy(), ax.dataLim.minpos.copy()
        ax.relim()
        for t in page.tracks[i].values():
            for xy in t.band_xy:
                ax.update_datalim(xy)
        assert np.array_equal(fitted[0], ax.dataLim.get_points())
        assert np.array_equal(fitted[1], ax.dataLim.minpos)


def test_a_limit_change_draws_the_page_with_headroom_past_the_data(window, loaded):
    page = window.current_page()
    full, _blits = counts(window)
    poll(window, loaded, np.arange(N, N + 400))  # past the followed range
    show(window, loaded)  # and the tiles its new resolution asks for
    hi = page.axes[0].get_xlim()[1]
    assert counts(window)[0] > full
    assert hi >= N + 399 + 0.05 * (N + 399)  # the data's end, then room (a round number)
    assert hi == round(hi)
    # A zoom (what the toolbar does) is a limit change too.
    full = counts(window)[0]
    page.axes[0].set_xlim(100, 200)
    show(window, loaded)
    assert counts(window)[0] > full


def _shown_rows(view) -> np.ndarray:
    """The canvas's pixels the window shows (rows of RGBA)."""
    rgba = np.asarray(view.canvas.buffer_rgba()).copy()
    rows = view.layers.view_rows()
    if rows is None:
        return rgba
    ratio = view.canvas.device_pixel_ratio or 1.0
    return rgba[int(rows[0] * ratio) : int(rows[1] * ratio)]


def _full_draw_rows(view) -> np.ndarray:
    """The same state drawn anew, as the window draws a page it holds no picture of: its
    shown pixels."""
    view.layers.release()
    view.canvas.draw()
    return _shown_rows(view)


def _plain_draw_rows(view) -> np.ndarray:
    """The same state drawn by matplotlib's own full draw (no layers): its shown pixels."""
    view.layers.enabled = False
    try:
        view.layers.mark()
        view.canvas.draw()
        return _shown_rows(view)
    finally:
        view.layers.enabled = True


def _assert_same_pixels(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape
    differ = np.argwhere((a != b).any(axis=2))
    assert len(differ) == 0, f"{len(differ)} pixels differ, first at {differ[:5].tolist()}"


def _assert_near_pixels(a: np.ndarray, b: np.ndarray, share: float = 0.005) -> None:
    """Alike but for a few antialiased pixels (at most `share` of them)."""
    assert a.shape == b.shape
    differ = int((a != b).any(axis=2).sum())
    assert differ <= share * a.shape[0] * a.shape[1], f"{differ} pixels differ"


@pytest.mark.parametrize("name", ["training", "system", "timing", "custom", "all"])
def test_a_blitted_frame_is_the_pixels_of_a_full_draw(window, loaded, name):
    show(window, loaded, name)
    view = window.page_view()
    assert view.page.axes and view.layers.background is not None
    full, blits, patches = view.layers.full_draws, view.layers.blits, view.layers.patches
    poll(window, loaded, np.arange(N, N + 3))
    assert (view.layers.full_draws, view.layers.blits) == (full, blits + 1)
    # Drawn only where the live series changed (resplot/ui/reach.py); the step-time stacks
    # too (their polygons kept and set again: resplot/draw/composites.py).
    assert view.layers.patches == patches + 1
    blitted = _shown_rows(view)
    full, recuts = view.layers.full_draws, view.layers.recuts
    window.highlight(window.cache.runs()[0].ref)  # the others faded: their cuts made again
    window.redraw_now()
    QApplication.processEvents()
    assert view.layers.full_draws == full
    assert view.layers.recuts == recuts + (1 if view.layers.tails.cuts else 0)
    highlighted = _shown_rows(view)
    _assert_same_pixels(highlighted, _full_draw_rows(view))
    window.highlight(None)
    window.redraw_now()
    QApplication.processEvents()
    _assert_same_pixels(_shown_rows(view), blitted)  # back as it was, cut again
    # The page as matplotlib draws every series whole, but where live series' bodies meet
    # their tails (resplot/ui/tails.py).
    _assert_near_pixels(_full_draw_rows(view), _plain_draw_rows(view))


def test_charts_scrolled_in_are_the_pixels_of_the_next_full_draw(window, loaded):
    """The flake's draw order made certain: the charts a scroll brings in are drawn for the
    first time (their legends too), and the full draw that follows draws them alike a second
    time. A legend drawn directly at the one and from its bitmap at the other differed by a
    level where its translucent frame lies over lines (resplot/draw/bitmap_draw.py); under
    load, late tiles shifted which draw was a legend's first."""
    show(window, loaded, "all")
    view = window.page_view()
    bar = view.scroll.verticalScrollBar()
    full = view.layers.full_draws
    bar.setValue(bar.maximum())
    drawn(window)
    assert view.layers.full_draws == full + 1
    scrolled = _shown_rows(view)
    _assert_same_pixels(scrolled, _full_draw_rows(view))


def test_charts_out_of_view_are_drawn_when_they_scroll_in(window, loaded):
    show(window, loaded, "all")
    view = window.page_view()
    bar = view.scroll.verticalScrollBar()
    assert bar.maximum() > 0  # the page is taller than the window: it scrolls
    charts = len(view.page.axes)
    assert view.layers.drawn and len(view.layers.drawn) < charts  # the last ones left out
    full = view.layers.full_draws
    bar.setValue(bar.maximum())
    drawn(window)
    assert view.layers.full_draws == full + 1
    assert charts - 1 in view.layers.drawn and 0 not in view.layers.drawn


def _columns(page, charts) -> dict:
    """The x and y of every series line of these charts (what the charts would draw)."""
    return {
        (i, label): (line.get_xdata().copy(), line.get_ydata().copy())
        for i in charts
        for label, line in enumerate(t.line for t in page.tracks[i].values())
    }


def test_a_zoom_refreshes_the_charts_in_view_and_the_rest_when_they_come_in(window, loaded, qtbot):
    """In a user's view only the charts in view are refreshed; those out of view keep their
    series as they were (`behind`) and are left out of draws until a scroll brings them in:
    then refreshed, then drawn, to what a refresh of every chart gives."""
    show(window, loaded, "all")
    view, page = window.page_view(), window.page_view().page
    charts = [i for i, s in enumerate(page.specs) if s.kind != "section"]
    hidden = [i for i in charts if i not in view.layers.in_view()]
    shown = [i for i in charts if i in view.layers.in_view()]
    assert hidden and shown  # the page scrolls
    before = _columns(page, hidden)
    page.chart_axes()[0].set_xlim(1000, 1400)  # the toolbar's zoom
    show(window, loaded)
    assert page.behind & set(charts) == set(hidden)  # (and the section cards out of view)
    assert all(page.axes[i].get_xlim() == (1000, 1400) for i in shown)
    for i in shown:  # zoomed: nothing drawn past the range but the one point each side
        for t in page.tracks[i].values():
            x = np.asarray(t.line.get_xdata(), float)
            assert len(x) and np.sum(x < 1000) <= 1 and np.sum(x > 1400) <= 1
    after = _columns(page, hidden)
    assert all(np.array_equal(before[k][0], after[k][0]) for k in before)  # left as they were
    assert not set(view.layers.drawn) & set(hidden)
    bar = view.scroll.verticalScrollBar()
    bar.setValue(bar.maximum())
    came_in = [i for i in hidden if i in view.layers.in_view()]
    assert came_in
    # the refresh the scroll asks for (the window's next redraw), then its draw
    qtbot.waitUntil(lambda: set(came_in) <= set(view.layers.drawn), timeout=5000)
    assert not page.behind & set(came_in)
    scrolled = _columns(page, came_in)
    page.refresh(window.cache, window.state, window.plotted_refs(), every=True)
    assert not page.behind
    whole = _columns(page, came_in)
    for k in whole:
        assert np.array_equal(scrolled[k][0], whole[k][0])
        assert np.array_equal(scrolled[k][1], whole[k][1], equal_nan=True)


def test_a_saved_page_draws_the_charts_out_of_a_zoomed_view_refreshed(window, loaded, tmp_path):
    show(window, loaded, "all")
    page = window.page_view().page
    page.chart_axes()[0].set_xlim(1000, 1400)
    show(window, loaded)
    assert page.behind
    window.export_chart(tmp_path / "page.png")
    assert not page.behind
    for i, spec in enumerate(page.specs):
        for t in page.tracks[i].values() if spec.kind == "line" else []:
            x = np.asarray(t.line.get_xdata(), float)
            assert np.sum(x < 1000) <= 1 and np.sum(x > 1400) <= 1, spec.title


def test_following_the_data_refreshes_every_chart(window, loaded):
    show(window, loaded, "all")
    page = window.page_view().page
    poll(window, loaded, np.arange(N, N + 3))
    assert page.follow and not page.behind


def test_the_hover_line_stays_in_a_blitted_frame_and_its_pixels_follow_it(window, loaded):
    """The page's blit (series over the saved axes) and the hover line's strips meet in one
    frame: a poll under a shown line keeps the line, and moving it afterwards leaves no trace."""
    view = window.page_view()
    ax = view.page.axes[0]
    lo, hi = ax.get_xlim()
    cross = view.crosshair
    x0 = lo + 0.4 * (hi - lo)
    cross.show_at(0, x0)
    QApplication.processEvents()
    px = round(float(ax.transData.transform((x0, 0))[0]))
    height = view.canvas.figure.bbox.height
    row = int(height - (ax.bbox.y0 + ax.bbox.y1) / 2)  # the chart's middle, in buffer rows

    def column(x: int) -> np.ndarray:
        rgba = np.asarray(view.canvas.buffer_rgba())
        return rgba[row - 20 : row + 20, x - 1 : x + 2].copy()

    with_line = column(px)
    blits = view.layers.blits
    poll(window, loaded, np.arange(N, N + 3))
    assert view.layers.blits == blits + 1  # drawn over the saved axes, not in full
    assert (column(px) == with_line).all()  # the line is still there, drawn into the frame
    cross.hide()
    QApplication.processEvents()
    after = column(px)
    view.layers.enabled = False
    try:
        view.layers.mark()
        view.canvas.draw()  # the same state drawn in full, no line
    finally:
        view.layers.enabled = True
    bare = column(px)
    assert (with_line != bare).any()  # the line was there to keep
    assert (after == bare).all()  # hiding put back exactly the page's pixels


@pytest.fixture
def mixed(qtbot, store_path, tmp_path):
    """Two runs that finished and one streaming in, on the Training page (smoothed)."""
    yield from _mixed(qtbot, store_path, tmp_path, _points)


TOKENS_PER_STEP = 4096.0  # what mixed_tokens' runs see a step


def tokens_at(steps) -> list[tuple[int, float]]:
    """mixed_tokens' train/tokens points at `steps`: the tokens seen by the end of each."""
    return [(int(s), TOKENS_PER_STEP * (s + 1)) for s in steps]


def _points_with_tokens(i: int) -> dict:
    return _points(i) | {"train/tokens": tokens_at(range(N))}


@pytest.fixture
def mixed_tokens(qtbot, store_path, tmp_path):
    """mixed, whose runs also log the tokens they have seen."""
    yield from _mixed(qtbot, store_path, tmp_path, _points_with_tokens)


def _mixed(qtbot, store_path, tmp_path, points):
    engine = new_store(store_path)
    for i, status in enumerate(["finished", "finished", "running"]):
        make_run(
            engine,
            name=f"lr-{i}e-4",
            status=status,
            created_at=BASE_TIME + i,
            heartbeat_at=time.time() + 1e6 if status == "running" else None,
            points=points(i),
        )
    engine.dispose()
    with Loaded([parse_spec(str(store_path))]) as source:
        source.path = store_path
        win = MainWindow(source.cache, settings_mod.Settings(), tmp_path / "settings.json")
        qtbot.addWidget(win)
        win.resize(1280, 800)
        win.show()
        win.set_custom_keys(["train/*"])
        win.set_smoothing(0.6)
        win.on_runs_changed()
        show(win, source)
        yield win, source
        win.close()


def _run(win, name: str):
    return next(run for run in win.cache.runs() if run.name == name)


def _feed(
    win, loaded, name: str, steps: np.ndarray, last: bool = False, values: dict | None = None
) -> None:
    """Points for every series of one run (2.5, or with `last` each series' last value
    again; `values` for those keys), read by the headless poll, then the redraw."""
    summaries = win.cache.summaries(_run(win, name).ref)
    values = {
        key: metric_stats(summary.agg)[0] if last else 2.5 for key, summary in summaries.items()
    } | (values or {})
    write_points(loaded, {name: {key: [(int(s), values[key]) for s in steps] for key in summaries}})
    loaded.fetch()
    win.redraw_now()
    drawn(win)


@pytest.mark.parametrize("where", [0.3, 0.97])
def test_a_poll_under_the_hover_line_is_the_frame_a_full_draw_makes(window, loaded, where):
    """The hover line lies in the canvas's buffer: a poll drawing only where the series
    changed takes it out first and draws it again after, whether it crosses those boxes (near
    the live end) or not."""
    show(window, loaded, "training")
    view = window.page_view()
    lo, hi = view.page.axes[0].get_xlim()
    view.crosshair.show_at(0, lo + where * (hi - lo))
    QApplication.processEvents()
    patches = view.layers.patches
    poll(window, loaded, np.arange(N, N + 3))
    assert view.layers.patches == patches + 1
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_after_a_drag_preview_a_poll_draws_the_whole_live_tier(window, loaded):
    """A drag's preview draws a moved picture into the canvas's buffer: the next blit cannot
    draw only where the series changed."""
    show(window, loaded, "training")
    view = window.page_view()
    assert view.layers.intact
    for told in view.drag.on_preview:
        told()
    assert not view.layers.intact
    patches, blits = view.layers.patches, view.layers.blits
    poll(window, loaded, np.arange(N, N + 3))
    assert (view.layers.patches, view.layers.blits) == (patches, blits + 1)
    assert view.layers.intact
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_legends_new_value_is_drawn_by_the_poll_that_brings_it(window, loaded):
    """A legend's text changing tells the legend nothing (matplotlib's stale flag stays with
    the text): a blit drawing only where something changed draws the legend too, wherever it
    lies (here nothing else changed)."""
    show(window, loaded, "training")
    view = window.page_view()
    legend = view.page.axes[0].get_legend()
    assert legend is not None and legend.get_visible()
    text = legend.get_texts()[0]
    name, sep, value = text.get_text().rpartition("  ")
    assert sep and value
    with quietly(view.page.axes[0]):
        text.set_text(f"{name}{sep}{float(value) + 0.002:.4g}")  # what AxesLegend.update does
    patches = view.layers.patches
    assert view.layers.present()  # (no refresh: it would set the value back)
    assert view.layers.patches == patches + 1
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_followed_y_range_follows_the_data_past_its_headroom_each_time(window, loaded):
    """The y range moves out past the data each time a live series leaves it, not only the
    first: setting the kept limits turned matplotlib's autoscaling off, and from then on the
    page fitted the limits it already had (the line went on off the top of its chart)."""
    page = window.current_page()
    key = "train/tokens_per_s"
    i = next(i for i, ts in enumerate(page.tracks) if any(it.key == key for it in ts))
    ax = page.axes[i]
    step = N
    for _ in range(3):
        top = ax.get_ylim()[1]
        poll(window, loaded, np.arange(step, step + 5), bumps={key: 2 * top})
        step += 5
        highest = max(
            float(np.nanmax(t.view.values)) for t in page.tracks[i].values() if t.view is not None
        )
        assert highest > 2 * top  # the new points are past the range shown before
        lo, hi = ax.get_ylim()
        assert hi >= highest and lo < highest, (ax.get_ylim(), highest)
