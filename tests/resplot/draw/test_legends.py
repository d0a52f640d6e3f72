"""Every chart names its runs at any run count: the run strip above the charts lists all 20
runs of a sweep in the window and in `resplot snapshot`, and small charts keep their own
legend with each series' latest value."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from resplot.cli import main
from resplot.data.state import ViewState
from resplot.draw.charts import render
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window

NAMES = [f"sweep-lr{i:02d}" for i in range(20)]


@pytest.fixture
def sweep(tmp_path):
    path = tmp_path / "sweep20.db"
    engine = new_store(path)
    for i, name in enumerate(NAMES):
        steps = range(0, 500, 5)
        make_run(
            engine,
            name=name,
            created_at=BASE_TIME + i,
            points={
                "train/loss": [(s, 3.0 + 0.05 * i + np.exp(-s / 100)) for s in steps],
                "valid/loss": [(s, 3.1 + 0.05 * i) for s in steps[::20]],
            },
        )
    engine.dispose()
    return path


def _strip_labels(page) -> list[str]:
    return [t.get_text() for t in page.strip.legend.get_texts()]


def _strip_above_the_charts(page) -> None:
    page.figure.canvas.draw()
    box = page.strip.legend.get_window_extent()
    assert box.y0 >= max(ax.title.get_window_extent().y1 for ax in page.axes) - 1
    assert box.x1 <= page.figure.bbox.x1 + 1  # all of it inside the figure


@pytest.mark.slow
def test_a_snapshot_of_twenty_runs_names_every_run(sweep, tmp_path, capsys):
    with Loaded([parse_spec(str(sweep))]) as loaded:
        refs = [r.ref for r in loaded.cache.runs()]
        page = render(loaded.cache, ViewState(), refs, fetch=loaded.fetch)
        assert sorted(_strip_labels(page)) == NAMES
        _strip_above_the_charts(page)
    out = tmp_path / "sweep.png"
    assert main(["snapshot", str(sweep), "-o", str(out)]) == 0
    assert "20 runs" in capsys.readouterr().err


@pytest.mark.integration
def test_the_window_names_twenty_runs_and_small_charts_show_latest_values(sweep, qtbot, tmp_path):
    win = open_window(qtbot, [sweep], tmp_path / "settings.json", runs=20, size=(1280, 800))
    page = win.current_page()
    strip = win.pages["training"].strip  # the window draws the strip in Qt, above the canvas
    text = strip.text().replace("\u2011", "-")  # names are kept whole with non-breaking hyphens
    assert strip.isVisible() and all(name in text for name in NAMES)
    for ref in win.state.ticked:  # in each run's colour
        assert win.state.look(ref).color in strip.text()
    # The loss chart has 40 series: no legend of its own to cover it; the strip names them.
    assert page.axes[0].get_legend() is None
    win.table.tick_visible("none")
    ref = next(r.ref for r in win.cache.runs() if r.name == "sweep-lr03")
    win.tick(ref, True)
    win.redraw_now()
    texts = [t.get_text() for t in page.axes[0].get_legend().get_texts()]
    last = 3.0 + 0.05 * 3 + np.exp(-495 / 100)
    assert texts[0] == f"sweep-lr03 train  {last:.4g}"
    win.close()


# ---- a chart legend drawn from its bitmap ---------------------------------------------------


def _legend_figure(bitmap: bool, loc: str = "upper right", first: str = "train/loss  2.5"):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from resplot.draw.legend_bitmap import add_legend

    figure = Figure(figsize=(6, 4), dpi=100)
    canvas = FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    ax.plot(np.arange(100), np.sin(np.arange(100) / 9))
    handles = [Line2D([], [], color=f"C{i}", marker="o", markersize=3.5) for i in range(8)]
    labels = [first] + [f"run {i}  {i * 1.5}" for i in range(7)]
    kw = {"loc": loc, "fontsize": 7, "framealpha": 0.6}
    legend = add_legend(ax, handles, labels, **kw) if bitmap else ax.legend(handles, labels, **kw)
    return canvas, ax, legend


def _pixels(canvas) -> np.ndarray:
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).astype(int)


@pytest.mark.parametrize("loc", ["upper right", "lower left"])
def test_a_legend_drawn_from_its_bitmap_looks_like_matplotlibs_own(loc):
    plain, _ax, _legend = _legend_figure(False, loc)
    canvas, _ax, legend = _legend_figure(True, loc)
    want = _pixels(plain)
    for _ in range(3):  # drawn afresh once, then from the bitmap
        assert np.abs(_pixels(canvas) - want).max() <= 1  # rounding in the blend, no more
    assert legend.renders == 1


def test_a_legend_over_the_series_is_the_same_pixels_at_every_draw_its_first_included():
    """A legend drawn directly at its first draw and from its bitmap after gave frames that
    differ by a level where its translucent frame lies over lines (a blitted frame against a
    full draw in tests/resplot/ui/test_layers.py, flaky under load): each draw is from a bitmap
    now."""
    canvas, ax, legend = _legend_figure(True)
    ax.set_facecolor("#f0f0ff")
    x = np.arange(100)
    for k in range(8):
        ax.plot(x, np.sin(x / 7.0 + k) * (1 + k / 3), lw=1.5)
    first = _pixels(canvas)
    assert (_pixels(canvas) == first).all()
    legend.get_texts()[0].set_text("train/loss  2.4")  # a live value: a new text each poll
    new_value = _pixels(canvas)
    assert (new_value != first).any()
    assert (_pixels(canvas) == new_value).all()
    assert legend.renders == 1  # the same box: its frame's bitmap, the new text over it


@pytest.mark.slow
def test_a_bitmap_legend_is_drawn_afresh_for_new_text_or_a_new_corner_not_on_a_zoom():
    canvas, ax, legend = _legend_figure(True)
    _pixels(canvas)
    ax.set_xlim(20, 40)  # a zoom: the legend shows the same
    _pixels(canvas)
    assert legend.renders == 1
    before = _pixels(canvas)
    legend.get_texts()[0].set_text("train/loss  2.4")  # a new latest value
    new_value = _pixels(canvas)
    assert np.abs(new_value - before).max() > 100  # the new digit is drawn
    plain, plain_ax, _plain_legend = _legend_figure(False, first="train/loss  2.4")
    plain_ax.set_xlim(20, 40)
    # The same box (text metrics are whole pixels): the frame's bitmap, the text drawn over.
    assert legend.renders == 1 and np.abs(new_value - _pixels(plain)).max() <= 1
    assert (_pixels(canvas) == new_value).all() and legend.renders == 1
    legend.get_texts()[0].set_text("train/loss  2.4375")  # a longer value: a wider box
    wider = _pixels(canvas)
    plain_ax.get_legend().get_texts()[0].set_text("train/loss  2.4375")
    assert legend.renders == 2 and np.abs(wider - _pixels(plain)).max() <= 1
    legend.set_loc("lower left")  # re-placed where the data is not
    moved = _pixels(canvas)
    plain_ax.get_legend().set_loc("lower left")
    assert np.abs(moved - _pixels(plain)).max() <= 1
    assert (_pixels(canvas) == moved).all() and legend.renders == 3
    legend.set_loc("upper right")  # and back: that corner's bitmap again
    back = _pixels(canvas)
    plain_ax.get_legend().set_loc("upper right")
    assert legend.renders == 3 and np.abs(back - _pixels(plain)).max() <= 1


def test_a_new_value_draws_only_the_values_glyphs_anew():
    """On the window's renderer every string is kept as a stamp: a poll's new latest value is
    one new (short) stamp, the series' name and the frame are drawn from what was kept."""
    from resplot.draw import text_stamps
    from resplot.draw.text_stamps import StampRenderer

    text_stamps.forget()  # "2.7" may be kept from an earlier test's window
    canvas, _ax, legend = _legend_figure(True)
    canvas.draw()
    renderer = StampRenderer(int(canvas.figure.bbox.width), int(canvas.figure.bbox.height), 100)
    legend.draw(renderer)
    made, renders = text_stamps.made[0], legend.renders
    legend.get_texts()[0].set_text("train/loss  2.7")
    legend.draw(renderer)
    # one stamp made ("2.7" alone: "train/loss" was kept), the frame's bitmap reused
    assert text_stamps.made[0] == made + 1 and legend.renders == renders


def test_a_legend_asked_where_it_is_then_drawn_is_laid_out_once_and_quietly(monkeypatch):
    """A live poll asks where a chart's legend is (its reach: resplot/ui/reach.py), then draws
    it. A new value of another shape laid the legend out at the ask and again at the draw
    (~1.7 ms each, most polls of a followed run: 2.31, 2.3, 2.297), and the ask, with its texts
    set to their shapes and back, marked the figure for a full draw."""
    from matplotlib.legend import Legend

    canvas, _ax, legend = _legend_figure(True)
    canvas.draw()
    renderer = canvas.get_renderer()
    laid_out = []
    plain_extent = Legend.get_window_extent

    def counted(self, renderer=None):
        laid_out.append(self)
        return plain_extent(self, renderer)

    monkeypatch.setattr(Legend, "get_window_extent", counted)
    legend.get_texts()[0].set_text("train/loss  2.4375")  # a value of another shape
    canvas.figure.stale = False
    box = legend.get_window_extent(renderer)
    assert len(laid_out) == 1 and not canvas.figure.stale
    legend.draw(renderer)
    assert len(laid_out) == 1  # the draw takes the box the ask laid out
    legend.get_texts()[0].set_text("train/loss  2.4376")  # the same shape: the same box
    assert legend.get_window_extent(renderer).bounds == box.bounds
    legend.draw(renderer)
    assert len(laid_out) == 1
    monkeypatch.undo()
    plain, _plain_ax, plain_legend = _legend_figure(False, first="train/loss  2.4376")
    plain.draw()
    assert np.allclose(plain_legend.get_window_extent(plain.get_renderer()).bounds, box.bounds)


def test_a_chart_laid_out_again_places_its_legend_for_its_new_size_at_once(tmp_path):
    """The corner with least data depends on the legend's share of the chart. A page whose
    width changed (the window fits its canvas; a scroll bar comes) placed its legends for the
    old width until LEGEND_REPLACE_S had passed and a refresh came: finished runs bring none,
    so a legend stayed over the data, and the same page drawn again differed (flaky in
    tests/resplot/ui/test_page_release.py). Three runs: high over the first half, low at the
    start, middling at the end: at 210 px the legend's width covers the high line in the
    upper right and goes lower right; at 510 px the upper right is free."""
    path = tmp_path / "three.db"
    engine = new_store(path)
    for name, steps, value in (
        ("early-low", range(0, 100), 1.0),
        ("late-mid", range(900, 1000), 1.5),
        ("first-half-high", range(0, 500), 2.0),
    ):
        make_run(engine, name=name, points={"train/gnorm": [(s, value) for s in steps]})
    engine.dispose()
    loaded = Loaded([parse_spec(str(path))])
    try:
        cache = loaded.cache
        refs = [run.ref for run in cache.runs()]

        def drawn(size) -> tuple:
            state = ViewState()
            state.smoothing, state.page = 0.0, "all"
            page = render(cache, state, refs, size=size, fetch=loaded.fetch)
            return page, state

        narrow, state = drawn((3, 6))
        (ax,) = [a for a in narrow.axes if a.get_legend() is not None]
        assert ax.get_legend()._loc in (4, "lower right")  # as the test's data is made
        assert narrow.follow
        narrow.figure.set_size_inches(6, 6)  # laid out again, a moment later
        narrow.refresh(cache, state, refs)
        wide, _state = drawn((6, 6))
        (wide_ax,) = [a for a in wide.axes if a.get_legend() is not None]
        assert wide_ax.get_legend()._loc in (1, "upper right")
        assert ax.get_legend()._loc == wide_ax.get_legend()._loc
    finally:
        loaded.close()


def test_a_legend_leaves_the_charts_note_its_corner(tmp_path):
    """A chart's note ("smoothed raw points") sits in its lower right corner, and the legend's
    corner was chosen by data alone: a throughput high everywhere but its first steps put the
    legend there, over the note (the demo's snapshot)."""
    path = tmp_path / "ramp.db"
    engine = new_store(path)
    points = [(s, 1.0 if s < 50 else 3.0 + 0.05 * np.sin(s / 7)) for s in range(1000)]
    make_run(engine, name="ramp", points={"train/loss": points})
    engine.dispose()
    with Loaded([parse_spec(str(path))]) as loaded:
        refs = [run.ref for run in loaded.cache.runs()]
        state = ViewState()
        state.page = "all"
        page = render(loaded.cache, state, refs, size=(6, 4), fetch=loaded.fetch)
    (i,) = [k for k, a in enumerate(page.axes) if a.get_legend() is not None]
    note = page._notes[i]
    assert "smoothed" in note.get_text()
    legend = page.axes[i].get_legend()
    canvas = FigureCanvasAgg(page.figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    assert not legend.get_window_extent(renderer).overlaps(note.get_window_extent(renderer))
    # With nothing to say the corner is the data's own choice again.
    state.smoothing = 0.0
    page.refresh(loaded.cache, state, refs)
    assert not note.get_text()
    assert legend._loc in (4, "lower right")


def test_a_bitmap_legend_exports_to_svg_as_text():
    import io

    import matplotlib

    canvas, _ax, legend = _legend_figure(True, first="zebra-loss")
    out = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        canvas.figure.savefig(out, format="svg")
    assert "zebra-loss" in out.getvalue() and legend.renders == 0
